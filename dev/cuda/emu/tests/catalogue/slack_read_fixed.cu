// CORRECT: slack_read.cu with the bounds right (i < n, starting at 0); passes silently under EMU_CHECK=1 and prints "max = 16".
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void max_of(const float* x, int n, float* out) {
    float m = -1e30f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) { m = fmaxf(m, x[i]); } // FIXED: i < n
    atomicMax((int*)out, __float_as_int(m));
}

int main() {
    const int n = 100;
    static float h[n];
    for (int i = 0; i < n; i++) { h[i] = (float)(i % 17); }
    float *x, *out;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&out, sizeof(float));
    cudaMemcpy(x, h, sizeof(h), cudaMemcpyHostToDevice);
    cudaMemset(out, 0, sizeof(float));
    max_of<<<1, 32>>>(x, n, out);
    float m = 0;
    cudaMemcpy(&m, out, sizeof(float), cudaMemcpyDeviceToHost);
    printf("max = %g\n", m);
    return m == 16.0f ? 0 : 1;
}
