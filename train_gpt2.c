/*
train_gpt2.c: GPT-2 training on the CPU, the reference of gpt2-zero.

fp32 throughout, OpenMP for the cores, every layer's forward and backward written out by hand.
It is checked tensor by tensor against an independent PyTorch model (train_gpt2.py) by
test_gpt2.c, and the CUDA trainer is checked against the same reference.

The parameters are laid out unit-major (unit 0 = embeddings and final layernorm, units 1..L =
the blocks; see llmc/gpt2_layout.h), so ZeRO can cut them by unit: under `mpirun -np N` the
same program runs the ZeRO stages (-z 0..3) on the plan of llmc/zero_plan.h, every collective
issued from the "sharding schedule" section. The forward and backward only ask for a unit's
parameters and gradients and say when they are done with them. Model files keep llm.c's
tensor-major order; load and save convert.

Run (after `node dev/data/tinyshakespeare.js` and `/usr/bin/python3 train_gpt2.py`):
    make train_gpt2
    OMP_NUM_THREADS=2 ./train_gpt2                     # fine-tune the reference model file
    OMP_NUM_THREADS=2 ./train_gpt2 -e d4 -b 8 -x 300   # train a small GPT-2 from scratch
    OMP_NUM_THREADS=1 mpirun -np 4 --oversubscribe ./train_gpt2 -e d2 -z 3   # 4 ranks, ZeRO-3
    ./train_gpt2 -h                                    # the flags

Sections: layer kernels -> model (build, load) -> forward -> backward -> update ->
sharding schedule -> sampling -> checkpoints -> training loop and main. The matrix multiply is in
llmc/matmul_cpu.h.
*/
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>
#include <signal.h>
#include <fcntl.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "llmc/utils.h"
#include "llmc/matmul_cpu.h"
#include "llmc/rand.h"
#include "llmc/gpt2_layout.h"
#include "llmc/dataloader.h"
#include "llmc/hellaswag.h"
#include "llmc/tokenizer.h"
#include "llmc/schedulers.h"
#include "llmc/zero_plan.h"
#include "llmc/mpi_comm.h"
#include "llmc/model_file.h"
#include "llmc/train_args.h"
#include "llmc/checkpoint.h"

// ----------------------------------------------------------------------------
// layer kernels: each forward with its backward. Backward kernels add (+=) into the gradients
// they produce: parameter gradients sum over micro-steps of gradient accumulation, and an
// activation gradient can have two sources (the residual stream).

// out (B,T,C) = wte[inp] + wpe[t]; inp is (B,T) token ids, wte (Vp,C), wpe (maxT,C)
void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* o = out + ((size_t)b * T + t) * C;
            const float* tok = wte + (size_t)inp[b * T + t] * C;
            const float* pos = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++) { o[i] = tok[i] + pos[i]; }
        }
    }
}

// dwte (Vp,C) and dwpe (maxT,C) += dout (B,T,C) scattered by token and position.
// Serial over (b,t): two positions with the same token add into the same row of dwte.
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float* d = dout + ((size_t)b * T + t) * C;
            float* dtok = dwte + (size_t)inp[b * T + t] * C;
            float* dpos = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) { dtok[i] += d[i]; dpos[i] += d[i]; }
        }
    }
}

// One row of a layernorm's output from its statistics: the forward's last pass, and all that
// recompute (-r 2) redoes, so a recomputed output has the forward's bits.
static inline void layernorm_row_out(float* o, const float* x, float m, float s, const float* weight,
                                     const float* bias, int C) {
    for (int i = 0; i < C; i++) { o[i] = (x[i] - m) * s * weight[i] + bias[i]; }
}

// out (B,T,C) = (inp - mean) * rstd * weight + bias over the last dimension; keeps mean and
// rstd (B,T) for the backward
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int B, int T, int C) {
    const float eps = 1e-5f; // PyTorch's default, as GPT-2 uses
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * C;
        float m = 0.0f;
        #pragma omp simd reduction(+:m)
        for (int i = 0; i < C; i++) { m += x[i]; }
        m /= C;
        float v = 0.0f;
        #pragma omp simd reduction(+:v)
        for (int i = 0; i < C; i++) { float d = x[i] - m; v += d * d; }
        v /= C; // biased variance, as PyTorch's layer_norm
        float s = 1.0f / sqrtf(v + eps);
        layernorm_row_out(out + (size_t)bt * C, x, m, s, weight, bias, C);
        mean[bt] = m;
        rstd[bt] = s;
    }
}

// out (B,T,C): layernorm_forward's output again, from the mean and rstd it kept (recompute, -r 2)
void layernorm_recompute(float* out, const float* mean, const float* rstd, const float* inp, const float* weight,
                         const float* bias, int B, int T, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        layernorm_row_out(out + (size_t)bt * C, inp + (size_t)bt * C, mean[bt], rstd[bt], weight, bias, C);
    }
}

// dinp (B,T,C), dweight (C), dbias (C) += from dout (B,T,C)
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int B, int T, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * C;
        const float* d = dout + (size_t)bt * C;
        float m = mean[bt], s = rstd[bt];
        // the normalized x depends on every x_i through the mean and variance: two row means
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        #pragma omp simd reduction(+:dnorm_mean, dnorm_norm_mean)
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            float dnorm = weight[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float* dx = dinp + (size_t)bt * C;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            float dnorm = weight[i] * d[i];
            dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
    // the parameter gradients sum over all rows: split by column so no two threads share one
    #pragma omp parallel for
    for (int i = 0; i < C; i++) {
        float dw = 0.0f, db = 0.0f;
        for (int bt = 0; bt < B * T; bt++) {
            float d = dout[(size_t)bt * C + i];
            dw += (inp[(size_t)bt * C + i] - mean[bt]) * rstd[bt] * d;
            db += d;
        }
        dweight[i] += dw;
        dbias[i] += db;
    }
}

// out (B,T,OC) = inp (B,T,C) @ weight^T + bias; weight is (OC,C) as in PyTorch, bias (OC) or NULL
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int B, int T, int C, int OC) {
    int BT = B * T;
    #pragma omp parallel for
    for (int bt = 0; bt < BT; bt++) {
        float* o = out + (size_t)bt * OC;
        for (int j = 0; j < OC; j++) { o[j] = bias != NULL ? bias[j] : 0.0f; }
    }
    StridedMatrix A = {inp, (size_t)C, 1};     // A(bt, i) = inp[bt][i]
    StridedMatrix W_T = {weight, 1, (size_t)C}; // B(i, o) = weight[o][i]
    gemm_accumulate(out, OC, A, W_T, BT, OC, C);
}

// dinp (B,T,C) += dout @ weight; dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums of dout
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int B, int T, int C, int OC) {
    int BT = B * T;
    StridedMatrix dO = {dout, (size_t)OC, 1};   // A(bt, o) = dout[bt][o]
    StridedMatrix W = {weight, (size_t)C, 1};   // B(o, i) = weight[o][i]
    gemm_accumulate(dinp, C, dO, W, BT, C, OC);
    StridedMatrix dO_T = {dout, 1, (size_t)OC}; // A(o, bt) = dout[bt][o]
    StridedMatrix X = {inp, (size_t)C, 1};      // B(bt, i) = inp[bt][i]
    gemm_accumulate(dweight, C, dO_T, X, OC, C, BT);
    if (dbias != NULL) {
        // column sums, split by column blocks so each dbias element has one writer
        #pragma omp parallel for
        for (int j0 = 0; j0 < OC; j0 += 64) {
            int j1 = j0 + 64 < OC ? j0 + 64 : OC;
            for (int bt = 0; bt < BT; bt++) {
                const float* d = dout + (size_t)bt * OC;
                for (int j = j0; j < j1; j++) { dbias[j] += d[j]; }
            }
        }
    }
}

// Causal self-attention. qkv (B,T,3C) holds q, k, v side by side, each split into NH heads of
// size hs = C/NH. out (B,T,C) is the heads' outputs side by side; att (B,NH,T,T) keeps the
// softmax weights for the backward (entries above the diagonal are 0).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float* a = att + (((size_t)b * NH + h) * T + t) * T;
                float maxval = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = qkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                    float s = 0.0f;
                    #pragma omp simd reduction(+:s)
                    for (int i = 0; i < hs; i++) { s += q[i] * k[i]; }
                    s *= scale;
                    a[t2] = s;
                    if (s > maxval) { maxval = s; }
                }
                // softmax, with the row max subtracted so exp cannot overflow
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) { a[t2] = expf(a[t2] - maxval); sum += a[t2]; }
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) { a[t2] *= inv; }
                for (int t2 = t + 1; t2 < T; t2++) { a[t2] = 0.0f; }
                float* o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) { o[i] = 0.0f; }
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* v = qkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) { o[i] += a[t2] * v[i]; }
                }
            }
        }
    }
}

// dqkv (B,T,3C) += from dout (B,T,C), using the saved att. datt_scratch is (B,NH,T): one row of
// gradients per head, so each (b,h) is one task and writes only its own head's slice of dqkv.
void attention_backward(float* dqkv, float* datt_scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float* datt = datt_scratch + ((size_t)b * NH + h) * T;
            for (int t = 0; t < T; t++) {
                const float* a = att + (((size_t)b * NH + h) * T + t) * T;
                const float* d = dout + ((size_t)b * T + t) * C + h * hs;
                // through out = sum_t2 a[t2] v[t2]: into the weights and into v
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* v = qkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    float* dv = dqkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    float s = 0.0f;
                    #pragma omp simd reduction(+:s)
                    for (int i = 0; i < hs; i++) { s += d[i] * v[i]; }
                    datt[t2] = s;
                    for (int i = 0; i < hs; i++) { dv[i] += a[t2] * d[i]; }
                }
                // through the softmax: dpre = a * (datt - sum(a * datt))
                float dot = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) { dot += a[t2] * datt[t2]; }
                // through pre = scale * q.k: into q and into k
                const float* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float* dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                for (int t2 = 0; t2 <= t; t2++) {
                    float dpre = a[t2] * (datt[t2] - dot) * scale;
                    const float* k = qkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                    float* dk = dqkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += dpre * k[i];
                        dk[i] += dpre * q[i];
                    }
                }
            }
        }
    }
}

// GELU with the tanh approximation, as GPT-2 uses; out and inp are (N)
#define GELU_SCALE 0.7978845608028654f // sqrt(2 / pi)
#define GELU_CUBIC_COEFF 0.044715f

// tanh(u) = 1 - 2 / (exp(2u) + 1): one expf instead of tanhf (which is ~3x slower in glibc).
// The absolute error stays ~1e-7 (exp(2u) -> inf gives 1, -> 0 gives -1), and GELU only needs
// 1 + tanh, so the lost relative precision of tanh near 0 does not show.
static inline float tanh_via_exp(float u) { return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f); }
void gelu_forward(float* out, const float* inp, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanh_via_exp(GELU_SCALE * (x + GELU_CUBIC_COEFF * x * x * x)));
    }
}

// dinp (N) += gelu'(inp) * dout
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBIC_COEFF * x * x * x);
        float th = tanh_via_exp(u);
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC_COEFF * x * x);
        dinp[i] += grad * dout[i];
    }
}

// out (N) = inp1 + inp2: the residual connections
void residual_forward(float* out, const float* inp1, const float* inp2, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) { out[i] = inp1[i] + inp2[i]; }
}

// probs (B,T,Vp) = softmax over the first V of logits (B,T,Vp); the padded columns get 0.
// losses (B,T) = -log probs[target] when targets is not NULL.
void softmax_crossentropy_forward(float* probs, float* losses, const float* logits, const int* targets,
                                  int B, int T, int V, int Vp) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = logits + (size_t)bt * Vp;
        float* p = probs + (size_t)bt * Vp;
        float maxval = -INFINITY;
        for (int i = 0; i < V; i++) { if (x[i] > maxval) { maxval = x[i]; } }
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int i = 0; i < V; i++) { p[i] = expf(x[i] - maxval); sum += p[i]; }
        float inv = 1.0f / sum;
        for (int i = 0; i < V; i++) { p[i] *= inv; }
        for (int i = V; i < Vp; i++) { p[i] = 0.0f; }
        if (targets != NULL) { losses[bt] = -logf(p[targets[bt]]); }
    }
}

// dlogits (B,T,Vp) = (probs - onehot(target)) * dlosses, the gradient of softmax and
// cross-entropy together (written, not added: nothing else feeds the logits)
void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, float dloss,
                                   int B, int T, int V, int Vp) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float* p = probs + (size_t)bt * Vp;
        float* d = dlogits + (size_t)bt * Vp;
        for (int i = 0; i < V; i++) { d[i] = p[i] * dloss; }
        for (int i = V; i < Vp; i++) { d[i] = 0.0f; }
        d[targets[bt]] -= dloss;
    }
}

// ----------------------------------------------------------------------------
// the model: parameters (one unit-major slab), activations, and their gradients

// Pointers to one layer's 12 tensors inside one block unit of params or grads.
typedef struct {
    float* ln1w;     // (C)
    float* ln1b;     // (C)
    float* qkvw;     // (3C, C)
    float* qkvb;     // (3C)
    float* attprojw; // (C, C)
    float* attprojb; // (C)
    float* ln2w;     // (C)
    float* ln2b;     // (C)
    float* fcw;      // (4C, C)
    float* fcb;      // (4C)
    float* fcprojw;  // (C, 4C)
    float* fcprojb;  // (C)
} BlockTensors;

// What the forward keeps for the backward, and the backward's scratch. With recompute (-r), as
// in train_gpt2.cu, the GELU output (r >= 1) and the layernorm outputs ln1, ln2 (r = 2) are one
// (B,T,...) buffer shared by all layers: the forward writes it for the next matmul, and the
// backward recomputes it (the same function on the same kept inputs, so the same bits) before
// it reads it, instead of keeping one per layer.
typedef struct {
    // saved by the forward for the backward; per-layer tensors stacked over L
    float* encoded;   // (B,T,C)
    float* ln1;       // (L,B,T,C), or (B,T,C) with -r 2
    float* ln1_mean;  // (L,B,T)
    float* ln1_rstd;  // (L,B,T)
    float* qkv;       // (L,B,T,3C)
    float* atty;      // (L,B,T,C)
    float* att;       // (L,B,NH,T,T)
    float* attproj;   // (L,B,T,C)
    float* residual2; // (L,B,T,C)
    float* ln2;       // (L,B,T,C), or (B,T,C) with -r 2
    float* ln2_mean;  // (L,B,T)
    float* ln2_rstd;  // (L,B,T)
    float* fch;       // (L,B,T,4C)
    float* fch_gelu;  // (L,B,T,4C), or (B,T,4C) with -r >= 1
    float* fcproj;    // (L,B,T,C)
    float* residual3; // (L,B,T,C)
    float* lnf;       // (B,T,C)
    float* lnf_mean;  // (B,T)
    float* lnf_rstd;  // (B,T)
    float* logits;    // (B,T,Vp); the backward overwrites it with dlogits
    float* probs;     // (B,T,Vp)
    float* losses;    // (B,T)
    // backward scratch, reused by every layer (the residual stream's gradient flows through dresidual)
    float* dresidual; // (B,T,C)
    float* dbtc;      // (B,T,C)
    float* dbtc2;     // (B,T,C)
    float* dbt4c;     // (B,T,4C)
    float* dbt4c2;    // (B,T,4C)
    float* dqkv;      // (B,T,3C)
    float* datt;      // (B,NH,T)
} Activations;

// Bytes this rank allocated, per category (what the start-up table compares with the plan).
typedef struct { size_t params, grads, optimizer, activations, buffers; } MemoryUse;

typedef struct {
    GPT2Config config;
    ZeroPlan plan;         // units, shards, memory and traffic for this stage and world size
    Comm* comm;            // all N ranks: the step's scalars, barriers
    Comm group;            // the G ranks of this rank's shard group (all N unless -zg): the ZeRO collectives
    Comm across;           // the R = N/G ranks holding this rank's shard, one per group: the grads' all-reduce
    // parameters
    float* params;         // (layout.total) full unit-major slab, stages 0-2; padding stays 0
    float* param_shard;    // (plan.shard_total) this rank's slice of every unit, stage 3
    float* gather_unit0;   // (unit_size[0]) stage 3: unit 0 while gathered
    float* gather_blocks;  // (block_gather_buffers, unit_size[1]) stage 3: block unit u in slot (u-1) % count
    // gradients
    float* grads;          // (layout.total) full local gradient, when plan.full_grads
    float* grad_shard;     // (plan.shard_total) stages 2-3: this rank's reduced slices
    float* grad_unit0;     // (unit_size[0]) stages 2-3 without accumulation: unit 0's gradient
    float* grad_blocks;    // (2, unit_size[1]) stages 2-3 without accumulation: block unit u in slot (u-1) % 2
    float* rs_buffer;      // (max_shard_size) stages 0-1: where a reduce-scatter lands
    // AdamW moments: (layout.total) in stage 0, (plan.shard_total) from stage 1 on
    float* m;
    float* v;
    // stage 3's walk (llmc/zero_plan.h) and the collectives in flight, one per unit and kind
    ZeroWalk walk;
    CommRequest gather_req[MAX_UNITS];
    CommRequest reduce_req[MAX_UNITS];
    // activations
    Activations acts;
    float* acts_memory;
    int B, T;              // the largest batch the activations hold
    int recompute;         // -r: 0 keep every activation, 1 recompute GELU, 2 also ln1 and ln2
    int* inputs;           // (B,T) of the last forward
    int* targets;          // (B,T) of the last forward, or unused
    int last_B, last_T;    // shape of the last forward
    float loss_scale;      // != 0: the last forward was a training forward, a backward may follow
    float mean_loss;       // of the last forward with targets, else -1
    MemoryUse mem;
    FILE* trace;           // -zt: this rank's trace file (the sharding section), or NULL
    int trace_step;        // the training step being traced (0: none, outside a step)
} GPT2;


static float* alloc_counted(size_t* counter, size_t n) {
    *counter += n * sizeof(float);
    return (float*)callocCheck(n, sizeof(float));
}

// The 12 tensors of block l, carved from its unit (params or grads), which starts at `unit`.
static BlockTensors block_tensors(const GPT2* model, float* unit, int l) {
    const size_t* o = model->plan.layout.offset_in_unit;
    unit += block_offset(&model->plan.layout, l);
    BlockTensors bt = {
        unit + o[LN1W], unit + o[LN1B], unit + o[QKVW], unit + o[QKVB],
        unit + o[ATTPROJW], unit + o[ATTPROJB], unit + o[LN2W], unit + o[LN2B],
        unit + o[FCW], unit + o[FCB], unit + o[FCPROJW], unit + o[FCPROJB],
    };
    return bt;
}

// Tensor t of unit 0 (wte, wpe, lnfw, lnfb), from the start of unit 0.
static float* unit0_tensor(const GPT2* model, float* unit0, int t) {
    return unit0 + model->plan.layout.offset_in_unit[t];
}

// Makes the plan and allocates what it says this rank holds. The parameters are set later
// (gpt2_set_params), from a file or a fresh initialization. recompute (-r 0, 1, 2) sizes the
// activations, allocated at the first forward (or gpt2_alloc_activations).
void gpt2_init(GPT2* model, const GPT2Config* config, Comm* comm, ZeroOptions opt, int recompute) {
    memset(model, 0, sizeof(*model));
    model->config = *config;
    model->comm = comm;
    if (recompute < 0 || recompute > 2) { fail("recompute expects 0, 1 or 2, got %d", recompute); }
    model->recompute = recompute;
    StateBytes cpu_bytes = ZERO_STATE_BYTES_CPU; // fp32 params and grads; m and v; MPI needs a reduce-scatter buffer
    zero_plan_init(&model->plan, config, opt.stage, comm->world_size, opt.group_size, opt.grad_accum, opt.reshard,
                   opt.prefetch, opt.unit_blocks, cpu_bytes, UNIT_ALIGN);
    const ZeroPlan* p = &model->plan;
    // groups of G consecutive ranks; across them, the ranks with the same place in their group
    comm_split(comm, comm->rank / p->group_size, comm->rank, &model->group);
    comm_split(comm, comm->rank % p->group_size, comm->rank, &model->across);
    const ParamLayout* lay = &p->layout;
    MemoryUse* mem = &model->mem;
    size_t unit0 = lay->unit_size[0], block = lay->num_units > 1 ? lay->unit_size[1] : 0;
    if (p->stage < 3) { model->params = alloc_counted(&mem->params, lay->total); }
    else {
        model->param_shard = alloc_counted(&mem->params, p->shard_total);
        model->gather_unit0 = alloc_counted(&mem->buffers, unit0);
        model->gather_blocks = alloc_counted(&mem->buffers, (size_t)p->block_gather_buffers * block);
    }
    if (p->full_grads) { model->grads = alloc_counted(&mem->grads, lay->total); }
    if (p->stage >= 2) {
        model->grad_shard = alloc_counted(&mem->grads, p->shard_total);
        if (!p->full_grads) {
            model->grad_unit0 = alloc_counted(&mem->grads, unit0);
            model->grad_blocks = alloc_counted(&mem->grads, 2 * block);
        }
    } else {
        model->rs_buffer = alloc_counted(&mem->buffers, p->max_shard_size);
    }
    size_t opt_n = p->stage == 0 ? lay->total : p->shard_total;
    model->m = alloc_counted(&mem->optimizer, opt_n);
    model->v = alloc_counted(&mem->optimizer, opt_n);
    for (int u = 0; u < lay->num_units; u++) {
        model->gather_req[u] = COMM_REQUEST_NULL;
        model->reduce_req[u] = COMM_REQUEST_NULL;
    }
    zero_walk_init(&model->walk, p->block_units);
    model->mean_loss = -1.0f;
}

// Installs a full slab of parameters: kept whole in stages 0-2, cut to this rank's shard in 3.
void gpt2_set_params(GPT2* model, const float* full) {
    const ZeroPlan* p = &model->plan;
    if (p->stage < 3) { memcpy(model->params, full, p->layout.total * sizeof(float)); return; }
    for (int u = 0; u < p->layout.num_units; u++) {
        memcpy(model->param_shard + p->shard_offset[u], full + zero_slice_offset(p, u, model->comm->rank),
               p->shard_size[u] * sizeof(float));
    }
}

// One process, stage 0, from a model file: what test_gpt2.c uses.
void gpt2_build_from_checkpoint(GPT2* model, Comm* comm, const char* path, int recompute) {
    GPT2Config config;
    FILE* fp = model_file_open(path, &config, NULL);
    ZeroOptions opt = {0, 1, RESHARD_DEFAULT, 0, 0, 1, 0, 0};
    gpt2_init(model, &config, comm, opt, recompute);
    float* full = (float*)callocCheck(model->plan.layout.total, sizeof(float));
    model_file_read(fp, path, &config, &model->plan.layout, full, MODEL_VERSION_FP32);
    fclose(fp);
    gpt2_set_params(model, full);
    free(full);
}

// The activation tensors of a B x T batch in one allocation: returns its bytes, and with base !=
// NULL points a's tensors into it. Recompute keeps one layer's GELU output (-r >= 1) and one
// layer's ln1 and ln2 (-r 2) instead of L: it saves (L-1)*B*T*4C floats at -r 1, and
// 2*(L-1)*B*T*C more at -r 2.
static size_t activations_layout(Activations* a, float* base, const GPT2Config* c, int recompute, int B, int T) {
    size_t L = c->num_layers, NH = c->num_heads, C = c->channels, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    size_t L_ln = recompute >= 2 ? 1 : L, L_gelu = recompute >= 1 ? 1 : L;
    float** ptrs[] = {
        &a->encoded, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->atty, &a->att, &a->attproj,
        &a->residual2, &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch, &a->fch_gelu, &a->fcproj,
        &a->residual3, &a->lnf, &a->lnf_mean, &a->lnf_rstd, &a->logits, &a->probs, &a->losses,
        &a->dresidual, &a->dbtc, &a->dbtc2, &a->dbt4c, &a->dbt4c2, &a->dqkv, &a->datt,
    };
    size_t sizes[] = {
        BT * C, L_ln * BT * C, L * BT, L * BT, L * BT * 3 * C, L * BT * C, L * B * NH * T * T, L * BT * C,
        L * BT * C, L_ln * BT * C, L * BT, L * BT, L * BT * 4 * C, L_gelu * BT * 4 * C, L * BT * C,
        L * BT * C, BT * C, BT, BT, BT * Vp, BT * Vp, BT,
        BT * C, BT * C, BT * C, BT * 4 * C, BT * 4 * C, BT * 3 * C, (size_t)B * NH * T,
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        if (base != NULL) { *ptrs[i] = base + total; }
        total += sizes[i];
    }
    return total * sizeof(float);
}

// Carves the activation slab for batches of up to B x T.
static void gpt2_alloc_activations(GPT2* model, int B, int T) {
    size_t BT = (size_t)B * T;
    size_t bytes = activations_layout(&model->acts, NULL, &model->config, model->recompute, B, T);
    model->acts_memory = (float*)mallocCheck(bytes);
    model->mem.activations = bytes;
    activations_layout(&model->acts, model->acts_memory, &model->config, model->recompute, B, T);
    model->B = B;
    model->T = T;
    model->inputs = (int*)mallocCheck(BT * sizeof(int));
    model->targets = (int*)mallocCheck(BT * sizeof(int));
}

// The sharding schedule (defined in its own section below, after the update): what the forward
// and backward call around each unit. For stages 0-2 they hand out pointers into the full slabs;
// for stage 3 they gather and release, and for stages 2-3 they reduce gradients unit by unit.
static void schedule_begin_micro_step(GPT2* model);
static void schedule_begin_backward(GPT2* model);
static float* unit_params(GPT2* model, int u);          // gather (stage 3), then the unit's params
static void unit_release_after_forward(GPT2* model, int u);
static void unit_release_after_backward(GPT2* model, int u);
void units_release_all(GPT2* model);
static float* unit_grads(GPT2* model, int u);           // where the unit's backward adds its grads
static void unit_grads_done(GPT2* model, int u, int reduce);

// ----------------------------------------------------------------------------
// forward

// The forward of a batch of B x T tokens (inputs, targets: (B,T); targets may be NULL). With
// targets it also computes each position's loss (their mean: gpt2_mean_loss). loss_scale != 0
// asks for a backward to follow: the weight of this batch's mean loss in the step's objective,
// 1 / (micro-steps x ranks). B x T may be smaller than the first call's (sampling runs with B=1
// and a growing T). In stage 3 the units stay gathered as the backward needs them; call
// units_release_all after a forward that no backward follows.
void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T, float loss_scale) {
    const GPT2Config* c = &model->config;
    int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers, NH = c->num_heads, C = c->channels;
    if (T > c->max_seq_len) { fail("sequence length %d exceeds the model's maximum %d", T, c->max_seq_len); }
    if (model->acts_memory == NULL) { gpt2_alloc_activations(model, B, T); }
    if ((size_t)B * T > (size_t)model->B * model->T || T > model->T) {
        fail("batch %dx%d is larger than the %dx%d the activations were sized for", B, T, model->B, model->T);
    }
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) { fail("input token %d at %d is outside the vocabulary of %d", inputs[i], i, V); }
        if (targets != NULL && (targets[i] < 0 || targets[i] >= V)) { fail("target token %d at %d is outside the vocabulary of %d", targets[i], i, V); }
    }
    if (targets == NULL && loss_scale != 0.0f) { fail("internal: a backward asked for without targets"); }
    memcpy(model->inputs, inputs, (size_t)B * T * sizeof(int));
    if (targets != NULL) { memcpy(model->targets, targets, (size_t)B * T * sizeof(int)); }
    model->last_B = B;
    model->last_T = T;
    model->loss_scale = loss_scale;
    schedule_begin_micro_step(model);

    Activations* a = &model->acts;
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    float* ends = unit_params(model, 0);
    encoder_forward(a->encoded, inputs, unit0_tensor(model, ends, WTE), unit0_tensor(model, ends, WPE), B, T, C);
    unit_release_after_forward(model, 0);
    const ParamLayout* lay = &model->plan.layout;
    float* unit = NULL;
    for (int l = 0; l < L; l++) {
        int u = unit_of_block(lay, l);
        if (l == unit_first_block(lay, u)) { unit = unit_params(model, u); } // a unit's first block gathers it
        BlockTensors w = block_tensors(model, unit, l);
        const float* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        float* ln1 = a->ln1 + (model->recompute >= 2 ? 0 : l * BTC);
        float* qkv = a->qkv + l * BTC * 3;
        float* atty = a->atty + l * BTC;
        float* att = a->att + (size_t)l * B * NH * T * T;
        float* attproj = a->attproj + l * BTC;
        float* residual2 = a->residual2 + l * BTC;
        float* ln2 = a->ln2 + (model->recompute >= 2 ? 0 : l * BTC);
        float* fch = a->fch + l * BTC * 4;
        float* fch_gelu = a->fch_gelu + (model->recompute >= 1 ? 0 : l * BTC * 4);
        float* fcproj = a->fcproj + l * BTC;
        float* residual3 = a->residual3 + l * BTC;
        layernorm_forward(ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, residual, w.ln1w, w.ln1b, B, T, C);
        matmul_forward(qkv, ln1, w.qkvw, w.qkvb, B, T, C, 3 * C);
        attention_forward(atty, att, qkv, B, T, C, NH);
        matmul_forward(attproj, atty, w.attprojw, w.attprojb, B, T, C, C);
        residual_forward(residual2, residual, attproj, BTC);
        layernorm_forward(ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, residual2, w.ln2w, w.ln2b, B, T, C);
        matmul_forward(fch, ln2, w.fcw, w.fcb, B, T, C, 4 * C);
        gelu_forward(fch_gelu, fch, BTC * 4);
        matmul_forward(fcproj, fch_gelu, w.fcprojw, w.fcprojb, B, T, 4 * C, C);
        residual_forward(residual3, residual2, fcproj, BTC);
        if (l == unit_last_block(lay, u)) { unit_release_after_forward(model, u); }
    }
    ends = unit_params(model, 0); // stays gathered: the backward starts with it
    const float* last = a->residual3 + (L - 1) * BTC;
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, last, unit0_tensor(model, ends, LNFW),
                      unit0_tensor(model, ends, LNFB), B, T, C);
    // the LM head is tied to the token embedding: logits = lnf @ wte^T
    matmul_forward(a->logits, a->lnf, unit0_tensor(model, ends, WTE), NULL, B, T, C, Vp);
    softmax_crossentropy_forward(a->probs, a->losses, a->logits, targets, B, T, V, Vp);
    if (targets != NULL) {
        double sum = 0.0; // in a fixed order: the loss must not depend on the thread count
        for (size_t i = 0; i < BT; i++) { sum += a->losses[i]; }
        model->mean_loss = (float)(sum / BT);
    } else {
        model->mean_loss = -1.0f;
    }
}

// The mean loss of the last forward, which must have had targets.
float gpt2_mean_loss(GPT2* model) {
    if (model->mean_loss == -1.0f) { fail("internal: no forward with targets to take the loss of"); }
    return model->mean_loss;
}

// The last forward's per-position losses (B,T) (it must have had targets).
const float* gpt2_losses(GPT2* model) {
    if (model->mean_loss == -1.0f) { fail("internal: no forward with targets to take the losses of"); }
    return model->acts.losses;
}

// ----------------------------------------------------------------------------
// backward

// Adds the last forward's gradients into the unit gradients. That forward must have been a
// training forward (loss_scale != 0); its B, T, inputs and targets are used. With `reduce` (the
// step's last micro-step), each unit's gradients are reduced across the ranks as soon as its
// backward is done.
void gpt2_backward(GPT2* model, int reduce) {
    if (model->loss_scale == 0.0f) { fail("internal: backward without a training forward"); }
    int B = model->last_B, T = model->last_T;
    const GPT2Config* c = &model->config;
    int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers, NH = c->num_heads, C = c->channels;
    Activations* a = &model->acts;
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    schedule_begin_backward(model);

    // the head and the final layernorm: unit 0, still gathered from the forward (every policy
    // keeps it), so this unit_params gathers nothing; it moves stage 3's walk on to the backward,
    // where it may start the prefetch of the last block unit
    float* ends = unit_params(model, 0);
    float* dends = unit_grads(model, 0);
    // the loss is the mean over B*T positions, so each position's loss has weight 1/(B*T)
    float dloss = model->loss_scale / (float)BT;
    float* dlogits = a->logits; // the forward's logits are not needed any more
    softmax_crossentropy_backward(dlogits, a->probs, model->targets, dloss, B, T, V, Vp);
    float* dlnf = a->dbtc;
    memset(dlnf, 0, BTC * sizeof(float));
    matmul_backward(dlnf, unit0_tensor(model, dends, WTE), NULL, dlogits, a->lnf, unit0_tensor(model, ends, WTE), B, T, C, Vp);
    float* dresidual = a->dresidual;
    memset(dresidual, 0, BTC * sizeof(float));
    const float* last = a->residual3 + (L - 1) * BTC;
    layernorm_backward(dresidual, unit0_tensor(model, dends, LNFW), unit0_tensor(model, dends, LNFB), dlnf, last,
                       unit0_tensor(model, ends, LNFW), a->lnf_mean, a->lnf_rstd, B, T, C);
    unit_release_after_backward(model, 0);

    const ParamLayout* lay = &model->plan.layout;
    float* unit = NULL, *dunit = NULL;
    for (int l = L - 1; l >= 0; l--) {
        // the backward meets a unit at its last block, and is done with it after its first
        int u = unit_of_block(lay, l);
        if (l == unit_last_block(lay, u)) {
            unit = unit_params(model, u);
            dunit = unit_grads(model, u);
        }
        BlockTensors w = block_tensors(model, unit, l);
        BlockTensors dw = block_tensors(model, dunit, l);
        const float* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        float* ln1 = a->ln1 + (model->recompute >= 2 ? 0 : l * BTC);
        float* ln2 = a->ln2 + (model->recompute >= 2 ? 0 : l * BTC);
        float* fch = a->fch + l * BTC * 4;
        float* fch_gelu = a->fch_gelu + (model->recompute >= 1 ? 0 : l * BTC * 4);
        float* ln1_mean = a->ln1_mean + l * BT, *ln1_rstd = a->ln1_rstd + l * BT;
        float* ln2_mean = a->ln2_mean + l * BT, *ln2_rstd = a->ln2_rstd + l * BT;
        // recompute what the forward did not keep, from what it did: the same function on the
        // same inputs (the layernorms from their kept statistics), so the forward's bits
        if (model->recompute >= 1) { gelu_forward(fch_gelu, fch, BTC * 4); }
        if (model->recompute >= 2) {
            layernorm_recompute(ln1, ln1_mean, ln1_rstd, residual, w.ln1w, w.ln1b, B, T, C);
            layernorm_recompute(ln2, ln2_mean, ln2_rstd, a->residual2 + l * BTC, w.ln2w, w.ln2b, B, T, C);
        }
        // dresidual holds d(loss)/d(residual3 of layer l); the residual adds pass it through
        // unchanged, and each layernorm branch adds its part into it.
        float* dfch_gelu = a->dbt4c;
        float* dfch = a->dbt4c2;
        float* dln2 = a->dbtc;
        memset(dfch_gelu, 0, BTC * 4 * sizeof(float));
        memset(dfch, 0, BTC * 4 * sizeof(float));
        memset(dln2, 0, BTC * sizeof(float));
        matmul_backward(dfch_gelu, dw.fcprojw, dw.fcprojb, dresidual, fch_gelu, w.fcprojw, B, T, 4 * C, C);
        gelu_backward(dfch, fch, dfch_gelu, BTC * 4);
        matmul_backward(dln2, dw.fcw, dw.fcb, dfch, ln2, w.fcw, B, T, C, 4 * C);
        layernorm_backward(dresidual, dw.ln2w, dw.ln2b, dln2, a->residual2 + l * BTC, w.ln2w,
                           ln2_mean, ln2_rstd, B, T, C);
        // dresidual is now d(loss)/d(residual2)
        float* datty = a->dbtc;
        float* dqkv = a->dqkv;
        float* dln1 = a->dbtc2;
        memset(datty, 0, BTC * sizeof(float));
        memset(dqkv, 0, BTC * 3 * sizeof(float));
        memset(dln1, 0, BTC * sizeof(float));
        matmul_backward(datty, dw.attprojw, dw.attprojb, dresidual, a->atty + l * BTC, w.attprojw, B, T, C, C);
        attention_backward(dqkv, a->datt, datty, a->qkv + l * BTC * 3, a->att + (size_t)l * B * NH * T * T, B, T, C, NH);
        matmul_backward(dln1, dw.qkvw, dw.qkvb, dqkv, ln1, w.qkvw, B, T, C, 3 * C);
        layernorm_backward(dresidual, dw.ln1w, dw.ln1b, dln1, residual, w.ln1w, ln1_mean, ln1_rstd, B, T, C);
        // dresidual is now d(loss)/d(residual3 of layer l-1)
        if (l == unit_first_block(lay, u)) {
            unit_release_after_backward(model, u);
            unit_grads_done(model, u, reduce);
        }
    }
    // the encoder: its gradient is unit 0's second part (wte again, and wpe); it needs no params
    encoder_backward(unit0_tensor(model, dends, WTE), unit0_tensor(model, dends, WPE), dresidual, model->inputs, B, T, C);
    unit_grads_done(model, 0, reduce);
}

// Zeroes the gradients a step accumulates into (the full slab; stages 2-3 without accumulation
// zero each unit's buffer when they hand it out).
void gpt2_zero_grad(GPT2* model) {
    if (model->grads != NULL) { memset(model->grads, 0, model->plan.layout.total * sizeof(float)); }
}

// ----------------------------------------------------------------------------
// update

// Sum of squares of x[0..n), in double, in a fixed order (fixed chunks summed in turn), so it
// is the same for any thread count.
double sum_of_squares(const float* x, size_t n) {
    const size_t chunk = 1 << 16;
    size_t nchunks = (n + chunk - 1) / chunk;
    double* partial = (double*)mallocCheck((nchunks > 0 ? nchunks : 1) * sizeof(double));
    #pragma omp parallel for
    for (size_t ci = 0; ci < nchunks; ci++) {
        size_t i1 = (ci + 1) * chunk < n ? (ci + 1) * chunk : n;
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (size_t i = ci * chunk; i < i1; i++) { s += (double)x[i] * x[i]; }
        partial[ci] = s;
    }
    double total = 0.0;
    for (size_t ci = 0; ci < nchunks; ci++) { total += partial[ci]; }
    free(partial);
    return total;
}

// AdamW on n contiguous elements, in PyTorch's order: decay the weight, then the Adam step.
void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float weight_decay,
                  const AdamWParams* hp) {
    // locals: the compiler cannot keep hp's fields in registers (params could alias them)
    const float lr = hp->lr, beta1 = hp->beta1, beta2 = hp->beta2, eps = hp->eps, grad_scale = hp->grad_scale;
    const float bc1 = 1.0f - powf(beta1, (float)hp->t);
    const float bc2 = 1.0f - powf(beta2, (float)hp->t);
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float grad = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * grad;
        float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
        m[i] = mi;
        v[i] = vi;
        float p = params[i] * (1.0f - lr * weight_decay);
        params[i] = p - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    }
}

// AdamW on elements [lo, hi) of unit u; p, g, m, v point at element lo. Cut at the tensors'
// edges (of each of the unit's blocks), since weight decay applies to the 2-D weights only;
// padding is left alone (stays 0).
static void adamw_unit_range(const GPT2* model, int u, size_t lo, size_t hi, float* p, const float* g,
                             float* m, float* v, const AdamWParams* hp) {
    const GPT2Config* c = &model->config;
    const ParamLayout* lay = &model->plan.layout;
    UnitKind kind = u == 0 ? UNIT_ENDS : UNIT_BLOCK;
    int pieces = u == 0 ? 1 : unit_block_count(lay, u);
    for (int j = 0; j < pieces; j++) {
        size_t base = (size_t)j * lay->block_numel; // block j of the unit (unit 0: one piece)
        for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
            if (TENSOR_INFO[t].unit != kind) { continue; }
            size_t t0 = base + lay->offset_in_unit[t], t1 = t0 + tensor_numel(c, t);
            size_t a = t0 > lo ? t0 : lo, b = t1 < hi ? t1 : hi;
            if (a >= b) { continue; }
            float wd = TENSOR_INFO[t].decay ? hp->weight_decay : 0.0f;
            adamw_update(p + (a - lo), g + (a - lo), m + (a - lo), v + (a - lo), b - a, wd, hp);
        }
    }
}

// This rank's reduced gradient slice of unit u (after the step's reduce-scatters).
static float* grad_shard_of(GPT2* model, int u) {
    const ZeroPlan* p = &model->plan;
    if (p->stage >= 2) { return model->grad_shard + p->shard_offset[u]; }
    return model->grads + zero_slice_offset(p, u, model->comm->rank);
}

static double norm_squared_over_ranks(GPT2* model, double mine); // in the sharding section

// The global gradient norm: each rank sums the squares of the N-way slice it answers for
// (zero_rank_slice: its own slice unless -zg), unit by unit, and the partial sums are added in
// slice order, so every stage and every group size gets the same bits.
float gpt2_grad_norm(GPT2* model) {
    const ZeroPlan* p = &model->plan;
    double mine = 0.0;
    int part = model->comm->rank / p->group_size; // which of the shard's R slices
    for (int u = 0; u < p->layout.num_units; u++) {
        size_t n = p->layout.unit_size[u] / p->world_size;
        mine += sum_of_squares(grad_shard_of(model, u) + part * n, n);
    }
    return (float)sqrt(norm_squared_over_ranks(model, mine));
}

static void params_all_gather(GPT2* model); // stages 1-2, in the sharding section

// One optimizer step. Stage 0 updates every element on every rank (from the all-reduced
// gradients); stages 1-3 update their own slices, and stages 1-2 then all-gather the params.
// Returns the gradient norm before clipping.
float gpt2_update(GPT2* model, float lr, float beta1, float beta2, float eps, float weight_decay,
                  float grad_clip, int t) {
    const ZeroPlan* p = &model->plan;
    int rank = zero_group_rank(p, model->comm->rank);
    float norm = gpt2_grad_norm(model);
    AdamWParams hp = {lr, beta1, beta2, eps, weight_decay, t, grad_clip_scale(norm, grad_clip)};
    for (int u = 0; u < p->layout.num_units; u++) {
        size_t off = p->layout.unit_offset[u], S = p->shard_size[u], so = p->shard_offset[u];
        if (p->stage == 0) {
            adamw_unit_range(model, u, 0, p->layout.unit_size[u], model->params + off, model->grads + off,
                             model->m + off, model->v + off, &hp);
        } else {
            float* params = p->stage == 3 ? model->param_shard + so : model->params + off + rank * S;
            adamw_unit_range(model, u, rank * S, (rank + 1) * S, params, grad_shard_of(model, u),
                             model->m + so, model->v + so, &hp);
        }
    }
    if (p->stage == 1 || p->stage == 2) { params_all_gather(model); }
    return norm;
}

void gpt2_free(GPT2* model) {
    free(model->params); free(model->param_shard); free(model->gather_unit0); free(model->gather_blocks);
    free(model->grads); free(model->grad_shard); free(model->grad_unit0); free(model->grad_blocks);
    free(model->rs_buffer); free(model->m); free(model->v);
    free(model->acts_memory); free(model->inputs); free(model->targets);
    comm_free(&model->group); comm_free(&model->across);
    if (model->trace != NULL) { fcloseCheck(model->trace, "the trace file"); } // -zt
}

// ----------------------------------------------------------------------------
// the sharding schedule: every collective of a step is issued from this section
//
//            forward                 backward                       after the backward
// stage 0    -                       reduce-scatter grads per unit  all-gather grads; update all
// stage 1    -                       reduce-scatter grads per unit  update own slice; all-gather params
// stage 2    -                       reduce-scatter each unit into  update own slice; all-gather params
//                                    the grad shard as it finishes
// stage 3    all-gather each unit    all-gather again (policy);     update own slice
//            (prefetch D ahead)      reduce-scatter as in stage 2
// every      -                       -                              scalars: all-gather the ranks'
//                                                                   norm and loss partials (one double each)
//
// The trace (-zt PREFIX; off by default): each rank writes what this section does, as it does it,
// to PREFIX_rank<r>.txt, for dev/bench/compare_stages.py --timeline. One line per event,
// "TIME STEP EVENT key=value ...", TIME in seconds on CLOCK_MONOTONIC (which the ranks of one
// machine share). The events:
//   step_begin, step_end, forward_begin, backward_begin (once per micro-step), update_begin, update_end
//   use unit=u                          the compute starts on unit u (its parameters are here)
//   done_forward unit=u                 the forward is done with unit u
//   done_backward unit=u                unit u's gradients are complete for this micro-step
//   issue kind=K unit=u bytes=B line=L  a collective started: B its bus bytes (what the counters
//                                       add), L the line of this file that issued it
//   wait_begin kind=K unit=u, wait_end  the rank is blocked in comm_wait (the ring reduce-scatter
//                                       advances only there: llmc/mpi_comm.h)
//   done kind=K unit=u                  the collective is complete (known when its wait returns)
//   acquire what=gather|grad unit=u slot=s bytes=B, release ...   a gather or gradient slot
//                                       starts or stops holding unit u (slot -1: unit 0's buffer)
//   scratch bytes=B                     the ring's partial sums now held (llmc/mpi_comm.h)
// Without -zt each trace call returns at once on a NULL test: nothing is timed or written.

static void trace(GPT2* model, const char* fmt, ...) {
    if (model->trace == NULL || model->trace_step == 0) { return; }
    va_list ap;
    va_start(ap, fmt);
    fprintf(model->trace, "%.6f %d ", comm_now(), model->trace_step);
    vfprintf(model->trace, fmt, ap);
    fputc('\n', model->trace);
    va_end(ap);
}

// A collective of n elements per rank (its slice) issued by the line after the call; its bus
// bytes as llmc/mpi_comm.h counts them.
#define trace_issue(model, comm, kind, u, n) trace_issue_at(model, comm, kind, u, n, __LINE__ + 1)
static void trace_issue_at(GPT2* model, const Comm* comm, CollKind kind, int u, size_t n, int line) {
    size_t elem = kind == COLL_SCALARS ? sizeof(double) : sizeof(float);
    trace(model, "issue kind=%s unit=%d bytes=%.0f line=%d", COLL_NAMES[kind], u, (double)n * elem * (comm->world_size - 1), line);
}

// The ring reduce-scatters in flight hold 2 slices of partial sums each (llmc/mpi_comm.h).
static void trace_scratch(GPT2* model, const Comm* comm, size_t n, int sign) {
    if (comm->world_size > 1) { trace(model, "scratch bytes=%+.0f", sign * 2.0 * n * sizeof(float)); }
}

// -zg's all-reduce of unit u's grad shard across the groups (blocking: a ring reduce-scatter of its
// R slices, then an all-gather; llmc/mpi_comm.h), issued by the line after the sign +1 call.
#define trace_all_reduce(model, u, sign) trace_all_reduce_at(model, u, sign, __LINE__ + 1)
static void trace_all_reduce_at(GPT2* model, int u, int sign, int line) {
    const Comm* across = &model->across;
    double part = (double)(model->plan.shard_size[u] / across->world_size);
    if (sign > 0) {
        trace(model, "issue kind=all-reduce unit=%d bytes=%.0f line=%d", u, 2.0 * part * sizeof(float) * (across->world_size - 1), line);
        trace(model, "scratch bytes=%+.0f", 2.0 * part * sizeof(float));
        trace(model, "wait_begin kind=all-reduce unit=%d", u);
    } else {
        trace(model, "wait_end kind=all-reduce unit=%d", u);
        trace(model, "done kind=all-reduce unit=%d", u);
        trace(model, "scratch bytes=%+.0f", -2.0 * part * sizeof(float));
    }
}

// A blocking all-gather of one double per rank (the norm's or the loss's part), issued by the line
// after the sign +1 call.
#define trace_scalars(model, sign) trace_scalars_at(model, sign, __LINE__ + 1)
static void trace_scalars_at(GPT2* model, int sign, int line) {
    if (sign > 0) {
        trace_issue_at(model, model->comm, COLL_SCALARS, -1, 1, line);
        trace(model, "wait_begin kind=scalars unit=-1");
    } else {
        trace(model, "wait_end kind=scalars unit=-1");
        trace(model, "done kind=scalars unit=-1");
    }
}

// Waits for unit u's collective (kind), traced as the span this rank is blocked. A stage 2-3
// reduce-scatter done releases the gradient slot it read.
static void unit_wait(GPT2* model, Comm* comm, CommRequest* req, CollKind kind, int u) {
    if (!comm_pending(req)) { comm_wait(comm, req); return; } // waited already, or one rank: nothing to trace
    trace(model, "wait_begin kind=%s unit=%d", COLL_NAMES[kind], u);
    comm_wait(comm, req);
    trace(model, "wait_end kind=%s unit=%d", COLL_NAMES[kind], u);
    trace(model, "done kind=%s unit=%d", COLL_NAMES[kind], u);
    if (kind != COLL_REDUCE_SCATTER) { return; }
    trace_scratch(model, comm, model->plan.shard_size[u], -1);
    if (model->plan.stage >= 2 && !model->plan.full_grads) { trace(model, "release what=grad unit=%d", u); }
}

static inline void trace_step_begin(GPT2* model, int step) { model->trace_step = step; trace(model, "step_begin"); }
static inline void trace_step_end(GPT2* model) {
    trace(model, "step_end");
    model->trace_step = 0;
    if (model->trace != NULL) { fflush(model->trace); }
}

// -zt: opens this rank's trace file, whose first line says what ran (the trace's header).
void trace_open(GPT2* model, const char* prefix, int rank) {
    if (prefix == NULL) { return; }
    char path[1024];
    snprintf(path, sizeof(path), "%s_rank%d.txt", prefix, rank);
    model->trace = fopenCheck(path, "w");
    const ZeroPlan* p = &model->plan;
    const MemoryUse* m = &model->mem;
    // what always holds live data (the slots come and go): params or their shard, the optimizer,
    // the full gradient or the grad shard
    size_t slots = (size_t)(p->stage >= 2 && !p->full_grads) * (p->layout.unit_size[0] + 2 * (p->layout.num_units > 1 ? p->layout.unit_size[1] : 0)) * sizeof(float);
    fprintf(model->trace, "# gpt2-zero trace: trainer=cpu rank=%d ranks=%d group=%d stage=%d reshard=%s prefetch=%d "
            "unit_blocks=%d units=%d micro_steps=%d allocated=%zu fixed=%zu plan_total=%zu file=train_gpt2.c\n",
            rank, p->world_size, p->group_size, p->stage, RESHARD_NAMES[p->reshard], p->prefetch, p->unit_blocks,
            p->layout.num_units, p->grad_accum, m->params + m->grads + m->optimizer + m->buffers,
            m->params + m->optimizer + m->grads - slots, zero_plan_total(p));
}

static float* gather_buffer(GPT2* model, int u) {
    if (u == 0) { return model->gather_unit0; }
    return model->gather_blocks + (size_t)zero_gather_slot(&model->plan, u) * model->plan.layout.unit_size[1];
}

static void schedule_begin_micro_step(GPT2* model) {
    zero_walk_begin_micro_step(&model->walk);
    trace(model, "forward_begin");
}

static void schedule_begin_backward(GPT2* model) { trace(model, "backward_begin"); }

// A stage-3 gather slot (-1: unit 0's own buffer) and its bytes, for the trace.
static void trace_gather_slot(GPT2* model, const char* event, int u) {
    const ZeroPlan* p = &model->plan;
    trace(model, "%s what=gather unit=%d slot=%d bytes=%zu", event, u, u == 0 ? -1 : zero_gather_slot(p, u),
          p->layout.unit_size[u == 0 ? 0 : 1] * sizeof(float));
}

// Stage 3: the walk says which gathers to start (the unit, then its prefetch) and whether to
// wait for the unit's own.
static float* unit_params(GPT2* model, int u) {
    const ZeroPlan* p = &model->plan;
    if (p->stage < 3) { trace(model, "use unit=%d", u); return model->params + p->layout.unit_offset[u]; }
    ZeroUse use = zero_walk_use(&model->walk, p, u);
    for (int k = 0; k < use.num_gather; k++) {
        int g = use.gather[k];
        trace_gather_slot(model, "acquire", g);
        trace_issue(model, &model->group, COLL_ALL_GATHER, g, p->shard_size[g]);
        comm_all_gather_start(&model->group, model->param_shard + p->shard_offset[g], gather_buffer(model, g),
                              p->shard_size[g], &model->gather_req[g]);
    }
    if (use.wait) { unit_wait(model, &model->group, &model->gather_req[u], COLL_ALL_GATHER, u); }
    trace(model, "use unit=%d", u);
    return gather_buffer(model, u);
}

// A gather still in flight (prefetched, never used) must land before its slot is reused.
static void unit_release(GPT2* model, int u) {
    if (model->plan.stage < 3) { return; }
    UnitState was = zero_walk_release(&model->walk, &model->plan, u);
    if (was == UNIT_GATHERING) { unit_wait(model, &model->group, &model->gather_req[u], COLL_ALL_GATHER, u); }
    if (was != UNIT_SHARDED) { trace_gather_slot(model, "release", u); }
}

// After a unit's forward: released unless the reshard_after_forward policy keeps it (zero_plan.h).
static void unit_release_after_forward(GPT2* model, int u) {
    trace(model, "done_forward unit=%d", u);
    if (model->plan.stage == 3 && !zero_walk_keep_after_forward(&model->walk, &model->plan, u)) { unit_release(model, u); }
}

static void unit_release_after_backward(GPT2* model, int u) { unit_release(model, u); }

// After a forward that no backward follows (evaluation, sampling): release whatever is gathered.
void units_release_all(GPT2* model) {
    for (int u = 0; u < model->plan.layout.num_units; u++) { unit_release(model, u); }
}

// A forward that no backward follows (evaluation, sampling): stage 3 gathers only what the
// forward uses (no prefetch into the backward's units) and releases everything after it.
void gpt2_forward_only(GPT2* model, const int* inputs, const int* targets, int B, int T) {
    model->walk.forward_only = 1;
    gpt2_forward(model, inputs, targets, B, T, 0.0f);
    units_release_all(model);
    model->walk.forward_only = 0;
}

// Where unit u's full local gradient is: in the full slab, or (stages 2-3 without
// accumulation) in the unit-0 buffer or one of the two block slots (each the largest block
// unit's size, unit_size[1]), block unit u in slot (u-1) % 2.
static float* unit_grad_buffer(GPT2* model, int u) {
    const ZeroPlan* p = &model->plan;
    if (p->full_grads) { return model->grads + p->layout.unit_offset[u]; }
    if (u == 0) { return model->grad_unit0; }
    return model->grad_blocks + (size_t)zero_grad_slot(u) * p->layout.unit_size[1];
}

// The two block buffers alternate, so block l's reduce-scatter can still be running while block
// l-1's backward fills the other one; block l-2 waits for block l's to finish.
static float* unit_grads(GPT2* model, int u) {
    float* buf = unit_grad_buffer(model, u);
    if (model->plan.full_grads) { trace(model, "grads unit=%d", u); return buf; }
    if (u > 0) {
        int previous = zero_walk_grad_slot(&model->walk, u);
        if (previous != -1) { unit_wait(model, &model->group, &model->reduce_req[previous], COLL_REDUCE_SCATTER, previous); }
    }
    memset(buf, 0, model->plan.layout.unit_size[u] * sizeof(float));
    trace(model, "acquire what=grad unit=%d slot=%d bytes=%zu", u, u == 0 ? -1 : zero_grad_slot(u),
          model->plan.layout.unit_size[u == 0 ? 0 : 1] * sizeof(float));
    trace(model, "grads unit=%d", u);
    return buf;
}

// A unit's gradients are complete (for this micro-step). On the step's last micro-step they are
// reduce-scattered: stages 2-3 straight into the grad shard (waited for later), stages 0-1
// into a one-slice buffer and then into this rank's slice of the full gradient.
static void unit_grads_done(GPT2* model, int u, int reduce) {
    trace(model, "done_backward unit=%d", u);
    if (!reduce) { return; }
    const ZeroPlan* p = &model->plan;
    int rank = model->comm->rank;
    const float* full = unit_grad_buffer(model, u);
    trace_scratch(model, &model->group, p->shard_size[u], +1);
    if (p->stage >= 2) {
        trace_issue(model, &model->group, COLL_REDUCE_SCATTER, u, p->shard_size[u]);
        comm_reduce_scatter_start(&model->group, full, model->grad_shard + p->shard_offset[u], p->shard_size[u], &model->reduce_req[u]);
    } else {
        CommRequest req;
        trace_issue(model, &model->group, COLL_REDUCE_SCATTER, u, p->shard_size[u]);
        comm_reduce_scatter_start(&model->group, full, model->rs_buffer, p->shard_size[u], &req);
        unit_wait(model, &model->group, &req, COLL_REDUCE_SCATTER, u);
        memcpy(model->grads + zero_slice_offset(p, u, rank), model->rs_buffer, p->shard_size[u] * sizeof(float));
    }
}

// Every unit of a full slab whose own slices this rank holds: all-gather them in place, all
// units in flight at once. reqs (one per unit) must be free.
static void all_gather_units_inplace(GPT2* model, float* slab, CommRequest* reqs) {
    const ZeroPlan* p = &model->plan;
    for (int u = 0; u < p->layout.num_units; u++) {
        trace_issue(model, &model->group, COLL_ALL_GATHER, u, p->shard_size[u]);
        comm_all_gather_inplace_start(&model->group, slab + p->layout.unit_offset[u], p->shard_size[u], &reqs[u]);
    }
    for (int u = 0; u < p->layout.num_units; u++) { unit_wait(model, &model->group, &reqs[u], COLL_ALL_GATHER, u); }
}

// After the last micro-step's backward: wait for the reductions; stage 0 then all-gathers the
// reduced slices, which completes its all-reduce.
static void grads_finish_reduction(GPT2* model) {
    const ZeroPlan* p = &model->plan;
    for (int u = 0; u < p->layout.num_units; u++) {
        if (p->stage >= 2) { unit_wait(model, &model->group, &model->reduce_req[u], COLL_REDUCE_SCATTER, u); }
    }
    zero_walk_reductions_done(&model->walk);
    if (p->stage == 0) { all_gather_units_inplace(model, model->grads, model->reduce_req); }
    // -zg: the groups' reduced shards, summed across the groups (each a ring in a fixed order)
    for (int u = 0; u < p->layout.num_units && p->replicas > 1; u++) {
        trace_all_reduce(model, u, +1);
        comm_all_reduce(&model->across, grad_shard_of(model, u), p->shard_size[u]);
        trace_all_reduce(model, u, -1);
    }
}

// The step's scalars ("scalars" in the table above): each rank's part of the gradient norm's sum
// of squares, and of the loss, all-gathered and summed in order (the norm's by N-way slice,
// which is rank order unless -zg), so every rank, every stage and every G gets the same bits.
// (Evaluation averages its loss the same way.)
static double norm_squared_over_ranks(GPT2* model, double mine) {
    Comm* comm = model->comm;
    double* all = (double*)mallocCheck(comm->world_size * sizeof(double));
    trace_scalars(model, +1);
    comm_gather_doubles(comm, mine, all);
    trace_scalars(model, -1);
    double sum = 0.0;
    for (int j = 0; j < comm->world_size; j++) { sum += all[zero_slice_rank(&model->plan, j)]; }
    free(all);
    return sum;
}
static inline double mean_over_ranks(Comm* comm, double mine) { return comm_sum(comm, mine) / comm->world_size; }
static inline double sum_over_ranks(Comm* comm, double mine) { return comm_sum(comm, mine); } // counts: exact

// The step's loss averaged over the ranks (its "scalars"), traced.
static inline double loss_over_ranks(GPT2* model, double mine) {
    trace_scalars(model, +1);
    double mean = mean_over_ranks(model->comm, mine);
    trace_scalars(model, -1);
    return mean;
}

// Stages 1-2: every rank updated its own slices; gather them back into the full params.
static void params_all_gather(GPT2* model) { all_gather_units_inplace(model, model->params, model->gather_req); }

// The full parameters on every rank (for saving): a copy in stages 0-2, all-gathered in stage 3.
float* gpt2_full_params(GPT2* model) {
    const ZeroPlan* p = &model->plan;
    float* full = (float*)mallocCheck(p->layout.total * sizeof(float));
    if (p->stage < 3) { memcpy(full, model->params, p->layout.total * sizeof(float)); return full; }
    for (int u = 0; u < p->layout.num_units; u++) {
        CommRequest req;
        comm_all_gather_start(&model->group, model->param_shard + p->shard_offset[u], full + p->layout.unit_offset[u],
                              p->shard_size[u], &req);
        comm_wait(&model->group, &req);
    }
    return full;
}

// Rank 0's start-up table: what this rank allocated per category, the plan's prediction, and
// the ZeRO paper's formula (which leaves out buffers and the extra gradient units).
void print_memory_table(const GPT2* model) {
    const ZeroPlan* p = &model->plan;
    const MemoryUse* m = &model->mem;
    const double MB = 1024.0 * 1024.0;
    printf("ZeRO stage %d, %d ranks", p->stage, p->world_size);
    if (p->replicas > 1) { printf(" in %d shard groups of %d", p->replicas, p->group_size); }
    if (p->stage == 3) { printf(", reshard_after_forward %s, prefetch %d", RESHARD_NAMES[p->reshard], p->prefetch); }
    printf(", %d blocks per unit (%d units), %zu parameters padded to %zu\n", p->unit_blocks, p->layout.num_units,
           p->layout.num_parameters, p->layout.total);
    printf("memory per rank  | allocated (bytes) |      plan (bytes) | ZeRO formula\n");
    printf("params           | %17zu | %17zu | %9.2f MB\n", m->params, p->mem_params, p->zero_params / MB);
    printf("grads            | %17zu | %17zu | %9.2f MB\n", m->grads, p->mem_grads, p->zero_grads / MB);
    printf("optimizer        | %17zu | %17zu | %9.2f MB\n", m->optimizer, p->mem_optimizer, p->zero_optimizer / MB);
    printf("gather buffers   | %17zu | %17zu |\n", m->buffers, p->mem_buffers);
    printf("activations      | %17zu |                 - |\n", m->activations);
    // the ring reduce-scatter's partial sums (llmc/mpi_comm.h): allocated while it runs
    printf("comm scratch     | (while in flight) | %17zu |\n", p->mem_comm_scratch);
    printf("comm per step (plan, bus bytes): reduce-scatter %.0f, all-gather %.0f, scalars %.0f\n",
           p->comm_reduce_scatter, p->comm_all_gather, p->comm_scalars);
    if (p->replicas > 1) { printf("comm per step across groups (plan, bus bytes): all-reduce %.0f\n", p->comm_all_reduce_across); }
    printf("collectives per step (plan): reduce-scatter %d, all-gather %d\n", p->calls_reduce_scatter, p->calls_all_gather);
}

#ifndef TESTING
// ----------------------------------------------------------------------------
// sampling

// Generates gen_len tokens after <|endoftext|>; rank 0 prints them. Every rank runs it (stage 3
// needs all ranks for each gather) with the same seed, so all draw the same tokens. The forward
// runs on B=1 over the whole prefix each time (simple, and cheap at these lengths), or over its
// last T tokens once it is longer than the T the activations were sized for.
void gpt2_sample(GPT2* model, const Tokenizer* tokenizer, Rng* rng, int gen_len) {
    int eot = tokenizer->init_ok ? tokenizer->eot_token : GPT2_EOT;
    int print = model->comm->rank == 0;
    int* tokens = (int*)mallocCheck((size_t)(gen_len + 1) * sizeof(int));
    tokens[0] = eot;
    if (print) { printf("generating:\n---\n"); }
    for (int t = 1; t <= gen_len; t++) {
        int context = t < model->T ? t : model->T;
        gpt2_forward_only(model, tokens + t - context, NULL, 1, context);
        const float* probs = model->acts.probs + (size_t)(context - 1) * model->config.padded_vocab_size;
        tokens[t] = sample_index(probs, model->config.vocab_size, rng_uniform(rng));
        if (print) { tokenizer_print(tokenizer, tokens[t]); fflush(stdout); }
    }
    if (print) { printf("\n---\n"); }
    free(tokens);
}

// ----------------------------------------------------------------------------
// checkpoints (the format and the file handling are in llmc/checkpoint.h)

// Saves checkpoint `step` into dir (every rank takes part: stage 3 gathers the params), then
// keeps only the newest `keep` (0: all).
static void save_checkpoint(GPT2* model, const DataLoader* train, const Rng* rng, int step, const char* dir, int keep) {
    Comm* comm = model->comm;
    char path[1024];
    float* params = gpt2_full_params(model);
    if (comm->rank == 0) {
        checkpoint_path(path, sizeof(path), dir, "model", step, -1);
        write_model_file(&model->config, &model->plan.layout, params, path);
    }
    free(params);
    write_state_file(&model->plan, &model->config, comm->rank, model->m, model->v, train, rng, step, dir);
    // barriers with the I/O allowance (-wi), not -wt: the others wait here for rank 0's disk
    comm_io_barrier(comm, "every rank to write its checkpoint files"); // all in place before the marker
    if (comm->rank == 0) { write_done_marker(dir, step, comm->world_size, keep); }
    comm_io_barrier(comm, "rank 0 to write the checkpoint's DONE marker and prune old checkpoints");
}

// Loads checkpoint `step` from dir into a model made for this run's world size and stage:
// params, this rank's part of m and v, the data position, the sampling RNG.
static void load_checkpoint(GPT2* model, DataLoader* train, Rng* rng, const char* dir, int step) {
    const ZeroPlan* p = &model->plan;
    const ParamLayout* lay = &p->layout;
    float* full = (float*)callocCheck(lay->total, sizeof(float));
    float* full_m = (float*)callocCheck(lay->total, sizeof(float));
    float* full_v = (float*)callocCheck(lay->total, sizeof(float));
    int h0[HEADER_INTS] = {0}; // filled by load_checkpoint_state (zeroed: the compiler cannot see that)
    read_checkpoint(dir, step, &model->config, lay, full, full_m, full_v, h0);
    gpt2_set_params(model, full);
    for (int which = 0; which < 2; which++) {
        float* src = which == 0 ? full_m : full_v;
        float* dst = which == 0 ? model->m : model->v;
        if (p->stage == 0) { memcpy(dst, src, lay->total * sizeof(float)); continue; }
        for (int u = 0; u < lay->num_units; u++) {
            memcpy(dst + p->shard_offset[u], src + zero_slice_offset(p, u, model->comm->rank), p->shard_size[u] * sizeof(float));
        }
    }
    free(full);
    free(full_m);
    free(full_v);
    restore_position(h0, step, p->world_size, train, rng);
}

// ----------------------------------------------------------------------------
// training loop
// The counters of every communicator the model uses, zeroed (at a step's or an evaluation's start).
static void model_reset_counters(GPT2* model, int step) {
    Comm* comms[] = {model->comm, &model->group, &model->across};
    for (int i = 0; i < 3; i++) { comm_reset_counters(comms[i]); comms[i]->step = step; }
}

// Mean loss over up to max_steps val batches per rank, averaged over the ranks (each reads
// different batches).
static float evaluate(GPT2* model, DataLoader* val, int max_steps) {
    dataloader_reset(val);
    model_reset_counters(model, model->comm->step);
    int n = (int)dataloader_num_batches(val);
    if (max_steps >= 0 && max_steps < n) { n = max_steps; }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        gpt2_forward_only(model, val->inputs, val->targets, val->B, val->T);
        sum += gpt2_mean_loss(model);
    }
    // what the evaluation moved (stage 3's gathers), apart from the steps' counts
    double gathered = model->group.bus_bytes[COLL_ALL_GATHER];
    float loss = (float)mean_over_ranks(model->comm, sum / n);
    if (model->comm->world_size > 1 && model->comm->rank == 0) {
        printf("val comm: all-gather %.0f bytes over %d batches\n", gathered, n);
    }
    return loss;
}

// HellaSwag accuracy (-h 1): each rank scores its examples (llmc/hellaswag.h) with forwards like
// the val loss's; the correct counts are summed over the ranks in rank order.
static float evaluate_hellaswag(GPT2* model, EvalLoader* ev, int* correct) {
    evalloader_reset(ev);
    int mine = 0;
    for (int i = 0; i < ev->num_batches; i++) {
        evalloader_next_batch(ev);
        gpt2_forward_only(model, ev->inputs, ev->targets, ev->B, ev->T);
        mine += evalloader_score(ev, gpt2_losses(model), NULL, NULL);
    }
    *correct = (int)sum_over_ranks(model->comm, (double)mine);
    return (float)*correct / (float)ev->num_examples;
}

// One optimizer step: grad_accum micro-steps, each rank on its own batches, the gradient
// reductions of the last micro-step, the update. Returns the loss averaged over micro-steps
// and ranks; *norm gets the gradient norm.
static float train_step(GPT2* model, DataLoader* train, int grad_accum, float lr, const TrainArgs* args,
                        int step, float* norm) {
    gpt2_zero_grad(model);
    trace_step_begin(model, step + 1);
    double loss_sum = 0.0;
    // the step's loss is the mean over micro-steps and ranks: each backward's share
    float loss_scale = 1.0f / ((float)grad_accum * model->comm->world_size);
    for (int micro = 0; micro < grad_accum; micro++) {
        dataloader_next_batch(train);
        gpt2_forward(model, train->inputs, train->targets, args->B, args->T, loss_scale);
        gpt2_backward(model, micro == grad_accum - 1);
        loss_sum += gpt2_mean_loss(model);
    }
    grads_finish_reduction(model);
    trace(model, "update_begin");
    *norm = gpt2_update(model, lr, ADAMW_BETA1, ADAMW_BETA2, ADAMW_EPS, args->weight_decay, args->grad_clip, step + 1);
    trace(model, "update_end");
    float loss = (float)loss_over_ranks(model, loss_sum / grad_accum);
    trace_step_end(model);
    return loss;
}

// The training loop, as llm.c's: at each step the val loss every -v steps and a sample every -s
// steps, then one optimizer step, its line and its log line, and a checkpoint every -n steps;
// after the last step a last val loss and sample.
static void train_loop(GPT2* model, DataLoader* train, DataLoader* val, EvalLoader* hellaswag, const Tokenizer* tokenizer,
                       Rng* sample_rng, const TrainArgs* args, const TrainSizes* sz, int start_step, int max_steps, FILE* logfile) {
    Comm* comm = model->comm;
    for (int step = start_step; step <= max_steps; step++) {
        int last = step == max_steps;
        if (args->val_every > 0 && (step % args->val_every == 0 || last)) {
            float val_loss = evaluate(model, val, args->val_max_steps);
            if (comm->rank == 0) { printf("val loss %f\n", val_loss); }
            if (logfile) { fprintf(logfile, "s:%d tel:%f\n", step, val_loss); fflush(logfile); }
        }
        // -h 1: HellaSwag with the val loss (with -v 0: only after the last step)
        if (hellaswag != NULL && ((args->val_every > 0 && step % args->val_every == 0) || last)) {
            int correct;
            float acc = evaluate_hellaswag(model, hellaswag, &correct);
            if (comm->rank == 0) { printf("HellaSwag: %d/%d = %f\n", correct, hellaswag->num_examples, acc); }
            if (logfile) { fprintf(logfile, "s:%d eval:%.4f\n", step, acc); fflush(logfile); }
        }
        if (args->sample_every > 0 && ((step > 0 && step % args->sample_every == 0) || last)) {
            gpt2_sample(model, tokenizer, sample_rng, args->gen_len);
        }
        if (last) { break; }
        double t0 = now_seconds();
        model_reset_counters(model, step + 1);
        float lr = lr_cosine(step, args->lr, args->warmup, max_steps, args->final_lr_frac);
        float norm;
        float loss = train_step(model, train, sz->grad_accum, lr, args, step, &norm);
        double dt = now_seconds() - t0;
        if (comm->rank == 0) {
            printf("step %4d/%d: train loss %f norm %.4f lr %.2e (%.1f ms, %.0f tok/s)", step + 1, max_steps,
                   loss, norm, lr, dt * 1000, sz->total_batch / dt);
            if (comm->world_size > 1) { // inside the group (all ranks unless -zg); the scalars over all ranks
                const Comm* g = &model->group;
                printf(" | collectives: reduce-scatter %d all-gather %d | bytes sent: reduce-scatter %.0f all-gather %.0f scalars %.0f",
                       g->calls[COLL_REDUCE_SCATTER], g->calls[COLL_ALL_GATHER],
                       g->bus_bytes[COLL_REDUCE_SCATTER], g->bus_bytes[COLL_ALL_GATHER], comm->bus_bytes[COLL_SCALARS]);
            }
            if (model->plan.replicas > 1) { // the all-reduce across groups: its reduce-scatter and all-gather
                const Comm* a = &model->across;
                printf(" | across groups: all-reduce %.0f", a->bus_bytes[COLL_REDUCE_SCATTER] + a->bus_bytes[COLL_ALL_GATHER]);
            }
            printf("\n");
        }
        if (logfile) { fprintf(logfile, "s:%d trl:%f\n", step, loss); fflush(logfile); }
        if (args->checkpoint_every > 0 && (step + 1) % args->checkpoint_every == 0) {
            save_checkpoint(model, train, sample_rng, step + 1, args->output_dir, args->checkpoint_keep);
        }
    }
}

// The peak resident memory of the largest and the smallest rank (their RSS: all of a rank's
// memory, MPI's included): the plan gives every rank the same bytes, so a gap is a finding.
static void print_peak_memory(Comm* comm) {
    double* all = (double*)mallocCheck(comm->world_size * sizeof(double));
    comm_gather_doubles(comm, (double)peak_rss_bytes(), all);
    int most = 0, least = 0;
    for (int r = 1; r < comm->world_size; r++) {
        if (all[r] > all[most]) { most = r; }
        if (all[r] < all[least]) { least = r; }
    }
    if (comm->rank == 0) {
        printf("peak RSS per rank: max %.1f MB (rank %d), min %.1f MB (rank %d)\n", all[most] / 1048576.0, most,
               all[least] / 1048576.0, least);
    }
    free(all);
}

// -z auto: the budget is -zm (the same on every rank); outside the plan go the activations (the
// start-up table's row of that name).
static void pick_stage_auto(TrainSizes* sz, const GPT2Config* config, int recompute, Comm* comm, const TrainArgs* args) {
    if (args->zero_budget_mb <= 0) { fail("flag -z auto on the CPU trainer needs -zm: the MB of memory a rank may use"); }
    Activations unused;
    size_t other = activations_layout(&unused, NULL, config, recompute, args->B, args->T);
    StateBytes bytes = ZERO_STATE_BYTES_CPU;
    train_pick_stage(sz, config, comm->world_size, bytes, UNIT_ALIGN, other, "activations", args->zero_budget_mb * 1048576.0,
                     "flag -zm", comm->rank);
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); // progress lines appear as they happen, also in a log file
    Comm comm;
    comm_init(&comm, &argc, &argv);
    int rank = comm.rank, N = comm.world_size;
    TrainArgs args = train_args_defaults();
    args.model = "gpt2_124M.bin";
    comm_check_same_args(&comm, argc, argv);
    parse_args(&args, argc, argv, rank, "mpirun -np N ./train_gpt2 ... runs N ranks; OMP_NUM_THREADS sets the threads per rank.");
    if (args.recompute == -1) { args.recompute = 0; } // the CPU reference keeps every activation unless asked
    if (args.num_processes != -1 || args.process_rank != -1 || args.init_method || args.fs_path || args.server) {
        fail("flags -pn/-pr/-pi/-pf/-ps are for the CUDA trainer: the CPU trainer runs its ranks under mpirun -np N");
    }
    if (args.attention_sm90 != 0) { fail("flag -ak is for the CUDA trainer: the CPU trainer runs no attention kernels"); }
    if (args.cuda_graph != 0) { fail("flag -cg is for the CUDA trainer: the CPU trainer launches no kernels"); }
    if (args.offload != 0) { fail("flag -zo is for the CUDA trainer: the CPU trainer's optimizer state is in host memory already"); }
    if (args.grad_dtype != NULL) { fail("flag -zd is for the CUDA trainer: the CPU trainer accumulates and reduces fp32 gradients"); }
    comm.timeout_s = args.wait_timeout;
    comm.io_timeout_s = io_wait_seconds(&args);
    // a full disk or a file-size limit must fail a write with a message, not kill the process
    signal(SIGXFSZ, SIG_IGN);
    // one job at a time in -o (llmc/outdir_lock.h): rank 0 takes the lock before anything there
    // is read or written, then every other rank holds it too
    if (args.output_dir != NULL) {
        make_dirs(args.output_dir);
        if (rank == 0) { outdir_lock_take(args.output_dir, N); }
        comm_sum(&comm, 0.0); // a barrier: rank 0 holds the lock before the others join
        if (rank != 0) { outdir_lock_join(args.output_dir); }
    }

    // the config, then the plan and this rank's allocations, then the parameters
    GPT2Config config;
    FILE* model_fp = train_model_config(&args, &config, NULL);
    TrainSizes sz = train_sizes(&args, &config, N);
    if (args.zero_stage == ZERO_STAGE_AUTO) { pick_stage_auto(&sz, &config, args.recompute, &comm, &args); }
    GPT2 model;
    gpt2_init(&model, &config, &comm, sz.zero, args.recompute);
    float* full = train_initial_params(&args, &config, &model.plan.layout, model_fp, MODEL_VERSION_FP32);
    gpt2_set_params(&model, full);
    free(full);

    DataLoader train, val;
    dataloader_init(&train, args.train_pattern, args.B, args.T, rank, N, config.vocab_size, args.shuffle, (uint64_t)args.seed);
    DataLoader* valp = train_val_init(&args, &val, rank, N, config.vocab_size); // NULL with -v 0
    EvalLoader hellaswag_loader;
    EvalLoader* hellaswag = train_hellaswag_init(&args, &hellaswag_loader, config.vocab_size, rank, N);
    int max_steps = train_max_steps(&args, &train, sz.grad_accum);
    Tokenizer tokenizer;
    tokenizer_init(&tokenizer, "gpt2_tokenizer.bin");
    gpt2_alloc_activations(&model, args.B, args.T);
    trace_open(&model, args.trace, rank);

    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (rank == 0) {
        printf("model %s: L %d, NH %d, C %d, maxT %d, V %d (padded %d), %zu parameters\n", args.model,
               config.num_layers, config.num_heads, config.channels, config.max_seq_len, config.vocab_size,
               config.padded_vocab_size, model.plan.layout.num_parameters);
        printf("%d ranks x batch B %d x T %d, %d micro-steps per step (%d tokens), %d steps, lr %g, recompute %d, %d threads per rank\n",
               N, args.B, args.T, sz.grad_accum, sz.total_batch, max_steps, args.lr, args.recompute, threads);
        print_memory_table(&model);
    }

    Rng sample_rng;
    rng_init(&sample_rng, (uint64_t)args.seed + 1);
    int start_step = 0;
    if (args.resume) {
        start_step = newest_checkpoint(args.output_dir);
        if (start_step >= 0) {
            load_checkpoint(&model, &train, &sample_rng, args.output_dir, start_step);
            if (rank == 0) { printf("resumed from checkpoint %d in %s\n", start_step, args.output_dir); }
        } else {
            if (rank == 0) { printf("no complete checkpoint in %s: starting from step 0\n", args.output_dir); }
            start_step = 0;
        }
    }
    // every rank has read the model file (and the checkpoint): the first collective, timed by
    // -wt, must not wait for a slower rank's disk
    comm_io_barrier(&comm, "every rank to read the model and the checkpoint");

    FILE* logfile = NULL;
    char path[1024];
    if (args.output_dir != NULL) {
        snprintf(path, sizeof(path), "%s/main.log", args.output_dir);
        if (rank == 0) { logfile = fopenCheck(path, start_step > 0 ? "a" : "w"); }
    }
    train_loop(&model, &train, valp, hellaswag, &tokenizer, &sample_rng, &args, &sz, start_step, max_steps, logfile);
    if (args.output_dir != NULL) {
        float* params = gpt2_full_params(&model); // collective in stage 3: every rank takes part
        if (rank == 0) {
            fcloseCheck(logfile, path);
            snprintf(path, sizeof(path), "%s/model_%08d.bin", args.output_dir, max_steps);
            write_model_file(&config, &model.plan.layout, params, path);
            printf("wrote %s\n", path);
        }
        free(params);
        comm_io_barrier(&comm, "rank 0 to write the final model");
    }
    print_peak_memory(&comm);

    dataloader_free(&train);
    if (valp != NULL) { dataloader_free(valp); }
    if (hellaswag != NULL) { evalloader_free(hellaswag); }
    tokenizer_free(&tokenizer);
    gpt2_free(&model);
    comm_finalize(&comm);
    return 0;
}
#endif // TESTING
