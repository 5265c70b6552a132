// BROKEN (memcheck): a max over n = 100 floats reads one element past the end (i <= n) in mode "past", and one before the start in mode "before". cudaMalloc rounds the allocation to 256 bytes, so x[100] lies in the rounding slack (0xFF bytes, NaN) and x[-1] in the page before: both read without a fault, and fmaxf drops the NaN, so the plain run prints a plausible maximum and exits 0. Under EMU_CHECK=1 the emulator must exit 86 with "memcheck", "past the end of" / "before the start of" "a 400-byte allocation", the cudaMalloc line, the kernel and the line of the read.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void max_past(const float* x, int n, float* out) {
    float m = -1e30f;
    for (int i = threadIdx.x; i <= n; i += blockDim.x) { m = fmaxf(m, x[i]); } // BUG-past: i <= n
    atomicMax((int*)out, __float_as_int(m)); // the values are >= 0: int order is float order
}

__global__ void max_before(const float* x, int n, float* out) {
    float m = -1e30f;
    for (int i = (int)threadIdx.x - 1; i < n - 1; i += blockDim.x) { m = fmaxf(m, x[i]); } // BUG-before: starts at -1
    atomicMax((int*)out, __float_as_int(m));
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "past";
    const int n = 100;
    static float h[n];
    for (int i = 0; i < n; i++) { h[i] = (float)(i % 17); }
    float *x, *out;
    cudaMalloc(&x, n * sizeof(float)); // MALLOC: 400 bytes
    cudaMalloc(&out, sizeof(float));
    cudaMemcpy(x, h, sizeof(h), cudaMemcpyHostToDevice);
    cudaMemset(out, 0, sizeof(float));
    if (strcmp(mode, "before") == 0) { max_before<<<1, 32>>>(x, n, out); }
    else { max_past<<<1, 32>>>(x, n, out); }
    float m = 0;
    cudaMemcpy(&m, out, sizeof(float), cudaMemcpyDeviceToHost);
    printf("max = %g\n", m);
    return 0;
}
