// CORRECT: warp_sync_missing.cu with each step read, __syncwarp, add, __syncwarp: silent under EMU_CHECK=1, sum 32 under every EMU_THREAD_ORDER.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void warp_sum(const float* in, float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = in[threadIdx.x];
    s[threadIdx.x + 32] = 0.0f;
    __syncwarp();
    for (int d = 16; d > 0; d /= 2) {
        float v = s[threadIdx.x + d];
        __syncwarp(); // FIXED: every lane has read before any lane writes
        s[threadIdx.x] += v;
        __syncwarp();
    }
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
    printf("warp_sync_missing_fixed: %s\n", sum == 32.0f ? "right" : "WRONG");
    return sum == 32.0f ? 0 : 1;
}
