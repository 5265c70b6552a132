/*
Prints the sharding plan (llmc/zero_plan.h) of a model for several world sizes as CSV: the bytes
per rank each stage holds and moves per step, without running anything, for every shard group
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
*/
#include <stdio.h>
#include <string.h>
#include "../../llmc/zero_plan.h"

#define USAGE "usage: %s [--cuda FLOATX_BYTES [--grads GRAD_BYTES]] [--zu K] MODEL_FILE|dN N [N ...]"

int main(int argc, char** argv) {
    const char* prog = argv[0];
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
    GPT2Config c;
    if (argv[1][0] == 'd' && argv[1][1] >= '1' && argv[1][1] <= '9') {
        int depth = (int)parse_long("depth", argv[1] + 1);
        c = config_for_depth(depth, 1024);
    } else {
        FILE* fp = fopenCheck(argv[1], "rb");
        int header[HEADER_INTS];
        read_header(fp, header, argv[1], MODEL_MAGIC, "GPT-2 model");
        config_from_header(&c, header, argv[1]);
        fclose(fp);
    }
    if (unit_blocks < 1 || unit_blocks > c.num_layers) {
        fail("--zu expects blocks per unit 1..%d (the model's layers), got %d", c.num_layers, unit_blocks);
    }
    printf("ranks,group,stage,params,grads,optimizer,buffers,grad_scratch,plan_total,reduce_scatter,all_gather,all_reduce_across,"
           "unit_blocks,units,largest_unit,rs_calls,ag_calls\n");
    for (int i = 2; i < argc; i++) {
        int N = (int)parse_long("N", argv[i]);
        if (N < 1) { fail("N must be >= 1, got %d", N); }
        for (int G = 1; G <= N; G++) {
            if (N % G != 0) { continue; }
            for (int stage = G == N ? 0 : 1; stage < 4; stage++) {
                ZeroPlan p;
                zero_plan_init(&p, &c, stage, N, G, 1, RESHARD_DEFAULT, 1, unit_blocks, bytes, UNIT_ALIGN); // the trainer's defaults
                printf("%d,%d,%d,%zu,%zu,%zu,%zu,%zu,%zu,%.0f,%.0f,%.0f,%d,%d,%zu,%d,%d\n", N, G, stage, p.mem_params, p.mem_grads,
                       p.mem_optimizer, p.mem_buffers, p.mem_grad_scratch,
                       p.mem_params + p.mem_grads + p.mem_optimizer + p.mem_buffers + p.mem_grad_scratch,
                       p.comm_reduce_scatter, p.comm_all_gather, p.comm_all_reduce_across, unit_blocks, p.layout.num_units,
                       p.layout.num_units > 1 ? p.layout.unit_size[1] : 0, p.calls_reduce_scatter, p.calls_all_gather);
            }
        }
    }
    return 0;
}
