/*
Checkpoints: plain C, shared by the CPU and CUDA trainers, so a run saved by one resumes in the
other, on any world size and ZeRO stage.

A checkpoint is the model file (rank 0), a state file per rank, and a DONE marker written last.
A state file holds one N-way slice [j*S_u, (j+1)*S_u) (S_u = unit_size / N) of every unit's
AdamW m and v, cut to the unit's real elements, plus the data position, the sampling RNG and the
step. Rank r writes slice j = r, or with hybrid sharding (-zg G) the slice zero_rank_slice
gives it (one of the R slices its shard holds; the header records G). Every stage writes the
same slices (stage 0 holds all of m and v but writes only its own slice), so the N files
together hold each element once, whatever the stage, G and the padding: a run can resume on
another world size, stage, G or unit size (-zu) by reassembling the full m and v and cutting
out its own part. The header also records the writer's blocks per unit, which with N fixes
where each slice lies; the reader places every element by its position (llmc/gpt2_layout.h),
which no unit size changes.
Every file is written under a temporary name, synced and renamed, and the marker comes last,
so a crash at any moment leaves the previous complete checkpoint as it was.

The trainers hand over host arrays: the full fp32 parameters (the CUDA trainer's master weights)
and m, v shaped as their stage holds them (stage 0: the full slab; stages 1-3: the shard slab).
*/
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <dirent.h>
#include <sys/stat.h>
#include "utils.h"
#include "rand.h"
#include "gpt2_layout.h"
#include "zero_plan.h"
#include "dataloader.h"
#include "model_file.h"
#include "outdir_lock.h" // -o holds one job at a time

#define STATE_MAGIC 20240601
#define STATE_VERSION 1
// the state file's header fields
enum { SH_MAGIC, SH_VERSION, SH_STEP, SH_RANK, SH_WORLD, SH_STAGE, SH_B, SH_T, SH_L, SH_C, SH_VP, SH_MAXT,
       SH_EPOCH, SH_SHARD, SH_SLOT, SH_SHUFFLE, SH_RNG_LO, SH_RNG_HI, SH_GROUP,
       SH_UNIT_BLOCKS }; // -zu of the writer; 0 in files from before -zu, which had 1 block per unit
#define MAX_CHECKPOINTS 4096

static inline void checkpoint_path(char* out, size_t n, const char* dir, const char* kind, int step, int rank) {
    if (strcmp(kind, "state") == 0) { snprintf(out, n, "%s/state_%08d_%05d.bin", dir, step, rank); }
    else if (strcmp(kind, "model") == 0) { snprintf(out, n, "%s/model_%08d.bin", dir, step); }
    else { snprintf(out, n, "%s/DONE_%08d", dir, step); }
}

// The part [a, b) of unit u that rank r of `world` owns, cut to the unit's real elements.
static inline void owned_range(const ParamLayout* lay, int world, int r, int u, size_t* a, size_t* b) {
    size_t S = lay->unit_size[u] / world;
    *a = (size_t)r * S;
    *b = *a + S;
    if (*b > lay->unit_numel[u]) { *b = lay->unit_numel[u]; }
    if (*a > *b) { *a = *b; }
}

// The steps of the complete checkpoints in dir (those with a DONE marker), ascending.
static inline int list_checkpoints(const char* dir, int* steps) {
    int n = 0;
    DIR* d = opendir(dir);
    if (d == NULL) { return 0; }
    struct dirent* e;
    while ((e = readdir(d)) != NULL && n < MAX_CHECKPOINTS) {
        int s;
        char rest;
        if (strlen(e->d_name) == 13 && sscanf(e->d_name, "DONE_%8d%c", &s, &rest) == 1) { steps[n++] = s; }
    }
    closedir(d);
    for (int i = 1; i < n; i++) { // insertion sort: few checkpoints
        int s = steps[i], j = i - 1;
        while (j >= 0 && steps[j] > s) { steps[j + 1] = steps[j]; j--; }
        steps[j + 1] = s;
    }
    return n;
}

static inline int checkpoint_world_size(const char* dir, int step) {
    char path[1024];
    checkpoint_path(path, sizeof(path), dir, "DONE", step, -1);
    FILE* fp = fopenCheck(path, "r");
    int world = 0;
    if (fscanf(fp, "%d ranks", &world) != 1 || world < 1 || world > 1 << 20) {
        fail("'%s' should say how many ranks wrote the checkpoint ('N ranks')", path);
    }
    fclose(fp);
    return world;
}

// Removes a checkpoint's files, the marker first: a half-removed checkpoint is never "complete".
static inline void remove_checkpoint(const char* dir, int step) {
    char path[1024];
    int world = checkpoint_world_size(dir, step);
    checkpoint_path(path, sizeof(path), dir, "DONE", step, -1);
    remove(path);
    checkpoint_path(path, sizeof(path), dir, "model", step, -1);
    remove(path);
    for (int r = 0; r < world; r++) { checkpoint_path(path, sizeof(path), dir, "state", step, r); remove(path); }
}

// mkdir -p: creates dir and its missing parents (those that exist already are fine).
static inline void make_dirs(const char* dir) {
    char path[1024];
    snprintf(path, sizeof(path), "%s", dir);
    for (char* p = path + 1; *p; p++) {
        if (*p == '/') { *p = '\0'; mkdir(path, 0755); *p = '/'; }
    }
    mkdir(path, 0755);
}

// The newest complete checkpoint in dir, or -1.
static inline int newest_checkpoint(const char* dir) {
    int* steps = (int*)mallocCheck(MAX_CHECKPOINTS * sizeof(int));
    int n = list_checkpoints(dir, steps);
    int step = n > 0 ? steps[n - 1] : -1;
    free(steps);
    return step;
}

// Writes this rank's state file: the N-way slice it answers for (zero_rank_slice) of every
// unit's m and v (cut to the unit's real elements), the data position, the sampling RNG and the
// step. m and v are host arrays shaped as the stage holds them: the full slab in stage 0, the
// shard slab in stages 1-3.
static inline void write_state_file(const ZeroPlan* p, const GPT2Config* c, int rank, const float* m, const float* v,
                                    const DataLoader* train, const Rng* rng, int step, const char* dir) {
    char path[1024], tmp[1100];
    checkpoint_path(path, sizeof(path), dir, "state", step, rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* fp = fopenCheck(tmp, "wb");
    int h[HEADER_INTS] = {0};
    h[SH_MAGIC] = STATE_MAGIC; h[SH_VERSION] = STATE_VERSION; h[SH_STEP] = step; h[SH_RANK] = rank;
    h[SH_WORLD] = p->world_size; h[SH_STAGE] = p->stage; h[SH_B] = train->B; h[SH_T] = train->T;
    h[SH_L] = c->num_layers; h[SH_C] = c->channels; h[SH_VP] = c->padded_vocab_size; h[SH_MAXT] = c->max_seq_len;
    h[SH_EPOCH] = (int)train->epoch; h[SH_SHARD] = (int)train->shard_idx; h[SH_SLOT] = (int)train->slot_idx;
    h[SH_SHUFFLE] = train->shuffle;
    h[SH_RNG_LO] = (int)(uint32_t)rng->state; h[SH_RNG_HI] = (int)(uint32_t)(rng->state >> 32);
    h[SH_GROUP] = p->group_size;
    h[SH_UNIT_BLOCKS] = p->unit_blocks;
    fwriteCheck(h, sizeof(int), HEADER_INTS, fp, tmp);
    int slice = zero_rank_slice(p, rank);
    for (int which = 0; which < 2; which++) {
        const float* state = which == 0 ? m : v;
        for (int u = 0; u < p->layout.num_units; u++) {
            size_t a, b;
            owned_range(&p->layout, p->world_size, slice, u, &a, &b);
            if (a == b) { continue; } // a slice of padding only
            // stage 0 holds whole units; stages 1-3 the group rank's shard, from element g*S_u of the unit
            size_t shard_start = zero_slice_offset(p, u, rank) - p->layout.unit_offset[u];
            const float* src = p->stage == 0 ? state + p->layout.unit_offset[u] + a : state + p->shard_offset[u] + (a - shard_start);
            fwriteCheck(src, sizeof(float), b - a, fp, tmp);
        }
    }
    commit_file(fp, tmp, path);
}

// Rank 0, after every rank's files are in place: the DONE marker (the checkpoint is complete
// from this moment), then only the newest `keep` checkpoints are kept (0: all).
static inline void write_done_marker(const char* dir, int step, int world_size, int keep) {
    char path[1024], tmp[1100];
    checkpoint_path(path, sizeof(path), dir, "DONE", step, -1);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* fp = fopenCheck(tmp, "w");
    fprintf(fp, "%d ranks\n", world_size);
    commit_file(fp, tmp, path);
    printf("checkpoint %s\n", path);
    int* steps = (int*)mallocCheck(MAX_CHECKPOINTS * sizeof(int));
    int n = list_checkpoints(dir, steps);
    for (int i = 0; keep > 0 && i < n - keep; i++) { remove_checkpoint(dir, steps[i]); }
    free(steps);
}

// Reads elements [a, b) of unit u of the writer's layout `old` from fp into `dst`, a slab laid out
// as `lay`: piece by piece, each where its position (unit 0, then block by block) lies in lay.
static inline void read_unit_range(FILE* fp, const char* path, const ParamLayout* old, int u, size_t a, size_t b,
                                   const ParamLayout* lay, float* dst) {
    size_t pos = unit_position(old, u) + a, left = b - a;
    while (left > 0) {
        size_t run, at = position_to_slab(lay, pos, &run);
        size_t n = run < left ? run : left;
        freadCheck(dst + at, sizeof(float), n, fp, path);
        pos += n;
        left -= n;
    }
}

// Reads checkpoint `step` of dir for a model of config c laid out as lay: the full params
// (from the model file) and the full m and v (reassembled from the N_old state files, each old
// rank's slices placed by their position in the model, whatever the old and new unit sizes:
// slice r, or with the old run's group size G_old in the header, slice
// (r % G_old) * (N_old / G_old) + r / G_old; a header written before -zg existed has 0 there,
// which is G_old = N_old), all three unit-major slabs of lay->total floats. h0 gets rank 0's
// header (the data position and the RNG).
static inline void read_checkpoint(const char* dir, int step, const GPT2Config* c, const ParamLayout* lay,
                                   float* params, float* m, float* v, int h0[HEADER_INTS]) {
    char path[1024];
    checkpoint_path(path, sizeof(path), dir, "model", step, -1);
    GPT2Config saved;
    FILE* fp = model_file_open(path, &saved, NULL);
    if (memcmp(&saved, c, sizeof(saved)) != 0) {
        fail("'%s' is a different model (L %d, C %d, maxT %d) from the one given with -e (L %d, C %d, maxT %d)",
             path, saved.num_layers, saved.channels, saved.max_seq_len, c->num_layers, c->channels, c->max_seq_len);
    }
    model_file_read(fp, path, c, lay, params, MODEL_VERSION_FP32);
    fclose(fp);
    int world = checkpoint_world_size(dir, step);
    ParamLayout* old = (ParamLayout*)mallocCheck(sizeof(ParamLayout));
    int old_blocks = 0;
    for (int r = 0; r < world; r++) {
        int h[HEADER_INTS];
        checkpoint_path(path, sizeof(path), dir, "state", step, r);
        fp = fopenCheck(path, "rb");
        read_header(fp, h, path, STATE_MAGIC, "optimizer state");
        int blocks = h[SH_UNIT_BLOCKS] == 0 ? 1 : h[SH_UNIT_BLOCKS];
        if (h[SH_VERSION] != STATE_VERSION || h[SH_STEP] != step || h[SH_RANK] != r || h[SH_WORLD] != world ||
            h[SH_L] != c->num_layers || h[SH_C] != c->channels || h[SH_VP] != c->padded_vocab_size || h[SH_MAXT] != c->max_seq_len ||
            blocks < 1 || blocks > c->num_layers || (r > 0 && blocks != old_blocks)) {
            fail("'%s' does not belong to checkpoint %d of %d ranks of this model (version %d, step %d, rank %d of %d, L %d, C %d, "
                 "%d blocks per unit)", path, step, world, h[SH_VERSION], h[SH_STEP], h[SH_RANK], h[SH_WORLD], h[SH_L], h[SH_C],
                 h[SH_UNIT_BLOCKS]);
        }
        if (r == 0) { // how the old run cut and padded its units
            old_blocks = blocks;
            layout_init(old, c, (size_t)world * UNIT_ALIGN, old_blocks);
        }
        int G = h[SH_GROUP] == 0 ? world : h[SH_GROUP];
        if (G < 1 || world % G != 0) { fail("'%s' says shard groups of %d ranks, which do not divide %d ranks", path, G, world); }
        int slice = (r % G) * (world / G) + r / G; // as zero_rank_slice made it
        size_t count = 0;
        for (int u = 0; u < old->num_units; u++) { size_t a, b; owned_range(old, world, slice, u, &a, &b); count += b - a; }
        long expected = (long)(HEADER_INTS * sizeof(int) + 2 * count * sizeof(float));
        if (file_size(fp, path) != expected) {
            fail("'%s' is %ld bytes, expected %ld: truncated or corrupt", path, file_size(fp, path), expected);
        }
        fseekCheck(fp, HEADER_INTS * sizeof(int), SEEK_SET, path);
        for (int which = 0; which < 2; which++) {
            float* dst = which == 0 ? m : v;
            for (int u = 0; u < old->num_units; u++) {
                size_t a, b;
                owned_range(old, world, slice, u, &a, &b);
                read_unit_range(fp, path, old, u, a, b, lay, dst);
            }
        }
        fclose(fp);
        if (r == 0) { memcpy(h0, h, HEADER_INTS * sizeof(int)); }
    }
    free(old);
}

// Puts the data loader and the sampling RNG where checkpoint `step` (rank 0's header h0) left
// them: exact when ranks x B x T is unchanged, else the same token offset.
static inline void restore_position(const int h0[HEADER_INTS], int step, int world_size, DataLoader* train, Rng* rng) {
    size_t old_slot = (size_t)h0[SH_WORLD] * h0[SH_B] * h0[SH_T];
    size_t new_slot = (size_t)world_size * train->B * train->T;
    size_t slot = (size_t)h0[SH_SLOT];
    if (h0[SH_SHUFFLE] != train->shuffle) { fail("checkpoint %d was made with -sh %d; resume it with the same", step, h0[SH_SHUFFLE]); }
    if (old_slot != new_slot) {
        if (train->shuffle) { fail("a shuffled run resumes only with the same ranks x B x T (%zu tokens per slot, now %zu)", old_slot, new_slot); }
        if (slot * old_slot % new_slot != 0) {
            fail("checkpoint %d stopped at token %zu of its shard, not a multiple of ranks x B x T = %zu", step, slot * old_slot, new_slot);
        }
        slot = slot * old_slot / new_slot;
    }
    dataloader_seek(train, h0[SH_EPOCH], (size_t)h0[SH_SHARD], slot);
    rng->state = (uint64_t)(uint32_t)h0[SH_RNG_LO] | ((uint64_t)(uint32_t)h0[SH_RNG_HI] << 32);
}

#endif // LLMC_CHECKPOINT_H
