/*
What every load and store of a kernel is checked against, and counted for.

The hooks. nvcc-cpu --emu-check compiles every .cu file with GCC's ThreadSanitizer instrumentation
(-fsanitize=thread, without function entry/exit calls) but links no ThreadSanitizer runtime:
this file implements the functions the instrumentation calls. Before each load or store that may
touch memory outside its own stack frame, the compiled code calls __tsan_read4(address),
__tsan_write16(address), __tsan_read_range(address, bytes) (a struct copy), and for every atomic
operation __tsan_atomic32_fetch_add(address, value, order) and friends, which perform the atomic
operation here. So each access arrives with its address, its size, whether it writes, whether it
is atomic, whether the compiler knew it to be naturally aligned, and its return address, which
addr2line turns into the source line (only when a report needs it). Why this mechanism:
- it sees atomics as atomics (racecheck needs that; -fsanitize=kernel-address's callbacks do
  not tell them apart), and 16-byte vector accesses as one access;
- it needs no second compiler (clang's -fsanitize-coverage=trace-loads/stores would) and no
  rewriting of source code;
- AddressSanitizer cannot be combined with it (--emu-asan builds have no hooks).
Programs built without --emu-check have no hooks: there EMU_CHECK and EMU_COUNTERS refuse to
run. A hook returns at once unless its OS thread runs a block and a check or counter is on (one
thread-local flag), so host code in .cu files, and kernels with everything off, pay one call
per access (and the optimizations it prevents: about a quarter of a test's time, hence the
separate builds). What the hooks do not see: memcpy/memset calls inside kernels, and code
outside the .cu files (this library: copies, cuBLASLt and NCCL tell the checks what they touch
themselves; ptx.cpp tells them what cp.async and ldmatrix touch, check_ptx_access).

The checks (EMU_CHECK=1 for all of them, or a list: EMU_CHECK=memcheck,racecheck):
- memcheck: a global access must lie inside one live cudaMalloc allocation, exactly
  [start, start + size) (the 256-byte rounding slack and the bytes before the start are errors);
  a 2/4/8/16-byte access must be naturally aligned (a GPU raises "misaligned address"); a shared
  access must lie inside one variable: the dynamic array or one static __shared__ variable
  (kernel.cpp puts 256 unused bytes between them, and the block's shared memory ends at an
  inaccessible page).
- initcheck: one "written" bit per device byte, set by kernel stores and by copies, memsets,
  cuBLASLt and NCCL outputs; a kernel load, a copy, product or collective reading a byte that was
  never written is an error. Shared memory likewise, per block.
- racecheck, shared memory: two threads touching one 4-byte word between the same two
  __syncthreads, at least one writing and not both atomically, are an error, unless they are in
  the same warp and a warp intrinsic that both joined (__syncwarp, a shuffle...) came between
  them. Each thread carries a vector clock over its warp's lanes, joined at every warp intrinsic;
  each word keeps its last writer, its last two readers (of different threads) and the set of
  warps that read it or used atomics on it in the current interval (a race within a warp whose
  only witness was an earlier reader than those two can be missed).
- racecheck, global memory: within one launch, a word written without atomics by one block and
  touched by another is an error (blocks run in no defined order and cannot wait for each other).
- streams: the stream-order check, which lives in streams.cpp and needs no hooks (EMU_CHECK=streams
  or EMU_CHECK_STREAMS=1 turn it on alone, in any build; EMU_CHECK_STREAMS=0 turns it off).
Every error is fatal: one "cuda-emu: <check>: ..." line naming the kernel, block, thread, the
source line(s) and the allocation or shared variable, then exit status 86.

The counters (EMU_COUNTERS=FILE, for the performance model): per launch, warp-level global
load/store requests and the 32-byte sectors each touches, unique sectors read and written by the
launch (an estimate of DRAM traffic), shared-memory requests and their bank-conflict wavefronts,
atomics, and tensor-core FLOPs. A warp-level request is the accesses of a warp's lanes at one
instruction (one return address) in one step: the lanes of a warp run one after another between
synchronization points (a warp intrinsic, __syncthreads, exit), and the k-th time lane i runs an
instruction in a step is taken to be the same warp instruction as the k-th time lane j runs it, as
in SIMT execution of the same loop trip. The columns are described in the README.
*/
#include "emu_device.h"
#include "emu_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace emu {

// ----------------------------------------------------------------------------
// settings

static void parse_check_list(CheckSettings& s, const char* e) {
    std::string list(e);
    if (list == "0" || list.empty()) { return; }
    if (list == "1" || list == "all") {
        s.memcheck = s.initcheck = s.racecheck = s.streams = s.protect = true;
        return;
    }
    size_t start = 0;
    while (start <= list.size()) {
        size_t end = list.find(',', start);
        if (end == std::string::npos) { end = list.size(); }
        std::string name = list.substr(start, end - start);
        if (name == "memcheck") { s.memcheck = true; }
        else if (name == "initcheck") { s.initcheck = true; }
        else if (name == "racecheck") { s.racecheck = true; }
        else if (name == "streams") { s.streams = true; } // the stream-order check (streams.cpp)
        else { fatal("EMU_CHECK=%s: expected 0, 1 (all checks), or a comma list of memcheck, initcheck, racecheck, streams", e); }
        start = end + 1;
    }
}

// Read once, before any kernel runs (the runtime's first call asks); the hooks then read g_set.
static CheckSettings g_set;

const CheckSettings& check_settings() {
    static bool read = false;
    if (!read) {
        read = true;
        const char* e = getenv("EMU_CHECK");
        if (e != nullptr) { parse_check_list(g_set, e); }
        const char* c = getenv("EMU_COUNTERS");
        g_set.counters = c != nullptr && *c != '\0';
    }
    return g_set;
}

// Set by every .cu file the hooks were compiled into (emu_device.h), so that EMU_CHECK in a
// program without them (an --emu-asan build) is refused instead of checking nothing.
static bool g_hooked_unit = false;
bool note_instrumented_unit() {
    g_hooked_unit = true;
    return true;
}

void refuse_without_hooks() {
    if (check_settings().any() && !g_hooked_unit) {
        fatal("EMU_CHECK/EMU_COUNTERS need the access hooks, which this program was built without: rebuild it with "
              "nvcc-cpu --emu-check (the Makefile's *_emu_check programs)");
    }
}

// ----------------------------------------------------------------------------
// source lines: addr2line on the object holding a code address, cached

struct ObjectOf {
    uintptr_t pc, bias = 0;
    std::string path;
    bool found = false;
};

static int find_object(struct dl_phdr_info* info, size_t, void* data) {
    ObjectOf* o = (ObjectOf*)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) { continue; }
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        if (o->pc >= lo && o->pc < lo + ph.p_memsz) {
            o->bias = info->dlpi_addr;
            o->path = info->dlpi_name ? info->dlpi_name : "";
            o->found = true;
            return 1;
        }
    }
    return 0;
}

// Frames inside these files are the emulator's or the toolkit's: a report names the first
// frame outside them (the kernel's line, not atomicAdd's inside emu_device.h).
static bool library_frame(const std::string& file) {
    static const char* parts[] = {"emu_device.h", "/cuda/include/", "/cuda/targets/", "/include/c++/", "/usr/include/",
                                  "/emu/runtime.cpp", "/emu/kernel.cpp", "/emu/check.cpp"};
    for (const char* p : parts) {
        if (file.find(p) != std::string::npos) { return true; }
    }
    return false;
}

// All frames (innermost first) of the inline chain at pc: "file:line" each.
static std::vector<std::string> frames_at(const void* pc) {
    ObjectOf o;
    o.pc = (uintptr_t)pc - 1; // a return address: the call is the byte before
    dl_iterate_phdr(find_object, &o);
    std::vector<std::string> out;
    if (!o.found) { return out; }
    std::string path = o.path;
    if (path.empty()) {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0) { return out; }
        exe[n] = '\0';
        path = exe;
    }
    char cmd[4600];
    snprintf(cmd, sizeof(cmd), "addr2line -i -e '%s' 0x%lx 2>/dev/null", path.c_str(), (unsigned long)(o.pc - o.bias));
    FILE* f = popen(cmd, "r");
    if (f == nullptr) { return out; }
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        std::string s(line);
        while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) { s.pop_back(); }
        size_t d = s.find(" (discriminator");
        if (d != std::string::npos) { s = s.substr(0, d); }
        if (!s.empty() && s.rfind("??", 0) != 0) { out.push_back(s); }
    }
    pclose(f);
    return out;
}

bool program_code(const void* pc) {
    ObjectOf o;
    o.pc = (uintptr_t)pc - 1;
    dl_iterate_phdr(find_object, &o);
    return o.found && o.path.empty();
}

std::string source_line(const void* pc) {
    static std::mutex m;
    static std::map<const void*, std::string> cache;
    std::lock_guard<std::mutex> lock(m);
    auto it = cache.find(pc);
    if (it != cache.end()) { return it->second; }
    std::vector<std::string> frames = frames_at(pc);
    char cwd[4096];
    std::string prefix = getcwd(cwd, sizeof(cwd)) != nullptr ? std::string(cwd) + "/" : std::string();
    auto relative = [&](std::string t) { // paths relative to the working directory below it: llmc/x.cuh
        if (t.rfind("./", 0) == 0) { t = t.substr(2); }
        if (!prefix.empty() && t.rfind(prefix, 0) == 0) { t = t.substr(prefix.size()); }
        return t;
    };
    // the first frame outside the library; then, where that frame is a function inlined into
    // others (an inline PTX wrapper of llmc/mma.cuh inside an attention kernel), the lines that
    // called it, innermost first: "llmc/mma.cuh:40 (called from llmc/attention.cuh:212)"
    std::string text, callers;
    for (size_t i = 0; i < frames.size(); i++) {
        if (library_frame(frames[i])) { continue; }
        if (text.empty()) {
            text = relative(frames[i]);
        } else {
            callers += (callers.empty() ? " (called from " : ", from ") + relative(frames[i]);
        }
    }
    if (text.empty()) {
        text = frames.empty() ? "an unknown line (no line table: build with -g)" : relative(frames.back());
    }
    if (!callers.empty()) { text += callers + ")"; }
    cache[pc] = text;
    return text;
}

// ----------------------------------------------------------------------------
// device memory: the arena runtime.cpp reserves, and the shadows that parallel it

static uintptr_t g_arena_lo = 0;
static size_t g_arena_bytes = 0;
static unsigned char* g_init_shadow = nullptr; // 1 bit per arena byte: written (initcheck)
static uint64_t* g_race_shadow = nullptr;      // 2 words per arena word (racecheck, below)
static uint32_t* g_sector_shadow = nullptr;    // 2 stamps per 32-byte sector: last launch that read, wrote it

static void* reserve(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) { fatal("cannot reserve %zu bytes of address space for the checks' shadow memory", bytes); }
    return p;
}

void check_device_arena(char* lo, size_t bytes) {
    g_arena_lo = (uintptr_t)lo;
    g_arena_bytes = bytes;
    const CheckSettings& s = check_settings();
    if (s.initcheck) { g_init_shadow = (unsigned char*)reserve(bytes / 8); }
    if (s.racecheck) { g_race_shadow = (uint64_t*)reserve(bytes / 4 * 16); }
    if (s.counters) { g_sector_shadow = (uint32_t*)reserve(bytes / 32 * 8); }
}

// The shadow of [lo, lo + bytes) of the arena becomes usable (zero: never written, no stamps).
static void map_shadow(void* shadow, size_t per_arena_byte_num, size_t per_arena_byte_den, uintptr_t off, size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)shadow + off / per_arena_byte_den * per_arena_byte_num;
    uintptr_t b = (uintptr_t)shadow + (off + bytes + per_arena_byte_den - 1) / per_arena_byte_den * per_arena_byte_num;
    a &= ~(uintptr_t)(page - 1);
    b = (b + page - 1) & ~(uintptr_t)(page - 1);
    if (mprotect((void*)a, b - a, PROT_READ | PROT_WRITE) != 0) { fatal("cannot map shadow memory for the checks"); }
}

// The shadow pages that lie wholly inside the shadow of [off, off + bytes) of the arena are
// given back (read as zero again): freed device memory is never reused.
static void unmap_shadow(void* shadow, size_t per_arena_byte_num, size_t per_arena_byte_den, uintptr_t off, size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)shadow + off / per_arena_byte_den * per_arena_byte_num;
    uintptr_t b = (uintptr_t)shadow + (off + bytes) / per_arena_byte_den * per_arena_byte_num;
    a = (a + page - 1) & ~(uintptr_t)(page - 1);
    b &= ~(uintptr_t)(page - 1);
    if (b > a) { madvise((void*)a, b - a, MADV_DONTNEED); }
}

void check_device_unmapped(char* lo, size_t bytes) {
    uintptr_t off = (uintptr_t)lo - g_arena_lo;
    if (g_init_shadow) { unmap_shadow(g_init_shadow, 1, 8, off, bytes); }
    if (g_race_shadow) { unmap_shadow(g_race_shadow, 16, 4, off, bytes); }
    if (g_sector_shadow) { unmap_shadow(g_sector_shadow, 8, 32, off, bytes); }
}

void check_device_mapped(char* lo, size_t bytes) {
    uintptr_t off = (uintptr_t)lo - g_arena_lo;
    if (g_init_shadow) { map_shadow(g_init_shadow, 1, 8, off, bytes); }
    if (g_race_shadow) { map_shadow(g_race_shadow, 16, 4, off, bytes); }
    if (g_sector_shadow) { map_shadow(g_sector_shadow, 8, 32, off, bytes); }
}

// ----------------------------------------------------------------------------
// what the OS thread runs now: one block of one launch, one CUDA thread at a time

enum : unsigned { A_READ = 1, A_WRITE = 2, A_ATOMIC = 4, A_ALIGNED = 8 };

struct Access { // one thread's access, as racecheck remembers it
    int32_t thread = -1;  // index in the block, -1: none
    uint32_t clock = 0;   // the thread's own vector clock entry at the access
    const void* pc = nullptr;
    uint32_t bytes = 0;   // which of the word's 4 bytes it touched (bit i: byte i)
};

struct SharedWord { // racecheck's record of one 4-byte word of shared memory
    uint32_t interval = 0;  // the barrier interval the fields below belong to (older: stale)
    uint32_t readers[4] = {0, 0, 0, 0}; // per byte, the warps that read it (not atomically) in the interval
    uint32_t atomics[4] = {0, 0, 0, 0}; // per byte, the warps that used atomics on it
    Access writer, writer2; // the last plain write, and an earlier one of other bytes not ordered before it
    Access reader, reader2; // the last plain read, and the last one by another thread than it
};

struct AsyncWord { // sm_90a: one 4-byte word of shared memory between the generic and async proxies
    uint32_t stamp = 0;   // the block it belongs to (older: stale)
    int32_t thread = -1;  // the last generic write: its thread, -1 none
    uint32_t epoch = 0;   // that thread's fence.proxy.async count at the write
    uint32_t token = 0;   // bytes a cp.async.bulk.tensor landed (ptx.cpp's token), 0 none
    const void* pc = nullptr;
};

struct Group { // the lanes' accesses at one warp instruction in one step (counters)
    bool shared, write;
    std::vector<uint64_t> units; // 32-byte sectors (global) or 4-byte words (shared)
};

struct GroupKey {
    const void* pc;
    uint32_t k;
    bool operator==(const GroupKey& o) const { return pc == o.pc && k == o.k; }
};
struct GroupKeyHash {
    size_t operator()(const GroupKey& g) const { return std::hash<const void*>()(g.pc) * 31 + g.k; }
};

struct LaunchCounters {
    uint64_t gld_requests = 0, gld_sectors = 0, gst_requests = 0, gst_sectors = 0;
    uint64_t dram_read_sectors = 0, dram_write_sectors = 0;
    uint64_t shld_requests = 0, shld_wavefronts = 0, shst_requests = 0, shst_wavefronts = 0;
    uint64_t global_atomics = 0, shared_atomics = 0, mma_flops = 0, wgmma_flops = 0, tma_bytes = 0;
    void add(const LaunchCounters& o) {
        gld_requests += o.gld_requests, gld_sectors += o.gld_sectors, gst_requests += o.gst_requests;
        gst_sectors += o.gst_sectors, dram_read_sectors += o.dram_read_sectors, dram_write_sectors += o.dram_write_sectors;
        shld_requests += o.shld_requests, shld_wavefronts += o.shld_wavefronts, shst_requests += o.shst_requests;
        shst_wavefronts += o.shst_wavefronts, global_atomics += o.global_atomics, shared_atomics += o.shared_atomics;
        mma_flops += o.mma_flops, wgmma_flops += o.wgmma_flops, tma_bytes += o.tma_bytes;
    }
};

struct Context {
    const LaunchInfo* launch = nullptr;
    uint3 block{0, 0, 0};
    uint32_t block_linear = 0;
    int nthreads = 0, thread = 0;
    // shared memory: [sh_lo, sh_lo + sh_capacity), then the guard page (sh_span covers both)
    uintptr_t sh_lo = 0;
    size_t sh_capacity = 0, sh_span = 0, sh_used = 0;
    std::vector<uint8_t> sh_region; // per byte: 0 none, 1 the dynamic array, k + 1 the k-th static variable
    std::vector<uint8_t> sh_written; // per byte (initcheck)
    std::vector<SharedWord> sh_words; // per word (racecheck)
    std::vector<AsyncWord> sh_async;  // per word (racecheck: the proxies, bulk copies' phases)
    std::vector<uint32_t> proxy_fences; // per thread: its fence.proxy.async count
    uint32_t block_stamp = 0;
    // mbarriers order threads of different warps (racecheck): once the block uses one, xclock[i*n + j]
    // is the last own-clock value of thread j ordered before thread i (n threads); per mbarrier, the
    // join of its arrivers' knowledge in the current phase, and that of the last completed phase
    bool xon = false;
    std::vector<uint32_t> xclock;
    std::map<uint64_t, std::pair<std::vector<uint32_t>, std::vector<uint32_t>>> mbar_clock;
    uint32_t interval = 0;            // barrier intervals, never reused on this OS thread
    std::vector<std::array<uint32_t, 32>> clocks; // per thread: vector clock over its warp's lanes
    // the live allocations of the last global accesses (a kernel reads a few buffers in turn)
    static const int CACHED = 4;
    uintptr_t al_lo[CACHED] = {0}, al_hi[CACHED] = {0};
    int al_next = 0;
    // counters
    LaunchCounters counts;
    std::unordered_map<uint64_t, uint32_t> lane_seen;             // (pc, lane) -> times run in this step
    std::unordered_map<GroupKey, Group, GroupKeyHash> groups;     // this step's warp instructions
};

static thread_local Context* tl_context = nullptr;
static thread_local bool tl_active = false; // the hooks' one test: this OS thread runs a block, checks on

std::string current_kernel_text(); // kernel.cpp

void check_block_begin(const LaunchInfo* launch, uint3 block, int nthreads, char* shared, size_t capacity) {
    const CheckSettings& s = check_settings();
    if (!s.any()) { return; }
    if (tl_context == nullptr) { tl_context = new Context(); }
    Context* c = tl_context;
    c->launch = launch;
    c->block = block;
    c->block_linear = block.x + launch->grid.x * (block.y + launch->grid.y * block.z);
    c->nthreads = nthreads;
    c->thread = 0;
    c->sh_lo = (uintptr_t)shared;
    c->sh_capacity = capacity;
    c->sh_span = capacity + (size_t)sysconf(_SC_PAGESIZE);
    if (c->sh_region.size() < capacity) {
        c->sh_region.assign(capacity, 0);
        c->sh_written.assign(s.initcheck ? capacity : 0, 0);
        c->sh_words.assign(s.racecheck ? capacity / 4 : 0, SharedWord());
        c->sh_async.assign(s.racecheck ? capacity / 4 : 0, AsyncWord());
    }
    c->block_stamp++;
    if (s.racecheck) { c->proxy_fences.assign(nthreads, 0); }
    c->xon = false;
    c->mbar_clock.clear();
    c->sh_used = 0;
    c->interval++;
    if (s.racecheck) {
        if ((int)c->clocks.size() < nthreads) { c->clocks.resize(nthreads); }
        for (int i = 0; i < nthreads; i++) {
            c->clocks[i].fill(0);
            c->clocks[i][i % 32] = 1;
        }
    }
    for (int i = 0; i < Context::CACHED; i++) { c->al_lo[i] = c->al_hi[i] = 0; }
    tl_active = true;
}

void check_block_end() {
    Context* c = tl_context;
    tl_active = false;
    if (c == nullptr || c->launch == nullptr) { return; }
    memset(c->sh_region.data(), 0, c->sh_used);
    if (!c->sh_written.empty()) { memset(c->sh_written.data(), 0, c->sh_used); }
    c->launch = nullptr;
}

void check_thread(int linear) {
    if (tl_context != nullptr) { tl_context->thread = linear; }
}

void check_shared_region(size_t offset, size_t bytes, int region) {
    Context* c = tl_context;
    if (c == nullptr || c->launch == nullptr) { return; }
    memset(c->sh_region.data() + offset, region > 253 ? 255 : region + 1, bytes);
    if (offset + bytes > c->sh_used) { c->sh_used = offset + bytes; }
}

// ----------------------------------------------------------------------------
// reports

static std::string thread_text(const Context* c, int linear) {
    dim3 b = c->launch->block;
    char s[64];
    snprintf(s, sizeof(s), "thread (%u,%u,%u)", linear % b.x, linear / b.x % b.y, linear / (b.x * b.y));
    return s;
}

static std::string kind_text(unsigned kind) { // "read", "atomic read-modify-write"...
    std::string what = (kind & A_ATOMIC) ? "atomic " : "";
    return what + ((kind & A_WRITE) ? ((kind & A_READ) ? "read-modify-write" : "write") : "read");
}

static std::string access_text(size_t n, unsigned kind) { return std::to_string(n) + "-byte " + kind_text(kind); }

// "kernel K (launched at F:L) block (x,y,z) thread (x,y,z)": the thread whose access is checked
// (for ptx.cpp's accesses, the lane that gave the address, not the thread that runs the warp's
// instruction)
static std::string kernel_text() {
    const Context* c = tl_context;
    const LaunchInfo* l = c->launch;
    char s[512];
    snprintf(s, sizeof(s), "kernel %s (launched at %s:%d) block (%u,%u,%u) ", l->name, l->file, l->line, c->block.x,
             c->block.y, c->block.z);
    return s + thread_text(c, c->thread);
}

[[noreturn]] static void report(const char* check, const std::string& text) {
    static std::mutex m;
    m.lock(); // one report: a second OS thread finding an error waits here until the process ends
    tl_active = false;
    fatal("%s: %s", check, text.c_str());
}

static std::string global_place(uintptr_t a) {
    AllocationView v;
    char s[256];
    if (!allocation_at_unlocked((const void*)a, &v)) {
        snprintf(s, sizeof(s), "in no allocation");
        return s;
    }
    size_t off = a - (uintptr_t)v.base;
    snprintf(s, sizeof(s), "byte %zu of ", off);
    return s + allocation_text(v.base);
}

// ----------------------------------------------------------------------------
// memcheck

static bool in_cached_allocation(const Context* c, uintptr_t a, size_t n) {
    for (int i = 0; i < Context::CACHED; i++) {
        if (a >= c->al_lo[i] && a + n <= c->al_hi[i]) { return true; }
    }
    return false;
}

// Slow path of a global access outside the cached allocations: find its allocation, or report.
// Returns whether [a, a + n) lies in a live allocation.
static bool global_bounds(Context* c, uintptr_t a, size_t n, unsigned kind, const void* pc) {
    AllocationView v;
    bool found = allocation_at_unlocked((const void*)a, &v);
    if (found && v.live && a >= (uintptr_t)v.base && a + n <= (uintptr_t)v.base + v.bytes) {
        int i = c->al_next;
        c->al_next = (i + 1) % Context::CACHED;
        c->al_lo[i] = (uintptr_t)v.base;
        c->al_hi[i] = (uintptr_t)v.base + v.bytes;
        return true;
    }
    if (!g_set.memcheck) { return false; } // the other checks skip what lies outside allocations
    char where[160];
    if (!found) {
        snprintf(where, sizeof(where), "in no allocation (a wild pointer or an overflowed index?)");
    } else if (!v.live) {
        snprintf(where, sizeof(where), "in freed memory, byte %zd of", (ssize_t)(a - (uintptr_t)v.base));
    } else if (a < (uintptr_t)v.base) {
        snprintf(where, sizeof(where), "%zu bytes before the start of", (size_t)((uintptr_t)v.base - a));
    } else if (a >= (uintptr_t)v.base + v.bytes) {
        snprintf(where, sizeof(where), "%zu bytes past the end of", (size_t)(a - ((uintptr_t)v.base + v.bytes)));
    } else {
        snprintf(where, sizeof(where), "running %zu bytes past the end of",
                 (size_t)(a + n - ((uintptr_t)v.base + v.bytes)));
    }
    char addr[64];
    snprintf(addr, sizeof(addr), " at %p is ", (void*)a);
    report("memcheck", kernel_text() + ": " + access_text(n, kind) + addr + where +
                           (found ? " " + allocation_text(v.base) : std::string()) + ", at " + source_line(pc));
}

static void misaligned(uintptr_t a, size_t n, unsigned kind, const void* pc, bool shared) {
    char s[160];
    snprintf(s, sizeof(s), " at %p (address %% %zu = %zu): a GPU raises \"misaligned address\"; ", (void*)a, n,
             (size_t)(a % n));
    std::string place = shared ? std::string("in shared memory") : global_place(a);
    report("memcheck", kernel_text() + ": misaligned " + access_text(n, kind) + s + place + ", at " +
                           source_line(pc));
}

static void shared_bounds(Context* c, size_t off, size_t n, unsigned kind, const void* pc) {
    char s[200];
    if (off + n > c->sh_capacity) {
        snprintf(s, sizeof(s), " at shared offset %zu runs past the end of the block's shared memory (%zu bytes in use)",
                 off, c->sh_used);
    } else {
        snprintf(s, sizeof(s), " at shared offset %zu lies outside every shared variable: nearest is ", off);
    }
    std::string near = off + n > c->sh_capacity ? "" : describe_shared(off);
    report("memcheck", kernel_text() + ": " + access_text(n, kind) + s + near + ", at " + source_line(pc));
}

// ----------------------------------------------------------------------------
// initcheck

static bool global_written(uintptr_t off, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uintptr_t b = off + i;
        if (!(__atomic_load_n(&g_init_shadow[b >> 3], __ATOMIC_RELAXED) & (1u << (b & 7)))) { return false; }
    }
    return true;
}

static void global_set_written(uintptr_t off, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uintptr_t b = off + i;
        unsigned char bit = (unsigned char)(1u << (b & 7));
        if (!(__atomic_load_n(&g_init_shadow[b >> 3], __ATOMIC_RELAXED) & bit)) {
            __atomic_fetch_or(&g_init_shadow[b >> 3], bit, __ATOMIC_RELAXED);
        }
    }
}

void device_bytes_written(const void* p, size_t n) {
    if (g_init_shadow == nullptr || n == 0) { return; }
    uintptr_t off = (uintptr_t)p - g_arena_lo;
    if (off >= g_arena_bytes) { return; }
    // whole shadow bytes at once in the middle
    while (n > 0 && (off & 7)) { global_set_written(off++, 1), n--; }
    if (n >= 8) {
        memset(&g_init_shadow[off >> 3], 0xFF, n / 8);
        off += n / 8 * 8;
        n -= n / 8 * 8;
    }
    if (n > 0) { global_set_written(off, n); }
}

void device_bytes_read(const void* p, size_t n, const char* who, const void* caller) {
    if (g_init_shadow == nullptr || n == 0) { return; }
    uintptr_t off = (uintptr_t)p - g_arena_lo;
    if (off >= g_arena_bytes) { return; }
    for (size_t i = 0; i < n; i++) {
        uintptr_t b = off + i;
        if (!(g_init_shadow[b >> 3] & (1u << (b & 7)))) {
            // the extent of the unwritten run, for the message
            size_t j = i;
            while (j < n && !(g_init_shadow[(off + j) >> 3] & (1u << ((off + j) & 7)))) { j++; }
            char s[160];
            snprintf(s, sizeof(s), ": bytes [%zu, %zu) of the %zu it reads at %p were never written, ", i, j, n, p);
            std::string at = caller != nullptr ? " (called at " + source_line(caller) + ")" : "";
            report("initcheck", std::string(who) + at + s + global_place((uintptr_t)p + i));
        }
    }
}

static void uninitialized_load(size_t n, unsigned kind, const void* pc, const std::string& place) {
    report("initcheck", kernel_text() + ": " + access_text(n, kind) + " of bytes never written, " + place +
                            ", at " + source_line(pc));
}

// ----------------------------------------------------------------------------
// racecheck

static std::string shared_race_text(Context* c, size_t off, unsigned kind, const void* pc, const Access& other,
                                    const char* other_did) {
    std::string s = kernel_text() + ": " + kind_text(kind) + " of shared memory at offset " +
                    std::to_string(off & ~(size_t)3) + " (" + describe_shared(off) + ") at " + source_line(pc) + " and " +
                    thread_text(c, other.thread) + " " + other_did + " it at " + source_line(other.pc) +
                    ", between the same two __syncthreads";
    if (other.thread / 32 == c->thread / 32) { s += ", in one warp without a __syncwarp or warp intrinsic between them"; }
    if (c->xon) { s += ", and no mbarrier phase that the second thread saw complete orders them"; }
    return s;
}

static void shared_race_warps(size_t off, unsigned kind, const void* pc, uint32_t warps, const char* did) {
    int w = __builtin_ctz(warps);
    report("racecheck", kernel_text() + ": " + kind_text(kind) + " of shared memory at offset " +
                            std::to_string(off & ~(size_t)3) + " (" + describe_shared(off) + ") at " + source_line(pc) +
                            ", and a thread of warp " + std::to_string(w) + " " + did +
                            " it between the same two __syncthreads");
}

// Is `other` (an earlier access) ordered before the running thread's access? By the same thread,
// or by a lane of its warp that has joined a warp intrinsic with it since.
static bool ordered(Context* c, const Access& other) {
    if (other.thread < 0 || other.thread == c->thread) { return true; }
    if (other.thread / 32 == c->thread / 32 && c->clocks[c->thread][other.thread % 32] >= other.clock) { return true; }
    return c->xon && c->xclock[(size_t)c->thread * c->nthreads + other.thread] >= other.clock;
}

// mbarriers (ptx.cpp): an arrival carries what the arriving thread has done (and knows of) to the
// threads that see the phase complete; the arriver's later accesses are not ordered by it
static Context* mbar_context() {
    Context* c = tl_context;
    if (!tl_active || c == nullptr || !g_set.racecheck) { return nullptr; }
    if (!c->xon) {
        c->xon = true;
        c->xclock.assign((size_t)c->nthreads * c->nthreads, 0);
    }
    return c;
}

void check_mbar_arrive(int linear, uint64_t mbar) {
    Context* c = mbar_context();
    if (c == nullptr || linear < 0) { return; }
    int n = c->nthreads;
    auto& mc = c->mbar_clock[mbar];
    if (mc.first.empty()) { mc.first.assign(n, 0); }
    const uint32_t* mine = &c->xclock[(size_t)linear * n];
    for (int j = 0; j < n; j++) { mc.first[j] = std::max(mc.first[j], mine[j]); }
    uint32_t& own = c->clocks[linear][linear % 32];
    mc.first[linear] = std::max(mc.first[linear], own);
    own++;
}

void check_mbar_complete(uint64_t mbar) {
    Context* c = mbar_context();
    if (c == nullptr) { return; }
    auto& mc = c->mbar_clock[mbar];
    if (mc.first.empty()) { mc.first.assign(c->nthreads, 0); }
    mc.second = mc.first;
    mc.first.assign(c->nthreads, 0);
}

void check_mbar_observe(int linear, uint64_t mbar) {
    Context* c = mbar_context();
    if (c == nullptr || linear < 0) { return; }
    auto it = c->mbar_clock.find(mbar);
    if (it == c->mbar_clock.end() || it->second.second.empty()) { return; }
    uint32_t* mine = &c->xclock[(size_t)linear * c->nthreads];
    const std::vector<uint32_t>& done = it->second.second;
    for (int j = 0; j < c->nthreads; j++) { mine[j] = std::max(mine[j], done[j]); }
}

// The warps in `per_byte` (one mask per byte of the word) at the bytes of `bytes`.
static uint32_t warps_at(const uint32_t per_byte[4], uint32_t bytes) {
    uint32_t w = 0;
    for (int i = 0; i < 4; i++) {
        if (bytes & (1u << i)) { w |= per_byte[i]; }
    }
    return w;
}

// The word at offset `off` (a multiple of 4), bytes `bytes` of it (bit i: byte i): accesses that
// touch other bytes of the same word do not conflict (a GPU's shared memory is byte-addressed).
static void shared_race(Context* c, size_t off, uint32_t bytes, unsigned kind, const void* pc) {
    SharedWord& w = c->sh_words[off >> 2];
    if (w.interval != c->interval) { w = SharedWord(), w.interval = c->interval; }
    int me = c->thread;
    uint32_t wbit = 1u << (me / 32);
    Access now{me, c->clocks[me][me % 32], pc, bytes};
    bool write = (kind & A_WRITE) != 0, atomic = (kind & A_ATOMIC) != 0;
    auto conflicts = [&](const Access& a) { return (a.bytes & bytes) != 0 && !ordered(c, a); };
    if (conflicts(w.writer)) { report("racecheck", shared_race_text(c, off, kind, pc, w.writer, "wrote")); }
    if (conflicts(w.writer2)) { report("racecheck", shared_race_text(c, off, kind, pc, w.writer2, "wrote")); }
    if (write) { // a write (plain or atomic) against earlier plain reads
        uint32_t readers = warps_at(w.readers, bytes);
        // (the per-warp reader masks have no clocks: once mbarriers order warps, only the two
        // reader records below, which have, are asked)
        if (!c->xon && (readers & ~wbit)) { shared_race_warps(off, kind, pc, readers & ~wbit, "read"); }
        if (conflicts(w.reader)) { report("racecheck", shared_race_text(c, off, kind, pc, w.reader, "read")); }
        if (conflicts(w.reader2)) { report("racecheck", shared_race_text(c, off, kind, pc, w.reader2, "read")); }
    }
    if (atomic) {
        if (write) {
            for (int i = 0; i < 4; i++) {
                if (bytes & (1u << i)) { w.atomics[i] |= wbit; }
            }
        }
        return;
    }
    uint32_t atomics = warps_at(w.atomics, bytes);
    if (atomics & ~wbit) { shared_race_warps(off, kind, pc, atomics & ~wbit, "used an atomic on"); }
    if (write) {
        // Two threads may write different bytes of one word (two bf16 values): the earlier write,
        // of other bytes and not ordered before this one, stays as writer2 for the accesses that
        // follow (a third such writer of one word drops the oldest: 1-byte values only).
        w.writer2.bytes &= ~bytes;
        if (w.writer.thread >= 0 && (w.writer.bytes & ~bytes) != 0 && !ordered(c, w.writer)) {
            w.writer2 = w.writer;
            w.writer2.bytes &= ~bytes;
        }
        w.writer = now;
    } else {
        for (int i = 0; i < 4; i++) {
            if (bytes & (1u << i)) { w.readers[i] |= wbit; }
        }
        if (w.reader.thread != me) { w.reader2 = w.reader; }
        w.reader = now;
    }
}

void check_warp_sync(int warp, unsigned mask) {
    Context* c = tl_context;
    if (c == nullptr || c->launch == nullptr || !g_set.racecheck) { return; }
    std::array<uint32_t, 32> joined;
    joined.fill(0);
    int base = warp * 32;
    for (int l = 0; l < 32; l++) {
        if (!(mask & (1u << l)) || base + l >= c->nthreads) { continue; }
        for (int i = 0; i < 32; i++) { joined[i] = std::max(joined[i], c->clocks[base + l][i]); }
    }
    for (int l = 0; l < 32; l++) {
        if (!(mask & (1u << l)) || base + l >= c->nthreads) { continue; }
        c->clocks[base + l] = joined;
        c->clocks[base + l][l]++;
    }
}

void check_barrier() {
    Context* c = tl_context;
    if (c != nullptr && c->launch != nullptr) { c->interval++; }
}

// Global memory, one launch: per 4-byte word, a state word and a note of the access kept for
// messages. State: bits 0-31 the first block that touched the word in launch `launch` (bits
// 32-61), bit 62 "written without atomics", bit 63 "touched by a second block". A race is both
// bits: a plain write and two blocks.
static const uint64_t RACE_WRITTEN = 1ull << 62, RACE_SHARED = 1ull << 63, RACE_LAUNCH_MASK = (1ull << 30) - 1;

static void global_race(Context* c, uintptr_t word_off, unsigned kind, const void* pc) {
    uint64_t* st = &g_race_shadow[(word_off >> 2) * 2];
    uint64_t launch = c->launch->id & RACE_LAUNCH_MASK, block = c->block_linear;
    bool plain_write = (kind & A_WRITE) && !(kind & A_ATOMIC);
    uint64_t old = __atomic_load_n(st, __ATOMIC_RELAXED), next;
    for (;;) {
        if (((old >> 32) & RACE_LAUNCH_MASK) != launch) {
            next = (launch << 32) | block | (plain_write ? RACE_WRITTEN : 0);
        } else if ((old & 0xFFFFFFFFull) == block && !(old & RACE_SHARED)) {
            next = old | (plain_write ? RACE_WRITTEN : 0);
        } else {
            next = old | RACE_SHARED | (plain_write ? RACE_WRITTEN : 0);
        }
        if (next == old) { break; }
        if (__atomic_compare_exchange_n(st, &old, next, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { break; }
    }
    // the note: who wrote it (kept once written), else who touched it first
    uint64_t note = ((uint64_t)(uintptr_t)pc & 0xFFFFFFFFFFFFull) | ((uint64_t)c->thread << 48);
    if ((next & RACE_SHARED) && (next & RACE_WRITTEN)) {
        uint64_t other = __atomic_load_n(st + 1, __ATOMIC_RELAXED);
        const void* other_pc = (const void*)(uintptr_t)(other & 0xFFFFFFFFFFFFull);
        int other_thread = (int)(other >> 48);
        uint32_t first = (uint32_t)(old & 0xFFFFFFFFull);
        dim3 g = c->launch->grid;
        char s[160];
        snprintf(s, sizeof(s), " and thread (%u,%u,%u) of block (%u,%u,%u) ", other_thread % c->launch->block.x,
                 other_thread / c->launch->block.x % c->launch->block.y,
                 other_thread / (c->launch->block.x * c->launch->block.y), first % g.x, first / g.x % g.y,
                 first / (g.x * g.y));
        bool first_is_me = first == c->block_linear;
        std::string other_text = first_is_me ? std::string(" and another block ")
                                             : std::string(s) + (((old & RACE_WRITTEN) != 0) ? "wrote" : "touched") +
                                                   " it at " + source_line(other_pc) + ",";
        report("racecheck", kernel_text() + ": " + access_text(4, kind) + " of global memory at " +
                                global_place(g_arena_lo + word_off) + ", at " + source_line(pc) + other_text +
                                " in one launch, not both atomically: blocks run in no defined order");
    }
    if (plain_write || ((next >> 32) & RACE_LAUNCH_MASK) != ((old >> 32) & RACE_LAUNCH_MASK)) {
        __atomic_store_n(st + 1, note, __ATOMIC_RELAXED);
    }
}

// ----------------------------------------------------------------------------
// counters: this step's warp instructions, and unique sectors per launch

static void count_access(Context* c, bool shared, uintptr_t a, size_t n, unsigned kind, const void* pc) {
    if (kind & A_ATOMIC) {
        return; // counted per operation by the atomic hooks; not part of load/store requests
    }
    uint64_t lane_key = ((uint64_t)(uintptr_t)pc << 5) | (uint64_t)(c->thread & 31);
    uint32_t k = c->lane_seen[lane_key]++;
    Group& g = c->groups[GroupKey{pc, k}];
    if (g.units.empty()) {
        g.shared = shared;
        g.write = (kind & A_WRITE) != 0;
    }
    if (shared) {
        for (uintptr_t w = a >> 2; w <= (a + n - 1) >> 2; w++) { g.units.push_back(w); }
    } else {
        for (uintptr_t s = a >> 5; s <= (a + n - 1) >> 5; s++) {
            g.units.push_back(s);
            // unique sectors of the launch: the first access of a sector in this launch counts
            uint32_t* stamp = &g_sector_shadow[(s - (g_arena_lo >> 5)) * 2 + ((kind & A_WRITE) ? 1 : 0)];
            uint32_t id = (uint32_t)c->launch->id;
            if (__atomic_load_n(stamp, __ATOMIC_RELAXED) != id && __atomic_exchange_n(stamp, id, __ATOMIC_RELAXED) != id) {
                ((kind & A_WRITE) ? c->counts.dram_write_sectors : c->counts.dram_read_sectors)++;
            }
        }
    }
}

void check_warp_step_end(int) {
    Context* c = tl_context;
    if (c == nullptr || c->launch == nullptr || !g_set.counters || c->groups.empty()) { return; }
    for (auto& kv : c->groups) {
        Group& g = kv.second;
        std::sort(g.units.begin(), g.units.end());
        g.units.erase(std::unique(g.units.begin(), g.units.end()), g.units.end());
        if (!g.shared) {
            (g.write ? c->counts.gst_requests : c->counts.gld_requests)++;
            (g.write ? c->counts.gst_sectors : c->counts.gld_sectors) += g.units.size();
        } else {
            // 32 banks of 4 bytes: distinct words in one bank are served one per wavefront; lanes
            // reading the same word share it (a broadcast)
            int per_bank[32] = {0};
            int wavefronts = 1;
            for (uint64_t w : g.units) { wavefronts = std::max(wavefronts, ++per_bank[w % 32]); }
            (g.write ? c->counts.shst_requests : c->counts.shld_requests)++;
            (g.write ? c->counts.shst_wavefronts : c->counts.shld_wavefronts) += wavefronts;
        }
    }
    c->groups.clear();
    c->lane_seen.clear();
}

static void count_atomic(uintptr_t a) {
    Context* c = tl_context;
    if (!g_set.counters) { return; }
    if (a - c->sh_lo < c->sh_span) { c->counts.shared_atomics++; }
    else if (a - g_arena_lo < g_arena_bytes) { c->counts.global_atomics++; }
}

void count_mma_flops(uint64_t flops) {
    if (tl_active && tl_context != nullptr) { tl_context->counts.mma_flops += flops; }
}

void count_wgmma(uint64_t flops, uint64_t tma_bytes) {
    if (tl_active && tl_context != nullptr) {
        tl_context->counts.wgmma_flops += flops;
        tl_context->counts.tma_bytes += tma_bytes;
    }
}

// Per launch and per kernel name: the CSV rows, and a summary at exit.
static std::mutex g_counter_mutex;
static FILE* g_counter_file = nullptr;
struct KernelTotals {
    uint64_t launches = 0;
    LaunchCounters c;
};
static std::map<std::string, KernelTotals>* g_kernel_totals = nullptr;
static std::string g_counter_path;

static const char* COUNTER_COLUMNS =
    "launch,kernel,grid_x,grid_y,grid_z,block_x,block_y,block_z,dynamic_smem,static_smem,"
    "gld_requests,gld_sectors,gst_requests,gst_sectors,dram_read_sectors,dram_write_sectors,"
    "shld_requests,shld_wavefronts,shst_requests,shst_wavefronts,global_atomics,shared_atomics,mma_flops,wgmma_flops,"
    "tma_bytes";

static void write_counter_summary() {
    std::lock_guard<std::mutex> lock(g_counter_mutex);
    if (g_counter_file == nullptr) { return; }
    fclose(g_counter_file);
    g_counter_file = nullptr;
    std::string path = g_counter_path + ".summary";
    FILE* f = fopen(path.c_str(), "w");
    if (f == nullptr) {
        warn("EMU_COUNTERS: cannot write %s", path.c_str());
        return;
    }
    fprintf(f, "%-44s %8s %12s %12s %12s %12s %12s %12s %12s %12s %12s %12s %10s %10s %12s %12s %12s\n", "kernel", "launches",
            "gld_req", "gld_sect", "gst_req", "gst_sect", "dram_rd_sect", "dram_wr_sect", "shld_req", "shld_wave",
            "shst_req", "shst_wave", "g_atomics", "s_atomics", "mma_flops", "wgmma_flops", "tma_bytes");
    for (auto& kv : *g_kernel_totals) {
        const LaunchCounters& c = kv.second.c;
        fprintf(f, "%-44s %8llu %12llu %12llu %12llu %12llu %12llu %12llu %12llu %12llu %12llu %12llu %10llu %10llu %12llu %12llu %12llu\n",
                kv.first.c_str(), (unsigned long long)kv.second.launches, (unsigned long long)c.gld_requests,
                (unsigned long long)c.gld_sectors, (unsigned long long)c.gst_requests, (unsigned long long)c.gst_sectors,
                (unsigned long long)c.dram_read_sectors, (unsigned long long)c.dram_write_sectors,
                (unsigned long long)c.shld_requests, (unsigned long long)c.shld_wavefronts,
                (unsigned long long)c.shst_requests, (unsigned long long)c.shst_wavefronts,
                (unsigned long long)c.global_atomics, (unsigned long long)c.shared_atomics, (unsigned long long)c.mma_flops,
                (unsigned long long)c.wgmma_flops, (unsigned long long)c.tma_bytes);
    }
    fclose(f);
}

static void open_counter_file() {
    static bool done = false;
    if (done) { return; }
    done = true;
    // "%p" in the name becomes the process id: ranks of one run write files of their own
    std::string path = getenv("EMU_COUNTERS");
    size_t at = path.find("%p");
    if (at != std::string::npos) { path.replace(at, 2, std::to_string((long)getpid())); }
    g_counter_path = path;
    g_counter_file = fopen(path.c_str(), "w");
    if (g_counter_file == nullptr) { fatal("EMU_COUNTERS=%s: cannot write this file", path.c_str()); }
    setvbuf(g_counter_file, nullptr, _IOLBF, 0);
    fprintf(g_counter_file, "%s\n", COUNTER_COLUMNS);
    g_kernel_totals = new std::map<std::string, KernelTotals>();
    atexit(write_counter_summary);
}

void check_launch_begin(LaunchInfo* launch) {
    if (check_settings().counters) {
        std::lock_guard<std::mutex> lock(g_counter_mutex);
        open_counter_file();
        launch->counters = new LaunchCounters();
    }
}

void check_worker_done(LaunchInfo* launch) {
    Context* c = tl_context;
    if (c == nullptr || launch->counters == nullptr) { return; }
    std::lock_guard<std::mutex> lock(g_counter_mutex);
    launch->counters->add(c->counts);
    c->counts = LaunchCounters();
}

void check_launch_end(LaunchInfo* l) {
    if (l->counters == nullptr) { return; }
    std::lock_guard<std::mutex> lock(g_counter_mutex);
    const LaunchCounters& c = *l->counters;
    if (g_counter_file != nullptr) {
        // the kernel name may hold commas (template arguments): quoted
        fprintf(g_counter_file, "%llu,\"%s\",%u,%u,%u,%u,%u,%u,%zu,%zu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n",
                (unsigned long long)l->id, l->name, l->grid.x, l->grid.y, l->grid.z, l->block.x, l->block.y, l->block.z,
                l->dynamic_shared, l->static_shared, (unsigned long long)c.gld_requests, (unsigned long long)c.gld_sectors,
                (unsigned long long)c.gst_requests, (unsigned long long)c.gst_sectors, (unsigned long long)c.dram_read_sectors,
                (unsigned long long)c.dram_write_sectors, (unsigned long long)c.shld_requests,
                (unsigned long long)c.shld_wavefronts, (unsigned long long)c.shst_requests,
                (unsigned long long)c.shst_wavefronts, (unsigned long long)c.global_atomics,
                (unsigned long long)c.shared_atomics, (unsigned long long)c.mma_flops, (unsigned long long)c.wgmma_flops,
                (unsigned long long)c.tma_bytes);
    }
    KernelTotals& t = (*g_kernel_totals)[l->name];
    t.launches++;
    t.c.add(c);
    delete l->counters;
    l->counters = nullptr;
}

// ----------------------------------------------------------------------------
// one access

// racecheck: a load or store of shared bytes that a cp.async (ptx.cpp) of the block is still
// copying: a read sees no copied bytes yet, a write is overwritten when the copy lands.
static void shared_in_flight(Context* c, size_t off, size_t n, unsigned kind, const void* pc) {
    Site issued;
    int thread = 0;
    if (!cp_async_in_flight((const void*)(c->sh_lo + off), n, &issued, &thread)) { return; }
    report("racecheck", kernel_text() + ": " + access_text(n, kind) + " of shared memory at offset " +
                            std::to_string(off) + " (" + describe_shared(off) + ") at " + source_line(pc) +
                            ", whose bytes the cp.async issued at " + issued.file + ":" + std::to_string(issued.line) +
                            " by " + thread_text(c, thread) +
                            " has not landed yet (no cp.async.wait_group by that thread covering it, then a barrier)");
}

// sm_90a: a load or store of bytes a cp.async.bulk.tensor has in flight; a load of bytes one landed,
// by a thread that has not seen its mbarrier phase complete; a generic store noted for the proxy
// check (check_async_read).
static void shared_async(Context* c, size_t off, size_t n, unsigned kind, const void* pc) {
    std::string what;
    if (tma_in_flight((const void*)(c->sh_lo + off), n, &what)) {
        report("racecheck", kernel_text() + ": " + access_text(n, kind) + " of shared memory at offset " +
                                std::to_string(off) + " (" + describe_shared(off) + ") at " + source_line(pc) +
                                ", whose bytes " + what);
    }
    for (size_t w = off & ~(size_t)3; w < off + n; w += 4) {
        AsyncWord& a = c->sh_async[w >> 2];
        if (a.stamp != c->block_stamp) { a = AsyncWord(), a.stamp = c->block_stamp; }
        if ((kind & A_READ) && a.token != 0 && !tma_token_seen(c->thread, a.token, &what)) {
            report("racecheck", kernel_text() + ": " + access_text(n, kind) + " of shared memory at offset " +
                                    std::to_string(off) + " (" + describe_shared(off) + ") at " + source_line(pc) + ": " + what);
        }
        if (kind & A_WRITE) {
            a.thread = c->thread, a.epoch = c->proxy_fences[c->thread], a.pc = pc, a.token = 0;
        }
    }
}

void check_proxy_fence(int linear) {
    Context* c = tl_context;
    if (!tl_active || c == nullptr || !g_set.racecheck || linear < 0 || linear >= (int)c->proxy_fences.size()) { return; }
    c->proxy_fences[linear]++;
}

// A wgmma's read of shared word `w` (bytes `bytes` of it) as reads by the threads of its warpgroup
// (threads wg0 .. wg0 + 127): the word's last generic stores must be ordered before every warp of
// it, i.e. before one lane of each warp (the wgmma's .sync makes the lanes of a warp wait for each
// other, as at __syncwarp; nothing joins the four warps): by a __syncthreads since, by the storing
// thread being that lane or a lane of its warp joined since, or by an mbarrier phase that the lane
// saw complete and that the storing thread (or one that knew of its store) arrived on. A store by
// another warp of the same warpgroup needs that ordering too. Bytes written by a bulk copy have no
// generic store (check_async_write forgets them): tma_token_seen asks for their phase instead.
static void wgmma_read_ordered(Context* c, size_t w, uint32_t bytes, int wg0, const std::string& instr) {
    SharedWord& sw = c->sh_words[w >> 2];
    if (sw.interval != c->interval) { return; } // a __syncthreads since the stores
    for (const Access* a : {&sw.writer, &sw.writer2}) {
        if (a->thread < 0 || !(a->bytes & bytes)) { continue; }
        for (int warp = wg0; warp < wg0 + 128; warp += 32) {
            bool seen = false;
            for (int l = warp; l < warp + 32 && l < c->nthreads && !seen; l++) {
                c->thread = l;
                seen = ordered(c, *a);
            }
            if (seen) { continue; }
            c->thread = warp;
            report("racecheck", kernel_text() + ": " + instr + " reads shared memory at offset " + std::to_string(w) + " (" +
                                    describe_shared(w) + ") that " + thread_text(c, a->thread) +
                                    " wrote with a generic-proxy store at " + source_line(a->pc) + ", and no lane of warp " +
                                    std::to_string(warp / 32) + " (in the wgmma's warpgroup) is ordered after that store: "
                                    "no __syncthreads between them, and no mbarrier phase that a lane of the warp saw "
                                    "complete carries it (a missing mbarrier wait?)");
        }
    }
}

void check_async_read(int linear, const void* p, size_t n, const void* pc, const char* what, Site site) {
    Context* c = tl_context;
    if (!tl_active || c == nullptr) { return; }
    uintptr_t off = (uintptr_t)p - c->sh_lo;
    if (off >= c->sh_capacity) { return; }
    int me = c->thread;
    c->thread = linear;
    const CheckSettings& s = g_set;
    (void)site;
    std::string instr = std::string("the wgmma.mma_async at ") + source_line(pc) + " (operand " + what + ")";
    if (s.initcheck) {
        for (size_t i = 0; i < n; i++) {
            if (!c->sh_written[off + i]) {
                report("initcheck", kernel_text() + ": " + instr + " reads shared memory at offset " + std::to_string(off) +
                                        " (" + describe_shared(off) + ") that was never written");
            }
        }
    }
    if (s.racecheck) {
        std::string why;
        for (size_t w = off & ~(size_t)3; w < off + n; w += 4) {
            AsyncWord& a = c->sh_async[w >> 2];
            if (a.stamp != c->block_stamp) { continue; }
            if (a.thread >= 0 && a.epoch == c->proxy_fences[a.thread]) {
                report("racecheck", kernel_text() + ": " + instr + " reads shared memory at offset " + std::to_string(w) + " (" +
                                        describe_shared(w) + ") that " + thread_text(c, a.thread) +
                                        " wrote with a generic-proxy store at " + source_line(a.pc) +
                                        " and no fence.proxy.async by that thread followed (the async proxy may not see it)");
            }
            if (a.token != 0 && !tma_token_seen(linear, a.token, &why)) {
                report("racecheck", kernel_text() + ": " + instr + " reads shared memory at offset " + std::to_string(w) + " (" +
                                        describe_shared(w) + "): " + why);
            }
            size_t lo = std::max(w, off), hi = std::min(w + 4, off + n);
            wgmma_read_ordered(c, w, ((1u << (hi - lo)) - 1) << (lo - w), linear / 128 * 128, instr);
        }
    }
    c->thread = me;
}

void check_async_write(const void* p, size_t n, uint32_t token) {
    Context* c = tl_context;
    if (!tl_active || c == nullptr) { return; }
    uintptr_t off = (uintptr_t)p - c->sh_lo;
    if (off >= c->sh_capacity) { return; }
    if (g_set.initcheck) { memset(&c->sh_written[off], 1, n); }
    if (g_set.racecheck) {
        for (size_t w = off & ~(size_t)3; w < off + n; w += 4) {
            SharedWord& sw = c->sh_words[w >> 2];
            sw = SharedWord(), sw.interval = c->interval;
            AsyncWord& a = c->sh_async[w >> 2];
            a = AsyncWord(), a.stamp = c->block_stamp, a.token = token;
        }
    }
}

static void shared_access(Context* c, size_t off, size_t n, unsigned kind, const void* pc) {
    const CheckSettings& s = g_set;
    if (off + n > c->sh_capacity || c->sh_region[off] == 0 || c->sh_region[off + n - 1] != c->sh_region[off]) {
        if (s.memcheck) { shared_bounds(c, off, n, kind, pc); }
        return;
    }
    if (s.racecheck) {
        shared_in_flight(c, off, n, kind, pc);
        shared_async(c, off, n, kind, pc);
    }
    if (s.memcheck && (kind & A_ALIGNED) && n > 1 && (off & (n - 1))) { misaligned(c->sh_lo + off, n, kind, pc, true); }
    if (s.initcheck) {
        if (kind & A_READ) {
            for (size_t i = 0; i < n; i++) {
                if (!c->sh_written[off + i]) {
                    uninitialized_load(n, kind, pc,
                                       "at shared offset " + std::to_string(off) + " (" + describe_shared(off) + ")");
                }
            }
        }
        if (kind & A_WRITE) { memset(&c->sh_written[off], 1, n); }
    }
    if (s.racecheck) {
        for (size_t w = off & ~(size_t)3; w < off + n; w += 4) {
            // the bytes of word w that [off, off + n) covers
            size_t lo = std::max(w, off), hi = std::min(w + 4, off + n);
            uint32_t bytes = ((1u << (hi - lo)) - 1) << (lo - w);
            shared_race(c, w, bytes, kind, pc);
        }
    }
    if (s.counters) { count_access(c, true, off, n, kind, pc); }
}

static void global_access(Context* c, uintptr_t a, size_t n, unsigned kind, const void* pc) {
    const CheckSettings& s = g_set;
    if (!in_cached_allocation(c, a, n) && !global_bounds(c, a, n, kind, pc)) { return; } // memcheck off
    if (s.memcheck && (kind & A_ALIGNED) && n > 1 && (a & (n - 1))) { misaligned(a, n, kind, pc, false); }
    uintptr_t off = a - g_arena_lo;
    if (s.initcheck) {
        if ((kind & A_READ) && !global_written(off, n)) { uninitialized_load(n, kind, pc, global_place(a)); }
        if (kind & A_WRITE) { global_set_written(off, n); }
    }
    if (s.racecheck) {
        for (uintptr_t w = off & ~(uintptr_t)3; w < off + n; w += 4) { global_race(c, w, kind, pc); }
    }
    if (s.counters) { count_access(c, false, a, n, kind, pc); }
}

static inline void on_access(uintptr_t a, size_t n, unsigned kind, const void* pc) {
    Context* c = tl_context;
    if (a - c->sh_lo < c->sh_span) { shared_access(c, a - c->sh_lo, n, kind, pc); }
    else if (a - g_arena_lo < g_arena_bytes) { global_access(c, a, n, kind, pc); }
    // anything else is host memory: the thread's own stack, the kernel's arguments, pinned memory
}

void check_ptx_access(int linear, const void* p, size_t n, bool write, const void* pc) {
    Context* c = tl_context;
    if (!tl_active || c == nullptr || n == 0) { return; }
    int me = c->thread;
    c->thread = linear;
    // natural alignment applies to the 2..16-byte accesses (cp.async, ldmatrix rows); a TMA box row
    // (any length, from any element of a 16-byte-aligned tensor) has none (llmc/attention_sm90.cuh's fp32
    // rows of L and D, 256 bytes from a 64-byte boundary, are legal and were once reported misaligned)
    on_access((uintptr_t)p, n, (write ? A_WRITE : A_READ) | (n <= 16 ? (unsigned)A_ALIGNED : 0u), pc);
    c->thread = me;
}

} // namespace emu

// ----------------------------------------------------------------------------
// the hooks GCC's -fsanitize=thread calls (no libtsan: these are the whole runtime)

using emu::A_ALIGNED;
using emu::A_ATOMIC;
using emu::A_READ;
using emu::A_WRITE;
using emu::on_access;
using emu::tl_active;

#define EMU_RA __builtin_return_address(0)
#define EMU_HOOK(name, bytes, kind)                                                                                    \
    extern "C" void name(void* p) {                                                                                    \
        if (__builtin_expect(tl_active, 0)) { on_access((uintptr_t)p, bytes, kind, EMU_RA); }                          \
    }
#define EMU_HOOKS(n)                                                                                                   \
    EMU_HOOK(__tsan_read##n, n, A_READ | A_ALIGNED)                                                                    \
    EMU_HOOK(__tsan_write##n, n, A_WRITE | A_ALIGNED)                                                                  \
    EMU_HOOK(__tsan_unaligned_read##n, n, A_READ)                                                                      \
    EMU_HOOK(__tsan_unaligned_write##n, n, A_WRITE)                                                                    \
    EMU_HOOK(__tsan_volatile_read##n, n, A_READ | A_ALIGNED)                                                           \
    EMU_HOOK(__tsan_volatile_write##n, n, A_WRITE | A_ALIGNED)
EMU_HOOKS(1)
EMU_HOOKS(2)
EMU_HOOKS(4)
EMU_HOOKS(8)
EMU_HOOKS(16)

extern "C" void __tsan_read_range(void* p, unsigned long n) {
    if (__builtin_expect(tl_active, 0) && n > 0) { on_access((uintptr_t)p, n, A_READ, EMU_RA); }
}
extern "C" void __tsan_write_range(void* p, unsigned long n) {
    if (__builtin_expect(tl_active, 0) && n > 0) { on_access((uintptr_t)p, n, A_WRITE, EMU_RA); }
}
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_vptr_update(void**, void*) {}
extern "C" void __tsan_vptr_read(void**) {}
extern "C" void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
extern "C" void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// Atomics: the operation itself, sequentially consistent whatever order was asked (stronger is
// allowed), after the checks; a read-modify-write that happened counts as one atomic.
#define EMU_NOTE(p, kind)                                                                                              \
    if (__builtin_expect(tl_active, 0)) { on_access((uintptr_t)(p), sizeof(*(p)), (kind) | A_ATOMIC | A_ALIGNED, EMU_RA); }
#define EMU_COUNT(p)                                                                                                   \
    if (__builtin_expect(tl_active, 0)) { emu::count_atomic((uintptr_t)(p)); }
#define EMU_RMW(N, T, op, builtin)                                                                                     \
    extern "C" T __tsan_atomic##N##_##op(volatile T* a, T v, int) {                                                    \
        EMU_NOTE(a, A_READ | A_WRITE);                                                                                 \
        T r = builtin(a, v, __ATOMIC_SEQ_CST);                                                                         \
        EMU_COUNT(a);                                                                                                  \
        return r;                                                                                                      \
    }
#define EMU_ATOMICS(N, T)                                                                                              \
    extern "C" T __tsan_atomic##N##_load(const volatile T* a, int) {                                                   \
        EMU_NOTE(a, A_READ);                                                                                           \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                                   \
    }                                                                                                                  \
    extern "C" void __tsan_atomic##N##_store(volatile T* a, T v, int) {                                                \
        EMU_NOTE(a, A_WRITE);                                                                                          \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                      \
        EMU_COUNT(a);                                                                                                  \
    }                                                                                                                  \
    EMU_RMW(N, T, exchange, __atomic_exchange_n)                                                                       \
    EMU_RMW(N, T, fetch_add, __atomic_fetch_add)                                                                       \
    EMU_RMW(N, T, fetch_sub, __atomic_fetch_sub)                                                                       \
    EMU_RMW(N, T, fetch_and, __atomic_fetch_and)                                                                       \
    EMU_RMW(N, T, fetch_or, __atomic_fetch_or)                                                                         \
    EMU_RMW(N, T, fetch_xor, __atomic_fetch_xor)                                                                       \
    EMU_RMW(N, T, fetch_nand, __atomic_fetch_nand)                                                                     \
    extern "C" int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                    \
        EMU_NOTE(a, A_READ | A_WRITE);                                                                                 \
        bool ok = __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                     \
        if (ok) { EMU_COUNT(a); }                                                                                      \
        return ok;                                                                                                     \
    }                                                                                                                  \
    extern "C" int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                      \
        EMU_NOTE(a, A_READ | A_WRITE);                                                                                 \
        bool ok = __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                     \
        if (ok) { EMU_COUNT(a); }                                                                                      \
        return ok;                                                                                                     \
    }                                                                                                                  \
    extern "C" T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                          \
        EMU_NOTE(a, A_READ | A_WRITE);                                                                                 \
        if (__atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { EMU_COUNT(a); }        \
        return c;                                                                                                      \
    }
EMU_ATOMICS(8, uint8_t)
EMU_ATOMICS(16, uint16_t)
EMU_ATOMICS(32, uint32_t)
EMU_ATOMICS(64, uint64_t)
