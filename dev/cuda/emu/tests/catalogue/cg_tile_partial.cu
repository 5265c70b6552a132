// BROKEN: the rules of cooperative groups, one per run: (reduce) half of a warp tile skips cg::reduce, whose every thread must take part; (sync) one thread of a tile of 8 returns before tile.sync(); (partition) a block of 48 threads cut into tiles of 32 (the block's size must be a multiple of the tile's); the emulator must exit 86 naming this file and the line of the reduce, the sync or the tiled_partition.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

namespace cg = cooperative_groups;

__global__ void partial(const float* in, float* out, int how) {
    cg::thread_block block = cg::this_thread_block();
    float v = in[block.thread_rank()];
    if (how == 0) {
        auto warp = cg::tiled_partition<32>(block);
        if (warp.thread_rank() < 16) {
            v = cg::reduce(warp, v, cg::plus<float>()); // BUG-reduce
        }
    } else if (how == 1) {
        auto tile = cg::tiled_partition<8>(block);
        if (tile.thread_rank() == 5) { return; }
        tile.sync(); // BUG-sync
    } else {
        auto warp = cg::tiled_partition<32>(block); // BUG-partition
        v = cg::reduce(warp, v, cg::plus<float>());
    }
    out[block.thread_rank()] = v;
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "reduce";
    int mode = strcmp(how, "reduce") == 0 ? 0 : strcmp(how, "sync") == 0 ? 1 : 2;
    float *d_in, *d_out;
    cudaMalloc(&d_in, 64 * sizeof(float));
    cudaMalloc(&d_out, 64 * sizeof(float));
    cudaMemset(d_in, 0, 64 * sizeof(float));
    partial<<<1, mode == 2 ? 48 : 64>>>(d_in, d_out, mode);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the broken cooperative group (%s)\n", how);
    return 0;
}
