// CORRECT: shared_limit.cu done right: 32 KiB of static __shared__ plus 64 KiB of dynamic shared memory after cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 KiB) (96 KiB <= 227 KiB): both launches run, silently under EMU_CHECK=1.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void static_and_dynamic(float* out) {
    __shared__ float a[8192]; // 32 KiB
    extern __shared__ float d[];
    a[threadIdx.x] = (float)threadIdx.x;
    d[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = a[threadIdx.x] + d[threadIdx.x];
}

int main() {
    float* out;
    cudaMalloc(&out, 256 * sizeof(float));
    cudaFuncSetAttribute(static_and_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
    for (int i = 0; i < 2; i++) { static_and_dynamic<<<1, 256, 64 * 1024>>>(out); }
    cudaError_t err = cudaGetLastError();
    float h[256];
    cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
    int ok = err == cudaSuccess && h[255] == 256.0f;
    printf("shared_limit_fixed: %s\n", ok ? "right" : "WRONG");
    return ok ? 0 : 1;
}
