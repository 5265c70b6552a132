// CORRECT: shared_race_syncwarp.cu with the increment made atomic (atomicAdd): no race, silent under EMU_CHECK=1, count 2.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void count_warps(int* out) {
    __shared__ int count;
    if (threadIdx.x == 0) { count = 0; }
    __syncthreads();
    if (threadIdx.x % 32 == 0) { atomicAdd(&count, 1); } // FIXED
    __syncthreads();
    if (threadIdx.x == 0) { out[blockIdx.x] = count; }
}

int main() {
    int* out;
    cudaMalloc(&out, sizeof(int));
    count_warps<<<1, 64>>>(out);
    int h = 0;
    cudaMemcpy(&h, out, sizeof(int), cudaMemcpyDeviceToHost);
    printf("shared_race_syncwarp_fixed: %s\n", h == 2 ? "right" : "WRONG");
    return h == 2 ? 0 : 1;
}
