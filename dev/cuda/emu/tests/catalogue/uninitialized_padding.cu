// BROKEN (initcheck): rows of C = 50 values are stored with a padded stride of 64 floats; the host copies in only the 50 values of each row, but the row-max kernel loops over the padded stride. The padding is never written (0xFF bytes: NaN), and fmaxf ignores NaN, so the plain run prints plausible maxima and exits 0. Under EMU_CHECK=1 the emulator must exit 86 with "initcheck", "never written", the allocation and the line of the read.
#include <cuda_runtime.h>
#include <stdio.h>

#define ROWS 8
#define C 50
#define STRIDE 64

__global__ void row_max(const float* x, float* out) {
    const float* row = x + blockIdx.x * STRIDE;
    float m = -1e30f;
    for (int i = 0; i < STRIDE; i++) { m = fmaxf(m, row[i]); } // BUG: i < STRIDE reads the padding
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
    printf("row maxima %g ... %g (expected %d)\n", m[0], m[ROWS - 1], C - 1);
    return 0;
}
