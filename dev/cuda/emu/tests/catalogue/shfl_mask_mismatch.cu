// BROKEN: lanes 0..15 call __shfl_sync with mask 0xffffffff while lanes 16..31 call it with 0xffff0000 (the lanes named by one mask must all pass that same mask); the emulator must exit 86 with a message naming __shfl_sync, this file and its line, and "(with another mask)".
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void mixed_masks(const int* in, int* out) {
    int lane = threadIdx.x % 32;
    unsigned mask = lane < 16 ? 0xffffffffu : 0xffff0000u;
    int v = __shfl_sync(mask, in[threadIdx.x], 31); // BUG: two different masks for one shuffle
    out[threadIdx.x] = v;
}

int main() {
    int h[32], *d_in, *d_out;
    for (int i = 0; i < 32; i++) { h[i] = i; }
    cudaMalloc(&d_in, sizeof(h));
    cudaMalloc(&d_out, sizeof(h));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    mixed_masks<<<1, 32>>>(d_in, d_out);
    cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
    printf("the emulator did not stop the shuffle with two masks (out[0] = %d)\n", h[0]);
    return 0;
}
