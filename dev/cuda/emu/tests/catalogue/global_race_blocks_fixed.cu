// CORRECT: global_race_blocks.cu with atomicAdd(out, partial): blocks' atomics do not race; silent under EMU_CHECK=1 (also with EMU_THREADS=2), sum 512.
#include <cuda_runtime.h>
#include <stdio.h>

#define BLOCKS 8

__global__ void block_sums(const float* in, float* out) {
    __shared__ float partial;
    if (threadIdx.x == 0) { partial = 0.0f; }
    __syncthreads();
    atomicAdd(&partial, in[blockIdx.x * blockDim.x + threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) { atomicAdd(out, partial); } // FIXED
}

int main() {
    static float h[BLOCKS * 64];
    for (int i = 0; i < BLOCKS * 64; i++) { h[i] = 1.0f; }
    float *in, *out;
    cudaMalloc(&in, sizeof(h));
    cudaMalloc(&out, sizeof(float));
    cudaMemcpy(in, h, sizeof(h), cudaMemcpyHostToDevice);
    cudaMemset(out, 0, sizeof(float));
    block_sums<<<BLOCKS, 64>>>(in, out);
    float sum = 0;
    cudaMemcpy(&sum, out, sizeof(float), cudaMemcpyDeviceToHost);
    printf("global_race_blocks_fixed: %s\n", sum == BLOCKS * 64 ? "right" : "WRONG");
    return sum == BLOCKS * 64 ? 0 : 1;
}
