/*
zero_walk_print: the collectives of one training step of train_gpt2.cu at a ZeRO stage, in the order
the trainer issues them and with the stream orderings it asks for, for the performance model's
two-stream timeline (dev/perf/zero_step.py). The decisions come from llmc/zero_plan.h (the plan and
stage 3's walk), called in the order train_gpt2.cu's gpt2_forward, gpt2_backward, gpt2_update and
the sharding section call them; nothing is timed here.

    dev/perf/zero_walk_print STAGE N [L]          (L = 12: GPT-2 124M; one micro-step per step)

One line per event, in issue order:
    compute SEGMENT                 the compute of a part of the step: encoder, block u (forward),
                                    head, head_bwd, block_bwd u, encoder_bwd, update
    gather U SLOT                   all-gather of unit U's params into gather buffer SLOT (stage 3),
                                    on the comm stream, after the compute that last read SLOT
    wait_gather U                   the compute stream waits for unit U's gather (stage 3), or for
                                    its all-gather after the last update (stages 1-2)
    release SLOT                    the compute queued so far is SLOT's last reader (stage 3)
    grads U PREV                    unit U's gradient slot is reused: the compute waits for block
                                    PREV's reduce-scatter (-1: none); the slot is zeroed (memset)
    reduce_scatter U BYTES          on the comm stream, after the compute queued so far
    all_gather U BYTES              on the comm stream, in order after what is queued there (stages
                                    1-2 after the update: unit U's parameters, waited by wait_gather U)
    compute_waits_comm              the compute stream waits for everything queued on the comm stream
    comm_waits_compute              the comm stream waits for the compute queued so far
BYTES are the collective's bus bytes per rank (zero_plan.h's bus_bytes), so they add up to the
plan's comm_reduce_scatter and comm_all_gather (dev/perf/test_perf_model.py checks that).
*/
#include <stdio.h>
#include <stdlib.h>
#include "../../llmc/zero_plan.h"

static ZeroPlan plan;
static ZeroWalk walk;
// stages 1-2 (train_gpt2.cu params_gathering): unit u's all-gather after the update is queued and
// the compute has not waited for it yet. The step printed is one of many, so at its start every
// unit is still being gathered from the step before.
static int params_gathering[MAX_UNITS];

static double unit_bus_bytes(int u, int elem_bytes) {
    return bus_bytes((double)plan.layout.unit_size[u] * elem_bytes, plan.group_size);
}

static int gather_slot(int u) { return u == 0 ? -1 : zero_gather_slot(&plan, u); } // -1: unit 0's own buffer

// train_gpt2.cu unit_params: the walk's gathers (each after its buffer's last reader), then the
// compute waits for the unit's own gather when it is still in flight; stages 1-2: the first use
// after an update waits for the unit's all-gather
static void unit_params(int u) {
    if (plan.stage < 3) {
        if (params_gathering[u]) { printf("wait_gather %d\n", u); params_gathering[u] = 0; }
        return;
    }
    ZeroUse use = zero_walk_use(&walk, &plan, u);
    for (int k = 0; k < use.num_gather; k++) {
        int g = use.gather[k];
        printf("gather %d %d %.0f\n", g, gather_slot(g), unit_bus_bytes(g, plan.bytes.param));
    }
    if (use.wait) { printf("wait_gather %d\n", u); }
}

static void unit_release(int u) {
    if (plan.stage < 3) { return; }
    if (zero_walk_release(&walk, &plan, u) != UNIT_SHARDED) { printf("release %d\n", gather_slot(u)); }
}

static void release_after_forward(int u) {
    if (plan.stage == 3 && !zero_walk_keep_after_forward(&walk, &plan, u)) { unit_release(u); }
}

// train_gpt2.cu unit_grads: stages 2-3 without accumulation hand out one of two block slots
static void unit_grads(int u) {
    if (plan.full_grads) { return; }
    int prev = u > 0 ? zero_walk_grad_slot(&walk, u) : -1;
    printf("grads %d %d\n", u, prev);
}

// train_gpt2.cu unit_grads_done on the step's last micro-step
static void unit_grads_done(int u) {
    printf("reduce_scatter %d %.0f\n", u, unit_bus_bytes(u, plan.bytes.grad));
    if (plan.stage == 0) { printf("all_gather %d %.0f\n", u, unit_bus_bytes(u, plan.bytes.grad)); }
}

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4) { fail("usage: %s STAGE N [L]", argv[0]); }
    int stage = (int)parse_long("STAGE", argv[1]), N = (int)parse_long("N", argv[2]);
    int L = argc > 3 ? (int)parse_long("L", argv[3]) : 12;
    if (stage < 0 || stage > 3 || N < 1 || L < 1) { fail("expected STAGE 0..3, N >= 1, L >= 1"); }
    GPT2Config c = config_for_depth(L, 1024);
    // the CUDA trainer's defaults: bf16 params and grads, one micro-step, reshard 'default',
    // prefetch 1 (stage 3), one block per unit (llmc/train_args.h)
    StateBytes bytes = ZERO_STATE_BYTES_CUDA(2, 2);
    zero_plan_init(&plan, &c, stage, N, N, 1, RESHARD_DEFAULT, stage == 3 ? 1 : 0, 1, bytes, UNIT_ALIGN);
    zero_walk_init(&walk, plan.block_units);
    zero_walk_begin_micro_step(&walk);
    int nb = plan.block_units;
    for (int u = 0; u < plan.layout.num_units; u++) { params_gathering[u] = stage == 1 || stage == 2; }
    // gpt2_forward
    unit_params(0);
    printf("compute encoder\n");
    release_after_forward(0);
    for (int u = 1; u <= nb; u++) {
        unit_params(u);
        printf("compute block %d\n", u);
        release_after_forward(u);
    }
    unit_params(0); // stays gathered into the backward
    printf("compute head\n");
    // gpt2_backward
    unit_params(0);
    unit_grads(0);
    printf("compute head_bwd\n");
    unit_release(0);
    for (int u = nb; u >= 1; u--) {
        unit_params(u);
        unit_grads(u);
        printf("compute block_bwd %d\n", u);
        unit_release(u);
        printf("comm_waits_compute\n");
        unit_grads_done(u);
    }
    printf("compute encoder_bwd\n");
    printf("comm_waits_compute\n");
    unit_grads_done(0);
    // grads_finish_reduction, then gpt2_update
    printf("compute_waits_comm\n");
    printf("compute update\n");
    if (stage == 1 || stage == 2) { // params_all_gather: every unit queued at once; each unit's next use waits for its own
        printf("comm_waits_compute\n");
        for (int u = 0; u < plan.layout.num_units; u++) {
            printf("all_gather %d %.0f\n", u, unit_bus_bytes(u, plan.bytes.param));
            params_gathering[u] = 1;
        }
    }
    if (stage == 3) { printf("comm_waits_compute\n"); } // the next step's gathers read the updated shard
    printf("plan %.0f %.0f %d %d\n", plan.comm_reduce_scatter, plan.comm_all_gather, plan.calls_reduce_scatter,
           plan.calls_all_gather);
    return 0;
}
