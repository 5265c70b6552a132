/*
What every CUDA file of gpt2-zero shares: the precision (floatX), checked CUDA/cuBLAS calls,
counted device allocations, and a few small device helpers (warp sums, loads and stores that
convert between floatX and float).

PRECISION: the Makefile defines ENABLE_BF16 (default: bf16 params, activations and grads, fp32
master weights and AdamW state, fp32 accumulation everywhere) or ENABLE_FP32 (everything fp32:
the build the tight checks of test_gpt2.cu use).
*/
#ifndef LLMC_CUDA_COMMON_CUH
#define LLMC_CUDA_COMMON_CUH

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "utils.h"

#if defined(ENABLE_FP32)
typedef float floatX;
#define PRECISION_NAME "fp32"
#elif defined(ENABLE_BF16)
typedef __nv_bfloat16 floatX;
#define PRECISION_NAME "bf16"
#else
#error "define ENABLE_BF16 or ENABLE_FP32 (make PRECISION=BF16|FP32)"
#endif

// ----------------------------------------------------------------------------
// checks: file:line, the rank (through fail's prefix), and what went wrong

static inline void cuda_check(cudaError_t err, const char* call, const char* file, int line) {
    if (err != cudaSuccess) { fail("CUDA: %s: %s [%s:%d]", call, cudaGetErrorString(err), file, line); }
}
#define cudaCheck(call) cuda_check((call), #call, __FILE__, __LINE__)

// after a kernel launch: a bad launch configuration shows up here, not at the next sync
#define cudaCheckLaunch() cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

static inline int ceil_div(size_t a, size_t b) { return (int)((a + b - 1) / b); }

// ----------------------------------------------------------------------------
// floatX <-> float, on host and device

__host__ __device__ inline float to_float(float x) { return x; }
__host__ __device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// float -> floatX with round-to-nearest-even (bf16) or unchanged (fp32)
__host__ __device__ inline floatX from_float(float x) {
#if defined(ENABLE_FP32)
    return x;
#else
    return __float2bfloat16_rn(x);
#endif
}

// ----------------------------------------------------------------------------
// warp and block reductions (fixed order: every run adds the same numbers in the same order)

__device__ inline float warp_sum(float x) {
    for (int offset = 16; offset > 0; offset >>= 1) { x += __shfl_xor_sync(0xffffffff, x, offset); }
    return x;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `shared` holds 32 floats. Call it from every thread of the block.
__device__ inline float block_sum(float x, float* shared) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    x = warp_sum(x);
    __syncthreads(); // shared may still be read by a previous call
    if (lane == 0) { shared[warp] = x; }
    __syncthreads();
    x = lane < warps ? shared[lane] : 0.0f;
    return warp_sum(x);
}

// ----------------------------------------------------------------------------
// device memory, counted per category like the CPU trainer's allocations

static inline void* cuda_malloc_counted(size_t* counter, size_t bytes, const char* what) {
    void* p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        fail("cannot allocate %zu bytes of GPU memory for %s (%zu of %zu bytes free): %s",
             bytes, what, free_b, total_b, cudaGetErrorString(err));
    }
    cudaCheck(cudaMemset(p, 0, bytes));
    if (counter != NULL) { *counter += bytes; }
    return p;
}

// Pinned (page-locked) host memory, zeroed and counted: what the GPU copies to and from
// asynchronously (a copy into pageable memory would block the host until its stream got there).
static inline void* cuda_malloc_host_counted(size_t* counter, size_t bytes, const char* what) {
    void* p = NULL;
    cudaError_t err = cudaMallocHost(&p, bytes > 0 ? bytes : 1);
    if (err != cudaSuccess) { fail("cannot allocate %zu bytes of pinned host memory for %s: %s", bytes, what, cudaGetErrorString(err)); }
    memset(p, 0, bytes);
    if (counter != NULL) { *counter += bytes; }
    return p;
}

#endif // LLMC_CUDA_COMMON_CUH
