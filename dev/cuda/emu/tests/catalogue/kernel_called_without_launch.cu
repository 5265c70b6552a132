// BROKEN: host code calls a __global__ function as an ordinary function, without <<<...>>> (here through a benchmark helper that takes the kernel as a callable, a mistake nvcc compiles); the emulator must exit 86 with "a kernel called without <<<...>>>", the kernel's name and the line of the call, under EMU_CHECK=1 too (not "host code read or wrote device memory").
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] *= a; }
}

template <typename Kernel, typename... Args>
static void time_it(Kernel kernel, Args... args) {
    for (int rep = 0; rep < 3; rep++) {
        kernel(args...); // BUG: no <<<grid, block>>>
    }
    cudaDeviceSynchronize();
}

int main() {
    const int n = 1000;
    float* x;
    cudaMalloc(&x, n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    scale<<<(n + 127) / 128, 128>>>(x, 2.0f, n); // a correct launch first
    cudaDeviceSynchronize();
    time_it(scale, x, 2.0f, n);
    printf("the emulator let host code call a kernel\n");
    return 0;
}
