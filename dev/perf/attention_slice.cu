/*
attention_slice.cu: the attention launchers of llmc/attention.cuh (forward, then backward) for one
batch row and one head at the full sequence length, built for the CPU emulator by
dev/perf/step_counts.py. With EMU_TRACE=1 the emulator prints, per kernel, the tensor-core
instructions it ran (mma.sync and their FLOPs, ldmatrix and cp.async and their bytes), so the
attention's counts at the real T come from the code itself. Every (b, h) of a batch runs the
same blocks on its own slice (grid (T/64, NH, B)), so the counts of the step are these times B x NH
exactly: perf_model.py multiplies them.

    attention_slice [-ak 0|1] T [HS [B NH]]
                                      (HS = 64: GPT-2's head size; B = NH = 1: one slice; more: the
                                      test of the scaling, dev/perf/test_perf_model.py)

-ak picks the attention kernels as the trainer's -ak does (train_gpt2.cu): 0 (the default, the
trainer's default) the mma.sync kernels; 1 the sm_90a wgmma/TMA kernels of llmc/attention_sm90.cuh
(attention_sm90_mode -1), refused where they cannot run (a tree without them, a device or build
without sm_90a), never silently replaced by the mma.sync kernels. So the model prices the kernels
the trainer it predicts launches (perf_model.py --attention).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../llmc/cuda_common.cuh"
#include "../../llmc/attention.cuh"

// n floatX of small pseudo-random values (the counts do not depend on them; they keep exp finite)
static floatX* device_values(size_t n, unsigned seed) {
    floatX* host = (floatX*)mallocCheck(n * sizeof(floatX));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        host[i] = from_float(((seed >> 8) / 16777216.0f - 0.5f) * 0.5f);
    }
    floatX* dev = NULL;
    cudaCheck(cudaMalloc(&dev, n * sizeof(floatX)));
    cudaCheck(cudaMemcpy(dev, host, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(host);
    return dev;
}

int main(int argc, char** argv) {
    int ak = 0;
    if (argc > 1 && strcmp(argv[1], "-ak") == 0) {
        if (argc < 3 || (strcmp(argv[2], "0") != 0 && strcmp(argv[2], "1") != 0)) { fail("flag -ak: expected 0 or 1"); }
        ak = argv[2][0] - '0';
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
    }
    if (argc != 2 && argc != 3 && argc != 5) { fail("usage: %s [-ak 0|1] T [HS [B NH]]", argv[0]); }
    int T = atoi(argv[1]), HS = argc > 2 ? atoi(argv[2]) : 64;
    int B = argc > 3 ? atoi(argv[3]) : 1, NH = argc > 3 ? atoi(argv[4]) : 1, C = NH * HS;
    if (T < 1 || HS < 1 || B < 1 || NH < 1) { fail("T, HS, B and NH must be positive"); }
#if defined(ENABLE_BF16) && __has_include("../../llmc/attention_sm90.cuh")
    if (ak == 1) {
        if (HS != ATT90_HS) { fail("flag -ak 1: the sm_90a attention kernels need head size %d, got %d", ATT90_HS, HS); }
        if (!attention_sm90_available()) { fail("flag -ak 1: the sm_90a attention kernels cannot run on this device/build"); }
    }
    attention_sm90_mode = ak ? -1 : 0;
#else
    if (ak == 1) { fail("flag -ak 1: this tree has no sm_90a attention kernels (llmc/attention_sm90.cuh) in this build"); }
#endif
    cudaStream_t s;
    cudaCheck(cudaStreamCreate(&s));
    size_t btc = (size_t)B * T * C;
    floatX* qkv = device_values(3 * btc, 1);
    floatX* dout = device_values(btc, 2);
    floatX *out = NULL, *dqkv = NULL;
    float *lse = NULL, *scratch = NULL;
    cudaCheck(cudaMalloc(&out, btc * sizeof(floatX)));
    cudaCheck(cudaMalloc(&dqkv, 3 * btc * sizeof(floatX)));
    cudaCheck(cudaMalloc(&lse, (size_t)B * NH * T * sizeof(float)));
#if defined(ATTENTION_HAS_SCRATCH_FLOATS) // the sm_90a backward's dQ partials too (branch attbwd)
    cudaCheck(cudaMalloc(&scratch, attention_backward_scratch_floats(B, T, C, NH) * sizeof(float)));
#else
    cudaCheck(cudaMalloc(&scratch, (size_t)B * NH * T * sizeof(float)));
#endif
    attention_forward(out, lse, qkv, B, T, C, NH, s);
#if defined(ATTENTION_HAS_DBIAS) // the qkv bias gradient from the attention backward (issue 30)
    floatX* dbias = device_values(3 * (size_t)C, 3);
    attention_backward(dqkv, dbias, scratch, dout, qkv, out, lse, B, T, C, NH, s);
#else
    attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH, s);
#endif
    cudaCheck(cudaStreamSynchronize(s));
    printf("attention slice: B %d, NH %d, T %d, hs %d, -ak %d\n", B, NH, T, HS, ak);
    return 0;
}
