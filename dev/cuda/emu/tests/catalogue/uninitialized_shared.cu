// BROKEN (initcheck): a kernel accumulates into a static __shared__ float it never initialized (atomicAdd onto it), and a stencil kernel reads one element of its extern __shared__ array that no thread wrote (the halo); the emulator fills shared memory with 0xFF bytes, so both results are NaN: the program prints "static __shared__: NaN" and "extern __shared__: NaN" and exits 1. Under EMU_CHECK=1 the emulator must exit 86 with "initcheck", "never written", the shared variable ("static __shared__ total"), the kernel and the line of the first read (the atomicAdd); with argument "dynamic" (the first kernel skipped), the extern __shared__ array and the line that reads the halo.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#define N 128

__global__ void block_total(const float* in, float* out) {
    __shared__ float total; // never set to 0
    atomicAdd(&total, in[blockIdx.x * blockDim.x + threadIdx.x]); // BUG-static: reads total
    __syncthreads();
    if (threadIdx.x == 0) { out[blockIdx.x] = total; }
}

__global__ void right_neighbour_diff(const float* in, float* out) {
    extern __shared__ float tile[]; // blockDim.x + 1 floats: the last one is the halo
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[i]; // nobody loads tile[blockDim.x]
    __syncthreads();
    out[i] = tile[threadIdx.x + 1] - tile[threadIdx.x]; // BUG-dynamic: tile[blockDim.x] is read
}

int main(int argc, char** argv) {
    static float h[N];
    for (int i = 0; i < N; i++) { h[i] = (float)i; }
    float *d_in, *d_out;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    int nan_seen = 0;

    if (argc == 1) { block_total<<<2, 64>>>(d_in, d_out); }
    else { cudaMemset(d_out, 0, 2 * sizeof(float)); }
    float totals[2];
    cudaMemcpy(totals, d_out, sizeof(totals), cudaMemcpyDeviceToHost);
    if (isnan(totals[0]) || isnan(totals[1])) { printf("static __shared__: NaN (block totals %g %g)\n", totals[0], totals[1]); nan_seen++; }
    else { printf("static __shared__: %g %g\n", totals[0], totals[1]); }

    right_neighbour_diff<<<2, 64, 65 * sizeof(float)>>>(d_in, d_out);
    cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
    int nans = 0;
    for (int i = 0; i < N; i++) { nans += isnan(h[i]) != 0; }
    if (nans) { printf("extern __shared__: NaN (%d results, out[63] = %g)\n", nans, h[63]); nan_seen++; }
    else { printf("extern __shared__: no NaN\n"); }
    return nan_seen ? 1 : 0;
}
