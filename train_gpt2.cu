/*
train_gpt2.cu: GPT-2 training on NVIDIA GPUs, the CUDA twin of train_gpt2.c, with the ZeRO
stages 0-3 across GPUs over NCCL (-z).

bf16 parameters, activations and gradients with fp32 master weights and AdamW state (make
PRECISION=BF16, the default), or fp32 throughout (PRECISION=FP32, for tight checks). Matrix
multiplies go through cuBLASLt (llmc/matmul.cuh); every other layer is our own kernel, one header
per operation with the CPU twin's name (llmc/encoder.cuh, layernorm.cuh, attention.cuh, gelu.cuh,
fused_classifier.cuh, adamw.cuh, global_norm.cuh). The backward has no atomics: two runs give the
same bits.

The structure is train_gpt2.c's: the parameters are one unit-major slab (unit 0 = embeddings and
final layernorm, units 1..L = the blocks; llmc/gpt2_layout.h), sharded by the plan both trainers
share (llmc/zero_plan.h); the forward and backward walk the units through the same schedule calls
(unit_params -> compute -> release; unit_grads -> compute -> unit_grads_done), and the sharding
section below issues every collective of a step. One process per GPU; collectives run on their
own stream (llmc/nccl_comm.cuh), ordered against the compute stream with events, so they overlap
the backward (and, in stage 3, the forward's gathers run ahead of the compute by the prefetch).
Model, checkpoint and data files are the CPU trainer's (llm.c's formats): a run saved by one
trainer, on any number of ranks and any stage, resumes in the other.

Run (after `make data references`):
    ./train_gpt2cu                                    # one GPU: fine-tune the reference model file
    ./train_gpt2cu -e gpt2_124M_bf16.bin -b 32 -t 1024 -r 0 -x 20 -v 0 -s 0   # the benchmark
    mpirun -np 8 ./train_gpt2cu -z 2 ...               # 8 GPUs, ZeRO stage 2
    ./train_gpt2cu -pn 2 -pr $R -pi fs -pf /shared/job1 -z 3 ...   # without MPI: each rank R
    ./train_gpt2cu -h                                 # the flags

Sections: model (parameters, activations) -> forward -> backward -> update -> the sharding
schedule -> optimizer-state offload (-zo 1) -> checkpoints -> sampling -> training loop and main.
*/
#include <math.h>
#include <stdarg.h>
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
#include "llmc/hellaswag.h"
#include "llmc/tokenizer.h"
#include "llmc/schedulers.h"
#include "llmc/zero_plan.h"
#include "llmc/model_file.h"
#include "llmc/train_args.h"
#include "llmc/checkpoint.h"
#include "llmc/cuda_common.cuh"
#include "llmc/nccl_comm.cuh"
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
    floatX* fch;       // (L,B,T,4C) before GELU (the fc product's aux output, the DGELU's aux input)
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
    floatX* dbt4c;     // (B,T,4C) dfch (the DGELU epilogue's output), then dqkv (3C of it)
    float* att_scratch;   // attention backward's row terms (B,NH,T), -ak 1's dQ partials, qkv bias partials
    float* ln_scratch;    // layernorm backward's partial sums
    float* dbias_scratch; // matmul backward's bias partial sums
} Activations;

// -zt: one traced event (the sharding section): a timing event recorded on the stream where the
// thing happens, and its line of the trace, without the time (read at the step's end).
typedef struct { cudaEvent_t event; char text[160]; } TraceRecord;

// Bytes on the GPU, per category (the start-up table compares them with the plan), and in pinned
// host memory with the optimizer state offloaded (-zo 1).
typedef struct { size_t params, grads, grad_scratch, optimizer, buffers, activations, workspace, host_optimizer, host_staging; } MemoryUse;

// What a captured micro-step (-cg 1) was captured for: every scalar and buffer its kernels'
// arguments take that could change between calls. A graph replays its kernels with the arguments
// they were captured with, so a change in any of these means a new capture.
typedef struct {
    int B, T;
    float dlogits_scale;      // the classifier's scale: the loss's share of this micro-step
    void* acts_memory;        // the activations
    floatX* params;           // the parameters (stage 0: the whole slab)
    void* grads;              // the gradients
} GraphKey;

typedef struct {
    GPT2Config config;
    ZeroPlan plan;          // units, shards, memory and traffic for this stage and world size
    Comm* comm;             // all N ranks: the step's scalars, barriers
    Comm* group;            // the G ranks of this rank's shard group: the ZeRO collectives (comm itself unless -zg)
    Comm* across;           // -zg: the N/G ranks holding this rank's shard, one per group (NULL: one group)
    // parameters (floatX: what the forward and backward read)
    floatX* params;         // (layout.total) full unit-major slab, stages 0-2; padding stays 0
    floatX* param_shard;    // (plan.shard_total) this rank's slice of every unit, stage 3
    floatX* gather_unit0;   // (unit_size[0]) stage 3: unit 0 while gathered
    floatX* gather_blocks;  // (block_gather_buffers, unit_size[1]) stage 3: block unit u in slot (u-1) % count
    // gradients, accumulated and reduced in grad_bytes per element (-zd): floatX, or float in the
    // bf16 build with -zd fp32 (Megatron's "main grads"), when the backward's kernels write floatX
    // into grad_scratch and each unit's end adds that into these (grad_accumulate)
    int grad_bytes;         // 2 (bf16) or 4 (fp32): the element type of the four buffers below
    void* grads;            // (layout.total) full local gradient, when plan.full_grads
    void* grad_shard;       // (plan.shard_total) stages 2-3: this rank's reduced slices
    void* grad_unit0;       // (unit_size[0]) stages 2-3 without accumulation: unit 0's gradient
    void* grad_blocks;      // (2, unit_size[1]) stages 2-3 without accumulation: block unit u in slot (u-1) % 2
    floatX* grad_scratch;   // (unit_size[0] + unit_size[1]) -zd fp32 in the bf16 build: unit 0, then the block unit in its backward
    // fp32 master weights and AdamW moments: (layout.total) in stage 0, (plan.shard_total) from
    // stage 1 on. AdamW updates the master; the floatX params are its rounding. With -zo 1 they
    // are pinned host memory and the host updates them (the offload section).
    float* master;
    float* m;
    float* v;
    // optimizer-state offload (-zo 1, stages 1-3; the offload section)
    int offload;
    floatX* grad_host;      // (plan.shard_total) pinned: the reduced grad shard, copied down unit by unit
    floatX* param_host;     // (plan.shard_total) pinned: the updated param shard, copied up unit by unit
    cudaStream_t copy_stream;           // the copies between the device and the host
    cudaEvent_t grad_down[MAX_UNITS];   // copy stream: unit u's grad shard is on the host
    cudaEvent_t param_up[MAX_UNITS];    // copy stream: unit u's updated param shard is on the device
    double pcie_bytes[2];   // bytes copied down (grads) and up (params) since the step began
    double* norm_squared;   // (1) on the device: this rank's part of the gradient's sum of squares
    double* norm_host;      // (1) pinned: its copy on the host (a copy into pageable memory would block the host)
    double* norm_scratch;   // global_norm_squared's partials
    GlobalNormPart* norm_parts; // (num_units) on the device: the gradient slice of each unit the norm sums (gpt2_grad_norm)
    // stage 3's walk (llmc/zero_plan.h; host), and the events that order the buffers on the two streams
    ZeroWalk walk;
    cudaEvent_t gathered[MAX_UNITS];    // comm stream: unit u's all-gather is done
    cudaEvent_t slot_free[MAX_UNITS];   // compute stream: block slot s is read for the last time (s < block buffers)
    cudaEvent_t unit0_free;             // compute stream: the unit-0 buffer is read for the last time
    // stage 2-3 gradient buffers
    cudaEvent_t grad_slot_reduced[2];   // comm stream: the slot's reduce-scatter is done
    cudaEvent_t handoff;                // one stream waits for the other (recorded and waited at once)
    // stages 1-2: unit u's params all-gather after the update is queued (gathered[u] recorded) and
    // the compute stream has not waited for it yet; the unit's next use waits (unit_params)
    int params_gathering[MAX_UNITS];
    // activations
    Activations acts;
    void* acts_memory;
    int B, T;               // the largest batch the activations hold
    int recompute;          // -r
    int* inputs;            // (B,T) device copy of the last forward's inputs
    int* targets;           // (B,T) device copy of its targets
    int* inputs_host;       // (B,T) pinned: the last forward's inputs, copied up from here (and the
                            // encoder backward buckets its tokens on the host)
    int* targets_host;      // (B,T) pinned: its targets, copied up from here
    cudaEvent_t inputs_copied; // compute stream: the last forward's copies from inputs_host / targets_host are done
    // The losses come down without a host wait: each training micro-step's (B,T) losses go to
    // their own slot of this pinned buffer, and the step's end reads them all (train_step)
    float* losses_host;     // (loss_slots, B, T) pinned
    int loss_slots;         // slots allocated (gpt2_reserve_loss_slots; 1 at first)
    int loss_slot;          // where the next forward's losses go (0 outside a training step)
    cudaEvent_t losses_copied; // compute stream: the last forward's losses are on the host
    int host_syncs;         // this step's waits for the compute stream to drain (wait_for_gpu)
    int last_B, last_T;     // shape of the last forward
    int has_targets;        // the last forward had targets (losses are pending)
    float dlogits_scale;    // != 0: the last forward also wrote dlogits for a backward
    EncoderBackwardScratch encoder_scratch;
    cudaStream_t stream;    // the compute stream
    // -cg 1: each training micro-step's forward and backward kernels as one CUDA graph (the
    // training-step section: gpt2_train_micro_step), captured once and replayed while its key holds
    int use_graph;
    cudaGraphExec_t graph_exec; // NULL: none captured yet
    GraphKey graph_key;         // what it was captured for
    int graph_captures;         // captures so far
    size_t graph_nodes;         // the graph's nodes (kernels, memsets, cuBLASLt products)
    MemoryUse mem;
    // -zt: this rank's trace (the sharding section)
    FILE* trace;            // the trace file, or NULL
    int trace_step;         // the training step being traced (0: none, outside a step)
    TraceRecord* trace_records;         // this step's events so far
    int trace_count, trace_capacity;
    cudaEvent_t trace_start;            // recorded on the compute stream when the step began
    double trace_start_host;            // the host's clock when it saw trace_start done
} GPT2;

// The 12 tensors of a block, carved from the start of its unit (params or grads).
static BlockTensors block_tensors(const GPT2* model, floatX* unit, int l) {
    const size_t* o = model->plan.layout.offset_in_unit;
    unit += block_offset(&model->plan.layout, l);
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

// The offload section (after the sharding schedule): the optimizer state in host memory (-zo 1).
static void offload_init(GPT2* model);
static void offload_free(GPT2* model);
static void norm_parts_init(GPT2* model); // the update section: the slices gpt2_grad_norm sums

// The host waits for everything queued on the compute stream so far (polled, with -wt's
// deadline). Counted per step (the step line prints it): each one leaves the GPU idle until the
// host queues more, so a step has only the two it needs, the gradient norm and the step's end.
static void wait_for_gpu(GPT2* model, const char* what) {
    model->host_syncs++;
    comm_sync(model->comm, model->stream, what);
}

static floatX* alloc_floatx(size_t* counter, size_t n, const char* what) {
    return (floatX*)cuda_malloc_counted(counter, n * sizeof(floatX), what);
}
static float* alloc_float(size_t* counter, size_t n, const char* what) {
    return (float*)cuda_malloc_counted(counter, n * sizeof(float), what);
}
static void* alloc_grads(GPT2* model, size_t n, const char* what) {
    return cuda_malloc_counted(&model->mem.grads, n * model->grad_bytes, what);
}

// Element `i` of a gradient buffer of grad_bytes elements.
static void* grad_at(const GPT2* model, void* base, size_t i) { return (char*)base + i * model->grad_bytes; }

// The plan's bytes per element for -zd's choice (opt.grad_bytes, 0: floatX): floatX params,
// fp32 master + m + v, NCCL reduce-scatters in place.
static StateBytes cuda_state_bytes(ZeroOptions opt) {
    int floatx = (int)sizeof(floatX), grad = opt.grad_bytes == 0 ? floatx : opt.grad_bytes;
    if (grad != floatx && grad != 4) { fail("internal: %d-byte gradients in the %s build", grad, PRECISION_NAME); }
    StateBytes bytes = ZERO_STATE_BYTES_CUDA(floatx, grad);
    return bytes;
}

// Makes the plan and allocates what it says this rank holds (zeroed). The parameters are set
// later (gpt2_set_params), from a file or a fresh initialization.
void gpt2_init(GPT2* model, const GPT2Config* config, Comm* comm, ZeroOptions opt, int recompute) {
    memset(model, 0, sizeof(*model));
    model->config = *config;
    model->comm = comm;
    model->recompute = recompute;
    StateBytes bytes = cuda_state_bytes(opt);
    model->grad_bytes = bytes.grad;
    // 16-byte packs (cuda_common.cuh): units and shards start on multiples of UNIT_ALIGN = 16
    // elements, tensors inside a unit and the activations' rows on multiples of C, the logits'
    // rows on multiples of Vp; so every tensor starts 16-byte aligned when C and Vp are
    // multiples of the pack (GPT-2: C = 64 k, Vp a multiple of 128). The launchers check each pointer.
    if (config->channels % PACKX_SIZE != 0 || config->padded_vocab_size % PACKX_SIZE != 0) {
        fail("the CUDA trainer needs the channels C (%d) and the padded vocabulary Vp (%d) to be multiples of %d: its "
             "kernels move 16-byte packs of %s, so every tensor must start on a 16-byte boundary",
             config->channels, config->padded_vocab_size, PACKX_SIZE, PRECISION_NAME);
    }
    zero_plan_init(&model->plan, config, opt.stage, comm->world_size, opt.group_size, opt.grad_accum, opt.reshard,
                   opt.prefetch, opt.unit_blocks, bytes, UNIT_ALIGN);
    const ZeroPlan* p = &model->plan;
    const ParamLayout* lay = &p->layout;
    MemoryUse* mem = &model->mem;
    // -zg: groups of G consecutive ranks; across them, the ranks with the same place in their group
    model->group = comm;
    if (p->replicas > 1) {
        model->group = (Comm*)mallocCheck(sizeof(Comm));
        model->across = (Comm*)mallocCheck(sizeof(Comm));
        comm_split(comm, comm->rank / p->group_size, comm->rank, model->group, "the shard group's communicator (-zg)");
        comm_split(comm, comm->rank % p->group_size, comm->rank, model->across, "the communicator across shard groups (-zg)");
    }
    size_t unit0 = lay->unit_size[0], block = lay->num_units > 1 ? lay->unit_size[1] : 0;
    if (p->stage < 3) { model->params = alloc_floatx(&mem->params, lay->total, "the parameters"); }
    else {
        model->param_shard = alloc_floatx(&mem->params, p->shard_total, "the parameter shard");
        model->gather_unit0 = alloc_floatx(&mem->buffers, unit0, "the unit-0 gather buffer");
        model->gather_blocks = alloc_floatx(&mem->buffers, (size_t)p->block_gather_buffers * block, "the block gather buffers");
    }
    if (p->full_grads) { model->grads = alloc_grads(model, lay->total, "the gradients"); }
    if (p->stage >= 2) {
        model->grad_shard = alloc_grads(model, p->shard_total, "the gradient shard");
        if (!p->full_grads) {
            model->grad_unit0 = alloc_grads(model, unit0, "the unit-0 gradient");
            model->grad_blocks = alloc_grads(model, 2 * block, "the block gradient buffers");
        }
    }
    if (p->mem_grad_scratch > 0) { model->grad_scratch = alloc_floatx(&mem->grad_scratch, unit0 + block, "the gradient scratch"); }
    if (opt.offload) { offload_init(model); } // master, m, v on the host
    else {
        size_t opt_n = p->stage == 0 ? lay->total : p->shard_total;
        model->master = alloc_float(&mem->optimizer, opt_n, "the master weights");
        model->m = alloc_float(&mem->optimizer, opt_n, "AdamW m");
        model->v = alloc_float(&mem->optimizer, opt_n, "AdamW v");
    }
    model->norm_squared = (double*)cuda_malloc_counted(&mem->workspace, sizeof(double), "the norm");
    model->norm_scratch = (double*)cuda_malloc_counted(&mem->workspace, GLOBAL_NORM_SCRATCH * sizeof(double), "the norm partials");
    model->norm_parts = (GlobalNormPart*)cuda_malloc_counted(&mem->workspace, lay->num_units * sizeof(GlobalNormPart), "the norm's slices");
    cudaCheck(cudaMallocHost((void**)&model->norm_host, sizeof(double)));
    // a blocking stream: a plain cudaMemcpy (tests, checkpoints) waits for its work
    cudaCheck(cudaStreamCreate(&model->stream));
    matmul_init(&mem->workspace);
    for (int u = 0; u < lay->num_units; u++) {
        cudaCheck(cudaEventCreateWithFlags(&model->gathered[u], cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&model->slot_free[u], cudaEventDisableTiming));
    }
    cudaCheck(cudaEventCreateWithFlags(&model->unit0_free, cudaEventDisableTiming));
    for (int s = 0; s < 2; s++) {
        cudaCheck(cudaEventCreateWithFlags(&model->grad_slot_reduced[s], cudaEventDisableTiming));
    }
    cudaCheck(cudaEventCreateWithFlags(&model->handoff, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&model->inputs_copied, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&model->losses_copied, cudaEventDisableTiming));
    zero_walk_init(&model->walk, p->block_units);
    norm_parts_init(model);
}

// float -> floatX on the device, for installing parameters (master -> params).
__global__ void round_to_floatx_kernel(floatX* out, const float* in, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = from_float(in[i]); }
}

static void round_to_floatx(floatX* out, const float* in, size_t n, cudaStream_t s) {
    if (n == 0) { return; }
    round_to_floatx_kernel<<<ceil_div(n, 256), 256, 0, s>>>(out, in, n);
    cudaCheckLaunch();
}

// Installs a full slab of fp32 parameters (host), unit by unit: the master weights keep them
// exactly (all of them in stage 0, this rank's slices from stage 1), the floatX params are
// their rounding (exact for a bf16 file): the full slab in stages 0-2, the slices in stage 3.
void gpt2_set_params(GPT2* model, const float* full) {
    const ZeroPlan* p = &model->plan;
    const ParamLayout* lay = &p->layout;
    int rank = zero_group_rank(p, model->comm->rank);
    cudaStream_t s = model->stream;
    float* unit = alloc_float(NULL, p->max_shard_size * p->group_size, "a unit"); // the largest unit
    for (int u = 0; u < lay->num_units; u++) {
        size_t n = lay->unit_size[u], S = p->shard_size[u];
        cudaCheck(cudaMemcpyAsync(unit, full + lay->unit_offset[u], n * sizeof(float), cudaMemcpyHostToDevice, s));
        if (p->stage < 3) { round_to_floatx(model->params + lay->unit_offset[u], unit, n, s); }
        else { round_to_floatx(model->param_shard + p->shard_offset[u], unit + rank * S, S, s); }
        // cudaMemcpyDefault: the master is device memory, or pinned host memory with -zo 1
        if (p->stage == 0) {
            cudaCheck(cudaMemcpyAsync(model->master + lay->unit_offset[u], unit, n * sizeof(float), cudaMemcpyDefault, s));
        } else {
            cudaCheck(cudaMemcpyAsync(model->master + p->shard_offset[u], unit + rank * S, S * sizeof(float), cudaMemcpyDefault, s));
        }
        cudaCheck(cudaStreamSynchronize(s)); // `unit` is reused; no collective is involved
    }
    cudaCheck(cudaFree(unit));
}

// The full fp32 parameters (the master weights) on the host, for saving; every rank must call
// it (from stage 1 on, each unit's master slices are all-gathered). Caller frees.
float* gpt2_full_params(GPT2* model) {
    const ZeroPlan* p = &model->plan;
    const ParamLayout* lay = &p->layout;
    Comm* comm = model->group;
    float* full = (float*)mallocCheck(lay->total * sizeof(float));
    // host waits go through comm_sync (polled, with the deadline); the copies into pageable
    // memory below then find their stream idle, so they cannot block on a stuck collective
    comm_sync(comm, model->stream, "the parameters to copy");
    if (p->stage == 0) {
        cudaCheck(cudaMemcpy(full, model->master, lay->total * sizeof(float), cudaMemcpyDeviceToHost));
        return full;
    }
    float* unit = alloc_float(NULL, p->max_shard_size * p->group_size, "a unit"); // the largest unit
    stream_wait_for(comm->stream, model->stream, model->handoff); // the master is up to date
    for (int u = 0; u < lay->num_units; u++) {
        // this rank's slice into place (from the device, or the host with -zo 1: NCCL gathers
        // device memory), then an in-place all-gather
        float* mine = unit + (size_t)comm->rank * p->shard_size[u];
        cudaCheck(cudaMemcpyAsync(mine, model->master + p->shard_offset[u], p->shard_size[u] * sizeof(float), cudaMemcpyDefault, comm->stream));
        comm_all_gather(comm, mine, unit, p->shard_size[u], sizeof(float), u);
        comm_sync(comm, comm->stream, "the parameters to gather for saving");
        cudaCheck(cudaMemcpy(full + lay->unit_offset[u], unit, lay->unit_size[u] * sizeof(float), cudaMemcpyDeviceToHost));
    }
    cudaCheck(cudaFree(unit));
    return full;
}

// One process, any stage, from a model file, fp32 (v3) or bf16 (v5): what test_gpt2.cu uses.
void gpt2_build_from_checkpoint(GPT2* model, Comm* comm, const char* path, ZeroOptions opt, int recompute) {
    GPT2Config config;
    int version;
    FILE* fp = model_file_open(path, &config, &version);
    gpt2_init(model, &config, comm, opt, recompute);
    float* full = (float*)callocCheck(model->plan.layout.total, sizeof(float));
    model_file_read(fp, path, &config, &model->plan.layout, full, version);
    fclose(fp);
    gpt2_set_params(model, full);
    free(full);
}

// The activation tensors of a B x T batch in one allocation (what -r keeps decides their sizes):
// returns its bytes, and with base != NULL points a's tensors into it.
static size_t activations_layout(Activations* a, char* base, const GPT2Config* c, int recompute, int B, int T) {
    size_t L = c->num_layers, NH = c->num_heads, C = c->channels, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    size_t L_ln = recompute >= 2 ? 1 : L, L_gelu = recompute >= 1 ? 1 : L;
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
        {(void**)&a->dbt4c, BT * 4 * C, sizeof(floatX)},    {(void**)&a->att_scratch, attention_backward_scratch_floats(B, T, (int)C, (int)NH), sizeof(float)},
        {(void**)&a->ln_scratch, layernorm_backward_scratch_floats((int)BT, (int)C), sizeof(float)},
        {(void**)&a->dbias_scratch, matmul_dbias_scratch_floats((int)Vp), sizeof(float)}, // Vp: the widest OC
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        if (base != NULL) { *parts[i].ptr = base + total; }
        total += round_up(parts[i].n * parts[i].size, 256); // every tensor 256-byte aligned
    }
    return total;
}

// The device memory of a B x T batch outside the plan: the activations, the inputs and targets.
static size_t activations_bytes(const GPT2Config* c, int recompute, int B, int T) {
    Activations unused;
    return activations_layout(&unused, NULL, c, recompute, B, T) + 2 * (size_t)B * T * sizeof(int);
}

// Room for n micro-steps' losses (train_step: one slot per micro-step), before a step begins.
static void gpt2_reserve_loss_slots(GPT2* model, int n) {
    if (n <= model->loss_slots) { return; }
    comm_sync(model->comm, model->stream, "the losses' copies before their buffer grows"); // once, before the first step
    cudaCheck(cudaFreeHost(model->losses_host));
    cudaCheck(cudaMallocHost((void**)&model->losses_host, (size_t)n * model->B * model->T * sizeof(float)));
    model->loss_slots = n;
}

// Carves the activation slab for batches of up to B x T.
static void gpt2_alloc_activations(GPT2* model, int B, int T) {
    size_t BT = (size_t)B * T;
    size_t total = activations_layout(&model->acts, NULL, &model->config, model->recompute, B, T);
    model->acts_memory = cuda_malloc_counted(&model->mem.activations, total, "the activations");
    activations_layout(&model->acts, (char*)model->acts_memory, &model->config, model->recompute, B, T);
    model->B = B;
    model->T = T;
    model->inputs = (int*)cuda_malloc_counted(&model->mem.activations, BT * sizeof(int), "the inputs");
    model->targets = (int*)cuda_malloc_counted(&model->mem.activations, BT * sizeof(int), "the targets");
    cudaCheck(cudaMallocHost((void**)&model->inputs_host, BT * sizeof(int)));
    cudaCheck(cudaMallocHost((void**)&model->targets_host, BT * sizeof(int)));
    cudaCheck(cudaMallocHost((void**)&model->losses_host, BT * sizeof(float)));
    model->loss_slots = 1;
    model->loss_slot = 0;
    encoder_backward_scratch_init(&model->encoder_scratch, B, T);
}

// The sharding schedule (its own section below, after the update): what the forward and
// backward call around each unit. For stages 0-2 they hand out pointers into the full slabs;
// for stage 3 they gather and release, and for stages 0-3 they reduce gradients unit by unit.
static void schedule_begin_micro_step(GPT2* model);
static void schedule_begin_backward(GPT2* model);
static floatX* unit_params(GPT2* model, int u);          // gather (stage 3), then the unit's params
static void unit_release_after_forward(GPT2* model, int u);
static void unit_release_after_backward(GPT2* model, int u);
void units_release_all(GPT2* model);
static floatX* unit_grads(GPT2* model, int u);           // where the unit's backward adds its grads
static void unit_grads_done(GPT2* model, int u, int reduce);
static void unit_grads_reduce(GPT2* model, int u);
static floatX* unit_grad_target(GPT2* model, int u);

// ----------------------------------------------------------------------------
// forward

// The forward of a batch of B x T tokens (inputs, targets: host (B,T); targets may be NULL).
// With targets the classifier computes each position's loss (their mean: gpt2_mean_loss).
// loss_scale != 0 asks for a backward to follow: the weight of this batch's mean loss in the
// step's objective, 1 / (micro-steps x ranks); the classifier then also overwrites the logits
// with d(objective)/d(logits) (one pass over the (B,T,Vp) logits instead of two). In stage 3
// the units stay gathered as the backward needs them; call units_release_all after a forward
// that no backward follows.
//
// decode_pos >= 0 (gpt2_decode, sampling's key-value cache): one token (B = T = 1) at position
// decode_pos of a sequence whose earlier positions' q, k, v are already in the activations' qkv
// rows 0..decode_pos-1 of each layer (a->qkv as one (T, 3C) sequence per layer, at the stride of
// the batch the activations were sized for). Its own q, k, v go to row decode_pos, and the
// attention reads rows 0..decode_pos: every product is one row (the same shapes at every
// position), and no position is computed twice.
static void forward_upload(GPT2* model, const int* inputs, const int* targets, int B, int T, float loss_scale, int decode_pos);
static void forward_prepared(GPT2* model, const int* targets, int B, int T, float loss_scale);
static void forward_kernels(GPT2* model, int B, int T, int decode_pos);
static void forward_losses_down(GPT2* model);

static void gpt2_forward_at(GPT2* model, const int* inputs, const int* targets, int B, int T, float loss_scale, int decode_pos) {
    forward_upload(model, inputs, targets, B, T, loss_scale, decode_pos);
    forward_kernels(model, B, T, decode_pos);
    if (targets != NULL) { forward_losses_down(model); }
}

// The forward's host part: its checks, its batch up to the device, its shape and loss scale.
static void forward_upload(GPT2* model, const int* inputs, const int* targets, int B, int T, float loss_scale, int decode_pos) {
    const GPT2Config* c = &model->config;
    int V = c->vocab_size;
    if (T > c->max_seq_len) { fail("sequence length %d exceeds the model's maximum %d", T, c->max_seq_len); }
    if (model->acts_memory == NULL) { gpt2_alloc_activations(model, B, T); }
    if ((size_t)B * T > (size_t)model->B * model->T || T > model->T) {
        fail("batch %dx%d is larger than the %dx%d the activations were sized for", B, T, model->B, model->T);
    }
    if (targets == NULL && loss_scale != 0.0f) { fail("internal: a backward asked for without targets"); }
    if (decode_pos >= 0 && (B != 1 || T != 1 || targets != NULL || decode_pos >= model->T)) {
        fail("internal: decode at position %d of %d with B=%d T=%d", decode_pos, model->T, B, T);
    }
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) { fail("input token %d at %d is outside the vocabulary of %d", inputs[i], i, V); }
        if (targets != NULL && (targets[i] < 0 || targets[i] >= V)) { fail("target token %d at %d is outside the vocabulary of %d", targets[i], i, V); }
    }
    cudaStream_t s = model->stream;
    size_t BT = (size_t)B * T;
    // The batch goes up from pinned buffers: a copy from pageable memory may make the host wait
    // for the stream first (CUDA's "API synchronization behavior"), and the host must not wait
    // for the previous micro-step. Only for the previous forward's copies from these buffers: the
    // host is then at most a micro-step ahead of the GPU, which still has that micro-step queued.
    comm_wait_event(model->comm, model->inputs_copied, "the previous batch's copy to the device");
    memcpy(model->inputs_host, inputs, BT * sizeof(int));
    cudaCheck(cudaMemcpyAsync(model->inputs, model->inputs_host, BT * sizeof(int), cudaMemcpyHostToDevice, s));
    if (targets != NULL) {
        memcpy(model->targets_host, targets, BT * sizeof(int));
        cudaCheck(cudaMemcpyAsync(model->targets, model->targets_host, BT * sizeof(int), cudaMemcpyHostToDevice, s));
    }
    cudaCheck(cudaEventRecord(model->inputs_copied, s));
    forward_prepared(model, targets, B, T, loss_scale);
}

// The host's part of a forward after its batch went up: the shape, the loss's slot and scale.
static void forward_prepared(GPT2* model, const int* targets, int B, int T, float loss_scale) {
    size_t BT = (size_t)B * T;
    if (targets != NULL && model->loss_slot >= model->loss_slots) {
        fail("internal: loss slot %d of %d", model->loss_slot, model->loss_slots);
    }
    model->last_B = B;
    model->last_T = T;
    model->has_targets = targets != NULL;
    // each position's loss has weight 1/(B*T) in the batch's mean (as train_gpt2.c's dloss)
    float dlogits_scale = loss_scale / (float)BT;
    model->dlogits_scale = dlogits_scale;
    schedule_begin_micro_step(model);
}

// The forward's device work, from the batch on the device (model->inputs, model->targets) to the
// logits, and with targets the losses (and dlogits when a backward follows). No host wait and no
// host-side data: a CUDA graph can hold it (-cg 1).
static void forward_kernels(GPT2* model, int B, int T, int decode_pos) {
    const GPT2Config* c = &model->config;
    int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers, NH = c->num_heads, C = c->channels;
    cudaStream_t s = model->stream;
    size_t BT = (size_t)B * T, BTC = BT * C;
    float dlogits_scale = model->dlogits_scale;
    Activations* a = &model->acts;
    floatX* ends = unit_params(model, 0);
    const floatX* wpe = unit0_tensor(model, ends, WPE) + (decode_pos >= 0 ? (size_t)decode_pos * C : 0); // position 0's row onward
    encoder_forward(a->encoded, model->inputs, unit0_tensor(model, ends, WTE), wpe, B, T, C, s);
    unit_release_after_forward(model, 0);
    const ParamLayout* lay = &model->plan.layout;
    floatX* unit = NULL;
    for (int l = 0; l < L; l++) {
        int u = unit_of_block(lay, l);
        if (l == unit_first_block(lay, u)) { unit = unit_params(model, u); } // a unit's first block gathers it
        BlockTensors w = block_tensors(model, unit, l);
        const floatX* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        floatX* ln1 = a->ln1 + (model->recompute >= 2 ? 0 : l * BTC);
        floatX* ln2 = a->ln2 + (model->recompute >= 2 ? 0 : l * BTC);
        floatX* qkv = a->qkv + l * BTC * 3;
        if (decode_pos >= 0) { qkv = a->qkv + ((size_t)l * model->B * model->T + decode_pos) * 3 * C; } // the layer's cache row
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
        if (decode_pos >= 0) { attention_decode(atty, qkv - (size_t)decode_pos * 3 * C, decode_pos, C, NH, s); }
        else { attention_forward(atty, a->att_lse + (size_t)l * B * NH * T, qkv, B, T, C, NH, s); }
        matmul_forward(a->proj, atty, w.attprojw, w.attprojb, (int)BT, C, C, s);
        fused_residual_layernorm_forward(residual2, ln2, ln2_mean, ln2_rstd, residual, a->proj, w.ln2w, w.ln2b, (int)BT, C, s);
        matmul_forward_gelu(fch_gelu, fch, ln2, w.fcw, w.fcb, (int)BT, C, 4 * C, s); // GELU in the epilogue
        matmul_forward(a->proj, fch_gelu, w.fcprojw, w.fcprojb, (int)BT, 4 * C, C, s);
        if (l == unit_last_block(lay, u)) { unit_release_after_forward(model, u); }
    }
    ends = unit_params(model, 0); // stays gathered: the backward starts with it
    // the last block's residual add, fused with the final layernorm
    fused_residual_layernorm_forward(a->residual3 + (L - 1) * BTC, a->lnf, a->lnf_mean, a->lnf_rstd,
                                     a->residual2 + (L - 1) * BTC, a->proj, unit0_tensor(model, ends, LNFW),
                                     unit0_tensor(model, ends, LNFB), (int)BT, C, s);
    // the LM head is tied to the token embedding: logits = lnf @ wte^T
    matmul_forward(a->logits, a->lnf, unit0_tensor(model, ends, WTE), NULL, (int)BT, C, Vp, s);
    if (model->has_targets) {
        fused_classifier(a->logits, a->losses, model->targets, dlogits_scale, (int)BT, V, Vp, dlogits_scale != 0.0f, s);
    }
}

// The last forward's (B,T) losses down into their pinned slot, without a host wait.
static void forward_losses_down(GPT2* model) {
    size_t BT = (size_t)model->last_B * model->last_T;
    float* slot = model->losses_host + (size_t)model->loss_slot * model->B * model->T;
    cudaCheck(cudaMemcpyAsync(slot, model->acts.losses, BT * sizeof(float), cudaMemcpyDeviceToHost, model->stream));
    cudaCheck(cudaEventRecord(model->losses_copied, model->stream));
}

void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T, float loss_scale) {
    gpt2_forward_at(model, inputs, targets, B, T, loss_scale, -1);
}

// The mean of BT losses on the host, summed in a fixed order.
static float mean_of_losses(const float* losses, size_t BT) {
    double sum = 0.0;
    for (size_t i = 0; i < BT; i++) { sum += losses[i]; }
    return (float)(sum / BT);
}

// The last forward's per-position losses (B,T) on the host (it must have had targets): waits for
// their copy, not for the whole stream (call it after the backward is queued, which keeps going).
const float* gpt2_losses(GPT2* model) {
    if (!model->has_targets) { fail("internal: no forward with targets to take the losses of"); }
    comm_wait_event(model->comm, model->losses_copied, "the losses");
    return model->losses_host + (size_t)model->loss_slot * model->B * model->T;
}

// The mean loss of the last forward (which had targets). Training reads its micro-steps' losses
// at the step's end instead (train_step), without a wait per micro-step.
float gpt2_mean_loss(GPT2* model) {
    const float* losses = gpt2_losses(model);
    return mean_of_losses(losses, (size_t)model->last_B * model->last_T);
}

// ----------------------------------------------------------------------------
// backward

// Adds the last forward's gradients into the unit gradients. That forward must have been a
// training forward (dlogits_scale != 0: the logits hold dlogits, scaled by the caller's share of
// the step's mean loss / (B*T)). With `reduce` (the step's last micro-step), each unit's
// gradients are reduced across the ranks as soon as its backward is done.
static void backward_blocks(GPT2* model, int reduce);
static void backward_encoder(GPT2* model, int reduce);

void gpt2_backward(GPT2* model, int reduce) {
    if (model->dlogits_scale == 0.0f) { fail("internal: backward without a training forward"); }
    backward_blocks(model, reduce);
    backward_encoder(model, reduce);
}

// The backward's device work from the head through block 0's layernorm: dresidual then holds
// d(loss)/d(encoded). No host wait and no host-side data: a CUDA graph can hold it (-cg 1, with
// reduce = 0: the graph's caller queues the reductions after it).
static void backward_blocks(GPT2* model, int reduce) {
    const GPT2Config* c = &model->config;
    int Vp = c->padded_vocab_size, L = c->num_layers, NH = c->num_heads, C = c->channels;
    int B = model->last_B, T = model->last_T;
    cudaStream_t s = model->stream;
    Activations* a = &model->acts;
    size_t BT = (size_t)B * T, BTC = BT * C;
    schedule_begin_backward(model);

    // the head and the final layernorm: unit 0, still gathered from the forward (every policy
    // keeps it), so this unit_params gathers nothing; it moves stage 3's walk on to the backward,
    // where it may queue the prefetch of the last block unit
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
    unit_release_after_backward(model, 0);

    const ParamLayout* lay = &model->plan.layout;
    floatX* unit = NULL, *dunit = NULL;
    for (int l = L - 1; l >= 0; l--) {
        // the backward meets a unit at its last block, and is done with it after its first
        int u = unit_of_block(lay, l);
        if (l == unit_last_block(lay, u)) {
            unit = unit_params(model, u);
            dunit = unit_grads(model, u);
        }
        BlockTensors w = block_tensors(model, unit, l);
        BlockTensors dw = block_tensors(model, dunit, l);
        const floatX* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BTC;
        floatX* ln1 = a->ln1 + (model->recompute >= 2 ? 0 : l * BTC);
        floatX* ln2 = a->ln2 + (model->recompute >= 2 ? 0 : l * BTC);
        floatX* fch = a->fch + l * BTC * 4;
        floatX* fch_gelu = a->fch_gelu + (model->recompute >= 1 ? 0 : l * BTC * 4);
        float* ln1_mean = a->ln1_mean + l * BT, *ln1_rstd = a->ln1_rstd + l * BT;
        float* ln2_mean = a->ln2_mean + l * BT, *ln2_rstd = a->ln2_rstd + l * BT;
        // recompute what the forward did not keep (the statistics are rewritten with the same values).
        // The forward's GELU is the fc product's epilogue, from the fp32 sum that is never stored, so
        // its bits come back only from that product: -r >= 1 runs it again (fch is rewritten with
        // the bits it holds), a matmul where a GELU kernel on the rounded fch would give other bits.
        if (model->recompute >= 2) {
            layernorm_forward(ln1, ln1_mean, ln1_rstd, residual, w.ln1w, w.ln1b, (int)BT, C, s);
            layernorm_forward(ln2, ln2_mean, ln2_rstd, a->residual2 + l * BTC, w.ln2w, w.ln2b, (int)BT, C, s);
        }
        if (model->recompute >= 1) { matmul_forward_gelu(fch_gelu, fch, ln2, w.fcw, w.fcb, (int)BT, C, 4 * C, s); }
        // dresidual holds d(loss)/d(residual3 of layer l); the residual adds pass it through
        // unchanged, and each layernorm branch adds its part into it.
        // The two projections that write into the residual stream (fcproj above ln2, attproj
        // below it) have as bias gradient the column sums of dresidual as ln2's backward reads it
        // and as it writes it: that kernel sums them (LAYERNORM_SUMS_RESIDUAL), so their products
        // take no bias gradient of their own (no pass over dresidual for it).
        floatX* dfch = a->dbt4c; // GELU's backward is the DGELU epilogue of the product (aux = fch)
        matmul_backward(dfch, dw.fcprojw, NULL, NULL, dresidual, fch_gelu, w.fcprojw, (int)BT, 4 * C, C, s, fch);
        floatX* dln2 = a->dbtc;
        matmul_backward(dln2, dw.fcw, dw.fcb, a->dbias_scratch, dfch, ln2, w.fcw, (int)BT, C, 4 * C, s);
        layernorm_backward(dresidual, dw.ln2w, dw.ln2b, a->ln_scratch, dln2, a->residual2 + l * BTC, w.ln2w,
                           ln2_mean, ln2_rstd, (int)BT, C, s, dw.fcprojb, dw.attprojb);
        // dresidual is now d(loss)/d(residual2)
        floatX* datty = a->dbtc;
        floatX* dqkv = a->dbt4c; // dfch is done with
        matmul_backward(datty, dw.attprojw, NULL, NULL, dresidual, a->atty + l * BTC, w.attprojw, (int)BT, C, C, s);
        // the qkv bias gradient (column sums of dqkv) comes from the attention backward, which
        // writes dqkv: its product takes none (no pass over dqkv for it)
        attention_backward(dqkv, dw.qkvb, a->att_scratch, datty, a->qkv + l * BTC * 3, a->atty + l * BTC,
                           a->att_lse + (size_t)l * B * NH * T, B, T, C, NH, s);
        floatX* dln1 = a->dbtc; // datty is done with
        matmul_backward(dln1, dw.qkvw, NULL, NULL, dqkv, ln1, w.qkvw, (int)BT, C, 3 * C, s);
        layernorm_backward(dresidual, dw.ln1w, dw.ln1b, a->ln_scratch, dln1, residual, w.ln1w, ln1_mean, ln1_rstd, (int)BT, C, s);
        // dresidual is now d(loss)/d(residual3 of layer l-1)
        if (l == unit_first_block(lay, u)) {
            unit_release_after_backward(model, u);
            unit_grads_done(model, u, reduce);
        }
    }
}

// The encoder's backward: its gradient is unit 0's second part (wte again, and wpe); it needs no
// params. Its token buckets are made on the host from this batch (llmc/encoder.cuh), and its grid
// follows how many distinct tokens the batch has: it stays out of a graph.
static void backward_encoder(GPT2* model, int reduce) {
    floatX* dends = unit_grad_target(model, 0); // where unit_grads(model, 0) pointed the head's gradients
    encoder_backward(unit0_tensor(model, dends, WTE), unit0_tensor(model, dends, WPE), model->acts.dresidual,
                     model->inputs_host, model->last_B, model->last_T, model->config.channels, &model->encoder_scratch,
                     model->stream);
    unit_grads_done(model, 0, reduce);
    model->dlogits_scale = 0.0f; // the dlogits are used up
}

// Zeroes the gradients a step accumulates into (the full slab; stages 2-3 without accumulation
// zero each unit's buffer when they hand it out).
void gpt2_zero_grad(GPT2* model) {
    if (model->grads != NULL) {
        cudaCheck(cudaMemsetAsync(model->grads, 0, model->plan.layout.total * model->grad_bytes, model->stream));
    }
}

// ----------------------------------------------------------------------------
// update

// This rank's reduced gradient slice of unit u (after the step's reduce-scatters).
static void* grad_shard_of(GPT2* model, int u) {
    const ZeroPlan* p = &model->plan;
    if (p->stage >= 2) { return grad_at(model, model->grad_shard, p->shard_offset[u]); }
    return grad_at(model, model->grads, zero_slice_offset(p, u, model->comm->rank));
}

static double norm_squared_over_ranks(GPT2* model, double mine); // in the sharding section

// The slices the norm sums, one per unit: the N-way slice of the unit's reduced gradient this
// rank answers for (zero_rank_slice: its own slice unless -zg), n = unit_size / N elements,
// which start 16-element aligned. The gradient buffers live as long as the model, so the table
// is made once, on the device, for global_norm_squared's single pass over all units.
static void norm_parts_init(GPT2* model) {
    const ZeroPlan* p = &model->plan;
    int part = model->comm->rank / p->group_size; // which of the shard's R slices
    int units = p->layout.num_units;
    GlobalNormPart* parts = (GlobalNormPart*)mallocCheck(units * sizeof(GlobalNormPart));
    for (int u = 0; u < units; u++) {
        size_t n = p->layout.unit_size[u] / p->world_size;
        parts[u].x = grad_at(model, grad_shard_of(model, u), part * n);
        parts[u].n = n;
    }
    cudaCheck(cudaMemcpy(model->norm_parts, parts, units * sizeof(GlobalNormPart), cudaMemcpyHostToDevice));
    free(parts);
}

// Bytes of the norm's device workspace (gpt2_init; -z auto counts them before the plan exists).
static size_t norm_workspace_bytes(int num_units) {
    return (1 + GLOBAL_NORM_SCRATCH) * sizeof(double) + (size_t)num_units * sizeof(GlobalNormPart);
}

// The global gradient norm: each rank sums the squares of its slices (norm_parts_init) on the
// device, all units in one pass, and the partial sums are added in slice order, so every stage
// and every group size gets the same bits.
float gpt2_grad_norm(GPT2* model) {
    int units = model->plan.layout.num_units;
    double* out = model->norm_squared;
    if (model->grad_bytes == 4) { global_norm_squared<float>(out, model->norm_parts, units, model->norm_scratch, model->stream); }
    else { global_norm_squared<floatX>(out, model->norm_parts, units, model->norm_scratch, model->stream); }
    cudaCheck(cudaMemcpyAsync(model->norm_host, model->norm_squared, sizeof(double), cudaMemcpyDeviceToHost, model->stream));
    wait_for_gpu(model, "the gradient norm");
    return (float)sqrt(norm_squared_over_ranks(model, *model->norm_host));
}

// The tensors of unit u for AdamW (llmc/adamw.cuh's table): one piece (unit 0, or one block of
// a block unit, repeated for each of its blocks) of tensors in slab order with their decay flags;
// the padding after the unit's real elements is left alone (stays 0).
static AdamWTensors adamw_tensors_of_unit(const GPT2* model, int u) {
    const GPT2Config* c = &model->config;
    const ParamLayout* lay = &model->plan.layout;
    UnitKind kind = u == 0 ? UNIT_ENDS : UNIT_BLOCK;
    AdamWTensors t;
    memset(&t, 0, sizeof(t));
    t.piece = (unsigned int)(u == 0 ? lay->unit_numel[0] : lay->block_numel);
    t.real = (unsigned int)lay->unit_numel[u];
    for (int k = 0; k < NUM_PARAM_TENSORS; k++) { // each kind's tensors follow each other in file order
        if (TENSOR_INFO[k].unit != kind) { continue; }
        t.end[t.num_tensors] = (unsigned int)(lay->offset_in_unit[k] + tensor_numel(c, k));
        t.decay[t.num_tensors] = TENSOR_INFO[k].decay;
        t.num_tensors++;
    }
    if (lay->unit_size[u] > 0xFFFFFFFFull) { fail("unit %d has %zu elements: the update handles fewer than 2^32 per unit (-zu)", u, lay->unit_size[u]); }
    return t;
}

// AdamW on elements [lo, hi) of unit u, one launch; params, master, grads, m, v point at element
// lo. Weight decay applies to the 2-D weights only (adamw_tensors_of_unit says which elements);
// padding is left alone (stays 0). grads has grad_bytes elements. on_host: the pointers are host
// memory and the host computes (-zo 1), with the same table and per-element arithmetic as the
// kernel (llmc/adamw.cuh); offload keeps floatX gradients (train_args.h refuses -zd fp32 -zo 1).
static void adamw_unit_range(const GPT2* model, int u, size_t lo, size_t hi, floatX* params, float* master,
                             void* grads, float* m, float* v, const AdamWParams* hp, int on_host) {
    // the bias corrections on the host, as the CPU's adamw_update computes them
    const float bc1 = 1.0f - powf(hp->beta1, (float)hp->t), bc2 = 1.0f - powf(hp->beta2, (float)hp->t);
    AdamWTensors t = adamw_tensors_of_unit(model, u);
    size_t n = hi - lo;
    if (on_host) {
        adamw_update_host(params, master, (const floatX*)grads, m, v, n, lo, &t, hp->lr, hp->beta1, hp->beta2, bc1, bc2,
                          hp->eps, hp->weight_decay, hp->grad_scale);
    } else if (model->grad_bytes == 4) {
        adamw_update(params, master, (const float*)grads, m, v, n, lo, &t, hp->lr, hp->beta1, hp->beta2, bc1, bc2, hp->eps,
                     hp->weight_decay, hp->grad_scale, model->stream);
    } else {
        adamw_update(params, master, (const floatX*)grads, m, v, n, lo, &t, hp->lr, hp->beta1, hp->beta2, bc1, bc2,
                     hp->eps, hp->weight_decay, hp->grad_scale, model->stream);
    }
}

static void params_all_gather(GPT2* model); // stages 1-2, in the sharding section
static void offload_update(GPT2* model, const AdamWParams* hp); // -zo 1, in the offload section

static void params_wait_gathered(GPT2* model, int u); // stages 1-2, in the sharding section

// One optimizer step (t counts from 1) from the gradient norm (gpt2_grad_norm). Stage 0 updates
// every element on every rank (from the all-reduced gradients); stages 1-3 update their own
// slices, and stages 1-2 then all-gather the params.
static void gpt2_update_with_norm(GPT2* model, float norm, float lr, float beta1, float beta2, float eps,
                                  float weight_decay, float grad_clip, int t) {
    const ZeroPlan* p = &model->plan;
    int rank = zero_group_rank(p, model->comm->rank);
    AdamWParams hp = {lr, beta1, beta2, eps, weight_decay, t, grad_clip_scale(norm, grad_clip)};
    // stages 1-2: the update overwrites this rank's slices, which the last update's all-gathers
    // read; a forward in between has waited for them, but an update need not follow one
    for (int u = 0; u < p->layout.num_units; u++) { params_wait_gathered(model, u); }
    if (model->offload) { offload_update(model, &hp); } // the same update on the host (-zo 1)
    for (int u = 0; u < p->layout.num_units && !model->offload; u++) { // the GPU's update
        size_t off = p->layout.unit_offset[u], S = p->shard_size[u], so = p->shard_offset[u];
        if (p->stage == 0) {
            adamw_unit_range(model, u, 0, p->layout.unit_size[u], model->params + off, model->master + off,
                             grad_at(model, model->grads, off), model->m + off, model->v + off, &hp, 0);
        } else {
            floatX* params = p->stage == 3 ? model->param_shard + so : model->params + off + rank * S;
            adamw_unit_range(model, u, rank * S, (rank + 1) * S, params, model->master + so, grad_shard_of(model, u),
                             model->m + so, model->v + so, &hp, 0);
        }
    }
    if (p->stage == 1 || p->stage == 2) { params_all_gather(model); }
    // stage 3: the next step's gathers read the updated shard (with -zo 1 each waits for its unit's copy up)
    if (p->stage == 3) { stream_wait_for(model->comm->stream, model->stream, model->handoff); }
}

// The gradient norm, then the optimizer step; returns the norm before clipping.
float gpt2_update(GPT2* model, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_clip, int t) {
    float norm = gpt2_grad_norm(model);
    gpt2_update_with_norm(model, norm, lr, beta1, beta2, eps, weight_decay, grad_clip, t);
    return norm;
}

void gpt2_free(GPT2* model) {
    comm_sync(model->comm, model->stream, "the last kernels");
    comm_sync(model->comm, model->group->stream, "the last collectives"); // stages 1-2: the last update's gathers
    if (model->graph_exec != NULL) { cudaCheck(cudaGraphExecDestroy(model->graph_exec)); }
    int dev = !model->offload; // with -zo 1 master, m, v are host memory (offload_free)
    void* slabs[] = {model->params, model->param_shard, model->gather_unit0, model->gather_blocks, model->grads,
                     model->grad_shard, model->grad_unit0, model->grad_blocks, model->grad_scratch, dev ? model->master : NULL,
                     dev ? model->m : NULL, dev ? model->v : NULL, model->norm_squared, model->norm_scratch, model->norm_parts};
    for (size_t i = 0; i < sizeof(slabs) / sizeof(slabs[0]); i++) { cudaCheck(cudaFree(slabs[i])); } // NULL is fine
    if (model->acts_memory != NULL) {
        cudaCheck(cudaFree(model->acts_memory)); cudaCheck(cudaFree(model->inputs)); cudaCheck(cudaFree(model->targets));
        cudaCheck(cudaFreeHost(model->losses_host));
        cudaCheck(cudaFreeHost(model->inputs_host));
        cudaCheck(cudaFreeHost(model->targets_host));
        encoder_backward_scratch_free(&model->encoder_scratch);
    }
    for (int u = 0; u < model->plan.layout.num_units; u++) {
        cudaCheck(cudaEventDestroy(model->gathered[u]));
        cudaCheck(cudaEventDestroy(model->slot_free[u]));
    }
    cudaCheck(cudaEventDestroy(model->unit0_free));
    for (int s = 0; s < 2; s++) { cudaCheck(cudaEventDestroy(model->grad_slot_reduced[s])); }
    cudaCheck(cudaEventDestroy(model->handoff));
    cudaCheck(cudaEventDestroy(model->inputs_copied));
    cudaCheck(cudaEventDestroy(model->losses_copied));
    cudaCheck(cudaFreeHost(model->norm_host));
    if (model->offload) { offload_free(model); }
    if (model->trace != NULL) { // -zt
        fcloseCheck(model->trace, "the trace file");
        for (int i = 0; i < model->trace_capacity; i++) { cudaCheck(cudaEventDestroy(model->trace_records[i].event)); }
        cudaCheck(cudaEventDestroy(model->trace_start));
        free(model->trace_records);
    }
    matmul_free();
    cudaCheck(cudaStreamDestroy(model->stream));
    if (model->across != NULL) { // -zg: the split communicators, before their parent
        comm_finalize(model->group); comm_finalize(model->across);
        free(model->group); free(model->across);
    }
}


// ----------------------------------------------------------------------------
// the sharding schedule: every collective of a step is issued from this section
//
//            forward                 backward                       after the backward
// stage 0    -                       reduce-scatter + all-gather    update all
//                                    (an all-reduce) per unit
// stage 1    -                       reduce-scatter grads per unit  update own slice; all-gather params
// stage 2    -                       reduce-scatter each unit into  update own slice; all-gather params
//                                    the grad shard as it finishes
// stage 3    all-gather each unit    all-gather again (policy);     update own slice
//            (prefetch D ahead)      reduce-scatter as in stage 2
// every      -                       -                              scalars: all-gather the ranks'
//                                                                   norm and loss partials (one double each)
//
// The host walks the same schedule as train_gpt2.c; where the CPU trainer waits for a request,
// this one makes a stream wait for an event, so the host runs ahead and queues the whole step:
// - a gather into a buffer waits (comm stream) until the compute stream has read that buffer for
//   the last time (slot_free, unit0_free); compute waits for the gather (gathered[u]);
// - a reduce-scatter waits (comm stream) for the compute that wrote the gradients (handoff);
//   a gradient slot is zeroed again (compute stream) only after its reduce-scatter (grad_slot_reduced).
//
// The trace (-zt PREFIX; off by default): train_gpt2.c's events and file format (its sharding
// section), each event timed by a CUDA event recorded on the stream where it happens: the compute
// stream (use, done_forward, done_backward, grads, releases of gather slots, the phases) or the
// communication stream (issue and done of a collective: when the stream reaches it and when it
// has run; acquires of gather slots, releases of gradient slots). The host reads their times at
// the step's end, from the step's first event, anchored to the host's clock when it saw that one
// done. No wait_begin/wait_end: the host does not wait for collectives here, the streams do.

static void trace(GPT2* model, cudaStream_t s, const char* fmt, ...) {
    if (model->trace == NULL || model->trace_step == 0) { return; }
    if (model->trace_count == model->trace_capacity) {
        int grown = model->trace_capacity == 0 ? 256 : 2 * model->trace_capacity;
        model->trace_records = (TraceRecord*)realloc(model->trace_records, grown * sizeof(TraceRecord));
        if (model->trace_records == NULL) { fail("out of host memory for the trace (-zt)"); }
        for (int i = model->trace_capacity; i < grown; i++) { cudaCheck(cudaEventCreate(&model->trace_records[i].event)); }
        model->trace_capacity = grown;
    }
    TraceRecord* r = &model->trace_records[model->trace_count++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof(r->text), fmt, ap);
    va_end(ap);
    cudaCheck(cudaEventRecord(r->event, s));
}

// A collective of n elements of elem_size bytes per rank (its slice), queued by the line after
// the call; its bus bytes as llmc/nccl_comm.cuh counts them.
#define trace_issue(model, comm, kind, u, n, elem_size) trace_issue_at(model, comm, kind, u, n, elem_size, __LINE__ + 1)
static void trace_issue_at(GPT2* model, const Comm* comm, CollKind kind, int u, size_t n, size_t elem_size, int line) {
    double bytes = (double)n * elem_size * (comm->world_size - 1);
    if (kind == COLL_ALL_REDUCE) { bytes = 2.0 * bytes / comm->world_size; }
    trace(model, comm->stream, "issue kind=%s unit=%d bytes=%.0f line=%d", COLL_NAMES[kind], u, bytes, line);
}

static void trace_done(GPT2* model, const Comm* comm, CollKind kind, int u) {
    trace(model, comm->stream, "done kind=%s unit=%d", COLL_NAMES[kind], u);
}

// -zt: opens this rank's trace file, whose first line says what ran (the trace's header).
void trace_open(GPT2* model, const char* prefix, int rank) {
    if (prefix == NULL) { return; }
    char path[1024];
    snprintf(path, sizeof(path), "%s_rank%d.txt", prefix, rank);
    model->trace = fopenCheck(path, "w");
    cudaCheck(cudaEventCreate(&model->trace_start));
    const ZeroPlan* p = &model->plan;
    const MemoryUse* m = &model->mem;
    // what always holds live data (the slots come and go): params or their shard, the optimizer,
    // the full gradient or the grad shard, the grad scratch
    size_t slots = (size_t)(p->stage >= 2 && !p->full_grads) *
                   (p->layout.unit_size[0] + 2 * (p->layout.num_units > 1 ? p->layout.unit_size[1] : 0)) * model->grad_bytes;
    size_t state = m->params + m->grads + m->grad_scratch + m->optimizer + m->buffers;
    fprintf(model->trace, "# gpt2-zero trace: trainer=cuda rank=%d ranks=%d group=%d stage=%d reshard=%s prefetch=%d "
            "unit_blocks=%d units=%d micro_steps=%d allocated=%zu fixed=%zu plan_total=%zu file=train_gpt2.cu\n",
            rank, p->world_size, p->group_size, p->stage, RESHARD_NAMES[p->reshard], p->prefetch, p->unit_blocks,
            p->layout.num_units, p->grad_accum, state, state - m->buffers - slots, zero_plan_total(p));
}

static inline void trace_step_begin(GPT2* model, int step) {
    if (model->trace == NULL) { return; }
    model->trace_step = step;
    model->trace_count = 0;
    cudaCheck(cudaEventRecord(model->trace_start, model->stream));
    comm_wait_event(model->comm, model->trace_start, "the trace's first event");
    model->trace_start_host = comm_now();
    trace(model, model->stream, "step_begin");
}

// After the step's last host wait: every event recorded is done once both streams are idle.
static inline void trace_step_end(GPT2* model) {
    if (model->trace == NULL) { return; }
    trace(model, model->stream, "step_end");
    comm_sync(model->comm, model->stream, "the trace's last events");
    comm_sync(model->comm, model->comm->stream, "the trace's last collectives");
    for (int i = 0; i < model->trace_count; i++) {
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, model->trace_start, model->trace_records[i].event));
        fprintf(model->trace, "%.6f %d %s\n", model->trace_start_host + ms / 1000.0, model->trace_step, model->trace_records[i].text);
    }
    fflush(model->trace);
    model->trace_step = 0;
}

// A stage-3 gather slot (-1: unit 0's own buffer) and its bytes, for the trace.
static void trace_gather_slot(GPT2* model, cudaStream_t s, const char* event, int u) {
    const ZeroPlan* p = &model->plan;
    trace(model, s, "%s what=gather unit=%d slot=%d bytes=%zu", event, u, u == 0 ? -1 : zero_gather_slot(p, u),
          p->layout.unit_size[u == 0 ? 0 : 1] * sizeof(floatX));
}

static floatX* gather_buffer(GPT2* model, int u) {
    if (u == 0) { return model->gather_unit0; }
    return model->gather_blocks + (size_t)zero_gather_slot(&model->plan, u) * model->plan.layout.unit_size[1];
}

// The event the compute stream records when it is done reading unit u's gather buffer.
static cudaEvent_t buffer_free_event(GPT2* model, int u) {
    return u == 0 ? model->unit0_free : model->slot_free[zero_gather_slot(&model->plan, u)];
}

static void schedule_begin_micro_step(GPT2* model) {
    zero_walk_begin_micro_step(&model->walk);
    trace(model, model->stream, "forward_begin");
}

static void schedule_begin_backward(GPT2* model) { trace(model, model->stream, "backward_begin"); }

static void offload_wait_params_up(GPT2* model, int u, cudaStream_t s); // the offload section
static void offload_grads_down(GPT2* model, int u);

// Stage 3: the walk says which gathers to queue (the unit, then its prefetch), each once its
// buffer's last reader is done, and whether the compute must wait for the unit's own.
static floatX* unit_params(GPT2* model, int u) {
    const ZeroPlan* p = &model->plan;
    Comm* comm = model->group;
    if (p->stage < 3) {
        // stages 1-2: the first use after an update waits for this unit's all-gather only, so the
        // forward starts while later units are still being gathered (params_all_gather)
        if (model->params_gathering[u]) {
            cudaCheck(cudaStreamWaitEvent(model->stream, model->gathered[u], 0)); // the compute waits, not the host
            model->params_gathering[u] = 0;
        }
        trace(model, model->stream, "use unit=%d", u);
        return model->params + p->layout.unit_offset[u];
    }
    ZeroUse use = zero_walk_use(&model->walk, p, u);
    for (int k = 0; k < use.num_gather; k++) {
        int g = use.gather[k];
        cudaCheck(cudaStreamWaitEvent(comm->stream, buffer_free_event(model, g), 0)); // never recorded: no wait
        offload_wait_params_up(model, g, comm->stream);
        trace_gather_slot(model, comm->stream, "acquire", g);
        trace_issue(model, comm, COLL_ALL_GATHER, g, p->shard_size[g], sizeof(floatX));
        comm_all_gather(comm, model->param_shard + p->shard_offset[g], gather_buffer(model, g), p->shard_size[g], sizeof(floatX), g);
        trace_done(model, comm, COLL_ALL_GATHER, g);
        cudaCheck(cudaEventRecord(model->gathered[g], comm->stream));
    }
    if (use.wait) { cudaCheck(cudaStreamWaitEvent(model->stream, model->gathered[u], 0)); } // the compute waits, not the host
    trace(model, model->stream, "use unit=%d", u);
    return gather_buffer(model, u);
}

// The compute queued so far is the buffer's last reader: the next gather into it waits for that.
static void unit_release(GPT2* model, int u) {
    if (model->plan.stage < 3) { return; }
    if (zero_walk_release(&model->walk, &model->plan, u) != UNIT_SHARDED) {
        cudaCheck(cudaEventRecord(buffer_free_event(model, u), model->stream));
        trace_gather_slot(model, model->stream, "release", u);
    }
}

// After a unit's forward: released unless the reshard_after_forward policy keeps it (zero_plan.h).
static void unit_release_after_forward(GPT2* model, int u) {
    trace(model, model->stream, "done_forward unit=%d", u);
    if (model->plan.stage == 3 && !zero_walk_keep_after_forward(&model->walk, &model->plan, u)) { unit_release(model, u); }
}

static void unit_release_after_backward(GPT2* model, int u) { unit_release(model, u); }

// After a forward that no backward follows (evaluation, sampling): release whatever is gathered.
void units_release_all(GPT2* model) {
    for (int u = 0; u < model->plan.layout.num_units; u++) { unit_release(model, u); }
}

// A forward that no backward follows (evaluation, sampling): stage 3 gathers only what the
// forward uses (no prefetch into the backward's units) and releases everything after it.
void gpt2_forward_only(GPT2* model, const int* inputs, const int* targets, int B, int T) {
    model->walk.forward_only = 1;
    gpt2_forward(model, inputs, targets, B, T, 0.0f);
    units_release_all(model);
    model->walk.forward_only = 0;
}

// Sampling's forward of one token at position pos (< the activations' T), after the tokens at
// 0..pos-1 went through it in order since the last other forward (gpt2_forward_at's decode_pos):
// the logits of position pos are then row 0 of acts.logits.
void gpt2_decode(GPT2* model, int token, int pos) {
    model->walk.forward_only = 1;
    gpt2_forward_at(model, &token, NULL, 1, 1, 0.0f, pos);
    units_release_all(model);
    model->walk.forward_only = 0;
}

// Where unit u's full local gradient is: in the full slab, or (stages 2-3 without
// accumulation) in the unit-0 buffer or one of the two block slots (each the largest block
// unit's size, unit_size[1]), block unit u in slot (u-1) % 2.
static void* unit_grad_buffer(GPT2* model, int u) {
    const ZeroPlan* p = &model->plan;
    if (p->full_grads) { return grad_at(model, model->grads, p->layout.unit_offset[u]); }
    if (u == 0) { return model->grad_unit0; }
    return grad_at(model, model->grad_blocks, (size_t)zero_grad_slot(u) * p->layout.unit_size[1]);
}

// Where the backward's kernels write unit u's gradient: the unit's gradient buffer itself, or
// with -zd fp32 in the bf16 build the floatX scratch (unit 0 at its start, any block unit after it),
// which is zero whenever a unit's backward begins (grad_accumulate zeroes what it reads).
static floatX* unit_grad_target(GPT2* model, int u) {
    if (model->grad_scratch == NULL) { return (floatX*)unit_grad_buffer(model, u); }
    return model->grad_scratch + (u == 0 ? 0 : model->plan.layout.unit_size[0]);
}

// The two block buffers alternate, so block l's reduce-scatter can still be running while block
// l-1's backward fills the other one; block l-2 waits (compute stream) for block l's to finish.
static floatX* unit_grads(GPT2* model, int u) {
    if (!model->plan.full_grads) {
        if (u > 0 && zero_walk_grad_slot(&model->walk, u) != -1) {
            cudaCheck(cudaStreamWaitEvent(model->stream, model->grad_slot_reduced[zero_grad_slot(u)], 0));
        }
        cudaCheck(cudaMemsetAsync(unit_grad_buffer(model, u), 0, model->plan.layout.unit_size[u] * model->grad_bytes, model->stream));
        trace(model, model->stream, "acquire what=grad unit=%d slot=%d bytes=%zu", u, u == 0 ? -1 : zero_grad_slot(u),
              model->plan.layout.unit_size[u == 0 ? 0 : 1] * model->grad_bytes);
    }
    trace(model, model->stream, "grads unit=%d", u);
    return unit_grad_target(model, u);
}

// -zd fp32 (bf16 build): one micro-step's floatX gradient of a unit joins the fp32 sum, each
// element rounded once (fp32 addition) instead of to bf16 against the running sum; the scratch
// is zeroed for the next unit's backward in the same pass. The kernels that filled the scratch
// accumulate into it (cuBLASLt's beta = 1), so it must start at zero.
__global__ void grad_accumulate_kernel(float* sum, floatX* scratch, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        sum[i] += to_float(scratch[i]);
        scratch[i] = from_float(0.0f);
    }
}

static void grad_accumulate(GPT2* model, int u) {
    if (model->grad_scratch == NULL) { return; }
    size_t n = model->plan.layout.unit_size[u];
    grad_accumulate_kernel<<<ceil_div(n, 256), 256, 0, model->stream>>>((float*)unit_grad_buffer(model, u),
                                                                         unit_grad_target(model, u), n);
    cudaCheckLaunch();
}

// A unit's gradients are complete (for this micro-step). On the step's last micro-step they are
// reduce-scattered, on the comm stream once the compute queued so far has written them: stages
// 2-3 straight into the grad shard, stages 0-1 in place into this rank's slice of the full
// gradient; stage 0 then all-gathers the slices back, which completes its all-reduce while the
// backward goes on. With -zg, the reduced slice is then all-reduced across the groups (the
// same stream: right after its reduce-scatter).
static void unit_grads_done(GPT2* model, int u, int reduce) {
    grad_accumulate(model, u); // -zd fp32: every micro-step, before the reduction reads the sum
    trace(model, model->stream, "done_backward unit=%d", u);
    if (reduce) { unit_grads_reduce(model, u); }
}

// Unit u's gradient reductions, queued on the comm stream after the compute queued so far.
static void unit_grads_reduce(GPT2* model, int u) {
    const ZeroPlan* p = &model->plan;
    Comm* comm = model->group;
    size_t eb = (size_t)model->grad_bytes; // ncclBfloat16 or ncclFloat32 (nccl_type)
    void* full = unit_grad_buffer(model, u);
    void* mine = grad_at(model, full, (size_t)comm->rank * p->shard_size[u]);
    stream_wait_for(comm->stream, model->stream, model->handoff);
    if (p->stage >= 2) {
        trace_issue(model, comm, COLL_REDUCE_SCATTER, u, p->shard_size[u], eb);
        comm_reduce_scatter(comm, full, grad_at(model, model->grad_shard, p->shard_offset[u]), p->shard_size[u], eb, u);
        trace_done(model, comm, COLL_REDUCE_SCATTER, u);
        if (!p->full_grads) { trace(model, comm->stream, "release what=grad unit=%d", u); }
        if (u > 0 && !p->full_grads) { cudaCheck(cudaEventRecord(model->grad_slot_reduced[zero_grad_slot(u)], comm->stream)); }
    } else {
        trace_issue(model, comm, COLL_REDUCE_SCATTER, u, p->shard_size[u], eb);
        comm_reduce_scatter(comm, full, mine, p->shard_size[u], eb, u);
        trace_done(model, comm, COLL_REDUCE_SCATTER, u);
        if (p->stage == 0) {
            trace_issue(model, comm, COLL_ALL_GATHER, u, p->shard_size[u], eb);
            comm_all_gather(comm, mine, full, p->shard_size[u], eb, u);
            trace_done(model, comm, COLL_ALL_GATHER, u);
        }
    }
    if (model->across != NULL) {
        trace_issue(model, model->across, COLL_ALL_REDUCE, u, p->shard_size[u], eb);
        comm_all_reduce(model->across, grad_shard_of(model, u), p->shard_size[u], eb, u);
        trace_done(model, model->across, COLL_ALL_REDUCE, u);
    }
    if (model->offload) { offload_grads_down(model, u); } // while the backward goes on
}

// After the last micro-step's backward: the compute stream waits for every reduction queued.
static void grads_finish_reduction(GPT2* model) {
    stream_wait_for(model->stream, model->comm->stream, model->handoff);
    zero_walk_reductions_done(&model->walk);
}

// The step's scalars ("scalars" in the table above): each rank's part of the gradient norm's sum
// of squares, and of the loss, all-gathered and summed in order (the norm's by N-way slice,
// which is rank order unless -zg), so every rank, every stage and every G gets the same bits.
// (Evaluation averages its loss the same way.)
static double norm_squared_over_ranks(GPT2* model, double mine) {
    Comm* comm = model->comm;
    double* all = (double*)mallocCheck(comm->world_size * sizeof(double));
    trace_issue(model, comm, COLL_SCALARS, -1, 1, sizeof(double));
    comm_gather_doubles(comm, mine, all);
    trace_done(model, comm, COLL_SCALARS, -1);
    double sum = 0.0;
    for (int j = 0; j < comm->world_size; j++) { sum += all[zero_slice_rank(&model->plan, j)]; }
    free(all);
    return sum;
}
static inline double mean_over_ranks(Comm* comm, double mine) { return comm_sum(comm, mine) / comm->world_size; }
static inline double sum_over_ranks(Comm* comm, double mine) { return comm_sum(comm, mine); } // counts: exact

// The step's loss averaged over the ranks (its "scalars"), traced.
static inline double loss_over_ranks(GPT2* model, double mine) {
    trace_issue(model, model->comm, COLL_SCALARS, -1, 1, sizeof(double));
    double mean = mean_over_ranks(model->comm, mine);
    trace_done(model, model->comm, COLL_SCALARS, -1);
    return mean;
}

// Stages 1-2: work queued on the compute stream from now on waits for unit u's all-gather after
// the last update, if it has not already.
static void params_wait_gathered(GPT2* model, int u) {
    if (!model->params_gathering[u]) { return; }
    cudaCheck(cudaStreamWaitEvent(model->stream, model->gathered[u], 0));
    model->params_gathering[u] = 0;
}

// Stages 1-2: every rank updated its own slices; gather them back into the full params, all
// units queued at once. The compute stream does not wait for them all here: each unit's next use
// waits for its own gather (gathered[u], in unit_params), as stage 3 does, so the next forward
// runs unit 0 while the blocks are still being gathered.
static void params_all_gather(GPT2* model) {
    const ZeroPlan* p = &model->plan;
    Comm* comm = model->group;
    stream_wait_for(comm->stream, model->stream, model->handoff);
    for (int u = 0; u < p->layout.num_units; u++) {
        floatX* unit = model->params + p->layout.unit_offset[u];
        offload_wait_params_up(model, u, comm->stream); // -zo 1: as soon as its unit's copy is up
        trace_issue(model, comm, COLL_ALL_GATHER, u, p->shard_size[u], sizeof(floatX));
        comm_all_gather(comm, unit + (size_t)comm->rank * p->shard_size[u], unit, p->shard_size[u], sizeof(floatX), u);
        trace_done(model, comm, COLL_ALL_GATHER, u);
        cudaCheck(cudaEventRecord(model->gathered[u], comm->stream));
        model->params_gathering[u] = 1;
    }
}

// ----------------------------------------------------------------------------
// optimizer-state offload (-zo 1, stages 1-3): this rank's shard of the fp32 master weights and
// AdamW's m and v live in pinned host memory, and the host runs the update (llmc/adamw.cuh's
// adamw_update_host: the kernel's per-element arithmetic). Per optimizer step, on a copy stream:
//
//   backward: unit u's grads reduce-scattered (comm stream) -> its grad shard copied down
//             (grad_down[u]), while the backward of the units before it goes on
//   update:   the norm on the GPU, as without offload; then per unit the host waits for
//             grad_down[u], updates the unit's shard, rounds it to floatX, and queues its copy
//             up (param_up[u]) while it updates the next unit
//   after:    stages 1-2 all-gather unit u once param_up[u] is done; stage 3's next forward
//             gathers unit u after param_up[u], so the copies up overlap the forward
//
// The copy stream runs in order, so a wait for grad_down[u] also covers the previous step's
// copies up out of param_host; the host has waited for every grad_down before the next
// backward can overwrite a grad shard.

static void offload_init(GPT2* model) {
    const ZeroPlan* p = &model->plan;
    if (zero_plan_offload(&model->plan) != 0) { fail("flag -zo 1 applies only to -z 1, 2 or 3 (got -z %d)", p->stage); }
    // the copies and the host's update below are floatX (parse_grad_dtype refuses -zd fp32 -zo 1 in bf16)
    if (model->grad_bytes != (int)sizeof(floatX)) { fail("internal: -zo 1 with %d-byte gradients in the %s build", model->grad_bytes, PRECISION_NAME); }
    MemoryUse* mem = &model->mem;
    size_t n = p->shard_total;
    model->offload = 1;
    model->master = (float*)cuda_malloc_host_counted(&mem->host_optimizer, n * sizeof(float), "the master weights");
    model->m = (float*)cuda_malloc_host_counted(&mem->host_optimizer, n * sizeof(float), "AdamW m");
    model->v = (float*)cuda_malloc_host_counted(&mem->host_optimizer, n * sizeof(float), "AdamW v");
    model->grad_host = (floatX*)cuda_malloc_host_counted(&mem->host_staging, n * sizeof(floatX), "the grad shard's host copy");
    model->param_host = (floatX*)cuda_malloc_host_counted(&mem->host_staging, n * sizeof(floatX), "the param shard's host copy");
    cudaCheck(cudaStreamCreateWithFlags(&model->copy_stream, cudaStreamNonBlocking));
    for (int u = 0; u < p->layout.num_units; u++) {
        cudaCheck(cudaEventCreateWithFlags(&model->grad_down[u], cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&model->param_up[u], cudaEventDisableTiming));
    }
}

static void offload_free(GPT2* model) {
    comm_sync(model->comm, model->copy_stream, "the last copies between the device and the host");
    void* pinned[] = {model->master, model->m, model->v, model->grad_host, model->param_host};
    for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) { cudaCheck(cudaFreeHost(pinned[i])); }
    for (int u = 0; u < model->plan.layout.num_units; u++) {
        cudaCheck(cudaEventDestroy(model->grad_down[u]));
        cudaCheck(cudaEventDestroy(model->param_up[u]));
    }
    cudaCheck(cudaStreamDestroy(model->copy_stream));
}

// After unit u's reduce-scatter is queued (comm stream): copy its reduced shard down.
static void offload_grads_down(GPT2* model, int u) {
    const ZeroPlan* p = &model->plan;
    size_t bytes = p->shard_size[u] * sizeof(floatX);
    stream_wait_for(model->copy_stream, model->comm->stream, model->handoff);
    cudaCheck(cudaMemcpyAsync(model->grad_host + p->shard_offset[u], grad_shard_of(model, u), bytes,
                              cudaMemcpyDeviceToHost, model->copy_stream));
    cudaCheck(cudaEventRecord(model->grad_down[u], model->copy_stream));
    model->pcie_bytes[0] += (double)bytes;
}

// The update on the host, unit by unit (see the top of this section); the gradient norm and the
// clipping factor in hp come from the GPU as without offload.
static void offload_update(GPT2* model, const AdamWParams* hp) {
    const ZeroPlan* p = &model->plan;
    int rank = zero_group_rank(p, model->comm->rank); // the slice it owns in its shard group (-zg)
    // the copies up overwrite params (stages 1-2: this rank's slice of the slab) that the
    // backward read; the host already waited for it (the norm), but the stream order should not
    // rest on where the host happens to wait
    stream_wait_for(model->copy_stream, model->stream, model->handoff);
    for (int u = 0; u < p->layout.num_units; u++) {
        size_t S = p->shard_size[u], so = p->shard_offset[u];
        comm_wait_event(model->comm, model->grad_down[u], "a gradient shard's copy to the host");
        adamw_unit_range(model, u, rank * S, (rank + 1) * S, model->param_host + so, model->master + so,
                         model->grad_host + so, model->m + so, model->v + so, hp, 1);
        floatX* dst = p->stage == 3 ? model->param_shard + so : model->params + zero_slice_offset(p, u, rank);
        cudaCheck(cudaMemcpyAsync(dst, model->param_host + so, S * sizeof(floatX), cudaMemcpyHostToDevice, model->copy_stream));
        cudaCheck(cudaEventRecord(model->param_up[u], model->copy_stream));
        model->pcie_bytes[1] += (double)(S * sizeof(floatX));
    }
}

// Work queued on s from now on (a gather of unit u) waits for unit u's updated params to be up.
static void offload_wait_params_up(GPT2* model, int u, cudaStream_t s) {
    if (model->offload) { cudaCheck(cudaStreamWaitEvent(s, model->param_up[u], 0)); } // never recorded: no wait
}

// GPU memory in use on the device (all processes), in bytes.
static size_t gpu_memory_used(void) {
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
}

// Rank 0's start-up table: what this rank allocated per category, the plan's prediction, and
// the ZeRO paper's formula (which leaves out buffers and the extra gradient units).
void print_memory_table(const GPT2* model) {
    const ZeroPlan* p = &model->plan;
    const MemoryUse* m = &model->mem;
    const double MB = 1024.0 * 1024.0;
    printf("ZeRO stage %d, %d ranks", p->stage, p->world_size);
    if (p->replicas > 1) { printf(" in %d shard groups of %d", p->replicas, p->group_size); }
    printf(", %s, grads %s", PRECISION_NAME, p->bytes.grad == 4 ? "fp32" : "bf16");
    if (p->stage == 3) { printf(", reshard_after_forward %s, prefetch %d", RESHARD_NAMES[p->reshard], p->prefetch); }
    printf(", %d blocks per unit (%d units), %zu parameters padded to %zu\n", p->unit_blocks, p->layout.num_units,
           p->layout.num_parameters, p->layout.total);
    printf("GPU memory/rank  | allocated (bytes) |      plan (bytes) | ZeRO formula\n");
    printf("params           | %17zu | %17zu | %9.2f MB\n", m->params, p->mem_params, p->zero_params / MB);
    printf("grads            | %17zu | %17zu | %9.2f MB\n", m->grads, p->mem_grads, p->zero_grads / MB);
    printf("grad scratch     | %17zu | %17zu |\n", m->grad_scratch, p->mem_grad_scratch);
    printf("optimizer        | %17zu | %17zu | %9.2f MB\n", m->optimizer, p->mem_optimizer, p->zero_optimizer / MB);
    printf("gather buffers   | %17zu | %17zu |\n", m->buffers, p->mem_buffers);
    printf("activations      | %17zu |                 - |\n", m->activations);
    printf("workspace        | %17zu |                 - |\n", m->workspace);
    printf("comm per step (plan, bus bytes): reduce-scatter %.0f, all-gather %.0f, scalars %.0f\n",
           p->comm_reduce_scatter, p->comm_all_gather, p->comm_scalars);
    if (p->replicas > 1) { printf("comm per step across groups (plan, bus bytes): all-reduce %.0f\n", p->comm_all_reduce_across); }
    printf("collectives per step (plan): reduce-scatter %d, all-gather %d\n", p->calls_reduce_scatter, p->calls_all_gather);
    if (p->offload) {
        printf("host memory/rank | allocated (bytes) |      plan (bytes) | ZeRO formula (-zo 1: pinned)\n");
        printf("host optimizer   | %17zu | %17zu | %9.2f MB\n", m->host_optimizer, p->mem_host_optimizer, p->zero_host_optimizer / MB);
        printf("host staging     | %17zu | %17zu |\n", m->host_staging, p->mem_host_staging);
        printf("offload per step (plan, PCIe bytes): grads down %.0f, params up %.0f\n", p->pcie_down, p->pcie_up);
    }
    printf("cudaMemGetInfo: %.1f MB in use on the device (all processes on it)\n", gpu_memory_used() / MB);
}

// ----------------------------------------------------------------------------
// checkpoints: the CPU trainer's files (llmc/checkpoint.h), from the master weights and m, v

// Saves checkpoint `step` into dir (every rank takes part: from stage 1 the master weights are
// gathered), then keeps only the newest `keep` (0: all).
static void save_checkpoint(GPT2* model, const DataLoader* train, const Rng* rng, int step, const char* dir, int keep) {
    Comm* comm = model->comm;
    const ZeroPlan* p = &model->plan;
    char path[1024];
    float* params = gpt2_full_params(model);
    if (comm->rank == 0) {
        checkpoint_path(path, sizeof(path), dir, "model", step, -1);
        write_model_file(&model->config, &p->layout, params, path);
    }
    free(params);
    // m and v as this stage holds them: the full slab in stage 0, the shard slab from stage 1
    size_t n = p->stage == 0 ? p->layout.total : p->shard_total;
    float* m = (float*)mallocCheck(n * sizeof(float));
    float* v = (float*)mallocCheck(n * sizeof(float));
    comm_sync(comm, model->stream, "the optimizer state to copy"); // then the plain copies find the stream idle
    // cudaMemcpyDefault: m and v are on the device, or in host memory with -zo 1
    cudaCheck(cudaMemcpy(m, model->m, n * sizeof(float), cudaMemcpyDefault));
    cudaCheck(cudaMemcpy(v, model->v, n * sizeof(float), cudaMemcpyDefault));
    write_state_file(p, &model->config, comm->rank, m, v, train, rng, step, dir);
    free(m);
    free(v);
    // barriers with the I/O allowance (-wi), not -wt: the others wait here for rank 0's disk
    comm_io_barrier(comm, "every rank to write its checkpoint files"); // all in place before the marker
    if (comm->rank == 0) { write_done_marker(dir, step, comm->world_size, keep); }
    comm_io_barrier(comm, "rank 0 to write the checkpoint's DONE marker and prune old checkpoints");
}

// The model part of a checkpoint written on any world size and stage: params, master weights,
// this rank's part of m and v; h0 gets rank 0's state header.
static void load_checkpoint_state(GPT2* model, const char* dir, int step, int h0[HEADER_INTS]) {
    const ZeroPlan* p = &model->plan;
    const ParamLayout* lay = &p->layout;
    float* full = (float*)callocCheck(lay->total, sizeof(float));
    float* full_m = (float*)callocCheck(lay->total, sizeof(float));
    float* full_v = (float*)callocCheck(lay->total, sizeof(float));
    read_checkpoint(dir, step, &model->config, lay, full, full_m, full_v, h0);
    gpt2_set_params(model, full);
    for (int which = 0; which < 2; which++) {
        const float* src = which == 0 ? full_m : full_v;
        float* dst = which == 0 ? model->m : model->v;
        // cudaMemcpyDefault: into the device, or host memory with -zo 1
        if (p->stage == 0) { cudaCheck(cudaMemcpy(dst, src, lay->total * sizeof(float), cudaMemcpyDefault)); continue; }
        for (int u = 0; u < lay->num_units; u++) {
            cudaCheck(cudaMemcpy(dst + p->shard_offset[u], src + zero_slice_offset(p, u, model->comm->rank),
                                 p->shard_size[u] * sizeof(float), cudaMemcpyDefault));
        }
    }
    free(full); free(full_m); free(full_v);
}

static void load_checkpoint(GPT2* model, DataLoader* train, Rng* rng, const char* dir, int step) {
    int h0[HEADER_INTS] = {0}; // filled by load_checkpoint_state (zeroed: the compiler cannot see that)
    load_checkpoint_state(model, dir, step, h0);
    restore_position(h0, step, model->plan.world_size, train, rng);
}

#ifndef TESTING
// ----------------------------------------------------------------------------
// sampling

// Generates gen_len tokens after <|endoftext|>; rank 0 prints them. Every rank runs it (stage 3
// needs all ranks for each gather) with the same seed, so all draw the same tokens. Token t is
// drawn from the logits given the last min(t, T) tokens at positions 0.. (T: the activations'; the
// CPU trainer's gpt2_sample conditions the same way, so the two draw the same tokens from the
// same weights and seed up to rounding). While the sequence fits in T, each new token is one
// position (gpt2_decode: a key-value cache in the activations' qkv rows); past T the window
// slides, every position moves, and each token is one B=1 x T forward over the window. Both keep
// the products' shapes fixed (1 row, or T rows), whatever gen_len is; the logits of the position
// come to the host for the softmax and the draw.
void gpt2_sample(GPT2* model, const Tokenizer* tokenizer, Rng* rng, int gen_len) {
    const GPT2Config* c = &model->config;
    int eot = tokenizer->init_ok ? tokenizer->eot_token : GPT2_EOT;
    int print = model->comm->rank == 0;
    int* tokens = (int*)mallocCheck((size_t)(gen_len + 1) * sizeof(int));
    floatX* row; // pinned: a copy into pageable memory would block the host until the stream gets there
    cudaCheck(cudaMallocHost((void**)&row, (size_t)c->padded_vocab_size * sizeof(floatX)));
    float* probs = (float*)mallocCheck((size_t)c->vocab_size * sizeof(float));
    tokens[0] = eot;
    if (print) { printf("generating:\n---\n"); }
    for (int t = 1; t <= gen_len; t++) {
        const floatX* last = model->acts.logits;
        if (t <= model->T) { gpt2_decode(model, tokens[t - 1], t - 1); } // positions 0..t-2 are cached
        else {
            gpt2_forward_only(model, tokens + t - model->T, NULL, 1, model->T);
            last += (size_t)(model->T - 1) * c->padded_vocab_size;
        }
        cudaCheck(cudaMemcpyAsync(row, last, (size_t)c->padded_vocab_size * sizeof(floatX), cudaMemcpyDeviceToHost, model->stream));
        comm_sync(model->comm, model->stream, "a sample's logits");
        float maxval = -INFINITY, sum = 0.0f;
        for (int i = 0; i < c->vocab_size; i++) { maxval = fmaxf(maxval, to_float(row[i])); }
        for (int i = 0; i < c->vocab_size; i++) { probs[i] = expf(to_float(row[i]) - maxval); sum += probs[i]; }
        for (int i = 0; i < c->vocab_size; i++) { probs[i] /= sum; }
        tokens[t] = sample_index(probs, c->vocab_size, rng_uniform(rng));
        if (print) { tokenizer_print(tokenizer, tokens[t]); fflush(stdout); }
    }
    if (print) { printf("\n---\n"); }
    free(tokens); free(probs);
    cudaCheck(cudaFreeHost(row));
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

// The counters of every communicator the model uses (the world's; -zg: the group's and the
// cross-group one), zeroed, with the step their messages name.
// carry: the collectives still running at the last step's line (stages 1-2: the parameters'
// all-gathers after the update, which the host does not wait for: they overlap this step's
// forward) ran in this step's time, so their stream time is kept for this step's line. Not when
// an evaluation or a sample ran in between: their collectives are not the step's.
static void model_reset_counters(GPT2* model, int step, int carry) {
    model->host_syncs = 0;
    Comm* comms[] = {model->comm, model->group, model->across};
    for (int i = 0; i < 3; i++) {
        Comm* c = comms[i];
        if (c == NULL || (i > 0 && c == model->comm)) { continue; } // -zg off: the group is the world
        double before = c->busy_ms; // what the last step's line printed
        comm_collect_times(c, 0);   // the collectives done since
        double late = carry ? c->busy_ms - before : 0.0;
        // comm_reset_counters, without its own collection (which would drop what finished since)
        memset(c->bus_bytes, 0, sizeof(c->bus_bytes));
        memset(c->calls, 0, sizeof(c->calls));
        c->busy_ms = late;
        c->step = step;
    }
}

// Mean loss over up to max_steps val batches per rank, averaged over the ranks (each reads
// different batches; every rank runs the same number, so the collectives match).
static float evaluate(GPT2* model, DataLoader* val, int max_steps) {
    dataloader_reset(val);
    model_reset_counters(model, model->comm->step, 0);
    int n = (int)dataloader_num_batches(val);
    if (max_steps >= 0 && max_steps < n) { n = max_steps; }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        gpt2_forward_only(model, val->inputs, val->targets, val->B, val->T);
        sum += gpt2_mean_loss(model);
    }
    // what the evaluation moved (stage 3's gathers), apart from the steps' counts
    double gathered = model->group->bus_bytes[COLL_ALL_GATHER];
    float loss = (float)mean_over_ranks(model->comm, sum / n);
    if (model->comm->world_size > 1 && model->comm->rank == 0) {
        printf("val comm: all-gather %.0f bytes over %d batches\n", gathered, n);
    }
    return loss;
}

// HellaSwag accuracy (-h 1): each rank scores its examples (llmc/hellaswag.h) with forwards like
// the val loss's; the correct counts are summed over the ranks in rank order.
static float evaluate_hellaswag(GPT2* model, EvalLoader* ev, int* correct) {
    evalloader_reset(ev);
    int mine = 0;
    for (int i = 0; i < ev->num_batches; i++) {
        evalloader_next_batch(ev);
        gpt2_forward_only(model, ev->inputs, ev->targets, ev->B, ev->T);
        mine += evalloader_score(ev, gpt2_losses(model), NULL, NULL);
    }
    *correct = (int)sum_over_ranks(model->comm, (double)mine);
    return (float)*correct / (float)ev->num_examples;
}

// -cg 1: one training micro-step (forward with targets, backward) with its device work from the
// batch on the device to block 0's layernorm backward (forward_kernels, backward_blocks) as one
// CUDA graph: captured at the first call, replayed with one cudaGraphLaunch at the next ones while
// the key holds (the shape, the loss scale and the buffers the kernels' arguments point into;
// re-captured when one changes). Outside the graph, in the plain path's order: the batch's upload
// (from pinned memory, before the launch), the losses' copy down and the encoder backward (host
// buckets, a grid per batch) after it, then on the last micro-step the reductions (one rank: the
// comm stream's bookkeeping; main refuses -cg 1 with several ranks). Evaluation and sampling use
// the plain forward. The captured calls are the plain path's: the same kernels, arguments and
// order, so the same bits (dev/test/test_cuda_graph.sh).
static void graph_capture(GPT2* model, const GraphKey* key) {
    if (model->graph_exec != NULL) { cudaCheck(cudaGraphExecDestroy(model->graph_exec)); }
    cudaGraph_t graph;
    cudaCheck(cudaStreamBeginCapture(model->stream, cudaStreamCaptureModeGlobal));
    forward_kernels(model, key->B, key->T, -1);
    backward_blocks(model, 0);
    cudaCheck(cudaStreamEndCapture(model->stream, &graph));
    cudaCheck(cudaGraphGetNodes(graph, NULL, &model->graph_nodes));
    cudaCheck(cudaGraphInstantiate(&model->graph_exec, graph, 0));
    cudaCheck(cudaGraphDestroy(graph));
    model->graph_key = *key;
    model->graph_captures++;
}

static int same_graph_key(const GraphKey* a, const GraphKey* b) {
    return a->B == b->B && a->T == b->T && a->dlogits_scale == b->dlogits_scale && a->acts_memory == b->acts_memory &&
           a->params == b->params && a->grads == b->grads;
}

static void gpt2_train_micro_step(GPT2* model, const int* inputs, const int* targets, int B, int T, float loss_scale, int reduce) {
    if (!model->use_graph) {
        gpt2_forward(model, inputs, targets, B, T, loss_scale);
        gpt2_backward(model, reduce);
        return;
    }
    forward_upload(model, inputs, targets, B, T, loss_scale, -1);
    GraphKey key = {B, T, model->dlogits_scale, model->acts_memory, model->params, model->grads};
    if (model->graph_exec == NULL || !same_graph_key(&key, &model->graph_key)) { graph_capture(model, &key); }
    cudaCheck(cudaGraphLaunch(model->graph_exec, model->stream));
    forward_losses_down(model);
    if (reduce) { // the block units' reductions, in the backward's order (unit_grads_done's, from the last block)
        const ParamLayout* lay = &model->plan.layout;
        for (int l = model->config.num_layers - 1; l >= 0; l--) {
            int u = unit_of_block(lay, l);
            if (l == unit_first_block(lay, u)) { unit_grads_reduce(model, u); }
        }
    }
    backward_encoder(model, reduce);
}

// One optimizer step: grad_accum micro-steps, each rank on its own batches, the gradient
// reductions of the last micro-step (queued during its backward), the update. Returns the loss
// averaged over micro-steps and ranks; *norm gets the gradient norm.
// The host never waits for the GPU inside the micro-steps: each one's losses come down into their
// own pinned slot, read here once the step's end has waited for the GPU anyway, so the next
// micro-step (its batch, and at stage 3 its unit-0 gather) is queued while the GPU still runs the
// last one. The host waits twice per step (wait_for_gpu): for the norm, and at the step's end.
static float train_step(GPT2* model, DataLoader* train, int grad_accum, float lr, const TrainArgs* args, int step, float* norm) {
    Comm* comm = model->comm;
    trace_step_begin(model, step + 1);
    gpt2_zero_grad(model);
    // the step's loss is the mean over micro-steps, ranks and positions: each position's share
    float loss_scale = 1.0f / ((float)grad_accum * comm->world_size);
    for (int micro = 0; micro < grad_accum; micro++) {
        dataloader_next_batch(train);
        model->loss_slot = micro;
        gpt2_train_micro_step(model, train->inputs, train->targets, args->B, args->T, loss_scale, micro == grad_accum - 1);
    }
    model->loss_slot = 0;
    grads_finish_reduction(model);
    trace(model, model->stream, "update_begin");
    *norm = gpt2_grad_norm(model); // the host waits for the GPU: the losses' copies ran before it
    double loss_sum = 0.0; // each micro-step's mean in order, as one at a time would add them
    size_t BT = (size_t)args->B * args->T;
    for (int micro = 0; micro < grad_accum; micro++) {
        loss_sum += mean_of_losses(model->losses_host + (size_t)micro * model->B * model->T, BT);
    }
    // the loss's scalar all-gather before the update: behind stages 1-2's parameter all-gathers
    // on the comm stream it would make the host wait for all of them
    float loss = (float)loss_over_ranks(model, loss_sum / grad_accum);
    gpt2_update_with_norm(model, *norm, lr, ADAMW_BETA1, ADAMW_BETA2, ADAMW_EPS, args->weight_decay, args->grad_clip, step + 1);
    trace(model, model->stream, "update_end");
    wait_for_gpu(model, "the update"); // the compute stream only: stages 1-2's all-gathers go on
    trace_step_end(model);
    return loss;
}

// The GPU of this rank: its local rank among the GPUs it sees (several ranks may share one).
static cudaDeviceProp select_device(const Comm* comm, int* device_count) {
    cudaCheck(cudaGetDeviceCount(device_count));
    int device = comm->local_rank % *device_count;
    cudaCheck(cudaSetDevice(device));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    return prop;
}

// The training loop, as llm.c's: at each step the val loss every -v steps and a sample every -s
// steps, then one optimizer step, its line (with MFU against the GPU's peak) and its log line,
// and a checkpoint every -n steps; after the last step a last val loss and sample.
static void train_loop(GPT2* model, DataLoader* train, DataLoader* val, EvalLoader* hellaswag, const Tokenizer* tokenizer,
                       Rng* sample_rng, const TrainArgs* args, const TrainSizes* sz, int start_step, int max_steps, FILE* logfile,
                       double peak_tflops) {
    Comm* comm = model->comm;
    double flops_per_gpu_step = flops_per_token(model, args->T) * sz->total_batch / comm->world_size;
    gpt2_reserve_loss_slots(model, sz->grad_accum);
    int other_comm = 1; // collectives other than a step's ran since the last step line (evaluation, sampling, a checkpoint)
    for (int step = start_step; step <= max_steps; step++) {
        int last = step == max_steps;
        if (args->val_every > 0 && (step % args->val_every == 0 || last)) {
            other_comm = 1;
            float val_loss = evaluate(model, val, args->val_max_steps);
            if (comm->rank == 0) { printf("val loss %f\n", val_loss); }
            if (logfile) { fprintf(logfile, "s:%d tel:%f\n", step, val_loss); fflush(logfile); }
        }
        // -h 1: HellaSwag with the val loss (with -v 0: only after the last step)
        if (hellaswag != NULL && ((args->val_every > 0 && step % args->val_every == 0) || last)) {
            other_comm = 1;
            int correct;
            float acc = evaluate_hellaswag(model, hellaswag, &correct);
            if (comm->rank == 0) { printf("HellaSwag: %d/%d = %f\n", correct, hellaswag->num_examples, acc); }
            if (logfile) { fprintf(logfile, "s:%d eval:%.4f\n", step, acc); fflush(logfile); }
        }
        if (args->sample_every > 0 && ((step > 0 && step % args->sample_every == 0) || last)) {
            other_comm = 1;
            gpt2_sample(model, tokenizer, sample_rng, args->gen_len);
        }
        if (last) { break; }
        double t0 = now_seconds();
        model_reset_counters(model, step + 1, !other_comm);
        other_comm = 0;
        model->pcie_bytes[0] = model->pcie_bytes[1] = 0.0;
        float lr = lr_cosine(step, args->lr, args->warmup, max_steps, args->final_lr_frac);
        float norm;
        float loss = train_step(model, train, sz->grad_accum, lr, args, step, &norm);
        double dt = now_seconds() - t0;
        double busy_ms = 0.0; // on the one communication stream, over the communicators
        Comm* comms[] = {comm, model->group != comm ? model->group : NULL, model->across};
        // without waiting: stages 1-2's parameter all-gathers are still running (the next step counts them)
        for (int i = 0; i < 3; i++) { if (comms[i] != NULL) { comm_collect_times(comms[i], 0); busy_ms += comms[i]->busy_ms; } }
        if (comm->rank == 0) {
            printf("step %4d/%d: train loss %f norm %.4f lr %.2e (%.1f ms, %.0f tok/s", step + 1, max_steps, loss, norm, lr,
                   dt * 1000, sz->total_batch / dt);
            if (peak_tflops > 0) { printf(", MFU %.1f%%", 100.0 * flops_per_gpu_step / dt / (peak_tflops * 1e12)); }
            printf(", GPU memory %.0f MB, %d host syncs)", gpu_memory_used() / (1024.0 * 1024.0), model->host_syncs);
            if (model->offload) { printf(" | PCIe bytes: grads down %.0f params up %.0f", model->pcie_bytes[0], model->pcie_bytes[1]); }
            if (comm->world_size > 1) {
                // inside the group (all ranks unless -zg); the scalars over all ranks
                const Comm* g = model->group;
                printf(" | comm stream busy %.1f ms | collectives: reduce-scatter %d all-gather %d | bytes sent: reduce-scatter %.0f all-gather %.0f scalars %.0f",
                       busy_ms, g->calls[COLL_REDUCE_SCATTER], g->calls[COLL_ALL_GATHER],
                       g->bus_bytes[COLL_REDUCE_SCATTER], g->bus_bytes[COLL_ALL_GATHER], comm->bus_bytes[COLL_SCALARS]);
            }
            if (model->across != NULL) { printf(" | across groups: all-reduce %.0f", model->across->bus_bytes[COLL_ALL_REDUCE]); }
            printf("\n");
        }
        if (logfile) { fprintf(logfile, "s:%d trl:%f\n", step, loss); fflush(logfile); }
        if (args->checkpoint_every > 0 && (step + 1) % args->checkpoint_every == 0) {
            other_comm = 1;
            save_checkpoint(model, train, sample_rng, step + 1, args->output_dir, args->checkpoint_keep);
        }
    }
}

// The largest GPU allocation over the ranks (what this process allocated itself; NCCL's own
// buffers and the CUDA context are in cudaMemGetInfo's figure, shared by all on one GPU).
static void print_peak_memory(const GPT2* model) {
    const MemoryUse* mu = &model->mem;
    Comm* comm = model->comm;
    double mine = (double)(mu->params + mu->grads + mu->grad_scratch + mu->optimizer + mu->buffers + mu->activations + mu->workspace), most = mine;
    double* all = (double*)mallocCheck(comm->world_size * sizeof(double));
    comm_gather_doubles(comm, mine, all);
    for (int r = 0; r < comm->world_size; r++) { if (all[r] > most) { most = all[r]; } }
    free(all);
    if (comm->rank == 0) {
        printf("GPU memory allocated per rank: max %.1f MB (rank 0: %.1f MB); cudaMemGetInfo: %.1f MB in use on the device\n",
               most / 1048576.0, mine / 1048576.0, gpu_memory_used() / 1048576.0);
    }
}

// -z auto: the budget is -zm, or the GPU's free memory now (NCCL's buffers already taken), the
// smallest over the ranks so that all pick the same stage; outside the plan go the activations
// and the workspace (the start-up table's rows of those names).
static void pick_stage_auto(TrainSizes* sz, const GPT2Config* config, Comm* comm, const TrainArgs* args) {
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    double mine = args->zero_budget_mb > 0 ? args->zero_budget_mb * 1048576.0 : (double)free_b, least = mine;
    double* all = (double*)mallocCheck(comm->world_size * sizeof(double));
    comm_gather_doubles(comm, mine, all);
    for (int r = 0; r < comm->world_size; r++) { if (all[r] < least) { least = all[r]; } }
    free(all);
    int num_units = 1 + (config->num_layers + sz->zero.unit_blocks - 1) / sz->zero.unit_blocks; // layout_init's
    size_t other = activations_bytes(config, args->recompute, args->B, args->T) + CUBLASLT_WORKSPACE_BYTES
                 + norm_workspace_bytes(num_units);
    StateBytes bytes = cuda_state_bytes(sz->zero);
    train_pick_stage(sz, config, comm->world_size, bytes, UNIT_ALIGN, other, "activations, workspace", least,
                     args->zero_budget_mb > 0 ? "flag -zm" : "the GPU's free memory, least over the ranks", comm->rank);
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    Comm comm;
    comm_bootstrap(&comm, &argc, &argv);
    TrainArgs args = train_args_defaults();
    args.model = "gpt2_124M_bf16.bin";
    args.T = 1024;
    parse_args(&args, argc, argv, comm.rank,
               "One process per GPU: mpirun -np N, or -pn/-pr/-pi/-pf/-ps per process; -r trades compute for activation memory.");
    if (args.recompute == -1) { args.recompute = 1; }
    ProcessFlags pflags = {args.num_processes, args.process_rank, args.init_method, args.fs_path, args.server};
    comm_set_processes(&comm, &pflags);
    comm.timeout_s = args.wait_timeout;
    comm.io_timeout_s = io_wait_seconds(&args);
    int rank = comm.rank, N = comm.world_size;
    signal(SIGXFSZ, SIG_IGN); // a full disk must fail a write with a message, not kill the process

    GPT2Config config;
    int version;
    FILE* model_fp = train_model_config(&args, &config, &version);
    TrainSizes sz = train_sizes(&args, &config, N);
    sz.zero.grad_bytes = parse_grad_dtype(args.grad_dtype, (int)sizeof(floatX), args.offload);
    // every file is checked before the GPU is touched: bad input gets its message on any machine
    DataLoader train, val;
    dataloader_init(&train, args.train_pattern, args.B, args.T, rank, N, config.vocab_size, args.shuffle, (uint64_t)args.seed);
    DataLoader* valp = train_val_init(&args, &val, rank, N, config.vocab_size); // NULL with -v 0
    EvalLoader hellaswag_loader;
    EvalLoader* hellaswag = train_hellaswag_init(&args, &hellaswag_loader, config.vocab_size, rank, N);
    int max_steps = train_max_steps(&args, &train, sz.grad_accum);
    Tokenizer tokenizer;
    tokenizer_init(&tokenizer, "gpt2_tokenizer.bin");
    // one job at a time in -o (llmc/outdir_lock.h): rank 0 locks it before anything there is
    // read or written (the checkpoints listed, the log truncated); the others join once the
    // communicator is up
    if (args.output_dir != NULL) {
        make_dirs(args.output_dir);
        if (rank == 0) { outdir_lock_take(args.output_dir, N); }
    }
    int start_step = args.resume ? newest_checkpoint(args.output_dir) : -1; // -1: none
    FILE* logfile = NULL;
    char path[1024];
    if (args.output_dir != NULL) {
        snprintf(path, sizeof(path), "%s/main.log", args.output_dir);
        if (rank == 0) { logfile = fopenCheck(path, start_step > 0 ? "a" : "w"); }
    }

    int device_count = 0;
    cudaDeviceProp prop = select_device(&comm, &device_count);
    comm_init(&comm, &pflags);
    comm_check_same_args(&comm, argc, argv);
    if (args.output_dir != NULL) {
        // a barrier (rank 0 holds the lock before the others join) that also hands every rank
        // rank 0's checkpoint: listed under the lock, while the others may have listed the dir
        // before a job leaving it wrote its last one
        start_step = (int)comm_sum(&comm, rank == 0 ? start_step : 0);
        if (rank != 0) { outdir_lock_join(args.output_dir); }
    }
    // -ak: the Hopper attention kernels run only when asked for (measured on one H200: correct,
    // deterministic, faster; not yet the default); asked for where they cannot run, the flag is
    // refused, not ignored. Set
    // before any memory is planned: their backward's scratch (dQ's partials) is larger
#if defined(ENABLE_BF16)
    if (args.attention_sm90) {
        int hs = config.channels / config.num_heads;
        if (hs != ATT90_HS) { fail("flag -ak 1: the sm_90a attention kernels need head size %d, this model has %d", ATT90_HS, hs); }
        if (!attention_sm90_available()) {
            fail("flag -ak 1: the sm_90a attention kernels need a compute capability 9.0 GPU and a build holding sm_90a "
                 "(GPU_COMPUTE_CAPABILITY=90a); this device is %d.%d", prop.major, prop.minor);
        }
    }
    attention_sm90_mode = args.attention_sm90 ? -1 : 0;
#else
    if (args.attention_sm90) { fail("flag -ak 1: the sm_90a attention kernels are bf16; this is the %s build", PRECISION_NAME); }
#endif
    if (args.zero_stage == ZERO_STAGE_AUTO) { pick_stage_auto(&sz, &config, &comm, &args); }
    GPT2 model;
    gpt2_init(&model, &config, &comm, sz.zero, args.recompute);
    float* full = train_initial_params(&args, &config, &model.plan.layout, model_fp, version);
    gpt2_set_params(&model, full);
    free(full);
    gpt2_alloc_activations(&model, args.B, args.T);
    trace_open(&model, args.trace, rank);
    if (args.cuda_graph) { // the graph holds one rank's micro-step: its reductions are queued outside it
        if (N > 1) { fail("flag -cg 1 needs one rank (got %d): the collectives are queued inside the backward, outside any graph", N); }
        model.use_graph = 1;
    }

    const char* peak_name;
    double peak = device_peak_tflops(prop.name, &peak_name);
    if (rank == 0) {
        printf("device %s (%d visible), compute capability %d.%d, %s build, %d ranks%s\n", prop.name, device_count,
               prop.major, prop.minor, PRECISION_NAME, N, N > 1 ? (comm.started_by_mpi ? " (mpirun)" : " (-pn)") : "");
        if (peak > 0) { printf("MFU per GPU against %s's dense %s peak of %.1f TFLOP/s\n", peak_name, PRECISION_NAME, peak); }
        else { printf("no peak FLOP/s known for '%s': MFU not reported\n", prop.name); }
        printf("model %s: L %d, NH %d, C %d, maxT %d, V %d (padded %d), %zu parameters\n", args.model,
               config.num_layers, config.num_heads, config.channels, config.max_seq_len, config.vocab_size,
               config.padded_vocab_size, model.plan.layout.num_parameters);
        printf("%d ranks x batch B %d x T %d, %d micro-steps per step (%d tokens), %d steps, lr %g, recompute %d\n",
               N, args.B, args.T, sz.grad_accum, sz.total_batch, max_steps, args.lr, args.recompute);
        print_memory_table(&model);
    }

    Rng sample_rng;
    rng_init(&sample_rng, (uint64_t)args.seed + 1);
    if (start_step >= 0) {
        load_checkpoint(&model, &train, &sample_rng, args.output_dir, start_step);
        if (rank == 0) { printf("resumed from checkpoint %d in %s\n", start_step, args.output_dir); }
    } else {
        if (args.resume && rank == 0) { printf("no complete checkpoint in %s: starting from step 0\n", args.output_dir); }
        start_step = 0;
    }
    // every rank has read the model file (and the checkpoint): the first collective, timed by
    // -wt, must not wait for a slower rank's disk
    comm_io_barrier(&comm, "every rank to read the model and the checkpoint");

    train_loop(&model, &train, valp, hellaswag, &tokenizer, &sample_rng, &args, &sz, start_step, max_steps, logfile, peak);
    if (args.output_dir != NULL) {
        float* params = gpt2_full_params(&model); // collective from stage 1: every rank takes part
        if (rank == 0) {
            fcloseCheck(logfile, path);
            snprintf(path, sizeof(path), "%s/model_%08d.bin", args.output_dir, max_steps);
            write_model_file(&config, &model.plan.layout, params, path);
            printf("wrote %s\n", path);
        }
        free(params);
        comm_io_barrier(&comm, "rank 0 to write the final model");
    }
    if (model.use_graph) {
        printf("cuda graph (-cg 1): %d capture%s, %zu nodes per micro-step\n", model.graph_captures,
               model.graph_captures == 1 ? "" : "s", model.graph_nodes);
    }
    print_peak_memory(&model);
    dataloader_free(&train);
    if (valp != NULL) { dataloader_free(valp); }
    if (hellaswag != NULL) { evalloader_free(hellaswag); }
    tokenizer_free(&tokenizer);
    gpt2_free(&model);
    comm_finalize(&comm);
    return 0;
}
#endif // TESTING
