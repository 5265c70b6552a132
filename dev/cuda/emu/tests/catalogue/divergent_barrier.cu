// BROKEN: __syncthreads inside `if (threadIdx.x < 16)` in a 32-thread block; the emulator must exit 86 with a message naming __syncthreads, this file and the barrier's line, and saying that the other threads exited / that every thread of the block must reach it.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void half_barrier(float* out) {
    __shared__ float s[32];
    int tid = threadIdx.x;
    s[tid] = (float)tid;
    if (tid < 16) {
        __syncthreads(); // BUG: threads 16..31 never reach this barrier
        out[tid] = s[tid + 16];
    }
}

int main() {
    float* d;
    cudaMalloc(&d, 32 * sizeof(float));
    half_barrier<<<1, 32>>>(d);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the divergent barrier\n");
    return 0;
}
