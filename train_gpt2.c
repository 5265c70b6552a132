/*
train_gpt2.c: GPT-2 training on the CPU, the reference of gpt2-zero.

fp32 throughout, OpenMP for the cores, every layer's forward and backward written out by hand.
It is checked tensor by tensor against an independent PyTorch model (train_gpt2.py) by
test_gpt2.c, and the CUDA trainer is checked against the same reference.

The parameters live in one slab laid out unit-major (embeddings, block 0, ..., block L-1, final
layernorm; see llmc/gpt2_layout.h), so the ZeRO sharding can cut it by unit without touching
the model code. The model files keep llm.c's tensor-major order; load and save convert.

Run (after `node dev/data/tinyshakespeare.js` and `/usr/bin/python3 train_gpt2.py`):
    make train_gpt2
    OMP_NUM_THREADS=2 ./train_gpt2                     # fine-tune the reference model file
    OMP_NUM_THREADS=2 ./train_gpt2 -e d4 -b 8 -x 300   # train a small GPT-2 from scratch
    ./train_gpt2 -h                                    # the flags

Sections: layer kernels -> model (build, load, save) -> forward -> backward -> update ->
data and sampling -> training loop and main.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "llmc/utils.h"
#include "llmc/rand.h"
#include "llmc/gpt2_layout.h"
#include "llmc/dataloader.h"
#include "llmc/tokenizer.h"
#include "llmc/schedulers.h"

// ----------------------------------------------------------------------------
// matrix multiply: the one routine that decides the speed

// c(m, n) += sum_k A(m, k) * B(k, n), where c is row-major with leading dimension ldc, and A and
// B are read through strides, so the same routine serves the forward (B = W^T), the input
// gradient (B = W) and the weight gradient (A = dout^T) without transposed copies.
// Blocked like a BLAS: a task owns a GEMM_MC x GEMM_NC block of c; for each GEMM_KC slice of k
// it copies ("packs") its pieces of A and B into small contiguous panels that stay in cache,
// then a GEMM_MR x GEMM_NR micro-kernel keeps its tile of c in registers while it runs over k.
// Each element of c is summed by one task in a fixed k order, so the result does not depend
// on the number of threads (ZeRO stages are compared bitwise later).
#ifndef GEMM_MR
#define GEMM_MR 8    // rows of the register tile
#endif
#ifndef GEMM_NR
#define GEMM_NR 32   // columns of the register tile (a few SIMD vectors)
#endif
#ifndef GEMM_KC
#define GEMM_KC 256  // k slice: a GEMM_KC x GEMM_NR panel of B fits in L1
#endif
#ifndef GEMM_MC
#define GEMM_MC 256  // rows of c per task (A's panels, GEMM_MC x GEMM_KC, stay in L2)
#endif
#ifndef GEMM_NC
#define GEMM_NC 256  // columns of c per task at most (B's panels stay in L2)
#endif

typedef struct {
    const float* p;
    size_t s0, s1; // element (i, j) is p[i*s0 + j*s1]
} StridedMatrix;

// acc = A_panel (MR x kc, stored k-major) times B_panel (kc x NR); written without intrinsics,
// the fixed-size loops let the compiler keep acc in vector registers.
static inline void gemm_micro_kernel(float acc[GEMM_MR][GEMM_NR], const float* restrict ap,
                                     const float* restrict bp, int kc) {
    for (int r = 0; r < GEMM_MR; r++) {
        for (int j = 0; j < GEMM_NR; j++) { acc[r][j] = 0.0f; }
    }
    for (int k = 0; k < kc; k++) {
        const float* brow = bp + k * GEMM_NR;
        for (int r = 0; r < GEMM_MR; r++) {
            float a = ap[k * GEMM_MR + r];
            for (int j = 0; j < GEMM_NR; j++) { acc[r][j] += a * brow[j]; }
        }
    }
}

// Copies A(m0 .. m0+mc, k0 .. k0+kc) into panels of GEMM_MR rows, k-major; rows past M are 0.
// The loop order follows A's contiguous direction, so the reads stream through memory.
static void gemm_pack_a(float* ap, StridedMatrix A, int m0, int mc, int k0, int kc) {
    for (int p = 0; p < mc; p += GEMM_MR) {
        float* panel = ap + (size_t)p * kc;
        int rows = mc - p < GEMM_MR ? mc - p : GEMM_MR;
        if (rows < GEMM_MR) { memset(panel, 0, sizeof(float) * GEMM_MR * kc); }
        for (int r = 0; r < rows; r++) {
            const float* src = A.p + (size_t)(m0 + p + r) * A.s0 + (size_t)k0 * A.s1;
            if (A.s1 == 1) { for (int k = 0; k < kc; k++) { panel[k * GEMM_MR + r] = src[k]; } }
            else { for (int k = 0; k < kc; k++) { panel[k * GEMM_MR + r] = src[(size_t)k * A.s1]; } }
        }
    }
}

// Copies B(k0 .. k0+kc, n0 .. n0+nc) into panels of GEMM_NR columns, k-major; columns past N are 0.
static void gemm_pack_b(float* bp, StridedMatrix B, int k0, int kc, int n0, int nc) {
    for (int p = 0; p < nc; p += GEMM_NR) {
        float* panel = bp + (size_t)p * kc;
        int cols = nc - p < GEMM_NR ? nc - p : GEMM_NR;
        if (cols < GEMM_NR) { memset(panel, 0, sizeof(float) * GEMM_NR * kc); }
        if (B.s1 == 1) { // rows of B are contiguous: copy row pieces
            for (int k = 0; k < kc; k++) {
                const float* src = B.p + (size_t)(k0 + k) * B.s0 + (n0 + p);
                for (int j = 0; j < cols; j++) { panel[k * GEMM_NR + j] = src[j]; }
            }
        } else { // columns of B are contiguous (B = W^T): copy column pieces
            for (int j = 0; j < cols; j++) {
                const float* src = B.p + (size_t)k0 * B.s0 + (size_t)(n0 + p + j) * B.s1;
                for (int k = 0; k < kc; k++) { panel[k * GEMM_NR + j] = src[(size_t)k * B.s0]; }
            }
        }
    }
}

// One GEMM_MC x nc block of c, k slice by k slice: the micro-kernel over every register tile.
static void gemm_block(float* c, int ldc, const float* ap, const float* bp, int m0, int mc, int n0, int nc, int kc) {
    for (int jr = 0; jr < nc; jr += GEMM_NR) {
        for (int ir = 0; ir < mc; ir += GEMM_MR) {
            float acc[GEMM_MR][GEMM_NR];
            gemm_micro_kernel(acc, ap + (size_t)ir * kc, bp + (size_t)jr * kc, kc);
            int mr = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
            int nr = nc - jr < GEMM_NR ? nc - jr : GEMM_NR;
            float* ct = c + (size_t)(m0 + ir) * ldc + n0 + jr;
            for (int r = 0; r < mr; r++) {
                if (nr == GEMM_NR) { // the common full tile: a vectorized row add
                    for (int j = 0; j < GEMM_NR; j++) { ct[(size_t)r * ldc + j] += acc[r][j]; }
                } else {
                    for (int j = 0; j < nr; j++) { ct[(size_t)r * ldc + j] += acc[r][j]; }
                }
            }
        }
    }
}

// Packed copy of A, shared by all threads; grows to the largest A seen and is kept (see below).
static float* g_packed_a = NULL;
static size_t g_packed_a_size = 0;

static void gemm_accumulate(float* c, int ldc, StridedMatrix A, StridedMatrix B, int M, int N, int K) {
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    // Tasks are GEMM_MC x nc blocks of c; column blocks narrow when there are too few to share.
    int mblocks = (M + GEMM_MC - 1) / GEMM_MC;
    int kslices = (K + GEMM_KC - 1) / GEMM_KC;
    int nc_block = GEMM_NC;
    while (nc_block > GEMM_NR && mblocks * ((N + nc_block - 1) / nc_block) < 4 * threads) { nc_block /= 2; }
    int nblocks = (N + nc_block - 1) / nc_block;
    // A is packed once up front rather than by every task that reads it: for the LM head's
    // input gradient A is (B*T, Vp), and each of the column tasks would copy all of it again.
    size_t packed_size = (size_t)mblocks * GEMM_MC * K;
    if (packed_size > g_packed_a_size) {
        free(g_packed_a);
        g_packed_a = (float*)mallocCheck(packed_size * sizeof(float));
        g_packed_a_size = packed_size;
    }
    float* packed_a = g_packed_a;
    #pragma omp parallel
    {
        #pragma omp for collapse(2) schedule(static)
        for (int ib = 0; ib < mblocks; ib++) {
            for (int ks = 0; ks < kslices; ks++) {
                int m0 = ib * GEMM_MC, mc = M - m0 < GEMM_MC ? M - m0 : GEMM_MC;
                int k0 = ks * GEMM_KC, kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
                gemm_pack_a(packed_a + ((size_t)ib * K + k0) * GEMM_MC, A, m0, mc, k0, kc);
            }
        }
        // the B panel, per thread. A thread-local static, not malloc: freeing a buffer this
        // large unmaps it, and every unmap stalls all threads.
        static _Thread_local float bp[GEMM_NC * GEMM_KC] __attribute__((aligned(64)));
        #pragma omp for collapse(2) schedule(dynamic, 1)
        for (int ib = 0; ib < mblocks; ib++) {
            for (int jb = 0; jb < nblocks; jb++) {
                int m0 = ib * GEMM_MC, mc = M - m0 < GEMM_MC ? M - m0 : GEMM_MC;
                int n0 = jb * nc_block, nc = N - n0 < nc_block ? N - n0 : nc_block;
                for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
                    int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
                    gemm_pack_b(bp, B, k0, kc, n0, nc);
                    gemm_block(c, ldc, packed_a + ((size_t)ib * K + k0) * GEMM_MC, bp, m0, mc, n0, nc, kc);
                }
            }
        }
    }
}

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
        float* o = out + (size_t)bt * C;
        for (int i = 0; i < C; i++) { o[i] = (x[i] - m) * s * weight[i] + bias[i]; }
        mean[bt] = m;
        rstd[bt] = s;
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

// tanh(u) = 1 - 2 / (exp(2u) + 1): one expf instead of tanhf (which is ~3x slower in glibc).
// The absolute error stays ~1e-7 (exp(2u) -> inf gives 1, -> 0 gives -1), and GELU only needs
// 1 + tanh, so the lost relative precision of tanh near 0 does not show.
static inline float tanh_via_exp(float u) { return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f); }
void gelu_forward(float* out, const float* inp, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanh_via_exp(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

// dinp (N) += gelu'(inp) * dout
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = tanh_via_exp(u);
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
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

// Pointers to one layer's 12 tensors inside a parameter-shaped slab (params, grads, m or v).
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

typedef struct {
    // saved by the forward for the backward; per-layer tensors stacked over L
    float* encoded;   // (B,T,C)
    float* ln1;       // (L,B,T,C)
    float* ln1_mean;  // (L,B,T)
    float* ln1_rstd;  // (L,B,T)
    float* qkv;       // (L,B,T,3C)
    float* atty;      // (L,B,T,C)
    float* att;       // (L,B,NH,T,T)
    float* attproj;   // (L,B,T,C)
    float* residual2; // (L,B,T,C)
    float* ln2;       // (L,B,T,C)
    float* ln2_mean;  // (L,B,T)
    float* ln2_rstd;  // (L,B,T)
    float* fch;       // (L,B,T,4C)
    float* fch_gelu;  // (L,B,T,4C)
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

typedef struct {
    GPT2Config config;
    ParamLayout layout;
    float* params;     // (layout.total) unit-major slab; padding stays 0
    float* grads;      // (layout.total) same layout
    float* m;          // (layout.total) AdamW first moment, allocated at the first update
    float* v;          // (layout.total) AdamW second moment
    Activations acts;
    float* acts_memory;
    int B, T;          // the largest batch the activations hold
    int* inputs;       // (B,T) of the last forward
    int* targets;      // (B,T) of the last forward, or unused
    float mean_loss;   // of the last forward with targets, else -1
} GPT2;

// Units are padded to whole cache lines so every unit starts 64-byte aligned.
#define UNIT_ALIGN 16

static BlockTensors block_tensors(const GPT2* model, float* slab, int l) {
    const GPT2Config* c = &model->config;
    const ParamLayout* lay = &model->layout;
    BlockTensors bt = {
        slab + tensor_offset(lay, c, LN1W, l), slab + tensor_offset(lay, c, LN1B, l),
        slab + tensor_offset(lay, c, QKVW, l), slab + tensor_offset(lay, c, QKVB, l),
        slab + tensor_offset(lay, c, ATTPROJW, l), slab + tensor_offset(lay, c, ATTPROJB, l),
        slab + tensor_offset(lay, c, LN2W, l), slab + tensor_offset(lay, c, LN2B, l),
        slab + tensor_offset(lay, c, FCW, l), slab + tensor_offset(lay, c, FCB, l),
        slab + tensor_offset(lay, c, FCPROJW, l), slab + tensor_offset(lay, c, FCPROJB, l),
    };
    return bt;
}

static float* tensor_ptr(const GPT2* model, float* slab, int t) {
    return slab + tensor_offset(&model->layout, &model->config, t, 0);
}

static void gpt2_alloc_params(GPT2* model) {
    layout_init(&model->layout, &model->config, UNIT_ALIGN);
    model->params = (float*)callocCheck(model->layout.total, sizeof(float));
    model->grads = (float*)callocCheck(model->layout.total, sizeof(float));
    model->m = NULL;
    model->v = NULL;
    model->acts_memory = NULL;
    model->inputs = NULL;
    model->targets = NULL;
    model->mean_loss = -1.0f;
}

// Reads a model file (llm.c format, fp32 version 3) and converts it to the unit-major slab.
void gpt2_build_from_checkpoint(GPT2* model, const char* path) {
    FILE* fp = fopenCheck(path, "rb");
    int header[HEADER_INTS];
    read_header(fp, header, path, MODEL_MAGIC, "GPT-2 model");
    if (header[1] == MODEL_VERSION_BF16) {
        fail("'%s' is a bf16 model (version 5); the CPU trainer needs the fp32 file (version 3)", path);
    }
    if (header[1] != MODEL_VERSION_FP32) {
        fail("'%s' has version %d, expected %d (fp32)", path, header[1], MODEL_VERSION_FP32);
    }
    config_from_header(&model->config, header, path);
    gpt2_alloc_params(model);
    const GPT2Config* c = &model->config;
    long expected = (long)(HEADER_INTS * sizeof(int) + model->layout.num_parameters * sizeof(float));
    long size = file_size(fp, path);
    if (size != expected) {
        fail("'%s' is %ld bytes, expected %ld for its config (L %d, C %d, Vp %d): truncated or corrupt",
             path, size, expected, c->num_layers, c->channels, c->padded_vocab_size);
    }
    fseekCheck(fp, HEADER_INTS * sizeof(int), SEEK_SET, path);
    // file: tensor-major, each tensor stacked over layers; memory: unit-major
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (int l = 0; l < tensor_copies(c, t); l++) {
            freadCheck(model->params + tensor_offset(&model->layout, c, t, l), sizeof(float), tensor_numel(c, t), fp, path);
        }
    }
    fclose(fp);
}

// A fresh model "dN": depth N, channels 64*N, N heads (d12 is GPT-2 124M), initialized as
// GPT-2: weights N(0, 0.02), the two residual projections scaled by 1/sqrt(2L) so the
// residual stream's variance does not grow with depth; biases 0, layernorm weights 1.
void gpt2_build_from_random(GPT2* model, int depth, int max_seq_len, uint64_t seed) {
    GPT2Config* c = &model->config;
    c->num_layers = depth;
    c->channels = 64 * depth;
    c->num_heads = depth;
    c->vocab_size = 50257;
    c->padded_vocab_size = 50304;
    c->max_seq_len = max_seq_len;
    gpt2_alloc_params(model);
    Rng rng;
    rng_init(&rng, seed);
    float residual_std = 0.02f / sqrtf(2.0f * depth);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (int l = 0; l < tensor_copies(c, t); l++) {
            float* p = model->params + tensor_offset(&model->layout, c, t, l);
            size_t n = tensor_numel(c, t);
            if (t == WTE) { n = (size_t)c->vocab_size * c->channels; } // padded rows stay 0
            for (size_t i = 0; i < n; i++) {
                if (t == LN1W || t == LN2W || t == LNFW) { p[i] = 1.0f; }
                else if (TENSOR_INFO[t].decay) { p[i] = rng_normal(&rng, 0.0f, (t == ATTPROJW || t == FCPROJW) ? residual_std : 0.02f); }
                else { p[i] = 0.0f; }
            }
        }
    }
}

// Writes the model in llm.c's format (fp32, tensor-major) to a temporary name, then renames it,
// so a crash while writing never leaves a half file under the real name.
void gpt2_write_checkpoint(const GPT2* model, const char* path) {
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* fp = fopenCheck(tmp, "wb");
    const GPT2Config* c = &model->config;
    int header[HEADER_INTS] = {0};
    header[0] = MODEL_MAGIC; header[1] = MODEL_VERSION_FP32;
    header[2] = c->max_seq_len; header[3] = c->vocab_size; header[4] = c->num_layers;
    header[5] = c->num_heads; header[6] = c->channels; header[7] = c->padded_vocab_size;
    fwriteCheck(header, sizeof(int), HEADER_INTS, fp, tmp);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (int l = 0; l < tensor_copies(c, t); l++) {
            fwriteCheck(model->params + tensor_offset(&model->layout, c, t, l), sizeof(float), tensor_numel(c, t), fp, tmp);
        }
    }
    if (fflush(fp) != 0) { fail("cannot write '%s': %s", tmp, strerror(errno)); }
    fcloseCheck(fp, tmp);
    if (rename(tmp, path) != 0) { fail("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno)); }
}

// Carves the activation slab for batches of up to B x T.
static void gpt2_alloc_activations(GPT2* model, int B, int T) {
    const GPT2Config* c = &model->config;
    size_t L = c->num_layers, NH = c->num_heads, C = c->channels, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    Activations* a = &model->acts;
    float** ptrs[] = {
        &a->encoded, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->atty, &a->att, &a->attproj,
        &a->residual2, &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch, &a->fch_gelu, &a->fcproj,
        &a->residual3, &a->lnf, &a->lnf_mean, &a->lnf_rstd, &a->logits, &a->probs, &a->losses,
        &a->dresidual, &a->dbtc, &a->dbtc2, &a->dbt4c, &a->dbt4c2, &a->dqkv, &a->datt,
    };
    size_t sizes[] = {
        BT * C, L * BT * C, L * BT, L * BT, L * BT * 3 * C, L * BT * C, L * B * NH * T * T, L * BT * C,
        L * BT * C, L * BT * C, L * BT, L * BT, L * BT * 4 * C, L * BT * 4 * C, L * BT * C,
        L * BT * C, BT * C, BT, BT, BT * Vp, BT * Vp, BT,
        BT * C, BT * C, BT * C, BT * 4 * C, BT * 4 * C, BT * 3 * C, (size_t)B * NH * T,
    };
    int n = sizeof(sizes) / sizeof(sizes[0]);
    size_t total = 0;
    for (int i = 0; i < n; i++) { total += sizes[i]; }
    model->acts_memory = (float*)mallocCheck(total * sizeof(float));
    float* p = model->acts_memory;
    for (int i = 0; i < n; i++) { *ptrs[i] = p; p += sizes[i]; }
    model->B = B;
    model->T = T;
    model->inputs = (int*)mallocCheck(BT * sizeof(int));
    model->targets = (int*)mallocCheck(BT * sizeof(int));
}

// ----------------------------------------------------------------------------
// forward

// Runs the model on inputs (B,T); with targets (B,T), also the loss. B x T may be smaller than
// the first call's (sampling runs with B=1 and a growing T).
void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T) {
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
    memcpy(model->inputs, inputs, (size_t)B * T * sizeof(int));
    if (targets != NULL) { memcpy(model->targets, targets, (size_t)B * T * sizeof(int)); }

    Activations* a = &model->acts;
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    encoder_forward(a->encoded, inputs, tensor_ptr(model, model->params, WTE), tensor_ptr(model, model->params, WPE), B, T, C);
    for (int l = 0; l < L; l++) {
        BlockTensors w = block_tensors(model, model->params, l);
        const float* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        float* ln1 = a->ln1 + l * BTC;
        float* qkv = a->qkv + l * BTC * 3;
        float* atty = a->atty + l * BTC;
        float* att = a->att + (size_t)l * B * NH * T * T;
        float* attproj = a->attproj + l * BTC;
        float* residual2 = a->residual2 + l * BTC;
        float* ln2 = a->ln2 + l * BTC;
        float* fch = a->fch + l * BTC * 4;
        float* fch_gelu = a->fch_gelu + l * BTC * 4;
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
    }
    const float* last = a->residual3 + (L - 1) * BTC;
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, last, tensor_ptr(model, model->params, LNFW),
                      tensor_ptr(model, model->params, LNFB), B, T, C);
    // the LM head is tied to the token embedding: logits = lnf @ wte^T
    matmul_forward(a->logits, a->lnf, tensor_ptr(model, model->params, WTE), NULL, B, T, C, Vp);
    softmax_crossentropy_forward(a->probs, a->losses, a->logits, targets, B, T, V, Vp);
    if (targets != NULL) {
        double sum = 0.0; // in a fixed order: the loss must not depend on the thread count
        for (size_t i = 0; i < BT; i++) { sum += a->losses[i]; }
        model->mean_loss = (float)(sum / BT);
    } else {
        model->mean_loss = -1.0f;
    }
}

// ----------------------------------------------------------------------------
// backward

// Adds this micro-batch's gradients into model->grads. loss_scale divides the mean loss's
// gradient (1 / number of micro-batches whose losses are averaged). Uses the B, T, inputs and
// targets of the last forward, which must have had targets.
void gpt2_backward(GPT2* model, int B, int T, float loss_scale) {
    if (model->mean_loss == -1.0f) { fail("backward called without a forward with targets"); }
    const GPT2Config* c = &model->config;
    int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers, NH = c->num_heads, C = c->channels;
    Activations* a = &model->acts;
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    float* g = model->grads;

    // the loss is the mean over B*T positions, so each position's loss has weight 1/(B*T)
    float dloss = loss_scale / (float)BT;
    float* dlogits = a->logits; // the forward's logits are not needed any more
    softmax_crossentropy_backward(dlogits, a->probs, model->targets, dloss, B, T, V, Vp);
    float* dlnf = a->dbtc;
    memset(dlnf, 0, BTC * sizeof(float));
    matmul_backward(dlnf, tensor_ptr(model, g, WTE), NULL, dlogits, a->lnf, tensor_ptr(model, model->params, WTE), B, T, C, Vp);
    float* dresidual = a->dresidual;
    memset(dresidual, 0, BTC * sizeof(float));
    const float* last = a->residual3 + (L - 1) * BTC;
    layernorm_backward(dresidual, tensor_ptr(model, g, LNFW), tensor_ptr(model, g, LNFB), dlnf, last,
                       tensor_ptr(model, model->params, LNFW), a->lnf_mean, a->lnf_rstd, B, T, C);

    for (int l = L - 1; l >= 0; l--) {
        BlockTensors w = block_tensors(model, model->params, l);
        BlockTensors dw = block_tensors(model, g, l);
        const float* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        // dresidual holds d(loss)/d(residual3 of layer l); the residual adds pass it through
        // unchanged, and each layernorm branch adds its part into it.
        float* dfch_gelu = a->dbt4c;
        float* dfch = a->dbt4c2;
        float* dln2 = a->dbtc;
        memset(dfch_gelu, 0, BTC * 4 * sizeof(float));
        memset(dfch, 0, BTC * 4 * sizeof(float));
        memset(dln2, 0, BTC * sizeof(float));
        matmul_backward(dfch_gelu, dw.fcprojw, dw.fcprojb, dresidual, a->fch_gelu + l * BTC * 4, w.fcprojw, B, T, 4 * C, C);
        gelu_backward(dfch, a->fch + l * BTC * 4, dfch_gelu, BTC * 4);
        matmul_backward(dln2, dw.fcw, dw.fcb, dfch, a->ln2 + l * BTC, w.fcw, B, T, C, 4 * C);
        layernorm_backward(dresidual, dw.ln2w, dw.ln2b, dln2, a->residual2 + l * BTC, w.ln2w,
                           a->ln2_mean + l * BT, a->ln2_rstd + l * BT, B, T, C);
        // dresidual is now d(loss)/d(residual2)
        float* datty = a->dbtc;
        float* dqkv = a->dqkv;
        float* dln1 = a->dbtc2;
        memset(datty, 0, BTC * sizeof(float));
        memset(dqkv, 0, BTC * 3 * sizeof(float));
        memset(dln1, 0, BTC * sizeof(float));
        matmul_backward(datty, dw.attprojw, dw.attprojb, dresidual, a->atty + l * BTC, w.attprojw, B, T, C, C);
        attention_backward(dqkv, a->datt, datty, a->qkv + l * BTC * 3, a->att + (size_t)l * B * NH * T * T, B, T, C, NH);
        matmul_backward(dln1, dw.qkvw, dw.qkvb, dqkv, a->ln1 + l * BTC, w.qkvw, B, T, C, 3 * C);
        layernorm_backward(dresidual, dw.ln1w, dw.ln1b, dln1, residual, w.ln1w,
                           a->ln1_mean + l * BT, a->ln1_rstd + l * BT, B, T, C);
        // dresidual is now d(loss)/d(residual3 of layer l-1)
    }
    encoder_backward(tensor_ptr(model, g, WTE), tensor_ptr(model, g, WPE), dresidual, model->inputs, B, T, C);
}

void gpt2_zero_grad(GPT2* model) { memset(model->grads, 0, model->layout.total * sizeof(float)); }

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

// The factor that clips gradients of global L2 norm `norm` to `max_norm` (PyTorch's
// clip_grad_norm_ rule); 1 when max_norm is 0 (clipping off) or the norm is small enough.
float grad_clip_scale(float norm, float max_norm) {
    if (max_norm <= 0.0f) { return 1.0f; }
    float scale = max_norm / (norm + 1e-6f);
    return scale < 1.0f ? scale : 1.0f;
}

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int t;            // the step number, from 1, for the bias corrections
    float grad_scale; // the clipping factor, applied to the gradients as they are read
} AdamWParams;

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

// One optimizer step over the whole slab, tensor by tensor (weight decay only on the 2-D
// weights, from the table in gpt2_layout.h). Returns the gradient norm before clipping.
float gpt2_update(GPT2* model, float lr, float beta1, float beta2, float eps, float weight_decay,
                  float grad_clip, int t) {
    const GPT2Config* c = &model->config;
    const ParamLayout* lay = &model->layout;
    if (model->m == NULL) {
        model->m = (float*)callocCheck(lay->total, sizeof(float));
        model->v = (float*)callocCheck(lay->total, sizeof(float));
    }
    float norm = (float)sqrt(sum_of_squares(model->grads, lay->total));
    AdamWParams hp = {lr, beta1, beta2, eps, weight_decay, t, grad_clip_scale(norm, grad_clip)};
    for (int ti = 0; ti < NUM_PARAM_TENSORS; ti++) {
        float wd = TENSOR_INFO[ti].decay ? weight_decay : 0.0f;
        for (int l = 0; l < tensor_copies(c, ti); l++) {
            size_t off = tensor_offset(lay, c, ti, l);
            adamw_update(model->params + off, model->grads + off, model->m + off, model->v + off,
                         tensor_numel(c, ti), wd, &hp);
        }
    }
    return norm;
}

void gpt2_free(GPT2* model) {
    free(model->params); free(model->grads); free(model->m); free(model->v);
    free(model->acts_memory); free(model->inputs); free(model->targets);
}

#ifndef TESTING
// ----------------------------------------------------------------------------
// sampling

// Index drawn from probabilities probs[0..n) with the uniform number coin in [0, 1).
int sample_index(const float* probs, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += probs[i];
        if (coin < cdf) { return i; }
    }
    return n - 1; // rounding left the sum just under 1
}

// Generates gen_len tokens after <|endoftext|> and prints them. Runs the forward on B=1 and a
// growing T (the whole prefix each time: simple, and cheap at these lengths).
void gpt2_sample(GPT2* model, const Tokenizer* tokenizer, Rng* rng, int gen_len) {
    int eot = tokenizer->init_ok ? tokenizer->eot_token : 50256;
    int* tokens = (int*)mallocCheck((size_t)(gen_len + 1) * sizeof(int));
    tokens[0] = eot;
    printf("generating:\n---\n");
    for (int t = 1; t <= gen_len; t++) {
        gpt2_forward(model, tokens, NULL, 1, t);
        const float* probs = model->acts.probs + (size_t)(t - 1) * model->config.padded_vocab_size;
        tokens[t] = sample_index(probs, model->config.vocab_size, rng_uniform(rng));
        tokenizer_print(tokenizer, tokens[t]);
        fflush(stdout);
    }
    printf("\n---\n");
    free(tokens);
}

// ----------------------------------------------------------------------------
// command line

typedef struct {
    const char* train_pattern; // -i
    const char* val_pattern;   // -j
    const char* model;         // -e: a model file, or dN for a fresh model of depth N
    const char* output_dir;    // -o
    int B;                     // -b
    int T;                     // -t
    int total_batch;           // -d tokens per optimizer step over all micro-steps (-1: B*T)
    float lr;                  // -l
    int warmup;                // -u
    float final_lr_frac;       // -q
    float weight_decay;        // -c
    int max_steps;             // -x (-1: one epoch)
    int val_every;             // -v
    int val_max_steps;         // -m
    int sample_every;          // -s
    int gen_len;               // -g
    float grad_clip;           // -gc (0: off)
    int shuffle;               // -sh
    int seed;                  // -rs
} TrainArgs;

typedef enum { ARG_STR, ARG_INT, ARG_FLOAT } ArgType;
typedef struct { const char* flag; ArgType type; size_t offset; const char* help; } ArgSpec;

#define ARG(flag, type, field, help) {flag, type, offsetof(TrainArgs, field), help}
static const ArgSpec ARG_SPECS[] = {
    ARG("-i", ARG_STR, train_pattern, "train data file or glob pattern"),
    ARG("-j", ARG_STR, val_pattern, "val data file or glob pattern"),
    ARG("-e", ARG_STR, model, "model file (llm.c fp32 format), or dN for a fresh GPT-2 of depth N"),
    ARG("-o", ARG_STR, output_dir, "output dir for the log and the final model (none: no output)"),
    ARG("-b", ARG_INT, B, "batch size B (sequences per micro-step)"),
    ARG("-t", ARG_INT, T, "sequence length T"),
    ARG("-d", ARG_INT, total_batch, "tokens per optimizer step (multiple of B*T; -1: B*T)"),
    ARG("-l", ARG_FLOAT, lr, "peak learning rate"),
    ARG("-u", ARG_INT, warmup, "learning-rate warmup steps"),
    ARG("-q", ARG_FLOAT, final_lr_frac, "final learning rate as a fraction of the peak (cosine decay)"),
    ARG("-c", ARG_FLOAT, weight_decay, "weight decay (on the 2-D weights only)"),
    ARG("-x", ARG_INT, max_steps, "optimizer steps (-1: one epoch of the train data; 0: just evaluate/sample/save)"),
    ARG("-v", ARG_INT, val_every, "val loss every this many steps (0: never)"),
    ARG("-m", ARG_INT, val_max_steps, "val batches per evaluation (-1: all)"),
    ARG("-s", ARG_INT, sample_every, "sample every this many steps (0: never)"),
    ARG("-g", ARG_INT, gen_len, "tokens per sample"),
    ARG("-gc", ARG_FLOAT, grad_clip, "clip gradients to this global L2 norm (0: off)"),
    ARG("-sh", ARG_INT, shuffle, "1: shuffle the order of training batches each epoch; 0: file order"),
    ARG("-rs", ARG_INT, seed, "random seed (fresh model, sampling, shuffling)"),
};
#define NUM_ARGS ((int)(sizeof(ARG_SPECS) / sizeof(ARG_SPECS[0])))

static void print_usage(const TrainArgs* defaults) {
    printf("usage: ./train_gpt2 [flag value] ...\n");
    for (int i = 0; i < NUM_ARGS; i++) {
        const ArgSpec* s = &ARG_SPECS[i];
        const char* field = (const char*)defaults + s->offset;
        char def[256];
        switch (s->type) {
            case ARG_STR: snprintf(def, sizeof(def), "%s", *(const char* const*)field ? *(const char* const*)field : "none"); break;
            case ARG_INT: snprintf(def, sizeof(def), "%d", *(const int*)field); break;
            default: snprintf(def, sizeof(def), "%g", *(const float*)field); break;
        }
        printf("  %-4s %s (default %s)\n", s->flag, s->help, def);
    }
    printf("OMP_NUM_THREADS sets the threads.\n");
}

static void parse_args(TrainArgs* args, int argc, char** argv) {
    TrainArgs defaults = *args;
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) { print_usage(&defaults); exit(0); }
        const ArgSpec* spec = NULL;
        for (int k = 0; k < NUM_ARGS; k++) { if (strcmp(argv[i], ARG_SPECS[k].flag) == 0) { spec = &ARG_SPECS[k]; } }
        if (spec == NULL) { fail("unknown flag '%s' (./train_gpt2 -h lists the flags)", argv[i]); }
        if (i + 1 >= argc) { fail("flag %s needs a value", argv[i]); }
        char* field = (char*)args + spec->offset;
        switch (spec->type) {
            case ARG_STR: *(const char**)field = argv[i + 1]; break;
            case ARG_INT: {
                long v = parse_long(argv[i], argv[i + 1]);
                if (v < -1 || v > 1000000000L) { fail("flag %s expects an integer from -1 to 1e9, got %ld", argv[i], v); }
                *(int*)field = (int)v;
                break;
            }
            default: *(float*)field = parse_float(argv[i], argv[i + 1]); break;
        }
    }
    if (args->B <= 0) { fail("flag -b expects a batch size >= 1, got %d", args->B); }
    if (args->T <= 0) { fail("flag -t expects a sequence length >= 1, got %d", args->T); }
    if (args->lr < 0.0f) { fail("flag -l expects a learning rate >= 0, got %g", args->lr); }
    if (args->grad_clip < 0.0f) { fail("flag -gc expects a norm >= 0 (0 turns clipping off), got %g", args->grad_clip); }
    if (args->shuffle != 0 && args->shuffle != 1) { fail("flag -sh expects 0 or 1, got %d", args->shuffle); }
    if (args->final_lr_frac < 0.0f || args->final_lr_frac > 1.0f) { fail("flag -q expects a fraction in [0, 1], got %g", args->final_lr_frac); }
    if (args->gen_len <= 0) { fail("flag -g expects a sample length >= 1, got %d", args->gen_len); }
    if (args->warmup < 0) { fail("flag -u expects warmup steps >= 0, got %d", args->warmup); }
}

// A fresh "dN" model name gives N; anything else is a file path (0).
static int parse_depth(const char* model) {
    if (model[0] != 'd' || model[1] == '\0') { return 0; }
    for (const char* p = model + 1; *p; p++) { if (*p < '0' || *p > '9') { return 0; } }
    int depth = atoi(model + 1);
    if (depth < 1 || depth > 48) { fail("flag -e: fresh model depth must be 1..48, got '%s'", model); }
    return depth;
}

// ----------------------------------------------------------------------------
// training loop

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Mean loss over up to max_steps val batches from the start of the val data.
static float evaluate(GPT2* model, DataLoader* val, int max_steps) {
    dataloader_reset(val);
    int n = (int)dataloader_num_batches(val);
    if (max_steps >= 0 && max_steps < n) { n = max_steps; }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        gpt2_forward(model, val->inputs, val->targets, val->B, val->T);
        sum += model->mean_loss;
    }
    return (float)(sum / n);
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); // progress lines appear as they happen, also in a log file
    TrainArgs args = {
        .train_pattern = "dev/data/tinyshakespeare/tiny_shakespeare_train.bin",
        .val_pattern = "dev/data/tinyshakespeare/tiny_shakespeare_val.bin",
        .model = "gpt2_124M.bin", .output_dir = NULL,
        .B = 4, .T = 64, .total_batch = -1, .lr = 3e-4f, .warmup = 0, .final_lr_frac = 1.0f,
        .weight_decay = 0.0f, .max_steps = -1, .val_every = 20, .val_max_steps = 20,
        .sample_every = 20, .gen_len = 64, .grad_clip = 1.0f, .shuffle = 0, .seed = 1337,
    };
    parse_args(&args, argc, argv);

    GPT2 model;
    int depth = parse_depth(args.model);
    if (depth > 0) { gpt2_build_from_random(&model, depth, args.T > 1024 ? args.T : 1024, (uint64_t)args.seed); }
    else { gpt2_build_from_checkpoint(&model, args.model); }
    const GPT2Config* c = &model.config;
    if (args.T > c->max_seq_len) { fail("flag -t %d exceeds the model's maximum sequence length %d", args.T, c->max_seq_len); }
    if (args.gen_len > c->max_seq_len) { fail("flag -g %d exceeds the model's maximum sequence length %d", args.gen_len, c->max_seq_len); }
    if (args.gen_len > args.B * args.T) { fail("flag -g %d exceeds B*T = %d, the tokens the activations hold", args.gen_len, args.B * args.T); }
    int tokens_per_micro = args.B * args.T;
    int total_batch = args.total_batch == -1 ? tokens_per_micro : args.total_batch;
    if (total_batch <= 0 || total_batch % tokens_per_micro != 0) {
        fail("flag -d %d must be a positive multiple of B*T = %d", total_batch, tokens_per_micro);
    }
    int grad_accum = total_batch / tokens_per_micro;

    DataLoader train, val;
    dataloader_init(&train, args.train_pattern, args.B, args.T, 0, 1, c->vocab_size, args.shuffle, (uint64_t)args.seed);
    dataloader_init(&val, args.val_pattern, args.B, args.T, 0, 1, c->vocab_size, 0, 0);
    int max_steps = args.max_steps;
    if (max_steps == -1) { max_steps = (int)(dataloader_num_batches(&train) / grad_accum); }
    Tokenizer tokenizer;
    tokenizer_init(&tokenizer, "gpt2_tokenizer.bin");

    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("model %s: L %d, NH %d, C %d, maxT %d, V %d (padded %d), %zu parameters\n", args.model,
           c->num_layers, c->num_heads, c->channels, c->max_seq_len, c->vocab_size, c->padded_vocab_size,
           model.layout.num_parameters);
    printf("batch B %d x T %d, %d micro-steps per step (%d tokens), %d steps, lr %g, %d threads\n",
           args.B, args.T, grad_accum, total_batch, max_steps, args.lr, threads);

    FILE* logfile = NULL;
    char path[1024];
    if (args.output_dir != NULL) {
        mkdir(args.output_dir, 0755); // exists already is fine; fopen below names a real problem
        snprintf(path, sizeof(path), "%s/main.log", args.output_dir);
        logfile = fopenCheck(path, "w");
    }

    Rng sample_rng;
    rng_init(&sample_rng, (uint64_t)args.seed + 1);
    for (int step = 0; step < max_steps; step++) {
        if (args.val_every > 0 && (step % args.val_every == 0)) {
            float val_loss = evaluate(&model, &val, args.val_max_steps);
            printf("val loss %f\n", val_loss);
            if (logfile) { fprintf(logfile, "s:%d tel:%f\n", step, val_loss); fflush(logfile); }
        }
        if (args.sample_every > 0 && step > 0 && step % args.sample_every == 0) {
            gpt2_sample(&model, &tokenizer, &sample_rng, args.gen_len);
        }
        double t0 = now_seconds();
        gpt2_zero_grad(&model);
        double loss_sum = 0.0;
        for (int micro = 0; micro < grad_accum; micro++) {
            dataloader_next_batch(&train);
            gpt2_forward(&model, train.inputs, train.targets, args.B, args.T);
            gpt2_backward(&model, args.B, args.T, 1.0f / grad_accum);
            loss_sum += model.mean_loss;
        }
        float lr = lr_cosine(step, args.lr, args.warmup, max_steps, args.final_lr_frac);
        float norm = gpt2_update(&model, lr, 0.9f, 0.95f, 1e-8f, args.weight_decay, args.grad_clip, step + 1);
        double dt = now_seconds() - t0;
        float loss = (float)(loss_sum / grad_accum);
        printf("step %4d/%d: train loss %f norm %.4f lr %.2e (%.1f ms, %.0f tok/s)\n", step + 1, max_steps,
               loss, norm, lr, dt * 1000, total_batch / dt);
        if (logfile) { fprintf(logfile, "s:%d trl:%f\n", step, loss); fflush(logfile); }
    }
    if (args.val_every > 0) {
        float val_loss = evaluate(&model, &val, args.val_max_steps);
        printf("val loss %f\n", val_loss);
        if (logfile) { fprintf(logfile, "s:%d tel:%f\n", max_steps, val_loss); }
    }
    if (args.sample_every > 0) { gpt2_sample(&model, &tokenizer, &sample_rng, args.gen_len); }
    if (logfile) {
        fcloseCheck(logfile, path);
        snprintf(path, sizeof(path), "%s/model_%08d.bin", args.output_dir, max_steps);
        gpt2_write_checkpoint(&model, path);
        printf("wrote %s\n", path);
    }

    dataloader_free(&train);
    dataloader_free(&val);
    tokenizer_free(&tokenizer);
    gpt2_free(&model);
    return 0;
}
#endif // TESTING
