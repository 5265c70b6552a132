// BROKEN (memcheck): 16-byte vector loads at an address that is 4 bytes past a 16-byte boundary: in mode "float4" a float4 load (on the CPU an unaligned load that runs silently), in mode "int4" an int4 load (an aligned SSE load may fault without an address). A GPU raises "misaligned address" for both. Under EMU_CHECK=1 the emulator must exit 86 with "memcheck", "misaligned 16-byte read", "misaligned address", the kernel and the line. (Without EMU_CHECK, what the CPU does depends on the instruction g++ picks: an unaligned load runs; an aligned one faults, and the fault handler then says "misaligned" and names the line.)
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

// out[i] = sum of the four values starting at in + 1 + 4 i (the +1 is the bug: rows were meant to start at in + 4 i)
__global__ void sum4_float(const float* in, float* out) {
    int i = threadIdx.x;
    float4 v = *(const float4*)(in + 1 + 4 * i); // BUG-float4: in + 1 is not 16-byte aligned
    out[i] = v.x + v.y + v.z + v.w;
}

__global__ void sum4_int(const int* in, int* out) {
    int i = threadIdx.x;
    int4 v = *(const int4*)(in + 1 + 4 * i); // BUG-int4: in + 1 is not 16-byte aligned
    out[i] = v.x + v.y + v.z + v.w;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "float4";
    const int n = 32;
    static int h[4 * n + 4];
    for (int i = 0; i < 4 * n + 4; i++) { h[i] = i; }
    void *in, *out;
    cudaMalloc(&in, sizeof(h));
    cudaMalloc(&out, n * sizeof(int));
    cudaMemcpy(in, h, sizeof(h), cudaMemcpyHostToDevice);
    if (strcmp(mode, "int4") == 0) { sum4_int<<<1, n>>>((const int*)in, (int*)out); }
    else { sum4_float<<<1, n>>>((const float*)in, (float*)out); }
    cudaDeviceSynchronize();
    printf("the misaligned %s load ran\n", mode);
    return 0;
}
