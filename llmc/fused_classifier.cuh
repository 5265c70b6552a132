/*
The output layer's softmax and cross-entropy, forward and backward in one kernel: the CUDA twin
of train_gpt2.c's softmax_crossentropy_forward + softmax_crossentropy_backward, with the same
names for the same tensors (logits, losses, targets, dloss, V, Vp).

The CPU version keeps a (B,T,Vp) probs buffer between forward and backward. Here each row of
logits is read once to get its max and sum of exponentials together (the "online softmax": a
running (max, sum) pair, rescaled when a larger logit arrives), and then overwritten with dlogits.
Nothing of size (B,T,Vp) besides the logits themselves is needed, and the loss,
log(sum) - (x_target - max), stays finite where a probability underflows to 0. Where a row fits
in the block's registers (GPT-2's Vp in bf16: 7 packs of 8 logits per thread), each thread keeps
the logits it read for the second pass, so the row comes from memory once; else the second pass
reads it again (fused_classifier_reread_kernel).

One block per row. Each thread folds its own logits into a state, then the block merges the
threads' states in a fixed butterfly order: no atomics, the same bits on every run.
Where the device has the shared memory for two rows, the launcher takes a persistent variant of
the held kernel instead (fused_classifier_streamed_kernel, at the end: read the two above first):
one block per SM walks rows, copying the next row into shared memory while it computes this one.
The per-element math (the merge, the loss, one dlogit) and the per-thread loops are
__host__ __device__ functions, tested on the host against the CPU by dev/test/test_update_host.cu.
*/
#ifndef LLMC_FUSED_CLASSIFIER_CUH
#define LLMC_FUSED_CLASSIFIER_CUH

#include <math.h>
#include <stdint.h>
#include "cuda_common.cuh"
#include "mma.cuh" // cp_async_16, cp_async_commit, smem_addr (the streamed kernel)

// ----------------------------------------------------------------------------
// the online softmax state

// The softmax statistics of a run of logits: maxval = their max, sum = the sum of
// expf(x - maxval) over them. A run of no logits has sum 0 (and maxval -INFINITY).
typedef struct {
    float maxval;
    float sum;
} SoftmaxState;

__host__ __device__ inline SoftmaxState softmax_state_empty(void) {
    SoftmaxState s = {-INFINITY, 0.0f};
    return s;
}

// the state of a single logit x
__host__ __device__ inline SoftmaxState softmax_state_of(float x) {
    SoftmaxState s = {x, 1.0f};
    return s;
}

// The state of two runs together: the sum with the smaller max is rescaled to the larger max
// (one expf). It is symmetric to the bit, merge(a, b) == merge(b, a), which the butterfly
// reduction below needs so that every lane ends with the same state. A NaN logit makes the
// sum NaN, so the loss shows it.
__host__ __device__ inline SoftmaxState softmax_state_merge(SoftmaxState a, SoftmaxState b) {
    // an empty run changes nothing (and its -INFINITY max must not meet another: -inf - -inf is NaN)
    if (b.sum == 0.0f) { return a; }
    if (a.sum == 0.0f) { return b; }
    SoftmaxState r;
    if (a.maxval >= b.maxval) {
        r.maxval = a.maxval;
        r.sum = a.sum + b.sum * expf(b.maxval - a.maxval);
    } else {
        r.maxval = b.maxval;
        r.sum = a.sum * expf(a.maxval - b.maxval) + b.sum;
    }
    return r;
}

// -log p[target] from the row's state, as log(sum) - (x_target - maxval): unlike -logf(p), it
// stays finite when p underflows to 0
__host__ __device__ inline float crossentropy_loss(SoftmaxState row, float target_logit) {
    return logf(row.sum) - (target_logit - row.maxval);
}

// p = softmax(x) from the row's max and 1/sum (one division per row, not per element)
__host__ __device__ inline float softmax_prob(float x, float maxval, float inv_sum) {
    return expf(x - maxval) * inv_sum;
}

// one element of dlogits = (p - onehot(target)) * dloss
__host__ __device__ inline float crossentropy_dlogit(float p, int is_target, float dloss) {
    return (p - (is_target ? 1.0f : 0.0f)) * dloss;
}

// ----------------------------------------------------------------------------
// the per-thread loops: each thread reads 16-byte packs of logits (8 bf16 or 4 fp32 at once;
// Pack128 in cuda_common.cuh), packs tid, tid + nthreads, ... of the row, so a warp reads 512
// contiguous bytes per step. A row of Vp logits starts 16-byte aligned: the launcher checks the
// logits' pointer and that Vp is a multiple of the pack (it is a multiple of 128 in GPT-2).
// Bytes moved per row: Vp floatX read once (twice in the reread kernel), Vp written once.

#define CLASSIFIER_THREADS 1024 // one block per row; V = 50257 is 49 logits per thread

// One pack's logits folded into a thread's state: the max of its first `valid` columns (the
// padded columns [V, Vp) are skipped), then the sum of expf(x - that max) over them in column
// order (eight independent expf, no branch per element), and that pack's state merged into the
// thread's (one expf more). Both kernels fold their packs with this, in the same order.
__host__ __device__ inline SoftmaxState classifier_fold_pack(SoftmaxState st, PackX pk, int valid) {
    float x[PACKX_SIZE];
    float m = -INFINITY;
    for (int j = 0; j < PACKX_SIZE; j++) {
        x[j] = to_float(pk.v[j]);
        if (j < valid) { m = fmaxf(m, x[j]); }
    }
    SoftmaxState pack = {m, 0.0f};
    for (int j = 0; j < PACKX_SIZE && j < valid; j++) { pack.sum += expf(x[j] - m); } // a NaN x: NaN sum
    return softmax_state_merge(st, pack);
}

// The state of the logits thread `tid` of `nthreads` reads in row (Vp): its packs in index order.
__host__ __device__ inline SoftmaxState classifier_thread_state(const floatX* row, int V, int Vp, int tid, int nthreads) {
    SoftmaxState st = softmax_state_empty();
    for (int k = tid; k < Vp / PACKX_SIZE; k += nthreads) {
        PackX pk = load128(row + (size_t)k * PACKX_SIZE);
        int valid = V - k * PACKX_SIZE; // columns of this pack below V
        if (valid <= 0) { continue; }
        st = classifier_fold_pack(st, pk, valid);
    }
    return st;
}

// Pack k of a row's logits turned into its dlogits: (p - onehot(target)) * dloss for the first V
// columns, 0 for the padded ones (inv_sum = 1 / the row's sum, one division per thread).
__host__ __device__ inline PackX classifier_pack_dlogits(PackX pk, int k, SoftmaxState st, float inv_sum, int target,
                                                         float dloss, int V) {
    for (int j = 0; j < PACKX_SIZE; j++) {
        int col = k * PACKX_SIZE + j;
        float d = 0.0f;
        if (col < V) { d = crossentropy_dlogit(softmax_prob(to_float(pk.v[j]), st.maxval, inv_sum), col == target, dloss); }
        pk.v[j] = from_float(d);
    }
    return pk;
}

// store128 with the streaming hint (st.global.cs: evict first): dlogits are not read again by
// this kernel, so they should not push the logits the other blocks are about to reread out of L2
template <typename T>
__host__ __device__ inline void store128_streaming(T* p, const Pack128<T>& x) {
#if defined(__CUDA_ARCH__)
    int4 bits;
    memcpy(&bits, &x, sizeof(bits));
    __stcs(reinterpret_cast<int4*>(p), bits);
#else
    store128(p, x); // the host (tests' replays) and the CPU emulator
#endif
}

// Overwrites the same packs of row (Vp) with dlogits, rereading them (the fallback kernel's pass 2).
// Each thread rewrites only what it read, in the reverse order (the element values do not depend
// on the order).
__host__ __device__ inline void classifier_thread_dlogits(floatX* row, SoftmaxState st, int target, float dloss,
                                                          int V, int Vp, int tid, int nthreads) {
    float inv_sum = 1.0f / st.sum;
    int packs = Vp / PACKX_SIZE;
    // the same packs as the first pass, last first: those were read most recently and are the
    // likeliest to be still in L2 (a row is ~100 KB; the first pass has just read all of it)
    int last = tid < packs ? tid + (packs - 1 - tid) / nthreads * nthreads : tid - nthreads;
    for (int k = last; k >= tid; k -= nthreads) {
        PackX pk = load128(row + (size_t)k * PACKX_SIZE);
        store128_streaming(row + (size_t)k * PACKX_SIZE, classifier_pack_dlogits(pk, k, st, inv_sum, target, dloss, V));
    }
}

// The same two passes with the thread's packs held in registers in between, so the row is read
// from memory once: packs tid + i nthreads (i < CLASSIFIER_HELD_PACKS) of the row, all loaded
// before the first is used (one round trip), folded in index order as classifier_thread_state
// folds them (the same state, to the bit), then written back as dlogits from the registers. Needs
// Vp / PACKX_SIZE <= CLASSIFIER_HELD_PACKS * nthreads (the launcher checks).
#define CLASSIFIER_HELD_PACKS 7 // GPT-2's Vp = 50304 in bf16: 6,288 packs, at most 7 per thread of 1024

typedef struct {
    PackX pk[CLASSIFIER_HELD_PACKS];
} ClassifierHeld;

// Marks a held pack's bits as changed, so that the compiler recomputes pass 2's conversions to
// float from the packed logits (4 registers a pack) rather than keeping pass 1's (8 floats a pack
// in bf16: 7 packs of those do not fit in the 64 registers a thread of 1024 has, and spill). No
// instruction is emitted; the values are the same. Nothing to do on the host and the emulator.
__host__ __device__ inline void classifier_keep_packed(PackX* pk) {
#if defined(__CUDA_ARCH__)
    uint32_t w[4];
    memcpy(w, pk, sizeof(w));
    asm volatile("" : "+r"(w[0]), "+r"(w[1]), "+r"(w[2]), "+r"(w[3]));
    memcpy(pk, w, sizeof(w));
#else
    (void)pk;
#endif
}

__host__ __device__ inline SoftmaxState classifier_thread_load_state(ClassifierHeld* held, const floatX* row, int V, int Vp,
                                                                     int tid, int nthreads) {
    int packs = Vp / PACKX_SIZE;
#if defined(__CUDA_ARCH__) // (the host compiler does not know the pragma)
#pragma unroll
#endif
    for (int i = 0; i < CLASSIFIER_HELD_PACKS; i++) {
        int k = tid + i * nthreads;
        if (k < packs) { held->pk[i] = load128(row + (size_t)k * PACKX_SIZE); }
    }
    SoftmaxState st = softmax_state_empty();
#if defined(__CUDA_ARCH__) // (the host compiler does not know the pragma)
#pragma unroll
#endif
    for (int i = 0; i < CLASSIFIER_HELD_PACKS; i++) {
        int k = tid + i * nthreads;
        int valid = V - k * PACKX_SIZE; // columns of this pack below V (<= 0: past V, or past the row)
        PackX pk = held->pk[i]; classifier_keep_packed(&pk);
        if (valid > 0) { st = classifier_fold_pack(st, pk, valid); }
    }
    return st;
}

__host__ __device__ inline void classifier_thread_store_dlogits(ClassifierHeld* held, floatX* row, SoftmaxState st,
                                                                int target, float dloss, int V, int Vp, int tid,
                                                                int nthreads) {
    float inv_sum = 1.0f / st.sum;
    int packs = Vp / PACKX_SIZE;
#if defined(__CUDA_ARCH__) // (the host compiler does not know the pragma)
#pragma unroll
#endif
    for (int i = 0; i < CLASSIFIER_HELD_PACKS; i++) {
        int k = tid + i * nthreads;
        if (k < packs) {
            PackX pk = held->pk[i];
            classifier_keep_packed(&pk);
            store128_streaming(row + (size_t)k * PACKX_SIZE, classifier_pack_dlogits(pk, k, st, inv_sum, target, dloss, V));
        }
    }
}

// ----------------------------------------------------------------------------
// block reduction of the states: a butterfly within each warp, then one over the warps' results

__device__ inline SoftmaxState warp_softmax_state(SoftmaxState st) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        SoftmaxState other;
        other.maxval = __shfl_xor_sync(0xffffffff, st.maxval, offset);
        other.sum = __shfl_xor_sync(0xffffffff, st.sum, offset);
        st = softmax_state_merge(st, other);
    }
    return st;
}

// The state of the whole block (blockDim.x a multiple of 32); every thread gets it.
// `shared` holds 32 states and is used once per row: a kernel that reduces a second row must not
// write it before every thread has read the first (fused_classifier_streamed_kernel alternates two).
__device__ inline SoftmaxState block_softmax_state(SoftmaxState st, SoftmaxState* shared) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    st = warp_softmax_state(st);
    if (lane == 0) { shared[warp] = st; }
    __syncthreads();
    st = lane < warps ? shared[lane] : softmax_state_empty();
    return warp_softmax_state(st);
}

// ----------------------------------------------------------------------------
// the kernel and its launcher

// The target's logit, read by thread 0 before the block reduction (whose barrier orders that
// read before any dlogit write); 0 where the target is outside [0, V) (a corrupt batch: its loss
// is NaN rather than a stray read).
__device__ inline float classifier_target_logit(const floatX* row, int target, int target_ok) {
    return threadIdx.x == 0 && target_ok ? to_float(row[target]) : 0.0f;
}

// grid BT, block CLASSIFIER_THREADS: block bt handles row bt of logits (BT, Vp), reading it from
// memory once (each thread's packs held in registers between the passes). Vp / PACKX_SIZE <=
// CLASSIFIER_HELD_PACKS * CLASSIFIER_THREADS.
__global__ void __launch_bounds__(CLASSIFIER_THREADS)
fused_classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int V, int Vp, int write_dlogits) {
    __shared__ SoftmaxState warp_states[32];
    size_t bt = blockIdx.x;
    floatX* row = logits + bt * Vp;
    int target = targets[bt];
    int target_ok = target >= 0 && target < V;
    float target_logit = classifier_target_logit(row, target, target_ok);

    ClassifierHeld held;
    SoftmaxState st = classifier_thread_load_state(&held, row, V, Vp, threadIdx.x, blockDim.x);
    st = block_softmax_state(st, warp_states);
    if (threadIdx.x == 0) { losses[bt] = target_ok ? crossentropy_loss(st, target_logit) : NAN; }
    if (write_dlogits) { classifier_thread_store_dlogits(&held, row, st, target, dloss, V, Vp, threadIdx.x, blockDim.x); }
}

// The same for any Vp: pass 2 reads the row again (from L2 where it is still there, else DRAM).
__global__ void __launch_bounds__(CLASSIFIER_THREADS)
fused_classifier_reread_kernel(floatX* logits, float* losses, const int* targets, float dloss, int V, int Vp,
                               int write_dlogits) {
    __shared__ SoftmaxState warp_states[32];
    size_t bt = blockIdx.x;
    floatX* row = logits + bt * Vp;
    int target = targets[bt];
    int target_ok = target >= 0 && target < V;
    float target_logit = classifier_target_logit(row, target, target_ok);

    SoftmaxState st = classifier_thread_state(row, V, Vp, threadIdx.x, blockDim.x);
    st = block_softmax_state(st, warp_states);
    if (threadIdx.x == 0) { losses[bt] = target_ok ? crossentropy_loss(st, target_logit) : NAN; }
    if (write_dlogits) { classifier_thread_dlogits(row, st, target, dloss, V, Vp, threadIdx.x, blockDim.x); }
}

// 1 if a row of Vp logits fits in CLASSIFIER_THREADS threads' registers (fused_classifier_kernel)
static inline int classifier_rows_held(int Vp) {
    return Vp / PACKX_SIZE <= CLASSIFIER_HELD_PACKS * CLASSIFIER_THREADS;
}

// ----------------------------------------------------------------------------
// the persistent kernel: the next row's read overlapped with this row's arithmetic
//
// Why. fused_classifier_kernel measured 3.25 ms on an H200 (ncu, 2026-11-28, B=32 T=1024: 32,768
// rows of Vp = 50304 bf16), where the bytes alone (each row read once, its dlogits written once,
// 6.6 GB at ~4.3 TB/s) take ~1.5 ms and llm.c's kernel 1.99 ms. Its 1024 threads at 62 registers
// fill an SM's register file, so an SM holds ONE block, and that block's phases run one after
// the other: every thread's 7 loads land, then the arithmetic of pass 1 (IEEE expf per logit),
// the block reduction, then pass 2's arithmetic (expf per logit again) between its stores. While
// the block computes, the SM reads nothing; while it waits for its row, it computes nothing. The
// calibrated model (dev/perf/kernel_costs.py, fused_classifier_kernel_held, serial_phases) puts
// the launch at its DRAM time plus its arithmetic (~1.93 + ~1.28 ms), as measured.
//
// What overlaps what. Here the grid is one block per SM (the registers allow no second one) and
// block b takes rows b, b + gridDim.x, b + 2 gridDim.x, ... Shared memory holds two rows (2 x
// 100,608 bytes at GPT-2's Vp in bf16; the launcher raises the block's limit; H100/H200 allow
// 227 KB, and where two rows do not fit, A100's 163 KB, the launcher takes fused_classifier_kernel).
// At the top of each iteration every thread issues the cp.async copies of ITS packs of the block's
// next row into the other buffer, then waits only for its copies of this row (cp.async.wait_group
// 1: every group but the newest has landed), takes its packs of this row from shared memory into
// registers, and computes the row exactly as fused_classifier_kernel does
// (classifier_thread_load_state, block_softmax_state, classifier_thread_store_dlogits: the same
// packs per thread, the same fold order, the same bits), storing dlogits to global memory with
// streaming stores. So the next row's DRAM read runs under this row's arithmetic and stores; the
// launch should take about the larger of the two, not their sum (a prediction: dev/cuda/NOTES.md).
//
// The barriers, and why so few. Every thread copies exactly the packs it later reads (packs
// tid + i nthreads of the row, as classifier_thread_load_state reads them), so a copy is made
// visible to its reader by that thread's own cp.async.wait_group; no barrier is needed between
// the copy and the read. The buffer that iteration `it` copies into was last read in iteration
// it - 1, by the same thread (its own packs), whose values it used and then passed that row's
// reduction barrier before issuing the copy. The 32 warp states of the block reduction alternate
// between two arrays: lane 0 of a warp writes array it % 2 only after the barrier of iteration
// it - 1, which no thread passes before it has read that array in iteration it - 2.
// The target's logit is read from global memory by thread 0, before the reduction's barrier that
// orders it before the row's dlogit stores, as in fused_classifier_kernel. Under the emulator's
// EMU_CHECK=1, a missing or too weak wait, or one array of warp states, is named (test_kernels).

// cp.async.wait_group 1: all but this thread's newest group of copies have landed
__device__ inline void classifier_cp_async_wait_prior() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// This thread's packs of row (Vp) copied into buf (a row of shared memory, the same layout), without
// a commit: packs tid + i nthreads, i < CLASSIFIER_HELD_PACKS, the ones classifier_thread_load_state reads.
__device__ inline void classifier_copy_row_async(floatX* buf, const floatX* row, int Vp, int tid, int nthreads) {
    int packs = Vp / PACKX_SIZE;
#pragma unroll
    for (int i = 0; i < CLASSIFIER_HELD_PACKS; i++) {
        int k = tid + i * nthreads;
        if (k < packs) { cp_async_16(smem_addr(buf + (size_t)k * PACKX_SIZE), row + (size_t)k * PACKX_SIZE); }
    }
}

// grid <= BT blocks of CLASSIFIER_THREADS, dynamic shared memory classifier_streamed_smem(Vp): block b
// handles rows b, b + gridDim.x, ... as fused_classifier_kernel handles its one row.
// Vp / PACKX_SIZE <= CLASSIFIER_HELD_PACKS * CLASSIFIER_THREADS.
__global__ void __launch_bounds__(CLASSIFIER_THREADS)
fused_classifier_streamed_kernel(floatX* logits, float* losses, const int* targets, float dloss, int BT, int V, int Vp,
                                 int write_dlogits) {
    extern __shared__ uint4 classifier_rows[]; // [2][Vp] floatX, 16-byte aligned: buffer b at rows + b Vp
    __shared__ SoftmaxState warp_states[2][32];
    floatX* rows = (floatX*)classifier_rows; // (an offset, not an array of two pointers: that would be a stack frame)
    int tid = threadIdx.x, nthreads = blockDim.x;

    classifier_copy_row_async(rows, logits + (size_t)blockIdx.x * Vp, Vp, tid, nthreads); // the first row, buffer 0
    cp_async_commit();
    int it = 0;
    for (int bt = blockIdx.x; bt < BT; bt += gridDim.x, it++) {
        // the next row's copies start now and land while this row computes (an empty group past the last)
        int next = bt + gridDim.x;
        floatX* buf = rows + (size_t)(it % 2) * Vp, *next_buf = rows + (size_t)((it + 1) % 2) * Vp;
        if (next < BT) { classifier_copy_row_async(next_buf, logits + (size_t)next * Vp, Vp, tid, nthreads); }
        cp_async_commit();
        classifier_cp_async_wait_prior(); // this thread's packs of row bt have landed in buf

        floatX* row = logits + (size_t)bt * Vp;
        int target = targets[bt];
        int target_ok = target >= 0 && target < V;
        float target_logit = classifier_target_logit(row, target, target_ok);

        ClassifierHeld held;
        SoftmaxState st = classifier_thread_load_state(&held, buf, V, Vp, tid, nthreads);
        st = block_softmax_state(st, warp_states[it % 2]);
        if (tid == 0) { losses[bt] = target_ok ? crossentropy_loss(st, target_logit) : NAN; }
        if (write_dlogits) { classifier_thread_store_dlogits(&held, row, st, target, dloss, V, Vp, tid, nthreads); }
    }
}

// the streamed kernel's dynamic shared memory: two rows of Vp logits
static inline size_t classifier_streamed_smem(int Vp) { return 2 * (size_t)Vp * sizeof(floatX); }

// 1 if the streamed kernel can run a row of Vp logits on the current device: the row fits the
// threads' registers (as fused_classifier_kernel's) and two rows plus the kernel's static shared
// memory fit what the device allows one block (cudaDevAttrMaxSharedMemoryPerBlockOptin). GPT-2's
// 201,216 + 512 bytes fit H100/H200's 227 KB, not A100's 163 KB (there: fused_classifier_kernel).
static inline int classifier_streamed_fits(int Vp) {
    if (Vp <= 0 || !classifier_rows_held(Vp)) { return 0; }
    int device = 0, optin = 0;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return classifier_streamed_smem(Vp) + 2 * 32 * sizeof(SoftmaxState) <= (size_t)optin;
}

// The streamed kernel's grid: one block per SM, as many as there are rows. One block is all an SM
// holds: its 1024 threads at 64 registers (ptxas, sm_80 and sm_90) take the SM's 65,536 registers,
// and its two rows of shared memory (at GPT-2's Vp) more than half the SM's.
static inline int classifier_streamed_grid(int BT) {
    int device = 0, sms = 0;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return BT < sms ? BT : sms;
}

// The classifier's kernels, for fused_classifier_with
enum { CLASSIFIER_REREAD = 0, CLASSIFIER_HELD = 1, CLASSIFIER_STREAMED = 2 };

// As fused_classifier below, with the kernel named: CLASSIFIER_HELD = fused_classifier_kernel (needs
// classifier_rows_held(Vp)), CLASSIFIER_REREAD = fused_classifier_reread_kernel, CLASSIFIER_STREAMED
// = fused_classifier_streamed_kernel (needs classifier_streamed_fits(Vp)) on `grid` blocks (0: one
// per SM, at most BT). For test_kernels, which checks that all give the same bits.
static void fused_classifier_with(int kernel, int grid, floatX* logits, float* losses, const int* targets, float dloss,
                                  int BT, int V, int Vp, int write_dlogits, cudaStream_t stream) {
    if (V <= 0 || V > Vp || Vp % PACKX_SIZE != 0) {
        fail("fused_classifier: needs 0 < V <= Vp and Vp a multiple of %d, so that every row starts 16-byte "
             "aligned (V %d, Vp %d)", PACKX_SIZE, V, Vp);
    }
    if (kernel != CLASSIFIER_REREAD && !classifier_rows_held(Vp)) {
        fail("fused_classifier: a row of Vp %d logits is over %d packs per thread of %d", Vp, CLASSIFIER_HELD_PACKS,
             CLASSIFIER_THREADS);
    }
    if (kernel == CLASSIFIER_STREAMED && !classifier_streamed_fits(Vp)) {
        fail("fused_classifier: two rows of Vp %d logits (%zu bytes) are over the device's shared memory per block",
             Vp, classifier_streamed_smem(Vp));
    }
    check_aligned16(logits, "logits", "fused_classifier");
    if (BT <= 0) { return; }
    if (kernel == CLASSIFIER_STREAMED) {
        if (grid <= 0) { grid = classifier_streamed_grid(BT); }
        if (grid > BT) { fail("fused_classifier: a grid of %d blocks for %d rows (at most one block a row)", grid, BT); }
        size_t smem = classifier_streamed_smem(Vp);
        if (smem > 48 * 1024) {
            cudaCheck(cudaFuncSetAttribute(fused_classifier_streamed_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem));
        }
        fused_classifier_streamed_kernel<<<grid, CLASSIFIER_THREADS, smem, stream>>>(logits, losses, targets, dloss, BT, V,
                                                                                    Vp, write_dlogits);
    } else if (kernel == CLASSIFIER_HELD) {
        fused_classifier_kernel<<<BT, CLASSIFIER_THREADS, 0, stream>>>(logits, losses, targets, dloss, V, Vp, write_dlogits);
    } else {
        fused_classifier_reread_kernel<<<BT, CLASSIFIER_THREADS, 0, stream>>>(logits, losses, targets, dloss, V, Vp,
                                                                              write_dlogits);
    }
    cudaCheckLaunch();
}

// For each of the BT rows of logits (BT, Vp): softmax over the first V columns, loss = -log p[target]
// (losses (BT) fp32), and — when write_dlogits — the logits are overwritten with
// dlogits = (p - onehot(target)) * dloss, padded columns [V, Vp) set to 0. One pass computes the
// row's max and sum together (online), a second writes dlogits: no (BT, Vp) probabilities buffer.
// The row is read from memory once where each thread can hold its packs in registers (GPT-2's Vp
// in bf16), else twice; where the device also has the shared memory for two rows, by the streamed
// kernel (the next row's read under this row's arithmetic). targets (BT) on the device. dloss =
// the gradient of the mean loss per position (e.g. 1/(B*T)).
static void fused_classifier(floatX* logits, float* losses, const int* targets, float dloss, int BT, int V, int Vp,
                             int write_dlogits, cudaStream_t stream) {
    int kernel = classifier_streamed_fits(Vp)                  ? CLASSIFIER_STREAMED
                 : Vp > 0 && classifier_rows_held(Vp)          ? CLASSIFIER_HELD
                                                               : CLASSIFIER_REREAD;
#ifdef CLASSIFIER_NO_STREAMED // (-D, to measure the held kernel beside it: dev/gpu_check.sh's VARIANTS)
    if (kernel == CLASSIFIER_STREAMED) { kernel = CLASSIFIER_HELD; }
#endif
    fused_classifier_with(kernel, 0, logits, losses, targets, dloss, BT, V, Vp, write_dlogits, stream);
}

#endif // LLMC_FUSED_CLASSIFIER_CUH
