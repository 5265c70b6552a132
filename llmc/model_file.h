/*
GPT-2 model files (llm.c's format) and fresh initialization: plain C, shared by the CPU and CUDA
trainers. A file is a 256-int header (magic 20240326; version 3 = fp32, 5 = bf16; maxT, V, L, NH,
C, Vp) and then the 16 tensors tensor-major, each stacked over layers. In memory the trainers
hold one unit-major slab (llmc/gpt2_layout.h): reading and writing convert between the two.

Writes go to a temporary name, are synced, then renamed (commit_file): a crash while writing
never leaves a half file under the real name.
*/
#ifndef LLMC_MODEL_FILE_H
#define LLMC_MODEL_FILE_H

#include <fcntl.h>
#include <math.h>
#include <unistd.h>
#include "utils.h"
#include "rand.h"
#include "gpt2_layout.h"

// Reads a model file's header into config; the file stays open, positioned after the header.
// With version == NULL only fp32 files (version 3) are accepted (the CPU trainer); otherwise
// bf16 files (version 5) too, and *version says which.
static inline FILE* model_file_open(const char* path, GPT2Config* config, int* version) {
    FILE* fp = fopenCheck(path, "rb");
    int header[HEADER_INTS];
    read_header(fp, header, path, MODEL_MAGIC, "GPT-2 model");
    if (version == NULL && header[1] == MODEL_VERSION_BF16) {
        fail("'%s' is a bf16 model (version 5); the CPU trainer needs the fp32 file (version 3)", path);
    }
    if (header[1] != MODEL_VERSION_FP32 && header[1] != MODEL_VERSION_BF16) {
        fail("'%s' has version %d, expected %d (fp32) or %d (bf16)", path, header[1], MODEL_VERSION_FP32, MODEL_VERSION_BF16);
    }
    if (version != NULL) { *version = header[1]; }
    config_from_header(config, header, path);
    // the size check comes before anything is allocated for the config: a corrupt header must
    // not make the trainer ask for gigabytes first
    size_t count = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) { count += tensor_numel(config, t) * tensor_copies(config, t); }
    size_t elem = header[1] == MODEL_VERSION_BF16 ? 2 : 4;
    long expected = (long)(HEADER_INTS * sizeof(int) + count * elem);
    long size = file_size(fp, path);
    if (size != expected) {
        fail("'%s' is %ld bytes, expected %ld for its config (L %d, C %d, Vp %d): truncated or corrupt",
             path, size, expected, config->num_layers, config->channels, config->padded_vocab_size);
    }
    return fp;
}

// bf16 -> fp32 is exact: the bf16 bits are the top half of the fp32 bits.
static inline float bf16_bits_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

// Reads the tensors of a model file (model_file_open checked its size) into a full unit-major
// slab of floats laid out as `lay`. version: what model_file_open found (bf16 is widened, exactly).
static inline void model_file_read(FILE* fp, const char* path, const GPT2Config* c, const ParamLayout* lay, float* full, int version) {
    fseekCheck(fp, HEADER_INTS * sizeof(int), SEEK_SET, path);
    uint16_t* row = NULL;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = tensor_numel(c, t);
        for (int l = 0; l < tensor_copies(c, t); l++) {
            float* dst = full + tensor_offset(lay, c, t, l);
            if (version == MODEL_VERSION_FP32) { freadCheck(dst, sizeof(float), n, fp, path); continue; }
            if (row == NULL) { row = (uint16_t*)mallocCheck(tensor_numel(c, WTE) * sizeof(uint16_t)); } // the largest tensor
            freadCheck(row, sizeof(uint16_t), n, fp, path);
            for (size_t i = 0; i < n; i++) { dst[i] = bf16_bits_to_float(row[i]); }
        }
    }
    free(row);
}

// GPT-2's initialization into a full slab: weights N(0, 0.02), the two residual projections
// scaled by 1/sqrt(2L) so the residual stream's variance does not grow with depth; biases 0,
// layernorm weights 1. Every rank draws the same numbers from the same seed.
static inline void init_random(const GPT2Config* c, const ParamLayout* lay, float* full, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed);
    float residual_std = 0.02f / sqrtf(2.0f * c->num_layers);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (int l = 0; l < tensor_copies(c, t); l++) {
            float* p = full + tensor_offset(lay, c, t, l);
            size_t n = tensor_numel(c, t);
            if (t == WTE) { n = (size_t)c->vocab_size * c->channels; } // padded rows stay 0
            for (size_t i = 0; i < n; i++) {
                if (t == LN1W || t == LN2W || t == LNFW) { p[i] = 1.0f; }
                else if (TENSOR_INFO[t].decay) { p[i] = rng_normal(&rng, 0.0f, (t == ATTPROJW || t == FCPROJW) ? residual_std : 0.02f); }
                else { p[i] = 0.0f; }
            }
        }
    }
}

// fflush + fsync + close + rename + fsync of the folder (which makes the rename itself durable):
// once this returns, the whole file is on disk under `path`.
static inline void commit_file(FILE* fp, const char* tmp, const char* path) {
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) { fail("cannot write '%s': %s", tmp, strerror(errno)); }
    fcloseCheck(fp, tmp);
    if (rename(tmp, path) != 0) { fail("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno)); }
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s", path);
    char* slash = strrchr(dir, '/');
    if (slash != NULL) { *slash = '\0'; } else { snprintf(dir, sizeof(dir), "."); }
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) { fsync(fd); close(fd); }
}

// Writes the model in llm.c's format (fp32, tensor-major) from a full slab, to a temporary name
// first, then renames it, so a crash while writing never leaves a half file under the real name.
static inline void write_model_file(const GPT2Config* c, const ParamLayout* lay, const float* full, const char* path) {
    char tmp[1100]; // room for the path and ".tmp"
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* fp = fopenCheck(tmp, "wb");
    int header[HEADER_INTS] = {0};
    header[0] = MODEL_MAGIC; header[1] = MODEL_VERSION_FP32;
    header[2] = c->max_seq_len; header[3] = c->vocab_size; header[4] = c->num_layers;
    header[5] = c->num_heads; header[6] = c->channels; header[7] = c->padded_vocab_size;
    fwriteCheck(header, sizeof(int), HEADER_INTS, fp, tmp);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (int l = 0; l < tensor_copies(c, t); l++) {
            fwriteCheck(full + tensor_offset(lay, c, t, l), sizeof(float), tensor_numel(c, t), fp, tmp);
        }
    }
    commit_file(fp, tmp, path);
}

#endif // LLMC_MODEL_FILE_H
