/*
Data loader for llm.c-format token shards, with a distributed sampler.

A shard is a 256-int32 header (magic 20240520, version 1, token count) and then uint16 tokens.
A batch is B*T+1 consecutive tokens: inputs are the first B*T, targets the same shifted by one.
With N ranks, each shard is cut into "slots" of N*B*T tokens and rank r reads the r-th B*T
piece of a slot, so ranks always read different tokens (identical batches on all ranks would
silently turn N ranks into one). Slots are visited in order, or in a shuffled order that every
rank draws from the same seed, so ranks stay disjoint when shuffling too.
*/
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <glob.h>
#include <stdint.h>
#include <stddef.h>
#include "utils.h"
#include "rand.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1

typedef struct {
    int B, T;                 // batch size and sequence length of one rank's batch
    int rank, world_size;     // this rank reads the rank-th B*T piece of every slot
    glob_t glob_result;       // the shard paths, sorted by glob
    size_t num_shards;
    int vocab_size;           // tokens must be below this (a corrupt shard must not index past wte)
    int shuffle;              // 0: slots and shards in file order; 1: a new order every epoch
    uint64_t seed;            // shuffle seed, the same on every rank
    // position
    long epoch;               // how many times all shards were read
    size_t shard_idx;         // index into shard_order
    size_t slot_idx;          // index into slot_order of the current shard
    // current shard
    FILE* fp;
    size_t shard_tokens;      // tokens in the open shard
    size_t num_slots;         // slots in the open shard
    size_t* shard_order;      // (num_shards) visit order of the shards
    size_t* slot_order;       // (num_slots) visit order of the slots of the open shard
    // the batch
    uint16_t* buffer;         // (B*T+1) tokens as read
    int* inputs;              // (B, T)
    int* targets;             // (B, T)
    size_t tokens_per_shard_min; // the smallest token count over all shards (for messages)
    size_t num_batches;       // batches per epoch, the same on every rank
} DataLoader;

// Reads and checks one shard's header; returns its number of tokens.
static inline size_t shard_check(const char* path, FILE* fp) {
    int header[HEADER_INTS];
    read_header(fp, header, path, SHARD_MAGIC, "token shard");
    if (header[1] != SHARD_VERSION) {
        fail("'%s' has version %d, expected %d", path, header[1], SHARD_VERSION);
    }
    if (header[2] < 0) { fail("'%s' claims %d tokens", path, header[2]); }
    size_t ntok = (size_t)header[2];
    long expected = (long)(HEADER_INTS * sizeof(int) + ntok * sizeof(uint16_t));
    long size = file_size(fp, path);
    if (size != expected) {
        fail("'%s' is %ld bytes but its header says %zu tokens (%ld bytes): truncated or corrupt",
             path, size, ntok, expected);
    }
    return ntok;
}

// The order to visit n things in this epoch: identity, or a shuffle from (seed, epoch, salt).
static inline void visit_order(size_t* order, size_t n, int shuffle, uint64_t seed, long epoch, uint64_t salt) {
    for (size_t i = 0; i < n; i++) { order[i] = i; }
    if (!shuffle) { return; }
    Rng rng;
    rng_init(&rng, seed ^ ((uint64_t)epoch * 0x100000001B3ull) ^ (salt << 32));
    for (size_t i = n - 1; i > 0; i--) { // Fisher-Yates
        size_t j = rng_below(&rng, (uint32_t)(i + 1));
        size_t t = order[i]; order[i] = order[j]; order[j] = t;
    }
}

static inline void dataloader_open_shard(DataLoader* dl) {
    if (dl->fp != NULL) { fclose(dl->fp); }
    const char* path = dl->glob_result.gl_pathv[dl->shard_order[dl->shard_idx]];
    dl->fp = fopenCheck(path, "rb");
    dl->shard_tokens = shard_check(path, dl->fp);
    // the last token of a slot is read as the target of the one before it, hence the -1
    dl->num_slots = (dl->shard_tokens - 1) / ((size_t)dl->world_size * dl->B * dl->T);
    free(dl->slot_order);
    dl->slot_order = (size_t*)mallocCheck(dl->num_slots * sizeof(size_t));
    visit_order(dl->slot_order, dl->num_slots, dl->shuffle, dl->seed, dl->epoch, dl->shard_order[dl->shard_idx] + 1);
}

// Position the loader at (epoch, shard index, slot index); used by reset and by resume.
static inline void dataloader_seek(DataLoader* dl, long epoch, size_t shard_idx, size_t slot_idx) {
    dl->epoch = epoch;
    visit_order(dl->shard_order, dl->num_shards, dl->shuffle, dl->seed, epoch, 0);
    dl->shard_idx = shard_idx;
    dl->slot_idx = slot_idx;
    dataloader_open_shard(dl);
}

static inline void dataloader_reset(DataLoader* dl) { dataloader_seek(dl, 0, 0, 0); }

static inline void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int world_size,
                            int vocab_size, int shuffle, uint64_t seed) {
    memset(dl, 0, sizeof(*dl));
    dl->B = B; dl->T = T; dl->rank = rank; dl->world_size = world_size; dl->vocab_size = vocab_size;
    dl->shuffle = shuffle; dl->seed = seed;
    int rc = glob(pattern, 0, NULL, &dl->glob_result);
    if (rc != 0 || dl->glob_result.gl_pathc == 0) {
        fail("no data shard matches '%s' (prepare it with: node dev/data/tinyshakespeare.js)", pattern);
    }
    dl->num_shards = dl->glob_result.gl_pathc;
    // check every shard now, so a bad file stops the run at start-up and not hours later
    size_t need = (size_t)world_size * B * T + 1;
    dl->tokens_per_shard_min = (size_t)-1;
    for (size_t i = 0; i < dl->num_shards; i++) {
        const char* path = dl->glob_result.gl_pathv[i];
        FILE* fp = fopenCheck(path, "rb");
        size_t ntok = shard_check(path, fp);
        fclose(fp);
        if (ntok < need) {
            fail("'%s' has %zu tokens, fewer than one batch needs: ranks %d x B %d x T %d + 1 = %zu",
                 path, ntok, world_size, B, T, need);
        }
        if (ntok < dl->tokens_per_shard_min) { dl->tokens_per_shard_min = ntok; }
        dl->num_batches += (ntok - 1) / ((size_t)world_size * B * T);
    }
    dl->shard_order = (size_t*)mallocCheck(dl->num_shards * sizeof(size_t));
    dl->buffer = (uint16_t*)mallocCheck(need * sizeof(uint16_t));
    dl->inputs = (int*)mallocCheck((size_t)B * T * sizeof(int));
    dl->targets = (int*)mallocCheck((size_t)B * T * sizeof(int));
    dataloader_reset(dl);
}

// Batches per epoch for this loader (the same on every rank), counted when init checked the shards.
static inline size_t dataloader_num_batches(const DataLoader* dl) { return dl->num_batches; }

// Fills inputs and targets with this rank's next batch; moves to the next shard (and epoch)
// when the current one is used up.
static inline void dataloader_next_batch(DataLoader* dl) {
    if (dl->slot_idx >= dl->num_slots) {
        size_t next = dl->shard_idx + 1;
        if (next >= dl->num_shards) { dataloader_seek(dl, dl->epoch + 1, 0, 0); }
        else { dataloader_seek(dl, dl->epoch, next, 0); }
    }
    size_t BT = (size_t)dl->B * dl->T;
    size_t slot = dl->slot_order[dl->slot_idx];
    size_t token_offset = slot * dl->world_size * BT + (size_t)dl->rank * BT;
    const char* path = dl->glob_result.gl_pathv[dl->shard_order[dl->shard_idx]];
    fseekCheck(dl->fp, (long)(HEADER_INTS * sizeof(int) + token_offset * sizeof(uint16_t)), SEEK_SET, path);
    freadCheck(dl->buffer, sizeof(uint16_t), BT + 1, dl->fp, path);
    for (size_t i = 0; i <= BT; i++) {
        if (dl->buffer[i] >= dl->vocab_size) {
            fail("'%s' holds token %d at position %zu, outside the vocabulary of %d",
                 path, dl->buffer[i], token_offset + i, dl->vocab_size);
        }
    }
    for (size_t i = 0; i < BT; i++) {
        dl->inputs[i] = dl->buffer[i];
        dl->targets[i] = dl->buffer[i + 1];
    }
    dl->slot_idx++;
}

static inline void dataloader_free(DataLoader* dl) {
    if (dl->fp != NULL) { fclose(dl->fp); }
    free(dl->shard_order); free(dl->slot_order);
    free(dl->buffer); free(dl->inputs); free(dl->targets);
    globfree(&dl->glob_result);
    memset(dl, 0, sizeof(*dl));
}

#endif // LLMC_DATALOADER_H
