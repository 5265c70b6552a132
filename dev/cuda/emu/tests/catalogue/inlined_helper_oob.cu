// BROKEN: a kernel stores one element past its buffer through an inlined __device__ helper (as llmc/mma.cuh's wrappers are inlined into the attention kernels); under EMU_CHECK=1 memcheck must exit 86 naming the helper's line and, after it, the kernel's line that called the helper ("(called from ...)").
#include <cuda_runtime.h>
#include <stdio.h>

__device__ __forceinline__ void store_scaled(float* p, int i, float v) {
    p[i] = 2.0f * v; // BUG-helper: the store
}

__global__ void scale_shifted(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        store_scaled(out, i + 1, in[i]); // BUG-caller: i + 1 reaches out[n]
    }
}

int main() {
    const int n = 256;
    float *in, *out;
    cudaMalloc(&in, n * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    cudaMemset(in, 0, n * sizeof(float));
    scale_shifted<<<n / 64, 64>>>(out, in, n);
    cudaDeviceSynchronize();
    printf("inlined_helper_oob: not caught\n");
    return 0;
}
