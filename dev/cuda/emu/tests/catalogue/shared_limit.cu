// BROKEN LAUNCHES (shared memory limits): mode "static": a kernel with two static __shared__ arrays of 32 KiB each (64 KiB; ptxas refuses more than 48 KiB): the emulator must exit 86 naming the kernel, "static __shared__" and "48 KiB" at its first launch. Mode "sum": a kernel with 32 KiB of static __shared__ runs once with 8 KiB of dynamic shared memory, then is launched with 24 KiB (static + dynamic = 56 KiB over 48 KiB, no cudaFuncSetAttribute): that launch must fail with cudaErrorInvalidConfiguration from cudaGetLastError and not run (the program checks, prints "refused" and exits 0). Mode "first": the same over-limit launch as the kernel's first: the emulator must exit 86 naming the kernel and "cudaErrorInvalidConfiguration". Mode "optin": cudaFuncSetAttribute raises the kernel's dynamic limit to 200 KiB, but 32 KiB static + 200 KiB exceed 227 KiB: the second launch is refused too.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void too_much_static(float* out) {
    __shared__ float a[8192]; // 32 KiB
    __shared__ float b[8192]; // BUG-static: 64 KiB of static shared memory in all
    a[threadIdx.x] = (float)threadIdx.x;
    b[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}

__global__ void static_and_dynamic(float* out) {
    __shared__ float a[8192]; // 32 KiB
    extern __shared__ float d[];
    a[threadIdx.x] = (float)threadIdx.x;
    d[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = a[threadIdx.x] + d[threadIdx.x];
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "sum";
    float* out;
    cudaMalloc(&out, 256 * sizeof(float));
    if (strcmp(mode, "static") == 0) {
        too_much_static<<<1, 256>>>(out);
        cudaDeviceSynchronize();
        printf("64 KiB of static shared memory ran\n");
        return 0;
    }
    if (strcmp(mode, "first") == 0) {
        static_and_dynamic<<<1, 256, 24 * 1024>>>(out); // BUG-first: 32 + 24 KiB without cudaFuncSetAttribute
        cudaDeviceSynchronize();
        printf("56 KiB of shared memory ran\n");
        return 0;
    }
    static_and_dynamic<<<1, 256, 8 * 1024>>>(out); // 40 KiB: fine, and the static size is now known
    cudaDeviceSynchronize();
    if (cudaGetLastError() != cudaSuccess) { printf("FAIL: a 40 KiB launch was refused\n"); return 1; }
    if (strcmp(mode, "optin") == 0) {
        cudaFuncSetAttribute(static_and_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
        static_and_dynamic<<<1, 256, 100 * 1024>>>(out); // BUG-optin: 32 KiB static + 200 KiB opted in > 227 KiB
    } else {
        static_and_dynamic<<<1, 256, 24 * 1024>>>(out); // BUG-sum: 32 + 24 KiB without cudaFuncSetAttribute
    }
    cudaError_t err = cudaGetLastError();
    printf("%s launch: %s\n", mode, err == cudaErrorInvalidConfiguration ? "refused" : cudaGetErrorName(err));
    return err == cudaErrorInvalidConfiguration ? 0 : 1;
}
