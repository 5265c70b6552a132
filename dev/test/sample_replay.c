/*
sample_replay: checks a sampled token sequence against the CPU trainer's model (train_gpt2.c), in
one forward where the trainers run one per token. Token t of a sample is drawn from the
distribution given the last min(t, W) tokens before it (W: the trainer's -t; both trainers'
gpt2_sample), with the t-th uniform of the sampling generator (seed -rs + 1). A causal model's
row t-1 of one forward over tokens 0..W-1 is that distribution for every t <= W, so one forward
checks the first W tokens; each token after W needs its own forward over its window.

    dev/test/sample_replay MODEL SEED W IDS_FILE

MODEL: a model file or dN (a fresh model of depth N, initialized from SEED as the trainers do);
IDS_FILE: the generated token ids, whitespace-separated, after the <|endoftext|> that starts
every sample (a trainer without gpt2_tokenizer.bin prints them as <id>). Prints how many tokens
the CPU model draws the same way and how far u was from the others' intervals of the CPU's cdf,
and exits 0 when every token is drawn the same way or within MISS_TOLERANCE of it.
*/
#define TESTING
#include "../../train_gpt2.c"

// A token may differ from the CPU's draw where u falls within rounding of the boundary between
// two tokens' intervals of the cdf: the two trainers' fp32 logits differ in the last bits
// (other summation orders), and the random models' near-uniform distributions put a boundary
// every ~1/V = 2e-5. The CPU's cdf must then put u within this of the sample's token's interval.
// Measured largest misses (emulator, 300 tokens, dev/test/test_sample.sh): fp32 3.0e-7 (gpt2_tiny),
// 1.2e-7 (d2), 0 (d12), so 10x room; the bf16 build's 2.3e-5 and 1.65e-5, and a decoder that
// gives every position wpe row 0 misses by up to 1.8e-3: those fail.
static const double MISS_TOLERANCE = 3e-6;

int main(int argc, char** argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s MODEL SEED W IDS_FILE\n", argv[0]); return 2; }
    Comm comm;
    int one_argc = 1;
    comm_init(&comm, &one_argc, &argv); // one process: stage 0, no communication
    TrainArgs args = train_args_defaults();
    args.model = argv[1];
    args.seed = atoi(argv[2]);
    int W = atoi(argv[3]);
    if (W < 1) { fail("window W must be >= 1, got '%s'", argv[3]); }
    args.T = W;
    FILE* ids = fopenCheck(argv[4], "r");
    int cap = 1024, n = 0; // tokens[0] = <|endoftext|>, then the n generated ones
    int* tokens = (int*)mallocCheck((size_t)cap * sizeof(int));
    tokens[0] = GPT2_EOT;
    int id;
    while (fscanf(ids, "%d", &id) == 1) {
        if (n + 2 > cap) { cap *= 2; int* grown = (int*)realloc(tokens, (size_t)cap * sizeof(int));
            if (grown == NULL) { fail("out of memory for %d token ids", cap); }
            tokens = grown; }
        tokens[++n] = id;
    }
    fclose(ids);
    if (n == 0) { fail("'%s' holds no token ids", argv[4]); }

    GPT2Config config;
    FILE* fp = train_model_config(&args, &config, NULL);
    for (int t = 1; t <= n; t++) {
        if (tokens[t] < 0 || tokens[t] >= config.vocab_size) { fail("token %d (%d) is outside the vocabulary", t, tokens[t]); }
    }
    ZeroOptions opt = {0, 1, RESHARD_DEFAULT, 0, 0, 1, 0, 0}; // stage 0 on one process (gpt2_build_from_checkpoint's)
    GPT2 model;
    gpt2_init(&model, &config, &comm, opt, 0);
    float* full = train_initial_params(&args, &config, &model.plan.layout, fp, MODEL_VERSION_FP32);
    gpt2_set_params(&model, full);
    free(full);

    Rng rng;
    rng_init(&rng, (uint64_t)args.seed + 1); // the trainers' sampling generator
    int Vp = config.padded_vocab_size, V = config.vocab_size, same = 0, outside = 0;
    double worst = 0.0;
    int head = n < W ? n : W; // tokens 1..head come from one forward over tokens 0..head-1
    gpt2_forward_only(&model, tokens, NULL, 1, head);
    float* probs_head = (float*)mallocCheck((size_t)head * Vp * sizeof(float));
    memcpy(probs_head, model.acts.probs, (size_t)head * Vp * sizeof(float));
    for (int t = 1; t <= n; t++) {
        const float* probs = probs_head + (size_t)(t - 1) * Vp;
        if (t > W) { // the window has slid: its own forward, the last row
            gpt2_forward_only(&model, tokens + t - W, NULL, 1, W);
            probs = model.acts.probs + (size_t)(W - 1) * Vp;
        }
        float u = rng_uniform(&rng);
        int want = sample_index(probs, V, u), k = tokens[t];
        if (want == k) { same++; continue; }
        // k's interval [lo, hi) of the CPU's cdf, summed as sample_index sums it: how far u is from it
        float lo = 0.0f;
        for (int i = 0; i < k; i++) { lo += probs[i]; }
        float hi = lo + probs[k];
        double miss = u < lo ? (double)lo - u : (double)u - hi;
        if (miss > worst) { worst = miss; }
        if (miss > MISS_TOLERANCE) {
            if (outside++ == 0) { printf("token %d: the sample has %d, the CPU model draws %d (u %.9f, %d's interval [%.9f, %.9f))\n", t, k, want, u, k, lo, hi); }
        }
    }
    printf("sample_replay %s (window %d): %d of %d tokens drawn as the CPU model draws them, %d more within %.0e of "
           "their interval, %d not (largest miss %.2e)\n", argv[1], W, same, n, n - same - outside, MISS_TOLERANCE, outside, worst);
    free(probs_head);
    free(tokens);
    gpt2_free(&model);
    comm_finalize(&comm);
    return outside == 0 ? 0 : 1;
}
