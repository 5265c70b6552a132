// BROKEN: a kernel launched with a pointer to a host stack array (mode "stack") or to a malloc'd host array (mode "heap"), pageable memory a GPU cannot read; the emulator must exit 86 at the launch with "neither device memory (cudaMalloc) nor pinned host memory" naming the kernel and the launch's file:line. Mode "pinned": the same kernel on cudaMallocHost memory must run (exit 0, "pinned ok").
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__global__ void fill(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = 2.0f * i; }
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "stack";
    const int n = 64;
    if (strcmp(mode, "stack") == 0) {
        float on_stack[n];
        fill<<<1, n>>>(on_stack, n); // BUG-stack: a pointer to the host stack
        cudaDeviceSynchronize();
        printf("the emulator accepted a host stack pointer (%g)\n", on_stack[1]);
        return 0;
    }
    if (strcmp(mode, "heap") == 0) {
        float* on_heap = (float*)malloc(n * sizeof(float));
        fill<<<1, n>>>(on_heap, n); // BUG-heap: a pointer to pageable host heap memory
        cudaDeviceSynchronize();
        printf("the emulator accepted a host heap pointer (%g)\n", on_heap[1]);
        return 0;
    }
    // pinned host memory is mapped for the device: correct
    float* pinned;
    if (cudaMallocHost(&pinned, n * sizeof(float)) != cudaSuccess) { printf("cudaMallocHost failed\n"); return 1; }
    fill<<<1, n>>>(pinned, n);
    if (cudaGetLastError() != cudaSuccess) { printf("launch failed\n"); return 1; }
    cudaDeviceSynchronize();
    for (int i = 0; i < n; i++) {
        if (pinned[i] != 2.0f * i) { printf("pinned[%d] = %g, expected %g\n", i, pinned[i], 2.0f * i); return 1; }
    }
    cudaFreeHost(pinned);
    printf("pinned ok\n");
    return 0;
}
