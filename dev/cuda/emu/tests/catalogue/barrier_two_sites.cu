// BROKEN: the even threads wait at one __syncthreads, the odd threads at another (two lines); the emulator must exit 86 with a message naming both lines (this file) and "every thread of the block must reach the same __syncthreads".
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void two_barriers(float* out) {
    __shared__ float s[64];
    int tid = threadIdx.x;
    if (tid % 2 == 0) {
        s[tid] = 1.0f;
        __syncthreads(); // BUG-A: the even threads wait here
        out[tid] = s[tid + 1];
    } else {
        s[tid] = 2.0f;
        __syncthreads(); // BUG-B: the odd threads wait here
        out[tid] = s[tid - 1];
    }
}

int main() {
    float* d;
    cudaMalloc(&d, 64 * sizeof(float));
    two_barriers<<<2, 64>>>(d);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the barriers at two sites\n");
    return 0;
}
