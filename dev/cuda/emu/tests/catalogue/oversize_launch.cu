// BROKEN LAUNCHES: a 2048-thread block, a grid with y = 70000, 64 KiB of dynamic shared memory without cudaFuncSetAttribute, a block larger than the kernel's __launch_bounds__, a zero grid dimension; each must leave cudaErrorInvalidConfiguration in cudaGetLastError, not run, and be named (file:line) in a "cuda-emu: launch error" warning; the program exits 0 only if all are reported and 64 KiB then works after cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536).
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void mark(int* flag) {
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) { *flag = 1; }
}

__global__ void mark_shared(int* flag) {
    extern __shared__ float big[];
    int n = 65536 / sizeof(float);
    for (int i = threadIdx.x; i < n; i += blockDim.x) { big[i] = (float)i; }
    __syncthreads();
    if (threadIdx.x == 0) { *flag = big[n - 1] == (float)(n - 1) ? 2 : 3; }
}

__global__ void __launch_bounds__(128) bounded(int* flag) {
    if (threadIdx.x == 0) { *flag = 4; }
}

static int failures = 0;

// The launch just made must have failed with cudaErrorInvalidConfiguration, and not run.
static void expect_config_error(const char* what, int* d_flag) {
    cudaError_t err = cudaGetLastError();
    int flag = -1;
    cudaMemcpy(&flag, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
    if (err != cudaErrorInvalidConfiguration) {
        printf("FAIL %s: cudaGetLastError() = %s, expected cudaErrorInvalidConfiguration\n", what, cudaGetErrorName(err));
        failures++;
    } else if (flag != 0) {
        printf("FAIL %s: reported, but the kernel ran (flag %d)\n", what, flag);
        failures++;
    } else {
        printf("reported: %s\n", what);
    }
    if (cudaGetLastError() != cudaSuccess) {
        printf("FAIL %s: the error was not cleared by cudaGetLastError\n", what);
        failures++;
    }
}

int main() {
    int* d_flag;
    cudaMalloc(&d_flag, sizeof(int));
    cudaMemset(d_flag, 0, sizeof(int));
    if (cudaGetLastError() != cudaSuccess) { printf("FAIL setup\n"); return 1; }

    mark<<<1, 2048>>>(d_flag); // BUG-threads: more than 1024 threads per block
    expect_config_error("2048 threads per block", d_flag);

    mark<<<dim3(1, 70000), 32>>>(d_flag); // BUG-gridy: gridDim.y above 65535
    expect_config_error("grid y = 70000", d_flag);

    mark_shared<<<1, 256, 65536>>>(d_flag); // BUG-smem: 64 KiB of dynamic shared memory without the attribute
    expect_config_error("64 KiB dynamic shared memory without cudaFuncSetAttribute", d_flag);

    bounded<<<1, 256>>>(d_flag); // BUG-bounds: 256 threads, __launch_bounds__(128)
    expect_config_error("256 threads above __launch_bounds__(128)", d_flag);

    mark<<<dim3(1, 0), 32>>>(d_flag); // BUG-zero: a zero grid dimension
    expect_config_error("zero grid dimension", d_flag);

    // the correct launches
    int flag = 0;
    bounded<<<1, 128>>>(d_flag);
    cudaMemcpy(&flag, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
    if (cudaGetLastError() != cudaSuccess || flag != 4) { printf("FAIL 128 threads with __launch_bounds__(128): flag %d\n", flag); failures++; }
    if (cudaFuncSetAttribute(mark_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536) != cudaSuccess) {
        printf("FAIL cudaFuncSetAttribute\n");
        failures++;
    }
    mark_shared<<<1, 256, 65536>>>(d_flag);
    cudaError_t err = cudaGetLastError();
    cudaMemcpy(&flag, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess || flag != 2) {
        printf("FAIL 64 KiB after cudaFuncSetAttribute: %s, flag %d\n", cudaGetErrorName(err), flag);
        failures++;
    } else {
        printf("64 KiB after cudaFuncSetAttribute: ran\n");
    }
    if (failures) {
        printf("oversize_launch: %d failures\n", failures);
        return 1;
    }
    printf("oversize_launch passed\n");
    return 0;
}
