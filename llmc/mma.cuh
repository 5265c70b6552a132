/*
Tensor-core instructions for the bf16 attention kernels (llmc/attention.cuh): a thin, documented
wrapper over four PTX instructions, written as inline `asm volatile` so that what runs is exactly
the instruction named here (no library layer whose fragment layout is unspecified, as WMMA's is).

    mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32   D (16x8, fp32) = A (16x16, bf16) B (16x8, bf16) + C
    ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16       four 8x8 bf16 matrices, shared -> registers
    cp.async.cg.shared.global [dst], [src], 16;            16 bytes global -> shared, without registers
    cp.async.commit_group; cp.async.wait_group 0;          group the copies above; wait for all of them

mma and ldmatrix are warp-wide (.sync.aligned): all 32 lanes of the warp must execute the same
instruction with the same qualifiers, so a caller only ever reaches them under warp-uniform
conditions; cp.async is per thread (its copy is visible to the thread after its wait). Shared
addresses are 32-bit offsets in the shared window (what `__cvta_generic_to_shared` gives), passed as
"r" operands; registers holding two bf16 are "r" (32 bits), fp32 accumulators "f".

The thread <-> element layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
type" and "Warp-level matrix load instruction: ldmatrix"). With lane = the thread's index in its
warp, g = lane / 4 (its "groupID") and t = lane % 4 (its "threadID_in_group"):

  A, 16x16 bf16 (row-major M x K), 4 registers of two bf16 each, the lower column in the low 16 bits:
      a0 = A[g  ][2t, 2t+1]    a1 = A[g+8][2t, 2t+1]    a2 = A[g  ][2t+8, 2t+9]    a3 = A[g+8][2t+8, 2t+9]
  B, 16x8 bf16 (K x N, ".col": element (k, n) of column n), 2 registers:
      b0 = B[2t, 2t+1][g]      b1 = B[2t+8, 2t+9][g]        (the two k of one register: low 16 bits = lower k)
  C and D, 16x8 fp32, 4 registers:
      c0 = C[g][2t]    c1 = C[g][2t+1]    c2 = C[g+8][2t]    c3 = C[g+8][2t+1]
  ldmatrix.x4: lane 8i + r gives the shared address of row r (16 contiguous, 16-byte-aligned bytes)
  of matrix i; register i of every lane receives from matrix i
      without .trans: row g, elements 2t and 2t+1        with .trans: elements (2t, g) and (2t+1, g)
  i.e. .trans hands out the transposed 8x8 matrix.

What follows from these, and what attention.cuh relies on:
  - An A fragment of rows r0..r0+15, columns c0..c0+15 of a row-major shared tile is one .x4 whose
    matrices are (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15,
    cols 8-15): lane l addresses row r0 + l%8 + 8*((l/8)%2), column c0 + 8*(l/16).
  - B fragments of two n8 tiles from a shared tile whose ROWS are n and columns k (k^T of a
    row-major K: keys are n, head dims k), no transpose: matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
    (n 8-15, k 0-7), (n 8-15, k 8-15) = b0, b1 of tile 0, b0, b1 of tile 1: lane l addresses row
    n0 + l%8 + 8*(l/16), column k0 + 8*((l/8)%2).
  - B fragments of two n8 tiles from a shared tile whose ROWS are k and columns n (a row-major V:
    keys are k, head dims n), with .trans: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
    (k 8-15, n 8-15): lane l addresses row k0 + l%8 + 8*((l/8)%2), column n0 + 8*(l/16) (the A
    pattern).
  - The C fragments of two neighbouring n8 tiles (columns 16c..16c+15) ARE the A fragment of
    k-columns 16c..16c+15, once rounded to bf16 and packed: a0 = (c0, c1) of tile 2c, a1 = (c2, c3)
    of tile 2c, a2 = (c0, c1) of tile 2c+1, a3 = (c2, c3) of tile 2c+1. So a product's result feeds
    the next product without leaving the registers (P = softmax(S) into P v; dS into dS k).
The host functions mma_*_row/col below spell these out; dev/test/test_attention_host.cu checks
them against each other by simulating a warp's ldmatrix and mma on the host.
*/
#ifndef LLMC_MMA_CUH
#define LLMC_MMA_CUH

#include <stdint.h>
#include <string.h>
#include <cuda_bf16.h>

// ----------------------------------------------------------------------------
// the documented layouts, as functions (host and device): element e of a lane's fragment

// A (16x16): element e in 0..7 of a lane is the (e%2)-th bf16 of register e/2
__host__ __device__ constexpr int mma_a_row(int lane, int e) { return lane / 4 + 8 * ((e / 2) % 2); }
__host__ __device__ constexpr int mma_a_col(int lane, int e) { return 2 * (lane % 4) + e % 2 + 8 * (e / 4); }
// B (16x8): element e in 0..3 is the (e%2)-th bf16 of register e/2
__host__ __device__ constexpr int mma_b_row(int lane, int e) { return 2 * (lane % 4) + e % 2 + 8 * (e / 2); } // k
__host__ __device__ constexpr int mma_b_col(int lane, int /*e*/) { return lane / 4; }                         // n
// C, D (16x8 fp32): element e in 0..3 is register e
__host__ __device__ constexpr int mma_c_row(int lane, int e) { return lane / 4 + 8 * (e / 2); }
__host__ __device__ constexpr int mma_c_col(int lane, int e) { return 2 * (lane % 4) + e % 2; }
// ldmatrix: the element of matrix row `row`, column `col` (0..7) that register word `half` (0, 1)
// of `lane` receives: without .trans (row g, column 2t + half), with .trans (row 2t + half, column g)
__host__ __device__ constexpr int ldmatrix_row(int lane, int half, bool trans) { return trans ? 2 * (lane % 4) + half : lane / 4; }
__host__ __device__ constexpr int ldmatrix_col(int lane, int half, bool trans) { return trans ? lane / 4 : 2 * (lane % 4) + half; }

// two floats -> one register of two bf16 (round to nearest even), lo in the low 16 bits
__host__ __device__ inline uint32_t pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); // .x = lo (low half), .y = hi
    uint32_t r;
    memcpy(&r, &v, sizeof(r));
    return r;
}

// ----------------------------------------------------------------------------
// the instructions (device only)

// the 32-bit shared-window address of a generic pointer into shared memory
__device__ inline uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// d += a b: a 16x16 bf16 A fragment, a 16x8 bf16 B fragment, a 16x8 fp32 accumulator
__device__ inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]));
}

// four 8x8 bf16 matrices; addr is this lane's row address (see the layout above)
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// 16 bytes from global to shared memory, asynchronously (.cg: cached in L2 only, the data is read
// once per block). Both addresses 16-byte aligned. Visible to this thread after
// cp_async_wait_all() (or a wait that covers its group), to the block after a barrier that follows.
__device__ inline void cp_async_16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src) : "memory");
}
// close the group of the copies issued since the last commit
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// wait until none of this thread's committed groups is still in flight (wait_group 0)
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

#endif // LLMC_MMA_CUH
