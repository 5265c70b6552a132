/*
LayerNorm on the GPU: the CUDA twins of train_gpt2.c's layernorm_forward / layernorm_backward,
with the same argument names (the rows are N = B*T), plus the fused residual + layernorm that the
blocks of the CUDA trainer use (one pass over memory instead of two).

How the work is cut: a row of C channels is C / 8 packs of 16 bytes in bf16 (C / 4 in fp32;
Pack128 in cuda_common.cuh), and a block has one thread per pack, rounded up to whole warps
(layernorm_threads: 96 threads for GPT-2's C = 768 in bf16). Thread t owns pack t, the columns
[t*8, t*8 + 8), of every row its block handles, and keeps it in registers from load to store.
  forward   one row per block: the thread's pack of the row is read once (16 bytes), the block
            sums give the mean and then the variance (two passes over the registers, as the
            CPU twin: no cancellation), and the normalized pack is written once.
  backward  ONE pass over chunks of LAYERNORM_BWD_ROWS rows. Where a lane can hold its share
            of a row (C <= 1024 in bf16, 512 in fp32: every GPT-2 up to 350M in bf16), a WARP
            takes a chunk (layernorm_backward_warp_kernel): lane l owns packs l, l + 32, ... and
            the row sums are warp sums, with no barrier. Otherwise a block takes it, one thread
            per pack (layernorm_backward_kernel). Either way the rows go in turn: for each, a
            thread reads its pack(s) of dout, inp and dinp once, the warp (block) sums give the
            row means of dnorm and dnorm * norm, and the thread writes dinp back and adds its
            columns' dweight/dbias terms to its column sums (shared memory in the warp
            version, registers in the block one). After its rows, the warp (block) writes
            those sums (one chunk) to `scratch`; a second small kernel adds the
            chunks in a fixed order (32 lanes per column, each summing every 32nd chunk, then
            the lanes in order). No atomics, so two runs give the same bits (and the same bits
            on any GPU: the chunking depends on N and C only, not on the number of SMs).
            With the residual's two sums (LAYERNORM_SUMS_RESIDUAL, below) the same pass also
            gives the column sums of dinp as read and as written: the bias gradients of the two
            projections that write into the residual stream beside the layernorm (the trainer's
            fcproj and attproj, beside ln2), so no other kernel reads dinp for them.
Bytes moved per row (floatX = 2 bytes in bf16): forward 2C read + 2C written (+2C read and 2C
written fused with the residual); backward 6C read (dout, inp, dinp) + 2C written, plus the
chunk sums, NS x 4C bytes per LAYERNORM_BWD_ROWS rows (NS = 2 sums, or 4 with the residual's).

Every reduction has a fixed order: each thread sums its pack's columns in increasing order (its
packs in increasing order, in the warp version), then block_sum's (warp_sum's) butterflies
(cuda_common.cuh); the column sums go row by row within a chunk, then
chunk lane by chunk lane.
dev/test/test_layers_host.cu replays exactly these orders on the host with the helpers below and
compares them with train_gpt2.c.
*/
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "cuda_common.cuh"

// ----------------------------------------------------------------------------
// per-element math, shared by the kernels and the host test

#define LAYERNORM_EPS 1e-5f // PyTorch's default, as GPT-2 uses

__host__ __device__ inline float layernorm_mean(float sum, int C) { return sum / C; }

// from the sum of squared deviations from the mean: the biased variance, as PyTorch's layer_norm
__host__ __device__ inline float layernorm_rstd(float squared_deviation_sum, int C) {
    return 1.0f / sqrtf(squared_deviation_sum / C + LAYERNORM_EPS); // not rsqrtf: it is not correctly rounded
}

// the normalized input, before weight and bias; the backward recomputes it from mean and rstd
__host__ __device__ inline float layernorm_norm(float x, float mean, float rstd) { return (x - mean) * rstd; }

__host__ __device__ inline float layernorm_normalize(float x, float mean, float rstd, float w, float b) {
    return layernorm_norm(x, mean, rstd) * w + b;
}

// d loss / d x_i, given dnorm_i = weight_i * dout_i and the row means of dnorm and dnorm * norm:
// the normalized x depends on every x of the row through the mean and the variance
__host__ __device__ inline float layernorm_dinp(float dnorm, float norm, float dnorm_mean, float dnorm_norm_mean,
                                                float rstd) {
    return (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd;
}

// ----------------------------------------------------------------------------
// launch shapes

// At most 512 threads, so each may hold 128 registers (65536 per SM): the backward keeps a pack
// of weight, dweight and dbias terms and of the row's values: 78-80 registers in bf16 (ptxas -v, sm_80 and
// sm_90: no spills; with 1024 threads the cap of 64 made it spill).
#define LAYERNORM_MAX_THREADS 512
#define LAYERNORM_MAX_C (LAYERNORM_MAX_THREADS * PACKX_SIZE) // one pack per thread: 4096 bf16, 2048 fp32 channels
// Rows per chunk of the backward (a warp's or a block's; one chunk of the dweight/dbias column
// sums). 16, not 32: a warp walks its chunk's rows one after another, each a DRAM round trip, so
// at GPT-2 124M's B=32 (N = 32768) 32-row chunks left ~8 warps an SM waiting. Measured once
// (H200, 2026-11-28, `dev/cuda/test_kernels --bench -b 32 --only layernorm`, each value built with
// -DLAYERNORM_BWD_ROWS): 0.203 ms a launch at 32 rows, 0.131 at 16, 0.153 at 8 (its chunk sums
// double again), 0.169 for the block kernel; the trainer at B=32 66.5 / 66.9 -> 65.2 / 65.5 ms a
// step (two runs each); at B=64 no difference above the noise. The chunk sums cost 2 C floats per
// chunk (12.6 MB written and read at B=32).
#ifndef LAYERNORM_BWD_ROWS // (-D to measure another: the host replays in the tests follow it)
#define LAYERNORM_BWD_ROWS 16
#endif

// Threads per block: one per pack of the row, rounded up to whole warps (block_sum needs them).
static inline int layernorm_threads(int C) { return ceil_div(ceil_div(C, PACKX_SIZE), 32) * 32; }

// Chunks of the backward's column sums (its blocks): they depend on N only.
static inline int layernorm_backward_chunks(int N) { return ceil_div(N, LAYERNORM_BWD_ROWS); }

static void layernorm_check_shape(int N, int C, const char* who) {
    if (N < 1 || C < 1 || C > LAYERNORM_MAX_C) {
        fail("%s: N=%d rows of C=%d channels is not supported (need N >= 1 and 1 <= C <= %d: one thread per "
             "16-byte pack of a row, at most %d threads)", who, N, C, LAYERNORM_MAX_C, LAYERNORM_MAX_THREADS);
    }
}

// ----------------------------------------------------------------------------
// forward

// grid N, block layernorm_threads(C): block `row` normalizes one row; thread t owns pack t of it.
// When inp2 is NULL the row is inp1; otherwise it is the residual inp1 + inp2, rounded to floatX
// and written to `residual` first, and the statistics are taken from the rounded values, so the
// backward (which reads `residual`) sees the same numbers. Each pack is read and then written by
// the same thread, so residual may be inp1 or inp2.
__global__ void __launch_bounds__(LAYERNORM_MAX_THREADS)
layernorm_forward_kernel(floatX* out, float* mean, float* rstd, floatX* residual, const floatX* inp1,
                         const floatX* inp2, const floatX* weight, const floatX* bias, int C) {
    __shared__ float warp_sums[32];
    size_t row = blockIdx.x, base = row * C;
    int t = threadIdx.x, first = t * PACKX_SIZE; // this thread's columns: [first, first + PACKX_SIZE) below C
    bool aligned = C % PACKX_SIZE == 0;          // then every row starts on a 16-byte boundary
    float x[PACKX_SIZE] = {};
    float sum = 0.0f;
    if (first < C) {
        PackX a = load_pack(inp1 + base, t, C, aligned);
        if (inp2 == NULL) {
            for (int j = 0; j < PACKX_SIZE; j++) { x[j] = to_float(a.v[j]); }
        } else {
            PackX b = load_pack(inp2 + base, t, C, aligned), r;
            for (int j = 0; j < PACKX_SIZE; j++) {
                r.v[j] = from_float(to_float(a.v[j]) + to_float(b.v[j]));
                x[j] = to_float(r.v[j]);
            }
            store_pack(residual + base, t, C, aligned, r);
        }
        for (int j = 0; j < PACKX_SIZE && first + j < C; j++) { sum += x[j]; }
    }
    float m = layernorm_mean(block_sum(sum, warp_sums), C); // every thread calls it, even past the row's end
    // two passes (mean first, then squared deviations), as the CPU twin: no cancellation
    float squared_deviations = 0.0f;
    for (int j = 0; j < PACKX_SIZE && first + j < C; j++) {
        float d = x[j] - m;
        squared_deviations += d * d;
    }
    float s = layernorm_rstd(block_sum(squared_deviations, warp_sums), C);
    if (first < C) {
        // weight and bias are arrays of C from a 16-byte boundary: whole packs are one access each
        PackX w = load_pack(weight, t, C, true), b = load_pack(bias, t, C, true), o;
        for (int j = 0; j < PACKX_SIZE; j++) {
            o.v[j] = from_float(layernorm_normalize(x[j], m, s, to_float(w.v[j]), to_float(b.v[j])));
        }
        store_pack(out + base, t, C, aligned, o);
    }
    if (t == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

static void layernorm_forward_launch(floatX* out, float* mean, float* rstd, floatX* residual, const floatX* inp1,
                                     const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C,
                                     cudaStream_t stream, const char* who) {
    layernorm_check_shape(N, C, who);
    check_aligned16(out, "out", who);
    check_aligned16(inp1, inp2 == NULL ? "inp" : "inp1", who);
    if (inp2 != NULL) {
        check_aligned16(inp2, "inp2", who);
        check_aligned16(residual, "residual", who);
    }
    check_aligned16(weight, "weight", who);
    check_aligned16(bias, "bias", who);
    layernorm_forward_kernel<<<N, layernorm_threads(C), 0, stream>>>(out, mean, rstd, residual, inp1, inp2, weight,
                                                                     bias, C);
    cudaCheckLaunch();
}

// out (N,C) = layernorm(inp) * weight + bias; mean, rstd (N) fp32 saved for the backward.
// eps 1e-5, biased variance.
static void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                              const floatX* bias, int N, int C, cudaStream_t stream) {
    layernorm_forward_launch(out, mean, rstd, NULL, inp, NULL, weight, bias, N, C, stream, "layernorm_forward");
}

// residual (N,C) = inp1 + inp2 (the residual connection, rounded to floatX), then
// normed (N,C) = layernorm(residual) * weight + bias: one pass over memory instead of two
static void fused_residual_layernorm_forward(floatX* residual, floatX* normed, float* mean, float* rstd,
                                             const floatX* inp1, const floatX* inp2, const floatX* weight,
                                             const floatX* bias, int N, int C, cudaStream_t stream) {
    layernorm_forward_launch(normed, mean, rstd, residual, inp1, inp2, weight, bias, N, C, stream,
                             "fused_residual_layernorm_forward");
}

// ----------------------------------------------------------------------------
// backward

// The column sums a chunk of the backward keeps (NS, a template argument of the two chunk kernels
// and of the dweight kernel that adds the chunks up):
// LAYERNORM_SUMS = 2, sums[0] of norm * dout (dweight) and sums[1] of dout (dbias); or
// LAYERNORM_SUMS_RESIDUAL = 4, also sums[2] of dinp as it comes in and sums[3] of dinp as it goes
// out. dinp is the residual stream's gradient: where a projection's output joins the stream just
// above this layernorm (GPT-2's fcproj above ln2) its bias gradient is the column sum of dinp as it
// comes in, and where one joins just below (attproj below ln2) it is the column sum of dinp as it
// goes out, so the kernel that reads and writes dinp anyway gives both, and the two products'
// bias gradients need no pass over dout of their own (issue 30 item 2; train_gpt2.cu's backward).
// The sums are of the floatX values read and written, in the same order as the others.
#define LAYERNORM_SUMS 2
#define LAYERNORM_SUMS_RESIDUAL 4

// grid layernorm_backward_chunks(N), block layernorm_threads(C). Block b takes the rows
// [b * LAYERNORM_BWD_ROWS, ...) in order; thread t owns pack t of each (see the top). dinp (N,C) +=;
// partial[b][k][col] = the chunk's sum k of column col (the NS sums above).
template <int NS>
__global__ void __launch_bounds__(LAYERNORM_MAX_THREADS)
layernorm_backward_kernel(floatX* dinp, float* partial, const floatX* dout, const floatX* inp, const floatX* weight,
                          const float* mean, const float* rstd, int N, int C) {
    __shared__ float warp_sums[32];
    int t = threadIdx.x, first = t * PACKX_SIZE;
    bool aligned = C % PACKX_SIZE == 0, mine = first < C;
    float w[PACKX_SIZE];
    float sums[NS][PACKX_SIZE]; // this thread's columns, summed over the chunk's rows in order
    for (int j = 0; j < PACKX_SIZE; j++) {
        w[j] = 0.0f;
        for (int k = 0; k < NS; k++) { sums[k][j] = 0.0f; }
    }
    if (mine) {
        PackX wp = load_pack(weight, t, C, true);
        for (int j = 0; j < PACKX_SIZE; j++) { w[j] = to_float(wp.v[j]); }
    }
    int r0 = blockIdx.x * LAYERNORM_BWD_ROWS, r1 = min(N, r0 + LAYERNORM_BWD_ROWS);
    for (int row = r0; row < r1; row++) { // the same count in every thread: the block sums stay in step
        size_t base = (size_t)row * C;
        float m = mean[row], s = rstd[row];
        float norm[PACKX_SIZE], dnorm[PACKX_SIZE], d[PACKX_SIZE];
        for (int j = 0; j < PACKX_SIZE; j++) { norm[j] = dnorm[j] = d[j] = 0.0f; }
        float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
        PackX gp = {}; // dinp's pack, read with the others so the row is touched once
        if (mine) {
            PackX xp = load_pack(inp + base, t, C, aligned), dp = load_pack(dout + base, t, C, aligned);
            gp = load_pack(dinp + base, t, C, aligned);
            for (int j = 0; j < PACKX_SIZE; j++) {
                d[j] = to_float(dp.v[j]);
                norm[j] = layernorm_norm(to_float(xp.v[j]), m, s);
                dnorm[j] = w[j] * d[j];
            }
            for (int j = 0; j < PACKX_SIZE && first + j < C; j++) {
                dnorm_sum += dnorm[j];
                dnorm_norm_sum += dnorm[j] * norm[j];
            }
        }
        float dnorm_mean = block_sum(dnorm_sum, warp_sums) / C;
        float dnorm_norm_mean = block_sum(dnorm_norm_sum, warp_sums) / C;
        if (mine) {
            for (int j = 0; j < PACKX_SIZE; j++) {
                float dx = layernorm_dinp(dnorm[j], norm[j], dnorm_mean, dnorm_norm_mean, s);
                float g_in = to_float(gp.v[j]);
                gp.v[j] = from_float(g_in + dx);
                sums[0][j] += norm[j] * d[j];
                sums[1][j] += d[j];
                if (NS == LAYERNORM_SUMS_RESIDUAL) {
                    sums[NS - 2][j] += g_in;
                    sums[NS - 1][j] += to_float(gp.v[j]);
                }
            }
            store_pack(dinp + base, t, C, aligned, gp);
        }
    }
    float* p = partial + (size_t)blockIdx.x * NS * C;
    for (int j = 0; j < PACKX_SIZE && first + j < C; j++) {
        for (int k = 0; k < NS; k++) { p[k * C + first + j] = sums[k][j]; }
    }
}

// The same chunk, one WARP per chunk (issue 30): where a lane can hold its share of a row in
// registers (at most LAYERNORM_BWD_LANE_PACKS packs per lane: C <= 1024 in bf16, 512 in fp32),
// lane l owns the packs l, l + 32, ..., l + 32 (P - 1) of every row of its warp's chunk, and the
// two row sums are warp sums (shuffles): no barrier, where the block version crosses four per
// row. Per row a lane loads P packs each of inp, dout and dinp (all 3P loads
// issued before the first use), sums its columns in pack order, then the butterfly
// (cuda_common.cuh's warp_sum); writes P packs of dinp and adds its columns' dweight/dbias terms
// to its column sums, in row order as the block version. Bytes per row as the block version (6C
// read, 2C written); per chunk 2 C floats of partial sums written. The warps of a block are
// independent chunks (LAYERNORM_BWD_WARPS per block), so a block never waits for another warp.
//
// Where the column sums live: in SHARED memory, not registers. A lane's sums are 2 x PACKX_SIZE x P
// floats (48 at GPT-2's C = 768 in bf16: P = 3), kept over the chunk's rows. In registers,
// beside the 3P packs of the row in flight and the P packs of weight, they made P = 3 take 168
// registers (ptxas -v, sm_90), so an SM held 3 blocks (12 warps): 1584 chunks at once on an
// H200's 132 SMs, and the 2048 chunks of B = 64 (N = 65536 rows) ran as 1.29 waves, the last 0.29
// a second pass of latency with most of the GPU idle. Capping them at 128 registers
// (__launch_bounds__(128, 4)) made ptxas spill 140 bytes a thread to local memory. With the sums
// in shared memory the same cap needs no spill (128 registers at P = 3), so 4 blocks (16 warps:
// 2112 chunks) fit an SM and B = 64 is one wave. The price is a shared load and store per column
// per row (2 x 2 x PACKX_SIZE x P wavefronts of 128 bytes per warp per row), which runs beside the
// global traffic rather than adding to it: the kernel stays bound by DRAM. Each warp has its own
// [2][PACKX_SIZE * P][32] floats, word [k][lane] for lane `lane`'s column k: the 32 lanes of an
// access hit 32 consecutive words, one per bank (no conflicts), and only the lane that owns a word
// touches it, so no barrier or __syncwarp is needed. The terms and their order are unchanged (one
// fp32 sum per column, row after row), so the bits are those of the register version.
// With the residual's two sums too (NS = 4), 4 warps' sums at P = 4 would take 64 KB, past the 48 KB
// of static shared memory a block may have: that instance has 2 warps a block (layernorm_bwd_warps).
#define LAYERNORM_BWD_LANE_PACKS 4
#define LAYERNORM_BWD_WARPS 4
__host__ __device__ constexpr int layernorm_bwd_warps(int P, int NS) {
    return NS * P * PACKX_SIZE * 32 * 4 * LAYERNORM_BWD_WARPS > 48 * 1024 ? LAYERNORM_BWD_WARPS / 2 : LAYERNORM_BWD_WARPS;
}
// Blocks per SM asked of ptxas (the register cap 65536 / (128 x blocks)), each checked with
// ptxas -v to need no spill, sm_80 and sm_90, bf16 and fp32 (dev/test/test_ptx_16byte.sh):
// P = 1: 6 (<= 80 registers); P = 2, 3: 4 (<= 128); P = 4 (C in (768, 1024] in bf16): 3 (<= 168).
// Left to itself ptxas takes more (P = 3: 175) and an SM fewer blocks.
#define LAYERNORM_BWD_MIN_BLOCKS(P) ((P) == 1 ? 6 : (P) <= 3 ? 4 : 3)

// Packs of a row per lane when a warp holds the row: ceil(packs / 32).
static inline int layernorm_backward_lane_packs(int C) {
#ifdef LAYERNORM_BWD_BLOCK_ONLY // (-D to measure the block kernel where the warp one would run)
    (void)C;
    return LAYERNORM_BWD_LANE_PACKS + 1;
#else
    // whole packs only: a C that is not a multiple of the pack goes to the block kernel, so the
    // warp kernel has no element-by-element path (load_pack's fallback and its bounds checks: with
    // it this file's PTX for sm_90a held 897 branches and 386 2-byte loads, without it 157 and 66)
    return C % PACKX_SIZE == 0 ? ceil_div(C / PACKX_SIZE, 32) : LAYERNORM_BWD_LANE_PACKS + 1;
#endif
}

template <int P, int NS>
__global__ void __launch_bounds__(32 * layernorm_bwd_warps(P, NS), LAYERNORM_BWD_MIN_BLOCKS(P))
layernorm_backward_warp_kernel(floatX* dinp, float* partial, const floatX* dout, const floatX* inp,
                               const floatX* weight, const float* mean, const float* rstd, int N, int C) {
    // the column sums of each warp's lanes (see above): sums[warp][k] the NS sums (dweight, dbias,
    // and the residual's in and out); word [p * PACKX_SIZE + j][lane] is lane `lane`'s column j of
    // its pack p, summed over the rows in order
    constexpr int W = layernorm_bwd_warps(P, NS);
    __shared__ float sums[W][NS][P * PACKX_SIZE][32];
    int lane = threadIdx.x % 32;
    int chunk = blockIdx.x * W + threadIdx.x / 32;
    if (chunk * LAYERNORM_BWD_ROWS >= N) { return; } // the whole warp: no barrier follows
    int packs = C / PACKX_SIZE; // whole packs (the launcher sends other C to the block kernel)
    float(*cs)[P * PACKX_SIZE][32] = sums[threadIdx.x / 32]; // cs[k][column][lane]
    PackX w[P];
    for (int p = 0; p < P; p++) {
        int g = lane + 32 * p;
        if (g < packs) { w[p] = load128(weight + (size_t)g * PACKX_SIZE); }
        for (int j = 0; j < PACKX_SIZE; j++) {
            for (int k = 0; k < NS; k++) { cs[k][p * PACKX_SIZE + j][lane] = 0.0f; }
        }
    }
    int r0 = chunk * LAYERNORM_BWD_ROWS, r1 = min(N, r0 + LAYERNORM_BWD_ROWS);
    for (int row = r0; row < r1; row++) {
        size_t base = (size_t)row * C;
        float m = mean[row], s = rstd[row];
        PackX xp[P], dp[P], gp[P];
        for (int p = 0; p < P; p++) {
            int g = lane + 32 * p;
            if (g < packs) {
                xp[p] = load128(inp + base + (size_t)g * PACKX_SIZE);
                dp[p] = load128(dout + base + (size_t)g * PACKX_SIZE);
                gp[p] = load128(dinp + base + (size_t)g * PACKX_SIZE);
            }
        }
        float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
        for (int p = 0; p < P; p++) {
            int g = lane + 32 * p;
            for (int j = 0; j < PACKX_SIZE && g < packs; j++) {
                float norm = layernorm_norm(to_float(xp[p].v[j]), m, s);
                float dnorm = to_float(w[p].v[j]) * to_float(dp[p].v[j]);
                dnorm_sum += dnorm;
                dnorm_norm_sum += dnorm * norm;
            }
        }
        float dnorm_mean = warp_sum(dnorm_sum) / C;
        float dnorm_norm_mean = warp_sum(dnorm_norm_sum) / C;
        for (int p = 0; p < P; p++) {
            int g = lane + 32 * p;
            if (g >= packs) { continue; }
            for (int j = 0; j < PACKX_SIZE; j++) {
                float d = to_float(dp[p].v[j]);
                float norm = layernorm_norm(to_float(xp[p].v[j]), m, s);
                float dnorm = to_float(w[p].v[j]) * d;
                float dx = layernorm_dinp(dnorm, norm, dnorm_mean, dnorm_norm_mean, s);
                float g_in = to_float(gp[p].v[j]);
                gp[p].v[j] = from_float(g_in + dx);
                int col = p * PACKX_SIZE + j;
                cs[0][col][lane] += norm * d;
                cs[1][col][lane] += d;
                if (NS == LAYERNORM_SUMS_RESIDUAL) {
                    cs[NS - 2][col][lane] += g_in;
                    cs[NS - 1][col][lane] += to_float(gp[p].v[j]);
                }
            }
            store128(dinp + base + (size_t)g * PACKX_SIZE, gp[p]);
        }
    }
    float* out = partial + (size_t)chunk * NS * C;
    for (int p = 0; p < P; p++) {
        int first = (lane + 32 * p) * PACKX_SIZE;
        for (int j = 0; j < PACKX_SIZE && first < C; j++) {
            for (int k = 0; k < NS; k++) { out[k * C + first + j] = cs[k][p * PACKX_SIZE + j][lane]; }
        }
    }
}

// grid ceil(C / 32), block (32, LAYERNORM_CHUNK_LANES): out[k][col] += the chunks' partial sums k
// (k < NS: dweight, dbias, and with the residual's sums the two projections' bias gradients).
// Chunk lane y sums chunks y, y + 32, ... in order (a warp reads 32 neighbouring columns of a
// chunk: 128 bytes), then the 32 lanes are added in order. With one thread per column and 1024
// chunks (GPT-2 124M, B*T = 32768) only C threads would walk 1024 loads each.
#define LAYERNORM_CHUNK_LANES 32
struct LayernormSumsOut { floatX* out[LAYERNORM_SUMS_RESIDUAL]; };
template <int NS>
__global__ void __launch_bounds__(32 * LAYERNORM_CHUNK_LANES)
layernorm_backward_dweight_kernel(LayernormSumsOut sums, const float* partial, int chunks, int C) {
    __shared__ float lanes[NS][LAYERNORM_CHUNK_LANES][32];
    int col = blockIdx.x * 32 + threadIdx.x;
    float acc[NS];
    for (int k = 0; k < NS; k++) { acc[k] = 0.0f; }
    if (col < C) {
        for (int chunk = threadIdx.y; chunk < chunks; chunk += LAYERNORM_CHUNK_LANES) {
            const float* p = partial + (size_t)chunk * NS * C + col;
            for (int k = 0; k < NS; k++) { acc[k] += p[(size_t)k * C]; } // NS independent loads a chunk
        }
    }
    for (int k = 0; k < NS; k++) { lanes[k][threadIdx.y][threadIdx.x] = acc[k]; }
    __syncthreads();
    if (threadIdx.y == 0 && col < C) {
        for (int k = 0; k < NS; k++) {
            float total = 0.0f;
            for (int y = 0; y < LAYERNORM_CHUNK_LANES; y++) { total += lanes[k][y][threadIdx.x]; }
            sums.out[k][col] = from_float(to_float(sums.out[k][col]) + total);
        }
    }
}

// floats of device scratch that layernorm_backward needs: (chunks, NS, C) partial sums, room for
// the residual's sums too
static size_t layernorm_backward_scratch_floats(int N, int C) {
    return (size_t)layernorm_backward_chunks(N) * LAYERNORM_SUMS_RESIDUAL * C;
}

// the chunk kernel with NSUMS column sums: a warp per chunk (P = 1..4 packs per lane) or, for any
// other P, a block per chunk; then the kernel that adds the chunks' sums into `out`. (A macro, not
// a template function, so that each launch names its template arguments as numbers: the
// emulator's trace labels a launch with its source text, and dev/perf reads them.)
#define LAYERNORM_BWD_WARP_CASE(PP, NSUMS)                                                                             \
    case PP:                                                                                                           \
        layernorm_backward_warp_kernel<PP, NSUMS><<<ceil_div(chunks, layernorm_bwd_warps(PP, NSUMS)),                  \
                                                    32 * layernorm_bwd_warps(PP, NSUMS), 0, stream>>>(                 \
            dinp, scratch, dout, inp, weight, mean, rstd, N, C);                                                       \
        break;
#define LAYERNORM_BWD_CHUNKS_LAUNCH(NSUMS)                                                                             \
    switch (P) {                                                                                                       \
        LAYERNORM_BWD_WARP_CASE(1, NSUMS)                                                                              \
        LAYERNORM_BWD_WARP_CASE(2, NSUMS)                                                                              \
        LAYERNORM_BWD_WARP_CASE(3, NSUMS)                                                                              \
        LAYERNORM_BWD_WARP_CASE(4, NSUMS)                                                                              \
    default:                                                                                                           \
        layernorm_backward_kernel<NSUMS><<<chunks, layernorm_threads(C), 0, stream>>>(dinp, scratch, dout, inp, weight,\
                                                                                      mean, rstd, N, C);               \
    }                                                                                                                  \
    cudaCheckLaunch();                                                                                                 \
    layernorm_backward_dweight_kernel<NSUMS><<<ceil_div(C, 32), dim3(32, LAYERNORM_CHUNK_LANES), 0, stream>>>(         \
        out, scratch, chunks, C);                                                                                      \
    cudaCheckLaunch();

// dinp (N,C) += ; dweight, dbias (C) += (they sum over micro-steps of gradient accumulation, and
// dinp is the residual stream's gradient, which has two sources).
// dbias_in, dbias_out (C) += the column sums of dinp as it comes in and as it goes out (both, or
// both NULL): the bias gradients of the projections whose outputs join the residual stream just
// above and just below this layernorm (see LAYERNORM_SUMS_RESIDUAL).
// scratch: layernorm_backward_scratch_floats(N, C) floats of device memory.
static void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                               const floatX* inp, const floatX* weight, const float* mean, const float* rstd,
                               int N, int C, cudaStream_t stream, floatX* dbias_in = NULL, floatX* dbias_out = NULL) {
    const char* who = "layernorm_backward";
    layernorm_check_shape(N, C, who);
    check_aligned16(dinp, "dinp", who);
    check_aligned16(dout, "dout", who);
    check_aligned16(inp, "inp", who);
    check_aligned16(weight, "weight", who);
    if ((dbias_in == NULL) != (dbias_out == NULL)) { fail("internal: %s: dbias_in and dbias_out go together", who); }
    int P = layernorm_backward_lane_packs(C); // above LAYERNORM_BWD_LANE_PACKS: the block kernel
    int chunks = layernorm_backward_chunks(N);
    LayernormSumsOut out = {{dweight, dbias, dbias_in, dbias_out}};
    static_assert(LAYERNORM_BWD_LANE_PACKS == 4, "LAYERNORM_BWD_CHUNKS_LAUNCH instantiates P = 1..4");
    if (dbias_in != NULL) {
        LAYERNORM_BWD_CHUNKS_LAUNCH(LAYERNORM_SUMS_RESIDUAL)
    } else {
        LAYERNORM_BWD_CHUNKS_LAUNCH(LAYERNORM_SUMS)
    }
}
#undef LAYERNORM_BWD_CHUNKS_LAUNCH
#undef LAYERNORM_BWD_WARP_CASE

#endif // LLMC_LAYERNORM_CUH
