/*
libFuzzer harness for the file loaders: the model file (header, config, size), token shards, the
tokenizer and the HellaSwag eval file. Built four times by dev/test/fuzz_loaders.sh, with
-DFUZZ_TARGET=1, 2, 3 or 4.
A loader that rejects its input calls fail(), which here jumps back instead of exiting, so the
fuzzer goes on; what it looks for is a crash, a sanitizer report, or a hang.
*/
#define TESTING
#include "../../train_gpt2.c"
#include <setjmp.h>
#include <unistd.h>

static jmp_buf g_jump;
static void jump_back(void) { longjmp(g_jump, 1); }

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static char path[64];
    if (path[0] == '\0') { snprintf(path, sizeof(path), "/tmp/fuzz_loader_%d.bin", (int)getpid()); }
    FILE* out = fopen(path, "wb");
    if (out == NULL) { return 0; }
    fwrite(data, 1, size, out);
    fclose(out);
    // files a rejected input left open are closed after the jump: the lowest free descriptor now
    // is where any of them would start
    int first_fd = dup(0);
    close(first_fd);
    g_fail_hook = jump_back;
    if (setjmp(g_jump) == 0) {
#if FUZZ_TARGET == 1
        GPT2Config c;
        int version; // both fp32 and bf16 files (the CUDA trainer reads both)
        FILE* fp = model_file_open(path, &c, &version);
        ParamLayout* lay = (ParamLayout*)mallocCheck(sizeof(ParamLayout));
        layout_init(lay, &c, UNIT_ALIGN, 1);
        float* full = (float*)callocCheck(lay->total, sizeof(float));
        model_file_read(fp, path, &c, lay, full, version);
        fclose(fp);
        free(full);
        free(lay);
#elif FUZZ_TARGET == 2
        DataLoader dl;
        dataloader_init(&dl, path, 1, 4, 0, 1, 50257, 0, 0);
        for (int i = 0; i < 3; i++) { dataloader_next_batch(&dl); }
        dataloader_free(&dl);
#elif FUZZ_TARGET == 4
        EvalLoader ev; // B 8 T 16: two examples a batch, each up to 16 tokens
        evalloader_init(&ev, path, 8, 16, 0, 1, 50257);
        float losses[8 * 16] = {0};
        for (int i = 0; i < ev.num_batches; i++) { evalloader_next_batch(&ev); (void)evalloader_score(&ev, losses, NULL, NULL); }
        evalloader_free(&ev);
#else
        Tokenizer t;
        tokenizer_init(&t, path);
        for (int i = 0; i < t.vocab_size; i++) { (void)tokenizer_decode(&t, i); }
        tokenizer_free(&t);
#endif
    } else {
        for (int fd = first_fd; fd < first_fd + 8; fd++) { close(fd); }
    }
    g_fail_hook = NULL;
    return 0;
}
