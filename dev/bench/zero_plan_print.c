/*
Prints the sharding plan (llmc/zero_plan.h) of a model for several world sizes as CSV: the bytes
per rank each stage holds (per category; state_total, the model state; plan_total, the state
plus the CPU ring's comm scratch) and moves per step, without running anything, for every shard group
size G dividing N (hybrid sharding, -zg; stage 0 only G = N): bytes moved inside the group
(reduce_scatter, all_gather) and across the groups (all_reduce_across). compare_stages.py uses
the G = N rows for the world sizes it does not run (the memory-vs-ranks chart).
    dev/bench/zero_plan_print [--cuda FLOATX_BYTES [--grads GRAD_BYTES]] [--zu K] MODEL_FILE|dN N [N ...]
Bytes per element are the CPU trainer's (ZERO_STATE_BYTES_CPU) unless --cuda gives the CUDA
trainer's floatX size: --cuda 2 for train_gpt2cu (bf16), --cuda 4 for train_gpt2fp32cu
(ZERO_STATE_BYTES_CUDA: floatX params and grads, fp32 master + m + v, in-place reduce-scatter);
--grads 4 after --cuda 2 is train_gpt2cu -zd fp32 (fp32 gradients and a bf16 backward scratch,
the grad_scratch column).
--zu K: K transformer blocks per unit (the trainers' -zu; default 1). Each row also gives the
units, the largest unit's elements and the collectives per step.

    dev/bench/zero_plan_print --collectives STAGE [--cuda FLOATX_BYTES [--grads GRAD_BYTES]] [--zu K]
                              [--zr default|always|never] [--zp D] [--zg G] [--accum A] MODEL_FILE|dN N
prints instead the collectives one optimizer step issues, in the order its trainer issues them
(--cuda: train_gpt2.cu's order, else train_gpt2.c's), one per line: "KIND UNIT BUS_BYTES" (unit -1:
the scalars). It walks the schedule the trainers walk (their forward and backward hooks, stage
3's walk of llmc/zero_plan.h) and checks that the counts and bytes add up to the plan's; the
timeline (dev/bench/compare_stages.py --timeline) holds a traced step (-zt) to this list.
*/
#include <stdio.h>
#include <string.h>
#include "../../llmc/zero_plan.h"

#define USAGE "usage: %s [--cuda FLOATX_BYTES [--grads GRAD_BYTES]] [--zu K] MODEL_FILE|dN N [N ...]"

// A model's config from a model file or "dN".
static GPT2Config model_config(const char* model) {
    GPT2Config c;
    if (model[0] == 'd' && model[1] >= '1' && model[1] <= '9') {
        int depth = (int)parse_long("depth", model + 1);
        c = config_for_depth(depth, 1024);
    } else {
        FILE* fp = fopenCheck(model, "rb");
        int header[HEADER_INTS];
        read_header(fp, header, model, MODEL_MAGIC, "GPT-2 model");
        config_from_header(&c, header, model);
        fclose(fp);
    }
    return c;
}

// The step's collectives, as the trainers' hooks issue them (train_gpt2.c / train_gpt2.cu,
// "the sharding schedule"): one line each, and their sums checked against the plan.
typedef struct { const ZeroPlan* p; int cuda; double sum[4]; int calls[4]; } Issued;
static const char* const KIND_NAMES[4] = {"reduce-scatter", "all-gather", "all-reduce", "scalars"};
enum { RS, AG, AR, SC };

static void issue(Issued* is, int kind, int u, double bytes) {
    printf("%s %d %.0f\n", KIND_NAMES[kind], u, bytes);
    is->sum[kind] += bytes;
    is->calls[kind]++;
}

// unit u's slice of b-byte elements over the shard group, or (all-reduce) across the groups
static double slice_bytes(const Issued* is, int u, int b) { return (double)is->p->shard_size[u] * b * (is->p->group_size - 1); }
static double across_bytes(const Issued* is, int u) {
    int R = is->p->replicas;
    return 2.0 * (double)(is->p->shard_size[u] / R) * is->p->bytes.grad * (R - 1);
}

// unit_params: stage 3 asks the walk which gathers to start
static void use_unit(Issued* is, ZeroWalk* w, int u) {
    if (is->p->stage < 3) { return; }
    ZeroUse use = zero_walk_use(w, is->p, u);
    for (int k = 0; k < use.num_gather; k++) { issue(is, AG, use.gather[k], slice_bytes(is, use.gather[k], is->p->bytes.param)); }
}

static void release_unit(Issued* is, ZeroWalk* w, int u) { if (is->p->stage == 3) { zero_walk_release(w, is->p, u); } }

// unit_grads_done on the step's last micro-step
static void grads_done(Issued* is, int u) {
    const ZeroPlan* p = is->p;
    issue(is, RS, u, slice_bytes(is, u, p->bytes.grad));
    if (is->cuda && p->stage == 0) { issue(is, AG, u, slice_bytes(is, u, p->bytes.grad)); } // queued right after
    if (is->cuda && p->replicas > 1) { issue(is, AR, u, across_bytes(is, u)); }
}

static int print_collectives(int argc, char** argv) {
    StateBytes bytes = ZERO_STATE_BYTES_CPU;
    int stage = (int)parse_long("--collectives STAGE", argv[2]);
    int cuda = 0, floatx = 4, grads = 0, unit_blocks = 1, prefetch = 1, group = 0, accum = 1;
    ReshardPolicy reshard = RESHARD_DEFAULT;
    int i = 3;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        const char* f = argv[i], *v = argv[i + 1];
        if (strcmp(f, "--cuda") == 0) { cuda = 1; floatx = (int)parse_long(f, v); }
        else if (strcmp(f, "--grads") == 0) { grads = (int)parse_long(f, v); }
        else if (strcmp(f, "--zu") == 0) { unit_blocks = (int)parse_long(f, v); }
        else if (strcmp(f, "--zp") == 0) { prefetch = (int)parse_long(f, v); }
        else if (strcmp(f, "--zg") == 0) { group = (int)parse_long(f, v); }
        else if (strcmp(f, "--accum") == 0) { accum = (int)parse_long(f, v); }
        else if (strcmp(f, "--zr") == 0) {
            int k = 0;
            while (k < 3 && strcmp(v, RESHARD_NAMES[k]) != 0) { k++; }
            if (k == 3) { fail("--zr expects default, always or never, got '%s'", v); }
            reshard = (ReshardPolicy)k;
        } else { fail("--collectives: unknown flag '%s'", f); }
    }
    if (i + 2 != argc) { fail("usage: %s --collectives STAGE [flags] MODEL_FILE|dN N", argv[0]); }
    if (stage < 0 || stage > 3) { fail("--collectives expects a stage 0..3, got %d", stage); }
    if (cuda) {
        if (floatx != 2 && floatx != 4) { fail("--cuda expects 2 or 4, got %d", floatx); }
        StateBytes b = ZERO_STATE_BYTES_CUDA(floatx, grads == 0 ? floatx : grads);
        bytes = b;
    }
    GPT2Config c = model_config(argv[i]);
    int N = (int)parse_long("N", argv[i + 1]);
    if (N < 1 || accum < 1 || prefetch < 0) { fail("--collectives: N and --accum must be >= 1, --zp >= 0"); }
    if (unit_blocks < 1 || unit_blocks > c.num_layers) { fail("--zu expects 1..%d, got %d", c.num_layers, unit_blocks); }
    if (group != 0 && (group < 1 || N % group != 0 || (stage == 0 && group != N))) {
        fail("--zg %d: a divisor of N = %d (stage 0: N itself)", group, N);
    }
    ZeroPlan p;
    zero_plan_init(&p, &c, stage, N, group, accum, reshard, stage == 3 ? prefetch : 0, unit_blocks, bytes, UNIT_ALIGN);
    Issued is = {&p, cuda, {0}, {0}};
    ZeroWalk w;
    zero_walk_init(&w, p.block_units);
    int nb = p.block_units;
    for (int micro = 0; micro < accum; micro++) {
        int reduce = micro == accum - 1;
        zero_walk_begin_micro_step(&w);
        // gpt2_forward: the encoder (unit 0), the blocks, the final layernorm and head (unit 0)
        for (int u = 0; u <= nb; u++) {
            use_unit(&is, &w, u);
            if (p.stage == 3 && !zero_walk_keep_after_forward(&w, &p, u)) { release_unit(&is, &w, u); }
        }
        use_unit(&is, &w, 0);
        // gpt2_backward: the head, the blocks in reverse, the encoder (no parameters)
        use_unit(&is, &w, 0);
        release_unit(&is, &w, 0);
        for (int u = nb; u >= 1; u--) {
            use_unit(&is, &w, u);
            if (!p.full_grads) { zero_walk_grad_slot(&w, u); }
            release_unit(&is, &w, u);
            if (reduce) { grads_done(&is, u); }
        }
        if (reduce) { grads_done(&is, 0); }
    }
    zero_walk_reductions_done(&w);
    if (!cuda) { // grads_finish_reduction: stage 0's all-gathers, then -zg's all-reduces, one unit at a time
        for (int u = 0; u < p.layout.num_units && p.stage == 0; u++) { issue(&is, AG, u, slice_bytes(&is, u, p.bytes.grad)); }
        for (int u = 0; u < p.layout.num_units && p.replicas > 1; u++) { issue(&is, AR, u, across_bytes(&is, u)); }
    }
    issue(&is, SC, -1, 8.0 * (N - 1)); // gpt2_update: the norm's partials
    // CUDA: the loss before the update queues stages 1-2's all-gathers (train_step: a scalar
    // all-gather behind them on the comm stream would make the host wait for them all)
    if (cuda) { issue(&is, SC, -1, 8.0 * (N - 1)); }
    for (int u = 0; u < p.layout.num_units && (p.stage == 1 || p.stage == 2); u++) {
        issue(&is, AG, u, slice_bytes(&is, u, p.bytes.param)); // the updated params
    }
    if (!cuda) { issue(&is, SC, -1, 8.0 * (N - 1)); } // the loss
    // the plan's own totals: this walk must reproduce them
    double want[4] = {p.comm_reduce_scatter, p.comm_all_gather, p.comm_all_reduce_across, p.comm_scalars};
    for (int k = 0; k < 4; k++) {
        if (is.sum[k] != want[k]) { fail("--collectives: %s adds up to %.0f bytes, the plan says %.0f", KIND_NAMES[k], is.sum[k], want[k]); }
    }
    if (is.calls[RS] != p.calls_reduce_scatter || is.calls[AG] != p.calls_all_gather) {
        fail("--collectives: %d reduce-scatters and %d all-gathers, the plan says %d and %d", is.calls[RS], is.calls[AG],
             p.calls_reduce_scatter, p.calls_all_gather);
    }
    return 0;
}

int main(int argc, char** argv) {
    const char* prog = argv[0];
    if (argc > 2 && strcmp(argv[1], "--collectives") == 0) { return print_collectives(argc, argv); }
    StateBytes bytes = ZERO_STATE_BYTES_CPU; // the CPU trainer's fp32 params and grads, m and v
    if (argc > 1 && strcmp(argv[1], "--cuda") == 0) {
        if (argc < 3) { fail(USAGE, prog); }
        int floatx = (int)parse_long("--cuda FLOATX_BYTES", argv[2]);
        if (floatx != 2 && floatx != 4) { fail("--cuda expects the floatX size in bytes, 2 (bf16) or 4 (fp32), got %d", floatx); }
        argv += 2; // the model and the Ns follow, as without the flag
        argc -= 2;
        int grads = floatx; // -zd's default: the gradients in floatX
        if (argc > 2 && strcmp(argv[1], "--grads") == 0) {
            grads = (int)parse_long("--grads GRAD_BYTES", argv[2]);
            if (grads != 4) { fail("--grads expects 4 (fp32 gradients, -zd fp32), got %d", grads); }
            argv += 2;
            argc -= 2;
        }
        StateBytes cuda = ZERO_STATE_BYTES_CUDA(floatx, grads); // what train_gpt2.cu's gpt2_init gives its plan
        bytes = cuda;
    }
    int unit_blocks = 1;
    if (argc > 1 && strcmp(argv[1], "--zu") == 0) {
        if (argc < 3) { fail(USAGE, prog); }
        unit_blocks = (int)parse_long("--zu K", argv[2]);
        argv += 2;
        argc -= 2;
    }
    if (argc < 3) { fail(USAGE, prog); }
    GPT2Config c = model_config(argv[1]);
    if (unit_blocks < 1 || unit_blocks > c.num_layers) {
        fail("--zu expects blocks per unit 1..%d (the model's layers), got %d", c.num_layers, unit_blocks);
    }
    // state_total: the model state, allocated at start-up (what the trainers' "allocated" column
    // sums to); plan_total adds the CPU ring's comm scratch, held while reduce-scatters are in flight
    // (zero_plan_total: what -z auto counts)
    printf("ranks,group,stage,params,grads,optimizer,buffers,grad_scratch,state_total,comm_scratch,plan_total,reduce_scatter,"
           "all_gather,all_reduce_across,unit_blocks,units,largest_unit,rs_calls,ag_calls\n");
    for (int i = 2; i < argc; i++) {
        int N = (int)parse_long("N", argv[i]);
        if (N < 1) { fail("N must be >= 1, got %d", N); }
        for (int G = 1; G <= N; G++) {
            if (N % G != 0) { continue; }
            for (int stage = G == N ? 0 : 1; stage < 4; stage++) {
                ZeroPlan p;
                zero_plan_init(&p, &c, stage, N, G, 1, RESHARD_DEFAULT, 1, unit_blocks, bytes, UNIT_ALIGN); // the trainer's defaults
                printf("%d,%d,%d,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%.0f,%.0f,%.0f,%d,%d,%zu,%d,%d\n", N, G, stage, p.mem_params, p.mem_grads,
                       p.mem_optimizer, p.mem_buffers, p.mem_grad_scratch,
                       p.mem_params + p.mem_grads + p.mem_optimizer + p.mem_buffers + p.mem_grad_scratch,
                       p.mem_comm_scratch, zero_plan_total(&p), p.comm_reduce_scatter, p.comm_all_gather, p.comm_all_reduce_across, unit_blocks, p.layout.num_units,
                       p.layout.num_units > 1 ? p.layout.unit_size[1] : 0, p.calls_reduce_scatter, p.calls_all_gather);
            }
        }
    }
    return 0;
}
