// BROKEN: a 16-byte (or 8-byte) access through the cache-hint functions at an address that is not naturally aligned (a GPU faults with "misaligned address"): (ldcs) a float4 read 4 bytes off, (stcs) an int4 written 8 bytes off, (ldg) a double2 read 8 bytes off; the emulator must exit 86 naming the function, this file and its line and "misaligned address".
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void unaligned(float* buf, int how) {
    char* base = (char*)buf + threadIdx.x * 64;
    if (how == 0) {
        float4 v = __ldcs((const float4*)(base + 4)); // BUG-ldcs
        buf[threadIdx.x] = v.x;
    } else if (how == 1) {
        __stcs((int4*)(base + 8), make_int4(1, 2, 3, 4)); // BUG-stcs
    } else {
        double2 d = __ldg((const double2*)(base + 8)); // BUG-ldg
        buf[threadIdx.x] = (float)d.x;
    }
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "ldcs";
    float* d_buf;
    cudaMalloc(&d_buf, 64 * 64);
    cudaMemset(d_buf, 0, 64 * 64);
    unaligned<<<1, 32>>>(d_buf, strcmp(how, "ldcs") == 0 ? 0 : strcmp(how, "stcs") == 0 ? 1 : 2);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the misaligned access (%s)\n", how);
    return 0;
}
