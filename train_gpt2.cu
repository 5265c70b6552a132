/*
train_gpt2.cu: GPT-2 training on one NVIDIA GPU, the CUDA twin of train_gpt2.c.

bf16 parameters, activations and gradients with fp32 master weights and AdamW state (make
PRECISION=BF16, the default), or fp32 throughout (PRECISION=FP32, for tight checks). Matrix
multiplies go through cuBLASLt (llmc/matmul.cuh); every other layer is our own kernel, one header
per operation with the CPU twin's name (llmc/encoder.cuh, layernorm.cuh, attention.cuh, gelu.cuh,
fused_classifier.cuh, adamw.cuh, global_norm.cuh). The backward has no atomics: two runs give the
same bits.

The structure is train_gpt2.c's: the parameters are one unit-major slab (unit 0 = embeddings and
final layernorm, units 1..L = the blocks; llmc/gpt2_layout.h), the forward and backward walk the
units, the update runs per tensor (weight decay on the 2-D weights only). This file runs ZeRO
stage 0 on one GPU; the multi-GPU stages build on the same slabs and plan (llmc/zero_plan.h).
Model, checkpoint and data files are the CPU trainer's (llm.c's formats): a run saved by one
trainer resumes in the other.

Run (after `make data references`):
    make train_gpt2cu
    ./train_gpt2cu                                   # fine-tune the reference model file
    ./train_gpt2cu -e gpt2_124M_bf16.bin -b 32 -t 1024 -r 0 -x 20 -v 0 -s 0   # the benchmark
    ./train_gpt2cu -h                                # the flags

Sections: model (parameters, activations) -> forward -> backward -> update -> sampling ->
checkpoints -> training loop and main.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include "llmc/utils.h"
#include "llmc/rand.h"
#include "llmc/gpt2_layout.h"
#include "llmc/dataloader.h"
#include "llmc/tokenizer.h"
#include "llmc/schedulers.h"
#include "llmc/zero_plan.h"
#include "llmc/model_file.h"
#include "llmc/train_args.h"
#include "llmc/checkpoint.h"
#include "llmc/cuda_common.cuh"
#include "llmc/matmul.cuh"
#include "llmc/encoder.cuh"
#include "llmc/layernorm.cuh"
#include "llmc/attention.cuh"
#include "llmc/gelu.cuh"
#include "llmc/fused_classifier.cuh"
#include "llmc/adamw.cuh"
#include "llmc/global_norm.cuh"

// ----------------------------------------------------------------------------
// the model: parameters (one unit-major slab on the GPU), activations, and their gradients

// Pointers to one layer's 12 tensors inside one block unit of params or grads.
typedef struct {
    floatX* ln1w;     // (C)
    floatX* ln1b;     // (C)
    floatX* qkvw;     // (3C, C)
    floatX* qkvb;     // (3C)
    floatX* attprojw; // (C, C)
    floatX* attprojb; // (C)
    floatX* ln2w;     // (C)
    floatX* ln2b;     // (C)
    floatX* fcw;      // (4C, C)
    floatX* fcb;      // (4C)
    floatX* fcprojw;  // (C, 4C)
    floatX* fcprojb;  // (C)
} BlockTensors;

// What the forward keeps for the backward, and the backward's scratch. With recompute (-r), the
// GELU output (r >= 1) and the layernorm outputs (r = 2) are one (B,T,...) buffer shared by all
// layers and recomputed in the backward, instead of one per layer.
typedef struct {
    floatX* encoded;   // (B,T,C)
    floatX* ln1;       // (L,B,T,C), or (B,T,C) with -r 2
    float* ln1_mean;   // (L,B,T)
    float* ln1_rstd;   // (L,B,T)
    floatX* qkv;       // (L,B,T,3C)
    floatX* atty;      // (L,B,T,C)
    float* att_lse;    // (L,B,NH,T) log-sum-exp of each query's scores: all flash attention keeps
    floatX* residual2; // (L,B,T,C)
    floatX* ln2;       // (L,B,T,C), or (B,T,C) with -r 2
    float* ln2_mean;   // (L,B,T)
    float* ln2_rstd;   // (L,B,T)
    floatX* fch;       // (L,B,T,4C) before GELU
    floatX* fch_gelu;  // (L,B,T,4C), or (B,T,4C) with -r >= 1
    floatX* residual3; // (L,B,T,C)
    floatX* lnf;       // (B,T,C)
    float* lnf_mean;   // (B,T)
    float* lnf_rstd;   // (B,T)
    floatX* logits;    // (B,T,Vp); a training forward overwrites it with dlogits
    float* losses;     // (B,T)
    // scratch: the projections before their residual add, then the backward's
    floatX* proj;      // (B,T,C) attproj or fcproj, consumed by the next fused residual + layernorm
    floatX* dresidual; // (B,T,C) the residual stream's gradient
    floatX* dbtc;      // (B,T,C) dlnf, dln2, datty, dln1 in turn
    floatX* dbt4c;     // (B,T,4C) dfch_gelu -> dfch in place, then dqkv (3C of it)
    float* att_scratch;   // (B,NH,T) attention backward's row terms
    float* ln_scratch;    // layernorm backward's partial sums
    float* dbias_scratch; // matmul backward's bias partial sums
} Activations;

// Bytes on the GPU, per category (the start-up table compares them with the plan).
typedef struct { size_t params, grads, optimizer, activations, buffers; } MemoryUse;

typedef struct {
    GPT2Config config;
    ZeroPlan plan;          // units and memory for stage 0 on one GPU
    floatX* params;         // (layout.total) unit-major slab; padding stays 0
    floatX* grads;          // (layout.total)
    float* master;          // (layout.total) fp32 master weights: AdamW updates these, params are their rounding
    float* m;               // (layout.total) AdamW first moment
    float* v;               // (layout.total) AdamW second moment
    double* norm_squared;   // (1) on the device: the gradient's sum of squares
    double* norm_scratch;   // global_norm_squared's partials
    Activations acts;
    void* acts_memory;
    int B, T;               // the largest batch the activations hold
    int recompute;          // -r
    int* inputs;            // (B,T) device copy of the last forward's inputs
    int* targets;           // (B,T) device copy of its targets
    int* inputs_host;       // (B,T) host copy: the encoder backward buckets tokens on the host
    float* losses_host;     // (B,T) pinned: the last forward's losses
    int last_B, last_T;     // shape of the last forward
    int has_targets;        // the last forward had targets (losses are pending)
    float dlogits_scale;    // != 0: the last forward also wrote dlogits for a backward
    EncoderBackwardScratch encoder_scratch;
    cudaStream_t stream;
    MemoryUse mem;
} GPT2;

// The 12 tensors of a block, carved from the start of its unit (params or grads).
static BlockTensors block_tensors(const GPT2* model, floatX* unit) {
    const size_t* o = model->plan.layout.offset_in_unit;
    BlockTensors bt = {
        unit + o[LN1W], unit + o[LN1B], unit + o[QKVW], unit + o[QKVB],
        unit + o[ATTPROJW], unit + o[ATTPROJB], unit + o[LN2W], unit + o[LN2B],
        unit + o[FCW], unit + o[FCB], unit + o[FCPROJW], unit + o[FCPROJB],
    };
    return bt;
}

// Tensor t of unit 0 (wte, wpe, lnfw, lnfb), from the start of unit 0.
static floatX* unit0_tensor(const GPT2* model, floatX* unit0, int t) {
    return unit0 + model->plan.layout.offset_in_unit[t];
}

static floatX* unit_params(GPT2* model, int u) { return model->params + model->plan.layout.unit_offset[u]; }
static floatX* unit_grads(GPT2* model, int u) { return model->grads + model->plan.layout.unit_offset[u]; }

// Makes the plan and allocates the parameter, gradient and optimizer slabs. The parameters are
// set later (gpt2_set_params), from a file or a fresh initialization.
void gpt2_init(GPT2* model, const GPT2Config* config, int grad_accum, int recompute) {
    memset(model, 0, sizeof(*model));
    model->config = *config;
    model->recompute = recompute;
    StateBytes bytes = {(int)sizeof(floatX), (int)sizeof(floatX), 12}; // params, grads; fp32 master + m + v
    zero_plan_init(&model->plan, config, 0, 1, grad_accum, RESHARD_DEFAULT, 0, bytes, UNIT_ALIGN);
    size_t n = model->plan.layout.total;
    MemoryUse* mem = &model->mem;
    model->params = (floatX*)cuda_malloc_counted(&mem->params, n * sizeof(floatX), "the parameters");
    model->grads = (floatX*)cuda_malloc_counted(&mem->grads, n * sizeof(floatX), "the gradients");
    model->master = (float*)cuda_malloc_counted(&mem->optimizer, n * sizeof(float), "the master weights");
    model->m = (float*)cuda_malloc_counted(&mem->optimizer, n * sizeof(float), "AdamW m");
    model->v = (float*)cuda_malloc_counted(&mem->optimizer, n * sizeof(float), "AdamW v");
    model->norm_squared = (double*)cuda_malloc_counted(&mem->buffers, sizeof(double), "the norm");
    model->norm_scratch = (double*)cuda_malloc_counted(&mem->buffers, GLOBAL_NORM_SCRATCH * sizeof(double), "the norm partials");
    cudaCheck(cudaStreamCreate(&model->stream));
    matmul_init(&mem->buffers);
}

// float -> floatX on the device, for installing parameters (master -> params).
__global__ void round_to_floatx_kernel(floatX* out, const float* in, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = from_float(in[i]); }
}

// Installs a full slab of fp32 parameters (host): the master weights keep them exactly, the
// floatX params are their rounding (exact for a bf16 file).
void gpt2_set_params(GPT2* model, const float* full) {
    size_t n = model->plan.layout.total;
    cudaCheck(cudaMemcpy(model->master, full, n * sizeof(float), cudaMemcpyHostToDevice));
    round_to_floatx_kernel<<<ceil_div(n, 256), 256, 0, model->stream>>>(model->params, model->master, n);
    cudaCheckLaunch();
    cudaCheck(cudaStreamSynchronize(model->stream));
}

// The full fp32 parameters on the host (the master weights), for saving. Caller frees.
float* gpt2_full_params(GPT2* model) {
    size_t n = model->plan.layout.total;
    float* full = (float*)mallocCheck(n * sizeof(float));
    cudaCheck(cudaMemcpy(full, model->master, n * sizeof(float), cudaMemcpyDeviceToHost));
    return full;
}

// From a model file, fp32 (v3) or bf16 (v5): what test_gpt2.cu uses.
void gpt2_build_from_checkpoint(GPT2* model, const char* path, int recompute) {
    GPT2Config config;
    int version;
    FILE* fp = model_file_open(path, &config, &version);
    gpt2_init(model, &config, 1, recompute);
    float* full = (float*)callocCheck(model->plan.layout.total, sizeof(float));
    model_file_read(fp, path, &config, &model->plan.layout, full, version);
    fclose(fp);
    gpt2_set_params(model, full);
    free(full);
}

// Carves the activation slab for batches of up to B x T.
static void gpt2_alloc_activations(GPT2* model, int B, int T) {
    const GPT2Config* c = &model->config;
    size_t L = c->num_layers, NH = c->num_heads, C = c->channels, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    size_t L_ln = model->recompute >= 2 ? 1 : L, L_gelu = model->recompute >= 1 ? 1 : L;
    Activations* a = &model->acts;
    // each entry: where the pointer goes, its element count, its element size
    struct { void** ptr; size_t n; size_t size; } parts[] = {
        {(void**)&a->encoded, BT * C, sizeof(floatX)},      {(void**)&a->ln1, L_ln * BT * C, sizeof(floatX)},
        {(void**)&a->ln1_mean, L * BT, sizeof(float)},      {(void**)&a->ln1_rstd, L * BT, sizeof(float)},
        {(void**)&a->qkv, L * BT * 3 * C, sizeof(floatX)},  {(void**)&a->atty, L * BT * C, sizeof(floatX)},
        {(void**)&a->att_lse, L * B * NH * T, sizeof(float)}, {(void**)&a->residual2, L * BT * C, sizeof(floatX)},
        {(void**)&a->ln2, L_ln * BT * C, sizeof(floatX)},   {(void**)&a->ln2_mean, L * BT, sizeof(float)},
        {(void**)&a->ln2_rstd, L * BT, sizeof(float)},      {(void**)&a->fch, L * BT * 4 * C, sizeof(floatX)},
        {(void**)&a->fch_gelu, L_gelu * BT * 4 * C, sizeof(floatX)}, {(void**)&a->residual3, L * BT * C, sizeof(floatX)},
        {(void**)&a->lnf, BT * C, sizeof(floatX)},          {(void**)&a->lnf_mean, BT, sizeof(float)},
        {(void**)&a->lnf_rstd, BT, sizeof(float)},          {(void**)&a->logits, BT * Vp, sizeof(floatX)},
        {(void**)&a->losses, BT, sizeof(float)},            {(void**)&a->proj, BT * C, sizeof(floatX)},
        {(void**)&a->dresidual, BT * C, sizeof(floatX)},    {(void**)&a->dbtc, BT * C, sizeof(floatX)},
        {(void**)&a->dbt4c, BT * 4 * C, sizeof(floatX)},    {(void**)&a->att_scratch, B * NH * T, sizeof(float)},
        {(void**)&a->ln_scratch, layernorm_backward_scratch_floats((int)BT, (int)C), sizeof(float)},
        {(void**)&a->dbias_scratch, matmul_dbias_scratch_floats((int)Vp), sizeof(float)}, // Vp: the widest OC
    };
    int n = sizeof(parts) / sizeof(parts[0]);
    size_t total = 0;
    for (int i = 0; i < n; i++) { total += round_up(parts[i].n * parts[i].size, 256); } // every tensor 256-byte aligned
    model->acts_memory = cuda_malloc_counted(&model->mem.activations, total, "the activations");
    char* p = (char*)model->acts_memory;
    for (int i = 0; i < n; i++) { *parts[i].ptr = p; p += round_up(parts[i].n * parts[i].size, 256); }
    model->B = B;
    model->T = T;
    model->inputs = (int*)cuda_malloc_counted(&model->mem.activations, BT * sizeof(int), "the inputs");
    model->targets = (int*)cuda_malloc_counted(&model->mem.activations, BT * sizeof(int), "the targets");
    model->inputs_host = (int*)mallocCheck(BT * sizeof(int));
    cudaCheck(cudaMallocHost((void**)&model->losses_host, BT * sizeof(float)));
    encoder_backward_scratch_init(&model->encoder_scratch, B, T);
}

// ----------------------------------------------------------------------------
// forward

// The forward of a batch of B x T tokens (inputs, targets: host (B,T); targets may be NULL).
// With targets the classifier computes each position's loss (read them with gpt2_mean_loss);
// with dlogits_scale != 0 it also overwrites the logits with d(loss)/d(logits), scaled so, for
// the backward that must follow (one pass over the (B,T,Vp) logits instead of two).
void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T, float dlogits_scale) {
    const GPT2Config* c = &model->config;
    int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers, NH = c->num_heads, C = c->channels;
    if (T > c->max_seq_len) { fail("sequence length %d exceeds the model's maximum %d", T, c->max_seq_len); }
    if (model->acts_memory == NULL) { gpt2_alloc_activations(model, B, T); }
    if ((size_t)B * T > (size_t)model->B * model->T || T > model->T) {
        fail("batch %dx%d is larger than the %dx%d the activations were sized for", B, T, model->B, model->T);
    }
    if (targets == NULL && dlogits_scale != 0.0f) { fail("internal: dlogits asked for without targets"); }
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) { fail("input token %d at %d is outside the vocabulary of %d", inputs[i], i, V); }
        if (targets != NULL && (targets[i] < 0 || targets[i] >= V)) { fail("target token %d at %d is outside the vocabulary of %d", targets[i], i, V); }
    }
    cudaStream_t s = model->stream;
    size_t BT = (size_t)B * T, BTC = BT * C;
    memcpy(model->inputs_host, inputs, BT * sizeof(int));
    cudaCheck(cudaMemcpyAsync(model->inputs, inputs, BT * sizeof(int), cudaMemcpyHostToDevice, s));
    if (targets != NULL) { cudaCheck(cudaMemcpyAsync(model->targets, targets, BT * sizeof(int), cudaMemcpyHostToDevice, s)); }
    model->last_B = B;
    model->last_T = T;
    model->has_targets = targets != NULL;
    model->dlogits_scale = dlogits_scale;

    Activations* a = &model->acts;
    floatX* ends = unit_params(model, 0);
    encoder_forward(a->encoded, model->inputs, unit0_tensor(model, ends, WTE), unit0_tensor(model, ends, WPE), B, T, C, s);
    for (int l = 0; l < L; l++) {
        BlockTensors w = block_tensors(model, unit_params(model, 1 + l));
        const floatX* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        floatX* ln1 = a->ln1 + (model->recompute >= 2 ? 0 : l * BTC);
        floatX* ln2 = a->ln2 + (model->recompute >= 2 ? 0 : l * BTC);
        floatX* qkv = a->qkv + l * BTC * 3;
        floatX* atty = a->atty + l * BTC;
        floatX* residual2 = a->residual2 + l * BTC;
        floatX* fch = a->fch + l * BTC * 4;
        floatX* fch_gelu = a->fch_gelu + (model->recompute >= 1 ? 0 : l * BTC * 4);
        float* ln1_mean = a->ln1_mean + l * BT, *ln1_rstd = a->ln1_rstd + l * BT;
        float* ln2_mean = a->ln2_mean + l * BT, *ln2_rstd = a->ln2_rstd + l * BT;
        // the previous block's MLP output joins the residual stream as this block's layernorm
        // reads it: one pass (a->proj holds the previous block's fcproj)
        if (l == 0) { layernorm_forward(ln1, ln1_mean, ln1_rstd, residual, w.ln1w, w.ln1b, (int)BT, C, s); }
        else {
            fused_residual_layernorm_forward(a->residual3 + (l - 1) * BTC, ln1, ln1_mean, ln1_rstd,
                                             a->residual2 + (l - 1) * BTC, a->proj, w.ln1w, w.ln1b, (int)BT, C, s);
        }
        matmul_forward(qkv, ln1, w.qkvw, w.qkvb, (int)BT, C, 3 * C, s);
        attention_forward(atty, a->att_lse + (size_t)l * B * NH * T, qkv, B, T, C, NH, s);
        matmul_forward(a->proj, atty, w.attprojw, w.attprojb, (int)BT, C, C, s);
        fused_residual_layernorm_forward(residual2, ln2, ln2_mean, ln2_rstd, residual, a->proj, w.ln2w, w.ln2b, (int)BT, C, s);
        matmul_forward(fch, ln2, w.fcw, w.fcb, (int)BT, C, 4 * C, s);
        gelu_forward(fch_gelu, fch, BTC * 4, s);
        matmul_forward(a->proj, fch_gelu, w.fcprojw, w.fcprojb, (int)BT, 4 * C, C, s);
    }
    // the last block's residual add, fused with the final layernorm
    fused_residual_layernorm_forward(a->residual3 + (L - 1) * BTC, a->lnf, a->lnf_mean, a->lnf_rstd,
                                     a->residual2 + (L - 1) * BTC, a->proj, unit0_tensor(model, ends, LNFW),
                                     unit0_tensor(model, ends, LNFB), (int)BT, C, s);
    // the LM head is tied to the token embedding: logits = lnf @ wte^T
    matmul_forward(a->logits, a->lnf, unit0_tensor(model, ends, WTE), NULL, (int)BT, C, Vp, s);
    if (targets != NULL) {
        fused_classifier(a->logits, a->losses, model->targets, dlogits_scale, (int)BT, V, Vp, dlogits_scale != 0.0f, s);
        cudaCheck(cudaMemcpyAsync(model->losses_host, a->losses, BT * sizeof(float), cudaMemcpyDeviceToHost, s));
    }
}

// The mean loss of the last forward (which had targets), summed on the host in a fixed order.
// Waits for the GPU: call it after the backward's kernels are queued, so they keep it busy.
float gpt2_mean_loss(GPT2* model) {
    if (!model->has_targets) { fail("internal: no forward with targets to take the loss of"); }
    cudaCheck(cudaStreamSynchronize(model->stream));
    size_t BT = (size_t)model->last_B * model->last_T;
    double sum = 0.0;
    for (size_t i = 0; i < BT; i++) { sum += model->losses_host[i]; }
    return (float)(sum / BT);
}

// ----------------------------------------------------------------------------
// backward

// Adds the last forward's gradients into the grads slab. That forward must have been a training
// forward (dlogits_scale != 0: the logits hold dlogits, scaled by loss_scale / (B*T)).
void gpt2_backward(GPT2* model) {
    if (model->dlogits_scale == 0.0f) { fail("internal: backward without a training forward"); }
    const GPT2Config* c = &model->config;
    int Vp = c->padded_vocab_size, L = c->num_layers, NH = c->num_heads, C = c->channels;
    int B = model->last_B, T = model->last_T;
    cudaStream_t s = model->stream;
    Activations* a = &model->acts;
    size_t BT = (size_t)B * T, BTC = BT * C;

    // the head and the final layernorm: unit 0
    floatX* ends = unit_params(model, 0);
    floatX* dends = unit_grads(model, 0);
    floatX* dlogits = a->logits;
    floatX* dlnf = a->dbtc;
    matmul_backward(dlnf, unit0_tensor(model, dends, WTE), NULL, NULL, dlogits, a->lnf, unit0_tensor(model, ends, WTE),
                    (int)BT, C, Vp, s);
    floatX* dresidual = a->dresidual;
    cudaCheck(cudaMemsetAsync(dresidual, 0, BTC * sizeof(floatX), s));
    layernorm_backward(dresidual, unit0_tensor(model, dends, LNFW), unit0_tensor(model, dends, LNFB), a->ln_scratch,
                       dlnf, a->residual3 + (L - 1) * BTC, unit0_tensor(model, ends, LNFW), a->lnf_mean, a->lnf_rstd, (int)BT, C, s);

    for (int l = L - 1; l >= 0; l--) {
        BlockTensors w = block_tensors(model, unit_params(model, 1 + l));
        BlockTensors dw = block_tensors(model, unit_grads(model, 1 + l));
        const floatX* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        floatX* ln1 = a->ln1 + (model->recompute >= 2 ? 0 : l * BTC);
        floatX* ln2 = a->ln2 + (model->recompute >= 2 ? 0 : l * BTC);
        floatX* fch = a->fch + l * BTC * 4;
        floatX* fch_gelu = a->fch_gelu + (model->recompute >= 1 ? 0 : l * BTC * 4);
        float* ln1_mean = a->ln1_mean + l * BT, *ln1_rstd = a->ln1_rstd + l * BT;
        float* ln2_mean = a->ln2_mean + l * BT, *ln2_rstd = a->ln2_rstd + l * BT;
        // recompute what the forward did not keep (the statistics are rewritten with the same values)
        if (model->recompute >= 1) { gelu_forward(fch_gelu, fch, BTC * 4, s); }
        if (model->recompute >= 2) {
            layernorm_forward(ln1, ln1_mean, ln1_rstd, residual, w.ln1w, w.ln1b, (int)BT, C, s);
            layernorm_forward(ln2, ln2_mean, ln2_rstd, a->residual2 + l * BTC, w.ln2w, w.ln2b, (int)BT, C, s);
        }
        // dresidual holds d(loss)/d(residual3 of layer l); the residual adds pass it through
        // unchanged, and each layernorm branch adds its part into it.
        floatX* dfch = a->dbt4c; // dfch_gelu, then dfch in place
        matmul_backward(dfch, dw.fcprojw, dw.fcprojb, a->dbias_scratch, dresidual, fch_gelu, w.fcprojw, (int)BT, 4 * C, C, s);
        gelu_backward(dfch, fch, dfch, BTC * 4, s);
        floatX* dln2 = a->dbtc;
        matmul_backward(dln2, dw.fcw, dw.fcb, a->dbias_scratch, dfch, ln2, w.fcw, (int)BT, C, 4 * C, s);
        layernorm_backward(dresidual, dw.ln2w, dw.ln2b, a->ln_scratch, dln2, a->residual2 + l * BTC, w.ln2w,
                           ln2_mean, ln2_rstd, (int)BT, C, s);
        // dresidual is now d(loss)/d(residual2)
        floatX* datty = a->dbtc;
        floatX* dqkv = a->dbt4c; // dfch is done with
        matmul_backward(datty, dw.attprojw, dw.attprojb, a->dbias_scratch, dresidual, a->atty + l * BTC, w.attprojw,
                        (int)BT, C, C, s);
        attention_backward(dqkv, a->att_scratch, datty, a->qkv + l * BTC * 3, a->atty + l * BTC,
                           a->att_lse + (size_t)l * B * NH * T, B, T, C, NH, s);
        floatX* dln1 = a->dbtc; // datty is done with
        matmul_backward(dln1, dw.qkvw, dw.qkvb, a->dbias_scratch, dqkv, ln1, w.qkvw, (int)BT, C, 3 * C, s);
        layernorm_backward(dresidual, dw.ln1w, dw.ln1b, a->ln_scratch, dln1, residual, w.ln1w, ln1_mean, ln1_rstd, (int)BT, C, s);
        // dresidual is now d(loss)/d(residual3 of layer l-1)
    }
    // the encoder: its gradient is unit 0's second part (wte again, and wpe)
    encoder_backward(unit0_tensor(model, dends, WTE), unit0_tensor(model, dends, WPE), dresidual, model->inputs_host,
                     B, T, C, &model->encoder_scratch, s);
    model->dlogits_scale = 0.0f; // the dlogits are used up
}

void gpt2_zero_grad(GPT2* model) {
    cudaCheck(cudaMemsetAsync(model->grads, 0, model->plan.layout.total * sizeof(floatX), model->stream));
}

// ----------------------------------------------------------------------------
// update

// The global gradient norm: each unit's sum of squares added in unit order on the device.
float gpt2_grad_norm(GPT2* model) {
    const ParamLayout* lay = &model->plan.layout;
    for (int u = 0; u < lay->num_units; u++) {
        global_norm_squared(model->norm_squared, model->grads + lay->unit_offset[u], lay->unit_size[u], u > 0,
                            model->norm_scratch, model->stream);
    }
    double sum;
    cudaCheck(cudaMemcpyAsync(&sum, model->norm_squared, sizeof(double), cudaMemcpyDeviceToHost, model->stream));
    cudaCheck(cudaStreamSynchronize(model->stream));
    return (float)sqrt(sum);
}

// One AdamW step over every tensor (t counts from 1). Returns the gradient norm before clipping.
float gpt2_update(GPT2* model, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_clip, int t) {
    const GPT2Config* c = &model->config;
    const ParamLayout* lay = &model->plan.layout;
    float norm = gpt2_grad_norm(model);
    float grad_scale = grad_clip_scale(norm, grad_clip);
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    // per tensor: weight decay applies to the 2-D weights only; the units' padding is left alone
    for (int u = 0; u < lay->num_units; u++) {
        UnitKind kind = u == 0 ? UNIT_ENDS : UNIT_BLOCK;
        for (int ti = 0; ti < NUM_PARAM_TENSORS; ti++) {
            if (TENSOR_INFO[ti].unit != kind) { continue; }
            size_t off = lay->unit_offset[u] + lay->offset_in_unit[ti];
            float wd = TENSOR_INFO[ti].decay ? weight_decay : 0.0f;
            adamw_update(model->params + off, model->master + off, model->grads + off, model->m + off, model->v + off,
                         tensor_numel(c, ti), lr, beta1, beta2, bc1, bc2, eps, wd, grad_scale, model->stream);
        }
    }
    return norm;
}

void gpt2_free(GPT2* model) {
    cudaCheck(cudaFree(model->params)); cudaCheck(cudaFree(model->grads)); cudaCheck(cudaFree(model->master));
    cudaCheck(cudaFree(model->m)); cudaCheck(cudaFree(model->v));
    cudaCheck(cudaFree(model->norm_squared)); cudaCheck(cudaFree(model->norm_scratch));
    if (model->acts_memory != NULL) {
        cudaCheck(cudaFree(model->acts_memory)); cudaCheck(cudaFree(model->inputs)); cudaCheck(cudaFree(model->targets));
        cudaCheck(cudaFreeHost(model->losses_host));
        free(model->inputs_host);
        encoder_backward_scratch_free(&model->encoder_scratch);
    }
    matmul_free();
    cudaCheck(cudaStreamDestroy(model->stream));
}

// GPU memory in use on the device (all processes), in bytes.
static size_t gpu_memory_used(void) {
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
}

// The start-up table: what was allocated per category beside the plan (ZeRO stage 0, 1 GPU).
void print_memory_table(const GPT2* model) {
    const ZeroPlan* p = &model->plan;
    const MemoryUse* m = &model->mem;
    const double MB = 1024.0 * 1024.0;
    printf("ZeRO stage 0, 1 GPU, %s, %zu parameters padded to %zu\n", PRECISION_NAME, p->layout.num_parameters, p->layout.total);
    printf("GPU memory       | allocated (bytes) |      plan (bytes) | ZeRO formula\n");
    printf("params           | %17zu | %17zu | %9.2f MB\n", m->params, p->mem_params, p->zero_params / MB);
    printf("grads            | %17zu | %17zu | %9.2f MB\n", m->grads, p->mem_grads, p->zero_grads / MB);
    printf("optimizer        | %17zu | %17zu | %9.2f MB\n", m->optimizer, p->mem_optimizer, p->zero_optimizer / MB);
    printf("buffers          | %17zu |                 - |\n", m->buffers);
    printf("activations      | %17zu |                 - |\n", m->activations);
    printf("cudaMemGetInfo: %.1f MB in use on the device\n", gpu_memory_used() / MB);
}

// ----------------------------------------------------------------------------
// checkpoints: the CPU trainer's files (llmc/checkpoint.h), from the master weights and m, v

static void save_checkpoint(GPT2* model, const DataLoader* train, const Rng* rng, int step, const char* dir, int keep) {
    char path[1024];
    size_t n = model->plan.layout.total;
    float* params = gpt2_full_params(model);
    checkpoint_path(path, sizeof(path), dir, "model", step, -1);
    write_model_file(&model->config, &model->plan.layout, params, path);
    float* m = params; // reuse the host buffer for m, then v
    float* v = (float*)mallocCheck(n * sizeof(float));
    cudaCheck(cudaMemcpy(m, model->m, n * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(v, model->v, n * sizeof(float), cudaMemcpyDeviceToHost));
    write_state_file(&model->plan, &model->config, 0, m, v, train, rng, step, dir);
    write_done_marker(dir, step, 1, keep);
    free(params);
    free(v);
}

// The model part of a checkpoint: params, master weights, m and v; h0 gets rank 0's state header.
static void load_checkpoint_state(GPT2* model, const char* dir, int step, int h0[HEADER_INTS]) {
    size_t n = model->plan.layout.total;
    float* full = (float*)callocCheck(n, sizeof(float));
    float* m = (float*)callocCheck(n, sizeof(float));
    float* v = (float*)callocCheck(n, sizeof(float));
    read_checkpoint(dir, step, &model->config, &model->plan.layout, full, m, v, h0);
    gpt2_set_params(model, full);
    cudaCheck(cudaMemcpy(model->m, m, n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(model->v, v, n * sizeof(float), cudaMemcpyHostToDevice));
    free(full); free(m); free(v);
}

static void load_checkpoint(GPT2* model, DataLoader* train, Rng* rng, const char* dir, int step) {
    int h0[HEADER_INTS];
    load_checkpoint_state(model, dir, step, h0);
    restore_position(h0, step, 1, train, rng);
}

#ifndef TESTING
// ----------------------------------------------------------------------------
// sampling

// Generates gen_len tokens after <|endoftext|>, printing them. The forward runs on B=1 over the
// prefix (or its last T tokens once it is longer than the activations' T); the last position's
// logits come to the host for the softmax and the draw.
void gpt2_sample(GPT2* model, const Tokenizer* tokenizer, Rng* rng, int gen_len) {
    const GPT2Config* c = &model->config;
    int eot = tokenizer->init_ok ? tokenizer->eot_token : 50256;
    int* tokens = (int*)mallocCheck((size_t)(gen_len + 1) * sizeof(int));
    floatX* row = (floatX*)mallocCheck((size_t)c->padded_vocab_size * sizeof(floatX));
    float* probs = (float*)mallocCheck((size_t)c->vocab_size * sizeof(float));
    tokens[0] = eot;
    printf("generating:\n---\n");
    for (int t = 1; t <= gen_len; t++) {
        int context = t < model->T ? t : model->T;
        gpt2_forward(model, tokens + t - context, NULL, 1, context, 0.0f);
        const floatX* last = model->acts.logits + (size_t)(context - 1) * c->padded_vocab_size;
        cudaCheck(cudaMemcpyAsync(row, last, (size_t)c->padded_vocab_size * sizeof(floatX), cudaMemcpyDeviceToHost, model->stream));
        cudaCheck(cudaStreamSynchronize(model->stream));
        float maxval = -INFINITY, sum = 0.0f;
        for (int i = 0; i < c->vocab_size; i++) { maxval = fmaxf(maxval, to_float(row[i])); }
        for (int i = 0; i < c->vocab_size; i++) { probs[i] = expf(to_float(row[i]) - maxval); sum += probs[i]; }
        for (int i = 0; i < c->vocab_size; i++) { probs[i] /= sum; }
        tokens[t] = sample_index(probs, c->vocab_size, rng_uniform(rng));
        tokenizer_print(tokenizer, tokens[t]);
        fflush(stdout);
    }
    printf("\n---\n");
    free(tokens); free(row); free(probs);
}

// ----------------------------------------------------------------------------
// training loop

// Dense peak TFLOP/s of known GPUs (bf16 tensor cores; fp32 without tensor cores for the FP32
// build), for MFU. SXM parts; a part not in the table gets no MFU rather than a wrong one.
typedef struct { const char* name; double bf16; double fp32; } GpuPeak;
static const GpuPeak GPU_PEAKS[] = {
    {"H100 PCIe", 756.0, 51.2}, {"H100 NVL", 835.0, 60.0}, {"H100", 989.4, 66.9}, {"H200", 989.4, 66.9},
    {"H800", 989.4, 66.9}, {"A100", 312.0, 19.5}, {"L40S", 362.0, 91.6}, {"RTX 4090", 165.2, 82.6},
};

// The peak for this device (0 if unknown); *name gets the table entry it used.
static double device_peak_tflops(const char* device_name, const char** name) {
    for (size_t i = 0; i < sizeof(GPU_PEAKS) / sizeof(GPU_PEAKS[0]); i++) {
        if (strstr(device_name, GPU_PEAKS[i].name) != NULL) {
            *name = GPU_PEAKS[i].name;
#if defined(ENABLE_FP32)
            return GPU_PEAKS[i].fp32;
#else
            return GPU_PEAKS[i].bf16;
#endif
        }
    }
    *name = "unknown";
    return 0.0;
}

// Training FLOPs per token: 6 per parameter (forward 2, backward 4) plus the attention scores
// and their weighted sum, 6 * L * T * C with the causal half counted (llm.c's estimate, so MFUs compare).
static double flops_per_token(const GPT2* model, int T) {
    const GPT2Config* c = &model->config;
    return 6.0 * (double)model->plan.layout.num_parameters + 6.0 * c->num_layers * (double)T * c->channels;
}

static float evaluate(GPT2* model, DataLoader* val, int max_steps) {
    dataloader_reset(val);
    int n = (int)dataloader_num_batches(val);
    if (max_steps >= 0 && max_steps < n) { n = max_steps; }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        gpt2_forward(model, val->inputs, val->targets, val->B, val->T, 0.0f);
        sum += gpt2_mean_loss(model);
    }
    return (float)(sum / n);
}

// One optimizer step: grad_accum micro-steps, then the update. Returns the mean loss over the
// micro-steps; *norm gets the gradient norm.
static float train_step(GPT2* model, DataLoader* train, int grad_accum, float lr, const TrainArgs* args, int step, float* norm) {
    gpt2_zero_grad(model);
    double loss_sum = 0.0;
    // the step's loss is the mean over micro-steps and positions: each position's gradient share
    float dlogits_scale = 1.0f / ((float)grad_accum * args->B * args->T);
    for (int micro = 0; micro < grad_accum; micro++) {
        dataloader_next_batch(train);
        gpt2_forward(model, train->inputs, train->targets, args->B, args->T, dlogits_scale);
        gpt2_backward(model);
        loss_sum += gpt2_mean_loss(model);
    }
    *norm = gpt2_update(model, lr, 0.9f, 0.95f, 1e-8f, args->weight_decay, args->grad_clip, step + 1);
    cudaCheck(cudaStreamSynchronize(model->stream));
    return (float)(loss_sum / grad_accum);
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    TrainArgs args = {
        .train_pattern = "dev/data/tinyshakespeare/tiny_shakespeare_train.bin",
        .val_pattern = "dev/data/tinyshakespeare/tiny_shakespeare_val.bin",
        .model = "gpt2_124M_bf16.bin", .output_dir = NULL,
        .B = 4, .T = 1024, .total_batch = -1, .lr = 3e-4f, .warmup = 0, .final_lr_frac = 1.0f,
        .weight_decay = 0.0f, .max_steps = -1, .val_every = 20, .val_max_steps = 20,
        .sample_every = 20, .gen_len = 64, .grad_clip = 1.0f, .shuffle = 0, .seed = 1337,
        .zero_stage = 0, .reshard = NULL, .prefetch = -1,
        .checkpoint_every = 0, .checkpoint_keep = 0, .resume = 0, .wait_timeout = 300.0f, .recompute = 1,
    };
    parse_args(&args, argc, argv, 0, "One GPU (cudaSetDevice 0); -r trades compute for activation memory.");
    if (args.recompute == -1) { args.recompute = 1; }
    if (args.zero_stage != 0) {
        fail("flag -z %d: the CUDA trainer runs on one GPU here, which is stage 0 (ZeRO stages over NCCL are not built yet)",
             args.zero_stage);
    }
    signal(SIGXFSZ, SIG_IGN); // a full disk must fail a write with a message, not kill the process

    GPT2Config config;
    int depth = parse_depth(args.model), version = MODEL_VERSION_FP32;
    FILE* model_fp = NULL;
    if (depth > 0) { config = config_for_depth(depth, args.T > 1024 ? args.T : 1024); }
    else { model_fp = model_file_open(args.model, &config, &version); }
    if (args.T > config.max_seq_len) { fail("flag -t %d exceeds the model's maximum sequence length %d", args.T, config.max_seq_len); }
    int tokens_per_micro = args.B * args.T;
    int total_batch = args.total_batch == -1 ? tokens_per_micro : args.total_batch;
    if (total_batch <= 0 || total_batch % tokens_per_micro != 0) {
        fail("flag -d %d must be a positive multiple of B*T*ranks = %d*%d*1 = %d", total_batch, args.B, args.T, tokens_per_micro);
    }
    int grad_accum = total_batch / tokens_per_micro;
    // every file is checked before the GPU is touched: bad input gets its message on any machine
    DataLoader train, val;
    dataloader_init(&train, args.train_pattern, args.B, args.T, 0, 1, config.vocab_size, args.shuffle, (uint64_t)args.seed);
    dataloader_init(&val, args.val_pattern, args.B, args.T, 0, 1, config.vocab_size, 0, 0);
    int max_steps = args.max_steps;
    if (max_steps == -1) { max_steps = (int)(dataloader_num_batches(&train) / grad_accum); }
    Tokenizer tokenizer;
    tokenizer_init(&tokenizer, "gpt2_tokenizer.bin");
    int start_step = args.resume ? newest_checkpoint(args.output_dir) : -1; // -1: none
    FILE* logfile = NULL;
    char path[1024];
    if (args.output_dir != NULL) {
        make_dirs(args.output_dir);
        snprintf(path, sizeof(path), "%s/main.log", args.output_dir);
        logfile = fopenCheck(path, start_step > 0 ? "a" : "w");
    }

    int device_count = 0;
    cudaCheck(cudaGetDeviceCount(&device_count));
    cudaCheck(cudaSetDevice(0));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    GPT2 model;
    gpt2_init(&model, &config, grad_accum, args.recompute);
    float* full = (float*)callocCheck(model.plan.layout.total, sizeof(float));
    if (depth > 0) { init_random(&config, &model.plan.layout, full, (uint64_t)args.seed); }
    else { model_file_read(model_fp, args.model, &config, &model.plan.layout, full, version); fclose(model_fp); }
    gpt2_set_params(&model, full);
    free(full);
    gpt2_alloc_activations(&model, args.B, args.T);

    const char* peak_name;
    double peak = device_peak_tflops(prop.name, &peak_name);
    printf("device %s (%d visible), compute capability %d.%d, %s build\n", prop.name, device_count, prop.major, prop.minor, PRECISION_NAME);
    if (peak > 0) { printf("MFU against %s's dense %s peak of %.1f TFLOP/s\n", peak_name, PRECISION_NAME, peak); }
    else { printf("no peak FLOP/s known for '%s': MFU not reported\n", prop.name); }
    printf("model %s: L %d, NH %d, C %d, maxT %d, V %d (padded %d), %zu parameters\n", args.model,
           config.num_layers, config.num_heads, config.channels, config.max_seq_len, config.vocab_size,
           config.padded_vocab_size, model.plan.layout.num_parameters);
    printf("batch B %d x T %d, %d micro-steps per step (%d tokens), %d steps, lr %g, recompute %d\n",
           args.B, args.T, grad_accum, total_batch, max_steps, args.lr, args.recompute);
    print_memory_table(&model);

    Rng sample_rng;
    rng_init(&sample_rng, (uint64_t)args.seed + 1);
    if (start_step >= 0) {
        load_checkpoint(&model, &train, &sample_rng, args.output_dir, start_step);
        printf("resumed from checkpoint %d in %s\n", start_step, args.output_dir);
    } else {
        if (args.resume) { printf("no complete checkpoint in %s: starting from step 0\n", args.output_dir); }
        start_step = 0;
    }

    double flops_per_step = flops_per_token(&model, args.T) * total_batch;
    for (int step = start_step; step < max_steps; step++) {
        if (args.val_every > 0 && step % args.val_every == 0) {
            float val_loss = evaluate(&model, &val, args.val_max_steps);
            printf("val loss %f\n", val_loss);
            if (logfile) { fprintf(logfile, "s:%d tel:%f\n", step, val_loss); fflush(logfile); }
        }
        if (args.sample_every > 0 && step > 0 && step % args.sample_every == 0) {
            gpt2_sample(&model, &tokenizer, &sample_rng, args.gen_len);
        }
        double t0 = now_seconds();
        float lr = lr_cosine(step, args.lr, args.warmup, max_steps, args.final_lr_frac);
        float norm;
        float loss = train_step(&model, &train, grad_accum, lr, &args, step, &norm);
        double dt = now_seconds() - t0;
        printf("step %4d/%d: train loss %f norm %.4f lr %.2e (%.1f ms, %.0f tok/s", step + 1, max_steps, loss, norm, lr,
               dt * 1000, total_batch / dt);
        if (peak > 0) { printf(", MFU %.1f%%", 100.0 * flops_per_step / dt / (peak * 1e12)); }
        printf(", GPU memory %.0f MB)\n", gpu_memory_used() / (1024.0 * 1024.0));
        if (logfile) { fprintf(logfile, "s:%d trl:%f\n", step, loss); fflush(logfile); }
        if (args.checkpoint_every > 0 && (step + 1) % args.checkpoint_every == 0) {
            save_checkpoint(&model, &train, &sample_rng, step + 1, args.output_dir, args.checkpoint_keep);
        }
    }
    if (args.val_every > 0) {
        float val_loss = evaluate(&model, &val, args.val_max_steps);
        printf("val loss %f\n", val_loss);
        if (logfile) { fprintf(logfile, "s:%d tel:%f\n", max_steps, val_loss); }
    }
    if (args.sample_every > 0) { gpt2_sample(&model, &tokenizer, &sample_rng, args.gen_len); }
    if (args.output_dir != NULL) {
        fcloseCheck(logfile, path);
        float* params = gpt2_full_params(&model);
        snprintf(path, sizeof(path), "%s/model_%08d.bin", args.output_dir, max_steps);
        write_model_file(&config, &model.plan.layout, params, path);
        printf("wrote %s\n", path);
        free(params);
    }
    printf("GPU memory in use at the end: %.1f MB (cudaMemGetInfo)\n", gpu_memory_used() / 1048576.0);
    dataloader_free(&train);
    dataloader_free(&val);
    tokenizer_free(&tokenizer);
    gpt2_free(&model);
    return 0;
}
#endif // TESTING
