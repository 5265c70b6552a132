/*
openai_logits.c: the CPU trainer's forward on a model file, for dev/test/test_openai_weights.sh.
Loads the fp32 model file with the trainer's own loader (llmc/model_file.h, via train_gpt2.c),
runs train_gpt2.c's forward on one batch of tokens, and writes the logits of the real vocabulary
(B*T rows of V floats, little-endian fp32, the padded columns dropped) to OUT. It prints the
largest |logit| of the padded columns V..Vp-1, which must be 0: wte's padded rows are zero.

    gcc -O2 -fopenmp -I. dev/test/openai_logits.c -o openai_logits -lm
    ./openai_logits MODEL.bin OUT.f32 B T token0 token1 ... (B*T tokens)
*/
#define TESTING
#include "train_gpt2.c"

int main(int argc, char** argv) {
    (void)grads_finish_reduction; // train_gpt2.c's, unused by a forward-only driver
    if (argc < 5) { fail("usage: %s MODEL.bin OUT.f32 B T token0 ... token(B*T-1)", argv[0]); }
    const char* model_path = argv[1];
    const char* out_path = argv[2];
    int B = atoi(argv[3]), T = atoi(argv[4]);
    if (B <= 0 || T <= 0 || argc != 5 + B * T) { fail("expected B*T = %d tokens after B and T, got %d", B * T, argc - 5); }
    int* tokens = (int*)mallocCheck((size_t)B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) { tokens[i] = atoi(argv[5 + i]); }

    Comm comm;
    comm_init(&comm, &argc, &argv);
    GPT2 model;
    gpt2_build_from_checkpoint(&model, &comm, model_path, 0);
    int V = model.config.vocab_size, Vp = model.config.padded_vocab_size;
    gpt2_forward_only(&model, tokens, NULL, B, T);

    FILE* fp = fopenCheck(out_path, "wb");
    float pad_max = 0.0f;
    for (int bt = 0; bt < B * T; bt++) {
        const float* row = model.acts.logits + (size_t)bt * Vp;
        fwriteCheck(row, sizeof(float), V, fp, out_path);
        for (int i = V; i < Vp; i++) { pad_max = fmaxf(pad_max, fabsf(row[i])); }
    }
    fcloseCheck(fp, out_path);
    printf("L %d NH %d C %d V %d Vp %d maxT %d: wrote %d x %d logits; padded logits max |x| %g\n",
           model.config.num_layers, model.config.num_heads, model.config.channels, V, Vp,
           model.config.max_seq_len, B * T, V, pad_max);
    gpt2_free(&model);
    free(tokens);
    comm_finalize(&comm);
    return 0;
}
