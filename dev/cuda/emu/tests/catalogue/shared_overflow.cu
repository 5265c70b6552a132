// BROKEN (memcheck): shared memory written past the end of a variable. Mode "dynamic": a stencil writes its halo at tile[blockDim.x + 1], one past the end of its blockDim.x + 1 floats of extern __shared__ memory (on a GPU the write lands in whatever follows; in the emulator before this check it overwrote the emulator's own thread table). Mode "static": a histogram with 32 bins counts value 32 into bins[32], past a static __shared__ array, where the next static variable lies. Without EMU_CHECK the writes land in unused shared memory (the stencil then reads a never-written NaN, the histogram loses a count);  under EMU_CHECK=1 the emulator must exit 86 with "memcheck", "outside every shared variable", the variable ("extern __shared__" / "static __shared__ bins"), the kernel and the line.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void stencil(const float* in, float* out, int n) {
    extern __shared__ float tile[]; // blockDim.x + 1 floats
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[i];
    if (threadIdx.x == blockDim.x - 1) { tile[blockDim.x + 1] = i + 1 < n ? in[i + 1] : 0.0f; } // BUG-dynamic: + 1 too many
    __syncthreads();
    out[i] = tile[threadIdx.x + 1] - tile[threadIdx.x];
}

__global__ void histogram(const int* values, int* counts) {
    __shared__ int bins[32];
    __shared__ int total;
    if (threadIdx.x < 32) { bins[threadIdx.x] = 0; }
    if (threadIdx.x == 0) { total = 0; }
    __syncthreads();
    atomicAdd(&bins[values[threadIdx.x]], 1); // BUG-static: values go up to 32, bins only to 31
    atomicAdd(&total, 1);
    __syncthreads();
    if (threadIdx.x < 32) { counts[threadIdx.x] = bins[threadIdx.x]; }
    if (threadIdx.x == 0) { counts[32] = total; }
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "dynamic";
    const int n = 256;
    static float hf[n];
    static int hv[n];
    for (int i = 0; i < n; i++) { hf[i] = (float)i, hv[i] = i % 33; }
    float *in, *out;
    int *values, *counts;
    cudaMalloc(&in, sizeof(hf));
    cudaMalloc(&out, sizeof(hf));
    cudaMalloc(&values, sizeof(hv));
    cudaMalloc(&counts, 33 * sizeof(int));
    cudaMemcpy(in, hf, sizeof(hf), cudaMemcpyHostToDevice);
    cudaMemcpy(values, hv, sizeof(hv), cudaMemcpyHostToDevice);
    if (strcmp(mode, "static") == 0) {
        histogram<<<1, n>>>(values, counts);
        int c[33];
        cudaMemcpy(c, counts, sizeof(c), cudaMemcpyDeviceToHost);
        printf("histogram total %d (expected %d)\n", c[32], n);
    } else {
        stencil<<<n / 64, 64, 65 * sizeof(float)>>>(in, out, n);
        cudaMemcpy(hf, out, sizeof(hf), cudaMemcpyDeviceToHost);
        printf("stencil out[63] = %g (expected 1)\n", hf[63]);
    }
    return 0;
}
