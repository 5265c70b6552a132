/*
Tests of the emulator's cuBLASLt (dev/cuda/emu/cublaslt.cpp). Build and run from the repository
root, with the synchronous stub runtime:

  g++ -std=c++17 -O2 -Wall -Wextra -fopenmp -I/usr/local/cuda/include -Idev/cuda/emu \
      dev/cuda/emu/cublaslt.cpp dev/cuda/emu/tests/cublaslt_stub_runtime.cpp \
      dev/cuda/emu/tests/cublaslt_test.cpp -o /tmp/cublaslt_test && /tmp/cublaslt_test

  /tmp/cublaslt_test --bench   also times the GPT-2 124M LM-head shapes (fp32 and bf16)

With the emulator's own runtime (queued ops, EMU_SCHEDULE, EMU_PROTECT): put
dev/cuda/emu/runtime.cpp dev/cuda/emu/kernel.cpp dev/cuda/emu/check.cpp in place of tests/cublaslt_stub_runtime.cpp.

What it checks
  - products: the call sequence of llmc/matmul.cuh (forward with bias, backward dinp, dweight
    accumulate), and N/T transposes, ld > rows, alpha/beta, bias, C == D in place, algo NULL,
    k = 0, odd sizes, fp32 and bf16: against a double-precision reference (fp32: error within
    (k + 8) * 2^-23 of the sum of the terms' magnitudes; bf16: also one bf16 ulp), and bit for
    bit against a scalar model of the documented summation order (8 lanes, fixed tree), with 1
    and several threads, and with the split-k orders of EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1;
  - D's padding rows (ld > rows) are not written; beta = 0 never reads C (NaN there stays out);
    alpha and beta are read at the call;
  - the GELU epilogues (GELU_AUX_BIAS, DGELU) against a double reference of GELU's tanh form,
    the aux's padding rows untouched, and their attributes' refusals (aux pointer or ld missing,
    ld not divisible by 8 or below D's rows, another aux type, an aux less aligned than promised);
  - BGRADB: op(B)'s column sums written (not added) to the bias pointer, B plain and transposed,
    D the accumulated product;
  - every NOT_SUPPORTED / INVALID_VALUE / NOT_INITIALIZED path, the alignment promise check,
    and (in a child process) that host operands and device alpha end the process with status 86.
It uses only cudaMalloc, cudaMemcpy, cudaStreamSynchronize and cudaFree from the CUDA runtime.
The last line reads "N passed, M failed"; the exit status is non-zero on any failure.
*/

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <functional>
#include <vector>

// The scalar model of the summation order must round each product, like cublaslt.cpp does.
#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

static int g_passed = 0, g_failed = 0;

__attribute__((format(printf, 2, 3))) static bool check(bool ok, const char* fmt, ...) {
    if (ok) {
        g_passed++;
        return true;
    }
    g_failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "FAIL: ");
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
    return false;
}

static const char* status_name(cublasStatus_t s) { return cublasLtGetStatusName(s); }

static bool expect(cublasStatus_t got, cublasStatus_t want, const char* what) {
    return check(got == want, "%s: got %s, want %s", what, status_name(got), status_name(want));
}

static void die_if(bool bad, const char* what) {
    if (bad) {
        printf("test setup failed: %s\n", what);
        exit(2);
    }
}

// ---------------------------------------------------------------------------------------------
// host values and device buffers

static uint64_t g_rng = 42;
static float rand_uniform() {  // in [-1, 1)
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static size_t elem_size(cudaDataType t) { return t == CUDA_R_16BF ? 2 : 4; }

// A float rounded to the type, as a float (what the device buffer holds).
static float round_to(cudaDataType t, float v) {
    return t == CUDA_R_16BF ? __bfloat162float(__float2bfloat16_rn(v)) : v;
}

static void* dev_alloc(size_t bytes) {
    void* p = nullptr;
    die_if(cudaMalloc(&p, bytes) != cudaSuccess, "cudaMalloc");
    return p;
}

// n floats into device memory at dst, as type t
static void upload(void* dst, cudaDataType t, const std::vector<float>& v) {
    if (t == CUDA_R_16BF) {
        std::vector<__nv_bfloat16> b(v.size());
        for (size_t i = 0; i < v.size(); i++) { b[i] = __float2bfloat16_rn(v[i]); }
        die_if(cudaMemcpy(dst, b.data(), b.size() * 2, cudaMemcpyHostToDevice) != cudaSuccess, "cudaMemcpy");
    } else {
        die_if(cudaMemcpy(dst, v.data(), v.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess, "cudaMemcpy");
    }
}

static std::vector<float> download(const void* src, cudaDataType t, size_t n) {
    std::vector<float> v(n);
    die_if(cudaStreamSynchronize(0) != cudaSuccess, "cudaStreamSynchronize");
    if (t == CUDA_R_16BF) {
        std::vector<__nv_bfloat16> b(n);
        die_if(cudaMemcpy(b.data(), src, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess, "cudaMemcpy");
        for (size_t i = 0; i < n; i++) { v[i] = __bfloat162float(b[i]); }
    } else {
        die_if(cudaMemcpy(v.data(), src, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess, "cudaMemcpy");
    }
    return v;
}

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// ---------------------------------------------------------------------------------------------
// llmc/matmul.cuh's call sequence, status codes returned instead of failing

static cublasLtHandle_t g_handle;

static uint32_t pointer_alignment(const void* p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t align = 256;
    while (align > 1 && a % align != 0) { align >>= 1; }
    return align;
}

#define TRY(call)                                                        \
    do {                                                                 \
        cublasStatus_t s_ = (call);                                      \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                               \
            printf("  %s -> %s\n", #call, status_name(s_));              \
            return s_;                                                   \
        }                                                                \
    } while (0)

static const size_t WORKSPACE_BYTES = 32 << 20;
static void* g_workspace;

static cublasStatus_t matmul_llmc(cudaDataType type, void* d, const void* a, const void* b, const void* bias, int m,
                                  int n, int k, int trans_a, int trans_b, int accumulate) {
    cublasLtMatmulDesc_t desc;
    TRY(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    cublasLtEpilogue_t epilogue = bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias != NULL) { TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias))); }
    cublasLtMatrixLayout_t la, lb, ld;
    TRY(cublasLtMatrixLayoutCreate(&la, type, trans_a ? k : m, trans_a ? m : k, trans_a ? k : m));
    TRY(cublasLtMatrixLayoutCreate(&lb, type, trans_b ? n : k, trans_b ? k : n, trans_b ? n : k));
    TRY(cublasLtMatrixLayoutCreate(&ld, type, m, n, m));
    cublasLtMatmulPreference_t pref;
    TRY(cublasLtMatmulPreferenceCreate(&pref));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &WORKSPACE_BYTES,
                                             sizeof(WORKSPACE_BYTES)));
    uint32_t align_a = pointer_alignment(a), align_b = pointer_alignment(b), align_d = pointer_alignment(d);
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d)));
    TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    TRY(cublasLtMatmulAlgoGetHeuristic(g_handle, desc, la, lb, ld, ld, pref, 1, &heuristic, &found));
    if (found == 0) { return CUBLAS_STATUS_NOT_SUPPORTED; }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    TRY(cublasLtMatmul(g_handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heuristic.algo, g_workspace,
                       WORKSPACE_BYTES, 0));
    TRY(cublasLtMatmulPreferenceDestroy(pref));
    TRY(cublasLtMatrixLayoutDestroy(la));
    TRY(cublasLtMatrixLayoutDestroy(lb));
    TRY(cublasLtMatrixLayoutDestroy(ld));
    TRY(cublasLtMatmulDescDestroy(desc));
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// a general product: host copies, device buffers, references

struct Case {
    const char* name;
    cudaDataType type;
    int m, n, k;
    bool ta, tb;
    int pad_a, pad_b, pad_c, pad_d;  // ld = rows + pad
    float alpha, beta;
    bool bias;
    bool in_place;   // C == D (pad_c is then pad_d)
    bool heuristic;  // algo from the heuristic (promises from the pointers), else NULL
    bool nan_c;      // C (or D, in place) full of NaN; meant for beta = 0
    int offset;      // elements added to every device pointer (alignment below 256)
};

struct Operands {
    int lda, ldb, ldc, ldd;
    std::vector<float> a, b, c, d0, bias;  // host values, already rounded to the type
    void *da, *db, *dc, *dd, *dbias;       // device pointers (after the offset)
    void *base_a, *base_b, *base_c, *base_d, *base_bias;
};

static std::vector<float> random_values(cudaDataType t, size_t n) {
    std::vector<float> v(n);
    for (float& x : v) { x = round_to(t, rand_uniform()); }
    return v;
}

static void* alloc_with_offset(cudaDataType t, size_t n, int offset, void** base) {
    *base = dev_alloc((n + offset) * elem_size(t));
    return (char*)*base + offset * elem_size(t);
}

static Operands make_operands(const Case& c) {
    Operands o;
    int a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
    int b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
    o.lda = a_rows + c.pad_a, o.ldb = b_rows + c.pad_b;
    o.ldd = c.m + c.pad_d, o.ldc = c.in_place ? o.ldd : c.m + c.pad_c;
    o.a = random_values(c.type, (size_t)o.lda * a_cols);
    o.b = random_values(c.type, (size_t)o.ldb * b_cols);
    o.c = random_values(c.type, (size_t)o.ldc * c.n);
    o.bias = random_values(c.type, c.m);
    if (c.nan_c) {
        for (float& x : o.c) { x = NAN; }
    }
    o.d0 = c.in_place ? o.c : std::vector<float>((size_t)o.ldd * c.n, 7.0f);  // 7: the padding sentinel
    o.da = alloc_with_offset(c.type, o.a.size(), c.offset, &o.base_a);
    o.db = alloc_with_offset(c.type, o.b.size(), c.offset, &o.base_b);
    o.dd = alloc_with_offset(c.type, o.d0.size(), c.offset, &o.base_d);
    o.dbias = alloc_with_offset(c.type, o.bias.size(), c.offset, &o.base_bias);
    if (c.in_place) {
        o.dc = o.dd, o.base_c = nullptr;
    } else {
        o.dc = alloc_with_offset(c.type, o.c.size(), c.offset, &o.base_c);
        upload(o.dc, c.type, o.c);
    }
    upload(o.da, c.type, o.a);
    upload(o.db, c.type, o.b);
    upload(o.dd, c.type, o.d0);
    upload(o.dbias, c.type, o.bias);
    return o;
}

static void free_operands(Operands& o) {
    void* bases[5] = {o.base_a, o.base_b, o.base_c, o.base_d, o.base_bias};
    for (void* p : bases) { die_if(cudaFree(p) != cudaSuccess, "cudaFree"); }
}

static float op_a(const Case& c, const Operands& o, int i, int kk) {
    return c.ta ? o.a[kk + (size_t)i * o.lda] : o.a[i + (size_t)kk * o.lda];
}
static float op_b(const Case& c, const Operands& o, int kk, int j) {
    return c.tb ? o.b[j + (size_t)kk * o.ldb] : o.b[kk + (size_t)j * o.ldb];
}

// The documented order in scalar code: 8 lanes over kk = l (mod 8), the tree
// ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)), chunks (split-k) added left to right.
static float model_dot(const std::vector<float>& a, const std::vector<float>& b, int k, int chunks) {
    int kp = (k + 7) / 8 * 8;
    int chunk = kp;
    if (chunks > 1) {
        int per = (k + chunks - 1) / chunks;
        chunk = std::max(8, (per + 7) / 8 * 8);
    }
    float total = 0.0f;
    for (int k0 = 0; k0 < kp || k0 == 0; k0 += chunk) {
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int kk = k0; kk < std::min(k0 + chunk, kp); kk++) {
            float p = kk < k ? a[kk] * b[kk] : 0.0f;
            s[kk % 8] = s[kk % 8] + p;
        }
        float t[4] = {s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]};
        float r = (t[0] + t[2]) + (t[1] + t[3]);
        total = k0 == 0 ? r : total + r;
        if (kp == 0) { break; }
    }
    return total;
}

// Runs the case's product with the emulator: returns its status, fills got (D with padding).
static cublasStatus_t run_case(const Case& c, Operands& o, std::vector<float>* got) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    die_if(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS, "desc");
    cublasOperation_t ta = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (c.bias) {
        cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &o.dbias, sizeof o.dbias);
    }
    cublasLtMatrixLayoutCreate(&la, c.type, c.ta ? c.k : c.m, c.ta ? c.m : c.k, o.lda);
    cublasLtMatrixLayoutCreate(&lb, c.type, c.tb ? c.n : c.k, c.tb ? c.k : c.n, o.ldb);
    cublasLtMatrixLayoutCreate(&lc, c.type, c.m, c.n, o.ldc);
    cublasLtMatrixLayoutCreate(&ld, c.type, c.m, c.n, o.ldd);
    cublasLtMatmulHeuristicResult_t h;
    const cublasLtMatmulAlgo_t* algo = nullptr;
    if (c.heuristic) {
        cublasLtMatmulPreference_t pref;
        cublasLtMatmulPreferenceCreate(&pref);
        uint32_t al[4] = {pointer_alignment(o.da), pointer_alignment(o.db), pointer_alignment(o.dc), pointer_alignment(o.dd)};
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], 4);
        int found = 0;
        cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g_handle, desc, la, lb, lc, ld, pref, 1, &h, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        if (s != CUBLAS_STATUS_SUCCESS) { return s; }
        algo = &h.algo;
    }
    float alpha = c.alpha, beta = c.beta;
    cublasStatus_t s = cublasLtMatmul(g_handle, desc, &alpha, o.da, la, o.db, lb, &beta, o.dc, lc, o.dd, ld, algo,
                                      nullptr, 0, 0);
    alpha = 1e30f, beta = 1e30f;  // read at the call: these must not matter
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    if (s == CUBLAS_STATUS_SUCCESS) { *got = download(o.dd, c.type, o.d0.size()); }
    return s;
}

// Compares got with the double reference and (bit for bit) with the model of the order.
static void verify(const Case& c, const Operands& o, const std::vector<float>& got, int chunks, const char* label) {
    int bad_ref = 0, bad_model = 0, bad_pad = 0;
    double worst = 0;
    std::vector<float> arow(c.k), bcol(c.k);
    for (int j = 0; j < c.n; j++) {
        for (int kk = 0; kk < c.k; kk++) { bcol[kk] = op_b(c, o, kk, j); }
        for (int i = 0; i < c.m; i++) {
            for (int kk = 0; kk < c.k; kk++) { arow[kk] = op_a(c, o, i, kk); }
            double ref = 0, mag = 0;
            for (int kk = 0; kk < c.k; kk++) {
                ref += (double)arow[kk] * bcol[kk];
                mag += fabs((double)arow[kk] * bcol[kk]);
            }
            ref *= c.alpha, mag *= fabs(c.alpha);
            float cval = o.c[i + (size_t)j * o.ldc];
            if (c.beta != 0.0f) { ref += (double)c.beta * cval, mag += fabs((double)c.beta * cval); }
            if (c.bias) { ref += o.bias[i], mag += fabs(o.bias[i]); }
            // model, in float, as documented
            float v = c.alpha * model_dot(arow, bcol, c.k, chunks);
            if (c.beta != 0.0f) { v = v + c.beta * cval; }
            if (c.bias) { v = v + o.bias[i]; }
            v = round_to(c.type, v);
            float g = got[i + (size_t)j * o.ldd];
            double tol = (c.k + 8) * ldexp(1.0, -23) * mag + 1e-30;
            if (c.type == CUDA_R_16BF) { tol += ldexp(1.0, ilogb(fabs(ref) + tol) - 7); }  // one bf16 ulp
            double err = fabs((double)g - ref);
            if (!(err <= tol)) { bad_ref++; }
            worst = std::max(worst, err / std::max(tol, 1e-30));
            if (float_bits(g) != float_bits(v)) { bad_model++; }
        }
        for (int i = c.m; i < o.ldd; i++) {  // padding rows: untouched
            if (float_bits(got[i + (size_t)j * o.ldd]) != float_bits(o.d0[i + (size_t)j * o.ldd])) { bad_pad++; }
        }
    }
    check(bad_ref == 0, "%s %s: %d elements off the double reference (worst error/tolerance %.3g)", c.name, label, bad_ref,
          worst);
    check(bad_model == 0, "%s %s: %d elements differ from the model of the summation order (%d chunks)", c.name, label,
          bad_model, chunks);
    check(bad_pad == 0, "%s %s: %d padding elements of D were written", c.name, label, bad_pad);
}

static const char* type_label(cudaDataType t) { return t == CUDA_R_16BF ? "(bf16)" : "(fp32)"; }

static void test_case(const Case& c) {
    Operands o = make_operands(c);
    std::vector<float> got;
    cublasStatus_t s = run_case(c, o, &got);
    char what[128];
    snprintf(what, sizeof what, "%s %s", c.name, type_label(c.type));
    if (expect(s, CUBLAS_STATUS_SUCCESS, what)) { verify(c, o, got, 1, type_label(c.type)); }
    free_operands(o);
}

// ---------------------------------------------------------------------------------------------
// products

static void test_products() {
    const cudaDataType types[2] = {CUDA_R_32F, CUDA_R_16BF};
    for (cudaDataType t : types) {
        // name, type, m, n, k, ta, tb, pad a b c d, alpha, beta, bias, in_place, heuristic, nan_c, offset
        const Case cases[] = {
            {"NN odd sizes", t, 37, 5, 129, false, false, 0, 0, 0, 0, 1.0f, 0.0f, false, false, false, false, 0},
            {"TN bias", t, 37, 5, 129, true, false, 0, 0, 0, 0, 1.0f, 0.0f, true, false, true, false, 0},
            {"NT ld > rows", t, 37, 5, 129, false, true, 3, 5, 2, 7, 1.0f, 0.0f, false, false, false, false, 0},
            {"TT alpha beta bias", t, 19, 23, 31, true, true, 1, 2, 3, 4, -0.5f, 0.75f, true, false, true, false, 0},
            {"C == D accumulate", t, 37, 5, 129, false, true, 0, 0, 0, 3, 1.0f, 1.0f, false, true, true, false, 0},
            {"beta 0, NaN in C", t, 33, 9, 40, true, false, 0, 0, 2, 0, 1.0f, 0.0f, true, false, true, true, 0},
            {"beta 0, NaN in D in place", t, 33, 9, 40, true, false, 0, 0, 0, 0, 2.0f, 0.0f, false, true, false, true, 0},
            {"k = 0", t, 7, 3, 0, false, false, 0, 0, 0, 0, 1.0f, 0.5f, true, false, false, false, 0},
            {"k = 1", t, 7, 3, 1, true, false, 0, 0, 0, 0, 1.0f, 0.0f, false, false, true, false, 0},
            {"many tiles", t, 200, 300, 77, true, false, 0, 0, 0, 0, 1.0f, 0.0f, true, false, true, false, 0},
            {"pointers 2 elements in", t, 21, 13, 50, false, false, 0, 0, 0, 0, 1.0f, 1.0f, false, false, true, false, 2},
        };
        for (const Case& c : cases) { test_case(c); }
    }
}

// the three products of llmc/matmul.cuh, with its exact call sequence
static void test_llmc_products() {
    const cudaDataType types[2] = {CUDA_R_32F, CUDA_R_16BF};
    const int BT = 40, C = 48, OC = 3 * 48;
    for (cudaDataType t : types) {
        const char* tn = t == CUDA_R_16BF ? "bf16" : "fp32";
        struct {
            const char* name;
            int m, n, k, ta, tb, acc;
            bool bias;
        } calls[3] = {{"forward", OC, BT, C, 1, 0, 0, true}, {"backward dinp", C, BT, OC, 0, 0, 0, false},
                      {"backward dweight", C, OC, BT, 0, 1, 1, false}};
        for (auto& call : calls) {
            Case c = {call.name, t, call.m, call.n, call.k, call.ta != 0, call.tb != 0, 0, 0, 0, 0, 1.0f,
                      call.acc ? 1.0f : 0.0f, call.bias, call.acc != 0, true, false, 0};
            Operands o = make_operands(c);  // llmc passes D as C too (read only when accumulating)
            cublasStatus_t s = matmul_llmc(t, o.dd, o.da, o.db, call.bias ? o.dbias : nullptr, call.m, call.n, call.k,
                                           call.ta, call.tb, call.acc);
            char label[64];
            snprintf(label, sizeof label, "(llmc %s)", tn);
            if (expect(s, CUBLAS_STATUS_SUCCESS, call.name)) {
                std::vector<float> got = download(o.dd, t, o.d0.size());
                verify(c, o, got, 1, label);
            }
            free_operands(o);
        }
    }
}

// Same bits with 1 thread and with the default count, on a case with many tiles.
static void test_thread_independence() {
    Case c = {"threads", CUDA_R_32F, 150, 260, 300, false, true, 0, 0, 0, 0, 1.0f, 0.0f, true, false, false, false, 0};
    Operands o = make_operands(c);
    std::vector<float> one, many;
    setenv("EMU_THREADS", "1", 1);
    cublasStatus_t s1 = run_case(c, o, &one);
    unsetenv("EMU_THREADS");
    cublasStatus_t s2 = run_case(c, o, &many);
    setenv("EMU_THREADS", "3", 1);
    std::vector<float> three;
    cublasStatus_t s3 = run_case(c, o, &three);
    unsetenv("EMU_THREADS");
    if (expect(s1, CUBLAS_STATUS_SUCCESS, "1 thread") && expect(s2, CUBLAS_STATUS_SUCCESS, "default threads") &&
        expect(s3, CUBLAS_STATUS_SUCCESS, "3 threads")) {
        check(memcmp(one.data(), many.data(), one.size() * 4) == 0, "threads: 1 thread and the default count differ");
        check(memcmp(one.data(), three.data(), one.size() * 4) == 0, "threads: 1 thread and 3 threads differ");
        verify(c, o, one, 1, "(1 thread)");
    }
    free_operands(o);
}

// EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1: the promised alignments pick the split-k order,
// S = 1 + code % 7 with code the four log2 promises as base-9 digits (all four operands shifted
// alike here: all 256 B -> code 6560 -> S 2; 16 B -> 3280 -> S 5; 4 B -> 1640 -> S 3).
static void test_algo_by_alignment() {
    setenv("EMU_CUBLASLT_ALGO_BY_ALIGNMENT", "1", 1);
    struct {
        int offset, chunks;
    } variants[3] = {{0, 2}, {4, 5}, {1, 3}};  // fp32 offsets: 256, 16 and 4-byte alignment
    std::vector<float> results[3];
    Case c = {"algo by alignment", CUDA_R_32F, 29, 11, 1000, true, false, 0, 0, 0, 0, 1.0f, 0.0f, false, false, true, false, 0};
    for (int v = 0; v < 3; v++) {
        c.offset = variants[v].offset;
        g_rng = 7;  // the same values for every variant
        Operands o = make_operands(c);
        char label[64];
        snprintf(label, sizeof label, "(offset %d, %d chunks)", c.offset, variants[v].chunks);
        if (expect(run_case(c, o, &results[v]), CUBLAS_STATUS_SUCCESS, label)) { verify(c, o, results[v], variants[v].chunks, label); }
        free_operands(o);
    }
    check(results[0].size() == results[1].size() && results[0] != results[1], "algo by alignment: 2 and 5 chunks gave the same bits");
    check(results[1].size() == results[2].size() && results[1] != results[2], "algo by alignment: 5 and 3 chunks gave the same bits");
    unsetenv("EMU_CUBLASLT_ALGO_BY_ALIGNMENT");
}

// ---------------------------------------------------------------------------------------------
// descriptors and statuses

static void test_descriptors() {
    cublasLtMatmulDesc_t desc;
    expect(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_16F, CUDA_R_32F), CUBLAS_STATUS_NOT_SUPPORTED, "compute 16F");
    expect(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F), CUBLAS_STATUS_NOT_SUPPORTED,
           "compute 32F_FAST_TF32");
    expect(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_16BF), CUBLAS_STATUS_NOT_SUPPORTED, "scale 16BF");
    expect(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F), CUBLAS_STATUS_SUCCESS, "compute 32F_PEDANTIC");
    cublasLtMatmulDescDestroy(desc);
    die_if(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS, "desc");

    int32_t op = CUBLAS_OP_T;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, 8), CUBLAS_STATUS_INVALID_VALUE, "TRANSA size 8");
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4), CUBLAS_STATUS_INVALID_VALUE, "TRANSA NULL");
    op = CUBLAS_OP_CONJG;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, 4), CUBLAS_STATUS_NOT_SUPPORTED, "TRANSA CONJG");
    op = 9;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op, 4), CUBLAS_STATUS_INVALID_VALUE, "TRANSB 9");
    op = CUBLAS_OP_C;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op, 4), CUBLAS_STATUS_SUCCESS, "TRANSB C");
    int32_t got = -1;
    size_t written = 0;
    expect(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &got, 4, &written), CUBLAS_STATUS_SUCCESS, "get TRANSB");
    check(got == CUBLAS_OP_C && written == 4, "get TRANSB: %d (%zu bytes)", got, written);
    written = 0;
    expect(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, &written), CUBLAS_STATUS_SUCCESS,
           "size of BIAS_POINTER");
    check(written == sizeof(void*), "size of BIAS_POINTER: %zu", written);
    expect(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, nullptr), CUBLAS_STATUS_INVALID_VALUE,
           "size query without sizeWritten");
    int32_t bias_type = 0;
    cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, 4, nullptr);
    check(bias_type == -1, "BIAS_DATA_TYPE default %d, want -1", bias_type);
    int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, 4), CUBLAS_STATUS_NOT_SUPPORTED,
           "pointer mode device");
    mode = CUBLASLT_POINTER_MODE_HOST;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, 4), CUBLAS_STATUS_SUCCESS, "pointer mode host");
    int32_t fill = 0;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FILL_MODE, &fill, 4), CUBLAS_STATUS_NOT_SUPPORTED, "FILL_MODE");
    void* amax = nullptr;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &amax, sizeof amax), CUBLAS_STATUS_NOT_SUPPORTED,
           "AMAX_D_POINTER");
    expect(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &fill, 4, nullptr), CUBLAS_STATUS_NOT_SUPPORTED,
           "get SM_COUNT_TARGET");
    int32_t ct = 0;
    cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &ct, 4, nullptr);
    check(ct == CUBLAS_COMPUTE_32F, "COMPUTE_TYPE %d", ct);
    expect(cublasLtMatmulDescSetAttribute(nullptr, CUBLASLT_MATMUL_DESC_TRANSA, &op, 4), CUBLAS_STATUS_INVALID_VALUE, "NULL desc");
    cublasLtMatmulDescDestroy(desc);

    // on stack, through the header's inline Init
    cublasLtMatmulDescOpaque_t stack_desc;
    expect(cublasLtMatmulDescInit(&stack_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS, "cublasLtMatmulDescInit");

    cublasLtMatrixLayout_t l;
    expect(cublasLtMatrixLayoutCreate(&l, CUDA_R_16F, 4, 4, 4), CUBLAS_STATUS_NOT_SUPPORTED, "layout CUDA_R_16F");
    expect(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 8, 4, 7), CUBLAS_STATUS_INVALID_VALUE, "layout ld < rows");
    expect(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 1ull << 33, 1, 1ll << 33), CUBLAS_STATUS_NOT_SUPPORTED, "layout rows > INT32_MAX");
    die_if(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 8, 4, 8) != CUBLAS_STATUS_SUCCESS, "layout");
    int32_t order = CUBLASLT_ORDER_ROW;
    expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, 4), CUBLAS_STATUS_NOT_SUPPORTED, "ORDER ROW");
    order = CUBLASLT_ORDER_COL;
    expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, 4), CUBLAS_STATUS_SUCCESS, "ORDER COL");
    int32_t batch = 2;
    expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, 4), CUBLAS_STATUS_NOT_SUPPORTED, "BATCH_COUNT 2");
    batch = 1;
    expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, 4), CUBLAS_STATUS_SUCCESS, "BATCH_COUNT 1");
    int64_t stride = 64;
    expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, 8), CUBLAS_STATUS_NOT_SUPPORTED,
           "STRIDED_BATCH_OFFSET");
    uint64_t rows = 16;
    expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, 4), CUBLAS_STATUS_INVALID_VALUE, "ROWS size 4");
    expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, 8), CUBLAS_STATUS_SUCCESS, "ROWS 16 (ld 8 for now)");
    uint32_t type = CUDA_R_8I;
    expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, 4), CUBLAS_STATUS_NOT_SUPPORTED, "TYPE 8I");
    int64_t ld = 0;
    expect(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, 8, nullptr), CUBLAS_STATUS_SUCCESS, "get LD");
    check(ld == 8, "LD %lld", (long long)ld);
    cublasLtMatrixLayoutDestroy(l);

    cublasLtMatmulPreference_t pref;
    die_if(cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS, "pref");
    uint32_t align = 0;
    cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, 4, nullptr);
    check(align == 256, "MIN_ALIGNMENT_B default %u, want 256", align);
    uint32_t search = 0;
    expect(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &search, 4), CUBLAS_STATUS_NOT_SUPPORTED, "SEARCH_MODE");
    uint64_t mask = ~0ull;
    expect(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_IMPL_MASK, &mask, 8), CUBLAS_STATUS_NOT_SUPPORTED, "IMPL_MASK");
    expect(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &align, 4), CUBLAS_STATUS_INVALID_VALUE,
           "MAX_WORKSPACE_BYTES size 4");
    expect(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &mask, 8), CUBLAS_STATUS_INVALID_VALUE,
           "MIN_ALIGNMENT_A size 8");
    cublasLtMatmulPreferenceDestroy(pref);

    size_t version = cublasLtGetVersion();
    check(version == CUBLAS_VERSION, "cublasLtGetVersion %zu", version);
    int major = 0;
    expect(cublasLtGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS, "cublasLtGetProperty");
    check(major == CUBLAS_VER_MAJOR, "major version %d", major);
    check(strcmp(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED") == 0, "status name");
    check(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE)[0] != '\0', "status string");
}

// A small valid problem (fp32 or bf16), to break one thing at a time.
struct Setup {
    cudaDataType type;
    int m = 16, n = 8, k = 24;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    void *a, *b, *c, *bias;
    float alpha = 1.0f, beta = 0.0f;

    explicit Setup(cudaDataType t) : type(t) {
        die_if(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS, "desc");
        cublasLtMatrixLayoutCreate(&la, t, m, k, m);
        cublasLtMatrixLayoutCreate(&lb, t, k, n, k);
        cublasLtMatrixLayoutCreate(&lc, t, m, n, m);
        cublasLtMatmulPreferenceCreate(&pref);
        size_t es = elem_size(t);
        a = dev_alloc(m * k * es + 256), b = dev_alloc(k * n * es + 256), c = dev_alloc(m * n * es + 256);
        bias = dev_alloc(m * es + 256);
        upload(a, t, random_values(t, m * k + 256 / es));
        upload(b, t, random_values(t, k * n + 256 / es));
        upload(c, t, random_values(t, m * n + 256 / es));
        upload(bias, t, random_values(t, m + 256 / es));
    }
    ~Setup() {
        cublasLtMatmulDescDestroy(desc);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulPreferenceDestroy(pref);
        cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(bias);
    }
    cublasStatus_t heuristic(cublasLtMatmulHeuristicResult_t* r, cublasLtMatrixLayout_t lay_b = nullptr) {
        int found = 0;
        return cublasLtMatmulAlgoGetHeuristic(g_handle, desc, la, lay_b ? lay_b : lb, lc, lc, pref, 1, r, &found);
    }
    cublasStatus_t matmul(const cublasLtMatmulAlgo_t* algo, const void* pa = nullptr, void* pd = nullptr,
                          cublasLtMatrixLayout_t lay_b = nullptr, cublasLtMatrixLayout_t lay_d = nullptr) {
        cublasStatus_t s = cublasLtMatmul(g_handle, desc, &alpha, pa ? pa : a, la, b, lay_b ? lay_b : lb, &beta, c, lc,
                                          pd ? pd : c, lay_d ? lay_d : lc, algo, nullptr, 0, 0);
        cudaStreamSynchronize(0);
        return s;
    }
};

static void test_problem_checks() {
    Setup s(CUDA_R_32F);
    cublasLtMatmulHeuristicResult_t r;
    int found = -1;
    expect(cublasLtMatmulAlgoGetHeuristic(nullptr, s.desc, s.la, s.lb, s.lc, s.lc, s.pref, 1, &r, &found),
           CUBLAS_STATUS_NOT_INITIALIZED, "heuristic with NULL handle");
    expect(cublasLtMatmul(nullptr, s.desc, &s.alpha, s.a, s.la, s.b, s.lb, &s.beta, s.c, s.lc, s.c, s.lc, nullptr, nullptr, 0, 0),
           CUBLAS_STATUS_NOT_INITIALIZED, "matmul with NULL handle");
    expect(cublasLtDestroy(nullptr), CUBLAS_STATUS_NOT_INITIALIZED, "destroy NULL handle");
    expect(cublasLtMatmulAlgoGetHeuristic(g_handle, s.desc, s.la, s.lb, s.lc, s.lc, s.pref, 0, &r, &found),
           CUBLAS_STATUS_INVALID_VALUE, "requestedAlgoCount 0");
    memset(&r, 0xff, sizeof r);
    expect(cublasLtMatmulAlgoGetHeuristic(g_handle, s.desc, s.la, s.lb, s.lc, s.lc, s.pref, 4, &r, &found), CUBLAS_STATUS_SUCCESS,
           "heuristic");
    check(found == 1 && r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize == 0, "heuristic result: %d found, state %d, workspace %zu",
          found, (int)r.state, r.workspaceSize);
    expect(s.matmul(&r.algo), CUBLAS_STATUS_SUCCESS, "valid problem");
    expect(s.matmul(nullptr), CUBLAS_STATUS_SUCCESS, "valid problem, algo NULL");

    // k mismatch: B is 25 x 8
    cublasLtMatrixLayout_t lb25;
    cublasLtMatrixLayoutCreate(&lb25, CUDA_R_32F, 25, s.n, 25);
    expect(s.heuristic(&r, lb25), CUBLAS_STATUS_INVALID_VALUE, "heuristic k mismatch");
    expect(s.matmul(nullptr, nullptr, nullptr, lb25), CUBLAS_STATUS_INVALID_VALUE, "matmul k mismatch");
    cublasLtMatrixLayoutDestroy(lb25);
    // ld < rows after SetAttribute
    cublasLtMatrixLayout_t lbad;
    cublasLtMatrixLayoutCreate(&lbad, CUDA_R_32F, s.k, s.n, s.k);
    uint64_t more_rows = s.k + 1;
    cublasLtMatrixLayoutSetAttribute(lbad, CUBLASLT_MATRIX_LAYOUT_ROWS, &more_rows, 8);
    expect(s.heuristic(&r, lbad), CUBLAS_STATUS_INVALID_VALUE, "heuristic ld < rows");
    cublasLtMatrixLayoutDestroy(lbad);
    // mixed types: B bf16
    cublasLtMatrixLayout_t lbf;
    cublasLtMatrixLayoutCreate(&lbf, CUDA_R_16BF, s.k, s.n, s.k);
    expect(s.heuristic(&r, lbf), CUBLAS_STATUS_NOT_SUPPORTED, "heuristic fp32 A with bf16 B");
    expect(s.matmul(nullptr, nullptr, nullptr, lbf), CUBLAS_STATUS_NOT_SUPPORTED, "matmul fp32 A with bf16 B");
    cublasLtMatrixLayoutDestroy(lbf);
    // C == D with another ld
    cublasLtMatrixLayout_t ld2;
    cublasLtMatrixLayoutCreate(&ld2, CUDA_R_32F, s.m, s.n, s.m + 1);
    expect(s.matmul(nullptr, nullptr, s.c, nullptr, ld2), CUBLAS_STATUS_INVALID_VALUE, "C == D with different ld");
    cublasLtMatrixLayoutDestroy(ld2);
    // epilogues
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DGELU_BGRAD;
    cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    expect(s.heuristic(&r), CUBLAS_STATUS_NOT_SUPPORTED, "heuristic DGELU_BGRAD epilogue");
    expect(s.matmul(nullptr), CUBLAS_STATUS_NOT_SUPPORTED, "matmul DGELU_BGRAD epilogue");
    e = CUBLASLT_EPILOGUE_BGRADA;
    cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    expect(s.heuristic(&r), CUBLAS_STATUS_NOT_SUPPORTED, "heuristic BGRADA epilogue");
    e = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    expect(s.matmul(nullptr), CUBLAS_STATUS_INVALID_VALUE, "BIAS epilogue without a bias pointer");
    int32_t bt = CUDA_R_16BF;
    cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, 4);
    expect(s.heuristic(&r), CUBLAS_STATUS_NOT_SUPPORTED, "bf16 bias with fp32 D");
    bt = CUDA_R_32F;
    cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, 4);
    cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof s.bias);
    expect(s.heuristic(&r), CUBLAS_STATUS_SUCCESS, "fp32 bias with fp32 D");
    expect(s.matmul(&r.algo), CUBLAS_STATUS_SUCCESS, "BIAS epilogue");
    // the bias moved to 8-byte alignment after the heuristic saw it 256-aligned
    void* bias8 = (char*)s.bias + 8;
    cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias8, sizeof bias8);
    expect(s.matmul(&r.algo), CUBLAS_STATUS_INVALID_VALUE, "bias less aligned than at the heuristic");
    expect(s.matmul(nullptr), CUBLAS_STATUS_SUCCESS, "bias 8-aligned, algo NULL");
    // a made-up algorithm
    cublasLtMatmulAlgo_t junk;
    memset(&junk, 0, sizeof junk);
    expect(s.matmul(&junk), CUBLAS_STATUS_INVALID_VALUE, "algo not from the heuristic");
    // NULL alpha
    expect(cublasLtMatmul(g_handle, s.desc, nullptr, s.a, s.la, s.b, s.lb, &s.beta, s.c, s.lc, s.c, s.lc, nullptr, nullptr, 0, 0),
           CUBLAS_STATUS_INVALID_VALUE, "alpha NULL");
}

// The algorithm remembers the promised alignment; pointers must keep it.
static void test_alignment_promises() {
    Setup s(CUDA_R_32F);
    cublasLtMatmulHeuristicResult_t r;
    expect(s.heuristic(&r), CUBLAS_STATUS_SUCCESS, "heuristic with default (256-byte) promises");
    const char* a16 = (const char*)s.a + 16;
    expect(s.matmul(&r.algo, a16), CUBLAS_STATUS_INVALID_VALUE, "A 16-aligned under a 256-byte promise");
    void* d4 = (char*)s.c + 4;
    expect(s.matmul(&r.algo, nullptr, d4), CUBLAS_STATUS_INVALID_VALUE, "D 4-aligned under a 256-byte promise");
    expect(s.matmul(nullptr, a16), CUBLAS_STATUS_SUCCESS, "A 16-aligned, algo NULL");
    uint32_t sixteen = 16, twenty_four = 24;
    cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &sixteen, 4);
    expect(s.heuristic(&r), CUBLAS_STATUS_SUCCESS, "heuristic with A promised 16");
    expect(s.matmul(&r.algo, a16), CUBLAS_STATUS_SUCCESS, "A 16-aligned under a 16-byte promise");
    expect(s.matmul(&r.algo, (const char*)s.a + 8), CUBLAS_STATUS_INVALID_VALUE, "A 8-aligned under a 16-byte promise");
    cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &twenty_four, 4);
    expect(s.heuristic(&r), CUBLAS_STATUS_SUCCESS, "heuristic with A promised 24 (8-byte alignment)");
    expect(s.matmul(&r.algo, (const char*)s.a + 8), CUBLAS_STATUS_SUCCESS, "A 8-aligned under a 24-byte promise");
    expect(s.matmul(nullptr, (const char*)s.a + 2), CUBLAS_STATUS_INVALID_VALUE, "fp32 A at a 2-byte offset");

    Setup h(CUDA_R_16BF);
    expect(h.matmul(nullptr, (const char*)h.a + 1), CUBLAS_STATUS_INVALID_VALUE, "bf16 A at an odd address");
    expect(h.matmul(nullptr, (const char*)h.a + 2), CUBLAS_STATUS_SUCCESS, "bf16 A at a 2-byte offset, algo NULL");
}

// Errors a GPU would not report as a status end the process with 86: run them in a child.
static void expect_fatal(const char* what, const std::function<void()>& fn) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        cudaStreamSynchronize(0);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 86, "%s: child exit status %d, want 86 (emu::fatal)", what,
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void test_fatal_paths() {
    Setup s(CUDA_R_32F);
    std::vector<float> host_a(s.m * s.k, 1.0f);
    expect_fatal("host pointer as A", [&] { s.matmul(nullptr, host_a.data()); });
    expect_fatal("A extends past its allocation", [&] { s.matmul(nullptr, (const char*)s.a + 512); });
    expect_fatal("device pointer as alpha", [&] {
        cublasLtMatmul(g_handle, s.desc, s.bias, s.a, s.la, s.b, s.lb, &s.beta, s.c, s.lc, s.c, s.lc, nullptr, nullptr, 0, 0);
    });
}

// ---------------------------------------------------------------------------------------------
// the GPT-2 124M LM-head shapes: logits (Vp x BT) = wte^T-view products, as matmul.cuh calls them

static double now_seconds() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench() {
    const int Vp = 50304, C = 768, BT = 128;
    struct {
        const char* name;
        int m, n, k, ta, tb, acc;
    } shapes[3] = {{"forward  (m=50304 n=128 k=768)", Vp, BT, C, 1, 0, 0},
                   {"dinp     (m=768 n=128 k=50304)", C, BT, Vp, 0, 0, 0},
                   {"dweight  (m=768 n=50304 k=128)", C, Vp, BT, 0, 1, 1}};
    const cudaDataType types[2] = {CUDA_R_32F, CUDA_R_16BF};
    for (cudaDataType t : types) {
        size_t es = elem_size(t);
        void* w = dev_alloc((size_t)Vp * C * es);
        void* x = dev_alloc((size_t)BT * C * es);
        void* y = dev_alloc((size_t)Vp * BT * es);
        upload(w, t, random_values(t, (size_t)Vp * C));
        upload(x, t, random_values(t, (size_t)BT * C));
        upload(y, t, random_values(t, (size_t)Vp * BT));
        for (auto& sh : shapes) {
            // operands: forward d=y a=w b=x; dinp d=x a=w b=y; dweight d=w a=x b=y
            void *d = sh.m == Vp ? y : (sh.n == BT ? x : w);
            const void *a = sh.m == Vp ? w : (sh.n == BT ? w : x), *b = sh.m == Vp ? x : y;
            double t0 = now_seconds();
            cublasStatus_t s = matmul_llmc(t, d, a, b, nullptr, sh.m, sh.n, sh.k, sh.ta, sh.tb, sh.acc);
            cudaStreamSynchronize(0);
            double t1 = now_seconds();
            printf("bench %s %s: %.3f s (%.2f GFLOP/s)%s\n", t == CUDA_R_16BF ? "bf16" : "fp32", sh.name, t1 - t0,
                   2.0 * sh.m * sh.n * sh.k / (t1 - t0) * 1e-9, s == CUBLAS_STATUS_SUCCESS ? "" : " FAILED");
        }
        cudaFree(w), cudaFree(x), cudaFree(y);
    }
}

// ---------------------------------------------------------------------------------------------
// the GELU epilogues: GELU_AUX_BIAS (D = GELU(v), aux = v) and DGELU (D = v * GELU'(aux)), v the
// product plus bias, against a double reference of the tanh form; and their attributes: a missing
// aux pointer or ld, an ld not divisible by 8 or below D's rows, another aux type, an aux less
// aligned than the heuristic saw.

static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_grad_ref(double x) {
    double th = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

static void test_gelu_epilogues() {
    for (cudaDataType t : {CUDA_R_32F, CUDA_R_16BF}) {
        Setup s(t); // a (m x k), b (k x n), c/d (m x n, ld m = 16), bias (m)
        const int m = s.m, n = s.n, k = s.k;
        const char* tl = type_label(t);
        size_t es = elem_size(t);
        std::vector<float> ha = download(s.a, t, (size_t)m * k), hb = download(s.b, t, (size_t)k * n);
        std::vector<float> hbias = download(s.bias, t, m);
        const int aux_ld = 24; // >= m, divisible by 8, not m: the aux's own leading dimension
        void* aux = dev_alloc((size_t)aux_ld * n * es);
        void* d = dev_alloc((size_t)m * n * es);
        double tol_rel = t == CUDA_R_16BF ? 1.0 / 128 : 1e-5; // one bf16 rounding of the output; fp32 sums
        // forward
        cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof s.bias);
        cublasLtMatmulHeuristicResult_t r;
        char what[128];
        snprintf(what, sizeof what, "GELU_AUX_BIAS without an aux pointer %s", tl);
        int64_t ld = aux_ld;
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        expect(s.matmul(nullptr, nullptr, d), CUBLAS_STATUS_INVALID_VALUE, what);
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        ld = 0; // unset
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        snprintf(what, sizeof what, "GELU_AUX_BIAS without EPILOGUE_AUX_LD %s", tl);
        expect(s.heuristic(&r), CUBLAS_STATUS_INVALID_VALUE, what);
        ld = 20; // not divisible by 8
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        snprintf(what, sizeof what, "GELU_AUX_BIAS with aux ld 20 %s", tl);
        expect(s.heuristic(&r), CUBLAS_STATUS_INVALID_VALUE, what);
        ld = 8; // fewer than D's 16 rows
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        snprintf(what, sizeof what, "GELU_AUX_BIAS with aux ld 8 < 16 rows %s", tl);
        expect(s.matmul(nullptr, nullptr, d), CUBLAS_STATUS_INVALID_VALUE, what);
        ld = aux_ld;
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
        int32_t other = t == CUDA_R_16BF ? CUDA_R_32F : CUDA_R_16BF;
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &other, sizeof other);
        snprintf(what, sizeof what, "GELU_AUX_BIAS with an aux of another type %s", tl);
        expect(s.heuristic(&r), CUBLAS_STATUS_NOT_SUPPORTED, what);
        other = -1;
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &other, sizeof other);
        snprintf(what, sizeof what, "GELU_AUX_BIAS heuristic %s", tl);
        expect(s.heuristic(&r), CUBLAS_STATUS_SUCCESS, what);
        void* aux8 = (char*)aux + 8; // 256-aligned when the heuristic saw it
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux8, sizeof aux8);
        snprintf(what, sizeof what, "GELU_AUX_BIAS aux less aligned than at the heuristic %s", tl);
        expect(s.matmul(&r.algo, nullptr, d), CUBLAS_STATUS_INVALID_VALUE, what);
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        upload(aux, t, std::vector<float>((size_t)aux_ld * n, NAN)); // the padding rows must stay NaN
        snprintf(what, sizeof what, "GELU_AUX_BIAS %s", tl);
        if (expect(s.matmul(&r.algo, nullptr, d), CUBLAS_STATUS_SUCCESS, what)) {
            std::vector<float> hd = download(d, t, (size_t)m * n), haux = download(aux, t, (size_t)aux_ld * n);
            double worst_d = 0, worst_aux = 0;
            bool pad_ok = true;
            for (int j = 0; j < n; j++) {
                for (int i = 0; i < aux_ld; i++) {
                    if (i >= m) { pad_ok = pad_ok && isnan(haux[i + j * aux_ld]); continue; }
                    double v = hbias[i], mag = fabs(hbias[i]);
                    for (int kk = 0; kk < k; kk++) { v += (double)ha[i + kk * m] * hb[kk + j * k]; mag += fabs((double)ha[i + kk * m] * hb[kk + j * k]); }
                    worst_aux = fmax(worst_aux, fabs(haux[i + j * aux_ld] - v) / (mag + 1e-30));
                    // GELU of the unrounded v: its error is v's, scaled by GELU' (< 1.13), plus D's rounding
                    worst_d = fmax(worst_d, fabs(hd[i + j * m] - gelu_ref(v)) / (mag + 1e-30));
                }
            }
            check(worst_aux <= tol_rel && worst_d <= 1.13 * tol_rel + 1e-6 && pad_ok,
                  "GELU_AUX_BIAS %s: aux err %.3g, D err %.3g of the terms' magnitude (bound %.3g), aux padding %s", tl,
                  worst_aux, worst_d, tol_rel, pad_ok ? "untouched" : "WRITTEN");
        }
        // backward: D = (a b) * GELU'(aux), aux as stored (the values just written)
        std::vector<float> haux = download(aux, t, (size_t)aux_ld * n);
        e = CUBLASLT_EPILOGUE_DGELU;
        cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        snprintf(what, sizeof what, "DGELU heuristic %s", tl);
        expect(s.heuristic(&r), CUBLAS_STATUS_SUCCESS, what);
        snprintf(what, sizeof what, "DGELU %s", tl);
        if (expect(s.matmul(&r.algo, nullptr, d), CUBLAS_STATUS_SUCCESS, what)) {
            std::vector<float> hd = download(d, t, (size_t)m * n);
            double worst = 0;
            for (int j = 0; j < n; j++) {
                for (int i = 0; i < m; i++) {
                    double v = 0, mag = 0;
                    for (int kk = 0; kk < k; kk++) { v += (double)ha[i + kk * m] * hb[kk + j * k]; mag += fabs((double)ha[i + kk * m] * hb[kk + j * k]); }
                    double g = gelu_grad_ref(haux[i + j * aux_ld]); // the bias plays no part in DGELU
                    // GELU' in fp32 is off by a few 1e-8 absolute (1 + tanh's roundings), which near its
                    // zero (x = -0.75) is no small part of it: 1e-6 of the magnitude absolute
                    worst = fmax(worst, fabs(hd[i + j * m] - v * g) / (mag * (tol_rel * fabs(g) + 1e-6) + 1e-30));
                }
            }
            check(worst <= 1.0, "DGELU %s: D err %.3g of its bound (%.3g |GELU'| + 1e-6, times the terms' magnitude)", tl, worst,
                  tol_rel);
        }
        cudaFree(aux), cudaFree(d);
    }
}

// BGRADB: the column sums of op(B) (n of them, reduced over k) WRITTEN to the bias pointer, D the
// plain product (here accumulated, beta 1, as llmc's dweight product is); with op(B) = B and B^T.
static void test_bgradb() {
    for (cudaDataType t : {CUDA_R_32F, CUDA_R_16BF}) {
        for (int tb = 0; tb < 2; tb++) {
            Setup s(t); // a (m x k), c/d (m x n); b is k x n, or n x k read transposed
            const int m = s.m, n = s.n, k = s.k;
            char what[128];
            snprintf(what, sizeof what, "BGRADB%s %s", tb ? " (B transposed)" : "", type_label(t));
            cublasLtMatrixLayout_t lbt;
            cublasLtMatrixLayoutCreate(&lbt, t, tb ? n : k, tb ? k : n, tb ? n : k);
            cublasOperation_t op = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
            cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op, sizeof op);
            cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BGRADB;
            cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
            s.beta = 1.0f;
            void* d = dev_alloc((size_t)m * n * elem_size(t));
            die_if(cudaMemcpy(d, s.c, (size_t)m * n * elem_size(t), cudaMemcpyDeviceToDevice) != cudaSuccess, "copy C");
            std::vector<float> ha = download(s.a, t, (size_t)m * k), hb = download(s.b, t, (size_t)k * n);
            std::vector<float> hc = download(s.c, t, (size_t)m * n);
            cublasLtMatmulHeuristicResult_t r;
            expect(s.matmul(nullptr, nullptr, d, lbt, nullptr), CUBLAS_STATUS_INVALID_VALUE, "BGRADB without a bias pointer");
            upload(s.bias, t, std::vector<float>(n, NAN)); // written, not added to
            cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof s.bias);
            int found = 0;
            if (!expect(cublasLtMatmulAlgoGetHeuristic(g_handle, s.desc, s.la, lbt, s.lc, s.lc, s.pref, 1, &r, &found),
                        CUBLAS_STATUS_SUCCESS, what) ||
                !expect(s.matmul(&r.algo, nullptr, d, lbt, nullptr), CUBLAS_STATUS_SUCCESS, what)) {
                cudaFree(d);
                cublasLtMatrixLayoutDestroy(lbt);
                continue;
            }
            std::vector<float> hd = download(d, t, (size_t)m * n), hg = download(s.bias, t, n);
            double tol = t == CUDA_R_16BF ? 1.0 / 128 : (k + 8) * 1.2e-7;
            double worst_g = 0, worst_d = 0;
            for (int j = 0; j < n; j++) {
                double g = 0, gmag = 0;
                for (int kk = 0; kk < k; kk++) {
                    double bv = tb ? hb[j + (size_t)kk * n] : hb[kk + (size_t)j * k];
                    g += bv, gmag += fabs(bv);
                }
                worst_g = fmax(worst_g, fabs(hg[j] - g) / (gmag + 1e-30)); // NaN stays NaN: fails
                if (hg[j] != hg[j]) { worst_g = INFINITY; }
                for (int i = 0; i < m; i++) {
                    double v = hc[i + j * m], mag = fabs(v);
                    for (int kk = 0; kk < k; kk++) {
                        double bv = tb ? hb[j + (size_t)kk * n] : hb[kk + (size_t)j * k];
                        v += (double)ha[i + (size_t)kk * m] * bv, mag += fabs((double)ha[i + (size_t)kk * m] * bv);
                    }
                    worst_d = fmax(worst_d, fabs(hd[i + j * m] - v) / (mag + 1e-30));
                }
            }
            check(worst_g <= tol && worst_d <= tol, "%s: bias gradient err %.3g, D err %.3g of the terms' magnitude (bound %.3g)",
                  what, worst_g, worst_d, tol);
            cudaFree(d);
            cublasLtMatrixLayoutDestroy(lbt);
        }
    }
}

int main(int argc, char** argv) {
    bool do_bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    die_if(cublasLtCreate(&g_handle) != CUBLAS_STATUS_SUCCESS, "cublasLtCreate");
    g_workspace = dev_alloc(WORKSPACE_BYTES);
    unsetenv("EMU_CUBLASLT_ALGO_BY_ALIGNMENT");

    test_products();
    test_llmc_products();
    test_thread_independence();
    test_algo_by_alignment();
    test_descriptors();
    test_problem_checks();
    test_gelu_epilogues();
    test_bgradb();
    test_alignment_promises();
    test_fatal_paths();
    if (do_bench) { bench(); }

    cudaFree(g_workspace);
    expect(cublasLtDestroy(g_handle), CUBLAS_STATUS_SUCCESS, "cublasLtDestroy");
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
