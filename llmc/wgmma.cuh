/*
Hopper (sm_90a) instructions for the attention kernels of issue 30: warpgroup MMA (wgmma), the
shared-memory matrix descriptor and its swizzles, mbarriers, tensor-map copies (TMA) and the
async-proxy fence, as thin inline `asm volatile` wrappers like llmc/mma.cuh, so that what runs is
exactly the instruction named here. The emulator (dev/cuda/emu, ptx.cpp) runs every asm string of
this file with the PTX ISA's semantics; its README says what it checks.

    wgmma.fence.sync.aligned;                    order this thread's register accesses before the next wgmma
    wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16   D (64xN, fp32) (+)= A (64x16) B (16xN), asynchronous
    wgmma.commit_group.sync.aligned;             close the group of the wgmmas issued since the last commit
    wgmma.wait_group.sync.aligned N;             wait until at most N groups are pending
    fence.proxy.async.shared::cta;               generic-proxy shared writes before it -> visible to the async proxy
    mbarrier.{init,arrive,arrive.expect_tx,try_wait.parity}.shared::cta.b64, fence.mbarrier_init.release.cluster
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    setmaxnreg.{inc,dec}.sync.aligned.u32 R;
    mov.u64 d, %globaltimer;                     the nanosecond timer (mbar_wait's time limit)

Compiled only where `__CUDA_ARCH_FEAT_SM90_ALL` is defined: nvcc with
`-gencode arch=compute_90a,code=sm_90a` (device pass), and the emulator's nvcc-cpu when its command
line names compute_90a/sm_90a (it then defines that macro; dev/cuda/emu/README.md). Host helpers
(the layouts as functions, the swizzle, the descriptor, the tensor map) are always compiled.

WARPGROUP. A warpgroup is 4 consecutive warps whose first warp index is a multiple of 4 (threads
128w .. 128w+127 of the block). wgmma.* and setmaxnreg are .sync.aligned over the warpgroup: all
128 threads execute the same instruction (same qualifiers), under warpgroup-uniform control flow.

THE ACCUMULATOR D of m64nNk16 (fp32), N/2 registers per thread. With tid = threadIdx.x % 128,
w = tid / 32 (the warp in the warpgroup), lane = tid % 32, g = lane / 4, t = lane % 4: register
d[4i + j] (i = 0 .. N/8-1, the n8 column block; j = 0..3) holds
      j = 0: D[16w + g    ][8i + 2t]      j = 1: D[16w + g    ][8i + 2t + 1]
      j = 2: D[16w + g + 8][8i + 2t]      j = 3: D[16w + g + 8][8i + 2t + 1]
i.e. warp w owns rows 16w .. 16w+15 and, per n8 block, the mma.m16n8 C layout of llmc/mma.cuh.
A FROM REGISTERS (wgmma_rs; 64x16 bf16, row-major M x K), 4 registers of two bf16 (lower column in
the low 16 bits), warp w holding rows 16w .. 16w+15 in mma.m16n8k16's A layout:
      a0 = A[16w+g][2t, 2t+1]   a1 = A[16w+g+8][2t, 2t+1]   a2 = A[16w+g][2t+8, 2t+9]   a3 = A[16w+g+8][2t+8, 2t+9]
So the D registers of two neighbouring n8 blocks (columns 16c .. 16c+15), rounded to bf16 and
packed, are the A registers of k-columns 16c .. 16c+15 (a0 = (d[8c], d[8c+1]), a1 = (d[8c+2],
d[8c+3]), a2 = (d[8c+4], d[8c+5]), a3 = (d[8c+6], d[8c+7])): P = softmax(S) feeds P V from registers.

ASYNCHRONY. wgmma.mma_async is issued, not finished: its D registers may not be read or written
(and the A registers of wgmma_rs not written) until a wgmma_wait<N> that covers its group returns
(the emulator writes NaN into D at the issue and the result at the wait). Before the first
wgmma, and between any other access of those registers and a wgmma that uses them, the warpgroup
executes wgmma_fence() (consecutive wgmmas into the same D need none between them). nvcc may move
a register access across an asm statement that does not name the register: call
wgmma_fence_operand(d) after wgmma_wait and before wgmma_fence (CUTLASS's warpgroup_fence_operand).
Shared memory that a wgmma reads must not be written before the wait that covers it.

THE MATRIX DESCRIPTOR (64 bits; PTX ISA "Matrix Descriptor Format"), built by wgmma_desc():
      bits  0-13: (start address & 0x3FFFF) >> 4      bits 16-29: leading byte offset (LBO) >> 4
      bits 32-45: stride byte offset (SBO) >> 4         bits 49-51: base offset (0 here: tiles of a
      swizzled layout start at a multiple of its repeat, 8 x the swizzle width = 1024 B for 128B)
      bits 62-63: swizzle 0 = none, 1 = 128B, 2 = 64B, 3 = 32B
Core matrix: 8 rows of 16 bytes (8 bf16). The canonical layouts (PTX ISA "Shared Memory Matrix
Layout"; T = 8 bf16 = 16 bytes; a k16 operand is two core matrices deep in K), in bytes:
  K-major (A not transposed: row m holds its k contiguously; B not transposed: row n holds its k):
      none : element (r, k) at start + (r%8)*16 + (r/8)*SBO + (k%8)*2 + (k/8)*LBO
      swizzle of width W (32, 64, 128 B): rows W bytes apart, the K core matrices side by side in
             the row: (r, k) at start + (r%8)*W + (r/8)*SBO + k*2 (LBO unused); the usual dense tile
             of 64 bf16 per 128-byte row has SBO = 1024, and the k16 slice kk starts at +32*kk bytes.
  MN-major (".trans": A stored K x M, row k holds its m contiguously; B stored K x N, e.g. V):
      none : core matrices of 8 k-rows of 16 bytes (8 consecutive x = m or n): (k, x) at start +
             (x%8)*2 + (k%8)*16 + (x/8)*SBO + (k/8)*LBO (PTX: ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO)))
      swizzle of width W: rows of k W bytes apart holding W/2 consecutive x: (k, x) at start +
             (x % (W/2))*2 + (x / (W/2))*LBO + (k%8)*W + (k/8)*SBO; a V tile of 64 bf16 columns in
             128-byte rows: SBO = 1024 (8 rows), the k16 slice kk starts at +2048*kk bytes.
  The swizzle acts on the byte address the layout gives (its bits, so the tile's 1024-byte
  alignment matters): 128B XORs address bits 4-6 (the 16-byte chunk in a 128-byte row) with bits
  7-9 (the row mod 8); 64B bits 4-5 with bits 7-8; 32B bit 4 with bit 7. wgmma_swizzle() below.
  This is the pattern TMA writes with CU_TENSOR_MAP_SWIZZLE_128B (box rows of 128 bytes), so a
  TMA-loaded tile is a 128B-swizzled K-major (or MN-major) operand as it lands.
Shared memory written by ordinary stores (the generic proxy) and read by wgmma or TMA (the async
proxy) needs fence_proxy_async() by the writing threads after the writes and a barrier between
them and the reader.

MBARRIER (64-bit object in shared memory, 8-byte aligned; PTX ISA "mbarrier"). mbar_init(addr,
count) sets the expected arrival count (1 .. 2^20-1), phase 0, tx-count 0; fence_mbarrier_init()
then a __syncthreads() before other threads or TMA use it. A phase completes when its pending
arrivals reach 0 and its tx-count is 0; the barrier then moves to the next phase, pending = count.
mbar_arrive: one arrival. mbar_arrive_expect_tx(addr, bytes): tx-count += bytes, then one arrival.
A TMA copy naming the barrier decrements tx-count by its bytes when they have landed (complete_tx).
mbar_try_wait(addr, parity): true once the phase of that parity has completed, i.e. the current
phase's parity differs from `parity` (waiting for phase 0 with parity 0 returns at its completion;
the caller flips its parity bit each round). Only the current and the immediately preceding phase
can be waited for. mbar_wait(addr, parity) loops on it, and after MBAR_TIMEOUT_NS (10 s, by
%globaltimer, read only once a try_wait has failed) traps: a protocol error on a GPU ends the
kernel with a launch failure instead of hanging (no message from the device: see mbar_wait; the
emulator reports a wait nothing can release as a deadlock, naming the barrier, first). The bytes a TMA copy brings may be read only by a thread that saw the phase
complete (its own try_wait, or a barrier after another thread's).

TMA (cp.async.bulk.tensor.2d, tile mode). tma_load_2d(dst, map, x, y, mbar): the box of the map at
element coordinates (x = column, innermost; y = row) from global into shared dst (128-byte aligned;
1024 for the 128B swizzle to match wgmma's pattern), completing tx on mbar with the box's bytes
(all of them, including out-of-range elements, which are written as zeros). The map: a 2D bf16
tensor of `rows` x `cols` elements, `row_stride` bytes apart (a multiple of 16), box `box_rows` x
`box_cols` (box_cols*2 <= 128 with the 128B swizzle), made on the host by tma_map_2d_bf16() through
the driver's cuTensorMapEncodeTiled (cudaGetDriverEntryPointByVersion; the emulator provides it),
passed to kernels as a `const __grid_constant__ CUtensorMap` parameter (its address in param space).

SETMAXNREG. setmaxnreg_inc<R>() / setmaxnreg_dec<R>(): the warpgroup's per-thread register limit
becomes R (24 .. 256, a multiple of 8), producers giving registers to consumers.
*/
#ifndef LLMC_WGMMA_CUH
#define LLMC_WGMMA_CUH

#include <stdint.h>
#include <stdio.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// ----------------------------------------------------------------------------
// the documented layouts, as functions (host and device)

// accumulator register e (0 .. N/2-1) of warpgroup thread tid (0..127): its row and column of D
__host__ __device__ constexpr int wgmma_d_row(int tid, int e) { return 16 * (tid / 32) + (tid % 32) / 4 + 8 * ((e / 2) % 2); }
__host__ __device__ constexpr int wgmma_d_col(int tid, int e) { return 8 * (e / 4) + 2 * (tid % 4) + e % 2; }
// A from registers: element e (0..7; the (e%2)-th bf16 of register e/2) of thread tid
__host__ __device__ constexpr int wgmma_a_row(int tid, int e) { return 16 * (tid / 32) + (tid % 32) / 4 + 8 * ((e / 2) % 2); }
__host__ __device__ constexpr int wgmma_a_col(int tid, int e) { return 2 * (tid % 4) + e % 2 + 8 * (e / 4); }

// the swizzle of the descriptor's mode (0 none, 1 128B, 2 64B, 3 32B) applied to a shared byte address
__host__ __device__ constexpr uint32_t wgmma_swizzle(uint32_t addr, int swizzle) {
    return swizzle == 1 ? addr ^ (((addr >> 7) & 7u) << 4)
         : swizzle == 2 ? addr ^ (((addr >> 7) & 3u) << 4)
         : swizzle == 3 ? addr ^ (((addr >> 7) & 1u) << 4) : addr;
}

// the shared-memory matrix descriptor; smem_addr as __cvta_generic_to_shared gives it (16-byte aligned)
__host__ __device__ constexpr uint64_t wgmma_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes, int swizzle) {
    return (uint64_t)((smem_addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo_bytes >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo_bytes >> 4) & 0x3FFFu) << 32) | ((uint64_t)(swizzle & 3) << 62);
}

// The descriptor of the same layout `bytes` further on (a multiple of 16), from `desc`: only the
// start address moves (bits 0-13, address >> 4), by an add on the low word, which cannot carry out
// of the field while both addresses lie in shared memory (below 228 KB: address >> 4 < 2^14).
// A loop of products over k-steps builds one descriptor per operand and advances it (one add per
// k-step, where wgmma_desc takes four or five instructions: CUTLASS's descriptor iterator does
// the same).
__host__ __device__ constexpr uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
    return (desc & 0xFFFFFFFF00000000ull) | (uint32_t)((uint32_t)desc + (bytes >> 4));
}

// ----------------------------------------------------------------------------
// the tensor map (host)

// the driver's cuTensorMapEncodeTiled, looked up once through the runtime (no -lcuda); NULL, with one
// line on stderr naming `who`, where the driver has none
typedef CUresult (*tma_encode_fn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static inline tma_encode_fn tma_encode(const char* who) {
    static tma_encode_fn encode = NULL;
    if (encode == NULL) {
        void* fn = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || fn == NULL) {
            fprintf(stderr, "%s: the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or later needed)\n", who);
            return NULL;
        }
        encode = (tma_encode_fn)fn;
    }
    return encode;
}

// a 2D bf16 tensor, `rows` x `cols` elements, rows `row_stride` bytes apart, box box_rows x box_cols,
// 128B swizzle (box_cols * 2 <= 128), out-of-range elements filled with zeros. Returns 0 on success;
// on failure prints one line naming what failed and returns -1.
static inline int tma_map_2d_bf16(CUtensorMap* map, const void* gptr, uint64_t rows, uint64_t cols,
                                  uint64_t row_stride, uint32_t box_rows, uint32_t box_cols) {
    tma_encode_fn encode = tma_encode("tma_map_2d_bf16");
    if (encode == NULL) { return -1; }
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {row_stride};
    cuuint32_t box[2] = {box_cols, box_rows};
    cuuint32_t estrides[2] = {1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void*)gptr, dims, strides, box, estrides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "tma_map_2d_bf16: cuTensorMapEncodeTiled failed (%d) for %llu x %llu, stride %llu, box %u x %u\n",
                (int)r, (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)row_stride, box_rows, box_cols);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// the instructions (device only, sm_90a)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }

// keeps nvcc from moving accesses of these registers across the asm statements around it
template <int R>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i]) :: "memory");
}

// the same for the A operand of wgmma_rs (fragments of 4 registers): a product in flight reads them
// until the wait that covers it, so nvcc must not reuse or rewrite them before that
template <int R>
__device__ __forceinline__ void wgmma_fence_operand(uint32_t (&a)[R][4]) {
#pragma unroll
    for (int i = 0; i < R; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+r"(a[i][j]) :: "memory");
    }
}

// D = A B + (scale_d ? D : 0), A (64x16) and B (16xN) from shared memory through descriptors.
// TRANS_A = 1: A is stored MN-major (K x M); TRANS_B = 1: B is stored MN-major (K x N, e.g. V).
template <int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    static_assert(TRANS_A == 0 || TRANS_A == 1, "TRANS_A is 0 or 1");
    static_assert(TRANS_B == 0 || TRANS_B == 1, "TRANS_B is 0 or 1");
    if constexpr (false) {
    } else if constexpr (N == 16) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7"
                     "}, %8, %9, p, 1, 1, %11, %12;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 32) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     "}, %16, %17, p, 1, 1, %19, %20;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 64) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 96) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     "}, %48, %49, p, 1, 1, %51, %52;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 128) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 192) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
                     ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     "}, %96, %97, p, 1, 1, %99, %100;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 256) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
                     ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
                     ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                     "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                       "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                       "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                       "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                       "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                     : "memory");
    } else {
        static_assert(N == 16, "wgmma_ss: N is one of 16, 32, 64, 96, 128, 192, 256");
    }
}

// D = A B + (scale_d ? D : 0), A (64x16 bf16) from registers in the layout above, B from shared memory
template <int N, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    static_assert(TRANS_B == 0 || TRANS_B == 1, "TRANS_B is 0 or 1");
    if constexpr (false) {
    } else if constexpr (N == 16) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7"
                     "}, {%8, %9, %10, %11}, %12, p, 1, 1, %14;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 32) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     "}, {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 64) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 96) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     "}, {%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 128) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 192) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
                     ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     "}, {%96, %97, %98, %99}, %100, p, 1, 1, %102;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B)
                     : "memory");
    } else if constexpr (N == 256) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                     ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                     ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
                     ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                     ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
                     ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
                     ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                     "}, {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                       "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                       "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                       "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                       "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B)
                     : "memory");
    } else {
        static_assert(N == 16, "wgmma_rs: N is one of 16, 32, 64, 96, 128, 192, 256");
    }
}

// generic-proxy writes to shared memory before it become visible to the async proxy (wgmma, TMA)
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// mbarriers: addr is the 32-bit shared address of an 8-byte aligned uint64_t
__device__ __forceinline__ void mbar_init(uint32_t addr, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(addr), "r"(count) : "memory");
}
// makes the initializations above visible to the other threads' and the async proxy's uses (then a barrier)
__device__ __forceinline__ void fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint32_t addr) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(addr) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t addr, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(addr), "r"(bytes) : "memory");
}
// true once the phase of parity `phase` has completed (a bounded hardware wait, then false)
__device__ __forceinline__ bool mbar_try_wait(uint32_t addr, uint32_t phase) {
    uint32_t done;
    asm volatile("{\n.reg .pred P1;\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\nselp.b32 %0, 1, 0, P1;\n}\n"
                 : "=r"(done) : "r"(addr), "r"(phase) : "memory");
    return done != 0;
}
// %globaltimer: the GPU's nanosecond timer (PTX ISA "Special Registers"; the emulator: the host's clock)
__device__ __forceinline__ uint64_t globaltimer_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t) :: "memory");
    return t;
}
// How long an mbarrier wait may last before the kernel stops with an error: a protocol that can
// never complete the phase (a missing arrival or copy) would otherwise hang the trainer. Seconds
// beyond any wait of a correct kernel (a whole attention kernel takes milliseconds).
#ifndef MBAR_TIMEOUT_NS
#define MBAR_TIMEOUT_NS 10000000000ull
#endif
// Waits until the phase of parity `phase` has completed; after MBAR_TIMEOUT_NS of failed try_waits
// (the timer is read only once the first one has failed) the thread executes trap: the kernel
// ends and the launch reports cudaErrorLaunchFailure (the trainer's cudaCheck names the call).
// No printf here: a call inside the consumers' loop (printf's vprintf, or a non-inlined slow path)
// makes ptxas serialize the wgmmas (C7510) and gives the kernels a stack frame and spills
// (measured with nvcc 13.0, dev/test/test_attention_ptx.sh: 144 bytes, 100 spilled in dK/dV).
__device__ __forceinline__ void mbar_wait(uint32_t addr, uint32_t phase) {
    if (mbar_try_wait(addr, phase)) { return; }
    uint64_t t0 = globaltimer_ns();
    while (!mbar_try_wait(addr, phase)) {
        if (globaltimer_ns() - t0 > MBAR_TIMEOUT_NS) { __trap(); }
    }
}

// the box of `map` at element coordinates (x = column, y = row) into shared dst, completing tx on mbar
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t mbar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"((uint64_t)map), "r"(x), "r"(y), "r"(mbar) : "memory");
}

// the warpgroup's register limit per thread (24 .. 256, a multiple of 8)
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(R >= 24 && R <= 256 && R % 8 == 0, "setmaxnreg: 24 .. 256, a multiple of 8");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(R >= 24 && R <= 256 && R % 8 == 0, "setmaxnreg: 24 .. 256, a multiple of 8");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(R));
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL
#endif // LLMC_WGMMA_CUH
