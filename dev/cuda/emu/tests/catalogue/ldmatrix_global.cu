// BROKEN: ldmatrix reads shared memory only; three ways of pointing it at global memory: (cvta) __cvta_generic_to_shared of a cudaMalloc pointer, (generic) ldmatrix without .shared given a global pointer, (offset) a global pointer cut to 32 bits passed as a .shared offset; the emulator must exit 86 naming the line and "not in this block's shared memory".
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__global__ void load_tile(const uint16_t* global_tile, uint32_t* out, int how) {
    int lane = threadIdx.x;
    const uint16_t* row = global_tile + (lane % 8) * 8;
    uint32_t r = 0;
    if (how == 0) {
        uint32_t addr = (uint32_t)__cvta_generic_to_shared(row); // BUG-cvta
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(addr));
    } else if (how == 1) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.b16 {%0}, [%1];" : "=r"(r) : "l"(row)); // BUG-generic
    } else {
        uint32_t addr = (uint32_t)(uintptr_t)row;
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(addr)); // BUG-offset
    }
    out[lane] = r;
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "cvta";
    uint16_t* d_tile;
    uint32_t* d_out;
    cudaMalloc(&d_tile, 64 * sizeof(uint16_t));
    cudaMalloc(&d_out, 32 * sizeof(uint32_t));
    cudaMemset(d_tile, 0, 64 * sizeof(uint16_t));
    load_tile<<<1, 32>>>(d_tile, d_out, strcmp(how, "cvta") == 0 ? 0 : strcmp(how, "generic") == 0 ? 1 : 2);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the ldmatrix from global memory (%s)\n", how);
    return 0;
}
