// BROKEN: mode "kernel": a kernel writes one float past the end of a 1024-byte cudaMalloc buffer (a multiple of 256 bytes, so the guard page follows at once); the emulator must exit 86 with "past the end" naming the kernel and its launch's file:line. Mode "memcpy": a cudaMemcpy reads beyond an allocation's end; exit 86 with a message naming cudaMemcpy and "runs past its device allocation". Mode "pinned": a cudaMemcpy writes beyond a cudaMallocHost buffer's end; exit 86 with "cudaMemcpy" and "runs past its pinned host allocation".
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void write_one_past(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) { out[i] = 1.0f; } // the bug: <= instead of <
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "kernel";
    const int n = 256; // 1024 bytes
    float* d;
    cudaMalloc(&d, n * sizeof(float));
    if (strcmp(mode, "kernel") == 0) {
        write_one_past<<<2, 256>>>(d, n); // BUG-kernel: thread 256 writes d[256]
        cudaDeviceSynchronize();
        printf("the emulator did not catch the write past the end\n");
        return 0;
    }
    if (strcmp(mode, "pinned") == 0) {
        float* pinned;
        cudaMallocHost(&pinned, n / 2 * sizeof(float));
        cudaMemcpy(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost); // BUG-pinned: 1024 bytes into a 512-byte buffer
        printf("the emulator did not catch the copy past the end of pinned memory\n");
        return 0;
    }
    static float host[2 * n];
    cudaMemcpy(host, d + n / 2, n * sizeof(float), cudaMemcpyDeviceToHost); // BUG-memcpy: 512 bytes past the end
    printf("the emulator did not catch the copy past the end\n");
    return 0;
}
