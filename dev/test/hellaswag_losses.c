/*
hellaswag_losses.c: the CPU trainer's HellaSwag scoring of every example, for
dev/test/test_hellaswag.sh to hold against the PyTorch reference (hellaswag_fixture.py reference).
Loads the model with the trainer's loader, reads the eval file with llmc/hellaswag.h, runs
train_gpt2.c's forward on each batch and prints, per example and ending, "i k mean_loss" (the
mean loss over the ending's tokens, as the trainer's -h 1 scores it), then "correct X/Y".

    gcc -O2 -fopenmp -I. dev/test/hellaswag_losses.c -o hellaswag_losses -lm
    ./hellaswag_losses MODEL.bin EVAL.bin B T
*/
#define TESTING
#include "train_gpt2.c"

int main(int argc, char** argv) {
    (void)grads_finish_reduction; // train_gpt2.c's, unused by a forward-only driver
    if (argc != 5) { fail("usage: %s MODEL.bin EVAL.bin B T", argv[0]); }
    int B = atoi(argv[3]), T = atoi(argv[4]);
    Comm comm;
    comm_init(&comm, &argc, &argv);
    GPT2 model;
    gpt2_build_from_checkpoint(&model, &comm, argv[1], 0);
    EvalLoader ev;
    evalloader_init(&ev, argv[2], B, T, 0, 1, model.config.vocab_size);
    double* mean = (double*)mallocCheck((size_t)ev.per_batch * EVAL_ENDINGS * sizeof(double));
    int* choice = (int*)mallocCheck((size_t)ev.per_batch * sizeof(int));
    int correct = 0, example = 0;
    for (int i = 0; i < ev.num_batches; i++) {
        evalloader_next_batch(&ev);
        gpt2_forward_only(&model, ev.inputs, ev.targets, B, T);
        correct += evalloader_score(&ev, gpt2_losses(&model), mean, choice);
        for (int s = 0; s < ev.per_batch && choice[s] >= 0; s++, example++) {
            for (int k = 0; k < EVAL_ENDINGS; k++) { printf("%d %d %.9g\n", example, k, mean[s * EVAL_ENDINGS + k]); }
        }
    }
    fprintf(stderr, "correct %d/%d\n", correct, ev.num_examples);
    evalloader_free(&ev);
    free(mean);
    free(choice);
    gpt2_free(&model);
    comm_finalize(&comm);
    return 0;
}
