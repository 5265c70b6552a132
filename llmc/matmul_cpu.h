/*
The CPU trainer's matrix multiply (train_gpt2.c), the one routine that decides its speed: a
blocked, packed GEMM in plain C with OpenMP, summing every element in a fixed order whatever
the thread count. The CUDA trainer's counterpart is llmc/matmul.cuh (cuBLASLt).
*/
#ifndef LLMC_MATMUL_CPU_H
#define LLMC_MATMUL_CPU_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "utils.h"


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

#endif // LLMC_MATMUL_CPU_H
