// BROKEN: a kernel recurses without bound (each call holding a 1 KiB local array), overflowing its thread's stack; the emulator must exit 86 with "stack overflow in kernel deep ..." (and the hint EMU_STACK_KB), not die of a bare SIGSEGV, also when blocks run on several OS threads (EMU_THREADS=2; the grid has 4 blocks).
#include <cuda_runtime.h>
#include <stdio.h>

__device__ __attribute__((noinline)) float descend(int depth, volatile float* sink) {
    volatile float local[256];
    for (int i = 0; i < 256; i++) { local[i] = (float)(depth + i); }
    float r = depth > 0 ? descend(depth - 1, sink) : 0.0f; // BUG: depth 100000 never fits a thread's stack
    *sink = local[depth % 256];
    return r + local[0];
}

__global__ void deep(float* out, int depth) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = descend(depth, out + i);
}

int main() {
    float* d;
    cudaMalloc(&d, 128 * sizeof(float));
    deep<<<4, 32>>>(d, 100000);
    cudaDeviceSynchronize();
    printf("the emulator did not report the stack overflow\n");
    return 0;
}
