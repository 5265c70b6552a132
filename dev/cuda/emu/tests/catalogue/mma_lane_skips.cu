// BROKEN: mma.sync is .aligned, every lane of the warp must execute it: (skip) lane 31 skips it and exits, (split) lanes 0-15 and 16-31 reach two different mma instructions; the emulator must exit 86 naming the mma, its line and lane 31 that "exited" (skip), or both lines (split).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// a macro, not a function: the emulator knows an instruction by its source line, and a helper
// function called from two branches would be one line (the README says so)
#define MMA(d, a)                                                                                                      \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%4,%4}, "         \
                 "{%5,%5,%5,%5};"                                                                                      \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                      \
                 : "r"(a), "f"(0.0f))

__global__ void tile(float* out, int split) {
    int lane = threadIdx.x;
    float d[4] = {0, 0, 0, 0};
    uint32_t one = 0x3f803f80u; // two bf16 ones
    if (!split) {
        if (lane == 31) { return; }
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%4,%4}, " // BUG-skip
                     "{%5,%5,%5,%5};"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(one), "f"(0.0f));
    } else if (lane < 16) {
        MMA(d, one); // BUG-split-a
    } else {
        MMA(d, one); // BUG-split-b
    }
    out[lane] = d[0];
}

int main(int argc, char** argv) {
    int split = argc > 1 && strcmp(argv[1], "split") == 0;
    float* d_out;
    cudaMalloc(&d_out, 32 * sizeof(float));
    tile<<<1, 32>>>(d_out, split);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the mma that a lane %s\n", split ? "reached at another line" : "skipped");
    return 0;
}
