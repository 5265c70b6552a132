/*
Kernels on the CPU: every CUDA thread of a block is a fiber (its own small stack), and a block's
fibers run one at a time on one OS thread, switching only where CUDA threads synchronize:
__syncthreads, __syncwarp and the warp intrinsics. Between those points the order in which the
threads run is chosen by EMU_THREAD_ORDER (forward, reverse, or random with EMU_SEED), so code
that is only correct for one order (a missing barrier) gives different results under another.

A block runs warp by warp: each thread of a warp runs until it blocks (at a barrier or a warp
intrinsic) or exits, the warp's intrinsics complete as their lanes arrive, and when every
thread of the block waits at __syncthreads or has exited, the barrier is checked and released.
Whatever breaks CUDA's rules is an error naming the kernel, the block and the source lines:
- a warp intrinsic completes when every lane named in its mask has reached the same intrinsic at
  the same line with the same mask; a named lane that exited, waits elsewhere or does not exist
  is an error (on a GPU the result is undefined);
- __syncthreads completes when every thread of the block waits at the same line; a thread that
  exited while others wait, or threads waiting at different lines, is an error (on a GPU:
  undefined, often a hang);
- a warp-collective PTX instruction (mma.sync, ldmatrix: ptx.cpp) is a warp intrinsic whose mask
  is the whole warp: it runs once, for all 32 lanes, when they are all at the same instruction.
Blocks run in grid order (or reversed or shuffled, as the threads), one at a time per OS thread;
EMU_THREADS > 1 runs that many blocks at once.

Shared memory: each OS thread has one arena, reused by every block it runs, and ending at an
inaccessible page. A block's dynamic `extern __shared__` array starts the arena (exactly the
launch's size); each static __shared__ variable is placed after it by the first thread of the
block that reaches its declaration, 256 unused bytes apart, so that with EMU_CHECK an access
running off one variable lands in no variable and is reported. Everything is filled with 0xFF
bytes (NaN for floats) before use. Static variables over 48 KiB in all, and static + dynamic
over the kernel's limit, are refused as on a GPU (the static size of a kernel is known once one
of its blocks has run: the first launch ends the process, later ones fail at the launch). PTX
sees them through one window of offsets (the .shared state space): shared_window_offset/_pointer.
*/
#include "emu_device.h" // first: it defines __global__ and friends before the toolkit headers do
#include "emu_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif


namespace emu {

// (Functions, not extern thread_local variables: UBSan mistakes those for null pointers.)
PendingLaunch*& pending_launch() {
    static thread_local PendingLaunch* p = nullptr;
    return p;
}

// ----------------------------------------------------------------------------
// fibers: a context switch saves the callee-saved registers on the old stack and loads the new
// stack pointer (x86-64 System V). A new fiber starts in fiber_entry. The SSE and x87 control
// words are not switched: nothing in a kernel changes the rounding mode.

extern "C" void emu_fiber_switch(void** save_sp, void* new_sp);
asm(R"(
    .text
    .globl emu_fiber_switch
    .type emu_fiber_switch, @function
emu_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_fiber_switch, .-emu_fiber_switch
)");

enum ThreadState { RUNNABLE, AT_BARRIER, AT_WARP_OP, EXITED, AT_WARPGROUP_OP, AT_MBARRIER };

struct WarpWait { // what a lane waiting at a warp intrinsic brought
    WarpKind kind;
    unsigned mask;
    unsigned char value[16], result[16];
    size_t bytes;
    int arg, width;
    unsigned answer;
    // WARP_COLLECTIVE: the instruction, what this lane brings, and what runs when all are there
    const char* what = nullptr;
    void* data = nullptr;
    WarpCollectiveFn collective = nullptr;
    WarpgroupCollectiveFn wg_collective = nullptr; // AT_WARPGROUP_OP
    uint64_t mbar = 0;                             // AT_MBARRIER: the mbarrier's .shared offset
    uint32_t parity = 0;                           // and the phase parity it waits for
    const void* pc = nullptr;                      // AT_WARPGROUP_OP, AT_MBARRIER: the program's code address
};

struct EmuThread {
    void* sp = nullptr;
    char* stack_lo = nullptr; // usable stack [stack_lo, stack_lo + stack_bytes), guard page below
    size_t stack_bytes = 0;
    void* asan_fake_stack = nullptr;
    uint3 idx;
    int linear = 0;
    ThreadState state = EXITED;
    Site site{nullptr, 0}; // where it waits
    unsigned barrier = 0;  // AT_BARRIER: the barrier's id (__syncthreads is 0, __barrier_sync(id) names one)
    WarpWait warp;
};

struct Block; // the block a worker runs now

struct SharedVar { // a static __shared__ variable, placed in this block's arena
    const void* key;
    size_t offset, bytes;
    const char* name;
    Site site;
};

struct SharedArena { // this OS thread's shared memory, [base, base + CAPACITY), then a guard page
    char* base = nullptr;
    size_t end = 0;                // bytes in use by the running block
    size_t static_bytes = 0;       // its static variables' sizes, summed
    std::vector<SharedVar> vars;
};

struct Worker {
    void* sched_sp = nullptr;
    const void* sched_stack_lo = nullptr;
    size_t sched_stack_bytes = 0;
    std::vector<EmuThread> threads; // stacks kept from block to block
    EmuThread* current = nullptr;
    Block* block = nullptr;
    SharedArena shared;
    std::mt19937_64 rng;
};
static thread_local Worker* tl_worker = nullptr;

struct Grid { // one launch
    const char* name;
    Site site;
    dim3 grid, block;
    size_t shared_bytes;
    ThreadBody body;
    void* closure;
    LaunchInfo info; // what the checks and counters see of it
    std::shared_ptr<PtxCounters> counters;
};

struct Block {
    const Grid* grid;
    uint3 idx;
    int nthreads;
    uint64_t serial; // distinct for every block run (per-thread state elsewhere resets on it)
};

static size_t stack_bytes() {
    static size_t bytes = [] {
        const char* e = getenv("EMU_STACK_KB");
        size_t kb = e ? (size_t)atol(e) : (EMU_ASAN ? 512 : 128);
        return (kb < 16 ? 16 : kb) * 1024;
    }();
    return bytes;
}

// Stacks of kernel threads, with a guard page below each, and the guard pages after the shared
// memory arenas, for the SIGSEGV handler's message.
static std::mutex g_stack_mutex;
static std::vector<std::pair<char*, char*>> g_guard_pages, g_shared_guard_pages;

static void allocate_stack(EmuThread* t) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = stack_bytes();
    char* base = (char*)mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) { fatal("cannot map a %zu-byte stack for a kernel thread", bytes); }
    mprotect(base, page, PROT_NONE);
    t->stack_lo = base + page;
    t->stack_bytes = bytes;
    std::lock_guard<std::mutex> lock(g_stack_mutex);
    g_guard_pages.push_back({base, base + page});
}

bool address_in_kernel_stack_guard(const void* p) {
    std::lock_guard<std::mutex> lock(g_stack_mutex);
    for (auto& g : g_guard_pages) {
        if ((const char*)p >= g.first && (const char*)p < g.second) { return true; }
    }
    return false;
}

bool address_in_shared_guard(const void* p) {
    std::lock_guard<std::mutex> lock(g_stack_mutex);
    for (auto& g : g_shared_guard_pages) {
        if ((const char*)p >= g.first && (const char*)p < g.second) { return true; }
    }
    return false;
}

// ----------------------------------------------------------------------------
// shared memory: the arena of this OS thread (see the top of the file)

static const size_t SHARED_CAPACITY = 320 * 1024;  // 227 KiB of dynamic + 48 KiB of static + gaps
static const size_t SHARED_GAP = 256;              // unused bytes between two variables
static const size_t STATIC_SHARED_LIMIT = 48 * 1024, DEFAULT_DYNAMIC_SHARED = 48 * 1024, MAX_SHARED = 227 * 1024;

static void map_shared_arena(SharedArena* a) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char* p = (char*)mmap(nullptr, SHARED_CAPACITY + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { fatal("cannot map %zu bytes of shared memory for a kernel", SHARED_CAPACITY); }
    mprotect(p + SHARED_CAPACITY, page, PROT_NONE);
    a->base = p;
    std::lock_guard<std::mutex> lock(g_stack_mutex);
    g_shared_guard_pages.push_back({p + SHARED_CAPACITY, p + SHARED_CAPACITY + page});
}

// ----------------------------------------------------------------------------
// switching between the block's scheduler and its threads (with AddressSanitizer told about
// every stack switch, so it follows the fibers)

static void switch_to_thread(Worker* w, EmuThread* t) {
    w->current = t;
    emu_threadIdx = t->idx;
    check_thread(t->linear);
#if EMU_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, t->stack_lo, t->stack_bytes);
    emu_fiber_switch(&w->sched_sp, t->sp);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    emu_fiber_switch(&w->sched_sp, t->sp);
#endif
    w->current = nullptr;
}

static void switch_to_scheduler(Worker* w, EmuThread* t, bool exiting) {
#if EMU_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &t->asan_fake_stack, w->sched_stack_lo, w->sched_stack_bytes);
    emu_fiber_switch(&t->sp, w->sched_sp);
    __sanitizer_finish_switch_fiber(t->asan_fake_stack, &w->sched_stack_lo, &w->sched_stack_bytes);
#else
    (void)exiting;
    emu_fiber_switch(&t->sp, w->sched_sp);
#endif
}

static void fiber_entry() {
    Worker* w = tl_worker;
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &w->sched_stack_lo, &w->sched_stack_bytes);
#endif
    EmuThread* t = w->current;
    w->block->grid->body(w->block->grid->closure);
    t->state = EXITED;
    switch_to_scheduler(w, t, true);
    fatal("internal: an exited kernel thread was resumed");
}

// A fresh start for thread t: the stack holds what emu_fiber_switch pops, then fiber_entry's
// address for its `ret`, then a zero return address (the end of a backtrace).
static void start_fiber(EmuThread* t) {
    if (t->stack_lo == nullptr) { allocate_stack(t); }
#if EMU_ASAN
    // Frames that returned cleared their own redzones; only the top of the stack (fiber_entry and
    // the switch it never returned from) can still be poisoned. Clearing all of it for every
    // thread of every block cost 70% of an ASan run.
    size_t top_bytes = t->stack_bytes < 16384 ? t->stack_bytes : 16384;
    __asan_unpoison_memory_region(t->stack_lo + t->stack_bytes - top_bytes, top_bytes);
#endif
    // Stack tops staggered by 64-byte steps: at equal offsets in their pages they would all fall
    // into the same cache sets, and every switch would miss.
    uintptr_t top = ((uintptr_t)t->stack_lo + t->stack_bytes - (size_t)(t->linear % 63) * 64) & ~(uintptr_t)15;
    uint64_t* sp = (uint64_t*)(top - 64); // sp % 16 == 0: after 6 pops and ret, rsp % 16 == 8, as after a call
    for (int i = 0; i < 6; i++) { sp[i] = 0; } // r15 r14 r13 r12 rbx rbp
    sp[6] = (uint64_t)(uintptr_t)&fiber_entry;
    sp[7] = 0;
    t->sp = sp;
    t->asan_fake_stack = nullptr;
    t->state = RUNNABLE;
}

// ----------------------------------------------------------------------------
// errors, with the kernel, the block and the thread

static std::string describe_block(const Block* b) {
    char s[512];
    snprintf(s, sizeof(s), "kernel %s (launched at %s:%d) block (%u,%u,%u)", b->grid->name, b->grid->site.file,
             b->grid->site.line, b->idx.x, b->idx.y, b->idx.z);
    return s;
}

static std::string describe_thread(const EmuThread* t) {
    char s[64];
    snprintf(s, sizeof(s), "thread (%u,%u,%u)", t->idx.x, t->idx.y, t->idx.z);
    return s;
}

static std::string site_text(Site s) {
    return std::string(s.file ? s.file : "?") + ":" + std::to_string(s.line);
}

static bool same_site(Site a, Site b) { return a.line == b.line && a.file && b.file && strcmp(a.file, b.file) == 0; }

static const char* warp_kind_name(WarpKind k) {
    switch (k) {
    case WARP_SHFL: return "__shfl_sync";
    case WARP_SHFL_UP: return "__shfl_up_sync";
    case WARP_SHFL_DOWN: return "__shfl_down_sync";
    case WARP_SHFL_XOR: return "__shfl_xor_sync";
    case WARP_BALLOT: return "__ballot_sync";
    case WARP_ANY: return "__any_sync";
    case WARP_ALL: return "__all_sync";
    case WARP_SYNC: return "__syncwarp";
    case WARP_COLLECTIVE: return "a PTX warp-collective instruction";
    }
    return "?";
}

static const char* op_name(const WarpWait& w) { return w.kind == WARP_COLLECTIVE ? w.what : warp_kind_name(w.kind); }

// For messages: what holds shared-memory offset `offset` in the running block, or what is nearest.
std::string describe_shared(size_t offset) {
    Worker* w = tl_worker;
    const Grid* g = w->block->grid;
    char s[512];
    if (offset < g->shared_bytes) {
        snprintf(s, sizeof(s), "byte %zu of the %zu-byte extern __shared__ array", offset, g->shared_bytes);
        return s;
    }
    // the variable holding offset (distance 0), else the nearest one ("0 bytes past the end": the
    // first byte after it)
    const SharedVar* best = nullptr;
    size_t best_distance = (size_t)-1;
    bool inside = false;
    for (const SharedVar& v : w->shared.vars) {
        bool in = offset >= v.offset && offset < v.offset + v.bytes;
        size_t d = in ? 0 : offset < v.offset ? v.offset - offset : offset - (v.offset + v.bytes) + 1;
        if (d < best_distance) { best = &v, best_distance = d, inside = in; }
    }
    if (g->shared_bytes > 0 && (best == nullptr || offset - g->shared_bytes + 1 < best_distance)) {
        snprintf(s, sizeof(s), "%zu bytes past the end of the %zu-byte extern __shared__ array", offset - g->shared_bytes,
                 g->shared_bytes);
    } else if (best == nullptr) {
        snprintf(s, sizeof(s), "no shared variable at all");
    } else if (inside) {
        snprintf(s, sizeof(s), "byte %zu of static __shared__ %s (%zu bytes, declared at %s:%d)", offset - best->offset,
                 best->name, best->bytes, best->site.file, best->site.line);
    } else {
        bool before = offset < best->offset;
        snprintf(s, sizeof(s), "%zu bytes %s static __shared__ %s (%zu bytes, declared at %s:%d)",
                 before ? best_distance : best_distance - 1, before ? "before" : "past the end of", best->name, best->bytes,
                 best->site.file, best->site.line);
    }
    return s;
}

// An sm_90a wait's line, with the lines that called an inlined wrapper (llmc/wgmma.cuh)
static std::string program_line(const EmuThread* t) {
    return t->warp.pc ? source_line(t->warp.pc) : site_text(t->site);
}

static std::string where_is(const EmuThread* t) {
    switch (t->state) {
    case RUNNABLE: return "running";
    case EXITED: return "exited";
    case AT_BARRIER:
        return (t->barrier == 0 ? std::string("waits at __syncthreads")
                                : "waits at __barrier_sync(" + std::to_string(t->barrier) + ")") +
               " at " + site_text(t->site);
    case AT_WARP_OP:
        return std::string("waits at ") + op_name(t->warp) + " at " + site_text(t->site);
    case AT_WARPGROUP_OP:
        return std::string("waits at ") + t->warp.what + " at " + program_line(t);
    case AT_MBARRIER:
        return "waits at mbarrier.try_wait.parity (parity " + std::to_string(t->warp.parity) + ") at " + program_line(t) +
               " on the mbarrier at shared offset " + std::to_string(t->warp.mbar) + " (" + ptx_mbar_describe(t->warp.mbar) + ")";
    }
    return "?";
}

// The running block ("kernel K (launched at F:L) block (x,y,z)"), also from the scheduler, or "".
std::string current_block_text() {
    Worker* w = tl_worker;
    return w == nullptr || w->block == nullptr ? "" : describe_block(w->block);
}

// For the SIGSEGV handler: the kernel thread that faulted, or "" in host code.
std::string current_kernel_text() {
    Worker* w = tl_worker;
    if (w == nullptr || w->block == nullptr || w->current == nullptr) { return ""; }
    return describe_block(w->block) + " " + describe_thread(w->current);
}

// ----------------------------------------------------------------------------
// what device code calls

static EmuThread* current_thread(const char* what) {
    Worker* w = tl_worker;
    if (w == nullptr || w->current == nullptr) { fatal("%s called outside a kernel", what); }
    return w->current;
}

void kernel_entered(const char* kernel, const void* caller) {
    Worker* w = tl_worker;
    if (w != nullptr && w->current != nullptr) { return; } // a CUDA thread of a launched grid
    fatal("a kernel called without <<<...>>>: host code at %s called the __global__ function %s as an ordinary "
          "function (nvcc refuses such a call where it sees one, \"a __global__ function call must be configured\", "
          "but not through a pointer or a template); launch it with %s<<<grid, block>>>(...)",
          source_line(caller).c_str(), kernel, kernel);
}

void launch_of_host_function(const char* name, Site site) {
    fatal("%s:%d: %s<<<...>>> called a function that is not __global__ (nvcc refuses to configure a call of a "
          "host function)", site.file, site.line, name);
}

void* dynamic_shared() {
    Worker* w = tl_worker;
    if (w == nullptr || w->block == nullptr) { fatal("extern __shared__ memory used outside a kernel"); }
    if (w->block->grid->shared_bytes == 0) {
        fatal("%s uses extern __shared__ memory but was launched with 0 bytes of it", describe_block(w->block).c_str());
    }
    return w->shared.base;
}

static std::mutex g_attr_mutex;
static std::map<const void*, int> g_max_dynamic_shared; // cudaFuncAttributeMaxDynamicSharedMemorySize
static std::map<const void*, size_t> g_static_shared;   // static __shared__ bytes, once a block has run

// Why a launch of `kernel` with `dynamic` bytes fails, given its static shared memory, or "".
// A GPU's rule: the dynamic part may be at most 48 KiB minus the static part, unless
// cudaFuncSetAttribute(MaxDynamicSharedMemorySize, D) raised it to D, which it refuses when
// D + static exceeds 227 KiB (cudaFuncSetAttribute's documentation).
static std::string shared_limit_error(const void* kernel, size_t static_bytes, size_t dynamic) {
    int opted = -1;
    {
        std::lock_guard<std::mutex> lock(g_attr_mutex);
        auto it = g_max_dynamic_shared.find(kernel);
        if (it != g_max_dynamic_shared.end()) { opted = it->second; }
    }
    char why[400];
    why[0] = '\0';
    if (static_bytes > STATIC_SHARED_LIMIT) {
        snprintf(why, sizeof(why), "%zu bytes of static __shared__ variables (ptxas refuses more than 48 KiB)", static_bytes);
    } else if (opted >= 0 && static_bytes + (size_t)opted > MAX_SHARED) {
        snprintf(why, sizeof(why),
                 "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d) fails on a GPU for this kernel: with its %zu "
                 "bytes of static __shared__ it exceeds 227 KiB",
                 opted, static_bytes);
    } else if (opted < 0 && static_bytes + dynamic > DEFAULT_DYNAMIC_SHARED) {
        snprintf(why, sizeof(why),
                 "%zu bytes of static __shared__ + %zu of dynamic exceed 48 KiB (cudaFuncSetAttribute raises the dynamic "
                 "limit)",
                 static_bytes, dynamic);
    }
    return why;
}

void* static_shared(const void* key, size_t bytes, size_t align, const char* name, Site site) {
    Worker* w = tl_worker;
    if (w == nullptr || w->block == nullptr) { fatal("__shared__ variable %s (%s:%d) used outside a kernel", name, site.file, site.line); }
    SharedArena& a = w->shared;
    for (const SharedVar& v : a.vars) {
        if (v.key == key) { return a.base + v.offset; }
    }
    // the first thread of the block here: place it
    const Grid* g = w->block->grid;
    a.static_bytes += bytes;
    std::string why = shared_limit_error(g->info.kernel, a.static_bytes, g->shared_bytes);
    if (!why.empty()) {
        fatal("kernel %s (launched at %s:%d): %s, counting %s (%s:%d): a GPU refuses this launch "
              "(cudaErrorInvalidConfiguration)",
              g->name, g->site.file, g->site.line, why.c_str(), name, site.file, site.line);
    }
    if (align < 16) { align = 16; }
    size_t offset = (a.end + SHARED_GAP + align - 1) / align * align;
    if (offset + bytes > SHARED_CAPACITY) { fatal("internal: the shared memory arena is full (%s)", name); }
    a.vars.push_back(SharedVar{key, offset, bytes, name, site});
    a.end = offset + bytes;
#if EMU_ASAN
    __asan_unpoison_memory_region(a.base + offset, bytes);
#endif
    memset(a.base + offset, 0xFF, bytes);
    check_shared_region(offset, bytes, (int)a.vars.size());
    return a.base + offset;
}

void syncthreads(Site site) { barrier_sync(0, site); }

void barrier_sync(unsigned id, Site site) {
    EmuThread* t = current_thread("__syncthreads");
    if (id >= 16) {
        fatal("%s: __barrier_sync(%u) at %s: a block has barriers 0 to 15", current_kernel_text().c_str(), id,
              site_text(site).c_str());
    }
    t->state = AT_BARRIER;
    t->site = site;
    t->barrier = id;
    switch_to_scheduler(tl_worker, t, false);
}

unsigned warp_op(WarpKind kind, unsigned mask, const void* value, void* result, size_t bytes, int arg, int width, Site site) {
    EmuThread* t = current_thread(warp_kind_name(kind));
    t->state = AT_WARP_OP;
    t->site = site;
    WarpWait& ww = t->warp;
    ww.kind = kind;
    ww.mask = mask;
    ww.bytes = bytes;
    ww.arg = arg;
    ww.width = width;
    memcpy(ww.value, value, bytes);
    switch_to_scheduler(tl_worker, t, false);
    memcpy(result, ww.result, bytes);
    return ww.answer;
}

void warp_collective(const char* what, void* lane_data, WarpCollectiveFn fn, Site site) {
    EmuThread* t = current_thread(what);
    t->state = AT_WARP_OP;
    t->site = site;
    WarpWait& ww = t->warp;
    ww.kind = WARP_COLLECTIVE;
    ww.mask = 0xffffffffu; // .aligned: the whole warp
    ww.bytes = 0;
    ww.arg = 0;
    ww.width = 32;
    ww.what = what;
    ww.data = lane_data;
    ww.collective = fn;
    switch_to_scheduler(tl_worker, t, false);
}

void warpgroup_collective(const char* what, void* lane_data, WarpgroupCollectiveFn fn, Site site, const void* pc) {
    EmuThread* t = current_thread(what);
    t->warp.pc = pc;
    t->state = AT_WARPGROUP_OP;
    t->site = site;
    WarpWait& ww = t->warp;
    ww.what = what;
    ww.data = lane_data;
    ww.wg_collective = fn;
    switch_to_scheduler(tl_worker, t, false);
}

void mbarrier_block(uint64_t mbar, uint32_t parity, Site site, const void* pc) {
    EmuThread* t = current_thread("mbarrier.try_wait");
    t->warp.pc = pc;
    t->state = AT_MBARRIER;
    t->site = site;
    t->warp.mbar = mbar;
    t->warp.parity = parity;
    t->warp.what = "mbarrier.try_wait.parity";
    switch_to_scheduler(tl_worker, t, false);
}

bool current_kernel_thread(KernelThread* out) {
    Worker* w = tl_worker;
    if (w == nullptr || w->block == nullptr) { return false; }
    *out = KernelThread{w->current ? w->current->linear : -1, w->block->nthreads, w->block->serial,
                        w->block->grid->counters.get()};
    return true;
}

PtxCounters* current_launch_counters() {
    Worker* w = tl_worker;
    return w == nullptr || w->block == nullptr ? nullptr : w->block->grid->counters.get();
}

// The .shared window of the running block: offset = 1024 + (the byte's place in this OS thread's
// arena). The first 1 KiB is left out, as sm_80 and later reserve it for the system: no valid
// offset is small, and an offset of 0 is never valid. Alignment seen through the window is the
// byte's real alignment (the arena starts on a page). A range must lie inside one part: the
// dynamic `extern __shared__` array or one static __shared__ variable placed in this block (the
// gaps between them belong to none). These are not a GPU's offsets; code must not depend on them
// beyond alignment (nor may it on a GPU).
static const uint64_t WINDOW_BASE = 1024;

// The part of the running block's arena holding [off, off + n) (n = 0: off may be the part's end).
static bool shared_part_holds(const Worker* w, uint64_t off, size_t n) {
    auto holds = [&](uint64_t lo, size_t bytes) { return off >= lo && off <= lo + bytes && off - lo + n <= bytes; };
    if (w->block->grid->shared_bytes > 0 && holds(0, w->block->grid->shared_bytes)) { return true; }
    for (const SharedVar& v : w->shared.vars) {
        if (holds(v.offset, v.bytes)) { return true; }
    }
    return false;
}

bool shared_window_offset(const void* p, size_t n, uint64_t* offset) {
    Worker* w = tl_worker;
    if (w == nullptr || w->block == nullptr || w->shared.base == nullptr) { return false; }
    uint64_t off = (uint64_t)((uintptr_t)p - (uintptr_t)w->shared.base);
    if ((uintptr_t)p < (uintptr_t)w->shared.base || off > SHARED_CAPACITY || !shared_part_holds(w, off, n)) { return false; }
    *offset = WINDOW_BASE + off;
    return true;
}

void* shared_window_pointer(uint64_t offset, size_t n) {
    Worker* w = tl_worker;
    if (w == nullptr || w->block == nullptr || w->shared.base == nullptr || offset < WINDOW_BASE) { return nullptr; }
    uint64_t off = offset - WINDOW_BASE;
    if (off > SHARED_CAPACITY || !shared_part_holds(w, off, n)) { return nullptr; }
    return w->shared.base + off;
}

void syncwarp(unsigned mask, Site site) {
    int dummy = 0, r = 0;
    warp_op(WARP_SYNC, mask, &dummy, &r, sizeof(int), 0, 32, site);
}

unsigned activemask() {
    // The lanes of this warp that have not exited: CUDA leaves the answer to the scheduler's
    // convergence, so any superset of the caller is allowed; code must not rely on more.
    Worker* w = tl_worker;
    EmuThread* t = current_thread("__activemask");
    int warp0 = t->linear / 32 * 32, n = w->block->nthreads;
    unsigned m = 0;
    for (int i = warp0; i < warp0 + 32 && i < n; i++) {
        if (w->threads[i].state != EXITED) { m |= 1u << (i - warp0); }
    }
    return m;
}

void device_trap(Site site) {
    Worker* w = tl_worker;
    if (w != nullptr && w->block != nullptr && w->current != nullptr) {
        fatal("%s %s: __trap() at %s", describe_block(w->block).c_str(), describe_thread(w->current).c_str(),
              site_text(site).c_str());
    }
    fatal("a kernel launched at %s has no emulator prologue (was it compiled by nvcc-cpu?)", site_text(site).c_str());
}

// ----------------------------------------------------------------------------
// the block scheduler

static int source_lane(const WarpWait& ww, int lane) {
    int width = ww.width, base = lane & ~(width - 1), in = lane - base;
    switch (ww.kind) {
    case WARP_SHFL: return base + (((ww.arg % width) + width) % width);
    case WARP_SHFL_UP: return in - ww.arg >= 0 ? lane - ww.arg : lane;
    case WARP_SHFL_DOWN: return in + ww.arg < width ? lane + ww.arg : lane;
    case WARP_SHFL_XOR: {
        int src = lane ^ ww.arg;
        return src >= base + width ? lane : src; // a later group: the caller's own value
    }
    default: return lane;
    }
}

// Completes the warp intrinsic that `t` waits at, if every lane of its mask is there.
// Returns true if it completed (the lanes are runnable again).
static bool resolve_warp_op(Worker* w, Block* b, EmuThread* t) {
    int warp0 = t->linear / 32 * 32, lanes_in_block = std::min(32, b->nthreads - warp0);
    const WarpWait& me = t->warp;
    unsigned mask = me.mask;
    int my_lane = t->linear - warp0;
    auto where_text = [&] {
        return describe_block(b) + " " + describe_thread(t) + ": " + op_name(me) + " at " + site_text(t->site);
    };
    if (!(mask & (1u << my_lane))) {
        fatal("%s with mask 0x%08x that does not name the calling lane %d", where_text().c_str(), mask, my_lane);
    }
    if (me.kind != WARP_SYNC && me.kind != WARP_BALLOT && me.kind != WARP_ANY && me.kind != WARP_ALL &&
        (me.width < 1 || me.width > 32 || (me.width & (me.width - 1)) != 0)) {
        fatal("%s: width %d is not a power of two in [1, 32]", where_text().c_str(), me.width);
    }
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane))) { continue; }
        if (lane >= lanes_in_block && me.kind == WARP_COLLECTIVE) {
            fatal("%s: every lane of the warp must execute it, and lane %d does not exist (the block has %d threads)",
                  where_text().c_str(), lane, b->nthreads);
        }
        if (lane >= lanes_in_block) {
            fatal("%s: mask 0x%08x names lane %d, which does not exist (the block has %d threads)", where_text().c_str(), mask,
                  lane, b->nthreads);
        }
        EmuThread* o = &w->threads[warp0 + lane];
        if (o->state == RUNNABLE) { return false; } // not there yet
        if (o->state != AT_WARP_OP || o->warp.kind != me.kind || !same_site(o->site, t->site) || o->warp.mask != mask ||
            (me.kind == WARP_COLLECTIVE && (o->warp.collective != me.collective || strcmp(o->warp.what, me.what) != 0))) {
            if (me.kind == WARP_COLLECTIVE) {
                fatal("%s: every lane of the warp must execute it (.sync.aligned), but lane %d %s", where_text().c_str(), lane,
                      where_is(o).c_str());
            }
            fatal("%s: lane %d named in mask 0x%08x %s%s", where_text().c_str(), lane, mask, where_is(o).c_str(),
                  o->state == AT_WARP_OP && o->warp.mask != mask ? " (with another mask)" : "");
        }
    }
    if (me.kind == WARP_COLLECTIVE) { // all 32 lanes are here: the instruction runs once for the warp
        void* lanes[32];
        for (int lane = 0; lane < 32; lane++) { lanes[lane] = w->threads[warp0 + lane].warp.data; }
        me.collective(lanes, warp0 / 32, describe_block(b) + " warp " + std::to_string(warp0 / 32) + ": " + me.what + " at " +
                                             site_text(t->site));
        for (int lane = 0; lane < 32; lane++) { w->threads[warp0 + lane].state = RUNNABLE; }
        check_warp_sync(warp0 / 32, 0xffffffffu); // .sync: the lanes wait for each other, as at __syncwarp
        return true;
    }
    // every named lane is here: compute each one's answer
    unsigned ballot = 0;
    for (int lane = 0; lane < 32; lane++) {
        if ((mask & (1u << lane)) && *(const int*)w->threads[warp0 + lane].warp.value) { ballot |= 1u << lane; }
    }
    for (int lane = 0; lane < 32; lane++) {
        if (!(mask & (1u << lane))) { continue; }
        EmuThread* o = &w->threads[warp0 + lane];
        WarpWait& ow = o->warp;
        switch (me.kind) {
        case WARP_SHFL: case WARP_SHFL_UP: case WARP_SHFL_DOWN: case WARP_SHFL_XOR: {
            int src = source_lane(ow, lane);
            if (src < 0 || src >= 32 || !(mask & (1u << src))) {
                fatal("%s: lane %d reads lane %d, which is not in mask 0x%08x (undefined on a GPU)", where_text().c_str(), lane,
                      src, mask);
            }
            memcpy(ow.result, w->threads[warp0 + src].warp.value, ow.bytes);
            ow.answer = 0;
            break;
        }
        case WARP_BALLOT: ow.answer = ballot; break;
        case WARP_ANY: ow.answer = ballot != 0; break;
        case WARP_ALL: ow.answer = ballot == mask; break;
        case WARP_SYNC: case WARP_COLLECTIVE: ow.answer = 0; break;
        }
        if (me.kind > WARP_SHFL_XOR) { memcpy(ow.result, &ow.answer, std::min(ow.bytes, sizeof(unsigned))); }
        o->state = RUNNABLE;
    }
    check_warp_sync(warp0 / 32, mask);
    return true;
}

// Completes the warpgroup instruction that `t` waits at if all 128 threads of its warpgroup (threads
// 128g .. 128g+127 of the block) are there; true if it completed.
static bool resolve_warpgroup_op(Worker* w, Block* b, EmuThread* t) {
    int base = t->linear / 128 * 128;
    auto where_text = [&] {
        return describe_block(b) + " " + describe_thread(t) + ": " + t->warp.what + " at " + program_line(t);
    };
    if (base + 128 > b->nthreads) {
        fatal("%s: every thread of the warpgroup (threads %d .. %d of the block) must execute it (.sync.aligned), and "
              "thread %d does not exist (the block has %d threads: a multiple of 128 is needed)",
              where_text().c_str(), base, base + 127, b->nthreads, b->nthreads);
    }
    for (int i = base; i < base + 128; i++) {
        EmuThread* o = &w->threads[i];
        if (o->state == RUNNABLE) { return false; }
        if (o->state != AT_WARPGROUP_OP || !same_site(o->site, t->site) || o->warp.wg_collective != t->warp.wg_collective ||
            strcmp(o->warp.what, t->warp.what) != 0) {
            if (o->state == AT_MBARRIER || o->state == AT_WARPGROUP_OP || o->state == AT_WARP_OP) { return false; } // may move on
            fatal("%s: every thread of the warpgroup must execute it (.sync.aligned), but %s %s", where_text().c_str(),
                  describe_thread(o).c_str(), where_is(o).c_str());
        }
    }
    void* lanes[128];
    for (int i = 0; i < 128; i++) { lanes[i] = w->threads[base + i].warp.data; }
    t->warp.wg_collective(lanes, base / 128, describe_block(b) + " warpgroup " + std::to_string(base / 128) + ": " +
                                                 t->warp.what + " at " + program_line(t));
    for (int i = base; i < base + 128; i++) { w->threads[i].state = RUNNABLE; }
    for (int k = 0; k < 4; k++) { check_warp_sync(base / 32 + k, 0xffffffffu); }
    return true;
}

// wgmma.wait_group completes as late as the rules allow: a wgmma may read its shared operands at
// any time before the wait that covers it (PTX ISA), so every other thread that can run, and every
// mbarrier waiter that can wake, runs first. A store or a bulk copy into those bytes that the
// program lets happen before the wait (a stage released to the producer too early) then lands
// before it, and the wait's check (ptx.cpp: the bytes changed since the issue) names it.
static bool waits_late(const EmuThread* t) { return strncmp(t->warp.what, "wgmma.wait_group", 16) == 0; }

// No thread can run: threads wait at warpgroup instructions, mbarriers or barriers. Completes the
// warpgroup instructions but wgmma.wait_group, lands the bulk copies in flight, wakes the mbarrier
// waiters whose phase completed, and only then completes the wgmma waits; true if a thread can run
// again.
static bool resolve_async(Worker* w, Block* b) {
    bool any = false;
    for (int i = 0; i < b->nthreads; i++) {
        EmuThread* t = &w->threads[i];
        if (t->state == AT_WARPGROUP_OP && !waits_late(t) && resolve_warpgroup_op(w, b, t)) { any = true; }
    }
    if (any) { return true; }
    ptx_block_idle(); // the copies in flight land (their phases may complete)
    for (int i = 0; i < b->nthreads; i++) {
        EmuThread* t = &w->threads[i];
        if (t->state == AT_MBARRIER && ptx_mbar_ready(t->warp.mbar, t->warp.parity)) {
            t->state = RUNNABLE;
            any = true;
        }
    }
    if (any) { return true; }
    for (int i = 0; i < b->nthreads; i++) {
        EmuThread* t = &w->threads[i];
        if (t->state == AT_WARPGROUP_OP && waits_late(t) && resolve_warpgroup_op(w, b, t)) { any = true; }
    }
    if (any) { return true; }
    for (int i = 0; i < b->nthreads; i++) {
        EmuThread* t = &w->threads[i];
        if (t->state == AT_WARPGROUP_OP) {
            // the first thread of its warpgroup that is not there, for the message
            int base = t->linear / 128 * 128;
            for (int j = base; j < base + 128 && j < b->nthreads; j++) {
                EmuThread* o = &w->threads[j];
                if (o->state != AT_WARPGROUP_OP || !same_site(o->site, t->site)) {
                    fatal("%s: deadlock: %s %s, and %s of its warpgroup %s (.sync.aligned: all 128 threads must execute it)",
                          describe_block(b).c_str(), describe_thread(t).c_str(), where_is(t).c_str(),
                          describe_thread(o).c_str(), where_is(o).c_str());
                }
            }
        }
        if (t->state == AT_MBARRIER) {
            fatal("%s: deadlock: %s %s, and no thread or copy in flight can complete that phase",
                  describe_block(b).c_str(), describe_thread(t).c_str(), where_is(t).c_str());
        }
    }
    return false;
}

// All threads wait at a barrier or have exited, and no warp intrinsic can complete: release the
// barrier if CUDA's rule holds, else report.
static void resolve_barrier(Worker* w, Block* b) {
    EmuThread* first = nullptr;
    for (int i = 0; i < b->nthreads; i++) {
        EmuThread* t = &w->threads[i];
        if (t->state == AT_BARRIER) { first = t; break; }
    }
    if (first == nullptr) { // threads wait at warp intrinsics that cannot complete
        for (int i = 0; i < b->nthreads; i++) {
            EmuThread* t = &w->threads[i];
            if (t->state == AT_WARP_OP) {
                fatal("%s: deadlock: %s %s, and its warp cannot complete it", describe_block(b).c_str(),
                      describe_thread(t).c_str(), where_is(t).c_str());
            }
        }
        fatal("internal: a block with no waiting thread is stuck");
    }
    for (int i = 0; i < b->nthreads; i++) {
        EmuThread* t = &w->threads[i];
        if (t->state != AT_BARRIER || !same_site(t->site, first->site) || t->barrier != first->barrier) {
            fatal("%s: %s %s, but %s %s: every thread of the block must reach the same __syncthreads (or __barrier_sync "
                  "of the same id)",
                  describe_block(b).c_str(), describe_thread(first).c_str(), where_is(first).c_str(),
                  describe_thread(t).c_str(), where_is(t).c_str());
        }
    }
    for (int i = 0; i < b->nthreads; i++) { w->threads[i].state = RUNNABLE; }
}

enum Order { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };

static Order order_from_env() {
    static Order order = [] {
        const char* e = getenv("EMU_THREAD_ORDER");
        if (e == nullptr || strcmp(e, "forward") == 0) { return ORDER_FORWARD; }
        if (strcmp(e, "reverse") == 0) { return ORDER_REVERSE; }
        if (strcmp(e, "random") == 0) { return ORDER_RANDOM; }
        fatal("EMU_THREAD_ORDER=%s: expected forward, reverse or random", e);
    }();
    return order;
}

static void arrange(std::vector<int>& v, Order order, std::mt19937_64& rng) {
    if (order == ORDER_FORWARD && !v.empty() && v[0] == 0 && v.back() == (int)v.size() - 1) { return; }
    for (size_t i = 0; i < v.size(); i++) { v[i] = (int)i; }
    if (order == ORDER_REVERSE) { std::reverse(v.begin(), v.end()); }
    if (order == ORDER_RANDOM) { std::shuffle(v.begin(), v.end(), rng); }
}

static std::atomic<uint64_t> g_block_serial{0};

static void run_block(Worker* w, const Grid* g, uint3 idx) {
    Block b{g, idx, (int)(g->block.x * g->block.y * g->block.z), ++g_block_serial};
    w->block = &b;
    emu_blockIdx = idx;
    emu_blockDim = g->block;
    emu_gridDim = g->grid;
    SharedArena& arena = w->shared;
    if (arena.base == nullptr) { map_shared_arena(&arena); }
    arena.vars.clear();
    arena.static_bytes = 0;
    arena.end = g->shared_bytes;
#if EMU_ASAN // with ASan (no access hooks): everything but the dynamic array is poisoned until placed
    __asan_unpoison_memory_region(arena.base, SHARED_CAPACITY);
    __asan_poison_memory_region(arena.base + g->shared_bytes, SHARED_CAPACITY - g->shared_bytes);
#endif
    if (g->shared_bytes > 0) { memset(arena.base, 0xFF, g->shared_bytes); }
    check_block_begin(&g->info, idx, b.nthreads, arena.base, SHARED_CAPACITY);
    if (g->shared_bytes > 0) { check_shared_region(0, g->shared_bytes, 0); }
    if ((int)w->threads.size() < b.nthreads) { w->threads.resize(b.nthreads); }
    for (int i = 0; i < b.nthreads; i++) {
        EmuThread* t = &w->threads[i];
        t->linear = i;
        t->idx = make_uint3(i % g->block.x, i / g->block.x % g->block.y, i / (g->block.x * g->block.y));
        start_fiber(t);
    }
    // Warp by warp: a warp runs until each of its threads waits at __syncthreads or has exited
    // (its warp intrinsics complete as its lanes arrive), then the next warp; then the barrier.
    // Keeping one warp's 32 fibers busy at a time keeps their stacks in cache.
    Order order = order_from_env();
    int nwarps = (b.nthreads + 31) / 32;
    std::vector<int> warps(nwarps), lanes(32);
    for (;;) {
        arrange(warps, order, w->rng);
        bool woke = false; // a warpgroup instruction or an mbarrier made threads of other warps runnable
        for (int wi : warps) {
            int first = wi * 32, n = std::min(32, b.nthreads - first);
            for (bool again = true; again;) {
                again = false;
                arrange(lanes, order, w->rng);
                for (int l : lanes) {
                    EmuThread* t = &w->threads[first + l];
                    if (l < n && t->state == RUNNABLE) { switch_to_thread(w, t); }
                }
                check_warp_step_end(wi);
                for (int l : lanes) {
                    EmuThread* t = &w->threads[first + l];
                    if (l < n && t->state == AT_WARP_OP && resolve_warp_op(w, &b, t)) { again = true; }
                    if (l < n && t->state == AT_WARPGROUP_OP && !waits_late(t) && resolve_warpgroup_op(w, &b, t)) {
                        again = woke = true;
                    }
                }
            }
        }
        if (woke) { continue; }
        bool waiting_async = false;
        for (int i = 0; i < b.nthreads; i++) {
            ThreadState s = w->threads[i].state;
            if (s == AT_WARPGROUP_OP || s == AT_MBARRIER) { waiting_async = true; }
        }
        if (waiting_async && resolve_async(w, &b)) { continue; }
        bool all_exited = true;
        for (int i = 0; i < b.nthreads; i++) {
            if (w->threads[i].state != EXITED) { all_exited = false; }
        }
        if (all_exited) { break; }
        resolve_barrier(w, &b);
        check_barrier();
        ptx_block_barrier();
    }
    ptx_block_end();
    check_block_end();
    if (arena.static_bytes > 0) { // the kernel's static shared memory is now known, for its next launches
        std::lock_guard<std::mutex> lock(g_attr_mutex);
        size_t& known = g_static_shared[g->info.kernel];
        known = std::max(known, arena.static_bytes);
    }
    w->block = nullptr;
}

// ----------------------------------------------------------------------------
// grids: blocks in order, reversed or shuffled, over EMU_THREADS OS threads

static int worker_threads() {
    static int n = [] {
        const char* e = getenv("EMU_THREADS");
        int v = e ? atoi(e) : 1;
        return v < 1 ? 1 : v;
    }();
    return n;
}

static Worker* this_worker() {
    if (tl_worker == nullptr) {
        tl_worker = new Worker();
        tl_worker->rng.seed(random_u64());
    }
    return tl_worker;
}

// The OS threads that help the host thread run blocks: started once and kept, so that each
// keeps its Worker (fiber stacks) from kernel to kernel. Never destroyed: at exit its threads
// still wait on the condition variable, whose destructor would wait for them.
struct Pool {
    std::mutex m;
    std::condition_variable wake, done;
    std::vector<std::thread> threads;
    std::function<void()> job;
    uint64_t generation = 0;
    int wanted = 0, running = 0;
};
static Pool& g_pool = *new Pool();

static void pool_thread(int index) {
    install_signal_stack();
    uint64_t seen = 0;
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock<std::mutex> lock(g_pool.m);
            g_pool.wake.wait(lock, [&] { return g_pool.generation != seen; });
            seen = g_pool.generation;
            if (index >= g_pool.wanted) { continue; }
            job = g_pool.job;
        }
        job();
        std::lock_guard<std::mutex> lock(g_pool.m);
        if (--g_pool.running == 0) { g_pool.done.notify_all(); }
    }
}

// Runs job on `helpers` pool threads and on this thread, and returns when all are done.
static void pool_run(int helpers, const std::function<void()>& job) {
    {
        std::lock_guard<std::mutex> lock(g_pool.m);
        while ((int)g_pool.threads.size() < helpers) {
            g_pool.threads.emplace_back(pool_thread, (int)g_pool.threads.size());
            g_pool.threads.back().detach();
        }
        g_pool.job = job;
        g_pool.wanted = helpers;
        g_pool.running = helpers;
        g_pool.generation++;
    }
    g_pool.wake.notify_all();
    job();
    std::unique_lock<std::mutex> lock(g_pool.m);
    g_pool.done.wait(lock, [] { return g_pool.running == 0; });
}

static void run_grid(Grid& g) {
    size_t blocks = (size_t)g.grid.x * g.grid.y * g.grid.z;
    std::vector<uint3> order(blocks);
    for (size_t i = 0; i < blocks; i++) {
        order[i] = make_uint3((unsigned)(i % g.grid.x), (unsigned)(i / g.grid.x % g.grid.y),
                              (unsigned)(i / ((size_t)g.grid.x * g.grid.y)));
    }
    Order o = order_from_env();
    if (o == ORDER_REVERSE) { std::reverse(order.begin(), order.end()); }
    if (o == ORDER_RANDOM) {
        std::mt19937_64 rng(random_u64());
        std::shuffle(order.begin(), order.end(), rng);
    }
    int nworkers = (int)std::min<size_t>((size_t)worker_threads(), blocks);
    std::atomic<size_t> next{0};
    auto work = [&] {
        Worker* w = this_worker();
        for (size_t i; (i = next.fetch_add(1)) < blocks;) { run_block(w, &g, order[i]); }
        check_worker_done(&g.info);
    };
    check_launch_begin(&g.info);
    if (nworkers <= 1) {
        work();
    } else {
        pool_run(nworkers - 1, work);
    }
    {
        std::lock_guard<std::mutex> lock(g_attr_mutex);
        auto it = g_static_shared.find(g.info.kernel);
        g.info.static_shared = it == g_static_shared.end() ? 0 : it->second;
    }
    check_launch_end(&g.info);
}

// ----------------------------------------------------------------------------
// the launch: configuration checks (a bad one is a launch error, as on a GPU), then the queue

cudaError_t set_max_dynamic_shared(const void* kernel, int bytes) {
    if (bytes < 0 || (size_t)bytes > MAX_SHARED) { return cudaErrorInvalidValue; }
    std::lock_guard<std::mutex> lock(g_attr_mutex);
    g_max_dynamic_shared[kernel] = bytes;
    return cudaSuccess;
}

void record_launch_error(cudaError_t err, const std::string& why); // runtime.cpp

// The launch being made: its pointer arguments into device or pinned memory (check_kernel_pointer),
// for the stream-order check.
static thread_local std::vector<KernelPointer> tl_pointer_args;

// EMU_TRACE=1: what the launch ran on tensor cores and as asynchronous copies (when it ran any)
static void trace_ptx_counters(const Grid& g) {
    static bool trace = [] {
        const char* e = getenv("EMU_TRACE");
        return e != nullptr && atoi(e) != 0;
    }();
    const PtxCounters& c = *g.counters;
    if (!trace || (c.mma == 0 && c.ldmatrix == 0 && c.cp_async == 0 && c.wgmma == 0 && c.tma == 0)) { return; }
    // (the line without sm_90a work is the one dev/perf/step_counts.py reads: unchanged)
    char hopper[160] = "";
    if (c.wgmma != 0 || c.tma != 0) {
        snprintf(hopper, sizeof(hopper), ", %llu wgmma (%llu tensor-core FLOPs), %llu cp.async.bulk.tensor (%llu bytes)",
                 (unsigned long long)c.wgmma, (unsigned long long)c.wgmma_flops, (unsigned long long)c.tma,
                 (unsigned long long)c.tma_bytes);
    }
    fprintf(stderr,
            "cuda-emu trace: kernel %s: %llu mma.sync (%llu tensor-core FLOPs), %llu ldmatrix (%llu bytes), %llu cp.async "
            "(%llu bytes)%s\n",
            g.name, (unsigned long long)c.mma, (unsigned long long)c.mma_flops, (unsigned long long)c.ldmatrix,
            (unsigned long long)c.ldmatrix_bytes, (unsigned long long)c.cp_async, (unsigned long long)c.cp_async_bytes, hopper);
}

void launch_grid(const void* kernel, const char* name, Site site, const LaunchConfig& cfg, int bound, ThreadBody body,
                 void* closure, std::shared_ptr<void> hold) {
    ApiScope scope("kernel launch");
    std::vector<KernelPointer> pointer_args;
    pointer_args.swap(tl_pointer_args);
    char why[512];
    dim3 g = cfg.grid, b = cfg.block;
    size_t threads = (size_t)b.x * b.y * b.z;
    size_t max_shared = DEFAULT_DYNAMIC_SHARED;
    {
        std::lock_guard<std::mutex> lock(g_attr_mutex);
        auto it = g_max_dynamic_shared.find(kernel);
        if (it != g_max_dynamic_shared.end()) { max_shared = (size_t)it->second; }
    }
    why[0] = '\0';
    if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0) {
        snprintf(why, sizeof(why), "a zero dimension (grid %u,%u,%u block %u,%u,%u)", g.x, g.y, g.z, b.x, b.y, b.z);
    } else if (b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024) {
        snprintf(why, sizeof(why), "block (%u,%u,%u) = %zu threads (at most 1024; x, y <= 1024, z <= 64)", b.x, b.y, b.z, threads);
    } else if (bound > 0 && threads > (size_t)bound) {
        snprintf(why, sizeof(why), "block of %zu threads exceeds the kernel's __launch_bounds__(%d)", threads, bound);
    } else if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        snprintf(why, sizeof(why), "grid (%u,%u,%u) (y and z at most 65535)", g.x, g.y, g.z);
    } else if (cfg.shared_bytes > max_shared) {
        snprintf(why, sizeof(why), "%zu bytes of dynamic shared memory (the limit is %zu%s)", cfg.shared_bytes, max_shared,
                 max_shared == DEFAULT_DYNAMIC_SHARED ? " unless cudaFuncSetAttribute raises it, to at most 227 KiB" : "");
    } else {
        size_t static_bytes = 0;
        {
            std::lock_guard<std::mutex> lock(g_attr_mutex);
            auto it = g_static_shared.find(kernel);
            if (it != g_static_shared.end()) { static_bytes = it->second; }
        }
        std::string e = shared_limit_error(kernel, static_bytes, cfg.shared_bytes);
        snprintf(why, sizeof(why), "%s", e.c_str());
    }
    if (why[0] != '\0') {
        std::string text = std::string("kernel ") + name + " at " + site_text(site) + ": " + why;
        record_launch_error(cudaErrorInvalidConfiguration, text);
        return;
    }
    static uint64_t launches = 0; // under the runtime's lock (ApiScope)
    LaunchInfo info{kernel, name, site.file, site.line, g, b, cfg.shared_bytes, 0, 0, nullptr};
    auto grid = std::make_shared<Grid>(Grid{name, site, g, b, cfg.shared_bytes, body, closure, info,
                                                             std::make_shared<PtxCounters>()});
    OpDetails details; // for the stream-order check: its line, and the bytes it may touch
    details.source.file = site.file;
    details.source.line = site.line;
    if (streams_check()) { // every pointer a buffer start first, then each one's reach (to the next start)
        for (const KernelPointer& a : pointer_args) { streams_note_start(a.p, a.base); }
        streams_kernel_ranges(pointer_args, &details.ranges);
        details.pointers.swap(pointer_args);
    }
    cudaError_t err = enqueue(cfg.stream, std::string("kernel ") + name, [grid, hold]() {
        grid->info.id = ++launches; // in the order launches run
        run_grid(*grid);
        trace_ptx_counters(*grid);
        return true;
    }, std::move(details));
    if (err != cudaSuccess) {
        record_launch_error(err, std::string("kernel ") + name + " at " + site_text(site) + ": " +
                                     (err == cudaErrorInvalidResourceHandle ? "invalid stream" : cudaGetErrorString(err)));
    }
}

// A kernel's footprint, as the stream-order check takes it (streams.cpp): from each pointer
// argument into device or pinned memory forward to the next buffer start in its allocation (a
// kernel indexes forward from the pointers it is given), read when the argument points to
// const, read and written otherwise.
void check_kernel_pointer(const char* name, Site site, int index, const void* p, bool to_const) {
    if (p == nullptr) { return; }
    const void* base = nullptr;
    size_t bytes = 0;
    if (device_range(p, 0, &base, &bytes) || pinned_allocation(p, &base, &bytes)) {
        if (streams_check()) { tl_pointer_args.push_back(KernelPointer{p, base, bytes, to_const}); }
        return;
    }
    if (freed_device_memory(p)) {
        fatal("kernel %s launched at %s: argument %d is %p, in device memory that was freed (cudaFree)", name,
              site_text(site).c_str(), index, p);
    }
    fatal("kernel %s launched at %s: argument %d is %p, which is neither device memory (cudaMalloc) nor pinned host "
          "memory (cudaMallocHost): a GPU cannot read it",
          name, site_text(site).c_str(), index, p);
}

} // namespace emu
