/*
Host tests of the flash-attention math in llmc/attention.cuh: no GPU needed.

The kernels' per-element math (the online-softmax merge, P from lse, dS) lives in __host__
__device__ functions. Here they are checked (1) against exact theory on hand-made rows and
(2) against train_gpt2.c's attention_forward / attention_backward on random qkv, by emulating
in plain loops what the kernels' threads do: the same tile loops, the same causal and past-T
masks, the same zero-filled rows past T, the same single writer per output element. What stays
blind is the thread/block indexing, the shuffles and the shared-memory staging; a GPU run covers
those.
    nvcc -DENABLE_FP32 -O2 -std=c++17 -I. -Xcompiler -fopenmp dev/test/test_attention_host.cu -o /tmp/t -lm && /tmp/t
*/
#include "cpu_reference.h"
#include "../../llmc/attention.cuh"

static int g_passed = 0, g_failed = 0;

static void report(const char* name, bool ok, const char* detail) {
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, detail[0] ? ": " : "", detail);
    if (ok) { g_passed++; } else { g_failed++; }
}

// got vs ref elementwise with |got - ref| <= atol + rtol |ref|; names the worst element either way.
static void check_close(const char* name, const float* got, const double* ref, size_t n, double atol, double rtol) {
    size_t worst = 0;
    double worst_ratio = -1.0;
    bool finite = true;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) { finite = false; worst = i; worst_ratio = INFINITY; break; }
        double ratio = fabs((double)got[i] - ref[i]) / (atol + rtol * fabs(ref[i]));
        if (ratio > worst_ratio) { worst_ratio = ratio; worst = i; }
    }
    char detail[256];
    snprintf(detail, sizeof(detail), "worst [%zu] got %.9g ref %.9g (error / tolerance = %.3g, atol %g rtol %g)",
             worst, (double)got[worst], ref[worst], worst_ratio, atol, rtol);
    report(name, finite && worst_ratio <= 1.0, detail);
}

static void check_close_f(const char* name, const float* got, const float* ref, size_t n, double atol, double rtol) {
    double* r = (double*)mallocCheck(n * sizeof(double));
    for (size_t i = 0; i < n; i++) { r[i] = ref[i]; }
    check_close(name, got, r, n, atol, rtol);
    free(r);
}

// ----------------------------------------------------------------------------
// the online softmax against exact theory

// Merge the scalar values v over scores s, `tile` at a time, as one kernel thread does with a
// dimension of its accumulator. Returns out = sum softmax(s) v and sets *lse.
static float online_row(const float* s, const float* v, int n, int tile, float* lse) {
    OnlineSoftmax st = online_softmax_init();
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += tile) {
        float tile_max = -INFINITY;
        for (int j = k0; j < k0 + tile && j < n; j++) { tile_max = fmaxf(tile_max, s[j]); }
        acc *= online_softmax_rescale(&st, tile_max);
        for (int j = k0; j < k0 + tile && j < n; j++) { acc += online_softmax_weight(&st, s[j]) * v[j]; }
    }
    *lse = online_softmax_lse(st);
    return acc / st.l;
}

static void test_online_softmax_theory(void) {
    char d[256];
    {   // a fully masked tile before any visible key: the state stays empty, no NaN
        OnlineSoftmax st = online_softmax_init();
        float alpha = online_softmax_rescale(&st, -INFINITY);
        float p = online_softmax_weight(&st, -INFINITY);
        snprintf(d, sizeof(d), "alpha %g m %g l %g p %g", alpha, st.m, st.l, p);
        report("online softmax: masked tile first keeps the state empty", alpha == 1.0f && st.m == -INFINITY && st.l == 0.0f && p == 0.0f, d);
    }
    {   // a masked tile after visible keys changes nothing
        OnlineSoftmax st = online_softmax_init();
        online_softmax_rescale(&st, 2.0f);
        online_softmax_weight(&st, 2.0f);
        online_softmax_weight(&st, 1.0f);
        OnlineSoftmax before = st;
        float alpha = online_softmax_rescale(&st, -INFINITY);
        float p = online_softmax_weight(&st, -INFINITY);
        snprintf(d, sizeof(d), "alpha %g m %g -> %g l %g -> %g p %g", alpha, before.m, st.m, before.l, st.l, p);
        report("online softmax: masked tile later changes nothing", alpha == 1.0f && st.m == before.m && st.l == before.l && p == 0.0f, d);
    }
    {   // a new max rescales: scores {0} then {10}, values {1, 3}
        float s[2] = {0.0f, 10.0f}, v[2] = {1.0f, 3.0f};
        float lse;
        float out = online_row(s, v, 2, 1, &lse);
        double e = exp(-10.0);
        double out_ref = (e * 1.0 + 1.0 * 3.0) / (e + 1.0), lse_ref = 10.0 + log1p(e);
        snprintf(d, sizeof(d), "out %.9g ref %.9g, lse %.9g ref %.9g", out, out_ref, lse, lse_ref);
        report("online softmax: a new max rescales the accumulator and l",
               fabs(out - out_ref) <= 2e-7 * out_ref && fabs(lse - lse_ref) <= 2e-7 * lse_ref, d);
    }
    {   // equal scores: a uniform average, lse = c + log n, for any tiling
        float s[5], v[5] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
        for (int j = 0; j < 5; j++) { s[j] = 3.0f; }
        bool ok = true;
        for (int tile = 1; tile <= 5; tile++) {
            float lse, out = online_row(s, v, 5, tile, &lse);
            ok = ok && fabs(out - 3.0) <= 4e-7 * 3.0 && fabs(lse - (3.0 + log(5.0))) <= 2e-7 * 4.7;
            snprintf(d, sizeof(d), "tile %d: out %.9g (3), lse %.9g (%.9g)", tile, out, lse, 3.0 + log(5.0));
        }
        report("online softmax: equal scores average uniformly, lse = c + log n", ok, d);
    }
    {   // scores of 1000 would overflow exp without the running max
        float s[3] = {1000.0f, 999.0f, 1001.0f}, v[3] = {1.0f, 0.0f, 0.0f};
        float lse, out = online_row(s, v, 3, 2, &lse);
        double out_ref = exp(-1.0) / (exp(-1.0) + exp(-2.0) + 1.0);
        double lse_ref = 1001.0 + log(exp(-1.0) + exp(-2.0) + 1.0);
        snprintf(d, sizeof(d), "out %.9g ref %.9g, lse %.9g ref %.9g", out, out_ref, lse, lse_ref);
        report("online softmax: scores near 1000 stay finite and exact",
               fabs(out - out_ref) <= 1e-6 * out_ref && fabs(lse - lse_ref) <= 1e-7 * lse_ref, d);
    }
}

// ----------------------------------------------------------------------------
// the backward's dS against exact theory

static void test_dscore_theory(void) {
    char d[256];
    Rng rng;
    rng_init(&rng, 7);
    const int n = 11;
    float s[n], dp[n], p[n];
    for (int j = 0; j < n; j++) { s[j] = 4.0f * rng_uniform(&rng) - 2.0f; dp[j] = 2.0f * rng_uniform(&rng) - 1.0f; }
    float lse;
    float zeros[n] = {0};
    online_row(s, zeros, n, 3, &lse);
    float D = 0.0f, psum = 0.0f;
    for (int j = 0; j < n; j++) { p[j] = attention_prob(s[j], lse); psum += p[j]; D += p[j] * dp[j]; }
    snprintf(d, sizeof(d), "sum_j P_j = %.9g", psum);
    report("attention_prob: exp(s - lse) sums to 1 over the row", fabs(psum - 1.0f) <= 1e-6, d);

    // sum_j dS_j = 0: adding a constant to every score does not change the softmax
    double dsum = 0.0, dabs = 0.0;
    for (int j = 0; j < n; j++) { double ds = attention_dscore(p[j], dp[j], D); dsum += ds; dabs += fabs(ds); }
    snprintf(d, sizeof(d), "sum %.3g, sum of |dS| %.3g", dsum, dabs);
    report("attention_dscore: dS sums to 0 over the row", fabs(dsum) <= 1e-6 * dabs, d);

    // dS_j = d/ds_j sum_k dP_k softmax(s)_k, by central differences in double
    double worst = 0.0;
    int worst_j = 0;
    for (int j = 0; j < n; j++) {
        double f[2];
        for (int side = 0; side < 2; side++) {
            double h = side == 0 ? 1e-5 : -1e-5, z = 0.0, num = 0.0;
            for (int k = 0; k < n; k++) { double e = exp((double)s[k] + (k == j ? h : 0.0)); z += e; num += e * dp[k]; }
            f[side] = num / z;
        }
        double fd = (f[0] - f[1]) / 2e-5;
        double err = fabs(attention_dscore(p[j], dp[j], D) - fd);
        if (err > worst) { worst = err; worst_j = j; }
    }
    snprintf(d, sizeof(d), "worst j=%d |dS - finite difference| = %.3g", worst_j, worst);
    // fp32 P and D against a double finite difference (truncation ~1e-10): a few fp32 ulps of ~0.1
    report("attention_dscore: matches the softmax's finite-difference gradient", worst <= 1e-6, d);
}

// ----------------------------------------------------------------------------
// emulation of the kernels on the host, against train_gpt2.c

// Row t of one head's slice of a (B,T,stride) tensor, or NULL past T (the kernels' zero rows).
static const float* head_row(const float* x, int b, int t, int T, size_t stride, size_t offset) {
    return t < T ? x + ((size_t)b * T + t) * stride + offset : NULL;
}
static float dot_or_zero(const float* a, const float* b, int n) {
    if (a == NULL || b == NULL) { return 0.0f; } // a zero-filled staged row
    float s = 0.0f;
    for (int i = 0; i < n; i++) { s += a[i] * b[i]; }
    return s;
}

// out (B,T,C), lse (B,NH,T) as attention_forward_kernel computes them, with key tiles of `tile`.
static void emulate_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int tile) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);
    float* s = (float*)mallocCheck(tile * sizeof(float));
    float acc[128];
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) { // one query row: its G threads in the kernel
                int q0 = t / ATT_ROWS * ATT_ROWS, kv_end = q0 + ATT_ROWS < T ? q0 + ATT_ROWS : T;
                const float* q = head_row(qkv, b, t, T, C3, h * hs);
                OnlineSoftmax st = online_softmax_init();
                for (int i = 0; i < hs; i++) { acc[i] = 0.0f; }
                for (int k0 = 0; k0 < kv_end; k0 += tile) {
                    float tile_max = -INFINITY;
                    for (int jj = 0; jj < tile; jj++) {
                        float dot = dot_or_zero(q, head_row(qkv, b, k0 + jj, T, C3, C + h * hs), hs);
                        s[jj] = k0 + jj <= t ? dot * scale : -INFINITY;
                        tile_max = fmaxf(tile_max, s[jj]);
                    }
                    float alpha = online_softmax_rescale(&st, tile_max);
                    for (int i = 0; i < hs; i++) { acc[i] *= alpha; }
                    for (int jj = 0; jj < tile; jj++) {
                        float p = online_softmax_weight(&st, s[jj]);
                        const float* v = head_row(qkv, b, k0 + jj, T, C3, 2 * C + h * hs);
                        for (int i = 0; i < hs; i++) { acc[i] += p * (v != NULL ? v[i] : 0.0f); }
                    }
                }
                float* o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) { o[i] = acc[i] * (1.0f / st.l); }
                lse[((size_t)b * NH + h) * T + t] = online_softmax_lse(st);
            }
        }
    }
    free(s);
}

// dqkv (B,T,3C) as the three backward kernels compute it, with staged tiles of `tile` rows.
// writes (B,T,3C) counts the writes to each element: the kernels promise exactly one.
static void emulate_backward(float* dqkv, int* writes, const float* dout, const float* qkv, const float* out,
                             const float* lse, int B, int T, int C, int NH, int tile) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);
    float* D = (float*)mallocCheck((size_t)B * NH * T * sizeof(float)); // (B,NH,T), the scratch
    float acc1[128], acc2[128];
    // attention_backward_rowdot_kernel
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                D[((size_t)b * NH + h) * T + t] = dot_or_zero(head_row(dout, b, t, T, C, h * hs), head_row(out, b, t, T, C, h * hs), hs);
            }
        }
    }
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float* lse_bh = lse + ((size_t)b * NH + h) * T;
            const float* D_bh = D + ((size_t)b * NH + h) * T;
            // attention_backward_dkdv_kernel: one key j per row of threads
            for (int j = 0; j < T; j++) {
                int k0 = j / ATT_ROWS * ATT_ROWS;
                const float* k = head_row(qkv, b, j, T, C3, C + h * hs);
                const float* v = head_row(qkv, b, j, T, C3, 2 * C + h * hs);
                float* dk = acc1;
                float* dv = acc2;
                for (int i = 0; i < hs; i++) { dk[i] = 0.0f; dv[i] = 0.0f; }
                for (int q0 = k0; q0 < T; q0 += tile) {
                    for (int r = 0; r < tile; r++) {
                        int t = q0 + r;
                        const float* q = head_row(qkv, b, t, T, C3, h * hs);
                        const float* d = head_row(dout, b, t, T, C, h * hs);
                        float lse_t = t < T ? lse_bh[t] : 0.0f, D_t = t < T ? D_bh[t] : 0.0f;
                        float qk = dot_or_zero(q, k, hs), dp = dot_or_zero(d, v, hs);
                        float p = t >= j && t < T ? attention_prob(qk * scale, lse_t) : 0.0f;
                        float ds = attention_dscore(p, dp, D_t);
                        for (int i = 0; i < hs; i++) {
                            dv[i] += p * (d != NULL ? d[i] : 0.0f);
                            dk[i] += ds * (q != NULL ? q[i] : 0.0f);
                        }
                    }
                }
                size_t base = ((size_t)b * T + j) * C3 + h * hs;
                for (int i = 0; i < hs; i++) {
                    dqkv[base + C + i] = dk[i] * scale; writes[base + C + i]++;
                    dqkv[base + 2 * C + i] = dv[i]; writes[base + 2 * C + i]++;
                }
            }
            // attention_backward_dq_kernel: one query t per row of threads
            for (int t = 0; t < T; t++) {
                int q0 = t / ATT_ROWS * ATT_ROWS, kv_end = q0 + ATT_ROWS < T ? q0 + ATT_ROWS : T;
                const float* q = head_row(qkv, b, t, T, C3, h * hs);
                const float* d = head_row(dout, b, t, T, C, h * hs);
                float* dq = acc1;
                for (int i = 0; i < hs; i++) { dq[i] = 0.0f; }
                for (int k0 = 0; k0 < kv_end; k0 += tile) {
                    for (int jj = 0; jj < tile; jj++) {
                        const float* k = head_row(qkv, b, k0 + jj, T, C3, C + h * hs);
                        const float* v = head_row(qkv, b, k0 + jj, T, C3, 2 * C + h * hs);
                        float qk = dot_or_zero(q, k, hs), dp = dot_or_zero(d, v, hs);
                        float p = k0 + jj <= t ? attention_prob(qk * scale, lse_bh[t]) : 0.0f;
                        float ds = attention_dscore(p, dp, D_bh[t]);
                        for (int i = 0; i < hs; i++) { dq[i] += ds * (k != NULL ? k[i] : 0.0f); }
                    }
                }
                size_t base = ((size_t)b * T + t) * C3 + h * hs;
                for (int i = 0; i < hs; i++) { dqkv[base + i] = dq[i] * scale; writes[base + i]++; }
            }
        }
    }
    free(D);
}

// Forward and backward of one shape, emulated with each tile size, against train_gpt2.c.
static void test_against_cpu(int B, int T, int NH, int hs, uint64_t seed) {
    int C = NH * hs;
    size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C, n_lse = (size_t)B * NH * T;
    float* qkv = (float*)mallocCheck(n_qkv * sizeof(float));
    float* dout = (float*)mallocCheck(n_out * sizeof(float));
    Rng rng;
    rng_init(&rng, seed);
    // U(-2,2): scores q.k/sqrt(hs) have a std of ~1.3, so rows have clear maxima that move
    for (size_t i = 0; i < n_qkv; i++) { qkv[i] = 4.0f * rng_uniform(&rng) - 2.0f; }
    for (size_t i = 0; i < n_out; i++) { dout[i] = 2.0f * rng_uniform(&rng) - 1.0f; }

    // the reference: train_gpt2.c, and lse in double from the scores
    float* out_ref = (float*)mallocCheck(n_out * sizeof(float));
    float* att = (float*)mallocCheck((size_t)B * NH * T * T * sizeof(float));
    float* dqkv_ref = (float*)callocCheck(n_qkv, sizeof(float)); // the CPU adds into it
    float* datt = (float*)mallocCheck(n_lse * sizeof(float));
    attention_forward(out_ref, att, qkv, B, T, C, NH);
    attention_backward(dqkv_ref, datt, dout, qkv, att, B, T, C, NH);
    double* lse_ref = (double*)mallocCheck(n_lse * sizeof(double));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    double s = 0.0;
                    for (int i = 0; i < hs; i++) { s += (double)q[i] * k[i]; }
                    sum += exp(s / sqrt((double)hs));
                }
                lse_ref[((size_t)b * NH + h) * T + t] = log(sum);
            }
        }
    }
    // dqkv_ref split into its q, k and v parts, so each gets its own named check
    float* parts_ref[3];
    for (int part = 0; part < 3; part++) {
        parts_ref[part] = (float*)mallocCheck(n_out * sizeof(float));
        for (size_t bt = 0; bt < (size_t)B * T; bt++) {
            memcpy(parts_ref[part] + bt * C, dqkv_ref + bt * 3 * C + part * C, C * sizeof(float));
        }
    }

    float* out = (float*)mallocCheck(n_out * sizeof(float));
    float* lse = (float*)mallocCheck(n_lse * sizeof(float));
    float* dqkv = (float*)mallocCheck(n_qkv * sizeof(float));
    int* writes = (int*)mallocCheck(n_qkv * sizeof(int));
    float* part = (float*)mallocCheck(n_out * sizeof(float));
    int tiles[4] = {1, 3, ATT_TILE, 64};
    for (int ti = 0; ti < 4; ti++) {
        int tile = tiles[ti];
        char name[160];
        emulate_forward(out, lse, qkv, B, T, C, NH, tile);
        // Tolerances: both sides are fp32 with the same math in a different order (the CPU
        // normalizes exp(s - rowmax) by a sum taken once; the emulation rescales partial sums
        // tile by tile and normalizes at the end). Each of the <= T terms carries a few ulps
        // (6e-8) of relative error, on values of size ~1: ~1e-6 absolute at worst, so atol 1e-6
        // plus rtol 1e-5. lse is compared with a double reference: m + log(l) has ~2 ulps of |lse|.
        snprintf(name, sizeof(name), "forward out   B=%d T=%d NH=%d hs=%d key tile %2d vs train_gpt2.c", B, T, NH, hs, tile);
        check_close_f(name, out, out_ref, n_out, 1e-6, 1e-5);
        snprintf(name, sizeof(name), "forward lse   B=%d T=%d NH=%d hs=%d key tile %2d vs double", B, T, NH, hs, tile);
        check_close(name, lse, lse_ref, n_lse, 1e-6, 1e-6);

        // the backward runs on the emulated forward's out and lse, as on the GPU
        for (size_t i = 0; i < n_qkv; i++) { dqkv[i] = NAN; writes[i] = 0; }
        emulate_backward(dqkv, writes, dout, qkv, out, lse, B, T, C, NH, tile);
        int bad_writes = 0;
        for (size_t i = 0; i < n_qkv; i++) { bad_writes += writes[i] != 1; }
        char d[64];
        snprintf(d, sizeof(d), "%d of %zu elements not written exactly once", bad_writes, n_qkv);
        snprintf(name, sizeof(name), "backward      B=%d T=%d NH=%d hs=%d tile %2d: one writer per dqkv element", B, T, NH, hs, tile);
        report(name, bad_writes == 0, d);
        // Tolerances: the CPU takes P from its saved att and the row term from sum_j P dP; the
        // emulation takes P = exp(s - lse) and D = dout . out. Both are exact in real numbers and
        // differ by a few ulps in fp32; dS = P (dP - D) cancels, so errors are relative to the
        // size of dP and D (~1), not to the result: atol 2e-6 (~T ulps), rtol 1e-5.
        const char* part_names[3] = {"dq", "dk", "dv"};
        for (int pi = 0; pi < 3; pi++) {
            for (size_t bt = 0; bt < (size_t)B * T; bt++) {
                memcpy(part + bt * C, dqkv + bt * 3 * C + pi * C, C * sizeof(float));
            }
            snprintf(name, sizeof(name), "backward %s   B=%d T=%d NH=%d hs=%d tile %2d vs train_gpt2.c", part_names[pi], B, T, NH, hs, tile);
            check_close_f(name, part, parts_ref[pi], n_out, 2e-6, 1e-5);
        }
    }
    free(qkv); free(dout); free(out_ref); free(att); free(dqkv_ref); free(datt); free(lse_ref);
    for (int pi = 0; pi < 3; pi++) { free(parts_ref[pi]); }
    free(out); free(lse); free(dqkv); free(writes); free(part);
}

// T = 1: the only key is the query's own, so out = v_0 and lse = s_00 exactly
static void test_single_token(void) {
    int hs = 64, C = 64, NH = 1;
    float qkv[3 * 64], out[64], lse;
    Rng rng;
    rng_init(&rng, 3);
    for (int i = 0; i < 3 * C; i++) { qkv[i] = 4.0f * rng_uniform(&rng) - 2.0f; }
    emulate_forward(out, &lse, qkv, 1, 1, C, NH, ATT_TILE);
    float s = 0.0f;
    for (int i = 0; i < hs; i++) { s += qkv[i] * qkv[C + i]; }
    s *= 1.0f / sqrtf((float)hs);
    bool ok = lse == s;
    for (int i = 0; i < hs; i++) { ok = ok && out[i] == qkv[2 * C + i]; }
    char d[128];
    snprintf(d, sizeof(d), "lse %.9g, s %.9g, out[0] %.9g, v[0] %.9g", lse, s, out[0], qkv[2 * C]);
    report("forward T=1: out = v_0 and lse = s_00 exactly", ok, d);
}

int main(void) {
    test_online_softmax_theory();
    test_dscore_theory();
    test_single_token();
    test_against_cpu(2, 37, 2, 64, 1337); // T not a multiple of any tile; the brief's shape
    test_against_cpu(1, 7, 3, 32, 42);    // a short sequence, hs = 32
    test_against_cpu(1, 70, 1, 128, 5);   // crosses the 64-row block boundary, hs = 128
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
