// BROKEN: a cp.async lands only at the cp.async.wait_group that covers its group: (read) each thread reads its copy before waiting, and sees the emulator's in-flight bytes (NaN), so the program prints "result: WRONG" and exits 1; (ldmatrix) an ldmatrix reads the tile before the wait, and the emulator must exit 86 naming the ldmatrix's line and the cp.async's line; (fixed) the same with the wait and barrier in place: right.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__device__ void copy16(void* smem, const void* gmem) {
    uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem)); // BUG-issue
}

// 32 threads copy an 8x8 tile of 16-bit values (8 rows of 16 bytes: one copy per thread for
// lanes 0-7), then read it
__global__ void early(const uint16_t* tile, float* out, uint32_t* frag, int how) {
    __shared__ alignas(16) uint16_t s[64];
    int lane = threadIdx.x;
    if (lane < 8) { copy16(&s[lane * 8], &tile[lane * 8]); }
    asm volatile("cp.async.commit_group;");
    if (how == 0) {
        out[lane] = lane < 8 ? (float)s[lane * 8] : 0.0f; // BUG-read: before the wait
        asm volatile("cp.async.wait_group 0;");
    } else if (how == 1) {
        uint32_t r;
        uint32_t addr = (uint32_t)__cvta_generic_to_shared(&s[(lane % 8) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(addr)); // BUG-ldmatrix
        frag[lane] = r;
        asm volatile("cp.async.wait_all;");
    } else {
        asm volatile("cp.async.wait_group 0;");
        __syncthreads();
        out[lane] = lane < 8 ? (float)s[lane * 8] : 0.0f;
        uint32_t r;
        uint32_t addr = (uint32_t)__cvta_generic_to_shared(&s[(lane % 8) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(addr));
        frag[lane] = r;
    }
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "read";
    uint16_t h[64];
    for (int i = 0; i < 64; i++) { h[i] = (uint16_t)(i + 1); }
    uint16_t* d_tile;
    float* d_out;
    uint32_t* d_frag;
    cudaMalloc(&d_tile, sizeof(h));
    cudaMalloc(&d_out, 32 * sizeof(float));
    cudaMalloc(&d_frag, 32 * sizeof(uint32_t));
    cudaMemcpy(d_tile, h, sizeof(h), cudaMemcpyHostToDevice);
    early<<<1, 32>>>(d_tile, d_out, d_frag, strcmp(how, "read") == 0 ? 0 : strcmp(how, "ldmatrix") == 0 ? 1 : 2);
    float out[32];
    uint32_t frag[32];
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    cudaMemcpy(frag, d_frag, sizeof(frag), cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int lane = 0; lane < 8; lane++) { wrong += out[lane] != (float)h[lane * 8]; }
    if (strcmp(how, "fixed") == 0) {
        for (int lane = 0; lane < 32; lane++) {
            int r = lane / 4, c = 2 * (lane % 4);
            wrong += frag[lane] != ((uint32_t)h[r * 8 + c] | ((uint32_t)h[r * 8 + c + 1] << 16));
        }
    }
    printf("result: %s (%s)\n", wrong ? "WRONG" : "right", how);
    return wrong ? 1 : 0;
}
