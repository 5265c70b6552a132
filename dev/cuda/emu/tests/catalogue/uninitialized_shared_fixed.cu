// CORRECT: uninitialized_shared.cu with the shared total set to 0 (and a barrier) before the atomics, and the halo loaded by the block's last thread; passes silently under EMU_CHECK=1 with no NaN.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#define N 128

__global__ void block_total(const float* in, float* out) {
    __shared__ float total;
    if (threadIdx.x == 0) { total = 0.0f; } // FIXED
    __syncthreads();
    atomicAdd(&total, in[blockIdx.x * blockDim.x + threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) { out[blockIdx.x] = total; }
}

__global__ void right_neighbour_diff(const float* in, float* out) {
    extern __shared__ float tile[]; // blockDim.x + 1 floats: the last one is the halo
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[i];
    if (threadIdx.x == blockDim.x - 1) { tile[blockDim.x] = i + 1 < N ? in[i + 1] : in[i] + 1.0f; } // FIXED
    __syncthreads();
    out[i] = tile[threadIdx.x + 1] - tile[threadIdx.x];
}

int main() {
    static float h[N];
    for (int i = 0; i < N; i++) { h[i] = (float)i; }
    float *d_in, *d_out;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    block_total<<<2, 64>>>(d_in, d_out);
    float totals[2];
    cudaMemcpy(totals, d_out, sizeof(totals), cudaMemcpyDeviceToHost);
    right_neighbour_diff<<<2, 64, 65 * sizeof(float)>>>(d_in, d_out);
    cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
    int bad = totals[0] != 2016.0f || totals[1] != 6112.0f;
    for (int i = 0; i < N; i++) { bad += h[i] != 1.0f; }
    printf("uninitialized_shared_fixed: %s\n", bad ? "WRONG" : "right");
    return bad ? 1 : 0;
}
