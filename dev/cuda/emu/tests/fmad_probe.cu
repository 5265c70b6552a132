// Contraction probes (dev/cuda/emu/tests/fmad_test.sh): each kernel is one pattern of multiplies
// and adds, on inputs where an fma (one rounding) and a multiply then an add (two) differ. The
// host computes what each pattern gives when contracted as nvcc's optimizer contracts it (the PTX
// that `nvcc -ptx` writes for these kernels: fma.rn where it fused, per pattern below) and when not
// contracted at all, with explicit fmaf and rounded operations (host code is never contracted:
// nvcc-cpu compiles it with -ffp-contract=off). Built with --fmad=true the kernels must give the
// first, with --fmad=false the second. Prints "N passed, M failed".
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifndef EMU_FMAD_BUILD
#define EMU_FMAD_BUILD 1 // real nvcc (fmad_test.sh reads its PTX only): its default, --fmad=true
#endif
#define P 8 // inputs per probe
// E = 1 + 2^-12: E*E = 1 + 2^-11 + 2^-24, a tie that rounds to 1 + 2^-11, so E*E - (1 + 2^-11)
// is 0 with two roundings and 2^-24 with one
#define E (1.0f + 1.0f / 4096)
#define F (1.0f + 1.0f / 2048)

__host__ __device__ inline float hd_madd(float a, float b, float c) { return a * b + c; } // host and device
__device__ float dev_madd(float a, float b, float c) { return a * b + c; }              // device only

// the patterns (x: the inputs; o: the results)
extern "C" __global__ void k_madd(float* o, const float* x) { o[0] = x[0] * x[1] + x[2]; }
extern "C" __global__ void k_two_products(float* o, const float* x) { o[0] = x[0] * x[1] + x[2] * x[3]; }
extern "C" __global__ void k_product_used_twice(float* o, const float* x) {
    float t = x[0] * x[1];
    o[0] = t + x[2];
    o[1] = t;
}
extern "C" __global__ void k_across_statements(float* o, const float* x) {
    float t = x[0] * x[1];
    float u = t + x[2];
    o[0] = u * x[3] + t;
}
extern "C" __global__ void k_subtract(float* o, const float* x) {
    o[0] = x[2] - x[0] * x[1];
    o[1] = x[0] * x[1] - x[2];
}
extern "C" __global__ void k_chain(float* o, const float* x) { o[0] = x[0] * x[1] * x[2] + x[3]; }
extern "C" __global__ void k_intrinsics(float* o, const float* x) {
    o[0] = __fadd_rn(__fmul_rn(x[0], x[1]), x[2]);
    o[1] = __fadd_rn(x[0] * x[1], x[2]);
    o[2] = __fmul_rn(x[0], x[1]) + x[2];
    o[3] = __fmaf_rn(x[0], x[1], x[2]);
}
extern "C" __global__ void k_functions(float* o, const float* x) {
    o[0] = hd_madd(x[0], x[1], x[2]);
    o[1] = dev_madd(x[0], x[1], x[2]);
}

typedef void (*Kernel)(float*, const float*);
struct Probe {
    const char* name;
    Kernel kernel;
    float x[P];
    int outputs;
};

// what nvcc's contraction and no contraction give, output by output (host code: never contracted)
static void expected(const char* name, const float* x, float* fused, float* plain) {
    float ab = x[0] * x[1];
    for (int i = 0; i < 4; i++) { fused[i] = plain[i] = 0.0f; }
    if (!strcmp(name, "madd")) {                 // fma.rn
        fused[0] = fmaf(x[0], x[1], x[2]); plain[0] = ab + x[2];
    } else if (!strcmp(name, "two_products")) {  // mul (x2*x3), then fma.rn(x0, x1, that): the first product fuses
        fused[0] = fmaf(x[0], x[1], x[2] * x[3]); plain[0] = ab + x[2] * x[3];
    } else if (!strcmp(name, "product_used_twice")) { // mul.f32 + add.f32: the product is stored too
        fused[0] = ab + x[2]; plain[0] = ab + x[2]; fused[1] = plain[1] = ab;
    } else if (!strcmp(name, "across_statements")) {  // fma.rn(x0,x1,x2), mul, fma.rn(x0, x1, that)
        float u = fmaf(x[0], x[1], x[2]);
        fused[0] = fmaf(x[0], x[1], u * x[3]);
        float up = ab + x[2];
        plain[0] = up * x[3] + ab;
    } else if (!strcmp(name, "subtract")) {      // mul.f32 + sub.f32 in the PTX; contracted by g++ (below)
        fused[0] = fmaf(-x[0], x[1], x[2]); plain[0] = x[2] - ab;
        fused[1] = fmaf(x[0], x[1], -x[2]); plain[1] = ab - x[2];
    } else if (!strcmp(name, "chain")) {         // mul, then fma.rn(x0*x1, x2, x3)
        fused[0] = fmaf(ab, x[2], x[3]); plain[0] = ab * x[2] + x[3];
    } else if (!strcmp(name, "intrinsics")) {    // mul.rn/add.rn are never fused; __fmaf_rn always is
        fused[0] = plain[0] = ab + x[2];
        fused[1] = plain[1] = ab + x[2];
        fused[2] = plain[2] = ab + x[2];
        fused[3] = plain[3] = fmaf(x[0], x[1], x[2]);
    } else if (!strcmp(name, "functions")) {     // inlined into the kernel: the kernel's contraction
        fused[0] = fused[1] = fmaf(x[0], x[1], x[2]); plain[0] = plain[1] = ab + x[2];
    }
}

int main() {
    const Probe probes[] = {
        {"madd", k_madd, {E, E, -F}, 1},
        {"two_products", k_two_products, {E, E, -F, 1.0f}, 1},
        {"product_used_twice", k_product_used_twice, {E, E, -F}, 2},
        {"across_statements", k_across_statements, {E, E, -F, 1.0f / 1024}, 1},
        {"subtract", k_subtract, {E, E, F}, 2},
        {"chain", k_chain, {E, 1.0f, E, -F}, 1},
        {"intrinsics", k_intrinsics, {E, E, -F}, 4},
        {"functions", k_functions, {E, E, -F}, 2},
    };
    int fmad = EMU_FMAD_BUILD, passed = 0, failed = 0;
    float *dx, *dout;
    cudaMalloc(&dx, P * sizeof(float));
    cudaMalloc(&dout, 4 * sizeof(float));
    for (const Probe& p : probes) {
        float out[4], fused[4], plain[4];
        cudaMemcpy(dx, p.x, sizeof(p.x), cudaMemcpyHostToDevice);
        cudaMemset(dout, 0, 4 * sizeof(float));
        Kernel k = p.kernel;
        k<<<1, 1>>>(dout, dx);
        cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost);
        expected(p.name, p.x, fused, plain);
        int distinct = 0; // the inputs tell the two apart (else the probe proves nothing)
        for (int i = 0; i < p.outputs; i++) { distinct |= fused[i] != plain[i]; }
        int ok = 1;
        const float* want = fmad ? fused : plain;
        for (int i = 0; i < p.outputs; i++) { ok &= memcmp(&out[i], &want[i], 4) == 0; }
        int must_differ = strcmp(p.name, "product_used_twice") != 0 && strcmp(p.name, "intrinsics") != 0;
        ok &= distinct || !must_differ;
        printf("%s %s (--fmad=%s): got", ok ? "ok  " : "FAIL", p.name, fmad ? "true" : "false");
        for (int i = 0; i < p.outputs; i++) { printf(" %a", out[i]); }
        printf(", want");
        for (int i = 0; i < p.outputs; i++) { printf(" %a", want[i]); }
        printf("\n");
        ok ? passed++ : failed++;
    }
    // host code calling the same function is never contracted
    float h = hd_madd(E, E, -F), hp = E * E + (-F);
    int ok = memcmp(&h, &hp, 4) == 0;
    printf("%s host code calling hd_madd: %a, uncontracted %a\n", ok ? "ok  " : "FAIL", h, hp);
    ok ? passed++ : failed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
