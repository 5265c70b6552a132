// CORRECT: cooperative groups (the emulator's own cooperative_groups.h): this_thread_block's queries and sync in a 3-D block; tiled_partition<N> of the block for N = 1, 2, 4, 8, 16, 32 and of a tile, with thread_rank, num_threads, meta_group_rank/size, shfl, shfl_up, shfl_down, shfl_xor, any, all, ballot, sync; cg::reduce with plus, less, greater, bit_and, bit_or, bit_xor and a lambda on int, float and a 24-byte struct; compared with host-computed values; must exit 0 and print "cg_ok passed" under every EMU_THREAD_ORDER. Also compiles with nvcc -arch=sm_80 and sm_90.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

namespace cg = cooperative_groups;

static int failures = 0;
#define EXPECT(cond, ...)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            if (failures++ < 20) { printf("FAIL line %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); }            \
        }                                                                                                              \
    } while (0)

// ---------------------------------------------------------------------------------------------
// 1. the block: a (8, 4, 2) block in a (3, 2) grid writes what thread_block says

struct BlockView { unsigned rank, size, gi[3], ti[3], dim[3]; };

__global__ void block_queries(BlockView* out, int* order) {
    cg::thread_block block = cg::this_thread_block();
    unsigned g = blockIdx.x + gridDim.x * blockIdx.y;
    BlockView v;
    v.rank = block.thread_rank();
    v.size = block.num_threads();
    dim3 gi = block.group_index(), ti = block.thread_index(), dim = block.dim_threads();
    v.gi[0] = gi.x, v.gi[1] = gi.y, v.gi[2] = gi.z;
    v.ti[0] = ti.x, v.ti[1] = ti.y, v.ti[2] = ti.z;
    v.dim[0] = dim.x, v.dim[1] = dim.y, v.dim[2] = dim.z;
    out[g * 64 + v.rank] = v;
    // block.sync() orders a write by one thread before reads by all
    __shared__ int flag;
    if (block.thread_rank() == 63) { flag = 1000 + (int)g; }
    block.sync();
    order[g * 64 + block.thread_rank()] = flag;
    cg::sync(block);
}

static void check_block() {
    const int blocks = 6;
    static BlockView v[blocks * 64];
    static int order[blocks * 64];
    BlockView* d_v;
    int* d_order;
    cudaMalloc(&d_v, sizeof(v));
    cudaMalloc(&d_order, sizeof(order));
    block_queries<<<dim3(3, 2), dim3(8, 4, 2)>>>(d_v, d_order);
    cudaMemcpy(v, d_v, sizeof(v), cudaMemcpyDeviceToHost);
    cudaMemcpy(order, d_order, sizeof(order), cudaMemcpyDeviceToHost);
    for (int g = 0; g < blocks; g++) {
        for (unsigned r = 0; r < 64; r++) {
            const BlockView& x = v[g * 64 + r];
            bool ok = x.rank == r && x.size == 64 && x.gi[0] == (unsigned)g % 3 && x.gi[1] == (unsigned)g / 3 &&
                      x.gi[2] == 0 && x.ti[0] == r % 8 && x.ti[1] == r / 8 % 4 && x.ti[2] == r / 32 && x.dim[0] == 8 &&
                      x.dim[1] == 4 && x.dim[2] == 2;
            EXPECT(ok, "block %d rank %u: rank %u size %u group_index (%u,%u,%u) thread_index (%u,%u,%u)", g, r, x.rank,
                   x.size, x.gi[0], x.gi[1], x.gi[2], x.ti[0], x.ti[1], x.ti[2]);
            EXPECT(order[g * 64 + r] == 1000 + g, "block %d rank %u read %d after block.sync()", g, r, order[g * 64 + r]);
        }
    }
    cudaFree(d_v);
    cudaFree(d_order);
}

// ---------------------------------------------------------------------------------------------
// 2. tiles of N threads (blocks of 64: two warps): each thread writes what its tile says

#define NT 12 // results per thread

template <unsigned N> __global__ void tile_ops(int* out) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<N> tile = cg::tiled_partition<N>(block);
    int r = (int)tile.thread_rank(), v = (int)block.thread_rank() * 3 + 1;
    int* o = out + block.thread_rank() * NT;
    o[0] = r;
    o[1] = (int)tile.num_threads();
    o[2] = (int)tile.meta_group_rank();
    o[3] = (int)tile.meta_group_size();
    o[4] = tile.shfl(v, (unsigned)(N - 1));       // the tile's last thread's value
    o[5] = tile.shfl_up(v, 1);                    // the previous one's (rank 0 keeps its own)
    o[6] = tile.shfl_down(v, 1);                  // the next one's (the last keeps its own)
    o[7] = tile.shfl_xor(v, N > 1 ? 1 : 0);       // its neighbour's
    o[8] = tile.any(r == 0);
    o[9] = tile.all(r < (int)N - 1) * 2 + tile.all(r < (int)N); // false, true: 1
    o[10] = (int)tile.ballot(r % 2 == 0);
    tile.sync();
    // a tile of this tile: N/2 threads (N >= 2)
    if constexpr (N >= 2) {
        auto half = cg::tiled_partition<N / 2>(tile);
        o[11] = (int)half.meta_group_rank() * 100 + (int)half.thread_rank();
    } else {
        o[11] = 0;
    }
}

template <unsigned N> static void check_tile() {
    static int out[64 * NT];
    int* d_out;
    cudaMalloc(&d_out, sizeof(out));
    tile_ops<N><<<1, 64>>>(d_out);
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    for (int t = 0; t < 64; t++) {
        int r = t % N, first = t - r;
        auto V = [](int rank) { return rank * 3 + 1; };
        const int* o = out + t * NT;
        unsigned even = 0;
        for (unsigned i = 0; i < N; i += 2) { even |= 1u << i; }
        EXPECT(o[0] == r && o[1] == (int)N && o[2] == t / (int)N && o[3] == 64 / (int)N,
               "tile<%u> thread %d: rank %d size %d meta %d/%d", N, t, o[0], o[1], o[2], o[3]);
        EXPECT(o[4] == V(first + N - 1), "tile<%u> thread %d shfl: %d", N, t, o[4]);
        EXPECT(o[5] == V(r > 0 ? t - 1 : t), "tile<%u> thread %d shfl_up: %d", N, t, o[5]);
        EXPECT(o[6] == V(r < (int)N - 1 ? t + 1 : t), "tile<%u> thread %d shfl_down: %d", N, t, o[6]);
        EXPECT(o[7] == V(N > 1 ? first + (r ^ 1) : t), "tile<%u> thread %d shfl_xor: %d", N, t, o[7]);
        EXPECT(o[8] == 1 && o[9] == 1, "tile<%u> thread %d any %d all %d", N, t, o[8], o[9]);
        EXPECT((unsigned)o[10] == even, "tile<%u> thread %d ballot 0x%x, expected 0x%x", N, t, o[10], even);
        if constexpr (N >= 2) {
            EXPECT(o[11] == (r / (int)(N / 2)) * 100 + r % (int)(N / 2), "tile<%u> thread %d half tile: %d", N, t, o[11]);
        }
    }
    cudaFree(d_out);
}

// ---------------------------------------------------------------------------------------------
// 3. cg::reduce over warps (tiles of 32) and tiles of 8

struct Stats { // 24 bytes: reduced through two 16-byte shuffles
    double sum;
    float lo, hi;
    int count, pad;
};

__device__ Stats merge(const Stats& a, const Stats& b) {
    Stats s;
    s.sum = a.sum + b.sum;
    s.lo = fminf(a.lo, b.lo);
    s.hi = fmaxf(a.hi, b.hi);
    s.count = a.count + b.count;
    s.pad = 0;
    return s;
}

__global__ void reductions(const int* in, int* iout, float* fout, Stats* sout) {
    cg::thread_block block = cg::this_thread_block();
    auto warp = cg::tiled_partition<32>(block);
    auto eight = cg::tiled_partition<8>(block);
    int t = block.thread_rank(), v = in[t];
    int w = t / 32, e = t / 8;
    int sum = cg::reduce(warp, v, cg::plus<int>());
    int lo = cg::reduce(warp, v, cg::less<int>());
    int hi = cg::reduce(warp, v, cg::greater<int>());
    int band = cg::reduce(warp, v | 0x100, cg::bit_and<int>());
    int bor = cg::reduce(warp, v, cg::bit_or<int>());
    int bxor = cg::reduce(warp, v, cg::bit_xor<int>());
    int sum8 = cg::reduce(eight, v, [](int a, int b) { return a + b; });
    float fsum = cg::reduce(warp, (float)v * 0.5f, cg::plus<float>());
    Stats mine = {(double)v, (float)v, (float)v, 1, 0};
    Stats all = cg::reduce(warp, mine, [](const Stats& a, const Stats& b) { return merge(a, b); });
    if (warp.thread_rank() == 0) {
        int* o = iout + w * 7;
        o[0] = sum, o[1] = lo, o[2] = hi, o[3] = band, o[4] = bor, o[5] = bxor;
        fout[w] = fsum;
        sout[w] = all;
    }
    if (eight.thread_rank() == 7) { iout[2 * 7 + e] = sum8; } // after the two warps' 14 values
}

static void check_reduce() {
    static int in[64], iout[14 + 8];
    float fout[2];
    Stats sout[2];
    for (int i = 0; i < 64; i++) { in[i] = (i * 37) % 101 - 40; }
    int *d_in, *d_iout;
    float* d_fout;
    Stats* d_sout;
    cudaMalloc(&d_in, sizeof(in));
    cudaMalloc(&d_iout, sizeof(iout));
    cudaMalloc(&d_fout, sizeof(fout));
    cudaMalloc(&d_sout, sizeof(sout));
    cudaMemcpy(d_in, in, sizeof(in), cudaMemcpyHostToDevice);
    cudaMemset(d_iout, 0, sizeof(iout)); // slots 6 and 13 stay unwritten by the kernel (initcheck: the copy back reads them)
    reductions<<<1, 64>>>(d_in, d_iout, d_fout, d_sout);
    cudaMemcpy(iout, d_iout, sizeof(iout), cudaMemcpyDeviceToHost);
    cudaMemcpy(fout, d_fout, sizeof(fout), cudaMemcpyDeviceToHost);
    cudaMemcpy(sout, d_sout, sizeof(sout), cudaMemcpyDeviceToHost);
    for (int w = 0; w < 2; w++) {
        int sum = 0, lo = 1 << 30, hi = -(1 << 30), band = -1, bor = 0, bx = 0;
        for (int i = w * 32; i < w * 32 + 32; i++) {
            sum += in[i];
            lo = in[i] < lo ? in[i] : lo;
            hi = in[i] > hi ? in[i] : hi;
            band &= in[i] | 0x100;
            bor |= in[i];
            bx ^= in[i];
        }
        const int* o = iout + w * 7;
        EXPECT(o[0] == sum && o[1] == lo && o[2] == hi, "warp %d plus/less/greater: %d %d %d, expected %d %d %d", w, o[0],
               o[1], o[2], sum, lo, hi);
        EXPECT(o[3] == band && o[4] == bor && o[5] == bx, "warp %d bit ops: %x %x %x", w, o[3], o[4], o[5]);
        EXPECT(fout[w] == 0.5f * sum, "warp %d float sum %g, expected %g (halves of integers: exact)", w, fout[w], 0.5 * sum);
        EXPECT(sout[w].sum == sum && sout[w].lo == lo && sout[w].hi == hi && sout[w].count == 32,
               "warp %d struct reduce: %g %g %g %d", w, sout[w].sum, sout[w].lo, sout[w].hi, sout[w].count);
    }
    for (int e = 0; e < 8; e++) {
        int sum = 0;
        for (int i = e * 8; i < e * 8 + 8; i++) { sum += in[i]; }
        EXPECT(iout[14 + e] == sum, "tile<8> %d lambda sum %d, expected %d", e, iout[14 + e], sum);
    }
    cudaFree(d_in);
    cudaFree(d_iout);
    cudaFree(d_fout);
    cudaFree(d_sout);
}

int main() {
    check_block();
    check_tile<1>();
    check_tile<2>();
    check_tile<4>();
    check_tile<8>();
    check_tile<16>();
    check_tile<32>();
    check_reduce();
    EXPECT(cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess, "a stray error at the end");
    if (failures) {
        printf("cg_ok: %d failures\n", failures);
        return 1;
    }
    printf("cg_ok passed\n");
    return 0;
}
