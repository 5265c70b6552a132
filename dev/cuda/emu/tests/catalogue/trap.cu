// BROKEN (by design): a kernel calls __trap() when it finds a bad input (thread 5 of block 1); the emulator must exit 86 with a message naming "__trap()", this file and the __trap line, the kernel, block (1,0,0) and thread (5,0,0).
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void check_positive(const float* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (x[i] <= 0.0f) {
        __trap(); // BUG: reached for x[37] (block 1, thread 5)
    }
}

int main() {
    float h[64], *d;
    for (int i = 0; i < 64; i++) { h[i] = i == 37 ? -1.0f : 1.0f; }
    cudaMalloc(&d, sizeof(h));
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    check_positive<<<2, 32>>>(d);
    cudaDeviceSynchronize();
    printf("the emulator did not stop at __trap()\n");
    return 0;
}
