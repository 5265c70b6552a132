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

} // namespace emu

#endif
