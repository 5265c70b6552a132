/*
test_kernels.cu: every CUDA kernel of gpt2-zero (the llmc .cuh headers) against its CPU twin in train_gpt2.c,
on a GPU, and a benchmark of each kernel at the GPT-2 124M training shape against its floor.

    make dev/cuda/test_kernels dev/cuda/test_kernels_fp32      (PRECISION's build, and the fp32 one)
    ./dev/cuda/test_kernels                          correctness and determinism
    ./dev/cuda/test_kernels --bench [-b 8] [-t 1024] times, bytes, FLOPs and floors (a markdown table)

1. Correctness. Random inputs from a fixed seed, rounded to floatX on the host first, so the GPU
   and the CPU read the very same numbers. The CUDA launcher runs on the GPU, train_gpt2.c's kernel
   on the host, and each output is compared element by element:
       |got - ref| <= atol * rms(ref) + rtol * |ref|
   (rms: summation-order errors scale with the tensor, not with the element). The tolerances are
   in one table below, each with its reason: fp32-tight in the FP32 build, bf16-level in the BF16
   build. Where the CUDA kernel WRITES a gradient that the CPU twin adds to (matmul dinp, gelu
   dinp, attention dqkv), the GPU buffer starts as NaN and the CPU one as 0, so an element the
   kernel skips fails. Where both add (layernorm, encoder, matmul dweight/dbias), both start from
   the same nonzero gradients.
2. Determinism. Every backward kernel, the classifier and the global norm run a second time from
   the same inputs and starting gradients and must give the same bits.
   One line per check, OK or FAIL with its worst element; the last line is "N passed, M failed".
   Exit status: 0 all passed, 1 a check failed (or a CUDA call did), 2 no GPU (nothing tested).
3. --bench: the median of 20 timed runs (cudaEvents) after 3 warm-ups per kernel, with the bytes
   it must move at least, the FLOPs where they matter, and the floor
       max(bytes / peak bandwidth, FLOPs / peak FLOP/s)
   from the device's datasheet (or, for a device not in the table, a measured copy bandwidth).

A trap this file steps around: train_gpt2.c's kernels and the CUDA launchers share their names
(C++ overloads, told apart by the parameter types). In the FP32 build floatX is float, and
layernorm_forward / matmul_forward then differ from their CPU twins only in the last parameter,
cudaStream_t against int. Every launch passes g_stream, a cudaStream_t variable, never a literal
0: C++ would take a 0 as the CPU version's int and run the host code on device pointers.
*/
#include <math.h>
#include "../test/cpu_reference.h"
#include "../../llmc/cuda_common.cuh"
#include "../../llmc/matmul.cuh"
#include "../../llmc/encoder.cuh"
#include "../../llmc/layernorm.cuh"
#include "../../llmc/attention.cuh"
#include "../../llmc/gelu.cuh"
#include "../../llmc/fused_classifier.cuh"
#include "../../llmc/adamw.cuh"
#include "../../llmc/global_norm.cuh"

// every launch goes to this stream (and, being a cudaStream_t, it selects the CUDA overloads)
static cudaStream_t g_stream;

// ----------------------------------------------------------------------------
// tolerances: |got - ref| <= atol * rms(ref) + rtol * |ref|, per output

typedef struct {
    float atol; // times the rms of the reference tensor
    float rtol; // times |reference element|
} Tolerance;

#if defined(ENABLE_FP32)
// fp32 math on both sides from the same inputs: they differ only in summation order, the last ulp
// of expf/tanhf, and fma contraction, ~1e-7 relative per operation.
// Elementwise math and sums of up to ~1000 terms (layernorm rows and columns, attention rows,
// encoder buckets, gelu's tanhf against the CPU's tanh via expf: ~1e-7 absolute).
static const Tolerance TOL_OUT = {1e-5f, 1e-5f};
// cuBLASLt's dot products of up to K = 50304 terms (the LM head's dinp) in other orders (tiles,
// split-k): the error grows like eps * sqrt(K), ~1.3e-5 of rms at K = 50304. Still ~1e4 below a bug.
static const Tolerance TOL_MATMUL = {1e-4f, 1e-5f};
// attention's backward recomputes s_ij and takes D_i = dout_i . out_i (the CPU: sum_j att * datt),
// and dP_ij - D_i cancels in part, over up to 200 keys
static const Tolerance TOL_ATT_BWD = {1e-4f, 1e-5f};
// dlogits = (p - onehot) dloss with p = exp(x - max) / sum: every element of a row carries that
// row's sum of V = 50257 exps, which the CPU (train_gpt2.c, an fp32 simd reduction of ~6,300 terms
// a lane) and the kernel (a tree) add in other orders: eps * sqrt(6300) ~ 5e-6 relative, more in a
// bad row. It was {1e-5, 1e-5}; measured 2026-11-28 on the emulator: 0.78 of it with one draw of
// the logits and 1.16 with the next (worst element 1.39e-5 off relative, the same kernel, after
// test_kernels' new matmul checks moved the random stream). 5e-5 relative: ~4x the worst seen,
// still ~1e4 below a wrong element (off by ~100%).
static const Tolerance TOL_DLOGITS = {1e-5f, 5e-5f};
// the fp32 params are the fp32 master itself
static const Tolerance TOL_ADAMW_PARAMS = {1e-6f, 1e-6f};
#else
// bf16 keeps 8 significant bits: a floatX output of fp32 math is rounded once (at times twice,
// e.g. a cuBLASLt epilogue) by at most 2^-8 = 0.39% of itself. 1% allows 2.5 roundings; a wrong
// index or formula errs by ~100% of rms.
static const Tolerance TOL_OUT = {1e-2f, 1e-2f};
static const Tolerance TOL_MATMUL = {1e-2f, 1e-2f};
// attention's dqkv: one rounding of the output, as TOL_OUT, because the reference reads the same
// bf16 out as the GPU for D_i = dout_i . out_i (attention_backward_out_correction). Measured on
// the emulator, all shapes: every element within 0.50 bf16 ulp (+ fp32 noise < 1e-5 rms) of a
// double-precision backward from the GPU's own out; at most 0.35 of this bound. Without the
// correction the rounding of out alone moves D_i by up to 2.6e-2 (rms 2.9e-3) and single dq, dk
// elements by up to 3.4% of rms(dqkv): 1.23x the former {2e-2, 1e-2} at T=200 hs=64, with a
// correct kernel.
static const Tolerance TOL_ATT_BWD = {1e-2f, 1e-2f};
// no atol: the rms of dlogits is set by the target column (rms ~ dloss / sqrt(Vp)), and 1% of it
// is more than a whole non-target element (p ~ 1/V), which would then go unchecked
static const Tolerance TOL_DLOGITS = {0.0f, 1e-2f};
// params = the fp32 master rounded to bf16; a master one fp32 ulp away from the CPU's (fma) can
// round to the neighbouring bf16 value: 2^-7 = 0.78%
static const Tolerance TOL_ADAMW_PARAMS = {0.0f, 1e-2f};
#endif
// outputs that are fp32 in both builds, computed in fp32 from the same floatX inputs: layernorm's
// mean and rstd, attention's lse, the classifier's losses (sums of up to 50257 exps: ~1e-6)
static const Tolerance TOL_FP32_STATS = {1e-5f, 1e-5f};
// AdamW's master, m, v: the CPU's expression word for word; fma contraction moves an ulp per step
static const Tolerance TOL_ADAMW_STATE = {1e-6f, 1e-6f};
// the same fp32 operation and the same round-to-nearest-even on both sides (the CPU's result is
// rounded to floatX before the comparison): the encoder's forward, the fused residual sum
static const Tolerance TOL_EXACT = {0.0f, 0.0f};
// both square exactly in double and sum in double; only the order differs, bounded by
// n * 2^-53 ~ 1.1e-10 at n = 1e6 per side. (An fp32 sum would need ~1e-6: that is a bug here.)
static const double GLOBAL_NORM_RTOL = 1e-9;

// ----------------------------------------------------------------------------
// results: one line per check

static int g_passed = 0, g_failed = 0;

static void report(int ok, const char* what, const char* label, const char* detail) {
    char name[192];
    snprintf(name, sizeof(name), "%s %s", what, label);
    printf("%-4s %-70s %s\n", ok ? "OK" : "FAIL", name, detail);
    fflush(stdout);
    if (ok) { g_passed++; } else { g_failed++; }
}

static double rms_of(const float* x, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) { sum += (double)x[i] * x[i]; }
    return n > 0 ? sqrt(sum / n) : 0.0;
}

// Element by element against tol (plus extra[i] where extra is not NULL: an allowance the
// reference derives per element, e.g. attention_bf16_flips); prints the largest error in units of
// rms(ref) and the worst element (the one nearest to or furthest past its bound), with both
// values. NaN always fails.
static void check_close_extra(const char* what, const char* tensor, const float* got, const float* ref, size_t n,
                              Tolerance tol, const double* extra) {
    double rms = rms_of(ref, n);
    size_t worst = 0, nans = 0, first_nan = 0;
    double worst_ratio = -1.0, max_err = 0.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)ref[i]);
        if (err != err) {
            if (nans == 0) { first_nan = i; }
            nans++;
            continue;
        }
        double allowed = tol.atol * rms + tol.rtol * fabs((double)ref[i]) + (extra != NULL ? extra[i] : 0.0);
        double ratio = err == 0.0 ? 0.0 : (allowed > 0.0 ? err / allowed : INFINITY);
        if (ratio > worst_ratio) { worst_ratio = ratio; worst = i; }
        if (err > max_err) { max_err = err; }
    }
    int ok = nans == 0 && worst_ratio <= 1.0;
    if (nans > 0) { worst = first_nan; }
    char nan_note[64] = "";
    if (nans > 0) { snprintf(nan_note, sizeof(nan_note), "%zu NaN, the first at [%zu]; ", nans, first_nan); }
    char detail[320];
    char flips[48] = "";
    if (extra != NULL && n > 0) { // the largest allowance, and on how many elements
        double most = 0.0;
        size_t some = 0;
        for (size_t i = 0; i < n; i++) { most = extra[i] > most ? extra[i] : most; some += extra[i] > 0.0; }
        snprintf(flips, sizeof(flips), " + flips <= %.2g rms on %.1f%%", rms > 0.0 ? most / rms : 0.0, 100.0 * some / n);
    }
    snprintf(detail, sizeof(detail), "%smax|err| %.2e rms (%.2e); worst [%zu] got %.8g ref %.8g, %.2f of bound "
             "(%g rms + %g |ref|%s, n %zu)", nan_note, rms > 0.0 ? max_err / rms : max_err, max_err, worst,
             n > 0 ? got[worst] : 0.0f, n > 0 ? ref[worst] : 0.0f, worst_ratio < 0.0 ? 0.0 : worst_ratio,
             tol.atol, tol.rtol, flips, n);
    report(ok, what, tensor, detail);
}

static void check_close(const char* what, const char* tensor, const float* got, const float* ref, size_t n,
                        Tolerance tol) {
    check_close_extra(what, tensor, got, ref, n, tol, NULL);
}

// the same bytes? label says what is compared ("dinp: same bits on a second run")
static void check_same_bits(const char* what, const char* label, const void* a, const void* b, size_t bytes) {
    const unsigned char* x = (const unsigned char*)a;
    const unsigned char* y = (const unsigned char*)b;
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < bytes; i++) {
        if (x[i] != y[i]) {
            if (differ == 0) { first = i; }
            differ++;
        }
    }
    char detail[128];
    if (differ == 0) { snprintf(detail, sizeof(detail), "(%zu bytes)", bytes); }
    else { snprintf(detail, sizeof(detail), "%zu of %zu bytes differ, the first at byte %zu", differ, bytes, first); }
    report(differ == 0, what, label, detail);
}

// |got - ref| <= rtol * |ref| for one number
static void check_scalar(const char* what, const char* label, double got, double ref, double rtol) {
    double rel = fabs(got - ref) / fabs(ref);
    char detail[160];
    snprintf(detail, sizeof(detail), "got %.17g ref %.17g, rel err %.2e (rtol %g)", got, ref, rel, rtol);
    report(rel <= rtol, what, label, detail); // NaN fails
}

// ----------------------------------------------------------------------------
// host data

// one stream of random numbers from a fixed seed: every run tests the same inputs
static Rng g_rng;

// every host array starts zeroed (a CPU twin that adds into it starts from 0)
static float* host_zeros(size_t n) { return (float*)callocCheck(n, sizeof(float)); }

static float* host_copy(const float* x, size_t n) {
    float* y = host_zeros(n);
    memcpy(y, x, n * sizeof(float));
    return y;
}

// x[i] = the nearest floatX (round-to-nearest-even), back as a float
static void round_to_floatX(float* x, size_t n) {
    for (size_t i = 0; i < n; i++) { x[i] = to_float(from_float(x[i])); }
}

// normal(mean, std) values that floatX holds exactly: the GPU and the CPU read the same numbers
static float* random_floatX(size_t n, float mean, float std) {
    float* x = host_zeros(n);
    for (size_t i = 0; i < n; i++) { x[i] = rng_normal(&g_rng, mean, std); }
    round_to_floatX(x, n);
    return x;
}

// plain fp32 normal values (the fp32 AdamW master)
static float* random_float(size_t n, float mean, float std) {
    float* x = host_zeros(n);
    for (size_t i = 0; i < n; i++) { x[i] = rng_normal(&g_rng, mean, std); }
    return x;
}

static int* random_tokens(size_t n, int range) {
    int* t = (int*)mallocCheck(n * sizeof(int));
    for (size_t i = 0; i < n; i++) { t[i] = (int)rng_below(&g_rng, (uint32_t)range); }
    return t;
}

// ----------------------------------------------------------------------------
// device data. Uploads and downloads first wait for g_stream, so they never overlap a launch.

static void* device_alloc(size_t bytes) { return cuda_malloc_counted(NULL, bytes, "a test tensor"); }
static void device_free(void* p) { cudaCheck(cudaFree(p)); }

static void upload_floatX(floatX* dev, const float* host, size_t n) {
    floatX* tmp = (floatX*)mallocCheck(n * sizeof(floatX));
    for (size_t i = 0; i < n; i++) { tmp[i] = from_float(host[i]); }
    cudaCheck(cudaStreamSynchronize(g_stream));
    cudaCheck(cudaMemcpy(dev, tmp, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(tmp);
}

static void upload_bytes(void* dev, const void* host, size_t bytes) {
    cudaCheck(cudaStreamSynchronize(g_stream));
    cudaCheck(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
}

static floatX* device_floatX(const float* host, size_t n) {
    floatX* d = (floatX*)device_alloc(n * sizeof(floatX));
    upload_floatX(d, host, n);
    return d;
}

static float* device_float(const float* host, size_t n) {
    float* d = (float*)device_alloc(n * sizeof(float));
    upload_bytes(d, host, n * sizeof(float));
    return d;
}

static int* device_ints(const int* host, size_t n) {
    int* d = (int*)device_alloc(n * sizeof(int));
    upload_bytes(d, host, n * sizeof(int));
    return d;
}

// all bits set: NaN in fp32 and in bf16, so an element a kernel should write but skips fails
static void fill_nan(void* dev, size_t bytes) {
    cudaCheck(cudaStreamSynchronize(g_stream));
    cudaCheck(cudaMemset(dev, 0xFF, bytes));
}

// a host copy of the device bytes, once g_stream has finished
static void* download_bytes(const void* dev, size_t bytes) {
    void* host = mallocCheck(bytes);
    cudaCheck(cudaStreamSynchronize(g_stream));
    cudaCheck(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
    return host;
}

static void* snapshot_floatX(const floatX* dev, size_t n) { return download_bytes(dev, n * sizeof(floatX)); }

// floatX values (a snapshot) as floats
static float* floats_of(const void* floatX_values, size_t n) {
    const floatX* x = (const floatX*)floatX_values;
    float* y = host_zeros(n);
    for (size_t i = 0; i < n; i++) { y[i] = to_float(x[i]); }
    return y;
}

static float* download_floatX(const floatX* dev, size_t n) {
    void* bits = snapshot_floatX(dev, n);
    float* x = floats_of(bits, n);
    free(bits);
    return x;
}

static float* download_float(const float* dev, size_t n) { return (float*)download_bytes(dev, n * sizeof(float)); }

// A gradient that ran twice: the first run against the CPU's, the second run's bits against the
// first's. bits[run] are floatX snapshots, freed here.
static void check_twice_extra(const char* what, const char* tensor, void* bits[2], const float* ref, size_t n,
                              Tolerance tol, const double* extra) {
    float* got = floats_of(bits[0], n);
    check_close_extra(what, tensor, got, ref, n, tol, extra);
    char label[64];
    snprintf(label, sizeof(label), "%s: same bits on a second run", tensor);
    check_same_bits(what, label, bits[0], bits[1], n * sizeof(floatX));
    free(got);
    free(bits[0]);
    free(bits[1]);
}

static void check_twice(const char* what, const char* tensor, void* bits[2], const float* ref, size_t n,
                        Tolerance tol) {
    check_twice_extra(what, tensor, bits, ref, n, tol, NULL);
}

// ----------------------------------------------------------------------------
// encoder: forward (exact) and backward (adds, deterministic buckets)

typedef struct {
    int B, T, C;
    int Vp, maxT;    // wte (Vp,C), wpe (maxT,C)
    int token_range; // tokens drawn from [0, token_range): a small range puts many positions on a token
    int skewed;      // 1: every other position holds token_range - 1 (one long bucket, taken first by
                     // encoder_backward_order, the highest token), the rest short buckets
} EncoderShape;

static const EncoderShape ENCODER_SHAPES[] = {
    {2, 64, 768, 50304, 1024, 50257, 0}, // GPT-2-like: tokens over the whole vocabulary
    {4, 64, 96, 128, 70, 8, 0},       // 8 tokens over 256 positions: long per-token sums
    {3, 37, 50, 1000, 40, 1, 0},      // one token everywhere (one bucket); C not a multiple of the pack:
                                      // unaligned rows, element by element
    {1, 1, 768, 64, 1, 64, 0},        // a single position
    {2, 32, 64, 50304, 1024, 50257, 0}, // the tiny model's C: 8 packs of bf16 per row (16 of fp32)
    {2, 5, 68, 200, 8, 100, 0},       // C = 68: a multiple of fp32's pack of 4, not of bf16's 8
    {8, 128, 40, 64, 128, 5, 0},      // buckets of ~200: each of the 8 slices loops 3-4 times over 8 positions
    {4, 64, 96, 128, 70, 50, 1},      // a long bucket (128 positions) before short ones: blocks not in token order
    {4, 128, 264, 64, 128, 40, 1},    // 256 positions on one token (a long block bucket), the other 256 over
                                      // 40 tokens (~6.4 each): block buckets of 9-20 and ~40 short (warp)
                                      // buckets, their last block of warps not full; 33 packs of bf16 per row
};

// dwte += dout scattered by token, in encoder_backward_dwte_kernel's own order: per bucket and
// column, 8 slice sums (slice s: the positions start + s, start + s + 8, ... in order, from 0),
// added in slice order, then added to dwte and rounded to floatX. Only adds, each one fp32
// rounding on both sides (no products a compiler could contract into them), so the kernel must
// match these bits exactly, whatever its thread or block order.
static void encoder_dwte_replay(float* dwte, const float* dout, const int* inp, int BT, int C, int Vp) {
    int* token = (int*)mallocCheck((size_t)BT * sizeof(int));
    int* start = (int*)mallocCheck(((size_t)BT + 1) * sizeof(int));
    int* pos = (int*)mallocCheck((size_t)BT * sizeof(int));
    int* cursor = (int*)mallocCheck((size_t)Vp * sizeof(int));
    int num_tokens = encoder_backward_buckets(token, start, pos, cursor, Vp, inp, BT);
    for (int k = 0; k < num_tokens; k++) {
        for (int c = 0; c < C; c++) {
            float sum = 0.0f;
            for (int sl = 0; sl < ENCODER_SLICES; sl++) {
                float slice_sum = 0.0f;
                for (int j = start[k] + sl; j < start[k + 1]; j += ENCODER_SLICES) {
                    slice_sum += dout[(size_t)pos[j] * C + c];
                }
                sum = sl == 0 ? slice_sum : sum + slice_sum;
            }
            float* w = &dwte[(size_t)token[k] * C + c];
            *w = to_float(from_float(*w + sum));
        }
    }
    free(token); free(start); free(pos); free(cursor);
}

static void check_encoder(const EncoderShape* s) {
    int B = s->B, T = s->T, C = s->C;
    size_t n_out = (size_t)B * T * C, n_wte = (size_t)s->Vp * C, n_wpe = (size_t)s->maxT * C;
    char fwd[128], bwd[128];
    snprintf(fwd, sizeof(fwd), "encoder_forward B=%d T=%d C=%d tokens<%d", B, T, C, s->token_range);
    snprintf(bwd, sizeof(bwd), "encoder_backward B=%d T=%d C=%d tokens<%d%s", B, T, C, s->token_range,
             s->skewed ? " skewed" : "");

    int* inp = random_tokens((size_t)B * T, s->token_range);
    for (int i = 0; s->skewed && i < B * T; i += 2) { inp[i] = s->token_range - 1; }
    float* wte = random_floatX(n_wte, 0.0f, 1.0f);
    float* wpe = random_floatX(n_wpe, 0.0f, 1.0f);
    float* out_ref = host_zeros(n_out);
    encoder_forward(out_ref, inp, wte, wpe, B, T, C);
    round_to_floatX(out_ref, n_out); // the GPU rounds the same fp32 sum

    int* d_inp = device_ints(inp, (size_t)B * T);
    floatX* d_wte = device_floatX(wte, n_wte);
    floatX* d_wpe = device_floatX(wpe, n_wpe);
    floatX* d_out = (floatX*)device_alloc(n_out * sizeof(floatX));
    fill_nan(d_out, n_out * sizeof(floatX));
    encoder_forward(d_out, d_inp, d_wte, d_wpe, B, T, C, g_stream);
    float* out = download_floatX(d_out, n_out);
    check_close(fwd, "out", out, out_ref, n_out, TOL_EXACT);

    // backward: both sides add into the same starting gradients; rows no token touches stay as they were
    float* dout = random_floatX(n_out, 0.0f, 1.0f);
    float* dwte0 = random_floatX(n_wte, 0.0f, 1.0f);
    float* dwpe0 = random_floatX(n_wpe, 0.0f, 1.0f);
    float* dwte_ref = host_copy(dwte0, n_wte);
    float* dwpe_ref = host_copy(dwpe0, n_wpe);
    encoder_backward(dwte_ref, dwpe_ref, dout, inp, B, T, C);

    floatX* d_dout = device_floatX(dout, n_out);
    floatX* d_dwte = (floatX*)device_alloc(n_wte * sizeof(floatX));
    floatX* d_dwpe = (floatX*)device_alloc(n_wpe * sizeof(floatX));
    EncoderBackwardScratch scratch;
    encoder_backward_scratch_init(&scratch, B, T);
    void* dwte_bits[2];
    void* dwpe_bits[2];
    for (int run = 0; run < 2; run++) {
        upload_floatX(d_dwte, dwte0, n_wte);
        upload_floatX(d_dwpe, dwpe0, n_wpe);
        encoder_backward(d_dwte, d_dwpe, d_dout, inp, B, T, C, &scratch, g_stream);
        dwte_bits[run] = snapshot_floatX(d_dwte, n_wte);
        dwpe_bits[run] = snapshot_floatX(d_dwpe, n_wpe);
    }
    float* dwte_replay = host_copy(dwte0, n_wte);
    encoder_dwte_replay(dwte_replay, dout, inp, B * T, C, s->Vp);
    float* dwte_got = floats_of(dwte_bits[0], n_wte);
    check_close(bwd, "dwte: the kernel's order replayed on the host", dwte_got, dwte_replay, n_wte, TOL_EXACT);
    free(dwte_got); free(dwte_replay);
    check_twice(bwd, "dwte", dwte_bits, dwte_ref, n_wte, TOL_OUT);
    check_twice(bwd, "dwpe", dwpe_bits, dwpe_ref, n_wpe, TOL_OUT);

    encoder_backward_scratch_free(&scratch);
    device_free(d_inp); device_free(d_wte); device_free(d_wpe); device_free(d_out);
    device_free(d_dout); device_free(d_dwte); device_free(d_dwpe);
    free(inp); free(wte); free(wpe); free(out_ref); free(out);
    free(dout); free(dwte0); free(dwpe0); free(dwte_ref); free(dwpe_ref);
}

// ----------------------------------------------------------------------------
// layernorm: forward, the fused residual + layernorm, backward (adds)

typedef struct { int N, C; } LayernormShape; // N rows (B*T) of C channels

static const LayernormShape LAYERNORM_SHAPES[] = {
    {128, 768},            // GPT-2-like: B*T = 2*64 rows
    {127, 96},             // an odd row count, a small C
    {1031, 768},           // backward chunks of 16 rows (LAYERNORM_BWD_ROWS), the last one of 7: a multiple of nothing
    {37, 50},              // C not a multiple of the pack (8 bf16, 4 fp32): unaligned rows, element by element
    {64, 68},              // C a multiple of fp32's pack, not of bf16's: a partial last pack
    {70, 64},              // the tiny model's C: 8 bf16 packs, so 24 of the block's 32 threads only join the sums
    {40, 1024},            // bf16: 4 packs per lane of a warp (the most the warp-per-chunk kernel takes); fp32: 8, a block per chunk
    {33, 512},             // bf16: 2 packs per lane; fp32: 4
    {5, LAYERNORM_MAX_C},  // the largest C: LAYERNORM_MAX_THREADS threads, one pack each
};

static const LayernormShape FUSED_RESIDUAL_SHAPES[] = {{128, 768}, {127, 96}, {37, 50}};

static void check_layernorm(const LayernormShape* s) {
    int N = s->N, C = s->C;
    size_t n = (size_t)N * C;
    char fwd[96], bwd[96];
    snprintf(fwd, sizeof(fwd), "layernorm_forward N=%d C=%d", N, C);
    snprintf(bwd, sizeof(bwd), "layernorm_backward N=%d C=%d", N, C);

    float* inp = random_floatX(n, 0.3f, 1.5f);
    float* weight = random_floatX(C, 1.0f, 0.2f);
    float* bias = random_floatX(C, 0.0f, 0.2f);
    float* out_ref = host_zeros(n);
    float* mean_ref = host_zeros(N);
    float* rstd_ref = host_zeros(N);
    layernorm_forward(out_ref, mean_ref, rstd_ref, inp, weight, bias, 1, N, C);

    floatX* d_inp = device_floatX(inp, n);
    floatX* d_weight = device_floatX(weight, C);
    floatX* d_bias = device_floatX(bias, C);
    floatX* d_out = (floatX*)device_alloc(n * sizeof(floatX));
    float* d_mean = (float*)device_alloc(N * sizeof(float));
    float* d_rstd = (float*)device_alloc(N * sizeof(float));
    fill_nan(d_out, n * sizeof(floatX));
    fill_nan(d_mean, N * sizeof(float));
    fill_nan(d_rstd, N * sizeof(float));
    layernorm_forward(d_out, d_mean, d_rstd, d_inp, d_weight, d_bias, N, C, g_stream);
    float* out = download_floatX(d_out, n);
    float* mean = download_float(d_mean, N);
    float* rstd = download_float(d_rstd, N);
    check_close(fwd, "out", out, out_ref, n, TOL_OUT);
    check_close(fwd, "mean", mean, mean_ref, N, TOL_FP32_STATS);
    check_close(fwd, "rstd", rstd, rstd_ref, N, TOL_FP32_STATS);

    // backward: both read the CPU's mean and rstd, and add into the same starting gradients
    float* dout = random_floatX(n, 0.0f, 1.0f);
    float* dinp0 = random_floatX(n, 0.0f, 1.0f);
    float* dweight0 = random_floatX(C, 0.0f, 1.0f);
    float* dbias0 = random_floatX(C, 0.0f, 1.0f);
    float* dinp_ref = host_copy(dinp0, n);
    float* dweight_ref = host_copy(dweight0, C);
    float* dbias_ref = host_copy(dbias0, C);
    layernorm_backward(dinp_ref, dweight_ref, dbias_ref, dout, inp, weight, mean_ref, rstd_ref, 1, N, C);

    upload_bytes(d_mean, mean_ref, N * sizeof(float));
    upload_bytes(d_rstd, rstd_ref, N * sizeof(float));
    floatX* d_dout = device_floatX(dout, n);
    floatX* d_dinp = (floatX*)device_alloc(n * sizeof(floatX));
    floatX* d_dweight = (floatX*)device_alloc(C * sizeof(floatX));
    floatX* d_dbias = (floatX*)device_alloc(C * sizeof(floatX));
    float* d_scratch = (float*)device_alloc(layernorm_backward_scratch_floats(N, C) * sizeof(float));
    // the second run also takes the residual's column sums (LAYERNORM_SUMS_RESIDUAL: dinp's as it
    // comes in and as it goes out, the trainer's fcproj and attproj bias gradients), so "same bits
    // on a second run" also says they change nothing else. Their references: exact theory, the
    // column sums (in double) of the dinp given and of the dinp the GPU wrote, added to the values
    // already there; one rounding to floatX of an fp32 sum, as dbias (TOL_OUT).
    float* dsum_in0 = random_floatX(C, 0.0f, 1.0f);
    float* dsum_out0 = random_floatX(C, 0.0f, 1.0f);
    floatX* d_dsum_in = device_floatX(dsum_in0, C);
    floatX* d_dsum_out = device_floatX(dsum_out0, C);
    void* dinp_bits[2];
    void* dweight_bits[2];
    void* dbias_bits[2];
    for (int run = 0; run < 2; run++) {
        upload_floatX(d_dinp, dinp0, n);
        upload_floatX(d_dweight, dweight0, C);
        upload_floatX(d_dbias, dbias0, C);
        layernorm_backward(d_dinp, d_dweight, d_dbias, d_scratch, d_dout, d_inp, d_weight, d_mean, d_rstd, N, C,
                           g_stream, run == 1 ? d_dsum_in : NULL, run == 1 ? d_dsum_out : NULL);
        dinp_bits[run] = snapshot_floatX(d_dinp, n);
        dweight_bits[run] = snapshot_floatX(d_dweight, C);
        dbias_bits[run] = snapshot_floatX(d_dbias, C);
    }
    float* dinp_gpu = floats_of(dinp_bits[1], n); // (check_twice frees the snapshots)
    check_twice(bwd, "dinp", dinp_bits, dinp_ref, n, TOL_OUT);
    check_twice(bwd, "dweight", dweight_bits, dweight_ref, C, TOL_OUT);
    check_twice(bwd, "dbias", dbias_bits, dbias_ref, C, TOL_OUT);
    {
        float* dsum_in_ref = host_zeros(C);
        float* dsum_out_ref = host_zeros(C);
        for (int col = 0; col < C; col++) {
            double sum_in = 0.0, sum_out = 0.0;
            for (int r = 0; r < N; r++) {
                sum_in += dinp0[(size_t)r * C + col];
                sum_out += dinp_gpu[(size_t)r * C + col];
            }
            dsum_in_ref[col] = (float)(dsum_in0[col] + sum_in);
            dsum_out_ref[col] = (float)(dsum_out0[col] + sum_out);
        }
        float* dsum_in = download_floatX(d_dsum_in, C);
        float* dsum_out = download_floatX(d_dsum_out, C);
        check_close(bwd, "dbias_in (the column sums of dinp given)", dsum_in, dsum_in_ref, C, TOL_OUT);
        check_close(bwd, "dbias_out (the column sums of dinp written)", dsum_out, dsum_out_ref, C, TOL_OUT);
        free(dinp_gpu); free(dsum_in_ref); free(dsum_out_ref); free(dsum_in); free(dsum_out);
    }
    device_free(d_dsum_in); device_free(d_dsum_out);
    free(dsum_in0); free(dsum_out0);

    device_free(d_inp); device_free(d_weight); device_free(d_bias); device_free(d_out);
    device_free(d_mean); device_free(d_rstd); device_free(d_dout); device_free(d_dinp);
    device_free(d_dweight); device_free(d_dbias); device_free(d_scratch);
    free(inp); free(weight); free(bias); free(out_ref); free(mean_ref); free(rstd_ref);
    free(out); free(mean); free(rstd); free(dout); free(dinp0); free(dweight0); free(dbias0);
    free(dinp_ref); free(dweight_ref); free(dbias_ref);
}

// residual = inp1 + inp2 rounded to floatX, then layernorm of that: on the CPU, residual_forward,
// the rounding, and layernorm_forward
static void check_fused_residual_layernorm(const LayernormShape* s) {
    int N = s->N, C = s->C;
    size_t n = (size_t)N * C;
    char what[96];
    snprintf(what, sizeof(what), "fused_residual_layernorm_forward N=%d C=%d", N, C);

    float* inp1 = random_floatX(n, 0.3f, 1.0f);
    float* inp2 = random_floatX(n, 0.0f, 1.0f);
    float* weight = random_floatX(C, 1.0f, 0.2f);
    float* bias = random_floatX(C, 0.0f, 0.2f);
    float* residual_ref = host_zeros(n);
    float* out_ref = host_zeros(n);
    float* mean_ref = host_zeros(N);
    float* rstd_ref = host_zeros(N);
    residual_forward(residual_ref, inp1, inp2, n);
    round_to_floatX(residual_ref, n); // what the GPU stores, and takes its statistics from
    layernorm_forward(out_ref, mean_ref, rstd_ref, residual_ref, weight, bias, 1, N, C);

    floatX* d_inp1 = device_floatX(inp1, n);
    floatX* d_inp2 = device_floatX(inp2, n);
    floatX* d_weight = device_floatX(weight, C);
    floatX* d_bias = device_floatX(bias, C);
    floatX* d_residual = (floatX*)device_alloc(n * sizeof(floatX));
    floatX* d_out = (floatX*)device_alloc(n * sizeof(floatX));
    float* d_mean = (float*)device_alloc(N * sizeof(float));
    float* d_rstd = (float*)device_alloc(N * sizeof(float));
    fill_nan(d_residual, n * sizeof(floatX));
    fill_nan(d_out, n * sizeof(floatX));
    fused_residual_layernorm_forward(d_residual, d_out, d_mean, d_rstd, d_inp1, d_inp2, d_weight, d_bias, N, C,
                                     g_stream);
    float* residual = download_floatX(d_residual, n);
    float* out = download_floatX(d_out, n);
    float* mean = download_float(d_mean, N);
    float* rstd = download_float(d_rstd, N);
    check_close(what, "residual", residual, residual_ref, n, TOL_EXACT);
    check_close(what, "out", out, out_ref, n, TOL_OUT);
    check_close(what, "mean", mean, mean_ref, N, TOL_FP32_STATS);
    check_close(what, "rstd", rstd, rstd_ref, N, TOL_FP32_STATS);

    device_free(d_inp1); device_free(d_inp2); device_free(d_weight); device_free(d_bias);
    device_free(d_residual); device_free(d_out); device_free(d_mean); device_free(d_rstd);
    free(inp1); free(inp2); free(weight); free(bias); free(residual_ref); free(out_ref); free(mean_ref);
    free(rstd_ref); free(residual); free(out); free(mean); free(rstd);
}

// ----------------------------------------------------------------------------
// matmul: forward (with and without bias), backward (writes dinp, adds dweight and dbias)

typedef struct {
    const char* name;
    int BT, C, OC;
    int has_bias;
} MatmulShape;

static const MatmulShape MATMUL_SHAPES[] = {
    {"qkv", 128, 768, 3 * 768, 1},
    {"attproj", 128, 768, 768, 1},
    {"fc", 128, 768, 4 * 768, 1},
    {"fcproj", 128, 4 * 768, 768, 1},
    {"lm head", 128, 768, 50304, 0}, // OC = Vp, no bias: the logits, dinp sums 50304 terms
    {"odd rows", 37, 96, 3 * 96, 1},
    {"odd rows", 37, 96, 3 * 96, 0},
    {"tiny fc", 64, 64, 4 * 64, 1}, // the tiny model's widths
    {"odd OC", 37, 64, 50, 1},      // OC not a multiple of the pack: dbias reads its rows element by element
    {"odd OC", 131, 64, 100, 1},    // OC a multiple of fp32's pack, not of bf16's
};

static void check_matmul(const MatmulShape* s) {
    int BT = s->BT, C = s->C, OC = s->OC;
    size_t n_inp = (size_t)BT * C, n_weight = (size_t)OC * C, n_out = (size_t)BT * OC;
    char fwd[128], bwd[128];
    const char* bias_note = s->has_bias ? "bias" : "no bias";
    snprintf(fwd, sizeof(fwd), "matmul_forward %s BT=%d C=%d OC=%d %s", s->name, BT, C, OC, bias_note);
    snprintf(bwd, sizeof(bwd), "matmul_backward %s BT=%d C=%d OC=%d %s", s->name, BT, C, OC, bias_note);

    float* inp = random_floatX(n_inp, 0.0f, 1.0f);
    float* weight = random_floatX(n_weight, 0.0f, 1.0f / sqrtf((float)C)); // outputs of unit scale
    float* bias = s->has_bias ? random_floatX(OC, 0.0f, 1.0f) : NULL;     // as large as the product
    float* out_ref = host_zeros(n_out);
    matmul_forward(out_ref, inp, weight, bias, 1, BT, C, OC);

    floatX* d_inp = device_floatX(inp, n_inp);
    floatX* d_weight = device_floatX(weight, n_weight);
    floatX* d_bias = s->has_bias ? device_floatX(bias, OC) : NULL;
    floatX* d_out = (floatX*)device_alloc(n_out * sizeof(floatX));
    fill_nan(d_out, n_out * sizeof(floatX));
    matmul_forward(d_out, d_inp, d_weight, d_bias, BT, C, OC, g_stream);
    float* out = download_floatX(d_out, n_out);
    check_close(fwd, "out", out, out_ref, n_out, TOL_MATMUL);

    // backward: dinp is written on the GPU (NaN before) and added to on the CPU (0 before);
    // dweight and dbias are added to on both sides, from the same starting values
    float* dout = random_floatX(n_out, 0.0f, 1.0f);
    float* dweight0 = random_floatX(n_weight, 0.0f, 1.0f);
    float* dbias0 = s->has_bias ? random_floatX(OC, 0.0f, 1.0f) : NULL;
    float* dinp_ref = host_zeros(n_inp);
    float* dweight_ref = host_copy(dweight0, n_weight);
    float* dbias_ref = s->has_bias ? host_copy(dbias0, OC) : NULL;
    matmul_backward(dinp_ref, dweight_ref, dbias_ref, dout, inp, weight, 1, BT, C, OC);

    floatX* d_dout = device_floatX(dout, n_out);
    floatX* d_dinp = (floatX*)device_alloc(n_inp * sizeof(floatX));
    floatX* d_dweight = (floatX*)device_alloc(n_weight * sizeof(floatX));
    floatX* d_dbias = s->has_bias ? (floatX*)device_alloc(OC * sizeof(floatX)) : NULL;
    float* d_scratch = s->has_bias ? (float*)device_alloc(matmul_dbias_scratch_floats(OC) * sizeof(float)) : NULL;
    void* dinp_bits[2];
    void* dweight_bits[2];
    void* dbias_bits[2] = {NULL, NULL};
    for (int run = 0; run < 2; run++) {
        fill_nan(d_dinp, n_inp * sizeof(floatX));
        upload_floatX(d_dweight, dweight0, n_weight);
        if (s->has_bias) { upload_floatX(d_dbias, dbias0, OC); }
        matmul_backward(d_dinp, d_dweight, d_dbias, d_scratch, d_dout, d_inp, d_weight, BT, C, OC, g_stream);
        dinp_bits[run] = snapshot_floatX(d_dinp, n_inp);
        dweight_bits[run] = snapshot_floatX(d_dweight, n_weight);
        if (s->has_bias) { dbias_bits[run] = snapshot_floatX(d_dbias, OC); }
    }
    check_twice(bwd, "dinp", dinp_bits, dinp_ref, n_inp, TOL_MATMUL);
    check_twice(bwd, "dweight", dweight_bits, dweight_ref, n_weight, TOL_MATMUL);
    if (s->has_bias) { check_twice(bwd, "dbias", dbias_bits, dbias_ref, OC, TOL_MATMUL); }

    device_free(d_inp); device_free(d_weight); device_free(d_out); device_free(d_dout);
    device_free(d_dinp); device_free(d_dweight);
    if (s->has_bias) { device_free(d_bias); device_free(d_dbias); device_free(d_scratch); }
    free(inp); free(weight); free(bias); free(out_ref); free(out); free(dout); free(dweight0);
    free(dbias0); free(dinp_ref); free(dweight_ref); free(dbias_ref);
}

// ----------------------------------------------------------------------------
// matmul with GELU in the epilogue (the MLP's two products): matmul_forward_gelu writes
// GELU(inp @ W^T + b) and the GELU input; matmul_backward with pre_gelu writes
// GELU'(pre_gelu) * (dout @ W). The references are train_gpt2.c's matmul and gelu layers in fp32:
//   forward   pre_ref = matmul_forward, gelu_ref = gelu_forward(pre_ref) (GELU of the unrounded
//             sum, as the epilogue takes it; the GPU rounds both outputs once)
//   backward  dpre_ref = gelu_backward(pre, matmul_backward's dinp) from the same floatX pre as the
//             GPU's aux (the product unrounded, as the epilogue multiplies it)
// Shapes: the trainer's (OC a multiple of 8: the epilogues), and OC = 50, 100 where the aux's
// leading dimension may not be used (cublasLt.h: divisible by 8), so gelu.cuh's kernels run.

typedef struct { const char* name; int BT, C, OC; int has_bias; } MatmulGeluShape;

static const MatmulGeluShape MATMUL_GELU_SHAPES[] = {
    {"fc", 128, 768, 4 * 768, 1},
    {"tiny fc", 64, 64, 4 * 64, 1},
    {"odd rows", 37, 96, 4 * 96, 1},
    {"no bias", 37, 96, 4 * 96, 0},  // GELU_AUX
    {"odd OC", 37, 64, 104, 1},      // 104: a multiple of 8, not of 16 (the aux ld)
    {"kernels", 37, 64, 50, 1},      // OC % 8 != 0: the product, then gelu.cuh's kernels
};

static void check_matmul_gelu(const MatmulGeluShape* s) {
    int BT = s->BT, C = s->C, OC = s->OC;
    size_t n_inp = (size_t)BT * C, n_weight = (size_t)OC * C, n_out = (size_t)BT * OC;
    char fwd[160], bwd[160];
    const char* how = matmul_gelu_fused(OC) ? "epilogue" : "kernels";
    snprintf(fwd, sizeof(fwd), "matmul_forward_gelu %s BT=%d C=%d OC=%d (%s)", s->name, BT, C, OC, how);
    // the backward's product is fcproj's: dinp (BT, OC) = dout (BT, C) @ W (C, OC), GELU's input width OC
    snprintf(bwd, sizeof(bwd), "matmul_backward dgelu %s BT=%d C=%d OC=%d (%s)", s->name, BT, C, OC, how);

    float* inp = random_floatX(n_inp, 0.0f, 1.0f);
    float* weight = random_floatX(n_weight, 0.0f, 1.0f / sqrtf((float)C)); // GELU inputs of unit scale
    float* bias = s->has_bias ? random_floatX(OC, 0.0f, 1.0f) : NULL;
    float* pre_ref = host_zeros(n_out);
    float* gelu_ref = host_zeros(n_out);
    matmul_forward(pre_ref, inp, weight, bias, 1, BT, C, OC);
    gelu_forward(gelu_ref, pre_ref, n_out);

    floatX* d_inp = device_floatX(inp, n_inp);
    floatX* d_weight = device_floatX(weight, n_weight);
    floatX* d_bias = s->has_bias ? device_floatX(bias, OC) : NULL;
    floatX* d_pre = (floatX*)device_alloc(n_out * sizeof(floatX));
    floatX* d_gelu = (floatX*)device_alloc(n_out * sizeof(floatX));
    void* pre_bits[2];
    void* gelu_bits[2];
    for (int run = 0; run < 2; run++) { // run again on the same inputs: the same bits (-r 1's recompute)
        fill_nan(d_pre, n_out * sizeof(floatX));
        fill_nan(d_gelu, n_out * sizeof(floatX));
        matmul_forward_gelu(d_gelu, d_pre, d_inp, d_weight, d_bias, BT, C, OC, g_stream);
        pre_bits[run] = snapshot_floatX(d_pre, n_out);
        gelu_bits[run] = snapshot_floatX(d_gelu, n_out);
    }
    check_twice(fwd, "pre_gelu (aux)", pre_bits, pre_ref, n_out, TOL_MATMUL);
    check_twice(fwd, "out (GELU)", gelu_bits, gelu_ref, n_out, TOL_MATMUL);

    // backward: dinp (BT, OC) = GELU'(pre) * (dout (BT, C) @ weight^T...), weight here (C, OC) as fcproj's
    float* wproj = random_floatX(n_weight, 0.0f, 1.0f / sqrtf((float)OC)); // (C, OC)
    float* dout = random_floatX(n_inp, 0.0f, 1.0f);                       // (BT, C)
    float* pre = random_floatX(n_out, 0.0f, 2.0f);                        // the aux: both tails of GELU'
    float* dgelu_in = host_zeros(n_out);
    float* dweight_unused = host_zeros(n_weight);
    matmul_backward(dgelu_in, dweight_unused, NULL, dout, pre, wproj, 1, BT, OC, C); // dinp = dout @ wproj
    float* dpre_ref = host_zeros(n_out);
    gelu_backward(dpre_ref, pre, dgelu_in, n_out);
    floatX* d_wproj = device_floatX(wproj, n_weight);
    floatX* d_dout = device_floatX(dout, n_inp);
    floatX* d_aux = device_floatX(pre, n_out);
    floatX* d_dpre = (floatX*)device_alloc(n_out * sizeof(floatX));
    floatX* d_dw = (floatX*)device_alloc(n_weight * sizeof(floatX));
    void* dpre_bits[2];
    for (int run = 0; run < 2; run++) {
        fill_nan(d_dpre, n_out * sizeof(floatX));
        cudaCheck(cudaMemset(d_dw, 0, n_weight * sizeof(floatX)));
        matmul_backward(d_dpre, d_dw, NULL, NULL, d_dout, d_aux, d_wproj, BT, OC, C, g_stream, d_aux);
        dpre_bits[run] = snapshot_floatX(d_dpre, n_out);
    }
    check_twice(bwd, "dinp (GELU' x product)", dpre_bits, dpre_ref, n_out, TOL_MATMUL);

    device_free(d_inp); device_free(d_weight); device_free(d_pre); device_free(d_gelu);
    device_free(d_wproj); device_free(d_dout); device_free(d_aux); device_free(d_dpre); device_free(d_dw);
    if (s->has_bias) { device_free(d_bias); }
    free(inp); free(weight); free(bias); free(pre_ref); free(gelu_ref); free(wproj); free(dout); free(pre);
    free(dgelu_in); free(dweight_unused); free(dpre_ref);
}

// ----------------------------------------------------------------------------
// attention: forward (out and lse) and backward (writes dqkv)

typedef struct { int B, T, C, NH; } AttentionShape; // hs = C / NH

static const AttentionShape ATTENTION_SHAPES[] = {
    {2, 64, 768, 12}, // GPT-2-like, hs 64
    {2, 1, 768, 12},  // one query: one key
    {2, 7, 128, 2},   // T inside one tile
    {3, 37, 128, 2},  // a partial second key tile
    {2, 65, 128, 2},  // one query past a block of 64
    {2, 200, 768, 12},
    {2, 65, 128, 4},  // hs 32
    {2, 37, 64, 2},   // hs 32
    {2, 65, 256, 2},  // hs 128
    {1, 200, 384, 3}, // hs 128
    {2, 37, 32, 2},   // hs 16 (the tiny test model's)
    {1, 130, 64, 4},  // hs 16, three key tiles, the last of 2 rows
    {1, 520, 128, 2}, // hs 64: the sm_90a forward's 3-stage ring wraps (its last query block's 5 key tiles:
                      // tiles 3 and 4 refill stages 0 and 1 once P V of tiles 0 and 1 has landed, the empty
                      // barriers' first phase); its dK/dV kernel's 9 query stages refill each of its 2
                      // stages 3-4 times (both parities); the last query block holds 8 rows
};

// lse (B,NH,T) = log sum_{j <= t} exp(q_t . k_j / sqrt(hs)) in double: the reference for the
// forward's saved log-sum-exp (the CPU twin keeps the softmax weights instead)
static void attention_lse_reference(float* lse, const float* qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
                double maxval = -INFINITY, sum = 0.0;
                for (int pass = 0; pass < 2; pass++) { // the max first, so exp cannot overflow
                    for (int j = 0; j <= t; j++) {
                        const float* k = qkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                        double s = 0.0;
                        for (int i = 0; i < hs; i++) { s += (double)q[i] * k[i]; }
                        s *= scale;
                        if (pass == 0) { maxval = fmax(maxval, s); } else { sum += exp(s - maxval); }
                    }
                }
                lse[((size_t)b * NH + h) * T + t] = (float)(maxval + log(sum));
            }
        }
    }
}

// The GPU's backward takes the forward's out as an input, rounded to floatX, and forms
// D_i = dout_i . out_i from it; the CPU twin takes D_i = sum_j att_ij datt_ij, which is
// dout_i . out_i with its own fp32 out. So that both read the same numbers, this adds to the CPU's
// dqkv (B,T,3C) the change that the GPU's out makes. dS_ij = P_ij (dP_ij - D_i) is linear in D_i,
// so with dD_i = dout_i . (out_i - out_ref_i), P = att (B,NH,T,T), s = 1/sqrt(hs):
//     dq_i -= s * dD_i * sum_{j <= i} P_ij k_j      dk_j -= s * sum_{i >= j} P_ij dD_i q_i
// and dv does not depend on D. In the BF16 build the rounding of out (up to 2^-8 of each element)
// gives |dD_i| up to 2.6e-2, rms 2.9e-3 (D_i itself: rms 1.9), at B=2 T=200 C=768 NH=12; it moves
// single elements of dq and dk by up to 3.4% of rms(dqkv), most where few keys are visible (large
// |out|) and the element itself is small. In the FP32 build it is a last-ulp correction. (out
// itself is checked against the CPU's out, with TOL_OUT, by the forward's check.)
static void attention_backward_out_correction(float* dqkv, const float* att, const float* qkv, const float* dout,
                                              const float* out, const float* out_ref, int B, int T, int C, int NH) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    double scale = 1.0 / sqrt((double)hs);
    double* dq = (double*)mallocCheck(hs * sizeof(double));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                size_t bt = (size_t)b * T + t;
                double dD = 0.0;
                for (int i = 0; i < hs; i++) {
                    size_t o = bt * C + (size_t)h * hs + i;
                    dD += (double)dout[o] * ((double)out[o] - (double)out_ref[o]);
                }
                if (dD == 0.0) { continue; }
                const float* a = att + (((size_t)b * NH + h) * T + t) * T;
                const float* q = qkv + bt * C3 + (size_t)h * hs;
                for (int i = 0; i < hs; i++) { dq[i] = 0.0; }
                for (int j = 0; j <= t; j++) {
                    const float* k = qkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                    float* dk = dqkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                    double c = -scale * a[j] * dD;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += c * k[i];
                        dk[i] += (float)(c * q[i]);
                    }
                }
                float* dq_t = dqkv + bt * C3 + (size_t)h * hs;
                for (int i = 0; i < hs; i++) { dq_t[i] += (float)dq[i]; }
            }
        }
    }
    free(dq);
}

#if defined(ENABLE_BF16)
// The bf16 build's attention runs on tensor cores, whose products take bf16 operands: the forward
// rounds its unnormalized softmax weights p_ij = exp(s_ij - m) (m: the row's running max after
// each tile of ATT_TC_STAGE keys) before p v; the backward rounds P_ij before P^T dout and
// dS_ij = P_ij (dP_ij - D_i) before dS k and dS^T q. The CPU twin keeps them in fp32. So that both
// compare the same numbers, these add to the CPU's results the change those roundings make, in
// double, from the fp32 values the kernels round (scores q.k * scale * log2(e) in fp32; in the
// backward P from the GPU's lse and D_i from the GPU's out), as attention_backward_out_correction
// does for out. dev/test/bf16_rounding.py rounds at the same places. Measured on the emulator
// without them: out up to 0.88 of TOL_OUT and dqkv up to 3.3x TOL_ATT_BWD (B=2 T=200 C=768
// NH=12; 0.97-2.4x at the other shapes but T=1), with correct kernels: the roundings move single
// dq, dk, dv elements by a few % of rms(dqkv), growing with T, as dS = P (dP - D) cancels.
// With them what is left is the output's own rounding: at most 0.35 of the bounds, as before.

// Rounding flips. The corrections below round the reference's fp32 values where the kernels round
// theirs; a GPU's fp32 value can differ by a few ulp (its tensor cores add a dot product's terms in
// their own order and alignment, exp2f is within 2 ulp, nvcc may contract a*b - c into one fma),
// and where the value lies that close to the midpoint between two bf16 numbers the kernel rounds
// the other way: that term then moves by one bf16 ulp (0.4-0.8% of itself). Measured once
// (H200, 2026-11-28, `dev/gpu_check.sh`): dv elements 1.00 and 1.05 of TOL_ATT_BWD at B=2 T=65
// hs=128 and (sm_90a) B=2 T=300 hs=64 (a shape of this test then), each a key's sum over ~60-300 queries, small itself, where
// one weight near 0.85 rounded the other way; the emulator, whose exp2f and adds are the host's,
// had stayed at 0.35. So the check allows, per output element, one bf16 ulp times the term's
// multiplier for each rounding whose fp32 value lies within a bound of the GPU's possible
// difference from a midpoint. The bound, from the IEEE unit roundoff u = 2^-24: an fp32 dot
// product of n terms, added in any order, is within n u sum|terms| of the exact one (the classic
// gamma_n); each further fp32 operation (a rounding nvcc may skip by contracting) u of its value;
// exp2f 2 ulp (CUDA's documented maximum), 4u. On the shapes here that allows at most a few % of
// rms(dqkv) on an element (test_kernels prints it: "+ flips <= X rms on Y%"), against ~100% for a
// wrong index or formula.
#define ATT_U 5.9604644775390625e-8 // 2^-24
static double attention_dot_err(double dot_abs, int n) { return n * ATT_U * dot_abs; }
// one bf16 ulp of x if x is within err of a midpoint between two bf16 numbers (a rounding the GPU
// may take the other way), else 0
static double attention_bf16_flip(float x, double err) {
    if (x == 0.0f || !isfinite(x)) { return 0.0; }
    int e;
    frexp((double)x, &e);            // |x| = f 2^e, f in [0.5, 1): bf16 keeps 8 significant bits
    double ulp = ldexp(1.0, e - 8);
    double off = fabs((double)x - (double)to_float(from_float(x))); // from the nearest bf16
    return ulp / 2 - off <= err ? ulp : 0.0;
}

// the scores of query t of head h in the base-2 units the kernels use: s2[j] = fp32(fp32(q_t . k_j)
// * scale * log2(e)) for keys j <= t; returns their max. s2_err (NULL or T doubles): a bound on
// how far a kernel's fp32 s2[j] can be from this one (attention_bf16_flip)
static float attention_tc_scores(float* s2, double* s2_err, const float* qkv, int b, int t, int h, int T, int C,
                                 int NH) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale_log2 = 1.0f / sqrtf((float)hs) * 1.4426950408889634f; // as the launcher
    const float* q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
    float m = -INFINITY;
    for (int j = 0; j <= t; j++) {
        const float* k = qkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
        double dot = 0.0, dot_abs = 0.0;
        for (int i = 0; i < hs; i++) { dot += (double)q[i] * k[i]; dot_abs += fabs((double)q[i] * k[i]); }
        s2[j] = (float)dot * scale_log2;
        if (s2_err != NULL) { s2_err[j] = attention_dot_err(dot_abs, hs) * scale_log2 + ATT_U * fabs((double)s2[j]); }
        m = fmaxf(m, s2[j]);
    }
    return m;
}

static double round_bf16_change(float x) { return (double)to_float(from_float(x)) - (double)x; }


// out (B,T,C) += sum_j (bf16(p_j) - p_j) v_j / l for each query: p_j = exp2(s2_j - m_tile(j)),
// where m_tile(j) is the running max after the tile of key j, each weight later scaled by
// exp2(m_tile(j) - m) (the rescales), l = sum_j exp2(s2_j - m), m the row's max. stage: the keys
// per tile of the forward that ran (ATT_TC_STAGE = 64 for mma.sync, ATT90_BC = 128 for sm_90a).
// flips (B,T,C) += the rounding flips' allowance (above): bf16 ulp(p_j) |v_j| exp2(m_tile - m) / l.
static void attention_tc_forward_correction(float* out, double* flips, const float* qkv, int B, int T, int C, int NH,
                                            int stage) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float* s2 = (float*)mallocCheck(T * sizeof(float));
    double* s2_err = (double*)mallocCheck(T * sizeof(double));
    double* corr = (double*)mallocCheck(hs * sizeof(double));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                float m = attention_tc_scores(s2, s2_err, qkv, b, t, h, T, C, NH);
                double* flip = flips + ((size_t)b * T + t) * C + (size_t)h * hs;
                double l = 0.0;
                for (int j = 0; j <= t; j++) { l += exp2((double)s2[j] - m); }
                for (int i = 0; i < hs; i++) { corr[i] = 0.0; }
                float m_run = -INFINITY;
                for (int k0 = 0; k0 <= t; k0 += stage) {
                    int k1 = k0 + stage - 1 < t ? k0 + stage - 1 : t; // the tile's last visible key
                    for (int j = k0; j <= k1; j++) { m_run = fmaxf(m_run, s2[j]); }
                    for (int j = k0; j <= k1; j++) {
                        float p = exp2f(s2[j] - m_run);
                        double w = exp2((double)m_run - m) / l;
                        double d = round_bf16_change(p) * w;
                        // p's bound: its argument's (s2, m_run and the difference), then exp2f's
                        double p_err = p * (M_LN2 * (s2_err[j] + ATT_U * (fabs((double)m_run) + fabs((double)s2[j] - m_run)))
                                            + 4 * ATT_U);
                        double f = attention_bf16_flip(p, p_err) * w;
                        const float* v = qkv + ((size_t)b * T + j) * C3 + 2 * C + (size_t)h * hs;
                        for (int i = 0; i < hs; i++) { corr[i] += d * v[i]; flip[i] += f * fabs((double)v[i]); }
                    }
                }
                float* o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int i = 0; i < hs; i++) { o[i] += (float)corr[i]; }
            }
        }
    }
    free(s2); free(s2_err); free(corr);
}

// dqkv (B,T,3C) += the change of rounding P_ij = exp2(s2_ij - lse_i log2(e)) in dv_j = sum_i P_ij
// dout_i, and dS_ij = P_ij (dP_ij - D_i) (dP_ij = dout_i . v_j, D_i = dout_i . out_i from the
// GPU's out) in dq_i = scale sum_j dS_ij k_j and dk_j = scale sum_i dS_ij q_i. flips (B,T,3C) += the
// rounding flips' allowance (above): bf16 ulp(P_ij) |dout_i| in dv_j, bf16 ulp(dS_ij) scale |k_j|
// in dq_i and |q_i| in dk_j.
static void attention_tc_backward_correction(float* dqkv, double* flips, const float* qkv, const float* dout,
                                             const float* out, const float* lse, int B, int T, int C, int NH) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    double scale = 1.0 / sqrt((double)hs);
    float* s2 = (float*)mallocCheck(T * sizeof(float));
    double* s2_err = (double*)mallocCheck(T * sizeof(double));
    double* dq = (double*)mallocCheck(hs * sizeof(double));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                size_t bt = (size_t)b * T + t;
                attention_tc_scores(s2, s2_err, qkv, b, t, h, T, C, NH);
                const float* d = dout + bt * C + (size_t)h * hs;
                const float* o = out + bt * C + (size_t)h * hs;
                const float* q = qkv + bt * C3 + (size_t)h * hs;
                double D = 0.0, D_abs = 0.0;
                for (int i = 0; i < hs; i++) { D += (double)d[i] * o[i]; D_abs += fabs((double)d[i] * o[i]); }
                double* flip_q = flips + bt * C3 + (size_t)h * hs;
                float lse2 = lse[((size_t)b * NH + h) * T + t] * 1.4426950408889634f;
                for (int i = 0; i < hs; i++) { dq[i] = 0.0; }
                for (int j = 0; j <= t; j++) {
                    const float* k = qkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                    const float* v = k + C;
                    float* dk = dqkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                    float* dv = dk + C;
                    double* flip_k = flips + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                    double* flip_v = flip_k + C;
                    double dp = 0.0, dp_abs = 0.0;
                    for (int i = 0; i < hs; i++) { dp += (double)d[i] * v[i]; dp_abs += fabs((double)d[i] * v[i]); }
                    float p = exp2f(s2[j] - lse2);
                    float ds = p * ((float)dp - (float)D);
                    double dP = round_bf16_change(p), ddS = round_bf16_change(ds) * scale;
                    // the bounds (above): p's from its argument's and exp2f's; dS's from p's, from
                    // the two dot products dP and D, and from its own subtract and multiply
                    double p_err = p * (M_LN2 * (s2_err[j] + ATT_U * (fabs((double)lse2) + fabs((double)s2[j] - lse2)))
                                        + 4 * ATT_U);
                    double dd = fabs((double)dp - D);
                    double ds_err = p_err * dd + (double)p * (attention_dot_err(dp_abs, hs) + attention_dot_err(D_abs, hs)
                                                              + ATT_U * dd) + ATT_U * fabs((double)ds);
                    double fP = attention_bf16_flip(p, p_err), fS = attention_bf16_flip(ds, ds_err) * scale;
                    for (int i = 0; i < hs; i++) {
                        dv[i] += (float)(dP * d[i]);
                        dk[i] += (float)(ddS * q[i]);
                        dq[i] += ddS * k[i];
                        flip_v[i] += fP * fabs((double)d[i]);
                        flip_k[i] += fS * fabs((double)q[i]);
                        flip_q[i] += fS * fabs((double)k[i]);
                    }
                }
                float* dq_t = dqkv + bt * C3 + (size_t)h * hs;
                for (int i = 0; i < hs; i++) { dq_t[i] += (float)dq[i]; }
            }
        }
    }
    free(s2); free(s2_err); free(dq);
}
#endif

static void check_attention(const AttentionShape* s) {
    int B = s->B, T = s->T, C = s->C, NH = s->NH;
    size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C, n_lse = (size_t)B * NH * T;
    char fwd[128], bwd[128];
#if defined(ENABLE_BF16)
    bool sm90 = attention_sm90_use(C / NH); // the sm_90a forward (wgmma, TMA) or mma.sync
    bool sm90_bwd = attention_sm90_use_backward(C / NH, T); // its backward: T % 4 == 0 too
#else
    bool sm90 = false, sm90_bwd = false;
#endif
    snprintf(fwd, sizeof(fwd), "attention_forward%s B=%d T=%d C=%d NH=%d hs=%d", sm90 ? " (sm_90a)" : "", B, T, C, NH,
             C / NH);
    snprintf(bwd, sizeof(bwd), "attention_backward%s B=%d T=%d C=%d NH=%d hs=%d", sm90_bwd ? " (sm_90a)" : "", B, T, C, NH,
             C / NH);

    // q.k / sqrt(hs) of unit-normal q and k is unit-normal: softmaxes neither flat nor one-hot
    float* qkv = random_floatX(n_qkv, 0.0f, 1.0f);
    float* out_ref = host_zeros(n_out);
    float* att = host_zeros(n_lse * T); // (B,NH,T,T)
    float* lse_ref = host_zeros(n_lse);
    attention_forward(out_ref, att, qkv, B, T, C, NH);
    attention_lse_reference(lse_ref, qkv, B, T, C, NH);
    float* out_check = host_copy(out_ref, n_out); // out_ref stays the CPU's own, for the backward
    double* out_flips = NULL; // the bf16 build's rounding flips (above); none in fp32
#if defined(ENABLE_BF16)
    out_flips = (double*)calloc(n_out, sizeof(double));
    attention_tc_forward_correction(out_check, out_flips, qkv, B, T, C, NH, sm90 ? ATT90_BC : ATT_TC_STAGE);
#endif

    floatX* d_qkv = device_floatX(qkv, n_qkv);
    floatX* d_out = (floatX*)device_alloc(n_out * sizeof(floatX));
    float* d_lse = (float*)device_alloc(n_lse * sizeof(float));
    fill_nan(d_out, n_out * sizeof(floatX));
    fill_nan(d_lse, n_lse * sizeof(float));
    attention_forward(d_out, d_lse, d_qkv, B, T, C, NH, g_stream);
    float* out = download_floatX(d_out, n_out);
    float* lse = download_float(d_lse, n_lse);
    check_close_extra(fwd, "out", out, out_check, n_out, TOL_OUT, out_flips);
    check_close(fwd, "lse", lse, lse_ref, n_lse, TOL_FP32_STATS);

    // backward: the GPU reads its own forward's out and lse, as the trainer does; it writes dqkv
    // (NaN before), the CPU adds into zeros
    float* dout = random_floatX(n_out, 0.0f, 1.0f);
    float* dqkv_ref = host_zeros(n_qkv);
    float* datt_scratch = host_zeros(n_lse);
    attention_backward(dqkv_ref, datt_scratch, dout, qkv, att, B, T, C, NH);
    attention_backward_out_correction(dqkv_ref, att, qkv, dout, out, out_ref, B, T, C, NH);
    double* dqkv_flips = NULL;
#if defined(ENABLE_BF16)
    dqkv_flips = (double*)calloc(n_qkv, sizeof(double));
    attention_tc_backward_correction(dqkv_ref, dqkv_flips, qkv, dout, out, lse, B, T, C, NH);
#endif

    floatX* d_dout = device_floatX(dout, n_out);
    floatX* d_dqkv = (floatX*)device_alloc(n_qkv * sizeof(floatX));
    float* d_scratch = (float*)device_alloc(attention_backward_scratch_floats(B, T, C, NH) * sizeof(float));
    // dbias (3C, the qkv bias gradient) += the column sums of dqkv: from random values, reset per run
    float* dbias0 = random_floatX(3 * C, 0.0f, 1.0f);
    floatX* d_dbias = (floatX*)device_alloc(3 * C * sizeof(floatX));
    void* dqkv_bits[2];
    void* dbias_bits[2];
    for (int run = 0; run < 2; run++) {
        fill_nan(d_dqkv, n_qkv * sizeof(floatX));
        upload_floatX(d_dbias, dbias0, 3 * C);
        attention_backward(d_dqkv, d_dbias, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, g_stream);
        dqkv_bits[run] = snapshot_floatX(d_dqkv, n_qkv);
        dbias_bits[run] = snapshot_floatX(d_dbias, 3 * C);
    }
    // dbias against exact theory: the column sums (in double) of the dqkv the GPU wrote, added to
    // the values there before; the kernels' fp32 sums over B*T rows rounded once to floatX (TOL_OUT,
    // as the layernorm backward's column sums)
    {
        float* dqkv_gpu = floats_of(dqkv_bits[1], n_qkv);
        float* dbias_ref = host_zeros(3 * C);
        for (int col = 0; col < 3 * C; col++) {
            double sum = 0.0;
            for (size_t r = 0; r < (size_t)B * T; r++) { sum += dqkv_gpu[r * 3 * C + col]; }
            dbias_ref[col] = (float)(dbias0[col] + sum);
        }
        check_twice(bwd, "dbias (column sums of dqkv, added)", dbias_bits, dbias_ref, 3 * C, TOL_OUT);
        free(dqkv_gpu); free(dbias_ref);
    }
    device_free(d_dbias); free(dbias0);
    check_twice_extra(bwd, "dqkv", dqkv_bits, dqkv_ref, n_qkv, TOL_ATT_BWD, dqkv_flips);
    // the row term D (B,NH,T) the backward leaves in its scratch, against attention_rowdot_kernel's
    // order replayed on the host from the same floatX out and dout: each lane's pack by fmaf (one
    // rounding per term on both sides), then the butterfly over the row's lanes: the same bits
    float* D = download_float(d_scratch, n_lse);
    float* D_replay = host_zeros(n_lse);
    int hs = C / NH, G = attention_rowdot_lanes(hs);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                float lanes[32];
                for (int g = 0; g < G; g++) {
                    const float* d = dout + ((size_t)b * T + t) * C + h * hs + g * PACKX_SIZE;
                    const float* o = out + ((size_t)b * T + t) * C + h * hs + g * PACKX_SIZE;
                    lanes[g] = 0.0f;
                    for (int j = 0; j < PACKX_SIZE; j++) { lanes[g] = fmaf(d[j], o[j], lanes[g]); }
                }
                for (int offset = G / 2; offset > 0; offset >>= 1) {
                    float next[32];
                    for (int g = 0; g < G; g++) { next[g] = lanes[g] + lanes[g ^ offset]; }
                    memcpy(lanes, next, sizeof(next));
                }
                D_replay[((size_t)b * NH + h) * T + t] = lanes[0];
            }
        }
    }
    check_close(bwd, "D (rowdot): the kernel's order replayed on the host", D, D_replay, n_lse, TOL_EXACT);
    free(D); free(D_replay);
#if defined(ENABLE_BF16)
    // the sm_90a backward's dQ: its reduce kernel's sum of the dK/dV kernel's partial tiles (left in
    // the scratch after D), replayed on the host from those partials: a row's key blocks 0, 1, ..,
    // q / 128 in that order, one fp32 rounding per add, times scale, rounded to bf16: the same bits
    // (the partials themselves are checked through dqkv against the CPU above)
    if (sm90_bwd) {
        float* part = download_float(d_scratch + attention_sm90_dq_offset(B, T, NH), attention_sm90_dq_partial_floats(B, T, NH));
        float* dqkv_gpu = download_floatX(d_dqkv, n_qkv);
        float* dq_gpu = host_zeros((size_t)B * T * C);
        float* dq_replay = host_zeros((size_t)B * T * C);
        float scale = 1.0f / sqrtf((float)ATT90_HS);
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float* tiles = part + ((size_t)b * NH + h) * att90_dq_tiles(T) * ATT90_DQ_TILE_FLOATS;
                for (int q = 0; q < T; q++) {
                    int qb = q / ATT90_BR;
                    const float* p = tiles + (size_t)qb * (qb + 1) / 2 * ATT90_DQ_TILE_FLOATS + q % ATT90_BR;
                    for (int d = 0; d < ATT90_HS; d++) {
                        float acc = p[d * ATT90_BR];
                        for (int kb = 1; kb <= qb; kb++) { acc = acc + p[(size_t)kb * ATT90_DQ_TILE_FLOATS + d * ATT90_BR]; }
                        size_t i = ((size_t)b * T + q) * C + h * ATT90_HS + d;
                        dq_replay[i] = to_float(from_float(acc * scale));
                        dq_gpu[i] = dqkv_gpu[((size_t)b * T + q) * 3 * C + h * ATT90_HS + d];
                    }
                }
            }
        }
        check_close(bwd, "dq: the reduce kernel's order replayed on the host from the partials", dq_gpu, dq_replay,
                    (size_t)B * T * C, TOL_EXACT);
        free(part); free(dqkv_gpu); free(dq_gpu); free(dq_replay);
    }
#endif

    device_free(d_qkv); device_free(d_out); device_free(d_lse); device_free(d_dout);
    device_free(d_dqkv); device_free(d_scratch);
    free(qkv); free(out_ref); free(out_check); free(att); free(lse_ref); free(out); free(lse); free(dout);
    free(dqkv_ref); free(datt_scratch); free(out_flips); free(dqkv_flips);
}

// ----------------------------------------------------------------------------
// gelu: forward, backward (writes dinp; may run in place, dinp == dout, as the trainer does)

// B*T*4C; an odd count (a partial last pack); fewer elements than one pack
static const size_t GELU_SIZES[] = {2 * 64 * 4 * 768, 1001, 3};

static void check_gelu(size_t N) {
    char fwd[64], bwd[64];
    snprintf(fwd, sizeof(fwd), "gelu_forward N=%zu", N);
    snprintf(bwd, sizeof(bwd), "gelu_backward N=%zu", N);

    float* inp = random_floatX(N, 0.0f, 2.0f); // reaches both tails
    float* out_ref = host_zeros(N);
    gelu_forward(out_ref, inp, N);
    floatX* d_inp = device_floatX(inp, N);
    floatX* d_out = (floatX*)device_alloc(N * sizeof(floatX));
    fill_nan(d_out, N * sizeof(floatX));
    gelu_forward(d_out, d_inp, N, g_stream);
    float* out = download_floatX(d_out, N);
    check_close(fwd, "out", out, out_ref, N, TOL_OUT);

    float* dout = random_floatX(N, 0.0f, 1.0f);
    float* dinp_ref = host_zeros(N); // the CPU adds, the GPU writes
    gelu_backward(dinp_ref, inp, dout, N);
    floatX* d_dout = device_floatX(dout, N);
    floatX* d_dinp = (floatX*)device_alloc(N * sizeof(floatX));
    void* dinp_bits[2];
    for (int run = 0; run < 2; run++) {
        fill_nan(d_dinp, N * sizeof(floatX));
        gelu_backward(d_dinp, d_inp, d_dout, N, g_stream);
        dinp_bits[run] = snapshot_floatX(d_dinp, N);
    }
    // in place: the same bits as out of place (each element is read, then written, by one thread)
    upload_floatX(d_dinp, dout, N);
    gelu_backward(d_dinp, d_inp, d_dinp, N, g_stream);
    void* in_place_bits = snapshot_floatX(d_dinp, N);
    check_same_bits(bwd, "in place (dinp == dout): same bits as out of place", dinp_bits[0], in_place_bits,
                    N * sizeof(floatX));
    check_twice(bwd, "dinp", dinp_bits, dinp_ref, N, TOL_OUT);

    device_free(d_inp); device_free(d_out); device_free(d_dout); device_free(d_dinp);
    free(inp); free(out_ref); free(out); free(dout); free(dinp_ref); free(in_place_bits);
}

// ----------------------------------------------------------------------------
// fused classifier: losses, and dlogits written over the logits

typedef struct { int BT, V, Vp; } ClassifierShape;

static const ClassifierShape CLASSIFIER_SHAPES[] = {
    {128, 50257, 50304}, // GPT-2: 47 padded columns (bf16: held in registers, streamed; fp32: over 7 packs a thread, reread)
    {7, 100, 128},
    {1, 100, 128},       // a single row
    {3, 60000, 60032},   // over 7 packs a thread in bf16 too: the reread kernel
};

// The streamed kernel's grids besides the default (one block per SM, at most BT): each block
// walks rows b, b + grid, ...; grids that do not divide BT leave the blocks unequal work, 1 block
// walks every row; only those <= BT apply
static const int CLASSIFIER_STREAMED_GRIDS[] = {1, 2, 3, 5, 50};

static void check_classifier(const ClassifierShape* s) {
    int BT = s->BT, V = s->V, Vp = s->Vp;
    size_t n = (size_t)BT * Vp;
    char what[96];
    snprintf(what, sizeof(what), "fused_classifier BT=%d V=%d Vp=%d", BT, V, Vp);
    float dloss = 1.0f / BT; // the gradient of the mean loss

    // the padded columns hold a large logit: were they not skipped, every loss would change
    float* logits = random_floatX(n, 0.0f, 2.0f);
    for (int bt = 0; bt < BT; bt++) {
        for (int i = V; i < Vp; i++) { logits[(size_t)bt * Vp + i] = 50.0f; }
    }
    int* targets = random_tokens(BT, V);
    targets[0] = 0;
    targets[BT - 1] = V - 1; // both ends of the vocabulary
    float* probs = host_zeros(n);
    float* losses_ref = host_zeros(BT);
    float* dlogits_ref = host_zeros(n);
    softmax_crossentropy_forward(probs, losses_ref, logits, targets, 1, BT, V, Vp);
    softmax_crossentropy_backward(dlogits_ref, probs, targets, dloss, 1, BT, V, Vp);

    floatX* d_logits = device_floatX(logits, n);
    int* d_targets = device_ints(targets, BT);
    float* d_losses = (float*)device_alloc(BT * sizeof(float));
    void* logits_bits = snapshot_floatX(d_logits, n);

    // the loss alone (evaluation): the logits stay as they were
    fill_nan(d_losses, BT * sizeof(float));
    fused_classifier(d_logits, d_losses, d_targets, dloss, BT, V, Vp, 0, g_stream);
    float* losses = download_float(d_losses, BT);
    void* kept_bits = snapshot_floatX(d_logits, n);
    check_close(what, "losses (write_dlogits 0)", losses, losses_ref, BT, TOL_FP32_STATS);
    check_same_bits(what, "logits unchanged when write_dlogits 0", logits_bits, kept_bits, n * sizeof(floatX));

    // the loss and dlogits, twice from the same logits
    void* dlogits_bits[2];
    void* losses_bits[2];
    for (int run = 0; run < 2; run++) {
        upload_floatX(d_logits, logits, n);
        fill_nan(d_losses, BT * sizeof(float));
        fused_classifier(d_logits, d_losses, d_targets, dloss, BT, V, Vp, 1, g_stream);
        dlogits_bits[run] = snapshot_floatX(d_logits, n);
        losses_bits[run] = download_bytes(d_losses, BT * sizeof(float));
    }
    // where the row fits in the registers, every kernel gives the same bits: the reread kernel
    // (pass 2 reads the logits again), the held kernel (one block a row, from registers) and the
    // streamed kernel at several grids (a block walks rows, each copied into shared memory while
    // the one before computes): the same per-pack math in the same order, only where the logits come from
    if (classifier_rows_held(Vp)) {
        const char* names[] = {"the reread kernel", "the held kernel", "the streamed kernel"};
        for (int kernel = CLASSIFIER_REREAD; kernel <= CLASSIFIER_STREAMED; kernel++) {
            if (kernel == CLASSIFIER_STREAMED && !classifier_streamed_fits(Vp)) { continue; }
            int ngrids = kernel == CLASSIFIER_STREAMED ? (int)(sizeof(CLASSIFIER_STREAMED_GRIDS) / sizeof(int)) + 1 : 1;
            for (int g = 0; g < ngrids; g++) {
                int grid = g == 0 ? 0 : CLASSIFIER_STREAMED_GRIDS[g - 1]; // 0: the launcher's
                // at GPT-2's Vp, only the launcher's grid and 3 (not a divisor of 128 rows): each
                // launch there costs the emulator ~0.5 s, and the small shapes walk every grid
                if (grid > BT || (Vp > 1024 && grid != 0 && grid != 3)) { continue; }
                upload_floatX(d_logits, logits, n);
                fill_nan(d_losses, BT * sizeof(float));
                fused_classifier_with(kernel, grid, d_logits, d_losses, d_targets, dloss, BT, V, Vp, 1, g_stream);
                void* other_dlogits = snapshot_floatX(d_logits, n);
                void* other_losses = download_bytes(d_losses, BT * sizeof(float));
                char which[96], label[128];
                if (kernel == CLASSIFIER_STREAMED) {
                    snprintf(which, sizeof(which), "the streamed kernel's bits, grid %d%s",
                             grid ? grid : classifier_streamed_grid(BT), grid ? "" : " (the launcher's)");
                } else {
                    snprintf(which, sizeof(which), "%s's bits", names[kernel]);
                }
                snprintf(label, sizeof(label), "dlogits: %s", which);
                check_same_bits(what, label, dlogits_bits[0], other_dlogits, n * sizeof(floatX));
                snprintf(label, sizeof(label), "losses: %s", which);
                check_same_bits(what, label, losses_bits[0], other_losses, BT * sizeof(float));
                free(other_dlogits); free(other_losses);
            }
        }
    }
    check_close(what, "losses", (const float*)losses_bits[0], losses_ref, BT, TOL_FP32_STATS);
    check_same_bits(what, "losses: same bits on a second run", losses_bits[0], losses_bits[1], BT * sizeof(float));
    check_twice(what, "dlogits", dlogits_bits, dlogits_ref, n, TOL_DLOGITS);

    device_free(d_logits); device_free(d_targets); device_free(d_losses);
    free(logits); free(targets); free(probs); free(losses_ref); free(dlogits_ref); free(logits_bits);
    free(losses); free(kept_bits); free(losses_bits[0]); free(losses_bits[1]);
}

// ----------------------------------------------------------------------------
// AdamW: three steps over many tensors in one launch, from the same state and gradients
//
// A "unit" repeats a piece of three tensors (as a block unit repeats a block's 12) and ends in
// padding; one launch updates the range [lo, lo + n) of it (a rank's shard), with weight decay on
// the tensors the table marks. The CPU's adamw_update runs tensor by tensor with its own decay.
// Every element outside the range, and the padding, must keep its bits: m and v start nonzero
// there, so an update that touched them would show.

static const size_t ADAMW_PIECE[3] = {1000, 37, 2062}; // a weight, a bias, a weight: 3099 elements
static const int ADAMW_DECAY[3] = {1, 0, 1};
#define ADAMW_PIECE_NUMEL 3099
#define ADAMW_PADDING 29

typedef struct {
    int pieces;       // pieces in the unit
    size_t lo, n;     // the range updated
    float weight_decay;
    float grad_scale; // the clipping factor
} AdamWCase;

static const AdamWCase ADAMW_CASES[] = {
    {1, 0, ADAMW_PIECE_NUMEL + ADAMW_PADDING, 0.0f, 1.0f},      // one piece and the padding, no decay
    {2, 0, 2 * ADAMW_PIECE_NUMEL + ADAMW_PADDING, 0.1f, 0.8f},  // two pieces (-zu 2), decay, clipping
    {2, 1500, 4000, 0.1f, 1.0f},                                // a shard from inside piece 0's last tensor into piece 1
    {2, 5000, 2 * ADAMW_PIECE_NUMEL + ADAMW_PADDING - 5000, 0.1f, 1.0f}, // a shard that ends in the padding
    {2, 1502, 4000, 0.1f, 1.0f},  // a shard at an element not a multiple of 4: the kernel's one-at-a-time path (even: an odd
                                  // start puts two blocks' bf16 params in one 4-byte word, which the emulator's racecheck reports)
};

static void check_adamw(const AdamWCase* c) {
    size_t total = (size_t)c->pieces * ADAMW_PIECE_NUMEL + ADAMW_PADDING, lo = c->lo, hi = c->lo + c->n;
    const int steps = 3;
    char what[128];
    snprintf(what, sizeof(what), "adamw_update %d pieces, [%zu, %zu) of %zu, decay=%g grad_scale=%g, %d steps", c->pieces,
             lo, hi, total, c->weight_decay, c->grad_scale, steps);
    AdamWParams hp; // the CPU's hyperparameters; the GPU gets the same values one by one
    hp.lr = 1e-3f;
    hp.beta1 = 0.9f;
    hp.beta2 = 0.95f;
    hp.eps = 1e-8f;
    hp.weight_decay = c->weight_decay;
    hp.grad_scale = c->grad_scale;
    AdamWTensors table;
    memset(&table, 0, sizeof(table));
    table.piece = ADAMW_PIECE_NUMEL;
    table.real = (unsigned int)(c->pieces * ADAMW_PIECE_NUMEL);
    table.num_tensors = 3;
    for (int k = 0, end = 0; k < 3; k++) {
        end += (int)ADAMW_PIECE[k];
        table.end[k] = (unsigned int)end;
        table.decay[k] = ADAMW_DECAY[k];
    }

    float* master0 = random_float(total, 0.0f, 0.5f);
    float* m0 = random_float(total, 0.0f, 1e-3f);
    float* v0 = random_float(total, 0.0f, 1e-3f);
    for (size_t i = 0; i < total; i++) { v0[i] = v0[i] * v0[i]; } // a second moment is >= 0
    float* params_ref = host_copy(master0, total); // the CPU's params are fp32: they are its master
    float* m_ref = host_copy(m0, total);
    float* v_ref = host_copy(v0, total);
    floatX* d_params = device_floatX(master0, total); // rounded to floatX, as after a previous step
    float* d_master = device_float(master0, total);
    float* d_m = device_float(m0, total);
    float* d_v = device_float(v0, total);
    floatX* d_grads = (floatX*)device_alloc(total * sizeof(floatX));
    // the offloaded optimizer's update (-zo 1: adamw_update_host) on host copies of the same state
    float* master_h = host_copy(master0, total);
    float* m_h = host_copy(m0, total);
    float* v_h = host_copy(v0, total);
    floatX* params_h = (floatX*)mallocCheck(total * sizeof(floatX));
    floatX* grads_h = (floatX*)mallocCheck(total * sizeof(floatX));
    for (size_t i = 0; i < total; i++) { params_h[i] = from_float(master0[i]); }
    for (int t = 1; t <= steps; t++) {
        float* grads = random_floatX(total, 0.0f, 0.01f);
        hp.t = t;
        for (size_t i = 0; i < total; i++) { grads_h[i] = from_float(grads[i]); }
        adamw_update_host(params_h + lo, master_h + lo, grads_h + lo, m_h + lo, v_h + lo, c->n, lo, &table, hp.lr,
                          hp.beta1, hp.beta2, adamw_bias_correction(hp.beta1, t), adamw_bias_correction(hp.beta2, t),
                          hp.eps, c->weight_decay, c->grad_scale);
        for (int piece = 0; piece < c->pieces; piece++) { // the CPU, tensor by tensor, within [lo, hi)
            size_t t0 = (size_t)piece * ADAMW_PIECE_NUMEL;
            for (int k = 0; k < 3; k++) {
                size_t t1 = t0 + ADAMW_PIECE[k], a = t0 > lo ? t0 : lo, b = t1 < hi ? t1 : hi;
                if (a < b) {
                    adamw_update(params_ref + a, grads + a, m_ref + a, v_ref + a, b - a,
                                 ADAMW_DECAY[k] ? c->weight_decay : 0.0f, &hp);
                }
                t0 = t1;
            }
        }
        upload_floatX(d_grads, grads, total);
        adamw_update(d_params + lo, d_master + lo, d_grads + lo, d_m + lo, d_v + lo, c->n, lo, &table, hp.lr, hp.beta1,
                     hp.beta2, adamw_bias_correction(hp.beta1, t), adamw_bias_correction(hp.beta2, t), hp.eps,
                     c->weight_decay, c->grad_scale, g_stream);
        free(grads);
    }
    float* master = download_float(d_master, total);
    float* m = download_float(d_m, total);
    float* v = download_float(d_v, total);
    float* params = download_floatX(d_params, total);
    check_close(what, "master", master, params_ref, total, TOL_ADAMW_STATE);
    check_close(what, "m", m, m_ref, total, TOL_ADAMW_STATE);
    check_close(what, "v", v, v_ref, total, TOL_ADAMW_STATE);
    check_close(what, "params", params, params_ref, total, TOL_ADAMW_PARAMS);
    // the kernel and the host's update (-zo 1) are one function (llmc/adamw.cuh): the same bits, on
    // a GPU too, whatever nvcc contracts (the emulator's EMU_FMAD=1 builds contract as nvcc does)
    float* params_hf = (float*)mallocCheck(total * sizeof(float));
    for (size_t i = 0; i < total; i++) { params_hf[i] = to_float(params_h[i]); }
    check_same_bits(what, "master: the host's update (-zo 1) gives the kernel's bits", master, master_h, total * sizeof(float));
    check_same_bits(what, "m: the host's update gives the kernel's bits", m, m_h, total * sizeof(float));
    check_same_bits(what, "v: the host's update gives the kernel's bits", v, v_h, total * sizeof(float));
    check_same_bits(what, "params: the host's update gives the kernel's bits", params, params_hf, total * sizeof(float));
    free(master_h); free(m_h); free(v_h); free(params_h); free(grads_h); free(params_hf);
    // outside [lo, hi) and in the padding: the very bits the update started from
    size_t touched = 0;
    for (size_t i = 0; i < total; i++) {
        int inside = i >= lo && i < hi && i < table.real;
        if (!inside && (memcmp(&master[i], &master0[i], 4) != 0 || memcmp(&m[i], &m0[i], 4) != 0 || memcmp(&v[i], &v0[i], 4) != 0)) {
            touched++;
        }
    }
    char detail[96];
    snprintf(detail, sizeof(detail), "%zu elements outside the range or in the padding changed", touched);
    report(touched == 0, what, "elements outside the range and the padding left alone", detail);

    device_free(d_params); device_free(d_master); device_free(d_m); device_free(d_v); device_free(d_grads);
    free(master0); free(m0); free(v0); free(params_ref); free(m_ref); free(v_ref); free(master); free(m); free(v);
    free(params);
}

// ----------------------------------------------------------------------------
// global norm: the sum of squares of several slices in one pass, against the CPU's sum_of_squares
// of each slice (both in double)

typedef struct {
    int num_parts;
    size_t n[4];     // the slices' lengths, laid out one after another with a gap of 5 elements
    int fp32_grads;  // the slices are float (-zd fp32 in the bf16 build), not floatX
} GlobalNormCase;

static const GlobalNormCase GLOBAL_NORM_CASES[] = {
    {1, {1000000}, 0},
    {3, {1237, 0, 700001}, 0}, // fewer elements than threads, an empty slice, more
    {4, {96, 5000, 3, 524289}, 1},
    {1, {8 * 524288 + 7}, 0}, // 8 elements a thread and then some: the unrolled loop (GLOBAL_NORM_UNROLL) and its remainder
};

template <typename GradT>
static void check_global_norm_of(const GlobalNormCase* c) {
    size_t total = 0;
    for (int p = 0; p < c->num_parts; p++) { total += c->n[p] + 5; }
    char what[96];
    snprintf(what, sizeof(what), "global_norm_squared %d slices, %zu elements, %s grads", c->num_parts, total,
             sizeof(GradT) == 4 ? "fp32" : "bf16");
    float* x = random_floatX(total, 0.0f, 1.0f); // floatX values: exact in float too
    GradT* hx = (GradT*)mallocCheck(total * sizeof(GradT));
    for (size_t i = 0; i < total; i++) { hx[i] = (GradT)x[i]; }
    GradT* d_x = (GradT*)device_alloc(total * sizeof(GradT));
    upload_bytes(d_x, hx, total * sizeof(GradT));
    GlobalNormPart parts[4];
    double ref = 0.0;
    size_t off = 0;
    for (int p = 0; p < c->num_parts; p++) {
        parts[p].x = d_x + off;
        parts[p].n = c->n[p];
        ref += sum_of_squares(x + off, c->n[p]);
        off += c->n[p] + 5; // the gap is not summed
    }
    GlobalNormPart* d_parts = (GlobalNormPart*)device_alloc(sizeof(parts));
    upload_bytes(d_parts, parts, sizeof(parts));
    double* d_out = (double*)device_alloc(sizeof(double));
    double* d_scratch = (double*)device_alloc(GLOBAL_NORM_SCRATCH * sizeof(double));
    double got[2];
    for (int run = 0; run < 2; run++) {
        fill_nan(d_out, sizeof(double));
        global_norm_squared<GradT>(d_out, d_parts, c->num_parts, d_scratch, g_stream);
        double* h = (double*)download_bytes(d_out, sizeof(double));
        got[run] = *h;
        free(h);
    }
    check_scalar(what, "sum of squares", got[0], ref, GLOBAL_NORM_RTOL);
    check_same_bits(what, "sum of squares: same bits on a second run", &got[0], &got[1], sizeof(double));
    device_free(d_x); device_free(d_parts); device_free(d_out); device_free(d_scratch);
    free(x); free(hx);
}

static void check_global_norm(const GlobalNormCase* c) {
    if (c->fp32_grads) { check_global_norm_of<float>(c); } else { check_global_norm_of<floatX>(c); }
}

// The plan table (llmc/matmul.cuh) is a cache of MATMUL_PLANS: more distinct shapes than that
// evict the least recently used plan instead of failing (sampling once made a new shape per
// token). 3 x MATMUL_PLANS shapes in turn, each product against the CPU's (TOL_MATMUL, as
// check_close reads it), then the first shape again (its plan evicted long ago, made anew): the
// same bits as its first run.
static void check_matmul_plan_cache(void) {
    const int C = 32, OC = 48, shapes = 3 * MATMUL_PLANS;
    const char* what = "matmul plan cache";
    float* inp = random_floatX((size_t)shapes * C, 0.0f, 1.0f);
    float* weight = random_floatX((size_t)OC * C, 0.0f, 1.0f / sqrtf((float)C));
    floatX* d_inp = device_floatX(inp, (size_t)shapes * C);
    floatX* d_weight = device_floatX(weight, (size_t)OC * C);
    floatX* d_out = (floatX*)device_alloc((size_t)shapes * OC * sizeof(floatX));
    float* out_ref = host_zeros((size_t)shapes * OC);
    unsigned long long evicted0 = g_matmul_plans_evicted;
    double worst_ratio = 0.0;
    int worst_bt = 0;
    void* first = NULL;
    for (int BT = 1; BT <= shapes; BT++) { // m = OC, n = BT, k = C: a new shape each time
        size_t n = (size_t)BT * OC;
        fill_nan(d_out, n * sizeof(floatX));
        matmul_forward(d_out, d_inp, d_weight, NULL, BT, C, OC, g_stream);
        float* out = download_floatX(d_out, n);
        memset(out_ref, 0, n * sizeof(float));
        matmul_forward(out_ref, inp, weight, NULL, 1, BT, C, OC);
        double rms = rms_of(out_ref, n);
        for (size_t i = 0; i < n; i++) {
            double err = fabs((double)out[i] - out_ref[i]);
            double allowed = TOL_MATMUL.atol * rms + TOL_MATMUL.rtol * fabs((double)out_ref[i]);
            double ratio = err != err ? INFINITY : (err == 0.0 ? 0.0 : err / allowed);
            if (ratio > worst_ratio) { worst_ratio = ratio; worst_bt = BT; }
        }
        if (BT == 1) { first = snapshot_floatX(d_out, OC); }
        free(out);
    }
    char label[96], detail[160];
    snprintf(label, sizeof(label), "%d shapes through %d plans", shapes, MATMUL_PLANS);
    snprintf(detail, sizeof(detail), "worst %.2f of TOL_MATMUL's bound (BT=%d)", worst_ratio, worst_bt);
    report(worst_ratio <= 1.0, what, label, detail);
    unsigned long long evicted = g_matmul_plans_evicted - evicted0;
    snprintf(detail, sizeof(detail), "%llu evicted, %d kept", evicted, g_matmul_plan_count);
    report(evicted >= (unsigned long long)(shapes - MATMUL_PLANS) && g_matmul_plan_count == MATMUL_PLANS, what,
           "the least recently used plans make room", detail);
    matmul_forward(d_out, d_inp, d_weight, NULL, 1, C, OC, g_stream);
    void* again = snapshot_floatX(d_out, OC);
    check_same_bits(what, "an evicted shape made anew: its first run's bits", first, again, OC * sizeof(floatX));
    device_free(d_inp); device_free(d_weight); device_free(d_out);
    free(inp); free(weight); free(out_ref); free(first); free(again);
}

// attention_decode (sampling's one position against the key-value cache): the CPU's causal
// forward over positions 0..pos gives row pos; the cache's rows after pos are NaN on the device,
// so a kernel reading past pos fails. Both builds: fp32 scores and weights, one rounding of the
// output to floatX, so TOL_OUT (the bf16 flash forward's P rounding is not in this kernel).
static void check_attention_decode(const AttentionShape* s) {
    int T = s->T, C = s->C, NH = s->NH, pos = T - 1 - T / 3; // rows pos+1..T-1 are past the query
    size_t n_qkv = (size_t)T * 3 * C;
    char what[128];
    snprintf(what, sizeof(what), "attention_decode pos=%d of T=%d C=%d NH=%d hs=%d", pos, T, C, NH, C / NH);
    float* qkv = random_floatX(n_qkv, 0.0f, 1.0f);
    float* out_ref = host_zeros((size_t)(pos + 1) * C);
    float* att = host_zeros((size_t)NH * (pos + 1) * (pos + 1));
    attention_forward(out_ref, att, qkv, 1, pos + 1, C, NH);
    floatX* d_qkv = device_floatX(qkv, n_qkv);
    fill_nan(d_qkv + (size_t)(pos + 1) * 3 * C, (size_t)(T - pos - 1) * 3 * C * sizeof(floatX));
    floatX* d_out = (floatX*)device_alloc(C * sizeof(floatX));
    fill_nan(d_out, C * sizeof(floatX));
    attention_decode(d_out, d_qkv, pos, C, NH, g_stream);
    float* out = download_floatX(d_out, C);
    check_close(what, "out", out, out_ref + (size_t)pos * C, C, TOL_OUT);
    device_free(d_qkv); device_free(d_out);
    free(qkv); free(out_ref); free(att); free(out);
}

// ----------------------------------------------------------------------------
// correctness: every check, then the summary line

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

// --only FAMILY: one family of kernels (make check's quick tier), else every family; with --bench,
// that family's rows (dev/gpu_check.sh --emu: the emulator cannot time 124M parameters' AdamW quickly)
static const char* g_only = NULL;
static const char* const FAMILIES = "encoder, layernorm, fused_residual, matmul, attention, gelu, classifier, adamw, global_norm";
static int family(const char* name) { return g_only == NULL || strcmp(g_only, name) == 0; }

static int run_correctness(void) {
    rng_init(&g_rng, 1337);
    if (family("encoder")) { for (size_t i = 0; i < COUNT_OF(ENCODER_SHAPES); i++) { check_encoder(&ENCODER_SHAPES[i]); } }
    if (family("layernorm")) { for (size_t i = 0; i < COUNT_OF(LAYERNORM_SHAPES); i++) { check_layernorm(&LAYERNORM_SHAPES[i]); } }
    if (family("fused_residual")) {
        for (size_t i = 0; i < COUNT_OF(FUSED_RESIDUAL_SHAPES); i++) { check_fused_residual_layernorm(&FUSED_RESIDUAL_SHAPES[i]); }
    }
    if (family("matmul")) {
        for (size_t i = 0; i < COUNT_OF(MATMUL_SHAPES); i++) { check_matmul(&MATMUL_SHAPES[i]); }
        for (size_t i = 0; i < COUNT_OF(MATMUL_GELU_SHAPES); i++) { check_matmul_gelu(&MATMUL_GELU_SHAPES[i]); }
        check_matmul_plan_cache();
    }
    if (family("attention")) {
        for (size_t i = 0; i < COUNT_OF(ATTENTION_SHAPES); i++) { check_attention(&ATTENTION_SHAPES[i]); }
#if defined(ENABLE_BF16)
        // where the hs-64 shapes above ran the sm_90a forward, the mma.sync one at hs 64 too
        if (attention_sm90_use(64)) {
            attention_sm90_mode = 0;
            for (size_t i = 0; i < COUNT_OF(ATTENTION_SHAPES); i++) {
                if (ATTENTION_SHAPES[i].C / ATTENTION_SHAPES[i].NH == 64) { check_attention(&ATTENTION_SHAPES[i]); }
            }
            attention_sm90_mode = -1;
        }
#endif
        for (size_t i = 0; i < COUNT_OF(ATTENTION_SHAPES); i++) { check_attention_decode(&ATTENTION_SHAPES[i]); }
    }
    if (family("gelu")) { for (size_t i = 0; i < COUNT_OF(GELU_SIZES); i++) { check_gelu(GELU_SIZES[i]); } }
    if (family("classifier")) { for (size_t i = 0; i < COUNT_OF(CLASSIFIER_SHAPES); i++) { check_classifier(&CLASSIFIER_SHAPES[i]); } }
    if (family("adamw")) { for (size_t i = 0; i < COUNT_OF(ADAMW_CASES); i++) { check_adamw(&ADAMW_CASES[i]); } }
    if (family("global_norm")) { for (size_t i = 0; i < COUNT_OF(GLOBAL_NORM_CASES); i++) { check_global_norm(&GLOBAL_NORM_CASES[i]); } }
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}

// ----------------------------------------------------------------------------
// benchmark: the peaks of the device

typedef struct {
    const char* name_has;       // a substring of cudaDeviceProp.name; the first match wins
    double gbs;                 // memory bandwidth, GB/s
    double tflops_bf16;         // dense bf16 tensor-core TFLOP/s
    double tflops_fp32;         // fp32 (non-tensor) TFLOP/s
} DatasheetPeak;

// datasheet numbers; the more specific names first
static const DatasheetPeak DATASHEET_PEAKS[] = {
    {"H100 PCIe", 2000, 756, 51},
    {"H100 NVL", 3900, 835, 60},
    {"H100", 3350, 989, 67},  // SXM, e.g. "NVIDIA H100 80GB HBM3"
    {"H200", 4800, 989, 67},
    {"A100-SXM4-40GB", 1555, 312, 19.5},
    {"A100-PCIE-40GB", 1555, 312, 19.5},
    {"A100 80GB PCIe", 1935, 312, 19.5},
    {"A100", 2039, 312, 19.5}, // SXM4 80GB
};

typedef struct {
    double gbs;    // bytes per second / 1e9 for the floor
    double tflops; // FLOP/s / 1e12 of this build's precision; 0: unknown
    char source[160];
} Peak;

#define BENCH_WARMUP 3
#define BENCH_RUNS 20

static int compare_floats(const void* a, const void* b) {
    float x = *(const float*)a, y = *(const float*)b;
    return (x > y) - (x < y);
}

// the median time of one launch, in ms, over BENCH_RUNS timed runs after BENCH_WARMUP untimed ones
template <typename Launch>
static float median_ms(Launch launch) {
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    for (int i = 0; i < BENCH_WARMUP; i++) { launch(); }
    float ms[BENCH_RUNS];
    for (int i = 0; i < BENCH_RUNS; i++) {
        cudaCheck(cudaEventRecord(start, g_stream));
        launch();
        cudaCheck(cudaEventRecord(stop, g_stream));
        cudaCheck(cudaEventSynchronize(stop));
        cudaCheck(cudaEventElapsedTime(&ms[i], start, stop));
    }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    qsort(ms, BENCH_RUNS, sizeof(float), compare_floats);
    return 0.5f * (ms[BENCH_RUNS / 2 - 1] + ms[BENCH_RUNS / 2]);
}

// GB/s of a 1 GiB device-to-device copy, counting its read and its write
static double measure_copy_bandwidth(void) {
    size_t bytes = (size_t)1 << 30;
    void* src = device_alloc(bytes);
    void* dst = device_alloc(bytes);
    float ms = median_ms([&] { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g_stream)); });
    device_free(src);
    device_free(dst);
    return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

static Peak device_peak(const char* device_name, double measured_gbs) {
    Peak p;
    for (size_t i = 0; i < COUNT_OF(DATASHEET_PEAKS); i++) {
        const DatasheetPeak* d = &DATASHEET_PEAKS[i];
        if (strstr(device_name, d->name_has) != NULL) {
            p.gbs = d->gbs;
#if defined(ENABLE_FP32)
            p.tflops = d->tflops_fp32;
#else
            p.tflops = d->tflops_bf16;
#endif
            snprintf(p.source, sizeof(p.source), "datasheet ('%s'): %.0f GB/s, %.1f TFLOP/s %s (measured D2D copy: "
                     "%.0f GB/s)", d->name_has, p.gbs, p.tflops, PRECISION_NAME, measured_gbs);
            return p;
        }
    }
    p.gbs = measured_gbs;
    p.tflops = 0.0;
    snprintf(p.source, sizeof(p.source), "device not in the table: measured D2D copy %.0f GB/s, FLOP/s n/a",
             measured_gbs);
    return p;
}

// --csv FILE: every benchmark row also as "kernel,ms,bytes,flops", for dev/gpu_check.sh to join with
// the performance model's prediction of the same row (dev/perf/join_measured.py)
static FILE* g_bench_csv = NULL;

// one row of the markdown table; flops 0 where FLOPs do not matter
static void bench_row(const Peak* peak, const char* kernel, float ms, double bytes, double flops) {
    if (g_bench_csv != NULL) { fprintf(g_bench_csv, "\"%s\",%.6f,%.0f,%.0f\n", kernel, ms, bytes, flops); fflush(g_bench_csv); }
    double s = ms * 1e-3;
    char gflop[32] = "-", tflops[32] = "-", floor_ms[32] = "n/a", ratio[32] = "n/a";
    double floor_s = bytes / (peak->gbs * 1e9);
    int floor_known = 1;
    if (flops > 0.0) {
        snprintf(gflop, sizeof(gflop), "%.1f", flops / 1e9);
        snprintf(tflops, sizeof(tflops), "%.1f", flops / s / 1e12);
        if (peak->tflops > 0.0) { floor_s = fmax(floor_s, flops / (peak->tflops * 1e12)); }
        else { floor_known = 0; } // a bandwidth-only floor would flatter a compute-bound kernel
    }
    if (floor_known) {
        snprintf(floor_ms, sizeof(floor_ms), "%.4f", floor_s * 1e3);
        snprintf(ratio, sizeof(ratio), "%.1f", s / floor_s);
    }
    printf("| %-40s | %8.4f | %9.1f | %6.0f | %7s | %7s | %8s | %6s |\n", kernel, ms, bytes / 1e6, bytes / s / 1e9,
           gflop, tflops, floor_ms, ratio);
    fflush(stdout);
}

// ----------------------------------------------------------------------------
// benchmark: device buffers of random values, then one function per kernel family

typedef struct { int B, T, C, NH, V, Vp; } BenchShape;

// a stateless hash of (seed, i) to [0, 1): the splitmix64 finalizer, as rand.h seeds with
__device__ inline float hash_uniform(uint64_t seed, size_t i) {
    uint64_t z = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) / 16777216.0f;
}

__device__ inline void store_float(float* p, float v) { *p = v; }
__device__ inline void store_float(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__global__ void fill_uniform_kernel(T* x, size_t n, uint64_t seed, float lo, float hi) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { store_float(&x[i], lo + (hi - lo) * hash_uniform(seed, i)); }
}

static uint64_t g_bench_seed = 1;

// n device values uniform in [lo, hi)
template <typename T>
static T* bench_buffer(size_t n, float lo, float hi) {
    T* x = (T*)device_alloc(n * sizeof(T));
    fill_uniform_kernel<T><<<ceil_div(n, 256), 256, 0, g_stream>>>(x, n, g_bench_seed++, lo, hi);
    cudaCheckLaunch();
    return x;
}

static int count_distinct(const int* tokens, int n, int range) {
    char* seen = (char*)callocCheck(range, 1);
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        if (!seen[tokens[i]]) { seen[tokens[i]] = 1; distinct++; }
    }
    free(seen);
    return distinct;
}

static const double SX = sizeof(floatX); // bytes per floatX element

static void bench_encoder(const BenchShape* s, const Peak* peak) {
    int B = s->B, T = s->T, C = s->C, BT = B * T;
    int* tokens = random_tokens(BT, s->V);
    double rows = count_distinct(tokens, BT, s->V); // the rows of wte read (forward) or updated (backward)
    int* d_tokens = device_ints(tokens, BT);
    floatX* wte = bench_buffer<floatX>((size_t)s->Vp * C, -1.0f, 1.0f);
    floatX* wpe = bench_buffer<floatX>((size_t)T * C, -1.0f, 1.0f);
    floatX* out = bench_buffer<floatX>((size_t)BT * C, -1.0f, 1.0f);
    EncoderBackwardScratch scratch;
    encoder_backward_scratch_init(&scratch, B, T);

    float ms = median_ms([&] { encoder_forward(out, d_tokens, wte, wpe, B, T, C, g_stream); });
    bench_row(peak, "encoder_forward", ms, 4.0 * BT + (rows + T + BT) * C * SX, 0.0);
    // wte and wpe stand in for their gradients; out for dout
    ms = median_ms([&] { encoder_backward(wte, wpe, out, tokens, B, T, C, &scratch, g_stream); });
    bench_row(peak, "encoder_backward (incl. host bucket sort)", ms,
              4.0 * BT + ((double)BT + 2.0 * (rows + T)) * C * SX, 0.0);

    encoder_backward_scratch_free(&scratch);
    device_free(d_tokens); device_free(wte); device_free(wpe); device_free(out);
    free(tokens);
}

static void bench_layernorm(const BenchShape* s, const Peak* peak) {
    int N = s->B * s->T, C = s->C;
    size_t n = (size_t)N * C;
    floatX* inp = bench_buffer<floatX>(n, -2.0f, 2.0f);
    floatX* inp2 = bench_buffer<floatX>(n, -2.0f, 2.0f);
    floatX* residual = bench_buffer<floatX>(n, -2.0f, 2.0f);
    floatX* out = bench_buffer<floatX>(n, -2.0f, 2.0f);
    floatX* dout = bench_buffer<floatX>(n, -1.0f, 1.0f);
    floatX* dinp = bench_buffer<floatX>(n, -1.0f, 1.0f);
    floatX* weight = bench_buffer<floatX>(C, 0.5f, 1.5f);
    floatX* bias = bench_buffer<floatX>(C, -0.5f, 0.5f);
    floatX* dweight = bench_buffer<floatX>(C, -1.0f, 1.0f);
    floatX* dbias = bench_buffer<floatX>(C, -1.0f, 1.0f);
    float* mean = bench_buffer<float>(N, -0.1f, 0.1f);
    float* rstd = bench_buffer<float>(N, 0.5f, 1.5f);
    float* scratch = (float*)device_alloc(layernorm_backward_scratch_floats(N, C) * sizeof(float));
    double nc = (double)n, stats = 2.0 * N * sizeof(float);

    float ms = median_ms([&] { layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, g_stream); });
    bench_row(peak, "layernorm_forward", ms, (2.0 * nc + 2.0 * C) * SX + stats, 0.0);
    ms = median_ms([&] {
        fused_residual_layernorm_forward(residual, out, mean, rstd, inp, inp2, weight, bias, N, C, g_stream);
    });
    bench_row(peak, "fused_residual_layernorm_forward", ms, (4.0 * nc + 2.0 * C) * SX + stats, 0.0);
    // reads dout, inp, dinp, weight, mean, rstd; writes dinp; dweight and dbias read and written
    ms = median_ms([&] {
        layernorm_backward(dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C, g_stream);
    });
    bench_row(peak, "layernorm_backward", ms, (4.0 * nc + 5.0 * C) * SX + stats, 0.0);

    device_free(inp); device_free(inp2); device_free(residual); device_free(out); device_free(dout);
    device_free(dinp); device_free(weight); device_free(bias); device_free(dweight); device_free(dbias);
    device_free(mean); device_free(rstd); device_free(scratch);
}

static void bench_matmuls(const BenchShape* s, const Peak* peak) {
    int BT = s->B * s->T, C = s->C;
    const MatmulShape layers[] = {
        {"qkv", BT, C, 3 * C, 1},
        {"attproj", BT, C, C, 1},
        {"fc", BT, C, 4 * C, 1},
        {"fcproj", BT, 4 * C, C, 1},
        {"lm head", BT, C, s->Vp, 0},
    };
    // buffers for the largest of each: inputs up to (BT,4C), weights and outputs up to the LM head's
    size_t max_in = (size_t)BT * 4 * C, max_w = (size_t)s->Vp * C, max_out = (size_t)BT * s->Vp;
    floatX* inp = bench_buffer<floatX>(max_in, -1.0f, 1.0f);
    floatX* dinp = bench_buffer<floatX>(max_in, -1.0f, 1.0f);
    floatX* weight = bench_buffer<floatX>(max_w, -0.05f, 0.05f);
    floatX* dweight = bench_buffer<floatX>(max_w, -0.05f, 0.05f);
    floatX* out = bench_buffer<floatX>(max_out, -1.0f, 1.0f);
    floatX* dout = bench_buffer<floatX>(max_out, -1.0f, 1.0f);
    floatX* bias = bench_buffer<floatX>(4 * C, -0.1f, 0.1f);
    floatX* dbias = bench_buffer<floatX>(4 * C, -0.1f, 0.1f);
    float* scratch = (float*)device_alloc(matmul_dbias_scratch_floats(4 * C) * sizeof(float));

    for (size_t i = 0; i < COUNT_OF(layers); i++) {
        const MatmulShape* l = &layers[i];
        int K = l->C, OC = l->OC;
        floatX* b = l->has_bias ? bias : NULL;
        floatX* db = l->has_bias ? dbias : NULL;
        float* sc = l->has_bias ? scratch : NULL;
        double in = (double)BT * K, w = (double)OC * K, o = (double)BT * OC, nb = l->has_bias ? OC : 0.0;
        double flops = 2.0 * BT * K * OC;
        char name[64];
        snprintf(name, sizeof(name), "matmul_forward %s (%d->%d)", l->name, K, OC);
        float ms = median_ms([&] { matmul_forward(out, inp, weight, b, BT, K, OC, g_stream); });
        bench_row(peak, name, ms, (in + w + o + nb) * SX, flops);
        // reads dout, inp, weight; writes dinp; dweight and dbias read and written
        snprintf(name, sizeof(name), "matmul_backward %s (%d->%d)", l->name, K, OC);
        ms = median_ms([&] { matmul_backward(dinp, dweight, db, sc, dout, inp, weight, BT, K, OC, g_stream); });
        bench_row(peak, name, ms, (o + in + w + in + 2.0 * w + 2.0 * nb) * SX, 2.0 * flops);
    }

    device_free(inp); device_free(dinp); device_free(weight); device_free(dweight); device_free(out);
    device_free(dout); device_free(bias); device_free(dbias); device_free(scratch);
}

static void bench_attention(const BenchShape* s, const Peak* peak) {
    int B = s->B, T = s->T, C = s->C, NH = s->NH, hs = C / NH;
    size_t btc = (size_t)B * T * C, n_lse = (size_t)B * NH * T;
    floatX* qkv = bench_buffer<floatX>(3 * btc, -1.0f, 1.0f);
    floatX* out = bench_buffer<floatX>(btc, -1.0f, 1.0f);
    floatX* dout = bench_buffer<floatX>(btc, -1.0f, 1.0f);
    floatX* dqkv = bench_buffer<floatX>(3 * btc, -1.0f, 1.0f);
    floatX* dbias = bench_buffer<floatX>(3 * (size_t)C, -1.0f, 1.0f); // the qkv bias gradient (added to)
    float* lse = (float*)device_alloc(n_lse * sizeof(float));
    float* scratch = (float*)device_alloc(attention_backward_scratch_floats(B, T, C, NH) * sizeof(float));
    // causal: T(T+1)/2 (query, key) pairs per head, 2 matmuls (q k^T, P v) of 2 FLOPs per multiply-add;
    // the backward's minimum is 5 such matmuls (s again, dP, dV, dK, dQ), FlashAttention-2's 2.5x.
    // (These kernels compute s and dP twice: 7.)
    double fwd_flops = 2.0 * B * NH * hs * (double)T * (T + 1);
    double lse_bytes = n_lse * sizeof(float);

    float ms = median_ms([&] { attention_forward(out, lse, qkv, B, T, C, NH, g_stream); });
    bench_row(peak, "attention_forward", ms, 4.0 * btc * SX + lse_bytes, fwd_flops);
    // reads dout, qkv, out, lse; writes dqkv
    ms = median_ms([&] { attention_backward(dqkv, dbias, scratch, dout, qkv, out, lse, B, T, C, NH, g_stream); });
    bench_row(peak, "attention_backward", ms, 8.0 * btc * SX + lse_bytes, 2.5 * fwd_flops);

    device_free(qkv); device_free(out); device_free(dout); device_free(dqkv); device_free(dbias); device_free(lse);
    device_free(scratch);
}

static void bench_gelu(const BenchShape* s, const Peak* peak) {
    size_t N = (size_t)s->B * s->T * 4 * s->C;
    floatX* inp = bench_buffer<floatX>(N, -3.0f, 3.0f);
    floatX* out = bench_buffer<floatX>(N, -1.0f, 1.0f);
    floatX* dinp = bench_buffer<floatX>(N, -1.0f, 1.0f);
    float ms = median_ms([&] { gelu_forward(out, inp, N, g_stream); });
    bench_row(peak, "gelu_forward", ms, 2.0 * N * SX, 0.0);
    ms = median_ms([&] { gelu_backward(dinp, inp, out, N, g_stream); });
    bench_row(peak, "gelu_backward", ms, 3.0 * N * SX, 0.0);
    device_free(inp); device_free(out); device_free(dinp);
}

static void bench_classifier(const BenchShape* s, const Peak* peak) {
    int BT = s->B * s->T;
    size_t n = (size_t)BT * s->Vp;
    floatX* logits = bench_buffer<floatX>(n, -4.0f, 4.0f);
    float* losses = (float*)device_alloc(BT * sizeof(float));
    int* targets = random_tokens(BT, s->V);
    int* d_targets = device_ints(targets, BT);
    // every run after the first reads the previous dlogits as its logits: finite values, the same work
    float ms = median_ms([&] {
        fused_classifier(logits, losses, d_targets, 1.0f / BT, BT, s->V, s->Vp, 1, g_stream);
    });
    bench_row(peak, "fused_classifier (loss + dlogits)", ms, 2.0 * n * SX + 8.0 * BT, 0.0);
    device_free(logits); device_free(losses); device_free(d_targets);
    free(targets);
}

// the optimizer step and the gradient norm over every parameter of GPT-2 124M (Vp = 50304)
static void bench_update(const Peak* peak) {
    const size_t n = 124475904;
    floatX* params = bench_buffer<floatX>(n, -0.1f, 0.1f);
    floatX* grads = bench_buffer<floatX>(n, -0.01f, 0.01f);
    float* master = bench_buffer<float>(n, -0.1f, 0.1f);
    float* m = bench_buffer<float>(n, -0.001f, 0.001f);
    float* v = bench_buffer<float>(n, 0.0f, 1e-5f);
    double* norm = (double*)device_alloc(sizeof(double));
    double* scratch = (double*)device_alloc(GLOBAL_NORM_SCRATCH * sizeof(double));
    // one launch over all of them (the trainer makes one per unit: 13 at 124M)
    AdamWTensors all = adamw_one_tensor(n, 1);
    float ms = median_ms([&] {
        adamw_update(params, master, grads, m, v, n, 0, &all, 6e-4f, 0.9f, 0.95f, adamw_bias_correction(0.9f, 10),
                     adamw_bias_correction(0.95f, 10), 1e-8f, 0.1f, 1.0f, g_stream);
    });
    // reads grads, master, m, v; writes master, m, v, params
    bench_row(peak, "adamw_update (124M params)", ms, (double)n * (2.0 * SX + 6.0 * sizeof(float)), 0.0);
    GlobalNormPart part = {grads, n};
    GlobalNormPart* d_part = (GlobalNormPart*)device_alloc(sizeof(part));
    upload_bytes(d_part, &part, sizeof(part));
    ms = median_ms([&] { global_norm_squared<floatX>(norm, d_part, 1, scratch, g_stream); });
    bench_row(peak, "global_norm_squared (124M params)", ms, (double)n * SX, 0.0);
    device_free(params); device_free(grads); device_free(master); device_free(m); device_free(v);
    device_free(norm); device_free(scratch); device_free(d_part);
}

static int run_bench(const BenchShape* s, const cudaDeviceProp* prop) {
    rng_init(&g_rng, 1337);
    Peak peak = device_peak(prop->name, measure_copy_bandwidth());
    printf("\n### Kernel times: %s, %s build, B=%d T=%d C=%d NH=%d V=%d Vp=%d\n\n", prop->name, PRECISION_NAME,
           s->B, s->T, s->C, s->NH, s->V, s->Vp);
    printf("Peak: %s. Median of %d runs after %d warm-ups. MB: the least bytes the kernel must read and write\n"
           "(each tensor once, scratch not counted). Floor: max(bytes / peak bandwidth, FLOPs / peak FLOP/s).\n\n",
           peak.source, BENCH_RUNS, BENCH_WARMUP);
    printf("| %-40s | %8s | %9s | %6s | %7s | %7s | %8s | %6s |\n", "kernel", "ms", "MB", "GB/s", "GFLOP", "TFLOP/s",
           "floor ms", "x floor");
    printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------------------------", "---------:",
           "----------:", "-------:", "--------:", "--------:", "---------:", "-------:");
    if (family("encoder")) { bench_encoder(s, &peak); }
    if (family("layernorm") || family("fused_residual")) { bench_layernorm(s, &peak); }
    if (family("matmul")) { bench_matmuls(s, &peak); }
    if (family("attention")) { bench_attention(s, &peak); }
    if (family("gelu")) { bench_gelu(s, &peak); }
    if (family("classifier")) { bench_classifier(s, &peak); }
    if (family("adamw") || family("global_norm")) { bench_update(&peak); }
    return 0;
}

// ----------------------------------------------------------------------------
// command line and main

// ----------------------------------------------------------------------------
// --misaligned KERNEL: the 16-byte kernels' launchers refuse a pointer that is not 16-byte
// aligned (one element past an allocation's start) with a message naming it, and exit 1 before
// any launch; dev/test/test_step_sync.sh runs each and checks the message. Returns only if the
// launcher accepted the pointer (a failed check).

static const char* const MISALIGNED_KERNELS[] = {"gelu", "layernorm", "layernorm_backward", "encoder", "dbias", "classifier"};

static int run_misaligned(const char* kernel) {
    const int N = 4, C = 64, V = 100, Vp = 128;
    floatX* a = (floatX*)device_alloc((size_t)N * Vp * sizeof(floatX) + 16);
    floatX* b = (floatX*)device_alloc((size_t)N * Vp * sizeof(floatX) + 16);
    floatX* w = (floatX*)device_alloc(Vp * sizeof(floatX) + 16);
    float* stats = (float*)device_alloc((size_t)N * Vp * sizeof(float) + 16);
    int* tokens = (int*)device_alloc(N * sizeof(int)); // zeros: token 0 everywhere
    int host_tokens[N] = {0, 0, 0, 0};
    floatX* off = a + 1; // 2 or 4 bytes past a 256-byte boundary
    if (strcmp(kernel, "gelu") == 0) { gelu_forward(off, b, (size_t)N * C, g_stream); }
    else if (strcmp(kernel, "layernorm") == 0) { layernorm_forward(b, stats, stats, off, w, w, N, C, g_stream); }
    else if (strcmp(kernel, "layernorm_backward") == 0) {
        layernorm_backward(off, w, w, stats, b, b, w, stats, stats, N, C, g_stream);
    } else if (strcmp(kernel, "encoder") == 0) {
        EncoderBackwardScratch scratch;
        encoder_backward_scratch_init(&scratch, 1, N);
        encoder_backward(off, w, b, host_tokens, 1, N, C, &scratch, g_stream);
    } else if (strcmp(kernel, "dbias") == 0) {
        matmul_backward(b, w, w, stats, off, b, w, N, 1, C, g_stream); // dbias reads dout = off
    } else if (strcmp(kernel, "classifier") == 0) { fused_classifier(off, stats, tokens, 1.0f, N, V, Vp, 1, g_stream); }
    else { fail("--misaligned: unknown kernel '%s'", kernel); }
    cudaCheck(cudaStreamSynchronize(g_stream));
    printf("FAIL --misaligned %s: the launcher accepted a pointer 1 element past a 16-byte boundary\n", kernel);
    return 1;
}

static const char* USAGE =
    "usage: test_kernels [--only FAMILY] [--bench [-b B] [-t T] [--csv FILE]] | --misaligned KERNEL\n"
    "  (no flags)  every CUDA kernel against its CPU twin, and twice for the same bits\n"
    "  --only F    the same for one family F of kernels (encoder, layernorm, ..., global_norm);\n"
    "              with --bench, the rows of that family\n"
    "  --bench     time each kernel at the GPT-2 124M training shape against its floor\n"
    "  -b B        --bench batch size (default 8)\n"
    "  -t T        --bench sequence length (default 1024)\n"
    "  --csv FILE  --bench: also write the rows to FILE as CSV (kernel,ms,bytes,flops)\n"
    "  --misaligned KERNEL   launch KERNEL (gelu, layernorm, layernorm_backward, encoder, dbias, classifier)\n"
    "              with a pointer off a 16-byte boundary: it must be refused (exit 1 with a message)";

static void parse_args(int argc, char** argv, int* bench, BenchShape* shape, const char** misaligned) {
    int shape_given = 0;
    const char* csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bench") == 0) {
            *bench = 1;
        } else if (strcmp(argv[i], "--only") == 0) {
            if (i + 1 >= argc) { fail("flag --only needs a kernel family: %s", FAMILIES); }
            g_only = argv[++i];
            char padded[256];
            snprintf(padded, sizeof(padded), ", %s,", g_only);
            char list[256];
            snprintf(list, sizeof(list), ", %s,", FAMILIES);
            if (strstr(list, padded) == NULL) { fail("flag --only expects a kernel family (%s), got '%s'", FAMILIES, g_only); }
        } else if (strcmp(argv[i], "--misaligned") == 0) {
            if (i + 1 >= argc) { fail("flag --misaligned needs a kernel name\n%s", USAGE); }
            int known = 0;
            for (size_t k = 0; k < COUNT_OF(MISALIGNED_KERNELS); k++) { known |= strcmp(argv[i + 1], MISALIGNED_KERNELS[k]) == 0; }
            if (!known) { fail("flag --misaligned %s: expected one of gelu, layernorm, layernorm_backward, encoder, dbias, classifier", argv[i + 1]); }
            *misaligned = argv[++i];
        } else if (strcmp(argv[i], "-b") == 0 || strcmp(argv[i], "-t") == 0) {
            if (i + 1 >= argc) { fail("flag %s needs a value\n%s", argv[i], USAGE); }
            char* end = NULL;
            long value = strtol(argv[i + 1], &end, 10);
            if (*argv[i + 1] == '\0' || *end != '\0' || value < 1 || value > 65536) {
                fail("flag %s %s: expected an integer in [1, 65536]", argv[i], argv[i + 1]);
            }
            if (argv[i][1] == 'b') { shape->B = (int)value; } else { shape->T = (int)value; }
            shape_given = 1;
            i++;
        } else if (strcmp(argv[i], "--csv") == 0) {
            if (i + 1 >= argc) { fail("flag --csv needs a file name\n%s", USAGE); }
            csv_path = argv[i + 1];
            shape_given = 1; // a --bench option
            i++;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("%s\n", USAGE);
            exit(0);
        } else {
            fail("unknown argument '%s'\n%s", argv[i], USAGE);
        }
    }
    if (shape_given && !*bench) { fail("-b, -t and --csv are options of the benchmark: add --bench"); }
    if (*misaligned != NULL && (*bench || g_only != NULL)) { fail("--misaligned runs alone: not with --bench or --only"); }
    if (csv_path != NULL) {
        g_bench_csv = fopenCheck(csv_path, "w");
        fprintf(g_bench_csv, "kernel,ms,bytes,flops\n");
    }
}

int main(int argc, char** argv) {
    int bench = 0;
    const char* misaligned = NULL;
    BenchShape shape = {8, 1024, 768, 12, 50257, 50304}; // GPT-2 124M
    parse_args(argc, argv, &bench, &shape, &misaligned);

    int devices = 0;
    cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
        printf("test_kernels: no CUDA GPU (%s): nothing tested\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 2;
    }
    cudaCheck(cudaSetDevice(0));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d, %d SMs, %.0f GiB), precision %s\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), PRECISION_NAME);
    cudaCheck(cudaStreamCreate(&g_stream));
    matmul_init(NULL);

    int status = misaligned != NULL ? run_misaligned(misaligned) : bench ? run_bench(&shape, &prop) : run_correctness();

    matmul_free();
    cudaCheck(cudaStreamDestroy(g_stream));
    return status;
}
