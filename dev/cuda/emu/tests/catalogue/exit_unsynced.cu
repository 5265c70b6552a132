// BROKEN (work never waited for): the program queues kernels and a copy and returns from main without synchronizing. Under lazy nothing of it ever ran, so the divergent __syncthreads in the kernel went unnoticed. With EMU_CHECK=1, under every EMU_SCHEDULE, the queued work runs at exit and the barrier is reported (exit 86, naming __syncthreads and its line); with the argument "clean" (a correct kernel), the exit itself is the error: a "streams:" message that the program ended without waiting for its ops, naming the launch. Without EMU_CHECK, under lazy, a "cuda-emu:" line names the ops that never ran.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void half_barrier(float* out) {
    __shared__ float s[32];
    int tid = threadIdx.x;
    s[tid] = (float)tid;
    if (tid < 16) {
        __syncthreads(); // BUG-barrier: threads 16..31 never reach this barrier
        out[tid] = s[tid + 16];
    }
}

__global__ void fill(float* out) { out[threadIdx.x] = 1.0f; }

int main(int argc, char** argv) {
    bool clean = argc > 1 && strcmp(argv[1], "clean") == 0;
    cudaStream_t s;
    cudaStreamCreate(&s);
    float* d;
    cudaMalloc(&d, 32 * sizeof(float));
    if (clean) {
        fill<<<1, 32, 0, s>>>(d); // BUG-clean: nobody waits for it
    } else {
        half_barrier<<<1, 32, 0, s>>>(d); // BUG-launch
    }
    printf("exit_unsynced: main returns\n");
    return 0; // BUG: no cudaStreamSynchronize / cudaDeviceSynchronize
}
