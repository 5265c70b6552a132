/*
HellaSwag evaluation: llm.c's multiple-choice eval file, read, checked and cut into batches,
and the scoring of a forward's per-position losses. Plain C, shared by both trainers (-h 1).

The file (written by dev/data/hellaswag.js) is a 256-int32 header (magic 20240522, version 1,
number of examples, the longest example in bytes) and then, per example, uint16 fields:
    65535 (a delimiter), the example's bytes (these fields included), its index, the label
    (0..3), the number of endings (4), the context's length and tokens, then per ending its
    length and tokens.
Every field is checked when the file is opened, so a bad file stops the run at start-up with one
line naming the file, the example and what was expected.

A batch of B rows holds B/4 examples, 4 rows each: row k is the context then ending k, with
the targets shifted by one, and `mask` marks the positions whose target is an ending token (the
first at the context's last token). The ending with the lowest mean loss over those positions
is the model's choice (llm.c's acc_norm, as its EvalLoader). Rank r of N takes examples r, r+N,
r+2N, ...; every rank runs the same number of batches (stage 3 gathers need all ranks), rows
past a rank's last example are left empty (mask 0). An example longer than T (context plus its
longest ending) is an error naming it and the -t it needs, as llm.c asserts, never truncated:
a truncated ending would be scored on fewer tokens than the others.
*/
#ifndef LLMC_HELLASWAG_H
#define LLMC_HELLASWAG_H

#include <stdint.h>
#include <string.h>
#include "utils.h"

#define EVAL_MAGIC 20240522
#define EVAL_VERSION 1
#define EVAL_ENDINGS 4          // rows per example (HellaSwag has 4 endings)
#define EVAL_DELIMITER 65535
#define EVAL_FIELDS 6           // delimiter, bytes, index, label, endings, context length

typedef struct {
    int B, T;               // batch rows and sequence length of the forward
    int rank, world_size;   // this rank scores examples rank, rank + world_size, ...
    int num_examples;       // in the file, over all ranks
    int per_batch;          // examples per batch: B / 4
    int num_batches;        // batches per evaluation, the same on every rank
    uint16_t* data;         // the examples as read (everything after the header)
    size_t* start;          // (num_examples) where each example's fields begin in data
    int next;               // the next example this rank scores
    // the batch
    int* inputs;            // (B,T)
    int* targets;           // (B,T)
    char* mask;             // (B,T) 1 where the target is an ending token
    int* label;             // (per_batch) the right ending, -1 for an empty slot
} EvalLoader;

// One example's fields, pointing into data.
typedef struct {
    int label, ctx_len;
    const uint16_t* ctx;                  // (ctx_len)
    int end_len[EVAL_ENDINGS];
    const uint16_t* end[EVAL_ENDINGS];    // (end_len[k])
} EvalExample;

static inline EvalExample eval_example(const EvalLoader* ev, int i) {
    const uint16_t* f = ev->data + ev->start[i];
    EvalExample e;
    e.label = f[3];
    e.ctx_len = f[5];
    e.ctx = f + EVAL_FIELDS;
    const uint16_t* p = e.ctx + e.ctx_len;
    for (int k = 0; k < EVAL_ENDINGS; k++) { e.end_len[k] = p[0]; e.end[k] = p + 1; p += 1 + p[0]; }
    return e;
}

// Checks example i, starting at data[at] with `left` uint16 values to the end of the file;
// returns its size in bytes. Lengths are checked against what is left before they are followed.
static inline size_t eval_check_example(const char* path, const uint16_t* data, size_t at, size_t left, int i,
                                        int vocab_size) {
    const uint16_t* f = data + at;
    if (left < EVAL_FIELDS) { fail("'%s' example %d: the file ends inside its header fields (truncated)", path, i); }
    if (f[0] != EVAL_DELIMITER) { fail("'%s' example %d: starts with %d, expected the delimiter %d", path, i, f[0], EVAL_DELIMITER); }
    size_t n = f[1] / 2; // the example's uint16 values
    if (f[1] % 2 != 0 || n < EVAL_FIELDS || n > left) {
        fail("'%s' example %d: claims %d bytes, expected an even count from %d to the %zu left in the file", path, i, f[1],
             2 * EVAL_FIELDS, 2 * left);
    }
    if (f[2] != i % 65536) { fail("'%s' example %d: has index %d, expected %d", path, i, f[2], i % 65536); }
    if (f[3] >= EVAL_ENDINGS) { fail("'%s' example %d: label %d, expected 0..%d", path, i, f[3], EVAL_ENDINGS - 1); }
    if (f[4] != EVAL_ENDINGS) { fail("'%s' example %d: has %d endings, expected %d", path, i, f[4], EVAL_ENDINGS); }
    // context and endings: each a length >= 1 and that many tokens, all inside the example
    size_t p = EVAL_FIELDS - 1;
    for (int k = -1; k < EVAL_ENDINGS; k++) {
        size_t len = p < n ? f[p] : 0;
        if (p >= n || len == 0 || p + 1 + len > n) {
            fail("'%s' example %d: the %s's length runs past the example's %d bytes or is 0", path, i,
                 k < 0 ? "context" : "ending", f[1]);
        }
        for (size_t t = p + 1; t <= p + len; t++) {
            if (f[t] >= vocab_size) { fail("'%s' example %d: token %d is outside the vocabulary of %d", path, i, f[t], vocab_size); }
        }
        p += 1 + len;
    }
    if (p != n) { fail("'%s' example %d: %zu bytes after its last ending, expected none", path, i, 2 * (n - p)); }
    return 2 * n;
}

// The rows one example needs: its context plus its longest ending.
static inline int eval_example_tokens(const EvalExample* e) {
    int longest = 0;
    for (int k = 0; k < EVAL_ENDINGS; k++) { if (e->end_len[k] > longest) { longest = e->end_len[k]; } }
    return e->ctx_len + longest;
}

// Reads and checks the whole file (HellaSwag's val set is ~4 MB) and sizes the batches.
static inline void evalloader_init(EvalLoader* ev, const char* path, int B, int T, int rank, int world_size, int vocab_size) {
    memset(ev, 0, sizeof(*ev));
    if (B < EVAL_ENDINGS) { fail("HellaSwag (-h 1) needs -b >= %d: each example is %d rows of a batch, got -b %d", EVAL_ENDINGS, EVAL_ENDINGS, B); }
    ev->B = B; ev->T = T; ev->rank = rank; ev->world_size = world_size;
    FILE* fp = fopenCheck(path, "rb");
    int header[HEADER_INTS];
    read_header(fp, header, path, EVAL_MAGIC, "HellaSwag eval (dev/data/hellaswag.js)");
    if (header[1] != EVAL_VERSION) { fail("'%s' has version %d, expected %d", path, header[1], EVAL_VERSION); }
    if (header[2] <= 0) { fail("'%s' claims %d examples, expected at least 1", path, header[2]); }
    long size = file_size(fp, path);
    size_t n16 = (size_t)(size - HEADER_INTS * (long)sizeof(int)) / 2;
    if ((size - HEADER_INTS * (long)sizeof(int)) % 2 != 0) { fail("'%s' is %ld bytes, expected the header and whole uint16 values", path, size); }
    ev->data = (uint16_t*)mallocCheck(n16 * sizeof(uint16_t) + 1);
    fseekCheck(fp, HEADER_INTS * (long)sizeof(int), SEEK_SET, path);
    freadCheck(ev->data, sizeof(uint16_t), n16, fp, path);
    fclose(fp);
    ev->num_examples = header[2];
    if ((size_t)ev->num_examples > n16 / EVAL_FIELDS) { // before allocating by it
        fail("'%s' claims %d examples, but its %zu bytes hold at most %zu", path, ev->num_examples, 2 * n16, n16 / EVAL_FIELDS);
    }
    ev->start = (size_t*)mallocCheck((size_t)ev->num_examples * sizeof(size_t));
    size_t at = 0, longest_bytes = 0;
    int longest = 0, longest_at = 0;
    for (int i = 0; i < ev->num_examples; i++) {
        ev->start[i] = at;
        size_t bytes = eval_check_example(path, ev->data, at, n16 - at, i, vocab_size);
        if (bytes > longest_bytes) { longest_bytes = bytes; }
        EvalExample e = eval_example(ev, i);
        if (eval_example_tokens(&e) > longest) { longest = eval_example_tokens(&e); longest_at = i; }
        at += bytes / 2;
    }
    if (at != n16) { fail("'%s' has %zu bytes after its %d examples, expected none", path, 2 * (n16 - at), ev->num_examples); }
    if ((size_t)header[3] != longest_bytes) {
        fail("'%s' header says the longest example is %d bytes, but it is %zu", path, header[3], longest_bytes);
    }
    if (longest > T) {
        fail("'%s' example %d needs %d tokens (context + its longest ending), more than -t %d: run with -t %d or more",
             path, longest_at, longest, T, longest);
    }
    ev->per_batch = B / EVAL_ENDINGS;
    int mine_max = (ev->num_examples + world_size - 1) / world_size; // rank 0 has the most
    ev->num_batches = (mine_max + ev->per_batch - 1) / ev->per_batch;
    size_t BT = (size_t)B * T;
    ev->inputs = (int*)mallocCheck(BT * sizeof(int));
    ev->targets = (int*)mallocCheck(BT * sizeof(int));
    ev->mask = (char*)mallocCheck(BT);
    ev->label = (int*)mallocCheck((size_t)ev->per_batch * sizeof(int));
    ev->next = rank;
}

static inline void evalloader_reset(EvalLoader* ev) { ev->next = ev->rank; }

// Fills the next batch with this rank's next B/4 examples (fewer at its end).
static inline void evalloader_next_batch(EvalLoader* ev) {
    size_t T = (size_t)ev->T;
    // the empty rows and the positions after an ending: token 0, masked out
    memset(ev->inputs, 0, (size_t)ev->B * T * sizeof(int));
    memset(ev->targets, 0, (size_t)ev->B * T * sizeof(int));
    memset(ev->mask, 0, (size_t)ev->B * T);
    for (int s = 0; s < ev->per_batch; s++) {
        ev->label[s] = -1;
        if (ev->next >= ev->num_examples) { continue; }
        EvalExample e = eval_example(ev, ev->next);
        ev->label[s] = e.label;
        for (int k = 0; k < EVAL_ENDINGS; k++) {
            size_t row = (size_t)(s * EVAL_ENDINGS + k) * T;
            for (int t = 0; t < e.ctx_len; t++) { ev->inputs[row + t] = e.ctx[t]; }
            for (int t = 0; t < e.end_len[k]; t++) {
                int pos = e.ctx_len + t;
                ev->inputs[row + pos] = e.end[k][t];
                ev->targets[row + pos - 1] = e.end[k][t]; // predicted from the token before it
                ev->mask[row + pos - 1] = 1;
            }
        }
        ev->next += ev->world_size;
    }
}

// Scores the batch from the forward's per-position losses (B,T): mean_loss (per_batch, 4), if
// not NULL, gets each ending's mean loss and choice (per_batch) the lowest's index (-1: empty
// slot). Returns how many examples the model got right.
static inline int evalloader_score(const EvalLoader* ev, const float* losses, double* mean_loss, int* choice) {
    int correct = 0;
    for (int s = 0; s < ev->per_batch; s++) {
        int best = -1;
        double best_loss = 0.0;
        for (int k = 0; k < EVAL_ENDINGS && ev->label[s] >= 0; k++) {
            size_t row = (size_t)(s * EVAL_ENDINGS + k) * ev->T;
            double sum = 0.0;
            int n = 0;
            for (int t = 0; t < ev->T; t++) { if (ev->mask[row + t]) { sum += losses[row + t]; n++; } }
            double mean = sum / n; // n >= 1: every ending has a token
            if (mean_loss != NULL) { mean_loss[s * EVAL_ENDINGS + k] = mean; }
            if (best < 0 || mean < best_loss) { best = k; best_loss = mean; } // a tie goes to the first
        }
        if (choice != NULL) { choice[s] = best; }
        if (best >= 0 && best == ev->label[s]) { correct++; }
    }
    return correct;
}

static inline void evalloader_free(EvalLoader* ev) {
    free(ev->data); free(ev->start);
    free(ev->inputs); free(ev->targets); free(ev->mask); free(ev->label);
    memset(ev, 0, sizeof(*ev));
}

#endif // LLMC_HELLASWAG_H
