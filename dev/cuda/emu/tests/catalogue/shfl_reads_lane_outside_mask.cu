// BROKEN: lanes 0..15 (mask 0x0000ffff) reduce with __shfl_down_sync at width 32, so lane 8 with delta 8 reads lane 16, outside the mask (undefined on a GPU); the emulator must exit 86 with a message naming __shfl_down_sync, this file and its line, and "which is not in mask".
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void half_warp_reduce(const float* in, float* out) {
    int lane = threadIdx.x % 32;
    if (lane < 16) {
        float v = in[threadIdx.x];
        for (int d = 8; d > 0; d /= 2) {
            v += __shfl_down_sync(0x0000ffffu, v, d); // BUG: at width 32, lane 8 reads lane 8 + d = 16 when d = 8: outside the mask
        }
        if (lane == 0) { out[threadIdx.x / 32] = v; }
    }
}

int main() {
    float h[32], *d_in, *d_out;
    for (int i = 0; i < 32; i++) { h[i] = (float)i; }
    cudaMalloc(&d_in, sizeof(h));
    cudaMalloc(&d_out, sizeof(h));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    half_warp_reduce<<<1, 32>>>(d_in, d_out);
    cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
    printf("the emulator did not stop the shuffle that reads outside its mask (out[0] = %g)\n", h[0]);
    return 0;
}
