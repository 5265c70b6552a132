/*
The GPT-2 parameter tensors and how they lie in memory: plain C, shared by the CPU and CUDA
trainers (and the sharding plan built on top of it).

Files store the 16 tensors tensor-major, each stacked over layers (llm.c's order). Memory is
one slab laid out unit-major (DESIGN.md §3): unit 0 = the two ends of the model (wte, wpe and
the final layernorm lnfw, lnfb), units 1..ceil(L/K) = the transformer blocks, K per unit (-zu,
FSDP's wrap policy; the last unit holds the rest when K does not divide L). Each block's 12
tensors are contiguous and a unit's blocks follow each other, unpadded. A unit is what ZeRO
stage 3 gathers and releases as one piece, so it must be one contiguous range. Each unit is
padded to a multiple of `unit_multiple` floats, so that N ranks can each own an equal slice of
every unit; the padding stays zero. Which unit holds block l, and where, is answered here only
(unit_of_block, block_offset): the trainers never compute it themselves.

Why the final layernorm shares unit 0: it runs right before the LM head, which is wte (tied),
and its backward right after the head's. Grouping them (as torchtitan groups norm and head)
means stage 3 gathers unit 0 exactly twice per step, for the encoder and for lnf + head +
their backward, instead of adding a third tiny gather for a 2*C-element unit.
*/
#ifndef LLMC_GPT2_LAYOUT_H
#define LLMC_GPT2_LAYOUT_H

#include <stddef.h>
#include "utils.h"

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5

typedef struct {
    int max_seq_len;       // maxT, e.g. 1024
    int vocab_size;        // V, e.g. 50257
    int padded_vocab_size; // Vp, V rounded up to a multiple of 128 (wte has Vp rows; rows >= V stay 0)
    int num_layers;        // L
    int num_heads;         // NH
    int channels;          // C
} GPT2Config;

// The 16 tensors, in the file's order.
enum {
    WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB,
    LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB, NUM_PARAM_TENSORS
};

typedef enum { UNIT_ENDS, UNIT_BLOCK } UnitKind;

typedef struct {
    const char* name;
    UnitKind unit;  // which unit holds it; UNIT_BLOCK tensors exist once per layer
    int decay;      // 1 for the 2-D weight matrices: AdamW's weight decay applies only to these
} TensorInfo;

static const TensorInfo TENSOR_INFO[NUM_PARAM_TENSORS] = {
    {"wte", UNIT_ENDS, 1},      {"wpe", UNIT_ENDS, 1},
    {"ln1w", UNIT_BLOCK, 0},    {"ln1b", UNIT_BLOCK, 0},
    {"qkvw", UNIT_BLOCK, 1},    {"qkvb", UNIT_BLOCK, 0},
    {"attprojw", UNIT_BLOCK, 1}, {"attprojb", UNIT_BLOCK, 0},
    {"ln2w", UNIT_BLOCK, 0},    {"ln2b", UNIT_BLOCK, 0},
    {"fcw", UNIT_BLOCK, 1},     {"fcb", UNIT_BLOCK, 0},
    {"fcprojw", UNIT_BLOCK, 1}, {"fcprojb", UNIT_BLOCK, 0},
    {"lnfw", UNIT_ENDS, 0},     {"lnfb", UNIT_ENDS, 0},
};

// Elements of tensor t for one layer (block tensors) or in total (the others).
static inline size_t tensor_numel(const GPT2Config* c, int t) {
    size_t C = c->channels;
    switch (t) {
        case WTE: return (size_t)c->padded_vocab_size * C;  // (Vp, C)
        case WPE: return (size_t)c->max_seq_len * C;        // (maxT, C)
        case LN1W: case LN1B: case LN2W: case LN2B: case ATTPROJB: case FCPROJB:
        case LNFW: case LNFB: return C;                     // (C)
        case QKVW: return 3 * C * C;                        // (3C, C)
        case QKVB: return 3 * C;                            // (3C)
        case ATTPROJW: return C * C;                        // (C, C)
        case FCW: return 4 * C * C;                         // (4C, C)
        case FCB: return 4 * C;                             // (4C)
        case FCPROJW: return 4 * C * C;                     // (C, 4C)
        default: return 0;
    }
}

// How many copies of tensor t the model has (L for block tensors, 1 otherwise).
static inline int tensor_copies(const GPT2Config* c, int t) {
    return TENSOR_INFO[t].unit == UNIT_BLOCK ? c->num_layers : 1;
}

#define MAX_UNITS 1025 // up to 1024 layers

typedef struct {
    int num_units;                        // 1 + ceil(L / unit_blocks)
    int num_layers;                       // L
    int unit_blocks;                      // K: transformer blocks per unit (the last unit may hold fewer)
    size_t block_numel;                   // real elements of one transformer block
    size_t unit_multiple;                 // every unit's size is a multiple of this
    size_t unit_offset[MAX_UNITS];        // start of unit u in the slab
    size_t unit_numel[MAX_UNITS];         // real elements of unit u
    size_t unit_size[MAX_UNITS];          // padded elements of unit u
    size_t offset_in_unit[NUM_PARAM_TENSORS]; // where tensor t starts inside its unit
    size_t total;                         // padded elements of the whole slab
    size_t num_parameters;                // real elements (the padded vocab rows count: they are in the file)
} ParamLayout;

// The unit holding block l (0..L-1), the first block of unit u (1..), how many blocks unit u
// holds (0 for unit 0), its last block, and where block l starts inside its unit.
static inline int unit_of_block(const ParamLayout* lay, int l) { return 1 + l / lay->unit_blocks; }
static inline int unit_first_block(const ParamLayout* lay, int u) { return (u - 1) * lay->unit_blocks; }
static inline int unit_block_count(const ParamLayout* lay, int u) {
    if (u == 0) { return 0; }
    int rest = lay->num_layers - unit_first_block(lay, u);
    return rest < lay->unit_blocks ? rest : lay->unit_blocks;
}
static inline int unit_last_block(const ParamLayout* lay, int u) { return unit_first_block(lay, u) + unit_block_count(lay, u) - 1; }
static inline size_t block_offset(const ParamLayout* lay, int l) { return (size_t)(l % lay->unit_blocks) * lay->block_numel; }

// The unit holding tensor t of layer `layer` (ignored for unit 0's tensors).
static inline int tensor_unit(const ParamLayout* lay, int t, int layer) {
    return TENSOR_INFO[t].unit == UNIT_BLOCK ? unit_of_block(lay, layer) : 0;
}

// unit_blocks = K of -zu (1..L; the flag's own check names it, this one guards the callers).
static inline void layout_init(ParamLayout* lay, const GPT2Config* c, size_t unit_multiple, int unit_blocks) {
    if (unit_blocks < 1 || unit_blocks > c->num_layers) {
        fail("internal: %d blocks per unit for a model of %d layers", unit_blocks, c->num_layers);
    }
    memset(lay, 0, sizeof(*lay));
    lay->num_layers = c->num_layers;
    lay->unit_blocks = unit_blocks;
    lay->num_units = 1 + (c->num_layers + unit_blocks - 1) / unit_blocks;
    if (lay->num_units > MAX_UNITS) { fail("model has %d layers, at most %d supported", c->num_layers, MAX_UNITS - 1); }
    lay->unit_multiple = unit_multiple;
    // the tensors of each unit kind follow each other in file order
    size_t in_unit[2] = {0, 0};
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        UnitKind k = TENSOR_INFO[t].unit;
        lay->offset_in_unit[t] = in_unit[k];
        in_unit[k] += tensor_numel(c, t);
    }
    lay->block_numel = in_unit[UNIT_BLOCK];
    size_t off = 0;
    for (int u = 0; u < lay->num_units; u++) {
        lay->unit_numel[u] = u == 0 ? in_unit[UNIT_ENDS] : (size_t)unit_block_count(lay, u) * lay->block_numel;
        lay->unit_size[u] = (lay->unit_numel[u] + unit_multiple - 1) / unit_multiple * unit_multiple;
        lay->unit_offset[u] = off;
        off += lay->unit_size[u];
        lay->num_parameters += lay->unit_numel[u];
    }
    lay->total = off;
}

// Offset in the slab of tensor t of layer `layer` (layer is ignored for non-block tensors).
static inline size_t tensor_offset(const ParamLayout* lay, const GPT2Config* c, int t, int layer) {
    (void)c;
    size_t in_unit = TENSOR_INFO[t].unit == UNIT_BLOCK ? block_offset(lay, layer) : 0;
    return lay->unit_offset[tensor_unit(lay, t, layer)] + in_unit + lay->offset_in_unit[t];
}

// Every real element has a position no unit size or padding changes: unit 0's elements first,
// then block 0's, block 1's and so on. Checkpoints place m and v by it, so a run resumes with
// another K or N. unit_position: the position of unit u's first element.
static inline size_t unit_position(const ParamLayout* lay, int u) {
    return u == 0 ? 0 : lay->unit_numel[0] + (size_t)unit_first_block(lay, u) * lay->block_numel;
}

// The slab offset of position `pos`; *run gets how many elements from there on are contiguous
// in both numberings (to the end of unit 0 or of the block).
static inline size_t position_to_slab(const ParamLayout* lay, size_t pos, size_t* run) {
    if (pos < lay->unit_numel[0]) { *run = lay->unit_numel[0] - pos; return pos; }
    size_t i = pos - lay->unit_numel[0];
    int l = (int)(i / lay->block_numel);
    *run = lay->block_numel - i % lay->block_numel;
    return lay->unit_offset[unit_of_block(lay, l)] + block_offset(lay, l) + i % lay->block_numel;
}

// The config from a model file header (header[2..7] = maxT, V, L, NH, C, Vp), checked so a
// corrupt header cannot ask for absurd sizes. `path` names the file in the message.
static inline void config_from_header(GPT2Config* c, const int* header, const char* path) {
    c->max_seq_len = header[2];
    c->vocab_size = header[3];
    c->num_layers = header[4];
    c->num_heads = header[5];
    c->channels = header[6];
    c->padded_vocab_size = header[7];
    if (c->max_seq_len <= 0 || c->max_seq_len > 1 << 20 || c->vocab_size <= 0 || c->vocab_size > 1 << 20 ||
        c->num_layers <= 0 || c->num_layers > MAX_UNITS - 1 || c->num_heads <= 0 || c->channels <= 0 ||
        c->channels > 1 << 16 || c->channels % c->num_heads != 0 ||
        c->padded_vocab_size < c->vocab_size || c->padded_vocab_size > c->vocab_size + 1024) {
        fail("'%s' has an invalid config: maxT %d, V %d, L %d, NH %d, C %d, Vp %d",
             path, c->max_seq_len, c->vocab_size, c->num_layers, c->num_heads, c->channels, c->padded_vocab_size);
    }
}

// A fresh model "dN" with GPT-2's vocabulary: the four published GPT-2 sizes at depths 12, 24, 36
// and 48 (124M, 350M, 774M, 1558M: C 768, 1024, 1280, 1600, heads of 64 channels, as llm.c's dN),
// and for any other depth N channels 64*N in N heads (the small models the tests train).
static inline GPT2Config config_for_depth(int depth, int max_seq_len) {
    int channels = depth == 24 ? 1024 : depth == 36 ? 1280 : depth == 48 ? 1600 : 64 * depth;
    GPT2Config c = {max_seq_len, 50257, 50304, depth, channels / 64, channels};
    return c;
}

#endif // LLMC_GPT2_LAYOUT_H
