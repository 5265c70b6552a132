// BROKEN: no __syncthreads between thread 0's last write of the block sum into s[0] and every thread's read of it; the emulator must make the result wrong under EMU_THREAD_ORDER=reverse or random (the program prints it and exits 1 when it differs from the CPU reference). Under EMU_CHECK=1, in any order, racecheck must name the read of s[0] and thread 0's write (exit 86).
// A block-level reduction through shared memory (a tree sum), then every thread divides its input
// by the block's sum. Under forward order thread 0 happens to finish the sum before the others read
// it; under reverse the others read a partial sum.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 256
#define BLOCKS 4

__global__ void normalize(const float* in, float* out) {
    __shared__ float s[N];
    int tid = threadIdx.x;
    const float* x = in + blockIdx.x * N;
    s[tid] = x[tid];
    for (int stride = N / 2; stride > 0; stride /= 2) {
        __syncthreads();
        if (tid < stride) { s[tid] += s[tid + stride]; } // RACE-write
    }
    // BUG: the __syncthreads() that must come here is missing
    out[blockIdx.x * N + tid] = x[tid] / s[0]; // RACE: reads s[0] while thread 0 may still add into it
}

int main() {
    float h_in[BLOCKS * N], h_out[BLOCKS * N], ref[BLOCKS * N];
    for (int i = 0; i < BLOCKS * N; i++) { h_in[i] = (float)(i % 7 + 1); }
    for (int b = 0; b < BLOCKS; b++) {
        double sum = 0.0;
        for (int i = 0; i < N; i++) { sum += h_in[b * N + i]; }
        for (int i = 0; i < N; i++) { ref[b * N + i] = (float)(h_in[b * N + i] / sum); }
    }
    float *d_in, *d_out;
    cudaMalloc(&d_in, sizeof(h_in));
    cudaMalloc(&d_out, sizeof(h_out));
    cudaMemcpy(d_in, h_in, sizeof(h_in), cudaMemcpyHostToDevice);
    normalize<<<BLOCKS, N>>>(d_in, d_out);
    if (cudaGetLastError() != cudaSuccess) { printf("launch failed\n"); return 2; }
    cudaMemcpy(h_out, d_out, sizeof(h_out), cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < BLOCKS * N; i++) {
        if (!(fabsf(h_out[i] - ref[i]) <= 1e-5f * fabsf(ref[i]))) { wrong++; }
    }
    printf("out[1] = %g (reference %g), %d of %d wrong\n", h_out[1], ref[1], wrong, BLOCKS * N);
    printf(wrong ? "result: WRONG\n" : "result: right\n");
    cudaFree(d_in);
    cudaFree(d_out);
    return wrong ? 1 : 0;
}
