// BROKEN (destroyed handles): a stream is destroyed and a new one created (on a GPU it may get the same handle), then work is queued on the old handle; likewise an event recorded after cudaEventDestroy. The emulator never reuses a handle: without EMU_CHECK the calls return cudaErrorInvalidResourceHandle (the launch with a "cuda-emu: launch error" line), the work runs on no stream and the program prints what the calls returned; with EMU_CHECK=1 each is fatal (exit 86), naming the call's line and the line that destroyed the handle. Argument "stream" (a kernel launch), "copy" (cudaMemcpyAsync), "event" (cudaEventRecord).
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void fill(float* out, float v) { out[threadIdx.x] = v; }

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "stream";
    float* d;
    cudaMalloc(&d, 32 * sizeof(float));
    cudaStream_t old_stream, new_stream;
    cudaStreamCreate(&old_stream);
    cudaStreamDestroy(old_stream); // BUG-destroy
    cudaStreamCreate(&new_stream);
    cudaEvent_t old_event;
    cudaEventCreate(&old_event);
    cudaEventDestroy(old_event); // BUG-event-destroy
    cudaError_t e = cudaSuccess;
    if (strcmp(how, "stream") == 0) {
        fill<<<1, 32, 0, old_stream>>>(d, 1.0f); // BUG-launch
        e = cudaGetLastError();
    } else if (strcmp(how, "copy") == 0) {
        static float h[32];
        e = cudaMemcpyAsync(d, h, sizeof(h), cudaMemcpyHostToDevice, old_stream); // BUG-copy
    } else if (strcmp(how, "event") == 0) {
        e = cudaEventRecord(old_event, new_stream); // BUG-record
    }
    cudaDeviceSynchronize();
    printf("stream_destroyed %s: %s\n", how, cudaGetErrorName(e));
    return 0;
}
