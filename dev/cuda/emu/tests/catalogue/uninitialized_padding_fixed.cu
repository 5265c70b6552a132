// CORRECT: uninitialized_padding.cu with the row max over the C values only (the padding is never read); passes silently under EMU_CHECK=1 with maxima 49.
#include <cuda_runtime.h>
#include <stdio.h>

#define ROWS 8
#define C 50
#define STRIDE 64

__global__ void row_max(const float* x, float* out) {
    const float* row = x + blockIdx.x * STRIDE;
    float m = -1e30f;
    for (int i = 0; i < C; i++) { m = fmaxf(m, row[i]); } // FIXED: i < C
    out[blockIdx.x] = m;
}

int main() {
    static float h[ROWS * C];
    for (int i = 0; i < ROWS * C; i++) { h[i] = (float)(i % C); }
    float *x, *out;
    cudaMalloc(&x, ROWS * STRIDE * sizeof(float));
    cudaMalloc(&out, ROWS * sizeof(float));
    for (int r = 0; r < ROWS; r++) { cudaMemcpy(x + r * STRIDE, h + r * C, C * sizeof(float), cudaMemcpyHostToDevice); }
    row_max<<<ROWS, 1>>>(x, out);
    float m[ROWS];
    cudaMemcpy(m, out, sizeof(m), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int r = 0; r < ROWS; r++) { bad += m[r] != (float)(C - 1); }
    printf("uninitialized_padding_fixed: %s\n", bad ? "WRONG" : "right");
    return bad ? 1 : 0;
}
