// CORRECT: llmc/wgmma.cuh on the emulator: 64x64 products (K 32 or 64) by wgmma from shared memory (ss: A and B each K-major or MN-major, with no swizzle or the 128B swizzle, stored by hand with fence.proxy.async) and with A from registers (rs), one with both tiles brought by TMA (128B swizzle, A's last 4 rows out of the tensor: zeros), and a producer/consumer pipeline (a TMA warpgroup and a wgmma warpgroup, 2 stages, full/empty mbarriers, setmaxnreg) over K = 256; each checked exactly against the host's fp32 product (small-integer inputs: every sum is exact in any order). Prints "result: right" and exits 0; any mismatch prints "result: WRONG" and exits 1. Argument "lateread" (BROKEN): the consumers read warp 5's row after arriving on the stage's empty barrier: racecheck (EMU_CHECK=1) must name the read and warp 5's next store; and two warpgroups each storing half of a B tile (fence.proxy.async, an mbarrier of 256 arrivals that both wait on) for both warpgroups' wgmma ("exchange"). Argument "nodswait" (BROKEN): the exchange without the mbarrier wait: racecheck (EMU_CHECK=1) must name the other warpgroup's store and the wgmma. Argument "earlyrelease" (BROKEN): the consumers arrive on the stage's empty barrier before the wgmma.wait_group that covers their wgmma, so the producer's next copy into that stage may land while the wgmma still reads it: the wait must name the wgmma and the change (no EMU_CHECK needed).
// NVCC_FLAGS: -gencode arch=compute_90a,code=sm_90a
// Also compiled by the real nvcc for sm_90a where it exists (dev/cuda/emu/tests/wgmma_nvcc.sh).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../../../llmc/wgmma.cuh"

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            printf("%s: %s\n", #x, cudaGetErrorString(e_));                                                            \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

// operand layouts in shared memory (llmc/wgmma.cuh's canonical layouts), for a tile of 64 x (m or n)
// by KT k: the byte offset of element (x, k) from a 1024-byte aligned tile base, and the descriptor
// of the k16 slice kk
enum Layout { K_SW128, K_NONE, MN_SW128, MN_NONE };
__host__ __device__ inline uint32_t tile_offset(Layout l, int x, int k, int KT) {
    switch (l) {
    case K_SW128: return wgmma_swizzle(x * 128 + k * 2, 1); // KT = 64: one 128-byte row per x
    case K_NONE: return (x % 8) * 16 + (x / 8) * (128 * (KT / 8)) + (k % 8) * 2 + (k / 8) * 128;
    case MN_SW128: return wgmma_swizzle(k * 128 + x * 2, 1); // 64 x per 128-byte row of k
    case MN_NONE: return (x % 8) * 2 + (x / 8) * (128 * (KT / 8)) + (k % 8) * 16 + (k / 8) * 128;
    }
    return 0;
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ inline uint32_t smem_addr_of(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ inline uint64_t tile_desc(Layout l, uint32_t base, int kk, int KT) {
    switch (l) {
    case K_SW128: return wgmma_desc(base + 32 * kk, 16, 1024, 1);
    case K_NONE: return wgmma_desc(base + 256 * kk, 128, 128 * (KT / 8), 0);
    case MN_SW128: return wgmma_desc(base + 2048 * kk, 8192, 1024, 1);
    case MN_NONE: return wgmma_desc(base + 256 * kk, 128, 128 * (KT / 8), 0);
    }
    return 0;
}
#endif

// D (64 x 64, fp32) = A (64 x K, row-major bf16) B (K x 64, row-major bf16), K = 32
template <int RS>
__global__ void gemm_smem(const __nv_bfloat16* A, const __nv_bfloat16* B, float* D, Layout la, Layout lb) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int K = 32, KT = 64;
    __shared__ alignas(1024) __nv_bfloat16 sa[64 * KT];
    __shared__ alignas(1024) __nv_bfloat16 sb[64 * KT];
    int tid = threadIdx.x;
    for (int i = tid; i < 64 * KT; i += 128) { // every byte written (the tiles hold K = 64; the product uses 32)
        int x = i / KT, k = i % KT;
        sa[tile_offset(la, x, k, KT) / 2] = k < K ? A[x * K + k] : __float2bfloat16(0.0f);
        sb[tile_offset(lb, x, k, KT) / 2] = k < K ? B[k * 64 + x] : __float2bfloat16(0.0f);
    }
    fence_proxy_async(); // the generic stores above, for the async proxy (wgmma)
    __syncthreads();
    float d[32];
    uint32_t a_base = smem_addr_of(sa), b_base = smem_addr_of(sb);
    uint32_t a[K / 16][4]; // A from registers (RS): both k16 slices, loaded before the wgmma.fence
    for (int kk = 0; RS && kk < K / 16; kk++) {
        for (int r = 0; r < 4; r++) {
            int row = wgmma_a_row(tid, 2 * r), col = 16 * kk + wgmma_a_col(tid, 2 * r);
            __nv_bfloat162 v = __halves2bfloat162(A[row * K + col], A[row * K + col + 1]);
            memcpy(&a[kk][r], &v, 4);
        }
    }
    int ta = la == MN_SW128 || la == MN_NONE, tb = lb == MN_SW128 || lb == MN_NONE;
    wgmma_fence();
    for (int kk = 0; kk < K / 16; kk++) {
        uint64_t db = tile_desc(lb, b_base, kk, KT);
        if (RS) {
            if (tb) {
                wgmma_rs<64, 1>(d, a[kk], db, kk > 0);
            } else {
                wgmma_rs<64, 0>(d, a[kk], db, kk > 0);
            }
        } else {
            uint64_t da = tile_desc(la, a_base, kk, KT);
            if (!ta && !tb) wgmma_ss<64, 0, 0>(d, da, db, kk > 0);
            if (!ta && tb) wgmma_ss<64, 0, 1>(d, da, db, kk > 0);
            if (ta && !tb) wgmma_ss<64, 1, 0>(d, da, db, kk > 0);
            if (ta && tb) wgmma_ss<64, 1, 1>(d, da, db, kk > 0);
        }
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(d);
    for (int e = 0; e < 32; e++) { D[wgmma_d_row(tid, e) * 64 + wgmma_d_col(tid, e)] = d[e]; }
#endif
}

// D = A (60 x 64: rows 60-63 out of the tensor, zeros) B (64 x 64), both tiles by TMA with the 128B
// swizzle: A K-major (box 64 x 64 of A), B MN-major (box 64 k x 64 n of B as stored, a V tile)
__global__ void gemm_tma(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, float* D) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ alignas(1024) __nv_bfloat16 sa[64 * 64];
    __shared__ alignas(1024) __nv_bfloat16 sb[64 * 64];
    __shared__ alignas(8) uint64_t bar;
    int tid = threadIdx.x;
    uint32_t mbar = smem_addr_of(&bar);
    if (tid == 0) {
        mbar_init(mbar, 1);
        fence_mbarrier_init();
    }
    __syncthreads();
    if (tid == 0) {
        mbar_arrive_expect_tx(mbar, 2 * 64 * 64 * 2);
        tma_load_2d(smem_addr_of(sa), &map_a, 0, 0, mbar);
        tma_load_2d(smem_addr_of(sb), &map_b, 0, 0, mbar);
    }
    mbar_wait(mbar, 0);
    float d[32];
    wgmma_fence();
    for (int kk = 0; kk < 4; kk++) {
        wgmma_ss<64, 0, 1>(d, wgmma_desc(smem_addr_of(sa) + 32 * kk, 16, 1024, 1),
                           wgmma_desc(smem_addr_of(sb) + 2048 * kk, 8192, 1024, 1), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(d);
    for (int e = 0; e < 32; e++) { D[wgmma_d_row(tid, e) * 64 + wgmma_d_col(tid, e)] = d[e]; }
#endif
}

// D = A (64 x 256) B (256 x 64) through a 2-stage pipeline: warpgroup 1 (one thread) brings k-tiles of
// 64 by TMA (A K-major, B^T K-major), warpgroup 0 multiplies; full[s] says a stage landed (expect_tx),
// empty[s] (128 arrivals) that warpgroup 0 is done with it. Warp 5 also stores a row of 32 floats per
// stage with plain stores and arrives on full[s] (so 33 arrivals): the mbarriers alone order those
// stores before warpgroup 0's reads, and those reads before warp 5's next stores (E sums them).
__global__ void __launch_bounds__(256) gemm_pipeline(const __grid_constant__ CUtensorMap map_a,
                                                     const __grid_constant__ CUtensorMap map_bt, float* D, float* E,
                                                     int late) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ alignas(1024) __nv_bfloat16 sa[2][64 * 64];
    __shared__ alignas(1024) __nv_bfloat16 sb[2][64 * 64];
    __shared__ alignas(8) uint64_t full[2];
    __shared__ alignas(8) uint64_t empty[2];
    __shared__ float rows[2][32];
    int tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < 2; s++) {
            mbar_init(smem_addr_of(&full[s]), 33);
            mbar_init(smem_addr_of(&empty[s]), 128);
        }
        fence_mbarrier_init();
    }
    __syncthreads();
    const int KTILES = 4;
    if (tid >= 128) { // the producer warpgroup
        setmaxnreg_dec<40>();
        if (tid == 128) {
            for (int kt = 0; kt < KTILES; kt++) {
                int s = kt % 2;
                if (kt >= 2) { mbar_wait(smem_addr_of(&empty[s]), (kt / 2 - 1) & 1); }
                mbar_arrive_expect_tx(smem_addr_of(&full[s]), 2 * 64 * 64 * 2);
                tma_load_2d(smem_addr_of(sa[s]), &map_a, 64 * kt, 0, smem_addr_of(&full[s]));
                tma_load_2d(smem_addr_of(sb[s]), &map_bt, 64 * kt, 0, smem_addr_of(&full[s]));
            }
        }
        if (tid / 32 == 5) {
            for (int kt = 0; kt < KTILES; kt++) {
                int s = kt % 2;
                if (kt >= 2) { mbar_wait(smem_addr_of(&empty[s]), (kt / 2 - 1) & 1); }
                rows[s][tid % 32] = (float)(100 * kt + tid % 32);
                mbar_arrive(smem_addr_of(&full[s]));
            }
        }
        return;
    }
    setmaxnreg_inc<232>();
    float d[32], e = 0.0f;
    for (int kt = 0; kt < KTILES; kt++) {
        int s = kt % 2;
        mbar_wait(smem_addr_of(&full[s]), (kt / 2) & 1);
        if (late != 1) { e += rows[s][tid % 32]; }
        wgmma_fence();
        for (int kk = 0; kk < 4; kk++) {
            wgmma_ss<64, 0, 0>(d, wgmma_desc(smem_addr_of(sa[s]) + 32 * kk, 16, 1024, 1), // BUG-early-wgmma
                               wgmma_desc(smem_addr_of(sb[s]) + 32 * kk, 16, 1024, 1), kt > 0 || kk > 0);
        }
        wgmma_commit();
        if (late == 2) { mbar_arrive(smem_addr_of(&empty[s])); } // BUG-early: released before the wgmma's wait
        wgmma_wait<0>(); // BUG-early-wait
        wgmma_fence_operand(d);
        if (late != 2) { mbar_arrive(smem_addr_of(&empty[s])); }
        if (late == 1) { e += rows[s][tid % 32]; } // BUG-late: read after releasing the stage (a race with warp 5)
    }
    for (int i = 0; i < 32; i++) { D[wgmma_d_row(tid, i) * 64 + wgmma_d_col(tid, i)] = d[i]; }
    E[tid] = e;
#endif
}

// D = A (64 x 32) B (32 x 64), computed by each of two warpgroups (warpgroup g into D + 4096 g): A
// from registers, B^T K-major without swizzle in shared memory, of which warpgroup g stores rows n =
// 32 (1 - g) .. 32 (1 - g) + 31 (the other's first) with plain stores, then fence.proxy.async and an
// arrival on an mbarrier of 256 arrivals that both wait on before their wgmma reads all 64 rows
// (llmc/attention_sm90.cuh's dS^T exchange in the dK/dV kernel). wait = 0 (BROKEN, argument
// "nodswait"): warpgroup 0 does not wait; racecheck must name warpgroup 1's store (of row 0, the
// first that warpgroup 0's wgmma reads) and the wgmma.
__global__ void __launch_bounds__(256) gemm_exchange(const __nv_bfloat16* A, const __nv_bfloat16* B, float* D, int wait) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int K = 32;
    __shared__ alignas(1024) __nv_bfloat16 sb[64 * K];
    __shared__ alignas(8) uint64_t bar;
    int tid = threadIdx.x, wg = tid / 128, t = tid % 128;
    uint32_t mbar = smem_addr_of(&bar);
    if (tid == 0) {
        mbar_init(mbar, 256);
        fence_mbarrier_init();
    }
    __syncthreads();
    for (int i = t; i < 32 * K; i += 128) {
        int x = 32 * (1 - wg) + i / K, k = i % K;
        sb[tile_offset(K_NONE, x, k, K) / 2] = B[k * 64 + x]; // BUG-exchange-store
    }
    fence_proxy_async(); // this thread's stores, for the async proxy
    mbar_arrive(mbar);
    if (wait || wg == 1) { mbar_wait(mbar, 0); } // both halves in
    uint32_t a[K / 16][4];
    for (int kk = 0; kk < K / 16; kk++) {
        for (int r = 0; r < 4; r++) {
            int row = wgmma_a_row(t, 2 * r), col = 16 * kk + wgmma_a_col(t, 2 * r);
            __nv_bfloat162 v = __halves2bfloat162(A[row * K + col], A[row * K + col + 1]);
            memcpy(&a[kk][r], &v, 4);
        }
    }
    float d[32];
    wgmma_fence();
    for (int kk = 0; kk < K / 16; kk++) {
        wgmma_rs<64, 0>(d, a[kk], tile_desc(K_NONE, smem_addr_of(sb), kk, K), kk > 0); // BUG-exchange-wgmma
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(d);
    for (int e = 0; e < 32; e++) { D[64 * 64 * wg + wgmma_d_row(t, e) * 64 + wgmma_d_col(t, e)] = d[e]; }
#endif
}

static float bf(__nv_bfloat16 v) { return __bfloat162float(v); }

// host reference: D = A B over K, rows >= m_valid of A taken as zeros
static int compare(const char* what, const float* got, const __nv_bfloat16* A, const __nv_bfloat16* B, int K, int m_valid,
                   int a_stride) {
    int bad = 0;
    for (int m = 0; m < 64; m++) {
        for (int n = 0; n < 64; n++) {
            float ref = 0.0f;
            for (int k = 0; k < K; k++) { ref += m < m_valid ? bf(A[m * a_stride + k]) * bf(B[k * 64 + n]) : 0.0f; }
            if (got[m * 64 + n] != ref) {
                if (bad < 3) { printf("%s: D[%d][%d] = %g, expected %g\n", what, m, n, got[m * 64 + n], ref); }
                bad++;
            }
        }
    }
    printf("%s: %s\n", what, bad ? "WRONG" : "right");
    return bad;
}

static void fill(__nv_bfloat16* h, int n, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        h[i] = __float2bfloat16((float)((int)((seed >> 16) % 9) - 4)); // -4 .. 4: exact products and sums
    }
}

int main(int argc, char** argv) {
    const char* only = argc > 1 ? argv[1] : "all";
    const int K = 256;
    static __nv_bfloat16 hA[64 * K], hB[K * 64], hBt[64 * K];
    fill(hA, 64 * K, 1);
    fill(hB, K * 64, 2);
    for (int k = 0; k < K; k++) {
        for (int n = 0; n < 64; n++) { hBt[n * K + k] = hB[k * 64 + n]; }
    }
    __nv_bfloat16 *dA, *dB, *dBt, *dA32, *dB32;
    float *dD, *dE;
    CHECK(cudaMalloc(&dE, 128 * 4));
    CHECK(cudaMalloc(&dA, sizeof(hA)));
    CHECK(cudaMalloc(&dB, sizeof(hB)));
    CHECK(cudaMalloc(&dBt, sizeof(hBt)));
    CHECK(cudaMalloc(&dA32, 64 * 32 * 2));
    CHECK(cudaMalloc(&dB32, 32 * 64 * 2));
    CHECK(cudaMalloc(&dD, 64 * 64 * 4));
    CHECK(cudaMemcpy(dA, hA, sizeof(hA), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, hB, sizeof(hB), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dBt, hBt, sizeof(hBt), cudaMemcpyHostToDevice));
    static __nv_bfloat16 hA32[64 * 32];
    for (int m = 0; m < 64; m++) {
        for (int k = 0; k < 32; k++) { hA32[m * 32 + k] = hA[m * K + k]; }
    }
    CHECK(cudaMemcpy(dA32, hA32, sizeof(hA32), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB32, hB, 32 * 64 * 2, cudaMemcpyHostToDevice)); // B's first 32 rows
    static float hD[64 * 64];
    int bad = 0;
    struct {
        const char* name;
        int rs;
        Layout la, lb;
    } cases[] = {{"ss K-major 128B x K-major 128B", 0, K_SW128, K_SW128},
                 {"ss K-major none x K-major none", 0, K_NONE, K_NONE},
                 {"ss MN-major 128B x MN-major 128B (both transposed)", 0, MN_SW128, MN_SW128},
                 {"ss K-major 128B x MN-major none (B transposed)", 0, K_SW128, MN_NONE},
                 {"ss MN-major none x K-major 128B (A transposed)", 0, MN_NONE, K_SW128},
                 {"rs x K-major 128B", 1, K_SW128, K_SW128},
                 {"rs x MN-major 128B (B transposed)", 1, K_SW128, MN_SW128}};
    if (!strcmp(only, "all") || !strcmp(only, "smem")) {
        for (auto& c : cases) {
            CHECK(cudaMemset(dD, 0, 64 * 64 * 4));
            if (c.rs) {
                gemm_smem<1><<<1, 128>>>(dA32, dB32, dD, c.la, c.lb);
            } else {
                gemm_smem<0><<<1, 128>>>(dA32, dB32, dD, c.la, c.lb);
            }
            CHECK(cudaGetLastError());
            CHECK(cudaMemcpy(hD, dD, sizeof(hD), cudaMemcpyDeviceToHost));
            bad += compare(c.name, hD, hA32, hB, 32, 64, 32);
        }
    }
    if (!strcmp(only, "all") || !strcmp(only, "exchange") || !strcmp(only, "nodswait")) {
        float* dD2;
        CHECK(cudaMalloc(&dD2, 2 * 64 * 64 * 4));
        gemm_exchange<<<1, 256>>>(dA32, dB32, dD2, strcmp(only, "nodswait") != 0);
        CHECK(cudaGetLastError());
        static float hD2[2 * 64 * 64];
        CHECK(cudaMemcpy(hD2, dD2, sizeof(hD2), cudaMemcpyDeviceToHost));
        bad += compare("exchange: B^T stored half by each warpgroup, mbarrier, warpgroup 0's wgmma", hD2, hA32, hB, 32, 64, 32);
        bad += compare("exchange: ... warpgroup 1's wgmma", hD2 + 64 * 64, hA32, hB, 32, 64, 32);
        CHECK(cudaFree(dD2));
    }
    if (!strcmp(only, "all") || !strcmp(only, "tma") || !strcmp(only, "pipeline") || !strcmp(only, "lateread") ||
        !strcmp(only, "earlyrelease")) {
        CUtensorMap map_a, map_b, map_a60, map_bt;
        if (tma_map_2d_bf16(&map_a60, dA, 60, K, K * 2, 64, 64) || tma_map_2d_bf16(&map_b, dB, K, 64, 128, 64, 64) ||
            tma_map_2d_bf16(&map_a, dA, 64, K, K * 2, 64, 64) || tma_map_2d_bf16(&map_bt, dBt, 64, K, K * 2, 64, 64)) {
            printf("result: WRONG (tensor maps)\n");
            return 1;
        }
        if (strcmp(only, "pipeline") && strcmp(only, "lateread") && strcmp(only, "earlyrelease")) {
            CHECK(cudaMemset(dD, 0, 64 * 64 * 4));
            gemm_tma<<<1, 128>>>(map_a60, map_b, dD);
            CHECK(cudaGetLastError());
            CHECK(cudaMemcpy(hD, dD, sizeof(hD), cudaMemcpyDeviceToHost));
            bad += compare("TMA 128B: A K-major (rows 60-63 out of bounds), B MN-major", hD, hA, hB, 64, 60, K);
        }
        if (strcmp(only, "tma")) {
            CHECK(cudaMemset(dD, 0, 64 * 64 * 4));
            gemm_pipeline<<<1, 256>>>(map_a, map_bt, dD, dE, !strcmp(only, "lateread") ? 1 : !strcmp(only, "earlyrelease") ? 2 : 0);
            CHECK(cudaGetLastError());
            CHECK(cudaMemcpy(hD, dD, sizeof(hD), cudaMemcpyDeviceToHost));
            bad += compare("pipeline: TMA warpgroup + wgmma warpgroup, 2 stages, K = 256", hD, hA, hB, K, 64, K);
            static float hE[128];
            CHECK(cudaMemcpy(hE, dE, sizeof(hE), cudaMemcpyDeviceToHost));
            int bad_e = 0;
            for (int i = 0; i < 128; i++) { bad_e += hE[i] != (float)(100 * (0 + 1 + 2 + 3) + 4 * (i % 32)); }
            printf("pipeline: warp 5's plain stores, ordered by the mbarriers: %s\n", bad_e ? "WRONG" : "right");
            bad += bad_e;
        }
    }
    printf("result: %s\n", bad ? "WRONG" : "right");
    return bad ? 1 : 0;
}
