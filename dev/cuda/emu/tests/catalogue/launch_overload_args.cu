// BROKEN (does not build): a kernel shares its name with a host launcher, and the launch passes three arguments where the kernel takes four (and the launcher five): no function of that name takes three, so the launch must not build; g++ names this file and the launch's line.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] += a * x[i]; }
}

void axpy(float a, const float* x, float* y, int n, cudaStream_t stream) {
    axpy<<<(n + 127) / 128, 128, 0, stream>>>(a, x, y); // BUG: n is missing
}

int main() {
    float *x, *y;
    cudaMalloc(&x, 64 * sizeof(float));
    cudaMalloc(&y, 64 * sizeof(float));
    axpy(1.0f, x, y, 64, 0);
    cudaDeviceSynchronize();
    printf("built a launch with the wrong number of arguments\n");
    return 0;
}
