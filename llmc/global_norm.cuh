/*
The squared L2 norm of the gradients on the GPU: the CUDA twin of train_gpt2.c's sum_of_squares,
deterministic without atomics, over many gradient slices (one per unit of the slab) in two
launches, not two per slice. A table on the device lists the slices (GlobalNormPart). A fixed
grid (its size does not depend on the slices) walks them in order, each thread taking the same
strided share of every slice, and writes one partial sum per block into a scratch buffer; one
block then adds the partials in a fixed order. So the order of every addition depends only on
the slices' lengths, and two runs give the same bits.

Precision: each element is squared and summed in double, per thread, per block and across
blocks. fp32 per thread was the alternative: with this grid (524,288 threads) a thread of a
1e9-element slab sums about 1,900 squares, and a float sum of k positive terms can be off by up
to k * 2^-24 relative: 1.1e-4 here, against the CPU's double sum. The loop is bound by memory
bandwidth and sm_80/sm_90 run double at half the float rate, so double costs nothing, and the
worst-case bounds of both sums put the GPU within ~1e-11 relative of the CPU. Squaring in
double is exact for fp32 gradients too, as the CPU's (double)x * x is.
*/
#ifndef LLMC_GLOBAL_NORM_CUH
#define LLMC_GLOBAL_NORM_CUH

#include "cuda_common.cuh"

#define GLOBAL_NORM_BLOCKS 1024             // the fixed grid of the first pass
#define GLOBAL_NORM_THREADS 512             // threads per block of the first pass
#define GLOBAL_NORM_FINISH_THREADS 1024     // the one block that adds the partials
#define GLOBAL_NORM_SCRATCH GLOBAL_NORM_BLOCKS // doubles of scratch: one partial per block

// One slice of gradients the norm sums: n elements (GradT) at x, device memory (host memory in
// the host test's replay).
typedef struct {
    const void* x;
    size_t n;
} GlobalNormPart;

// Elements a thread loads before it adds them: the adds are a chain (one double sum), but the
// loads are independent, so GLOBAL_NORM_UNROLL of them are in flight at once. With one load per
// add the loop waited one DRAM round trip per element (GPT-2 124M: 238 per thread), and the
// calibrated model (dev/perf) priced the kernel by that chain, 0.21 ms per step on an H200.
#define GLOBAL_NORM_UNROLL 8

// The sum of squares thread `tid` of `nthreads` owns: in each part in order, x[tid],
// x[tid + nthreads], ... added in that order, GLOBAL_NORM_UNROLL loads at a time (the order of the
// adds, and so the bits, do not depend on the unrolling). GradT: floatX, or float (the bf16
// build's fp32 gradients, -zd fp32).
template <typename GradT>
__host__ __device__ inline double global_norm_thread_sum(const GlobalNormPart* parts, int num_parts, size_t tid,
                                                         size_t nthreads) {
    double s = 0.0;
    for (int p = 0; p < num_parts; p++) {
        const GradT* x = (const GradT*)parts[p].x;
        size_t n = parts[p].n, i = tid;
        for (; i + (GLOBAL_NORM_UNROLL - 1) * nthreads < n; i += GLOBAL_NORM_UNROLL * nthreads) {
            float xs[GLOBAL_NORM_UNROLL];
            for (int k = 0; k < GLOBAL_NORM_UNROLL; k++) { xs[k] = to_float(x[i + k * nthreads]); }
            for (int k = 0; k < GLOBAL_NORM_UNROLL; k++) {
                double xi = (double)xs[k];
                s += xi * xi;
            }
        }
        for (; i < n; i += nthreads) {
            double xi = (double)to_float(x[i]);
            s += xi * xi;
        }
    }
    return s;
}

// block_sum of cuda_common.cuh, in double: a fixed butterfly per warp, then over the warps.
// `shared` holds 32 doubles and is used once per kernel.
__device__ inline double block_sum_double(double x, double* shared) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int offset = 16; offset > 0; offset >>= 1) { x += __shfl_xor_sync(0xffffffff, x, offset); }
    if (lane == 0) { shared[warp] = x; }
    __syncthreads();
    x = lane < warps ? shared[lane] : 0.0;
    for (int offset = 16; offset > 0; offset >>= 1) { x += __shfl_xor_sync(0xffffffff, x, offset); }
    return x;
}

// grid GLOBAL_NORM_BLOCKS, block GLOBAL_NORM_THREADS: partial[block] = the block's sum of squares
template <typename GradT>
__global__ void __launch_bounds__(GLOBAL_NORM_THREADS)
global_norm_partial_kernel(double* partial, const GlobalNormPart* parts, int num_parts) {
    __shared__ double warp_sums[32];
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t nthreads = (size_t)gridDim.x * blockDim.x;
    double s = block_sum_double(global_norm_thread_sum<GradT>(parts, num_parts, tid, nthreads), warp_sums);
    if (threadIdx.x == 0) { partial[blockIdx.x] = s; }
}

// one block of GLOBAL_NORM_FINISH_THREADS: *out = the sum of the nblocks partials
__global__ void __launch_bounds__(GLOBAL_NORM_FINISH_THREADS)
global_norm_finish_kernel(double* out, const double* partial, int nblocks) {
    __shared__ double warp_sums[32];
    double s = 0.0;
    for (int i = threadIdx.x; i < nblocks; i += blockDim.x) { s += partial[i]; }
    s = block_sum_double(s, warp_sums);
    if (threadIdx.x == 0) { *out = s; }
}

// *out (a double on the device) = the sum of squares of every element of the num_parts slices
// that `parts` lists (a table in DEVICE memory; each slice floatX or float), in double throughout
// (see the top of this file), in a fixed order: a fixed grid (independent of the slices) writes
// one partial per block into scratch, then one block adds the partials in order. scratch:
// GLOBAL_NORM_SCRATCH doubles on the device, free again once the stream has run the second
// kernel. Slices may be empty.
template <typename GradT>
static void global_norm_squared(double* out, const GlobalNormPart* parts, int num_parts, double* scratch,
                                cudaStream_t stream) {
    if (num_parts < 1) { fail("internal: global_norm_squared of %d slices", num_parts); }
    global_norm_partial_kernel<GradT><<<GLOBAL_NORM_BLOCKS, GLOBAL_NORM_THREADS, 0, stream>>>(scratch, parts, num_parts);
    cudaCheckLaunch();
    global_norm_finish_kernel<<<1, GLOBAL_NORM_FINISH_THREADS, 0, stream>>>(out, scratch, GLOBAL_NORM_BLOCKS);
    cudaCheckLaunch();
}

#endif // LLMC_GLOBAL_NORM_CUH
