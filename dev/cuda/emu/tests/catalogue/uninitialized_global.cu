// BROKEN: a kernel sums a cudaMalloc'd buffer that was never written (the cudaMemset was forgotten); the emulator fills new device memory with 0xFF bytes, so the sum is NaN: the program prints "NaN" and exits 1.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#define N 256

__global__ void add_into(const float* in, float* acc) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { acc[i] += in[i]; } // BUG: acc was never initialized
}

int main() {
    static float h[N];
    for (int i = 0; i < N; i++) { h[i] = 1.0f; }
    float *d_in, *d_acc;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_acc, N * sizeof(float)); // a cudaMemset(d_acc, 0, ...) belongs here
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    add_into<<<1, N>>>(d_in, d_acc);
    cudaMemcpy(h, d_acc, sizeof(h), cudaMemcpyDeviceToHost);
    int nans = 0;
    for (int i = 0; i < N; i++) { nans += isnan(h[i]) != 0; }
    if (nans) { printf("accumulator: NaN in %d of %d elements\n", nans, N); return 1; }
    printf("accumulator: %g (no NaN)\n", h[0]);
    return 0;
}
