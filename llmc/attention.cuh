/*
Causal self-attention on the GPU, flash-attention style: the CUDA twin of attention_forward /
attention_backward in train_gpt2.c (same math: scores q.k / sqrt(hs), causal mask, softmax,
weighted sum of v; same names for the same tensors).

Why not the CPU's way: the CPU keeps att (B,NH,T,T), the softmax weights, for the backward. At
GPT-2 124M with B=8, T=1024 that is 8*12*1024*1024 floats = 400 MB per layer. Here no T x T
buffer exists: the forward walks over the keys tile by tile with an online softmax (a running max
m and running sum l per query; when a new max appears the partial output is rescaled by
exp(m_old - m_new)), and keeps only lse (B,NH,T) = m + log(l), the log-sum-exp of each query's
scores. The backward recomputes P_ij = exp(s_ij - lse_i) from q, k and lse.

Why the backward has two passes: dK_j and dV_j are sums over the queries i, dQ_i is a sum over the
keys j. One pass over (i,j) tiles would have to add into one of them from many blocks (atomics,
whose order changes from run to run) or keep a T x T buffer. Instead:
    1. attention_backward_rowdot_kernel: D_i = dout_i . out_i into scratch (B,NH,T)
       (D_i = sum_j P_ij dP_ij, the softmax backward's row term; it is cheaper from out)
    2. attention_backward_dkdv_kernel: a block owns 64 keys and loops over the query tiles
       from its first key on: dV_j = sum_i P_ij dout_i, dK_j = scale * sum_i dS_ij q_i
    3. attention_backward_dq_kernel: a block owns 64 queries and loops over the key tiles up to
       its last query: dQ_i = scale * sum_j dS_ij k_j
with dP_ij = dout_i . v_j and dS_ij = P_ij (dP_ij - D_i). Every element of dqkv has one writer
that sums in a fixed order, and no atomics are used anywhere: two runs give identical bits. The
price is computing s_ij and dP_ij twice.

Tiling (the same in all three attention kernels, HS = hs a template parameter: 16, 32, 64 or 128; 16 is the tiny test model's):
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
Next performance step: tensor cores (mma.sync bf16 m16n8k16, fp32 accumulate) for q k^T, P v,
dout v^T, dS^T q and dS k, as FlashAttention-2 does; tiles in shared memory as bf16 with 16-byte
loads; exp2f on scores pre-scaled by log2(e).

The per-element math (the online-softmax merge, P from lse, dS) is in __host__ __device__
functions at the top, tested on the CPU by dev/test/test_attention_host.cu against train_gpt2.c.
*/
#ifndef LLMC_ATTENTION_CUH
#define LLMC_ATTENTION_CUH

#include <math.h>
#include <limits.h>
#include "cuda_common.cuh"

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

// Backward through the softmax: dS_ij = P_ij (dP_ij - D_i), with dP_ij = dout_i . v_j the gradient
// w.r.t. P_ij and D_i = sum_j P_ij dP_ij = dout_i . out_i. (The gradient w.r.t. q and k is then
// scale * dS, as s = scale * q.k.)
__host__ __device__ inline float attention_dscore(float p, float dp, float D) { return p * (dp - D); }

// ----------------------------------------------------------------------------
// tiling

constexpr int ATT_ROWS = 64; // rows (queries or keys) owned by one block
constexpr int ATT_TILE = 32; // rows of the other side staged in shared memory per step
constexpr int ATT_DIMS = 16; // head dims per thread: a row of hs dims is split over hs/16 threads

static_assert(ATT_ROWS % ATT_TILE == 0, "a block's row range must start on a tile boundary");

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
// forward

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
// backward

// D (B,NH,T) = sum over the head's dims of dout * out, both (B,T,C). One warp per (b, t, h).
__global__ void attention_backward_rowdot_kernel(float* D, const floatX* dout, const floatX* out,
                                                 int B, int T, int C, int NH) {
    size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; // (b*T + t)*NH + h
    if (row >= (size_t)B * T * NH) { return; } // a whole warp leaves together
    int lane = threadIdx.x % 32, hs = C / NH;
    int h = (int)(row % NH);
    size_t bt = row / NH;
    int b = (int)(bt / T), t = (int)(bt % T);
    const floatX* d = dout + bt * C + h * hs;
    const floatX* o = out + bt * C + h * hs;
    float sum = 0.0f;
    for (int i = lane; i < hs; i += 32) { sum += to_float(d[i]) * to_float(o[i]); }
    sum = warp_sum(sum);
    if (lane == 0) { D[((size_t)b * NH + h) * T + t] = sum; }
}

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

template <int HS>
static void attention_forward_launch(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH,
                                     cudaStream_t stream) {
    dim3 grid(ceil_div(T, ATT_ROWS), NH, B);
    float scale = 1.0f / sqrtf((float)HS);
    attention_forward_kernel<HS><<<grid, ATT_ROWS * HS / ATT_DIMS, 0, stream>>>(out, lse, qkv, T, C, NH, scale);
    cudaCheckLaunch();
}

template <int HS>
static void attention_backward_launch(floatX* dqkv, const float* D, const floatX* dout, const floatX* qkv,
                                      const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
    dim3 grid(ceil_div(T, ATT_ROWS), NH, B);
    float scale = 1.0f / sqrtf((float)HS);
    attention_backward_dkdv_kernel<HS><<<grid, ATT_ROWS * HS / ATT_DIMS, 0, stream>>>(dqkv, dout, qkv, lse, D, T, C, NH, scale);
    cudaCheckLaunch();
    attention_backward_dq_kernel<HS><<<grid, ATT_ROWS * HS / ATT_DIMS, 0, stream>>>(dqkv, dout, qkv, lse, D, T, C, NH, scale);
    cudaCheckLaunch();
}

// out (B,T,C) = softmax(q k^T / sqrt(hs), causal) v per head; lse (B,NH,T) = log-sum-exp of each
// query's scaled scores (fp32), kept for the backward. qkv (B,T,3C) is q, k, v side by side, each
// split into NH heads of hs = C/NH.
void attention_forward(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
    attention_check_shape("attention_forward", B, T, C, NH);
    switch (C / NH) {
        case 16: attention_forward_launch<16>(out, lse, qkv, B, T, C, NH, stream); break; // the tiny test model
        case 32: attention_forward_launch<32>(out, lse, qkv, B, T, C, NH, stream); break;
        case 64: attention_forward_launch<64>(out, lse, qkv, B, T, C, NH, stream); break;
        case 128: attention_forward_launch<128>(out, lse, qkv, B, T, C, NH, stream); break;
        default: fail("attention_forward: head size %d", C / NH); // ruled out by the shape check
    }
}

// dqkv (B,T,3C) = the gradient w.r.t. qkv (WRITTEN, not added), from dout (B,T,C), the forward's
// qkv, out and lse. scratch is (B,NH,T) floats (the per-query D_i = sum_j dout_ij*out_ij).
void attention_backward(floatX* dqkv, float* scratch, const floatX* dout, const floatX* qkv, const floatX* out,
                        const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
    attention_check_shape("attention_backward", B, T, C, NH);
    const int rows_per_block = 8; // warps of 32 threads, one (b, t, h) row each
    size_t rows = (size_t)B * T * NH;
    attention_backward_rowdot_kernel<<<ceil_div(rows, rows_per_block), 32 * rows_per_block, 0, stream>>>(
        scratch, dout, out, B, T, C, NH);
    cudaCheckLaunch();
    switch (C / NH) {
        case 16: attention_backward_launch<16>(dqkv, scratch, dout, qkv, lse, B, T, C, NH, stream); break;
        case 32: attention_backward_launch<32>(dqkv, scratch, dout, qkv, lse, B, T, C, NH, stream); break;
        case 64: attention_backward_launch<64>(dqkv, scratch, dout, qkv, lse, B, T, C, NH, stream); break;
        case 128: attention_backward_launch<128>(dqkv, scratch, dout, qkv, lse, B, T, C, NH, stream); break;
        default: fail("attention_backward: head size %d", C / NH); // ruled out by the shape check
    }
}

#endif // LLMC_ATTENTION_CUH
