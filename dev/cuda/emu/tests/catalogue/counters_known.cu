// EXACT COUNTS (EMU_COUNTERS): kernels whose warp-level requests, 32-byte sectors, unique sectors, shared-memory bank-conflict wavefronts and atomics follow from their indexing alone. test_catalogue.sh runs this program with EMU_COUNTERS=FILE and compares each kernel's CSV row with numbers it derives from the sizes below (N, the launch shapes): a wrong counter fails. The program itself only checks its results.
#include <cuda_runtime.h>
#include <stdio.h>

#define N 8192 // floats

// coalesced: each thread copies one float4; a warp moves 512 contiguous bytes = 16 sectors per request
__global__ void copy_float4(const float4* in, float4* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i];
}

// strided: lane i reads in[32 i], 128 bytes apart: every lane its own sector (32 per request);
// the store is coalesced (4 sectors per request)
__global__ void strided_read(const float* in, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[32 * i];
}

// a 32 x 32 tile, block (32, 32): a warp is 32 threads with the same threadIdx.y. Stored by
// column, tile[x][y]: the 32 words of a warp are 32 floats apart, all in bank y: 32 wavefronts.
// Read by row, tile[y][x]: 32 consecutive words, 32 banks: 1 wavefront.
__global__ void tile_conflicts(const float* in, float* out) {
    __shared__ float tile[32][32];
    int x = threadIdx.x, y = threadIdx.y;
    tile[x][y] = in[y * 32 + x];
    __syncthreads();
    out[y * 32 + x] = tile[y][x];
}

// the same with a padded row of 33 floats: word 33 x + y is in bank (x + y) % 32, all different
__global__ void tile_padded(const float* in, float* out) {
    __shared__ float tile[32][33];
    int x = threadIdx.x, y = threadIdx.y;
    tile[x][y] = in[y * 32 + x];
    __syncthreads();
    out[y * 32 + x] = tile[y][x];
}

// every lane reads the same word of global and of shared memory: one sector, one wavefront
__global__ void broadcast(const float* in, float* out) {
    __shared__ float s;
    if (threadIdx.x == 0) { s = 2.0f; }
    __syncthreads();
    out[threadIdx.x] = in[0] + s;
}

// 64 shared atomics and one global atomic per block
__global__ void atomics(int* counter) {
    __shared__ int s;
    if (threadIdx.x == 0) { s = 0; }
    __syncthreads();
    atomicAdd(&s, 1);
    __syncthreads();
    if (threadIdx.x == 0) { atomicAdd(counter, s); }
}

int main() {
    static float h[N];
    for (int i = 0; i < N; i++) { h[i] = (float)i; }
    float *in, *out;
    int* counter;
    cudaMalloc(&in, N * sizeof(float));
    cudaMalloc(&out, N * sizeof(float));
    cudaMalloc(&counter, sizeof(int));
    cudaMemcpy(in, h, sizeof(h), cudaMemcpyHostToDevice);
    cudaMemset(counter, 0, sizeof(int));
    copy_float4<<<N / 4 / 256, 256>>>((const float4*)in, (float4*)out);
    strided_read<<<1, 256>>>(in, out);
    tile_conflicts<<<1, dim3(32, 32)>>>(in, out);
    tile_padded<<<1, dim3(32, 32)>>>(in, out);
    broadcast<<<1, 64>>>(in, out);
    atomics<<<4, 64>>>(counter);
    int c = 0;
    float o[32];
    cudaMemcpy(&c, counter, sizeof(int), cudaMemcpyDeviceToHost);
    cudaMemcpy(o, out, sizeof(o), cudaMemcpyDeviceToHost);
    int ok = c == 256 && o[0] == 2.0f && o[31] == 2.0f;
    printf("counters_known: %s\n", ok ? "right" : "WRONG");
    return ok ? 0 : 1;
}
