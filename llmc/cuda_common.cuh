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
// 16-byte accesses: Pack128
//
// A memory-bound kernel reaches most of the memory bandwidth only with wide accesses: one 16-byte
// load per thread (PTX ld.global.v4) brings 8 bf16 (or 4 fp32) in one instruction, where one
// floatX per thread needs 8 (or 4) loads for the same bytes and keeps that many more requests in
// flight. So the elementwise and row kernels (gelu, layernorm, encoder, dbias, the classifier)
// move their floatX tensors as packs of 16 bytes.
//
// The rule that makes it legal: a 16-byte access must be at a 16-byte aligned address (a GPU
// faults with "misaligned address" otherwise). Every buffer those kernels touch starts at a
// 16-byte boundary: the parameter and gradient slabs' units and shards are multiples of 16
// elements (llmc/zero_plan.h, UNIT_ALIGN), tensors inside a unit start at multiples of C, a
// multiple of 8 in the CUDA trainer (gpt2_init checks it), and the activations are carved at
// 256-byte boundaries (DESIGN.md §3, "Alignment"). Each launcher checks its pointers
// (check_aligned16) and stops with a message naming the tensor, never silently slower.
// A row of C elements whose C is not a multiple of the pack (an odd test shape; never GPT-2's)
// does not start aligned: load_pack and store_pack then go element by element, and so does the
// last, partial pack of any array.

template <typename T>
struct alignas(16) Pack128 {
    static constexpr int size = 16 / sizeof(T); // 8 bf16 or 4 fp32
    T v[size];
};
typedef Pack128<floatX> PackX;      // the pack of the build's floatX
#define PACKX_SIZE PackX::size      // floatX elements per 16-byte pack: 8 (bf16) or 4 (fp32)

// One 16-byte load or store at p, which must be 16-byte aligned. Through int4, so nvcc emits one
// vector instruction (ld.global.v4.u32 / st.global.v4.u32) whatever T is.
template <typename T>
__host__ __device__ inline Pack128<T> load128(const T* p) {
    int4 bits = *reinterpret_cast<const int4*>(p);
    Pack128<T> x;
    memcpy(&x, &bits, sizeof(x));
    return x;
}

template <typename T>
__host__ __device__ inline void store128(T* p, const Pack128<T>& x) {
    int4 bits;
    memcpy(&bits, &x, sizeof(bits));
#if defined(__CUDA_ARCH__)
    // __stwb is the default (write-back) store as an intrinsic: one st.global.wb.v4. A plain
    // assignment is the same store, but nvcc (CUDA 13) splits it into four 4-byte stores where the
    // value was assembled from bf16 halves (encoder_forward_kernel's PTX showed st.global.v2.u16 x 4)
    __stwb(reinterpret_cast<int4*>(p), bits);
#else
    *reinterpret_cast<int4*>(p) = bits; // the host (tests' replays) and the CPU emulator
#endif
}

// Pack k of the n elements at base: elements [k*size, min(n, (k+1)*size)), zeros past n. One
// 16-byte access when `aligned` (base is 16-byte aligned) and the pack is whole; otherwise
// element by element (the tail of an array, or every pack of a row that starts unaligned).
template <typename T>
__host__ __device__ inline Pack128<T> load_pack(const T* base, size_t k, size_t n, bool aligned) {
    constexpr int S = Pack128<T>::size;
    size_t first = k * S;
    if (aligned && first + S <= n) { return load128(base + first); }
    Pack128<T> x;
    for (int j = 0; j < S; j++) { x.v[j] = first + j < n ? base[first + j] : T(0.0f); }
    return x;
}

// The store twin of load_pack: writes only the elements below n.
template <typename T>
__host__ __device__ inline void store_pack(T* base, size_t k, size_t n, bool aligned, const Pack128<T>& x) {
    constexpr int S = Pack128<T>::size;
    size_t first = k * S;
    if (aligned && first + S <= n) { store128(base + first, x); return; }
    for (int j = 0; j < S && first + j < n; j++) { base[first + j] = x.v[j]; }
}

// Packs needed for n elements (the last one possibly partial).
__host__ __device__ inline size_t packs_of(size_t n) { return (n + PACKX_SIZE - 1) / PACKX_SIZE; }

// The launchers' check: every pointer a 16-byte kernel reads or writes starts at a 16-byte
// boundary. A pointer that does not is a bug in how a buffer was carved, stopped here with the
// tensor's name instead of a misaligned-address fault in the kernel (or a silent slow path).
static inline void check_aligned16(const void* p, const char* what, const char* who) {
    if ((uintptr_t)p % 16 != 0) {
        fail("%s: %s at %p is not 16-byte aligned (the kernel moves 16-byte packs; DESIGN.md §3 says where "
             "every buffer is carved on a 16-byte boundary)", who, what, p);
    }
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
