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
    // attention_backward_rowdot_kernel: G lanes of one 16-byte pack each (fmaf in dim order), then
    // their butterfly
    int G = attention_rowdot_lanes(hs);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                const float* d = head_row(dout, b, t, T, C, h * hs);
                const float* o = head_row(out, b, t, T, C, h * hs);
                float lanes[32], next[32];
                for (int g = 0; g < G; g++) {
                    lanes[g] = 0.0f;
                    for (int j = g * PACKX_SIZE; j < (g + 1) * PACKX_SIZE; j++) { lanes[g] = fmaf(d[j], o[j], lanes[g]); }
                }
                for (int offset = G / 2; offset > 0; offset >>= 1) {
                    for (int g = 0; g < G; g++) { next[g] = lanes[g] + lanes[g ^ offset]; }
                    memcpy(lanes, next, sizeof(next));
                }
                D[((size_t)b * NH + h) * T + t] = lanes[0];
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

// ----------------------------------------------------------------------------
// the bf16 build's base-2 softmax against the natural one

// The tensor-core kernels merge scores s' = s log2(e) with exp2: the same out and lse as the
// natural-base functions, to a few fp32 ulps (log2(e) is rounded once, and exp2f(x') differs from
// expf(x) by the rounding of x' = x log2(e): ~|x| ulps).
static void test_online_softmax_log2(void) {
    char d[256];
    const float LOG2E = 1.4426950408889634f;
    Rng rng;
    rng_init(&rng, 11);
    const int n = 50;
    float s[n], v[n], s2[n];
    for (int j = 0; j < n; j++) { s[j] = 8.0f * rng_uniform(&rng) - 4.0f; v[j] = 2.0f * rng_uniform(&rng) - 1.0f; s2[j] = s[j] * LOG2E; }
    double worst_out = 0.0, worst_lse = 0.0;
    for (int tile = 1; tile <= 16; tile *= 4) {
        float lse_e;
        float out_e = online_row(s, v, n, tile, &lse_e);
        OnlineSoftmax st = online_softmax_init();
        float acc = 0.0f;
        for (int k0 = 0; k0 < n; k0 += tile) {
            float tile_max = -INFINITY;
            for (int j = k0; j < k0 + tile && j < n; j++) { tile_max = fmaxf(tile_max, s2[j]); }
            acc *= online_softmax_rescale_log2(&st, tile_max);
            for (int j = k0; j < k0 + tile && j < n; j++) { acc += online_softmax_weight_log2(&st, s2[j]) * v[j]; }
        }
        float out2 = acc / st.l, lse2 = online_softmax_lse_log2(st);
        worst_out = fmax(worst_out, fabs(out2 - out_e));
        worst_lse = fmax(worst_lse, fabs(lse2 - lse_e) / fabs(lse_e));
        // the backward's weight of every score from that lse sums to 1
        float psum = 0.0f;
        for (int j = 0; j < n; j++) { psum += attention_prob_log2(s2[j], lse2 * LOG2E); }
        worst_lse = fmax(worst_lse, fabs(psum - 1.0f));
    }
    snprintf(d, sizeof(d), "max |out_2 - out_e| %.3g, max lse rel. diff (and |sum P - 1|) %.3g", worst_out, worst_lse);
    // out ~0.3: 1e-6 is ~30 ulps of headroom over the ~|s| ulps of exp2 vs exp; lse: ~4 ulps
    report("online softmax, base 2 = natural base (tiles 1, 4, 16)", worst_out <= 1e-6 && worst_lse <= 5e-7, d);
    {   // the masked cases of the natural one
        OnlineSoftmax st = online_softmax_init();
        float alpha = online_softmax_rescale_log2(&st, -INFINITY);
        float p = online_softmax_weight_log2(&st, -INFINITY);
        snprintf(d, sizeof(d), "alpha %g m %g l %g p %g", alpha, st.m, st.l, p);
        report("online softmax, base 2: a masked tile first keeps the state empty",
               alpha == 1.0f && st.m == -INFINITY && st.l == 0.0f && p == 0.0f, d);
    }
}

// ----------------------------------------------------------------------------
// the tensor-core fragments: a host simulation of one warp's ldmatrix and mma, by mma.cuh's
// documented layouts, with the address patterns the kernels use (att_tc_a_row/col, _b_row/col)

// a shared tile of bf16 bits, PITCH elements per row; small integers, so every product is exact
static const int SIM_PITCH = 64 + 8;
static uint16_t bf16_bits(float x) { return __nv_bfloat16_raw(__float2bfloat16_rn(x)).x; }
static float bits_bf16(uint16_t u) {
    __nv_bfloat16_raw r;
    r.x = u;
    return __bfloat162float(__nv_bfloat16(r));
}

// ldmatrix.x4 (trans or not) of the warp, each lane naming (row0 + row(lane), col0 + col(lane)):
// r[lane][i] from matrix i, whose row k was named by lane 8i + k (mma.cuh)
static void sim_ldmatrix_x4(uint32_t r[32][4], const uint16_t* tile, int row0, int col0, bool a_pattern, bool trans) {
    int rows[32], cols[32];
    for (int l = 0; l < 32; l++) {
        rows[l] = row0 + (a_pattern ? att_tc_a_row(l) : att_tc_b_row(l));
        cols[l] = col0 + (a_pattern ? att_tc_a_col(l) : att_tc_b_col(l));
    }
    for (int l = 0; l < 32; l++) {
        for (int i = 0; i < 4; i++) {
            uint16_t h[2];
            for (int half = 0; half < 2; half++) {
                int mr = ldmatrix_row(l, half, trans), mc = ldmatrix_col(l, half, trans);
                int src = 8 * i + mr; // the lane that named row mr of matrix i
                h[half] = tile[rows[src] * SIM_PITCH + cols[src] + mc];
            }
            r[l][i] = (uint32_t)h[0] | ((uint32_t)h[1] << 16);
        }
    }
}

// the 16x16 A, or the 16x8 B, that fragments hold (every element once: checked)
static bool sim_a_matrix(float A[16][16], uint32_t a[32][4]) {
    int seen[16][16] = {{0}};
    for (int l = 0; l < 32; l++) {
        for (int e = 0; e < 8; e++) {
            uint32_t w = a[l][e / 2];
            A[mma_a_row(l, e)][mma_a_col(l, e)] = bits_bf16((uint16_t)(e % 2 ? w >> 16 : w & 0xffff));
            seen[mma_a_row(l, e)][mma_a_col(l, e)]++;
        }
    }
    for (int i = 0; i < 256; i++) { if (seen[i / 16][i % 16] != 1) { return false; } }
    return true;
}
static bool sim_b_matrix(float Bm[16][8], uint32_t b[32][2]) {
    int seen[16][8] = {{0}};
    for (int l = 0; l < 32; l++) {
        for (int e = 0; e < 4; e++) {
            uint32_t w = b[l][e / 2];
            Bm[mma_b_row(l, e)][mma_b_col(l, e)] = bits_bf16((uint16_t)(e % 2 ? w >> 16 : w & 0xffff));
            seen[mma_b_row(l, e)][mma_b_col(l, e)]++;
        }
    }
    for (int i = 0; i < 128; i++) { if (seen[i / 8][i % 8] != 1) { return false; } }
    return true;
}

static void test_fragment_layouts(void) {
    char d[256];
    // a 32 x 64 tile, value 0.25 * ((r * 7 + c * 3) % 29 - 14): distinct neighbours, exact in bf16
    static uint16_t tile[32 * SIM_PITCH];
    auto val = [](int r, int c) { return 0.25f * (float)((r * 7 + c * 3) % 29 - 14); };
    for (int r = 0; r < 32; r++) { for (int c = 0; c < SIM_PITCH; c++) { tile[r * SIM_PITCH + c] = bf16_bits(val(r, c)); } }
    const int r0 = 16, c0 = 32; // a 16x16 block away from the origin
    uint32_t f[32][4];
    float A[16][16], Bm[16][8];
    {   // A pattern, no .trans: the A fragment of the block
        sim_ldmatrix_x4(f, tile, r0, c0, true, false);
        bool ok = sim_a_matrix(A, f);
        for (int i = 0; i < 16; i++) { for (int k = 0; k < 16; k++) { ok = ok && A[i][k] == val(r0 + i, c0 + k); } }
        report("ldmatrix.x4, A pattern: the A fragment of a 16x16 block (every element once, in place)", ok, "");
    }
    {   // B pattern, no .trans, rows are n: two n8 tiles of B = block^T
        sim_ldmatrix_x4(f, tile, r0, c0, false, false);
        bool ok = true;
        for (int t = 0; t < 2; t++) {
            uint32_t b[32][2];
            for (int l = 0; l < 32; l++) { b[l][0] = f[l][2 * t]; b[l][1] = f[l][2 * t + 1]; }
            ok = ok && sim_b_matrix(Bm, b);
            for (int k = 0; k < 16; k++) { for (int n = 0; n < 8; n++) { ok = ok && Bm[k][n] == val(r0 + 8 * t + n, c0 + k); } }
        }
        report("ldmatrix.x4, B pattern: B fragments of two n8 tiles of a block whose rows are n", ok, "");
    }
    {   // A pattern with .trans, rows are k: two n8 tiles of B = the block
        sim_ldmatrix_x4(f, tile, r0, c0, true, true);
        bool ok = true;
        for (int t = 0; t < 2; t++) {
            uint32_t b[32][2];
            for (int l = 0; l < 32; l++) { b[l][0] = f[l][2 * t]; b[l][1] = f[l][2 * t + 1]; }
            ok = ok && sim_b_matrix(Bm, b);
            for (int k = 0; k < 16; k++) { for (int n = 0; n < 8; n++) { ok = ok && Bm[k][n] == val(r0 + k, c0 + 8 * t + n); } }
        }
        report("ldmatrix.x4.trans, A pattern: B fragments of two n8 tiles of a block whose rows are k", ok, "");
    }
    {   // C fragments of two n8 tiles -> the A fragment of their 16 columns (P, dS into the next product)
        float C[2][32][4];
        auto cval = [](int i, int j) { return 0.125f * (float)((i * 5 + j * 11) % 23 - 11); };
        for (int t = 0; t < 2; t++) {
            for (int l = 0; l < 32; l++) {
                for (int e = 0; e < 4; e++) { C[t][l][e] = cval(mma_c_row(l, e), 8 * t + mma_c_col(l, e)); }
            }
        }
        for (int l = 0; l < 32; l++) {
            uint32_t a[4];
            att_tc_c_to_a(a, C[0][l], C[1][l]);
            for (int i = 0; i < 4; i++) { f[l][i] = a[i]; }
        }
        bool ok = sim_a_matrix(A, f);
        for (int i = 0; i < 16; i++) { for (int k = 0; k < 16; k++) { ok = ok && A[i][k] == cval(i, k); } }
        report("C fragments of two n8 tiles = the A fragment of their 16 columns (att_tc_c_to_a)", ok, "");
    }
    {   // a whole product: S = X Y^T from an A fragment and B fragments, by the mma layout
        uint32_t fa[32][4], fb[32][4];
        sim_ldmatrix_x4(fa, tile, 0, 0, true, false);   // X: rows 0..15, cols 0..15
        sim_ldmatrix_x4(fb, tile, 16, 16, false, false); // Y: rows 16..31, cols 16..31 (rows are n)
        sim_a_matrix(A, fa);
        double worst = 0.0;
        for (int t = 0; t < 2; t++) {
            uint32_t b[32][2];
            for (int l = 0; l < 32; l++) { b[l][0] = fb[l][2 * t]; b[l][1] = fb[l][2 * t + 1]; }
            sim_b_matrix(Bm, b);
            for (int l = 0; l < 32; l++) {
                for (int e = 0; e < 4; e++) { // D element e of lane l, as mma computes it
                    int i = mma_c_row(l, e), n = mma_c_col(l, e);
                    double dsum = 0.0, ref = 0.0;
                    for (int k = 0; k < 16; k++) {
                        dsum += (double)A[i][k] * Bm[k][n];
                        ref += (double)val(i, k) * val(16 + 8 * t + n, 16 + k);
                    }
                    worst = fmax(worst, fabs(dsum - ref));
                }
            }
        }
        snprintf(d, sizeof(d), "max |D - X Y^T| = %g", worst);
        report("mma by the layouts: D = X Y^T exactly (small integers)", worst == 0.0, d);
    }
}

// Bank conflicts: 32 banks of 4 bytes; a wavefront of 8 16-byte accesses (an ldmatrix phase,
// 8 consecutive threads' 16-byte stores) is conflict-free when its 8 addresses fall in 8
// distinct 16-byte groups (address / 16 mod 8).
static bool distinct_groups(const long* bytes) {
    int seen = 0;
    for (int i = 0; i < 8; i++) { seen |= 1 << (int)((bytes[i] / 16) % 8); }
    return seen == 0xff;
}
template <int HS>
static void test_bank_conflicts(void) {
    char d[160];
    const long pitch = 2L * att_tc_pitch<HS>(); // bytes per row
    const int CH = HS / 8;
    int bad_ld = 0, phases = 0, bad_st = 0, waves = 0;
    for (int pattern = 0; pattern < 2; pattern++) {
        for (int row0 = 0; row0 < ATT_TC_STAGE; row0 += 16) {
            for (int col0 = 0; col0 < HS; col0 += 16) {
                for (int m = 0; m < 4; m++) { // one phase per 8x8 matrix: lanes 8m..8m+7
                    long addr[8];
                    for (int k = 0; k < 8; k++) {
                        int l = 8 * m + k;
                        int r = row0 + (pattern ? att_tc_b_row(l) : att_tc_a_row(l));
                        int c = col0 + (pattern ? att_tc_b_col(l) : att_tc_a_col(l));
                        addr[k] = r * pitch + 2L * c;
                    }
                    phases++;
                    bad_ld += !distinct_groups(addr);
                }
            }
        }
    }
    for (int e0 = 0; e0 < ATT_TC_STAGE * CH; e0 += 8) {
        long addr[8];
        for (int k = 0; k < 8; k++) { addr[k] = att_tc_load_row(e0 + k, CH) * pitch + 16L * att_tc_load_chunk(e0 + k, CH); }
        waves++;
        bad_st += !distinct_groups(addr);
    }
    // every chunk of the tile written exactly once
    int* hits = (int*)callocCheck((size_t)ATT_TC_STAGE * CH, sizeof(int));
    for (int e = 0; e < ATT_TC_STAGE * CH; e++) { hits[att_tc_load_row(e, CH) * CH + att_tc_load_chunk(e, CH)]++; }
    int once = 0;
    for (int i = 0; i < ATT_TC_STAGE * CH; i++) { once += hits[i] == 1; }
    free(hits);
    snprintf(d, sizeof(d), "ldmatrix: %d of %d phases conflict; loader: %d of %d wavefronts conflict; %d of %d chunks written once",
             bad_ld, phases, bad_st, waves, once, ATT_TC_STAGE * CH);
    char name[96];
    snprintf(name, sizeof(name), "shared tiles of hs %d (pitch %d bf16): no bank conflicts", HS, att_tc_pitch<HS>());
    report(name, bad_ld == 0 && bad_st == 0 && once == ATT_TC_STAGE * CH, d);
}

// The sm_90a forward's layout arithmetic (llmc/attention_sm90.cuh) against the documented layouts
// of llmc/wgmma.cuh (PTX ISA: the descriptor's canonical layouts, the 128B swizzle, the accumulator
// and register-A layouts): (1) every element wgmma reads through the kernel's descriptors (Q and K
// K-major, V MN-major) is the element TMA's 128B swizzle put there; (2) P's A registers are S's
// accumulators of the same row and key; (3) the kernel's row and key of accumulator e (the mask,
// the softmax's two rows) are wgmma's. Then the shared memory fits and the tiles are 1 KB aligned.
static void test_sm90_layouts() {
    char detail[160] = "";
    int bad = 0;
    const uint32_t tile = 4096; // any 1024-aligned tile start
    // (1a) K-major, 128B swizzle: (r, k) of k-step ks at start + (r%8)*128 + (r/8)*SBO + 2k, swizzled
    for (int rows = 64; rows <= 128; rows += 64) { // Q's 64 rows (A), K's 128 (B)
        for (int row0 = 0; row0 + rows <= ATT90_BC; row0 += 64) {
            for (int ks = 0; ks < ATT90_HS / 16; ks++) {
                uint32_t start = tile + att90_kmajor_offset(row0, ks);
                for (int r = 0; r < rows && row0 + r < ATT90_BC; r++) {
                    for (int k = 0; k < 16; k++) {
                        uint32_t read = wgmma_swizzle(start + (r % 8) * 128 + (r / 8) * ATT90_SBO + 2 * k, ATT90_SWIZZLE_128B);
                        uint32_t put = tile + att90_swizzled_offset(row0 + r, 16 * ks + k);
                        if (read != put && bad++ == 0) {
                            snprintf(detail, sizeof(detail), "K-major row0 %d ks %d (%d, %d): read %u, TMA put %u", row0, ks, r, k, read, put);
                        }
                    }
                }
            }
        }
    }
    // (1b) MN-major (V, .trans): (k, x) of k-step kc at start + 2(x%64) + (x/64)*LBO + (k%8)*128 + (k/8)*SBO
    for (int kc = 0; kc < ATT90_BC / 16; kc++) {
        uint32_t start = tile + att90_vtile_offset(kc);
        for (int k = 0; k < 16; k++) {
            for (int x = 0; x < ATT90_HS; x++) {
                uint32_t read = wgmma_swizzle(start + 2 * (x % 64) + (x / 64) * ATT90_TILE_BYTES + (k % 8) * 128 + (k / 8) * ATT90_SBO,
                                              ATT90_SWIZZLE_128B);
                uint32_t put = tile + att90_swizzled_offset(16 * kc + k, x);
                if (read != put && bad++ == 0) {
                    snprintf(detail, sizeof(detail), "MN-major kc %d (key %d, dim %d): read %u, TMA put %u", kc, k, x, read, put);
                }
            }
        }
    }
    report("sm_90a forward: wgmma reads what TMA's 128B swizzle wrote (Q, K, V descriptors)", bad == 0, detail);

    // (2) P from S: A element e (register e/2) of k-step kc = accumulator 8kc + e (att90_c_to_a)
    bad = 0;
    detail[0] = 0;
    for (int tid = 0; tid < 128; tid++) {
        for (int kc = 0; kc < ATT90_BC / 16; kc++) {
            for (int e = 0; e < 8; e++) {
                if ((wgmma_a_row(tid, e) != wgmma_d_row(tid, 8 * kc + e) ||
                     wgmma_a_col(tid, e) + 16 * kc != wgmma_d_col(tid, 8 * kc + e)) && bad++ == 0) {
                    snprintf(detail, sizeof(detail), "thread %d kc %d e %d", tid, kc, e);
                }
            }
        }
    }
    report("sm_90a forward: P's register A operand holds S's accumulators of the same (row, key)", bad == 0, detail);

    // (3) the kernel's row/key of accumulator 4 n8 + e: row_lo + mma_c_row, k0 + 8 n8 + mma_c_col;
    // the softmax row of accumulator i is (i % 4) / 2; O's column 8 n8 + 2 (lane % 4) + (0, 1)
    bad = 0;
    detail[0] = 0;
    for (int tid = 0; tid < 128; tid++) {
        int warp = tid / 32, lane = tid % 32;
        for (int i = 0; i < ATT90_BC / 2; i++) {
            int n8 = i / 4, e = i % 4;
            bool ok = 16 * warp + mma_c_row(lane, e) == wgmma_d_row(tid, i) && 8 * n8 + mma_c_col(lane, e) == wgmma_d_col(tid, i) &&
                      (i % 4) / 2 == e / 2 && wgmma_d_row(tid, i) == 16 * warp + lane / 4 + 8 * ((i % 4) / 2);
            if (i < ATT90_HS / 2) { ok = ok && wgmma_d_col(tid, i) == 8 * n8 + 2 * (lane % 4) + i % 2; }
            if (!ok && bad++ == 0) { snprintf(detail, sizeof(detail), "thread %d accumulator %d", tid, i); }
        }
    }
    report("sm_90a forward: the mask's and the softmax's (row, key) of each accumulator are wgmma's", bad == 0, detail);

    // wgmma_desc_advance (the kernels' k-steps): the descriptor of base + off built by advancing base's,
    // for every 16-byte-aligned base and offset the kernels can form (both within 228 KB of shared
    // memory), with each layout's LBO, SBO and swizzle = wgmma_desc of the address itself
    {
        const uint32_t lbo[3] = {16, ATT90_TILE_BYTES, ATT90_DS_LBO}, sbo[3] = {ATT90_SBO, ATT90_SBO, ATT90_DS_SBO};
        const int sw[3] = {ATT90_SWIZZLE_128B, ATT90_SWIZZLE_128B, 0};
        long checked = 0, wrong = 0;
        for (int l = 0; l < 3; l++) {
            for (uint32_t base = 0; base < 228 * 1024; base += 1024 + 16) {
                for (uint32_t off = 0; base + off < 228 * 1024; off += 16 * 37) {
                    checked++;
                    if (wgmma_desc_advance(wgmma_desc(base, lbo[l], sbo[l], sw[l]), off) != wgmma_desc(base + off, lbo[l], sbo[l], sw[l]) &&
                        wrong++ == 0) {
                        snprintf(detail, sizeof(detail), "base %u + %u, layout %d", base, off, l);
                    }
                }
            }
        }
        if (wrong == 0) { snprintf(detail, sizeof(detail), "%ld (base, offset) pairs", checked); }
        report("sm_90a: wgmma_desc_advance(wgmma_desc(a), off) = wgmma_desc(a + off) across shared memory", wrong == 0, detail);
    }

    // shared memory: 1 KB-aligned tiles, within the opt-in maximum (227 KB on sm_90). One block per
    // SM is what the registers allow anyway (384 threads x 168 at launch; __launch_bounds__(384, 1)),
    // so the overlapped loop's third K, V stage (ATT90_FWD_STAGES) costs no blocks.
    bool fits = ATT90_TILE_BYTES % 1024 == 0 && ATT90_SMEM <= 227 * 1024 &&
                ATT90_SMEM >= (size_t)(1 + 2 * ATT90_FWD_STAGES) * ATT90_TILE_BYTES + 8 * (1 + 2 * ATT90_FWD_STAGES) + 1023;
    snprintf(detail, sizeof(detail), "%zu bytes per block, %d K, V stages", (size_t)ATT90_SMEM, ATT90_FWD_STAGES);
    report("sm_90a forward: shared memory aligned, holds Q, the stages and the barriers, within one SM's opt-in", fits, detail);
}

int main(void) {
    test_sm90_layouts();
    test_online_softmax_theory();
    test_dscore_theory();
    test_single_token();
    test_online_softmax_log2();
    test_fragment_layouts();
    test_bank_conflicts<16>();
    test_bank_conflicts<32>();
    test_bank_conflicts<64>();
    test_bank_conflicts<128>();
    test_against_cpu(2, 37, 2, 64, 1337); // T not a multiple of any tile; the brief's shape
    test_against_cpu(1, 7, 3, 32, 42);    // a short sequence, hs = 32
    test_against_cpu(1, 70, 1, 128, 5);   // crosses the 64-row block boundary, hs = 128
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
