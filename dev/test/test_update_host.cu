/*
Host tests of the CUDA classifier, AdamW and gradient-norm kernels (llmc/fused_classifier.cuh,
llmc/adamw.cuh, llmc/global_norm.cuh) against the CPU trainer's kernels. No GPU is needed: nvcc
compiles the headers' __host__ __device__ helpers for the host, and the kernels' per-thread
loops and block reductions are replayed here thread by thread, in the device's order.

What this cannot see, and the GPU test must: the real warp shuffles and barriers, the device's
expf/logf (within 2 ulp of glibc's, not equal), fma contraction (nvcc's default), timing.

Neither this program nor the headers use fast-math, and host and CPU reference are compiled
together with the same flags, without contraction (-ffp-contract=off, and no -march=native), so
AdamW is checked bit for bit. That holds for the kernel on a GPU too: adamw_element writes every
operation as one rounded operation that nvcc may not contract (llmc/fp_rn.cuh; the emulator's
EMU_FMAD=1 builds check kernel = host update: dev/cuda/test_kernels --only adamw).

  nvcc -DENABLE_FP32 -O2 -std=c++17 -I. -Xcompiler -Wall,-Wextra,-Wno-unused-function,-fopenmp,-ffp-contract=off \
       dev/test/test_update_host.cu -o test_update_host -lm && ./test_update_host
(and the same with -DENABLE_BF16). Ends with "N passed, M failed"; exits 1 on any failure.
*/
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "cpu_reference.h"
#include "../../llmc/fused_classifier.cuh"
#include "../../llmc/adamw.cuh"
#include "../../llmc/global_norm.cuh"

// ----------------------------------------------------------------------------
// reporting

static int g_passed = 0, g_failed = 0;

// one line per check; `detail` says where and by how much when it fails
static void report(const char* name, int ok, const char* detail) {
    if (ok) {
        printf("PASS  %s\n", name);
        g_passed++;
    } else {
        printf("FAIL  %s: %s\n", name, detail);
        g_failed++;
    }
}

static uint32_t float_bits(float x) { uint32_t b; memcpy(&b, &x, 4); return b; }
static float bits_float(uint32_t b) { float x; memcpy(&x, &b, 4); return x; }
static uint16_t bf16_bits(__nv_bfloat16 x) { uint16_t b; memcpy(&b, &x, 2); return b; }

// tolerance as the other tests write it: |got - ref| <= atol + rtol * |ref|
static int close_enough(double got, double ref, double atol, double rtol) {
    return fabs(got - ref) <= atol + rtol * fabs(ref);
}

// ----------------------------------------------------------------------------
// AdamW: adamw_element (the kernel's body) and adamw_update_host (the offloaded update, -zo 1,
// OpenMP threads) against train_gpt2.c's adamw_update, bit for bit, over 20 steps

static void test_adamw(float weight_decay, float grad_scale, float beta2) {
    const size_t n = 4099;
    const float lr = 6e-4f, beta1 = 0.9f, eps = 1e-8f;
    float* p_cpu = (float*)mallocCheck(n * sizeof(float));
    float* m_cpu = (float*)calloc(n, sizeof(float));
    float* v_cpu = (float*)calloc(n, sizeof(float));
    float* master = (float*)mallocCheck(n * sizeof(float));
    float* m = (float*)calloc(n, sizeof(float));
    float* v = (float*)calloc(n, sizeof(float));
    floatX* grads = (floatX*)mallocCheck(n * sizeof(floatX));
    float* master_h = (float*)mallocCheck(n * sizeof(float)); // adamw_update_host's state and params
    float* m_h = (float*)calloc(n, sizeof(float));
    float* v_h = (float*)calloc(n, sizeof(float));
    floatX* params_h = (floatX*)mallocCheck(n * sizeof(floatX));
    float* grads_cpu = (float*)mallocCheck(n * sizeof(float));
    Rng rng;
    rng_init(&rng, 1234);
    for (size_t i = 0; i < n; i++) { p_cpu[i] = master[i] = master_h[i] = rng_normal(&rng, 0.0f, 0.02f); }

    // the gradients span the scales AdamW meets: tiny (v near eps^2), typical, large, and zeros
    const float grad_std[4] = {1e-6f, 1e-3f, 1.0f, 30.0f};
    size_t worst = 0;
    int mismatch_step = 0;
    for (int t = 1; t <= 20 && mismatch_step == 0; t++) {
        for (size_t i = 0; i < n; i++) {
            float g = i % 97 == 0 ? 0.0f : rng_normal(&rng, 0.0f, grad_std[i % 4]);
            grads[i] = from_float(g);
            grads_cpu[i] = to_float(grads[i]); // the CPU sees exactly the values the kernel reads
        }
        AdamWParams hp = {lr, beta1, beta2, eps, weight_decay, t, grad_scale};
        adamw_update(p_cpu, grads_cpu, m_cpu, v_cpu, n, weight_decay, &hp); // train_gpt2.c's

        float bc1 = adamw_bias_correction(beta1, t), bc2 = adamw_bias_correction(beta2, t);
        for (size_t i = 0; i < n; i++) {
            adamw_element(&master[i], &m[i], &v[i], to_float(grads[i]), grad_scale, lr, beta1, beta2, bc1, bc2, eps,
                          weight_decay);
        }
        AdamWTensors one = adamw_one_tensor(n, 1);
        adamw_update_host(params_h, master_h, grads, m_h, v_h, n, 0, &one, lr, beta1, beta2, bc1, bc2, eps, weight_decay,
                          grad_scale);
        for (size_t i = 0; i < n && mismatch_step == 0; i++) {
            if (float_bits(master[i]) != float_bits(p_cpu[i]) || float_bits(m[i]) != float_bits(m_cpu[i]) ||
                float_bits(v[i]) != float_bits(v_cpu[i]) || float_bits(master_h[i]) != float_bits(p_cpu[i]) ||
                float_bits(m_h[i]) != float_bits(m_cpu[i]) || float_bits(v_h[i]) != float_bits(v_cpu[i]) ||
                float_bits(to_float(params_h[i])) != float_bits(to_float(from_float(p_cpu[i])))) {
                mismatch_step = t;
                worst = i;
            }
        }
    }
    char name[160], detail[256];
    snprintf(name, sizeof(name), "adamw_element and adamw_update_host == CPU adamw_update bitwise, 20 steps (wd %g, grad_scale %g, beta2 %g)",
             weight_decay, grad_scale, beta2);
    snprintf(detail, sizeof(detail), "step %d, element %zu: master %.9g vs %.9g, m %.9g vs %.9g, v %.9g vs %.9g",
             mismatch_step, worst, master[worst], p_cpu[worst], m[worst], m_cpu[worst], v[worst], v_cpu[worst]);
    report(name, mismatch_step == 0, detail);
    free(p_cpu); free(m_cpu); free(v_cpu); free(master); free(m); free(v); free(grads); free(grads_cpu);
    free(master_h); free(m_h); free(v_h); free(params_h);
}

// AdamW over a unit of several tensors in one call (the table of llmc/adamw.cuh, as the trainer
// makes one per unit): a block unit of -zu 2 (two pieces of GPT-2's 12 block tensors at C = 8,
// weight decay on the four matrices) plus padding, updated from a shard's start inside a tensor
// to the end. adamw_decay_at and adamw_update_host against the CPU's adamw_update run tensor by
// tensor with each one's decay: bit for bit; the padding and the elements before the shard keep
// their bits (their m and v start nonzero).
static void test_adamw_table(void) {
    const int C = 8, pieces = 2, padding = 19;
    const size_t sizes[12] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    const int decays[12] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0};
    AdamWTensors t;
    memset(&t, 0, sizeof(t));
    size_t piece = 0;
    for (int k = 0; k < 12; k++) {
        piece += sizes[k];
        t.end[k] = (unsigned int)piece;
        t.decay[k] = decays[k];
    }
    t.num_tensors = 12;
    t.piece = (unsigned int)piece;
    t.real = (unsigned int)(pieces * piece);
    size_t total = pieces * piece + padding, lo = 100; // the shard starts inside qkvw
    const float lr = 6e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f, grad_scale = 0.7f;
    float* p_cpu = (float*)mallocCheck(total * sizeof(float));
    float* m_cpu = (float*)mallocCheck(total * sizeof(float));
    float* v_cpu = (float*)mallocCheck(total * sizeof(float));
    float* master = (float*)mallocCheck(total * sizeof(float));
    float* m = (float*)mallocCheck(total * sizeof(float));
    float* v = (float*)mallocCheck(total * sizeof(float));
    floatX* params = (floatX*)callocCheck(total, sizeof(floatX));
    floatX* grads = (floatX*)mallocCheck(total * sizeof(floatX));
    float* grads_cpu = (float*)mallocCheck(total * sizeof(float));
    Rng rng;
    rng_init(&rng, 4321);
    for (size_t i = 0; i < total; i++) {
        p_cpu[i] = master[i] = rng_normal(&rng, 0.0f, 0.02f);
        m_cpu[i] = m[i] = rng_normal(&rng, 0.0f, 1e-3f);
        v_cpu[i] = v[i] = 1e-6f * rng_uniform(&rng);
    }
    int ok = 1, decay_ok = 1;
    char detail[200] = "";
    for (int step = 1; step <= 5 && ok; step++) {
        for (size_t i = 0; i < total; i++) { grads[i] = from_float(rng_normal(&rng, 0.0f, 1e-2f)); grads_cpu[i] = to_float(grads[i]); }
        AdamWParams hp = {lr, beta1, beta2, eps, wd, step, grad_scale};
        size_t t0 = 0;
        for (int p = 0; p < pieces; p++) {
            for (int k = 0; k < 12; k++) {
                size_t t1 = t0 + sizes[k], a = t0 > lo ? t0 : lo;
                if (a < t1) { adamw_update(p_cpu + a, grads_cpu + a, m_cpu + a, v_cpu + a, t1 - a, decays[k] ? wd : 0.0f, &hp); }
                t0 = t1;
            }
        }
        float bc1 = adamw_bias_correction(beta1, step), bc2 = adamw_bias_correction(beta2, step);
        adamw_update_host(params + lo, master + lo, grads + lo, m + lo, v + lo, total - lo, lo, &t, lr, beta1, beta2, bc1, bc2,
                          eps, wd, grad_scale);
        for (size_t i = 0; i < total && ok; i++) {
            ok = float_bits(master[i]) == float_bits(p_cpu[i]) && float_bits(m[i]) == float_bits(m_cpu[i]) &&
                 float_bits(v[i]) == float_bits(v_cpu[i]);
            if (!ok) { snprintf(detail, sizeof(detail), "step %d element %zu: master %.9g vs %.9g", step, i, master[i], p_cpu[i]); }
        }
    }
    // the decay of every element of the unit, straight from the table
    size_t t0 = 0;
    for (int p = 0; p < pieces; p++) {
        for (int k = 0; k < 12; k++) {
            for (size_t i = t0; i < t0 + sizes[k]; i++) { decay_ok &= adamw_decay_at(&t, (unsigned int)i) == decays[k]; }
            t0 += sizes[k];
        }
    }
    for (size_t i = t0; i < total; i++) { decay_ok &= adamw_decay_at(&t, (unsigned int)i) == -1; }
    report("adamw_decay_at: every element's tensor decay over two 12-tensor pieces, -1 in the padding", decay_ok,
           "a wrong decay flag");
    report("adamw_update_host with a unit's table (2 blocks of 12 tensors, a shard from inside qkvw, padding) == CPU "
           "adamw_update tensor by tensor, bitwise, 5 steps; untouched elements keep their bits", ok, detail);
    free(p_cpu); free(m_cpu); free(v_cpu); free(master); free(m); free(v); free(params); free(grads); free(grads_cpu);
}

// ----------------------------------------------------------------------------
// the classifier: logits of a few kinds of rows, through the CPU and through the helpers
//
// The references are the CPU's outputs and the exact sum of each row (in double). The CPU's
// float sum is itself off: on the std-4 row it drops the many terms below half an ulp of the
// running sum and is 8e-5 low. So sums are held to the exact value, with a tolerance that
// fits the order of additions, and results compared with the CPU's get the CPU's own measured
// error of that row added to the tolerance.

#define CL_B 2
#define CL_T 4
#define CL_BT (CL_B * CL_T)
#define FLOAT_ROUNDING 5.9604644775390625e-8 // 2^-24, the relative rounding error of one float op

typedef struct {
    int V, Vp;
    floatX* logits;   // (BT, Vp) as the kernel sees them; padded columns hold junk it must skip
    float* logits_f;  // (BT, Vp) the same values in float, for the CPU
    int targets[CL_BT];
    float* probs;     // (BT, Vp) CPU forward
    float* losses;    // (BT) CPU forward
    float* dlogits;   // (BT, Vp) CPU backward
    float dloss;
    float maxval[CL_BT];       // each row's max, by the CPU's loop
    double exact_sum[CL_BT];   // each row's sum of exp(x - maxval), in double
    double cpu_sum_err[CL_BT]; // |the CPU's float sum - exact_sum| / exact_sum
} ClassifierCase;

static void classifier_case_init(ClassifierCase* c, int V, int Vp, uint64_t seed) {
    c->V = V;
    c->Vp = Vp;
    size_t total = (size_t)CL_BT * Vp;
    c->logits = (floatX*)mallocCheck(total * sizeof(floatX));
    c->logits_f = (float*)mallocCheck(total * sizeof(float));
    c->probs = (float*)mallocCheck(total * sizeof(float));
    c->losses = (float*)mallocCheck(CL_BT * sizeof(float));
    c->dlogits = (float*)mallocCheck(total * sizeof(float));
    c->dloss = 1.0f / CL_BT;
    Rng rng;
    rng_init(&rng, seed);
    for (int bt = 0; bt < CL_BT; bt++) {
        float* x = c->logits_f + (size_t)bt * Vp;
        int target = (int)rng_below(&rng, (uint32_t)V);
        for (int i = 0; i < V; i++) {
            switch (bt) {
            case 0: x[i] = rng_normal(&rng, 0.0f, 1.0f); break;                 // like an untrained model
            case 1: x[i] = rng_normal(&rng, 0.0f, 4.0f); break;                 // a trained model's spread
            case 2: x[i] = rng_normal(&rng, 0.0f, 1.0f) + (i == target ? 25.0f : 0.0f); break; // p ~ 1
            case 3: x[i] = (rng_uniform(&rng) - 0.5f) * 120.0f; break;          // most exps underflow
            case 4: x[i] = 0.5f; break;                                         // every logit ties
            case 5: x[i] = -rng_uniform(&rng) * 8.0f + (i == V - 1 ? 9.0f : 0.0f); break; // max at the end
            case 6: x[i] = rng_normal(&rng, 0.0f, 2.0f) + (i == 0 ? 12.0f : 0.0f); break; // max first
            default: x[i] = rng_normal(&rng, -3.0f, 0.5f) - (i == target ? 20.0f : 0.0f); break; // p tiny
            }
        }
        for (int i = V; i < Vp; i++) { x[i] = 1000.0f; } // would dominate every row if it were read
        c->targets[bt] = target;
    }
    // the kernel reads floatX: round, and give the CPU the rounded values
    for (size_t i = 0; i < total; i++) {
        c->logits[i] = from_float(c->logits_f[i]);
        c->logits_f[i] = to_float(c->logits[i]);
    }
    softmax_crossentropy_forward(c->probs, c->losses, c->logits_f, c->targets, CL_B, CL_T, V, Vp);
    softmax_crossentropy_backward(c->dlogits, c->probs, c->targets, c->dloss, CL_B, CL_T, V, Vp);
    // The CPU keeps its sum only inside probs = expf(x - max) / sum: at the max expf(0) = 1, so
    // that probability is 1/sum (one rounding away)
    for (int bt = 0; bt < CL_BT; bt++) {
        const float* x = c->logits_f + (size_t)bt * Vp;
        int imax = 0;
        for (int i = 1; i < V; i++) { if (x[i] > x[imax]) { imax = i; } }
        double exact = 0.0;
        for (int i = 0; i < V; i++) { exact += exp((double)x[i] - (double)x[imax]); }
        c->maxval[bt] = x[imax];
        c->exact_sum[bt] = exact;
        c->cpu_sum_err[bt] = fabs(1.0 / c->probs[(size_t)bt * Vp + imax] - exact) / exact;
    }
}

static void classifier_case_free(ClassifierCase* c) {
    free(c->logits); free(c->logits_f); free(c->probs); free(c->losses); free(c->dlogits);
}

// The result of checking rows: all good so far, the worst errors seen, the first failure.
typedef struct {
    int ok;
    double worst_sum_err; // ours vs the exact sum, relative
    double worst_cpu_err; // the CPU's vs the exact sum, relative
    char detail[256];
} RowCheck;

// A row's state and loss: max equal to the CPU's, sum within sum_tol of the exact sum, loss
// within 1e-5 (absolute below 1, relative above) of the CPU's.
static void check_row_state(const ClassifierCase* c, int bt, SoftmaxState st, double sum_tol, RowCheck* rc) {
    double exact = c->exact_sum[bt], err = fabs(st.sum - exact) / exact;
    float target_logit = c->logits_f[(size_t)bt * c->Vp + c->targets[bt]];
    float loss = crossentropy_loss(st, target_logit), cpu_loss = c->losses[bt];
    int ok = float_bits(st.maxval) == float_bits(c->maxval[bt]) && err <= sum_tol &&
             close_enough(loss, cpu_loss, 1e-5, 1e-5);
    if (err > rc->worst_sum_err) { rc->worst_sum_err = err; }
    if (c->cpu_sum_err[bt] > rc->worst_cpu_err) { rc->worst_cpu_err = c->cpu_sum_err[bt]; }
    if (!ok && rc->ok) {
        snprintf(rc->detail, sizeof(rc->detail), "row %d: max %.9g vs %.9g, sum %.9g vs exact %.9g (rel %.2g > %.2g), "
                 "loss %.9g vs CPU %.9g", bt, st.maxval, c->maxval[bt], st.sum, exact, err, sum_tol, loss, cpu_loss);
    }
    rc->ok &= ok;
}

static void report_rows(const char* what, const RowCheck* rc, double sum_tol) {
    char name[256];
    snprintf(name, sizeof(name), "%s: max, sum (worst %.1e vs exact, tolerance %.1e; the CPU's own %.1e), loss",
             what, rc->worst_sum_err, sum_tol, rc->worst_cpu_err);
    report(name, rc->ok, rc->detail);
}

// softmax_state_merge folded over a row in chunks of `chunk` logits, then over the chunks.
// Tolerance: the worst case of this order. A merge rounds up to 3 times (expf, multiply, add),
// and the longest chain of merges is the chunk's then the chunks', ~chunk + V/chunk.
static void test_merge_chunks(const ClassifierCase* c, int chunk) {
    int chain = chunk + (c->V + chunk - 1) / chunk;
    double sum_tol = 3.0 * chain * FLOAT_ROUNDING;
    RowCheck rc = {1, 0.0, 0.0, ""};
    for (int bt = 0; bt < CL_BT; bt++) {
        const float* x = c->logits_f + (size_t)bt * c->Vp;
        SoftmaxState row = softmax_state_empty();
        for (int i0 = 0; i0 < c->V; i0 += chunk) {
            SoftmaxState part = softmax_state_empty();
            for (int i = i0; i < i0 + chunk && i < c->V; i++) { part = softmax_state_merge(part, softmax_state_of(x[i])); }
            row = softmax_state_merge(row, part);
        }
        check_row_state(c, bt, row, sum_tol, &rc);
    }
    char what[128];
    snprintf(what, sizeof(what), "softmax_state_merge in chunks of %d (V %d)", chunk, c->V);
    report_rows(what, &rc, sum_tol);
}

// The kernel's block reduction, replayed: a butterfly over each warp's 32 lanes (lane l takes
// lane l ^ offset's state), lane 0 of each warp to shared memory, and the butterfly again over
// the warps' states. Fails (returns 0) if the lanes of a warp end with different states, which
// the kernel relies on not happening.
static int replay_block_reduction(SoftmaxState* states, int nthreads, SoftmaxState* out) {
    SoftmaxState shared[32];
    int warps = nthreads / 32, agree = 1;
    for (int w = 0; w < warps; w++) {
        SoftmaxState* lanes = states + 32 * w;
        for (int offset = 16; offset > 0; offset >>= 1) {
            SoftmaxState next[32];
            for (int l = 0; l < 32; l++) { next[l] = softmax_state_merge(lanes[l], lanes[l ^ offset]); }
            memcpy(lanes, next, sizeof(next));
        }
        for (int l = 1; l < 32; l++) { agree &= memcmp(&lanes[l], &lanes[0], sizeof(SoftmaxState)) == 0; }
        shared[w] = lanes[0];
    }
    SoftmaxState lanes[32];
    for (int l = 0; l < 32; l++) { lanes[l] = l < warps ? shared[l] : softmax_state_empty(); }
    for (int offset = 16; offset > 0; offset >>= 1) {
        SoftmaxState next[32];
        for (int l = 0; l < 32; l++) { next[l] = softmax_state_merge(lanes[l], lanes[l ^ offset]); }
        memcpy(lanes, next, sizeof(next));
    }
    for (int l = 1; l < 32; l++) { agree &= memcmp(&lanes[l], &lanes[0], sizeof(SoftmaxState)) == 0; }
    *out = lanes[0];
    return agree;
}

// The whole kernel, one block per row, thread by thread: pass 1 (classifier_thread_state),
// the block reduction, the loss, pass 2 (classifier_thread_dlogits); then compare the sums
// with the exact ones (within sum_tol) and the dlogits with exact ones and with the CPU's.
static void test_kernel_replay(const ClassifierCase* c, int nthreads, double sum_tol) {
    const int V = c->V, Vp = c->Vp;
    floatX* out = (floatX*)mallocCheck((size_t)CL_BT * Vp * sizeof(floatX));
    memcpy(out, c->logits, (size_t)CL_BT * Vp * sizeof(floatX));
    SoftmaxState* states = (SoftmaxState*)mallocCheck(nthreads * sizeof(SoftmaxState));
    RowCheck rc = {1, 0.0, 0.0, ""};
    int ok_lanes = 1, ok_exact = 1, ok_cpu = 1;
    char detail_exact[256] = "", detail_cpu[256] = "";
    // p = expf * (1/sum) carries the sum's error and ~4 roundings; bf16 adds its own rounding
    double rtol = sum_tol + 4.0 * FLOAT_ROUNDING + (sizeof(floatX) == 2 ? 1.0 / 256.0 : 0.0);
    double atol = sum_tol * c->dloss;
    for (int bt = 0; bt < CL_BT; bt++) {
        floatX* row = out + (size_t)bt * Vp;
        for (int t = 0; t < nthreads; t++) { states[t] = classifier_thread_state(row, V, Vp, t, nthreads); }
        SoftmaxState st;
        ok_lanes &= replay_block_reduction(states, nthreads, &st);
        check_row_state(c, bt, st, sum_tol, &rc);
        for (int t = 0; t < nthreads; t++) { classifier_thread_dlogits(row, st, c->targets[bt], c->dloss, V, Vp, t, nthreads); }

        const float* x = c->logits_f + (size_t)bt * Vp;
        const float* cpu = c->dlogits + (size_t)bt * Vp;
        double cpu_err = c->cpu_sum_err[bt];
        for (int i = 0; i < Vp; i++) {
            double got = to_float(row[i]);
            double exact = 0.0; // the padded columns must be exactly 0
            if (i < V) { exact = (exp((double)x[i] - c->maxval[bt]) / c->exact_sum[bt] - (i == c->targets[bt])) * c->dloss; }
            if (ok_exact && !close_enough(got, exact, atol, rtol)) {
                ok_exact = 0;
                snprintf(detail_exact, sizeof(detail_exact), "row %d col %d (target %d): dlogit %.9g vs exact %.9g", bt,
                         i, c->targets[bt], got, exact);
            }
            if (ok_cpu && !close_enough(got, cpu[i], atol + cpu_err * c->dloss, rtol + cpu_err)) {
                ok_cpu = 0;
                snprintf(detail_cpu, sizeof(detail_cpu), "row %d col %d (target %d): dlogit %.9g vs CPU %.9g", bt, i,
                         c->targets[bt], got, cpu[i]);
            }
        }
    }
    char what[160];
    snprintf(what, sizeof(what), "kernel replay, %d threads (V %d, Vp %d)", nthreads, V, Vp);
    char name[256];
    snprintf(name, sizeof(name), "%s: every lane ends the butterflies with the same state", what);
    report(name, ok_lanes, "some lanes of a warp ended with different states");
    report_rows(what, &rc, sum_tol);
    snprintf(name, sizeof(name), "%s: dlogits vs exact, padding exactly 0 (rtol %.1e)", what, rtol);
    report(name, ok_exact, detail_exact);
    snprintf(name, sizeof(name), "%s: dlogits vs CPU backward (rtol %.1e + the CPU's own error)", what, rtol);
    report(name, ok_cpu, detail_cpu);
    free(out);
    free(states);
}

// The kernel that holds each thread's packs in registers (classifier_thread_load_state, then
// classifier_thread_store_dlogits) against the reread kernel's loops, thread by thread: the same
// state and the same dlogits, to the bit (the same packs folded in the same order).
static void test_held_replay(const ClassifierCase* c, int nthreads) {
    const int V = c->V, Vp = c->Vp;
    size_t total = (size_t)CL_BT * Vp;
    floatX* held_out = (floatX*)mallocCheck(total * sizeof(floatX));
    floatX* reread_out = (floatX*)mallocCheck(total * sizeof(floatX));
    memcpy(held_out, c->logits, total * sizeof(floatX));
    memcpy(reread_out, c->logits, total * sizeof(floatX));
    int ok_state = 1;
    char detail[200] = "";
    for (int bt = 0; bt < CL_BT; bt++) {
        floatX* hrow = held_out + (size_t)bt * Vp;
        floatX* rrow = reread_out + (size_t)bt * Vp;
        for (int t = 0; t < nthreads; t++) {
            ClassifierHeld held;
            SoftmaxState hs = classifier_thread_load_state(&held, hrow, V, Vp, t, nthreads);
            SoftmaxState rs = classifier_thread_state(rrow, V, Vp, t, nthreads);
            if (ok_state && memcmp(&hs, &rs, sizeof(hs)) != 0) {
                ok_state = 0;
                snprintf(detail, sizeof(detail), "row %d thread %d: held (%.9g, %.9g), reread (%.9g, %.9g)", bt, t,
                         hs.maxval, hs.sum, rs.maxval, rs.sum);
            }
            // any state will do for pass 2 (the same for both); the row's first logit as the max
            SoftmaxState st = {to_float(c->logits[(size_t)bt * Vp]), 3.0f};
            classifier_thread_store_dlogits(&held, hrow, st, c->targets[bt], c->dloss, V, Vp, t, nthreads);
            classifier_thread_dlogits(rrow, st, c->targets[bt], c->dloss, V, Vp, t, nthreads);
        }
    }
    char name[160];
    snprintf(name, sizeof(name), "held in registers, %d threads (V %d, Vp %d): each thread's state as the reread loop's",
             nthreads, V, Vp);
    report(name, ok_state, detail);
    snprintf(name, sizeof(name), "held in registers, %d threads (V %d, Vp %d): dlogits as the reread loop's, to the bit",
             nthreads, V, Vp);
    report(name, memcmp(held_out, reread_out, total * sizeof(floatX)) == 0, "some dlogits differ");
    free(held_out);
    free(reread_out);
}

// softmax_state_merge is symmetric to the bit, and the empty state is its identity
static void test_merge_algebra(void) {
    Rng rng;
    rng_init(&rng, 77);
    int ok = 1;
    char detail[200] = "";
    for (int i = 0; i < 100000 && ok; i++) {
        SoftmaxState a = {rng_normal(&rng, 0.0f, 10.0f), 1.0f + rng_uniform(&rng) * 1000.0f};
        SoftmaxState b = {i % 10 == 0 ? a.maxval : rng_normal(&rng, 0.0f, 10.0f), 1.0f + rng_uniform(&rng) * 1000.0f};
        SoftmaxState ab = softmax_state_merge(a, b), ba = softmax_state_merge(b, a);
        SoftmaxState ae = softmax_state_merge(a, softmax_state_empty()), ea = softmax_state_merge(softmax_state_empty(), a);
        ok = memcmp(&ab, &ba, sizeof(ab)) == 0 && memcmp(&ae, &a, sizeof(a)) == 0 && memcmp(&ea, &a, sizeof(a)) == 0;
        if (!ok) {
            snprintf(detail, sizeof(detail), "a (%.9g, %.9g) b (%.9g, %.9g): ab (%.9g, %.9g) ba (%.9g, %.9g)", a.maxval,
                     a.sum, b.maxval, b.sum, ab.maxval, ab.sum, ba.maxval, ba.sum);
        }
    }
    SoftmaxState ee = softmax_state_merge(softmax_state_empty(), softmax_state_empty());
    if (ok && !(ee.sum == 0.0f && ee.maxval == -INFINITY)) { ok = 0; snprintf(detail, sizeof(detail), "empty + empty is not empty"); }
    report("softmax_state_merge: merge(a,b) == merge(b,a) bitwise, empty is the identity", ok, detail);
}

// ----------------------------------------------------------------------------
// global norm: the kernels' split of x over threads and blocks, replayed

// The slices (parts) of n elements are cut from one array: sizes n/2, 0 (an empty slice), the rest.
static void test_global_norm(size_t n, int all_ones) {
    floatX* x = (floatX*)mallocCheck((n > 0 ? n : 1) * sizeof(floatX));
    float* xf = (float*)mallocCheck((n > 0 ? n : 1) * sizeof(float));
    Rng rng;
    rng_init(&rng, 99 + n);
    for (size_t i = 0; i < n; i++) {
        x[i] = from_float(all_ones ? 1.0f : rng_normal(&rng, 0.0f, 0.01f));
        xf[i] = to_float(x[i]);
    }
    GlobalNormPart parts[3] = {{x, n / 2}, {x + n / 2, 0}, {x + n / 2, n - n / 2}};
    // first pass: each block's threads over every part; second: the partials (the order within a
    // block's sum is the device's butterfly, not this loop's, which the 1e-12 tolerance allows for)
    const size_t nthreads = (size_t)GLOBAL_NORM_BLOCKS * GLOBAL_NORM_THREADS;
    double partial[GLOBAL_NORM_SCRATCH];
    for (int b = 0; b < GLOBAL_NORM_BLOCKS; b++) {
        partial[b] = 0.0;
        for (int t = 0; t < GLOBAL_NORM_THREADS; t++) {
            partial[b] += global_norm_thread_sum<floatX>(parts, 3, (size_t)b * GLOBAL_NORM_THREADS + t, nthreads);
        }
    }
    double total = 0.0;
    for (int b = 0; b < GLOBAL_NORM_BLOCKS; b++) { total += partial[b]; }
    double ref = all_ones ? (double)n : sum_of_squares(xf, n);
    char name[160], detail[128];
    snprintf(name, sizeof(name), "global_norm_thread_sum over the fixed grid, 3 slices (one empty) of n %zu%s vs CPU sum_of_squares", n,
             all_ones ? " (all ones: each element once)" : "");
    snprintf(detail, sizeof(detail), "%.17g vs %.17g", total, ref);
    report(name, all_ones ? total == ref : close_enough(total, ref, 0.0, 1e-12), detail);
    free(x);
    free(xf);
}

// A thread's sum (global_norm_thread_sum loads GLOBAL_NORM_UNROLL elements before adding them) is
// the plain strided loop's, bit for bit: the adds in element order, whatever the unrolling. Small
// thread counts make short arrays walk the unrolled loop, its remainder, and both.
static void test_global_norm_thread_order(void) {
    const size_t sizes[] = {0, 1, 7, 8, 23, 24, 25, 100, 1001};
    const size_t counts[] = {1, 3, 8};
    floatX* x = (floatX*)mallocCheck(2 * 1001 * sizeof(floatX));
    Rng rng;
    rng_init(&rng, 7);
    // magnitudes over 2^-40 .. 2^40: squares of bf16 values are exact in double and a sum of
    // similar ones stays exact, so only a wide range makes the order of the adds show in the bits
    for (size_t i = 0; i < 2 * 1001; i++) {
        x[i] = from_float(ldexpf(rng_normal(&rng, 0.0f, 1.0f), (int)(rng_uniform(&rng) * 80.0f) - 40));
    }
    int ok = 1, checked = 0;
    char detail[160] = "";
    for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]) && ok; a++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && ok; c++) {
            GlobalNormPart parts[2] = {{x, sizes[a]}, {x + 1001, 1001 - sizes[a]}};
            for (size_t tid = 0; tid < counts[c] && ok; tid++) {
                double want = 0.0; // the documented order: each part in turn, x[tid], x[tid + nthreads], ...
                for (int p = 0; p < 2; p++) {
                    const floatX* xp = (const floatX*)parts[p].x;
                    for (size_t i = tid; i < parts[p].n; i += counts[c]) { want += (double)to_float(xp[i]) * (double)to_float(xp[i]); }
                }
                double got = global_norm_thread_sum<floatX>(parts, 2, tid, counts[c]);
                ok = memcmp(&got, &want, sizeof(got)) == 0;
                checked++;
                if (!ok) { snprintf(detail, sizeof(detail), "n %zu, %zu threads, thread %zu: %.17g, plain loop %.17g", sizes[a], counts[c], tid, got, want); }
            }
        }
    }
    if (ok) { snprintf(detail, sizeof(detail), "%d threads' sums", checked); }
    report("global_norm_thread_sum (8 loads, then 8 adds) = the plain strided loop, bit for bit", ok, detail);
    free(x);
}

// ----------------------------------------------------------------------------
// bf16 rounding of the params: round to nearest, ties to even, against a bit-level reference

// float bits -> bf16 bits. Adding 0x7FFF plus the kept part's lowest bit, then truncating,
// rounds to nearest with ties to even; a carry out of the mantissa bumps the exponent, which is
// also right (up to infinity). NaNs must stay NaN: the carry could turn one into an infinity or
// flip its sign, so they are kept apart (quieted, sign and top payload bits kept).
static uint16_t bf16_round_reference(uint32_t bits) {
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) { return (uint16_t)((bits >> 16) | 0x0040u); }
    uint32_t lsb = (bits >> 16) & 1u;
    return (uint16_t)((bits + 0x7FFFu + lsb) >> 16);
}

static int bf16_is_nan(uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x007Fu) != 0; }

// same bits, or both NaN
static int bf16_same(uint16_t got, uint16_t want) { return got == want || (bf16_is_nan(got) && bf16_is_nan(want)); }

static void test_bf16_rounding(void) {
    // the reference itself, on cases worked by hand
    static const uint32_t in[] = {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F80FFFFu, 0x3F817FFFu, 0x00008000u,
                                  0x00018000u, 0x80008000u, 0x80018000u, 0x7F7FFFFFu, 0x7F7F7FFFu, 0x7F800000u,
                                  0xFF800000u, 0x00000000u, 0x80000000u, 0x3F800000u};
    static const uint16_t out[] = {0x3F80, 0x3F82, 0x3F81, 0x3F81, 0x3F81, 0x0000, 0x0002, 0x8000, 0x8002, 0x7F80,
                                   0x7F7F, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x3F80};
    static const uint32_t nans[] = {0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FFF8000u, 0xFF80FFFFu, 0x7FFFFFFFu};
    const int ncases = (int)(sizeof(in) / sizeof(in[0])), nnans = (int)(sizeof(nans) / sizeof(nans[0]));
    int ok = 1;
    char detail[128] = "";
    for (int i = 0; i < ncases && ok; i++) {
        ok = bf16_round_reference(in[i]) == out[i];
        if (!ok) { snprintf(detail, sizeof(detail), "0x%08X: 0x%04X, want 0x%04X", in[i], bf16_round_reference(in[i]), out[i]); }
    }
    for (int i = 0; i < nnans && ok; i++) {
        ok = bf16_is_nan(bf16_round_reference(nans[i]));
        if (!ok) { snprintf(detail, sizeof(detail), "NaN 0x%08X became 0x%04X", nans[i], bf16_round_reference(nans[i])); }
    }
    report("bf16 reference rounding on hand-worked cases (ties to even, carries, infinities, NaN)", ok, detail);

    // CUDA's __float2bfloat16_rn: the hand cases, NaNs, and random bit patterns of every exponent
    Rng rng;
    rng_init(&rng, 2024);
    const int nrandom = 4000000;
    ok = 1;
    for (int i = 0; i < ncases + nnans + nrandom && ok; i++) {
        uint32_t b = i < ncases ? in[i] : i < ncases + nnans ? nans[i - ncases] : rng_u32(&rng);
        if (i >= ncases + nnans && i % 2 == 0) { b = (b & 0xFFFF0000u) | 0x8000u; } // half of them exact ties
        uint16_t got = bf16_bits(__float2bfloat16_rn(bits_float(b))), want = bf16_round_reference(b);
        ok = bf16_same(got, want);
        if (!ok) { snprintf(detail, sizeof(detail), "0x%08X: 0x%04X, want 0x%04X", b, got, want); }
    }
    report("__float2bfloat16_rn == reference (hand cases, NaNs, 4M random patterns, half of them ties)", ok, detail);

    // from_float: the params' rounding (bf16), or no rounding at all (fp32)
    rng_init(&rng, 2025);
    ok = 1;
    for (int i = 0; i < ncases + nnans + nrandom && ok; i++) {
        uint32_t b = i < ncases ? in[i] : i < ncases + nnans ? nans[i - ncases] : rng_u32(&rng);
        if (i >= ncases + nnans && i % 2 == 0) { b = (b & 0xFFFF0000u) | 0x8000u; }
        floatX y = from_float(bits_float(b));
#if defined(ENABLE_FP32)
        uint32_t got = float_bits(y);
        ok = got == b;
        if (!ok) { snprintf(detail, sizeof(detail), "0x%08X became 0x%08X", b, got); }
#else
        uint16_t got = bf16_bits(y), want = bf16_round_reference(b);
        ok = bf16_same(got, want);
        if (!ok) { snprintf(detail, sizeof(detail), "0x%08X: 0x%04X, want 0x%04X", b, got, want); }
#endif
    }
    report(sizeof(floatX) == 2 ? "from_float (bf16) rounds to nearest even, NaN stays NaN"
                               : "from_float (fp32) keeps every bit", ok, detail);
}

// ----------------------------------------------------------------------------

int main(void) {
    printf("test_update_host (%s)\n", PRECISION_NAME);

    for (int wd = 0; wd < 2; wd++) {
        for (int gs = 0; gs < 2; gs++) { test_adamw(wd ? 0.1f : 0.0f, gs ? 0.5f : 1.0f, 0.95f); }
    }
    test_adamw(0.1f, 1.0f, 0.999f);
    test_adamw_table();

    test_merge_algebra();
    ClassifierCase gpt2, small;
    classifier_case_init(&gpt2, 50257, 50304, 11); // GPT-2's vocabulary, padded to a multiple of 128
    classifier_case_init(&small, 13, 16, 12);      // fewer logits than threads, padding inside a pack
    const int chunks[3] = {1, 7, 1024};
    for (int i = 0; i < 3; i++) { test_merge_chunks(&gpt2, chunks[i]); }
    test_merge_chunks(&small, 7);
    // the kernel's order: 1e-6 of the exact sum (its worst case is 3 * (49 + 10) roundings, 1e-5)
    test_kernel_replay(&gpt2, CLASSIFIER_THREADS, 1e-6);
    test_kernel_replay(&small, CLASSIFIER_THREADS, 1e-6);
    // another block size (~790 logits per thread), held to its worst case
    test_kernel_replay(&gpt2, 64, 3.0 * (50304 / 64 + 6 + 5) * FLOAT_ROUNDING);
    // the kernel that holds the packs: GPT-2's row over 1024 threads in bf16 (as the trainer runs it),
    // 2048 in fp32 (4 logits a pack: 7 packs or fewer a thread)
    test_held_replay(&gpt2, CLASSIFIER_THREADS * 8 / PACKX_SIZE);
    test_held_replay(&small, CLASSIFIER_THREADS);
    classifier_case_free(&gpt2);
    classifier_case_free(&small);

    const size_t grid_threads = (size_t)GLOBAL_NORM_BLOCKS * GLOBAL_NORM_THREADS;
    const size_t sizes[5] = {0, 1, 1000, grid_threads + 3, 3000017};
    for (int i = 0; i < 5; i++) { test_global_norm(sizes[i], 0); }
    test_global_norm(grid_threads * 3 - 5, 1);
    test_global_norm_thread_order();

    test_bf16_rounding();

    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
