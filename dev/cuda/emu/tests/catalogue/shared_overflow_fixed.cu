// CORRECT: shared_overflow.cu with the halo at tile[blockDim.x] and 33 histogram bins; both kernels pass silently under EMU_CHECK=1 with the right answers.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void stencil(const float* in, float* out, int n) {
    extern __shared__ float tile[]; // blockDim.x + 1 floats
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[i];
    if (threadIdx.x == blockDim.x - 1) { tile[blockDim.x] = i + 1 < n ? in[i + 1] : (float)(i + 1); } // FIXED
    __syncthreads();
    out[i] = tile[threadIdx.x + 1] - tile[threadIdx.x];
}

__global__ void histogram(const int* values, int* counts) {
    __shared__ int bins[33]; // FIXED: one bin per value 0..32
    __shared__ int total;
    if (threadIdx.x < 33) { bins[threadIdx.x] = 0; }
    if (threadIdx.x == 0) { total = 0; }
    __syncthreads();
    atomicAdd(&bins[values[threadIdx.x]], 1);
    atomicAdd(&total, 1);
    __syncthreads();
    if (threadIdx.x < 33) { counts[threadIdx.x] = bins[threadIdx.x]; }
    if (threadIdx.x == 0) { counts[33] = total; }
}

int main() {
    const int n = 256;
    static float hf[n];
    static int hv[n];
    for (int i = 0; i < n; i++) { hf[i] = (float)i, hv[i] = i % 33; }
    float *in, *out;
    int *values, *counts;
    cudaMalloc(&in, sizeof(hf));
    cudaMalloc(&out, sizeof(hf));
    cudaMalloc(&values, sizeof(hv));
    cudaMalloc(&counts, 34 * sizeof(int));
    cudaMemcpy(in, hf, sizeof(hf), cudaMemcpyHostToDevice);
    cudaMemcpy(values, hv, sizeof(hv), cudaMemcpyHostToDevice);
    histogram<<<1, n>>>(values, counts);
    stencil<<<n / 64, 64, 65 * sizeof(float)>>>(in, out, n);
    int c[34];
    cudaMemcpy(c, counts, sizeof(c), cudaMemcpyDeviceToHost);
    cudaMemcpy(hf, out, sizeof(hf), cudaMemcpyDeviceToHost);
    int bad = c[33] != n;
    for (int i = 0; i < n; i++) { bad += hf[i] != 1.0f; }
    printf("shared_overflow_fixed: %s\n", bad ? "WRONG" : "right");
    return bad ? 1 : 0;
}
