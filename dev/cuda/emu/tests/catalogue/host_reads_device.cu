// BROKEN: host code dereferences a cudaMalloc pointer; run with EMU_PROTECT=1 (or EMU_CHECK=1, which sets it) the emulator must exit 86 with "host code read or wrote device memory" and this line (volatile keeps the load at its own line at -O1, so the report names it; without EMU_PROTECT the read silently gives 0xFF bytes, so the test runs it only with those).
#include <cuda_runtime.h>
#include <stdio.h>

int main() {
    float* d;
    cudaMalloc(&d, 256 * sizeof(float));
    cudaMemset(d, 0, 256 * sizeof(float));
    cudaDeviceSynchronize();
    volatile float first = d[3]; // BUG: a device pointer dereferenced on the host
    printf("the emulator let the host read device memory: %g\n", (float)first);
    return 0;
}
