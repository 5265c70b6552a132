// CORRECT: inline PTX on tensor cores: mma.sync m16n8k16 (bf16 and f16, "=f" and "+f") with fragments built by the PTX ISA's formulas, ldmatrix .x1/.x2/.x4 with and without .trans against the ISA's layout, cp.async .ca (4, 8 bytes, src-size zero fill) and .cg, and a 64x64x64 bf16 product through a double-buffered cp.async pipeline, ldmatrix and mma, checked exactly against a CPU loop (small integers: every sum is exact in fp32, whatever the order); must exit 0 and print "mma_ok passed" under every EMU_THREAD_ORDER. Also compiles with nvcc -arch=sm_80 and sm_90.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond, ...)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            if (failures++ < 20) { printf("FAIL line %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); }            \
        }                                                                                                              \
    } while (0)

// ---------------------------------------------------------------------------------------------
// the PTX, one wrapper per instruction form

// D = A*B + C, A 16x16 and B 16x8 in bf16 (two per 32-bit register), C and D 16x8 fp32
__device__ void mma_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
}

__device__ void mma_f16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
}

// acc += A*B (the accumulator read and written in place: "+f")
__device__ void mma_bf16_acc(float acc[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ void ldmatrix_x1(uint32_t r[1], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(smem_addr(row)));
}
__device__ void ldmatrix_x2_trans(uint32_t r[2], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(row)));
}
__device__ void ldmatrix_x4(uint32_t r[4], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
}
__device__ void ldmatrix_x4_trans(uint32_t r[4], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared::cta.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
}

__device__ void cp_async_cg16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
template <int BYTES> __device__ void cp_async_ca(void* smem, const void* gmem) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "n"(BYTES) : "memory");
}
// 16 bytes, of which only src_bytes are read; the rest of the destination becomes zeros
__device__ void cp_async_ca16_zfill(void* smem, const void* gmem, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(src_bytes)
                 : "memory");
}
__device__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ void cp_async_wait_group() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// two 16-bit values in one register, the first in the low half
template <typename T> __device__ uint32_t pack2(T lo, T hi) {
    uint16_t l, h;
    memcpy(&l, &lo, 2);
    memcpy(&h, &hi, 2);
    return (uint32_t)l | ((uint32_t)h << 16);
}

// ---------------------------------------------------------------------------------------------
// 1. one 16x8x16 product, fragments built from global memory by the ISA's formulas
// (groupID g = lane >> 2, threadID_in_group t = lane % 4)

template <typename T, bool BF16> __global__ void mma_one_tile(const T* A, const T* B, const float* C, float* D) {
    // A (16, 16) row-major; B (16, 8) row-major (k, n); C, D (16, 8)
    int lane = threadIdx.x, g = lane >> 2, t = lane % 4;
    uint32_t a[4], b[2];
    a[0] = pack2(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
    a[1] = pack2(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
    a[2] = pack2(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
    a[3] = pack2(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
    b[0] = pack2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    b[1] = pack2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    float c[4], d[4];
    for (int i = 0; i < 4; i++) { c[i] = C[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)]; }
    if (BF16) {
        mma_bf16(d, a, b, c);
    } else {
        mma_f16(d, a, b, c);
    }
    for (int i = 0; i < 4; i++) { D[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)] = d[i]; }
}

static float a_value(int i, int k) { return (float)((i * 3 + k * 5) % 7 - 3); }
static float b_value(int k, int j) { return (float)((k * 2 + j) % 5 - 2); }

template <typename T, bool BF16> static void check_one_tile(T (*convert)(float), const char* what) {
    T hA[16 * 16], hB[16 * 8];
    float hC[16 * 8], hD[16 * 8];
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++) hA[i * 16 + k] = convert(a_value(i, k));
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < 8; j++) hB[k * 8 + j] = convert(b_value(k, j));
    for (int i = 0; i < 16 * 8; i++) { hC[i] = (float)(i % 9) * 0.5f - 2.0f; }
    T *dA, *dB;
    float *dC, *dD;
    cudaMalloc(&dA, sizeof(hA));
    cudaMalloc(&dB, sizeof(hB));
    cudaMalloc(&dC, sizeof(hC));
    cudaMalloc(&dD, sizeof(hD));
    cudaMemcpy(dA, hA, sizeof(hA), cudaMemcpyHostToDevice);
    cudaMemcpy(dB, hB, sizeof(hB), cudaMemcpyHostToDevice);
    cudaMemcpy(dC, hC, sizeof(hC), cudaMemcpyHostToDevice);
    mma_one_tile<T, BF16><<<1, 32>>>(dA, dB, dC, dD);
    cudaMemcpy(hD, dD, sizeof(hD), cudaMemcpyDeviceToHost);
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 8; j++) {
            double want = hC[i * 8 + j];
            for (int k = 0; k < 16; k++) { want += (double)a_value(i, k) * b_value(k, j); }
            EXPECT(hD[i * 8 + j] == (float)want, "%s D[%d][%d] = %g, expected %g", what, i, j, hD[i * 8 + j], want);
        }
    }
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaFree(dD);
}

// ---------------------------------------------------------------------------------------------
// 2. ldmatrix against the ISA's layout: four 8x8 matrices of 16-bit values v(m, r, c) in shared
// memory (rows 16 bytes apart, then padded), each lane's registers written out

__device__ __host__ uint16_t lm_value(int m, int r, int c) { return (uint16_t)(1000 * m + 10 * r + c + 1); }

#define LM_PITCH 24 // 16-bit elements per row in shared memory: 48 bytes (rows 16-byte aligned, not contiguous)

__global__ void ldmatrix_layouts(uint32_t* out) {
    __shared__ alignas(16) uint16_t tile[4 * 8 * LM_PITCH];
    int lane = threadIdx.x;
    for (int i = lane; i < 4 * 8 * LM_PITCH; i += 32) {
        int m = i / (8 * LM_PITCH), r = i / LM_PITCH % 8, c = i % LM_PITCH;
        tile[i] = c < 8 ? lm_value(m, r, c) : 0xDEAD;
    }
    __syncwarp();
    const uint16_t* my_row = &tile[(lane / 8) * 8 * LM_PITCH + (lane % 8) * LM_PITCH]; // matrix lane/8, row lane%8
    uint32_t r1[1], r2[2], r4[4], r4t[4];
    ldmatrix_x1(r1, my_row);
    ldmatrix_x2_trans(r2, my_row);
    ldmatrix_x4(r4, my_row);
    ldmatrix_x4_trans(r4t, my_row);
    uint32_t* o = out + lane * 11;
    o[0] = r1[0];
    o[1] = r2[0];
    o[2] = r2[1];
    for (int m = 0; m < 4; m++) {
        o[3 + m] = r4[m];
        o[7 + m] = r4t[m];
    }
}

static void check_ldmatrix() {
    uint32_t* d_out;
    cudaMalloc(&d_out, 32 * 11 * sizeof(uint32_t));
    ldmatrix_layouts<<<1, 32>>>(d_out);
    uint32_t out[32 * 11];
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    for (int lane = 0; lane < 32; lane++) {
        int row = lane / 4, col = 2 * (lane % 4);
        auto plain = [&](int m) { return (uint32_t)lm_value(m, row, col) | ((uint32_t)lm_value(m, row, col + 1) << 16); };
        auto trans = [&](int m) { return (uint32_t)lm_value(m, col, row) | ((uint32_t)lm_value(m, col + 1, row) << 16); };
        const uint32_t* o = out + lane * 11;
        EXPECT(o[0] == plain(0), "ldmatrix .x1 lane %d: 0x%08x, expected 0x%08x", lane, o[0], plain(0));
        EXPECT(o[1] == trans(0) && o[2] == trans(1), "ldmatrix .x2.trans lane %d: 0x%08x 0x%08x", lane, o[1], o[2]);
        for (int m = 0; m < 4; m++) {
            EXPECT(o[3 + m] == plain(m), "ldmatrix .x4 lane %d matrix %d: 0x%08x, expected 0x%08x", lane, m, o[3 + m],
                   plain(m));
            EXPECT(o[7 + m] == trans(m), "ldmatrix .x4.trans lane %d matrix %d: 0x%08x, expected 0x%08x", lane, m,
                   o[7 + m], trans(m));
        }
    }
    cudaFree(d_out);
}

// ---------------------------------------------------------------------------------------------
// 3. cp.async .ca of 4 and 8 bytes and a zero-filled 16-byte copy; each thread copies its own
// pieces, waits for its own groups, and reads only what it copied (no barrier needed). 64
// blocks, so that EMU_THREADS=2 runs blocks on two OS threads at once.

#define CPB 64

__global__ void cp_async_sizes(const uint32_t* src, uint32_t* out) {
    __shared__ alignas(16) uint32_t s[32 * 8];
    int t = blockIdx.x * 32 + threadIdx.x;
    uint32_t* mine = s + threadIdx.x * 8; // 32 bytes per thread
    const uint32_t* from = src + t * 8;
    cp_async_ca<4>(mine, from);      // word 0
    cp_async_ca<8>(mine + 2, from + 2); // words 2, 3
    cp_async_commit();
    cp_async_ca16_zfill(mine + 4, from + 4, 4 * (t % 5)); // words 4..7: the first t%5 from src (4 at most), then zeros
    cp_async_commit();
    cp_async_wait_group<1>(); // the first group has landed
    out[t * 8 + 0] = mine[0];
    out[t * 8 + 2] = mine[2];
    out[t * 8 + 3] = mine[3];
    cp_async_wait_group<0>();
    for (int i = 4; i < 8; i++) { out[t * 8 + i] = mine[i]; }
    out[t * 8 + 1] = 7; // word 1 was never copied
}

static void check_cp_async_sizes() {
    static uint32_t h[CPB * 32 * 8], out[CPB * 32 * 8];
    for (int i = 0; i < CPB * 32 * 8; i++) { h[i] = 0x1000u + (uint32_t)i; }
    uint32_t *d_src, *d_out;
    cudaMalloc(&d_src, sizeof(h));
    cudaMalloc(&d_out, sizeof(out));
    cudaMemcpy(d_src, h, sizeof(h), cudaMemcpyHostToDevice);
    cp_async_sizes<<<CPB, 32>>>(d_src, d_out);
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    for (int t = 0; t < CPB * 32; t++) {
        const uint32_t* o = out + t * 8;
        EXPECT(o[0] == h[t * 8] && o[1] == 7 && o[2] == h[t * 8 + 2] && o[3] == h[t * 8 + 3],
               "cp.async .ca 4/8 thread %d: %x %x %x %x", t, o[0], o[1], o[2], o[3]);
        for (int i = 4; i < 8; i++) {
            uint32_t want = i - 4 < t % 5 ? h[t * 8 + i] : 0u;
            EXPECT(o[i] == want, "cp.async zero fill thread %d word %d: 0x%x, expected 0x%x", t, i, o[i], want);
        }
    }
    cudaFree(d_src);
    cudaFree(d_out);
}

// ---------------------------------------------------------------------------------------------
// 4. C (64, 64) fp32 = A (64, 64) bf16 row-major @ B (64, 64) bf16 row-major, one block of four
// warps, warp w computing rows [16w, 16w + 16). k runs in two chunks of 32: chunk c + 1 is copied
// (cp.async) into one stage of shared memory while chunk c is multiplied from the other.

#define GM 64
#define GN 64
#define GK 64
#define KC 32

__device__ void load_chunk(__nv_bfloat16 (*As)[KC], __nv_bfloat16 (*Bs)[GN], const __nv_bfloat16* A,
                           const __nv_bfloat16* B, int chunk) {
    // A's chunk is 64 rows of 32 (4 pieces of 16 bytes per row), B's 32 rows of 64 (8 per row):
    // 256 pieces each, 2 per thread
    for (int p = threadIdx.x; p < 256; p += blockDim.x) {
        int ar = p / 4, ac = (p % 4) * 8;
        cp_async_cg16(&As[ar][ac], &A[ar * GK + chunk * KC + ac]);
        int br = p / 8, bc = (p % 8) * 8;
        cp_async_cg16(&Bs[br][bc], &B[(chunk * KC + br) * GN + bc]);
    }
}

__global__ void __launch_bounds__(128) gemm64(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C) {
    __shared__ alignas(128) __nv_bfloat16 As[2][GM][KC];
    __shared__ alignas(128) __nv_bfloat16 Bs[2][KC][GN];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
    float acc[GN / 8][4];
    for (int n = 0; n < GN / 8; n++)
        for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
    load_chunk(As[0], Bs[0], A, B, 0);
    cp_async_commit();
    for (int chunk = 0; chunk < GK / KC; chunk++) {
        int stage = chunk % 2;
        if (chunk + 1 < GK / KC) {
            load_chunk(As[1 - stage], Bs[1 - stage], A, B, chunk + 1);
            cp_async_commit();
            cp_async_wait_group<1>(); // this thread's copies of `chunk` have landed
        } else {
            cp_async_wait_group<0>();
        }
        __syncthreads(); // ... and every thread's
        for (int kk = 0; kk < KC; kk += 16) {
            // A's 16x16 fragment: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
            uint32_t a[4];
            ldmatrix_x4(a, &As[stage][warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8][kk + (lane >> 4) * 8]);
            for (int n = 0; n < GN; n += 16) {
                // B is (k, n) row-major: .trans gives each lane two consecutive k of one column n, as b0/b1 need;
                // matrices (k 0-7, n..n+7), (k 8-15, n..n+7), (k 0-7, n+8..), (k 8-15, n+8..)
                uint32_t b[4];
                ldmatrix_x4_trans(b, &Bs[stage][kk + (lane & 7) + ((lane >> 3) & 1) * 8][n + (lane >> 4) * 8]);
                mma_bf16_acc(acc[n / 8], a, b[0], b[1]);
                mma_bf16_acc(acc[n / 8 + 1], a, b[2], b[3]);
            }
        }
        __syncthreads(); // everyone is done with this stage before it is loaded again
    }
    for (int n = 0; n < GN / 8; n++)
        for (int i = 0; i < 4; i++) C[(warp * 16 + (i < 2 ? g : g + 8)) * GN + n * 8 + 2 * t + (i & 1)] = acc[n][i];
}

static void check_gemm64() {
    static __nv_bfloat16 hA[GM * GK], hB[GK * GN];
    static float hC[GM * GN];
    for (int i = 0; i < GM; i++)
        for (int k = 0; k < GK; k++) hA[i * GK + k] = __float2bfloat16(a_value(i, k));
    for (int k = 0; k < GK; k++)
        for (int j = 0; j < GN; j++) hB[k * GN + j] = __float2bfloat16(b_value(k, j));
    __nv_bfloat16 *dA, *dB;
    float* dC;
    cudaMalloc(&dA, sizeof(hA));
    cudaMalloc(&dB, sizeof(hB));
    cudaMalloc(&dC, sizeof(hC));
    cudaMemcpy(dA, hA, sizeof(hA), cudaMemcpyHostToDevice);
    cudaMemcpy(dB, hB, sizeof(hB), cudaMemcpyHostToDevice);
    gemm64<<<1, 128>>>(dA, dB, dC);
    EXPECT(cudaGetLastError() == cudaSuccess, "gemm64 launch");
    cudaMemcpy(hC, dC, sizeof(hC), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < GM; i++) {
        for (int j = 0; j < GN; j++) {
            double want = 0;
            for (int k = 0; k < GK; k++) { want += (double)a_value(i, k) * b_value(k, j); }
            if (hC[i * GN + j] != (float)want && bad++ < 5) {
                EXPECT(false, "gemm64 C[%d][%d] = %g, expected %g", i, j, hC[i * GN + j], want);
            }
        }
    }
    EXPECT(bad == 0, "gemm64: %d wrong elements", bad);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}

static __nv_bfloat16 to_bf16(float x) { return __float2bfloat16(x); }
static __half to_f16(float x) { return __float2half(x); }

int main() {
    check_one_tile<__nv_bfloat16, true>(to_bf16, "bf16");
    check_one_tile<__half, false>(to_f16, "f16");
    check_ldmatrix();
    check_cp_async_sizes();
    check_gemm64();
    EXPECT(cudaDeviceSynchronize() == cudaSuccess, "a stray error at the end");
    if (failures) {
        printf("mma_ok: %d failures\n", failures);
        return 1;
    }
    printf("mma_ok passed\n");
    return 0;
}
