// CORRECT (error paths): runtime calls used wrongly must return the documented error code, leave it as the last error, and not end the process: cudaMemcpy with a cudaMemcpyKind that contradicts the pointers, cudaMemset on pageable host memory, cudaFree of a host pointer and a double cudaFree (cudaErrorInvalidValue, each with a "cuda-emu:" warning naming the call), a destroyed event or stream handle (undefined on a GPU; the emulator answers cudaErrorInvalidResourceHandle), cudaSetDevice past the device count (cudaErrorInvalidDevice). Must exit 0 and print "api_errors passed".
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static int failures = 0;

static void expect(const char* what, cudaError_t got, cudaError_t want) {
    cudaError_t last = cudaGetLastError();
    if (got != want || last != want) {
        printf("FAIL %s: returned %s, last error %s, expected %s\n", what, cudaGetErrorName(got), cudaGetErrorName(last),
               cudaGetErrorName(want));
        failures++;
    } else {
        printf("ok %s: %s\n", what, cudaGetErrorName(got));
    }
}

int main() {
    float *d, host[16];
    float* heap = (float*)malloc(16 * sizeof(float));
    cudaMalloc(&d, 16 * sizeof(float));
    expect("cudaMemcpy device->host marked HostToDevice", cudaMemcpy(host, d, sizeof(host), cudaMemcpyHostToDevice),
           cudaErrorInvalidValue);
    expect("cudaMemcpy host->device marked DeviceToDevice", cudaMemcpy(d, host, sizeof(host), cudaMemcpyDeviceToDevice),
           cudaErrorInvalidValue);
    expect("cudaMemcpy with cudaMemcpyDefault", cudaMemcpy(d, host, sizeof(host), cudaMemcpyDefault), cudaSuccess);
    expect("cudaMemset on pageable host memory", cudaMemset(heap, 0, 16 * sizeof(float)), cudaErrorInvalidValue);
    expect("cudaFree of a host pointer", cudaFree(heap), cudaErrorInvalidValue);
    float* d2;
    cudaMalloc(&d2, 64);
    expect("cudaFree", cudaFree(d2), cudaSuccess);
    expect("cudaFree twice", cudaFree(d2), cudaErrorInvalidValue);
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaEvent_t e;
    cudaEventCreate(&e);
    cudaEventDestroy(e);
    expect("cudaEventRecord of a destroyed event", cudaEventRecord(e, 0), cudaErrorInvalidResourceHandle);
    int count = 0;
    cudaGetDeviceCount(&count);
    expect("cudaSetDevice(count)", cudaSetDevice(count), cudaErrorInvalidDevice);
    expect("cudaSetDevice(0)", cudaSetDevice(0), cudaSuccess);
    cudaStreamDestroy(s);
    cudaDeviceSynchronize();
    expect("cudaStreamDestroy twice", cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
    free(heap);
    if (failures) {
        printf("api_errors: %d failures\n", failures);
        return 1;
    }
    printf("api_errors passed\n");
    return 0;
}
