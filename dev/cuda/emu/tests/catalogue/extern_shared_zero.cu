// BROKEN: a kernel uses its extern __shared__ array but is launched without dynamic shared memory (<<<blocks, threads>>> instead of <<<blocks, threads, bytes>>>); the emulator must exit 86 with "uses extern __shared__ memory but was launched with 0 bytes of it", naming the kernel and the launch's file:line.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void reverse_block(float* x) {
    extern __shared__ float buf[];
    int t = threadIdx.x;
    buf[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    x[blockIdx.x * blockDim.x + t] = buf[blockDim.x - 1 - t];
}

int main() {
    float* d;
    cudaMalloc(&d, 256 * sizeof(float));
    cudaMemset(d, 0, 256 * sizeof(float));
    reverse_block<<<2, 128>>>(d); // BUG: the third launch argument, 128 * sizeof(float), is missing
    cudaDeviceSynchronize();
    printf("the emulator did not catch the missing dynamic shared memory\n");
    return 0;
}
