/*
Unit tests of the sharding plan (llmc/zero_plan.h) and the data loader's distributed sampler,
against exact theory: shards partition every unit; memory per rank follows the ZeRO formula
and shrinks stage by stage as DESIGN.md §4 says; bytes per step follow the bus-byte counts
(stage 3 with reshard 'always' moves exactly 1.5x stage 0); the optimizer offload moves exactly
the optimizer bytes to the host; N ranks read disjoint tokens. Each
check of the units runs for several unit sizes K (-zu), L divisible by K or not.
    make dev/test/test_zero_plan && dev/test/test_zero_plan
*/
#include <stdio.h>
#include <math.h>
#include "../../llmc/zero_plan.h"
#include "../../llmc/dataloader.h"

static int g_passed = 0, g_failed = 0;
#define CHECK(cond, ...) do { \
    if (cond) { g_passed++; } \
    else { g_failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } \
} while (0)

static const StateBytes CPU = ZERO_STATE_BYTES_CPU;     // MPI: stages 0-1 reduce-scatter into a buffer
static const StateBytes CUDA = ZERO_STATE_BYTES_CUDA(2, 2); // bf16; NCCL: in place
static const StateBytes CUDA_FP32_GRADS = ZERO_STATE_BYTES_CUDA(2, 4); // bf16, -zd fp32

// ceil(a / b)
static int div_up(int a, int b) { return (a + b - 1) / b; }

// The units tile the slab; every tensor of every layer lies inside its unit's real elements,
// without overlaps; rank slices partition each unit. With K blocks per unit: ceil(L/K) block
// units of K blocks, the last one the rest; each block in exactly one unit, in order; every
// element's position (unit 0, then block by block) maps to where the tensor really lies.
static void check_layout(const char* name, const GPT2Config* c, int N, int K) {
    ZeroPlan p;
    zero_plan_init(&p, c, 1, N, 0, 1, RESHARD_DEFAULT, 0, K, CPU, 16);
    const ParamLayout* lay = &p.layout;
    int L = c->num_layers, nb = div_up(L, K);
    CHECK(lay->num_units == 1 + nb && p.block_units == nb, "%s N=%d K=%d: %d units, expected %d", name, N, K, lay->num_units, 1 + nb);
    size_t block_numel = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) { if (TENSOR_INFO[t].unit == UNIT_BLOCK) { block_numel += tensor_numel(c, t); } }
    int blocks_ok = 1;
    for (int u = 1; u <= nb; u++) {
        int want = u < nb ? K : L - (nb - 1) * K; // the last unit holds the rest
        if (unit_block_count(lay, u) != want || lay->unit_numel[u] != (size_t)want * block_numel ||
            unit_first_block(lay, u) != (u - 1) * K || unit_last_block(lay, u) != (u - 1) * K + want - 1) { blocks_ok = 0; }
    }
    for (int l = 0; l < L; l++) {
        int u = unit_of_block(lay, l);
        if (l < unit_first_block(lay, u) || l > unit_last_block(lay, u) || block_offset(lay, l) != (size_t)(l - unit_first_block(lay, u)) * block_numel) { blocks_ok = 0; }
    }
    CHECK(blocks_ok, "%s N=%d K=%d: blocks per unit, first/last block or block offsets wrong", name, N, K);
    size_t off = 0, shard_off = 0, real = 0;
    for (int u = 0; u < lay->num_units; u++) {
        CHECK(lay->unit_offset[u] == off, "%s N=%d unit %d starts at %zu, expected %zu", name, N, u, lay->unit_offset[u], off);
        CHECK(lay->unit_size[u] % (16 * (size_t)N) == 0, "%s N=%d unit %d size %zu not a multiple of 16N", name, N, u, lay->unit_size[u]);
        CHECK(lay->unit_size[u] >= lay->unit_numel[u] && lay->unit_size[u] < lay->unit_numel[u] + 16 * (size_t)N,
              "%s N=%d unit %d padded %zu -> %zu", name, N, u, lay->unit_numel[u], lay->unit_size[u]);
        CHECK(p.shard_size[u] * N == lay->unit_size[u], "%s N=%d unit %d: %d slices of %zu != %zu", name, N, u, N, p.shard_size[u], lay->unit_size[u]);
        CHECK(p.shard_offset[u] == shard_off, "%s N=%d unit %d shard offset %zu != %zu", name, N, u, p.shard_offset[u], shard_off);
        for (int r = 0; r < N; r++) {
            CHECK(zero_slice_offset(&p, u, r) == lay->unit_offset[u] + r * p.shard_size[u], "%s slice", name);
        }
        off += lay->unit_size[u];
        shard_off += p.shard_size[u];
        real += lay->unit_numel[u];
    }
    CHECK(off == lay->total && shard_off == p.shard_total && p.shard_total * N == lay->total,
          "%s N=%d: total %zu, shards %zu", name, N, lay->total, p.shard_total);
    CHECK(real == lay->num_parameters, "%s N=%d: %zu real elements != %zu parameters", name, N, real, lay->num_parameters);
    // every tensor copy inside its unit's real part, no two overlapping: mark each element once
    unsigned char* seen = (unsigned char*)callocCheck(lay->total, 1);
    size_t marked = 0;
    int overlap = 0, outside = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (int l = 0; l < tensor_copies(c, t); l++) {
            size_t o = tensor_offset(lay, c, t, l);
            int u = tensor_unit(lay, t, l);
            if (o < lay->unit_offset[u] || o + tensor_numel(c, t) > lay->unit_offset[u] + lay->unit_numel[u]) { outside++; }
            // its position: in unit 0, or block l's part of the blocks (the file's block order)
            size_t pos = (TENSOR_INFO[t].unit == UNIT_BLOCK ? lay->unit_numel[0] + (size_t)l * block_numel : 0) + lay->offset_in_unit[t];
            size_t run, at = position_to_slab(lay, pos, &run);
            if (at != o || run < tensor_numel(c, t)) { outside++; }
            for (size_t i = 0; i < tensor_numel(c, t); i++) { overlap += seen[o + i]; seen[o + i] = 1; marked++; }
        }
    }
    CHECK(overlap == 0 && outside == 0 && marked == lay->num_parameters,
          "%s N=%d K=%d: %d overlapping elements, %d tensors outside their unit or misplaced by position", name, N, K, overlap, outside);
    for (int u = 0; u < lay->num_units; u++) {
        size_t run, at = position_to_slab(lay, unit_position(lay, u), &run);
        CHECK(at == lay->unit_offset[u], "%s N=%d K=%d: unit %d's position lands at %zu, not its start %zu", name, N, K, u, at, lay->unit_offset[u]);
    }
    free(seen);
}

// Memory and bytes per rank against the formulas of DESIGN.md §4-§5.
// With K blocks per unit, a "block" slot holds the largest block unit, U_1 = K blocks padded to
// 16N; the last unit is the rest, U_last.
static void check_memory_and_comm(const char* name, const GPT2Config* c, int N, StateBytes sb, int K) {
    ZeroPlan p[4];
    for (int s = 0; s < 4; s++) { zero_plan_init(&p[s], c, s, N, 0, 1, RESHARD_ALWAYS, 1, K, sb, 16); }
    size_t P = p[0].layout.total, PN = P / N;
    int L = c->num_layers, nb = div_up(L, K);
    size_t unit0 = p[0].layout.unit_size[0], block = p[0].layout.unit_size[1], last = p[0].layout.unit_size[nb];
    size_t block_numel = p[0].layout.block_numel;
    CHECK(block == round_up((size_t)K * block_numel, 16 * (size_t)N) &&
          last == round_up((size_t)(L - (nb - 1) * K) * block_numel, 16 * (size_t)N) && block >= last,
          "%s N=%d K=%d: unit sizes U_1 %zu, U_last %zu", name, N, K, block, last);
    // the ZeRO formula: K-byte optimizer state sharded from stage 1, grads from 2, params at 3
    CHECK(p[0].zero_params == P * sb.param && p[0].zero_grads == P * sb.grad && p[0].zero_optimizer == P * sb.optimizer, "%s N=%d stage 0 formula", name, N);
    CHECK(p[1].zero_params == P * sb.param && p[1].zero_grads == P * sb.grad && p[1].zero_optimizer == PN * sb.optimizer, "%s N=%d stage 1 formula", name, N);
    CHECK(p[2].zero_params == P * sb.param && p[2].zero_grads == PN * sb.grad && p[2].zero_optimizer == PN * sb.optimizer, "%s N=%d stage 2 formula", name, N);
    CHECK(p[3].zero_params == PN * sb.param && p[3].zero_grads == PN * sb.grad && p[3].zero_optimizer == PN * sb.optimizer, "%s N=%d stage 3 formula", name, N);
    // what the plan allocates beyond the formula: named buffers, nothing else
    CHECK(p[0].mem_params == P * sb.param && p[0].mem_grads == P * sb.grad && p[0].mem_optimizer == P * sb.optimizer, "%s stage 0 alloc", name);
    CHECK(p[1].mem_optimizer == PN * sb.optimizer, "%s stage 1 optimizer", name);
    size_t rs_buffer = sb.reduce_scatter_in_place ? 0 : p[0].max_shard_size * sb.grad;
    CHECK(p[0].mem_buffers == rs_buffer && p[1].mem_buffers == rs_buffer, "%s stages 0-1 buffers = the reduce-scatter buffer (none in place)", name);
    CHECK(p[2].mem_grads == (PN + unit0 + 2 * block) * sb.grad, "%s stage 2 grads = shard + unit 0 + 2 blocks", name);
    size_t slots = nb < 2 ? (size_t)nb : 2; // prefetch 1: D+1 = 2 slots, at most one per block unit
    CHECK(p[3].mem_params == PN * sb.param && p[3].mem_buffers == (unit0 + slots * block) * sb.param,
          "%s K=%d stage 3 params = shard, buffers = U_0 + min(D+1, units-1) U_1", name, K);
    // bytes per step: an all-reduce's bus bytes 2*S*(N-1)/N, done as reduce-scatter + all-gather
    double S = (double)P * sb.grad, ring = (double)(N - 1) / N;
    for (int s = 0; s < 3; s++) {
        CHECK(fabs(p[s].comm_reduce_scatter + p[s].comm_all_gather - 2 * S * ring) < 0.5, "%s N=%d stage %d bytes", name, N, s);
    }
    double stage0 = p[0].comm_reduce_scatter + p[0].comm_all_gather;
    double stage3 = p[3].comm_reduce_scatter + p[3].comm_all_gather;
    CHECK(N == 1 ? stage3 == 0 : fabs(stage3 / stage0 - 1.5) < 1e-12, "%s N=%d: stage 3 (always) moves %.6fx stage 0, not 1.5x", name, N, stage3 / stage0);
    ZeroPlan never, dflt, accum;
    zero_plan_init(&never, c, 3, N, 0, 1, RESHARD_NEVER, 1, K, sb, 16);
    zero_plan_init(&dflt, c, 3, N, 0, 1, RESHARD_DEFAULT, 1, K, sb, 16);
    zero_plan_init(&accum, c, 3, N, 0, 3, RESHARD_ALWAYS, 1, K, sb, 16);
    CHECK(fabs(never.comm_reduce_scatter + never.comm_all_gather - stage0) < 0.5, "%s N=%d: 'never' should move what stage 0 moves", name, N);
    CHECK(fabs(stage3 - (dflt.comm_reduce_scatter + dflt.comm_all_gather) - last * sb.param * ring) < 0.5,
          "%s N=%d K=%d: 'default' should save exactly the last unit's gather", name, N, K);
    CHECK(accum.comm_reduce_scatter == p[3].comm_reduce_scatter && fabs(accum.comm_all_gather - 3 * p[3].comm_all_gather) < 0.5,
          "%s N=%d: accumulation x3 must keep one reduce-scatter and gather 3x", name, N);
    CHECK(never.mem_buffers == (unit0 + (size_t)nb * block) * sb.param, "%s K=%d 'never' holds every block unit", name, K);
    // collectives per step: one reduce-scatter per unit; stages 0-2 one all-gather per unit;
    // stage 3 per micro-step unit 0 twice (once: never) and the block units nb + nb ('always'),
    // nb + nb - 1 ('default'), nb ('never')
    int calls_ok = 1;
    for (int s = 0; s < 4; s++) { calls_ok &= p[s].calls_reduce_scatter == 1 + nb && (s == 3 || p[s].calls_all_gather == 1 + nb); }
    calls_ok &= p[3].calls_all_gather == 2 + 2 * nb && dflt.calls_all_gather == 2 + 2 * nb - 1 && never.calls_all_gather == 1 + nb
                && accum.calls_all_gather == 3 * (2 + 2 * nb) && accum.calls_reduce_scatter == 1 + nb;
    CHECK(calls_ok, "%s N=%d K=%d: collectives per step (reduce-scatter %d, all-gather %d/%d/%d/%d)", name, N, K,
          p[3].calls_reduce_scatter, p[3].calls_all_gather, dflt.calls_all_gather, never.calls_all_gather, accum.calls_all_gather);
    // the 'default' all-gather bytes from the unit sizes: 2 U_0 + (P - U_0) + (P - U_0 - U_last)
    CHECK(fabs(dflt.comm_all_gather - (double)(2 * unit0 + 2 * (P - unit0) - last) * sb.param * ring) < 0.5,
          "%s N=%d K=%d: stage 3 'default' all-gather %.0f", name, N, K, dflt.comm_all_gather);
    // the scalars: two doubles (norm, loss) all-gathered per step
    CHECK(p[0].comm_scalars == 16.0 * (N - 1) && p[3].comm_scalars == 16.0 * (N - 1), "%s N=%d scalars", name, N);
    // the ring reduce-scatter's partial sums: 2 slices per reduce-scatter in flight; one at a
    // time in stages 0-1, unit 0 and two blocks in stages 2-3, all while accumulating
    size_t S0 = p[0].shard_size[0], Sb = p[0].shard_size[1], two = slots;
    int has_ring = sb.ring_scratch && N > 1;
    CHECK(p[0].mem_comm_scratch == (has_ring ? 2 * p[0].max_shard_size * sb.grad : 0) && p[1].mem_comm_scratch == p[0].mem_comm_scratch
          && p[2].mem_comm_scratch == (has_ring ? 2 * (S0 + two * Sb) * sb.grad : 0) && p[3].mem_comm_scratch == p[2].mem_comm_scratch
          && accum.mem_comm_scratch == (has_ring ? 2 * PN * sb.grad : 0), "%s N=%d comm scratch", name, N);
}

// Hybrid sharding (-zg G): the plan of stage s over N ranks in groups of G against exact
// arithmetic (DESIGN.md §4-§5): shards of P/G, the ZeRO formula with G in place of N, bytes
// inside the group over G ranks and the cross-group all-reduce 2*(P/G)*(R-1)/R; G = N is the
// plain stage field by field; each N-way slice has exactly one rank answering for it, inside
// that rank's shard.
static void check_hybrid(const char* name, const GPT2Config* c, int N, int G, StateBytes sb) {
    int R = N / G, L = c->num_layers;
    for (int s = 1; s <= 3; s++) {
        ZeroPlan p, plain;
        zero_plan_init(&p, c, s, N, G, 1, RESHARD_DEFAULT, 1, 1, sb, 16);
        zero_plan_init(&plain, c, s, N, 0, 1, RESHARD_DEFAULT, 1, 1, sb, 16);
        const ParamLayout* lay = &p.layout;
        size_t P = lay->total, PG = P / G, unit0 = lay->unit_size[0], block = lay->unit_size[1];
        CHECK(p.group_size == G && p.replicas == R && P == plain.layout.total, "%s N=%d G=%d stage %d: groups, layout", name, N, G, s);
        if (G == N) { CHECK(memcmp(&p, &plain, sizeof(p)) == 0, "%s N=%d stage %d: G = N is not the plain stage", name, N, s); }
        int aligned = 1;
        for (int u = 0; u < lay->num_units; u++) {
            aligned &= p.shard_size[u] * G == lay->unit_size[u] && p.shard_size[u] % (16 * (size_t)R) == 0;
        }
        CHECK(aligned && p.shard_total == PG, "%s N=%d G=%d stage %d: shards of P/G, each R aligned slices", name, N, G, s);
        // memory: the formula with G ranks sharing the state
        CHECK(p.mem_optimizer == PG * sb.optimizer && p.zero_optimizer == PG * sb.optimizer, "%s N=%d G=%d stage %d optimizer", name, N, G, s);
        CHECK(p.mem_params == (s < 3 ? P : PG) * sb.param, "%s N=%d G=%d stage %d params", name, N, G, s);
        CHECK(p.mem_grads == (s < 2 ? P : PG + unit0 + 2 * block) * sb.grad, "%s N=%d G=%d stage %d grads", name, N, G, s);
        size_t buffers = s == 3 ? (unit0 + 2 * block) * sb.param : s == 2 || sb.reduce_scatter_in_place ? 0 : p.max_shard_size * sb.grad;
        CHECK(p.mem_buffers == buffers, "%s N=%d G=%d stage %d buffers", name, N, G, s);
        // comm scratch (CPU ring): the group's reduce-scatters in flight, or the cross ring of one
        // shard's R slices, whichever is larger
        size_t in_group = G == 1 || !sb.ring_scratch ? 0 : 2 * (s < 2 ? p.max_shard_size : p.shard_size[0] + (size_t)(L < 2 ? L : 2) * p.shard_size[1]) * sb.grad;
        size_t across = R == 1 || !sb.ring_scratch ? 0 : 2 * (p.max_shard_size / R) * sb.grad;
        CHECK(p.mem_comm_scratch == (in_group > across ? in_group : across), "%s N=%d G=%d stage %d comm scratch", name, N, G, s);
        // bytes: inside the group as the plain stage over G ranks; across, the shard's all-reduce
        double gb = (double)P * sb.grad * (G - 1) / G;
        double ag = s < 3 ? (double)P * sb.param * (G - 1) / G
                          : (double)(2 * unit0 + (2 * L - 1) * block) * sb.param * (G - 1) / G;
        CHECK(fabs(p.comm_reduce_scatter - gb) < 0.5 && fabs(p.comm_all_gather - ag) < 0.5, "%s N=%d G=%d stage %d bytes inside", name, N, G, s);
        CHECK(fabs(p.comm_all_reduce_across - 2.0 * PG * sb.grad * (R - 1) / R) < 0.5, "%s N=%d G=%d stage %d bytes across", name, N, G, s);
        CHECK(p.comm_scalars == 16.0 * (N - 1), "%s N=%d G=%d stage %d scalars over all ranks", name, N, G, s);
        // N-way slices: one rank each, inside its shard
        int owners[512] = {0}, inside = 1;
        for (int r = 0; r < N; r++) {
            int j = zero_rank_slice(&p, r);
            if (j < 0 || j >= N) { inside = 0; continue; }
            owners[j]++;
            inside &= zero_slice_rank(&p, j) == r;
            for (int u = 0; u < lay->num_units; u++) {
                size_t at = lay->unit_offset[u] + (size_t)j * (lay->unit_size[u] / N), from = zero_slice_offset(&p, u, r);
                inside &= at >= from && at + lay->unit_size[u] / N <= from + p.shard_size[u];
            }
        }
        int once = 1;
        for (int j = 0; j < N; j++) { once &= owners[j] == 1; }
        CHECK(once && inside, "%s N=%d G=%d stage %d: every N-way slice has one rank, inside its shard", name, N, G, s);
    }
    // G = 1 holds what stage 0 holds: the full params, grads and optimizer state on every rank
    if (G == 1) {
        ZeroPlan p1, p0;
        zero_plan_init(&p1, c, 1, N, 1, 1, RESHARD_DEFAULT, 0, 1, sb, 16);
        zero_plan_init(&p0, c, 0, N, 0, 1, RESHARD_DEFAULT, 0, 1, sb, 16);
        CHECK(p1.mem_params == p0.mem_params && p1.mem_grads == p0.mem_grads && p1.mem_optimizer == p0.mem_optimizer,
              "%s N=%d: G = 1 stage 1 holds stage 0's params, grads and optimizer state", name, N);
    }
}

// -zd fp32 against -zd bf16 (CUDA, bf16 build), from the padded count P alone: the gradient
// bytes double in every stage and accumulation; a bf16 scratch of exactly unit 0 + one block is
// added; params and optimizer are unchanged; the gradient's wire bytes double (reduce-scatter
// 4P(N-1)/N, stage 0's all-gather too) and the params' all-gathers (stages 1-3) stay.
static void check_grad_dtype(const char* name, const GPT2Config* c, int N, int print) {
    for (int accum = 1; accum <= 3; accum += 2) {
        for (int s = 0; s < 4; s++) {
            ZeroPlan h, f; // half (bf16) and full (fp32) gradients
            zero_plan_init(&h, c, s, N, 0, accum, RESHARD_DEFAULT, 1, 1, CUDA, 16);
            zero_plan_init(&f, c, s, N, 0, accum, RESHARD_DEFAULT, 1, 1, CUDA_FP32_GRADS, 16);
            size_t P = h.layout.total, scratch = (h.layout.unit_size[0] + h.layout.unit_size[1]) * 2;
            double ring = (double)(N - 1) / N;
            CHECK(f.mem_grads == 2 * h.mem_grads && f.zero_grads == 2 * h.zero_grads, "%s N=%d stage %d x%d: fp32 grads %zu != 2 x bf16 %zu",
                  name, N, s, accum, f.mem_grads, h.mem_grads);
            CHECK(f.mem_grad_scratch == scratch && h.mem_grad_scratch == 0, "%s N=%d stage %d: grad scratch %zu (want %zu), bf16 %zu",
                  name, N, s, f.mem_grad_scratch, scratch, h.mem_grad_scratch);
            CHECK(f.mem_params == h.mem_params && f.mem_optimizer == h.mem_optimizer && f.mem_buffers == h.mem_buffers,
                  "%s N=%d stage %d: -zd changed params, optimizer or buffers", name, N, s);
            CHECK(zero_plan_total(&f) == zero_plan_total(&h) + h.mem_grads + scratch, "%s N=%d stage %d: total", name, N, s);
            CHECK(f.comm_reduce_scatter == 4.0 * P * ring && h.comm_reduce_scatter == 2.0 * P * ring,
                  "%s N=%d stage %d: reduce-scatter %.0f / %.0f", name, N, s, f.comm_reduce_scatter, h.comm_reduce_scatter);
            CHECK(s == 0 ? f.comm_all_gather == 4.0 * P * ring : f.comm_all_gather == h.comm_all_gather,
                  "%s N=%d stage %d: all-gather %.0f (bf16 grads %.0f)", name, N, s, f.comm_all_gather, h.comm_all_gather);
            if (print && accum == 1) {
                printf("GPT-2 124M, N=%d, CUDA bf16, stage %d: -zd bf16 %.1f MB per rank (grads %.1f), %.1f MB on the wire per step; "
                       "-zd fp32 %.1f MB (grads %.1f + scratch %.1f), %.1f MB\n", N, s, zero_plan_total(&h) / 1048576.0,
                       h.mem_grads / 1048576.0, (h.comm_reduce_scatter + h.comm_all_gather) / 1048576.0, zero_plan_total(&f) / 1048576.0,
                       f.mem_grads / 1048576.0, f.mem_grad_scratch / 1048576.0, (f.comm_reduce_scatter + f.comm_all_gather) / 1048576.0);
            }
        }
    }
}

// For GPT-2 124M: per-rank memory shrinks at every stage (DESIGN.md §4's table).
static void check_shrinks(const GPT2Config* c, int N, StateBytes sb) {
    size_t prev = (size_t)-1;
    for (int s = 0; s < 4; s++) {
        ZeroPlan p;
        zero_plan_init(&p, c, s, N, 0, 1, RESHARD_DEFAULT, 1, 1, sb, 16);
        size_t total = p.mem_params + p.mem_grads + p.mem_optimizer + p.mem_buffers;
        CHECK(total < prev, "124M N=%d: stage %d holds %zu bytes, not less than stage %d's %zu", N, s, total, s - 1, prev);
        printf("GPT-2 124M, N=%d, %s: stage %d holds %.1f MB per rank (params %.1f, grads %.1f, optimizer %.1f, buffers %.1f)\n",
               N, sb.param == 4 ? "CPU fp32" : "CUDA bf16", s, total / 1048576.0, p.mem_params / 1048576.0,
               p.mem_grads / 1048576.0, p.mem_optimizer / 1048576.0, p.mem_buffers / 1048576.0);
        prev = total;
    }
}

// Optimizer-state offload (-zo 1, CUDA): against the same plan without it, exactly the optimizer
// column moves to the host (fp32 master + m + v: 12 bytes per shard element), the host also
// stages one floatX grad shard and one floatX param shard, and each step copies P/N floatX
// elements each way; nothing else changes. Stage 0 has no shard to offload: refused, plan untouched.
// With G (-zg, 0: none) the shard is P/G.
static void check_offload(const char* name, const GPT2Config* c, int N, int G, int floatx) {
    StateBytes sb = ZERO_STATE_BYTES_CUDA(floatx, floatx);
    for (int s = G > 0 ? 1 : 0; s < 4; s++) { // stage 0 has no groups
        ZeroPlan plain, off;
        zero_plan_init(&plain, c, s, N, G, 1, RESHARD_DEFAULT, 1, 1, sb, 16);
        off = plain;
        int rc = zero_plan_offload(&off);
        if (s == 0) {
            CHECK(rc == -1 && memcmp(&off, &plain, sizeof(off)) == 0, "%s N=%d: stage 0 offload refused, plan untouched", name, N);
            continue;
        }
        size_t PN = plain.layout.total / (G > 0 ? G : N);
        CHECK(rc == 0 && off.offload == 1, "%s N=%d stage %d: offload accepted", name, N, s);
        CHECK(off.mem_optimizer == 0 && off.zero_optimizer == 0 && off.mem_host_optimizer == 12 * PN
              && off.zero_host_optimizer == 12 * PN, "%s N=%d stage %d: optimizer 0 on the GPU, 12 P/N on the host", name, N, s);
        CHECK(off.mem_host_staging == PN * 2 * (size_t)floatx && zero_plan_host_total(&off) == PN * (12 + 2 * (size_t)floatx),
              "%s N=%d stage %d: host staging = grad + param shard", name, N, s);
        CHECK(off.pcie_down == (double)PN * floatx && off.pcie_up == (double)PN * floatx, "%s N=%d stage %d: PCIe P/N each way", name, N, s);
        CHECK(zero_plan_total(&plain) - zero_plan_total(&off) == 12 * PN, "%s N=%d stage %d: the GPU saves exactly 12 P/N", name, N, s);
        CHECK(plain.offload == 0 && zero_plan_host_total(&plain) == 0 && plain.pcie_down == 0 && plain.pcie_up == 0,
              "%s N=%d stage %d: no host bytes without offload", name, N, s);
        // the rest of the plan is the same: params, grads, buffers, scratch, collectives
        ZeroPlan back = off;
        back.offload = 0; back.mem_optimizer = plain.mem_optimizer; back.zero_optimizer = plain.zero_optimizer;
        back.mem_host_optimizer = back.mem_host_staging = back.zero_host_optimizer = 0;
        back.pcie_down = back.pcie_up = 0;
        CHECK(memcmp(&back, &plain, sizeof(back)) == 0, "%s N=%d stage %d: offload changes only the optimizer, host and PCIe fields", name, N, s);
    }
}

// The plan's numbers with and without offload for one model and N (DESIGN.md §4 quotes them).
static void print_offload(const GPT2Config* c, int N) {
    const double MB = 1048576.0;
    for (int s = 1; s < 4; s++) {
        ZeroPlan plain, off;
        zero_plan_init(&plain, c, s, N, 0, 1, RESHARD_DEFAULT, 1, 1, (StateBytes)ZERO_STATE_BYTES_CUDA(2, 2), 16);
        off = plain;
        zero_plan_offload(&off);
        printf("GPT-2 124M, N=%d, CUDA bf16, stage %d: GPU %.1f MB -> %.1f MB with -zo 1; host %.1f MB (optimizer %.1f, staging %.1f); "
               "PCIe per step %.1f MB down + %.1f MB up\n", N, s, zero_plan_total(&plain) / MB, zero_plan_total(&off) / MB,
               zero_plan_host_total(&off) / MB, off.mem_host_optimizer / MB, off.mem_host_staging / MB, off.pcie_down / MB, off.pcie_up / MB);
    }
}

// N loaders on one shard: over one epoch their batches never overlap (the last token of a
// batch is the next batch's first input, so compare input positions), in order and shuffled.
static void check_sampler(const char* path, int N, int shuffle) {
    int B = 2, T = 16;
    DataLoader dl[8];
    size_t ntok = 0;
    for (int r = 0; r < N; r++) { dataloader_init(&dl[r], path, B, T, r, N, 65536, shuffle, 42); }
    FILE* fp = fopenCheck(path, "rb");
    ntok = shard_check(path, fp);
    fclose(fp);
    unsigned char* owner = (unsigned char*)callocCheck(ntok, 1);
    size_t batches = dataloader_num_batches(&dl[0]), clashes = 0, covered = 0;
    for (size_t b = 0; b < batches; b++) {
        for (int r = 0; r < N; r++) {
            size_t slot = dl[r].slot_order[dl[r].slot_idx];
            size_t start = slot * N * B * T + (size_t)r * B * T;
            dataloader_next_batch(&dl[r]);
            for (size_t i = start; i < start + (size_t)B * T; i++) { clashes += owner[i] != 0; owner[i] = (unsigned char)(r + 1); covered++; }
        }
    }
    CHECK(clashes == 0, "sampler N=%d shuffle=%d: %zu positions read by two ranks", N, shuffle, clashes);
    CHECK(covered == batches * N * B * T && covered <= ntok - 1, "sampler N=%d: covered %zu of %zu tokens", N, covered, ntok);
    // the same seed gives every rank the same slot order, and the order differs from file order
    if (shuffle) {
        int same = 1, moved = 0;
        for (size_t i = 0; i < dl[0].num_slots; i++) {
            same &= dl[0].slot_order[i] == dl[N - 1].slot_order[i];
            moved |= dl[0].slot_order[i] != i;
        }
        CHECK(same && moved, "sampler N=%d: shuffled slot orders must agree across ranks and differ from file order", N);
    }
    free(owner);
    for (int r = 0; r < N; r++) { dataloader_free(&dl[r]); }
}


// Stage 3's walk (zero_walk_*), driven through micro-steps in the order both trainers call it
// (gpt2_forward, gpt2_backward, gpt2_forward_only), for one (L, reshard, prefetch):
// - each unit is gathered before it is used, into a slot it alone holds;
// - the gathers per micro-step are the plan's (unit0_gathers, block_gathers), which the
//   byte counts above are built on; a forward-only pass gathers only the forward's units;
// - the next `prefetch` units of the schedule are on their way whenever a unit is used;
// - block u's gradient slot is handed over by block u + 2 (the reduce-scatter to wait for);
// - at the end of each pass nothing is left gathered.
static int walk_gathers[MAX_UNITS];
static int walk_ok;

static void walk_use(ZeroWalk* w, const ZeroPlan* p, int u) {
    ZeroUse use = zero_walk_use(w, p, u);
    for (int k = 0; k < use.num_gather; k++) { walk_gathers[use.gather[k]]++; }
    if (w->state[u] != UNIT_GATHERED || (u > 0 && w->gather_slot_owner[zero_gather_slot(p, u)] != u)) { walk_ok = 0; }
    int end = w->forward_only ? zero_forward_positions(w->nb) : w->len;
    for (int k = 0; k < p->prefetch && w->pos + k < end; k++) { // w->pos: already past u
        if (w->state[w->schedule[w->pos + k]] == UNIT_SHARDED) { walk_ok = 0; }
    }
}

static int walk_all_sharded(const ZeroWalk* w, int nb) {
    for (int u = 0; u <= nb; u++) {
        if (w->state[u] != UNIT_SHARDED || w->gather_slot_owner[u] != -1) { return 0; }
    }
    return 1;
}

// As the trainers' forward: block l's unit is used at the unit's first block and released
// (as the policy says) after its last.
static void walk_forward(ZeroWalk* w, const ZeroPlan* p, int L) {
    const ParamLayout* lay = &p->layout;
    walk_use(w, p, 0);
    if (!zero_walk_keep_after_forward(w, p, 0)) { zero_walk_release(w, p, 0); }
    for (int l = 0; l < L; l++) {
        int u = unit_of_block(lay, l);
        if (l == unit_first_block(lay, u)) { walk_use(w, p, u); }
        if (l == unit_last_block(lay, u) && !zero_walk_keep_after_forward(w, p, u)) { zero_walk_release(w, p, u); }
    }
    walk_use(w, p, 0); // lnf + head: stays gathered for the backward
    if (!zero_walk_keep_after_forward(w, p, 0)) { walk_ok = 0; }
}

static void check_walk(int L, ReshardPolicy reshard, int prefetch, int K) {
    GPT2Config c = {8, 100, 128, L, 1, 4};
    ZeroPlan p;
    zero_plan_init(&p, &c, 3, 2, 0, 1, reshard, prefetch, K, CPU, 16);
    const ParamLayout* lay = &p.layout;
    int nb = p.block_units;
    ZeroWalk w;
    zero_walk_init(&w, nb);
    walk_ok = 1;
    int slots_ok = 1, counts_ok = 1;
    for (int micro = 0; micro < 3; micro++) {
        memset(walk_gathers, 0, sizeof(walk_gathers));
        zero_walk_begin_micro_step(&w);
        walk_forward(&w, &p, L);
        walk_use(&w, &p, 0); // backward: head and lnf; the encoder's backward needs no params
        zero_walk_release(&w, &p, 0);
        for (int l = L - 1; l >= 0; l--) { // as the trainers' backward: a unit from its last block to its first
            int u = unit_of_block(lay, l);
            if (l == unit_last_block(lay, u)) {
                walk_use(&w, &p, u);
                int previous = zero_walk_grad_slot(&w, u);
                if (previous != (u + 2 <= nb ? u + 2 : -1)) { slots_ok = 0; }
            }
            if (l == unit_first_block(lay, u)) { zero_walk_release(&w, &p, u); }
        }
        zero_walk_reductions_done(&w);
        int blocks = 0;
        for (int u = 1; u <= nb; u++) { blocks += walk_gathers[u]; }
        if (walk_gathers[0] != p.unit0_gathers || blocks != p.block_gathers || walk_gathers[0] + blocks != p.calls_all_gather) { counts_ok = 0; }
        if (!walk_all_sharded(&w, nb)) { walk_ok = 0; }
    }
    // evaluation: a forward with no backward, then everything released
    memset(walk_gathers, 0, sizeof(walk_gathers));
    zero_walk_begin_micro_step(&w);
    w.forward_only = 1;
    walk_forward(&w, &p, L);
    for (int u = 0; u <= nb; u++) { zero_walk_release(&w, &p, u); }
    w.forward_only = 0;
    int blocks = 0;
    for (int u = 1; u <= nb; u++) { blocks += walk_gathers[u]; if (walk_gathers[u] != 1) { counts_ok = 0; } }
    if (walk_gathers[0] != (reshard == RESHARD_NEVER ? 1 : 2) || blocks != nb || !walk_all_sharded(&w, nb)) { counts_ok = 0; }
    CHECK(walk_ok && slots_ok && counts_ok, "walk L=%d K=%d reshard %s prefetch %d: used-before-gathered/prefetch %s, grad slots %s, gathers %s",
          L, K, RESHARD_NAMES[reshard], prefetch, walk_ok ? "ok" : "wrong", slots_ok ? "ok" : "wrong", counts_ok ? "ok" : "wrong");
}


// -z auto (zero_pick_stage): with a budget of exactly stage s's total (plan + other), the pick is
// the lowest stage whose total is no larger; one byte less, the lowest strictly smaller, or -1.
// With G (-z auto -zg G, 0: none): stages 1-3 in groups of G, stage 0 plain.
static void check_pick_stage(const char* name, const GPT2Config* c, int N, int G, StateBytes sb, size_t other) {
    ZeroOptions opt = {ZERO_STAGE_AUTO, 1, RESHARD_DEFAULT, 1, G, 1, 0, 0};
    ZeroPlan ref[4], got[4];
    size_t total[4];
    for (int s = 0; s < 4; s++) {
        zero_plan_init(&ref[s], c, s, N, s == 0 ? 0 : G, 1, RESHARD_DEFAULT, s == 3 ? 1 : 0, 1, sb, 16);
        total[s] = zero_plan_total(&ref[s]) + other;
    }
    for (int s = 0; s < 4; s++) {
        int want_at = -1, want_below = -1;
        for (int t = 3; t >= 0; t--) {
            if (total[t] <= total[s]) { want_at = t; }
            if (total[t] < total[s]) { want_below = t; }
        }
        int at = zero_pick_stage(got, c, N, opt, sb, 16, other, total[s]);
        int below = zero_pick_stage(got, c, N, opt, sb, 16, other, total[s] - 1);
        CHECK(at == want_at && below == want_below, "%s N=%d G=%d -z auto, budget = stage %d's %zu bytes: picked %d (want %d), one byte less %d (want %d)",
              name, N, G, s, total[s], at, want_at, below, want_below);
        CHECK(memcmp(&got[s], &ref[s], sizeof(ZeroPlan)) == 0, "%s N=%d G=%d -z auto candidate %d = its plan", name, N, G, s);
    }
    CHECK(zero_pick_stage(got, c, N, opt, sb, 16, other, other) == -1, "%s N=%d -z auto: nothing fits in the activations alone", name, N);
    // why -z auto tries no smaller group than G: a stage never holds less with a smaller group
    for (int s = 1; s < 4 && G > 1; s++) {
        for (int g = 1; g < G; g++) {
            if (N % g != 0) { continue; }
            ZeroPlan smaller;
            zero_plan_init(&smaller, c, s, N, g, 1, RESHARD_DEFAULT, s == 3 ? 1 : 0, 1, sb, 16);
            CHECK(zero_plan_total(&smaller) >= zero_plan_total(&ref[s]), "%s N=%d stage %d: G=%d holds %zu bytes, less than G=%d's %zu",
                  name, N, s, g, zero_plan_total(&smaller), G, zero_plan_total(&ref[s]));
        }
    }
}

// -e d12/d24/d36/d48 are OpenAI's four GPT-2 sizes: their parameter counts with the real
// vocabulary (50257 rows of wte, as published) are 124,439,808 / 354,823,168 / 774,030,080 /
// 1,557,611,200; our slab also holds the 47 zero rows of the padded vocabulary.
static void check_gpt2_sizes(void) {
    const int depth[4] = {12, 24, 36, 48};
    const size_t published[4] = {124439808, 354823168, 774030080, 1557611200};
    for (int i = 0; i < 4; i++) {
        GPT2Config c = config_for_depth(depth[i], 1024);
        ParamLayout lay;
        layout_init(&lay, &c, 1, 1);
        size_t real_vocab = lay.num_parameters - (size_t)(c.padded_vocab_size - c.vocab_size) * c.channels;
        CHECK(real_vocab == published[i] && c.channels / c.num_heads == 64,
              "d%d: %zu parameters (C %d, NH %d), GPT-2 has %zu", depth[i], real_vocab, c.channels, c.num_heads, published[i]);
    }
    GPT2Config d4 = config_for_depth(4, 1024);
    CHECK(d4.channels == 256 && d4.num_heads == 4, "d4: C %d NH %d, expected 64*4 channels in 4 heads", d4.channels, d4.num_heads);
}

int main(int argc, char** argv) {
    check_gpt2_sizes();
    const char* shard = argc > 1 ? argv[1] : "dev/data/tinyshakespeare/tiny_shakespeare_val.bin";
    GPT2Config d12 = {1024, 50257, 50304, 12, 12, 768};
    GPT2Config tiny = {1024, 50257, 50304, 2, 4, 64};
    GPT2Config micro = {8, 100, 128, 3, 1, 4}; // blocks of 260 elements: smaller than 16*N for N >= 17
    int Ns[] = {1, 2, 3, 4, 7, 8, 64, 512};
    int d12_units[] = {1, 2, 3, 4, 5, 6, 7, 12}; // 5 and 7 do not divide 12: the last unit holds the rest
    for (int i = 0; i < 8; i++) {
        for (int K = 1; K <= 3; K++) {
            check_layout("micro", &micro, Ns[i], K);
            check_memory_and_comm("micro", &micro, Ns[i], CPU, K);
        }
        if (Ns[i] <= 64) {
            for (int K = 1; K <= 2; K++) {
                check_layout("tiny", &tiny, Ns[i], K);
                check_memory_and_comm("tiny", &tiny, Ns[i], CPU, K);
            }
            for (int k = 0; k < 8; k++) {
                check_layout("d12", &d12, Ns[i], d12_units[k]);
                check_memory_and_comm("d12", &d12, Ns[i], CPU, d12_units[k]);
                check_memory_and_comm("d12 cuda", &d12, Ns[i], CUDA, d12_units[k]);
            }
            check_offload("d12 cuda bf16", &d12, Ns[i], 0, 2);
            check_offload("d12 cuda fp32", &d12, Ns[i], 0, 4);
            check_offload("tiny cuda bf16", &tiny, Ns[i], 0, 2);
            if (Ns[i] % 2 == 0) { check_offload("d12 cuda bf16 -zg 2", &d12, Ns[i], 2, 2); }
            check_grad_dtype("d12", &d12, Ns[i], Ns[i] == 8);
            check_grad_dtype("tiny", &tiny, Ns[i], 0);
        }
    }
    for (int L = 1; L <= 6; L++) {
        for (int K = 1; K <= L; K++) {
            for (int r = 0; r < 3; r++) {
                for (int d = 0; d <= 7; d++) { check_walk(L, (ReshardPolicy)r, d, K); }
            }
        }
    }
    for (int N = 1; N <= 8; N *= 2) {
        check_pick_stage("d12", &d12, N, 0, CPU, 0);
        check_pick_stage("d12", &d12, N, 0, CPU, (size_t)300 << 20);
        check_pick_stage("d12 cuda", &d12, N, 0, CUDA, (size_t)2 << 30);
        check_pick_stage("tiny", &tiny, N, 0, CPU, (size_t)20 << 20);
        for (int G = 1; G <= N; G *= 2) { // -z auto -zg G
            check_pick_stage("d12", &d12, N, G, CPU, (size_t)300 << 20);
            check_pick_stage("d12 cuda", &d12, N, G, CUDA, (size_t)2 << 30);
            check_pick_stage("micro", &micro, N, G, CPU, 0);
        }
    }
    for (int N = 1; N <= 64; N *= 2) {
        for (int G = 1; G <= N; G *= 2) {
            check_hybrid("d12", &d12, N, G, CPU);
            check_hybrid("d12 cuda", &d12, N, G, CUDA);
            check_hybrid("micro", &micro, N, G, CPU);
        }
    }
    check_hybrid("tiny", &tiny, 6, 3, CPU);
    check_hybrid("tiny", &tiny, 6, 2, CPU);
    check_shrinks(&d12, 4, CPU);
    check_shrinks(&d12, 8, CUDA);
    print_offload(&d12, 8);
    for (int N = 1; N <= 4; N++) { check_sampler(shard, N, 0); check_sampler(shard, N, 1); }
    printf("test_zero_plan: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
