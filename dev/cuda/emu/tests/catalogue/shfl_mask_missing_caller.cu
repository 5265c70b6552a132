// BROKEN: lanes 0..31 all call __shfl_down_sync with mask 0x0000ffff, so lanes 16..31 call with a mask that does not name themselves; the emulator must exit 86 with a message naming __shfl_down_sync, this file and its line, and "does not name the calling lane".
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void bad_mask(const float* in, float* out) {
    float v = in[threadIdx.x];
    v += __shfl_down_sync(0x0000ffffu, v, 1, 16); // BUG: lanes 16..31 are not in the mask they pass
    out[threadIdx.x] = v;
}

int main() {
    float h[32], *d_in, *d_out;
    for (int i = 0; i < 32; i++) { h[i] = (float)i; }
    cudaMalloc(&d_in, sizeof(h));
    cudaMalloc(&d_out, sizeof(h));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    bad_mask<<<1, 32>>>(d_in, d_out);
    cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
    printf("the emulator did not stop the shuffle whose mask misses the caller (out[0] = %g)\n", h[0]);
    return 0;
}
