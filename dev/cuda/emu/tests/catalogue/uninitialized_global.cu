// BROKEN (initcheck): a kernel adds into a cudaMalloc'd buffer that was never written (the cudaMemset was forgotten); the emulator fills new device memory with 0xFF bytes, so the sum is NaN: the program prints "NaN" and exits 1. Under EMU_CHECK=1 the emulator must exit 86 with "initcheck", "never written", the allocation's cudaMalloc line, the kernel and the line of the read. Mode "copy": the program copies back a buffer no kernel, copy or memset wrote: "initcheck" naming cudaMemcpy and the allocation.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#define N 256

__global__ void add_into(const float* in, float* acc) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { acc[i] += in[i]; } // BUG: acc was never initialized
}

int main(int argc, char** argv) {
    static float h[N];
    for (int i = 0; i < N; i++) { h[i] = 1.0f; }
    float *d_in, *d_acc;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_acc, N * sizeof(float)); // MALLOC-acc: a cudaMemset(d_acc, 0, ...) belongs here
    if (argc > 1) { // mode "copy"
        cudaMemcpy(h, d_in, sizeof(h), cudaMemcpyDeviceToHost); // BUG-copy: d_in was never written
        printf("copied back a buffer nobody wrote: %g\n", h[0]);
        return 1;
    }
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    add_into<<<1, N>>>(d_in, d_acc);
    cudaMemcpy(h, d_acc, sizeof(h), cudaMemcpyDeviceToHost);
    int nans = 0;
    for (int i = 0; i < N; i++) { nans += isnan(h[i]) != 0; }
    if (nans) { printf("accumulator: NaN in %d of %d elements\n", nans, N); return 1; }
    printf("accumulator: %g (no NaN)\n", h[0]);
    return 0;
}
