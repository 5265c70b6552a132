// BROKEN: what EMU_CHECK=1 sees of cp.async and ldmatrix (their bytes go through the same checks
// as plain loads and stores: the copy's global read when it is issued, its shared write when it
// lands at the issuing thread's wait, ldmatrix's rows as shared loads of the lanes that give them).
// Without EMU_CHECK (own) prints "result: WRONG"; the others may print right. Under EMU_CHECK=1
// the emulator must exit 86:
//   own:      each thread reads its copy before its wait: racecheck, the read's and the copy's lines;
//   neighbor: each thread waits for its own copy, then reads its neighbour's row with no barrier
//             (lane 0 reads row 1 before lane 1's copy lands there): racecheck, the read's and
//             the copy's lines;
//   uninit:   the global source was never written (cudaMalloc, no copy): initcheck, the copy's line
//             and the allocation;
//   ldmatrix: an ldmatrix of shared bytes nothing wrote: initcheck, the ldmatrix's line.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__device__ void copy16(void* smem, const void* gmem) {
    uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem)); // CP
}

// 8 threads copy an 8x8 tile of 16-bit values (a 16-byte row each), then read it
__global__ void tile_read(const uint16_t* tile, float* out, int how) {
    __shared__ alignas(16) uint16_t s[64];
    __shared__ alignas(16) uint16_t never[64];
    int lane = threadIdx.x;
    if (how == 3) {
        uint32_t r;
        uint32_t addr = (uint32_t)__cvta_generic_to_shared(&never[(lane % 8) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(addr)); // BUG-ldmatrix
        out[lane] = (float)(r & 0xFFFF);
        return;
    }
    if (lane < 8) { s[lane * 8] = 0; } // written once, before a barrier: initcheck is content
    __syncthreads();
    if (lane < 8) { copy16(&s[lane * 8], &tile[lane * 8]); }
    asm volatile("cp.async.commit_group;");
    if (how == 0) {
        out[lane] = lane < 8 ? (float)s[lane * 8] : 0.0f; // BUG-own: before the wait
        asm volatile("cp.async.wait_group 0;");
    } else {
        asm volatile("cp.async.wait_group 0;");
        out[lane] = lane < 8 ? (float)s[((lane + 1) % 8) * 8] : 0.0f; // BUG-neighbor: no barrier after the waits
    }
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "own";
    int mode = strcmp(how, "own") == 0 ? 0 : strcmp(how, "neighbor") == 0 ? 1 : strcmp(how, "uninit") == 0 ? 2 : 3;
    uint16_t h[64];
    for (int i = 0; i < 64; i++) { h[i] = (uint16_t)(i + 1); }
    uint16_t* d_tile;
    float* d_out;
    cudaMalloc(&d_tile, sizeof(h)); // MALLOC
    cudaMalloc(&d_out, 32 * sizeof(float));
    if (mode != 2) { cudaMemcpy(d_tile, h, sizeof(h), cudaMemcpyHostToDevice); }
    tile_read<<<1, 32>>>(d_tile, d_out, mode == 2 ? 1 : mode);
    float out[32];
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int lane = 0; lane < 8 && mode == 0; lane++) { wrong += out[lane] != (float)h[lane * 8]; }
    printf("result: %s (%s)\n", wrong ? "WRONG" : "right", how);
    return wrong ? 1 : 0;
}
