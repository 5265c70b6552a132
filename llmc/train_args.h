/*
The trainers' command line (llm.c's flags, plus the ZeRO and checkpoint flags): plain C, shared
by train_gpt2.c and train_gpt2.cu so both accept the same flags with the same checks. A flag a
trainer does not support is refused there with a message, never accepted and ignored.
*/
#ifndef LLMC_TRAIN_ARGS_H
#define LLMC_TRAIN_ARGS_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "utils.h"
#include "gpt2_layout.h"
#include "zero_plan.h"
#include "model_file.h"
#include "dataloader.h"
#include "hellaswag.h"
#include <unistd.h>

#define HELLASWAG_DEFAULT_FILE "dev/data/hellaswag/hellaswag_val.bin"

typedef struct {
    const char* train_pattern; // -i
    const char* val_pattern;   // -j
    const char* model;         // -e: a model file, or dN for a fresh model of depth N
    const char* output_dir;    // -o
    int B;                     // -b
    int T;                     // -t
    int total_batch;           // -d tokens per optimizer step over all micro-steps and ranks (-1: B*T*ranks)
    float lr;                  // -l
    int warmup;                // -u
    float final_lr_frac;       // -q
    float weight_decay;        // -c
    int max_steps;             // -x (-1: one epoch)
    int val_every;             // -v
    int val_max_steps;         // -m
    int sample_every;          // -s
    int gen_len;               // -g
    float grad_clip;           // -gc (0: off)
    int shuffle;               // -sh
    int seed;                  // -rs
    int zero_stage;            // -z (ZERO_STAGE_AUTO: -z auto)
    float zero_budget_mb;      // -zm: MB a rank may use, for -z auto (-1: not given)
    const char* reshard;       // -zr (stage 3)
    int prefetch;              // -zp (stage 3)
    int zero_group;            // -zg: ranks per shard group, stages 1-3 (-1: not given: all N)
    int unit_blocks;           // -zu: transformer blocks per unit, 1..L (every stage)
    int offload;               // -zo: 1 keeps the optimizer state in host memory (CUDA trainer, stages 1-3)
    int checkpoint_every;      // -n (0: never)
    int checkpoint_keep;       // -nk (0: all)
    int resume;                // -y
    float wait_timeout;        // -wt seconds
    float io_timeout;          // -wi seconds (-1: 10 x -wt); see io_wait_seconds
    int recompute;             // -r: 0 none, 1 GELU, 2 GELU + layernorms (-1: not given: 1 CUDA, 0 CPU)
    int hellaswag;             // -h 1: HellaSwag accuracy every -v steps and at the end
    const char* hellaswag_file; // -hf (NULL: not given, HELLASWAG_DEFAULT_FILE)
    const char* grad_dtype;    // -zd bf16 | fp32: CUDA trainer, gradient accumulation and reduction dtype (NULL: the build's floatX)
    const char* trace;         // -zt PREFIX: each rank writes a trace of its training steps to PREFIX_rank<r>.txt (NULL: none)
    int attention_sm90;        // -ak: 1 the sm_90a (wgmma, TMA) attention kernels, 0 the mma.sync ones (CUDA trainer)
    int cuda_graph;            // -cg: 1 replays each training micro-step's forward and backward as a CUDA graph (CUDA trainer, one rank, -z 0)
    // CUDA trainer, processes started without mpirun (llmc/nccl_comm.cuh)
    int num_processes;         // -pn (-1: not given)
    int process_rank;          // -pr (-1: not given)
    const char* init_method;   // -pi fs | tcp
    const char* fs_path;       // -pf
    const char* server;        // -ps
} TrainArgs;

// The defaults both trainers start from; each then names its own model file and sequence
// length (-e, -t) before parsing, so that -h shows its own.
static inline TrainArgs train_args_defaults(void) {
    TrainArgs a = {
        .train_pattern = "dev/data/tinyshakespeare/tiny_shakespeare_train.bin",
        .val_pattern = "dev/data/tinyshakespeare/tiny_shakespeare_val.bin",
        .model = NULL, .output_dir = NULL,
        .B = 4, .T = 64, .total_batch = -1, .lr = 3e-4f, .warmup = 0, .final_lr_frac = 1.0f,
        .weight_decay = 0.0f, .max_steps = -1, .val_every = 20, .val_max_steps = 20,
        .sample_every = 20, .gen_len = 64, .grad_clip = 1.0f, .shuffle = 0, .seed = 1337,
        .zero_stage = 0, .zero_budget_mb = -1.0f, .reshard = NULL, .prefetch = -1, .zero_group = -1, .unit_blocks = 1, .offload = 0,
        .checkpoint_every = 0, .checkpoint_keep = 0, .resume = 0, .wait_timeout = 300.0f, .io_timeout = -1.0f,
        .recompute = -1, .hellaswag = 0, .hellaswag_file = NULL, .grad_dtype = NULL, .trace = NULL, .attention_sm90 = 0, .cuda_graph = 0, .num_processes = -1, .process_rank = -1, .init_method = NULL, .fs_path = NULL, .server = NULL,
    };
    return a;
}

typedef enum { ARG_STR, ARG_INT, ARG_FLOAT } ArgType;
typedef struct { const char* flag; ArgType type; size_t offset; const char* help; } ArgSpec;

#define ARG(flag, type, field, help) {flag, type, offsetof(TrainArgs, field), help}
static const ArgSpec ARG_SPECS[] = {
    ARG("-i", ARG_STR, train_pattern, "train data file or glob pattern"),
    ARG("-j", ARG_STR, val_pattern, "val data file or glob pattern"),
    ARG("-e", ARG_STR, model, "model file (llm.c fp32 format), or dN for a fresh GPT-2 of depth N"),
    ARG("-o", ARG_STR, output_dir, "output dir for the log and the final model (none: no output)"),
    ARG("-b", ARG_INT, B, "batch size B per rank (sequences per micro-step)"),
    ARG("-t", ARG_INT, T, "sequence length T"),
    ARG("-d", ARG_INT, total_batch, "tokens per optimizer step, all ranks (multiple of B*T*ranks; -1: B*T*ranks)"),
    ARG("-l", ARG_FLOAT, lr, "peak learning rate"),
    ARG("-u", ARG_INT, warmup, "learning-rate warmup steps"),
    ARG("-q", ARG_FLOAT, final_lr_frac, "final learning rate as a fraction of the peak (cosine decay)"),
    ARG("-c", ARG_FLOAT, weight_decay, "weight decay (on the 2-D weights only)"),
    ARG("-x", ARG_INT, max_steps, "optimizer steps (-1: one epoch of the train data; 0: just evaluate/sample/save)"),
    ARG("-v", ARG_INT, val_every, "val loss every this many steps (0: never)"),
    ARG("-m", ARG_INT, val_max_steps, "val batches per rank per evaluation (-1: all)"),
    ARG("-s", ARG_INT, sample_every, "sample every this many steps, and at the end (0: never)"),
    ARG("-g", ARG_INT, gen_len, "tokens per sample"),
    ARG("-gc", ARG_FLOAT, grad_clip, "clip gradients to this global L2 norm (0: off)"),
    ARG("-sh", ARG_INT, shuffle, "1: shuffle the order of training batches each epoch; 0: file order"),
    ARG("-rs", ARG_INT, seed, "random seed (fresh model, sampling, shuffling)"),
    ARG("-z", ARG_INT, zero_stage, "ZeRO stage: 0 DDP, 1 +optimizer state sharded, 2 +grads, 3 +params (FSDP); auto: the lowest that fits (-zm)"),
    ARG("-zm", ARG_FLOAT, zero_budget_mb, "-z auto: MB of memory a rank may use (CUDA: default the GPU's free memory; CPU: required)"),
    ARG("-zr", ARG_STR, reshard, "stage 3 reshard_after_forward: default (all but the last block), always, never"),
    ARG("-zp", ARG_INT, prefetch, "stage 3 prefetch depth: units gathered ahead (0: off; default 1)"),
    ARG("-zg", ARG_INT, zero_group, "stages 1-3, hybrid sharding: shard in groups of this many consecutive ranks, replicate across groups (default: all)"),
    ARG("-zu", ARG_INT, unit_blocks, "unit size (FSDP's wrap policy): transformer blocks per unit, 1..L, the last unit holds the rest (every stage: what is gathered and reduced as one collective)"),
    ARG("-zo", ARG_INT, offload, "CUDA trainer, -z 1/2/3: 1 keeps the optimizer state (master, m, v) in pinned host memory and runs AdamW on the CPU"),
    ARG("-zd", ARG_STR, grad_dtype, "CUDA trainer: gradients accumulated over micro-steps and reduced in bf16 or fp32 (default: the build's precision; fp32 only in the fp32 build)"),
    ARG("-zt", ARG_STR, trace, "trace every training step's collectives, slots and compute, one file per rank: PREFIX_rank<r>.txt (dev/bench/compare_stages.py --timeline draws them)"),
    ARG("-ak", ARG_INT, attention_sm90, "CUDA trainer: 1 runs attention on the Hopper kernels (llmc/attention_sm90.cuh: wgmma, TMA; compute capability 9.0, a build with sm_90a, head size 64), 0 on the mma.sync kernels (opt-in; faster on an H200: dev/cuda/NOTES.md)"),
    ARG("-cg", ARG_INT, cuda_graph, "CUDA trainer, one rank, -z 0: 1 captures each training micro-step's forward and backward once as a CUDA graph and replays it (fewer launches; not with -zt)"),
    ARG("-n", ARG_INT, checkpoint_every, "write a checkpoint into -o every this many steps (0: never)"),
    ARG("-nk", ARG_INT, checkpoint_keep, "keep only the newest this many checkpoints (0: all)"),
    ARG("-y", ARG_INT, resume, "1: resume from the newest complete checkpoint in -o (any ranks or stage)"),
    ARG("-wt", ARG_FLOAT, wait_timeout, "seconds a rank waits for one collective before it aborts the job (0: forever)"),
    ARG("-wi", ARG_FLOAT, io_timeout, "seconds ranks wait for each other's model and checkpoint file I/O, at least -wt (0: forever; -1: 10 x -wt)"),
    ARG("-r", ARG_INT, recompute, "recompute in the backward, less activation memory for more compute: 0 nothing, 1 GELU, 2 GELU + layernorms (-1: 1 on the CUDA trainer, 0 on the CPU, which keeps every activation)"),
    ARG("-h", ARG_INT, hellaswag, "1: HellaSwag accuracy every -v steps and at the end (needs -b >= 4; -h alone: this help)"),
    ARG("-hf", ARG_STR, hellaswag_file, "HellaSwag eval file for -h 1 (none: " HELLASWAG_DEFAULT_FILE ", from make hellaswag)"),
    ARG("-pn", ARG_INT, num_processes, "CUDA trainer without mpirun: number of processes (-1: one, or mpirun's)"),
    ARG("-pr", ARG_INT, process_rank, "CUDA trainer without mpirun: this process's rank 0..pn-1"),
    ARG("-pi", ARG_STR, init_method, "CUDA trainer without mpirun: how ranks find each other: fs (with -pf) or tcp (with -ps)"),
    ARG("-pf", ARG_STR, fs_path, "CUDA trainer, -pi fs: a directory all ranks see, one per job"),
    ARG("-ps", ARG_STR, server, "CUDA trainer, -pi tcp: rank 0's HOST[:PORT] (port 29500 by default)"),
};
#define NUM_ARGS ((int)(sizeof(ARG_SPECS) / sizeof(ARG_SPECS[0])))

// `program` is the trainer's name; `note` a closing line of its own.
static inline void print_usage(const TrainArgs* defaults, const char* program, const char* note) {
    printf("usage: %s [flag value] ...\n", program);
    for (int i = 0; i < NUM_ARGS; i++) {
        const ArgSpec* s = &ARG_SPECS[i];
        const char* field = (const char*)defaults + s->offset;
        char def[256];
        switch (s->type) {
            case ARG_STR: snprintf(def, sizeof(def), "%s", *(const char* const*)field ? *(const char* const*)field : "none"); break;
            case ARG_INT: snprintf(def, sizeof(def), "%d", *(const int*)field); break;
            default: snprintf(def, sizeof(def), "%g", *(const float*)field); break;
        }
        printf("  %-4s %s (default %s)\n", s->flag, s->help, def);
    }
    printf("%s\n", note);
}

// "-b", "--help": a flag's name, not a value (a negative number is a value)
static inline int is_flag_name(const char* s) {
    return s[0] == '-' && ((s[1] >= 'a' && s[1] <= 'z') || (s[1] >= 'A' && s[1] <= 'Z') || s[1] == '-');
}

static inline void parse_args(TrainArgs* args, int argc, char** argv, int rank, const char* usage_note) {
    TrainArgs defaults = *args;
    for (int i = 1; i < argc; i += 2) {
        // -h VALUE is HellaSwag (llm.c's flag); -h last or before another flag, or --help, is the usage
        int help = strcmp(argv[i], "--help") == 0 || (strcmp(argv[i], "-h") == 0 && (i + 1 >= argc || is_flag_name(argv[i + 1])));
        if (help) {
            if (rank == 0) { print_usage(&defaults, argv[0], usage_note); }
            exit(0);
        }
        const ArgSpec* spec = NULL;
        for (int k = 0; k < NUM_ARGS; k++) { if (strcmp(argv[i], ARG_SPECS[k].flag) == 0) { spec = &ARG_SPECS[k]; } }
        if (spec == NULL) { fail("unknown flag '%s' (%s -h lists the flags)", argv[i], argv[0]); }
        if (i + 1 >= argc) { fail("flag %s needs a value", argv[i]); }
        char* field = (char*)args + spec->offset;
        if (strcmp(spec->flag, "-z") == 0 && strcmp(argv[i + 1], "auto") == 0) { args->zero_stage = ZERO_STAGE_AUTO; continue; }
        switch (spec->type) {
            case ARG_STR: *(const char**)field = argv[i + 1]; break;
            case ARG_INT: {
                long v = parse_long(argv[i], argv[i + 1]);
                if (v < -1 || v > 1000000000L) { fail("flag %s expects an integer from -1 to 1e9, got %ld", argv[i], v); }
                *(int*)field = (int)v;
                break;
            }
            default: *(float*)field = parse_float(argv[i], argv[i + 1]); break;
        }
    }
    if (args->B <= 0) { fail("flag -b expects a batch size >= 1, got %d", args->B); }
    if (args->T <= 0) { fail("flag -t expects a sequence length >= 1, got %d", args->T); }
    if (args->lr < 0.0f) { fail("flag -l expects a learning rate >= 0, got %g", args->lr); }
    if (args->grad_clip < 0.0f) { fail("flag -gc expects a norm >= 0 (0 turns clipping off), got %g", args->grad_clip); }
    if (args->shuffle != 0 && args->shuffle != 1) { fail("flag -sh expects 0 or 1, got %d", args->shuffle); }
    if (args->final_lr_frac < 0.0f || args->final_lr_frac > 1.0f) { fail("flag -q expects a fraction in [0, 1], got %g", args->final_lr_frac); }
    if (args->gen_len <= 0) { fail("flag -g expects a sample length >= 1, got %d", args->gen_len); }
    if (args->warmup < 0) { fail("flag -u expects warmup steps >= 0, got %d", args->warmup); }
    int is_auto = args->zero_stage == ZERO_STAGE_AUTO;
    if (!is_auto && (args->zero_stage < 0 || args->zero_stage > 3)) { fail("flag -z expects a ZeRO stage 0, 1, 2 or 3, got %d", args->zero_stage); }
    // the stage-3 knobs: an error elsewhere, not silently ignored (with -z auto they apply if it picks 3)
    if (args->zero_stage != 3 && !is_auto && args->reshard != NULL) { fail("flag -zr applies only to -z 3 (got -z %d)", args->zero_stage); }
    if (args->zero_stage != 3 && !is_auto && args->prefetch != -1) { fail("flag -zp applies only to -z 3 (got -z %d)", args->zero_stage); }
    if ((args->zero_stage == 3 || is_auto) && args->prefetch < -1) { fail("flag -zp expects a depth >= 0, got %d", args->prefetch); }
    if (!is_auto && args->zero_budget_mb != -1.0f) { fail("flag -zm applies only to -z auto (got -z %d)", args->zero_stage); }
    if (is_auto && args->zero_budget_mb != -1.0f && args->zero_budget_mb <= 0.0f) { fail("flag -zm expects MB > 0, got %g", args->zero_budget_mb); }
    // hybrid sharding: stage 0 shards nothing, so it has no groups to shard in (-z auto: the
    // groups apply if it picks stage 1-3)
    if (args->zero_group != -1 && args->zero_stage == 0) { fail("flag -zg applies only to -z 1, 2, 3 or auto (got -z 0)"); }
    if (args->zero_group != -1 && args->zero_group < 1) { fail("flag -zg expects ranks per shard group >= 1, got %d", args->zero_group); }
    if (args->offload != 0 && args->offload != 1) { fail("flag -zo expects 0 or 1, got %d", args->offload); }
    if (args->offload && is_auto) { fail("flag -zo 1 needs the stage given: -z 1, 2 or 3 (got -z auto)"); }
    if (args->offload && args->zero_stage == 0) { fail("flag -zo 1 applies only to -z 1, 2 or 3: stage 0 has no optimizer shard to offload (got -z 0)"); }
    if (args->attention_sm90 != 0 && args->attention_sm90 != 1) { fail("flag -ak expects 0 or 1, got %d", args->attention_sm90); }
    if (args->cuda_graph != 0 && args->cuda_graph != 1) { fail("flag -cg expects 0 or 1, got %d", args->cuda_graph); }
    if (args->cuda_graph && is_auto) { fail("flag -cg 1 needs -z 0 (got -z auto): the graph holds one rank's micro-step"); }
    if (args->cuda_graph && args->zero_stage != 0) { fail("flag -cg 1 needs -z 0 (got -z %d): the graph holds one rank's micro-step, and stages 1-3 shard across ranks", args->zero_stage); }
    if (args->cuda_graph && args->trace != NULL) { fail("flags -cg 1 and -zt do not combine: the trace's events are read by the host, and a graph's are not"); }
    if (args->recompute < -1 || args->recompute > 2) { fail("flag -r expects 0, 1 or 2, got %d", args->recompute); }
    if (args->resume != 0 && args->resume != 1) { fail("flag -y expects 0 or 1, got %d", args->resume); }
    if (args->wait_timeout < 0.0f) { fail("flag -wt expects seconds >= 0, got %g", args->wait_timeout); }
    if (args->io_timeout < 0.0f && args->io_timeout != -1.0f) { fail("flag -wi expects seconds >= 0, or -1 for 10 x -wt, got %g", args->io_timeout); }
    if (args->hellaswag != 0 && args->hellaswag != 1) { fail("flag -h expects 0 or 1 (HellaSwag off/on; -h alone prints the flags), got %d", args->hellaswag); }
    if (args->hellaswag == 1 && args->B < 4) { fail("flag -h 1 needs -b >= 4: each HellaSwag example is 4 rows of a batch, got -b %d", args->B); }
    if (args->hellaswag == 0 && args->hellaswag_file != NULL) { fail("flag -hf applies only to -h 1 (got -h 0)"); }
    if (args->checkpoint_every < 0 || args->checkpoint_keep < 0) { fail("flags -n and -nk expect counts >= 0"); }
    if ((args->checkpoint_every > 0 || args->resume) && args->output_dir == NULL) {
        fail("flags -n and -y need an output dir -o for the checkpoints");
    }
}

// The longest wait for the other ranks' file I/O (rank 0 writing the model file, every rank
// reading a checkpoint's state files): a slow disk takes far longer than a collective, and must
// not be reported as a dead rank. Never shorter than -wt; 0 is forever, as for -wt.
static inline double io_wait_seconds(const TrainArgs* args) {
    double wt = args->wait_timeout, wi = args->io_timeout;
    if (wt == 0.0 || wi == 0.0) { return 0.0; }
    if (wi < 0.0) { return 10.0 * wt; }
    return wi > wt ? wi : wt;
}

static inline ReshardPolicy parse_reshard(const char* s) {
    if (s == NULL) { return RESHARD_DEFAULT; }
    for (int i = 0; i < 3; i++) { if (strcmp(s, RESHARD_NAMES[i]) == 0) { return (ReshardPolicy)i; } }
    fail("flag -zr expects default, always or never, got '%s'", s);
}

// -zd on the CUDA trainer: the gradient's bytes per element, 2 (bf16) or 4 (fp32); NULL gives
// the build's floatX. The fp32 build has no bf16 gradients to offer (its backward writes fp32).
// Offload (-zo 1) copies down and updates from floatX gradients: fp32 ones in the bf16 build are
// refused with it rather than narrowed.
static inline int parse_grad_dtype(const char* s, int floatx_bytes, int offload) {
    if (s == NULL) { return floatx_bytes; }
    if (strcmp(s, "fp32") == 0) {
        if (offload && floatx_bytes != 4) { fail("flags -zd fp32 and -zo 1 do not combine in the bf16 build: the offloaded update reads bf16 gradients (drop one of them)"); }
        return 4;
    }
    if (strcmp(s, "bf16") == 0) {
        if (floatx_bytes != 2) { fail("flag -zd bf16 needs the bf16 build (make PRECISION=BF16): this fp32 build keeps fp32 gradients (-zd fp32)"); }
        return 2;
    }
    fail("flag -zd expects bf16 or fp32, got '%s'", s);
}

// A fresh "dN" model name gives N; anything else is a file path (0).
static inline int parse_depth(const char* model) {
    if (model[0] != 'd' || model[1] == '\0') { return 0; }
    for (const char* p = model + 1; *p; p++) { if (*p < '0' || *p > '9') { return 0; } }
    int depth = atoi(model + 1);
    if (depth < 1 || depth > 48) { fail("flag -e: fresh model depth must be 1..48, got '%s'", model); }
    return depth;
}

// What the trainers derive from the flags: the step's size and the ZeRO options.
typedef struct {
    int grad_accum;   // micro-steps per optimizer step
    int total_batch;  // tokens per optimizer step, over the micro-steps and the N ranks
    ZeroOptions zero;
} TrainSizes;

static inline TrainSizes train_sizes(const TrainArgs* args, const GPT2Config* config, int N) {
    TrainSizes s;
    if (args->unit_blocks < 1 || args->unit_blocks > config->num_layers) {
        fail("flag -zu expects blocks per unit 1..%d (the model's layers), got %d", config->num_layers, args->unit_blocks);
    }
    int tokens_per_micro = args->B * args->T * N;
    s.total_batch = args->total_batch == -1 ? tokens_per_micro : args->total_batch;
    if (s.total_batch <= 0 || s.total_batch % tokens_per_micro != 0) {
        fail("flag -d %d must be a positive multiple of B*T*ranks = %d*%d*%d = %d", s.total_batch, args->B, args->T, N, tokens_per_micro);
    }
    s.grad_accum = s.total_batch / tokens_per_micro;
    // the stage-3 prefetch (-z auto: in case it picks 3; train_pick_stage zeroes it otherwise)
    int prefetch = args->zero_stage != 3 && args->zero_stage != ZERO_STAGE_AUTO ? 0 : args->prefetch == -1 ? 1 : args->prefetch;
    if (args->zero_group != -1 && N % args->zero_group != 0) {
        fail("flag -zg %d must divide the %d ranks (groups of consecutive ranks, all the same size)", args->zero_group, N);
    }
    int group = args->zero_group == -1 ? N : args->zero_group;
    s.zero = (ZeroOptions){args->zero_stage, s.grad_accum, parse_reshard(args->reshard), prefetch, group, args->unit_blocks, args->offload, 0};
    return s;
}

// The model's config, from the model file (-e PATH, left open at its parameters for the caller
// to read) or for a fresh model of depth N (-e dN: NULL returned). version: as model_file_open
// (NULL: fp32 files only).
static inline FILE* train_model_config(const TrainArgs* args, GPT2Config* config, int* version) {
    FILE* fp = NULL;
    int depth = parse_depth(args->model);
    if (version != NULL) { *version = MODEL_VERSION_FP32; }
    if (depth > 0) { *config = config_for_depth(depth, args->T > 1024 ? args->T : 1024); }
    else { fp = model_file_open(args->model, config, version); }
    if (args->T > config->max_seq_len) { fail("flag -t %d exceeds the model's maximum sequence length %d", args->T, config->max_seq_len); }
    return fp;
}

// The val loader of this rank (-j), only when the val loss is ever computed (-v > 0: at every
// -v steps and after the last; with -v 0 nothing reads it, not even -x 0); NULL otherwise. A val
// file too short for one batch of B x T per rank then stops nobody who does not validate.
static inline DataLoader* train_val_init(const TrainArgs* args, DataLoader* val, int rank, int N, int vocab_size) {
    if (args->val_every <= 0) { return NULL; }
    dataloader_init(val, args->val_pattern, args->B, args->T, rank, N, vocab_size, 0, 0);
    return val;
}

// -h 1: the HellaSwag examples of this rank, checked now (NULL with -h 0).
static inline EvalLoader* train_hellaswag_init(const TrainArgs* args, EvalLoader* ev, int vocab_size, int rank, int N) {
    if (!args->hellaswag) { return NULL; }
    const char* path = args->hellaswag_file != NULL ? args->hellaswag_file : HELLASWAG_DEFAULT_FILE;
    if (access(path, F_OK) != 0) { fail("no HellaSwag eval file '%s' (flag -hf; prepare it with: make hellaswag)", path); }
    evalloader_init(ev, path, args->B, args->T, rank, N, vocab_size);
    return ev;
}

// -x, or one epoch of the train data (-x -1)
static inline int train_max_steps(const TrainArgs* args, const DataLoader* train, int grad_accum) {
    return args->max_steps != -1 ? args->max_steps : (int)(dataloader_num_batches(train) / grad_accum);
}

// The full parameters in unit-major order: read from the model file train_model_config left
// open, or a fresh initialization (-e dN). The caller hands them to gpt2_set_params and frees them.
static inline float* train_initial_params(const TrainArgs* args, const GPT2Config* config, const ParamLayout* layout,
                                          FILE* fp, int version) {
    float* full = (float*)callocCheck(layout->total, sizeof(float));
    if (fp == NULL) { init_random(config, layout, full, (uint64_t)args->seed); }
    else { model_file_read(fp, args->model, config, layout, full, version); fclose(fp); }
    return full;
}

// -z auto: the lowest stage whose plan, plus `other` bytes the trainer allocates outside it
// (activations, workspace), fits in `budget` bytes per rank (zero_pick_stage); rank 0 prints
// every candidate and the pick. Stops with the numbers when no stage fits.
static inline void train_pick_stage(TrainSizes* sz, const GPT2Config* c, int N, StateBytes bytes, size_t align,
                                    size_t other, const char* other_what, double budget, const char* budget_from, int rank) {
    const double MB = 1048576.0;
    ZeroPlan plans[4];
    int stage = zero_pick_stage(plans, c, N, sz->zero, bytes, align, other, (size_t)budget);
    if (rank == 0) {
        printf("-z auto: %.1f MB per rank (%s); outside the plan %.1f MB (%s)\n", budget / MB, budget_from,
               other / MB, other_what);
        if (sz->zero.group_size < N) { printf("  (stages 1-3 in shard groups of %d ranks: -zg)\n", sz->zero.group_size); }
        for (int s = 0; s < 4; s++) {
            double total = (double)(zero_plan_total(&plans[s]) + other);
            printf("  stage %d: plan %.1f MB + %.1f MB = %.1f MB: %s\n", s, zero_plan_total(&plans[s]) / MB, other / MB,
                   total / MB, total <= budget ? (s == stage ? "fits, picked (the lowest stage that fits)" : "fits") : "does not fit");
        }
    }
    if (stage < 0) {
        // the smallest need (the lowest stage among equals): the budget that would have run.
        // Not always stage 3's: its gather buffers can outweigh what it shards, on few ranks
        // or in small shard groups (-zg).
        int least = 0;
        for (int s = 1; s < 4; s++) { if (zero_plan_total(&plans[s]) < zero_plan_total(&plans[least])) { least = s; } }
        fail("-z auto: no stage fits in %.1f MB per rank: the least any stage needs is stage %d's %.1f MB (plan %.1f MB + "
             "%.1f MB outside it); more ranks%s, a smaller -b or -t, or a larger budget (-zm)", budget / MB, least,
             (zero_plan_total(&plans[least]) + other) / MB, zero_plan_total(&plans[least]) / MB, other / MB,
             sz->zero.group_size < N ? " or larger shard groups (-zg)" : "");
    }
    sz->zero.stage = stage;
    if (stage != 3) { sz->zero.prefetch = 0; }
    if (stage == 0) { sz->zero.group_size = N; } // stage 0 has no groups
}

#endif // LLMC_TRAIN_ARGS_H
