// BROKEN (does not build): five statements nvcc refuses, each a compile error naming its line (nvcc's own build of this file fails on the same lines): a launch whose argument does not convert to its parameter (a float* for an int*), a launch whose template argument cannot be deduced consistently (T is double from one argument and float from another), a launch of an overloaded name that the arguments leave ambiguous, an atomicMax on float (CUDA declares none), and a direct call of a kernel without <<<...>>>.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void count(int* c, int n) {
    if ((int)threadIdx.x < n) { atomicAdd(c, 1); }
}

template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] += a * x[i]; }
}

__global__ void scale(float* x, int n) {
    if ((int)threadIdx.x < n) { x[threadIdx.x] *= 2.0f; }
}
__global__ void scale(float* x, long n) {
    if ((long)threadIdx.x < n) { x[threadIdx.x] *= 3.0f; }
}

__global__ void peak(float* m, const float* x) {
    atomicMax(m, x[threadIdx.x]); // BUG-atomic: no atomicMax(float*, float) in CUDA
}

int main() {
    float *x, *y;
    cudaMalloc(&x, 32 * sizeof(float));
    cudaMalloc(&y, 32 * sizeof(float));
    unsigned int n = 32;
    count<<<1, 32>>>(x, 32);       // BUG-convert: float* for int*
    axpy<<<1, 32>>>(2.0, x, y, 32); // BUG-deduce: T = double (a) or float (x, y)
    scale<<<1, 32>>>(x, n);        // BUG-ambiguous: unsigned int -> int or -> long
    peak<<<1, 32>>>(y, x);
    scale(x, 32);                  // BUG-unconfigured: a __global__ function call must be configured
    cudaDeviceSynchronize();
    printf("built five statements nvcc refuses\n");
    return 0;
}
