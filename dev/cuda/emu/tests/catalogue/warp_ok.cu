// CORRECT: warp intrinsics (__shfl_sync/up/down/xor at width 32 and 8, __ballot_sync, __any_sync, __all_sync, __syncwarp), a partial last warp (blockDim 48: mask 0xffff for the second warp), atomicAdd float/int across blocks, multi-dim grids and blocks, templates with __launch_bounds__; compared with host-computed expectations; must exit 0 and print "warp_ok passed" under every EMU_THREAD_ORDER.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond, ...)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            if (failures++ < 20) { printf("FAIL line %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); }            \
        }                                                                                                              \
    } while (0)

// ---------------------------------------------------------------------------------------------
// 1. warp intrinsics. Each block has 48 threads: warp 0 is full (mask 0xffffffff, width 32), warp 1
// has 16 lanes (mask 0x0000ffff, and width 16 where a full-width shuffle would read a lane that
// does not exist). Each thread writes NRES results.

#define NRES 16
#define WBLOCK 48

__device__ int value_of(int gtid) { return gtid * 3 + 1; }

__global__ void warp_ops(int* res, float* fsum) {
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int gtid = blockIdx.x * blockDim.x + tid;
    unsigned mask = warp == 0 ? 0xffffffffu : 0x0000ffffu;
    int w = warp == 0 ? 32 : 16; // the widest width this warp can use
    int v = value_of(gtid);
    int* r = res + gtid * NRES;
    r[0] = __shfl_sync(mask, v, 5);
    r[1] = __shfl_up_sync(mask, v, 3, w);
    r[2] = __shfl_down_sync(mask, v, 4, w);
    r[3] = __shfl_xor_sync(mask, v, 7);
    r[4] = __shfl_sync(mask, v, 3, 8);
    r[5] = __shfl_up_sync(mask, v, 2, 8);
    r[6] = __shfl_down_sync(mask, v, 3, 8);
    r[7] = __shfl_xor_sync(mask, v, 5, 8);
    r[8] = (int)__ballot_sync(mask, v % 3 == 1 && lane % 4 == 1);
    r[9] = __any_sync(mask, lane == 13);
    r[10] = __any_sync(mask, lane == 40); // no lane
    r[11] = __all_sync(mask, v > 0);
    r[12] = __all_sync(mask, lane < 15);
    __syncwarp(mask);
    // a warp sum with xor shuffles (every lane ends with the total), in float
    float f = (float)v;
    for (int m = w / 2; m > 0; m /= 2) { f += __shfl_xor_sync(mask, f, m); }
    if (lane == 0) { fsum[blockIdx.x * 2 + warp] = f; }
    // a 64-bit shuffle
    double d = (double)v * 0.25;
    double dd = __shfl_sync(mask, d, (lane + 1) % w, w);
    r[13] = (int)(dd * 4.0);
    // a broadcast through shared memory guarded by __syncwarp
    __shared__ int s[WBLOCK];
    s[tid] = v;
    __syncwarp(mask);
    r[14] = s[warp * 32 + (lane + 1) % w];
    __syncwarp(mask);
    s[tid] = -v;
    __syncwarp(mask);
    r[15] = s[warp * 32 + (w - 1 - lane)];
}

// the source lane as the CUDA programming guide defines each shuffle (width a power of two)
static int src_idx(int lane, int src, int width) { return (lane & ~(width - 1)) + src % width; }
static int src_up(int lane, int d, int width) { return lane % width >= d ? lane - d : lane; }
static int src_down(int lane, int d, int width) { return lane % width + d < width ? lane + d : lane; }
static int src_xor(int lane, int m, int width) {
    int s = lane ^ m;
    return s >= (lane & ~(width - 1)) + width ? lane : s;
}

static void check_warp_ops() {
    const int blocks = 3, n = blocks * WBLOCK;
    int *d_res;
    float* d_fsum;
    cudaMalloc(&d_res, n * NRES * sizeof(int));
    cudaMalloc(&d_fsum, blocks * 2 * sizeof(float));
    warp_ops<<<blocks, WBLOCK>>>(d_res, d_fsum);
    EXPECT(cudaGetLastError() == cudaSuccess, "warp_ops launch");
    static int res[n * NRES];
    float fsum[blocks * 2];
    cudaMemcpy(res, d_res, sizeof(res), cudaMemcpyDeviceToHost);
    cudaMemcpy(fsum, d_fsum, sizeof(fsum), cudaMemcpyDeviceToHost);
    for (int b = 0; b < blocks; b++) {
        for (int tid = 0; tid < WBLOCK; tid++) {
            int lane = tid % 32, warp = tid / 32, base = b * WBLOCK + warp * 32;
            int lanes = warp == 0 ? 32 : 16, w = lanes;
            unsigned mask = warp == 0 ? 0xffffffffu : 0x0000ffffu;
            const int* r = res + (b * WBLOCK + tid) * NRES;
            auto V = [&](int l) { return value_of(base + l); };
            EXPECT(r[0] == V(src_idx(lane, 5, 32)), "block %d thread %d shfl: %d", b, tid, r[0]);
            EXPECT(r[1] == V(src_up(lane, 3, w)), "block %d thread %d shfl_up: %d", b, tid, r[1]);
            EXPECT(r[2] == V(src_down(lane, 4, w)), "block %d thread %d shfl_down: %d", b, tid, r[2]);
            EXPECT(r[3] == V(src_xor(lane, 7, 32)), "block %d thread %d shfl_xor: %d", b, tid, r[3]);
            EXPECT(r[4] == V(src_idx(lane, 3, 8)), "block %d thread %d shfl width 8: %d", b, tid, r[4]);
            EXPECT(r[5] == V(src_up(lane, 2, 8)), "block %d thread %d shfl_up width 8: %d", b, tid, r[5]);
            EXPECT(r[6] == V(src_down(lane, 3, 8)), "block %d thread %d shfl_down width 8: %d", b, tid, r[6]);
            EXPECT(r[7] == V(src_xor(lane, 5, 8)), "block %d thread %d shfl_xor width 8: %d", b, tid, r[7]);
            unsigned ballot = 0;
            for (int l = 0; l < lanes; l++) {
                if (V(l) % 3 == 1 && l % 4 == 1) { ballot |= 1u << l; }
            }
            EXPECT((unsigned)r[8] == ballot && (ballot & ~mask) == 0, "block %d thread %d ballot %08x, expected %08x", b, tid,
                   (unsigned)r[8], ballot);
            EXPECT(r[9] == 1 && r[10] == 0, "block %d thread %d any: %d %d", b, tid, r[9], r[10]);
            EXPECT(r[11] == 1 && r[12] == 0, "block %d thread %d all: %d %d", b, tid, r[11], r[12]);
            EXPECT(r[13] == V((lane + 1) % w), "block %d thread %d 64-bit shfl: %d", b, tid, r[13]);
            EXPECT(r[14] == V((lane + 1) % w), "block %d thread %d shared after __syncwarp: %d", b, tid, r[14]);
            EXPECT(r[15] == -V(w - 1 - lane), "block %d thread %d shared reused after __syncwarp: %d", b, tid, r[15]);
        }
        for (int warp = 0; warp < 2; warp++) {
            int lanes = warp == 0 ? 32 : 16;
            double sum = 0;
            for (int l = 0; l < lanes; l++) { sum += value_of(b * WBLOCK + warp * 32 + l); }
            EXPECT(fsum[b * 2 + warp] == (float)sum, "block %d warp %d xor sum %g, expected %g", b, warp, fsum[b * 2 + warp], sum);
        }
    }
    cudaFree(d_res);
    cudaFree(d_fsum);
}

// ---------------------------------------------------------------------------------------------
// 2. multi-dimensional grids and blocks, and atomics across blocks

struct Where { unsigned t[3], b[3], bd[3], gd[3]; };

__global__ void where_am_i(Where* out, int* icount, float* fsum, int* imax, unsigned long long* lsum) {
    unsigned tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned inside = tx + blockDim.x * (ty + blockDim.y * tz);
    unsigned g = block * (blockDim.x * blockDim.y * blockDim.z) + inside;
    Where w = {{tx, ty, tz}, {blockIdx.x, blockIdx.y, blockIdx.z}, {blockDim.x, blockDim.y, blockDim.z},
               {gridDim.x, gridDim.y, gridDim.z}};
    out[g] = w;
    atomicAdd(icount, 1);
    atomicAdd(fsum, 0.5f);
    atomicMax(imax, (int)g);
    atomicAdd(lsum, (unsigned long long)g);
}

static void check_dims() {
    const dim3 grid(4, 3, 2), block(8, 4, 2);
    const int n = 4 * 3 * 2 * 8 * 4 * 2;
    Where* d_out;
    int *d_icount, *d_imax;
    float* d_fsum;
    unsigned long long* d_lsum;
    cudaMalloc(&d_out, n * sizeof(Where));
    cudaMalloc(&d_icount, sizeof(int));
    cudaMalloc(&d_imax, sizeof(int));
    cudaMalloc(&d_fsum, sizeof(float));
    cudaMalloc(&d_lsum, sizeof(unsigned long long));
    cudaMemset(d_icount, 0, sizeof(int));
    cudaMemset(d_imax, 0, sizeof(int));
    cudaMemset(d_fsum, 0, sizeof(float));
    cudaMemset(d_lsum, 0, sizeof(unsigned long long));
    where_am_i<<<grid, block>>>(d_out, d_icount, d_fsum, d_imax, d_lsum);
    EXPECT(cudaGetLastError() == cudaSuccess, "where_am_i launch");
    static Where out[n];
    int icount = 0, imax = 0;
    float fsum = 0;
    unsigned long long lsum = 0;
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    cudaMemcpy(&icount, d_icount, sizeof(int), cudaMemcpyDeviceToHost);
    cudaMemcpy(&imax, d_imax, sizeof(int), cudaMemcpyDeviceToHost);
    cudaMemcpy(&fsum, d_fsum, sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(&lsum, d_lsum, sizeof(lsum), cudaMemcpyDeviceToHost);
    int g = 0;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++)
                for (unsigned tz = 0; tz < block.z; tz++)
                    for (unsigned ty = 0; ty < block.y; ty++)
                        for (unsigned tx = 0; tx < block.x; tx++, g++) {
                            const Where& w = out[g];
                            bool ok = w.t[0] == tx && w.t[1] == ty && w.t[2] == tz && w.b[0] == bx && w.b[1] == by &&
                                      w.b[2] == bz && w.bd[0] == block.x && w.bd[1] == block.y && w.bd[2] == block.z &&
                                      w.gd[0] == grid.x && w.gd[1] == grid.y && w.gd[2] == grid.z;
                            EXPECT(ok, "thread %d: threadIdx (%u,%u,%u) blockIdx (%u,%u,%u) blockDim (%u,%u,%u) gridDim (%u,%u,%u)", g,
                                   w.t[0], w.t[1], w.t[2], w.b[0], w.b[1], w.b[2], w.bd[0], w.bd[1], w.bd[2], w.gd[0], w.gd[1],
                                   w.gd[2]);
                        }
    EXPECT(icount == n, "atomicAdd int: %d, expected %d", icount, n);
    EXPECT(fsum == 0.5f * n, "atomicAdd float: %g, expected %g", fsum, 0.5f * n);
    EXPECT(imax == n - 1, "atomicMax: %d, expected %d", imax, n - 1);
    EXPECT(lsum == (unsigned long long)n * (n - 1) / 2, "atomicAdd u64: %llu", lsum);
    cudaFree(d_out);
    cudaFree(d_icount);
    cudaFree(d_imax);
    cudaFree(d_fsum);
    cudaFree(d_lsum);
}

// ---------------------------------------------------------------------------------------------
// 3. a templated block reduction with __launch_bounds__, static shared memory sized by the
// template argument, __syncthreads for the wide steps and __syncwarp for the last warp

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) block_sum(const float* in, float* out) {
    __shared__ float s[BLOCK];
    int tid = threadIdx.x;
    s[tid] = in[blockIdx.x * BLOCK + tid];
    __syncthreads();
    for (int stride = BLOCK / 2; stride >= 32; stride /= 2) {
        if (tid < stride) { s[tid] += s[tid + stride]; }
        __syncthreads();
    }
    if (tid < 32) {
        for (int stride = 16; stride > 0; stride /= 2) {
            if (tid < stride) { s[tid] += s[tid + stride]; }
            __syncwarp();
        }
        if (tid == 0) { out[blockIdx.x] = s[0]; }
    }
}

template <int BLOCK> static void check_block_sum(int blocks) {
    const int n = blocks * BLOCK;
    float* h = new float[n];
    for (int i = 0; i < n; i++) { h[i] = (float)(i % 13) - 6.0f; }
    float *d_in, *d_out;
    cudaMalloc(&d_in, n * sizeof(float));
    cudaMalloc(&d_out, blocks * sizeof(float));
    cudaMemcpy(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice);
    block_sum<BLOCK><<<blocks, BLOCK>>>(d_in, d_out);
    EXPECT(cudaGetLastError() == cudaSuccess, "block_sum<%d> launch", BLOCK);
    block_sum<BLOCK><<<1, 2 * BLOCK>>>(d_in, d_out); // above its __launch_bounds__: refused, does not run
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "block_sum<%d> with %d threads was not refused", BLOCK,
           2 * BLOCK);
    float* out = new float[blocks];
    cudaMemcpy(out, d_out, blocks * sizeof(float), cudaMemcpyDeviceToHost);
    for (int b = 0; b < blocks; b++) {
        float sum = 0;
        for (int i = 0; i < BLOCK; i++) { sum += h[b * BLOCK + i]; }
        EXPECT(out[b] == sum, "block_sum<%d> block %d: %g, expected %g", BLOCK, b, out[b], sum);
    }
    cudaFree(d_in);
    cudaFree(d_out);
    delete[] h;
    delete[] out;
}

int main() {
    check_warp_ops();
    check_dims();
    check_block_sum<64>(3);
    check_block_sum<256>(2);
    EXPECT(cudaGetLastError() == cudaSuccess, "a stray error at the end");
    if (failures) {
        printf("warp_ok: %d failures\n", failures);
        return 1;
    }
    printf("warp_ok passed\n");
    return 0;
}
