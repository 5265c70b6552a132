// CORRECT (stream order, kernels in one allocation): stream_order_kernels.cu's two buffers in one cudaMalloc, each written by its own stream's kernel at once (disjoint buffers need no order, though they share a page), then read by one kernel on stream B after an event wait for A. Must exit 0 with "stream_order_kernels_ok passed" and no "cuda-emu:" line under EMU_CHECK=1 and every EMU_SCHEDULE.
#include <cuda_runtime.h>
#include <stdio.h>

#define N 1000

__global__ void fill(float* x, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { x[i] = v + i; }
}

__global__ void sum_pairs(const float* a, const float* b, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { out[i] = a[i] + b[i]; }
}

int main() {
    cudaStream_t a, b;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    cudaEvent_t done_a;
    cudaEventCreateWithFlags(&done_a, cudaEventDisableTiming);
    float *slab, *out;
    cudaMalloc(&slab, 2 * N * sizeof(float));
    cudaMalloc(&out, N * sizeof(float));
    fill<<<4, 256, 0, a>>>(slab, 1.0f);         // the first buffer on A
    fill<<<4, 256, 0, b>>>(slab + N, 2.0f);     // the second on B, at the same time
    cudaEventRecord(done_a, a);
    cudaStreamWaitEvent(b, done_a, 0);
    sum_pairs<<<4, 256, 0, b>>>(slab, slab + N, out);
    static float h[N];
    cudaMemcpyAsync(h, out, sizeof(h), cudaMemcpyDeviceToHost, b);
    cudaStreamSynchronize(b);
    for (int i = 0; i < N; i++) {
        if (h[i] != 3.0f + 2 * i) {
            printf("out[%d] = %g, expected %g\n", i, h[i], 3.0f + 2 * i);
            return 1;
        }
    }
    printf("stream_order_kernels_ok passed\n");
    return 0;
}
