/*
One rank of the NCCL emulator's tests. dev/cuda/emu/tests/nccl_test.sh starts the ranks of each
scenario as separate processes.

usage: nccl_test SCENARIO RANK NRANKS IDFILE [VARIANT]

Rank 0 writes the ncclUniqueId to IDFILE and the other ranks read it from there. With
NCCL_TEST_READ_ID=1 a rank 0 reads it too, which lets a test start two processes as rank 0.
The exit status is 0 when every check of this rank passed. Otherwise the process prints
"rank R [SCENARIO] FAIL ..." on stderr and exits with 1.

Only cudaMalloc, cudaMemcpy, cudaStreamCreate, cudaStreamSynchronize, cudaStreamQuery and cudaFree
are used from the runtime, so the test links against the stub (nccl_stub_runtime.cpp) or against
the emulator's real runtime.
*/
#include <nccl.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

static int g_rank = 0, g_nranks = 1, g_checks = 0;
static const char* g_scenario = "";
static const char* g_variant = "";

#define CHECKM(cond, ...)                                                                               \
    do {                                                                                                \
        g_checks++;                                                                                     \
        if (!(cond)) {                                                                                  \
            fprintf(stderr, "rank %d [%s %s] FAIL line %d: %s: ", g_rank, g_scenario, g_variant, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                               \
            fprintf(stderr, " (ncclGetLastError: %s)\n", ncclGetLastError(NULL));                       \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)
#define CHECK(cond) CHECKM(cond, "%s", "")
#define CUDA(call) CHECKM((call) == cudaSuccess, "%s", #call)

static double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool contains(const char* text, const char* part) { return text != NULL && strstr(text, part) != NULL; }

// ---------------------------------------------------------------------------
// the unique id, through a file

static ncclUniqueId get_id(const char* path) {
    ncclUniqueId id;
    const char* read_env = getenv("NCCL_TEST_READ_ID");
    if (g_rank == 0 && !(read_env && atoi(read_env))) {
        CHECK(ncclGetUniqueId(&id) == ncclSuccess);
        std::string tmp = std::string(path) + ".tmp";
        FILE* f = fopen(tmp.c_str(), "wb");
        CHECK(f != NULL && fwrite(&id, sizeof(id), 1, f) == 1);
        fclose(f);
        CHECK(rename(tmp.c_str(), path) == 0);
        return id;
    }
    for (double t0 = now_s(); now_s() - t0 < 20;) {
        FILE* f = fopen(path, "rb");
        if (f != NULL) {
            size_t got = fread(&id, sizeof(id), 1, f);
            fclose(f);
            CHECK(got == 1);
            return id;
        }
        usleep(10000);
    }
    CHECKM(false, "no id file %s after 20 s", path);
    return id;
}

// ---------------------------------------------------------------------------
// settling non-blocking calls, waiting for streams

// Polls ncclCommGetAsyncError until it is not ncclInProgress (at most timeout s), as the trainer does.
static ncclResult_t settle(ncclComm_t comm, ncclResult_t rc, double timeout = 20) {
    if (rc != ncclSuccess && rc != ncclInProgress) { return rc; }
    ncclResult_t state = ncclInProgress;
    for (double t0 = now_s(); now_s() - t0 < timeout;) {
        CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess);
        if (state != ncclInProgress) { return state; }
        usleep(100);
    }
    return state;
}

static ncclComm_t init_comm(const ncclUniqueId& id, bool blocking) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking ? 1 : 0;
    ncclComm_t comm = NULL;
    ncclResult_t rc = ncclCommInitRankConfig(&comm, g_nranks, id, g_rank, &config);
    if (blocking) { CHECKM(rc == ncclSuccess, "rc %d", rc); }
    else { CHECKM(rc == ncclInProgress, "a non-blocking init answers ncclInProgress, got %d", rc); }
    CHECK(comm != NULL);
    CHECK(settle(comm, rc) == ncclSuccess);
    return comm;
}

// Waits until the stream is idle while watching the communicator's error state: returns
// ncclSuccess, the communicator's error, or ncclInProgress after `timeout` s. The state is read
// after the stream went idle too, since a collective that failed ends as a no-op.
static ncclResult_t wait_stream(ncclComm_t comm, cudaStream_t s, double timeout) {
    for (double t0 = now_s(); now_s() - t0 < timeout;) {
        cudaError_t e = cudaStreamQuery(s);
        CHECKM(e == cudaSuccess || e == cudaErrorNotReady, "cudaStreamQuery: %d", (int)e);
        ncclResult_t state;
        CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess);
        if (state != ncclSuccess && state != ncclInProgress) { return state; }
        if (e == cudaSuccess) { return ncclSuccess; }
        usleep(200);
    }
    return ncclInProgress;
}

// ---------------------------------------------------------------------------
// device buffers

template <class T> static T* dev_alloc(size_t n) {
    void* p = NULL;
    CUDA(cudaMalloc(&p, n * sizeof(T) + 1)); // + 1: a zero-length buffer still gets an address
    return (T*)p;
}
template <class T> static void upload(T* d, const std::vector<T>& h) {
    CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T> static std::vector<T> download(const T* d, size_t n) {
    std::vector<T> h(n);
    CUDA(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// ---------------------------------------------------------------------------
// known inputs and the rank-order reference

static uint64_t mix(uint64_t x) { // splitmix64
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Element i of rank r's input for test `tag`. Floats span 24 binades, so that rounding after
// each step (and so the summation order) shows in the result. Integers are small, so that
// products stay readable.
template <class T> static T input(int tag, int r, size_t i) {
    uint64_t h = mix(mix(mix((uint64_t)tag) + (uint64_t)r) + i);
    if constexpr (std::is_integral_v<T>) { return (T)((int64_t)(h % 7) - 3 + (std::is_signed_v<T> ? 0 : 3)); }
    else {
        double v = ldexp(((double)(h & 0xffffff) / 16777216.0 - 0.5) * 2.0, (int)((h >> 24) % 24) - 12);
        if constexpr (std::is_same_v<T, __nv_bfloat16>) { return __float2bfloat16_rn((float)v); }
        else if constexpr (std::is_same_v<T, __half>) { return __float2half_rn((float)v); }
        else { return (T)v; }
    }
}

template <class T> static std::vector<T> inputs(int tag, int r, size_t n) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; i++) { v[i] = input<T>(tag, r, i); }
    return v;
}

// One step of `op`, rounded to T: 16-bit floats through float, integers wrapping.
template <class T> static T step(T a, T b, ncclRedOp_t op) {
    if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) {
        float x, y;
        if constexpr (std::is_same_v<T, __nv_bfloat16>) { x = __bfloat162float(a); y = __bfloat162float(b); }
        else { x = __half2float(a); y = __half2float(b); }
        float z = op == ncclProd ? x * y : op == ncclMax ? (y > x ? y : x) : op == ncclMin ? (y < x ? y : x) : x + y;
        if constexpr (std::is_same_v<T, __nv_bfloat16>) { return __float2bfloat16_rn(z); }
        else { return __float2half_rn(z); }
    } else if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return op == ncclProd ? (T)(U)((U)a * (U)b) : op == ncclMax ? (b > a ? b : a) : op == ncclMin ? (b < a ? b : a) : (T)(U)((U)a + (U)b);
    } else {
        return op == ncclProd ? a * b : op == ncclMax ? (b > a ? b : a) : op == ncclMin ? (b < a ? b : a) : a + b;
    }
}

template <class T> static T average(T sum, int n) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) { return __float2bfloat16_rn(__bfloat162float(sum) / n); }
    else if constexpr (std::is_same_v<T, __half>) { return __float2half_rn(__half2float(sum) / n); }
    else if constexpr (std::is_integral_v<T>) { return (T)(sum / (std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>)n); }
    else { return sum / (T)n; }
}

// The documented result: ((x0 op x1) op x2) ..., over the ranks in `order`.
template <class T> static std::vector<T> reference(int tag, size_t n, size_t offset, ncclRedOp_t op, const std::vector<int>& order) {
    std::vector<T> acc(n);
    for (size_t i = 0; i < n; i++) {
        T a = input<T>(tag, order[0], offset + i);
        for (size_t k = 1; k < order.size(); k++) { a = step(a, input<T>(tag, order[k], offset + i), op == ncclAvg ? ncclSum : op); }
        acc[i] = op == ncclAvg ? average(a, (int)order.size()) : a;
    }
    return acc;
}

static std::vector<int> rank_order() {
    std::vector<int> order;
    for (int r = 0; r < g_nranks; r++) { order.push_back(r); }
    return order;
}

template <class T> static bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T> static ncclDataType_t type_of() {
    if constexpr (std::is_same_v<T, float>) { return ncclFloat32; }
    else if constexpr (std::is_same_v<T, double>) { return ncclFloat64; }
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) { return ncclBfloat16; }
    else if constexpr (std::is_same_v<T, __half>) { return ncclFloat16; }
    else if constexpr (std::is_same_v<T, int8_t>) { return ncclInt8; }
    else if constexpr (std::is_same_v<T, uint8_t>) { return ncclUint8; }
    else if constexpr (std::is_same_v<T, int32_t>) { return ncclInt32; }
    else if constexpr (std::is_same_v<T, uint32_t>) { return ncclUint32; }
    else if constexpr (std::is_same_v<T, int64_t>) { return ncclInt64; }
    else { return ncclUint64; }
}

// ---------------------------------------------------------------------------
// the collectives scenario

struct Ctx {
    ncclComm_t comm;
    cudaStream_t stream;
    bool blocking;
    uint64_t hash = 1469598103934665603ull; // FNV-1a over the results every rank gets: compared across ranks at the end
    int tag = 0;
};

static void absorb(Ctx& c, const void* p, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) { c.hash = (c.hash ^ ((const unsigned char*)p)[i]) * 1099511628211ull; }
}

// Checks a call's answer: a blocking communicator says ncclSuccess; a non-blocking one may say
// ncclInProgress, which settles to ncclSuccess.
static void called(Ctx& c, ncclResult_t rc, const char* what) {
    if (c.blocking) { CHECKM(rc == ncclSuccess, "%s returned %d", what, rc); }
    else { CHECKM(settle(c.comm, rc) == ncclSuccess, "%s returned %d", what, rc); }
}

static void finish_stream(Ctx& c) { CHECKM(wait_stream(c.comm, c.stream, 30) == ncclSuccess, "the stream did not finish"); }

template <class T> static void test_all_reduce(Ctx& c, size_t n, ncclRedOp_t op, bool in_place) {
    int tag = ++c.tag;
    T* send = dev_alloc<T>(n);
    T* recv = in_place ? send : dev_alloc<T>(n);
    upload(send, inputs<T>(tag, g_rank, n));
    called(c, ncclAllReduce(send, recv, n, type_of<T>(), op, c.comm, c.stream), "ncclAllReduce");
    finish_stream(c);
    std::vector<T> got = download(recv, n), want = reference<T>(tag, n, 0, op, rank_order());
    CHECKM(same_bits(got, want), "all-reduce tag %d (type %d, op %d, in place %d): not the rank-order result", tag, type_of<T>(), op, in_place);
    absorb(c, got.data(), n * sizeof(T));
    CUDA(cudaFree(send));
    if (!in_place) { CUDA(cudaFree(recv)); }
}

template <class T> static void test_reduce_scatter(Ctx& c, size_t n, ncclRedOp_t op, bool in_place) {
    int tag = ++c.tag;
    T* send = dev_alloc<T>(n * g_nranks);
    T* recv = in_place ? send + g_rank * n : dev_alloc<T>(n);
    upload(send, inputs<T>(tag, g_rank, n * g_nranks));
    called(c, ncclReduceScatter(send, recv, n, type_of<T>(), op, c.comm, c.stream), "ncclReduceScatter");
    finish_stream(c);
    std::vector<T> got = download(recv, n), want = reference<T>(tag, n, g_rank * n, op, rank_order());
    CHECKM(same_bits(got, want), "reduce-scatter tag %d (in place %d): not the rank-order result", tag, in_place);
    CUDA(cudaFree(send));
    if (!in_place) { CUDA(cudaFree(recv)); }
}

template <class T> static void test_all_gather(Ctx& c, size_t n, bool in_place) {
    int tag = ++c.tag;
    T* recv = dev_alloc<T>(n * g_nranks);
    T* send = in_place ? recv + g_rank * n : dev_alloc<T>(n);
    upload(send, inputs<T>(tag, g_rank, n));
    called(c, ncclAllGather(send, recv, n, type_of<T>(), c.comm, c.stream), "ncclAllGather");
    finish_stream(c);
    std::vector<T> got = download(recv, n * g_nranks), want;
    for (int r = 0; r < g_nranks; r++) {
        std::vector<T> part = inputs<T>(tag, r, n);
        want.insert(want.end(), part.begin(), part.end());
    }
    CHECKM(same_bits(got, want), "all-gather tag %d (in place %d): wrong", tag, in_place);
    absorb(c, got.data(), got.size() * sizeof(T));
    CUDA(cudaFree(recv));
    if (!in_place) { CUDA(cudaFree(send)); }
}

static void test_broadcast(Ctx& c, size_t n, int root, int form) { // form 0: out of place, 1: in place, 2: ncclBcast
    int tag = ++c.tag;
    float* send = dev_alloc<float>(n);
    float* recv = form == 0 ? dev_alloc<float>(n) : send;
    upload(send, inputs<float>(tag, g_rank, n));
    ncclResult_t rc = form == 2 ? ncclBcast(send, n, ncclFloat32, root, c.comm, c.stream)
                                : ncclBroadcast(send, recv, n, ncclFloat32, root, c.comm, c.stream);
    called(c, rc, "ncclBroadcast");
    finish_stream(c);
    std::vector<float> got = download(recv, n);
    CHECKM(same_bits(got, inputs<float>(tag, root, n)), "broadcast from root %d (form %d): wrong", root, form);
    absorb(c, got.data(), n * sizeof(float));
    CUDA(cudaFree(send));
    if (form == 0) { CUDA(cudaFree(recv)); }
}

static void test_reduce(Ctx& c, size_t n, int root) {
    int tag = ++c.tag;
    float* send = dev_alloc<float>(n);
    float* recv = g_rank == root ? dev_alloc<float>(n) : NULL; // NCCL ignores recvbuff off the root
    upload(send, inputs<float>(tag, g_rank, n));
    called(c, ncclReduce(send, recv, n, ncclFloat32, ncclSum, root, c.comm, c.stream), "ncclReduce");
    finish_stream(c);
    if (g_rank == root) {
        std::vector<float> got = download(recv, n);
        CHECKM(same_bits(got, reference<float>(tag, n, 0, ncclSum, rank_order())), "reduce to root %d: wrong", root);
        CUDA(cudaFree(recv));
    }
    CUDA(cudaFree(send));
}

// Three collectives in nested groups, queued at the outer ncclGroupEnd in issue order.
static void test_group(Ctx& c) {
    size_t n = 300;
    int t1 = ++c.tag, t2 = ++c.tag, t3 = ++c.tag;
    __nv_bfloat16* ar = dev_alloc<__nv_bfloat16>(n);
    float* ag = dev_alloc<float>(n * g_nranks);
    double* rs = dev_alloc<double>(n * g_nranks);
    upload(ar, inputs<__nv_bfloat16>(t1, g_rank, n));
    upload(ag + g_rank * n, inputs<float>(t2, g_rank, n));
    upload(rs, inputs<double>(t3, g_rank, n * g_nranks));
    CHECK(ncclGroupStart() == ncclSuccess);
    CHECK(ncclAllReduce(ar, ar, n, ncclBfloat16, ncclSum, c.comm, c.stream) == ncclSuccess); // inside a group: never ncclInProgress
    CHECK(ncclGroupStart() == ncclSuccess);
    CHECK(ncclAllGather(ag + g_rank * n, ag, n, ncclFloat32, c.comm, c.stream) == ncclSuccess);
    CHECK(ncclGroupEnd() == ncclSuccess); // inner end: nothing queued yet
    CHECK(cudaStreamQuery(c.stream) == cudaSuccess);
    CHECK(ncclReduceScatter(rs, rs + g_rank * n, n, ncclFloat64, ncclSum, c.comm, c.stream) == ncclSuccess);
    called(c, ncclGroupEnd(), "ncclGroupEnd");
    finish_stream(c);
    CHECKM(same_bits(download(ar, n), reference<__nv_bfloat16>(t1, n, 0, ncclSum, rank_order())), "grouped all-reduce");
    std::vector<float> want;
    for (int r = 0; r < g_nranks; r++) {
        std::vector<float> part = inputs<float>(t2, r, n);
        want.insert(want.end(), part.begin(), part.end());
    }
    CHECKM(same_bits(download(ag, n * g_nranks), want), "grouped all-gather");
    CHECKM(same_bits(download(rs + g_rank * n, n), reference<double>(t3, n, g_rank * n, ncclSum, rank_order())), "grouped reduce-scatter");
    CUDA(cudaFree(ar));
    CUDA(cudaFree(ag));
    CUDA(cudaFree(rs));
}

// Every rank got the same bits: the hashes of all results, gathered as the trainer gathers doubles.
static void test_same_everywhere(Ctx& c) {
    uint64_t* all = dev_alloc<uint64_t>(g_nranks);
    upload(all + g_rank, std::vector<uint64_t>{c.hash});
    called(c, ncclAllGather(all + g_rank, all, 1, ncclUint64, c.comm, c.stream), "ncclAllGather");
    finish_stream(c);
    std::vector<uint64_t> h = download(all, g_nranks);
    for (int r = 0; r < g_nranks; r++) { CHECKM(h[r] == c.hash, "rank %d's results differ from rank %d's", r, g_rank); }
    CUDA(cudaFree(all));
}

static void scenario_collectives(const ncclUniqueId& id, bool blocking) {
    Ctx c;
    c.blocking = blocking;
    c.comm = init_comm(id, blocking);
    int count = 0, rank = -1, device = -1;
    CHECK(ncclCommCount(c.comm, &count) == ncclSuccess && count == g_nranks);
    CHECK(ncclCommUserRank(c.comm, &rank) == ncclSuccess && rank == g_rank);
    CHECK(ncclCommCuDevice(c.comm, &device) == ncclSuccess && device == 0);
    CUDA(cudaStreamCreate(&c.stream));

    // the reference is sensitive to the order: with 3 ranks, the reverse order differs somewhere
    if (g_nranks >= 3) {
        std::vector<int> reverse = rank_order();
        std::reverse(reverse.begin(), reverse.end());
        CHECK(!same_bits(reference<float>(99, 1000, 0, ncclSum, rank_order()), reference<float>(99, 1000, 0, ncclSum, reverse)));
        CHECK(!same_bits(reference<__nv_bfloat16>(99, 1000, 0, ncclSum, rank_order()), reference<__nv_bfloat16>(99, 1000, 0, ncclSum, reverse)));
    }
    for (int in_place = 0; in_place < 2; in_place++) {
        test_all_reduce<float>(c, 1000, ncclSum, in_place);
        test_all_reduce<__nv_bfloat16>(c, 1001, ncclSum, in_place);
        test_all_reduce<double>(c, 999, ncclSum, in_place);
        test_reduce_scatter<float>(c, 257, ncclSum, in_place);
        test_reduce_scatter<__nv_bfloat16>(c, 300, ncclSum, in_place);
        test_reduce_scatter<double>(c, 64, ncclSum, in_place);
        test_all_gather<float>(c, 333, in_place);
        test_all_gather<__nv_bfloat16>(c, 128, in_place);
        test_all_gather<double>(c, 1, in_place); // one double per rank, as the trainer's scalar gather
    }
    test_all_reduce<__half>(c, 500, ncclSum, false);
    test_all_reduce<float>(c, 500, ncclAvg, false);
    test_all_reduce<__nv_bfloat16>(c, 500, ncclAvg, true);
    test_all_reduce<float>(c, 500, ncclMax, false);
    test_all_reduce<float>(c, 500, ncclMin, false);
    test_all_reduce<double>(c, 500, ncclProd, false);
    test_all_reduce<int32_t>(c, 500, ncclSum, false);
    test_all_reduce<int32_t>(c, 500, ncclProd, false);
    test_all_reduce<int32_t>(c, 500, ncclMax, false);
    test_all_reduce<int32_t>(c, 500, ncclMin, true);
    test_all_reduce<int32_t>(c, 500, ncclAvg, false);
    test_all_reduce<uint32_t>(c, 500, ncclProd, false);
    test_all_reduce<int8_t>(c, 500, ncclProd, false);
    test_all_reduce<uint8_t>(c, 500, ncclSum, false);
    test_all_reduce<int64_t>(c, 500, ncclSum, false);
    test_all_reduce<uint64_t>(c, 500, ncclMax, false);
    test_all_reduce<float>(c, 1 << 20, ncclSum, true); // 4 MiB: a larger object
    test_reduce_scatter<int32_t>(c, 100, ncclMax, false);
    for (int form = 0; form < 3; form++) { test_broadcast(c, 700, g_nranks - 1, form); }
    test_broadcast(c, 10, 0, 0);
    test_reduce(c, 400, 0);
    test_reduce(c, 400, g_nranks - 1);
    test_group(c);

    // a collective on the default stream
    Ctx d = c;
    d.stream = 0;
    test_all_reduce<float>(d, 100, ncclSum, false);
    c.tag = d.tag;
    c.hash = d.hash;
    test_same_everywhere(c);

    ncclResult_t rc = ncclCommFinalize(c.comm);
    if (blocking) { CHECK(rc == ncclSuccess); }
    else { CHECK(settle(c.comm, rc) == ncclSuccess); }
    CHECK(ncclCommDestroy(c.comm) == ncclSuccess);
}

// ---------------------------------------------------------------------------
// non-blocking answers: EMU_NCCL_INPROGRESS=1 (always ncclInProgress) or 0 (never)

static void scenario_busy(const ncclUniqueId& id) {
    const char* env = getenv("EMU_NCCL_INPROGRESS");
    bool always = env != NULL && atof(env) >= 1.0;
    ncclComm_t comm = init_comm(id, false);
    cudaStream_t s;
    CUDA(cudaStreamCreate(&s));
    size_t n = 64;
    float* buf = dev_alloc<float>(n);
    upload(buf, inputs<float>(1, g_rank, n));
    if (!always) {
        for (int i = 0; i < 50; i++) {
            CHECKM(ncclAllReduce(buf, buf, n, ncclFloat32, ncclMax, comm, s) == ncclSuccess, "call %d answered ncclInProgress", i);
        }
        CHECK(wait_stream(comm, s, 30) == ncclSuccess);
    } else {
        CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, s) == ncclInProgress);
        // calling again before the state settled is an error, and the call is not queued
        CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, s) == ncclInvalidUsage);
        CHECK(contains(ncclGetLastError(comm), "ncclSuccess"));
        int answers = 0;
        ncclResult_t state;
        do {
            CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess);
            answers += state == ncclInProgress;
        } while (state == ncclInProgress && answers < 10);
        CHECKM(state == ncclSuccess && answers >= 1 && answers <= 3, "state %d after %d ncclInProgress answers", state, answers);
        CHECK(wait_stream(comm, s, 30) == ncclSuccess);
        CHECK(same_bits(download(buf, n), reference<float>(1, n, 0, ncclSum, rank_order())));
        // a group: the calls inside answer ncclSuccess, ncclGroupEnd answers ncclInProgress
        CHECK(ncclGroupStart() == ncclSuccess);
        CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, ncclMax, comm, s) == ncclSuccess);
        CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, ncclMin, comm, s) == ncclSuccess);
        CHECK(ncclGroupEnd() == ncclInProgress);
        CHECK(settle(comm, ncclInProgress) == ncclSuccess);
        CHECK(wait_stream(comm, s, 30) == ncclSuccess);
    }
    ncclResult_t rc = ncclCommFinalize(comm);
    CHECK(always ? rc == ncclInProgress : rc == ncclSuccess);
    CHECK(settle(comm, rc) == ncclSuccess);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
    CUDA(cudaFree(buf));
}

// ---------------------------------------------------------------------------
// failures

// Rank 1 calls another collective (variant kind) or another count (variant count).
static void scenario_mismatch(const ncclUniqueId& id) {
    ncclComm_t comm = init_comm(id, false);
    cudaStream_t s;
    CUDA(cudaStreamCreate(&s));
    float* buf = dev_alloc<float>(64 * g_nranks);
    ncclResult_t rc;
    if (g_rank == 1 && strcmp(g_variant, "kind") == 0) { rc = ncclAllGather(buf + 16, buf, 16, ncclFloat32, comm, s); }
    else { rc = ncclAllReduce(buf, buf, g_rank == 1 ? 17 : 16, ncclFloat32, ncclSum, comm, s); }
    ncclResult_t state = settle(comm, rc); // the collective may already have run and failed
    CHECKM(state == ncclSuccess || state == ncclInvalidUsage, "state %d", state);
    double t0 = now_s();
    CHECK(wait_stream(comm, s, 10) == ncclInvalidUsage);
    CHECK(now_s() - t0 < 3);
    const char* msg = ncclGetLastError(comm);
    if (strcmp(g_variant, "kind") == 0) {
        CHECKM(contains(msg, "rank 0 called ncclAllReduce(count 16, ncclFloat32, ncclSum)") &&
               contains(msg, "rank 1 called ncclAllGather(count 16, ncclFloat32)"), "message: %s", msg);
    } else {
        CHECKM(contains(msg, "count 16") && contains(msg, "rank 1 called ncclAllReduce(count 17"), "message: %s", msg);
    }
    CUDA(cudaStreamSynchronize(s)); // the failed collective ended as a no-op: no hang
    CHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s) == ncclInvalidUsage); // the communicator stays broken
    CHECK(ncclCommAbort(comm) == ncclSuccess);
}

// Two ranks on one GPU with the same NCCL_HOSTID: rank 0 blocking, rank 1 non-blocking.
static void scenario_dupgpu(const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = g_rank == 0;
    ncclComm_t comm = NULL;
    ncclResult_t rc = ncclCommInitRankConfig(&comm, g_nranks, id, g_rank, &config);
    if (g_rank == 0) { CHECK(rc == ncclInvalidUsage && comm == NULL); }
    else { CHECK(rc == ncclInProgress && settle(comm, rc) == ncclInvalidUsage); }
    CHECKM(contains(ncclGetLastError(NULL), "Duplicate GPU detected: rank 1 and rank 0 both on CUDA device 0"), "%s", ncclGetLastError(NULL));
    if (comm != NULL) { CHECK(ncclCommAbort(comm) == ncclSuccess); }
}

// Rank 0 of 2, alone. Non-blocking: ncclInProgress for 2 s, then an abort that returns at once.
// Variant blocking: init waits until EMU_HANG_TIMEOUT and ends the process (status 86).
static void scenario_missing(const ncclUniqueId& id) {
    if (strcmp(g_variant, "blocking") == 0) {
        ncclComm_t comm;
        ncclCommInitRank(&comm, g_nranks, id, g_rank);
        CHECKM(false, "a blocking init without rank 1 returned");
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    CHECK(ncclCommInitRankConfig(&comm, g_nranks, id, g_rank, &config) == ncclInProgress);
    CHECK(settle(comm, ncclInProgress, 2.0) == ncclInProgress);
    cudaStream_t s;
    CUDA(cudaStreamCreate(&s));
    float* buf = dev_alloc<float>(16);
    CHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s) == ncclInvalidUsage); // the init has not settled
    double t0 = now_s();
    CHECK(ncclCommAbort(comm) == ncclSuccess);
    CHECK(now_s() - t0 < 0.2);
}

// The last rank kills itself after one collective. The others must see ncclRemoteError quickly.
static void scenario_killed(const ncclUniqueId& id) {
    ncclComm_t comm = init_comm(id, false);
    cudaStream_t s;
    CUDA(cudaStreamCreate(&s));
    float* buf = dev_alloc<float>(1000);
    upload(buf, inputs<float>(1, g_rank, 1000));
    CHECK(settle(comm, ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, s)) == ncclSuccess);
    CHECK(wait_stream(comm, s, 30) == ncclSuccess);
    if (g_rank == g_nranks - 1) { raise(SIGKILL); }
    double t0 = now_s();
    ncclResult_t state = settle(comm, ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, s));
    CHECKM(state == ncclSuccess || state == ncclRemoteError, "state %d", state); // it may have failed already
    CHECK(wait_stream(comm, s, 10) == ncclRemoteError);
    CHECK(now_s() - t0 < 3);
    char want[64];
    snprintf(want, sizeof(want), "rank %d (pid", g_nranks - 1);
    CHECKM(contains(ncclGetLastError(comm), want) && contains(ncclGetLastError(comm), "exited"), "%s", ncclGetLastError(comm));
    CUDA(cudaStreamSynchronize(s));
    t0 = now_s();
    CHECK(ncclCommAbort(comm) == ncclSuccess);
    CHECK(now_s() - t0 < 0.2);
}

// Rank 1 aborts (variant abort) or exits without a word (variant exit) while rank 0 waits for it
// in a collective: rank 0 gets ncclRemoteError saying so.
static void scenario_peer_leaves(const ncclUniqueId& id) {
    bool abort = strcmp(g_variant, "abort") == 0;
    ncclComm_t comm = init_comm(id, false);
    if (g_rank == 1) {
        usleep(300000);
        if (abort) { CHECK(ncclCommAbort(comm) == ncclSuccess); }
        exit(0); // "exit": the emulator aborts its communicators at exit
    }
    cudaStream_t s;
    CUDA(cudaStreamCreate(&s));
    float* buf = dev_alloc<float>(16);
    ncclResult_t state = settle(comm, ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
    CHECKM(state == ncclSuccess || state == ncclRemoteError, "state %d", state);
    CHECK(wait_stream(comm, s, 10) == ncclRemoteError);
    const char* msg = ncclGetLastError(comm);
    CHECKM(contains(msg, "rank 1 (pid") && contains(msg, "aborted its communicator"), "%s", msg); // exit: the emulator aborts at exit
    CHECK(ncclCommAbort(comm) == ncclSuccess);
}

// Rank 0 aborts while its collective waits for rank 1. The abort returns at once, and the
// stream then finishes (the collective became a no-op).
static void scenario_abort_pending(const ncclUniqueId& id) {
    ncclComm_t comm = init_comm(id, false);
    if (g_rank == 1) {
        usleep(1000000); // rank 0 has aborted by now
        CHECK(ncclCommAbort(comm) == ncclSuccess);
        return;
    }
    cudaStream_t s;
    CUDA(cudaStreamCreate(&s));
    float* buf = dev_alloc<float>(1 << 16);
    CHECK(settle(comm, ncclAllReduce(buf, buf, 1 << 16, ncclFloat32, ncclSum, comm, s)) == ncclSuccess);
    usleep(200000);
    CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    double t0 = now_s();
    CHECK(ncclCommAbort(comm) == ncclSuccess);
    CHECK(now_s() - t0 < 0.1);
    t0 = now_s();
    CUDA(cudaStreamSynchronize(s));
    CHECK(now_s() - t0 < 0.5);
}

// Two processes claim rank 0: one waits (rank 1 never comes), one is refused.
static void scenario_duprank(const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    CHECK(ncclCommInitRankConfig(&comm, g_nranks, id, g_rank, &config) == ncclInProgress);
    ncclResult_t state = settle(comm, ncclInProgress, 1.5);
    if (state == ncclInvalidUsage) {
        CHECKM(contains(ncclGetLastError(comm), "rank 0 of 2 was registered twice"), "%s", ncclGetLastError(comm));
        printf("OUTCOME refused\n");
    } else {
        CHECK(state == ncclInProgress);
        printf("OUTCOME waited\n");
    }
    CHECK(ncclCommAbort(comm) == ncclSuccess);
}

// Ranks given different nranks: every one of them fails.
static void scenario_nranks(const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    CHECK(ncclCommInitRankConfig(&comm, g_nranks, id, g_rank, &config) == ncclInProgress);
    CHECK(settle(comm, ncclInProgress, 5) == ncclInvalidUsage);
    CHECKM(contains(ncclGetLastError(comm), "ranks disagree on nranks"), "%s", ncclGetLastError(comm));
    CHECK(ncclCommAbort(comm) == ncclSuccess);
}

// ---------------------------------------------------------------------------
// ncclCommSplit: color, key order, NCCL_SPLIT_NOCOLOR, the config

// The child of a split: settled (a non-blocking one polled to ncclSuccess); checks its size and
// this rank's place in it.
static ncclComm_t split_comm(ncclComm_t parent, int color, int key, ncclConfig_t* config, bool blocking, int nranks, int rank) {
    ncclComm_t child = NULL;
    ncclResult_t rc = ncclCommSplit(parent, color, key, &child, config);
    CHECKM(blocking ? rc == ncclSuccess : (rc == ncclSuccess || rc == ncclInProgress), "ncclCommSplit: %d", rc);
    // EMU_NCCL_INPROGRESS=1: a non-blocking communicator answers every call ncclInProgress (a
    // child that inherited a non-blocking parent's mode must too)
    const char* always = getenv("EMU_NCCL_INPROGRESS");
    if (!blocking && always != NULL && strcmp(always, "1") == 0) { CHECKM(rc == ncclInProgress, "ncclCommSplit: %d", rc); }
    CHECK(child != NULL);
    CHECK(settle(child, rc) == ncclSuccess);
    int count = -1, user = -1;
    CHECK(ncclCommCount(child, &count) == ncclSuccess && ncclCommUserRank(child, &user) == ncclSuccess);
    CHECKM(count == nranks && user == rank, "child of color %d: %d ranks, rank %d; expected %d, %d", color, count, user, nranks, rank);
    return child;
}

// An all-reduce on `child`, whose ranks in order are the parent ranks `members`: the sum of
// their inputs in that order, bit for bit (the emulator's documented order).
static void check_split_sum(ncclComm_t child, const std::vector<int>& members, int tag, cudaStream_t s) {
    size_t n = 257;
    float* a = dev_alloc<float>(n);
    upload(a, inputs<float>(tag, g_rank, n));
    CHECK(settle(child, ncclAllReduce(a, a, n, ncclFloat32, ncclSum, child, s)) == ncclSuccess);
    CHECK(wait_stream(child, s, 30) == ncclSuccess);
    CHECK(same_bits(download(a, n), reference<float>(tag, n, 0, ncclSum, members)));
    CUDA(cudaFree(a));
}

// Every rank splits the parent twice: by parity with the keys reversed (each half ranked from
// its highest parent rank down), then all but rank 0 into one communicator (rank 0:
// NCCL_SPLIT_NOCOLOR, no communicator), ranked by equal keys, so by parent rank. Variant
// "blocking", "nonblocking", or "inherit" (a non-blocking parent, NULL config: the children are
// non-blocking too).
static void scenario_split(const ncclUniqueId& id) {
    std::string v = g_variant;
    bool blocking = v == "blocking";
    ncclComm_t parent = init_comm(id, blocking);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking ? 1 : 0;
    ncclConfig_t* cfg = v == "inherit" ? NULL : &config;
    cudaStream_t s;
    CUDA(cudaStreamCreate(&s));
    // by parity, keys reversed
    std::vector<int> half;
    for (int r = g_nranks - 1; r >= 0; r--) { if (r % 2 == g_rank % 2) { half.push_back(r); } }
    int mine = (int)(std::find(half.begin(), half.end(), g_rank) - half.begin());
    ncclComm_t parity = split_comm(parent, g_rank % 2, -g_rank, cfg, blocking, (int)half.size(), mine);
    check_split_sum(parity, half, 31, s);
    // all but rank 0; rank 0 gets none
    ncclComm_t rest = NULL;
    if (g_rank == 0) {
        ncclResult_t rc = ncclCommSplit(parent, NCCL_SPLIT_NOCOLOR, 0, &rest, cfg);
        CHECKM(rc == ncclSuccess && rest == NULL, "NOCOLOR: rc %d, comm %p", rc, (void*)rest);
    } else {
        std::vector<int> others;
        for (int r = 1; r < g_nranks; r++) { others.push_back(r); }
        rest = split_comm(parent, 7, 0, cfg, blocking, g_nranks - 1, g_rank - 1);
        check_split_sum(rest, others, 32, s);
    }
    // the parent still works after its splits
    check_split_sum(parent, rank_order(), 33, s);
    ncclComm_t none = NULL;
    CHECK(ncclCommSplit(parent, -5, 0, &none, cfg) == ncclInvalidArgument && none == NULL);
    CHECK(contains(ncclGetLastError(NULL), "NCCL_SPLIT_NOCOLOR"));
    CHECK(ncclCommSplit(parent, 0, 0, NULL, cfg) == ncclInvalidArgument);
    if (rest != NULL) { CHECK(ncclCommDestroy(rest) == ncclSuccess); }
    CHECK(ncclCommDestroy(parity) == ncclSuccess);
    CHECK(ncclCommDestroy(parent) == ncclSuccess);
}

// ---------------------------------------------------------------------------
// one rank: arguments, errors, unsupported calls

static void scenario_validation(const ncclUniqueId& id) {
    int version = 0;
    CHECK(ncclGetVersion(&version) == ncclSuccess && version == NCCL_VERSION_CODE);
    CHECK(strlen(ncclGetErrorString(ncclInvalidUsage)) > 0);
    CHECK(strlen(ncclGetErrorString(ncclRemoteError)) > 0);
    ncclComm_t comm = NULL;
    CHECK(ncclCommInitRank(&comm, 1, id, 1) == ncclInvalidArgument && comm == NULL);
    CHECK(ncclCommInitRank(&comm, 0, id, 0) == ncclInvalidArgument);
    ncclUniqueId zero;
    memset(&zero, 0, sizeof(zero));
    CHECK(ncclCommInitRank(&comm, 1, zero, 0) == ncclInvalidArgument);
    CHECK(contains(ncclGetLastError(NULL), "ncclGetUniqueId"));
    ncclConfig_t bad;
    memset(&bad, 0, sizeof(bad));
    CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &bad) == ncclInvalidArgument);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 2;
    CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &config) == ncclInvalidArgument);
    CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess && comm != NULL); // NULL config: blocking

    cudaStream_t s;
    CUDA(cudaStreamCreate(&s));
    size_t n = 100;
    float* a = dev_alloc<float>(n * 2);
    std::vector<float> host(n, 1.0f);
    CHECK(ncclAllReduce(host.data(), a, n, ncclFloat32, ncclSum, comm, s) == ncclInvalidArgument);
    CHECK(contains(ncclGetLastError(comm), "not device memory"));
    CHECK(ncclAllReduce(a, a + 1, n, ncclFloat32, ncclSum, comm, s) == ncclInvalidUsage);
    CHECK(contains(ncclGetLastError(comm), "overlap"));
    CHECK(ncclAllGather(a + 1, a, n, ncclFloat32, comm, s) == ncclInvalidUsage);
    CHECK(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, comm, s) == ncclSuccess); // count 0: nothing to do
    CHECK(ncclAllReduce(a, a, n, (ncclDataType_t)99, ncclSum, comm, s) == ncclInvalidArgument);
    CHECK(ncclAllReduce(a, a, n, ncclFloat8e4m3, ncclSum, comm, s) == ncclInvalidUsage);
    CHECK(contains(ncclGetLastError(comm), "not supported"));
    CHECK(ncclAllReduce(a, a, n, ncclFloat32, ncclNumOps, comm, s) == ncclInvalidUsage);
    CHECK(contains(ncclGetLastError(comm), "user-defined"));
    CHECK(ncclBroadcast(a, a, n, ncclFloat32, 1, comm, s) == ncclInvalidArgument);
    CHECK(ncclSend(a, n, ncclFloat32, 0, comm, s) == ncclInvalidUsage);
    CHECK(contains(ncclGetLastError(comm), "ncclSend") && contains(ncclGetLastError(comm), "not supported by the CPU emulator"));
    CHECK(ncclCommShrink(comm, NULL, 0, NULL, NULL, 0) == ncclInvalidUsage);
    CHECK(ncclCommInitAll(NULL, 1, NULL) == ncclInvalidUsage);
    CHECK(ncclGroupEnd() == ncclInvalidUsage);
    CHECK(ncclAllReduce(a, a, n, ncclFloat32, ncclSum, comm, (cudaStream_t)(uintptr_t)0x12345678) == ncclUnhandledCudaError);

    // one rank: an all-reduce copies, the in-place forms of reduce-scatter and all-gather are accepted
    upload(a, inputs<float>(5, 0, n * 2));
    CHECK(ncclAllReduce(a, a + n, n, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    CHECK(ncclReduceScatter(a, a, n, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    CHECK(ncclAllGather(a, a, n, ncclFloat32, comm, s) == ncclSuccess);
    CUDA(cudaStreamSynchronize(s));
    std::vector<float> got = download(a, 2 * n), want = inputs<float>(5, 0, n);
    want.insert(want.end(), want.begin(), want.end());
    CHECK(same_bits(got, want));

    // a failed call inside a group: ncclGroupEnd returns its error and queues nothing
    float* b = dev_alloc<float>(n);
    upload(b, std::vector<float>(n, 7.0f));
    CHECK(ncclGroupStart() == ncclSuccess);
    CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    CHECK(ncclAllReduce(host.data(), b, n, ncclFloat32, ncclSum, comm, s) == ncclInvalidArgument);
    CHECK(ncclGroupEnd() == ncclInvalidArgument);
    CUDA(cudaStreamSynchronize(s));
    CHECK(same_bits(download(b, n), std::vector<float>(n, 7.0f)));

    CHECK(ncclCommFinalize(comm) == ncclSuccess);
    CHECK(ncclCommFinalize(comm) == ncclInvalidUsage);
    CHECK(contains(ncclGetLastError(comm), "finalized"));
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
    CHECK(ncclCommDestroy(NULL) == ncclSuccess);
    CHECK(ncclCommAbort(NULL) == ncclSuccess);
    CUDA(cudaFree(a));
    CUDA(cudaFree(b));
}

int main(int argc, char** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s SCENARIO RANK NRANKS IDFILE [VARIANT]\n", argv[0]);
        return 2;
    }
    g_scenario = argv[1];
    g_rank = atoi(argv[2]);
    g_nranks = atoi(argv[3]);
    g_variant = argc > 5 ? argv[5] : "";
    ncclUniqueId id = get_id(argv[4]);
    std::string sc = g_scenario;
    if (sc == "collectives") { scenario_collectives(id, strcmp(g_variant, "nonblocking") != 0); }
    else if (sc == "busy") { scenario_busy(id); }
    else if (sc == "mismatch") { scenario_mismatch(id); }
    else if (sc == "dupgpu") { scenario_dupgpu(id); }
    else if (sc == "missing") { scenario_missing(id); }
    else if (sc == "killed") { scenario_killed(id); }
    else if (sc == "peer-leaves") { scenario_peer_leaves(id); }
    else if (sc == "abort-pending") { scenario_abort_pending(id); }
    else if (sc == "duprank") { scenario_duprank(id); }
    else if (sc == "nranks") { scenario_nranks(id); }
    else if (sc == "validation") { scenario_validation(id); }
    else if (sc == "split") { scenario_split(id); }
    else { fprintf(stderr, "unknown scenario %s\n", argv[1]); return 2; }
    fprintf(stderr, "rank %d [%s %s] ok: %d checks\n", g_rank, g_scenario, g_variant, g_checks);
    return 0;
}
