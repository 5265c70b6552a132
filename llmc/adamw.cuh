/*
AdamW on the GPU: the CUDA twin of train_gpt2.c's adamw_update. The optimizer keeps an fp32
master copy of the parameters next to the fp32 moments m and v; the floatX params the model
computes with are the new master rounded to floatX after each step (round-to-nearest-even for
bf16; a plain copy in the FP32 build, where params may even be the master buffer itself).

The arithmetic is adamw_element, word for word the CPU's loop body, so the host test
(dev/test/test_update_host.cu) can demand the same bits as the CPU. On the device nvcc may fuse
a multiply and an add into one fma (its default, --fmad=true), as gcc does on the CPU with
-march=native where the machine has FMA; results then differ by an ulp, not by method.
*/
#ifndef LLMC_ADAMW_CUH
#define LLMC_ADAMW_CUH

#include <math.h>
#include "cuda_common.cuh"

// 1 - beta^t, the bias correction of step t (from 1), with the CPU trainer's expression; the
// host computes it once per step and passes it to the kernel
static inline float adamw_bias_correction(float beta, int t) { return 1.0f - powf(beta, (float)t); }

// One element, in PyTorch's order: decay the weight, then the Adam step. grad is the raw
// gradient; grad_scale the clipping factor applied as it is read. sqrtf and a true division
// (the CUDA build does not use --use_fast_math), as on the CPU.
__host__ __device__ inline void adamw_element(float* master, float* m, float* v, float grad, float grad_scale,
                                              float lr, float beta1, float beta2, float bc1, float bc2, float eps,
                                              float weight_decay) {
    float g = grad * grad_scale;
    float mi = beta1 * *m + (1.0f - beta1) * g;
    float vi = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mi;
    *v = vi;
    float p = *master * (1.0f - lr * weight_decay);
    *master = p - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
}

#define ADAMW_THREADS 512
#define ADAMW_MAX_BLOCKS (1 << 20) // beyond 512M elements the threads loop

// Grid-stride over the n elements; each element is read and written by one thread, so the
// result does not depend on the launch shape. params and master are not __restrict__: the
// FP32 build may pass the same buffer for both. GradT: floatX, or float (the bf16 build's fp32
// gradients, -zd fp32).
template <typename GradT>
__global__ void __launch_bounds__(ADAMW_THREADS)
adamw_kernel(floatX* params, float* master, const GradT* __restrict__ grads, float* __restrict__ m,
             float* __restrict__ v, size_t n, float lr, float beta1, float beta2, float bc1, float bc2,
             float eps, float weight_decay, float grad_scale) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float pi = master[i], mi = m[i], vi = v[i];
        adamw_element(&pi, &mi, &vi, to_float(grads[i]), grad_scale, lr, beta1, beta2, bc1, bc2, eps, weight_decay);
        master[i] = pi;
        m[i] = mi;
        v[i] = vi;
        params[i] = from_float(pi);
    }
}

// AdamW on n contiguous elements, PyTorch's order (decay the weight, then the Adam step), exactly
// the arithmetic of train_gpt2.c's adamw_update: grad = grads[i] * grad_scale; m, v update; bias
// corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t computed on the host by the caller
// (adamw_bias_correction); master (fp32) is updated, params (floatX) = the new master rounded to floatX.
// (Not the CPU's adamw_update: this one takes a stream and 15 arguments, so C++ never confuses the two.)
template <typename GradT>
static void adamw_update(floatX* params, float* master, const GradT* grads, float* m, float* v, size_t n,
                         float lr, float beta1, float beta2, float bc1, float bc2, float eps, float weight_decay,
                         float grad_scale, cudaStream_t stream) {
    if (n == 0) { return; }
    size_t blocks = (n + ADAMW_THREADS - 1) / ADAMW_THREADS;
    if (blocks > ADAMW_MAX_BLOCKS) { blocks = ADAMW_MAX_BLOCKS; }
    adamw_kernel<GradT><<<(unsigned int)blocks, ADAMW_THREADS, 0, stream>>>(params, master, grads, m, v, n, lr, beta1, beta2,
                                                                     bc1, bc2, eps, weight_decay, grad_scale);
    cudaCheckLaunch();
}

// The host twin of adamw_update, for the optimizer state offloaded to pinned host memory (-zo 1):
// the same adamw_element per element and the same rounding to floatX (from_float), on host
// pointers, the elements split over the CPU's threads (each element is independent, so the
// thread count changes no bit). On the emulator both twins are compiled by g++ and give the
// same bits. On a GPU they may not: nvcc contracts a*b + c into an fma by default (--fmad=true),
// while g++ contracts only when the target has FMA (-march with FMA; the CUDA build's host code
// gets no -march), so the offloaded update can differ from the kernel's by an ulp per element.
static void adamw_update_host(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                              float lr, float beta1, float beta2, float bc1, float bc2, float eps, float weight_decay,
                              float grad_scale) {
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++) {
        adamw_element(&master[i], &m[i], &v[i], to_float(grads[i]), grad_scale, lr, beta1, beta2, bc1, bc2, eps, weight_decay);
        params[i] = from_float(master[i]);
    }
}

#endif // LLMC_ADAMW_CUH
