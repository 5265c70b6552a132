// BROKEN (racecheck): every block adds its partial sum into out[0] with a plain read-modify-write (out[0] += partial) instead of atomicAdd. Blocks run in no defined order and at once on a GPU, so updates are lost; the emulator runs one block at a time per OS thread, so the sum is right unless EMU_THREADS > 1 happens to interleave two. Under EMU_CHECK=1 it must exit 86 with "racecheck", "global memory", the allocation, the kernel, two blocks and the line.
#include <cuda_runtime.h>
#include <stdio.h>

#define BLOCKS 8

__global__ void block_sums(const float* in, float* out) {
    __shared__ float partial;
    if (threadIdx.x == 0) { partial = 0.0f; }
    __syncthreads();
    atomicAdd(&partial, in[blockIdx.x * blockDim.x + threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) { out[0] += partial; } // BUG: blocks race on out[0]
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
    printf("sum: %g (expected %d)\n", sum, BLOCKS * 64);
    return 0;
}
