/*
LayerNorm on the GPU: the CUDA twins of train_gpt2.c's layernorm_forward / layernorm_backward,
with the same argument names (the rows are N = B*T), plus the fused residual + layernorm that the
blocks of the CUDA trainer use (one pass over memory instead of two).

How the work is cut:
  forward          one warp per row (LAYERNORM_WARPS rows per block). Lane l owns the columns
                   l, l+32, l+64, ... and keeps them in shared memory as floats, so the row is
                   read from global memory once for the mean, the variance and the output.
  backward dinp    one warp per row, like the forward: two row sums, then every column.
  backward dweight two fixed-order passes, like matmul.cuh's bias gradient: partial sums over
                   LAYERNORM_CHUNKS row chunks into `scratch`, then one thread per column adds the
                   chunks in order. No atomics, so two runs give the same bits (and the same bits
                   on any GPU: the chunking depends on N only, not on the number of SMs).

Every reduction has a fixed order: each lane sums its columns in increasing order, then
warp_sum's butterfly (cuda_common.cuh). dev/test/test_layers_host.cu replays exactly these
orders on the host with the helpers below and compares them with train_gpt2.c.
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

#define LAYERNORM_WARPS 4      // rows per block of the row kernels: one warp per row
#define LAYERNORM_MAX_C 3072   // the forward's row cache, LAYERNORM_WARPS * C floats, fits in 48 KiB of shared memory
#define LAYERNORM_CHUNKS 64    // row chunks of dweight/dbias's first pass
#define LAYERNORM_COLS 32      // dweight/dbias: columns per block, one warp reads 32 neighbouring columns of a row
#define LAYERNORM_ROW_LANES 8  // dweight/dbias: warps per block, each taking every 8th row of the chunk

static void layernorm_check_shape(int N, int C, const char* who) {
    if (N < 1 || C < 1 || C > LAYERNORM_MAX_C) {
        fail("%s: N=%d rows of C=%d channels is not supported (need N >= 1 and 1 <= C <= %d: the forward "
             "keeps %d rows of C floats in 48 KiB of shared memory)", who, N, C, LAYERNORM_MAX_C, LAYERNORM_WARPS);
    }
}

// ----------------------------------------------------------------------------
// forward

// grid ceil(N / LAYERNORM_WARPS), block 32 * LAYERNORM_WARPS, shared LAYERNORM_WARPS * C floats.
// One warp per row. When inp2 is NULL the row is inp1; otherwise it is the residual inp1 + inp2,
// rounded to floatX and written to `residual` first, and the statistics are taken from the
// rounded values, so the backward (which reads `residual`) sees the same numbers.
// Each element is read and then written by the same thread, so residual may be inp1 or inp2.
__global__ void layernorm_forward_kernel(floatX* out, float* mean, float* rstd, floatX* residual,
                                         const floatX* inp1, const floatX* inp2, const floatX* weight,
                                         const floatX* bias, int N, int C) {
    extern __shared__ float row_cache[]; // (LAYERNORM_WARPS, C)
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int row = blockIdx.x * LAYERNORM_WARPS + warp;
    if (row >= N) { return; } // the whole warp leaves together, and there is no __syncthreads below
    float* x = row_cache + (size_t)warp * C; // lane l only ever touches x[l + 32k]: no sync needed
    size_t base = (size_t)row * C;

    float sum = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float v;
        if (inp2 == NULL) {
            v = to_float(inp1[base + i]);
        } else {
            floatX r = from_float(to_float(inp1[base + i]) + to_float(inp2[base + i]));
            residual[base + i] = r;
            v = to_float(r);
        }
        x[i] = v;
        sum += v;
    }
    float m = layernorm_mean(warp_sum(sum), C);
    // two passes (mean first, then squared deviations), as the CPU twin: no cancellation
    float squared_deviations = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float d = x[i] - m;
        squared_deviations += d * d;
    }
    float s = layernorm_rstd(warp_sum(squared_deviations), C);
    for (int i = lane; i < C; i += 32) {
        out[base + i] = from_float(layernorm_normalize(x[i], m, s, to_float(weight[i]), to_float(bias[i])));
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

static void layernorm_forward_launch(floatX* out, float* mean, float* rstd, floatX* residual, const floatX* inp1,
                                     const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C,
                                     cudaStream_t stream, const char* who) {
    layernorm_check_shape(N, C, who);
    size_t shared_bytes = (size_t)LAYERNORM_WARPS * C * sizeof(float);
    layernorm_forward_kernel<<<ceil_div(N, LAYERNORM_WARPS), 32 * LAYERNORM_WARPS, shared_bytes, stream>>>(
        out, mean, rstd, residual, inp1, inp2, weight, bias, N, C);
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

// grid ceil(N / LAYERNORM_WARPS), block 32 * LAYERNORM_WARPS. One warp per row: dinp (N,C) +=.
// The row is read twice from global memory (the second time mostly from L1/L2); caching it as
// the forward does would need two arrays (inp and dout) per warp.
__global__ void layernorm_backward_dinp_kernel(floatX* dinp, const floatX* dout, const floatX* inp,
                                               const floatX* weight, const float* mean, const float* rstd,
                                               int N, int C) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int row = blockIdx.x * LAYERNORM_WARPS + warp;
    if (row >= N) { return; } // the whole warp leaves together
    size_t base = (size_t)row * C;
    float m = mean[row], s = rstd[row];

    float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float norm = layernorm_norm(to_float(inp[base + i]), m, s);
        float dnorm = to_float(weight[i]) * to_float(dout[base + i]);
        dnorm_sum += dnorm;
        dnorm_norm_sum += dnorm * norm;
    }
    float dnorm_mean = warp_sum(dnorm_sum) / C;
    float dnorm_norm_mean = warp_sum(dnorm_norm_sum) / C;
    for (int i = lane; i < C; i += 32) {
        float norm = layernorm_norm(to_float(inp[base + i]), m, s);
        float dnorm = to_float(weight[i]) * to_float(dout[base + i]);
        float dx = layernorm_dinp(dnorm, norm, dnorm_mean, dnorm_norm_mean, s);
        dinp[base + i] = from_float(to_float(dinp[base + i]) + dx);
    }
}

// grid (ceil(C / LAYERNORM_COLS), LAYERNORM_CHUNKS), block (LAYERNORM_COLS, LAYERNORM_ROW_LANES).
// partial[chunk][0][col] = sum over the chunk's rows of norm * dout (for dweight),
// partial[chunk][1][col] = sum over the chunk's rows of dout (for dbias).
// Row lane y sums rows r0 + y, r0 + y + 8, ... in order; the 8 lanes are then added in order.
__global__ void layernorm_backward_dweight_partial_kernel(float* partial, const floatX* dout, const floatX* inp,
                                                          const float* mean, const float* rstd, int N, int C) {
    __shared__ float dw_lanes[LAYERNORM_ROW_LANES][LAYERNORM_COLS];
    __shared__ float db_lanes[LAYERNORM_ROW_LANES][LAYERNORM_COLS];
    int col = blockIdx.x * LAYERNORM_COLS + threadIdx.x;
    int rows_per_chunk = (N + LAYERNORM_CHUNKS - 1) / LAYERNORM_CHUNKS;
    int r0 = blockIdx.y * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    float dw = 0.0f, db = 0.0f;
    if (col < C) {
        for (int r = r0 + threadIdx.y; r < r1; r += LAYERNORM_ROW_LANES) {
            size_t idx = (size_t)r * C + col;
            float d = to_float(dout[idx]);
            dw += layernorm_norm(to_float(inp[idx]), mean[r], rstd[r]) * d;
            db += d;
        }
    }
    dw_lanes[threadIdx.y][threadIdx.x] = dw;
    db_lanes[threadIdx.y][threadIdx.x] = db;
    __syncthreads();
    if (threadIdx.y == 0 && col < C) {
        float dw_total = 0.0f, db_total = 0.0f;
        for (int y = 0; y < LAYERNORM_ROW_LANES; y++) {
            dw_total += dw_lanes[y][threadIdx.x];
            db_total += db_lanes[y][threadIdx.x];
        }
        float* p = partial + (size_t)blockIdx.y * 2 * C;
        p[col] = dw_total;
        p[C + col] = db_total;
    }
}

// one thread per column: dweight[col], dbias[col] += the chunks' partial sums, in chunk order
__global__ void layernorm_backward_dweight_finish_kernel(floatX* dweight, floatX* dbias, const float* partial, int C) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= C) { return; }
    float dw = 0.0f, db = 0.0f;
    for (int chunk = 0; chunk < LAYERNORM_CHUNKS; chunk++) {
        dw += partial[(size_t)chunk * 2 * C + col];
        db += partial[(size_t)chunk * 2 * C + C + col];
    }
    dweight[col] = from_float(to_float(dweight[col]) + dw);
    dbias[col] = from_float(to_float(dbias[col]) + db);
}

// floats of device scratch that layernorm_backward needs: (LAYERNORM_CHUNKS, 2, C) partial sums.
// N is in the signature so a finer chunking by N could come later without changing the callers.
static size_t layernorm_backward_scratch_floats(int N, int C) {
    (void)N;
    return (size_t)LAYERNORM_CHUNKS * 2 * C;
}

// dinp (N,C) += ; dweight, dbias (C) += (they sum over micro-steps of gradient accumulation, and
// dinp is the residual stream's gradient, which has two sources).
// scratch: layernorm_backward_scratch_floats(N, C) floats of device memory.
static void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                               const floatX* inp, const floatX* weight, const float* mean, const float* rstd,
                               int N, int C, cudaStream_t stream) {
    layernorm_check_shape(N, C, "layernorm_backward");
    layernorm_backward_dinp_kernel<<<ceil_div(N, LAYERNORM_WARPS), 32 * LAYERNORM_WARPS, 0, stream>>>(
        dinp, dout, inp, weight, mean, rstd, N, C);
    cudaCheckLaunch();
    dim3 grid(ceil_div(C, LAYERNORM_COLS), LAYERNORM_CHUNKS), block(LAYERNORM_COLS, LAYERNORM_ROW_LANES);
    layernorm_backward_dweight_partial_kernel<<<grid, block, 0, stream>>>(scratch, dout, inp, mean, rstd, N, C);
    cudaCheckLaunch();
    layernorm_backward_dweight_finish_kernel<<<ceil_div(C, 256), 256, 0, stream>>>(dweight, dbias, scratch, C);
    cudaCheckLaunch();
}

#endif // LLMC_LAYERNORM_CUH
