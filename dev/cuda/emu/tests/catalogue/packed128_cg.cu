// CORRECT: a kernel test program in the "16-byte packs + cooperative groups" style of fast CUDA kernels, written for this catalogue: a bf16 layernorm forward (one warp tile per row, rows read and written as 16-byte packs with __ldcs/__stcs, sums with cg::reduce) launched through a host launcher of the same name, and a templated residual kernel launched as residual_forward<T><<<...>>>; validated against a double-precision CPU reference with bounds from bf16's rounding; must exit 0 and print "packed128_cg passed". Also compiles with nvcc -arch=sm_80 and sm_90.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

namespace cg = cooperative_groups;

// ---------------------------------------------------------------------------------------------
// 16 bytes of T, moved as one int4: the address must be 16-byte aligned (every row below starts
// at a multiple of 16 bytes: C is a multiple of 8 bf16 elements, cudaMalloc aligns to 256)

template <typename T> struct alignas(16) Pack128 {
    static constexpr int size = 16 / sizeof(T);
    T v[size];
};

template <typename T> __device__ Pack128<T> load128cs(const T* p) { // streamed: read once
    int4 bits = __ldcs(reinterpret_cast<const int4*>(p));
    Pack128<T> x;
    memcpy(&x, &bits, 16);
    return x;
}
template <typename T> __device__ Pack128<T> load128(const T* p) {
    int4 bits = __ldg(reinterpret_cast<const int4*>(p));
    Pack128<T> x;
    memcpy(&x, &bits, 16);
    return x;
}
template <typename T> __device__ void store128cs(T* p, const Pack128<T>& x) {
    int4 bits;
    memcpy(&bits, &x, 16);
    __stcs(reinterpret_cast<int4*>(p), bits);
}

typedef __nv_bfloat16 bf16;
typedef Pack128<bf16> Pack; // 8 bf16

// ---------------------------------------------------------------------------------------------
// layernorm forward: out (N, C) = (inp - mean) * rstd * weight + bias per row; mean, rstd (N).
// One tile of 32 threads per row; lane l holds packs l, l + 32, ... of the row in registers.

#define MAX_PACKS_PER_LANE 4 // C <= 4 * 32 * 8 = 1024

__global__ void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                                  const bf16* bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= N) { return; } // a whole tile leaves together
    const bf16* x = inp + (size_t)row * C;
    int packs = C / Pack::size;
    Pack held[MAX_PACKS_PER_LANE];
    float sum = 0.0f;
    for (int k = 0; k < MAX_PACKS_PER_LANE; k++) {
        int p = (int)warp.thread_rank() + 32 * k;
        if (p < packs) {
            held[k] = load128cs(x + p * Pack::size);
            for (int i = 0; i < Pack::size; i++) { sum += __bfloat162float(held[k].v[i]); }
        }
    }
    float m = cg::reduce(warp, sum, cg::plus<float>()) / C;
    float var = 0.0f;
    for (int k = 0; k < MAX_PACKS_PER_LANE; k++) {
        int p = (int)warp.thread_rank() + 32 * k;
        if (p < packs) {
            for (int i = 0; i < Pack::size; i++) {
                float d = __bfloat162float(held[k].v[i]) - m;
                var += d * d;
            }
        }
    }
    float s = rsqrtf(cg::reduce(warp, var, cg::plus<float>()) / C + 1e-5f);
    for (int k = 0; k < MAX_PACKS_PER_LANE; k++) {
        int p = (int)warp.thread_rank() + 32 * k;
        if (p < packs) {
            Pack w = load128(weight + p * Pack::size), b = load128(bias + p * Pack::size), o;
            for (int i = 0; i < Pack::size; i++) {
                float n = (__bfloat162float(held[k].v[i]) - m) * s;
                o.v[i] = __float2bfloat16(n * __bfloat162float(w.v[i]) + __bfloat162float(b.v[i]));
            }
            store128cs(out + (size_t)row * C + p * Pack::size, o);
        }
    }
    if (warp.thread_rank() == 0) {
        __stcs(mean + row, m);
        __stcs(rstd + row, s);
    }
}

// the launcher has the kernel's name (and one more parameter)
void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias,
                       int N, int C, cudaStream_t stream) {
    if (C % Pack::size != 0 || C > MAX_PACKS_PER_LANE * 32 * Pack::size) {
        fprintf(stderr, "layernorm_forward: C = %d must be a multiple of %d and at most %d\n", C, Pack::size,
                MAX_PACKS_PER_LANE * 32 * Pack::size);
        exit(1);
    }
    const int block = 128, rows_per_block = block / 32;
    layernorm_forward<<<(N + rows_per_block - 1) / rows_per_block, block, 0, stream>>>(out, mean, rstd, inp, weight,
                                                                                       bias, N, C);
}

// ---------------------------------------------------------------------------------------------
// residual: out = a + b, elementwise over n (a multiple of the pack size), one pack per thread

template <typename T> __global__ void residual_forward(T* out, const T* a, const T* b, int n) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p * Pack128<T>::size >= n) { return; }
    Pack128<T> x = load128cs(a + p * Pack128<T>::size), y = load128cs(b + p * Pack128<T>::size), o;
    for (int i = 0; i < Pack128<T>::size; i++) { o.v[i] = (T)((float)x.v[i] + (float)y.v[i]); }
    store128cs(out + p * Pack128<T>::size, o);
}

// ---------------------------------------------------------------------------------------------

static float frand(unsigned* state) { // uniform in [-1, 1)
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / (float)(1u << 23) - 1.0f;
}

int main() {
    const int N = 37, C = 768; // 37 rows: the last block has one busy warp
    bf16 *h_inp = (bf16*)malloc(N * C * 2), *h_w = (bf16*)malloc(C * 2), *h_b = (bf16*)malloc(C * 2);
    bf16* h_out = (bf16*)malloc(N * C * 2);
    float *h_mean = (float*)malloc(N * 4), *h_rstd = (float*)malloc(N * 4);
    unsigned seed = 42;
    for (int i = 0; i < N * C; i++) { h_inp[i] = __float2bfloat16(2.0f * frand(&seed) + 0.5f); }
    for (int i = 0; i < C; i++) {
        h_w[i] = __float2bfloat16(1.0f + 0.5f * frand(&seed));
        h_b[i] = __float2bfloat16(0.1f * frand(&seed));
    }
    bf16 *d_inp, *d_w, *d_b, *d_out, *d_res;
    float *d_mean, *d_rstd;
    cudaMalloc(&d_inp, N * C * 2);
    cudaMalloc(&d_w, C * 2);
    cudaMalloc(&d_b, C * 2);
    cudaMalloc(&d_out, N * C * 2);
    cudaMalloc(&d_res, N * C * 2);
    cudaMalloc(&d_mean, N * 4);
    cudaMalloc(&d_rstd, N * 4);
    cudaMemcpy(d_inp, h_inp, N * C * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(d_w, h_w, C * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(d_b, h_b, C * 2, cudaMemcpyHostToDevice);
    layernorm_forward(d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C, 0);
    cudaMemcpy(h_out, d_out, N * C * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_mean, d_mean, N * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_rstd, d_rstd, N * 4, cudaMemcpyDeviceToHost);
    int bad = 0;
    double worst = 0;
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) { m += __bfloat162float(h_inp[r * C + i]); }
        m /= C;
        for (int i = 0; i < C; i++) {
            double d = __bfloat162float(h_inp[r * C + i]) - m;
            v += d * d;
        }
        double s = 1.0 / sqrt(v / C + 1e-5);
        // mean and rstd: fp32 sums of 768 terms, relative error well under 1e-5
        if (fabs(h_mean[r] - m) > 1e-5 * (fabs(m) + 1) || fabs(h_rstd[r] - s) > 1e-5 * s) {
            if (bad++ < 5) { printf("row %d: mean %g rstd %g, expected %g %g\n", r, h_mean[r], h_rstd[r], m, s); }
        }
        for (int i = 0; i < C; i++) {
            double want = (__bfloat162float(h_inp[r * C + i]) - m) * s * __bfloat162float(h_w[i]) + __bfloat162float(h_b[i]);
            double got = __bfloat162float(h_out[r * C + i]);
            // bf16 keeps 8 significant bits: rounding to it errs by at most half a unit in the last
            // place, 2^-8 of the value; the fp32 arithmetic before it adds ~1e-7 of the terms (|n*w|,
            // |b| < 8): 1e-5 absolute covers it
            double err = fabs(got - want), tol = ldexp(fabs(want), -8) + 1e-5;
            worst = fmax(worst, err / tol);
            if (err > tol && bad++ < 5) { printf("out[%d][%d] = %g, expected %g\n", r, i, got, want); }
        }
    }
    // residual: bf16 sums of two bf16 values, compared with their float sum rounded to bf16
    residual_forward<bf16><<<(N * C / 8 + 127) / 128, 128>>>(d_res, d_inp, d_out, N * C);
    bf16* h_res = (bf16*)malloc(N * C * 2);
    cudaMemcpy(h_res, d_res, N * C * 2, cudaMemcpyDeviceToHost);
    for (int i = 0; i < N * C; i++) {
        float want = __bfloat162float(__float2bfloat16(__bfloat162float(h_inp[i]) + __bfloat162float(h_out[i])));
        if (__bfloat162float(h_res[i]) != want && bad++ < 5) {
            printf("residual[%d] = %g, expected %g\n", i, __bfloat162float(h_res[i]), want);
        }
    }
    if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess) { bad++; }
    printf("layernorm worst error / bound: %.3f\n", worst);
    if (bad) {
        printf("packed128_cg: %d failures\n", bad);
        return 1;
    }
    printf("packed128_cg passed\n");
    return 0;
}
