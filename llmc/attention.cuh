/*
Causal self-attention on the GPU, flash-attention style: the CUDA twin of attention_forward /
attention_backward in train_gpt2.c (same math: scores q.k / sqrt(hs), causal mask, softmax,
weighted sum of v; same names for the same tensors). Each build has its own kernels under the
same names: the bf16 build (the trainer's default) runs FlashAttention-2 on tensor cores; the fp32
build keeps simple fp32 kernels on CUDA cores, the tight reference that test_gpt2.cu checks against
PyTorch.

Why not the CPU's way: the CPU keeps att (B,NH,T,T), the softmax weights, for the backward. At
GPT-2 124M with B=8, T=1024 that is 8*12*1024*1024 floats = 400 MB per layer. Here no T x T
buffer exists: the forward walks over the keys tile by tile with an online softmax (a running max
m and running sum l per query; when a new max appears the partial output is rescaled by
exp(m_old - m_new)), and keeps only lse (B,NH,T) = m + log(l), the log-sum-exp of each query's
scores. The backward recomputes P_ij = exp(s_ij - lse_i) from q, k and lse.

Why the backward has two passes: dK_j and dV_j are sums over the queries i, dQ_i is a sum over the
keys j. One pass over (i,j) tiles would have to add into one of them from many blocks (atomics,
whose order changes from run to run: FlashAttention-2 adds dQ with atomicAdd) or keep a T x T
buffer. Instead:
    1. attention_backward_rowdot_kernel: D_i = dout_i . out_i into scratch (B,NH,T)
       (D_i = sum_j P_ij dP_ij, the softmax backward's row term; it is cheaper from out)
    2. attention_backward_dkdv_kernel: a block owns 64 keys and loops over the query tiles
       from its first key on: dV_j = sum_i P_ij dout_i, dK_j = scale * sum_i dS_ij q_i
    3. attention_backward_dq_kernel: a block owns 64 queries and loops over the key tiles up to
       its last query: dQ_i = scale * sum_j dS_ij k_j
with dP_ij = dout_i . v_j and dS_ij = P_ij (dP_ij - D_i). Every element of dqkv has one writer
that sums in a fixed order, and no atomics are used anywhere: two runs give identical bits. The
price is computing s_ij and dP_ij twice: 7 products where FlashAttention-2 does 5.

The bf16 build, beside the FlashAttention-2 paper (T. Dao, 2023, arXiv:2307.08691):
  - attention_forward_kernel is Algorithm 1 for one query tile Q_i (the grid is its outer loop):
    line 4, Q_i into registers; lines 6-7, the key tiles K_j, V_j up to the diagonal through
    shared memory; line 8, S = Q_i K_j^T on tensor cores; line 9, the online softmax on S's
    accumulators; line 10, O += P V_j on tensor cores; lines 12-15, O / l and L_i = lse. The
    kernel marks the lines.
  - the dK/dV kernel is Algorithm 2's outer loop (one K_j, V_j per block) without dQ; the dQ
    kernel is line 15's dQ_i update with the loops swapped, so that one block owns each dQ_i.
  - products: mma.sync m16n8k16 (llmc/mma.cuh), a 16x8 fp32 block of D = A B + C per warp and
    instruction, A 16x16 and B 16x8 in bf16. Every product here is one of two shapes: "rows of my
    16 x the other side's rows" (S = Q K^T, dP = dout V^T and their transposes, over the hs dims:
    the other side's tile is B without transpose) and "my 16 x 16 weights x the other side's
    rows" (P V, dS K, P^T dout, dS^T Q: the tile is B with .trans). The fp32 results of the first
    kind are, lane for lane, the A operand of the second once rounded to bf16 (mma.cuh), so
    P and dS never leave the registers.
  - exp2f: a score leaves the accumulator as s * scale * log2(e) (one multiply), and exp(x - m)
    is computed as exp2(x' - m'): ex2 is one instruction. m and lse2 = lse * log2(e) live in the
    same units (the _log2 functions below).
  - numerics: the tensor cores take bf16 operands, so P (before P V and P^T dout) and dS (before
    dS K and dS^T Q) are rounded to bf16, as in FlashAttention; everything else is fp32 (the
    accumulators, m, l, lse, D). dev/test/bf16_rounding.py rounds at the same places.

Why these tiles (the bf16 build):
  - a warp owns 16 rows: one mma M tile. A block is 4 warps (128 threads), 64 rows (Br = 64),
    of one (b, h); grid (ceil(T/64), NH, B), the heaviest query tiles first.
  - the other side is staged 64 rows at a time (Bc = 64 = Br: the diagonal tile is the last one
    a query block visits, and the only one needing the causal mask), double-buffered: cp.async
    brings tile j+1 while tile j computes. Shared memory 2 buffers x 2 tensors x 64 rows x
    (hs + 8) bf16 = 36 KB at hs 64 (+ 1 KB of lse and D in dK/dV), dynamic (69 KB at hs 128 needs
    the opt-in above 48 KB).
  - registers (ptxas, sm_80, hs 64): the forward holds Q_i's A fragments (16 registers), O (32),
    S for 64 keys (32): 122 registers, 4 blocks = 16 warps per SM. The dK/dV kernel holds K_j,
    V_j (32) and dK_j, dV_j (64), and takes the queries 16 at a time so S^T and dP^T need only 16:
    168 registers, 3 blocks. The dQ kernel: Q_i, dO_i (32), dQ (32), 16 keys at a time:
    117 (sm_80) / 125 (sm_90) registers, 4 blocks. (dev/test/test_attention_ptx.sh prints them
    all, and checks there are no spills; at hs 128 K_j, V_j stay in shared memory.) 4 blocks of
    36 KB also fit the A100's 164 KB of shared memory per SM (H100: 228 KB).
  - the price of 16-row warps: each mma reads its B operand (256 bytes) from shared memory. An
    SM's shared memory gives 128 bytes per clock; an A100 SM does 1/2 mma per clock (312 TFLOP/s
    / 108 SMs / 1.41 GHz = 2048 FLOP per clock, 4096 per mma): balanced. An H100 SM does 1 per
    clock (989 TFLOP/s / 132 / 1.83 GHz): shared memory caps it near half its peak. Warps of 32
    rows (FlashAttention-2's 128-row blocks) halve that traffic but need ~200 registers; sm_90's
    wgmma reads operands for 64 rows at once: the next step on an H100.

Shared memory without bank conflicts: a tile row of hs bf16 is padded by 16 bytes, so its pitch,
hs/8 + 1 units of 16 bytes, is odd. An ldmatrix phase reads 8 rows at one 16-byte column, and the
tile loader's 8 consecutive threads store one 16-byte column of 8 rows: with an odd pitch those 8
addresses fall in the 8 distinct 16-byte groups of the 32 banks. (A swizzle, XOR of the column
with row % 8, saves the padding but needs 8 columns per row, hs >= 64; the tiny model has hs 16.)
dev/test/test_attention_host.cu checks both access patterns for every hs.

Any T: staged rows at or past T are zeros (never NaN, which 0 * NaN would carry into P V) and
masked (the forward's causal mask covers keys past T; the dK/dV kernel masks queries past T);
rows past T compute harmlessly and are not written. Every lane reaches every mma, ldmatrix,
shuffle and barrier: the branches around them are uniform over the warp or the block.

The per-element math (the online-softmax merge, P from lse, dS) is in __host__ __device__
functions at the top, tested on the CPU by dev/test/test_attention_host.cu against train_gpt2.c,
with the fragment layouts (a host simulation of ldmatrix and mma by mma.cuh's documented layout).

The fp32 build's tiling (HS = hs a template parameter: 16, 32, 64 or 128):
  - a block owns ATT_ROWS = 64 rows (queries in the forward and dQ, keys in dK/dV) of one (b, h);
    grid (ceil(T/64), NH, B)
  - a row is split over G = HS/16 consecutive threads, each holding 16 of its hs dims in registers
    (dims g, g+G, g+2G, ... for lane g of the group, so the G threads read G consecutive words of
    shared memory: no bank conflicts); dot products are finished with G-lane shuffles.
    Threads per block: 64*G = 128 / 256 / 512 for hs = 32 / 64 / 128.
  - the other side (keys and values, or queries and douts) is staged through shared memory
    ATT_TILE = 32 rows at a time, as fp32: 2*32*HS*4 bytes = 8 / 16 / 32 KB (static, < 48 KB).
  - T need not be a multiple of the tiles: staged rows past T are filled with 0 and masked; a
    thread whose own row is past T computes on row T-1 (so every thread reaches every barrier and
    every shuffle with finite numbers) and writes nothing.
  - causality skips whole tiles: a query block only visits keys < its end, a key block only
    queries >= its start.
Math on CUDA cores in fp32 (inputs and outputs floatX), readable rather than fast.
*/
#ifndef LLMC_ATTENTION_CUH
#define LLMC_ATTENTION_CUH

#include <math.h>
#include <limits.h>
#include <stdint.h>
#include "cuda_common.cuh"
#include "mma.cuh"

// ----------------------------------------------------------------------------
// per-element math, on host and device

// One query row's online softmax over the keys seen so far. m is the max of the scaled scores so
// far and l = sum_j exp(s_j - m). The caller keeps its output accumulator acc = sum_j exp(s_j - m) v_j
// relative to the same m, so exp never sees a positive argument and cannot overflow.
typedef struct {
    float m; // running max of the scores (-inf before any visible key)
    float l; // running sum of exp(score - m)
} OnlineSoftmax;

__host__ __device__ inline OnlineSoftmax online_softmax_init() {
    OnlineSoftmax st;
    st.m = -INFINITY;
    st.l = 0.0f;
    return st;
}

// Merge in a new tile of scores whose max is tile_max (-inf if all are masked): raise the running
// max and return alpha = exp(m_old - m_new), the factor by which the caller must multiply its
// accumulator (l is rescaled here) so that both stay relative to the new max.
__host__ __device__ inline float online_softmax_rescale(OnlineSoftmax* st, float tile_max) {
    float m_new = fmaxf(st->m, tile_max);
    // nothing visible yet: exp(-inf - (-inf)) would be NaN; the (empty) accumulator stays as it is
    float alpha = m_new == -INFINITY ? 1.0f : expf(st->m - m_new);
    st->l *= alpha;
    st->m = m_new;
    return alpha;
}

// The unnormalized weight exp(s - m) of one score of the tile, after online_softmax_rescale has
// seen the tile's max; it is added to l. A masked score (-inf) weighs 0.
__host__ __device__ inline float online_softmax_weight(OnlineSoftmax* st, float s) {
    float p = s == -INFINITY ? 0.0f : expf(s - st->m);
    st->l += p;
    return p;
}

// log(sum_j exp(s_j)) over the whole row, once every key has been merged: the forward saves it so
// the backward can get P_ij in one step, without the max and sum of the row.
__host__ __device__ inline float online_softmax_lse(OnlineSoftmax st) { return st.m + logf(st.l); }

// Backward: the softmax weight of score s in a row whose log-sum-exp is lse.
__host__ __device__ inline float attention_prob(float s, float lse) { return expf(s - lse); }

// The tensor-core kernels (the bf16 build) run the same online softmax in base 2: a score leaves
// the accumulator as s' = (q.k) * scale * log2(e), one multiply with log2(e) folded into the
// scale, and exp(s - m) = exp2(s' - m'), exp2f being one instruction (ex2) on the GPU. m is then
// kept in the same units; l is unchanged (a sum of the same weights).
__host__ __device__ inline float online_softmax_rescale_log2(OnlineSoftmax* st, float tile_max) {
    float m_new = fmaxf(st->m, tile_max);
    float alpha = m_new == -INFINITY ? 1.0f : exp2f(st->m - m_new); // as online_softmax_rescale
    st->l *= alpha;
    st->m = m_new;
    return alpha;
}

__host__ __device__ inline float online_softmax_weight_log2(OnlineSoftmax* st, float s) {
    float p = s == -INFINITY ? 0.0f : exp2f(s - st->m);
    st->l += p;
    return p;
}

// the natural-log lse (what the backward and the fp32 build keep): (m' + log2 l) ln 2
__host__ __device__ inline float online_softmax_lse_log2(OnlineSoftmax st) {
    return (st.m + log2f(st.l)) * 0.69314718055994531f;
}

// Backward: the softmax weight of a base-2 score s' in a row whose lse, times log2(e), is lse2
__host__ __device__ inline float attention_prob_log2(float s2, float lse2) { return exp2f(s2 - lse2); }

// Backward through the softmax: dS_ij = P_ij (dP_ij - D_i), with dP_ij = dout_i . v_j the gradient
// w.r.t. P_ij and D_i = sum_j P_ij dP_ij = dout_i . out_i. (The gradient w.r.t. q and k is then
// scale * dS, as s = scale * q.k.)
__host__ __device__ inline float attention_dscore(float p, float dp, float D) { return p * (dp - D); }

// ----------------------------------------------------------------------------
// the backward's row term (both builds)

// D (B,NH,T) = sum over the head's dims of dout * out, both (B,T,C). A row (b, t, h) is hs / 8
// 16-byte packs in bf16 (hs / 4 in fp32): G = attention_rowdot_lanes(hs) consecutive lanes take
// one pack each (G = 8 at hs = 64 in bf16: 4 rows per warp, 32 per block of 256). A lane sums its
// pack's products in dim order, each one rounding (fmaf: a fused multiply-add on the GPU and in
// the host's libm alike, so a host replay can give the same bits), then the G lanes' sums are
// added by a butterfly (xor G/2, ..., 1). Per row: 2 hs floatX read in 16-byte loads, 4 bytes
// written; no shared memory, no barrier. (It was one warp per row, a floatX per lane: at
// hs = 64, 2 bytes per load and 32 lanes for 64 elements.)
__host__ __device__ inline int attention_rowdot_lanes(int hs) { return hs / PACKX_SIZE; }

__host__ __device__ inline float attention_rowdot_pack(const PackX& d, const PackX& o, float sum) {
    for (int j = 0; j < PACKX_SIZE; j++) { sum = fmaf(to_float(d.v[j]), to_float(o.v[j]), sum); }
    return sum;
}

__global__ void attention_backward_rowdot_kernel(float* D, const floatX* dout, const floatX* out,
                                                 int B, int T, int C, int NH) {
    int hs = C / NH, G = attention_rowdot_lanes(hs); // a power of 2, 2..32 (hs 16..128)
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t row = idx / G; // (b*T + t)*NH + h
    int g = (int)(idx % G);
    bool mine = row < (size_t)B * T * NH; // the lanes past the last row still join the shuffles
    float sum = 0.0f;
    size_t bt = row / NH;
    int h = (int)(row % NH);
    if (mine) {
        PackX d = load128(dout + bt * C + h * hs + g * PACKX_SIZE);
        PackX o = load128(out + bt * C + h * hs + g * PACKX_SIZE);
        sum = attention_rowdot_pack(d, o, 0.0f);
    }
    for (int offset = G / 2; offset > 0; offset >>= 1) { sum += __shfl_xor_sync(0xffffffff, sum, offset); }
    if (mine && g == 0) {
        int b = (int)(bt / T), t = (int)(bt % T);
        D[((size_t)b * NH + h) * T + t] = sum;
    }
}

// ----------------------------------------------------------------------------
// the qkv product's bias gradient (issue 30 item 2): dbias (3C) += the column sums of dqkv over
// its B*T rows, taken here, where dqkv is written, instead of by a pass of the qkv product's
// (cuBLASLt's BGRADB, a kernel of its own on Hopper, reading all of dqkv again). In two steps, in
// a fixed order (no atomics: the same bits every run and at every ZeRO stage):
//  1. partials (B * ceil(T/64) rows of 3C floats): row (b, tile) holds, per column, the fp32 sum
//     of dqkv's rows 64 tile .. 64 tile + 63 of batch b, of the values as written (rounded to
//     floatX). The kernels that write dqkv take them as they write: the mma.sync dK/dV and dQ
//     kernels from their registers (att_tc_col_sums below), the sm_90a dK/dV kernel likewise and
//     its dQ reduce through shared memory; the fp32 build's kernels do not, and dqkv is read back
//     (attention_dbias_partials_kernel).
//  2. attention_dbias_reduce_kernel adds up a column's partial rows, then adds the total into
//     dbias: dbias = floatX(dbias + the fp32 sum), one rounding (as ln2's backward gives attproj and fcproj
//     theirs; BGRADB's path rounded the sum to floatX first).
constexpr int ATT_DBIAS_ROWS = 64; // rows of dqkv per partial row (= ATT_ROWS = ATT_TC_ROWS)

__host__ __device__ inline int att_dbias_tiles(int T) { return (T + ATT_DBIAS_ROWS - 1) / ATT_DBIAS_ROWS; }
static inline size_t attention_dbias_partial_floats(int B, int T, int C) { return (size_t)B * att_dbias_tiles(T) * 3 * C; }

// The fp32 build's partials, read back from dqkv. Block (256 columns, tile, b): thread = one
// column, its 64 rows in order
__global__ void attention_dbias_partials_kernel(float* partials, const floatX* dqkv, int T, int C3) {
    int col = blockIdx.x * blockDim.x + threadIdx.x, tile = blockIdx.y, b = blockIdx.z;
    if (col >= C3) { return; }
    int t0 = tile * ATT_DBIAS_ROWS, t1 = min(t0 + ATT_DBIAS_ROWS, T);
    const floatX* p = dqkv + ((size_t)b * T + t0) * C3 + col;
    float sum = 0.0f;
    #pragma unroll 16
    for (int t = t0; t < t1; t++, p += C3) { sum = __fadd_rn(sum, to_float(*p)); }
    partials[((size_t)b * att_dbias_tiles(T) + tile) * C3 + col] = sum;
}

// Block of 32 columns x 8 lanes: lane r adds partial rows r, r + 8, r + 16, ... in order (unrolled:
// 16 loads in flight), then lane 0 adds the 8 lanes' sums in order and the total into dbias
constexpr int ATT_DBIAS_LANES = 8;
__global__ void __launch_bounds__(32 * ATT_DBIAS_LANES)
attention_dbias_reduce_kernel(floatX* dbias, const float* partials, int rows, int C3) {
    __shared__ float lane_sums[ATT_DBIAS_LANES][32];
    int c = threadIdx.x % 32, r = threadIdx.x / 32, col = blockIdx.x * 32 + c;
    float sum = 0.0f;
    if (col < C3) {
        #pragma unroll 16
        for (int i = r; i < rows; i += ATT_DBIAS_LANES) { sum = __fadd_rn(sum, partials[(size_t)i * C3 + col]); }
    }
    lane_sums[r][c] = sum;
    __syncthreads();
    if (r == 0 && col < C3) {
        float total = lane_sums[0][c];
        #pragma unroll
        for (int i = 1; i < ATT_DBIAS_LANES; i++) { total = __fadd_rn(total, lane_sums[i][c]); }
        dbias[col] = from_float(__fadd_rn(to_float(dbias[col]), total));
    }
}

static void attention_dbias_reduce(floatX* dbias, const float* partials, int B, int T, int C, cudaStream_t stream) {
    attention_dbias_reduce_kernel<<<ceil_div(3 * C, 32), 32 * ATT_DBIAS_LANES, 0, stream>>>(dbias, partials,
                                                                                          B * att_dbias_tiles(T), 3 * C);
    cudaCheckLaunch();
}

// ----------------------------------------------------------------------------
// the fp32 build: CUDA cores

constexpr int ATT_ROWS = 64; // rows (queries or keys) owned by one block
constexpr int ATT_TILE = 32; // rows of the other side staged in shared memory per step
constexpr int ATT_DIMS = 16; // head dims per thread: a row of hs dims is split over hs/16 threads

static_assert(ATT_ROWS % ATT_TILE == 0, "a block's row range must start on a tile boundary");

#if defined(ENABLE_FP32)
// Sum over the G consecutive lanes that share one row (G a power of 2, at most 32). The butterfly
// gives every lane of the group the same bits, so their copies of m and l never drift apart.
template <int G>
__device__ inline float att_row_sum(float x) {
    static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "a row's threads must be a power of 2 within a warp");
    #pragma unroll
    for (int offset = G / 2; offset > 0; offset >>= 1) { x += __shfl_xor_sync(0xffffffff, x, offset); }
    return x;
}

// tile (ATT_TILE, HS) = rows [r0, r0 + ATT_TILE) of one head's slice, as fp32; row r of the slice
// starts at head[r * row_stride]. Rows at or past T are 0. Called by every thread of the block.
template <int HS>
__device__ inline void att_load_tile(float (*tile)[HS], const floatX* head, size_t row_stride, int r0, int T) {
    for (int e = threadIdx.x; e < ATT_TILE * HS; e += blockDim.x) {
        int r = e / HS, d = e % HS; // consecutive threads read consecutive dims: coalesced
        tile[r][d] = r0 + r < T ? to_float(head[(size_t)(r0 + r) * row_stride + d]) : 0.0f;
    }
}

// x (ATT_DIMS) = this thread's dims g, g+G, ... of one row of HS
template <int HS>
__device__ inline void att_load_row(float* x, const floatX* row, int g) {
    static_assert(HS % ATT_DIMS == 0, "hs must be a multiple of the dims per thread");
    constexpr int G = HS / ATT_DIMS;
    #pragma unroll
    for (int i = 0; i < ATT_DIMS; i++) { x[i] = to_float(row[g + G * i]); }
}

// this thread's dims g, g+G, ... of one row of HS = x (ATT_DIMS) * factor, rounded to floatX
template <int HS>
__device__ inline void att_store_row(floatX* row, const float* x, float factor, int g) {
    constexpr int G = HS / ATT_DIMS;
    #pragma unroll
    for (int i = 0; i < ATT_DIMS; i++) { row[g + G * i] = from_float(x[i] * factor); }
}

// ----------------------------------------------------------------------------
// the fp32 build: forward

// out (B,T,C), lse (B,NH,T); qkv (B,T,3C). Block (query tile, h, b); G threads per query.
template <int HS>
__global__ void __launch_bounds__(ATT_ROWS * HS / ATT_DIMS)
attention_forward_kernel(floatX* out, float* lse, const floatX* qkv, int T, int C, int NH, float scale) {
    constexpr int G = HS / ATT_DIMS;
    __shared__ float k_tile[ATT_TILE][HS];
    __shared__ float v_tile[ATT_TILE][HS];
    int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * ATT_ROWS;
    int g = threadIdx.x % G;
    int t_own = q0 + threadIdx.x / G;
    bool own_valid = t_own < T;
    int t = own_valid ? t_own : T - 1; // this thread's query
    size_t C3 = 3 * (size_t)C;
    const floatX* qkv_b = qkv + (size_t)b * T * C3; // (T,3C)

    float q[ATT_DIMS], acc[ATT_DIMS]; // acc = sum_j exp(s_j - m) v_j, this thread's dims
    att_load_row<HS>(q, qkv_b + t * C3 + h * HS, g);
    #pragma unroll
    for (int i = 0; i < ATT_DIMS; i++) { acc[i] = 0.0f; }
    OnlineSoftmax st = online_softmax_init();

    // keys [0, kv_end) are the ones any query of this block can see
    int kv_end = min(q0 + ATT_ROWS, T);
    for (int k0 = 0; k0 < kv_end; k0 += ATT_TILE) {
        __syncthreads(); // every thread is done with the previous tile
        att_load_tile<HS>(k_tile, qkv_b + C + h * HS, C3, k0, T);
        att_load_tile<HS>(v_tile, qkv_b + 2 * C + h * HS, C3, k0, T);
        __syncthreads();
        float s[ATT_TILE]; // this tile's scaled scores, -inf where the key is in the future
        float tile_max = -INFINITY;
        #pragma unroll
        for (int j = 0; j < ATT_TILE; j++) {
            float dot = 0.0f;
            #pragma unroll
            for (int i = 0; i < ATT_DIMS; i++) { dot += q[i] * k_tile[j][g + G * i]; }
            dot = att_row_sum<G>(dot);
            s[j] = k0 + j <= t ? dot * scale : -INFINITY; // also masks the zero rows past T (t < T)
            tile_max = fmaxf(tile_max, s[j]);
        }
        float alpha = online_softmax_rescale(&st, tile_max);
        #pragma unroll
        for (int i = 0; i < ATT_DIMS; i++) { acc[i] *= alpha; }
        #pragma unroll
        for (int j = 0; j < ATT_TILE; j++) {
            float p = online_softmax_weight(&st, s[j]);
            #pragma unroll
            for (int i = 0; i < ATT_DIMS; i++) { acc[i] += p * v_tile[j][g + G * i]; }
        }
    }
    if (own_valid) {
        // key 0 is visible to every query, so l >= 1 here
        att_store_row<HS>(out + ((size_t)b * T + t) * C + h * HS, acc, 1.0f / st.l, g);
        if (g == 0) { lse[((size_t)b * NH + h) * T + t] = online_softmax_lse(st); }
    }
}

// ----------------------------------------------------------------------------
// the fp32 build: backward (D_i comes from attention_backward_rowdot_kernel above)

// dqkv's k and v parts (B,T,3C): dK_j = scale * sum_i dS_ij q_i, dV_j = sum_i P_ij dout_i, over
// the queries i >= j. Block (key tile, h, b); G threads per key; q and dout staged per query tile.
template <int HS>
__global__ void __launch_bounds__(ATT_ROWS * HS / ATT_DIMS)
attention_backward_dkdv_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                               const float* D, int T, int C, int NH, float scale) {
    constexpr int G = HS / ATT_DIMS;
    __shared__ float q_tile[ATT_TILE][HS];
    __shared__ float dout_tile[ATT_TILE][HS];
    __shared__ float lse_tile[ATT_TILE];
    __shared__ float D_tile[ATT_TILE];
    int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * ATT_ROWS;
    int g = threadIdx.x % G;
    int j_own = k0 + threadIdx.x / G;
    bool own_valid = j_own < T;
    int j = own_valid ? j_own : T - 1; // this thread's key
    size_t C3 = 3 * (size_t)C;
    const floatX* qkv_b = qkv + (size_t)b * T * C3;   // (T,3C)
    const floatX* dout_b = dout + (size_t)b * T * C;  // (T,C)
    const float* lse_bh = lse + ((size_t)b * NH + h) * T; // (T)
    const float* D_bh = D + ((size_t)b * NH + h) * T;     // (T)

    float k[ATT_DIMS], v[ATT_DIMS], dk[ATT_DIMS], dv[ATT_DIMS];
    att_load_row<HS>(k, qkv_b + j * C3 + C + h * HS, g);
    att_load_row<HS>(v, qkv_b + j * C3 + 2 * C + h * HS, g);
    #pragma unroll
    for (int i = 0; i < ATT_DIMS; i++) { dk[i] = 0.0f; dv[i] = 0.0f; }

    // queries before k0 see none of this block's keys
    for (int q0 = k0; q0 < T; q0 += ATT_TILE) {
        __syncthreads();
        att_load_tile<HS>(q_tile, qkv_b + h * HS, C3, q0, T);
        att_load_tile<HS>(dout_tile, dout_b + h * HS, C, q0, T);
        for (int r = threadIdx.x; r < ATT_TILE; r += blockDim.x) {
            bool in = q0 + r < T;
            lse_tile[r] = in ? lse_bh[q0 + r] : 0.0f;
            D_tile[r] = in ? D_bh[q0 + r] : 0.0f;
        }
        __syncthreads();
        // not unrolled: four register rows of 16 are live already; unrolling took hs=128 to the
        // 128-register cap of a 512-thread block
        #pragma unroll 1
        for (int r = 0; r < ATT_TILE; r++) {
            float qk = 0.0f, dp = 0.0f;
            #pragma unroll
            for (int i = 0; i < ATT_DIMS; i++) {
                qk += q_tile[r][g + G * i] * k[i];
                dp += dout_tile[r][g + G * i] * v[i];
            }
            qk = att_row_sum<G>(qk);
            dp = att_row_sum<G>(dp);
            int t = q0 + r;
            float p = t >= j && t < T ? attention_prob(qk * scale, lse_tile[r]) : 0.0f;
            float ds = attention_dscore(p, dp, D_tile[r]);
            #pragma unroll
            for (int i = 0; i < ATT_DIMS; i++) {
                dv[i] += p * dout_tile[r][g + G * i];
                dk[i] += ds * q_tile[r][g + G * i];
            }
        }
    }
    if (own_valid) {
        floatX* dqkv_j = dqkv + ((size_t)b * T + j) * C3; // (3C)
        att_store_row<HS>(dqkv_j + C + h * HS, dk, scale, g);
        att_store_row<HS>(dqkv_j + 2 * C + h * HS, dv, 1.0f, g);
    }
}

// dqkv's q part (B,T,3C): dQ_i = scale * sum_j dS_ij k_j over the keys j <= i. Block (query tile,
// h, b); G threads per query; k and v staged per key tile.
template <int HS>
__global__ void __launch_bounds__(ATT_ROWS * HS / ATT_DIMS)
attention_backward_dq_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                             const float* D, int T, int C, int NH, float scale) {
    constexpr int G = HS / ATT_DIMS;
    __shared__ float k_tile[ATT_TILE][HS];
    __shared__ float v_tile[ATT_TILE][HS];
    int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * ATT_ROWS;
    int g = threadIdx.x % G;
    int t_own = q0 + threadIdx.x / G;
    bool own_valid = t_own < T;
    int t = own_valid ? t_own : T - 1; // this thread's query
    size_t C3 = 3 * (size_t)C;
    const floatX* qkv_b = qkv + (size_t)b * T * C3; // (T,3C)
    size_t bh = (size_t)b * NH + h;
    float lse_t = lse[bh * T + t], D_t = D[bh * T + t];

    float q[ATT_DIMS], dout_t[ATT_DIMS], dq[ATT_DIMS];
    att_load_row<HS>(q, qkv_b + t * C3 + h * HS, g);
    att_load_row<HS>(dout_t, dout + ((size_t)b * T + t) * C + h * HS, g);
    #pragma unroll
    for (int i = 0; i < ATT_DIMS; i++) { dq[i] = 0.0f; }

    int kv_end = min(q0 + ATT_ROWS, T);
    for (int k0 = 0; k0 < kv_end; k0 += ATT_TILE) {
        __syncthreads();
        att_load_tile<HS>(k_tile, qkv_b + C + h * HS, C3, k0, T);
        att_load_tile<HS>(v_tile, qkv_b + 2 * C + h * HS, C3, k0, T);
        __syncthreads();
        // not unrolled, as in the dK/dV kernel: keeps registers well under the cap
        #pragma unroll 1
        for (int jj = 0; jj < ATT_TILE; jj++) {
            float qk = 0.0f, dp = 0.0f;
            #pragma unroll
            for (int i = 0; i < ATT_DIMS; i++) {
                qk += q[i] * k_tile[jj][g + G * i];
                dp += dout_t[i] * v_tile[jj][g + G * i];
            }
            qk = att_row_sum<G>(qk);
            dp = att_row_sum<G>(dp);
            float p = k0 + jj <= t ? attention_prob(qk * scale, lse_t) : 0.0f;
            float ds = attention_dscore(p, dp, D_t);
            #pragma unroll
            for (int i = 0; i < ATT_DIMS; i++) { dq[i] += ds * k_tile[jj][g + G * i]; }
        }
    }
    if (own_valid) { att_store_row<HS>(dqkv + ((size_t)b * T + t) * C3 + h * HS, dq, scale, g); }
}
#endif // ENABLE_FP32

// ----------------------------------------------------------------------------
// the bf16 build: FlashAttention-2 on tensor cores (mma.sync m16n8k16, llmc/mma.cuh)

constexpr int ATT_TC_WARPS = 4;                 // warps per block
constexpr int ATT_TC_ROWS = 16 * ATT_TC_WARPS;  // rows a block owns: 16 per warp (one mma M tile)
constexpr int ATT_TC_STAGE = 64;                // rows of the other side per staged tile
constexpr int ATT_TC_THREADS = 32 * ATT_TC_WARPS;
static_assert(ATT_TC_STAGE == ATT_TC_ROWS, "the diagonal tile must be the last one a query block visits");

// bf16 elements per shared-memory row: HS + 8, i.e. 16 bytes of padding (see the opening comment)
template <int HS>
__host__ __device__ constexpr int att_tc_pitch() { return HS + 8; }

// The dK/dV kernel keeps its block's K_j and V_j rows in registers as A fragments up to hs 64;
// at hs 128 those 128 registers beside dK_j and dV_j's 128 do not fit in 255 (ptxas spills), so
// they stay in shared memory and are re-read for every 16 queries.
template <int HS>
__host__ __device__ constexpr bool att_tc_dkdv_kv_in_registers() { return HS <= 64; }

// Dynamic shared memory (bytes) of each kernel: two buffers of two staged tiles (K and V, or Q and
// dout) of ATT_TC_STAGE rows; the backward's dK/dV kernel adds two buffers of (lse, D) rows, and,
// at hs 128, its own K_j, V_j tiles.
template <int HS>
__host__ __device__ constexpr size_t att_tc_smem_forward() { return (size_t)4 * ATT_TC_STAGE * att_tc_pitch<HS>() * 2; }
template <int HS>
__host__ __device__ constexpr size_t att_tc_smem_dq() { return att_tc_smem_forward<HS>(); }
template <int HS>
__host__ __device__ constexpr size_t att_tc_smem_dkdv() {
    return att_tc_smem_forward<HS>() + 4 * ATT_TC_STAGE * sizeof(float) +
           (att_tc_dkdv_kv_in_registers<HS>() ? 0 : (size_t)2 * ATT_TC_ROWS * att_tc_pitch<HS>() * 2);
}

// __launch_bounds__' second argument: the blocks per SM ptxas must fit, i.e. the most that its
// registers allow without spilling (65536 per SM / 128 threads: <= 128 registers for 4 blocks,
// <= 168 for 3, <= 255 for 2), found with dev/test/test_attention_ptx.sh (registers at
// sm_80/sm_90 in dev/cuda/NOTES.md). Without it ptxas picks fewer registers for the hs 16 forward
// and spills there.
template <int HS>
__host__ __device__ constexpr int att_tc_min_blocks_forward() { return HS <= 64 ? 4 : 3; }
template <int HS>
__host__ __device__ constexpr int att_tc_min_blocks_dq() { return HS <= 64 ? 4 : 3; }
template <int HS>
__host__ __device__ constexpr int att_tc_min_blocks_dkdv() { return HS <= 32 ? 4 : HS <= 64 ? 3 : 2; }

// Which element of a tile each lane names for ldmatrix.x4 (mma.cuh), within a 16x16 block: the A
// pattern (A fragments; B fragments, with .trans, of a tile whose rows are k) and the B pattern
// (B fragments of two n8 tiles, no .trans, of a tile whose rows are n)
__host__ __device__ constexpr int att_tc_a_row(int lane) { return lane % 8 + 8 * ((lane / 8) % 2); }
__host__ __device__ constexpr int att_tc_a_col(int lane) { return 8 * (lane / 16); }
__host__ __device__ constexpr int att_tc_b_row(int lane) { return lane % 8 + 8 * (lane / 16); }
__host__ __device__ constexpr int att_tc_b_col(int lane) { return 8 * ((lane / 8) % 2); }

// The tile loader's element e (a 16-byte chunk): row e%8 + 8*(e/(8*CH)), chunk (e/8) % CH of the
// row's CH = HS/8 chunks. 8 consecutive threads (one shared-memory wavefront of 16-byte stores)
// write one chunk of 8 consecutive rows, which the padding puts in 8 distinct 16-byte bank groups.
__host__ __device__ constexpr int att_tc_load_row(int e, int CH) { return e % 8 + 8 * (e / (8 * CH)); }
__host__ __device__ constexpr int att_tc_load_chunk(int e, int CH) { return (e / 8) % CH; }

// the A fragment (bf16) of k-columns 16c..16c+15 from the fp32 C fragments lo = x[2c], hi =
// x[2c+1] of a 16 x N product (mma.cuh: a0 = (c0, c1) of lo, a1 = (c2, c3) of lo, a2, a3 of hi)
__host__ __device__ inline void att_tc_c_to_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
    a[0] = pack_bf16x2(lo[0], lo[1]);
    a[1] = pack_bf16x2(lo[2], lo[3]);
    a[2] = pack_bf16x2(hi[0], hi[1]);
    a[3] = pack_bf16x2(hi[2], hi[3]);
}

#if defined(ENABLE_BF16)
// Rows [r0, r0 + ROWS) of one head's slice into a shared tile (ROWS, pitch) of bf16, 16 bytes per
// cp.async; rows at or past T are zero-filled (a plain 16-byte store): their scores are masked,
// but a NaN there would still reach P v as 0 * NaN. Call from every thread of the block, then
// cp_async_commit(). Elements as att_tc_load_row/chunk; a warp still reads whole rows of global
// memory (4 rows of 128 B at hs 64), so the loads stay coalesced.
template <int HS, int ROWS>
__device__ inline void att_tc_load_tile(floatX* tile, const floatX* head, size_t row_stride, int r0, int T) {
    constexpr int CH = HS / 8; // 16-byte chunks per row
    static_assert(ROWS % 8 == 0, "tiles are loaded 8 rows at a time");
    for (int e = threadIdx.x; e < ROWS * CH; e += blockDim.x) {
        int r = att_tc_load_row(e, CH), c = att_tc_load_chunk(e, CH);
        floatX* dst = tile + r * att_tc_pitch<HS>() + 8 * c;
        if (r0 + r < T) {
            cp_async_16(smem_addr(dst), head + (size_t)(r0 + r) * row_stride + 8 * c);
        } else {
            *(uint4*)dst = make_uint4(0, 0, 0, 0);
        }
    }
}

// the shared address this lane gives ldmatrix.x4 for the 16x16 block at (row0, col0) of a tile
template <int HS>
__device__ inline uint32_t att_tc_a_addr(const floatX* tile, int row0, int col0, int lane) {
    return smem_addr(tile + (row0 + att_tc_a_row(lane)) * att_tc_pitch<HS>() + col0 + att_tc_a_col(lane));
}
template <int HS>
__device__ inline uint32_t att_tc_b_addr(const floatX* tile, int row0, int col0, int lane) {
    return smem_addr(tile + (row0 + att_tc_b_row(lane)) * att_tc_pitch<HS>() + col0 + att_tc_b_col(lane));
}

// This warp's 16 rows (row0..) of a shared tile, as the A operand of products over the HS dims:
// HS/16 A fragments, held in registers (IN_REGISTERS, loaded once) or re-read from the tile.
template <int HS, bool IN_REGISTERS>
struct AttRowsA;
template <int HS>
struct AttRowsA<HS, true> {
    uint32_t f[HS / 16][4];
    __device__ void load(const floatX* tile, int row0, int lane) {
        #pragma unroll
        for (int ks = 0; ks < HS / 16; ks++) { ldmatrix_x4(f[ks], att_tc_a_addr<HS>(tile, row0, 16 * ks, lane)); }
    }
    __device__ void get(uint32_t (&a)[4], int ks) const {
        #pragma unroll
        for (int i = 0; i < 4; i++) { a[i] = f[ks][i]; }
    }
};
template <int HS>
struct AttRowsA<HS, false> {
    uint32_t addr; // this lane's ldmatrix address for dims 0..15; dims 16ks.. are 32 ks bytes on
    __device__ void load(const floatX* tile, int row0, int lane) { addr = att_tc_a_addr<HS>(tile, row0, 0, lane); }
    __device__ void get(uint32_t (&a)[4], int ks) const { ldmatrix_x4(a, addr + 32 * ks); }
};

// acc[2np], acc[2np+1] += a (16x16) times the 16 x 16 block (rows k0.., cols 16np..) of a tile
// whose rows are k (ldmatrix .trans): acc is (16, HS) as HS/8 n8 tiles
template <int HS>
__device__ inline void att_tc_mma_rows_k(float (&acc)[HS / 8][4], const uint32_t (&a)[4], const floatX* tile, int k0, int lane) {
    #pragma unroll
    for (int np = 0; np < HS / 16; np++) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, att_tc_a_addr<HS>(tile, k0, 16 * np, lane));
        mma_bf16_16816(acc[2 * np], a, {bf[0], bf[1]});
        mma_bf16_16816(acc[2 * np + 1], a, {bf[2], bf[3]});
    }
}

// s (16 x 8*N8) = a (16 x HS, an AttRowsA) times rows n0.. of a tile whose rows are n and
// columns the HS dims (ldmatrix, no .trans): a x^T for N8*8 rows x of the tile
template <int HS, int N8, typename RowsA>
__device__ inline void att_tc_mma_rows_n(float (&s)[N8][4], const RowsA& a, const floatX* tile, int n0, int lane) {
    #pragma unroll
    for (int j = 0; j < N8; j++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { s[j][e] = 0.0f; }
    }
    #pragma unroll
    for (int ks = 0; ks < HS / 16; ks++) {
        uint32_t af[4];
        a.get(af, ks);
        #pragma unroll
        for (int jp = 0; jp < N8 / 2; jp++) {
            uint32_t bf[4];
            ldmatrix_x4(bf, att_tc_b_addr<HS>(tile, n0 + 16 * jp, 16 * ks, lane));
            mma_bf16_16816(s[2 * jp], af, {bf[0], bf[1]});
            mma_bf16_16816(s[2 * jp + 1], af, {bf[2], bf[3]});
        }
    }
}

// rows row0 + g and row0 + g + 8 (those < T) of a head's slice = acc (16, HS) * factor, as bf16
// pairs: this lane's columns 8j + 2t, 8j + 2t + 1 of each n8 tile j
template <int HS>
__device__ inline void att_tc_store_rows(floatX* head, size_t row_stride, const float (&acc)[HS / 8][4],
                                         const float (&factor)[2], int row0, int T, int lane) {
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        int r = row0 + lane / 4 + 8 * half;
        if (r >= T) { continue; }
        #pragma unroll
        for (int j = 0; j < HS / 8; j++) {
            __nv_bfloat162 v = __floats2bfloat162_rn(acc[j][2 * half] * factor[half], acc[j][2 * half + 1] * factor[half]);
            *(__nv_bfloat162*)(head + (size_t)r * row_stride + 8 * j + 2 * (lane % 4)) = v;
        }
    }
}

// The column sums of what att_tc_store_rows writes (acc times factor, rounded to bf16; rows past
// T count 0), for the qkv bias gradient's partials (attention_dbias_partials_kernel's sums, taken
// from the registers): in two steps around a __syncthreads(). First each warp: a lane adds its two
// rows, then shuffles over the 8 lanes of a column (lane / 4) give the warp's 16 rows; lanes 0..3
// put them at warp_sums[8 j + 2 lane + e] (HS floats of shared memory per warp).
template <int HS>
__device__ inline void att_tc_col_sums_warp(float* warp_sums, const float (&acc)[HS / 8][4], const float (&factor)[2],
                                            int row0, int T, int lane) {
    #pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        #pragma unroll
        for (int e = 0; e < 2; e++) {
            float sum = 0.0f;
            #pragma unroll
            for (int half = 0; half < 2; half++) {
                int r = row0 + lane / 4 + 8 * half;
                float v = __bfloat162float(__float2bfloat16_rn(acc[j][2 * half + e] * factor[half]));
                sum = __fadd_rn(sum, r < T ? v : 0.0f);
            }
            #pragma unroll
            for (int offset = 4; offset < 32; offset <<= 1) { sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffff, sum, offset)); }
            if (lane < 4) { warp_sums[8 * j + 2 * lane + e] = sum; }
        }
    }
}
// Then the block, after the barrier: column c's warps' sums in warp order, into partial[c]
template <int HS>
__device__ inline void att_tc_col_sums_block(float* partial, const float* block_sums) {
    for (int c = threadIdx.x; c < HS; c += ATT_TC_THREADS) {
        float sum = block_sums[c];
        #pragma unroll
        for (int w = 1; w < ATT_TC_WARPS; w++) { sum = __fadd_rn(sum, block_sums[w * HS + c]); }
        partial[c] = sum;
    }
}

// sum over the 4 lanes of a quad (the lanes holding one row of a C fragment): every lane gets the
// same bits
__device__ inline float att_tc_quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffff, x, 1);
    return x + __shfl_xor_sync(0xffffffff, x, 2);
}
__device__ inline float att_tc_quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}

// out (B,T,C), lse (B,NH,T); qkv (B,T,3C). Block (query tile, h, b), 4 warps of 16 queries.
// FlashAttention-2, Algorithm 1 (forward), for one query tile Q_i of 64 rows.
template <int HS>
__global__ void __launch_bounds__(ATT_TC_THREADS, att_tc_min_blocks_forward<HS>())
attention_forward_kernel(floatX* out, float* lse, const floatX* qkv, int T, int C, int NH, float scale_log2) {
    constexpr int P = att_tc_pitch<HS>(), N8 = ATT_TC_STAGE / 8;
    extern __shared__ uint4 att_smem[];
    floatX* stage = (floatX*)att_smem; // [buffer 2][K, V][ATT_TC_STAGE][P]
    auto k_tile = [&](int buf) { return stage + (2 * buf) * ATT_TC_STAGE * P; };
    auto v_tile = [&](int buf) { return stage + (2 * buf + 1) * ATT_TC_STAGE * P; };
    // the last query tiles visit the most key tiles: they go first, so the grid does not end on them
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * ATT_TC_ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row_lo = q0 + 16 * warp; // this warp's first query; the lane's rows are row_lo + g, + g + 8
    size_t C3 = 3 * (size_t)C;
    const floatX* q_head = qkv + (size_t)b * T * C3 + h * HS; // row t of the head's q at q_head[t * C3]
    const floatX* k_head = q_head + C;
    const floatX* v_head = q_head + 2 * C;

    // line 4: load Q_i (into buffer 1, which the first key tile does not use) and the first K_j,
    // V_j; Q_i goes on into registers as A fragments, for every key tile
    att_tc_load_tile<HS, ATT_TC_ROWS>(k_tile(1), q_head, C3, q0, T);
    att_tc_load_tile<HS, ATT_TC_STAGE>(k_tile(0), k_head, C3, 0, T);
    att_tc_load_tile<HS, ATT_TC_STAGE>(v_tile(0), v_head, C3, 0, T);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
    AttRowsA<HS, true> qf;
    qf.load(k_tile(1), 16 * warp, lane);
    __syncthreads(); // buffer 1 is free for the second key tile

    // line 5: O = 0, l = 0, m = -inf (per row; l is this lane's part of the row sum until the end)
    float o[HS / 8][4];
    #pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { o[j][e] = 0.0f; }
    }
    OnlineSoftmax st[2] = {online_softmax_init(), online_softmax_init()};

    // line 6: the key tiles; causality: only keys < the block's last query + 1
    int n_tiles = (min(q0 + ATT_TC_ROWS, T) + ATT_TC_STAGE - 1) / ATT_TC_STAGE;
    for (int it = 0; it < n_tiles; it++) {
        int buf = it % 2, k0 = it * ATT_TC_STAGE;
        // line 7: load K_j, V_j: the next tile's copies start now and land while this one computes
        if (it + 1 < n_tiles) {
            att_tc_load_tile<HS, ATT_TC_STAGE>(k_tile(buf ^ 1), k_head, C3, k0 + ATT_TC_STAGE, T);
            att_tc_load_tile<HS, ATT_TC_STAGE>(v_tile(buf ^ 1), v_head, C3, k0 + ATT_TC_STAGE, T);
            cp_async_commit();
        }
        if (k0 <= row_lo + 15) { // warp-uniform: a key of the tile is visible to a row of the warp
            // line 8: S = Q_i K_j^T (16 x 64 per warp), in the log2 domain: s * scale * log2(e)
            float s[N8][4];
            att_tc_mma_rows_n<HS, N8>(s, qf, k_tile(buf), 0, lane);
            bool diagonal = k0 + ATT_TC_STAGE - 1 > row_lo; // some key after some row: mask
            float tile_max[2] = {-INFINITY, -INFINITY};
            #pragma unroll
            for (int j = 0; j < N8; j++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int key = k0 + 8 * j + mma_c_col(lane, e), row = row_lo + mma_c_row(lane, e);
                    s[j][e] = diagonal && key > row ? -INFINITY : s[j][e] * scale_log2;
                    tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j][e]);
                }
            }
            // line 9: m_new = max(m, rowmax(S)); P = exp2(S - m_new); l = alpha l + rowsum(P)
            float alpha[2];
            #pragma unroll
            for (int half = 0; half < 2; half++) {
                alpha[half] = online_softmax_rescale_log2(&st[half], att_tc_quad_max(tile_max[half]));
            }
            #pragma unroll
            for (int j = 0; j < N8; j++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) { s[j][e] = online_softmax_weight_log2(&st[e / 2], s[j][e]); }
            }
            // line 10: O = diag(alpha) O + P V_j, with P rounded to bf16 straight from the
            // accumulators into A fragments
            #pragma unroll
            for (int j = 0; j < HS / 8; j++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) { o[j][e] *= alpha[e / 2]; }
            }
            #pragma unroll
            for (int kc = 0; kc < ATT_TC_STAGE / 16; kc++) {
                uint32_t pf[4];
                att_tc_c_to_a(pf, s[2 * kc], s[2 * kc + 1]);
                att_tc_mma_rows_k<HS>(o, pf, v_tile(buf), 16 * kc, lane);
            }
        }
        cp_async_wait_all();
        __syncthreads(); // the next tile has landed; every warp is done with this one
    }
    // lines 12-15: O_i = diag(l)^-1 O and L_i = m + log(l), written (rows < T only)
    float inv_l[2];
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        st[half].l = att_tc_quad_sum(st[half].l); // key 0 is visible to every row: l >= 1
        inv_l[half] = 1.0f / st[half].l;
    }
    att_tc_store_rows<HS>(out + (size_t)b * T * C + h * HS, C, o, inv_l, row_lo, T, lane);
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        int r = row_lo + lane / 4 + 8 * half;
        if (lane % 4 == 0 && r < T) { lse[((size_t)b * NH + h) * T + r] = online_softmax_lse_log2(st[half]); }
    }
}

// dqkv's k and v parts (B,T,3C): dK_j = scale * sum_i dS_ij q_i, dV_j = sum_i P_ij dout_i over the
// queries i >= j. Block (key tile, h, b), 4 warps of 16 keys; FlashAttention-2 Algorithm 2's outer
// loop (one K_j, V_j per block) without its dQ update (the dQ kernel below does that).
template <int HS>
__global__ void __launch_bounds__(ATT_TC_THREADS, att_tc_min_blocks_dkdv<HS>())
attention_backward_dkdv_kernel(floatX* dqkv, float* dbias_part, const floatX* dout, const floatX* qkv,
                               const float* lse, const float* D, int T, int C, int NH, float scale, float scale_log2) {
    constexpr int P = att_tc_pitch<HS>();
    constexpr bool KV_REGS = att_tc_dkdv_kv_in_registers<HS>();
    extern __shared__ uint4 att_smem[];
    floatX* stage = (floatX*)att_smem; // [buffer 2][Q, dout][ATT_TC_STAGE][P]
    float* rows_f = (float*)(stage + 4 * ATT_TC_STAGE * P); // [buffer 2][lse * log2(e), D][ATT_TC_STAGE]
    // K_j, V_j (ATT_TC_ROWS rows each): in buffer 1 until they are in registers, else kept apart
    floatX* kv_own = KV_REGS ? stage + 2 * ATT_TC_STAGE * P : (floatX*)(rows_f + 4 * ATT_TC_STAGE);
    auto q_tile = [&](int buf) { return stage + (2 * buf) * ATT_TC_STAGE * P; };
    auto do_tile = [&](int buf) { return stage + (2 * buf + 1) * ATT_TC_STAGE * P; };
    auto lse_tile = [&](int buf) { return rows_f + (2 * buf) * ATT_TC_STAGE; };
    auto D_tile = [&](int buf) { return rows_f + (2 * buf + 1) * ATT_TC_STAGE; };
    int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * ATT_TC_ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int key_lo = k0 + 16 * warp; // this warp's first key
    size_t C3 = 3 * (size_t)C;
    const floatX* q_head = qkv + (size_t)b * T * C3 + h * HS;
    const floatX* do_head = dout + (size_t)b * T * C + h * HS;
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = D + ((size_t)b * NH + h) * T;
    const float LOG2E = 1.4426950408889634f;

    // the queries before k0 see none of this block's keys: tiles from q0 = k0 on
    int n_tiles = (T - k0 + ATT_TC_STAGE - 1) / ATT_TC_STAGE;
    // (lse, D) of row r of a query tile: thread r loads lse, thread ATT_TC_STAGE + r loads D
    int f_row = threadIdx.x % ATT_TC_STAGE, f_which = threadIdx.x / ATT_TC_STAGE;
    auto load_f = [&](int q0) { // 0 past T: those queries are masked
        int t = q0 + f_row;
        return t < T ? (f_which == 0 ? lse_bh[t] * LOG2E : D_bh[t]) : 0.0f;
    };
    static_assert(ATT_TC_THREADS == 2 * ATT_TC_STAGE, "one thread per (lse or D, row)");

    // line 6: load K_j, V_j (kv_own) and the first Q_i, dO_i (buffer 0); K_j, V_j go on into
    // registers as A fragments (up to hs 64)
    att_tc_load_tile<HS, ATT_TC_ROWS>(kv_own, q_head + C, C3, k0, T);
    att_tc_load_tile<HS, ATT_TC_ROWS>(kv_own + ATT_TC_ROWS * P, q_head + 2 * C, C3, k0, T);
    att_tc_load_tile<HS, ATT_TC_STAGE>(q_tile(0), q_head, C3, k0, T);
    att_tc_load_tile<HS, ATT_TC_STAGE>(do_tile(0), do_head, C, k0, T);
    cp_async_commit();
    rows_f[f_which * ATT_TC_STAGE + f_row] = load_f(k0);
    cp_async_wait_all();
    __syncthreads();
    AttRowsA<HS, KV_REGS> kf, vf;
    kf.load(kv_own, 16 * warp, lane);
    vf.load(kv_own + ATT_TC_ROWS * P, 16 * warp, lane);
    __syncthreads();

    // line 7: dK_j = 0, dV_j = 0
    float dk[HS / 8][4], dv[HS / 8][4];
    #pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { dk[j][e] = 0.0f; dv[j][e] = 0.0f; }
    }
    // line 8: the query tiles
    for (int it = 0; it < n_tiles; it++) {
        int buf = it % 2, q0 = k0 + it * ATT_TC_STAGE;
        // line 9: load Q_i, dO_i, L_i, D_i: the next tile's copies land while this one computes
        float f_next = 0.0f;
        if (it + 1 < n_tiles) {
            att_tc_load_tile<HS, ATT_TC_STAGE>(q_tile(buf ^ 1), q_head, C3, q0 + ATT_TC_STAGE, T);
            att_tc_load_tile<HS, ATT_TC_STAGE>(do_tile(buf ^ 1), do_head, C, q0 + ATT_TC_STAGE, T);
            cp_async_commit();
            f_next = load_f(q0 + ATT_TC_STAGE);
        }
        // the tile 16 queries at a time: S^T and dP^T of 16 keys x 16 queries fit in 16 registers
        #pragma unroll
        for (int c = 0; c < ATT_TC_STAGE / 16; c++) {
            int qc = q0 + 16 * c; // the chunk's first query
            if (qc + 15 < key_lo) { continue; } // warp-uniform: every query precedes every key
            // line 10: S (here S^T = K_j Q_i^T, keys x queries); line 13: dP^T = V_j dO_i^T
            float sT[2][4], dpT[2][4];
            att_tc_mma_rows_n<HS, 2>(sT, kf, q_tile(buf), 16 * c, lane);
            att_tc_mma_rows_n<HS, 2>(dpT, vf, do_tile(buf), 16 * c, lane);
            // line 11: P = exp2(S scale log2(e) - L log2(e)), 0 where the query precedes the key
            // or is past T; line 14: dS = P o (dP - D)
            bool mask = qc < key_lo + 15 || qc + 15 >= T;
            #pragma unroll
            for (int j = 0; j < 2; j++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int ql = 16 * c + 8 * j + mma_c_col(lane, e); // the query, within the tile
                    int key = key_lo + mma_c_row(lane, e), q = q0 + ql;
                    float p = attention_prob_log2(sT[j][e] * scale_log2, lse_tile(buf)[ql]);
                    p = mask && (q < key || q >= T) ? 0.0f : p;
                    dpT[j][e] = attention_dscore(p, dpT[j][e], D_tile(buf)[ql]);
                    sT[j][e] = p;
                }
            }
            // line 12: dV_j += P^T dO_i; line 16: dK_j += dS^T Q_i (scale at the end)
            uint32_t pA[4], dsA[4];
            att_tc_c_to_a(pA, sT[0], sT[1]);
            att_tc_c_to_a(dsA, dpT[0], dpT[1]);
            att_tc_mma_rows_k<HS>(dv, pA, do_tile(buf), 16 * c, lane);
            att_tc_mma_rows_k<HS>(dk, dsA, q_tile(buf), 16 * c, lane);
        }
        if (it + 1 < n_tiles) { rows_f[(2 * (buf ^ 1) + f_which) * ATT_TC_STAGE + f_row] = f_next; }
        cp_async_wait_all();
        __syncthreads();
    }
    // line 18: write dK_j, dV_j
    const float dk_factor[2] = {scale, scale}, dv_factor[2] = {1.0f, 1.0f};
    floatX* dqkv_b = dqkv + (size_t)b * T * C3 + h * HS;
    att_tc_store_rows<HS>(dqkv_b + C, C3, dk, dk_factor, key_lo, T, lane);
    att_tc_store_rows<HS>(dqkv_b + 2 * C, C3, dv, dv_factor, key_lo, T, lane);
    // their column sums over the block's keys: the qkv bias gradient's partial row (b, key tile),
    // columns C + h HS (k) and 2C + h HS (v). The loop's last barrier freed the shared memory.
    float* sums = (float*)att_smem; // [k, v][warp][HS]
    att_tc_col_sums_warp<HS>(sums + warp * HS, dk, dk_factor, key_lo, T, lane);
    att_tc_col_sums_warp<HS>(sums + (ATT_TC_WARPS + warp) * HS, dv, dv_factor, key_lo, T, lane);
    __syncthreads();
    float* part = dbias_part + ((size_t)b * gridDim.x + blockIdx.x) * C3 + h * HS;
    att_tc_col_sums_block<HS>(part + C, sums);
    att_tc_col_sums_block<HS>(part + 2 * C, sums + ATT_TC_WARPS * HS);
}

// dqkv's q part (B,T,3C): dQ_i = scale * sum_j dS_ij k_j over the keys j <= i. Block (query tile,
// h, b), 4 warps of 16 queries: Algorithm 2's dQ_i update (line 15) with the query loop outside,
// so that one block owns each dQ_i and writes it once.
template <int HS>
__global__ void __launch_bounds__(ATT_TC_THREADS, att_tc_min_blocks_dq<HS>())
attention_backward_dq_kernel(floatX* dqkv, float* dbias_part, const floatX* dout, const floatX* qkv,
                             const float* lse, const float* D, int T, int C, int NH, float scale, float scale_log2) {
    constexpr int P = att_tc_pitch<HS>();
    extern __shared__ uint4 att_smem[];
    floatX* stage = (floatX*)att_smem; // [buffer 2][K, V][ATT_TC_STAGE][P]
    auto k_tile = [&](int buf) { return stage + (2 * buf) * ATT_TC_STAGE * P; };
    auto v_tile = [&](int buf) { return stage + (2 * buf + 1) * ATT_TC_STAGE * P; };
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * ATT_TC_ROWS; // heaviest first
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row_lo = q0 + 16 * warp; // this warp's first query
    size_t C3 = 3 * (size_t)C;
    const floatX* q_head = qkv + (size_t)b * T * C3 + h * HS;
    const floatX* k_head = q_head + C;
    const floatX* v_head = q_head + 2 * C;
    const floatX* do_head = dout + (size_t)b * T * C + h * HS;
    const float LOG2E = 1.4426950408889634f;

    // Q_i, dO_i (buffer 1) and the first K_j, V_j (buffer 0); Q_i, dO_i into registers
    att_tc_load_tile<HS, ATT_TC_ROWS>(k_tile(1), q_head, C3, q0, T);
    att_tc_load_tile<HS, ATT_TC_ROWS>(v_tile(1), do_head, C, q0, T);
    att_tc_load_tile<HS, ATT_TC_STAGE>(k_tile(0), k_head, C3, 0, T);
    att_tc_load_tile<HS, ATT_TC_STAGE>(v_tile(0), v_head, C3, 0, T);
    cp_async_commit();
    // L_i log2(e) and D_i of this lane's two rows (0 past T: those rows are not written)
    float lse2[2], D_row[2];
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        int r = row_lo + lane / 4 + 8 * half;
        size_t i = ((size_t)b * NH + h) * T + r;
        lse2[half] = r < T ? lse[i] * LOG2E : 0.0f;
        D_row[half] = r < T ? D[i] : 0.0f;
    }
    cp_async_wait_all();
    __syncthreads();
    AttRowsA<HS, true> qf, dof;
    qf.load(k_tile(1), 16 * warp, lane);
    dof.load(v_tile(1), 16 * warp, lane);
    __syncthreads();

    float dq[HS / 8][4];
    #pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { dq[j][e] = 0.0f; }
    }
    int n_tiles = (min(q0 + ATT_TC_ROWS, T) + ATT_TC_STAGE - 1) / ATT_TC_STAGE;
    for (int it = 0; it < n_tiles; it++) {
        int buf = it % 2, k0 = it * ATT_TC_STAGE;
        if (it + 1 < n_tiles) {
            att_tc_load_tile<HS, ATT_TC_STAGE>(k_tile(buf ^ 1), k_head, C3, k0 + ATT_TC_STAGE, T);
            att_tc_load_tile<HS, ATT_TC_STAGE>(v_tile(buf ^ 1), v_head, C3, k0 + ATT_TC_STAGE, T);
            cp_async_commit();
        }
        #pragma unroll
        for (int c = 0; c < ATT_TC_STAGE / 16; c++) {
            int kc = k0 + 16 * c; // the chunk's first key
            if (kc > row_lo + 15) { continue; } // warp-uniform: every key follows every query
            // lines 10, 13: S = Q_i K_j^T, dP = dO_i V_j^T (16 queries x 16 keys)
            float s[2][4], dp[2][4];
            att_tc_mma_rows_n<HS, 2>(s, qf, k_tile(buf), 16 * c, lane);
            att_tc_mma_rows_n<HS, 2>(dp, dof, v_tile(buf), 16 * c, lane);
            // lines 11, 14: P = exp2(S scale log2(e) - L log2(e)), 0 for keys after the query;
            // dS = P o (dP - D)
            bool mask = kc + 15 > row_lo; // some key after some query
            #pragma unroll
            for (int j = 0; j < 2; j++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int key = kc + 8 * j + mma_c_col(lane, e), row = row_lo + mma_c_row(lane, e);
                    float p = attention_prob_log2(s[j][e] * scale_log2, lse2[e / 2]);
                    p = mask && key > row ? 0.0f : p;
                    dp[j][e] = attention_dscore(p, dp[j][e], D_row[e / 2]);
                }
            }
            // line 15: dQ_i += dS K_j (scale at the end), in registers until the last key tile
            uint32_t dsA[4];
            att_tc_c_to_a(dsA, dp[0], dp[1]);
            att_tc_mma_rows_k<HS>(dq, dsA, k_tile(buf), 16 * c, lane);
        }
        cp_async_wait_all();
        __syncthreads();
    }
    const float dq_factor[2] = {scale, scale};
    att_tc_store_rows<HS>(dqkv + (size_t)b * T * C3 + h * HS, C3, dq, dq_factor, row_lo, T, lane);
    // its column sums over the block's queries: the partial row (b, query tile), columns h HS (q)
    float* sums = (float*)att_smem; // [warp][HS], free after the loop's last barrier
    att_tc_col_sums_warp<HS>(sums + warp * HS, dq, dq_factor, row_lo, T, lane);
    __syncthreads();
    att_tc_col_sums_block<HS>(dbias_part + ((size_t)b * gridDim.x + q0 / ATT_TC_ROWS) * C3 + h * HS, sums);
}
#endif // ENABLE_BF16

// ----------------------------------------------------------------------------
// launchers

// The shapes these kernels handle; anything else stops here instead of computing garbage.
static inline void attention_check_shape(const char* who, int B, int T, int C, int NH) {
    if (B < 1 || T < 1 || C < 1 || NH < 1) { fail("%s: B=%d T=%d C=%d NH=%d must all be >= 1", who, B, T, C, NH); }
    if (C % NH != 0) { fail("%s: C=%d is not a multiple of NH=%d", who, C, NH); }
    int hs = C / NH;
    if (hs != 16 && hs != 32 && hs != 64 && hs != 128) {
        fail("%s: head size hs = C/NH = %d/%d = %d is not supported (the kernels are built for 16, 32, 64, 128)",
             who, C, NH, hs);
    }
    if (B > 65535 || NH > 65535) { fail("%s: B=%d or NH=%d over the grid limit of 65535", who, B, NH); }
    // the row-dot kernel's grid counts B*T*NH rows in an int
    if ((size_t)B * T * NH > (size_t)INT_MAX) { fail("%s: B*T*NH = %zu rows is over 2^31", who, (size_t)B * T * NH); }
}

#if defined(ENABLE_BF16)
// The tensor-core kernels read rows of qkv and dout 16 bytes at a time (cp.async): every row of a
// head starts at a multiple of hs elements (>= 16 bf16 = 32 bytes) from the buffer's start, so the
// buffers themselves must be 16-byte aligned (cudaMalloc's are; a pointer into a slab at a
// multiple of 8 elements is).
static inline void attention_check_aligned(const char* who, const char* name, const void* p) {
    if ((uintptr_t)p % 16 != 0) { fail("%s: %s = %p is not 16-byte aligned (the kernels load 16 bytes at a time)", who, name, p); }
}

// A kernel may use more than 48 KB of dynamic shared memory only when told so (hs 128: 69 KB)
template <typename Kernel>
static void attention_allow_smem(Kernel kernel, size_t bytes) {
    if (bytes > 48 * 1024) { cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes)); }
}

// the Hopper (sm_90a) forward, FlashAttention-3 style, for hs 64: where the device and the build
// allow it, attention_forward takes it (llmc/attention_sm90.cuh, to be read after this file)
#include "attention_sm90.cuh"

template <int HS>
static void attention_forward_launch(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH,
                                     cudaStream_t stream) {
    dim3 grid(ceil_div(T, ATT_TC_ROWS), NH, B);
    float scale_log2 = 1.0f / sqrtf((float)HS) * 1.4426950408889634f; // scale * log2(e)
    size_t smem = att_tc_smem_forward<HS>();
    attention_allow_smem(attention_forward_kernel<HS>, smem);
    attention_forward_kernel<HS><<<grid, ATT_TC_THREADS, smem, stream>>>(out, lse, qkv, T, C, NH, scale_log2);
    cudaCheckLaunch();
}

template <int HS>
static void attention_backward_launch(floatX* dqkv, float* dbias_part, const float* D, const floatX* dout,
                                      const floatX* qkv, const float* lse, int B, int T, int C, int NH,
                                      cudaStream_t stream) {
    static_assert(ATT_TC_ROWS == ATT_DBIAS_ROWS, "a block's rows are one partial row of the bias gradient");
    dim3 grid(ceil_div(T, ATT_TC_ROWS), NH, B);
    float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * 1.4426950408889634f;
    size_t smem_dkdv = att_tc_smem_dkdv<HS>(), smem_dq = att_tc_smem_dq<HS>();
    attention_allow_smem(attention_backward_dkdv_kernel<HS>, smem_dkdv);
    attention_backward_dkdv_kernel<HS><<<grid, ATT_TC_THREADS, smem_dkdv, stream>>>(
        dqkv, dbias_part, dout, qkv, lse, D, T, C, NH, scale, scale_log2);
    cudaCheckLaunch();
    attention_allow_smem(attention_backward_dq_kernel<HS>, smem_dq);
    attention_backward_dq_kernel<HS><<<grid, ATT_TC_THREADS, smem_dq, stream>>>(
        dqkv, dbias_part, dout, qkv, lse, D, T, C, NH, scale, scale_log2);
    cudaCheckLaunch();
}
#else
template <int HS>
static void attention_forward_launch(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH,
                                     cudaStream_t stream) {
    dim3 grid(ceil_div(T, ATT_ROWS), NH, B);
    float scale = 1.0f / sqrtf((float)HS);
    attention_forward_kernel<HS><<<grid, ATT_ROWS * HS / ATT_DIMS, 0, stream>>>(out, lse, qkv, T, C, NH, scale);
    cudaCheckLaunch();
}

template <int HS>
static void attention_backward_launch(floatX* dqkv, float* dbias_part, const float* D, const floatX* dout,
                                      const floatX* qkv, const float* lse, int B, int T, int C, int NH,
                                      cudaStream_t stream) {
    dim3 grid(ceil_div(T, ATT_ROWS), NH, B);
    float scale = 1.0f / sqrtf((float)HS);
    attention_backward_dkdv_kernel<HS><<<grid, ATT_ROWS * HS / ATT_DIMS, 0, stream>>>(dqkv, dout, qkv, lse, D, T, C, NH, scale);
    cudaCheckLaunch();
    attention_backward_dq_kernel<HS><<<grid, ATT_ROWS * HS / ATT_DIMS, 0, stream>>>(dqkv, dout, qkv, lse, D, T, C, NH, scale);
    cudaCheckLaunch();
    // the bias gradient's partials read back from dqkv (these kernels do not take them)
    attention_dbias_partials_kernel<<<dim3(ceil_div(3 * C, 256), att_dbias_tiles(T), B), 256, 0, stream>>>(dbias_part,
                                                                                                      dqkv, T, 3 * C);
    cudaCheckLaunch();
}
#endif

// out (B,T,C) = softmax(q k^T / sqrt(hs), causal) v per head; lse (B,NH,T) = log-sum-exp of each
// query's scaled scores (fp32), kept for the backward. qkv (B,T,3C) is q, k, v side by side, each
// split into NH heads of hs = C/NH.
void attention_forward(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    attention_check_shape("attention_forward", B, T, C, NH);
#if defined(ENABLE_BF16)
    attention_check_aligned("attention_forward", "qkv", qkv);
#endif
    switch (C / NH) {
        case 16: attention_forward_launch<16>(out, lse, qkv, B, T, C, NH, stream); break; // the tiny test model
        case 32: attention_forward_launch<32>(out, lse, qkv, B, T, C, NH, stream); break;
        case 64: // GPT-2, every size
#if defined(ENABLE_BF16)
            if (attention_sm90_use(64)) { attention_forward_sm90(out, lse, qkv, B, T, C, NH, stream); break; }
#endif
            attention_forward_launch<64>(out, lse, qkv, B, T, C, NH, stream);
            break;
        case 128: attention_forward_launch<128>(out, lse, qkv, B, T, C, NH, stream); break;
        default: fail("attention_forward: head size %d", C / NH); // ruled out by the shape check
    }
}

#if defined(ENABLE_BF16)
// where the sm_90a backward's dQ partials start in attention_backward's scratch (after D, 256-byte aligned)
static inline size_t attention_sm90_dq_offset(int B, int T, int NH) { return ((size_t)B * NH * T + 63) / 64 * 64; }
#endif
// attention_backward's scratch, in floats: D (B,NH,T), and where the sm_90a backward runs (so ask
// after attention_sm90_mode is set), its dQ partials (B*NH x (T/128)(T/128+1)/2 tiles of 32 KB);
// then (256-byte aligned) the qkv bias gradient's partials (B*ceil(T/64) x 3C)
static size_t attention_dbias_offset(int B, int T, int C, int NH) {
    (void)C; // the fp32 build has no sm_90a backward
    size_t end = (size_t)B * NH * T;
#if defined(ENABLE_BF16)
    if (attention_sm90_use_backward(C / NH, T)) { end = attention_sm90_dq_offset(B, T, NH) + attention_sm90_dq_partial_floats(B, T, NH); }
#endif
    return (end + 63) / 64 * 64;
}
static size_t attention_backward_scratch_floats(int B, int T, int C, int NH) {
    return attention_dbias_offset(B, T, C, NH) + attention_dbias_partial_floats(B, T, C);
}
#define ATTENTION_HAS_SCRATCH_FLOATS 1 // (dev/perf/attention_slice.cu also builds trees before it)
#define ATTENTION_HAS_DBIAS 1 // attention_backward takes dbias (the same)

// dqkv (B,T,3C) = the gradient w.r.t. qkv (WRITTEN, not added), from dout (B,T,C), the forward's
// qkv, out and lse; dbias (3C) += the column sums of dqkv (the qkv product's bias gradient, from
// zero or added to, as the trainer's gradients are). scratch is attention_backward_scratch_floats(B,
// T, C, NH) floats: the per-query D_i = sum_j dout_ij*out_ij (B,NH,T) first, then (sm_90a backward)
// dQ's partials, then dbias's partials.
void attention_backward(floatX* dqkv, floatX* dbias, float* scratch, const floatX* dout, const floatX* qkv,
                        const floatX* out, const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
    attention_check_shape("attention_backward", B, T, C, NH);
#if defined(ENABLE_BF16)
    attention_check_aligned("attention_backward", "qkv", qkv);
    attention_check_aligned("attention_backward", "dout", dout);
#endif
    check_aligned16(dout, "dout", "attention_backward");
    check_aligned16(out, "out", "attention_backward");
    size_t lanes = (size_t)B * T * NH * attention_rowdot_lanes(C / NH); // whole rows per warp: G divides 32
    attention_backward_rowdot_kernel<<<ceil_div(lanes, 256), 256, 0, stream>>>(scratch, dout, out, B, T, C, NH);
    cudaCheckLaunch();
    float* part = scratch + attention_dbias_offset(B, T, C, NH);
    switch (C / NH) {
        case 16: attention_backward_launch<16>(dqkv, part, scratch, dout, qkv, lse, B, T, C, NH, stream); break;
        case 32: attention_backward_launch<32>(dqkv, part, scratch, dout, qkv, lse, B, T, C, NH, stream); break;
        case 64:
#if defined(ENABLE_BF16)
            if (attention_sm90_use_backward(64, T)) {
                attention_backward_sm90(dqkv, scratch, scratch + attention_sm90_dq_offset(B, T, NH), part, dout, qkv, lse,
                                        B, T, C, NH, stream);
                break;
            }
#endif
            attention_backward_launch<64>(dqkv, part, scratch, dout, qkv, lse, B, T, C, NH, stream);
            break;
        case 128: attention_backward_launch<128>(dqkv, part, scratch, dout, qkv, lse, B, T, C, NH, stream); break;
        default: fail("attention_backward: head size %d", C / NH); // ruled out by the shape check
    }
    attention_dbias_reduce(dbias, part, B, T, C, stream);
}

// ----------------------------------------------------------------------------
// one query against a cache (sampling: train_gpt2.cu's gpt2_sample)

// The attention of the one new position `pos` of a B=1 sequence: cache (maxrows, 3C) holds q, k, v
// of positions 0..pos side by side as qkv does (row pos just written by the qkv product), and
// out (C) = softmax(q_pos k_j / sqrt(hs), j <= pos) v_j per head: the same math as the causal
// forward's row pos, so the sampled token depends only on the tokens before it. Both builds run
// this kernel: fp32 scores and sums (no bf16 rounding of the weights, unlike the bf16 flash
// forward, whose row pos therefore agrees with this only to bf16's precision), one block per head.
// The work is pos * hs multiply-adds per head, tiny beside the products of a position, so the
// kernel is plain: threads take keys in turn, thread 0 finds the max and the sum in key order
// (deterministic), and thread d sums output dimension d over the keys in order.
__global__ void attention_decode_kernel(floatX* out, const floatX* cache, int pos, int C, int NH, float scale) {
    extern __shared__ float att_weights[]; // (pos + 1) scores, then softmax weights
    __shared__ float inv_sum;
    int h = blockIdx.x, hs = C / NH;
    const floatX* q = cache + (size_t)pos * 3 * C + h * hs;
    for (int j = threadIdx.x; j <= pos; j += blockDim.x) {
        const floatX* k = cache + (size_t)j * 3 * C + C + h * hs;
        float s = 0.0f;
        for (int d = 0; d < hs; d++) { s += to_float(q[d]) * to_float(k[d]); }
        att_weights[j] = s * scale;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float maxval = -INFINITY, sum = 0.0f;
        for (int j = 0; j <= pos; j++) { maxval = fmaxf(maxval, att_weights[j]); }
        for (int j = 0; j <= pos; j++) { att_weights[j] = expf(att_weights[j] - maxval); sum += att_weights[j]; }
        inv_sum = 1.0f / sum;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
        float o = 0.0f;
        for (int j = 0; j <= pos; j++) { o += att_weights[j] * to_float(cache[(size_t)j * 3 * C + 2 * C + h * hs + d]); }
        out[h * hs + d] = from_float(o * inv_sum);
    }
}

// out (C) = the attention output of position pos (see the kernel); pos < the cache's rows
void attention_decode(floatX* out, const floatX* cache, int pos, int C, int NH, cudaStream_t stream) {
    attention_check_shape("attention_decode", 1, pos + 1, C, NH);
    if (pos < 0) { fail("attention_decode: position %d", pos); }
    int hs = C / NH;
    size_t smem = (size_t)(pos + 1) * sizeof(float);
    if (smem > 48 * 1024) { fail("attention_decode: %d positions need %zu bytes of shared memory, over 48 KB", pos + 1, smem); }
    attention_decode_kernel<<<NH, 128, smem, stream>>>(out, cache, pos, C, NH, 1.0f / sqrtf((float)hs));
    cudaCheckLaunch();
}

#endif // LLMC_ATTENTION_CUH
