/*
GPT-2 tokenizer for decoding only (sampling prints text): the llm.c file format, magic 20240328,
version 2, header[2] = vocabulary size, header[3] = end-of-text id; then per token one uint8
length and that many bytes. Encoding is done once, offline, by dev/data/tinyshakespeare.js.
*/
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <ctype.h>
#include <stdint.h>
#include "utils.h"

#define TOKENIZER_MAGIC 20240328
// <|endoftext|> in GPT-2's vocabulary: where sampling starts when there is no tokenizer file
#define GPT2_EOT 50256

typedef struct {
    int vocab_size;
    char** token_table; // (vocab_size) NUL-terminated byte strings
    int eot_token;      // <|endoftext|>
    int init_ok;
} Tokenizer;

// A missing tokenizer is not fatal (training works without it; only sampling needs it), but a
// present, broken one is.
static inline void tokenizer_init(Tokenizer* t, const char* path) {
    memset(t, 0, sizeof(*t));
    FILE* fp = fopen(path, "rb");
    if (fp == NULL) {
        printf("warning: no tokenizer at '%s', samples print token ids (run node dev/data/tinyshakespeare.js)\n", path);
        return;
    }
    int header[HEADER_INTS];
    long size = file_size(fp, path);
    read_header(fp, header, path, TOKENIZER_MAGIC, "tokenizer");
    if (header[1] != 2) { fail("'%s' has version %d, expected 2", path, header[1]); }
    if (header[2] <= 0 || header[2] > 1000000) { fail("'%s' claims %d tokens", path, header[2]); }
    // each token takes at least 2 bytes (its length, then at least one byte): a count the file
    // cannot hold is refused before the table is allocated
    long most = (size - (long)(HEADER_INTS * sizeof(int))) / 2;
    if (header[2] > most) { fail("'%s' claims %d tokens, but its %ld bytes hold at most %ld", path, header[2], size, most); }
    t->vocab_size = header[2];
    t->eot_token = header[3];
    t->token_table = (char**)callocCheck(t->vocab_size, sizeof(char*));
    for (int i = 0; i < t->vocab_size; i++) {
        unsigned char length;
        freadCheck(&length, sizeof(length), 1, fp, path);
        if (length == 0) { fail("'%s': token %d has length 0", path, i); }
        t->token_table[i] = (char*)mallocCheck(length + 1);
        freadCheck(t->token_table[i], 1, length, fp, path);
        t->token_table[i][length] = '\0';
    }
    fclose(fp);
    t->init_ok = 1;
}

static inline const char* tokenizer_decode(const Tokenizer* t, int token_id) {
    if (!t->init_ok || token_id < 0 || token_id >= t->vocab_size) { return NULL; }
    return t->token_table[token_id];
}

// Prints a token's text, skipping lone non-printable bytes (BPE splits UTF-8 characters).
static inline void tokenizer_print(const Tokenizer* t, int token_id) {
    const char* piece = tokenizer_decode(t, token_id);
    if (piece == NULL) { printf("<%d>", token_id); return; }
    if (piece[1] == '\0' && !(isprint((unsigned char)piece[0]) || isspace((unsigned char)piece[0]))) { return; }
    printf("%s", piece);
}

static inline void tokenizer_free(Tokenizer* t) {
    if (t->init_ok) {
        for (int i = 0; i < t->vocab_size; i++) { free(t->token_table[i]); }
        free(t->token_table);
    }
    memset(t, 0, sizeof(*t));
}

#endif // LLMC_TOKENIZER_H
