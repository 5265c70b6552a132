// BROKEN (the host and pinned memory, kernels): a kernel writes results straight into pinned host memory (a pointer argument), and the host reads them before waiting for the kernel; with EMU_CHECK=1 the emulator must exit 86 with a "streams:" message naming the host's read and the kernel's launch (both lines) under every EMU_SCHEDULE: whether the kernel ran before the read (eager) or after it (lazy). Without EMU_CHECK, under lazy, the host reads the old bytes silently ("stale") and exits 1.
#include <cuda_runtime.h>
#include <stdio.h>

#define N 256

__global__ void squares(float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { out[i] = (float)(i * i); }
}

int main() {
    cudaStream_t s;
    cudaStreamCreate(&s);
    float* result;
    cudaMallocHost(&result, N * sizeof(float));
    for (int i = 0; i < N; i++) { result[i] = -1.0f; }
    squares<<<N / 64, 64, 0, s>>>(result); // BUG-launch
    float r = result[5]; // BUG-read: before cudaStreamSynchronize(s)
    cudaStreamSynchronize(s);
    printf("result[5] = %g before the sync (%s), %g after\n", r, r == 25.0f ? "new" : "stale", result[5]);
    return r == 25.0f ? 0 : 1;
}
