/*
test_gpt2.c: checks train_gpt2.c against the PyTorch reference written by train_gpt2.py.

    /usr/bin/python3 train_gpt2.py     # writes gpt2_124M.bin, _debug_state.bin, _losses.bin
    make test_gpt2 && ./test_gpt2      # or ./test_gpt2 gpt2_tiny for another prefix
    ./test_gpt2 gpt2_tiny 3            # only the first 3 AdamW steps (the sanitizer run)

1. Forward on the reference batch: logits and loss.
2. Backward: all 16 parameter gradients, each against its own tolerance; recompute -r 1 and
   -r 2 (a second model each) give -r 0's gradient bits.
3. Ten AdamW steps on the same batch (the reference's hyperparameters, below): the loss and the
   gradient norm before clipping at every step.
Tolerances are atol*rms + rtol*|ref| per element (dev/test/reference.h explains the form). Both
sides compute in fp32 but sum in different orders (PyTorch's BLAS vs our blocked GEMM).
*/
#define TESTING
#include "train_gpt2.c"

#include "dev/test/reference.h"

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

int main(int argc, char** argv) {
    const char* prefix = argc > 1 ? argv[1] : "gpt2_124M";
    char model_path[512];
    snprintf(model_path, sizeof(model_path), "%s.bin", prefix);

    Comm comm;
    comm_init(&comm, &argc, &argv); // one process: stage 0, no communication
    GPT2 model;
    gpt2_build_from_checkpoint(&model, &comm, model_path, 0);
    const GPT2Config* c = &model.config;
    const ParamLayout* lay = &model.plan.layout;
    int V = c->vocab_size, Vp = c->padded_vocab_size;
    Reference ref;
    reference_load(&ref, prefix, c, lay->num_parameters);
    int B = ref.B, T = ref.T, nsteps = reference_steps_arg(argc, argv, ref.steps);
    size_t BT = (size_t)B * T;
    const int* x = ref.x;
    const int* y = ref.y;

    printf("[%s] B %d, T %d, L %d, C %d, %zu parameters\n", prefix, B, T, c->num_layers, c->channels,
           lay->num_parameters);

    // 1. forward
    gpt2_forward(&model, x, y, B, T, 1.0f);
    float* logits = (float*)mallocCheck(BT * V * sizeof(float)); // drop the padded columns
    for (size_t bt = 0; bt < BT; bt++) { memcpy(logits + bt * V, model.acts.logits + bt * Vp, V * sizeof(float)); }
    check_tensor("logits", logits, ref.logits, BT * V, LOGITS_TOL);
    check_scalar("loss", gpt2_mean_loss(&model), ref.loss, LOSS_RTOL);

    // 2. backward: gather each tensor from the unit-major slab into file order, then compare
    gpt2_zero_grad(&model);
    gpt2_backward(&model, 1);
    grads_finish_reduction(&model);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = tensor_numel(c, t);
        float* got = (float*)mallocCheck(n * tensor_copies(c, t) * sizeof(float));
        for (int l = 0; l < tensor_copies(c, t); l++) {
            memcpy(got + l * n, model.grads + tensor_offset(lay, c, t, l), n * sizeof(float));
        }
        check_tensor(TENSOR_INFO[t].name, got, ref.grads[t], n * tensor_copies(c, t), GRAD_TOL);
        free(got);
    }
    // recompute: the same forward and backward on a model that keeps fewer activations
    for (int r = 1; r <= 2; r++) {
        GPT2 rec;
        gpt2_build_from_checkpoint(&rec, &comm, model_path, r);
        gpt2_forward(&rec, x, y, B, T, 1.0f);
        gpt2_zero_grad(&rec);
        gpt2_backward(&rec, 1);
        grads_finish_reduction(&rec);
        int ok = memcmp(rec.grads, model.grads, lay->total * sizeof(float)) == 0 &&
                 gpt2_mean_loss(&rec) == gpt2_mean_loss(&model);
        count_check(ok);
        printf("%s recompute -r %d gives the loss and gradient bits of -r 0 (activations %zu bytes, -r 0: %zu)\n",
               ok ? "OK  " : "FAIL", r, rec.mem.activations, model.mem.activations);
        gpt2_free(&rec);
    }

    // 3. the AdamW steps, on the same batch each step as the reference
    for (int step = 0; step < nsteps; step++) {
        gpt2_forward(&model, x, y, B, T, 1.0f);
        gpt2_zero_grad(&model);
        gpt2_backward(&model, 1);
        grads_finish_reduction(&model);
        float loss = gpt2_mean_loss(&model);
        float norm = gpt2_update(&model, REF_LR, REF_BETA1, REF_BETA2, REF_EPS, REF_WEIGHT_DECAY, REF_GRAD_CLIP, step + 1);
        char what[64];
        snprintf(what, sizeof(what), "step %d loss", step);
        check_scalar(what, loss, ref.step_loss[step], step == 0 ? LOSS_RTOL : STEP_LOSS_RTOL);
        snprintf(what, sizeof(what), "step %d grad norm", step);
        check_scalar(what, norm, ref.step_norm[step], STEP_NORM_RTOL);
    }

    printf("test_gpt2 %s: %d passed, %d failed\n", prefix, g_checks - g_failures, g_failures);
    free(logits);
    reference_free(&ref);
    gpt2_free(&model);
    comm_finalize(&comm);
    return g_failures == 0 ? 0 : 1;
}
