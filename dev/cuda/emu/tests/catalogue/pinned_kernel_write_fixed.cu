// CORRECT (the host and pinned memory, kernels): pinned_kernel_write.cu with the host reading the kernel's results only after cudaStreamSynchronize; meanwhile it reads an input buffer the kernel only reads, and writes to a pinned buffer no kernel touches. Must exit 0 with "pinned_kernel_write_fixed passed" and no "cuda-emu:" line under EMU_CHECK=1 and every EMU_SCHEDULE.
#include <cuda_runtime.h>
#include <stdio.h>

#define N 256

__global__ void squares(const float* in, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { out[i] = in[i] * in[i]; }
}

int main() {
    cudaStream_t s;
    cudaStreamCreate(&s);
    float *in, *result, *other;
    cudaMallocHost(&in, N * sizeof(float));
    cudaMallocHost(&result, N * sizeof(float));
    cudaMallocHost(&other, N * sizeof(float));
    for (int i = 0; i < N; i++) { in[i] = (float)i; }
    squares<<<N / 64, 64, 0, s>>>(in, result);
    float peek = in[5]; // the kernel only reads `in`
    for (int i = 0; i < N; i++) { other[i] = 1.0f; }
    cudaStreamSynchronize(s);
    int failures = peek != 5.0f;
    for (int i = 0; i < N; i++) { failures += result[i] != (float)(i * i); }
    if (failures) {
        printf("pinned_kernel_write_fixed: %d wrong values\n", failures);
        return 1;
    }
    printf("pinned_kernel_write_fixed passed\n");
    return 0;
}
