/*
The PyTorch reference files (written by train_gpt2.py) and the checks against them: plain C,
shared by test_gpt2.c (CPU trainer) and test_gpt2.cu (CUDA trainer).

  <prefix>_debug_state.bin  magic 20240327, version 2, B, T; x, y (int32, B*T), logits (fp32,
                            B,T,V), loss, then the 16 gradient tensors in file order
  <prefix>_losses.bin       magic 20240330, version 1, steps, B, T; the losses of the AdamW steps,
                            then their gradient norms before clipping

Tolerances are atol*rms(ref) + rtol*|ref| per element, where rms(ref) is the tensor's root mean
square: two implementations that sum in different orders differ by a few ulps of the partial
sums that fed an element, and those are on the scale of the tensor's typical element, not of
the element itself (cancellation leaves some gradient elements far smaller than their terms).
check_tensor_rows takes rms(ref) of each row instead, for tensors whose rows are separate sums
of very different sizes (the embedding gradients: see test_gpt2.cu).
*/
#ifndef DEV_TEST_REFERENCE_H
#define DEV_TEST_REFERENCE_H

#include <math.h>
#include "../../llmc/utils.h"
#include "../../llmc/gpt2_layout.h"

#define DEBUG_MAGIC 20240327
#define LOSSES_MAGIC 20240330

// The optimizer settings of train_gpt2.py's reference steps (its constants of the same names).
#define REF_LR 1e-4f
#define REF_BETA1 0.9f
#define REF_BETA2 0.999f
#define REF_EPS 1e-8f
#define REF_WEIGHT_DECAY 0.1f
#define REF_GRAD_CLIP 1.0f

typedef struct {
    int B, T;
    int* x;                            // (B,T) inputs
    int* y;                            // (B,T) targets
    float* logits;                     // (B,T,V)
    float loss;
    float* grads[NUM_PARAM_TENSORS];   // each tensor stacked over its layers, as in the file
    int steps;
    float* step_loss;                  // (steps)
    float* step_norm;                  // (steps)
} Reference;

// argv[index] as an integer from 1 to max, or fallback when it is absent; anything else stops
// with one line naming the argument (what) and the range (why: what max is).
static inline int reference_int_arg(int argc, char** argv, int index, const char* what, int fallback, int max,
                                    const char* why) {
    if (argc <= index) { return fallback; }
    char* end;
    long n = strtol(argv[index], &end, 10);
    if (*argv[index] == '\0' || *end != '\0' || n < 1 || n > max) {
        fprintf(stderr, "%s: %s '%s': expected an integer from 1 to %d%s\n", argv[0], what, argv[index], max, why);
        exit(2);
    }
    return (int)n;
}

// The AdamW steps to check: all of the reference's, or the first N where argv[2] = N (1..steps).
// The sanitizer runs take fewer: every step runs the same code, and a step under ASan costs ~5x.
static inline int reference_steps_arg(int argc, char** argv, int steps) {
    return reference_int_arg(argc, argv, 2, "steps", steps, steps, " (the reference's steps)");
}

// Reads <prefix>_debug_state.bin and <prefix>_losses.bin for the model of config c (with
// num_parameters real parameters), checking that they belong to it.
static inline void reference_load(Reference* r, const char* prefix, const GPT2Config* c, size_t num_parameters) {
    char path[512];
    snprintf(path, sizeof(path), "%s_debug_state.bin", prefix);
    FILE* fp = fopenCheck(path, "rb");
    int header[HEADER_INTS];
    read_header(fp, header, path, DEBUG_MAGIC, "debug state");
    if (header[1] != 2) { fail("'%s' has version %d, expected 2", path, header[1]); }
    r->B = header[2];
    r->T = header[3];
    if (r->B <= 0 || r->T <= 0 || r->T > c->max_seq_len) { fail("'%s' has B %d, T %d", path, r->B, r->T); }
    size_t BT = (size_t)r->B * r->T, V = c->vocab_size;
    long expected = (long)(HEADER_INTS * sizeof(int) + 2 * BT * sizeof(int) + (BT * V + 1 + num_parameters) * sizeof(float));
    if (file_size(fp, path) != expected) { fail("'%s' is not %ld bytes: it does not belong to the model %s.bin", path, expected, prefix); }
    fseekCheck(fp, HEADER_INTS * sizeof(int), SEEK_SET, path);
    r->x = (int*)mallocCheck(BT * sizeof(int));
    r->y = (int*)mallocCheck(BT * sizeof(int));
    r->logits = (float*)mallocCheck(BT * V * sizeof(float));
    freadCheck(r->x, sizeof(int), BT, fp, path);
    freadCheck(r->y, sizeof(int), BT, fp, path);
    freadCheck(r->logits, sizeof(float), BT * V, fp, path);
    freadCheck(&r->loss, sizeof(float), 1, fp, path);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = tensor_numel(c, t) * tensor_copies(c, t);
        r->grads[t] = (float*)mallocCheck(n * sizeof(float));
        freadCheck(r->grads[t], sizeof(float), n, fp, path);
    }
    fclose(fp);

    snprintf(path, sizeof(path), "%s_losses.bin", prefix);
    fp = fopenCheck(path, "rb");
    read_header(fp, header, path, LOSSES_MAGIC, "reference losses");
    r->steps = header[2];
    if (header[1] != 1 || r->steps <= 0 || r->steps > 1000 || header[3] != r->B || header[4] != r->T) {
        fail("'%s': version %d, %d steps, B %d, T %d; expected version 1 and B %d, T %d",
             path, header[1], r->steps, header[3], header[4], r->B, r->T);
    }
    r->step_loss = (float*)mallocCheck(r->steps * sizeof(float));
    r->step_norm = (float*)mallocCheck(r->steps * sizeof(float));
    freadCheck(r->step_loss, sizeof(float), r->steps, fp, path);
    freadCheck(r->step_norm, sizeof(float), r->steps, fp, path);
    fclose(fp);
}

static inline void reference_free(Reference* r) {
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) { free(r->grads[t]); }
    free(r->x); free(r->y); free(r->logits); free(r->step_loss); free(r->step_norm);
}

// ----------------------------------------------------------------------------
// checks: one line each; the counts make the final "N passed, M failed"

typedef struct { float atol, rtol; } Tolerance;

static int g_failures = 0, g_checks = 0;

static inline void count_check(int ok) { g_checks++; if (!ok) { g_failures++; } }

// Compares a (rows, cols) row-major tensor, prints one line (the worst element and both values),
// returns 1 if all elements are within tolerance. The atol part scales with the rms of each
// element's own row of ref; rows == 1 is the whole tensor's rms (check_tensor). The line gives the
// whole tensor's rms and max |err| / rms either way, and, per row, the largest |err| / row rms.
static inline int check_tensor_rows(const char* name, const float* got, const float* ref, size_t rows, size_t cols,
                                    Tolerance tol) {
    size_t n = rows * cols;
    if (n == 0) { return 1; }
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) { sq += (double)ref[i] * ref[i]; }
    float rms = (float)sqrt(sq / n);
    size_t worst = 0, bad = 0;
    float worst_excess = -INFINITY, max_err = 0.0f, worst_row_rms = rms, max_row_ratio = 0.0f;
    for (size_t r = 0; r < rows; r++) {
        const float* g = got + r * cols;
        const float* e = ref + r * cols;
        float row_rms = rms;
        if (rows > 1) {
            double row_sq = 0.0;
            for (size_t j = 0; j < cols; j++) { row_sq += (double)e[j] * e[j]; }
            row_rms = (float)sqrt(row_sq / cols);
        }
        for (size_t j = 0; j < cols; j++) {
            float err = fabsf(g[j] - e[j]);
            float bound = tol.atol * row_rms + tol.rtol * fabsf(e[j]);
            float excess = err - bound;
            if (!(excess <= 0.0f)) { bad++; } // NaN counts as bad
            // the worst element: the largest excess over the whole tensor's tolerance; per row,
            // where tolerances differ by orders of magnitude, the largest err / tolerance
            if (rows > 1) { excess = bound > 0.0f ? err / bound : (err > 0.0f ? INFINITY : 0.0f); }
            if (!(excess <= worst_excess)) { worst_excess = excess; worst = r * cols + j; worst_row_rms = row_rms; }
            if (err > max_err) { max_err = err; }
            // an all-zero reference row must come back exactly zero (its tolerance is 0)
            float ratio = row_rms > 0.0f ? err / row_rms : (err > 0.0f ? INFINITY : 0.0f);
            if (!(ratio <= max_row_ratio)) { max_row_ratio = ratio; }
        }
    }
    int ok = bad == 0;
    count_check(ok);
    if (rows == 1) {
        printf("%s %-9s rms %.3e, max |err| %.3e = %.1e rms; worst at %zu: got %.9g ref %.9g%s\n",
               ok ? "OK  " : "FAIL", name, rms, max_err, max_err / rms, worst, got[worst], ref[worst],
               ok ? "" : "  <-- out of tolerance");
    } else {
        printf("%s %-9s rms %.3e, max |err| %.3e = %.1e rms; per row: max |err| = %.1e row rms; worst at %zu "
               "(row %zu, row rms %.3e): got %.9g ref %.9g%s\n",
               ok ? "OK  " : "FAIL", name, rms, max_err, max_err / rms, max_row_ratio, worst, worst / cols,
               worst_row_rms, got[worst], ref[worst], ok ? "" : "  <-- out of tolerance");
    }
    if (!ok) { printf("     %zu of %zu elements out of tolerance\n", bad, n); }
    return ok;
}

// Compares n elements against the whole tensor's rms, as above.
static inline int check_tensor(const char* name, const float* got, const float* ref, size_t n, Tolerance tol) {
    return check_tensor_rows(name, got, ref, 1, n, tol);
}

static inline void check_scalar(const char* what, float got, float ref, float rtol) {
    float err = fabsf(got - ref);
    int ok = err <= rtol * fabsf(ref);
    count_check(ok);
    printf("%s %s: got %.7f ref %.7f (rel err %.2e, rtol %.0e)\n", ok ? "OK  " : "FAIL", what, got, ref, err / fabsf(ref), rtol);
}

#endif // DEV_TEST_REFERENCE_H
