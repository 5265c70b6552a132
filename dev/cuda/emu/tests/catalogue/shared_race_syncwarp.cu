// BROKEN (racecheck): lane 0 of each of two warps increments a shared counter with a read, a __syncwarp, and a write. __syncwarp orders the lanes of one warp only: the two warps' reads and writes race, and a GPU can lose an increment. The emulator runs warps one after another, so every EMU_THREAD_ORDER gives the right count; under EMU_CHECK=1 it must exit 86 with "racecheck", the shared variable ("static __shared__ count"), the kernel and both lines (the read and the write).
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void count_warps(int* out) {
    __shared__ int count;
    if (threadIdx.x == 0) { count = 0; }
    __syncthreads();
    int seen = 0;
    if (threadIdx.x % 32 == 0) { seen = count; } // BUG-read
    __syncwarp(); // orders this warp's lanes, not the two warps
    if (threadIdx.x % 32 == 0) { count = seen + 1; } // BUG-write
    __syncthreads();
    if (threadIdx.x == 0) { out[blockIdx.x] = count; }
}

int main() {
    int* out;
    cudaMalloc(&out, sizeof(int));
    count_warps<<<1, 64>>>(out);
    int h = 0;
    cudaMemcpy(&h, out, sizeof(int), cudaMemcpyDeviceToHost);
    printf("warps counted: %d (expected 2)\n", h);
    return 0;
}
