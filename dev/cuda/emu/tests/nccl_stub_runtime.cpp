/*
A test helper: the smallest stand-in for the emulator runtime (emu_internal.h plus a few cudart
calls) that dev/cuda/emu/nccl.cpp and nccl_test.cpp need, so that the NCCL emulator can be
tested before, and apart from, the real runtime (runtime.cpp).

- Device memory is malloc'd and its ranges are recorded (device_range, check_device_range).
- Every stream is a FIFO of ops. An op that returns false stays at the head and is tried again.
- Work runs at a synchronization (cudaStreamSynchronize, stream_wait_all), at a query
  (cudaStreamQuery), and, unless EMU_STUB_LAZY=1, at the start of every API call (ApiScope):
  the two ends of the real runtime's schedules.
- fatal prints "cuda-emu: ..." and exits 86, as the runtime does.
Not provided: events, the legacy stream's implicit synchronization, devices other than
EMU_STUB_DEVICE (default 0), and locking (the tests are single-threaded).
*/
#include "emu_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <set>
#include <string>

struct CUstream_st {
    std::deque<std::pair<std::string, emu::OpFn>> ops;
};

namespace {

CUstream_st g_default_stream;
std::set<CUstream_st*> g_streams;
std::map<uintptr_t, size_t> g_allocs; // base -> bytes
int g_rank = -1;
int g_depth = 0;                      // ApiScope nesting
uint64_t g_rng = 0;

CUstream_st* lookup(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) { return &g_default_stream; }
    return g_streams.count(s) != 0 ? s : nullptr;
}

// Runs the stream's ops in order until one cannot finish yet. True when the stream is empty.
bool run_stream(CUstream_st* s) {
    while (!s->ops.empty()) {
        if (!s->ops.front().second()) { return false; }
        s->ops.pop_front();
    }
    return true;
}

void run_all_once() {
    run_stream(&g_default_stream);
    std::set<CUstream_st*> streams = g_streams;
    for (CUstream_st* s : streams) { run_stream(s); }
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void vprint(const char* kind, const char* fmt, va_list ap) {
    char buf[2048];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    if (g_rank >= 0) { fprintf(stderr, "cuda-emu: [rank %d] %s%s\n", g_rank, kind, buf); }
    else { fprintf(stderr, "cuda-emu: %s%s\n", kind, buf); }
}

} // namespace

namespace emu {

void fatal(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint("", fmt, ap);
    va_end(ap);
    exit(86);
}

void on_fatal(void (*)()) {} // exit() above runs nccl.cpp's atexit handler, which leaves the communicators

void warn(const char* fmt, ...) {
    static std::set<std::string> seen;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (seen.insert(buf).second) { fprintf(stderr, "cuda-emu: warning: %s\n", buf); }
}

ApiScope::ApiScope(const char*) {
    static const bool lazy = getenv("EMU_STUB_LAZY") != nullptr && atoi(getenv("EMU_STUB_LAZY")) != 0;
    if (g_depth++ == 0 && !lazy) { run_all_once(); }
}
ApiScope::~ApiScope() { g_depth--; }

cudaError_t enqueue(cudaStream_t s, const std::string& what, OpFn fn) {
    CUstream_st* st = lookup(s);
    if (st == nullptr) { return cudaErrorInvalidResourceHandle; }
    st->ops.emplace_back(what, std::move(fn));
    return cudaSuccess;
}

// (what the op touches is for the real runtime's stream-order check)
cudaError_t enqueue(cudaStream_t s, const std::string& what, OpFn fn, OpDetails) { return enqueue(s, what, std::move(fn)); }

cudaError_t stream_wait_all(cudaStream_t s) {
    CUstream_st* st = lookup(s);
    if (st == nullptr) { return cudaErrorInvalidResourceHandle; }
    const char* env = getenv("EMU_HANG_TIMEOUT");
    double limit = env != nullptr ? atof(env) : 600.0, deadline = now_s() + limit;
    while (!run_stream(st)) {
        if (now_s() > deadline) { fatal("stream_wait_all: %s did not finish within %g s", st->ops.front().first.c_str(), limit); }
        usleep(100);
    }
    return cudaSuccess;
}

bool device_range(const void* p, size_t n, const void** alloc_base, size_t* alloc_bytes) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) { return false; }
    --it;
    if (a < it->first || a + n > it->first + it->second || (n == 0 && a > it->first + it->second)) { return false; }
    if (alloc_base != nullptr) { *alloc_base = (const void*)it->first; }
    if (alloc_bytes != nullptr) { *alloc_bytes = it->second; }
    return true;
}

void check_device_range(const void* p, size_t n, const char* who, const char* what) {
    if (!device_range(p, n)) { fatal("%s: %s [%p, +%zu) is not inside one device allocation", who, what, p, n); }
}

bool pinned_range(const void*, size_t) { return false; }

// the checks of EMU_CHECK (check.cpp) are not part of this stand-in: none is on
const CheckSettings& check_settings() {
    static CheckSettings none;
    return none;
}
void device_bytes_written(const void*, size_t) {}
void device_bytes_read(const void*, size_t, const char*, const void*) {}

uint64_t random_u64() {
    if (g_rng == 0) {
        const char* seed = getenv("EMU_SEED");
        g_rng = 0x9e3779b97f4a7c15ull * (seed != nullptr ? strtoull(seed, nullptr, 10) + 1 : 2);
    }
    g_rng ^= g_rng >> 12; // xorshift64*
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}

bool chance(double p) { return (random_u64() >> 11) * (1.0 / 9007199254740992.0) < p; }

void set_rank_label(int rank) { g_rank = rank; }

int device_count() { return 1; }

int current_device() {
    const char* d = getenv("EMU_STUB_DEVICE");
    return d != nullptr ? atoi(d) : 0;
}

} // namespace emu

// ---------------------------------------------------------------------------
// the cudart calls the test uses

cudaError_t cudaMalloc(void** p, size_t bytes) {
    emu::ApiScope scope("cudaMalloc");
    *p = malloc(bytes == 0 ? 1 : bytes);
    if (*p == nullptr) { return cudaErrorMemoryAllocation; }
    g_allocs[(uintptr_t)*p] = bytes;
    return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
    emu::ApiScope scope("cudaFree");
    if (p == nullptr) { return cudaSuccess; }
    if (g_allocs.erase((uintptr_t)p) == 0) { return cudaErrorInvalidValue; }
    free(p);
    return cudaSuccess;
}

// Synchronous, as cudaMemcpy is: the default stream's work first.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
    emu::ApiScope scope("cudaMemcpy");
    emu::stream_wait_all(nullptr);
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
    emu::ApiScope scope("cudaStreamCreate");
    *s = new CUstream_st;
    g_streams.insert(*s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    emu::ApiScope scope("cudaStreamSynchronize");
    return emu::stream_wait_all(s);
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
    emu::ApiScope scope("cudaStreamQuery");
    CUstream_st* st = lookup(s);
    if (st == nullptr) { return cudaErrorInvalidResourceHandle; }
    return run_stream(st) ? cudaSuccess : cudaErrorNotReady;
}
