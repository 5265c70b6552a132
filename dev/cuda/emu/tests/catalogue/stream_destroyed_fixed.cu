// CORRECT (destroyed handles): stream_destroyed.cu with the work queued on the live stream and a fresh event; a destroyed stream's queued work still runs, and cudaDeviceSynchronize waits for it. Must exit 0 with "stream_destroyed_fixed passed" and no "cuda-emu:" line under EMU_CHECK=1 and every EMU_SCHEDULE.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void fill(float* out, float v) { out[threadIdx.x] = v; }

int main() {
    float *d, *e;
    cudaMalloc(&d, 32 * sizeof(float));
    cudaMalloc(&e, 32 * sizeof(float));
    cudaStream_t old_stream, new_stream;
    cudaStreamCreate(&old_stream);
    fill<<<1, 32, 0, old_stream>>>(e, 2.0f);
    cudaStreamDestroy(old_stream);
    cudaStreamCreate(&new_stream);
    cudaEvent_t ev;
    cudaEventCreate(&ev);
    fill<<<1, 32, 0, new_stream>>>(d, 1.0f);
    cudaEventRecord(ev, new_stream);
    cudaEventSynchronize(ev);
    cudaDeviceSynchronize();
    static float h[32];
    cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    int failures = h[31] != 1.0f;
    cudaMemcpy(h, e, sizeof(h), cudaMemcpyDeviceToHost);
    failures += h[31] != 2.0f;
    printf(failures ? "stream_destroyed_fixed: wrong values\n" : "stream_destroyed_fixed passed\n");
    return failures ? 1 : 0;
}
