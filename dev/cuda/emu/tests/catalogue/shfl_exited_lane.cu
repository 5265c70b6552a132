// BROKEN: lanes 16..31 return early, lanes 0..15 then call __shfl_xor_sync with the full mask 0xffffffff; the emulator must exit 86 with a message naming __shfl_xor_sync, this file and its line, and a lane that "exited".
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void half_warp_sum(const float* in, float* out) {
    int lane = threadIdx.x % 32;
    if (lane >= 16) { return; }
    float v = in[threadIdx.x];
    for (int m = 8; m > 0; m /= 2) {
        v += __shfl_xor_sync(0xffffffffu, v, m); // BUG: the mask names lanes 16..31, which have exited
    }
    out[threadIdx.x] = v;
}

int main() {
    float h[32], *d_in, *d_out;
    for (int i = 0; i < 32; i++) { h[i] = (float)i; }
    cudaMalloc(&d_in, sizeof(h));
    cudaMalloc(&d_out, sizeof(h));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    half_warp_sum<<<1, 32>>>(d_in, d_out);
    cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
    printf("the emulator did not stop the shuffle with exited lanes (out[0] = %g)\n", h[0]);
    return 0;
}
