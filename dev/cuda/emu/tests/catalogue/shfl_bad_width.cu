// BROKEN: __shfl_down_sync with width 12, which is not a power of two (undefined on a GPU); the emulator must exit 86 with a message naming __shfl_down_sync, this file and its line, and "width 12 is not a power of two".
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void groups_of_12(const float* in, float* out) {
    float v = in[threadIdx.x];
    v += __shfl_down_sync(0xffffffffu, v, 1, 12); // BUG: width must be 1, 2, 4, 8, 16 or 32
    out[threadIdx.x] = v;
}

int main() {
    float h[32], *d_in, *d_out;
    for (int i = 0; i < 32; i++) { h[i] = (float)i; }
    cudaMalloc(&d_in, sizeof(h));
    cudaMalloc(&d_out, sizeof(h));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    groups_of_12<<<1, 32>>>(d_in, d_out);
    cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
    printf("the emulator did not stop the shuffle with width 12 (out[0] = %g)\n", h[0]);
    return 0;
}
