/*
The CUDA runtime on the CPU: device memory, pinned memory, streams, events, copies, errors.

Device memory lives in its own reserved address range, apart from host memory. Each allocation
is filled with 0xFF bytes (NaN as fp32 and bf16) and ends where an inaccessible guard page
begins, so reading past its end faults; freed ranges are never reused and become inaccessible.
EMU_PROTECT=1 also makes live allocations unreadable outside the runtime's own calls, so host
code that dereferences a device pointer crashes as it would with a GPU (the SIGSEGV handler
names the allocation).

Streams are asynchronous. Work is queued as ops and runs on the host thread only when something
forces it or the schedule picks it (EMU_SCHEDULE):
- lazy (default): as late as allowed, at a synchronization or a blocking copy; a query that
  finds work pending answers cudaErrorNotReady and then runs one op, so polling loops progress;
- eager: everything runs as soon as it is queued and its dependencies are met;
- random: at every runtime call, a seeded random number of ready ops from random streams run,
  while now and then one stream is starved for a few hundred calls (it runs only when waited for).
Stream order, cudaStreamWaitEvent and the legacy default stream's implicit synchronization
(with every blocking stream, both ways) are the only orderings the schedules respect, so a
missing event wait shows up as stale data under lazy or random.

Errors follow the runtime's rules: every failing call sets the thread's last error
(cudaGetLastError returns and clears it, cudaPeekAtLastError only returns it), including
cudaErrorNotReady from cudaEventQuery and cudaStreamQuery, and a bad launch configuration.
What a GPU would report as a sticky fault (or not at all) ends the process with a message.
*/
#include "emu_internal.h"

#include <cuda.h>

#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <ucontext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace emu {

bool address_in_kernel_stack_guard(const void* p);             // kernel.cpp
cudaError_t set_max_dynamic_shared(const void* kernel, int bytes); // kernel.cpp

// ----------------------------------------------------------------------------
// messages and settings

static int g_rank_label = -1;

void set_rank_label(int rank) { g_rank_label = rank; }

static void vmessage(const char* kind, const char* fmt, va_list ap) {
    char text[4096];
    vsnprintf(text, sizeof(text), fmt, ap);
    if (g_rank_label >= 0) { fprintf(stderr, "[rank %d] cuda-emu%s: %s\n", g_rank_label, kind, text); }
    else { fprintf(stderr, "cuda-emu%s: %s\n", kind, text); }
    fflush(stderr);
}

static std::vector<void (*)()> g_fatal_hooks;

void on_fatal(void (*fn)()) { g_fatal_hooks.push_back(fn); }

void fatal(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage("", fmt, ap);
    va_end(ap);
    fflush(stdout);
    static bool ending = false; // a hook that ends in fatal() itself does not start them again
    if (!ending) {
        ending = true;
        for (auto fn : g_fatal_hooks) { fn(); }
    }
    _exit(86);
}

void warn(const char* fmt, ...) {
    static std::mutex m;
    static std::set<std::string> seen;
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> lock(m);
    if (seen.insert(text).second) {
        if (g_rank_label >= 0) { fprintf(stderr, "[rank %d] cuda-emu: %s\n", g_rank_label, text); }
        else { fprintf(stderr, "cuda-emu: %s\n", text); }
    }
}

static long env_long(const char* name, long fallback) {
    const char* e = getenv(name);
    if (e == nullptr || *e == '\0') { return fallback; }
    char* end = nullptr;
    long v = strtol(e, &end, 10);
    if (*end != '\0') { fatal("%s=%s: expected an integer", name, e); }
    return v;
}

// Each emulated .cu file says at start-up how nvcc-cpu built it (emu_device.h): contraction of
// a*b + c in device code (EMU_FMAD=1, nvcc's --fmad=true) or none (0). It is a build-time choice,
// as nvcc's is, so an EMU_FMAD in the environment of the run that says otherwise is an error,
// not a setting silently ignored; files built both ways in one program are an error too; and an
// fma build needs a CPU with FMA instructions.
bool note_fmad_build(int fmad) {
    static int first = -1;
    if (first < 0) {
        first = fmad;
        const char* e = getenv("EMU_FMAD");
        if (e != nullptr && *e != '\0' && strcmp(e, fmad ? "1" : "0") != 0) {
            fprintf(stderr, "cuda-emu: EMU_FMAD=%s at run time, but this program was built with EMU_FMAD=%d: contraction "
                    "is chosen when nvcc-cpu compiles (EMU_FMAD=0|1 or --fmad=false|true there); rebuild it, or unset "
                    "EMU_FMAD\n", e, fmad);
            _exit(86); // (static initialization: fatal()'s hooks may not exist yet)
        }
#if defined(__x86_64__) || defined(__i386__)
        if (fmad && !__builtin_cpu_supports("fma")) {
            fprintf(stderr, "cuda-emu: this program was built with EMU_FMAD=1 (device code contracted into fma "
                    "instructions), and this CPU has no FMA instructions: rebuild it with EMU_FMAD=0\n");
            _exit(86);
        }
#endif
    } else if (fmad != first) {
        fprintf(stderr, "cuda-emu: this program's .cu files were built with different EMU_FMAD settings (%d and %d)\n",
                first, fmad);
        _exit(86);
    }
    return true;
}

enum Schedule { SCHEDULE_LAZY, SCHEDULE_EAGER, SCHEDULE_RANDOM };

static Schedule schedule() {
    static Schedule s = [] {
        const char* e = getenv("EMU_SCHEDULE");
        if (e == nullptr || strcmp(e, "lazy") == 0) { return SCHEDULE_LAZY; }
        if (strcmp(e, "eager") == 0) { return SCHEDULE_EAGER; }
        if (strcmp(e, "random") == 0) { return SCHEDULE_RANDOM; }
        fatal("EMU_SCHEDULE=%s: expected lazy, eager or random", e);
    }();
    return s;
}

static std::mt19937_64& rng() {
    static std::mt19937_64 r((uint64_t)env_long("EMU_SEED", 1) * 0x9E3779B97F4A7C15ull + 12345);
    return r;
}

static std::recursive_mutex g_lock; // one runtime: every API call holds it

// Its own lock, not g_lock: the OS threads that run blocks (EMU_THREADS) seed themselves from it
// while the host thread holds g_lock for the whole kernel.
static std::mutex g_rng_lock;

uint64_t random_u64() {
    std::lock_guard<std::mutex> lock(g_rng_lock);
    return rng()();
}

bool chance(double p) { return (double)(random_u64() >> 11) * (1.0 / 9007199254740992.0) < p; }

static double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int device_count() {
    static int n = (int)env_long("EMU_DEVICES", 1);
    return n < 1 ? 1 : n;
}

static int g_device = 0;
int current_device() { return g_device; }

// ----------------------------------------------------------------------------
// the last error (per host thread, as in CUDA)

static thread_local cudaError_t tl_last_error = cudaSuccess;

static cudaError_t ret(cudaError_t err) {
    if (err != cudaSuccess) { tl_last_error = err; }
    return err;
}

static cudaError_t ret_warn(cudaError_t err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static cudaError_t ret_warn(cudaError_t err, const char* fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    warn("%s", text);
    return ret(err);
}

void record_launch_error(cudaError_t err, const std::string& why) {
    if (getenv("EMU_QUIET_LAUNCH_ERRORS") == nullptr) { warn("launch error: %s", why.c_str()); }
    tl_last_error = err;
}

// ----------------------------------------------------------------------------
// device memory

struct Allocation {
    char* base;       // what cudaMalloc returned
    size_t bytes;     // what was asked for
    char* map_lo;     // the pages holding it; the guard page follows at map_lo + map_bytes
    size_t map_bytes;
    bool live;
    void* callers[4]; // cudaMalloc's callers (return addresses), for messages
    int ncallers;
};

static char* g_arena = nullptr;
static size_t g_arena_bytes = 0, g_arena_used = 0, g_device_bytes_live = 0;
// Pinned host memory has a reserved range of its own too, in whole pages, never reused: the
// stream-order check protects the pages of pinned buffers that unfinished ops touch.
static char* g_pinned_arena = nullptr;
static size_t g_pinned_arena_bytes = 0, g_pinned_arena_used = 0;
static std::map<uintptr_t, Allocation> g_allocations; // by base, live and freed
static std::map<uintptr_t, size_t> g_pinned;          // cudaMallocHost: base -> bytes
static size_t g_page = 4096;
static bool g_protect = false;

static size_t device_memory_total() {
    static size_t total = (size_t)env_long("EMU_DEVICE_MEMORY_MB", 80 * 1024) << 20;
    return total;
}

static const Allocation* allocation_at(const void* p) { // any allocation whose pages (or guard page) hold p
    uintptr_t a = (uintptr_t)p;
    auto it = g_allocations.upper_bound(a); // the first allocation starting after p: p may be in its pages
    if (it != g_allocations.end() && a >= (uintptr_t)it->second.map_lo) { return &it->second; }
    if (it == g_allocations.begin()) { return nullptr; }
    --it;
    const Allocation& al = it->second;
    if (a >= (uintptr_t)al.map_lo && a < (uintptr_t)al.map_lo + al.map_bytes + g_page) { return &al; }
    return nullptr;
}

bool allocation_at_unlocked(const void* p, AllocationView* out) {
    const Allocation* al = allocation_at(p);
    if (al == nullptr) { return false; }
    *out = AllocationView{al->base, al->bytes, al->live};
    return true;
}

std::string allocation_text(const void* base) {
    auto it = g_allocations.find((uintptr_t)base);
    if (it == g_allocations.end()) { return "an unknown allocation"; }
    const Allocation& al = it->second;
    char s[128];
    snprintf(s, sizeof(s), "a %zu-byte allocation at %p%s (cudaMalloc", al.bytes, (void*)al.base, al.live ? "" : ", freed");
    std::string text = s;
    // the first two callers outside the emulator and the toolkit's headers: the line, and what called it
    int named = 0;
    std::string last;
    for (int i = 0; i < al.ncallers && named < 2; i++) {
        if (!program_code(al.callers[i])) { break; } // the C library's start-up, an interpreter...
        std::string line = source_line(al.callers[i]);
        if (line == last || line.find("unknown line") != std::string::npos) { continue; }
        text += (named == 0 ? " at " : " from ") + line;
        last = line;
        named++;
    }
    return text + ")";
}

// For kernel threads: they must not take g_lock (the host thread that runs their kernel holds it
// and waits for them), and need not, as nothing allocates or frees while a kernel runs (that
// takes g_lock too). freed: [p, ...) is in an allocation that was freed.
bool device_range_in_kernel(const void* p, size_t n, bool* freed) {
    const Allocation* al = allocation_at(p);
    *freed = al != nullptr && !al->live;
    if (al == nullptr || !al->live) { return false; }
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)al->base, hi = lo + al->bytes;
    return a >= lo && a <= hi && !(n > 0 && (a == hi || n > hi - a));
}

bool device_range(const void* p, size_t n, const void** alloc_base, size_t* alloc_bytes) {
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    const Allocation* al = allocation_at(p);
    if (al == nullptr || !al->live) { return false; }
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)al->base, hi = lo + al->bytes;
    if (a < lo || a > hi || (n > 0 && (a == hi || n > hi - a))) { return false; }
    if (alloc_base) { *alloc_base = al->base; }
    if (alloc_bytes) { *alloc_bytes = al->bytes; }
    return true;
}

void check_device_range(const void* p, size_t n, const char* who, const char* what) {
    if (device_range(p, n)) { return; }
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    const Allocation* al = allocation_at(p);
    if (al != nullptr && !al->live) { fatal("%s: %s %p is in device memory that was freed", who, what, p); }
    if (al != nullptr) {
        fatal("%s: %s [%p, +%zu bytes) runs past its device allocation (%zu bytes at %p)", who, what, p, n, al->bytes,
              (void*)al->base);
    }
    fatal("%s: %s %p is not device memory (not from cudaMalloc)", who, what, p);
}

bool freed_device_memory(const void* p) {
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    const Allocation* al = allocation_at(p);
    return al != nullptr && !al->live;
}

bool pinned_range(const void* p, size_t n) {
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    uintptr_t a = (uintptr_t)p;
    auto it = g_pinned.upper_bound(a);
    if (it == g_pinned.begin()) { return false; }
    --it;
    uintptr_t lo = it->first, hi = lo + it->second;
    return a >= lo && a <= hi && (n == 0 || (a < hi && n <= hi - a));
}

bool pinned_allocation(const void* p, const void** base, size_t* bytes) {
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    auto it = g_pinned.upper_bound((uintptr_t)p);
    if (it == g_pinned.begin()) { return false; }
    --it;
    if ((uintptr_t)p >= it->first + (it->second == 0 ? 1 : it->second)) { return false; }
    *base = (const void*)it->first;
    *bytes = it->second;
    return true;
}

static void set_live_protection(int prot) {
    for (auto& kv : g_allocations) {
        if (kv.second.live) { mprotect(kv.second.map_lo, kv.second.map_bytes, prot); }
    }
}

// EMU_PROTECT: device memory is readable only while the runtime runs device work (an op: a
// kernel, copy, memset, product or collective). It is opened when the first op of an outermost
// API call runs, and closed when that call returns: calls that only queue work (a launch under
// the lazy schedule) change nothing, which keeps mprotect, whose cost grows with the pages
// mapped, off the path of every launch.
static bool g_device_open = false;

static void open_device_memory() {
    if (g_protect && !g_device_open) {
        set_live_protection(PROT_READ | PROT_WRITE);
        g_device_open = true;
    }
}

static int g_api_depth = 0; // nesting of ApiScope on the thread that holds g_lock

static void segv_handler(int sig, siginfo_t* info, void* ctx);
bool address_in_shared_guard(const void* p); // kernel.cpp

// The fault handler runs on a stack of its own, so that it can report a kernel thread that
// overflowed its stack. Every OS thread that runs kernels calls this once.
void install_signal_stack() {
    static thread_local bool done = false;
    static thread_local char handler_stack[64 * 1024];
    if (done) { return; }
    done = true;
    stack_t ss;
    ss.ss_size = sizeof(handler_stack);
    ss.ss_sp = handler_stack;
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
}

static void init_streams(); // below
static void at_exit(int status, void*);

static void init_once() {
    static bool done = false;
    if (done) { return; }
    done = true;
    g_page = (size_t)sysconf(_SC_PAGESIZE);
    refuse_without_hooks();
    g_protect = env_long("EMU_PROTECT", 0) != 0 || check_settings().protect;
    // reserve an address range for device memory: inaccessible until allocated
    for (size_t gib = 1024; gib >= 16 && g_arena == nullptr; gib /= 4) {
        void* p = mmap(nullptr, gib << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            g_arena = (char*)p;
            g_arena_bytes = gib << 30;
        }
    }
    if (g_arena == nullptr) { fatal("cannot reserve an address range for device memory"); }
    // The first sixteenth stays empty: a 32-bit index overflow (up to 2^31 elements of 16 bytes
    // before an allocation, 32 GiB) lands in the device range and is named as such.
    g_arena_used = g_arena_bytes / 16;
    check_device_arena(g_arena, g_arena_bytes);
    for (size_t gib = 256; gib >= 4 && g_pinned_arena == nullptr; gib /= 4) {
        void* p = mmap(nullptr, gib << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            g_pinned_arena = (char*)p;
            g_pinned_arena_bytes = gib << 30;
        }
    }
    if (g_pinned_arena == nullptr) { fatal("cannot reserve an address range for pinned host memory"); }
    init_streams();
    on_exit(at_exit, nullptr); // (glibc's atexit with the exit status)
    install_signal_stack();
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
}

std::string current_kernel_text(); // kernel.cpp: "kernel K block (..) thread (..)" or ""

static void segv_handler(int sig, siginfo_t* info, void* ctx) {
    const void* addr = info->si_addr;
    char text[1024];
    text[0] = '\0';
    // a host access to pinned pages that an op the host has not waited for touches (streams.cpp)
    bool writes = ctx != nullptr && (((ucontext_t*)ctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
    bool in_pinned = g_pinned_arena && (const char*)addr >= g_pinned_arena && (const char*)addr < g_pinned_arena + g_pinned_arena_bytes;
    if (sig == SIGSEGV && in_pinned && streams_check() && streams_pinned_fault((void*)addr, writes, ctx, &g_lock)) { return; }
    const Allocation* al = allocation_at(addr); // no lock: the process is ending anyway
    std::string where = current_kernel_text();
    const char* by = where.empty() ? "host code" : where.c_str();
    if (al != nullptr) {
        uintptr_t a = (uintptr_t)addr, lo = (uintptr_t)al->base;
        if (!al->live) {
            snprintf(text, sizeof(text), "%s touched freed device memory at %p (a %zu-byte allocation at %p)", by, addr,
                     al->bytes, (void*)al->base);
        } else if (a >= lo + al->bytes) {
            snprintf(text, sizeof(text), "%s touched %p, %zu bytes past the end of a %zu-byte device allocation at %p", by,
                     addr, (size_t)(a - (lo + al->bytes)), al->bytes, (void*)al->base);
        } else if (a < lo) {
            snprintf(text, sizeof(text), "%s touched %p, %zu bytes before the start of a %zu-byte device allocation at %p",
                     by, addr, (size_t)(lo - a), al->bytes, (void*)al->base);
        } else {
            snprintf(text, sizeof(text),
                     "%s read or wrote device memory at %p (byte %zu of a %zu-byte cudaMalloc allocation) outside a "
                     "copy, memset or kernel: a GPU's memory is not addressable from the host",
                     by, addr, (size_t)(a - lo), al->bytes);
        }
    } else if (g_arena && (const char*)addr >= g_arena && (const char*)addr < g_arena + g_arena_bytes) {
        snprintf(text, sizeof(text), "%s touched %p, inside the device address range but in no allocation", by, addr);
    } else if (g_pinned_arena && (const char*)addr >= g_pinned_arena && (const char*)addr < g_pinned_arena + g_pinned_arena_bytes) {
        snprintf(text, sizeof(text), "%s touched %p: pinned host memory that cudaFreeHost released, or past the end of a "
                 "pinned allocation", by, addr);
    } else if (address_in_kernel_stack_guard(addr)) {
        snprintf(text, sizeof(text), "stack overflow in %s (raise EMU_STACK_KB)", by);
    } else if (address_in_shared_guard(addr)) {
        snprintf(text, sizeof(text), "%s touched %p, past the end of the block's shared memory", by, addr);
    } else if (!where.empty() && info->si_code == SI_KERNEL) { // a general protection fault: no address
        snprintf(text, sizeof(text), "%s faulted without an address: a misaligned 16-byte access (a GPU raises "
                 "\"misaligned address\") or a non-canonical pointer", by);
    } else if (!where.empty()) {
        snprintf(text, sizeof(text), "%s touched %p, which is no device allocation, shared memory or pinned host memory "
                 "(a wild pointer or an overflowed index)", by, addr);
    }
    if (text[0] != '\0') {
        char line[1600];
        int n = snprintf(line, sizeof(line), "cuda-emu: %s", text);
        if (ctx != nullptr) { // the faulting instruction's line, a kernel's or host code's (addr2line: not
                              // signal-safe, but we exit)
            const void* pc = (const void*)((ucontext_t*)ctx)->uc_mcontext.gregs[REG_RIP];
            n += snprintf(line + n, sizeof(line) - n, ", at %s", source_line((const char*)pc + 1).c_str());
        }
        n += snprintf(line + n, sizeof(line) - n, "\n");
        if (write(2, line, n) < 0) {}
        _exit(86);
    }
    // not ours: the default action
    signal(sig, SIG_DFL);
}

// ----------------------------------------------------------------------------
// API scope: the lock, memory protection, and the schedule's chance to run work

static void progress(); // below

ApiScope::ApiScope(const char*) {
    g_lock.lock();
    init_once();
    if (g_api_depth++ == 0) {
        if (streams_check()) { streams_unprotect_pinned(); }
        progress();
    }
}

ApiScope::~ApiScope() {
    if (g_api_depth == 1) {
        progress();
        if (g_device_open) {
            set_live_protection(PROT_NONE);
            g_device_open = false;
        }
        if (streams_check()) { streams_protect_pinned(); }
    }
    g_api_depth--;
    g_lock.unlock();
}

// ----------------------------------------------------------------------------
// streams, ops and events

struct Stream;

struct Op {
    uint64_t id;
    Stream* stream;
    std::string what;
    OpFn fn;
    std::vector<std::shared_ptr<Op>> deps; // ops on other streams that must finish first
    bool done = false;
    bool work = false; // a kernel, copy, memset, product or collective (not an event record or wait)
    double t_done = 0.0;
    OpRecordRef rec; // the stream-order check's record (null when the check is off)
};

struct Stream {
    std::deque<std::shared_ptr<Op>> queue; // queued and not done, in stream order
    std::shared_ptr<Op> last;              // the op queued last (done or not)
    bool blocking = true;                  // synchronizes with the legacy default stream
    bool legacy = false;
    int priority = 0;
    // for the stream-order check and messages
    int clock = 0;                         // its clock in every VClock
    VClock vc;                             // ordered before its next op
    std::string name;                      // "stream #2"
    const void* created_pc = nullptr;      // the return address of the call that created it
    const void* destroyed_pc = nullptr;    // of cudaStreamDestroy (a destroyed stream is never freed:
                                           // no later stream gets its handle)
    std::shared_ptr<struct Capture> capture; // the stream capture it takes part in (null: none)
};

struct Event {
    unsigned flags;
    std::shared_ptr<Op> record;        // the latest cudaEventRecord's op (null: never recorded)
    VClock vc;                         // what that record is ordered after (stream-order check)
    const void* destroyed_pc = nullptr; // set by cudaEventDestroy: the handle stays invalid for good
    std::shared_ptr<struct Capture> captured_in; // the latest record was made during this capture
    Stream* captured_stream = nullptr;           // on this stream, after that many of its captured ops
    size_t captured_ops = 0;
};

static Stream g_legacy_stream, g_per_thread_stream;
// The registries live on the heap and are never destroyed: a destroyed stream or event is kept for
// good (its handle stays invalid), and it must stay reachable at exit, after static destructors
// have run, or LeakSanitizer (the --emu-asan builds) reports it as leaked.
static std::set<Stream*>& g_streams = *new std::set<Stream*>;          // created and not destroyed
static std::set<Stream*>& g_draining = *new std::set<Stream*>;         // destroyed with work left
static std::set<Stream*>& g_dead_streams = *new std::set<Stream*>;     // destroyed (never freed)
static std::vector<Stream*>& g_all_streams = *new std::vector<Stream*>; // every stream ever, the two default streams first
static std::set<Event*>& g_events = *new std::set<Event*>;             // created and not destroyed
static std::set<Event*>& g_dead_events = *new std::set<Event*>;        // destroyed (never freed)
static uint64_t g_next_op = 1;

// The stream-order check's clocks: the host's, and the work ops it has not waited for yet.
static VClock g_host;
static std::deque<OpRecordRef> g_unwaited;

const VClock& host_clock() { return g_host; }

static void init_streams() {
    g_legacy_stream.legacy = true;
    g_legacy_stream.name = "the legacy default stream";
    g_per_thread_stream.name = "cudaStreamPerThread";
    g_all_streams = {&g_legacy_stream, &g_per_thread_stream};
    g_legacy_stream.clock = 1;
    g_per_thread_stream.clock = 2;
    g_host.tick(0); // host accesses from time 1: after every op queued before them (their entry 0 is less)
}

// The host waits for everything `vc` holds: it is ordered after those ops from now on.
static void host_joins(const VClock& vc) {
    if (!streams_check()) { return; }
    g_host.join(vc);
    while (!g_unwaited.empty() && g_host.covers(g_unwaited.front()->clock, g_unwaited.front()->time)) {
        g_unwaited.pop_front();
    }
    for (auto it = g_unwaited.begin(); it != g_unwaited.end();) {
        it = g_host.covers((*it)->clock, (*it)->time) ? g_unwaited.erase(it) : std::next(it);
    }
}

// A stream handle as the runtime sees it: null when invalid. A destroyed stream's handle is an
// error with the stream-order check on (its message names where it was destroyed); otherwise
// cudaErrorInvalidResourceHandle, as for any handle that is not a stream.
static Stream* resolve(cudaStream_t s, const char* api = nullptr, OpSource use = OpSource()) {
    if (s == nullptr || s == cudaStreamLegacy) { return &g_legacy_stream; }
    if (s == cudaStreamPerThread) { return &g_per_thread_stream; }
    Stream* st = (Stream*)s;
    if (g_streams.count(st)) { return st; }
    if (api != nullptr && streams_check() && g_dead_streams.count(st)) {
        std::string at = use.file ? std::string(use.file) + ":" + std::to_string(use.line)
                                  : use.pc ? source_line(use.pc) : std::string("an unknown line");
        fatal("streams: %s at %s uses %s (created at %s), which cudaStreamDestroy destroyed at %s: a destroyed stream's "
              "handle is invalid (a GPU may hand it to the next stream created)",
              api, at.c_str(), st->name.c_str(), source_line(st->created_pc).c_str(), source_line(st->destroyed_pc).c_str());
    }
    return nullptr;
}

// An event handle: null when invalid (a destroyed event: an error with the check on, as above).
static Event* resolve_event(cudaEvent_t e, const char* api, const void* pc) {
    Event* ev = (Event*)e;
    if (g_events.count(ev)) { return ev; }
    if (streams_check() && g_dead_events.count(ev)) {
        fatal("streams: %s at %s uses an event that cudaEventDestroy destroyed at %s: a destroyed event's handle is "
              "invalid (a GPU may hand it to the next event created)",
              api, source_line(pc).c_str(), source_line(ev->destroyed_pc).c_str());
    }
    return nullptr;
}

static std::vector<Stream*> all_streams() {
    std::vector<Stream*> v{&g_legacy_stream, &g_per_thread_stream};
    v.insert(v.end(), g_streams.begin(), g_streams.end());
    v.insert(v.end(), g_draining.begin(), g_draining.end());
    return v;
}

static bool pending(const std::shared_ptr<Op>& op) { return op && !op->done; }

// Stream capture (cudaStreamBeginCapture ... cudaStreamEndCapture): the work a capturing stream
// is given is recorded, not queued, and a graph launch queues the recorded ops again, in the order
// they were captured, with the arguments they were captured with (a kernel's by value, a
// cuBLASLt product's pointers and scalars, a copy's addresses). The captured order is one the
// program's own orderings allow (every op was issued after what it waits for), so replaying the
// ops in it on one stream is a valid, if more serial, schedule of CUDA's graph.
struct CapturedOp {
    std::string what;
    OpFn fn;
    OpDetails details;
    bool work;
};
struct Capture {
    Stream* origin = nullptr;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    const void* begun_pc = nullptr;
    std::vector<CapturedOp> ops;
    std::map<Stream*, size_t> last_op;   // each member stream: ops captured up to its latest (1-based)
    std::map<Stream*, size_t> joined;    // each side stream: its ops that the origin waited for
    cudaError_t invalid = cudaSuccess;   // set by an illegal call: the capture's end fails
    std::string why;
};
struct GraphOps {
    std::vector<CapturedOp> ops;
};
static std::set<Capture*>& g_captures = *new std::set<Capture*>;   // under way
static std::set<GraphOps*>& g_graphs = *new std::set<GraphOps*>;  // cudaGraph_t
static std::set<GraphOps*>& g_execs = *new std::set<GraphOps*>;   // cudaGraphExec_t

static std::string capture_text(const Capture* c) {
    return "the stream capture begun on " + c->origin->name + " at " + source_line(c->begun_pc);
}

// A call CUDA does not allow while a capture is under way: one that waits for the device or
// allocates (in the global and thread-local modes: any such call of this host thread; in the
// relaxed mode only one on the capturing stream itself), or one on the capturing stream that
// cannot be captured. The capture is invalidated (its end returns
// cudaErrorStreamCaptureInvalidated), and the call returns `err` with a warning naming it.
static cudaError_t capture_refuses(Stream* st, const char* api, const void* pc, const char* why,
                                   cudaError_t err = cudaErrorStreamCaptureUnsupported) {
    Capture* c = st != nullptr && st->capture ? st->capture.get() : nullptr;
    if (c == nullptr) {
        for (Capture* o : g_captures) {
            if (o->mode != cudaStreamCaptureModeRelaxed) { c = o; }
        }
    }
    if (c == nullptr) { return cudaSuccess; }
    char text[1024];
    snprintf(text, sizeof(text), "%s at %s during %s: %s (%s); the capture is invalidated", api,
             source_line(pc).c_str(), capture_text(c).c_str(), why, err == cudaErrorStreamCaptureImplicit
             ? "cudaErrorStreamCaptureImplicit" : err == cudaErrorStreamCaptureIsolation ? "cudaErrorStreamCaptureIsolation"
             : "cudaErrorStreamCaptureUnsupported");
    warn("%s", text);
    if (c->invalid == cudaSuccess) {
        c->invalid = err;
        c->why = text;
    }
    return err;
}

// Before work is queued on st: the legacy default stream synchronizes with every blocking stream,
// so while a blocking stream captures, work on it would join the capture implicitly (CUDA:
// cudaErrorStreamCaptureImplicit); a capture already invalidated takes no more work.
static cudaError_t capture_check_enqueue(Stream* st, const char* api, const void* pc) {
    if (st->legacy) {
        for (Capture* c : g_captures) {
            if (c->origin->blocking) {
                return capture_refuses(c->origin, api, pc, "work on the legacy default stream while a blocking stream captures",
                                       cudaErrorStreamCaptureImplicit);
            }
        }
    }
    if (st->capture && st->capture->invalid != cudaSuccess) { return cudaErrorStreamCaptureInvalidated; }
    return cudaSuccess;
}

// Queues an op. With the stream-order check, its clock: its stream's, the host's (everything the
// host did before this call), and the legacy default stream's implicit synchronization (an op
// on it is ordered after every blocking stream's work, an op on a blocking stream after the
// legacy stream's), whether or not that work has run yet.
static std::shared_ptr<Op> enqueue_op(Stream* st, const std::string& what, OpFn fn,
                                      std::vector<std::shared_ptr<Op>> deps = {}, OpDetails* details = nullptr,
                                      bool work = false) {
    auto op = std::make_shared<Op>();
    if (st->capture) { // recorded for the graph, not queued: the op stands for nothing to wait for
        Capture* c = st->capture.get();
        c->ops.push_back(CapturedOp{what, std::move(fn), details != nullptr ? *details : OpDetails(), work});
        c->last_op[st] = c->ops.size();
        op->id = 0;
        op->stream = st;
        op->what = what;
        op->done = true;
        return op;
    }
    op->id = g_next_op++;
    op->stream = st;
    op->what = what;
    op->fn = std::move(fn);
    op->deps = std::move(deps);
    op->work = work;
    if (st->legacy) { // the legacy default stream waits for every blocking stream
        for (Stream* o : all_streams()) {
            if (o != st && o->blocking && pending(o->last)) { op->deps.push_back(o->last); }
        }
    } else if (st->blocking && pending(g_legacy_stream.last)) {
        op->deps.push_back(g_legacy_stream.last);
    }
    if (streams_check()) {
        auto rec = std::make_shared<OpRecord>();
        rec->what = what;
        rec->stream = st->name;
        rec->stream_pc = st->created_pc;
        rec->work = work;
        if (details != nullptr) {
            rec->source = details->source;
            rec->ranges = std::move(details->ranges);
            rec->pointers = std::move(details->pointers);
            for (const OpRange& r : rec->ranges) { // buffer starts, for kernels' reach (streams.cpp)
                const void* base = nullptr;
                size_t bytes = 0;
                if (device_range(r.p, 0, &base, &bytes) || pinned_allocation(r.p, &base, &bytes)) { streams_note_start(r.p, base); }
            }
        }
        VClock vc = st->vc;
        vc.join(g_host);
        if (st->legacy) {
            for (Stream* o : g_all_streams) {
                if (o != st && o->blocking) { vc.join(o->vc); }
            }
        } else if (st->blocking) {
            vc.join(g_legacy_stream.vc);
        }
        vc.tick(st->clock);
        rec->clock = st->clock;
        rec->time = vc.at(st->clock);
        rec->vc = vc;
        st->vc = vc;
        g_host.tick(0); // the host's later accesses are not ordered before this op
        op->rec = rec;
        streams_note_pinned(rec);
        if (work) { g_unwaited.push_back(rec); }
    }
    st->queue.push_back(op);
    st->last = op;
    return op;
}

cudaError_t enqueue(cudaStream_t s, const std::string& what, OpFn fn, OpDetails details) {
    ApiScope scope("enqueue");
    Stream* st = resolve(s, what.c_str(), details.source);
    if (st == nullptr) { return cudaErrorInvalidResourceHandle; }
    cudaError_t refused = capture_check_enqueue(st, what.c_str(), details.source.pc);
    if (refused != cudaSuccess) { return refused; }
    enqueue_op(st, what, std::move(fn), {}, &details, true);
    return cudaSuccess;
}

bool stream_capturing(cudaStream_t s) {
    ApiScope scope("stream_capturing");
    Stream* st = resolve(s);
    return st != nullptr && st->capture != nullptr;
}

cudaError_t capture_refused(cudaStream_t s, const char* who, const void* pc, const char* why) {
    ApiScope scope("capture_refused");
    Stream* st = resolve(s);
    return capture_refuses(st, who, pc, why);
}

cudaError_t enqueue(cudaStream_t s, const std::string& what, OpFn fn) { return enqueue(s, what, std::move(fn), OpDetails()); }

static bool trace() {
    static bool t = env_long("EMU_TRACE", 0) != 0;
    return t;
}

// Runs ops until `op` is done or `budget` ops have run (budget < 0: no limit). Returns op->done.
// Everything op depends on runs first: the ops before it on its stream, and their dependencies.
// (op by value: callers pass queue fronts, which the pops below destroy)
static bool advance_to(std::shared_ptr<Op> op, long* budget) {
    while (!op->done) {
        if (*budget == 0) { return false; }
        Stream* st = op->stream;
        std::shared_ptr<Op> head = st->queue.front();
        for (auto& d : head->deps) {
            if (!advance_to(d, budget)) { return false; }
        }
        if (*budget == 0) { return false; }
        double t0 = trace() ? now_s() : 0.0;
        open_device_memory();
        if (!head->fn()) { return false; } // waits for something outside this process
        if (head->rec) { streams_op_ran(head->rec); } // checks and records the bytes it touched
        if (trace()) {
            fprintf(stderr, "cuda-emu trace: op %llu %s (stream %p): %.3f ms\n", (unsigned long long)head->id,
                    head->what.c_str(), (void*)st, (now_s() - t0) * 1e3);
        }
        head->done = true;
        head->t_done = now_s();
        head->fn = nullptr; // release what the op held
        st->queue.pop_front();
        if (*budget > 0) { (*budget)--; }
    }
    return true;
}

static bool head_ready(Stream* st) {
    if (st->queue.empty()) { return false; }
    for (auto& d : st->queue.front()->deps) {
        if (!d->done) { return false; }
    }
    return true;
}

static void forget_drained_streams() { // (the Stream objects stay: their handles must stay invalid)
    for (auto it = g_draining.begin(); it != g_draining.end();) {
        it = (*it)->queue.empty() ? g_draining.erase(it) : std::next(it);
    }
}

static bool g_in_progress = false; // ops do not start the schedule again from inside

// The schedule's turn, at every outermost API call (entry and exit).
static void progress() {
    if (g_in_progress) { return; }
    g_in_progress = true;
    if (schedule() == SCHEDULE_EAGER) {
        for (bool moved = true; moved;) {
            moved = false;
            for (Stream* st : all_streams()) {
                while (head_ready(st)) {
                    long one = 1;
                    if (!advance_to(st->queue.front(), &one)) { break; }
                    moved = true;
                }
            }
        }
    } else if (schedule() == SCHEDULE_RANDOM) {
        // Now and then one stream with work is starved for a while (it runs only when something
        // waits for it), so the others get far ahead of it: that is when a missing event wait
        // between two streams reads data that is not written yet.
        static Stream* starved = nullptr;
        static int starve_calls = 0;
        if (starve_calls > 0) { starve_calls--; }
        if (starve_calls == 0) {
            starved = nullptr;
            std::vector<Stream*> busy;
            for (Stream* st : all_streams()) {
                if (!st->queue.empty()) { busy.push_back(st); }
            }
            if (!busy.empty() && chance(0.05)) {
                starved = busy[random_u64() % busy.size()];
                starve_calls = 20 + (int)(random_u64() % 400);
            }
        }
        while (chance(0.6)) {
            std::vector<Stream*> ready;
            for (Stream* st : all_streams()) {
                if (st != starved && head_ready(st)) { ready.push_back(st); }
            }
            if (ready.empty()) { break; }
            Stream* st = ready[random_u64() % ready.size()];
            long one = 1;
            advance_to(st->queue.front(), &one);
        }
    }
    forget_drained_streams();
    g_in_progress = false;
}

// A blocking wait for op (a synchronization). Polls while the op waits for another process.
static void wait_for(const std::shared_ptr<Op>& op, const char* api) {
    if (!pending(op)) { return; }
    double start = now_s(), limit = (double)env_long("EMU_HANG_TIMEOUT", 600);
    long sleep_us = 20;
    g_in_progress = true;
    for (;;) {
        long unlimited = -1;
        if (advance_to(op, &unlimited)) { break; }
        if (now_s() - start > limit) {
            fatal("%s has waited %.0f s for %s (EMU_HANG_TIMEOUT): a GPU would hang here", api, now_s() - start,
                  op->what.c_str());
        }
        usleep(sleep_us);
        if (sleep_us < 2000) { sleep_us *= 2; }
    }
    g_in_progress = false;
}

// A query found op pending: the answer is cudaErrorNotReady, and the work moves on a little
// (one op under lazy, the schedule's turn otherwise), so that a polling loop finishes.
static cudaError_t not_ready_yet(const std::shared_ptr<Op>& op) {
    if (schedule() == SCHEDULE_LAZY) {
        long one = 1;
        g_in_progress = true;
        advance_to(op, &one);
        g_in_progress = false;
    }
    return ret(cudaErrorNotReady);
}

static void synchronize_device(const char* api) {
    for (Stream* st : all_streams()) { wait_for(st->last, api); }
    for (Stream* st : g_all_streams) { host_joins(st->vc); }
}

// At a successful exit (on_exit, registered at the first API call): work the host never waited for. A GPU
// finishes queued work before the process ends (unless it dies), so a program that exits without
// synchronizing still has its kernels run; under lazy they would not have run yet. Without the
// stream-order check, the ops that never ran are named (one line) and stay unrun. With it, they
// run now, so that their own errors (a broken barrier, a race) show, and then every op the host
// never waited for is an error: whatever it computed, the program never looked at it.
static void at_exit(int status, void*) {
    if (status != 0) { return; } // the program is failing already: its work need not be complete
    ApiScope scope("exit");
    std::vector<std::shared_ptr<Op>> never;
    for (Stream* st : all_streams()) {
        for (auto& op : st->queue) {
            if (op->work) { never.push_back(op); }
        }
    }
    if (!streams_check()) {
        if (never.empty()) { return; }
        std::string list;
        for (size_t i = 0; i < never.size() && i < 3; i++) {
            list += (i ? "; " : "") + never[i]->what + " on " + never[i]->stream->name;
        }
        if (never.size() > 3) { list += "; ..."; }
        fprintf(stderr, "cuda-emu: at exit, %zu queued op%s never ran (the host never waited): %s. A GPU runs queued work "
                "before the process ends: EMU_CHECK=1 runs it here and reports the missing synchronization\n",
                never.size(), never.size() == 1 ? "" : "s", list.c_str());
        return;
    }
    for (Stream* st : all_streams()) { wait_for(st->last, "the end of the program"); }
    std::vector<OpRecordRef> unwaited;
    for (const OpRecordRef& r : g_unwaited) {
        if (!g_host.covers(r->clock, r->time)) { unwaited.push_back(r); }
    }
    if (unwaited.empty()) { return; }
    std::string list;
    for (size_t i = 0; i < unwaited.size() && i < 4; i++) { list += (i ? "; " : "") + op_text(*unwaited[i]); }
    if (unwaited.size() > 4) { list += "; ..."; }
    fatal("streams: the program ended without waiting for %zu queued op%s (%zu had not run yet: they ran at exit): %s. "
          "Synchronize (cudaDeviceSynchronize, cudaStreamSynchronize) before the end",
          unwaited.size(), unwaited.size() == 1 ? "" : "s", never.size(), list.c_str());
}

// A synchronization on one op: the host waits for it (and is ordered after it).
static void host_waits_for(const std::shared_ptr<Op>& op, const char* api) {
    if (op && op->rec) { host_joins(op->rec->vc); }
    wait_for(op, api);
}

// ----------------------------------------------------------------------------
// memory kinds, for copies

enum MemKind { HOST_PAGEABLE, HOST_PINNED, DEVICE };

static const char* kind_name(MemKind k) {
    return k == DEVICE ? "device memory" : k == HOST_PINNED ? "pinned host memory" : "pageable host memory";
}

static MemKind classify(const void* p, size_t n, const char* api, const char* what) {
    if (device_range(p, n)) { return DEVICE; }
    if (pinned_range(p, n)) { return HOST_PINNED; }
    if (allocation_at(p) != nullptr || (g_arena && (const char*)p >= g_arena && (const char*)p < g_arena + g_arena_bytes)) {
        check_device_range(p, n, api, what); // names what is wrong and ends the process
    }
    if (pinned_range(p, 0)) { fatal("%s: %s [%p, +%zu bytes) runs past its pinned host allocation", api, what, p, n); }
    return HOST_PAGEABLE;
}

static bool kind_allows(cudaMemcpyKind kind, MemKind dst, MemKind src) {
    bool dd = dst == DEVICE, sd = src == DEVICE;
    switch (kind) {
    case cudaMemcpyHostToHost: return !dd && !sd;
    case cudaMemcpyHostToDevice: return dd && !sd;
    case cudaMemcpyDeviceToHost: return !dd && sd;
    case cudaMemcpyDeviceToDevice: return dd && sd;
    case cudaMemcpyDefault: return true;
    }
    return false;
}

static const char* copy_kind_name(cudaMemcpyKind kind) {
    switch (kind) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
    }
    return "an unknown cudaMemcpyKind";
}

// One copy, synchronous or not, with the runtime's documented host synchronization:
// - from pageable host memory: the source is staged at the call (the caller may reuse it at
//   once); the synchronous cudaMemcpy first waits for its stream's earlier work;
// - to pageable host memory: the call returns when the copy is done;
// - pinned host memory and device memory: asynchronous for cudaMemcpyAsync (a pinned
//   destination holds the new bytes only once the copy has run), synchronous for cudaMemcpy
//   (except device to device, which does not wait).
static cudaError_t copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s, bool sync, const char* api,
                        const void* caller) {
    OpSource source;
    source.pc = caller;
    Stream* st = resolve(s, api, source);
    if (st == nullptr) { return ret_warn(cudaErrorInvalidResourceHandle, "%s: invalid stream %p", api, (void*)s); }
    if (sync) {
        cudaError_t refused = capture_refuses(st, api, caller, "a synchronous copy");
        if (refused != cudaSuccess) { return ret(refused); }
    }
    cudaError_t refused = capture_check_enqueue(st, api, caller);
    if (refused != cudaSuccess) { return ret(refused); }
    if (n == 0) { return cudaSuccess; }
    MemKind d = classify(dst, n, api, "destination"), c = classify(src, n, api, "source");
    if (st->capture && (d == HOST_PAGEABLE || c == HOST_PAGEABLE)) {
        return ret(capture_refuses(st, api, caller, "a copy to or from pageable host memory cannot be captured"));
    }
    if (!kind_allows(kind, d, c)) {
        return ret_warn(cudaErrorInvalidValue, "%s: %s, but the destination %p is %s and the source %p is %s", api,
                        copy_kind_name(kind), dst, kind_name(d), src, kind_name(c));
    }
    if (d != DEVICE && c != DEVICE) { // host to host: fully synchronous, done by the host itself
        if (sync) { host_joins(st->vc), wait_for(st->last, api); }
        if (streams_check()) {
            if (c == HOST_PINNED) { streams_host_access(src, n, false, caller); }
            if (d == HOST_PINNED) { streams_host_access(dst, n, true, caller); }
        }
        memcpy(dst, src, n);
        return cudaSuccess;
    }
    std::shared_ptr<std::vector<unsigned char>> staged;
    if (c == HOST_PAGEABLE) {
        if (sync) { host_joins(st->vc), wait_for(st->last, api); }
        staged = std::make_shared<std::vector<unsigned char>>((const unsigned char*)src, (const unsigned char*)src + n);
    }
    OpDetails details;
    details.source = source;
    if (c != HOST_PAGEABLE) { details.ranges.push_back(OpRange{src, n, false}); }
    if (d != HOST_PAGEABLE) { details.ranges.push_back(OpRange{dst, n, true}); }
    if (staged) { src = staged->data(); }
    char what[128];
    snprintf(what, sizeof(what), "%s of %zu bytes", api, n);
    std::string who = what;
    auto op = enqueue_op(st, what, [dst, src, n, staged, d, c, who, caller]() {
        if (c == DEVICE) { device_bytes_read(src, n, who.c_str(), caller); } // initcheck
        memcpy(dst, src, n);
        if (d == DEVICE) { device_bytes_written(dst, n); }
        return true;
    }, {}, &details, true);
    bool wait = d == HOST_PAGEABLE || (sync && !(d == DEVICE && c == DEVICE) && c != HOST_PAGEABLE);
    if (wait) { host_waits_for(op, api); }
    return cudaSuccess;
}

static cudaError_t fill(void* p, int value, size_t n, cudaStream_t s, const char* api, const void* pc) {
    OpSource source;
    source.pc = pc;
    Stream* st = resolve(s, api, source);
    if (st == nullptr) { return ret_warn(cudaErrorInvalidResourceHandle, "%s: invalid stream %p", api, (void*)s); }
    cudaError_t refused = capture_check_enqueue(st, api, pc);
    if (refused != cudaSuccess) { return ret(refused); }
    if (n == 0) { return cudaSuccess; }
    MemKind k = classify(p, n, api, "destination");
    if (k == HOST_PAGEABLE) { return ret_warn(cudaErrorInvalidValue, "%s: %p is pageable host memory", api, p); }
    if (k == HOST_PINNED && st->capture) { return ret(capture_refuses(st, api, pc, "a memset of pinned host memory is synchronous")); }
    OpDetails details;
    details.source = source;
    details.ranges.push_back(OpRange{p, n, true});
    auto op = enqueue_op(st, std::string(api), [p, value, n, k]() {
        memset(p, value, n);
        if (k == DEVICE) { device_bytes_written(p, n); }
        return true;
    }, {}, &details, true);
    if (k == HOST_PINNED) { host_waits_for(op, api); } // memset of pinned host memory is synchronous
    return cudaSuccess;
}

} // namespace emu

using namespace emu;

// ----------------------------------------------------------------------------
// the runtime API

extern "C" {

cudaError_t cudaGetLastError(void) {
    ApiScope scope("cudaGetLastError");
    cudaError_t e = tl_last_error;
    tl_last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    ApiScope scope("cudaPeekAtLastError");
    return tl_last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
    switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    default: return "cudaErrorUnknown";
    }
}

const char* cudaGetErrorString(cudaError_t error) {
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorIllegalState: return "the resource is in an illegal state (no capture under way, or one already is)";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureMerge: return "operation would result in a merge of separate capture sequences";
    case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    default: return "unknown error (not produced by the emulator)";
    }
}

cudaError_t cudaGetDeviceCount(int* count) {
    ApiScope scope("cudaGetDeviceCount");
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    ApiScope scope("cudaSetDevice");
    if (device < 0 || device >= device_count()) { return ret(cudaErrorInvalidDevice); }
    g_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
    ApiScope scope("cudaGetDevice");
    *device = g_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
    ApiScope scope("cudaGetDeviceProperties");
    if (device < 0 || device >= device_count()) { return ret(cudaErrorInvalidDevice); }
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "gpt2-zero CUDA emulator (CPU)");
    prop->totalGlobalMem = device_memory_total();
    prop->sharedMemPerBlock = 48 * 1024;
    prop->sharedMemPerBlockOptin = 227 * 1024;
    prop->sharedMemPerMultiprocessor = 228 * 1024;
    prop->regsPerBlock = 65536;
    prop->regsPerMultiprocessor = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 132;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->maxBlocksPerMultiProcessor = 32;
    prop->l2CacheSize = 50 * 1024 * 1024;
    prop->concurrentKernels = 1;
    prop->asyncEngineCount = 2;
    prop->unifiedAddressing = 1;
    prop->canMapHostMemory = 1;
    prop->streamPrioritiesSupported = 1;
    prop->memoryBusWidth = 5120;
    prop->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
    ApiScope scope("cudaDeviceGetAttribute");
    if (device < 0 || device >= device_count()) { return ret(cudaErrorInvalidDevice); }
    switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    default: return ret_warn(cudaErrorNotSupported, "cudaDeviceGetAttribute: attribute %d is not emulated", (int)attr);
    }
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
    ApiScope scope("cudaDeviceGetStreamPriorityRange");
    if (least) { *least = 0; }
    if (greatest) { *greatest = -5; }
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    ApiScope scope("cudaDeviceSynchronize");
    { cudaError_t refused = capture_refuses(nullptr, "cudaDeviceSynchronize", __builtin_return_address(0), "the host waits for the device"); if (refused != cudaSuccess) { return ret(refused); } }
    synchronize_device("cudaDeviceSynchronize");
    return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) {
    ApiScope scope("cudaDeviceReset");
    { cudaError_t refused = capture_refuses(nullptr, "cudaDeviceReset", __builtin_return_address(0), "the host waits for the device"); if (refused != cudaSuccess) { return ret(refused); } }
    synchronize_device("cudaDeviceReset");
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    ApiScope scope("cudaMemGetInfo");
    size_t total = device_memory_total();
    *total_bytes = total;
    *free_bytes = g_device_bytes_live < total ? total - g_device_bytes_live : 0;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
    ApiScope scope("cudaMalloc");
    { cudaError_t refused = capture_refuses(nullptr, "cudaMalloc", __builtin_return_address(0), "an allocation may synchronize the device"); if (refused != cudaSuccess) { return ret(refused); } }
    if (ptr == nullptr) { return ret(cudaErrorInvalidValue); }
    size_t data = (size == 0 ? 1 : size + 255) / 256 * 256;
    // An allocation of 2 MiB or more gets whole 2 MiB pages (transparent huge pages, where the
    // kernel offers them): EMU_PROTECT's mprotect then changes one entry per 2 MiB instead of 512,
    // several hundred times faster for a model's buffers.
    const size_t huge = 2u << 20;
    bool use_huge = data >= huge;
    size_t unit = use_huge ? huge : g_page;
    size_t map = (data + unit - 1) / unit * unit;
    size_t start = (((uintptr_t)g_arena + g_arena_used + unit - 1) / unit * unit) - (uintptr_t)g_arena;
    if (g_device_bytes_live + data > device_memory_total() || start + map + g_page > g_arena_bytes) {
        *ptr = nullptr;
        return ret(cudaErrorMemoryAllocation);
    }
    char* lo = g_arena + start;
    g_arena_used = start + map + g_page; // the page after the allocation stays inaccessible
    if (mprotect(lo, map, PROT_READ | PROT_WRITE) != 0) { fatal("cudaMalloc: cannot map %zu bytes", map); }
    if (use_huge) { madvise(lo, map, MADV_HUGEPAGE); }
    char* base = lo + map - data; // ends at the guard page: reading past the end faults
    memset(lo, 0xFF, map);        // NaN for fp32 and bf16: reading what was never written shows
    POISON(lo, map);
    UNPOISON(base, size);
    check_device_mapped(lo, map);
    Allocation al{base, size, lo, map, true, {nullptr, nullptr, nullptr, nullptr}, 0};
    void* frames[6];
    int n = backtrace(frames, 6); // frames[0] is cudaMalloc itself
    for (int i = 1; i < n && al.ncallers < 4; i++) { al.callers[al.ncallers++] = frames[i]; }
    g_allocations[(uintptr_t)base] = al;
    if (g_protect && !g_device_open) { mprotect(lo, map, PROT_NONE); } // as the others are now
    g_device_bytes_live += data;
    *ptr = base;
    return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
    ApiScope scope("cudaFree");
    { cudaError_t refused = capture_refuses(nullptr, "cudaFree", __builtin_return_address(0), "cudaFree waits for the device"); if (refused != cudaSuccess) { return ret(refused); } }
    if (ptr == nullptr) { return cudaSuccess; }
    synchronize_device("cudaFree"); // cudaFree waits for the device
    auto it = g_allocations.find((uintptr_t)ptr);
    if (it == g_allocations.end() || !it->second.live) {
        return ret_warn(cudaErrorInvalidValue, "cudaFree(%p): not a live cudaMalloc allocation%s", ptr,
                        it != g_allocations.end() ? " (freed already)" : "");
    }
    Allocation& al = it->second;
    al.live = false;
    streams_forget(ptr);
    g_device_bytes_live -= (al.bytes == 0 ? 1 : al.bytes + 255) / 256 * 256;
    UNPOISON(al.map_lo, al.map_bytes);
    madvise(al.map_lo, al.map_bytes, MADV_DONTNEED);
    check_device_unmapped(al.map_lo, al.map_bytes);
    mprotect(al.map_lo, al.map_bytes, PROT_NONE); // use after free faults
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
    ApiScope scope("cudaMallocHost");
    { cudaError_t refused = capture_refuses(nullptr, "cudaMallocHost", __builtin_return_address(0), "an allocation may synchronize the device"); if (refused != cudaSuccess) { return ret(refused); } }
    if (ptr == nullptr) { return ret(cudaErrorInvalidValue); }
    size_t map = ((size == 0 ? 1 : size) + g_page - 1) / g_page * g_page;
    if (g_pinned_arena_used + map + g_page > g_pinned_arena_bytes) {
        *ptr = nullptr;
        return ret(cudaErrorMemoryAllocation);
    }
    char* p = g_pinned_arena + g_pinned_arena_used;
    g_pinned_arena_used += map + g_page; // an inaccessible page follows
    if (mprotect(p, map, PROT_READ | PROT_WRITE) != 0) { return ret(cudaErrorMemoryAllocation); }
    memset(p, 0xFF, size);
    g_pinned[(uintptr_t)p] = size;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
    ApiScope scope("cudaFreeHost");
    { cudaError_t refused = capture_refuses(nullptr, "cudaFreeHost", __builtin_return_address(0), "cudaFreeHost waits for the device"); if (refused != cudaSuccess) { return ret(refused); } }
    if (ptr == nullptr) { return cudaSuccess; }
    synchronize_device("cudaFreeHost");
    auto it = g_pinned.find((uintptr_t)ptr);
    if (it == g_pinned.end()) { return ret_warn(cudaErrorInvalidValue, "cudaFreeHost(%p): not from cudaMallocHost", ptr); }
    size_t map = ((it->second == 0 ? 1 : it->second) + g_page - 1) / g_page * g_page;
    g_pinned.erase(it);
    streams_forget(ptr);
    madvise(ptr, map, MADV_DONTNEED);
    mprotect(ptr, map, PROT_NONE); // never reused: a use after cudaFreeHost faults
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
    ApiScope scope("cudaMemcpy");
    return copy(dst, src, count, kind, nullptr, true, "cudaMemcpy", __builtin_return_address(0));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
    ApiScope scope("cudaMemcpyAsync");
    return copy(dst, src, count, kind, stream, false, "cudaMemcpyAsync", __builtin_return_address(0));
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
    ApiScope scope("cudaMemset");
    return fill(ptr, value, count, nullptr, "cudaMemset", __builtin_return_address(0));
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
    ApiScope scope("cudaMemsetAsync");
    return fill(ptr, value, count, stream, "cudaMemsetAsync", __builtin_return_address(0));
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attr, const void* ptr) {
    ApiScope scope("cudaPointerGetAttributes");
    memset(attr, 0, sizeof(*attr));
    const void* base = nullptr;
    if (device_range(ptr, 0, &base)) {
        attr->type = cudaMemoryTypeDevice;
        attr->devicePointer = (void*)ptr;
    } else if (pinned_range(ptr, 0)) {
        attr->type = cudaMemoryTypeHost;
        attr->hostPointer = (void*)ptr;
        attr->devicePointer = (void*)ptr;
    } else {
        attr->type = cudaMemoryTypeUnregistered;
    }
    attr->device = g_device;
    return cudaSuccess;
}

// --- streams

static cudaError_t create_stream(cudaStream_t* s, unsigned flags, int priority, const void* pc) {
    if (s == nullptr || (flags & ~(unsigned)cudaStreamNonBlocking) != 0) { return ret(cudaErrorInvalidValue); }
    Stream* st = new Stream();
    st->blocking = !(flags & cudaStreamNonBlocking);
    st->priority = priority < -5 ? -5 : (priority > 0 ? 0 : priority); // clamped, as documented
    st->clock = (int)g_all_streams.size() + 1;                          // 1, 2: the default streams
    st->name = "stream #" + std::to_string(g_all_streams.size() - 1);   // #1 is the first one created
    st->created_pc = pc;
    g_all_streams.push_back(st);
    g_streams.insert(st);
    *s = (cudaStream_t)st;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
    ApiScope scope("cudaStreamCreate");
    return create_stream(s, 0, 0, __builtin_return_address(0));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
    ApiScope scope("cudaStreamCreateWithFlags");
    return create_stream(s, flags, 0, __builtin_return_address(0));
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
    ApiScope scope("cudaStreamCreateWithPriority");
    return create_stream(s, flags, priority, __builtin_return_address(0));
}

static OpSource at_pc(const void* pc) {
    OpSource s;
    s.pc = pc;
    return s;
}

cudaError_t cudaStreamGetPriority(cudaStream_t s, int* priority) {
    ApiScope scope("cudaStreamGetPriority");
    Stream* st = resolve(s, "cudaStreamGetPriority", at_pc(__builtin_return_address(0)));
    if (st == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    *priority = st->priority;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    ApiScope scope("cudaStreamDestroy");
    Stream* st = resolve(s, "cudaStreamDestroy", at_pc(__builtin_return_address(0)));
    if (st == nullptr || st == &g_legacy_stream || st == &g_per_thread_stream) { return ret(cudaErrorInvalidResourceHandle); }
    g_streams.erase(st); // its queued work still runs (the runtime releases the stream after it)
    g_draining.insert(st);
    g_dead_streams.insert(st);
    st->destroyed_pc = __builtin_return_address(0);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    ApiScope scope("cudaStreamSynchronize");
    Stream* st = resolve(s, "cudaStreamSynchronize", at_pc(__builtin_return_address(0)));
    if (st == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    { cudaError_t refused = capture_refuses(st, "cudaStreamSynchronize", __builtin_return_address(0), "the host waits for the stream"); if (refused != cudaSuccess) { return ret(refused); } }
    host_joins(st->vc);
    wait_for(st->last, "cudaStreamSynchronize");
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
    ApiScope scope("cudaStreamQuery");
    Stream* st = resolve(s, "cudaStreamQuery", at_pc(__builtin_return_address(0)));
    if (st == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    { cudaError_t refused = capture_refuses(st, "cudaStreamQuery", __builtin_return_address(0), "the host asks whether the stream is done"); if (refused != cudaSuccess) { return ret(refused); } }
    if (!pending(st->last)) { // complete: the host now knows it is
        host_joins(st->vc);
        return cudaSuccess;
    }
    return not_ready_yet(st->last);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
    ApiScope scope("cudaStreamWaitEvent");
    const void* pc = __builtin_return_address(0);
    Stream* st = resolve(s, "cudaStreamWaitEvent", at_pc(pc));
    Event* ev = resolve_event(e, "cudaStreamWaitEvent", pc);
    if (st == nullptr || ev == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    if (flags != 0) { return ret(cudaErrorInvalidValue); }
    { cudaError_t refused = capture_check_enqueue(st, "cudaStreamWaitEvent", pc); if (refused != cudaSuccess) { return ret(refused); } }
    if (ev->captured_in) { // a wait on a record made in a capture: a fork (st joins it) or a join
        Capture* c = ev->captured_in.get();
        if (!g_captures.count(c)) {
            return ret_warn(cudaErrorStreamCaptureUnsupported, "cudaStreamWaitEvent at %s: the event was recorded during a "
                            "stream capture that has ended", source_line(pc).c_str());
        }
        if (st->capture && st->capture != ev->captured_in) {
            return ret(capture_refuses(st, "cudaStreamWaitEvent", pc, "the event belongs to another capture (merging "
                                       "captures is not emulated)", cudaErrorStreamCaptureMerge));
        }
        if (!st->capture) { // fork: st captures into the same graph from now on
            st->capture = ev->captured_in;
            c->last_op.emplace(st, 0);
        }
        size_t& j = c->joined[ev->captured_stream];
        if (ev->captured_ops > j) { j = ev->captured_ops; }
        return cudaSuccess; // the captured order already puts the record's work first
    }
    if (st->capture && pending(ev->record)) {
        return ret(capture_refuses(st, "cudaStreamWaitEvent", pc, "a capturing stream waits for an event recorded outside the "
                                   "capture", cudaErrorStreamCaptureIsolation));
    }
    st->vc.join(ev->vc); // the stream's later work is ordered after the record (whether it ran or not)
    if (pending(ev->record)) { // the wait is on the record made before this call, not later ones
        OpDetails details;
        details.source.pc = pc;
        enqueue_op(st, "cudaStreamWaitEvent", [] { return true; }, {ev->record}, &details);
    }
    return cudaSuccess;
}

// --- events

static cudaError_t create_event(cudaEvent_t* e, unsigned flags) {
    unsigned known = cudaEventDisableTiming | cudaEventBlockingSync;
    if (e == nullptr) { return ret(cudaErrorInvalidValue); }
    if (flags & ~known) {
        return ret_warn(cudaErrorInvalidValue, "cudaEventCreateWithFlags: flags 0x%x are not emulated", flags & ~known);
    }
    Event* ev = new Event();
    ev->flags = flags;
    g_events.insert(ev);
    *e = (cudaEvent_t)ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
    ApiScope scope("cudaEventCreate");
    return create_event(e, 0);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
    ApiScope scope("cudaEventCreateWithFlags");
    return create_event(e, flags);
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    ApiScope scope("cudaEventDestroy");
    Event* ev = resolve_event(e, "cudaEventDestroy", __builtin_return_address(0));
    if (ev == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    g_events.erase(ev); // ops waiting on its record keep their own reference
    g_dead_events.insert(ev); // never freed: no later event gets its handle
    ev->destroyed_pc = __builtin_return_address(0);
    ev->record = nullptr;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    ApiScope scope("cudaEventRecord");
    const void* pc = __builtin_return_address(0);
    Event* ev = resolve_event(e, "cudaEventRecord", pc);
    Stream* st = resolve(s, "cudaEventRecord", at_pc(pc));
    if (ev == nullptr || st == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    { cudaError_t refused = capture_check_enqueue(st, "cudaEventRecord", pc); if (refused != cudaSuccess) { return ret(refused); } }
    if (st->capture) { // a node of the graph: other streams may fork from it or join on it
        ev->captured_in = st->capture;
        ev->captured_stream = st;
        ev->captured_ops = st->capture->last_op[st];
        ev->record = nullptr;
        return cudaSuccess;
    }
    ev->captured_in = nullptr;
    OpDetails details;
    details.source.pc = pc;
    ev->record = enqueue_op(st, "cudaEventRecord", [] { return true; }, {}, &details);
    if (ev->record->rec) { ev->vc = ev->record->rec->vc; }
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
    ApiScope scope("cudaEventQuery");
    Event* ev = resolve_event(e, "cudaEventQuery", __builtin_return_address(0));
    if (ev == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    { cudaError_t refused = capture_refuses(nullptr, "cudaEventQuery", __builtin_return_address(0), "the host asks whether an event is done"); if (refused != cudaSuccess) { return ret(refused); } }
    if (ev->captured_in) {
        return ret_warn(cudaErrorStreamCaptureUnsupported, "cudaEventQuery at %s: the event's last record was made during a stream capture "
                        "(a node of the graph, not a record the host can wait for)", source_line(__builtin_return_address(0)).c_str());
    }
    if (!pending(ev->record)) { // done, or never recorded: the host now knows it is
        host_joins(ev->vc);
        return cudaSuccess;
    }
    return not_ready_yet(ev->record);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    ApiScope scope("cudaEventSynchronize");
    Event* ev = resolve_event(e, "cudaEventSynchronize", __builtin_return_address(0));
    if (ev == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    { cudaError_t refused = capture_refuses(nullptr, "cudaEventSynchronize", __builtin_return_address(0), "the host waits for an event"); if (refused != cudaSuccess) { return ret(refused); } }
    if (ev->captured_in) {
        return ret_warn(cudaErrorStreamCaptureUnsupported, "cudaEventSynchronize at %s: the event's last record was made during a stream capture "
                        "(a node of the graph, not a record the host can wait for)", source_line(__builtin_return_address(0)).c_str());
    }
    host_joins(ev->vc);
    wait_for(ev->record, "cudaEventSynchronize");
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    ApiScope scope("cudaEventElapsedTime");
    const void* pc = __builtin_return_address(0);
    Event *a = resolve_event(start, "cudaEventElapsedTime", pc), *b = resolve_event(end, "cudaEventElapsedTime", pc);
    if (a == nullptr || b == nullptr || ms == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    if ((a->flags | b->flags) & cudaEventDisableTiming) { return ret(cudaErrorInvalidResourceHandle); }
    if (!a->record || !b->record) { return ret(cudaErrorInvalidResourceHandle); }
    if (!a->record->done || !b->record->done) { return ret(cudaErrorNotReady); }
    *ms = (float)((b->record->t_done - a->record->t_done) * 1000.0);
    return cudaSuccess;
}

// --- kernels

cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
    ApiScope scope("cudaFuncSetAttribute");
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) { return ret(set_max_dynamic_shared(func, value)); }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) { return cudaSuccess; } // a hint
    return ret_warn(cudaErrorNotSupported, "cudaFuncSetAttribute: attribute %d is not emulated", (int)attr);
}

// --- the driver's entry points: cuTensorMapEncodeTiled only (ptx.cpp)

CUresult emu_cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                    const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static cudaError_t driver_entry_point(const char* symbol, void** fn, cudaDriverEntryPointQueryResult* status) {
    if (fn == nullptr || symbol == nullptr) { return ret(cudaErrorInvalidValue); }
    if (strcmp(symbol, "cuTensorMapEncodeTiled") == 0) {
        *fn = (void*)&emu_cuTensorMapEncodeTiled;
        if (status) { *status = cudaDriverEntryPointSuccess; }
        return cudaSuccess;
    }
    *fn = nullptr;
    if (status) { *status = cudaDriverEntryPointSymbolNotFound; }
    fprintf(stderr, "cuda-emu: the driver entry point %s is not emulated (cuTensorMapEncodeTiled is)\n", symbol);
    return cudaSuccess; // as the runtime: success, with the status saying the symbol was not found
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status) {
    ApiScope scope("cudaGetDriverEntryPointByVersion");
    (void)version;
    (void)flags;
    return driver_entry_point(symbol, fn, status);
}

// --- stream capture and graphs (the section "Stream capture" above enqueue_op)

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    ApiScope scope("cudaStreamBeginCapture");
    const void* pc = __builtin_return_address(0);
    Stream* st = resolve(s, "cudaStreamBeginCapture", at_pc(pc));
    if (st == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    if (st == &g_legacy_stream || st == &g_per_thread_stream) {
        return ret_warn(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture at %s: %s cannot be captured",
                        source_line(pc).c_str(), st->name.c_str());
    }
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal && mode != cudaStreamCaptureModeRelaxed) {
        return ret(cudaErrorInvalidValue);
    }
    if (st->capture) {
        return ret_warn(cudaErrorIllegalState, "cudaStreamBeginCapture at %s: %s is capturing already (%s)",
                        source_line(pc).c_str(), st->name.c_str(), capture_text(st->capture.get()).c_str());
    }
    auto c = std::make_shared<Capture>();
    c->origin = st;
    c->mode = mode;
    c->begun_pc = pc;
    c->last_op[st] = 0;
    st->capture = c;
    g_captures.insert(c.get());
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
    ApiScope scope("cudaStreamEndCapture");
    const void* pc = __builtin_return_address(0);
    Stream* st = resolve(s, "cudaStreamEndCapture", at_pc(pc));
    if (st == nullptr || graph == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    *graph = nullptr;
    if (!st->capture) {
        return ret_warn(cudaErrorIllegalState, "cudaStreamEndCapture at %s: %s is not capturing", source_line(pc).c_str(),
                        st->name.c_str());
    }
    std::shared_ptr<Capture> c = st->capture;
    if (c->origin != st) {
        capture_refuses(st, "cudaStreamEndCapture", pc, "not the stream the capture began on", cudaErrorStreamCaptureUnmatched);
        return ret(cudaErrorStreamCaptureUnmatched);
    }
    std::string unjoined;
    for (auto& m : c->last_op) { // every side stream's captured work must be waited for by the origin
        if (m.first != st && m.second > c->joined[m.first]) { unjoined = m.first->name; }
        m.first->capture = nullptr;
    }
    g_captures.erase(c.get());
    if (c->invalid != cudaSuccess) {
        warn("cudaStreamEndCapture at %s: the capture was invalidated by: %s", source_line(pc).c_str(), c->why.c_str());
        return ret(cudaErrorStreamCaptureInvalidated);
    }
    if (!unjoined.empty()) {
        return ret_warn(cudaErrorStreamCaptureUnjoined, "cudaStreamEndCapture at %s: %s forked from %s and its last work "
                        "was not joined back (no wait on an event recorded after it)", source_line(pc).c_str(),
                        unjoined.c_str(), capture_text(c.get()).c_str());
    }
    GraphOps* g = new GraphOps{std::move(c->ops)};
    g_graphs.insert(g);
    *graph = (cudaGraph_t)g;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus* status) {
    ApiScope scope("cudaStreamIsCapturing");
    Stream* st = resolve(s, "cudaStreamIsCapturing", at_pc(__builtin_return_address(0)));
    if (st == nullptr || status == nullptr) { return ret(cudaErrorInvalidResourceHandle); }
    *status = !st->capture ? cudaStreamCaptureStatusNone
              : st->capture->invalid != cudaSuccess ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

// Only the count (nodes == NULL): one node per captured op.
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
    ApiScope scope("cudaGraphGetNodes");
    GraphOps* g = (GraphOps*)graph;
    if (!g_graphs.count(g) || count == nullptr) { return ret(cudaErrorInvalidValue); }
    if (nodes != nullptr) { return ret_warn(cudaErrorNotSupported, "cudaGraphGetNodes: only the count (nodes = NULL) is emulated"); }
    *count = g->ops.size();
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
    ApiScope scope("cudaGraphInstantiate");
    GraphOps* g = (GraphOps*)graph;
    if (exec == nullptr || !g_graphs.count(g)) { return ret(cudaErrorInvalidValue); }
    if (flags != 0) { return ret_warn(cudaErrorInvalidValue, "cudaGraphInstantiate: flags 0x%llx are not emulated", flags); }
    GraphOps* x = new GraphOps{g->ops}; // an executable graph is a copy: later changes to the graph do not reach it
    g_execs.insert(x);
    *exec = (cudaGraphExec_t)x;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    ApiScope scope("cudaGraphLaunch");
    const void* pc = __builtin_return_address(0);
    GraphOps* x = (GraphOps*)exec;
    Stream* st = resolve(s, "cudaGraphLaunch", at_pc(pc));
    if (st == nullptr || !g_execs.count(x)) { return ret(cudaErrorInvalidResourceHandle); }
    if (st->capture) { return ret(capture_refuses(st, "cudaGraphLaunch", pc, "a graph launched into a capture (a child graph) is not emulated")); }
    { cudaError_t refused = capture_check_enqueue(st, "cudaGraphLaunch", pc); if (refused != cudaSuccess) { return ret(refused); } }
    for (const CapturedOp& op : x->ops) { // in captured order, each with the arguments it was captured with
        OpDetails details = op.details;
        enqueue_op(st, op.what, op.fn, {}, &details, op.work);
    }
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    ApiScope scope("cudaGraphExecDestroy");
    GraphOps* x = (GraphOps*)exec;
    if (!g_execs.count(x)) { return ret(cudaErrorInvalidValue); }
    g_execs.erase(x); // launches already queued keep their own copies of the ops
    delete x;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    ApiScope scope("cudaGraphDestroy");
    GraphOps* g = (GraphOps*)graph;
    if (!g_graphs.count(g)) { return ret(cudaErrorInvalidValue); }
    g_graphs.erase(g);
    delete g;
    return cudaSuccess;
}

} // extern "C"
