/*
The emulator's inside: what runtime.cpp offers kernel.cpp, cublaslt.cpp and nccl.cpp. Nothing in
a .cu program sees this header (programs see emu_device.h and the toolkit's own headers).

The model. Device work (kernels, copies, memsets, cuBLASLt products, NCCL collectives) is queued
as an Op on its stream and runs on the host thread later: in stream order, after the ops it
depends on (events, the legacy default stream), and only when something forces it (a
synchronization, a query, a blocking copy) or the schedule picks it (EMU_SCHEDULE: eager, lazy,
random). An Op's function returns true when its work is done, or false when it cannot finish
yet (a collective whose peers have not arrived): it is then tried again later, from the start.
*/
#ifndef EMU_INTERNAL_H
#define EMU_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace emu {

// Prints "cuda-emu: <message>" (plus the rank when EMU_RANK_PREFIX is known) to stderr and ends
// the process with exit status 86. Used for every error a GPU would not report as a status
// (a broken barrier, a host read of device memory, a kernel argument into pageable memory).
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// A warning on stderr, once per distinct text.
void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Every public API function (cudart, cuBLASLt, NCCL) opens one of these first: it takes the
// emulator's lock, makes device memory readable (EMU_PROTECT=1 keeps it unreadable outside API
// calls), and gives the stream schedule a chance to run queued work.
struct ApiScope {
    explicit ApiScope(const char* name);
    ~ApiScope();
    ApiScope(const ApiScope&) = delete;
    ApiScope& operator=(const ApiScope&) = delete;
};

// Queues fn on stream s (0 = the legacy default stream, cudaStreamPerThread/Legacy handled).
// `what` names the work in messages ("kernel layernorm_forward_kernel", "cublasLtMatmul
// 768x64x768", "ncclAllGather"). Returns cudaErrorInvalidResourceHandle for a destroyed or
// unknown stream. fn runs later on this process's host thread with device memory readable.
typedef std::function<bool()> OpFn;
cudaError_t enqueue(cudaStream_t s, const std::string& what, OpFn fn);

// Device memory: allocations made by cudaMalloc, in their own address range.
// The allocation holding [p, p + n), or false. n = 0 asks only for p (its end counts as inside).
bool device_range(const void* p, size_t n, const void** alloc_base = nullptr, size_t* alloc_bytes = nullptr);
// Fatal unless [p, p + n) lies inside one live device allocation: "<who>: <what> ...".
void check_device_range(const void* p, size_t n, const char* who, const char* what);
// Inside a device allocation that cudaFree released.
bool freed_device_memory(const void* p);
// device_range for code that runs in a kernel's threads (the ones above take a lock that the
// host thread running the kernel holds); freed: p is in a freed allocation.
bool device_range_in_kernel(const void* p, size_t n, bool* freed);
// Pinned host memory from cudaMallocHost / cudaHostAlloc.
bool pinned_range(const void* p, size_t n);

// Gives this OS thread a stack for the fault handler (threads that run kernels call it).
void install_signal_stack();

// Seeded randomness (EMU_SEED, default 1): the random schedule, ncclInProgress answers.
uint64_t random_u64();
bool chance(double p);

// The rank this process plays, for message prefixes (set by nccl.cpp at communicator init).
void set_rank_label(int rank);

// Number of emulated devices (EMU_DEVICES, default 1) and the current one (cudaSetDevice).
int device_count();
int current_device();

// ----------------------------------------------------------------------------
// What kernel.cpp offers ptx.cpp (the PTX instructions that inline asm in a kernel becomes)

struct Site; // emu_device.h

// Per launch: the tensor-core and asynchronous-copy instructions its warps ran. EMU_TRACE=1
// prints them after the kernel. (Kept apart from any other counters, to be merged later.)
struct PtxCounters {
    std::atomic<uint64_t> mma{0};            // warp-level mma.sync instructions
    std::atomic<uint64_t> mma_flops{0};      // 2*m*n*k each: 2*16*8*16 = 4096 for m16n8k16
    std::atomic<uint64_t> ldmatrix{0};       // warp-level ldmatrix instructions
    std::atomic<uint64_t> ldmatrix_bytes{0}; // 128 per 8x8 matrix
    std::atomic<uint64_t> cp_async{0};       // cp.async copies (one per thread that issues one)
    std::atomic<uint64_t> cp_async_bytes{0}; // their cp-size bytes
};

// The CUDA thread that runs now, and its block; false when this OS thread runs no block.
// block_serial differs between any two blocks that one OS thread runs, so per-block state kept
// elsewhere can be reset.
struct KernelThread {
    int linear;            // threadIdx as x + y*blockDim.x + z*blockDim.x*blockDim.y; -1 between threads
    int nthreads;          // in the block
    uint64_t block_serial;
    PtxCounters* counters; // this launch's
};
bool current_kernel_thread(KernelThread* out);
// "kernel K (launched at F:L) block (x,y,z) thread (x,y,z)", or "" outside a kernel's threads.
std::string current_kernel_text();
// The launch whose block this OS thread runs (also between its threads, in the scheduler).
PtxCounters* current_launch_counters();

// A warp-collective instruction (.sync.aligned): every one of the 32 lanes of the caller's warp
// must reach the same instruction at the same line, none may have exited (else an error names
// the lanes and lines); then fn(lanes, warp, where) runs once, with each lane's lane_data, and
// the lanes go on. `where` names the kernel, block, warp, instruction and line for messages.
typedef void (*WarpCollectiveFn)(void* const lanes[32], int warp, const std::string& where);
void warp_collective(const char* what, void* lane_data, WarpCollectiveFn fn, Site site);

// The calling block's shared memory as PTX sees it: one window of byte offsets (the .shared
// state space) holding the dynamic `extern __shared__` array and every static __shared__
// variable. offset of [p, p + n): false if it is not all inside one of them (n = 0: p may be
// the end of one). pointer of [offset, offset + n): nullptr if not all inside one of them.
bool shared_window_offset(const void* p, size_t n, uint64_t* offset);
void* shared_window_pointer(uint64_t offset, size_t n);

// ptx.cpp, for a load/store checker: a cp.async of the running block that writes shared bytes
// [p, p + n) and has not landed (no wait covered it yet), where it was issued and by which thread
// (linear index). A read of those bytes now would see the emulator's in-flight 0xFF bytes.
bool cp_async_in_flight(const void* p, size_t n, Site* issued_at, int* thread);

} // namespace emu

#endif
