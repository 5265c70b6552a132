// CORRECT: index_overflow.cu with the index computed in 64 bits: blocks 1-3 fail the bounds check and skip; passes silently under EMU_CHECK=1.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void scale(float* x, int n, int stride) {
    long long i = (long long)blockIdx.x * stride + threadIdx.x; // FIXED: no overflow
    if (i < n) { x[i] *= 2.0f; }
}

int main() {
    const int n = 1024;
    static float h[n];
    for (int i = 0; i < n; i++) { h[i] = 1.0f; }
    float* x;
    cudaMalloc(&x, n * sizeof(float));
    cudaMemcpy(x, h, sizeof(h), cudaMemcpyHostToDevice);
    scale<<<4, 256>>>(x, n, 1 << 30);
    cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < n; i++) { bad += h[i] != (i < 256 ? 2.0f : 1.0f); }
    printf("index_overflow_fixed: %s\n", bad ? "WRONG" : "right");
    return bad ? 1 : 0;
}
