/*
nccl.cpp: NCCL 2.28 for the CPU emulator. It provides the functions and types of <nccl.h> to
ranks that are separate processes on one machine, and moves their data through POSIX shared
memory (/dev/shm).

What it emulates
- Communicators: ncclGetUniqueId, ncclCommInitRank and ncclCommInitRankConfig (blocking and
  non-blocking), ncclCommSplit, ncclCommFinalize/Destroy/Abort, ncclCommGetAsyncError,
  ncclGetLastError, ncclCommCount/UserRank/CuDevice. Init makes the checks NCCL makes (nranks, rank, a rank
  registered twice). It also applies NCCL 2.28's refusal of two ranks on one GPU of one host. The
  host is NCCL_HOSTID if set, else the hostname, so a test gives each rank its own NCCL_HOSTID to
  put several ranks on one emulated GPU.
- Collectives: AllReduce, ReduceScatter, AllGather, Broadcast (and ncclBcast) and Reduce, with
  NCCL's in-place forms, on every type except fp8, with the 5 built-in ops, and group calls.
  Each collective is an op queued on its stream (emu::enqueue), so it reads the buffers when it
  runs, as on a GPU.
- Reductions run in rank order and round to the element type after every step:
  ((x0 op x1) op x2) ... (ncclAvg: that sum / nranks). Every rank gets the same bits, and a test
  can compute them. Real NCCL's order depends on its algorithm and is not documented.
- Non-blocking communicators sometimes answer ncclInProgress at random (EMU_NCCL_INPROGRESS is
  the probability, 0.3 by default, 0 turns it off), so that the caller's polling gets tested.
  Calling again before ncclCommGetAsyncError has said ncclSuccess is ncclInvalidUsage.
- Some mistakes that real NCCL turns into a hang or corrupted data are reported instead:
  * ranks that call different collectives at the same position: ncclInvalidUsage, naming both;
  * a peer that died, aborted or destroyed its communicator while we wait for it:
    ncclRemoteError.

Not emulated: point-to-point (ncclSend/Recv), AlltoAll/Gather/Scatter, ncclCommShrink/Revoke,
ncclCommSplit inside a group call, the config's splitShare (accepted, nothing is shared), user-defined reduction ops, fp8 types, buffer registration and windows, ncclMemAlloc,
the pncclXxx profiling names, more than one machine (shared memory is local), the NaN rules of
Max/Min, and NCCL's algorithms, timing and environment variables (except NCCL_HOSTID and
NCCL_COMM_BLOCKING).

Shared memory protocol
- The communicator's segment, "/gpt2emu-<hex>", is named by the unique id. It has a header and
  one slot per rank. Every rank opens it with O_CREAT and ftruncates it to the same fixed size,
  so the zero-filled header is valid whoever comes first. Each rank claims its slot by
  compare-exchange (a second claim means the rank was registered twice), writes its pid, host
  and device, and marks the slot ACTIVE. The communicator is formed once all nranks slots are
  ACTIVE.
- Collective k (the same k on every rank, because ranks issue the same collectives in the same
  order) has its own object "<segment>-<k>": a header, one Desc per rank (what that rank asked
  for) and nranks contributions. The first rank creates it (O_EXCL), sizes it, reserves its
  memory, and sets `ready`.
- Each rank writes its Desc and its send data, then increments `arrived`. When arrived ==
  nranks, each rank checks that all Descs agree, computes its own result from every
  contribution, and increments `done`. The last rank to do so unlinks the object.
- While waiting, an op returns false: it never blocks. Every few ms it checks the slots of the
  ranks it still waits for (LEFT, ABORTED, or a dead pid) and breaks the communicator if one is
  never coming.
- ncclCommSplit is collective over the parent: the ranks' k-th split (the same k on every rank,
  as splits are called in the same order) meets in a segment "<parent>-split<k>" of the
  parent's size, where each rank's slot also carries its color and key. Once every slot is
  active, each rank counts the ranks of its color, ordered by key and then parent rank (NCCL's
  rule), leaves that segment and joins its child's, "<parent>-split<k>-<color>", as init joins
  a communicator. A non-blocking split answers ncclInProgress and gets there while the new
  communicator is polled. A rank with NCCL_SPLIT_NOCOLOR gets no communicator: it waits until
  every rank has joined the meeting (a blocking wait even on a non-blocking parent, stricter
  than NCCL, which would let it go at once) so that its leaving cannot look like a dead peer.
- Destroy or abort marks this rank's slot LEFT or ABORTED. The rank that finds every slot left,
  aborted or dead unlinks the segment.

All emulator code runs under the emulator's lock (emu::ApiScope), so the per-process state
below needs no locking. Only the shared memory is concurrent, and it uses lock-free atomics.
*/
#include <nccl.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "emu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// ---------------------------------------------------------------------------
// errors, time, environment

std::string g_last_error; // ncclGetLastError: the last error of this process (NCCL's is global too)

// Records the message for ncclGetLastError and returns rc. NCCL_DEBUG (any value) also prints it.
__attribute__((format(printf, 2, 3))) ncclResult_t fail(ncclResult_t rc, const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    g_last_error = buf;
    const char* debug = getenv("NCCL_DEBUG");
    if (debug != nullptr && *debug != '\0') { emu::warn("NCCL WARN %s", buf); }
    return rc;
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double env_double(const char* name, double fallback) {
    const char* v = getenv(name);
    return v != nullptr && *v != '\0' ? atof(v) : fallback;
}

// The chance that a call on a non-blocking communicator answers ncclInProgress.
double in_progress_probability() {
    static const double p = env_double("EMU_NCCL_INPROGRESS", 0.3);
    return p;
}

// True once process `pid` has exited: no such process, or a zombie its parent has not reaped yet
// (kill() still succeeds on those, and a test script may be slow to reap).
bool process_gone(int64_t pid) {
    if (pid <= 0) { return false; }
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) { return true; }
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
    FILE* f = fopen(path, "r");
    if (f == nullptr) { return false; }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char* p = strrchr(buf, ')'); // "pid (comm) S ...": the state follows the last ')'
    return p != nullptr && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

// ---------------------------------------------------------------------------
// the communicator's shared segment

constexpr const char* kPrefix = "/gpt2emu-";
constexpr int kMaxRanks = 256;
enum : uint64_t { SLOT_EMPTY = 0, SLOT_CLAIMED, SLOT_ACTIVE, SLOT_LEFT, SLOT_ABORTED };

struct Slot {                     // one rank's registration
    std::atomic<uint64_t> state;  // SLOT_*: ACTIVE is stored after the fields below
    int64_t pid;
    int32_t device;
    int32_t color;                // a split's meeting (ncclCommSplit): this rank's color and key
    int32_t key;
    int32_t unused;
    char host[232];               // NCCL_HOSTID, else the hostname
};
struct Segment {
    std::atomic<uint64_t> nranks;      // set by the first rank to register; the others must agree
    std::atomic<uint64_t> error_state; // 0: none, 1: being written, 2: `error` is final
    char error[512];                   // an init error every rank reports (ranks disagree on nranks)
    Slot slot[kMaxRanks];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

struct CollRun;

// One rank's communicator, as this process sees it. ncclComm holds it through a shared_ptr, and
// so do the queued collectives, so an op that runs after ncclCommAbort finds it still there.
struct CommState {
    std::string name;           // the segment; collective k uses "<name>-<k>"
    int rank = 0, nranks = 0, device = 0;
    bool blocking = true;
    Segment* seg = nullptr;     // mapped until the communicator is destroyed or aborted
    bool own_slot = false;      // false when init failed before this rank claimed its slot
    bool formed = false;        // every rank has registered and the checks passed
    bool finalized = false;     // ncclCommFinalize was called
    bool closed = false;        // destroyed or aborted: queued collectives become no-ops
    ncclResult_t error = ncclSuccess;     // the sticky asynchronous error
    int busy = 0;               // ncclInProgress answers still owed after a call returned ncclInProgress
    uint64_t seq = 0;           // collectives queued so far: the same count on every rank
    uint64_t splits = 0;        // ncclCommSplit calls so far: the same count on every rank
    int color = 0, key = 0;     // a split's child: its color and key, written into the meeting's slot
    std::shared_ptr<CommState> meeting; // a split's child before it knows its ranks (see the header)
    int pending = 0;            // collectives queued and not finished
    std::map<cudaStream_t, int> pending_on; // the same, per stream (for a blocking wait)
    std::set<CollRun*> inflight;            // their state, released at once by an abort
};

// The communicator breaks: from now on it reports `rc`, and its queued collectives are no-ops.
// The first cause is kept, as it is the one worth reading.
__attribute__((format(printf, 3, 4))) ncclResult_t break_comm(CommState& st, ncclResult_t rc, const char* fmt, ...) {
    if (st.error != ncclSuccess) { return st.error; }
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    st.error = rc;
    return fail(rc, "%s", buf);
}

// An init error for every rank of the segment (the first one written wins).
void publish_error(Segment& seg, const char* msg) {
    uint64_t none = 0;
    if (!seg.error_state.compare_exchange_strong(none, 1)) { return; }
    snprintf(seg.error, sizeof(seg.error), "%s", msg);
    seg.error_state.store(2);
}

std::string host_id() {
    const char* id = getenv("NCCL_HOSTID");
    if (id != nullptr && *id != '\0') { return id; }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    return host;
}

// Maps the segment and claims this rank's slot. Whoever comes first creates the segment. Every
// rank ftruncates it to the same size, so a late ftruncate never cuts what another rank wrote.
ncclResult_t join(CommState& st) {
    int fd = shm_open(st.name.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0) { return fail(ncclSystemError, "shm_open(%s): %s", st.name.c_str(), strerror(errno)); }
    void* p = MAP_FAILED;
    if (ftruncate(fd, sizeof(Segment)) == 0) {
        p = mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) { return fail(ncclSystemError, "cannot map %s: %s", st.name.c_str(), strerror(err)); }
    st.seg = (Segment*)p;
    Segment& seg = *st.seg;
    uint64_t first = 0;
    if (!seg.nranks.compare_exchange_strong(first, (uint64_t)st.nranks) && first != (uint64_t)st.nranks) {
        char msg[256];
        snprintf(msg, sizeof(msg), "ranks disagree on nranks: rank %d was given %d, an earlier rank %llu",
                 st.rank, st.nranks, (unsigned long long)first);
        publish_error(seg, msg);
        return fail(ncclInvalidUsage, "%s", msg);
    }
    Slot& me = seg.slot[st.rank];
    uint64_t empty = SLOT_EMPTY;
    if (!me.state.compare_exchange_strong(empty, SLOT_CLAIMED)) {
        return fail(ncclInvalidUsage, "rank %d of %d was registered twice (pid %lld had it, pid %d asked again): "
                    "every process needs its own rank", st.rank, st.nranks, (long long)me.pid, (int)getpid());
    }
    st.own_slot = true;
    me.pid = getpid();
    me.device = st.device;
    me.color = st.color;
    me.key = st.key;
    snprintf(me.host, sizeof(me.host), "%s", host_id().c_str());
    me.state.store(SLOT_ACTIVE);
    return ncclSuccess;
}

// NCCL 2.28 refuses two ranks on the same GPU of one host. Every rank reads the same slots, so
// every rank fails with the same message.
ncclResult_t check_duplicate_gpus(CommState& st) {
    const Slot* s = st.seg->slot;
    for (int r = 1; r < st.nranks; r++) {
        for (int q = 0; q < r; q++) {
            if (s[r].device == s[q].device && strcmp(s[r].host, s[q].host) == 0) {
                return break_comm(st, ncclInvalidUsage, "Duplicate GPU detected: rank %d and rank %d both on CUDA device %d "
                                  "(host id '%s'; several ranks on one GPU need a different NCCL_HOSTID each)",
                                  r, q, s[r].device, s[r].host);
            }
        }
    }
    return ncclSuccess;
}

// Has every rank registered? Returns ncclSuccess once they have and the checks passed,
// ncclInProgress while some are missing, or else the error (described by ncclGetLastError).
ncclResult_t poll_split(CommState& st);

ncclResult_t poll_init(CommState& st) {
    if (st.error != ncclSuccess || st.formed) { return st.error; }
    if (st.meeting != nullptr) {
        ncclResult_t rc = poll_split(st);
        if (rc != ncclSuccess) { return rc; }
    }
    Segment& seg = *st.seg;
    if (seg.error_state.load() == 2) { return break_comm(st, ncclInvalidUsage, "%s", seg.error); }
    // One snapshot of the states decides. Read twice, a peer could register, fail a check and
    // abort in between, and look as if it gave up before joining.
    std::vector<uint64_t> state(st.nranks);
    bool all = true;
    for (int r = 0; r < st.nranks; r++) {
        state[r] = seg.slot[r].state.load();
        all = all && state[r] >= SLOT_ACTIVE; // LEFT and ABORTED registered first
    }
    if (all) {
        if (check_duplicate_gpus(st) != ncclSuccess) { return st.error; }
        st.formed = true;
        return ncclSuccess;
    }
    // Some rank is missing. If one that did register is already gone, waiting is pointless.
    for (int r = 0; r < st.nranks; r++) {
        uint64_t s = state[r];
        if (s == SLOT_LEFT || s == SLOT_ABORTED || (s == SLOT_ACTIVE && process_gone(seg.slot[r].pid))) {
            return break_comm(st, ncclRemoteError, "rank %d (pid %lld) %s before every rank had joined communicator %s",
                              r, (long long)seg.slot[r].pid, s == SLOT_ACTIVE ? "exited" : "gave up", st.name.c_str());
        }
    }
    return ncclInProgress;
}

std::string missing_ranks(const CommState& st) {
    if (st.meeting != nullptr) { return missing_ranks(*st.meeting) + " (of the split's parent)"; }
    std::string out;
    for (int r = 0; r < st.nranks; r++) {
        if (st.seg->slot[r].state.load() < SLOT_ACTIVE) { out += (out.empty() ? "rank " : ", ") + std::to_string(r); }
    }
    return out;
}

// A blocking init waits for every rank, as NCCL does. EMU_HANG_TIMEOUT (default 600 s) ends a wait
// that would otherwise never end, and the message names the ranks that never came.
ncclResult_t wait_formed(CommState& st) {
    double limit = env_double("EMU_HANG_TIMEOUT", 600.0), deadline = now_s() + limit;
    ncclResult_t rc;
    while ((rc = poll_init(st)) == ncclInProgress) {
        if (now_s() > deadline) {
            emu::fatal("ncclCommInitRank: rank %d waited %g s (EMU_HANG_TIMEOUT) for %s of %d to join communicator %s",
                       st.rank, limit, missing_ranks(st).c_str(), st.nranks, st.name.c_str());
        }
        usleep(1000);
    }
    return rc;
}

// ---------------------------------------------------------------------------
// what a collective asks for

enum Kind : int32_t { ALL_REDUCE = 1, REDUCE_SCATTER, ALL_GATHER, BROADCAST, REDUCE };

// One rank's request. It is compared across ranks byte by byte, so it is plain data with no padding.
struct Desc {
    int32_t kind, type, op, root; // op -1: not a reduction; root -1: no root
    uint64_t count;               // NCCL's count argument (recvcount for ReduceScatter, sendcount for AllGather)
};
static_assert(sizeof(Desc) == 24, "Desc must have no padding");

const char* kind_name(int32_t k) {
    switch (k) {
        case ALL_REDUCE: return "ncclAllReduce";
        case REDUCE_SCATTER: return "ncclReduceScatter";
        case ALL_GATHER: return "ncclAllGather";
        case BROADCAST: return "ncclBroadcast";
        case REDUCE: return "ncclReduce";
        default: return "?";
    }
}

const char* type_name(int32_t t) {
    static const char* const names[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                                        "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16",
                                        "ncclFloat8e4m3", "ncclFloat8e5m2"};
    return t >= 0 && t < ncclNumTypes ? names[t] : "?";
}

size_t type_size(int32_t t) {
    switch (t) {
        case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
        case ncclFloat16: case ncclBfloat16: return 2;
        case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
        default: return 8;
    }
}

const char* op_name(int32_t op) {
    static const char* const names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
    return op >= 0 && op < ncclNumOps ? names[op] : "?";
}

std::string describe(const Desc& d) {
    char buf[160];
    int n = snprintf(buf, sizeof(buf), "%s(count %llu, %s", kind_name(d.kind), (unsigned long long)d.count, type_name(d.type));
    if (d.op >= 0) { n += snprintf(buf + n, sizeof(buf) - n, ", %s", op_name(d.op)); }
    if (d.root >= 0) { n += snprintf(buf + n, sizeof(buf) - n, ", root %d", d.root); }
    snprintf(buf + n, sizeof(buf) - n, ")");
    return buf;
}

// Bytes each rank puts into the collective's object.
size_t contribution_bytes(const Desc& d, int nranks) {
    return d.count * type_size(d.type) * (d.kind == REDUCE_SCATTER ? nranks : 1);
}

// ---------------------------------------------------------------------------
// reductions, in rank order

// Arithmetic on element type T. A value is widened (16-bit floats to float), combined, and
// rounded back to T after every step, which is what the documented rank order requires.
template <class T> struct Arith {
    using M = T;
    static M in(T x) { return x; }
    static T out(M x) { return x; }
};
template <> struct Arith<__nv_bfloat16> {
    using M = float;
    static float in(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __nv_bfloat16 out(float x) { return __float2bfloat16_rn(x); }
};
template <> struct Arith<__half> {
    using M = float;
    static float in(__half x) { return __half2float(x); }
    static __half out(float x) { return __float2half_rn(x); }
};

// Integer sums and products wrap, as on the GPU. They are computed unsigned so that C++ defines them.
template <class M> M add(M a, M b) {
    if constexpr (std::is_integral_v<M>) { using U = std::make_unsigned_t<M>; return (M)(U)((U)a + (U)b); }
    else { return a + b; }
}
template <class M> M mul(M a, M b) {
    if constexpr (std::is_integral_v<M>) { using U = std::make_unsigned_t<M>; return (M)(U)((U)a * (U)b); }
    else { return a * b; }
}
template <class M> M divide(M a, int n) {
    if constexpr (std::is_integral_v<M>) { return (M)(a / (std::conditional_t<std::is_signed_v<M>, int64_t, uint64_t>)n); }
    else { return a / (M)n; }
}

template <class T, class F> void combine(T* acc, const T* x, size_t n, F f) {
    for (size_t i = 0; i < n; i++) { acc[i] = Arith<T>::out(f(Arith<T>::in(acc[i]), Arith<T>::in(x[i]))); }
}

// dst = x0 op x1 op ... op x(nranks-1), left to right, where xr = n elements at first + r*stride.
template <class T> void reduce_typed(void* dst_, const char* first, size_t stride, int nranks, size_t n, int op) {
    using M = typename Arith<T>::M;
    T* dst = (T*)dst_;
    memcpy(dst, first, n * sizeof(T));
    for (int r = 1; r < nranks; r++) {
        const T* x = (const T*)(first + r * stride);
        switch (op) {
            case ncclSum: case ncclAvg: combine(dst, x, n, [](M a, M b) { return add(a, b); }); break;
            case ncclProd: combine(dst, x, n, [](M a, M b) { return mul(a, b); }); break;
            case ncclMax: combine(dst, x, n, [](M a, M b) { return b > a ? b : a; }); break;
            case ncclMin: combine(dst, x, n, [](M a, M b) { return b < a ? b : a; }); break;
        }
    }
    if (op == ncclAvg) {
        for (size_t i = 0; i < n; i++) { dst[i] = Arith<T>::out(divide(Arith<T>::in(dst[i]), nranks)); }
    }
}

void reduce(int32_t type, void* dst, const char* first, size_t stride, int nranks, size_t n, int op) {
    switch (type) {
        case ncclInt8: reduce_typed<int8_t>(dst, first, stride, nranks, n, op); break;
        case ncclUint8: reduce_typed<uint8_t>(dst, first, stride, nranks, n, op); break;
        case ncclInt32: reduce_typed<int32_t>(dst, first, stride, nranks, n, op); break;
        case ncclUint32: reduce_typed<uint32_t>(dst, first, stride, nranks, n, op); break;
        case ncclInt64: reduce_typed<int64_t>(dst, first, stride, nranks, n, op); break;
        case ncclUint64: reduce_typed<uint64_t>(dst, first, stride, nranks, n, op); break;
        case ncclFloat16: reduce_typed<__half>(dst, first, stride, nranks, n, op); break;
        case ncclFloat32: reduce_typed<float>(dst, first, stride, nranks, n, op); break;
        case ncclFloat64: reduce_typed<double>(dst, first, stride, nranks, n, op); break;
        case ncclBfloat16: reduce_typed<__nv_bfloat16>(dst, first, stride, nranks, n, op); break;
    }
}

// ---------------------------------------------------------------------------
// one collective's shared object, and one rank's part in it

struct CollSlot {
    std::atomic<uint64_t> arrived; // 1 once this rank's Desc and data are in
    Desc desc;
};
struct CollHeader {
    std::atomic<uint64_t> ready;   // the creator has sized the object and reserved its memory
    std::atomic<uint64_t> arrived; // ranks whose contribution is in
    std::atomic<uint64_t> done;    // ranks that have taken their result
    uint64_t contribution;         // bytes per rank, as the creator sized it (a rank asking for
                                   // another size writes only its Desc: the mismatch is reported)
};

size_t coll_header_bytes(int nranks) {
    size_t n = sizeof(CollHeader) + nranks * sizeof(CollSlot);
    return (n + 4095) / 4096 * 4096;
}

// One rank's part of one collective: the state its op keeps between tries.
struct CollRun {
    std::shared_ptr<CommState> st;
    Desc d;
    const void* send;
    void* recv;
    cudaStream_t stream;
    uint64_t seq;
    std::string object;            // "<comm name>-<seq>"
    CollHeader* h = nullptr;       // the mapped object
    size_t mapped = 0;
    bool contributed = false, finished = false;
    double next_peer_check = 0;

    CollRun(std::shared_ptr<CommState> s, const Desc& desc, const void* sb, void* rb, cudaStream_t strm)
        : st(std::move(s)), d(desc), send(sb), recv(rb), stream(strm) {
        seq = ++st->seq;
        object = st->name + "-" + std::to_string(seq);
        st->pending++;
        st->pending_on[stream]++;
        st->inflight.insert(this);
    }
    ~CollRun() { if (!finished) { finish(false); } }

    int nranks() const { return st->nranks; }
    CollSlot* slots() const { return (CollSlot*)((char*)h + sizeof(CollHeader)); }
    char* data() const { return (char*)h + coll_header_bytes(nranks()); }

    bool step();
    bool attach();
    void contribute();
    bool keep_waiting();
    void check_peers();
    bool same_call_everywhere();
    void deliver();
    bool finish(bool remove);
};

// The op: it runs its phases as far as it can without waiting, and returns true when this
// rank's part is done (or became a no-op), or false to be tried again later.
bool CollRun::step() {
    if (finished) { return true; }
    CommState& c = *st;
    if (c.closed) { return finish(false); }               // aborted or destroyed
    if (c.error != ncclSuccess) { return finish(true); }  // the communicator broke earlier
    if (h == nullptr && !attach()) { return keep_waiting(); }
    if (!contributed) { contribute(); }
    if (h->arrived.load(std::memory_order_acquire) < (uint64_t)nranks()) { return keep_waiting(); }
    if (!same_call_everywhere()) { return finish(true); }
    deliver();
    return finish(h->done.fetch_add(1) + 1 == (uint64_t)nranks()); // the last rank out removes the object
}

// Opens the collective's object. The first rank creates it, sizes it and reserves its memory,
// so that a full /dev/shm fails here with a message and not later as a SIGBUS. The other ranks
// map it once it is ready.
bool CollRun::attach() {
    size_t bytes = coll_header_bytes(nranks()) + nranks() * contribution_bytes(d, nranks());
    int fd = shm_open(object.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    bool creator = fd >= 0;
    if (!creator) {
        if (errno != EEXIST) { break_comm(*st, ncclSystemError, "shm_open(%s): %s", object.c_str(), strerror(errno)); return false; }
        fd = shm_open(object.c_str(), O_RDWR, 0);
        struct stat sb;
        if (fd < 0) { return false; } // removed in between by a rank that broke: try again
        if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < coll_header_bytes(nranks())) { close(fd); return false; } // not sized yet
        bytes = sb.st_size;
    } else if (int err = ftruncate(fd, bytes) != 0 ? errno : posix_fallocate(fd, 0, bytes); err != 0) {
        close(fd);
        shm_unlink(object.c_str());
        break_comm(*st, ncclSystemError, "cannot reserve %zu bytes of shared memory for %s #%llu (%s): is /dev/shm too small?",
                   bytes, kind_name(d.kind), (unsigned long long)seq, strerror(err));
        return false;
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) { break_comm(*st, ncclSystemError, "cannot map %s: %s", object.c_str(), strerror(errno)); return false; }
    h = (CollHeader*)p;
    mapped = bytes;
    if (creator) {
        h->contribution = contribution_bytes(d, nranks());
        h->ready.store(1, std::memory_order_release);
    } else if (h->ready.load(std::memory_order_acquire) == 0) {
        munmap(h, mapped);
        h = nullptr;
        return false;
    }
    return true;
}

// Puts in this rank's Desc and data. The data goes in only if the creator sized the object for
// the same number of bytes; a different size is a mismatch, reported once every rank is in.
void CollRun::contribute() {
    CommState& c = *st;
    CollSlot& me = slots()[c.rank];
    me.desc = d;
    size_t bytes = contribution_bytes(d, nranks());
    bool sends = d.kind != BROADCAST || c.rank == d.root; // only the root's data is broadcast
    if (sends && bytes == h->contribution) {
        emu::device_bytes_read(send, bytes, ("nccl " + describe(d) + " reading its sendbuff").c_str()); // initcheck
        memcpy(data() + c.rank * bytes, send, bytes);
    }
    me.arrived.store(1, std::memory_order_release);
    h->arrived.fetch_add(1, std::memory_order_acq_rel);
    contributed = true;
}

// Some peers are not in yet: returns false (try again later) unless one of them will never come.
bool CollRun::keep_waiting() {
    check_peers();
    return st->error != ncclSuccess ? finish(true) : false;
}

// Every few ms, looks at the ranks we still wait for. A rank that left, aborted or exited will
// never arrive, so the communicator breaks with ncclRemoteError. Real NCCL notices a closed
// connection in the same way, or hangs. A rank that vanished without leaving (a crash) is named
// before one that aborted, because the abort is usually another rank's reaction to that crash.
void CollRun::check_peers() {
    double t = now_s();
    if (t < next_peer_check) { return; }
    next_peer_check = t + 0.005;
    CommState& c = *st;
    auto arrived = [&](int r) { return h != nullptr && slots()[r].arrived.load(std::memory_order_acquire) != 0; };
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < c.nranks; r++) {
            if (r == c.rank || arrived(r)) { continue; }
            const Slot& s = c.seg->slot[r];
            uint64_t state = s.state.load();
            const char* why = pass == 0 ? (state == SLOT_ACTIVE && process_gone(s.pid) ? "exited" : nullptr)
                            : state == SLOT_ABORTED ? "aborted its communicator"
                            : state == SLOT_LEFT    ? "destroyed its communicator" : nullptr;
            // Look again: the peer may have arrived, finished and left since we looked (this
            // process can be preempted in between). Its arrival came before its exit or its
            // slot's new state, so it is visible now.
            if (why != nullptr && !arrived(r)) {
                break_comm(c, ncclRemoteError, "rank %d (pid %lld) %s while rank %d waits for it in %s, collective #%llu of communicator %s",
                           r, (long long)s.pid, why, c.rank, describe(d).c_str(), (unsigned long long)seq, c.name.c_str());
                return;
            }
        }
    }
}

// Did every rank call the same collective at this position? Real NCCL would hang or corrupt
// data; the emulator reports it, naming both calls, and every rank reports the same thing.
bool CollRun::same_call_everywhere() {
    const CollSlot* s = slots();
    for (int r = 1; r < nranks(); r++) {
        if (memcmp(&s[r].desc, &s[0].desc, sizeof(Desc)) != 0) {
            break_comm(*st, ncclInvalidUsage, "ranks called different collectives as #%llu of communicator %s: rank 0 called %s, rank %d called %s",
                       (unsigned long long)seq, st->name.c_str(), describe(s[0].desc).c_str(), r, describe(s[r].desc).c_str());
            return false;
        }
    }
    return true;
}

// Computes this rank's result from every rank's contribution. The inputs are read from shared
// memory, never from recvbuff, so the in-place forms need no special case.
void CollRun::deliver() {
    int rank = st->rank, n = nranks();
    size_t bytes = contribution_bytes(d, n), es = type_size(d.type);
    switch (d.kind) {
        case ALL_REDUCE: reduce(d.type, recv, data(), bytes, n, d.count, d.op); break;
        case REDUCE_SCATTER: reduce(d.type, recv, data() + rank * d.count * es, bytes, n, d.count, d.op); break;
        case REDUCE: if (rank == d.root) { reduce(d.type, recv, data(), bytes, n, d.count, d.op); } break;
        case ALL_GATHER: memcpy(recv, data(), n * bytes); break;
        case BROADCAST: memcpy(recv, data() + d.root * bytes, bytes); break;
    }
    // initcheck (EMU_CHECK): what recvbuff now holds counts as written
    if (d.kind == ALL_GATHER) { emu::device_bytes_written(recv, n * bytes); }
    else if (d.kind != REDUCE || rank == d.root) { emu::device_bytes_written(recv, d.count * es); }
}

// Ends this rank's part. `remove` unlinks the object: the last rank out does it, and so does a
// rank whose communicator broke. Peers that have it mapped keep their mapping; a peer that has
// not opened it yet creates a fresh one and then notices the breakage.
bool CollRun::finish(bool remove) {
    if (h != nullptr) {
        if (remove) { shm_unlink(object.c_str()); }
        munmap(h, mapped);
        h = nullptr;
    }
    if (!finished) {
        finished = true;
        st->pending--;
        if (--st->pending_on[stream] == 0) { st->pending_on.erase(stream); }
        st->inflight.erase(this);
    }
    return true;
}

// ---------------------------------------------------------------------------
// leaving a communicator

// The communicators alive in this process. At exit they are aborted, so that peers read
// "aborted" in the slot at once instead of waiting to see the process gone.
std::set<CommState*>& live_comms() {
    static std::set<CommState*>* s = new std::set<CommState*>; // never destroyed: still valid at exit
    return *s;
}

// Ends this rank's part of the communicator. Queued collectives become no-ops, and in-flight
// objects are removed. The slot records why, so that waiting peers report it instead of
// hanging. The last rank out removes the segment.
void leave(CommState& st, bool abort) {
    if (st.closed) { return; }
    st.closed = true;
    if (st.meeting != nullptr) { leave(*st.meeting, abort); st.meeting = nullptr; }
    std::set<CollRun*> runs = st.inflight; // finish() edits the set
    for (CollRun* run : runs) { run->finish(true); }
    if (st.seg == nullptr) { return; }
    Slot* s = st.seg->slot;
    if (st.own_slot) { s[st.rank].state.store(abort ? SLOT_ABORTED : SLOT_LEFT); }
    bool last = true;
    for (int r = 0; r < st.nranks && last; r++) {
        uint64_t state = s[r].state.load();
        last = state == SLOT_LEFT || state == SLOT_ABORTED || (state == SLOT_ACTIVE && process_gone(s[r].pid));
    }
    if (last) { shm_unlink(st.name.c_str()); }
    munmap(st.seg, sizeof(Segment));
    st.seg = nullptr;
}

// A split's child (see the header): once every rank of the parent is at the meeting, this rank
// learns the child's size and its own rank from the colors and keys (by key, then parent rank),
// leaves the meeting and joins the child's segment. ncclSuccess once joined (poll_init then
// waits for the child's other ranks), ncclInProgress before, or the error.
ncclResult_t poll_split(CommState& st) {
    CommState& m = *st.meeting;
    ncclResult_t rc = poll_init(m);
    if (rc == ncclInProgress) { return rc; }
    if (rc != ncclSuccess) { return break_comm(st, rc, "ncclCommSplit: %s", g_last_error.c_str()); }
    std::vector<std::pair<int, int>> members; // (key, parent rank) of every rank of this color
    for (int r = 0; r < m.nranks; r++) {
        const Slot& slot = m.seg->slot[r];
        if (slot.color == st.color) { members.push_back({slot.key, r}); }
    }
    std::sort(members.begin(), members.end());
    st.nranks = (int)members.size();
    for (int i = 0; i < st.nranks; i++) {
        if (members[i].second == m.rank) { st.rank = i; }
    }
    st.name = m.name + "-" + std::to_string(st.color);
    leave(m, false);
    st.meeting = nullptr;
    if ((rc = join(st)) != ncclSuccess) { st.error = rc; }
    return rc;
}

void abort_all_at_exit() {
    std::set<CommState*> comms = live_comms();
    for (CommState* st : comms) { leave(*st, true); }
}

// Waits (blocking) for this communicator's queued collectives. A collective whose peers are
// gone ends as a no-op, so the wait ends too. A peer that is alive but never calls keeps it
// waiting, as with NCCL.
void wait_pending(CommState& st) {
    while (!st.pending_on.empty()) {
        cudaStream_t s = st.pending_on.begin()->first;
        // runs everything queued on s so far, our collectives among them (the runtime's lock is
        // recursive, so an API call may synchronize)
        cudaStreamSynchronize(s);
        if (st.pending_on.count(s) != 0) { return; } // the stream was destroyed under them: stop waiting
    }
}

} // namespace

// The opaque handle of <nccl.h>.
struct ncclComm {
    std::shared_ptr<CommState> st;
};

namespace {

void close_comm(ncclComm_t comm, bool abort) {
    live_comms().erase(comm->st.get());
    leave(*comm->st, abort);
    delete comm;
}

// ---------------------------------------------------------------------------
// calls: checks, the ncclInProgress answer, groups

// A call on a non-blocking communicator may answer ncclInProgress, as NCCL does while it sets
// the work up. ncclCommGetAsyncError then says ncclInProgress 1-3 more times before ncclSuccess.
ncclResult_t maybe_in_progress(CommState& st) {
    if (st.blocking || !emu::chance(in_progress_probability())) { return ncclSuccess; }
    st.busy = 1 + (int)(emu::random_u64() % 3);
    return ncclInProgress;
}

// The communicator's state as ncclCommGetAsyncError reports it.
ncclResult_t async_state(CommState& st) {
    ncclResult_t rc = poll_init(st);
    if (rc != ncclSuccess) { return rc; }
    if (st.busy > 0) { st.busy--; return ncclInProgress; }
    if (st.finalized && st.pending > 0) { return ncclInProgress; }
    return ncclSuccess;
}

// Can `comm` take a new call? NCCL requires that the previous call has settled.
ncclResult_t check_comm(const char* who, ncclComm_t comm) {
    if (comm == nullptr) { return fail(ncclInvalidArgument, "%s: comm is NULL", who); }
    CommState& st = *comm->st;
    if (poll_init(st) == ncclInProgress || st.busy > 0) {
        return fail(ncclInvalidUsage, "%s: the communicator's last operation is still in progress: NCCL requires polling "
                    "ncclCommGetAsyncError until it returns ncclSuccess before the next call", who);
    }
    if (st.error != ncclSuccess) { return st.error; } // the message is already in ncclGetLastError
    if (st.finalized) { return fail(ncclInvalidUsage, "%s: the communicator was finalized", who); }
    return ncclSuccess;
}

struct Call {
    const char* who;
    Desc d;
    const void* send;
    void* recv;
    const void* pc = nullptr; // the return address of the call (the stream-order check names its line)
};

bool reduces(int32_t kind) { return kind == ALL_REDUCE || kind == REDUCE_SCATTER || kind == REDUCE; }

ncclResult_t check_desc(const Call& c, int nranks) {
    const Desc& d = c.d;
    if (d.type < 0 || d.type >= ncclNumTypes) { return fail(ncclInvalidArgument, "%s: invalid datatype %d", c.who, d.type); }
    if (d.type == ncclFloat8e4m3 || d.type == ncclFloat8e5m2) {
        return fail(ncclInvalidUsage, "%s: %s is not supported by the CPU emulator", c.who, type_name(d.type));
    }
    if (reduces(d.kind) && d.op < 0) { return fail(ncclInvalidArgument, "%s: invalid reduction op %d", c.who, d.op); }
    if (reduces(d.kind) && d.op >= ncclNumOps) {
        return fail(ncclInvalidUsage, "%s: user-defined reduction ops (ncclRedOpCreatePreMulSum) are not supported by the CPU emulator", c.who);
    }
    if ((d.kind == BROADCAST || d.kind == REDUCE) && (d.root < 0 || d.root >= nranks)) {
        return fail(ncclInvalidArgument, "%s: root %d is not a rank (0..%d)", c.who, d.root, nranks - 1);
    }
    return ncclSuccess;
}

// A buffer must be device memory. A host pointer is ncclInvalidArgument, as in NCCL. A range
// that runs past its allocation would fault on a GPU, and is fatal here.
ncclResult_t check_buffer(const char* who, const char* what, const void* p, size_t bytes) {
    if (p == nullptr || !emu::device_range(p, 0)) {
        return fail(ncclInvalidArgument, "%s: %s %p is not device memory (NCCL needs buffers from cudaMalloc)", who, what, p);
    }
    emu::check_device_range(p, bytes, who, what);
    return ncclSuccess;
}

// The buffers, with NCCL's in-place forms: every other overlap of send and recv is an error.
ncclResult_t check_buffers(const Call& c, int rank, int nranks) {
    const Desc& d = c.d;
    size_t n = d.count * type_size(d.type);
    size_t send_bytes = d.kind == REDUCE_SCATTER ? nranks * n : n;
    size_t recv_bytes = d.kind == ALL_GATHER ? nranks * n : n;
    bool uses_send = d.kind != BROADCAST || rank == d.root; // sendbuff: only the root's is broadcast
    bool uses_recv = d.kind != REDUCE || rank == d.root;    // recvbuff: only the root's gets the reduction
    ncclResult_t rc;
    if (uses_send && (rc = check_buffer(c.who, "sendbuff", c.send, send_bytes)) != ncclSuccess) { return rc; }
    if (uses_recv && (rc = check_buffer(c.who, "recvbuff", c.recv, recv_bytes)) != ncclSuccess) { return rc; }
    if (!uses_send || !uses_recv) { return ncclSuccess; }
    uintptr_t s = (uintptr_t)c.send, r = (uintptr_t)c.recv;
    bool in_place = d.kind == REDUCE_SCATTER ? r == s + rank * n
                  : d.kind == ALL_GATHER     ? s == r + rank * n
                  : s == r;
    if (!in_place && s < r + recv_bytes && r < s + send_bytes) {
        return fail(ncclInvalidUsage, "%s: sendbuff %p (%zu bytes) and recvbuff %p (%zu bytes) overlap, but not in NCCL's in-place form (%s)",
                    c.who, c.send, send_bytes, c.recv, recv_bytes,
                    d.kind == REDUCE_SCATTER ? "recvbuff == sendbuff + rank*recvcount"
                    : d.kind == ALL_GATHER   ? "sendbuff == recvbuff + rank*sendcount" : "sendbuff == recvbuff");
    }
    return ncclSuccess;
}

// Queues the collective's op on its stream. Its sequence number is taken here, in issue order.
ncclResult_t enqueue_call(const std::shared_ptr<CommState>& st, const Call& c, cudaStream_t stream) {
    auto run = std::make_shared<CollRun>(st, c.d, c.send, c.recv, stream);
    std::string what = std::string(c.who) + " #" + std::to_string(run->seq) + " " + describe(c.d);
    // for the stream-order check: this rank's bytes it reads (sendbuff) and writes (recvbuff)
    emu::OpDetails details;
    details.source.pc = c.pc;
    const Desc& d = c.d;
    size_t n = d.count * type_size(d.type);
    if (d.kind != BROADCAST || st->rank == d.root) {
        details.ranges.push_back(emu::OpRange{c.send, d.kind == REDUCE_SCATTER ? st->nranks * n : n, false});
    }
    if (d.kind != REDUCE || st->rank == d.root) {
        details.ranges.push_back(emu::OpRange{c.recv, d.kind == ALL_GATHER ? st->nranks * n : n, true});
    }
    // a collective's run (its steps against the peers' shared memory) is made once per call: it
    // cannot be replayed by a graph, so the emulated NCCL refuses a capturing stream
    cudaError_t e = emu::stream_capturing(stream)
                        ? emu::capture_refused(stream, c.who, c.pc, "the emulated NCCL's collectives cannot be captured into a graph")
                        : emu::enqueue(stream, what, [run] { return run->step(); }, std::move(details));
    if (e != cudaSuccess) {
        run->finish(false);
        st->seq--; // not queued: the next collective takes this number, as on the other ranks
        return fail(ncclUnhandledCudaError, "%s: cannot queue on stream %p (cuda error %d)", c.who, (void*)stream, (int)e);
    }
    return ncclSuccess;
}

// Group calls. Collectives issued inside are queued at the outermost ncclGroupEnd, in issue order.
struct Queued {
    std::shared_ptr<CommState> st;
    Call call;
    cudaStream_t stream;
};
struct Group {
    int depth = 0;
    ncclResult_t error = ncclSuccess;             // the first failed call inside: ncclGroupEnd returns it
    std::vector<Queued> calls;
    std::vector<std::shared_ptr<CommState>> inits; // communicators created inside: ncclGroupEnd waits for the blocking ones
};
Group g_group;

ncclResult_t group_note(ncclResult_t rc) {
    if (g_group.depth > 0 && rc != ncclSuccess && rc != ncclInProgress && g_group.error == ncclSuccess) { g_group.error = rc; }
    return rc;
}

ncclResult_t issue_checked(const Call& c, ncclComm_t comm, cudaStream_t stream) {
    ncclResult_t rc = check_comm(c.who, comm);
    if (rc != ncclSuccess) { return rc; }
    CommState& st = *comm->st;
    if ((rc = check_desc(c, st.nranks)) != ncclSuccess) { return rc; }
    if (c.d.count == 0) { return ncclSuccess; } // nothing moves, and no sequence number is taken (on any rank)
    if ((rc = check_buffers(c, st.rank, st.nranks)) != ncclSuccess) { return rc; }
    if (g_group.depth > 0) {
        g_group.calls.push_back({comm->st, c, stream});
        return ncclSuccess;
    }
    if ((rc = enqueue_call(comm->st, c, stream)) != ncclSuccess) { return rc; }
    return maybe_in_progress(st);
}

ncclResult_t issue(const Call& c, ncclComm_t comm, cudaStream_t stream) { return group_note(issue_checked(c, comm, stream)); }

ncclResult_t unsupported(const char* what) {
    return group_note(fail(ncclInvalidUsage, "%s is not supported by the CPU emulator (dev/cuda/emu/nccl.cpp)", what));
}

// ---------------------------------------------------------------------------
// init

// The unique id begins with the readable name of the communicator's segment.
ncclResult_t id_name(const ncclUniqueId& id, std::string* name, const char* who) {
    size_t len = strnlen(id.internal, 64);
    if (len == 64 || strncmp(id.internal, kPrefix, strlen(kPrefix)) != 0) {
        return fail(ncclInvalidArgument, "%s: this ncclUniqueId was not made by the emulator's ncclGetUniqueId", who);
    }
    *name = std::string(id.internal, len);
    return ncclSuccess;
}

// config->blocking: NCCL_CONFIG_UNDEF_INT means NCCL's default, which is blocking unless
// NCCL_COMM_BLOCKING=0. The other fields tune performance and are accepted as they are.
ncclResult_t config_blocking(const ncclConfig_t* config, bool* blocking, const char* who) {
    const char* env = getenv("NCCL_COMM_BLOCKING");
    *blocking = env == nullptr || *env == '\0' || atoi(env) != 0;
    if (config == nullptr) { return ncclSuccess; }
    if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)) {
        return fail(ncclInvalidArgument, "%s: the config was not initialized with NCCL_CONFIG_INITIALIZER", who);
    }
    if (config->blocking == NCCL_CONFIG_UNDEF_INT) { return ncclSuccess; }
    if (config->blocking != 0 && config->blocking != 1) {
        return fail(ncclInvalidArgument, "%s: config->blocking must be 0 or 1, got %d", who, config->blocking);
    }
    *blocking = config->blocking == 1;
    return ncclSuccess;
}

ncclResult_t init(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config, const char* who) {
    if (out == nullptr) { return fail(ncclInvalidArgument, "%s: comm is NULL", who); }
    *out = nullptr;
    if (nranks < 1) { return fail(ncclInvalidArgument, "%s: nranks %d must be at least 1", who, nranks); }
    if (nranks > kMaxRanks) { return fail(ncclInvalidArgument, "%s: nranks %d: the CPU emulator supports at most %d ranks", who, nranks, kMaxRanks); }
    if (rank < 0 || rank >= nranks) { return fail(ncclInvalidArgument, "%s: rank %d must be in 0..%d", who, rank, nranks - 1); }
    auto st = std::make_shared<CommState>();
    ncclResult_t rc = id_name(id, &st->name, who);
    if (rc == ncclSuccess) { rc = config_blocking(config, &st->blocking, who); }
    if (rc != ncclSuccess) { return rc; }
    st->rank = rank;
    st->nranks = nranks;
    st->device = emu::current_device();
    emu::set_rank_label(rank);
    static bool at_exit = atexit(abort_all_at_exit) == 0;
    static bool at_fatal = (emu::on_fatal(abort_all_at_exit), true);
    (void)at_exit;
    (void)at_fatal;
    if ((rc = join(*st)) != ncclSuccess) { st->error = rc; } // reported like any init error (async when non-blocking)
    ncclComm_t comm = new ncclComm{st};
    live_comms().insert(st.get());
    if (g_group.depth > 0) { g_group.inits.push_back(st); *out = comm; return ncclSuccess; }
    if (!st->blocking) { *out = comm; return ncclInProgress; }
    if ((rc = wait_formed(*st)) != ncclSuccess) { close_comm(comm, true); return rc; }
    *out = comm;
    return ncclSuccess;
}

// ncclCommSplit (see the header): every rank of the parent meets in the segment of its k-th
// split; a NULL config inherits the parent's blocking mode, as nccl.h says.
ncclResult_t split(ncclComm_t comm, int color, int key, ncclComm_t* out, ncclConfig_t* config) {
    const char* who = "ncclCommSplit";
    if (out == nullptr) { return fail(ncclInvalidArgument, "%s: newcomm is NULL", who); }
    *out = nullptr;
    ncclResult_t rc = check_comm(who, comm);
    if (rc != ncclSuccess) { return rc; }
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        return fail(ncclInvalidArgument, "%s: color %d must be >= 0, or NCCL_SPLIT_NOCOLOR", who, color);
    }
    if (g_group.depth > 0) { return fail(ncclInvalidUsage, "%s inside a group call is not supported by the CPU emulator", who); }
    CommState& parent = *comm->st;
    bool blocking = parent.blocking;
    if (config != nullptr && (rc = config_blocking(config, &blocking, who)) != ncclSuccess) { return rc; }
    auto meeting = std::make_shared<CommState>();
    meeting->name = parent.name + "-split" + std::to_string(parent.splits++);
    meeting->rank = parent.rank;
    meeting->nranks = parent.nranks;
    meeting->device = parent.device;
    meeting->color = color;
    meeting->key = key;
    if ((rc = join(*meeting)) != ncclSuccess) { leave(*meeting, true); return rc; }
    if (color == NCCL_SPLIT_NOCOLOR) { // no communicator; leave once every rank is at the meeting
        rc = wait_formed(*meeting);
        leave(*meeting, rc != ncclSuccess);
        return rc;
    }
    auto st = std::make_shared<CommState>();
    st->name = meeting->name + "-" + std::to_string(color);
    st->device = parent.device;
    st->blocking = blocking;
    st->color = color;
    st->key = key;
    st->meeting = meeting;
    ncclComm_t child = new ncclComm{st};
    live_comms().insert(st.get());
    if (!blocking) { *out = child; return ncclInProgress; }
    if ((rc = wait_formed(*st)) != ncclSuccess) { close_comm(child, true); return rc; }
    *out = child;
    return ncclSuccess;
}

} // namespace

// ---------------------------------------------------------------------------
// the API of <nccl.h>

ncclResult_t ncclGetVersion(int* version) {
    emu::ApiScope scope("ncclGetVersion");
    if (version == nullptr) { return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL"); }
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

// 128 random bytes, the first of which spell the shared-memory name "/gpt2emu-<24 hex digits>".
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    emu::ApiScope scope("ncclGetUniqueId");
    if (id == nullptr) { return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL"); }
    FILE* f = fopen("/dev/urandom", "rb");
    size_t got = f != nullptr ? fread(id->internal, 1, sizeof(id->internal), f) : 0;
    if (f != nullptr) { fclose(f); }
    if (got != sizeof(id->internal)) { return fail(ncclSystemError, "ncclGetUniqueId: cannot read /dev/urandom"); }
    char name[64];
    int n = snprintf(name, sizeof(name), "%s", kPrefix);
    for (int i = 0; i < 12; i++) { n += snprintf(name + n, sizeof(name) - n, "%02x", (unsigned char)id->internal[i]); }
    memcpy(id->internal, name, n + 1);
    return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
    emu::ApiScope scope("ncclGetErrorString");
    switch (result) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error (see ncclGetLastError)";
        case ncclSystemError: return "unhandled system error (see ncclGetLastError)";
        case ncclInternalError: return "internal error";
        case ncclInvalidArgument: return "invalid argument (see ncclGetLastError)";
        case ncclInvalidUsage: return "invalid usage (see ncclGetLastError)";
        case ncclRemoteError: return "remote process exited or there was a network error";
        case ncclInProgress: return "NCCL operation in progress";
        default: return "unknown result code";
    }
}

const char* ncclGetLastError(ncclComm_t comm) {
    emu::ApiScope scope("ncclGetLastError");
    (void)comm; // one text per process, as in NCCL
    return g_last_error.c_str();
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
    emu::ApiScope scope("ncclCommInitRank");
    return group_note(init(comm, nranks, commId, rank, nullptr, "ncclCommInitRank"));
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
    emu::ApiScope scope("ncclCommInitRankConfig");
    return group_note(init(comm, nranks, commId, rank, config, "ncclCommInitRankConfig"));
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
    emu::ApiScope scope("ncclCommGetAsyncError");
    if (comm == nullptr || asyncError == nullptr) { return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm or asyncError is NULL"); }
    *asyncError = async_state(*comm->st);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    emu::ApiScope scope("ncclCommCount");
    if (comm == nullptr || count == nullptr) { return fail(ncclInvalidArgument, "ncclCommCount: comm or count is NULL"); }
    *count = comm->st->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    emu::ApiScope scope("ncclCommUserRank");
    if (comm == nullptr || rank == nullptr) { return fail(ncclInvalidArgument, "ncclCommUserRank: comm or rank is NULL"); }
    *rank = comm->st->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
    emu::ApiScope scope("ncclCommCuDevice");
    if (comm == nullptr || device == nullptr) { return fail(ncclInvalidArgument, "ncclCommCuDevice: comm or device is NULL"); }
    *device = comm->st->device;
    return ncclSuccess;
}

// Blocking: waits for the queued collectives. Non-blocking: ncclInProgress until they are done.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    emu::ApiScope scope("ncclCommFinalize");
    ncclResult_t rc = check_comm("ncclCommFinalize", comm);
    if (rc != ncclSuccess) { return rc; }
    CommState& st = *comm->st;
    st.finalized = true;
    if (st.blocking) { wait_pending(st); return st.error; }
    if (st.pending > 0) { return ncclInProgress; }
    return maybe_in_progress(st);
}

// Like NCCL's, destroying first lets the queued collectives finish (a broken communicator's end as no-ops).
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    emu::ApiScope scope("ncclCommDestroy");
    if (comm == nullptr) { return ncclSuccess; }
    if (comm->st->formed && comm->st->error == ncclSuccess) { wait_pending(*comm->st); }
    close_comm(comm, false);
    return ncclSuccess;
}

// Returns at once whatever is pending. Queued collectives become no-ops, so stream
// synchronizations do not hang, and peers waiting for this rank get ncclRemoteError.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    emu::ApiScope scope("ncclCommAbort");
    if (comm == nullptr) { return ncclSuccess; }
    close_comm(comm, true);
    return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
    emu::ApiScope scope("ncclGroupStart");
    g_group.depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    emu::ApiScope scope("ncclGroupEnd");
    if (g_group.depth == 0) { return fail(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart"); }
    if (--g_group.depth > 0) { return ncclSuccess; }
    Group g = std::move(g_group);
    g_group = Group();
    if (g.error != ncclSuccess) { return g.error; } // as in NCCL, a failed call drops the whole group
    ncclResult_t rc;
    for (const Queued& q : g.calls) {
        if ((rc = enqueue_call(q.st, q.call, q.stream)) != ncclSuccess) { return rc; }
    }
    bool in_progress = false;
    for (const auto& st : g.inits) {
        if (!st->blocking) { in_progress = true; }
        else if ((rc = wait_formed(*st)) != ncclSuccess) { return rc; }
    }
    std::set<CommState*> seen; // each non-blocking communicator of the group may still be busy, as after a single call
    for (const Queued& q : g.calls) {
        if (seen.insert(q.st.get()).second && maybe_in_progress(*q.st) == ncclInProgress) { in_progress = true; }
    }
    return in_progress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    emu::ApiScope scope("ncclAllReduce");
    return issue({"ncclAllReduce", {ALL_REDUCE, datatype, op, -1, count}, sendbuff, recvbuff, __builtin_return_address(0)}, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
    emu::ApiScope scope("ncclReduceScatter");
    return issue({"ncclReduceScatter", {REDUCE_SCATTER, datatype, op, -1, recvcount}, sendbuff, recvbuff, __builtin_return_address(0)}, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    emu::ApiScope scope("ncclAllGather");
    return issue({"ncclAllGather", {ALL_GATHER, datatype, -1, -1, sendcount}, sendbuff, recvbuff, __builtin_return_address(0)}, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    emu::ApiScope scope("ncclBroadcast");
    return issue({"ncclBroadcast", {BROADCAST, datatype, -1, root, count}, sendbuff, recvbuff, __builtin_return_address(0)}, comm, stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    emu::ApiScope scope("ncclBcast");
    return issue({"ncclBcast", {BROADCAST, datatype, -1, root, count}, buff, buff, __builtin_return_address(0)}, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
    emu::ApiScope scope("ncclReduce");
    return issue({"ncclReduce", {REDUCE, datatype, op, root, count}, sendbuff, recvbuff, __builtin_return_address(0)}, comm, stream);
}

// ---------------------------------------------------------------------------
// the rest of <nccl.h>: not emulated (ncclInvalidUsage, with a message saying so)

ncclResult_t ncclCommInitAll(ncclComm_t*, int, const int*) {
    emu::ApiScope scope("ncclCommInitAll");
    return unsupported("ncclCommInitAll (one process per rank: use ncclCommInitRank)");
}
ncclResult_t ncclCommInitRankScalable(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*) {
    emu::ApiScope scope("ncclCommInitRankScalable");
    return unsupported("ncclCommInitRankScalable");
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
    emu::ApiScope scope("ncclCommSplit");
    return group_note(split(comm, color, key, newcomm, config));
}
ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int) {
    emu::ApiScope scope("ncclCommShrink");
    return unsupported("ncclCommShrink");
}
ncclResult_t ncclCommRevoke(ncclComm_t, int) {
    emu::ApiScope scope("ncclCommRevoke");
    return unsupported("ncclCommRevoke");
}
ncclResult_t ncclMemAlloc(void**, size_t) {
    emu::ApiScope scope("ncclMemAlloc");
    return unsupported("ncclMemAlloc (use cudaMalloc)");
}
ncclResult_t ncclMemFree(void*) {
    emu::ApiScope scope("ncclMemFree");
    return unsupported("ncclMemFree");
}
ncclResult_t ncclCommRegister(const ncclComm_t, void*, size_t, void**) {
    emu::ApiScope scope("ncclCommRegister");
    return unsupported("ncclCommRegister");
}
ncclResult_t ncclCommDeregister(const ncclComm_t, void*) {
    emu::ApiScope scope("ncclCommDeregister");
    return unsupported("ncclCommDeregister");
}
ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t*, int) {
    emu::ApiScope scope("ncclCommWindowRegister");
    return unsupported("ncclCommWindowRegister");
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
    emu::ApiScope scope("ncclCommWindowDeregister");
    return unsupported("ncclCommWindowDeregister");
}
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t) {
    emu::ApiScope scope("ncclRedOpCreatePreMulSum");
    return unsupported("ncclRedOpCreatePreMulSum (user-defined reduction ops)");
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t, ncclComm_t) {
    emu::ApiScope scope("ncclRedOpDestroy");
    return unsupported("ncclRedOpDestroy (user-defined reduction ops)");
}
ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
    emu::ApiScope scope("ncclSend");
    return unsupported("ncclSend (point-to-point)");
}
ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
    emu::ApiScope scope("ncclRecv");
    return unsupported("ncclRecv (point-to-point)");
}
ncclResult_t ncclAlltoAll(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) {
    emu::ApiScope scope("ncclAlltoAll");
    return unsupported("ncclAlltoAll");
}
ncclResult_t ncclGather(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
    emu::ApiScope scope("ncclGather");
    return unsupported("ncclGather");
}
ncclResult_t ncclScatter(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
    emu::ApiScope scope("ncclScatter");
    return unsupported("ncclScatter");
}
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
    emu::ApiScope scope("ncclGroupSimulateEnd");
    return unsupported("ncclGroupSimulateEnd");
}
void ncclResetDebugInit() {}
