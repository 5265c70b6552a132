// BROKEN: __barrier_sync(id) is bar.sync with every thread of the block: here the two halves of the block wait at one line on two different barriers (1 and 2), which on a GPU waits forever; the emulator must exit 86 naming __barrier_sync, this file and its line, and "every thread of the block".
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void two_barriers(int* out) {
    __shared__ int s[64];
    s[threadIdx.x] = threadIdx.x;
    __barrier_sync(threadIdx.x < 32 ? 1 : 2); // BUG
    out[threadIdx.x] = s[63 - threadIdx.x];
}

int main() {
    int* d_out;
    cudaMalloc(&d_out, 64 * sizeof(int));
    two_barriers<<<1, 64>>>(d_out);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the mismatched barriers\n");
    return 0;
}
