// BROKEN (racecheck): a warp-synchronous tree sum in shared memory without __syncwarp between the steps: since Volta, the lanes of a warp are not in lockstep, and lane i may read s[i + d] before lane i + d has added into it. The emulator runs a warp's lanes one after another; under EMU_CHECK=1 it must exit 86 with "racecheck", "in one warp without a __syncwarp", the shared variable ("static __shared__ s"), the kernel and the line.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void warp_sum(const float* in, float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = in[threadIdx.x];
    s[threadIdx.x + 32] = 0.0f;
    __syncwarp();
    for (int d = 16; d > 0; d /= 2) { s[threadIdx.x] += s[threadIdx.x + d]; } // BUG: no __syncwarp between steps
    if (threadIdx.x == 0) { out[0] = s[0]; }
}

int main() {
    static float h[32];
    for (int i = 0; i < 32; i++) { h[i] = 1.0f; }
    float *in, *out;
    cudaMalloc(&in, sizeof(h));
    cudaMalloc(&out, sizeof(float));
    cudaMemcpy(in, h, sizeof(h), cudaMemcpyHostToDevice);
    warp_sum<<<1, 32>>>(in, out);
    float sum = 0;
    cudaMemcpy(&sum, out, sizeof(float), cudaMemcpyDeviceToHost);
    printf("warp sum: %g (expected 32)\n", sum);
    return 0;
}
