// BROKEN: sm_90a mistakes the emulator must name (llmc/wgmma.cuh), one per argument: (nombarwait) the wgmma reads a TMA tile without the mbarrier wait: exit 86 naming the wgmma's and the copy's lines, "has not landed"; (read) a plain read of it without the wait: "result: WRONG" (0xFF bytes), and under EMU_CHECK=1 racecheck names the read; (nofence) hand-stored tiles without fence.proxy.async: under EMU_CHECK=1 racecheck names the store and the wgmma; (nowait) no wgmma.wait_group: the accumulators read as NaN ("result: WRONG") and the block's end names the wgmma; (thread) one thread of the warpgroup skips the wgmma: exit 86 naming it; (block96) a block of 96 threads has no whole warpgroup; (refence) a second wgmma after a wait_group without a wgmma.fence; (txunder) arrive.expect_tx announces fewer bytes than the copy brings; (deadlock) it announces more; (initfence) no fence.mbarrier_init after the init; (fixed) all of it right: "result: right".
// NVCC_FLAGS: -gencode arch=compute_90a,code=sm_90a
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../../../llmc/wgmma.cuh"

enum Mode { FIXED, NOMBARWAIT, READ, NOFENCE, NOWAIT, THREAD, BLOCK96, REFENCE, TXUNDER, DEADLOCK, INITFENCE };

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ inline uint32_t smem_addr_of(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
#endif

// D (64 x 64) = A (64 x 64, by TMA, K-major, 128B swizzle) B (64 x 64: B^T hand-stored K-major, 128B swizzle)
__global__ void broken(const __grid_constant__ CUtensorMap map_a, const __nv_bfloat16* Bt, float* D, int mode) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ alignas(1024) __nv_bfloat16 sa[64 * 64];
    __shared__ alignas(1024) __nv_bfloat16 sb[64 * 64];
    __shared__ alignas(8) uint64_t bar;
    int tid = threadIdx.x;
    uint32_t mbar = smem_addr_of(&bar);
    if (tid == 0) {
        mbar_init(mbar, 1);
        if (mode != INITFENCE) { fence_mbarrier_init(); }
    }
    for (int i = tid; i < 64 * 64; i += blockDim.x) {
        int n = i / 64, k = i % 64;
        sb[wgmma_swizzle(n * 128 + k * 2, 1) / 2] = Bt[i]; // BUG-store
    }
    if (mode != NOFENCE && mode != INITFENCE) { fence_proxy_async(); }
    __syncthreads();
    if (tid == 0) {
        uint32_t bytes = mode == TXUNDER ? 4096 : mode == DEADLOCK ? 16384 : 8192;
        mbar_arrive_expect_tx(mbar, bytes);
        tma_load_2d(smem_addr_of(sa), &map_a, 0, 0, mbar); // BUG-copy
    }
    if (mode == READ) {
        float v = __bfloat162float(sa[tid % 64]); // BUG-read
        mbar_wait(mbar, 0);
        D[tid] = v;
        return;
    }
    if (mode != NOMBARWAIT) { mbar_wait(mbar, 0); }
    if (mode == THREAD && tid == 127) { return; } // BUG-thread
    float d[32];
    wgmma_fence();
    for (int kk = 0; kk < 4; kk++) {
        wgmma_ss<64, 0, 0>(d, wgmma_desc(smem_addr_of(sa) + 32 * kk, 16, 1024, 1), // BUG-wgmma
                           wgmma_desc(smem_addr_of(sb) + 32 * kk, 16, 1024, 1), kk > 0);
    }
    wgmma_commit();
    if (mode != NOWAIT) { wgmma_wait<0>(); }
    wgmma_fence_operand(d);
    if (mode == REFENCE) {
        wgmma_ss<64, 0, 0>(d, wgmma_desc(smem_addr_of(sa), 16, 1024, 1), wgmma_desc(smem_addr_of(sb), 16, 1024, 1), 1); // BUG-refence
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operand(d);
    }
    for (int e = 0; e < 32; e++) { D[wgmma_d_row(tid, e) * 64 + wgmma_d_col(tid, e)] = d[e]; }
#endif
}

int main(int argc, char** argv) {
    const char* names[] = {"fixed", "nombarwait", "read", "nofence", "nowait", "thread", "block96", "refence", "txunder",
                           "deadlock", "initfence"};
    int mode = -1;
    for (int i = 0; i < 11; i++) {
        if (argc > 1 && !strcmp(argv[1], names[i])) { mode = i; }
    }
    if (mode < 0) {
        printf("usage: %s fixed|nombarwait|read|nofence|nowait|thread|block96|refence|txunder|deadlock|initfence\n", argv[0]);
        return 2;
    }
    static __nv_bfloat16 hA[64 * 64], hBt[64 * 64];
    for (int i = 0; i < 64 * 64; i++) {
        hA[i] = __float2bfloat16((float)(i % 7 - 3));
        hBt[i] = __float2bfloat16((float)(i % 5 - 2));
    }
    __nv_bfloat16 *dA, *dBt;
    float* dD;
    cudaMalloc(&dA, sizeof(hA));
    cudaMalloc(&dBt, sizeof(hBt));
    cudaMalloc(&dD, 64 * 64 * 4);
    cudaMemcpy(dA, hA, sizeof(hA), cudaMemcpyHostToDevice);
    cudaMemcpy(dBt, hBt, sizeof(hBt), cudaMemcpyHostToDevice);
    cudaMemset(dD, 0, 64 * 64 * 4);
    CUtensorMap map_a;
    if (tma_map_2d_bf16(&map_a, dA, 64, 64, 128, 64, 64)) { return 2; }
    broken<<<1, mode == BLOCK96 ? 96 : 128>>>(map_a, dBt, dD, mode);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("%s\n", cudaGetErrorString(e));
        return 2;
    }
    static float hD[64 * 64];
    cudaMemcpy(hD, dD, sizeof(hD), cudaMemcpyDeviceToHost);
    int bad = 0;
    if (mode == READ) {
        for (int i = 0; i < 128; i++) { bad += hD[i] != __bfloat162float(hA[i % 64]); } // row 0: unswizzled
    } else {
        for (int m = 0; m < 64; m++) {
            for (int n = 0; n < 64; n++) {
                float ref = 0.0f;
                for (int k = 0; k < 64; k++) { ref += __bfloat162float(hA[m * 64 + k]) * __bfloat162float(hBt[n * 64 + k]); }
                bad += hD[m * 64 + n] != ref;
            }
        }
    }
    printf("result: %s\n", bad ? "WRONG" : "right");
    return bad ? 1 : 0;
}
