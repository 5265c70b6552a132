/*
Host tests of the CUDA layer kernels' per-element math (DESIGN.md §6, level 7): no GPU needed.

llmc/layernorm.cuh, encoder.cuh and gelu.cuh keep their math in __host__ __device__ helpers and
their encoder buckets in a host function. Here the kernels are replayed with plain loops on the
host, in the kernels' own summation orders (each thread's pack of columns, then block_sum's
butterflies; rows in order within a chunk, then chunk order), and compared with train_gpt2.c's
CPU kernels on random data.
What stays unchecked without a GPU is the thread/block indexing itself.

    nvcc -DENABLE_BF16 -O2 -std=c++17 -I. -Xcompiler -fopenmp dev/test/test_layers_host.cu -o test_layers_host -lm
    ./test_layers_host          (also with -DENABLE_FP32)

Every check prints its name and PASS or FAIL (with the worst element); the last line is
"N passed, M failed", and the exit status is non-zero on any failure.
Tolerances are atol + rtol * |reference| per check, each with its reason.
*/
#include "cpu_reference.h"
#include "../../llmc/layernorm.cuh"
#include "../../llmc/encoder.cuh"
#include "../../llmc/gelu.cuh"

static int g_passed = 0, g_failed = 0;

static void report(const char* name, int ok, const char* detail) {
    printf("%-58s %s%s%s\n", name, ok ? "PASS" : "FAIL", detail[0] ? "  " : "", detail);
    if (ok) { g_passed++; } else { g_failed++; }
}

// |got - ref| <= atol + rtol * |ref| everywhere; on failure names the worst index and both values
static void check_close(const char* name, const float* got, const float* ref, size_t n, float atol, float rtol) {
    size_t worst = 0;
    double worst_excess = -1e30, worst_err = 0.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)ref[i]);
        double excess = err - (atol + rtol * fabs((double)ref[i]));
        if (!(excess <= 0.0)) { ok = 0; } // NaN fails too
        if (excess > worst_excess || excess != excess) { worst_excess = excess; worst = i; worst_err = err; }
    }
    char detail[200];
    snprintf(detail, sizeof(detail), "(n=%zu, worst [%zu]: got %.9g ref %.9g, |err| %.3g, atol %g rtol %g)", n,
             worst, got[worst], ref[worst], worst_err, atol, rtol);
    report(name, ok, detail);
}

// ----------------------------------------------------------------------------
// helpers: data and the device's reduction order

// random normal values that floatX holds exactly, so the CPU (fp32) and the emulated kernel read
// the very same numbers in the bf16 build as well
static float* random_floatX(Rng* rng, size_t n, float mean, float std) {
    float* x = (float*)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { x[i] = to_float(from_float(rng_normal(rng, mean, std))); }
    return x;
}

static float* copy_of(const float* x, size_t n) {
    float* y = (float*)mallocCheck(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

// warp_sum of cuda_common.cuh: x_l += x_(l xor offset) for offset 16, 8, 4, 2, 1. Every lane
// ends with the same value (float addition is commutative); lane 0's is returned.
static float warp_sum_host(const float lanes[32]) {
    float x[32], y[32];
    memcpy(x, lanes, sizeof(x));
    for (int offset = 16; offset > 0; offset >>= 1) {
        for (int l = 0; l < 32; l++) { y[l] = x[l] + x[l ^ offset]; }
        memcpy(x, y, sizeof(x));
    }
    return x[0];
}

// block_sum of cuda_common.cuh over nthreads (a multiple of 32) threads' values: each warp's
// butterfly, then the butterfly over the warps' results (lanes past the last warp hold 0)
static float block_sum_host(const float* threads, int nthreads) {
    float lanes[32];
    int warps = nthreads / 32;
    for (int l = 0; l < 32; l++) { lanes[l] = l < warps ? warp_sum_host(threads + 32 * l) : 0.0f; }
    return warp_sum_host(lanes);
}

// ----------------------------------------------------------------------------
// layernorm: the kernels replayed, thread by thread of a block (thread t owns pack t of a row:
// the columns [t * PACKX_SIZE, (t + 1) * PACKX_SIZE) below C)

// layernorm_forward_kernel on one row (already the rounded residual in the fused case)
static void layernorm_forward_row_host(float* out, float* mean, float* rstd, const float* x, const float* weight,
                                       const float* bias, int C) {
    int nthreads = layernorm_threads(C);
    float* part = (float*)mallocCheck(nthreads * sizeof(float));
    for (int t = 0; t < nthreads; t++) {
        part[t] = 0.0f;
        for (int i = t * PACKX_SIZE; i < (t + 1) * PACKX_SIZE && i < C; i++) { part[t] += x[i]; }
    }
    float m = layernorm_mean(block_sum_host(part, nthreads), C);
    for (int t = 0; t < nthreads; t++) {
        part[t] = 0.0f;
        for (int i = t * PACKX_SIZE; i < (t + 1) * PACKX_SIZE && i < C; i++) { float d = x[i] - m; part[t] += d * d; }
    }
    float s = layernorm_rstd(block_sum_host(part, nthreads), C);
    for (int i = 0; i < C; i++) { out[i] = layernorm_normalize(x[i], m, s, weight[i], bias[i]); }
    *mean = m;
    *rstd = s;
    free(part);
}

// layernorm_backward_warp_kernel (a warp per chunk, where C allows) or layernorm_backward_kernel
// (a block per chunk), then layernorm_backward_dweight_kernel: the rows in chunks of
// LAYERNORM_BWD_ROWS; per row the lanes' (threads') sums and the warp (block) sums, dinp (before the kernel's
// rounding to floatX) +=, each column's dweight/dbias terms in row order; then the chunks, by lane
static void layernorm_backward_host(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                    const float* weight, const float* mean, const float* rstd, int N, int C) {
    int nthreads = layernorm_threads(C), chunks = layernorm_backward_chunks(N);
    int packs = (int)packs_of(C);
    int warp_rows = layernorm_backward_lane_packs(C) <= LAYERNORM_BWD_LANE_PACKS; // the launcher's choice
    size_t scratch_floats = layernorm_backward_scratch_floats(N, C);
    if (scratch_floats < (size_t)chunks * 2 * C) { fail("scratch too small"); }
    float* partial = (float*)mallocCheck(scratch_floats * sizeof(float));
    float* dnorm_part = (float*)mallocCheck(nthreads * sizeof(float));
    float* dnorm_norm_part = (float*)mallocCheck(nthreads * sizeof(float));
    for (int chunk = 0; chunk < chunks; chunk++) {
        float* dw = partial + (size_t)chunk * 2 * C; // one thread's registers per column
        float* db = dw + C;
        for (int col = 0; col < C; col++) { dw[col] = db[col] = 0.0f; }
        int r0 = chunk * LAYERNORM_BWD_ROWS, r1 = r0 + LAYERNORM_BWD_ROWS < N ? r0 + LAYERNORM_BWD_ROWS : N;
        for (int r = r0; r < r1; r++) {
            const float* x = inp + (size_t)r * C;
            const float* d = dout + (size_t)r * C;
            float m = mean[r], s = rstd[r];
            float dnorm_mean, dnorm_norm_mean;
            if (warp_rows) { // layernorm_backward_warp_kernel: lane l sums packs l, l + 32, ... in order, then warp_sum
                float lanes_dnorm[32], lanes_dnorm_norm[32];
                for (int l = 0; l < 32; l++) {
                    lanes_dnorm[l] = lanes_dnorm_norm[l] = 0.0f;
                    for (int g = l; g < packs; g += 32) {
                        for (int i = g * PACKX_SIZE; i < (g + 1) * PACKX_SIZE && i < C; i++) {
                            float norm = layernorm_norm(x[i], m, s), dnorm = weight[i] * d[i];
                            lanes_dnorm[l] += dnorm;
                            lanes_dnorm_norm[l] += dnorm * norm;
                        }
                    }
                }
                dnorm_mean = warp_sum_host(lanes_dnorm) / C;
                dnorm_norm_mean = warp_sum_host(lanes_dnorm_norm) / C;
            } else { // layernorm_backward_kernel: thread t sums pack t, then block_sum
                for (int t = 0; t < nthreads; t++) {
                    dnorm_part[t] = dnorm_norm_part[t] = 0.0f;
                    for (int i = t * PACKX_SIZE; i < (t + 1) * PACKX_SIZE && i < C; i++) {
                        float norm = layernorm_norm(x[i], m, s), dnorm = weight[i] * d[i];
                        dnorm_part[t] += dnorm;
                        dnorm_norm_part[t] += dnorm * norm;
                    }
                }
                dnorm_mean = block_sum_host(dnorm_part, nthreads) / C;
                dnorm_norm_mean = block_sum_host(dnorm_norm_part, nthreads) / C;
            }
            for (int i = 0; i < C; i++) {
                float norm = layernorm_norm(x[i], m, s), dnorm = weight[i] * d[i];
                dinp[(size_t)r * C + i] += layernorm_dinp(dnorm, norm, dnorm_mean, dnorm_norm_mean, s);
                dw[i] += norm * d[i];
                db[i] += d[i];
            }
        }
    }
    for (int col = 0; col < C; col++) { // layernorm_backward_dweight_kernel: chunk lanes, then the lanes in order
        float dw = 0.0f, db = 0.0f;
        for (int y = 0; y < LAYERNORM_CHUNK_LANES; y++) {
            float dw_lane = 0.0f, db_lane = 0.0f;
            for (int chunk = y; chunk < chunks; chunk += LAYERNORM_CHUNK_LANES) {
                dw_lane += partial[(size_t)chunk * 2 * C + col];
                db_lane += partial[(size_t)chunk * 2 * C + C + col];
            }
            dw += dw_lane;
            db += db_lane;
        }
        dweight[col] += dw;
        dbias[col] += db;
    }
    free(partial); free(dnorm_part); free(dnorm_norm_part);
}

// Forward and backward at one shape, emulated kernels vs train_gpt2.c.
// Tolerances: both sides compute in fp32 from the same (floatX-exact) inputs and differ only in
// summation order (lanes + butterfly vs the CPU's sequential/SIMD order) and thus by a few ulps
// of each sum: a relative 1e-5 covers rows of 768 (the errors grow ~sqrt(C) * 6e-8, and the
// backward's dinp cancels three terms of size ~1, so its atol is 1e-5 of that scale).
static void test_layernorm(const char* shape, int N, int C, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed);
    size_t NC = (size_t)N * C;
    float* inp = random_floatX(&rng, NC, 0.5f, 2.0f); // an offset mean: the two-pass variance matters
    float* weight = random_floatX(&rng, C, 1.0f, 0.3f);
    float* bias = random_floatX(&rng, C, 0.0f, 0.3f);
    float* dout = random_floatX(&rng, NC, 0.0f, 1.0f);
    float* dinp0 = random_floatX(&rng, NC, 0.0f, 1.0f); // gradients already there: backward adds
    float* dweight0 = random_floatX(&rng, C, 0.0f, 1.0f);
    float* dbias0 = random_floatX(&rng, C, 0.0f, 1.0f);
    char name[128];

    // forward
    float* out_ref = (float*)mallocCheck(NC * sizeof(float));
    float* mean_ref = (float*)mallocCheck(N * sizeof(float));
    float* rstd_ref = (float*)mallocCheck(N * sizeof(float));
    layernorm_forward(out_ref, mean_ref, rstd_ref, inp, weight, bias, 1, N, C);
    float* out = (float*)mallocCheck(NC * sizeof(float));
    float* mean = (float*)mallocCheck(N * sizeof(float));
    float* rstd = (float*)mallocCheck(N * sizeof(float));
    for (int r = 0; r < N; r++) {
        layernorm_forward_row_host(out + (size_t)r * C, mean + r, rstd + r, inp + (size_t)r * C, weight, bias, C);
    }
    snprintf(name, sizeof(name), "layernorm forward out %s", shape);
    check_close(name, out, out_ref, NC, 1e-5f, 1e-5f);
    snprintf(name, sizeof(name), "layernorm forward mean %s", shape);
    check_close(name, mean, mean_ref, N, 1e-6f, 1e-5f);
    snprintf(name, sizeof(name), "layernorm forward rstd %s", shape);
    check_close(name, rstd, rstd_ref, N, 0.0f, 1e-5f);

    // backward, from the CPU's mean and rstd (the kernels' inputs)
    float* dinp_ref = copy_of(dinp0, NC);
    float* dweight_ref = copy_of(dweight0, C);
    float* dbias_ref = copy_of(dbias0, C);
    layernorm_backward(dinp_ref, dweight_ref, dbias_ref, dout, inp, weight, mean_ref, rstd_ref, 1, N, C);
    float* dinp = copy_of(dinp0, NC);
    float* dweight = copy_of(dweight0, C);
    float* dbias = copy_of(dbias0, C);
    layernorm_backward_host(dinp, dweight, dbias, dout, inp, weight, mean_ref, rstd_ref, N, C);
    snprintf(name, sizeof(name), "layernorm backward dinp %s", shape);
    check_close(name, dinp, dinp_ref, NC, 1e-5f, 1e-5f);
    // dweight/dbias sum N terms of size ~1 (the CPU sequentially): the partial sums grow to
    // ~sqrt(N), each add rounds by up to half an ulp of that (~6e-8 sqrt(N)), and N such
    // roundings random-walk to ~6e-8 N. atol 2e-7 N + 1e-6, about 3x that.
    float sum_atol = 2e-7f * (float)N + 1e-6f;
    snprintf(name, sizeof(name), "layernorm backward dweight %s", shape);
    check_close(name, dweight, dweight_ref, C, sum_atol, 1e-5f);
    snprintf(name, sizeof(name), "layernorm backward dbias %s", shape);
    check_close(name, dbias, dbias_ref, C, sum_atol, 1e-5f);

    float* all[] = {inp, weight, bias, dout, dinp0, dweight0, dbias0, out_ref, mean_ref, rstd_ref, out, mean, rstd,
                    dinp_ref, dweight_ref, dbias_ref, dinp, dweight, dbias};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) { free(all[i]); }
}

// fused_residual_layernorm_forward: the residual is rounded to floatX, and the statistics come
// from the rounded values. The reference is train_gpt2.c's residual_forward, rounded to floatX,
// then its layernorm_forward: in the bf16 build a kernel that took the statistics from the
// unrounded fp32 sum would miss this reference by ~2e-4 in rstd and ~1e-2 in out (tried).
// Tolerances as above.
static void test_fused_residual_layernorm(int N, int C, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed);
    size_t NC = (size_t)N * C;
    float* inp1 = random_floatX(&rng, NC, 0.3f, 1.0f);
    float* inp2 = random_floatX(&rng, NC, 0.0f, 1.0f);
    float* weight = random_floatX(&rng, C, 1.0f, 0.3f);
    float* bias = random_floatX(&rng, C, 0.0f, 0.3f);
    float* residual_ref = (float*)mallocCheck(NC * sizeof(float));
    residual_forward(residual_ref, inp1, inp2, NC);
    for (size_t i = 0; i < NC; i++) { residual_ref[i] = to_float(from_float(residual_ref[i])); }
    float* out_ref = (float*)mallocCheck(NC * sizeof(float));
    float* mean_ref = (float*)mallocCheck(N * sizeof(float));
    float* rstd_ref = (float*)mallocCheck(N * sizeof(float));
    layernorm_forward(out_ref, mean_ref, rstd_ref, residual_ref, weight, bias, 1, N, C);

    float* residual = (float*)mallocCheck(NC * sizeof(float));
    float* out = (float*)mallocCheck(NC * sizeof(float));
    float* mean = (float*)mallocCheck(N * sizeof(float));
    float* rstd = (float*)mallocCheck(N * sizeof(float));
    for (size_t i = 0; i < NC; i++) { residual[i] = to_float(from_float(inp1[i] + inp2[i])); } // as the kernel
    for (int r = 0; r < N; r++) {
        layernorm_forward_row_host(out + (size_t)r * C, mean + r, rstd + r, residual + (size_t)r * C, weight, bias, C);
    }
    char name[128];
    snprintf(name, sizeof(name), "fused residual+layernorm residual N=%d C=%d", N, C);
    check_close(name, residual, residual_ref, NC, 0.0f, 0.0f); // one rounding of the same sum: exact
    snprintf(name, sizeof(name), "fused residual+layernorm out N=%d C=%d", N, C);
    check_close(name, out, out_ref, NC, 1e-5f, 1e-5f);
    snprintf(name, sizeof(name), "fused residual+layernorm rstd N=%d C=%d", N, C);
    check_close(name, rstd, rstd_ref, N, 0.0f, 1e-5f);
    float* all[] = {inp1, inp2, weight, bias, residual_ref, out_ref, mean_ref, rstd_ref, residual, out, mean, rstd};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) { free(all[i]); }
}

// The limits of the launch shape: one thread per 16-byte pack of a row fits a block of
// LAYERNORM_MAX_THREADS (the kernels' __launch_bounds__) up to LAYERNORM_MAX_C, which covers
// GPT-2's largest C (1600), in this build.
static void test_layernorm_limits(void) {
    char detail[100];
    snprintf(detail, sizeof(detail), "(%d threads at C=%d, %d-element packs)", layernorm_threads(LAYERNORM_MAX_C),
             LAYERNORM_MAX_C, PACKX_SIZE);
    report("layernorm: a block holds a row of LAYERNORM_MAX_C >= 1600 channels", layernorm_threads(LAYERNORM_MAX_C) <= LAYERNORM_MAX_THREADS &&
           layernorm_threads(LAYERNORM_MAX_C) % 32 == 0 && 1600 <= LAYERNORM_MAX_C, detail);
}

// ----------------------------------------------------------------------------
// GELU

// gelu_value / gelu_derivative vs train_gpt2.c's gelu_forward / gelu_backward on x in [-10, 10].
// The CPU computes tanh as 1 - 2/(exp(2u)+1) (absolute error ~1.2e-7), the helpers use tanhf
// (~2 ulps): tanh differs by up to ~2.5e-7 absolute.
//   value: that times 0.5|x| where 1 + tanh is not yet exactly 0 or 2 (|x| < ~5.5): atol 2e-6.
//   derivative: sech^2 = 1 - tanh^2 differs by 2 * 2.5e-7, times 0.5 |x| sqrt(2/pi) (1 + 3c x^2),
//   which reaches ~9.5 at |x| ~ 5.2, where tanh is a few ulps from +-1 (further out both sides
//   round tanh to exactly +-1): ~5e-6 (the CPU gives 0 at x = -5, the true value is -2e-6).
// rtol 1e-6 covers the few float roundings of the rest of the formula, which is the same.
// A wrong constant or term moves the results by 1e-2 or more, far outside these.
static void test_gelu(void) {
    const int n = 20001; // step 1e-3, exactly 0 and +-10 included
    float* x = (float*)mallocCheck(n * sizeof(float));
    for (int i = 0; i < n; i++) { x[i] = -10.0f + 20.0f * (float)i / (float)(n - 1); }
    float* value_ref = (float*)mallocCheck(n * sizeof(float));
    float* grad_ref = (float*)callocCheck(n, sizeof(float)); // the CPU's backward adds: start at 0
    float* ones = (float*)mallocCheck(n * sizeof(float));
    for (int i = 0; i < n; i++) { ones[i] = 1.0f; }
    gelu_forward(value_ref, x, n);
    gelu_backward(grad_ref, x, ones, n);
    float* value = (float*)mallocCheck(n * sizeof(float));
    float* grad = (float*)mallocCheck(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        value[i] = gelu_value(x[i]);
        grad[i] = gelu_derivative(x[i]);
    }
    check_close("gelu_value vs gelu_forward on [-10, 10]", value, value_ref, n, 2e-6f, 1e-6f);
    check_close("gelu_derivative vs gelu_backward on [-10, 10]", grad, grad_ref, n, 5e-6f, 1e-6f);

    // the derivative is the derivative: a central difference in double-checked float steps
    // (h = 1e-2 keeps the float rounding of the difference ~1e-5; the truncation error h^2 f'''/6 ~ 3e-5)
    int ok = 1;
    double worst = 0.0;
    for (int i = 0; i < n; i += 10) {
        float h = 1e-2f;
        double fd = ((double)gelu_value(x[i] + h) - (double)gelu_value(x[i] - h)) / (2.0 * h);
        double err = fabs(fd - (double)gelu_derivative(x[i]));
        if (err > worst) { worst = err; }
        if (!(err <= 2e-4)) { ok = 0; }
    }
    char detail[100];
    snprintf(detail, sizeof(detail), "(worst |err| %.3g, atol 2e-4)", worst);
    report("gelu_derivative vs central differences of gelu_value", ok, detail);
    free(x); free(value_ref); free(grad_ref); free(ones); free(value); free(grad);
}

// ----------------------------------------------------------------------------
// encoder

// The buckets of encoder_backward_buckets, checked directly: the distinct tokens ascend, each
// bucket is non-empty and holds only positions of its token, in ascending order, and together
// the buckets hold every position exactly once.
static void check_buckets(const char* name, const int* inp, int BT, int V) {
    int* token = (int*)mallocCheck((size_t)BT * sizeof(int));
    int* start = (int*)mallocCheck(((size_t)BT + 1) * sizeof(int));
    int* pos = (int*)mallocCheck((size_t)BT * sizeof(int));
    int* cursor = (int*)mallocCheck((size_t)V * sizeof(int));
    int* seen = (int*)callocCheck(BT, sizeof(int));
    int num_tokens = encoder_backward_buckets(token, start, pos, cursor, V, inp, BT);
    int ok = num_tokens >= 1 && num_tokens <= BT && start[0] == 0 && start[num_tokens] == BT;
    char detail[160] = "";
    for (int k = 0; ok && k < num_tokens; k++) {
        if (k > 0 && token[k] <= token[k - 1]) { ok = 0; snprintf(detail, sizeof(detail), "(tokens not ascending at %d)", k); }
        if (start[k + 1] <= start[k]) { ok = 0; snprintf(detail, sizeof(detail), "(bucket %d empty)", k); }
        for (int j = start[k]; ok && j < start[k + 1]; j++) {
            if (pos[j] < 0 || pos[j] >= BT || inp[pos[j]] != token[k] || seen[pos[j]]++) {
                ok = 0;
                snprintf(detail, sizeof(detail), "(bucket %d entry %d: position %d wrong or repeated)", k, j, pos[j]);
            } else if (j > start[k] && pos[j] <= pos[j - 1]) {
                ok = 0;
                snprintf(detail, sizeof(detail), "(bucket %d: positions not ascending at %d)", k, j);
            }
        }
    }
    for (int i = 0; ok && i < BT; i++) {
        if (seen[i] != 1) { ok = 0; snprintf(detail, sizeof(detail), "(position %d in no bucket)", i); }
    }
    if (ok) { snprintf(detail, sizeof(detail), "(%d positions, %d distinct tokens)", BT, num_tokens); }
    report(name, ok, detail);
    free(token); free(start); free(pos); free(cursor); free(seen);
}

// encoder_forward and encoder_backward, the kernels replayed on the buckets vs train_gpt2.c.
// forward: one float add per element on both sides, then floatX rounding in the kernel: exact
// in the fp32 build; the comparison is made before the rounding, so exact in both.
// backward: the CPU adds each position into the gradient one by one, the kernel sums a token's
// positions first (8 slices of every 8th position, then the slices in order) and adds once: a
// few ulps of sums of up to ~B*T/V values ~1: atol 1e-5.
static void test_encoder(int B, int T, int C, int V, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed);
    int BT = B * T;
    int* inp = (int*)mallocCheck((size_t)BT * sizeof(int));
    for (int i = 0; i < BT; i++) { inp[i] = (int)rng_below(&rng, V); }
    float* wte = random_floatX(&rng, (size_t)V * C, 0.0f, 1.0f);
    float* wpe = random_floatX(&rng, (size_t)T * C, 0.0f, 1.0f);
    float* dout = random_floatX(&rng, (size_t)BT * C, 0.0f, 1.0f);
    float* dwte0 = random_floatX(&rng, (size_t)V * C, 0.0f, 1.0f);
    float* dwpe0 = random_floatX(&rng, (size_t)T * C, 0.0f, 1.0f);
    char name[128];

    float* out_ref = (float*)mallocCheck((size_t)BT * C * sizeof(float));
    encoder_forward(out_ref, inp, wte, wpe, B, T, C);
    float* out = (float*)mallocCheck((size_t)BT * C * sizeof(float));
    for (size_t idx = 0; idx < (size_t)BT * C; idx++) { // encoder_forward_kernel's indexing
        size_t bt = idx / C;
        int c = (int)(idx % C), t = (int)(bt % T);
        out[idx] = wte[(size_t)inp[bt] * C + c] + wpe[(size_t)t * C + c];
    }
    snprintf(name, sizeof(name), "encoder forward B=%d T=%d C=%d V=%d", B, T, C, V);
    check_close(name, out, out_ref, (size_t)BT * C, 0.0f, 0.0f);

    float* dwte_ref = copy_of(dwte0, (size_t)V * C);
    float* dwpe_ref = copy_of(dwpe0, (size_t)T * C);
    encoder_backward(dwte_ref, dwpe_ref, dout, inp, B, T, C);
    float* dwte = copy_of(dwte0, (size_t)V * C);
    float* dwpe = copy_of(dwpe0, (size_t)T * C);
    int* token = (int*)mallocCheck((size_t)BT * sizeof(int));
    int* start = (int*)mallocCheck(((size_t)BT + 1) * sizeof(int));
    int* pos = (int*)mallocCheck((size_t)BT * sizeof(int));
    int* cursor = (int*)mallocCheck((size_t)V * sizeof(int));
    int num_tokens = encoder_backward_buckets(token, start, pos, cursor, V, inp, BT);
    for (int k = 0; k < num_tokens; k++) { // encoder_backward_dwte_kernel, block of bucket k, column c
        for (int c = 0; c < C; c++) {
            float slice_sum[ENCODER_SLICES];
            for (int sl = 0; sl < ENCODER_SLICES; sl++) { // slice sl: every ENCODER_SLICES-th position from sl
                slice_sum[sl] = 0.0f;
                for (int j = start[k] + sl; j < start[k + 1]; j += ENCODER_SLICES) {
                    slice_sum[sl] += dout[(size_t)pos[j] * C + c];
                }
            }
            float sum = slice_sum[0];
            for (int sl = 1; sl < ENCODER_SLICES; sl++) { sum += slice_sum[sl]; } // slice order
            dwte[(size_t)token[k] * C + c] += sum;
        }
    }
    for (size_t idx = 0; idx < (size_t)T * C; idx++) { // encoder_backward_dwpe_kernel, thread t*C + c
        float sum = 0.0f;
        for (int b = 0; b < B; b++) { sum += dout[(size_t)b * T * C + idx]; }
        dwpe[idx] += sum;
    }
    snprintf(name, sizeof(name), "encoder backward dwte B=%d T=%d C=%d V=%d", B, T, C, V);
    check_close(name, dwte, dwte_ref, (size_t)V * C, 1e-5f, 1e-6f);
    snprintf(name, sizeof(name), "encoder backward dwpe B=%d T=%d C=%d V=%d", B, T, C, V);
    check_close(name, dwpe, dwpe_ref, (size_t)T * C, 1e-5f, 1e-6f);

    free(inp); free(wte); free(wpe); free(dout); free(dwte0); free(dwpe0); free(out_ref); free(out);
    free(dwte_ref); free(dwpe_ref); free(dwte); free(dwpe); free(token); free(start); free(pos); free(cursor);
}

static void test_buckets(void) {
    Rng rng;
    rng_init(&rng, 7);
    const int BT = 4 * 64, V = 50; // many repeats
    int inp[4 * 64];
    for (int i = 0; i < BT; i++) { inp[i] = (int)rng_below(&rng, V); }
    check_buckets("encoder buckets: random tokens, V=50, B*T=256", inp, BT, V);
    for (int i = 0; i < BT; i++) { inp[i] = 7; }
    check_buckets("encoder buckets: one token everywhere", inp, BT, V);
    for (int i = 0; i < BT; i++) { inp[i] = BT - 1 - i; }
    check_buckets("encoder buckets: all distinct, descending", inp, BT, BT);
    inp[0] = 0;
    check_buckets("encoder buckets: a single position", inp, 1, 1);
}

// ----------------------------------------------------------------------------

int main(void) {
    printf("test_layers_host (%s build)\n", PRECISION_NAME);
    test_layernorm("N=7 C=96", 7, 96, 1);
    test_layernorm("N=7 C=768", 7, 768, 2);
    test_layernorm("N=1100 C=50", 1100, 50, 3); // C not a multiple of the pack; 35 chunks, the last of 12 rows
    test_layernorm("N=40 C=64", 40, 64, 7);     // the tiny model's C: 8 bf16 packs in a block of 32 threads
    test_fused_residual_layernorm(7, 768, 4);
    test_layernorm_limits();
    test_gelu();
    test_buckets();
    test_encoder(4, 64, 48, 50, 5);
    test_encoder(2, 3, 32, 1000, 6);
    test_encoder(8, 64, 16, 3, 8); // 3 tokens over 512 positions: buckets of ~170, every slice ~21 deep
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
