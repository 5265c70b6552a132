// BROKEN: host code dereferences a cudaMalloc pointer; run with EMU_PROTECT=1 the emulator must exit 86 with "host code read or wrote device memory" (without EMU_PROTECT the read silently gives 0xFF bytes, so the test runs it only with EMU_PROTECT=1).
#include <cuda_runtime.h>
#include <stdio.h>

int main() {
    float* d;
    cudaMalloc(&d, 256 * sizeof(float));
    cudaMemset(d, 0, 256 * sizeof(float));
    cudaDeviceSynchronize();
    float first = d[3]; // BUG: a device pointer dereferenced on the host
    printf("the emulator let the host read device memory: %g\n", first);
    return 0;
}
