/*
The stream-order check: an op that touches bytes another op touched, with a write between them,
must be ordered after it (EMU_CHECK=1, or EMU_CHECK_STREAMS=1 alone).

Why by happens-before. The schedules (EMU_SCHEDULE) run queued work at different moments, so a
missing cudaStreamWaitEvent shows up as stale data only when the schedule happens to run the
reader first. This check does not depend on when things ran: it asks whether the program ORDERS
the two ops, the way CUDA defines it, and so reports the same error under every schedule.

The order. runtime.cpp gives every op a vector clock (VClock, emu_internal.h) when it is queued:
its stream's previous op, the host up to the call that queued it, the events its stream waited
for (cudaStreamWaitEvent), and the legacy default stream's implicit synchronization with the
blocking streams, both ways. The host's own clock joins an op's when the host waits for it:
cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, a blocking copy, cudaFree,
a query that answers cudaSuccess. An earlier access at time t of clock c is ordered before an op
iff the op's clock has entry c >= t.

The bytes. Per allocation (device or pinned), an interval map from byte ranges to their state:
the last writer and, since that write, the latest reader on each clock. An op's ranges are
checked and recorded when it has run, in the order ops run (an order the program's own orderings
allow, whatever the schedule): a read must be ordered after the last writer; a write after the
last writer and every reader since. Known at the call: copies, memsets, cuBLASLt's A/B/C/D/bias
(column by column when ld > rows), NCCL's send and receive buffers. A kernel's, from its launch
arguments (kernel.cpp): each pointer into device or pinned memory, from there to the next address
in its allocation that some op was given (a buffer's start: streams_kernel_reach) or else the
allocation's end, read if it points to const, read and written otherwise. No hook sees a kernel's
loads and stores here, so that is a guess at its buffers: a kernel that indexes past the next
buffer's start is taken not to touch it (missed), one that touches only part of its buffer is
taken to touch all of it (a possible false report, seen nowhere yet).

The host and pinned memory. The host has no hook on its loads and stores; instead, while an op
that the host has not waited for touches pinned memory, the pages it touches are protected
outside API calls (no access if it writes them, read-only if it only reads them). A host access
there faults; the handler records it as an access by the host (its first byte: the faulting
address) and checks it like any other, then lets that one instruction run with the page open
(the x86 trap flag: SIGTRAP after it closes the page again). An op that has not run yet checks
the host accesses recorded meanwhile when it runs. So both orders are caught: the op ran before the
host's access (the access is checked against it) or after (the op is checked against the access).

Every report is fatal: "cuda-emu: streams: <op> reads|writes bytes [a, b) of <allocation>, which
<other op> wrote|read; ..." naming both ops, their streams and their source lines, exit status 86.
*/
#include "emu_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace emu {

// ----------------------------------------------------------------------------
// the switch

bool streams_check() {
    static bool on = [] {
        const char* e = getenv("EMU_CHECK_STREAMS");
        if (e != nullptr && *e != '\0') {
            if (strcmp(e, "0") != 0 && strcmp(e, "1") != 0) { fatal("EMU_CHECK_STREAMS=%s: expected 0 or 1", e); }
            return strcmp(e, "1") == 0;
        }
        return check_settings().streams; // EMU_CHECK=1 (every check) or a list naming "streams" (check.cpp)
    }();
    return on;
}

// ----------------------------------------------------------------------------
// messages

static std::string line_of(const OpSource& s) {
    if (s.file != nullptr) { return std::string(s.file) + ":" + std::to_string(s.line); }
    if (s.pc != nullptr) { return source_line(s.pc); }
    return "an unknown line";
}

std::string op_text(const OpRecord& op) {
    if (op.clock == 0) { return "host code at " + line_of(op.source); }
    bool kernel = op.what.rfind("kernel ", 0) == 0;
    std::string s = op.what + (kernel ? " (launched at " : " (at ") + line_of(op.source) + ") on " + op.stream;
    if (op.stream_pc != nullptr) { s += " (created at " + source_line(op.stream_pc) + ")"; }
    return s;
}

static std::string allocation_words(bool pinned, uintptr_t base, size_t bytes) {
    char s[160];
    snprintf(s, sizeof(s), "a %zu-byte %s allocation at %p", bytes, pinned ? "pinned host (cudaMallocHost)" : "device",
             (void*)base);
    return s;
}

// ----------------------------------------------------------------------------
// the bytes: an interval map per allocation

struct Access { // one op's (or the host's) access, as a range remembers it
    int clock = 0;
    uint32_t time = 0;
    std::shared_ptr<const OpRecord> op;
};

struct State { // of a byte range
    bool written = false;
    Access writer;                // the last write
    std::vector<Access> readers;  // since that write: the latest read on each clock
};
typedef std::shared_ptr<const State> StateRef;

static bool same_access(const Access& a, const Access& b) { return a.clock == b.clock && a.time == b.time && a.op == b.op; }

static bool same_accesses(const std::vector<Access>& a, const std::vector<Access>& b) {
    if (a.size() != b.size()) { return false; }
    for (size_t i = 0; i < a.size(); i++) {
        if (!same_access(a[i], b[i])) { return false; }
    }
    return true;
}

static bool same_state(const State* a, const State* b) {
    if (a == b) { return true; }
    if (a == nullptr || b == nullptr || a->written != b->written) { return false; }
    if (a->written && !same_access(a->writer, b->writer)) { return false; }
    return same_accesses(a->readers, b->readers);
}

// the latest access of each clock: me replaces my clock's
static void note_access(std::vector<Access>& list, const Access& me) {
    for (Access& r : list) {
        if (r.clock == me.clock) {
            r = me;
            return;
        }
    }
    list.push_back(me);
}

struct Segment {
    uintptr_t end;
    StateRef state;
};

struct Tracked { // one allocation
    uintptr_t base = 0;
    size_t bytes = 0;
    bool pinned = false;
    std::map<uintptr_t, Segment> segs; // by start; bytes never touched have none
};

static std::unordered_map<uintptr_t, Tracked>* g_tracked = new std::unordered_map<uintptr_t, Tracked>();

static Tracked* tracked_for(const void* p, size_t n) {
    const void* base = nullptr;
    size_t bytes = 0;
    bool pinned = false;
    if (!device_range(p, n, &base, &bytes)) {
        if (!pinned_allocation(p, &base, &bytes)) { return nullptr; } // pageable host memory: not tracked
        pinned = true;
    }
    Tracked& t = (*g_tracked)[(uintptr_t)base];
    if (t.base == 0) {
        t.base = (uintptr_t)base;
        t.bytes = bytes;
        t.pinned = pinned;
    }
    return &t;
}

// Where the program's buffers start inside each allocation: every address an op was given
// (a copy's, memset's, product's or collective's range, a kernel's pointer argument). A kernel's
// pointer reaches up to the next of them (streams_kernel_reach): a program that carves one
// allocation into buffers hands each buffer's start to the ops that use it.
static std::unordered_map<uintptr_t, std::set<uintptr_t>>* g_starts = new std::unordered_map<uintptr_t, std::set<uintptr_t>>();

void streams_note_start(const void* p, const void* base) { (*g_starts)[(uintptr_t)base].insert((uintptr_t)p); }

static size_t kernel_reach(const KernelPointer& k) {
    uintptr_t a = (uintptr_t)k.p, end = (uintptr_t)k.base + k.bytes;
    auto it = g_starts->find((uintptr_t)k.base);
    if (it != g_starts->end()) {
        auto nx = it->second.upper_bound(a);
        if (nx != it->second.end() && *nx < end) { end = *nx; }
    }
    return end - a;
}

void streams_kernel_ranges(const std::vector<KernelPointer>& pointers, std::vector<OpRange>* out) {
    out->clear();
    for (const KernelPointer& k : pointers) {
        size_t n = kernel_reach(k);
        if (n > 0) { out->push_back(OpRange{k.p, n, !k.to_const}); }
    }
}

// Does the earlier op still touch [a, b) as `kind` with the buffer starts known now? Always for
// an op with exact ranges; for a kernel, when one of its pointers reaches into [a, b) (starts
// queued after it ran may have cut its reach short of those bytes).
static bool still_touches(const OpRecord& op, uintptr_t a, uintptr_t b, bool write) {
    if (op.pointers.empty()) { return true; }
    for (const KernelPointer& k : op.pointers) {
        uintptr_t lo = (uintptr_t)k.p, hi = lo + kernel_reach(k);
        if ((!write || !k.to_const) && lo < b && a < hi) { return true; }
    }
    return false;
}

void streams_forget(const void* base) {
    g_tracked->erase((uintptr_t)base);
    g_starts->erase((uintptr_t)base);
}

enum Kind { READ, WRITE };

static const char* kind_verb(Kind k, bool past) {
    if (k == WRITE) { return past ? "wrote" : "writes"; }
    return past ? "read" : "reads";
}

// [lo, hi) of t: who touches it, and the earlier access it is not ordered after
[[noreturn]] static void report(const Tracked& t, uintptr_t lo, uintptr_t hi, Kind kind, const OpRecord& who,
                                const Access& other, Kind other_kind) {
    std::string hint;
    if (who.clock == 0 || other.clock == 0) {
        hint = "the host must wait for the op (cudaStreamSynchronize, cudaEventSynchronize, a blocking copy) before it "
               "touches these bytes, and queue the op only after its own access";
    } else {
        hint = "no stream order, event wait (cudaEventRecord + cudaStreamWaitEvent) or synchronization orders one after "
               "the other";
    }
    fatal("streams: %s %s bytes [%zu, %zu) of %s, which %s %s; %s", op_text(who).c_str(), kind_verb(kind, false),
          (size_t)(lo - t.base), (size_t)(hi - t.base), allocation_words(t.pinned, t.base, t.bytes).c_str(),
          op_text(*other.op).c_str(), kind_verb(other_kind, true), hint.c_str());
}

static void split(Tracked& t, uintptr_t x) { // a segment boundary at x
    auto it = t.segs.upper_bound(x);
    if (it == t.segs.begin()) { return; }
    --it;
    if (it->first < x && x < it->second.end) {
        Segment right{it->second.end, it->second.state};
        it->second.end = x;
        t.segs.emplace(x, right);
    }
}

// Checks and records one access of [lo, hi) by `who` (an op that ran, or the host). A read must
// be ordered after the last write; a write after the last write and every read since.
static void apply(Tracked& t, uintptr_t lo, uintptr_t hi, Kind kind, const std::shared_ptr<const OpRecord>& who) {
    if (lo >= hi) { return; }
    split(t, lo);
    split(t, hi);
    const VClock& v = who->vc;
    Access me{who->clock, who->time, who};
    // Ranges in one state go to one new state: computed once per old state (memo), so that the
    // segments of a large write collapse into one.
    std::vector<std::pair<const State*, StateRef>> memo;
    auto next = [&](const StateRef& old, uintptr_t a, uintptr_t b) -> StateRef {
        const State* o = old.get();
        if (o != nullptr) { // checked per segment: whether a kernel still touches it depends on where it is
            if (o->written && !v.covers(o->writer.clock, o->writer.time) && still_touches(*o->writer.op, a, b, true)) {
                report(t, a, b, kind, *who, o->writer, WRITE);
            }
            if (kind == WRITE) {
                for (const Access& r : o->readers) {
                    if (!v.covers(r.clock, r.time) && still_touches(*r.op, a, b, false)) { report(t, a, b, kind, *who, r, READ); }
                }
            }
        }
        for (auto& m : memo) {
            if (m.first == o) { return m.second; }
        }
        StateRef n;
        if (kind == WRITE) {
            auto s = std::make_shared<State>();
            s->written = true;
            s->writer = me;
            n = s;
        } else {
            auto s = std::make_shared<State>(o ? *o : State());
            note_access(s->readers, me);
            n = s;
        }
        memo.push_back({o, n});
        return n;
    };
    uintptr_t cur = lo;
    auto it = t.segs.lower_bound(lo);
    while (cur < hi) {
        if (it == t.segs.end() || it->first > cur) { // bytes never touched: [cur, next segment or hi)
            uintptr_t e = (it == t.segs.end() || it->first > hi) ? hi : it->first;
            it = t.segs.emplace_hint(it, cur, Segment{e, next(nullptr, cur, e)});
        } else {
            it->second.state = next(it->second.state, cur, it->second.end);
        }
        cur = it->second.end;
        ++it;
    }
    // neighbours in equal states become one segment (from the one before lo to the one after hi)
    it = t.segs.lower_bound(lo);
    if (it != t.segs.begin()) { --it; }
    while (it != t.segs.end() && it->first <= hi) {
        auto nx = std::next(it);
        if (nx != t.segs.end() && nx->first == it->second.end && same_state(it->second.state.get(), nx->second.state.get())) {
            it->second.end = nx->second.end;
            t.segs.erase(nx);
        } else {
            it = nx;
        }
    }
}

static void apply_range(const void* p, size_t n, Kind kind, const std::shared_ptr<const OpRecord>& who) {
    if (n == 0) { return; }
    Tracked* t = tracked_for(p, n);
    if (t == nullptr) { return; }
    apply(*t, (uintptr_t)p, (uintptr_t)p + n, kind, who);
}

void streams_op_ran(const OpRecordRef& op) {
    op->ran = true;
    if (!op->pointers.empty()) { streams_kernel_ranges(op->pointers, &op->ranges); } // starts queued since its launch
    for (Kind k : {READ, WRITE}) { // its own reads and writes of one byte do not conflict
        for (const OpRange& r : op->ranges) {
            if ((r.write ? WRITE : READ) == k) { apply_range(r.p, r.bytes, k, op); }
        }
    }
}

static std::shared_ptr<const OpRecord> host_record(const void* pc) {
    auto rec = std::make_shared<OpRecord>();
    rec->what = "host code";
    rec->stream = "the host";
    rec->source.pc = pc;
    rec->clock = 0;
    rec->vc = host_clock();
    rec->time = rec->vc.at(0);
    return rec;
}

void streams_host_access(const void* p, size_t n, bool write, const void* pc) {
    apply_range(p, n, write ? WRITE : READ, host_record(pc));
}

// ----------------------------------------------------------------------------
// the host and pinned memory: protected pages while ops the host has not waited for touch them

static const size_t g_page = (size_t)sysconf(_SC_PAGESIZE);
static std::vector<OpRecordRef>* g_pinned_ops = new std::vector<OpRecordRef>(); // not waited for by the host
struct PageRun {
    uintptr_t end;
    int prot;
};
static std::map<uintptr_t, PageRun>* g_protected = new std::map<uintptr_t, PageRun>(); // applied now, by start
// Pages this host thread opened for one instruction (host code may run several threads, each
// stepping its own instruction: OpenMP loops over pinned buffers)
static thread_local std::vector<uintptr_t> tl_stepping;
static std::recursive_mutex* g_fault_lock = nullptr; // runtime.cpp's lock, for the fault handler

void streams_note_pinned(const OpRecordRef& op) {
    bool pinned = false;
    for (const OpRange& r : op->ranges) { pinned = pinned || pinned_range(r.p, 0); }
    if (pinned) { g_pinned_ops->push_back(op); }
}

void streams_unprotect_pinned() {
    for (auto& kv : *g_protected) { mprotect((void*)kv.first, kv.second.end - kv.first, PROT_READ | PROT_WRITE); }
    g_protected->clear();
}

void streams_protect_pinned() {
    if (g_pinned_ops->empty()) { return; }
    const VClock& host = host_clock();
    auto& ops = *g_pinned_ops;
    ops.erase(std::remove_if(ops.begin(), ops.end(), [&](const OpRecordRef& o) { return host.covers(o->clock, o->time); }),
              ops.end());
    // per page: no access where an op writes (or may write), read-only where ops only read
    std::map<uintptr_t, int> want;
    auto mark = [&](const void* p, size_t n, bool write) {
        if (n == 0 || !pinned_range(p, 0)) { return; }
        uintptr_t lo = (uintptr_t)p & ~(g_page - 1), hi = ((uintptr_t)p + n + g_page - 1) & ~(g_page - 1);
        for (uintptr_t a = lo; a < hi; a += g_page) {
            auto w = want.emplace(a, PROT_READ);
            if (write) { w.first->second = PROT_NONE; }
        }
    };
    for (const OpRecordRef& o : ops) {
        for (const OpRange& r : o->ranges) { mark(r.p, r.bytes, r.write); }
    }
    for (auto it = want.begin(); it != want.end();) { // runs of pages with one protection
        uintptr_t lo = it->first, hi = lo + g_page;
        int prot = it->second;
        for (++it; it != want.end() && it->first == hi && it->second == prot; ++it) { hi += g_page; }
        mprotect((void*)lo, hi - lo, prot);
        (*g_protected)[lo] = PageRun{hi, prot};
    }
}

static const PageRun* protected_run(uintptr_t page, uintptr_t* start) {
    auto it = g_protected->upper_bound(page);
    if (it == g_protected->begin()) { return nullptr; }
    --it;
    if (page >= it->second.end) { return nullptr; }
    *start = it->first;
    return &it->second;
}

static void trap_handler(int sig, siginfo_t*, void* ctx) {
    greg_t& flags = ((ucontext_t*)ctx)->uc_mcontext.gregs[REG_EFL];
    if (tl_stepping.empty() && !(flags & 0x100)) { // not ours (a breakpoint): the default action
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    std::lock_guard<std::recursive_mutex> lock(*g_fault_lock);
    for (uintptr_t page : tl_stepping) {
        uintptr_t start;
        const PageRun* r = protected_run(page, &start);
        if (r != nullptr) { mprotect((void*)page, g_page, r->prot); }
    }
    tl_stepping.clear();
    flags &= ~0x100ll; // the trap flag
}

bool streams_pinned_fault(void* addr, bool write, void* ctx, std::recursive_mutex* lock) {
    g_fault_lock = lock;
    // Host code never faults here while it holds the lock: the pages are open during API calls.
    std::lock_guard<std::recursive_mutex> hold(*lock);
    uintptr_t page = (uintptr_t)addr & ~(g_page - 1), start;
    if (protected_run(page, &start) == nullptr) { return false; }
    ucontext_t* uc = (ucontext_t*)ctx;
    const char* pc = (const char*)uc->uc_mcontext.gregs[REG_RIP];
    // Not async-signal-safe (it allocates), but the host faulted in its own code touching pinned
    // memory, outside every API call: nothing of the emulator's is half done.
    streams_host_access(addr, 1, write, pc + 1); // pc + 1: source_line takes return addresses
    static bool trap_installed = false;
    if (!trap_installed) {
        trap_installed = true;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = trap_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTRAP, &sa, nullptr);
    }
    mprotect((void*)page, g_page, PROT_READ | PROT_WRITE);
    tl_stepping.push_back(page);
    uc->uc_mcontext.gregs[REG_EFL] |= 0x100; // trap after this one instruction
    return true;
}

// ----------------------------------------------------------------------------
// source lines (until the access hooks' check.cpp gives the emulator its own): addr2line on the
// object holding a return address

struct ObjectOf {
    uintptr_t pc, bias = 0;
    std::string path;
    bool found = false;
};

static int find_object(struct dl_phdr_info* info, size_t, void* data) {
    ObjectOf* o = (ObjectOf*)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && o->pc >= lo && o->pc < lo + ph.p_memsz) {
            o->bias = info->dlpi_addr;
            o->path = info->dlpi_name ? info->dlpi_name : "";
            o->found = true;
            return 1;
        }
    }
    return 0;
}

__attribute__((weak)) std::string source_line(const void* pc) {
    ObjectOf o;
    o.pc = (uintptr_t)pc - 1; // a return address: the call is the byte before
    dl_iterate_phdr(find_object, &o);
    std::string text = "an unknown line (no line table: build with -g)";
    if (!o.found) { return text; }
    std::string path = o.path;
    if (path.empty()) {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0) { return text; }
        exe[n] = '\0';
        path = exe;
    }
    char cmd[4600];
    snprintf(cmd, sizeof(cmd), "addr2line -i -e '%s' 0x%lx 2>/dev/null", path.c_str(), (unsigned long)(o.pc - o.bias));
    FILE* f = popen(cmd, "r");
    if (f == nullptr) { return text; }
    char line[4096];
    while (fgets(line, sizeof(line), f)) { // innermost frame first: the first outside our headers
        std::string s(line);
        while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) { s.pop_back(); }
        size_t d = s.find(" (discriminator");
        if (d != std::string::npos) { s = s.substr(0, d); }
        if (s.empty() || s.rfind("??", 0) == 0 || s.find("/include/") != std::string::npos ||
            s.find("emu_device.h") != std::string::npos) {
            continue;
        }
        text = s;
        break;
    }
    pclose(f);
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr && text.rfind(std::string(cwd) + "/", 0) == 0) { text = text.substr(strlen(cwd) + 1); }
    return text;
}

} // namespace emu
