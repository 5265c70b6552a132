// BROKEN (stream order, kernels in one allocation): one cudaMalloc holds two buffers, the way the trainers' slabs do; stream A's kernel writes the first buffer, stream B's kernel reads it with nothing ordering them (no cudaEventRecord + cudaStreamWaitEvent). The kernels' footprints come from their pointer arguments (to the next buffer start), so with EMU_CHECK=1, under every EMU_SCHEDULE, the emulator must exit 86 with a "streams:" message naming both kernels, both lines and both streams. Argument "second": B's kernel is given the allocation's start and the second buffer (it reads both), A writes the second one.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define N 1000 // floats per buffer (not a multiple of a page: the buffers share a page)

__global__ void fill(float* x, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { x[i] = v + i; }
}

__global__ void sum_pairs(const float* a, const float* b, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { out[i] = a[i] + b[i]; }
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "first";
    cudaStream_t a, b;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    float *slab, *out;
    cudaMalloc(&slab, 2 * N * sizeof(float)); // [0, N): the first buffer, [N, 2N): the second
    cudaMalloc(&out, N * sizeof(float));
    fill<<<4, 256>>>(slab, 0.0f);
    fill<<<4, 256>>>(slab + N, 0.0f);
    cudaDeviceSynchronize();
    if (strcmp(how, "first") == 0) {
        fill<<<4, 256, 0, a>>>(slab, 1.0f);                   // BUG-first-write
        sum_pairs<<<4, 256, 0, b>>>(slab, slab + N, out);     // BUG-first-read: B does not wait for A
    } else if (strcmp(how, "second") == 0) {
        sum_pairs<<<4, 256, 0, b>>>(slab, slab + N, out);     // BUG-second-read
        fill<<<4, 256, 0, a>>>(slab + N, 2.0f);               // BUG-second-write: A may overwrite what B reads
    } else {
        fprintf(stderr, "usage: stream_order_kernels [first|second]\n");
        return 2;
    }
    cudaDeviceSynchronize();
    printf("stream_order_kernels %s: done\n", how);
    return 0;
}
