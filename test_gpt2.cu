/*
test_gpt2.cu: checks train_gpt2.cu against the PyTorch reference written by train_gpt2.py (the
same files test_gpt2.c uses). Needs a GPU.

    make test_gpt2cu test_gpt2fp32cu
    ./test_gpt2fp32cu               # fp32 build: tight tolerances
    ./test_gpt2cu                   # bf16 build: per-tensor tolerances (below)
    ./test_gpt2cu gpt2_tiny         # another reference prefix
    ./test_gpt2cu gpt2_tiny 3       # only the first 3 AdamW steps
    ./test_gpt2cu gpt2_tiny 10 2    # the stages of part 6 over 2 steps, not 4 (the ASan run in make test)

1. Loading: the fp32 (v3) and bf16 (v5) files give the same parameters (bf16 build: the v3
   weights rounded to nearest even are the v5 bits).
2. Forward on the reference batch: logits and loss.
3. Backward: all 16 parameter gradients, each against its tolerance; a second backward gives
   the same bits (no atomics); recompute -r 1 and -r 2 give the same bits as -r 0.
4. Ten AdamW steps on the same batch (the reference's hyperparameters): loss and gradient norm.
5. Save a checkpoint after step 10, load it into a fresh model, and run three more steps in
   both: the losses and norms must be bitwise identical.
6. The sharding schedule on one process: stages 1, 2, 3 (each reshard policy, prefetch 0 and 2)
   give stage 0's losses and norms bit for bit over 4 steps (the third argument: fewer; make test's
   ASan run takes 2, its EMU_CHECK run all 4) (with one rank every collective is a
   copy, so this checks the schedule's buffers, events and the per-shard update; several ranks:
   dev/test/test_zero_cuda.sh).
*/
#define TESTING
#include "train_gpt2.cu"

#include "dev/test/reference.h"

#if defined(ENABLE_FP32)
// fp32 throughout, no TF32: the same bounds as the CPU test (which measured < 1e-4 rms on every
// tensor), except the logits: cuBLASLt sums the 768-long dot products in other orders (tiles,
// split-k) than PyTorch's CPU BLAS, so 1e-4 rms instead of 1e-5 (still ~1e4x below a real bug).
// wte and wpe row by row, as in the bf16 build (EMBEDDING ROWS below); measured on gpt2_tiny
// (emulator): within 8.2e-6 (wte) and 1.7e-5 (wpe) of the element's row rms.
static const Tolerance LOGITS_TOL = {1e-4f, 1e-5f};
static const Tolerance GRAD_TOL[NUM_PARAM_TENSORS] = {
    {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f},
    {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f},
    {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f}, {1e-3f, 1e-4f},
};
static const float LOSS_RTOL = 1e-5f;
static const float STEP_LOSS_RTOL = 1e-5f;
// the norm adds 124M squares in another order, from gradients that differ up to ~1e-4 relative
static const float STEP_NORM_RTOL = 1e-4f;
#else
// bf16: parameters, activations and gradients keep 8 significant bits where this build stores
// them. The bounds come from dev/test/bf16_rounding.py, a PyTorch twin of this build's numerics
// (bf16 wherever it stores a tensor, fp32 sums and statistics, fp32 master weights), run against
// the same reference with fp32 and with exact matmul sums:
//     /usr/bin/python3 dev/test/bf16_rounding.py gpt2_124M      (and gpt2_tiny)
// Each tensor's atol is 2x its largest simulated |err| / rms, rounded up to 2 significant digits;
// the rtols are the old ones (room for elements far above the rms; the atol takes no credit from
// them). gpt2_124M sets every bound (12 layers add more roundings than tiny's 2). After each: the
// largest simulated |err| on gpt2_124M (the larger of the two sum orders, which differ by under
// 30% but for qkvb, 0.13 and 0.18, and fcprojb, 4.6e-2 and 6.4e-2), then the emulated CUDA
// build's (test_gpt2cu_emu gpt2_124M), in units of the tensor's rms (wte, wpe: of the element's
// row rms, see EMBEDDING ROWS). The twin rounds what the tensor-core attention rounds (P before
// P.v and dS before dS.k, dS^T.q, to bf16: llmc/attention.cuh); that raised logits, wpe, ln1w,
// ln1b, qkvw, fcprojw and fcprojb's bounds by 4-37% over the fp32 attention's (wte, attprojw,
// ln2w and fcb's fell by 7-13%), and the scalars below. The emulated column was measured with
// the fp32 attention kernels (make test runs test_gpt2cu_emu on gpt2_tiny only). The cuBLASLt
// epilogues (issue 30: GELU from the fc product's unrounded fp32 sum, dfch from fcproj's unrounded
// product, bias gradients by BGRADB; llmc/matmul.cuh) moved six tensors' twin errors (2026-11-28,
// bf16_rounding.py gpt2_124M, 313 s): wte 6.0e-2 -> 6.6e-2, qkvw 0.28 -> 0.293, ln2w 6.7e-2 -> 7.8e-2,
// ln2b 5.1e-2 -> 5.6e-2, fcw 0.15 -> 0.170, fcb 6.0e-2 -> 7.4e-2, so by the 2x rule their atols rose
// (0.12 -> 0.14, 0.55 -> 0.59, 0.14 -> 0.16, 0.11 -> 0.12, 0.31 -> 0.35, 0.13 -> 0.15); the others'
// errors stayed within their bounds' halves and their bounds are kept. The emulated column of
// those six predates the epilogues.
// dev/test/test_bf16_bounds.sh checks that gpt2_tiny's simulated errors stay within half these
// bounds and that broken formulas in the simulation exceed them.
static const Tolerance LOGITS_TOL = {0.15f, 1e-2f};  // 7.1e-2, 6.5e-2
static const Tolerance GRAD_TOL[NUM_PARAM_TENSORS] = {
    {0.14f, 2e-2f},  /* wte      6.6e-2, 5.3e-2 */  {0.13f, 2e-2f},  /* wpe      6.1e-2, 5.0e-2 */
    {0.18f, 5e-2f},  /* ln1w     8.8e-2, 7.8e-2 */  {0.18f, 5e-2f},  /* ln1b     8.8e-2, 8.1e-2 */
    {0.59f, 2e-2f},  /* qkvw     0.293,  0.27   */  {0.36f, 5e-2f},  /* qkvb     0.18,   0.16   */
    {0.28f, 2e-2f},  /* attprojw 0.14,   0.16   */  {0.15f, 5e-2f},  /* attprojb 7.1e-2, 9.4e-2 */
    {0.16f, 5e-2f},  /* ln2w     7.8e-2, 7.9e-2 */  {0.12f, 5e-2f},  /* ln2b     5.6e-2, 5.7e-2 */
    {0.35f, 2e-2f},  /* fcw      0.170,  0.13   */  {0.15f, 5e-2f},  /* fcb      7.4e-2, 6.8e-2 */
    {0.37f, 2e-2f},  /* fcprojw  0.18,   0.16   */  {0.13f, 5e-2f},  /* fcprojb  6.4e-2, 5.4e-2 */
    {0.071f, 5e-2f}, /* lnfw     3.5e-2, 3.5e-2 */  {0.024f, 5e-2f}, /* lnfb     1.2e-2, 1.4e-2 */
};
// EMBEDDING ROWS: wte and wpe are compared row by row (check_tensor_rows: atol times the rms of
// the element's own row of the reference, not of the whole tensor). Row v of dwte is a sum of
// its own: the LM head's column v over the B*T positions plus dout at the positions holding
// token v; row t of dwpe is dout[b][t] summed over b, and rows t >= T are zero. Rows differ in
// size by 10^3, so the tensor's rms is the wrong scale: on gpt2_tiny the 135 rows of the batch's
// tokens have rms 8.8e-3 and the other 50169 rows 3.9e-6, so dwte's rms (4.6e-4) is 1/19 of the
// rms of the rows that matter and a bound of 5% of it asked them for 0.26%, about one bf16
// rounding, while the other rows were not checked at all (any error under 6x their rms passed);
// dwpe's 64 used rows of 1024 put its rms at a quarter of theirs. Measured on gpt2_tiny
// (emulator): |err| up to 1.2 tensor rms in dwte (268 elements over a whole-tensor bound of
// {5e-2, 2e-2}) and 0.10 in dwpe (2 over), but within 3.0e-2 (dwte) and 2.2e-2 (dwpe) of the row
// rms. That is bf16 rounding, not a bug: the encoder backward's output is, bit for bit, the
// correctly rounded exact sum of the bf16 head gradient and dout it reads, the head's within fp32
// summation error of the exact product of its bf16 inputs; dout is 0.5% rms off the fp32 build's,
// and the row sums cancel (the worst element: 19 dout terms whose sum is 1/8 of their magnitudes,
// added to a head part 2.6x the result). The PyTorch twin errs the same: 1.19 and 0.10 tensor
// rms, 281 and 1 elements over, 3.0e-2 and 2.5e-2 of the row rms (rounding only the weights, in
// otherwise exact float64, already puts dwte 0.47 tensor rms off). On gpt2_124M: 5.3e-2 and 5.0e-2
// of the row rms (emulator), 6.5e-2 and 5.7e-2 (twin).
// Broken code still fails (mutants on gpt2_tiny, largest error in row rms): the batch's last
// position dropped (1.4), one of a token's 19 occurrences dropped (0.22), an occurrence read
// from the neighbouring position (3.4), a batch row missing from dwpe (2.1), dwpe's rows shifted
// by one (5.6), the encoder overwriting the head's part of dwte instead of adding to it (3.2),
// the head's part missing one position (2.8) or 10000 vocabulary rows (2.9: 615257 elements
// out, where the whole-tensor bound saw none of them); the 0.22 one, re-run with these bounds,
// still fails.
// Broken kernels, the same bug in the emulated build (a sed-edited copy) and in the twin (--bug),
// which agree within a few percent: on gpt2_tiny these bounds catch layernorm's dinp without the row mean
// of dnorm (12 tensors out, qkvw and fcw 1.1 rms) and the dropped occurrence above, but not dK
// without its 1/sqrt(hs) (qkvw 0.36 rms against 0.53), the softmax backward without D, GELU
// without its cubic term (or only its derivative without it), or the bias gradients without the
// last position: tiny's bf16 errors are 2-9x below 124M's, which set the bounds. The fp32 build
// sees them all (in exact arithmetic they move tiny's gradients by 1e-2 to 0.36 rms; emulated,
// the smallest, GELU's derivative, puts 11 tensors over the fp32 bounds). On
// gpt2_124M the twin with each of these bugs exceeds the bounds (largest share of a bound: dK 44,
// D 14, layernorm 6.6, GELU 1.6 either way, bias 1.4) but for the dropped occurrence (0.83).
// The scalars: 3x the largest simulated relative error (each is one draw, and draws differ: the
// step-0 loss was off by 2.6e-5 with fp32 sums and 1.9e-5 with exact ones), rounded up to 2
// significant digits.
static const float LOSS_RTOL = 7.8e-5f;      // the loss, and step 0's: 2.6e-5
// 5.5e-3 at step 3, where the reference's gradient norm jumps to 115; the other steps 1.2e-3 at most
static const float STEP_LOSS_RTOL = 1.7e-2f;
static const float STEP_NORM_RTOL = 3.6e-2f; // 1.2e-2 (steps 5 and 9)
#endif

static void check_bitwise(const char* what, const void* a, const void* b, size_t bytes) {
    int ok = memcmp(a, b, bytes) == 0;
    count_check(ok);
    printf("%s %s\n", ok ? "OK  " : "FAIL", what);
}

// A device slab of floatX to the host, as floats.
static float* download(const floatX* d, size_t n) {
    floatX* tmp = (floatX*)mallocCheck(n * sizeof(floatX));
    cudaCheck(cudaMemcpy(tmp, d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    float* out = (float*)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { out[i] = to_float(tmp[i]); }
    free(tmp);
    return out;
}

// One forward + backward on (x, y) into zeroed grads; returns the grads slab on the host.
static float* grads_of_batch(GPT2* model, const int* x, const int* y, int B, int T, float* loss) {
    gpt2_zero_grad(model);
    gpt2_forward(model, x, y, B, T, 1.0f);
    gpt2_backward(model, 1);
    *loss = gpt2_mean_loss(model);
    grads_finish_reduction(model);
    return download((const floatX*)model->grads, model->plan.layout.total); // floatX: the default -zd
}

// One AdamW step of the reference's kind on (x, y); returns the loss, *norm the norm.
static float reference_step(GPT2* model, const int* x, const int* y, int B, int T, int t, float* norm) {
    gpt2_zero_grad(model);
    gpt2_forward(model, x, y, B, T, 1.0f);
    gpt2_backward(model, 1);
    float loss = gpt2_mean_loss(model);
    grads_finish_reduction(model);
    *norm = gpt2_update(model, REF_LR, REF_BETA1, REF_BETA2, REF_EPS, REF_WEIGHT_DECAY, REF_GRAD_CLIP, t);
    return loss;
}

static const ZeroOptions STAGE0 = {0, 1, RESHARD_DEFAULT, 0, 0, 1, 0, 0};

// 1. the fp32 and bf16 files: same parameters after rounding to floatX (fp32 build: the bf16
// file is the fp32 weights rounded, so only its own round trip is exact; compare in bf16)
static void check_model_files(GPT2* model, Comm* comm, const char* bf16_path) {
    const ParamLayout* lay = &model->plan.layout;
    GPT2 other;
    gpt2_build_from_checkpoint(&other, comm, bf16_path, STAGE0, 0);
    float* a = download(model->params, lay->total);
    float* b = download(other.params, lay->total);
    size_t mismatches = 0;
    for (size_t i = 0; i < lay->total; i++) {
        // both sides as bf16 bits: in the fp32 build a holds the fp32 weights
        if (__float2bfloat16_rn(a[i]) != __float2bfloat16_rn(b[i])) { mismatches++; }
    }
    count_check(mismatches == 0);
    printf("%s v3 and v5 model files give the same bf16 parameters (%zu mismatches)\n", mismatches == 0 ? "OK  " : "FAIL", mismatches);
    free(a); free(b);
    gpt2_free(&other);
}

// 5. checkpoint after the steps, resume in a fresh model, three more steps in both
static void check_resume(GPT2* model, Comm* comm, const int* x, const int* y, int B, int T, int nsteps) {
    char dir[] = "/tmp/test_gpt2cu_XXXXXX";
    if (mkdtemp(dir) == NULL) { fail("cannot make a temporary folder: %s", strerror(errno)); }
    DataLoader position; // only its position fields go into the state file
    memset(&position, 0, sizeof(position));
    position.B = B;
    position.T = T;
    Rng rng;
    rng_init(&rng, 1);
    save_checkpoint(model, &position, &rng, nsteps, dir, 0);
    GPT2 resumed;
    gpt2_init(&resumed, &model->config, comm, STAGE0, 0);
    int header[HEADER_INTS];
    load_checkpoint_state(&resumed, dir, nsteps, header);
    const int more = 3;
    float losses_a[3], losses_b[3], norms_a[3], norms_b[3];
    for (int k = 0; k < more; k++) {
        losses_a[k] = reference_step(model, x, y, B, T, nsteps + k + 1, &norms_a[k]);
        losses_b[k] = reference_step(&resumed, x, y, B, T, nsteps + k + 1, &norms_b[k]);
        printf("     step %d: losses %.9g / %.9g, norms %.9g / %.9g (running / resumed)\n", nsteps + k,
               losses_a[k], losses_b[k], norms_a[k], norms_b[k]);
    }
    check_bitwise("save -> reload -> continue: the same losses, bit for bit", losses_a, losses_b, sizeof(losses_a));
    check_bitwise("save -> reload -> continue: the same gradient norms, bit for bit", norms_a, norms_b, sizeof(norms_a));
    gpt2_free(&resumed);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) { printf("note: could not remove %s\n", dir); }
}

// 6. every stage on one process, with and without the optimizer offload (-zo 1), gives stage 0's bits
static const int STAGE_STEPS = 4;
static void check_stages(Comm* comm, const char* model_path, const int* x, const int* y, int B, int T, int steps) {
    float loss0[STAGE_STEPS], norm0[STAGE_STEPS];
    GPT2 base;
    gpt2_build_from_checkpoint(&base, comm, model_path, STAGE0, 0);
    for (int k = 0; k < steps; k++) { loss0[k] = reference_step(&base, x, y, B, T, k + 1, &norm0[k]); }
    gpt2_free(&base);
    const ZeroOptions variants[] = {
        {1, 1, RESHARD_DEFAULT, 0, 0, 1, 0, 0}, {2, 1, RESHARD_DEFAULT, 0, 0, 1, 0, 0}, {3, 1, RESHARD_DEFAULT, 1, 0, 1, 0, 0},
        {3, 1, RESHARD_DEFAULT, 0, 0, 1, 0, 0}, {3, 1, RESHARD_ALWAYS, 2, 0, 1, 0, 0}, {3, 1, RESHARD_NEVER, 0, 0, 1, 0, 0},
        {0, 1, RESHARD_DEFAULT, 0, 0, 2, 0, 0}, {3, 1, RESHARD_DEFAULT, 1, 0, 2, 0, 0}, // two blocks per unit (-zu 2)
        // -zo 1: the host's AdamW on the offloaded state (llmc/adamw.cuh's twin of the kernel)
        {1, 1, RESHARD_DEFAULT, 0, 0, 1, 1, 0}, {2, 1, RESHARD_DEFAULT, 0, 0, 1, 1, 0}, {3, 1, RESHARD_DEFAULT, 1, 0, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        GPT2 z;
        gpt2_build_from_checkpoint(&z, comm, model_path, variants[i], 0);
        float lz[STAGE_STEPS], nz[STAGE_STEPS];
        for (int k = 0; k < steps; k++) { lz[k] = reference_step(&z, x, y, B, T, k + 1, &nz[k]); }
        char what[160];
        snprintf(what, sizeof(what), "one process, stage %d (reshard %s, prefetch %d, %d blocks per unit, offload %d): stage 0's losses and norms over %d steps, bit for bit",
                 variants[i].stage, RESHARD_NAMES[variants[i].reshard], variants[i].prefetch, variants[i].unit_blocks, variants[i].offload, steps);
        int same = memcmp(lz, loss0, steps * sizeof(float)) == 0 && memcmp(nz, norm0, steps * sizeof(float)) == 0;
        count_check(same);
        printf("%s %s\n", same ? "OK  " : "FAIL", what);
        if (!same) { for (int k = 0; k < steps; k++) { printf("     step %d: %.9g / %.9g, norms %.9g / %.9g\n", k, lz[k], loss0[k], nz[k], norm0[k]); } }
        gpt2_free(&z);
    }
}

int main(int argc, char** argv) {
    const char* prefix = argc > 1 ? argv[1] : "gpt2_124M";
    char model_path[512], bf16_path[512];
    snprintf(model_path, sizeof(model_path), "%s.bin", prefix);
    snprintf(bf16_path, sizeof(bf16_path), "%s_bf16.bin", prefix);
    cudaCheck(cudaSetDevice(0));
    Comm comm; // one process: the collectives are copies
    comm_bootstrap(&comm, &argc, &argv);
    ProcessFlags one = {-1, -1, NULL, NULL, NULL};
    comm_init(&comm, &one);

    GPT2 model;
    gpt2_build_from_checkpoint(&model, &comm, model_path, STAGE0, 0);
    const GPT2Config* c = &model.config;
    const ParamLayout* lay = &model.plan.layout;
    int V = c->vocab_size, Vp = c->padded_vocab_size;
    Reference ref;
    reference_load(&ref, prefix, c, lay->num_parameters);
    int B = ref.B, T = ref.T, nsteps = reference_steps_arg(argc, argv, ref.steps);
    int stage_steps = reference_int_arg(argc, argv, 3, "stage steps", STAGE_STEPS, STAGE_STEPS, "");
    size_t BT = (size_t)B * T;
    const int* x = ref.x;
    const int* y = ref.y;
    printf("[%s, %s build] B %d, T %d, L %d, C %d, %zu parameters\n", prefix, PRECISION_NAME, B, T, c->num_layers,
           c->channels, lay->num_parameters);

    check_model_files(&model, &comm, bf16_path);

    // 2. forward
    float loss;
    gpt2_forward(&model, x, y, B, T, 0.0f);
    loss = gpt2_mean_loss(&model);
    float* logits_padded = download(model.acts.logits, BT * Vp);
    float* logits = (float*)mallocCheck(BT * V * sizeof(float)); // drop the padded columns
    for (size_t bt = 0; bt < BT; bt++) { memcpy(logits + bt * V, logits_padded + bt * Vp, V * sizeof(float)); }
    check_tensor("logits", logits, ref.logits, BT * V, LOGITS_TOL);
    check_scalar("loss", loss, ref.loss, LOSS_RTOL);
    free(logits_padded); free(logits);

    // 3. backward: each tensor from the unit-major slab into file order, then compared
    float* grads = grads_of_batch(&model, x, y, B, T, &loss);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = tensor_numel(c, t);
        float* got = (float*)mallocCheck(n * tensor_copies(c, t) * sizeof(float));
        for (int l = 0; l < tensor_copies(c, t); l++) { memcpy(got + l * n, grads + tensor_offset(lay, c, t, l), n * sizeof(float)); }
        if (t == WTE || t == WPE) { // row by row: see EMBEDDING ROWS above
            check_tensor_rows(TENSOR_INFO[t].name, got, ref.grads[t], n / c->channels, c->channels, GRAD_TOL[t]);
        } else {
            check_tensor(TENSOR_INFO[t].name, got, ref.grads[t], n * tensor_copies(c, t), GRAD_TOL[t]);
        }
        free(got);
    }
    float* again = grads_of_batch(&model, x, y, B, T, &loss);
    check_bitwise("a second backward gives the same gradient bits (deterministic)", grads, again, lay->total * sizeof(float));
    free(again);
    for (int r = 1; r <= 2; r++) {
        GPT2 rec;
        gpt2_build_from_checkpoint(&rec, &comm, model_path, STAGE0, r);
        float* g = grads_of_batch(&rec, x, y, B, T, &loss);
        char what[96];
        snprintf(what, sizeof(what), "recompute -r %d gives the gradient bits of -r 0", r);
        check_bitwise(what, grads, g, lay->total * sizeof(float));
        free(g);
        gpt2_free(&rec);
    }
    free(grads);

    // 4. the AdamW steps, on the same batch each step as the reference
    for (int step = 0; step < nsteps; step++) {
        float norm;
        loss = reference_step(&model, x, y, B, T, step + 1, &norm);
        char what[64];
        snprintf(what, sizeof(what), "step %d loss", step);
        check_scalar(what, loss, ref.step_loss[step], step == 0 ? LOSS_RTOL : STEP_LOSS_RTOL);
        snprintf(what, sizeof(what), "step %d grad norm", step);
        check_scalar(what, norm, ref.step_norm[step], STEP_NORM_RTOL);
    }

    check_resume(&model, &comm, x, y, B, T, nsteps);
    check_stages(&comm, model_path, x, y, B, T, stage_steps);

    printf("test_gpt2cu %s (%s): %d passed, %d failed\n", prefix, PRECISION_NAME, g_checks - g_failures, g_failures);
    reference_free(&ref);
    gpt2_free(&model);
    comm_finalize(&comm);
    return g_failures == 0 ? 0 : 1;
}
