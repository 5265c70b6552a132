// CORRECT twin of cp_async_race.cu: every thread waits for its copy, a barrier, then each reads
// its neighbour's row and the warp ldmatrix's the tile; silent under EMU_CHECK=1, prints right.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

__device__ void copy16(void* smem, const void* gmem) {
    uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem));
}

__global__ void tile_read(const uint16_t* tile, float* out, uint32_t* frag) {
    __shared__ alignas(16) uint16_t s[64];
    int lane = threadIdx.x;
    if (lane < 8) { copy16(&s[lane * 8], &tile[lane * 8]); }
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group 0;");
    __syncthreads();
    out[lane] = lane < 8 ? (float)s[((lane + 1) % 8) * 8] : 0.0f;
    uint32_t r;
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(&s[(lane % 8) * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(addr));
    frag[lane] = r;
}

int main() {
    uint16_t h[64];
    for (int i = 0; i < 64; i++) { h[i] = (uint16_t)(i + 1); }
    uint16_t* d_tile;
    float* d_out;
    uint32_t* d_frag;
    cudaMalloc(&d_tile, sizeof(h));
    cudaMalloc(&d_out, 32 * sizeof(float));
    cudaMalloc(&d_frag, 32 * sizeof(uint32_t));
    cudaMemcpy(d_tile, h, sizeof(h), cudaMemcpyHostToDevice);
    tile_read<<<1, 32>>>(d_tile, d_out, d_frag);
    float out[32];
    uint32_t frag[32];
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    cudaMemcpy(frag, d_frag, sizeof(frag), cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int lane = 0; lane < 8; lane++) { wrong += out[lane] != (float)h[((lane + 1) % 8) * 8]; }
    for (int lane = 0; lane < 32; lane++) {
        int r = lane / 4, c = 2 * (lane % 4);
        wrong += frag[lane] != ((uint32_t)h[r * 8 + c] | ((uint32_t)h[r * 8 + c + 1] << 16));
    }
    printf("result: %s\n", wrong ? "WRONG" : "right");
    return wrong ? 1 : 0;
}
