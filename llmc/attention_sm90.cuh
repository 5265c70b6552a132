/*
Causal attention on Hopper (sm_90a), FlashAttention-3 style: the same math, inputs and outputs
(out, lse; dqkv from the row terms D) as the mma.sync kernels of llmc/attention.cuh (read those
first: this file assumes their online softmax, base-2 scores, two-pass deterministic backward and
fragment layouts), with Hopper's three new pieces, through llmc/wgmma.cuh:

  - TMA (cp.async.bulk.tensor): one thread asks the copy engine for a whole 2D box of qkv
    (128 rows x 64 bf16 = 16 KB) with one instruction; the box lands in shared memory swizzled
    (128B: 16-byte chunk c of row r stored at chunk c ^ (r % 8)), and its arrival is counted in
    bytes on an mbarrier (complete_tx). No thread of the block moves a byte of Q, K or V.
  - mbarriers: split arrive/wait barriers in shared memory with a phase bit. full[s] says "stage s
    has landed" (1 arrival by the producer + 32 KB of transactions), empty[s] says "every
    consumer thread is done reading stage s" (256 arrivals), so the producer refills it.
  - wgmma (warpgroup MMA): the 4 warps of a warpgroup (128 threads) compute one 64 x N product
    together, reading B (and here A of S = Q K^T) straight from shared memory through a matrix
    descriptor: no ldmatrix, no register copies of K and V. The result lands in registers with
    mma.sync's C layout per warp (warp w of the warpgroup owns rows 16w..16w+15), so the softmax
    code of the mma.sync kernel applies unchanged, and P goes back as wgmma's register A operand
    exactly as mma.sync's (mma.cuh: C fragments of two n8 tiles = one A fragment).

Beside the FlashAttention-3 paper (J. Shah et al., 2024, arXiv:2407.08608):
  - warp specialization (its section 3.1, Algorithm 1): warpgroup 0 is the producer (one thread
    issues the TMA copies, the rest idle with few registers: setmaxnreg.dec), warpgroups 1 and 2
    are consumers (setmaxnreg.inc) with 64 query rows each: 128 query rows per block (Br = 128).
    The producer stays up to 3 key tiles ahead (a 3-stage circular buffer of K_j, V_j).
  - the loop per key tile j (Algorithm 1, consumer side): wait full[j%3]; S = Q_i K_j^T
    (wgmma, 4 k-steps of 16 dims, m64n128); mask (diagonal tile only), online softmax in
    registers (attention.cuh's functions, base 2); O = diag(alpha) O + P V_j (wgmma with P from
    registers, 8 k-steps of 16 keys, m64n64); arrive on empty[j%3].
  - the paper's intra-warpgroup overlap (its section 3.2, "2-stage pipelining"): the loop above,
    software-pipelined so that the tensor cores never wait for the softmax: step j issues S_j and
    then P_{j-1} V_{j-1}, waits for S_j only, runs the softmax of S_j while P_{j-1} V_{j-1} is in
    flight, then waits for it and scales O. Same operations on O in the same order: same bits.
    (-DATT90_FWD_OVERLAP=0 builds the plain loop, with 2 stages, for a side-by-side measurement.)
  - what is NOT here yet: the paper's pingpong scheduling between the two consumer warpgroups
    (named barriers that let one warpgroup's softmax run under the other's products), and FP8.

The backward (further down) is one pass over S and dP per key block (dK, dV, and each key block's
share of dQ, written as a partial sum), then a small kernel that adds each query row's partials in
a fixed order: FlashAttention-3 instead adds dQ with atomics (an order the hardware picks); the
mma.sync kernels recompute S and dP in a second pass per query block. See the comment there.

Tiles of the forward (hs 64 only; other head sizes keep the mma.sync kernels): Br = 128 query rows per block,
Bc = 128 keys per stage. Shared memory: Q 16 KB + 3 stages x (K, V) 16 KB each = 112 KB, plus 7
mbarriers, aligned up to 1 KB (the 128B swizzle repeats every 8 rows x 128 B = 1024 B and its
XOR reads address bits 7-9, so every tile starts on a 1024-byte boundary). One block per SM (the
registers allow no more). Registers: 384 threads; ptxas may give at most 168 each (65536 / 384),
then the producer drops to 24 and the consumers rise to 240 (24 x 128 + 240 x 256 = 64512 <=
65536). A consumer holds S (64 fp32), O (32 fp32), P of the tile in flight and of the next
(2 x 32 bf16x2).

Causality: the key tiles of a block are 0 .. q0/128 (the last one, k0 = q0, is the diagonal and
the only one masked); on the diagonal, consumer warpgroup 0 (rows q0..q0+63) still multiplies all
128 keys (half of them masked to -inf), as FlashAttention-3 does.

Rows past T: the tensor map is 2D over qkv viewed as (B*T rows, 3C columns). A box that runs past
a sequence's T reads the next sequence's rows (finite bf16 values: the causal mask covers them for
every row < T, and rows >= T are not written); a box past the last row of qkv is zero-filled by
the TMA unit (and still counts its full 16 KB on the mbarrier). So every staged value is finite,
as the mma.sync kernels' zero fill promises.

Determinism: every output element has one writer; the sums run in a fixed order (wgmma's internal
order is fixed by the hardware; the emulator fixes its own). No atomics.

The emulator runs this kernel (dev/cuda/emu: wgmma, mbarrier and TMA with the PTX ISA's semantics);
there, as on a GPU, it is used only where attention_sm90_available() says so.
*/
#ifndef LLMC_ATTENTION_SM90_CUH
#define LLMC_ATTENTION_SM90_CUH

#include <type_traits>
#include "wgmma.cuh"

constexpr int ATT90_HS = 64;             // the only head size of this kernel (GPT-2, every size)
constexpr int ATT90_BR = 128;            // query rows per block: 2 consumer warpgroups x 64
constexpr int ATT90_BC = 128;            // keys per stage
constexpr int ATT90_STAGES = 2;          // the backward's stages of the streamed side
// The forward's loop (below): 1 = FlashAttention-3's intra-warpgroup overlap (the softmax of key
// tile j beside the tensor cores' S_j and P_{j-1} V_{j-1}), 0 = the serial first version, kept so
// that one build of each can be measured side by side (dev/gpu_check.sh VARIANTS)
#ifndef ATT90_FWD_OVERLAP
#define ATT90_FWD_OVERLAP 1
#endif
// K, V stages of the forward's circular buffer. The overlapped loop releases stage j - 1 only once
// P_{j-1} V_{j-1} has landed, in tile j's step: with 2 stages the producer could start K_{j+1} only
// then, and tile j + 1 would wait for its copy from L2; a third stage keeps one tile's copy ahead.
constexpr int ATT90_FWD_STAGES = ATT90_FWD_OVERLAP ? 3 : 2;
constexpr int ATT90_THREADS = 3 * 128;   // warpgroup 0 producer, 1 and 2 consumers
constexpr int ATT90_CONSUMERS = 2 * 128; // consumer threads: empty[s]'s arrival count
constexpr int ATT90_ROW_BYTES = ATT90_HS * 2;               // one staged row: 128 bytes = the swizzle's width
constexpr int ATT90_TILE_BYTES = ATT90_BC * ATT90_ROW_BYTES; // one box: 16 KB (Q, K or V)
static_assert(ATT90_BR == ATT90_BC, "the diagonal tile must be the last one a query block visits");
static_assert(ATT90_ROW_BYTES == 128, "a row must be exactly one 128-byte swizzle span");

// shared memory: [Q][K0][V0][K1][V1] tiles, then the mbarriers (8 bytes each); +1 KB to align
// the dynamic shared memory's start up to 1024 bytes
constexpr int ATT90_BAR_OFFSET = (1 + 2 * ATT90_FWD_STAGES) * ATT90_TILE_BYTES;
constexpr size_t ATT90_SMEM = ATT90_BAR_OFFSET + 8 * (1 + 2 * ATT90_FWD_STAGES) + 1024;

// The shared-memory descriptors (PTX ISA, "Matrix Descriptor Format"; wgmma_desc in wgmma.cuh),
// for a tile of rows of 128 bytes written by TMA with the 128B swizzle:
//  - K-major (Q as A, K as B: the 16 dims a k-step takes are contiguous within a row): the
//    canonical layout is 8 rows x 128 bytes per 1024-byte atom; SBO = 1024, the step from 8 rows
//    to the next 8 (M or N); LBO is unused (a k-step never leaves the 128-byte row) and set to
//    16 by convention. k-step ks starts 32 ks bytes into the row: the hardware applies the XOR
//    to the address it forms, so the start address moves by the unswizzled offset.
//  - MN-major (V as B, transposed: V's rows are the keys = k, its 64 contiguous dims = n): one
//    atom spans the whole n = 64 (LBO, the step between 64-wide atoms in n, is unused and set to
//    the tile size); SBO = 1024, the step from keys 0-7 to keys 8-15; k-step kc (16 keys) starts
//    16 x 128 = 2048 kc bytes into the tile.
__host__ __device__ constexpr uint32_t att90_kmajor_offset(int row0, int ks) { return row0 * ATT90_ROW_BYTES + 32 * ks; }
__host__ __device__ constexpr uint32_t att90_vtile_offset(int kc) { return 16 * kc * ATT90_ROW_BYTES; }
constexpr uint32_t ATT90_SBO = 8 * ATT90_ROW_BYTES; // 1024
constexpr int ATT90_SWIZZLE_128B = 1;                // the descriptor's encoding (wgmma.cuh)

// Where TMA's 128B swizzle puts element (r, c) of a box of 128-byte rows (bytes from the tile's
// 1024-aligned start): chunk c / 8 of row r goes to chunk (c / 8) ^ (r % 8). (CUDA driver API,
// CU_TENSOR_MAP_SWIZZLE_128B; the same XOR the descriptor's swizzle mode 1 undoes.)
__host__ __device__ constexpr uint32_t att90_swizzled_offset(int r, int c) {
    return r * ATT90_ROW_BYTES + (((c / 8) ^ (r % 8)) * 16) + (c % 8) * 2;
}

#if defined(ENABLE_BF16)

// the attention.cuh A fragment of k-step kc from m64nN accumulators (per warp, n8 tile j at
// acc[4j..4j+3], mma.sync's C layout): tiles 2kc and 2kc+1, rounded to bf16
__device__ inline void att90_c_to_a(uint32_t (&a)[4], const float* acc, int kc) {
    const float* lo = acc + 8 * kc;
    const float* hi = lo + 4;
    a[0] = pack_bf16x2(lo[0], lo[1]);
    a[1] = pack_bf16x2(lo[2], lo[3]);
    a[2] = pack_bf16x2(hi[0], hi[1]);
    a[3] = pack_bf16x2(hi[2], hi[3]);
}

// One key tile's online softmax for a consumer warpgroup, in registers: S's accumulators (sacc,
// m64n128, keys k0 ..) are masked (the diagonal tile only) and scaled into base-2 units as
// attention.cuh does, the running max and sum of each of the thread's two rows (st) take the tile
// in, alpha[half] is the factor by which the caller must scale its O rows, and pf holds the
// weights P rounded to bf16 as the A operand of O += P V.
//
// Per element this is a handful of instructions, and at hs 64 the softmax takes about as long as the
// products, so two things are kept out of the per-element path:
//  - the causal mask, needed only on the diagonal tile (the last tile of a query block; the
//    warpgroup's rows all lie in it, so the branch is uniform over the warpgroup): the other tiles
//    only scale. (The two comments in the PTX mark that path for dev/perf, which prices the loop
//    from its PTX: it runs once per query block, not once per tile.)
//  - online_softmax_weight_log2's test for a masked score (s = -inf, a branch per element in the
//    PTX): here every row of every tile sees a key (key k0 <= q0 <= row), so after the rescale m is
//    finite and exp2f(-inf - m) = exp2f(-inf) = +0, which is what the test returns: same bits.
__device__ inline void att90_softmax_tile(float (&sacc)[ATT90_BC / 2], OnlineSoftmax (&st)[2], float (&alpha)[2],
                                          uint32_t (&pf)[ATT90_BC / 16][4], int k0, int row_lo, int lane,
                                          float scale_log2) {
    float tile_max[2] = {-INFINITY, -INFINITY};
    if (k0 + ATT90_BC - 1 > row_lo) { // the diagonal tile
        asm volatile("// att90: rare path {");
        #pragma unroll
        for (int n8 = 0; n8 < ATT90_BC / 8; n8++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = k0 + 8 * n8 + mma_c_col(lane, e), row = row_lo + mma_c_row(lane, e);
                float x = key > row ? -INFINITY : sacc[4 * n8 + e] * scale_log2;
                sacc[4 * n8 + e] = x;
                tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
            }
        }
        asm volatile("// att90: rare path }");
    } else {
        #pragma unroll
        for (int i = 0; i < ATT90_BC / 2; i++) {
            sacc[i] *= scale_log2;
            tile_max[(i % 4) / 2] = fmaxf(tile_max[(i % 4) / 2], sacc[i]);
        }
    }
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        alpha[half] = online_softmax_rescale_log2(&st[half], att_tc_quad_max(tile_max[half]));
    }
    #pragma unroll
    for (int i = 0; i < ATT90_BC / 2; i++) { // online_softmax_weight_log2 without its test (above)
        OnlineSoftmax* row = &st[(i % 4) / 2];
        sacc[i] = exp2f(sacc[i] - row->m);
        row->l += sacc[i];
    }
    #pragma unroll
    for (int kc = 0; kc < ATT90_BC / 16; kc++) { att90_c_to_a(pf[kc], sacc, kc); }
}

// out (B,T,C), lse (B,NH,T) from qkv (B,T,3C) through qkv_map (2D tensor map over qkv as B*T rows
// of 3C bf16, box 128 rows x 64 columns, 128B swizzle). Block (query tile, h, b), heaviest first.
__global__ void __launch_bounds__(ATT90_THREADS, 1)
attention_forward_sm90_kernel(const __grid_constant__ CUtensorMap qkv_map, floatX* out, float* lse, int T, int C,
                              int NH, float scale_log2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint4 att_smem[];
    uint32_t base = (smem_addr(att_smem) + 1023) & ~1023u; // the 128B swizzle's 1024-byte alignment
    auto tile = [&](int i) { return base + i * ATT90_TILE_BYTES; }; // 0: Q; 1 + 2s: K_s; 2 + 2s: V_s
    uint32_t bar_q = base + ATT90_BAR_OFFSET;
    auto bar_full = [&](int s) { return bar_q + 8 * (1 + s); };
    auto bar_empty = [&](int s) { return bar_q + 8 * (1 + ATT90_FWD_STAGES + s); };
    auto k_tile = [&](int s) { return tile(1 + 2 * s); };
    auto v_tile = [&](int s) { return tile(2 + 2 * s); };
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * ATT90_BR; // heaviest first
    int n_tiles = q0 / ATT90_BC + 1; // keys 0 .. q0 + 127: the last tile (k0 = q0) is the diagonal
    int row0 = b * T;                // this sequence's first row in the tensor map
    int warpgroup = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        mbar_init(bar_q, 1);
        for (int s = 0; s < ATT90_FWD_STAGES; s++) {
            mbar_init(bar_full(s), 1);
            mbar_init(bar_empty(s), ATT90_CONSUMERS);
        }
        fence_mbarrier_init(); // the inits, visible to the other threads and to the TMA unit
    }
    __syncthreads();

    if (warpgroup == 0) {
        // the producer: one thread issues every copy; the others only give back registers
        setmaxnreg_dec<24>();
        if (threadIdx.x == 0) {
            mbar_arrive_expect_tx(bar_q, ATT90_TILE_BYTES);
            tma_load_2d(tile(0), &qkv_map, h * ATT90_HS, row0 + q0, bar_q);
            for (int j = 0; j < n_tiles; j++) {
                int s = j % ATT90_FWD_STAGES;
                // the stage's previous tile (j - STAGES) must be released by every consumer
                if (j >= ATT90_FWD_STAGES) { mbar_wait(bar_empty(s), (j / ATT90_FWD_STAGES - 1) & 1); }
                mbar_arrive_expect_tx(bar_full(s), 2 * ATT90_TILE_BYTES);
                tma_load_2d(k_tile(s), &qkv_map, C + h * ATT90_HS, row0 + j * ATT90_BC, bar_full(s));
                tma_load_2d(v_tile(s), &qkv_map, 2 * C + h * ATT90_HS, row0 + j * ATT90_BC, bar_full(s));
            }
        }
        return;
    }

    // a consumer warpgroup: 64 query rows; warp w of it owns 16 (mma.sync's C layout per warp)
    setmaxnreg_inc<240>();
    int cw = warpgroup - 1;                       // 0 or 1
    int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    int wg_lo = q0 + 64 * cw;                     // the warpgroup's first query
    int row_lo = wg_lo + 16 * warp;               // the warp's first query
    uint32_t q_tile = tile(0) + att90_kmajor_offset(64 * cw, 0);

    float o[ATT90_HS / 2]; // O: m64n64, 32 accumulators per thread (n8 tile j at o[4j..4j+3])
    #pragma unroll
    for (int i = 0; i < ATT90_HS / 2; i++) { o[i] = 0.0f; }
    OnlineSoftmax st[2] = {online_softmax_init(), online_softmax_init()};

    mbar_wait(bar_q, 0);
    auto s_zero = [&](float (&sacc)[ATT90_BC / 2]) {
        #pragma unroll
        for (int i = 0; i < ATT90_BC / 2; i++) { sacc[i] = 0.0f; }
        wgmma_fence_operand(sacc); // nvcc must not move these writes below the wgmma_fence that follows
    };
    uint64_t q_desc = wgmma_desc(q_tile, 16, ATT90_SBO, ATT90_SWIZZLE_128B);
    auto s_issue = [&](float (&sacc)[ATT90_BC / 2], int j) { // S = Q_i K_j^T: 4 k-steps of 16 dims, both from smem
        uint64_t k_desc = wgmma_desc(k_tile(j % ATT90_FWD_STAGES), 16, ATT90_SBO, ATT90_SWIZZLE_128B);
        #pragma unroll
        for (int ks = 0; ks < ATT90_HS / 16; ks++) {
            wgmma_ss<ATT90_BC, 0, 0>(sacc, wgmma_desc_advance(q_desc, 32 * ks),
                                     wgmma_desc_advance(k_desc, att90_kmajor_offset(0, ks)), 1);
        }
        wgmma_commit();
    };
    auto pv_issue = [&](const uint32_t (&pf)[ATT90_BC / 16][4], int j) { // O += P V_j: 8 k-steps of 16 keys
        uint64_t v_desc = wgmma_desc(v_tile(j % ATT90_FWD_STAGES), ATT90_TILE_BYTES, ATT90_SBO, ATT90_SWIZZLE_128B);
        #pragma unroll
        for (int kc = 0; kc < ATT90_BC / 16; kc++) {
            wgmma_rs<ATT90_HS, 1>(o, pf[kc], wgmma_desc_advance(v_desc, att90_vtile_offset(kc)), 1);
        }
        wgmma_commit();
    };
    // (with Br = Bc every tile has a key <= some row of every warpgroup: none is skipped)
#if ATT90_FWD_OVERLAP
    // FlashAttention-3's intra-warpgroup overlap (its section 3.2): while the tensor cores compute
    // S_j and then O += P_{j-1} V_{j-1}, nothing waits for the second; the softmax of S_j runs on
    // the SFU and the FP32 pipes beside it. O sees the same operations in the same order as in the
    // serial loop (O *= alpha_0, O += P_0 V_0, O *= alpha_1, ...): the same bits.
    uint32_t pf[ATT90_BC / 16][4]; // P_{j-1}: the A operand of the product in flight
    { // tile 0: nothing to overlap yet
        mbar_wait(bar_full(0), 0);
        float sacc[ATT90_BC / 2];
        s_zero(sacc);
        wgmma_fence();
        s_issue(sacc, 0);
        wgmma_wait<0>();
        wgmma_fence_operand(sacc);
        float alpha[2];
        att90_softmax_tile(sacc, st, alpha, pf, 0, row_lo, lane, scale_log2);
        #pragma unroll
        for (int i = 0; i < ATT90_HS / 2; i++) { o[i] *= alpha[(i % 4) / 2]; }
    }
    for (int j = 1; j < n_tiles; j++) {
        mbar_wait(bar_full(j % ATT90_FWD_STAGES), (j / ATT90_FWD_STAGES) & 1);
        float sacc[ATT90_BC / 2];
        s_zero(sacc);
        wgmma_fence_operand(o);
        wgmma_fence_operand(pf);
        wgmma_fence(); // o, pf and sacc were written by ordinary instructions
        s_issue(sacc, j);
        pv_issue(pf, j - 1);
        wgmma_wait<1>(); // S_j has landed (groups retire in order); P_{j-1} V_{j-1} may still run
        wgmma_fence_operand(sacc);
        float alpha[2];
        uint32_t pn[ATT90_BC / 16][4];
        att90_softmax_tile(sacc, st, alpha, pn, j * ATT90_BC, row_lo, lane, scale_log2);
        wgmma_wait<0>(); // P_{j-1} V_{j-1} has landed: O and P_{j-1}'s registers are free
        wgmma_fence_operand(o);
        wgmma_fence_operand(pf);
        mbar_arrive(bar_empty((j - 1) % ATT90_FWD_STAGES)); // K_{j-1} and V_{j-1} are read
        #pragma unroll
        for (int i = 0; i < ATT90_HS / 2; i++) { o[i] *= alpha[(i % 4) / 2]; }
        #pragma unroll
        for (int kc = 0; kc < ATT90_BC / 16; kc++) {
            #pragma unroll
            for (int r = 0; r < 4; r++) { pf[kc][r] = pn[kc][r]; }
        }
    }
    wgmma_fence_operand(o);
    wgmma_fence_operand(pf);
    wgmma_fence();
    pv_issue(pf, n_tiles - 1);
    wgmma_wait<0>();
    wgmma_fence_operand(o);
    wgmma_fence_operand(pf);
    mbar_arrive(bar_empty((n_tiles - 1) % ATT90_FWD_STAGES));
#else
    // the serial loop (the first version; -DATT90_FWD_OVERLAP=0 builds it for a side-by-side
    // measurement): each product is waited for before the next step
    for (int j = 0; j < n_tiles; j++) {
        mbar_wait(bar_full(j % ATT90_FWD_STAGES), (j / ATT90_FWD_STAGES) & 1);
        float sacc[ATT90_BC / 2];
        s_zero(sacc);
        wgmma_fence();
        s_issue(sacc, j);
        wgmma_wait<0>();
        wgmma_fence_operand(sacc); // nvcc must not move the reads below above the wait
        float alpha[2];
        uint32_t pf[ATT90_BC / 16][4];
        att90_softmax_tile(sacc, st, alpha, pf, j * ATT90_BC, row_lo, lane, scale_log2);
        #pragma unroll
        for (int i = 0; i < ATT90_HS / 2; i++) { o[i] *= alpha[(i % 4) / 2]; }
        wgmma_fence_operand(o);
        wgmma_fence(); // o and pf were written by ordinary instructions
        pv_issue(pf, j);
        wgmma_wait<0>();
        wgmma_fence_operand(o);
        mbar_arrive(bar_empty(j % ATT90_FWD_STAGES)); // this thread is done reading stage j
    }
#endif

    // O_i = diag(l)^-1 O and L_i = m + log(l), written for rows < T
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        st[half].l = att_tc_quad_sum(st[half].l); // key q0 <= row is visible to every row: l >= 1
        int r = row_lo + lane / 4 + 8 * half;
        if (r >= T) { continue; }
        float inv_l = 1.0f / st[half].l;
        floatX* orow = out + ((size_t)b * T + r) * C + h * ATT90_HS;
        #pragma unroll
        for (int n8 = 0; n8 < ATT90_HS / 8; n8++) {
            *(__nv_bfloat162*)(orow + 8 * n8 + 2 * (lane % 4)) =
                __floats2bfloat162_rn(o[4 * n8 + 2 * half] * inv_l, o[4 * n8 + 2 * half + 1] * inv_l);
        }
        if (lane % 4 == 0) { lse[((size_t)b * NH + h) * T + r] = online_softmax_lse_log2(st[half]); }
    }
#endif // __CUDA_ARCH_FEAT_SM90_ALL
}

// ----------------------------------------------------------------------------
// the backward: attention.cuh's dK/dV pass (per key block, one writer per element, no atomics) as
// producer + 2 consumer warpgroups of 64 keys, which also computes the block's share of dQ from
// the dS it holds anyway (instead of attention.cuh's second pass, which computes S and dP again
// per query block): per query stage, dQ^T = K^T dS^T over the block's 128 keys, stored as an fp32
// partial tile; attention_backward_dq_reduce_kernel then adds a query row's partials over the key
// blocks in a fixed order (no atomics: deterministic). The block's own 128 keys (K_j, V_j) are
// loaded once; the queries stream through 2 stages of 64 rows (ATT90_BWD_STAGE). The products of
// dS, P, dK and dV are the forward's two shapes: "64 rows x the other side's rows over the 64
// dims" (wgmma_ss, both K-major) and "64 rows x (16 of the other side's rows) x their 64 dims"
// (wgmma_rs with the weights in registers, the other side MN-major), so the descriptors are the
// forward's; dQ^T's B operand (dS^T, written by the consumers) has its own layout below.
//
// Bits against the two-pass kernels (the mma.sync ones, and this file's before issue 30 item 3's
// follow-up): dS is the same bf16 per (query, key) as dK's A operand was; dQ's sum over the keys is
// associated differently: one fp32 chain over each 128-key block (wgmma's k-steps of 16 keys, in
// key order, from 0), then the blocks' partials added in key-block order (fp32), where the
// two-pass kernel ran one fp32 chain over all the keys. The rounding to bf16 (times scale) is the
// same; the difference is in fp32's last places before it.

constexpr int ATT90_BWD_STAGE = 64;                                       // rows of the other side per stage
constexpr int ATT90_BWD_BOX_BYTES = ATT90_BWD_STAGE * ATT90_ROW_BYTES;    // 8 KB
// dS^T of one query stage for the block's 128 keys (bf16, 128 keys x 64 queries: the B operand of
// dQ^T += K^T dS^T), written by the consumers, read by wgmma; two buffers (stage j uses j % 2)
constexpr int ATT90_DS_BYTES = ATT90_BR * ATT90_BWD_STAGE * 2;          // 16 KB
// [own A (128 rows)][own B (128 rows)][stage 0: X, Y (64 rows)][stage 1: X, Y][dS^T 0][dS^T 1],
// then per stage the 64 rows' L and D (fp32; by TMA too), then 7 mbarriers (own, full x2,
// empty x2, ds x2)
constexpr int ATT90_BWD_STAGE_OFFSET = 2 * ATT90_TILE_BYTES;
constexpr int ATT90_BWD_DS_OFFSET = ATT90_BWD_STAGE_OFFSET + 2 * ATT90_STAGES * ATT90_BWD_BOX_BYTES;
constexpr int ATT90_BWD_ROWS_OFFSET = ATT90_BWD_DS_OFFSET + 2 * ATT90_DS_BYTES;
constexpr int ATT90_BWD_BAR_OFFSET = ATT90_BWD_ROWS_OFFSET + ATT90_STAGES * 2 * ATT90_BWD_STAGE * 4;
constexpr size_t ATT90_BWD_SMEM = ATT90_BWD_BAR_OFFSET + 8 * (2 + 4 * ATT90_STAGES) + 1024;
static_assert(ATT90_BWD_BOX_BYTES % 1024 == 0, "stage tiles must stay 1024-byte aligned");

// The dS^T buffer is wgmma's B operand (K = 128 keys, N = 64 queries) MN-major WITHOUT swizzle, so
// that each consumer warpgroup can take its own 32 queries (N = 32) as a whole operand: core
// matrices of 8 keys x 8 queries (16-byte rows of 8 queries), the 16 key groups of one query group
// side by side (LBO = 128, the step between 8-key groups), the 8 query groups 2048 bytes apart
// (SBO). wgmma.cuh: (k, x) at (x % 8) 2 + (k % 8) 16 + (x / 8) SBO + (k / 8) LBO. A k-step of
// 16 keys starts 256 bytes further, the second warpgroup's 32 queries 4 x 2048 bytes further.
constexpr uint32_t ATT90_DS_LBO = 128, ATT90_DS_SBO = 2048;
__host__ __device__ constexpr uint32_t att90_ds_offset(int key, int query) {
    return (query % 8) * 2 + (key % 8) * 16 + (query / 8) * ATT90_DS_SBO + (key / 8) * ATT90_DS_LBO;
}

// dQ's partial sums (fp32), one per (query block of 128, key block of 128 at or before it) of a
// (b, h): the dK/dV kernel's block of keys kb writes its 128 keys' share of dQ for the queries of
// block qb >= kb, as a 64 dims x 128 queries tile (transposed: the wgmma gives dQ^T); the reduce
// kernel adds a row's tiles kb = 0, 1, .., qb in that order. Tiles of a (b, h): qb (qb + 1) / 2 + kb.
__host__ __device__ constexpr size_t att90_dq_tiles(int T) {
    return (size_t)((T + ATT90_BR - 1) / ATT90_BR) * ((T + ATT90_BR - 1) / ATT90_BR + 1) / 2;
}
constexpr int ATT90_DQ_TILE_FLOATS = ATT90_HS * ATT90_BR; // 8192 floats = 32 KB
// the scratch floats the sm_90a backward needs beyond D's (B, NH, T): its dQ partials
static inline size_t attention_sm90_dq_partial_floats(int B, int T, int NH) {
    return (size_t)B * NH * att90_dq_tiles(T) * ATT90_DQ_TILE_FLOATS;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // the helpers call wgmma.cuh's sm_90a-only functions
// The shared state of the backward kernel: the tiles, the barriers, and the producer's loop.
// own: 128 rows of two tensors (two boxes of 64 rows each) on bar_own; then n_tiles stages of 64
// rows of two other tensors, stage j at rows x0 + 64 j.
struct Att90Bwd {
    uint32_t base;
    __device__ uint32_t own(int which) const { return base + which * ATT90_TILE_BYTES; } // 0: A, 1: B
    __device__ uint32_t stage(int s, int which) const {
        return base + ATT90_BWD_STAGE_OFFSET + (2 * s + which) * ATT90_BWD_BOX_BYTES;
    }
    // stage s's L (which 0) or D (which 1) of its 64 rows: the shared address, a generic pointer
    __device__ uint32_t rows_addr(int s, int which) const {
        return base + ATT90_BWD_ROWS_OFFSET + (2 * s + which) * ATT90_BWD_STAGE * 4;
    }
    __device__ const float* rows(const float* smem_rows, int s, int which) const {
        return smem_rows + (2 * s + which) * ATT90_BWD_STAGE;
    }
    __device__ uint32_t bar_own() const { return base + ATT90_BWD_BAR_OFFSET; }
    __device__ uint32_t bar_full(int s) const { return bar_own() + 8 * (1 + s); }
    __device__ uint32_t bar_empty(int s) const { return bar_own() + 8 * (1 + ATT90_STAGES + s); }
    __device__ uint32_t ds(int s) const { return base + ATT90_BWD_DS_OFFSET + s * ATT90_DS_BYTES; }
    // "every consumer thread has written (and fenced) its dS^T of the stage using buffer s"
    __device__ uint32_t bar_ds(int s) const { return bar_own() + 8 * (1 + 2 * ATT90_STAGES + s); }
    // "every consumer thread has put its warp's column sums of dK, dV in shared memory" (once)
    __device__ uint32_t bar_sums() const { return bar_own() + 8 * (1 + 4 * ATT90_STAGES); }
};

__device__ inline Att90Bwd att90_bwd_setup(uint4* smem) {
    Att90Bwd t;
    t.base = (smem_addr(smem) + 1023) & ~1023u;
    if (threadIdx.x == 0) {
        mbar_init(t.bar_own(), 1);
        for (int s = 0; s < ATT90_STAGES; s++) {
            mbar_init(t.bar_full(s), 1);
            mbar_init(t.bar_empty(s), ATT90_CONSUMERS);
            mbar_init(t.bar_ds(s), ATT90_CONSUMERS);
        }
        mbar_init(t.bar_sums(), ATT90_CONSUMERS);
        fence_mbarrier_init();
    }
    __syncthreads();
    return t;
}

// the producer thread: own rows [r0, r0 + 128) of (map_a at column xa, map_b at xb); then stages
// j = 0 .. n_tiles-1 of rows [y0 + 64 j, + 64) of (map_x at column xx, map_y at xy). Rows are the
// maps' (B*T-row) coordinates. map_lse, map_D (or NULL): also each stage's 64 values of L and D,
// row bh of those (B*NH, T) fp32 maps from column c0 + 64 j.
__device__ inline void att90_bwd_produce(const Att90Bwd& t, const CUtensorMap* map_a, int xa, const CUtensorMap* map_b,
                                         int xb, int r0, const CUtensorMap* map_x, int xx, const CUtensorMap* map_y,
                                         int xy, int y0, int n_tiles, const CUtensorMap* map_lse = NULL,
                                         const CUtensorMap* map_D = NULL, int bh = 0, int c0 = 0) {
    mbar_arrive_expect_tx(t.bar_own(), 2 * ATT90_TILE_BYTES);
    for (int half = 0; half < 2; half++) {
        uint32_t off = half * ATT90_BWD_BOX_BYTES;
        tma_load_2d(t.own(0) + off, map_a, xa, r0 + half * ATT90_BWD_STAGE, t.bar_own());
        tma_load_2d(t.own(1) + off, map_b, xb, r0 + half * ATT90_BWD_STAGE, t.bar_own());
    }
    for (int j = 0; j < n_tiles; j++) {
        int s = j % ATT90_STAGES;
        if (j >= ATT90_STAGES) { mbar_wait(t.bar_empty(s), (j / ATT90_STAGES - 1) & 1); }
        mbar_arrive_expect_tx(t.bar_full(s), 2 * ATT90_BWD_BOX_BYTES + (map_lse ? 2 * ATT90_BWD_STAGE * 4 : 0));
        tma_load_2d(t.stage(s, 0), map_x, xx, y0 + j * ATT90_BWD_STAGE, t.bar_full(s));
        tma_load_2d(t.stage(s, 1), map_y, xy, y0 + j * ATT90_BWD_STAGE, t.bar_full(s));
        if (map_lse) {
            tma_load_2d(t.rows_addr(s, 0), map_lse, c0 + j * ATT90_BWD_STAGE, bh, t.bar_full(s));
            tma_load_2d(t.rows_addr(s, 1), map_D, c0 + j * ATT90_BWD_STAGE, bh, t.bar_full(s));
        }
    }
}

// acc (64 x 64 per warpgroup) = rows row0.. of own tile `a` times the 64 rows of tile `b`, over the
// 64 dims (both K-major): S = Q K^T and its kin
// (the first k-step overwrites acc: scale_d = 0, so acc is not zeroed first; zeroing it between
// two such products made ptxas wait for the first one: warning C7517). The caller has executed
// wgmma_fence().
__device__ inline void att90_rows_x_rows(float (&acc)[ATT90_BWD_STAGE / 2], uint32_t a, uint32_t b) {
    uint64_t da = wgmma_desc(a, 16, ATT90_SBO, ATT90_SWIZZLE_128B), db = wgmma_desc(b, 16, ATT90_SBO, ATT90_SWIZZLE_128B);
    #pragma unroll
    for (int ks = 0; ks < ATT90_HS / 16; ks++) {
        wgmma_ss<ATT90_BWD_STAGE, 0, 0>(acc, wgmma_desc_advance(da, 32 * ks), wgmma_desc_advance(db, 32 * ks), ks > 0);
    }
}

// acc (64 x 64 dims) += w (64 x 64 rows of tile b, in registers as 4 A fragments) times tile b's
// rows (MN-major: V in the forward's P V)
__device__ inline void att90_weights_x_rows(float (&acc)[ATT90_HS / 2], const uint32_t (&w)[ATT90_BWD_STAGE / 16][4],
                                            uint32_t b) {
    uint64_t db = wgmma_desc(b, ATT90_TILE_BYTES, ATT90_SBO, ATT90_SWIZZLE_128B);
    #pragma unroll
    for (int kc = 0; kc < ATT90_BWD_STAGE / 16; kc++) {
        wgmma_rs<ATT90_HS, 1>(acc, w[kc], wgmma_desc_advance(db, att90_vtile_offset(kc)), 1);
    }
}
#endif // __CUDA_ARCH_FEAT_SM90_ALL

// dqkv's k and v parts: a block owns 128 keys (2 consumer warpgroups x 64), streams the query
// tiles of 64 from its first key on (Q_i, dO_i, and L_i, D_i, all by TMA) and writes dK_j, dV_j
// once. As attention_backward_dkdv_kernel, in S^T form: the keys are the rows. (L and D come by
// TMA, not by plain loads: the consumers' 16 queries' worth per tile, loaded by each thread,
// spilled registers; plain stores by producer threads, ordered by their mbarrier arrivals, are
// correct PTX but outside what the emulator's racecheck orders.)
__global__ void __launch_bounds__(ATT90_THREADS, 1)
attention_backward_dkdv_sm90_kernel(const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap dout_map,
                                    const __grid_constant__ CUtensorMap lse_map, const __grid_constant__ CUtensorMap D_map,
                                    floatX* dqkv, float* dq_part, float* dbias_part, int T, int C, int NH, float scale,
                                    float scale_log2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint4 att_smem[];
    Att90Bwd t = att90_bwd_setup(att_smem);
    char* smem = (char*)att_smem - smem_addr(att_smem); // + a shared address = its generic pointer
    float* smem_rows = (float*)(smem + t.base + ATT90_BWD_ROWS_OFFSET);
    int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * ATT90_BR;
    int n_tiles = (T - k0 + ATT90_BWD_STAGE - 1) / ATT90_BWD_STAGE; // queries k0 .. T-1
    int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        setmaxnreg_dec<24>();
        if (threadIdx.x == 0) {
            att90_bwd_produce(t, &qkv_map, C + h * ATT90_HS, &qkv_map, 2 * C + h * ATT90_HS, b * T + k0,
                              &qkv_map, h * ATT90_HS, &dout_map, h * ATT90_HS, b * T + k0, n_tiles,
                              &lse_map, &D_map, b * NH + h, k0);
        }
        return;
    }
    setmaxnreg_inc<240>();
    int cw = warpgroup - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    int wg_lo = k0 + 64 * cw, key_lo = wg_lo + 16 * warp; // the warpgroup's and the warp's first key
    uint32_t k_own = t.own(0) + att90_kmajor_offset(64 * cw, 0), v_own = t.own(1) + att90_kmajor_offset(64 * cw, 0);

    float dk[ATT90_HS / 2], dv[ATT90_HS / 2];
    #pragma unroll
    for (int i = 0; i < ATT90_HS / 2; i++) { dk[i] = 0.0f; dv[i] = 0.0f; }
    mbar_wait(t.bar_own(), 0);
    // this block's dQ partial tiles (key block kb = blockIdx.x) of this (b, h)
    float* dq_part_bh = dq_part + ((size_t)b * NH + h) * att90_dq_tiles(T) * ATT90_DQ_TILE_FLOATS;
    for (int j = 0; j < n_tiles; j++) {
        int s = j % ATT90_STAGES, q0 = k0 + j * ATT90_BWD_STAGE;
        mbar_wait(t.bar_full(s), (j / ATT90_STAGES) & 1);
        // no branch around the products (a branch, even warpgroup-uniform, makes ptxas serialize
        // the wgmmas, warning C7518): warpgroup 1's first tile (every query before every key) is
        // computed and masked to 0 whole
        {
            // S^T = K_j Q_i^T, dP^T = V_j dO_i^T (64 keys x 64 queries each)
            float sT[ATT90_BWD_STAGE / 2], dpT[ATT90_BWD_STAGE / 2];
            wgmma_fence();
            att90_rows_x_rows(sT, k_own, t.stage(s, 0));
            att90_rows_x_rows(dpT, v_own, t.stage(s, 1));
            wgmma_commit();
            wgmma_wait<0>();
            wgmma_fence_operand(sT);
            wgmma_fence_operand(dpT);
            // P^T = exp2(S^T scale log2(e) - L log2(e)), 0 where the query precedes the key or is
            // past T; dS^T = P^T o (dP^T - D)
            // (16 queries at a time, each packed at once into the A fragments of dV's and dK's
            // products, so that S^T and dP^T die as P and dS are born: fewer live registers)
            // The mask is needed only where some query of the stage precedes some key of the warp,
            // or the stage runs past T (a few stages of a key block): the other stages take the
            // path without it (a branch uniform over the warp; the PTX comments mark the masked
            // path for dev/perf, which prices the loop from its PTX per stage)
            uint32_t pA[ATT90_BWD_STAGE / 16][4], dsA[ATT90_BWD_STAGE / 16][4];
            auto probs = [&](auto masked) {
                #pragma unroll
                for (int kc = 0; kc < ATT90_BWD_STAGE / 16; kc++) {
                    #pragma unroll
                    for (int i = 8 * kc; i < 8 * kc + 8; i++) {
                        int ql = 8 * (i / 4) + mma_c_col(lane, i % 4);
                        // (L past T: zeros from TMA's out-of-range fill; those queries are masked)
                        float p = attention_prob_log2(sT[i] * scale_log2, t.rows(smem_rows, s, 0)[ql] * 1.4426950408889634f);
                        if (decltype(masked)::value) {
                            int q = q0 + ql, key = key_lo + mma_c_row(lane, i % 4);
                            p = q < key || q >= T ? 0.0f : p;
                        }
                        dpT[i] = attention_dscore(p, dpT[i], t.rows(smem_rows, s, 1)[ql]);
                        sT[i] = p;
                    }
                    // dV_j += P^T dO_i, dK_j += dS^T Q_i (scale at the end): their A operands
                    att90_c_to_a(pA[kc], sT, kc);
                    att90_c_to_a(dsA[kc], dpT, kc);
                }
            };
            if (q0 < key_lo + 15 || q0 + ATT90_BWD_STAGE > T) {
                asm volatile("// att90: rare path {");
                probs(std::true_type());
                asm volatile("// att90: rare path }");
            } else {
                probs(std::false_type());
            }
            // dS^T (the same bf16 as dK's A operand) into the stage's buffer, for both warpgroups'
            // dQ^T: this thread's keys 64 cw + 16 warp + g (+8), queries 16 kc + 2t (+1, +8, +9)
            {
                char* ds = smem + t.ds(j % 2);
                int key = 64 * cw + 16 * warp + lane / 4, ql = 2 * (lane % 4);
                #pragma unroll
                for (int kc = 0; kc < ATT90_BWD_STAGE / 16; kc++) {
                    *(uint32_t*)(ds + att90_ds_offset(key, 16 * kc + ql)) = dsA[kc][0];
                    *(uint32_t*)(ds + att90_ds_offset(key + 8, 16 * kc + ql)) = dsA[kc][1];
                    *(uint32_t*)(ds + att90_ds_offset(key, 16 * kc + 8 + ql)) = dsA[kc][2];
                    *(uint32_t*)(ds + att90_ds_offset(key + 8, 16 * kc + 8 + ql)) = dsA[kc][3];
                }
            }
            fence_proxy_async();              // these generic writes, visible to wgmma (the async proxy)
            mbar_arrive(t.bar_ds(j % 2));
            mbar_wait(t.bar_ds(j % 2), (j / 2) & 1); // both halves in
            // (the buffer is rewritten at stage j + 2, by a thread past bar_ds of stage j + 1, which
            // every thread arrives on after its wgmmas of stage j have completed)
            float dqT[ATT90_BWD_STAGE / 4]; // dQ^T: 64 dims x this warpgroup's 32 queries, m64n32
            wgmma_fence_operand(dv);
            wgmma_fence_operand(dk);
            wgmma_fence();
            att90_weights_x_rows(dv, pA, t.stage(s, 1));
            att90_weights_x_rows(dk, dsA, t.stage(s, 0));
            // dQ^T (queries 32 cw .. 32 cw + 31 of the stage) = K^T dS^T over the block's 128 keys:
            // 8 k-steps of 16 keys in key order, the first overwriting (scale_d = 0). A = K^T (64
            // dims x 128 keys) is the own K tile read MN-major (keys = k, the 64 dims = m one
            // 128-byte swizzle atom, as V is read as B in the forward's P V; not from registers:
            // 32 more live registers per thread spilled under ptxas's 168-register cap)
            uint64_t kT_desc = wgmma_desc(t.own(0), ATT90_TILE_BYTES, ATT90_SBO, ATT90_SWIZZLE_128B);
            uint64_t ds_desc = wgmma_desc(t.ds(j % 2) + 4 * cw * ATT90_DS_SBO, ATT90_DS_LBO, ATT90_DS_SBO, 0);
            #pragma unroll
            for (int kc = 0; kc < ATT90_BR / 16; kc++) {
                wgmma_ss<ATT90_BWD_STAGE / 2, 1, 1>(dqT, wgmma_desc_advance(kT_desc, att90_vtile_offset(kc)),
                                                    wgmma_desc_advance(ds_desc, 2 * kc * ATT90_DS_LBO), kc > 0);
            }
            wgmma_commit();
            wgmma_wait<0>();
            wgmma_fence_operand(dv);
            wgmma_fence_operand(dk);
            wgmma_fence_operand(dqT);
            // the partial tile (query block q0 / 128, key block blockIdx.x): 64 dims x 128 queries,
            // this thread's dims 16 warp + g (+8), queries 32 cw + 8 i + 2t (+1) of the stage
            int qb = q0 / ATT90_BR;
            float* tile = dq_part_bh + ((size_t)qb * (qb + 1) / 2 + blockIdx.x) * ATT90_DQ_TILE_FLOATS;
            #pragma unroll
            for (int i = 0; i < ATT90_BWD_STAGE / 16; i++) { // the 4 n8 blocks of m64n32
                int ql = 32 * cw + 8 * i + 2 * (lane % 4);
                if (q0 + ql >= T) { continue; } // T % 4 == 0: the pair is in or out together
                #pragma unroll
                for (int half = 0; half < 2; half++) {
                    int dim = 16 * warp + lane / 4 + 8 * half;
                    *(float2*)(tile + dim * ATT90_BR + q0 % ATT90_BR + ql) = make_float2(dqT[4 * i + 2 * half], dqT[4 * i + 2 * half + 1]);
                }
            }
        }
        mbar_arrive(t.bar_empty(s));
    }
    floatX* dqkv_b = dqkv + (size_t)b * T * 3 * C + h * ATT90_HS;
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        int r = key_lo + lane / 4 + 8 * half;
        if (r >= T) { continue; }
        floatX* krow = dqkv_b + (size_t)r * 3 * C + C;
        #pragma unroll
        for (int n8 = 0; n8 < ATT90_HS / 8; n8++) {
            int c = 8 * n8 + 2 * (lane % 4), e = 4 * n8 + 2 * half;
            *(__nv_bfloat162*)(krow + c) = __floats2bfloat162_rn(dk[e] * scale, dk[e + 1] * scale);
            *(__nv_bfloat162*)(krow + C + c) = __floats2bfloat162_rn(dv[e], dv[e + 1]);
        }
    }
    // the qkv bias gradient's partial row (b, key tile 2 blockIdx.x + cw: this warpgroup's 64
    // keys): the column sums of dK, dV as written (attention.cuh's att_tc_col_sums_*: the
    // accumulators have the mma.sync C layout, dk[4 n8 + e] = acc[n8][e]). Each warp's sums go
    // to the dS^T buffer of stage n_tiles (none, or stage n_tiles - 2's: both warpgroups' wgmmas
    // that read it completed before they arrived on bar_ds of stage n_tiles - 1), then the
    // warpgroup's 128 threads add its 4 warps' in order, one column (64 of dK, 64 of dV) each.
    {
        float* sums = (float*)(smem + t.ds(n_tiles % 2)); // [warpgroup][warp][k, v][HS]
        const float dk_factor[2] = {scale, scale}, dv_factor[2] = {1.0f, 1.0f};
        float* mine = sums + (4 * cw + warp) * 2 * ATT90_HS;
        att_tc_col_sums_warp<ATT90_HS>(mine, reinterpret_cast<const float(&)[ATT90_HS / 8][4]>(dk), dk_factor, key_lo, T, lane);
        att_tc_col_sums_warp<ATT90_HS>(mine + ATT90_HS, reinterpret_cast<const float(&)[ATT90_HS / 8][4]>(dv), dv_factor,
                                       key_lo, T, lane);
        mbar_arrive(t.bar_sums());
        mbar_wait(t.bar_sums(), 0);
        if (wg_lo < T) { // the tile exists
            int col = threadIdx.x % 128, which = col / ATT90_HS, c = col % ATT90_HS; // which: 0 k, 1 v
            const float* w0 = sums + 4 * cw * 2 * ATT90_HS + which * ATT90_HS + c;
            float sum = w0[0];
            #pragma unroll
            for (int w = 1; w < 4; w++) { sum = __fadd_rn(sum, w0[w * 2 * ATT90_HS]); }
            size_t C3 = 3 * (size_t)C;
            dbias_part[((size_t)b * att_dbias_tiles(T) + wg_lo / 64) * C3 + (1 + which) * C + h * ATT90_HS + c] = sum;
        }
    }
#endif // __CUDA_ARCH_FEAT_SM90_ALL
}

// one query row of the reduce below: its sum, written to dqkv, and its bf16 values into `written`
__device__ inline void att90_dq_row(floatX* dqkv, float* written, const float* dq_part, int b, int h, int qb, int q, int T,
                                    int C, int NH, float scale) {
    const float* p = dq_part + (((size_t)b * NH + h) * att90_dq_tiles(T) + (size_t)qb * (qb + 1) / 2) * ATT90_DQ_TILE_FLOATS +
                     threadIdx.x;
    float acc[ATT90_HS];
    #pragma unroll
    for (int d = 0; d < ATT90_HS; d++) { acc[d] = p[d * ATT90_BR]; }
    for (int kb = 1; kb <= qb; kb++) {
        p += ATT90_DQ_TILE_FLOATS;
        #pragma unroll
        for (int d = 0; d < ATT90_HS; d++) { acc[d] = __fadd_rn(acc[d], p[d * ATT90_BR]); }
    }
    floatX* row = dqkv + ((size_t)b * T + q) * 3 * C + h * ATT90_HS;
    #pragma unroll
    for (int d = 0; d < ATT90_HS; d += 8) {
        uint4 v = make_uint4(0, 0, 0, 0); // (all written below; initialized for the host compiler's flow analysis)
        __nv_bfloat162* v2 = (__nv_bfloat162*)&v;
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            v2[e] = __floats2bfloat162_rn(__fmul_rn(acc[d + 2 * e], scale), __fmul_rn(acc[d + 2 * e + 1], scale));
            written[d + 2 * e] = __low2float(v2[e]);
            written[d + 2 * e + 1] = __high2float(v2[e]);
        }
        *(uint4*)(row + d) = v;
    }
}

// dqkv's q part from the dK/dV kernel's partial tiles: thread = one query row q of (b, h), its 64
// dims' sum over the key blocks kb = 0, 1, .., q / 128 in that order (one fp32 rounding per add),
// then times scale, rounded to bf16. Loads: consecutive threads, consecutive queries of a tile row.
// Then the qkv bias gradient's two partial rows of the block's 128 queries (query tiles 2 qb and
// 2 qb + 1): the rows' written values through shared memory (a row per thread, padded by one
// float: no bank conflicts), and thread t adds column t % 64 of tile t / 64 over its 64 rows in order.
__global__ void __launch_bounds__(ATT90_BR)
attention_backward_dq_reduce_kernel(floatX* dqkv, float* dbias_part, const float* dq_part, int T, int C, int NH,
                                    float scale) {
    __shared__ float rows[ATT90_BR][ATT90_HS + 1];
    int b = blockIdx.z, h = blockIdx.y, qb = blockIdx.x, q = qb * ATT90_BR + threadIdx.x;
    if (q < T) { att90_dq_row(dqkv, rows[threadIdx.x], dq_part, b, h, qb, q, T, C, NH, scale); }
    else {
        #pragma unroll
        for (int d = 0; d < ATT90_HS; d++) { rows[threadIdx.x][d] = 0.0f; } // past T: counts 0
    }
    __syncthreads();
    int half = threadIdx.x / 64, c = threadIdx.x % 64;
    static_assert(ATT90_HS == 64 && ATT90_BR == 128, "a thread per (64-row tile, column) of the block");
    if (64 * (2 * qb + half) < T) { // the tile exists
        float sum = 0.0f;
        for (int r = 0; r < 64; r++) { sum = __fadd_rn(sum, rows[64 * half + r][c]); }
        dbias_part[((size_t)b * att_dbias_tiles(T) + 2 * qb + half) * 3 * C + h * ATT90_HS + c] = sum;
    }
}


// 1 where this binary holds the sm_90a code of the kernels above (probed once on the device)
__global__ void attention_sm90_probe_kernel(int* has) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *has = 1;
#else
    *has = 0;
#endif
}

// Whether attention_forward takes the sm_90a kernel: -1 (the default) = where it can (the device
// is compute capability 9.0 and the binary holds sm_90a code), 0 = never (the mma.sync kernels;
// dev/cuda/test_kernels.cu tests both paths).
static int attention_sm90_mode = -1;

static bool attention_sm90_available() {
    static int cached = -1;
    if (cached < 0) {
        int dev, major, minor;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        cudaCheck(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        cached = 0;
        if (major == 9 && minor == 0) {
            int* d_has;
            int has = 0;
            cudaCheck(cudaMalloc(&d_has, sizeof(int)));
            attention_sm90_probe_kernel<<<1, 1>>>(d_has);
            cudaCheckLaunch();
            cudaCheck(cudaMemcpy(&has, d_has, sizeof(int), cudaMemcpyDeviceToHost));
            cudaCheck(cudaFree(d_has));
            cached = has;
        }
    }
    return cached == 1;
}

static bool attention_sm90_use(int hs) { return hs == ATT90_HS && attention_sm90_mode != 0 && attention_sm90_available(); }
// the backward also needs T % 4 == 0: its (B*NH, T) fp32 maps of L and D need rows 16-byte apart
static bool attention_sm90_use_backward(int hs, int T) { return attention_sm90_use(hs) && T % 4 == 0; }

// a 2D fp32 tensor map, rows x cols, rows row_stride bytes apart (a multiple of 16), box 1 row x
// box_cols, no swizzle (out-of-range elements: zeros); the driver's cuTensorMapEncodeTiled
// (wgmma.cuh's tma_encode). 0 on success, else one line on stderr and -1.
static int attention_tma_map_f32(CUtensorMap* map, const float* gptr, uint64_t rows, uint64_t cols, uint64_t row_stride,
                                 uint32_t box_cols) {
    tma_encode_fn encode = tma_encode("attention_tma_map_f32");
    if (encode == NULL) { return -1; }
    cuuint64_t dims[2] = {cols, rows}, strides[1] = {row_stride};
    cuuint32_t box[2] = {box_cols, 1}, estrides[2] = {1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void*)gptr, dims, strides, box, estrides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "attention_tma_map_f32: cuTensorMapEncodeTiled failed (%d) for %llu x %llu, stride %llu\n", (int)r,
                (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)row_stride);
        return -1;
    }
    return 0;
}

static void attention_forward_sm90(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH,
                                   cudaStream_t stream) {
    CUtensorMap map;
    if (tma_map_2d_bf16(&map, qkv, (uint64_t)B * T, 3 * (uint64_t)C, 3 * (uint64_t)C * sizeof(floatX), ATT90_BC,
                        ATT90_HS) != 0) {
        fail("attention_forward: no tensor map for qkv (B=%d T=%d C=%d)", B, T, C);
    }
    dim3 grid(ceil_div(T, ATT90_BR), NH, B);
    float scale_log2 = 1.0f / sqrtf((float)ATT90_HS) * 1.4426950408889634f; // as attention_forward_launch
    attention_allow_smem(attention_forward_sm90_kernel, ATT90_SMEM);
    attention_forward_sm90_kernel<<<grid, ATT90_THREADS, ATT90_SMEM, stream>>>(map, out, lse, T, C, NH, scale_log2);
    cudaCheckLaunch();
}

// dqkv from dout, qkv, lse and the row terms D (attention_backward's rowdot kernel has run): the
// dK/dV pass (with dQ's partials into dq_part, attention_sm90_dq_partial_floats), then their sum
static void attention_backward_sm90(floatX* dqkv, const float* D, float* dq_part, float* dbias_part, const floatX* dout,
                                    const floatX* qkv, const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
    CUtensorMap qkv_map, dout_map, lse_map, D_map;
    if (tma_map_2d_bf16(&qkv_map, qkv, (uint64_t)B * T, 3 * (uint64_t)C, 3 * (uint64_t)C * sizeof(floatX),
                        ATT90_BWD_STAGE, ATT90_HS) != 0 ||
        tma_map_2d_bf16(&dout_map, dout, (uint64_t)B * T, (uint64_t)C, (uint64_t)C * sizeof(floatX), ATT90_BWD_STAGE,
                        ATT90_HS) != 0 ||
        attention_tma_map_f32(&lse_map, lse, (uint64_t)B * NH, (uint64_t)T, (uint64_t)T * sizeof(float), ATT90_BWD_STAGE) != 0 ||
        attention_tma_map_f32(&D_map, D, (uint64_t)B * NH, (uint64_t)T, (uint64_t)T * sizeof(float), ATT90_BWD_STAGE) != 0) {
        fail("attention_backward: no tensor maps for qkv, dout, lse and D (B=%d T=%d C=%d NH=%d)", B, T, C, NH);
    }
    dim3 grid(ceil_div(T, ATT90_BR), NH, B);
    float scale = 1.0f / sqrtf((float)ATT90_HS), scale_log2 = scale * 1.4426950408889634f;
    attention_allow_smem(attention_backward_dkdv_sm90_kernel, ATT90_BWD_SMEM);
    attention_backward_dkdv_sm90_kernel<<<grid, ATT90_THREADS, ATT90_BWD_SMEM, stream>>>(
        qkv_map, dout_map, lse_map, D_map, dqkv, dq_part, dbias_part, T, C, NH, scale, scale_log2);
    cudaCheckLaunch();
    attention_backward_dq_reduce_kernel<<<grid, ATT90_BR, 0, stream>>>(dqkv, dbias_part, dq_part, T, C, NH, scale);
    cudaCheckLaunch();
}
#endif // ENABLE_BF16

#endif // LLMC_ATTENTION_SM90_CUH
