// CORRECT (work waited for): exit_unsynced.cu's clean kernel, with cudaStreamSynchronize before main returns (and the work of a destroyed stream waited for by cudaDeviceSynchronize). Must exit 0 with "exit_unsynced_fixed passed" and no "cuda-emu:" line under EMU_CHECK=1 and every EMU_SCHEDULE.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void fill(float* out) { out[threadIdx.x] = 1.0f; }

int main() {
    cudaStream_t s, gone;
    cudaStreamCreate(&s);
    cudaStreamCreate(&gone);
    float *d, *e;
    cudaMalloc(&d, 32 * sizeof(float));
    cudaMalloc(&e, 32 * sizeof(float));
    fill<<<1, 32, 0, s>>>(d);
    fill<<<1, 32, 0, gone>>>(e);
    cudaStreamDestroy(gone); // its kernel still runs; cudaDeviceSynchronize waits for it
    cudaStreamSynchronize(s);
    cudaDeviceSynchronize();
    printf("exit_unsynced_fixed passed\n");
    return 0;
}
