// CORRECT: the CUDA subset of fast kernels: the load/store functions with cache hints (__ldcs, __ldcg, __ldca, __ldlu, __ldcv, __ldg; __stcs, __stcg, __stwb, __stwt) on scalar, vector and bf16/fp16 types, __longlong_as_double and __double_as_longlong, __barrier_sync, a kernel launched by a name that a host launcher shares, a templated kernel; compared with host-computed values; must exit 0 and print "hints_ok passed" under every EMU_THREAD_ORDER. Also compiles with nvcc -arch=sm_80 and sm_90.
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
// 1. every load hint on float4 / int4 / double2 / uint2 / bf16x2 / half2 / scalars, every store hint

struct Slab { // one thread's inputs, each at its natural alignment
    float4 f4;
    int4 i4;
    double2 d2;
    uint2 u2;
    float2 f2;
    __nv_bfloat162 b2;
    __half2 h2;
    __nv_bfloat16 b1;
    short s;
    long long ll;
    double d;
};

__global__ void hinted(const Slab* in, Slab* out) {
    const Slab* a = in + threadIdx.x;
    Slab* b = out + threadIdx.x;
    float4 f4 = __ldcs(&a->f4);
    int4 i4 = __ldcg(&a->i4);
    double2 d2 = __ldca(&a->d2);
    uint2 u2 = __ldlu(&a->u2);
    float2 f2 = __ldg(&a->f2);
    __nv_bfloat162 b2 = __ldcv(&a->b2);
    __half2 h2 = __ldg(&a->h2);
    __nv_bfloat16 b1 = __ldcs(&a->b1);
    short s = __ldcg(&a->s);
    long long ll = __ldg(&a->ll);
    double d = __ldcs(&a->d);
    f4.x += 1.0f;
    i4.w -= 1;
    __stcs(&b->f4, f4);
    __stcg(&b->i4, i4);
    __stwb(&b->d2, d2);
    __stwt(&b->u2, u2);
    __stcs(&b->f2, f2);
    __stcg(&b->b2, b2);
    __stcs(&b->h2, h2);
    __stwb(&b->b1, b1);
    __stwt(&b->s, (short)(s + 1));
    __stcs(&b->ll, ll);
    // the bits of a double through a 64-bit integer and back
    __stcs(&b->d, __longlong_as_double(__double_as_longlong(d) ^ (1LL << 63)));
}

static void check_hints() {
    const int n = 64;
    static Slab h[n], o[n];
    memset(h, 0, sizeof(h));
    for (int t = 0; t < n; t++) {
        h[t].f4 = make_float4(t, t + 0.5f, -t, 2.0f * t);
        h[t].i4 = make_int4(t, -t, 3 * t, 7);
        h[t].d2 = make_double2(t * 0.25, -1e300);
        h[t].u2 = make_uint2(0xdeadbeefu + t, t);
        h[t].f2 = make_float2(t * 3.0f, 1.0f / (t + 1));
        h[t].b2 = __floats2bfloat162_rn((float)t, -(float)t);
        h[t].h2 = __floats2half2_rn(0.5f * t, 2.0f);
        h[t].b1 = __float2bfloat16(t * 8.0f);
        h[t].s = (short)(100 - t);
        h[t].ll = (long long)t << 40;
        h[t].d = 1.0 + t;
    }
    Slab *d_in, *d_out;
    cudaMalloc(&d_in, sizeof(h));
    cudaMalloc(&d_out, sizeof(o));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    cudaMemset(d_out, 0, sizeof(o)); // the kernel writes the fields, not Slab's padding (initcheck: the copy back reads it)
    hinted<<<1, n>>>(d_in, d_out);
    cudaMemcpy(o, d_out, sizeof(o), cudaMemcpyDeviceToHost);
    for (int t = 0; t < n; t++) {
        const Slab &a = h[t], &b = o[t];
        EXPECT(b.f4.x == a.f4.x + 1 && b.f4.y == a.f4.y && b.f4.z == a.f4.z && b.f4.w == a.f4.w, "float4 %d", t);
        EXPECT(b.i4.x == a.i4.x && b.i4.y == a.i4.y && b.i4.z == a.i4.z && b.i4.w == a.i4.w - 1, "int4 %d", t);
        EXPECT(b.d2.x == a.d2.x && b.d2.y == a.d2.y, "double2 %d", t);
        EXPECT(b.u2.x == a.u2.x && b.u2.y == a.u2.y, "uint2 %d", t);
        EXPECT(b.f2.x == a.f2.x && b.f2.y == a.f2.y, "float2 %d", t);
        EXPECT(memcmp(&b.b2, &a.b2, 4) == 0 && memcmp(&b.h2, &a.h2, 4) == 0 && memcmp(&b.b1, &a.b1, 2) == 0,
               "16-bit types %d", t);
        EXPECT(b.s == a.s + 1 && b.ll == a.ll, "short/long long %d", t);
        EXPECT(b.d == -a.d, "__longlong_as_double(__double_as_longlong(d) ^ sign) = %g for %g", b.d, a.d);
    }
    cudaFree(d_in);
    cudaFree(d_out);
}

// ---------------------------------------------------------------------------------------------
// 2. __barrier_sync(1) (every thread of the block, like __syncthreads on barrier 1): a block
// reverses an array through shared memory

__global__ void reverse_block(const int* in, int* out) {
    __shared__ int s[128];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * 128 + t];
    __barrier_sync(1);
    out[blockIdx.x * 128 + t] = s[127 - t];
}

static void check_barrier_sync() {
    static int h[256], o[256];
    for (int i = 0; i < 256; i++) { h[i] = i * 7 - 3; }
    int *d_in, *d_out;
    cudaMalloc(&d_in, sizeof(h));
    cudaMalloc(&d_out, sizeof(o));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    reverse_block<<<2, 128>>>(d_in, d_out);
    cudaMemcpy(o, d_out, sizeof(o), cudaMemcpyDeviceToHost);
    for (int i = 0; i < 256; i++) {
        int want = h[(i / 128) * 128 + 127 - i % 128];
        EXPECT(o[i] == want, "__barrier_sync reverse [%d] = %d, expected %d", i, o[i], want);
    }
    cudaFree(d_in);
    cudaFree(d_out);
}

// ---------------------------------------------------------------------------------------------
// 3. a kernel and its host launcher with the same name (overloads), and a templated kernel

__global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] += a * x[i]; }
}

// the launcher: same name, one more parameter (the stream)
void axpy(float a, const float* x, float* y, int n, cudaStream_t stream) {
    axpy<<<(n + 127) / 128, 128, 0, stream>>>(a, x, y, n);
}

template <typename T, int PER_THREAD> __global__ void fill_ramp(T* out, T start) {
    for (int k = 0; k < PER_THREAD; k++) {
        int i = (blockIdx.x * blockDim.x + threadIdx.x) * PER_THREAD + k;
        out[i] = start + (T)i;
    }
}

static void check_overloaded_and_templated() {
    const int n = 300;
    static float x[n], y[n];
    for (int i = 0; i < n; i++) {
        x[i] = (float)i;
        y[i] = 1.0f;
    }
    float *d_x, *d_y;
    cudaMalloc(&d_x, sizeof(x));
    cudaMalloc(&d_y, sizeof(y));
    cudaMemcpy(d_x, x, sizeof(x), cudaMemcpyHostToDevice);
    cudaMemcpy(d_y, y, sizeof(y), cudaMemcpyHostToDevice);
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    axpy(0.5f, d_x, d_y, n, stream);
    cudaStreamSynchronize(stream);
    cudaMemcpy(y, d_y, sizeof(y), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++) { EXPECT(y[i] == 1.0f + 0.5f * i, "axpy [%d] = %g", i, y[i]); }
    int* d_ramp;
    cudaMalloc(&d_ramp, 4 * 64 * 3 * sizeof(int));
    fill_ramp<int, 3><<<4, 64>>>(d_ramp, 10);
    static int ramp[4 * 64 * 3];
    cudaMemcpy(ramp, d_ramp, sizeof(ramp), cudaMemcpyDeviceToHost);
    for (int i = 0; i < 4 * 64 * 3; i++) { EXPECT(ramp[i] == 10 + i, "fill_ramp<int, 3> [%d] = %d", i, ramp[i]); }
    cudaStreamDestroy(stream);
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_ramp);
}

int main() {
    check_hints();
    check_barrier_sync();
    check_overloaded_and_templated();
    EXPECT(cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess, "a stray error at the end");
    if (failures) {
        printf("hints_ok: %d failures\n", failures);
        return 1;
    }
    printf("hints_ok passed\n");
    return 0;
}
