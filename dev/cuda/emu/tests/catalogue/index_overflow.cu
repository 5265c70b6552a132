// BROKEN (memcheck): a kernel computes its element index in 32-bit int as blockIdx.x * stride + threadIdx.x; with stride = 2^30 block 2's index overflows to about -2^31, passes the bounds check i < n, and addresses 8 GiB before the buffer. A GPU reports an illegal address. Under EMU_CHECK=1 the emulator must exit 86 with "memcheck", "in no allocation", the kernel and the line; without it, a message (status 86) that names the kernel, not a bare SIGSEGV.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void scale(float* x, int n, int stride) {
    int i = blockIdx.x * stride + threadIdx.x; // the product overflows for blockIdx.x >= 2
    if (i < n) { x[i] *= 2.0f; }               // BUG: a negative i passes the check
}

int main() {
    const int n = 1024;
    float* x;
    cudaMalloc(&x, n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    scale<<<4, 256>>>(x, n, 1 << 30);
    cudaDeviceSynchronize();
    printf("the overflowed index went unnoticed\n");
    return 0;
}
