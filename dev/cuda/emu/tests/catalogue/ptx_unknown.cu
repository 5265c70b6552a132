// BROKEN (does not build): inline PTX outside the emulator's table (here `mov.u32 %0, %%laneid;`, reading a special register); nvcc-cpu must refuse to build it, naming this file, the asm's line and the instruction as "not in the emulator's PTX subset".
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

__global__ void lane_ids(uint32_t* out) {
    uint32_t lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane)); // BUG
    out[threadIdx.x] = lane;
}

int main() {
    uint32_t* d_out;
    cudaMalloc(&d_out, 32 * sizeof(uint32_t));
    lane_ids<<<1, 32>>>(d_out);
    cudaDeviceSynchronize();
    printf("built and ran PTX the emulator does not know\n");
    return 0;
}
