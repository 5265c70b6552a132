/*
test_gpt2.c: checks train_gpt2.c against the PyTorch reference written by train_gpt2.py.

    /usr/bin/python3 train_gpt2.py     # writes gpt2_124M.bin, _debug_state.bin, _losses.bin
    make test_gpt2 && ./test_gpt2      # or ./test_gpt2 gpt2_tiny for another prefix

1. Forward on the reference batch: logits and loss.
2. Backward: all 16 parameter gradients, each against its own tolerance.
3. Ten AdamW steps on the same batch (the reference's hyperparameters, below): the loss and the
   gradient norm before clipping at every step.
Tolerances are atol + rtol*|ref| per element. Both sides compute in fp32 but sum in different
orders (PyTorch's BLAS vs our blocked GEMM), so elements differ by a few ulps of the largest
partial sums that fed them; the atol of each tensor is set from that scale (see TOLERANCES).
*/
#define TESTING
#include "train_gpt2.c"

#define DEBUG_MAGIC 20240327
#define LOSSES_MAGIC 20240330

// The optimizer settings of train_gpt2.py's reference steps (its constants of the same names).
#define REF_LR 1e-4f
#define REF_BETA1 0.9f
#define REF_BETA2 0.999f
#define REF_EPS 1e-8f
#define REF_WEIGHT_DECAY 0.1f
#define REF_GRAD_CLIP 1.0f

// |got - ref| <= atol*rms(ref) + rtol*|ref| for every element, where rms(ref) is the tensor's
// root mean square. Both sides compute in fp32 but sum in different orders (PyTorch's BLAS vs our
// blocked GEMM), so an element's error is a few ulps of the partial sums that fed it, and those
// are on the scale of the tensor's typical element, not of the element itself (cancellation in
// sums over B*T positions leaves some gradient elements far smaller than their terms). Hence an
// absolute part relative to the tensor's rms, plus a relative part for its largest elements.
typedef struct { float atol, rtol; } Tolerance;

// Measured on GPT-2 124M and the tiny config (B=4, T=64): the worst error is below 1e-4 rms for
// every tensor; the bound leaves a factor of ~10 for other machines and thread counts while a
// wrong formula (errors of order 1 rms) still fails by orders of magnitude.
static const Tolerance LOGITS_TOL = {1e-5f, 1e-5f};
static const Tolerance GRAD_TOL = {1e-3f, 1e-4f};
// The loss is a mean of B*T logs: the goal is 1e-5 relative in fp32.
static const float LOSS_RTOL = 1e-5f;
// The AdamW steps run on the same batch as the reference, so the runs stay within fp32 noise of
// each other; the gradient norm sums squares over all parameters in a different order.
static const float STEP_LOSS_RTOL = 1e-5f;
static const float STEP_NORM_RTOL = 1e-5f;

static int g_failures = 0, g_checks = 0;

// Compares n elements, prints one line, returns 1 if all are within tolerance.
static int check_tensor(const char* name, const float* got, const float* ref, size_t n, Tolerance tol) {
    if (n == 0) { return 1; }
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) { sq += (double)ref[i] * ref[i]; }
    float rms = (float)sqrt(sq / n);
    size_t worst = 0, bad = 0;
    float worst_excess = -INFINITY, max_err = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float err = fabsf(got[i] - ref[i]);
        float excess = err - (tol.atol * rms + tol.rtol * fabsf(ref[i]));
        if (!(excess <= 0.0f)) { bad++; } // NaN counts as bad
        if (!(excess <= worst_excess)) { worst_excess = excess; worst = i; }
        if (err > max_err) { max_err = err; }
    }
    g_checks++;
    int ok = bad == 0;
    printf("%s %-9s rms %.3e, max |err| %.3e = %.1e rms; worst at %zu: got %.9g ref %.9g%s\n",
           ok ? "OK  " : "FAIL", name, rms, max_err, max_err / rms, worst, got[worst], ref[worst],
           ok ? "" : "  <-- out of tolerance");
    if (!ok) { g_failures++; printf("     %zu of %zu elements out of tolerance\n", bad, n); }
    return ok;
}

static void check_scalar(const char* what, float got, float ref, float rtol) {
    float err = fabsf(got - ref);
    int ok = err <= rtol * fabsf(ref);
    g_checks++;
    if (!ok) { g_failures++; }
    printf("%s %s: got %.7f ref %.7f (rel err %.2e, rtol %.0e)\n", ok ? "OK  " : "FAIL", what, got, ref,
           err / fabsf(ref), rtol);
}

int main(int argc, char** argv) {
    const char* prefix = argc > 1 ? argv[1] : "gpt2_124M";
    char model_path[512], debug_path[512], losses_path[512];
    snprintf(model_path, sizeof(model_path), "%s.bin", prefix);
    snprintf(debug_path, sizeof(debug_path), "%s_debug_state.bin", prefix);
    snprintf(losses_path, sizeof(losses_path), "%s_losses.bin", prefix);

    Comm comm;
    comm_init(&comm, &argc, &argv); // one process: stage 0, no communication
    GPT2 model;
    gpt2_build_from_checkpoint(&model, &comm, model_path);
    const GPT2Config* c = &model.config;
    const ParamLayout* lay = &model.plan.layout;
    int V = c->vocab_size, Vp = c->padded_vocab_size;

    // the debug state: x, y, logits, loss and the gradients, in file order
    FILE* fp = fopenCheck(debug_path, "rb");
    int header[HEADER_INTS];
    read_header(fp, header, debug_path, DEBUG_MAGIC, "debug state");
    if (header[1] != 2) { fail("'%s' has version %d, expected 2", debug_path, header[1]); }
    int B = header[2], T = header[3];
    if (B <= 0 || T <= 0 || T > c->max_seq_len) { fail("'%s' has B %d, T %d", debug_path, B, T); }
    size_t BT = (size_t)B * T;
    long expected = (long)(HEADER_INTS * sizeof(int) + 2 * BT * sizeof(int) +
                           (BT * V + 1 + lay->num_parameters) * sizeof(float));
    if (file_size(fp, debug_path) != expected) {
        fail("'%s' is not %ld bytes: it does not belong to '%s'", debug_path, expected, model_path);
    }
    fseekCheck(fp, HEADER_INTS * sizeof(int), SEEK_SET, debug_path);
    int* x = (int*)mallocCheck(BT * sizeof(int));
    int* y = (int*)mallocCheck(BT * sizeof(int));
    float* ref_logits = (float*)mallocCheck(BT * V * sizeof(float));
    float ref_loss;
    freadCheck(x, sizeof(int), BT, fp, debug_path);
    freadCheck(y, sizeof(int), BT, fp, debug_path);
    freadCheck(ref_logits, sizeof(float), BT * V, fp, debug_path);
    freadCheck(&ref_loss, sizeof(float), 1, fp, debug_path);
    float* ref_grads[NUM_PARAM_TENSORS]; // each tensor stacked over its layers, as in the file
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = tensor_numel(c, t) * tensor_copies(c, t);
        ref_grads[t] = (float*)mallocCheck(n * sizeof(float));
        freadCheck(ref_grads[t], sizeof(float), n, fp, debug_path);
    }
    fclose(fp);

    // the reference losses and gradient norms of the AdamW steps
    fp = fopenCheck(losses_path, "rb");
    read_header(fp, header, losses_path, LOSSES_MAGIC, "reference losses");
    int nsteps = header[2];
    if (header[1] != 1 || nsteps <= 0 || nsteps > 1000 || header[3] != B || header[4] != T) {
        fail("'%s': version %d, %d steps, B %d, T %d; expected version 1 and B %d, T %d",
             losses_path, header[1], nsteps, header[3], header[4], B, T);
    }
    float* ref_step_loss = (float*)mallocCheck(nsteps * sizeof(float));
    float* ref_step_norm = (float*)mallocCheck(nsteps * sizeof(float));
    freadCheck(ref_step_loss, sizeof(float), nsteps, fp, losses_path);
    freadCheck(ref_step_norm, sizeof(float), nsteps, fp, losses_path);
    fclose(fp);

    printf("[%s] B %d, T %d, L %d, C %d, %zu parameters\n", prefix, B, T, c->num_layers, c->channels,
           lay->num_parameters);

    // 1. forward
    gpt2_forward(&model, x, y, B, T);
    float* logits = (float*)mallocCheck(BT * V * sizeof(float)); // drop the padded columns
    for (size_t bt = 0; bt < BT; bt++) { memcpy(logits + bt * V, model.acts.logits + bt * Vp, V * sizeof(float)); }
    check_tensor("logits", logits, ref_logits, BT * V, LOGITS_TOL);
    check_scalar("loss", model.mean_loss, ref_loss, LOSS_RTOL);

    // 2. backward: gather each tensor from the unit-major slab into file order, then compare
    gpt2_zero_grad(&model);
    gpt2_backward(&model, B, T, 1.0f, 1);
    grads_finish_reduction(&model);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = tensor_numel(c, t);
        float* got = (float*)mallocCheck(n * tensor_copies(c, t) * sizeof(float));
        for (int l = 0; l < tensor_copies(c, t); l++) {
            memcpy(got + l * n, model.grads + tensor_offset(lay, c, t, l), n * sizeof(float));
        }
        check_tensor(TENSOR_INFO[t].name, got, ref_grads[t], n * tensor_copies(c, t), GRAD_TOL);
        free(got);
    }

    // 3. the AdamW steps, on the same batch each step as the reference
    for (int step = 0; step < nsteps; step++) {
        gpt2_forward(&model, x, y, B, T);
        gpt2_zero_grad(&model);
        gpt2_backward(&model, B, T, 1.0f, 1);
        grads_finish_reduction(&model);
        float loss = model.mean_loss;
        float norm = gpt2_update(&model, REF_LR, REF_BETA1, REF_BETA2, REF_EPS, REF_WEIGHT_DECAY, REF_GRAD_CLIP, step + 1);
        char what[64];
        snprintf(what, sizeof(what), "step %d loss", step);
        check_scalar(what, loss, ref_step_loss[step], step == 0 ? LOSS_RTOL : STEP_LOSS_RTOL);
        snprintf(what, sizeof(what), "step %d grad norm", step);
        check_scalar(what, norm, ref_step_norm[step], STEP_NORM_RTOL);
    }

    printf("test_gpt2 %s: %d passed, %d failed\n", prefix, g_checks - g_failures, g_failures);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) { free(ref_grads[t]); }
    free(x); free(y); free(ref_logits); free(logits); free(ref_step_loss); free(ref_step_norm);
    gpt2_free(&model);
    comm_finalize(&comm);
    return g_failures == 0 ? 0 : 1;
}
