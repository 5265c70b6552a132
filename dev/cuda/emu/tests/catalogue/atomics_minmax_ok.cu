// CORRECT: CUDA's atomic overloads, every type its headers declare (int, unsigned int, unsigned long long, long long, float, double, unsigned short CAS, __half, __half2, __nv_bfloat16, __nv_bfloat162), with the implicit conversions of an ordinary call (an int added to an unsigned int, a double exchanged into a float), and the integer min/max of mixed signedness (the unsigned type, as CUDA's headers say: min(-1, 5u) is 5u), long, long long, float with double; results compared with values worked out by hand; must exit 0 and print "atomics_minmax_ok passed" under every EMU_THREAD_ORDER and EMU_CHECK=1. Also compiles with nvcc -arch=sm_80 and sm_90.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

struct Counters {
    int i_add, i_sub, i_min, i_max, i_and, i_or, i_xor, i_exch, i_cas;
    unsigned int u_add, u_sub, u_inc, u_dec, u_min, u_max;
    unsigned long long ull_add, ull_max, ull_cas;
    long long ll_min, ll_max, ll_or;
    float f_add, f_exch;
    double d_add;
    unsigned short us_cas, pad;
    __half h_add, pad2;
    __nv_bfloat16 b_add, pad3;
    __half2 h2_add;
    __nv_bfloat162 b2_add;
};

// 4 blocks x 64 threads, t = global thread index 0..255
__global__ void atomics(Counters* c) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&c->i_add, 2);
    atomicSub(&c->i_sub, 1u);                        // unsigned -> int
    atomicMin(&c->i_min, -t);
    atomicMax(&c->i_max, t);
    atomicAnd(&c->i_and, ~(1 << (t % 31)));
    atomicOr(&c->i_or, 1 << (t % 8));
    atomicXor(&c->i_xor, 1);
    atomicAdd(&c->u_add, 1);                         // int -> unsigned int
    atomicSub(&c->u_sub, 1);
    atomicInc(&c->u_inc, 99u);                       // wraps to 0 after 99: 256 % 100 = 56
    atomicDec(&c->u_dec, 1000);
    atomicMin(&c->u_min, t + 10);
    atomicMax(&c->u_max, (unsigned short)t);         // unsigned short -> unsigned int
    atomicAdd(&c->ull_add, 1);                       // int -> unsigned long long
    atomicMax(&c->ull_max, (unsigned long long)t << 40);
    atomicMin(&c->ll_min, -(long long)t << 33);
    atomicMax(&c->ll_max, t);                        // int -> long long
    atomicOr(&c->ll_or, 1ll << (t % 64));
    atomicAdd(&c->f_add, 1);                         // int -> float
    atomicAdd(&c->d_add, 0.5f);                      // float -> double
    atomicAdd(&c->h_add, __float2half(1.0f));
    atomicAdd(&c->b_add, __float2bfloat16(1.0f));
    atomicAdd(&c->h2_add, __floats2half2_rn(1.0f, 2.0f));
    atomicAdd(&c->b2_add, __floats2bfloat162_rn(1.0f, 2.0f));
    if (t == 5) {
        atomicExch(&c->i_exch, 17);
        atomicExch(&c->f_exch, 2.5);                 // double -> float
        atomicCAS(&c->i_cas, 0, 9);
        atomicCAS(&c->ull_cas, 0ull, 1ull << 50);
        atomicCAS(&c->us_cas, (unsigned short)0, (unsigned short)513);
    }
}

struct MinMax {
    unsigned int mixed_min, mixed_max;
    long l_min;
    unsigned long ul_max;
    long long ll_min;
    unsigned long long ull_mixed_min;
    int i_max;
    float f_min;
    double fd_min, df_max;
};

__global__ void minmax(MinMax* r, int minus_one, int three) {
    r->mixed_min = min(minus_one, 5u);               // (unsigned)-1 vs 5u: 5
    r->mixed_max = max(5u, minus_one);               // 0xffffffff
    r->l_min = min((long)minus_one, (long)three);    // -1
    r->ul_max = max((long)minus_one, 2ul);           // ULONG_MAX
    r->ll_min = min(-3ll, (long long)three);         // -3
    r->ull_mixed_min = min((long long)minus_one, 7ull); // 7
    r->i_max = max(minus_one, three);                // 3
    r->f_min = min(1.5f, -2.0f);                     // -2
    r->fd_min = min(0.25f, 0.5);                     // float with double: 0.25
    r->df_max = max(0.5, 0.75f);                     // 0.75
}

static int failures = 0;
#define EXPECT(cond)                                                     \
    do {                                                                 \
        if (!(cond)) {                                                   \
            printf("atomics_minmax_ok: WRONG %s\n", #cond);              \
            failures++;                                                  \
        }                                                                \
    } while (0)

int main() {
    Counters h = {};
    h.i_min = 0; h.i_and = -1; h.u_sub = 1000; h.u_dec = 0; h.u_min = 1u << 30;
    Counters* d;
    cudaMalloc(&d, sizeof(Counters));
    cudaMemcpy(d, &h, sizeof(h), cudaMemcpyHostToDevice);
    atomics<<<4, 64>>>(d);
    cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT(h.i_add == 512);
    EXPECT(h.i_sub == -256);
    EXPECT(h.i_min == -255);
    EXPECT(h.i_max == 255);
    EXPECT(h.i_and == (int)0x80000000);              // every bit 0..30 cleared by some t
    EXPECT(h.i_or == 0xff);
    EXPECT(h.i_xor == 0);                            // 256 flips
    EXPECT(h.i_exch == 17 && h.i_cas == 9);
    EXPECT(h.u_add == 256);
    EXPECT(h.u_sub == 744);
    EXPECT(h.u_inc == 56);
    EXPECT(h.u_dec == 1000 - 255);                   // 0 -> 1000, then 255 decrements
    EXPECT(h.u_min == 10);
    EXPECT(h.u_max == 255);
    EXPECT(h.ull_add == 256);
    EXPECT(h.ull_max == 255ull << 40);
    EXPECT(h.ll_min == -255ll << 33);
    EXPECT(h.ll_max == 255);
    EXPECT(h.ll_or == -1ll);
    EXPECT(h.f_add == 256.0f);
    EXPECT(h.d_add == 128.0);
    EXPECT(h.f_exch == 2.5f);
    EXPECT(h.ull_cas == 1ull << 50);
    EXPECT(h.us_cas == 513);
    EXPECT(__half2float(h.h_add) == 256.0f);         // exact: integers up to 2048 in fp16
    EXPECT(__bfloat162float(h.b_add) == 256.0f);     // exact: integers up to 256 in bf16
    EXPECT(__low2float(h.h2_add) == 256.0f && __high2float(h.h2_add) == 512.0f);
    EXPECT(__low2float(h.b2_add) == 256.0f && __high2float(h.b2_add) == 512.0f); // exact: even integers up to 512 in bf16
    MinMax* r;
    MinMax hr;
    cudaMalloc(&r, sizeof(MinMax));
    minmax<<<1, 1>>>(r, -1, 3);
    cudaMemcpy(&hr, r, sizeof(hr), cudaMemcpyDeviceToHost);
    EXPECT(hr.mixed_min == 5u);
    EXPECT(hr.mixed_max == 0xffffffffu);
    EXPECT(hr.l_min == -1);
    EXPECT(hr.ul_max == ~0ul);
    EXPECT(hr.ll_min == -3);
    EXPECT(hr.ull_mixed_min == 7);
    EXPECT(hr.i_max == 3);
    EXPECT(hr.f_min == -2.0f);
    EXPECT(hr.fd_min == 0.25 && hr.df_max == 0.75);
    EXPECT(cudaGetLastError() == cudaSuccess);
    if (failures == 0) { printf("atomics_minmax_ok passed\n"); }
    return failures == 0 ? 0 : 1;
}
