/*
Prints the sharding plan (llmc/zero_plan.h) of a model for several world sizes as CSV: the bytes
per rank each stage holds and moves per step, without running anything. compare_stages.py uses
it for the world sizes it does not run (the memory-vs-ranks chart).
    dev/bench/zero_plan_print MODEL_FILE|dN N [N ...]
*/
#include <stdio.h>
#include "../../llmc/zero_plan.h"

int main(int argc, char** argv) {
    if (argc < 3) { fail("usage: %s MODEL_FILE|dN N [N ...]", argv[0]); }
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
    StateBytes cpu = ZERO_STATE_BYTES_CPU; // the CPU trainer's fp32 params and grads, m and v
    printf("ranks,stage,params,grads,optimizer,buffers,plan_total,reduce_scatter,all_gather\n");
    for (int i = 2; i < argc; i++) {
        int N = (int)parse_long("N", argv[i]);
        if (N < 1) { fail("N must be >= 1, got %d", N); }
        for (int stage = 0; stage < 4; stage++) {
            ZeroPlan p;
            zero_plan_init(&p, &c, stage, N, 1, RESHARD_DEFAULT, 1, cpu, 16); // the trainer's defaults
            printf("%d,%d,%zu,%zu,%zu,%zu,%zu,%.0f,%.0f\n", N, stage, p.mem_params, p.mem_grads, p.mem_optimizer,
                   p.mem_buffers, p.mem_params + p.mem_grads + p.mem_optimizer + p.mem_buffers,
                   p.comm_reduce_scatter, p.comm_all_gather);
        }
    }
    return 0;
}
