// BROKEN: ldmatrix rows must be 16-byte aligned (each is 16 bytes, read by four lanes together); lane 5 gives a row address 8 bytes off; the emulator must exit 86 naming the ldmatrix, this file and its line, lane 5 and "not 16-byte aligned".
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

__global__ void load_tile(uint32_t* out) {
    __shared__ alignas(16) uint16_t tile[8 * 16]; // 8 rows of 16 elements (32 bytes)
    int lane = threadIdx.x;
    for (int i = lane; i < 8 * 16; i += 32) { tile[i] = (uint16_t)i; }
    __syncwarp();
    int row = lane % 8, col = lane == 5 ? 4 : 0; // lane 5 starts its row at element 4: 8 bytes in
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(&tile[row * 16 + col]);
    uint32_t r;
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(addr)); // BUG
    out[lane] = r;
}

int main() {
    uint32_t* d_out;
    cudaMalloc(&d_out, 32 * sizeof(uint32_t));
    load_tile<<<1, 32>>>(d_out);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the misaligned ldmatrix row\n");
    return 0;
}
