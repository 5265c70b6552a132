/*
The token and position embeddings on the GPU: the CUDA twins of train_gpt2.c's encoder_forward /
encoder_backward, with the same argument names.

The forward is a gather, one thread per 16-byte pack of output channels (8 in bf16, 4 in fp32;
Pack128 in cuda_common.cuh). The backward is a scatter: position (b,t) adds dout[b][t] into row
inp[b][t] of dwte and row t of dwpe. Positions that share a token would collide on the same row
of dwte, and atomics would make the sum's order (and so its bits) change from run to run. So the
backward first sorts the positions by token on the host, where the tokens already are (a
counting sort: the "buckets"). Then one block per (distinct token, 32 packs of channels) sums
its token's positions in a fixed order: each of its 8 warps (the "slices") takes every 8th
position of the bucket in ascending order, lane g holding pack g, and the 8 slice sums are
added in slice order; one writer per element of dwte, no atomics. A frequent token (the
newline is ~8% of tiny Shakespeare's positions) is so one serial chain of an 8th of its bucket,
walked 4 positions at a time (4 loads in flight per thread, the next 4 positions loaded
meanwhile). A short bucket (at most 8 positions: most tokens of a batch) would leave most of
such a block idle, so it gets one warp, 8 of them to a block, which makes the same adds in the
same order (each slice of a short bucket holds at most one position): a bucket's bits do not
depend on which of the two sums it. dwpe needs no buckets: row t is the sum over b.
*/
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include "cuda_common.cuh"

// ----------------------------------------------------------------------------
// forward

// One thread per 16-byte pack of out (B,T,C): pack g of row bt, the columns [g*8, g*8 + 8) in bf16
// (Pack128, cuda_common.cuh). Rows of wte, wpe and out start 16-byte aligned when C is a
// multiple of the pack (always in the trainer); otherwise the packs go element by element.
// Bytes moved: out written once, and per position one row of wte and one of wpe read.
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe,
                                       int B, int T, int C) {
    size_t packs = packs_of(C);
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; // bt * packs + g
    if (idx >= (size_t)B * T * packs) { return; }
    size_t bt = idx / packs, g = idx % packs;
    int t = (int)(bt % T);
    bool aligned = C % PACKX_SIZE == 0;
    PackX tok = load_pack(wte + (size_t)inp[bt] * C, g, C, aligned);
    PackX pos = load_pack(wpe + (size_t)t * C, g, C, aligned), o;
    for (int j = 0; j < PACKX_SIZE; j++) { o.v[j] = from_float(to_float(tok.v[j]) + to_float(pos.v[j])); }
    store_pack(out + bt * C, g, C, aligned, o);
}

// out (B,T,C) = wte[inp] + wpe[t]; inp (B,T) token ids on the device (the data loader has checked
// them against the vocabulary: a kernel cannot fail with a message), wte (Vp,C), wpe (maxT,C)
static void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C,
                            cudaStream_t stream) {
    size_t n = (size_t)B * T * packs_of(C > 0 ? C : 1);
    if (B < 1 || T < 1 || C < 1 || n > (size_t)INT32_MAX * 256) { // grid.x is an int
        fail("encoder_forward: B=%d T=%d C=%d is not a launchable shape", B, T, C);
    }
    check_aligned16(out, "out", "encoder_forward");
    check_aligned16(wte, "wte", "encoder_forward");
    check_aligned16(wpe, "wpe", "encoder_forward");
    encoder_forward_kernel<<<ceil_div(n, 256), 256, 0, stream>>>(out, inp, wte, wpe, B, T, C);
    cudaCheckLaunch();
}

// ----------------------------------------------------------------------------
// backward: the token buckets (host)

// The positions b*T + t of a batch grouped by token (a compressed sparse row layout):
//   token[k]                    the k-th distinct token id, ascending, k < num_tokens
//   pos[start[k] .. start[k+1]) the positions holding token[k], ascending
// Built by a counting sort: count each token, turn the counts into write cursors, then place
// the positions in (b,t) order, which leaves them ascending within each token.
// cursor is a workspace of num_cursor ints; every token must be in [0, num_cursor).
// token and start hold up to BT and BT+1 ints, pos BT ints. Returns num_tokens.
static int encoder_backward_buckets(int* token, int* start, int* pos, int* cursor, int num_cursor, const int* inp,
                                    int BT) {
    memset(cursor, 0, (size_t)num_cursor * sizeof(int));
    for (int i = 0; i < BT; i++) {
        if (inp[i] < 0 || inp[i] >= num_cursor) {
            fail("encoder_backward: token %d at position %d is outside [0, %d)", inp[i], i, num_cursor);
        }
        cursor[inp[i]]++;
    }
    int num_tokens = 0, offset = 0;
    for (int v = 0; v < num_cursor; v++) {
        int count = cursor[v];
        if (count == 0) { continue; }
        token[num_tokens] = v;
        start[num_tokens] = offset;
        num_tokens++;
        cursor[v] = offset; // from here on: where token v's next position goes
        offset += count;
    }
    start[num_tokens] = offset; // == BT
    for (int i = 0; i < BT; i++) { pos[cursor[inp[i]]++] = i; }
    return num_tokens;
}

// The order the dwte kernel takes the buckets in: first the "block buckets", those of more
// than ENCODER_SHORT_BUCKET positions, a block each, the ones of at least ENCODER_LONG_BUCKET
// positions first (the longest chains start in the first wave, not the last); then the short
// buckets, a warp each (8 to a block); each group by ascending token. Each bucket still has one
// writer and its own summation order, so this order moves time, never bits. Writes num_tokens
// indices; returns how many block buckets lead them.
#define ENCODER_LONG_BUCKET 64
#define ENCODER_SHORT_BUCKET 8 // == ENCODER_SLICES: each slice of a short bucket holds <= 1 position
static int encoder_backward_order(int* order, const int* start, int num_tokens) {
    int n = 0;
    for (int k = 0; k < num_tokens; k++) {
        if (start[k + 1] - start[k] >= ENCODER_LONG_BUCKET) { order[n++] = k; }
    }
    for (int k = 0; k < num_tokens; k++) {
        int len = start[k + 1] - start[k];
        if (len > ENCODER_SHORT_BUCKET && len < ENCODER_LONG_BUCKET) { order[n++] = k; }
    }
    int num_block = n;
    for (int k = 0; k < num_tokens; k++) {
        if (start[k + 1] - start[k] <= ENCODER_SHORT_BUCKET) { order[n++] = k; }
    }
    return num_block;
}

// The buckets (token, start, pos) laid out again in that order, into (otoken, ostart, opos):
// bucket x of the output is bucket order[x] of the input, its positions still ascending. The
// block (or warp) of the dwte kernel that sums bucket x then finds its token and bounds at index
// x (three independent loads), not through order[x] first (one dependent round trip more).
static void encoder_backward_reorder(int* otoken, int* ostart, int* opos, const int* token, const int* start,
                                     const int* pos, const int* order, int num_tokens) {
    int offset = 0;
    for (int x = 0; x < num_tokens; x++) {
        int k = order[x];
        otoken[x] = token[k];
        ostart[x] = offset;
        for (int j = start[k]; j < start[k + 1]; j++) { opos[offset++] = pos[j]; }
    }
    ostart[num_tokens] = offset;
}

// What encoder_backward keeps between calls: the buckets in the dwte kernel's block order on the
// host (pinned, so the copy to the device is asynchronous) and on the device, in the same layout:
// token (BT) | start (BT+1) | pos (BT); and a host workspace for the sorted buckets and their
// order before that layout: token | start | pos | order.
typedef struct {
    int capacity;          // B*T positions the buffers were sized for
    int* host;             // pinned host memory, 3 * capacity + 1 ints
    int* device;           // device memory, 3 * capacity + 1 ints
    int* sorted;           // host workspace, 4 * capacity + 1 ints
    int* cursor;           // (num_cursor) host workspace of the counting sort, grown to the largest token id + 1
    int num_cursor;
    cudaEvent_t done;      // recorded after the last kernel that reads `device`; see encoder_backward
} EncoderBackwardScratch;

static size_t encoder_backward_scratch_ints(int capacity) { return 3 * (size_t)capacity + 1; }

static void encoder_backward_scratch_init(EncoderBackwardScratch* s, int B, int T) {
    if (B < 1 || T < 1 || (size_t)B * T > (size_t)INT32_MAX / 4) {
        fail("encoder_backward_scratch_init: B=%d T=%d is not a supported batch shape", B, T);
    }
    s->capacity = B * T;
    size_t bytes = encoder_backward_scratch_ints(s->capacity) * sizeof(int);
    cudaCheck(cudaMallocHost((void**)&s->host, bytes));
    cudaCheck(cudaMalloc((void**)&s->device, bytes));
    s->sorted = (int*)mallocCheck((4 * (size_t)s->capacity + 1) * sizeof(int));
    s->cursor = NULL;
    s->num_cursor = 0;
    cudaCheck(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
}

static void encoder_backward_scratch_free(EncoderBackwardScratch* s) {
    cudaCheck(cudaEventSynchronize(s->done)); // the last copy and kernels may still use the buffers
    cudaCheck(cudaEventDestroy(s->done));
    cudaCheck(cudaFreeHost(s->host));
    cudaCheck(cudaFree(s->device));
    free(s->sorted);
    free(s->cursor);
    memset(s, 0, sizeof(*s));
}

// ----------------------------------------------------------------------------
// backward: the kernels (16-byte packs of a row's columns, as the forward)

#define ENCODER_SLICES 8 // warps per dwte block: each takes every 8th position of the bucket
#define ENCODER_UNROLL 4 // positions a warp loads before it adds them (loads in flight per thread)

// A block bucket: block (x, y) of encoder_backward_dwte_kernel, x < num_block, sums bucket x for
// the packs g = 32 y + lane. Slice s (warp threadIdx.y) adds the positions start[x] + s,
// start[x] + s + 8, ... in that (ascending) order into a sum from 0; then slice 0 adds the 8
// slice sums in slice order, ((s0 + s1) + s2) + ... + s7, and adds that to pack g of
// dwte[token[x]] (its only writer). Each slice walks its positions ENCODER_UNROLL at a time:
// first the group's 4 dout loads, then the next group's 4 pos loads, then this group's adds in
// order, so 4 round trips to memory overlap where a plain loop would wait for each in turn (4, not
// more: at 8 the bf16 build needs ~100 registers, half the blocks per SM, and spills under a
// 4-blocks-per-SM bound), and a group waits through one round trip (its dout), not two (pos, then
// dout): the next positions arrive meanwhile. Where rows start unaligned the loop loads each
// group's positions, then its packs element by element, without that overlap (the element loads'
// 8 registers a pack leave no room for it: in one loop with them, bf16 spilled on sm_80). The
// bucket's bounds and token are read at once (one round trip), and slice 0 reads its pack of the
// dwte row before the sums (it depends on the token only), so a block of a bucket of <= 32
// positions waits through 3 round trips (bounds, pos, dout) and the barrier; the commonest
// token's through 2 and then one per group of 32 positions.
__device__ void encoder_dwte_block_bucket(floatX* dwte, const floatX* dout, const int* token, const int* start,
                                          const int* pos, size_t x, int C) {
    __shared__ float partial[ENCODER_SLICES - 1][PACKX_SIZE][32]; // slices 1..7; [j][lane]: no bank conflicts
    int lane = threadIdx.x, slice = threadIdx.y;
    size_t g = (size_t)blockIdx.y * 32 + lane;
    bool active = g < packs_of(C);
    bool aligned = C % PACKX_SIZE == 0;
    int j0 = start[x], j1 = start[x + 1];
    floatX* row = dwte + (size_t)token[x] * C;
    PackX w = PackX{};
    if (slice == 0 && active) { w = load_pack(row, g, C, aligned); } // only this block writes it
    float sum[PACKX_SIZE];
    for (int j = 0; j < PACKX_SIZE; j++) { sum[j] = 0.0f; }
    const int step = ENCODER_SLICES * ENCODER_UNROLL; // positions the 8 slices take per group
    if (aligned) { // 16-byte loads; the next group's positions load while this group's dout arrives
        int p[ENCODER_UNROLL];
        for (int u = 0; u < ENCODER_UNROLL; u++) {
            int iu = j0 + slice + u * ENCODER_SLICES;
            p[u] = active && iu < j1 ? pos[iu] : -1;
        }
        for (int i = j0 + slice; active && i < j1; i += step) {
            PackX d[ENCODER_UNROLL];
            for (int u = 0; u < ENCODER_UNROLL; u++) {
                d[u] = p[u] >= 0 ? load128(dout + (size_t)p[u] * C + g * PACKX_SIZE) : PackX{};
            }
            for (int u = 0; u < ENCODER_UNROLL; u++) { // the next group's (p[u] is no longer needed)
                int iu = i + step + u * ENCODER_SLICES;
                p[u] = iu < j1 ? pos[iu] : -1;
            }
            for (int u = 0; u < ENCODER_UNROLL; u++) {
                if (i + u * ENCODER_SLICES >= j1) { break; } // the positions past j1 are all at the end
                for (int j = 0; j < PACKX_SIZE; j++) { sum[j] += to_float(d[u].v[j]); }
            }
        }
    } else { // rows that start unaligned (an odd test shape, never GPT-2's): element by element
        for (int i = j0 + slice; active && i < j1; i += step) {
            int p[ENCODER_UNROLL];
            PackX d[ENCODER_UNROLL];
            for (int u = 0; u < ENCODER_UNROLL; u++) {
                int iu = i + u * ENCODER_SLICES;
                p[u] = iu < j1 ? pos[iu] : -1;
            }
            for (int u = 0; u < ENCODER_UNROLL; u++) {
                d[u] = p[u] >= 0 ? load_pack(dout + (size_t)p[u] * C, g, C, aligned) : PackX{};
            }
            for (int u = 0; u < ENCODER_UNROLL; u++) {
                if (p[u] < 0) { break; } // the positions past j1 are all at the end
                for (int j = 0; j < PACKX_SIZE; j++) { sum[j] += to_float(d[u].v[j]); }
            }
        }
    }
    if (slice > 0) {
        for (int j = 0; j < PACKX_SIZE; j++) { partial[slice - 1][j][lane] = sum[j]; }
    }
    __syncthreads();
    if (slice > 0 || !active) { return; }
    for (int s = 0; s < ENCODER_SLICES - 1; s++) {
        for (int j = 0; j < PACKX_SIZE; j++) { sum[j] += partial[s][j][lane]; }
    }
    for (int j = 0; j < PACKX_SIZE; j++) { w.v[j] = from_float(to_float(w.v[j]) + sum[j]); }
    store_pack(row, g, C, aligned, w);
}

// Slice s's sum of a short bucket (0 + d: its one position, or 0 past the bucket's end: d = 0)
// added into the warp's running sum of slices 0..s-1, as a block bucket's slice 0 adds them.
// The "0 +" is no ornament: 0 + (-0) is +0, so dropping it could change the sign of a zero sum,
// and so the bits of a dwte element that is -0 (__fadd_rn: no compiler may drop it either).
__device__ inline void encoder_dwte_add_slice(float* sum, const PackX& d, int s) {
    for (int j = 0; j < PACKX_SIZE; j++) {
        float slice = __fadd_rn(0.0f, to_float(d.v[j]));
        sum[j] = s == 0 ? slice : __fadd_rn(sum[j], slice);
    }
}

// A short bucket (at most ENCODER_SHORT_BUCKET = 8 positions): one warp sums bucket x for the
// packs g = 32 blockIdx.y + lane, with the adds a block bucket would make. There, slice s holds
// at most one position, start[x] + s, so its sum is 0 + dout[pos] (or 0 where s is past the
// bucket's end), and slice 0 adds the 8 slice sums in slice order. The warp makes that same
// sequence: ((0 + d0) + (0 + d1)) + ... + (0 + d7). All 8 position loads are issued at once, then
// the dout packs ENCODER_UNROLL at a time (loads first, then their adds), as a block bucket's
// slice walks its own: a warp waits through 3 round trips (bounds and token, pos and the dwte
// row, dout) for a bucket of <= 4 positions, 4 for 5-8, and no barrier, where a block of 8 warps
// (7 of them with nothing to add) waited through 3 and a barrier: 8 times the buckets per SM at
// once. (All 8 dout packs in flight spilled in bf16 under the 64-register bound: ptxas, sm_90.)
// Where rows start unaligned (C not a multiple of the pack: an odd test shape, never GPT-2's),
// the packs come element by element, one pack at a time.
__device__ void encoder_dwte_warp_bucket(floatX* dwte, const floatX* dout, const int* token, const int* start,
                                         const int* pos, size_t x, int C) {
    int lane = threadIdx.x;
    size_t g = (size_t)blockIdx.y * 32 + lane;
    if (g >= packs_of(C)) { return; } // no barrier below: an idle lane may leave
    bool aligned = C % PACKX_SIZE == 0;
    int j0 = start[x], n = start[x + 1] - j0; // 1 <= n <= ENCODER_SHORT_BUCKET (the host's order)
    floatX* row = dwte + (size_t)token[x] * C;
    PackX w = load_pack(row, g, C, aligned); // only this warp writes it
    int p[ENCODER_SLICES];
    for (int s = 0; s < ENCODER_SLICES; s++) { p[s] = s < n ? pos[j0 + s] : -1; }
    float sum[PACKX_SIZE];
    if (aligned) { // (C a multiple of the pack: every pack whole) 16-byte loads, ENCODER_UNROLL in flight
        for (int h = 0; h < ENCODER_SLICES; h += ENCODER_UNROLL) {
            PackX d[ENCODER_UNROLL];
            for (int u = 0; u < ENCODER_UNROLL; u++) {
                int s = h + u;
                d[u] = p[s] >= 0 ? load128(dout + (size_t)p[s] * C + g * PACKX_SIZE) : PackX{};
            }
            for (int u = 0; u < ENCODER_UNROLL; u++) { encoder_dwte_add_slice(sum, d[u], h + u); }
        }
    } else {
        for (int s = 0; s < ENCODER_SLICES; s++) {
            PackX d = p[s] >= 0 ? load_pack(dout + (size_t)p[s] * C, g, C, aligned) : PackX{};
            encoder_dwte_add_slice(sum, d, s);
        }
    }
    for (int j = 0; j < PACKX_SIZE; j++) { w.v[j] = from_float(to_float(w.v[j]) + sum[j]); }
    store_pack(row, g, C, aligned, w);
}

// grid (num_block + ceil((num_tokens - num_block) / 8), ceil(packs / 32)), block (32,
// ENCODER_SLICES), the buckets in encoder_backward_order's order. Block x < num_block sums block
// bucket x with its 8 warps; a block past them holds 8 short buckets, warp w taking bucket
// num_block + 8 (x - num_block) + w (the last such block may hold fewer). The branch is the same
// for a whole block, so the block buckets' barrier is reached by every thread of their blocks.
// Only adds, each one fp32 rounding (no product a compiler could contract into them), so a host
// loop in the same order gives the same bits whichever path sums a bucket (test_kernels checks
// it). Per element of dwte touched: its bucket's dout elements read once, the dwte element read
// and written once. The buckets are on grid.x, which allows 2^31 - 1 blocks (grid.y stops at
// 65535).
__global__ void __launch_bounds__(32 * ENCODER_SLICES, 4)
encoder_backward_dwte_kernel(floatX* dwte, const floatX* dout, const int* token, const int* start, const int* pos,
                             int num_block, int num_tokens, int C) {
    if (blockIdx.x < (unsigned)num_block) {
        encoder_dwte_block_bucket(dwte, dout, token, start, pos, blockIdx.x, C);
        return;
    }
    size_t x = (size_t)num_block + (size_t)(blockIdx.x - num_block) * ENCODER_SLICES + threadIdx.y;
    if (x < (size_t)num_tokens) { encoder_dwte_warp_bucket(dwte, dout, token, start, pos, x, C); }
}

// one thread per (t, pack g): pack g of dwpe[t] += the sum over b = 0..B-1 of dout[b][t], in that order
__global__ void encoder_backward_dwpe_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C) {
    size_t packs = packs_of(C);
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; // t * packs + g
    if (idx >= (size_t)T * packs) { return; }
    size_t t = idx / packs, g = idx % packs;
    bool aligned = C % PACKX_SIZE == 0;
    float sum[PACKX_SIZE];
    for (int j = 0; j < PACKX_SIZE; j++) { sum[j] = 0.0f; }
    for (int b = 0; b < B; b++) {
        PackX d = load_pack(dout + ((size_t)b * T + t) * C, g, C, aligned);
        for (int j = 0; j < PACKX_SIZE; j++) { sum[j] += to_float(d.v[j]); }
    }
    PackX w = load_pack(dwpe + t * C, g, C, aligned);
    for (int j = 0; j < PACKX_SIZE; j++) { w.v[j] = from_float(to_float(w.v[j]) + sum[j]); }
    store_pack(dwpe + t * C, g, C, aligned, w);
}

// dwte (Vp,C), dwpe (maxT,C) += dout (B,T,C) scattered by token and position, deterministic.
// inp_host is the (B,T) token array on the HOST (the data loader's copy): the buckets are built
// there. The caller uses the same `scratch` for every call; any stream may be passed.
static void encoder_backward(floatX* dwte, floatX* dwpe, const floatX* dout, const int* inp_host, int B, int T, int C,
                             EncoderBackwardScratch* scratch, cudaStream_t stream) {
    EncoderBackwardScratch* s = scratch;
    if (B < 1 || T < 1 || C < 1 || (size_t)B * T > (size_t)s->capacity) {
        fail("encoder_backward: B=%d T=%d C=%d does not fit the scratch made for %d positions", B, T, C, s->capacity);
    }
    check_aligned16(dwte, "dwte", "encoder_backward");
    check_aligned16(dwpe, "dwpe", "encoder_backward");
    check_aligned16(dout, "dout", "encoder_backward");
    int BT = B * T;
    // The previous call's cudaMemcpyAsync may not have run yet (the stream can be far behind the
    // host): rewriting s->host now would change what it copies, and the new copy into s->device
    // could land while the previous kernels still read it. Wait for the previous call's event,
    // recorded after its kernels, so both buffers are free. By the next micro-step that work has
    // long finished, so this costs nothing in practice. (A never-recorded event returns at once.)
    cudaCheck(cudaEventSynchronize(s->done));

    int max_token = 0;
    for (int i = 0; i < BT; i++) {
        if (inp_host[i] < 0) { fail("encoder_backward: negative token %d at position %d", inp_host[i], i); }
        if (inp_host[i] > max_token) { max_token = inp_host[i]; }
    }
    if (max_token + 1 > s->num_cursor) {
        free(s->cursor);
        s->num_cursor = max_token + 1;
        s->cursor = (int*)mallocCheck((size_t)s->num_cursor * sizeof(int));
    }
    int* token = s->sorted;
    int* start = token + BT;
    int* pos = start + BT + 1;
    int* order = pos + BT;
    int num_tokens = encoder_backward_buckets(token, start, pos, s->cursor, s->num_cursor, inp_host, BT);
    int num_block = encoder_backward_order(order, start, num_tokens);
    encoder_backward_reorder(s->host, s->host + BT, s->host + 2 * BT + 1, token, start, pos, order, num_tokens);
    // the device copy has the same layout for this BT, so the whole used prefix is one copy
    size_t used = encoder_backward_scratch_ints(BT);
    cudaCheck(cudaMemcpyAsync(s->device, s->host, used * sizeof(int), cudaMemcpyHostToDevice, stream));
    const int* d_token = s->device;
    const int* d_start = d_token + BT;
    const int* d_pos = d_start + BT + 1;

    // a block per block bucket, then a block per 8 short buckets (a warp each)
    int blocks = num_block + (int)ceil_div(num_tokens - num_block, ENCODER_SLICES);
    dim3 grid(blocks, ceil_div(packs_of(C), 32)), block(32, ENCODER_SLICES);
    encoder_backward_dwte_kernel<<<grid, block, 0, stream>>>(dwte, dout, d_token, d_start, d_pos, num_block,
                                                             num_tokens, C);
    cudaCheckLaunch();
    encoder_backward_dwpe_kernel<<<ceil_div((size_t)T * packs_of(C), 256), 256, 0, stream>>>(dwpe, dout, B, T, C);
    cudaCheckLaunch();
    cudaCheck(cudaEventRecord(s->done, stream));
}

#endif // LLMC_ENCODER_CUH
