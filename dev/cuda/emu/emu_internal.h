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
#include <mutex>
#include <string>
#include <vector>

namespace emu {

// Prints "cuda-emu: <message>" (plus the rank when EMU_RANK_PREFIX is known) to stderr and ends
// the process with exit status 86. Used for every error a GPU would not report as a status
// (a broken barrier, a host read of device memory, a kernel argument into pageable memory).
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Runs fn in fatal(), before the process ends (nccl.cpp: this rank leaves its communicators, so
// their shared-memory segments do not outlive the last rank).
void on_fatal(void (*fn)());
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

// What the stream-order check (below) needs to know of an op, beside its stream.
struct OpSource {            // where the op was issued, for messages
    const char* file = nullptr; // a kernel launch: its source line
    int line = 0;
    const void* pc = nullptr;   // any other op: the return address of the API call that queued it
};
struct OpRange {             // bytes of device or pinned host memory an op reads or writes
    const void* p;
    size_t bytes;
    bool write;              // read and written (a kernel's non-const pointer: may write)
};
struct KernelPointer {       // a kernel's pointer argument into device or pinned memory
    const void* p;
    const void* base;        // its allocation
    size_t bytes;
    bool to_const;
};
struct OpDetails {
    OpSource source;
    std::vector<OpRange> ranges;         // known when it is queued: copies, memsets, products, collectives;
                                         // a kernel's: from its pointers (their reach as known now)
    std::vector<KernelPointer> pointers; // a kernel's (streams.cpp redoes their reach when it runs)
};
cudaError_t enqueue(cudaStream_t s, const std::string& what, OpFn fn, OpDetails details);
// Stream capture (runtime.cpp): whether s is capturing, and an op that cannot be captured there
// (the capture is invalidated; the warning names `who` at code address pc and why).
bool stream_capturing(cudaStream_t s);
cudaError_t capture_refused(cudaStream_t s, const char* who, const void* pc, const char* why);

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

// Pinned host memory holding p (n = 0 asks only for p): its base and size, or false.
bool pinned_allocation(const void* p, const void** base, size_t* bytes);
// The same question from the OS threads that run blocks, while the host thread holds the
// runtime's lock for the kernel's whole run (allocations cannot change meanwhile): no lock taken.
// Any allocation, live or freed, whose pages or guard page hold p.
struct AllocationView {
    const char* base;  // what cudaMalloc returned
    size_t bytes;      // what was asked for
    bool live;
};
bool allocation_at_unlocked(const void* p, AllocationView* out);
// "a 1024-byte allocation at 0x... (cudaMalloc at train_gpt2.cu:512)", for messages.
std::string allocation_text(const void* base);

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
// check.cpp: what every load and store of a kernel is checked against (EMU_CHECK: memcheck,
// initcheck, racecheck) and counted for (EMU_COUNTERS). The hooks nvcc-cpu compiles into the
// program call it; kernel.cpp tells it what runs; runtime.cpp, cublaslt.cpp and nccl.cpp tell
// it which device bytes their copies, products and collectives read and write.

struct CheckSettings {
    bool memcheck = false, initcheck = false, racecheck = false, counters = false;
    bool streams = false; // the stream-order check (streams.cpp); needs no hooks, so not in any()
    bool protect = false; // EMU_CHECK=1 also turns on EMU_PROTECT
    bool any() const { return memcheck || initcheck || racecheck || counters; }
};
const CheckSettings& check_settings(); // from EMU_CHECK and EMU_COUNTERS, read once
void refuse_without_hooks(); // fatal if a check is on but the program has no access hooks

struct LaunchCounters; // check.cpp
struct LaunchInfo {    // one kernel launch as the checks and counters see it
    const void* kernel;
    const char* name;
    const char* file; // the launch's source line
    int line;
    dim3 grid, block;
    size_t dynamic_shared, static_shared;
    uint64_t id;                // 1, 2, ... in the order launches run
    LaunchCounters* counters;   // this launch's totals (EMU_COUNTERS)
};
void check_launch_begin(LaunchInfo* launch);
void check_launch_end(LaunchInfo* launch);
// A block starts on this OS thread. Its shared memory is [shared, shared + capacity), followed by
// an inaccessible page; kernel.cpp places the dynamic array and the static variables in it.
void check_block_begin(const LaunchInfo* launch, uint3 block, int nthreads, char* shared, size_t capacity);
void check_block_end();
void check_worker_done(LaunchInfo* launch); // this OS thread ran its last block of the launch
void check_thread(int linear);              // the CUDA thread that runs now (index in its block)
// Bytes [offset, offset + bytes) of shared memory now belong to region `region` (0: the dynamic
// array, k > 0: the k-th static variable placed in this block): an access must stay in one region.
void check_shared_region(size_t offset, size_t bytes, int region);
void check_warp_step_end(int warp);          // the warp's lanes each ran to their next synchronization
void check_warp_sync(int warp, unsigned mask); // a warp intrinsic completed for the lanes of mask
void check_barrier();                          // a __syncthreads completed
// kernel.cpp: "static __shared__ k_tile (llmc/attention.cuh:159, 16384 bytes)" for messages
std::string describe_shared(size_t offset);

// Device memory: the address range runtime.cpp reserves, and the pages it maps for an allocation.
void check_device_arena(char* lo, size_t bytes);
void check_device_mapped(char* lo, size_t bytes);
void check_device_unmapped(char* lo, size_t bytes); // freed: its shadow pages are given back
// initcheck: [p, p + n) of device memory now holds written bytes (a copy, memset, product or
// collective wrote it), or is read by `who`, called at code address `caller` (for the message's
// line; may be null): an error if any byte was never written.
void device_bytes_written(const void* p, size_t n);
void device_bytes_read(const void* p, size_t n, const char* who, const void* caller = nullptr);

// "train_gpt2.cu:512" for a code address (addr2line on this program, cached); frames inside the
// emulator and the toolkit's headers are skipped, so an access in atomicAdd names its caller.
std::string source_line(const void* pc);
bool program_code(const void* pc); // pc lies in the program itself, not in a shared library

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
    std::atomic<uint64_t> wgmma{0};          // warpgroup-level wgmma.mma_async instructions
    std::atomic<uint64_t> wgmma_flops{0};    // 2*64*N*16 each
    std::atomic<uint64_t> tma{0};            // cp.async.bulk.tensor copies
    std::atomic<uint64_t> tma_bytes{0};      // their box bytes
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
// The same for a warpgroup instruction (wgmma, setmaxnreg): all 128 threads of the caller's
// warpgroup (threads 128g .. 128g+127 of the block) must reach it; fn runs once with each one's data.
typedef void (*WarpgroupCollectiveFn)(void* const lanes[128], int warpgroup, const std::string& where);
// pc: the return address into the program (messages name its source line and callers)
void warpgroup_collective(const char* what, void* lane_data, WarpgroupCollectiveFn fn, Site site, const void* pc);
// The calling thread sleeps until the scheduler finds ptx_mbar_ready(mbar, parity) (kernel.cpp).
void mbarrier_block(uint64_t mbar, uint32_t parity, Site site, const void* pc);
// ptx.cpp, for the scheduler: land the bulk copies in flight (no thread can run); is the phase of
// this parity complete; the mbarrier's state for messages; a barrier of the whole block released;
// the block ended (pending wgmma groups and copies are errors).
void ptx_block_idle();
std::string current_block_text(); // kernel.cpp: the running block, also from its scheduler
bool ptx_mbar_ready(uint64_t mbar, uint32_t parity);
std::string ptx_mbar_describe(uint64_t mbar);
void ptx_block_barrier();
void ptx_block_end();
// check.cpp, for ptx.cpp: a fence.proxy.async by thread `linear`; the async proxy (wgmma) reads
// [p, p + n): a generic write to it not followed by a fence of its writer is an error; a bulk copy
// wrote [p, p + n) (initcheck bits set, the words' race records reset, `token` kept per word so a
// later read by a thread that has not seen the phase is named, 0: none)
void check_proxy_fence(int linear);
// racecheck's order through mbarriers: an arrival, a phase completing, a thread seeing it complete
void check_mbar_arrive(int linear, uint64_t mbar);
void check_mbar_complete(uint64_t mbar);
void check_mbar_observe(int linear, uint64_t mbar);
void check_async_read(int linear, const void* p, size_t n, const void* pc, const char* what, Site site);
void check_async_write(const void* p, size_t n, uint32_t token);
// ptx.cpp, for check.cpp: has thread `linear` seen the mbarrier phase of this token complete?
// (else the description of the copy and phase, for the message)
bool tma_token_seen(int linear, uint32_t token, std::string* what);
bool tma_in_flight(const void* p, size_t n, std::string* what);
void count_wgmma(uint64_t flops, uint64_t tma_bytes); // EMU_COUNTERS' wgmma_flops and tma_bytes

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

// ----------------------------------------------------------------------------
// The stream-order check (streams.cpp; EMU_CHECK=1 turns it on with every other check,
// EMU_CHECK_STREAMS=1 alone). runtime.cpp keeps the vector clocks of streams, events and the
// host as the program orders them; streams.cpp keeps, per byte of device and pinned memory, who
// wrote it last and who read it since, and reports an op (or a host access of pinned memory)
// that conflicts with one it is not ordered after.

bool streams_check();

// A vector clock over the host (clock 0) and the streams (clock k: the k-th stream created, the
// legacy and per-thread default streams first): entry c is the latest time on clock c known to
// happen before. An op at time t on clock c is ordered before whoever holds a clock with
// entry c >= t.
struct VClock {
    std::vector<uint32_t> t;
    uint32_t at(int c) const { return c < (int)t.size() ? t[c] : 0; }
    bool covers(int c, uint32_t time) const { return at(c) >= time; }
    void join(const VClock& o) {
        if (o.t.size() > t.size()) { t.resize(o.t.size(), 0); }
        for (size_t i = 0; i < o.t.size(); i++) { t[i] = t[i] > o.t[i] ? t[i] : o.t[i]; }
    }
    void tick(int c) {
        if ((int)t.size() <= c) { t.resize(c + 1, 0); }
        t[c]++;
    }
};

// One op, or one host access of pinned memory, as the check knows it.
struct OpRecord {
    std::string what;                 // "kernel consume", "cudaMemcpyAsync of 4096 bytes", "host code"
    std::string stream;               // "stream #2", "the legacy default stream", "the host"
    const void* stream_pc = nullptr;  // where that stream was created (a return address), if known
    OpSource source;
    int clock = 0;                    // its epoch: the clock of its stream and its time there
    uint32_t time = 0;
    VClock vc;                        // everything ordered before it, itself included
    std::vector<OpRange> ranges;      // what it reads and writes
    std::vector<KernelPointer> pointers; // a kernel's pointer arguments
    bool ran = false;
    bool work = true;                 // false for event records and waits
};
typedef std::shared_ptr<OpRecord> OpRecordRef;

// "kernel consume (launched at x.cu:37) on stream #2 (created at x.cu:21)", for messages.
std::string op_text(const OpRecord& op);
// runtime.cpp: the host's clock now.
const VClock& host_clock();
// An op ran: its ranges are checked against the accesses it is not ordered after, then recorded.
void streams_op_ran(const OpRecordRef& op);
// The host read or wrote [p, p + n) of pinned memory itself (a host-to-host cudaMemcpy).
void streams_host_access(const void* p, size_t n, bool write, const void* pc);
// An op that touches pinned memory was queued: until the host is ordered after it, the pages it
// touches are protected outside API calls, so that a host access faults and is checked.
void streams_note_pinned(const OpRecordRef& op);
void streams_protect_pinned();   // at the end of every outermost API call
void streams_unprotect_pinned(); // at its start
// The fault handler's question: a host access to a protected pinned page? Then it is checked
// and recorded, and the access goes on (one instruction with the page open); true.
bool streams_pinned_fault(void* addr, bool write, void* ucontext, std::recursive_mutex* lock);
// p, inside the allocation at base, is where some op's buffer starts (every op's ranges, a
// kernel's pointer arguments); a kernel's pointer argument p reaches up to the next such start
// after p, or the allocation's end: the bytes it may touch from p.
// A kernel's ranges from its pointers, each to its reach as known now: at the launch, again when
// it runs (buffer starts queued meanwhile), and once more when another op would conflict with
// it (starts that op's own queueing added).
void streams_note_start(const void* p, const void* base);
void streams_kernel_ranges(const std::vector<KernelPointer>& pointers, std::vector<OpRange>* out);
// An allocation (device or pinned) is freed: its bookkeeping goes.
void streams_forget(const void* base);
// "train_gpt2.cu:512" for a code address (a return address), for messages.
std::string source_line(const void* pc);
// check.cpp, for ptx.cpp: what an inline PTX instruction touches (cp.async's global read and its
// shared write when it lands, ldmatrix's rows), as if thread `linear` of the running block had
// loaded or stored [p, p + n) at code address pc: checked and counted like the hooks' accesses.
void check_ptx_access(int linear, const void* p, size_t n, bool write, const void* pc);

} // namespace emu

#endif
