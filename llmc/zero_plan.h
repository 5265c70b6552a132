/*
The ZeRO sharding plan: plain C, no MPI or CUDA, shared by the CPU and CUDA trainers, so the
CPU build tests the same arithmetic the GPU build uses (DESIGN.md §3-§4).

From the model config, the world size N and the stage it computes:
- the units (llmc/gpt2_layout.h), each padded to a multiple of N*align so that rank r owns the
  slice [r*S_u, (r+1)*S_u) of unit u: a shard is an offset and a length, never a divisibility
  error;
- where each rank's shards live in its shard slab (the units' own slices, one after another);
- the bytes each rank holds per category (params, grads, optimizer state, gather buffers), and
  the ZeRO paper's formula beside them;
- the bytes each rank communicates per step per collective kind, counted like nccl-tests' bus
  bytes: reduce-scatter or all-gather of a full buffer of S bytes = S*(N-1)/N per rank.

The stages (P = padded parameter count):
  stage 0  nothing sharded      grads reduce-scattered, then all-gathered (an all-reduce)
  stage 1  optimizer state      grads reduce-scattered; own shard updated; params all-gathered
  stage 2  + gradients          as 1, but each unit's grads reduce-scattered as its backward
                                ends into the grad shard; full grads exist for a few units only
  stage 3  + parameters         each unit all-gathered before its forward and its backward,
                                released after; grads reduce-scattered; no gather after update

Hybrid sharding (HSDP, ZeRO++'s hpZ; flag -zg G, stages 1-3): the N ranks form N/G groups of G
consecutive ranks (rank r is member r % G of group r / G). Each group shards the model as a
plain ZeRO stage over G ranks would, and the R = N/G groups replicate each other: every
reduce-scatter and all-gather above stays inside the group, and after the step's
reduce-scatters each rank's reduced gradient shard is all-reduced across the R ranks holding
the same shard (one per group). G = N is the plain stage; G = 1 holds what stage 0 holds.
The units stay padded to a multiple of N*align whatever G is (the layout, and so a checkpoint,
does not depend on G), so a shard S_u = unit_size[u] / G splits into R slices of N*align'th
size, and the cross-group all-reduce can be a ring reduce-scatter plus all-gather of them.

Choices the plan counts (and the trainers follow):
- Unit 0 (wte, wpe, lnf) is used at both ends. Stage 3 gathers it for the encoder and again for
  lnf + LM head; it stays gathered from the head's forward into the head's backward, which
  comes right after (re-gathering it at once would only cost). The encoder's backward needs no
  parameters. So unit 0 is gathered twice per micro-step, or once with reshard 'never'.
- Its gradient gets the LM head's part first in the backward and the encoder's part last; in
  stages 2-3 its full gradient lives through the whole backward and is reduce-scattered once
  (memory: one unit-0 gradient buffer) rather than twice (communication).
- Block gradients in stages 2-3 go to two block-sized buffers, alternating, so the
  reduce-scatter of block l can run while block l-1's backward computes.
- Gradient accumulation: every stage keeps summing the local gradient over the micro-steps and
  reduce-scatters once, on the last micro-step, so accumulation never multiplies gradient
  communication. The price in stages 2-3 is a full local gradient buffer while accumulating
  (what FSDP's no_sync does); reduce-scattering every micro-step (DeepSpeed's choice) would
  keep the memory and multiply the traffic instead.
- Gradient dtype (CUDA -zd): the gradients are accumulated over the micro-steps, reduced and
  read by the update in bytes.grad per element. bf16 (2) rounds each micro-step's contribution
  against the running sum and the ranks' sum to 8 bits; fp32 (4, Megatron's "main grads") doubles
  the gradient memory and every gradient byte on the wire (reduce-scatter, stage 0's all-gather),
  plus a bf16 scratch of unit 0 and one block that the backward writes (mem_grad_scratch).
- reshard_after_forward (stage 3): 'default' releases each block's gather slot after its
  forward except the last block's, which the backward needs first; 'always' releases every
  block (each is gathered twice: exactly 1.5x stage 0's traffic); 'never' keeps every block
  gathered from its forward to its backward (params cost as in stage 2, no second gather).
- prefetch depth D (stage 3): gather the next D units while the current one computes; it
  needs D+1 block buffers ('never' needs one per block unit).
- unit size K (-zu, FSDP's wrap policy): K transformer blocks per unit, so ceil(L/K) block units
  (the last holds the rest). Larger units mean fewer, larger collectives, and larger gather and
  grad slots: every slot holds the largest unit, U_1. Below, "block" means a block unit; the
  walk and the slots count block units, never layers.
- optimizer-state offload (CUDA trainer, -zo 1, stages 1-3; zero_plan_offload): the shard's
  optimizer state (fp32 master, m, v) lives in pinned host memory and the host runs AdamW on
  it. The GPU saves the whole optimizer column; the host holds it, plus a pinned copy of the
  reduced grad shard (copied down) and of the updated param shard (copied up): P/N elements
  each way over PCIe per optimizer step.
*/
#ifndef LLMC_ZERO_PLAN_H
#define LLMC_ZERO_PLAN_H

#include <stddef.h>
#include <string.h>
#include "gpt2_layout.h"

// Units are padded to a multiple of N * UNIT_ALIGN elements, so every rank's slice starts
// aligned (64 bytes in fp32, 32 in bf16); both trainers use it, and checkpoints rely on it.
#define UNIT_ALIGN 16

// Each trainer's bytes per element, initializers of StateBytes (below) in its field order:
// param, grad, optimizer, reduce_scatter_in_place, ring_scratch, grad_scratch. The CPU trainer
// (train_gpt2.c): fp32 params and grads, AdamW m + v; MPI's stage 0-1 reduce-scatter needs a
// one-shard buffer. The CUDA trainer (train_gpt2.cu): floatX params (bf16 2, fp32 4), gradients
// accumulated and reduced in grad_bytes (-zd: floatX, or fp32 = 4 in the bf16 build, when the
// backward writes floatX into a scratch that is added into them), fp32 master + m + v; NCCL
// reduce-scatters in place. dev/test/zero_lib.sh states them again as the shell tests' expectation.
#define ZERO_STATE_BYTES_CPU {4, 4, 8, 0, 1, 0}
#define ZERO_STATE_BYTES_CUDA(floatx_bytes, grad_bytes) \
    {(floatx_bytes), (grad_bytes), 12, 1, 0, (grad_bytes) != (floatx_bytes) ? (floatx_bytes) : 0}

typedef enum { RESHARD_DEFAULT = 0, RESHARD_ALWAYS = 1, RESHARD_NEVER = 2 } ReshardPolicy;
static const char* const RESHARD_NAMES[] = {"default", "always", "never"};

// -z auto, until the trainer has picked a stage (train_pick_stage in llmc/train_args.h)
#define ZERO_STAGE_AUTO (-2)

// What a trainer asks of the plan (from its flags: -z, -d, -zr, -zp, -zd).
typedef struct {
    int stage;              // 0..3
    int grad_accum;         // micro-steps per optimizer step
    ReshardPolicy reshard;  // stage 3
    int prefetch;           // stage 3
    int group_size;         // -zg: ranks per shard group, a divisor of N (0: all N, plain ZeRO)
    int unit_blocks;        // -zu: transformer blocks per unit, K (1..L), every stage
    int offload;            // -zo 1: optimizer state on the host (CUDA trainer, stages 1-3)
    int grad_bytes;         // CUDA -zd: bytes per gradient element, 2 or 4 (0: the build's floatX; the CPU: fp32)
} ZeroOptions;

// Bytes per element of each kind of state, which differ between the trainers.
typedef struct {
    int param;     // CPU fp32: 4; CUDA bf16: 2
    int grad;      // CPU fp32: 4; CUDA bf16: 2
    int optimizer; // CPU m + v: 8; CUDA fp32 master + m + v: 12
    // 1: the stage 0-1 reduce-scatter lands straight in this rank's slice of the gradient slab
    // (NCCL allows that in place); 0: it needs a one-shard buffer (MPI's in-place form does not)
    int reduce_scatter_in_place;
    // 1: each reduce-scatter in flight holds two slices of partial sums (the CPU trainer's ring,
    // llmc/mpi_comm.h); 0: the library's own buffers (NCCL), outside the plan
    int ring_scratch;
    // the bytes of what the backward writes when it is narrower than `grad` (CUDA -zd fp32 in the
    // bf16 build: 2), else 0. The backward's kernels write floatX into a scratch of unit 0 plus one
    // block, which each unit's end adds into the wider gradient (and zeroes)
    int grad_scratch;
} StateBytes;

typedef struct {
    // what the plan was made for
    int stage;                  // 0..3
    int world_size;             // N
    int group_size;             // G: ranks that share one copy of the model (shard group)
    int replicas;               // R = N / G: groups, each a replica of the sharded state
    int grad_accum;             // micro-steps per optimizer step
    ReshardPolicy reshard;      // stage 3 only
    int prefetch;               // stage 3 only: units gathered ahead
    int unit_blocks;            // K: transformer blocks per unit
    int block_units;            // ceil(L / K): the units after unit 0
    StateBytes bytes;
    ParamLayout layout;         // units padded to a multiple of N * align
    // shards
    size_t shard_size[MAX_UNITS];   // S_u = unit_size[u] / G
    size_t shard_offset[MAX_UNITS]; // where unit u's shard starts in the shard slab
    size_t shard_total;             // sum of S_u = layout.total / G
    size_t max_shard_size;          // the largest S_u
    // buffers
    int block_gather_buffers;       // stage 3: block-sized parameter buffers (0 otherwise)
    int full_grads;                 // 1 if a full local gradient slab exists
    // per-rank memory, bytes
    size_t mem_params, mem_grads, mem_optimizer, mem_buffers;
    size_t mem_comm_scratch;        // the most the reduce-scatters in flight hold at once (ring_scratch)
    size_t mem_grad_scratch;        // the backward's narrower gradient scratch (grad_scratch): unit 0 + one block
    size_t zero_params, zero_grads, zero_optimizer; // the ZeRO paper's formula for the stage
    // per-rank communication per optimizer step, bus bytes: inside the shard group (all of it
    // when G = N), and across the groups (the grad shards' all-reduce)
    double comm_reduce_scatter, comm_all_gather;
    double comm_all_reduce_across;
    double comm_scalars;              // the norm's and the loss's partial sums: one double each
    int unit0_gathers, block_gathers; // stage 3: all-gathers per micro-step of unit 0 / of the block units
    // collectives per optimizer step (the scalars' two all-gathers not counted)
    int calls_reduce_scatter, calls_all_gather;
    // optimizer-state offload (zero_plan_offload; all 0 without it)
    int offload;
    size_t mem_host_optimizer;      // pinned host: the shard's optimizer state (mem_optimizer moves here)
    size_t mem_host_staging;        // pinned host: the grad shard copied down + the param shard copied up
    size_t zero_host_optimizer;     // the formula's optimizer bytes, now on the host (zero_optimizer is 0)
    double pcie_down, pcie_up;      // bytes per optimizer step: grad shard to the host, param shard back
} ZeroPlan;

// Bus bytes of a reduce-scatter or all-gather of a full buffer of `bytes` over N ranks.
static inline double bus_bytes(double bytes, int N) { return bytes * (N - 1) / N; }

// The lowest multiple of `a` that is >= x.
static inline size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// group_size: ranks per shard group, a divisor of world_size (0: world_size, plain ZeRO); the
// trainers check it (train_sizes), so a bad one here is an internal error. unit_blocks: K of -zu.
static inline void zero_plan_init(ZeroPlan* p, const GPT2Config* c, int stage, int world_size, int group_size,
                                  int grad_accum, ReshardPolicy reshard, int prefetch, int unit_blocks,
                                  StateBytes bytes, size_t align) {
    memset(p, 0, sizeof(*p));
    if (group_size == 0) { group_size = world_size; }
    if (group_size < 1 || world_size % group_size != 0 || (stage == 0 && group_size != world_size)) {
        fail("internal: shard groups of %d ranks in %d ranks at stage %d", group_size, world_size, stage);
    }
    p->stage = stage;
    p->world_size = world_size;
    p->group_size = group_size;
    p->replicas = world_size / group_size;
    p->grad_accum = grad_accum;
    p->reshard = reshard;
    p->prefetch = prefetch;
    p->unit_blocks = unit_blocks;
    p->bytes = bytes;
    size_t N = (size_t)world_size, G = (size_t)group_size;
    layout_init(&p->layout, c, N * align, unit_blocks);
    const ParamLayout* lay = &p->layout;
    p->block_units = lay->num_units - 1;
    size_t off = 0;
    for (int u = 0; u < lay->num_units; u++) {
        p->shard_size[u] = lay->unit_size[u] / G;
        p->shard_offset[u] = off;
        off += p->shard_size[u];
        if (p->shard_size[u] > p->max_shard_size) { p->max_shard_size = p->shard_size[u]; }
    }
    p->shard_total = off;
    size_t P = lay->total, PN = p->shard_total;
    // every block slot (gather or grad) holds the largest block unit, the first
    size_t unit0 = lay->unit_size[0], block = lay->unit_size[1];
    int nb = p->block_units;

    // parameters: full slab, or the shard plus gather buffers for unit 0 and some block units
    p->block_gather_buffers = stage < 3 ? 0 : (reshard == RESHARD_NEVER ? nb : prefetch + 1);
    if (p->block_gather_buffers > nb) { p->block_gather_buffers = nb; }
    p->mem_params = (stage < 3 ? P : PN) * bytes.param;
    if (stage == 3) { p->mem_buffers += (unit0 + (size_t)p->block_gather_buffers * block) * bytes.param; }
    // gradients: full slab (stages 0-1, or any stage while accumulating), else the shard plus
    // the unit-0 buffer and two block buffers; stages 0-1 reduce-scatter into a one-shard buffer (unless in place)
    p->full_grads = stage < 2 || grad_accum > 1;
    p->mem_grads = (p->full_grads ? P : 0) * bytes.grad;
    if (stage >= 2) {
        p->mem_grads += PN * bytes.grad;
        if (!p->full_grads) { p->mem_grads += (unit0 + 2 * block) * bytes.grad; }
    } else if (!bytes.reduce_scatter_in_place) {
        p->mem_buffers += p->max_shard_size * bytes.grad;
    }
    // the ring's partial sums (2 slices per reduce-scatter in flight): stages 0-1 reduce one unit
    // at a time; stages 2-3 keep unit 0's and the two grad slots' in flight, or every unit's
    // while accumulating (nothing waits for them before the step's end). The cross-group
    // all-reduce runs after those, one unit at a time: a ring over R ranks of the unit's shard.
    if (bytes.ring_scratch && group_size > 1) {
        size_t block_shard = p->shard_size[1];
        size_t in_flight = stage < 2 ? p->max_shard_size
                         : p->full_grads ? PN : p->shard_size[0] + (size_t)(nb < 2 ? nb : 2) * block_shard;
        p->mem_comm_scratch = 2 * in_flight * bytes.grad;
    }
    if (bytes.ring_scratch && p->replicas > 1) {
        size_t across = 2 * (p->max_shard_size / p->replicas) * bytes.grad;
        if (across > p->mem_comm_scratch) { p->mem_comm_scratch = across; }
    }
    // the backward's scratch, when it writes narrower than the gradient is kept: unit 0 lives
    // through the whole backward (the head's part first, the encoder's last); a block unit's part
    // is added into the gradient as soon as its backward ends, so the largest block unit's room
    // serves them all
    p->mem_grad_scratch = (unit0 + block) * bytes.grad_scratch;
    // optimizer state: full on every rank in stage 0, the shard from stage 1 on
    p->mem_optimizer = (stage == 0 ? P : PN) * bytes.optimizer;
    // the formula of the ZeRO paper (no buffers)
    p->zero_params = (stage < 3 ? P : PN) * bytes.param;
    p->zero_grads = (stage < 2 ? P : PN) * bytes.grad;
    p->zero_optimizer = (stage < 1 ? P : PN) * bytes.optimizer;

    // communication: one reduce-scatter of every unit's grads per step; then stage 0
    // all-gathers the grads, stages 1-2 the updated params, and stage 3 gathers units as it goes;
    // all inside the group. Across the groups: an all-reduce of the grad shards (a reduce-scatter
    // and an all-gather over R ranks). The scalars go over all N ranks.
    p->comm_reduce_scatter = bus_bytes((double)P * bytes.grad, group_size);
    p->comm_all_reduce_across = 2.0 * bus_bytes((double)PN * bytes.grad, p->replicas);
    p->comm_scalars = 2.0 * sizeof(double) * (world_size - 1);
    p->calls_reduce_scatter = lay->num_units;
    if (stage == 0) { p->comm_all_gather = bus_bytes((double)P * bytes.grad, world_size); }
    if (stage == 1 || stage == 2) { p->comm_all_gather = bus_bytes((double)P * bytes.param, group_size); }
    if (stage < 3) { p->calls_all_gather = lay->num_units; }
    if (stage == 3) {
        // the forward gathers every block unit; the backward again all of them ('always'), all
        // but the last ('default': it stays from its forward) or none ('never')
        size_t blocks = P - unit0, last = lay->unit_size[nb];
        int again = reshard == RESHARD_ALWAYS ? nb : reshard == RESHARD_DEFAULT ? nb - 1 : 0;
        size_t again_elems = reshard == RESHARD_ALWAYS ? blocks : reshard == RESHARD_DEFAULT ? blocks - last : 0;
        p->unit0_gathers = reshard == RESHARD_NEVER ? 1 : 2;
        p->block_gathers = nb + again;
        double per_micro = (double)p->unit0_gathers * unit0 + (double)blocks + (double)again_elems;
        p->comm_all_gather = bus_bytes(per_micro * bytes.param, group_size) * grad_accum;
        p->calls_all_gather = (p->unit0_gathers + p->block_gathers) * grad_accum;
    }
}

// Optimizer-state offload (-zo 1) on a plan made by zero_plan_init: the optimizer column moves
// from the device to pinned host memory, which also stages the two copies of every step (the
// reduced grad shard down, P/N * grad bytes; the updated param shard up, P/N * param bytes).
// Nothing else changes: the same collectives, the same gradient and parameter buffers. Stage 0
// has no shard to offload (every rank updates everything): returns -1 and leaves the plan alone.
static inline int zero_plan_offload(ZeroPlan* p) {
    if (p->stage < 1) { return -1; }
    size_t PN = p->shard_total;
    p->offload = 1;
    p->mem_host_optimizer = p->mem_optimizer;
    p->mem_optimizer = 0;
    p->zero_host_optimizer = p->zero_optimizer;
    p->zero_optimizer = 0;
    p->mem_host_staging = PN * (size_t)(p->bytes.grad + p->bytes.param);
    p->pcie_down = (double)PN * p->bytes.grad;
    p->pcie_up = (double)PN * p->bytes.param;
    return 0;
}

// Pinned host memory the plan allocates per rank (0 without offload).
static inline size_t zero_plan_host_total(const ZeroPlan* p) { return p->mem_host_optimizer + p->mem_host_staging; }

// Everything the plan allocates per rank, in bytes (the communication scratch included).
static inline size_t zero_plan_total(const ZeroPlan* p) {
    return p->mem_params + p->mem_grads + p->mem_optimizer + p->mem_buffers + p->mem_comm_scratch + p->mem_grad_scratch;
}

// -z auto: the lowest stage (the least communication) whose plan, plus `other` bytes the
// trainer allocates outside the plan (activations, workspace), fits in `budget` bytes per rank.
// plans[s] gets stage s's plan (opt's reshard policy and prefetch for stage 3). Returns the
// stage, or -1 when none fits.
// Hybrid sharding (opt.group_size G < N, from -z auto -zg G): stages 1-3 are candidates in
// groups of G, stage 0 as it is (it has no groups). G is the largest group the user allows
// (typically the ranks of one node), and no smaller group is tried: a stage's plan never holds
// less with a smaller G (every sharded category is P/G, the rest does not grow with G;
// test_zero_plan checks it), so the largest allowed group fits whenever any does, and it also
// sends the fewest bytes across the groups.
static inline int zero_pick_stage(ZeroPlan plans[4], const GPT2Config* c, int world_size, ZeroOptions opt,
                                  StateBytes bytes, size_t align, size_t other, size_t budget) {
    int picked = -1;
    for (int s = 3; s >= 0; s--) {
        zero_plan_init(&plans[s], c, s, world_size, s == 0 ? 0 : opt.group_size, opt.grad_accum, opt.reshard,
                       s == 3 ? opt.prefetch : 0, opt.unit_blocks, bytes, align);
        if (zero_plan_total(&plans[s]) + other <= budget) { picked = s; }
    }
    return picked;
}

// The order a micro-step uses the units (what stage 3 gathers, and prefetches, in turn):
// encoder, block units 1..nb, lnf + head; then the backward: head and lnf (unit 0 still
// gathered), block units in reverse. The encoder's backward needs no params. schedule holds
// 2*nb + 3 entries; returns how many it wrote.
static inline int zero_schedule(int nb, int* schedule) {
    int n = 0;
    schedule[n++] = 0;
    for (int u = 1; u <= nb; u++) { schedule[n++] = u; }
    schedule[n++] = 0;
    schedule[n++] = 0;
    for (int u = nb; u >= 1; u--) { schedule[n++] = u; }
    return n;
}

// The forward's part of zero_schedule: its first nb + 2 entries (encoder, block units, head). A
// pass with no backward (evaluation, sampling) prefetches no further.
static inline int zero_forward_positions(int nb) { return nb + 2; }

// Stage 3, after unit u's forward at schedule position `pos` (already past it): does the unit
// stay gathered? The reshard_after_forward policy decides, except for unit 0 after the head
// (pos > 1), which always stays: the backward starts with it. nb: the block units.
static inline int zero_keep_after_forward(const ZeroPlan* p, int u, int nb, int pos) {
    int last_block = u == nb;
    int head = u == 0 && pos > 1;
    return head || p->reshard == RESHARD_NEVER || (p->reshard == RESHARD_DEFAULT && last_block);
}

// Rank r's place in its shard group (r itself when G = N).
static inline int zero_group_rank(const ZeroPlan* p, int rank) { return rank % p->group_size; }

// Rank r's slice of unit u (its group rank's), as an offset into the full slab.
static inline size_t zero_slice_offset(const ZeroPlan* p, int u, int rank) {
    return p->layout.unit_offset[u] + (size_t)zero_group_rank(p, rank) * p->shard_size[u];
}

// The N-way slices of a unit (unit_size / N each, stage 0's and a plain ZeRO stage's slices):
// rank r's shard holds R of them, and r answers for the one at position r / G in it, slice
// (r % G) * R + r / G. Each slice has one rank answering for it, whatever G: the gradient
// norm's partial sums and the checkpoint's state files are per slice, so their order and
// content do not depend on G.
static inline int zero_rank_slice(const ZeroPlan* p, int rank) {
    return zero_group_rank(p, rank) * p->replicas + rank / p->group_size;
}
// The rank answering for N-way slice j (the inverse of zero_rank_slice).
static inline int zero_slice_rank(const ZeroPlan* p, int j) {
    return (j % p->replicas) * p->group_size + j / p->replicas;
}

// ----------------------------------------------------------------------------
// Stage 3's walk through a micro-step, shared by both trainers: which unit each gather slot
// holds, how far each unit's gather has got, what to prefetch, and which gradient slot a block
// may reuse. Host code with no communication in it: the trainers issue the collectives (and on
// CUDA the events) these functions ask for, and dev/test/test_zero_plan.c walks it for every
// (L, reshard policy, prefetch).

typedef enum { UNIT_SHARDED, UNIT_GATHERING, UNIT_GATHERED } UnitState;

typedef struct {
    int schedule[2 * MAX_UNITS + 1];  // zero_schedule: the units in the order a micro-step uses them
    int nb;                           // block units (the layers / K, rounded up)
    int len, pos;                     // the schedule's length; the position of the next unit used
    int forward_only;                 // a pass with no backward: no prefetch past the forward's end
    UnitState state[MAX_UNITS];
    int gather_slot_owner[MAX_UNITS]; // the block in each block gather slot (-1: free)
    int grad_slot_owner[2];           // the block whose gradient is in each grad slot (-1: none)
} ZeroWalk;

// What a trainer does before it uses a unit's parameters.
typedef struct {
    int gather[MAX_UNITS + 1]; // start these all-gathers, in this order
    int num_gather;
    int wait;                  // then wait for the unit's own gather (0: it is already there)
} ZeroUse;

// Block unit u (1..) lives in gather slot (u-1) mod the number of block gather buffers, and its
// gradient (stages 2-3 without accumulation) in grad slot (u-1) mod 2.
static inline int zero_gather_slot(const ZeroPlan* p, int u) { return (u - 1) % p->block_gather_buffers; }
static inline int zero_grad_slot(int u) { return (u - 1) % 2; }

// nb: the plan's block units (p->block_units).
static inline void zero_walk_init(ZeroWalk* w, int nb) {
    memset(w, 0, sizeof(*w));
    w->nb = nb;
    w->len = zero_schedule(nb, w->schedule);
    for (int u = 0; u < MAX_UNITS; u++) { w->state[u] = UNIT_SHARDED; w->gather_slot_owner[u] = -1; }
    w->grad_slot_owner[0] = w->grad_slot_owner[1] = -1;
}

static inline void zero_walk_begin_micro_step(ZeroWalk* w) { w->pos = 0; }

// Unit u's all-gather starts: it takes its slot, which must be free.
static inline void zero_walk_gather(ZeroWalk* w, const ZeroPlan* p, int u, ZeroUse* use) {
    if (u > 0) {
        int slot = zero_gather_slot(p, u);
        if (w->gather_slot_owner[slot] != -1) {
            fail("internal: gather slot %d of unit %d still holds unit %d", slot, u, w->gather_slot_owner[slot]);
        }
        w->gather_slot_owner[slot] = u;
    }
    w->state[u] = UNIT_GATHERING;
    use->gather[use->num_gather++] = u;
}

// The forward or backward is about to use unit u, which must be the schedule's next: gather it
// if nobody has, prefetch the next p->prefetch units of the schedule, wait for u.
static inline ZeroUse zero_walk_use(ZeroWalk* w, const ZeroPlan* p, int u) {
    ZeroUse use = {{0}, 0, 0};
    if (w->pos >= w->len || w->schedule[w->pos] != u) {
        fail("internal: unit %d used out of the schedule's order (position %d)", u, w->pos);
    }
    if (w->state[u] == UNIT_SHARDED) { zero_walk_gather(w, p, u, &use); }
    use.wait = w->state[u] == UNIT_GATHERING;
    w->state[u] = UNIT_GATHERED;
    int end = w->forward_only ? zero_forward_positions(w->nb) : w->len;
    for (int k = 1; k <= p->prefetch && w->pos + k < end; k++) {
        int next = w->schedule[w->pos + k];
        if (w->state[next] == UNIT_SHARDED) { zero_walk_gather(w, p, next, &use); }
    }
    w->pos++;
    return use;
}

// Unit u's gathered copy is no longer needed: its slot is free again. Returns the state it was
// in: UNIT_SHARDED (nothing held), UNIT_GATHERING (a gather still in flight into the slot: the
// caller lets it finish before the slot is reused) or UNIT_GATHERED.
static inline UnitState zero_walk_release(ZeroWalk* w, const ZeroPlan* p, int u) {
    UnitState was = w->state[u];
    w->state[u] = UNIT_SHARDED;
    if (was != UNIT_SHARDED && u > 0) { w->gather_slot_owner[zero_gather_slot(p, u)] = -1; }
    return was;
}

// After unit u's forward (the walk is already past it): does it stay gathered?
static inline int zero_walk_keep_after_forward(const ZeroWalk* w, const ZeroPlan* p, int u) {
    return zero_keep_after_forward(p, u, w->nb, w->pos);
}

// Block u's backward is about to fill its grad slot: returns the block whose reduce-scatter
// must finish first (the slot's previous holder, -1: none), and gives the slot to u.
static inline int zero_walk_grad_slot(ZeroWalk* w, int u) {
    int slot = zero_grad_slot(u), previous = w->grad_slot_owner[slot];
    w->grad_slot_owner[slot] = u;
    return previous;
}

// After a step's reductions have all finished: both grad slots are free.
static inline void zero_walk_reductions_done(ZeroWalk* w) { w->grad_slot_owner[0] = w->grad_slot_owner[1] = -1; }

#endif // LLMC_ZERO_PLAN_H
