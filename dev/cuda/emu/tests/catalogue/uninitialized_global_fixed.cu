// CORRECT: uninitialized_global.cu with the accumulator cleared by cudaMemset first; passes silently under EMU_CHECK=1 (every byte a kernel or copy reads was written).
#include <cuda_runtime.h>
#include <stdio.h>

#define N 256

__global__ void add_into(const float* in, float* acc) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { acc[i] += in[i]; }
}

int main() {
    static float h[N];
    for (int i = 0; i < N; i++) { h[i] = 1.0f; }
    float *d_in, *d_acc;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_acc, N * sizeof(float));
    cudaMemset(d_acc, 0, N * sizeof(float)); // FIXED
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    add_into<<<1, N>>>(d_in, d_acc);
    add_into<<<1, N>>>(d_in, d_acc);
    cudaMemcpy(h, d_acc, sizeof(h), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < N; i++) { bad += h[i] != 2.0f; }
    printf("uninitialized_global_fixed: %s\n", bad ? "WRONG" : "right");
    return bad ? 1 : 0;
}
