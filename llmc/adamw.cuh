/*
AdamW on the GPU: the CUDA twin of train_gpt2.c's adamw_update. The optimizer keeps an fp32
master copy of the parameters next to the fp32 moments m and v; the floatX params the model
computes with are the new master rounded to floatX after each step (round-to-nearest-even for
bf16; a plain copy in the FP32 build, where params may even be the master buffer itself).

The arithmetic is adamw_element: the CPU's loop body (train_gpt2.c's adamw_update), each operation
rounded on its own as C evaluates it, written with llmc/fp_rn.cuh's operations so that no compiler
may contract a multiply and an add into an fma. nvcc does that by default (--fmad=true) and the
host compiler does not, so with plain operators the GPU's update and the host's (-zo 1) differed by
an ulp per element (measured on an H200: stages 1-3 with -zo 1 left stage 0's losses at step 2).
Written so, the kernel, the host's update and the CPU's loop (compiled without contraction, as the
host test builds it: dev/test/test_update_host.cu) are one function, bit for bit.
*/
#ifndef LLMC_ADAMW_CUH
#define LLMC_ADAMW_CUH

#include <math.h>
#include "cuda_common.cuh"
#include "fp_rn.cuh"

// 1 - beta^t, the bias correction of step t (from 1), with the CPU trainer's expression; the
// host computes it once per step and passes it to the kernel
static inline float adamw_bias_correction(float beta, int t) { return 1.0f - powf(beta, (float)t); }

// One element, in PyTorch's order: decay the weight, then the Adam step. grad is the raw
// gradient; grad_scale the clipping factor applied as it is read. Every operation rounded on its
// own (the C expression (1 - beta2) * g * g is ((1 - beta2) * g) * g), a true division and a
// correctly rounded square root (the CUDA build does not use --use_fast_math), as on the CPU.
__host__ __device__ inline void adamw_element(float* master, float* m, float* v, float grad, float grad_scale,
                                              float lr, float beta1, float beta2, float bc1, float bc2, float eps,
                                              float weight_decay) {
    float g = rn_mul(grad, grad_scale);
    float mi = rn_add(rn_mul(beta1, *m), rn_mul(rn_sub(1.0f, beta1), g));
    float vi = rn_add(rn_mul(beta2, *v), rn_mul(rn_mul(rn_sub(1.0f, beta2), g), g));
    *m = mi;
    *v = vi;
    float p = rn_mul(*master, rn_sub(1.0f, rn_mul(lr, weight_decay)));
    *master = rn_sub(p, rn_div(rn_mul(lr, rn_div(mi, bc1)), rn_add(rn_sqrt(rn_div(vi, bc2)), eps)));
}

// ----------------------------------------------------------------------------
// many tensors per launch: the table of a unit's tensors
//
// Weight decay applies to the 2-D weights only, so an update of several tensors at once must know
// which tensor each element is in. One launch per unit (shard) of the slab, not one per tensor:
// GPT-2 124M has 13 units and 148 tensors. A unit is `pieces` copies of one piece (unit 0: one
// piece of 4 tensors, wte wpe lnfw lnfb; a block unit: one piece of 12 tensors per transformer
// block, -zu), then the padding; the table describes one piece and is a kernel argument (a few
// hundred bytes, whatever the unit's size). The element's place in its piece is one 32-bit
// division: a unit holds fewer than 2^32 elements (adamw_check_unit).

#define ADAMW_MAX_TENSORS 12

typedef struct {
    unsigned int piece;                  // elements of one piece
    unsigned int real;                   // real elements of the unit (pieces x piece); the padding after them stays 0
    int num_tensors;                     // tensors of a piece, in slab order
    unsigned int end[ADAMW_MAX_TENSORS]; // tensor i of a piece is [end[i-1], end[i]) (end[-1] = 0); end[last] = piece
    int decay[ADAMW_MAX_TENSORS];        // 1: weight decay applies to tensor i
} AdamWTensors;

// The tensor of a piece that holds offset j (0 <= j < piece), and its decay flag in *decay. The
// loop has constant bounds and indices, so a kernel reads the table where its arguments live
// (the parameter space) and never copies it into local memory, as an indexed walk would (ptxas:
// a 112-byte stack frame; dev/test/test_ptx_16byte.sh checks there is none). The ends ascend, so
// the last tensor whose start is <= j holds it.
__host__ __device__ inline int adamw_tensor_in_piece(const AdamWTensors& t, unsigned int j, int* decay) {
    int k = 0, d = t.decay[0];
#if defined(__CUDA_ARCH__) // (the host compiler does not know the pragma)
#pragma unroll
#endif
    for (int q = 0; q < ADAMW_MAX_TENSORS - 1; q++) {
        if (q + 1 < t.num_tensors && j >= t.end[q]) {
            k = q + 1;
            d = t.decay[q + 1];
        }
    }
    *decay = d;
    return k;
}

// Whether element i of the unit (from the unit's start) is decayed: 1 or 0, or -1 for padding.
__host__ __device__ inline int adamw_decay_at(const AdamWTensors* t, unsigned int i) {
    if (i >= t->real) { return -1; }
    int decay;
    adamw_tensor_in_piece(*t, i % t->piece, &decay);
    return decay;
}

// The decay flag shared by the unit's elements [a, b] (a <= b), or -2 when they are not all in one
// tensor of one piece (or reach the padding). The range is contiguous, so its two ends decide.
__host__ __device__ inline int adamw_span_decay(const AdamWTensors& t, unsigned int a, unsigned int b) {
    if (b >= t.real || a / t.piece != b / t.piece) { return -2; }
    int da, db;
    int ka = adamw_tensor_in_piece(t, a % t.piece, &da), kb = adamw_tensor_in_piece(t, b % t.piece, &db);
    return ka == kb ? da : -2;
}

// A table of one tensor of n elements (tests, and any single-tensor update).
static inline AdamWTensors adamw_one_tensor(size_t n, int decay) {
    AdamWTensors t;
    memset(&t, 0, sizeof(t));
    t.piece = t.real = (unsigned int)n;
    t.num_tensors = 1;
    t.end[0] = (unsigned int)n;
    t.decay[0] = decay;
    return t;
}

// The launchers' checks: a table that covers the range it is asked to update, within 32 bits.
static inline void adamw_check_unit(const AdamWTensors* t, size_t lo, size_t n, const char* who) {
    int ok = t->num_tensors >= 1 && t->num_tensors <= ADAMW_MAX_TENSORS && t->piece > 0 &&
             t->end[t->num_tensors - 1] == t->piece && t->real % t->piece == 0 && lo + n <= 0xFFFFFFFFull;
    for (int k = 1; ok && k < t->num_tensors; k++) { ok = t->end[k - 1] < t->end[k]; }
    if (!ok) {
        fail("%s: a unit of %u real elements in pieces of %u (%d tensors), elements [%zu, %zu): needs ascending tensor "
             "ends up to the piece and fewer than 2^32 elements", who, t->real, t->piece, t->num_tensors, lo, lo + n);
    }
}

#define ADAMW_THREADS 512
#define ADAMW_MAX_BLOCKS (1 << 20) // beyond 2G elements the threads loop
// Elements per thread. A thread of the one-element kernel had 14 bytes of loads in flight (a bf16
// gradient and three floats), too few for DRAM's latency at 48 warps per SM: the calibrated model
// (dev/perf) priced it at 1.11 ms per step on an H200 against a 0.81 ms byte floor. Four elements
// are one 16-byte load each of master, m and v and one 8-byte load of the bf16 gradients: 56 bytes
// in flight per thread (dev/cuda/NOTES.md, "AdamW, four elements a thread").
#define ADAMW_VEC 4

// Four consecutive elements as one aligned access (16 bytes of floats, 8 of bf16): the caller
// checks the alignment (adamw_vec_aligned).
template <typename T> struct alignas(4 * sizeof(T)) AdamWVec { T v[ADAMW_VEC]; };

// Stores four floatX as one access. Through uint2 / int4 and __stwb (the default write-back store
// as an intrinsic), as store128 in cuda_common.cuh: a plain assignment of the struct was four
// 2-byte stores in nvcc 13.0's PTX (st.global.u16 x 4), the value being assembled from bf16 halves.
__device__ inline void adamw_store_vec(floatX* p, const AdamWVec<floatX>& x) {
#if defined(ENABLE_BF16)
    uint2 bits;
#else
    int4 bits;
#endif
    static_assert(sizeof(bits) == sizeof(x), "four floatX are one 8- or 16-byte access");
    memcpy(&bits, &x, sizeof(bits));
#if defined(__CUDA_ARCH__)
    __stwb(reinterpret_cast<decltype(bits)*>(p), bits);
#else
    *reinterpret_cast<decltype(bits)*>(p) = bits; // the CPU emulator
#endif
}

// Grid-stride over the n elements [lo, lo + n) of one unit (params, master, grads, m, v point at
// element lo), ADAMW_VEC consecutive elements per thread; each element is read and written by one
// thread and computed by adamw_element alone, so the result does not depend on the launch shape
// nor on which path below took the element. The decay flag is found once per block and step of
// the loop, for the block's span of blockDim.x * ADAMW_VEC elements (2 divisions and 2 table
// lookups, the same in every thread), and per element only in the few spans that cross a
// tensor's edge or reach the padding. A thread's four elements go through one vector load and
// store per array when the pointers allow it (vec_ok, the same for the whole launch) and none of
// them is padding; otherwise one at a time (a shard starting at an element not a multiple of 4,
// the unit's last elements, a group reaching the padding, which stays untouched). params and
// master are not __restrict__: the FP32 build may pass the same buffer for both. GradT: floatX, or
// float (the bf16 build's fp32 gradients, -zd fp32). Bytes moved per element: grads read, master,
// m, v read and written, params written.
template <typename GradT>
__global__ void __launch_bounds__(ADAMW_THREADS)
adamw_kernel(floatX* params, float* master, const GradT* __restrict__ grads, float* __restrict__ m,
             float* __restrict__ v, size_t n, unsigned int lo, AdamWTensors tensors, float lr, float beta1,
             float beta2, float bc1, float bc2, float eps, float weight_decay, float grad_scale, int vec_ok) {
    size_t span = (size_t)blockDim.x * ADAMW_VEC, stride = (size_t)gridDim.x * span;
    for (size_t base = (size_t)blockIdx.x * span; base < n; base += stride) {
        size_t last = base + span < n ? base + span - 1 : n - 1;
        int decay = adamw_span_decay(tensors, lo + (unsigned int)base, lo + (unsigned int)last);
        size_t i = base + (size_t)threadIdx.x * ADAMW_VEC;
        if (i >= n) { continue; }
        int d[ADAMW_VEC], all_real = 1;
        for (int k = 0; k < ADAMW_VEC; k++) {
            d[k] = i + k >= n ? -1 : decay != -2 ? decay : adamw_decay_at(&tensors, lo + (unsigned int)(i + k));
            all_real &= d[k] >= 0;
        }
        if (vec_ok && all_real) { // i + 3 < n: one access per array
            float4 p4 = *reinterpret_cast<const float4*>(master + i);
            float4 m4 = *reinterpret_cast<const float4*>(m + i);
            float4 v4 = *reinterpret_cast<const float4*>(v + i);
            AdamWVec<GradT> g4 = *reinterpret_cast<const AdamWVec<GradT>*>(grads + i);
            float pv[ADAMW_VEC] = {p4.x, p4.y, p4.z, p4.w}, mv[ADAMW_VEC] = {m4.x, m4.y, m4.z, m4.w};
            float vv[ADAMW_VEC] = {v4.x, v4.y, v4.z, v4.w};
            AdamWVec<floatX> out;
            for (int k = 0; k < ADAMW_VEC; k++) {
                adamw_element(&pv[k], &mv[k], &vv[k], to_float(g4.v[k]), grad_scale, lr, beta1, beta2, bc1, bc2, eps,
                              d[k] ? weight_decay : 0.0f);
                out.v[k] = from_float(pv[k]);
            }
            *reinterpret_cast<float4*>(master + i) = make_float4(pv[0], pv[1], pv[2], pv[3]);
            *reinterpret_cast<float4*>(m + i) = make_float4(mv[0], mv[1], mv[2], mv[3]);
            *reinterpret_cast<float4*>(v + i) = make_float4(vv[0], vv[1], vv[2], vv[3]);
            adamw_store_vec(params + i, out);
        } else {
            for (int k = 0; k < ADAMW_VEC; k++) {
                if (d[k] < 0) { continue; } // padding, or past the end
                float pi = master[i + k], mi = m[i + k], vi = v[i + k];
                adamw_element(&pi, &mi, &vi, to_float(grads[i + k]), grad_scale, lr, beta1, beta2, bc1, bc2, eps,
                              d[k] ? weight_decay : 0.0f);
                master[i + k] = pi;
                m[i + k] = mi;
                v[i + k] = vi;
                params[i + k] = from_float(pi);
            }
        }
    }
}

// Whether the kernel may move a thread's four elements as one access per array: every pointer
// (at element lo) aligned to four of its elements, so that element i = 4j of the shard is too.
template <typename GradT>
static inline int adamw_vec_aligned(const floatX* params, const float* master, const GradT* grads, const float* m,
                                    const float* v) {
    return (uintptr_t)master % 16 == 0 && (uintptr_t)m % 16 == 0 && (uintptr_t)v % 16 == 0 &&
           (uintptr_t)grads % (ADAMW_VEC * sizeof(GradT)) == 0 && (uintptr_t)params % (ADAMW_VEC * sizeof(floatX)) == 0;
}

// AdamW on the n elements [lo, lo + n) of one unit, whose tensors `tensors` describes (weight
// decay on the tensors it marks, none on the padding, which is left alone), in one launch.
// PyTorch's order (decay the weight, then the Adam step), exactly the arithmetic of
// train_gpt2.c's adamw_update: grad = grads[i] * grad_scale; m, v update; bias corrections
// bc1 = 1 - beta1^t, bc2 = 1 - beta2^t computed on the host by the caller
// (adamw_bias_correction); master (fp32) is updated, params (floatX) = the new master rounded to floatX.
// (Not the CPU's adamw_update: this one takes a stream and a table, so C++ never confuses the two.)
template <typename GradT>
static void adamw_update(floatX* params, float* master, const GradT* grads, float* m, float* v, size_t n, size_t lo,
                         const AdamWTensors* tensors, float lr, float beta1, float beta2, float bc1, float bc2,
                         float eps, float weight_decay, float grad_scale, cudaStream_t stream) {
    if (n == 0) { return; }
    adamw_check_unit(tensors, lo, n, "adamw_update");
    size_t blocks = (n + ADAMW_THREADS * ADAMW_VEC - 1) / (ADAMW_THREADS * ADAMW_VEC);
    if (blocks > ADAMW_MAX_BLOCKS) { blocks = ADAMW_MAX_BLOCKS; }
    int vec_ok = adamw_vec_aligned(params, master, grads, m, v);
    adamw_kernel<GradT><<<(unsigned int)blocks, ADAMW_THREADS, 0, stream>>>(params, master, grads, m, v, n,
                                                                            (unsigned int)lo, *tensors, lr, beta1,
                                                                            beta2, bc1, bc2, eps, weight_decay,
                                                                            grad_scale, vec_ok);
    cudaCheckLaunch();
}

// The host twin of adamw_update, for the optimizer state offloaded to pinned host memory (-zo 1):
// the same table, the same adamw_element per element and the same rounding to floatX
// (from_float), on host pointers, the elements split over the CPU's threads (each element is
// independent, so the thread count changes no bit). adamw_element is written so that neither
// compiler may contract it (llmc/fp_rn.cuh), so this gives the kernel's bits on a GPU too
// (dev/cuda/test_kernels checks it, and on the emulator under EMU_FMAD=0 and 1).
static void adamw_update_host(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                              size_t lo, const AdamWTensors* tensors, float lr, float beta1, float beta2, float bc1,
                              float bc2, float eps, float weight_decay, float grad_scale) {
    if (n == 0) { return; }
    adamw_check_unit(tensors, lo, n, "adamw_update_host");
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++) {
        int decay = adamw_decay_at(tensors, (unsigned int)(lo + i));
        if (decay < 0) { continue; }
        adamw_element(&master[i], &m[i], &v[i], to_float(grads[i]), grad_scale, lr, beta1, beta2, bc1, bc2, eps,
                      decay ? weight_decay : 0.0f);
        params[i] = from_float(master[i]);
    }
}

#endif // LLMC_ADAMW_CUH
