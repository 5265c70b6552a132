/*
GELU on the GPU, the tanh approximation as GPT-2 uses: the CUDA twins of train_gpt2.c's
gelu_forward / gelu_backward, same formula and constants, one thread per 16-byte pack of elements.

One difference from the CPU twin: gelu_backward here WRITES dinp (=) where the CPU one adds (+=).
In the model, GELU's input gradient has a single source (the matmul above it), so the CUDA
trainer writes it, and dinp may then be the same buffer as dout (each element is read and
written by the same thread), which saves a (B,T,4C) buffer.
*/
#ifndef LLMC_GELU_CUH
#define LLMC_GELU_CUH

#include "cuda_common.cuh"

// ----------------------------------------------------------------------------
// per-element math, shared by the kernels and the host test

// Not named GELU_SCALE: train_gpt2.c defines that as a macro, and the host test includes both.
constexpr float GELU_SQRT_2_OVER_PI = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float GELU_CUBIC = 0.044715f;

// tanhf on both sides (the CPU twin's tanh_via_exp is a host-speed trick; tanhf is accurate to a
// couple of ulps on the device and the host, so the two agree to float rounding)
__host__ __device__ inline float gelu_value(float x) {
    float u = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

// d gelu / dx: the product rule on 0.5 x (1 + tanh(u(x))), with tanh' = 1 - tanh^2
__host__ __device__ inline float gelu_derivative(float x) {
    float u = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * x * x);
}

// ----------------------------------------------------------------------------
// kernels: one thread per 16-byte pack (8 bf16 or 4 fp32; cuda_common.cuh). The N elements are
// one flat array starting 16-byte aligned, so every pack is one 16-byte load and store but the
// last, which is partial when N is not a multiple of the pack and goes element by element.
// Bytes moved: forward N reads + N writes of floatX; backward 2N reads + N writes.

#define GELU_THREADS 256

__global__ void __launch_bounds__(GELU_THREADS) gelu_forward_kernel(floatX* out, const floatX* inp, size_t N) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; // this thread's pack
    if (k * PACKX_SIZE >= N) { return; }
    PackX x = load_pack(inp, k, N, true), y;
    for (int j = 0; j < PACKX_SIZE; j++) { y.v[j] = from_float(gelu_value(to_float(x.v[j]))); }
    store_pack(out, k, N, true, y);
}

// dinp may be dout: pack k is read and then written by thread k alone
__global__ void __launch_bounds__(GELU_THREADS) gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout,
                                                                     size_t N) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k * PACKX_SIZE >= N) { return; }
    PackX x = load_pack(inp, k, N, true), d = load_pack(dout, k, N, true), g;
    for (int j = 0; j < PACKX_SIZE; j++) { g.v[j] = from_float(gelu_derivative(to_float(x.v[j])) * to_float(d.v[j])); }
    store_pack(dinp, k, N, true, g);
}

static void gelu_check(size_t N, const void* a, const char* a_name, const void* b, const char* b_name, const char* who) {
    if (N < 1 || packs_of(N) > (size_t)INT32_MAX * GELU_THREADS) { fail("%s: N=%zu elements is not a launchable size", who, N); }
    check_aligned16(a, a_name, who);
    check_aligned16(b, b_name, who);
}

// out (N) = gelu(inp)
static void gelu_forward(floatX* out, const floatX* inp, size_t N, cudaStream_t stream) {
    gelu_check(N, out, "out", inp, "inp", "gelu_forward");
    gelu_forward_kernel<<<ceil_div(packs_of(N), GELU_THREADS), GELU_THREADS, 0, stream>>>(out, inp, N);
    cudaCheckLaunch();
}

// dinp (N) = gelu'(inp) * dout (WRITTEN, see the top; dinp may be the same buffer as dout)
static void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t N, cudaStream_t stream) {
    gelu_check(N, dinp, "dinp", inp, "inp", "gelu_backward");
    check_aligned16(dout, "dout", "gelu_backward");
    gelu_backward_kernel<<<ceil_div(packs_of(N), GELU_THREADS), GELU_THREADS, 0, stream>>>(dinp, inp, dout, N);
    cudaCheckLaunch();
}

#endif // LLMC_GELU_CUH
