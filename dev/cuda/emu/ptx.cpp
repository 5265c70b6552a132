/*
The PTX instructions that inline asm in a kernel may use (nvcc-cpu's table), with the semantics of
the PTX ISA (the "Warp Level Matrix Multiply-Accumulate Instructions" and "Asynchronous copy"
sections; references below are to their headings):

- mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: D = A*B + C for one warp,
  A 16x16, B 16x8, C and D 16x8 fp32, each spread over the 32 lanes as "Matrix Fragments for
  mma.m16n8k16 with floating point type" lays them out;
- ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16: 1, 2 or 4 8x8 matrices of 16-bit
  elements from shared memory, rows addressed by lanes 0-7, 8-15, 16-23, 24-31, into the same
  fragment layout ("Warp-level matrix load instruction: ldmatrix");
- cp.async.{ca,cg}.shared.global, cp.async.commit_group, cp.async.wait_group, cp.async.wait_all:
  per-thread asynchronous copies from global to shared memory, in groups ("Non-bulk copy").

Both warp-collective instructions (.sync.aligned) go through kernel.cpp's warp_collective: all 32
lanes must arrive at the same line, else an error. Strictness where the ISA leaves things open:
- mma sums in one fixed order (below); a GPU's order inside the tensor core is unspecified, so
  the emulator's bits are not a GPU's (fp32 rounding differences in the last places);
- a cp.async lands at the wait that covers its group, never earlier: until then its destination
  holds 0xFF bytes (NaN in fp32 and bf16), so a read before the wait gives NaN; an ldmatrix of
  bytes whose copy has not landed is an error naming both lines; a source changed before its copy
  landed is an error (undefined on a GPU); copies never waited for are dropped at the block's end.

It also prints the errors of the checked device functions in emu_device.h and include/ (a
misaligned cache-hint load or store, __cvta_generic_to_shared of a pointer that is not shared
memory, a bad tiled_partition), with the kernel, block, thread and line.
*/
#include <chrono>
#include "emu_device.h"
#include "emu_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

namespace emu {

static std::string site_str(Site s) { return std::string(s.file ? s.file : "?") + ":" + std::to_string(s.line); }

// "kernel K (launched at F:L) block (..) thread (..)" of the calling CUDA thread, or "host code"
static std::string who() {
    std::string w = current_kernel_text();
    return w.empty() ? "host code" : w;
}

// threadIdx of lane `lane` of warp `warp` in the running block (for messages from the scheduler)
static std::string lane_text(int warp, int lane) {
    unsigned linear = (unsigned)(warp * 32 + lane), bx = emu_blockDim.x, by = emu_blockDim.y;
    char s[96];
    snprintf(s, sizeof(s), "lane %d (thread (%u,%u,%u))", lane, linear % bx, linear / bx % by, linear / (bx * by));
    return s;
}

bool shared_offset_of(const void* p, uint64_t* offset) { return shared_window_offset(p, 0, offset); }
void* shared_pointer_of(uint64_t offset) { return shared_window_pointer(offset, 0); }

void ptx_not_shared(const char* what, const void* p, Site site) {
    fatal("%s: %s(%p) at %s: not in this block's shared memory (a static __shared__ variable or the extern __shared__ "
          "array)",
          who().c_str(), what, p, site_str(site).c_str());
}

void device_error(const char* text, Site site) { fatal("%s: %s at %s", who().c_str(), text, site_str(site).c_str()); }

void misaligned_access(const char* what, const void* p, size_t bytes, Site site) {
    fatal("%s: %s(%p) at %s: misaligned address (a %zu-byte access must be %zu-byte aligned; a GPU faults)",
          who().c_str(), what, p, site_str(site).c_str(), bytes, bytes);
}

uint64_t ptx_generic_to_shared(uint64_t generic, const char* what, Site site) {
    uint64_t offset = 0;
    if (!shared_window_offset((const void*)(uintptr_t)generic, 0, &offset)) {
        fatal("%s: %s at %s: the generic address %p is not in this block's shared memory (undefined on a GPU)",
              who().c_str(), what, site_str(site).c_str(), (void*)(uintptr_t)generic);
    }
    return offset;
}

// ----------------------------------------------------------------------------
// 16-bit floating point to fp32 (exact: every bf16 and f16 value is an fp32 value)

static float bf16_bits_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static float f16_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, bits;
    if (exponent == 0) { // zero or subnormal: mantissa * 2^-24
        float f = ldexpf((float)mantissa, -24);
        return sign ? -f : f;
    }
    if (exponent == 31) {
        bits = sign | 0x7f800000u | (mantissa << 13); // inf or NaN (payload kept)
    } else {
        bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// ----------------------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32
//
// Fragments ("Matrix Fragments for mma.m16n8k16 with floating point type"), with
// groupID = laneid >> 2 and threadID_in_group = laneid % 4, written g and t:
//   A (16x16, row-major), a0..a7 in four .b32 registers, two elements each, the lower-numbered
//     element in the low 16 bits: row g for a0,a1,a4,a5, g + 8 for a2,a3,a6,a7;
//     column 2t + (i & 1) for i < 4, 2t + (i & 1) + 8 for i >= 4;
//   B (16x8, "col"), b0..b3 in two registers: row 2t + (i & 1) for i < 2, 2t + (i & 1) + 8 for
//     i >= 2; column g;
//   C and D (16x8 fp32), c0..c3 in four .f32 registers: row g for i < 2, g + 8 for i >= 2;
//     column 2t + (i & 1).
// Summation order (the emulator's choice; a GPU's is unspecified): for each D[i][j], starting
// from C[i][j], add A[i][k] * B[k][j] for k = 0, 1, ..., 15, rounding to fp32 after each add.
// Every product of two bf16 or f16 values is exact in fp32, so only the adds round.

struct MmaLane {
    const uint32_t* a;
    const uint32_t* b;
    const float* c;
    float* d;
};

template <bool BF16> static void mma_run(void* const lanes[32], int warp, const std::string& where) {
    (void)warp;
    (void)where;
    auto half = [](uint32_t reg, int hi) {
        uint16_t h = (uint16_t)(hi ? reg >> 16 : reg & 0xffff);
        return BF16 ? bf16_bits_to_float(h) : f16_bits_to_float(h);
    };
    float A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const MmaLane* l = (const MmaLane*)lanes[lane];
        int g = lane >> 2, t = lane % 4;
        for (int i = 0; i < 8; i++) { // a_i
            int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
            int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
            A[row][col] = half(l->a[i / 2], i & 1);
        }
        for (int i = 0; i < 4; i++) { // b_i
            int row = t * 2 + (i & 1) + (i >= 2 ? 8 : 0);
            B[row][g] = half(l->b[i / 2], i & 1);
        }
        for (int i = 0; i < 4; i++) { // c_i
            C[i < 2 ? g : g + 8][t * 2 + (i & 1)] = l->c[i];
        }
    }
    float D[16][8];
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 8; j++) {
            float acc = C[i][j];
            for (int k = 0; k < 16; k++) { acc += A[i][k] * B[k][j]; }
            D[i][j] = acc;
        }
    }
    // only now the outputs: a lane's d may be the same registers as its c ("+f")
    for (int lane = 0; lane < 32; lane++) {
        const MmaLane* l = (const MmaLane*)lanes[lane];
        int g = lane >> 2, t = lane % 4;
        for (int i = 0; i < 4; i++) { l->d[i] = D[i < 2 ? g : g + 8][t * 2 + (i & 1)]; }
    }
    if (PtxCounters* c = current_launch_counters()) {
        c->mma++;
        c->mma_flops += 2 * 16 * 8 * 16;
    }
    count_mma_flops(2 * 16 * 8 * 16); // EMU_COUNTERS' column (check.cpp)
}

void ptx_mma_m16n8k16(PtxType ab, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4], Site site) {
    MmaLane lane{a, b, c, d};
    if (ab == PTX_BF16) {
        warp_collective("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", &lane, mma_run<true>, site);
    } else {
        warp_collective("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", &lane, mma_run<false>, site);
    }
}

// ----------------------------------------------------------------------------
// cp.async: each CUDA thread's copies not yet committed, and its committed groups, oldest first.
// One OS thread runs one block at a time, so the state of the block it runs is thread_local and
// starts afresh when the block changes (block_serial).

struct Copy {
    uint64_t id;            // issue order in the block
    uint64_t dst;           // .shared window offset
    unsigned char* dst_ptr; // where that is
    const unsigned char* src;
    int cp_size, src_size;  // bytes written; bytes read (the rest of cp_size is zero-filled)
    unsigned char data[16]; // the source bytes when the copy was issued
    Site site;
    int thread;             // linear index in the block
    const void* pc;         // the issuing instruction's code address (EMU_CHECK, EMU_COUNTERS)
};

struct ThreadCopies {
    std::vector<Copy> open;                // issued, not committed
    std::deque<std::vector<Copy>> groups;  // committed, not complete, oldest first
};

struct BlockCopies {
    uint64_t block_serial = 0, next_id = 0;
    std::vector<ThreadCopies> threads;
    std::multimap<uint64_t, Copy> in_flight; // by destination offset: every copy not landed yet
};
static thread_local BlockCopies tl_copies;

// The running block's copies (false outside a block); a new block drops what the last one left.
static bool block_copies(KernelThread* kt) {
    if (!current_kernel_thread(kt)) { return false; }
    if (tl_copies.block_serial != kt->block_serial) {
        tl_copies.block_serial = kt->block_serial;
        tl_copies.threads.assign(kt->nthreads, ThreadCopies());
        tl_copies.in_flight.clear();
    }
    return true;
}

static ThreadCopies& my_copies(int* linear) {
    KernelThread kt;
    if (!block_copies(&kt) || kt.linear < 0) { fatal("cp.async ran outside a kernel's threads"); }
    *linear = kt.linear;
    return tl_copies.threads[kt.linear];
}

static bool overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return a < b + bn && b < a + an; }

// A copy in flight (issued by any thread of the running block, not landed) that writes window
// bytes [offset, offset + n), or nullptr.
static const Copy* copy_in_flight(uint64_t offset, size_t n) {
    KernelThread kt;
    if (!block_copies(&kt) || tl_copies.in_flight.empty()) { return nullptr; }
    auto it = tl_copies.in_flight.lower_bound(offset + n); // the first copy starting at or past the end
    while (it != tl_copies.in_flight.begin()) {
        --it;
        const Copy& c = it->second;
        if (overlap(c.dst, (uint64_t)c.cp_size, offset, n)) { return &c; }
        if (c.dst + 16 <= offset) { break; } // copies are at most 16 bytes: none further left reaches
    }
    return nullptr;
}

bool cp_async_in_flight(const void* p, size_t n, Site* issued_at, int* thread) {
    if (tl_copies.in_flight.empty()) { return false; } // the common case, first: check.cpp asks on every shared access
    uint64_t offset = 0;
    if (!shared_window_offset(p, n, &offset)) { return false; }
    const Copy* c = copy_in_flight(offset, n);
    if (c == nullptr) { return false; }
    *issued_at = c->site;
    *thread = c->thread;
    return true;
}

void ptx_cp_async(bool cg, uint64_t dst, uint64_t src, long long cp_size, long long src_size, Site site) {
    int linear = 0;
    ThreadCopies& mine = my_copies(&linear);
    const char* op = cg ? "cp.async.cg.shared.global" : "cp.async.ca.shared.global";
    if (cp_size != 4 && cp_size != 8 && cp_size != 16) {
        fatal("%s: %s at %s: cp-size %lld (4, 8 or 16)", who().c_str(), op, site_str(site).c_str(), cp_size);
    }
    if (cg && cp_size != 16) {
        fatal("%s: %s at %s: cp-size %lld (.cg copies 16 bytes only)", who().c_str(), op, site_str(site).c_str(), cp_size);
    }
    if (src_size < 0) { src_size = cp_size; }
    if (src_size > cp_size) {
        fatal("%s: %s at %s: src-size %lld is larger than cp-size %lld (undefined)", who().c_str(), op,
              site_str(site).c_str(), src_size, cp_size);
    }
    if (dst % cp_size != 0 || src % cp_size != 0) {
        fatal("%s: %s at %s: misaligned address: dst (shared offset 0x%llx) and src (%p) must be %lld-byte aligned",
              who().c_str(), op, site_str(site).c_str(), (unsigned long long)dst, (void*)src, cp_size);
    }
    unsigned char* dst_ptr = (unsigned char*)shared_window_pointer(dst, (size_t)cp_size);
    if (dst_ptr == nullptr) {
        fatal("%s: %s at %s: dst 0x%llx (+%lld bytes) is not in this block's shared memory (cp.async writes .shared "
              "offsets: pass __cvta_generic_to_shared of a __shared__ address)",
              who().c_str(), op, site_str(site).c_str(), (unsigned long long)dst, cp_size);
    }
    bool freed = false;
    if (src_size > 0 && !device_range_in_kernel((const void*)src, (size_t)src_size, &freed)) {
        fatal("%s: %s at %s: src [%p, +%lld bytes) is not inside a device allocation (cudaMalloc)%s", who().c_str(), op,
              site_str(site).c_str(), (void*)src, src_size, freed ? ": it was freed" : "");
    }
    for (const Copy& o : mine.open) {
        if (overlap(o.dst, (uint64_t)o.cp_size, dst, (uint64_t)cp_size)) {
            fatal("%s: %s at %s writes shared bytes that the cp.async at %s of the same group writes too (undefined: "
                  "copies of one group have no order)",
                  who().c_str(), op, site_str(site).c_str(), site_str(o.site).c_str());
        }
    }
    // EMU_CHECK sees the copy's global read now, by this thread (bounds, written bytes, races
    // with other blocks), and its shared write when it lands (below)
    const void* pc = __builtin_return_address(0);
    if (src_size > 0) { check_ptx_access(linear, (const void*)src, (size_t)src_size, false, pc); }
    Copy c{tl_copies.next_id++, dst, dst_ptr, (const unsigned char*)src, (int)cp_size, (int)src_size, {0}, site, linear, pc};
    memcpy(c.data, c.src, (size_t)src_size);
    memset(dst_ptr, 0xFF, (size_t)cp_size); // in flight: what a read before the wait sees
    mine.open.push_back(c);
    tl_copies.in_flight.emplace(dst, c);
    if (PtxCounters* counters = current_launch_counters()) {
        counters->cp_async++;
        counters->cp_async_bytes += (uint64_t)cp_size;
    }
}

void ptx_cp_async_commit_group(Site site) {
    (void)site;
    int linear = 0;
    ThreadCopies& mine = my_copies(&linear);
    mine.groups.push_back(std::move(mine.open)); // possibly empty: an empty group is complete at once
    mine.open.clear();
}

// The copies of one group land: their bytes reach shared memory now.
static void land(const std::vector<Copy>& group, Site wait_site) {
    for (const Copy& c : group) {
        if (c.src_size > 0 && memcmp(c.data, c.src, (size_t)c.src_size) != 0) {
            fatal("%s: the source of the cp.async issued at %s changed before the copy completed at the wait at %s "
                  "(undefined on a GPU)",
                  who().c_str(), source_line(c.pc).c_str(), site_str(wait_site).c_str());
        }
        memcpy(c.dst_ptr, c.data, (size_t)c.src_size);
        memset(c.dst_ptr + c.src_size, 0, (size_t)(c.cp_size - c.src_size));
        auto range = tl_copies.in_flight.equal_range(c.dst);
        for (auto it = range.first; it != range.second; ++it) {
            if (it->second.id == c.id) {
                tl_copies.in_flight.erase(it);
                break;
            }
        }
        // EMU_CHECK: a shared store of all cp-size bytes (the zero fill too) by the issuing thread,
        // which runs this wait, now: after it, other threads may read them only past a barrier
        check_ptx_access(c.thread, c.dst_ptr, (size_t)c.cp_size, true, c.pc);
    }
}

void ptx_cp_async_wait_group(long long n, Site site) {
    if (n < 0) { fatal("%s: cp.async.wait_group %lld at %s: N must be >= 0", who().c_str(), n, site_str(site).c_str()); }
    int linear = 0;
    ThreadCopies& mine = my_copies(&linear);
    while ((long long)mine.groups.size() > n) { // groups complete in the order they were committed
        land(mine.groups.front(), site);
        mine.groups.pop_front();
    }
}

void ptx_cp_async_wait_all(Site site) { // = cp.async.commit_group; cp.async.wait_group 0
    ptx_cp_async_commit_group(site);
    ptx_cp_async_wait_group(0, site);
}

// ----------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16
//
// Matrix m (0 <= m < num) has its 8 row addresses in lanes 8m .. 8m+7 (row r from lane 8m + r;
// the other lanes' addresses are not used). A row is 8 16-bit elements, 16 bytes, 16-byte
// aligned ("naturally aligned"). Lane l receives in register d[m] the elements (l>>2, 2(l%4)) and
// (l>>2, 2(l%4)+1) of matrix m, the first in the low 16 bits; with .trans the matrix is read
// column-major, i.e. lane l receives (2(l%4), l>>2) and (2(l%4)+1, l>>2).

struct LdmatrixLane {
    uint64_t addr;
    uint32_t* d;
    int num;
    bool trans;
    const void* pc; // the instruction's code address (EMU_CHECK, EMU_COUNTERS)
};

static void ldmatrix_run(void* const lanes[32], int warp, const std::string& where) {
    const LdmatrixLane* first = (const LdmatrixLane*)lanes[0];
    int num = first->num;
    uint16_t rows[4][8][8];
    for (int m = 0; m < num; m++) {
        for (int r = 0; r < 8; r++) {
            int lane = 8 * m + r;
            uint64_t addr = ((const LdmatrixLane*)lanes[lane])->addr;
            if (addr % 16 != 0) {
                fatal("%s: %s gives row %d of matrix %d at shared offset 0x%llx, which is not 16-byte aligned",
                      where.c_str(), lane_text(warp, lane).c_str(), r, m, (unsigned long long)addr);
            }
            const void* p = shared_window_pointer(addr, 16);
            if (p == nullptr) {
                fatal("%s: %s gives row %d of matrix %d at 0x%llx, which is not in this block's shared memory "
                      "(ldmatrix reads .shared offsets: pass __cvta_generic_to_shared of a __shared__ address)",
                      where.c_str(), lane_text(warp, lane).c_str(), r, m, (unsigned long long)addr);
            }
            if (const Copy* c = copy_in_flight(addr, 16)) {
                fatal("%s: %s gives row %d of matrix %d at shared offset 0x%llx, whose bytes the cp.async issued at %s:%d by "
                      "thread %d has not landed yet (no cp.async.wait_group covering it, then a barrier)",
                      where.c_str(), lane_text(warp, lane).c_str(), r, m, (unsigned long long)addr, c->site.file,
                      c->site.line, c->thread);
            }
            check_ptx_access(warp * 32 + lane, p, 16, false, ((const LdmatrixLane*)lanes[lane])->pc); // a shared load by that lane
            memcpy(rows[m][r], p, 16);
        }
    }
    for (int lane = 0; lane < 32; lane++) {
        const LdmatrixLane* l = (const LdmatrixLane*)lanes[lane];
        int row = lane >> 2, col = 2 * (lane % 4);
        for (int m = 0; m < num; m++) {
            uint16_t lo = first->trans ? rows[m][col][row] : rows[m][row][col];
            uint16_t hi = first->trans ? rows[m][col + 1][row] : rows[m][row][col + 1];
            l->d[m] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
    }
    if (PtxCounters* c = current_launch_counters()) {
        c->ldmatrix++;
        c->ldmatrix_bytes += 128 * (uint64_t)num;
    }
}

void ptx_ldmatrix(int num, bool trans, uint64_t addr, uint32_t* d, Site site) {
    LdmatrixLane lane{addr, d, num, trans, __builtin_return_address(0)};
    static const char* names[2][3] = {
        {"ldmatrix.sync.aligned.m8n8.x1.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
         "ldmatrix.sync.aligned.m8n8.x4.shared.b16"},
        {"ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
         "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"}};
    int which = num == 1 ? 0 : num == 2 ? 1 : 2;
    warp_collective(names[trans][which], &lane, ldmatrix_run, site);
}

// ----------------------------------------------------------------------------
// sm_90a: wgmma, mbarrier, cp.async.bulk.tensor, fence.proxy.async, setmaxnreg (llmc/wgmma.cuh).
//
// PTX ISA sections: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions" (wgmma,
// its "Matrix Descriptor Format", "Shared Memory Matrix Layout" and register fragments), "Parallel
// Synchronization and Communication Instructions: mbarrier", "Data Movement: cp.async.bulk.tensor",
// "membar/fence" (proxy fences), "setmaxnreg". What the emulator makes of them, stricter than a GPU
// where a GPU is undefined:
// - wgmma.* and setmaxnreg are warpgroup-collective: all 128 threads of the warpgroup at the same
//   line (kernel.cpp's warpgroup_collective), with the same descriptors, scale-d and immediates.
// - wgmma.mma_async computes its product when the warpgroup issues it (reading shared memory then)
//   but delivers it at the wgmma.wait_group that covers its group: until then each D register
//   holds a NaN (0x7FEDEAD0); a D register written by the program in between, shared memory read by
//   it changed before the wait, an issue with no wgmma.fence since the warpgroup's last
//   wait_group (or since the start), and groups never waited for at the end are errors. Chained
//   wgmmas into the same D (no access between them) take the pending value, as the ISA orders them.
// - Summation: D[i][j] starts from scale-d ? D : 0, then adds A[i][k]*B[k][j] for k = 0..15, fp32
//   rounding after each add (bf16 products are exact in fp32). A GPU's order is unspecified.
// - mbarrier: init (count 1 .. 2^20-1), arrive, arrive.expect_tx (tx-count at most 2^20-1),
//   try_wait.parity (true when the current phase's parity differs from the operand's). A try_wait
//   that finds its phase incomplete sleeps until it completes and then returns false (a GPU may
//   return false at any time: callers must loop). Arriving at a barrier with no pending arrivals,
//   a tx-count out of range, use before init, and a deadlock (a waiter nobody can release) are errors.
// - cp.async.bulk.tensor.2d (tile mode): the box is read from global memory at the issue, and its
//   bytes stay in flight (the destination holds 0xFF bytes) until no thread of the block can run;
//   then each copy completes its bytes on its mbarrier (complete_tx), and its bytes land only when
//   that mbarrier's phase completes. A wgmma or ldmatrix reading bytes in flight is an error; with
//   EMU_CHECK, any read of them, and a read of landed bytes by a thread that has not seen the phase
//   complete (its own try_wait, or a __syncthreads after another thread's), are named.
// - fence.proxy.async: with EMU_CHECK, a wgmma reading a shared word whose last generic store was
//   not followed by a fence.proxy.async of the storing thread is an error naming both lines. A
//   cp.async.bulk.tensor on an mbarrier whose initializing thread did not execute
//   fence.mbarrier_init (or fence.proxy.async) after the init is an error. With EMU_CHECK, that
//   store must also be ordered before a lane of each warp of the wgmma's warpgroup (a __syncthreads,
//   or an mbarrier phase carrying it: check.cpp's wgmma_read_ordered), else an error naming both.

static const uint32_t WGMMA_POISON = 0x7FEDEAD0u; // a quiet NaN: "not delivered yet"
static float wgmma_poison() {
    float f;
    memcpy(&f, &WGMMA_POISON, 4);
    return f;
}

struct PendingReg {
    float* p; // the thread's D register (a C++ lvalue of its own)
    float v;
};
struct MmaRec { // one wgmma.mma_async of a warpgroup, not yet waited for
    const void* pc;   // its code address: its line (and callers) for messages
    std::vector<PendingReg> regs;           // every thread's D registers and results
    std::vector<const uint16_t*> smem;      // the shared elements it read
    std::vector<uint16_t> vals;             // and their values then
};
struct WgState {
    bool fenced = false;
    Site last_wait{nullptr, 0};
    std::vector<MmaRec> open;
    std::deque<std::vector<MmaRec>> groups;
    std::map<float*, int> npending;  // per D register: pending results (open and committed)
    std::map<float*, float> latest;  // the last of them
};
struct Mbar {
    uint32_t count = 0, pending = 0, phase = 0; // phase: phases completed so far
    int64_t tx = 0;
    Site init_site{nullptr, 0};
    const void* init_pc = nullptr; // the init's code address (its line and callers, for messages)
    int init_thread = -1;
    bool fenced = false;
};
struct TmaCopy {
    uint64_t dst, mbar;
    unsigned char* dst_ptr;
    std::vector<unsigned char> image; // the box as it lands (swizzled)
    const void* pc;   // its code address: its line (and callers) for messages
    int thread;
    bool counted = false; // complete_tx done
};
struct TokenInfo { // the bytes of a landed copy: its mbarrier and the phase count that covers them
    uint64_t mbar;
    uint32_t phase;
    const void* pc;
    int thread;
};
struct HopperBlock {
    uint64_t block_serial = 0;
    int nthreads = 0;
    std::map<int, WgState> wg;
    std::map<uint64_t, Mbar> mbars;
    std::vector<TmaCopy> tma; // in flight
    std::vector<std::map<uint64_t, uint32_t>> observed; // per thread: mbarrier -> phases seen complete
    std::vector<TokenInfo> tokens;
};
static thread_local HopperBlock tl_h;

static HopperBlock& hopper(int* linear) {
    KernelThread kt;
    if (!current_kernel_thread(&kt)) { fatal("an sm_90a instruction ran outside a kernel"); }
    if (tl_h.block_serial != kt.block_serial) {
        tl_h = HopperBlock();
        tl_h.block_serial = kt.block_serial;
        tl_h.nthreads = kt.nthreads;
        tl_h.observed.assign(kt.nthreads, {});
    }
    if (linear) { *linear = kt.linear; }
    return tl_h;
}
static bool hopper_active() { // the running block has used sm_90a state
    KernelThread kt;
    return current_kernel_thread(&kt) && tl_h.block_serial == kt.block_serial;
}

static std::string shared_text(uint64_t off) { return "shared offset " + std::to_string(off); }

// ---- the shared-memory operand of a descriptor

struct Desc {
    uint64_t start, lbo, sbo;
    int swizzle, base_offset;
};
static Desc decode_desc(uint64_t d) {
    return Desc{(d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4, (int)((d >> 62) & 3),
                (int)((d >> 49) & 7)};
}
static uint64_t swizzled(uint64_t a, int mode) {
    switch (mode) {
    case 1: return a ^ (((a >> 7) & 7) << 4);
    case 2: return a ^ (((a >> 7) & 3) << 4);
    case 3: return a ^ (((a >> 7) & 1) << 4);
    }
    return a;
}
static int swizzle_width(int mode) { return mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0; }

// The shared byte address of element (x, k) of an operand (x: m for A, n for B; k 0..15), per the
// canonical layouts (llmc/wgmma.cuh spells them out): K-major (trans 0) or MN-major (trans 1).
static uint64_t operand_addr(const Desc& d, bool mn_major, int x, int k) {
    uint64_t a;
    int W = swizzle_width(d.swizzle);
    if (!mn_major) {
        a = W == 0 ? d.start + (x % 8) * 16 + (x / 8) * d.sbo + (k % 8) * 2 + (k / 8) * d.lbo
                   : d.start + (uint64_t)(x % 8) * W + (x / 8) * d.sbo + k * 2;
    } else {
        a = W == 0 ? d.start + (x % 8) * 2 + (x / 8) * d.sbo + (k % 8) * 16 + (k / 8) * d.lbo
                   : d.start + (uint64_t)(x % (W / 2)) * 2 + (x / (W / 2)) * d.lbo + (k % 8) * W + (k / 8) * d.sbo;
    }
    return swizzled(a, d.swizzle);
}

static const TmaCopy* tma_at(uint64_t off, size_t n) {
    for (const TmaCopy& c : tl_h.tma) {
        if (overlap(c.dst, c.image.size(), off, n)) { return &c; }
    }
    return nullptr;
}

struct WgmmaLane {
    int n;
    uint64_t desc_a, desc_b;
    bool rs;
    uint32_t a[4];
    int scale_d, scale_a, scale_b, trans_a, trans_b;
    float* const* dp;
    const float* din;
    float* dout;
    const void* pc;
    Site site;
};

// Reads the 16 x `rows` operand (element (x, k) into M[x][k]) from shared memory, with its checks.
static void read_operand(MmaRec& rec, const Desc& d, bool mn_major, int rows, std::vector<float>& M, const char* which,
                         const std::string& where, int reader, const void* pc, Site site) {
    if (d.base_offset != 0) {
        fatal("%s: the %s descriptor has base offset %d (bits 49-51): the emulator supports 0 only (tiles at a multiple of "
              "the swizzle's repeat)", where.c_str(), which, d.base_offset);
    }
    for (int x = 0; x < rows; x++) {
        for (int k = 0; k < 16; k++) {
            uint64_t a = operand_addr(d, mn_major, x, k);
            const uint16_t* p = (const uint16_t*)shared_window_pointer(a, 2);
            if (p == nullptr || a % 2 != 0) {
                fatal("%s: element (%d, %d) of %s lies at %s, which is not in this block's shared memory (descriptor: "
                      "start %llu, LBO %llu, SBO %llu, swizzle %d)",
                      where.c_str(), x, k, which, shared_text(a).c_str(), (unsigned long long)d.start,
                      (unsigned long long)d.lbo, (unsigned long long)d.sbo, d.swizzle);
            }
            if (const TmaCopy* c = tma_at(a, 2)) {
                fatal("%s: %s reads %s, whose bytes the cp.async.bulk.tensor issued at %s by thread %d have not landed "
                      "(its mbarrier phase has not completed: a missing mbarrier wait?)",
                      where.c_str(), which, shared_text(a).c_str(), source_line(c->pc).c_str(), c->thread);
            }
            if (const Copy* c = copy_in_flight(a, 2)) {
                fatal("%s: %s reads %s, whose bytes the cp.async issued at %s by thread %d have not landed", where.c_str(),
                      which, shared_text(a).c_str(), source_line(c->pc).c_str(), c->thread);
            }
            M[x * 16 + k] = bf16_bits_to_float(*p);
            rec.smem.push_back(p);
            rec.vals.push_back(*p);
            // EMU_CHECK: the async proxy's read (K-major: the 16 contiguous bytes of 8 k; MN-major: per element)
            if (mn_major) {
                check_async_read(reader, p, 2, pc, which, site);
            } else if (k % 8 == 0) {
                check_async_read(reader, p, 16, pc, which, site);
            }
        }
    }
}

static const char* wgmma_name(int n) {
    static std::vector<std::string> names = [] {
        std::vector<std::string> v(33);
        for (int i = 1; i <= 32; i++) { v[i] = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(8 * i) + "k16.f32.bf16.bf16"; }
        return v;
    }();
    return names[n / 8].c_str();
}

static void wgmma_run(void* const lanes[128], int wg, const std::string& where) {
    const WgmmaLane* L = (const WgmmaLane*)lanes[0];
    int n = L->n;
    for (int i = 1; i < 128; i++) {
        const WgmmaLane* o = (const WgmmaLane*)lanes[i];
        if (o->desc_a != L->desc_a || o->desc_b != L->desc_b || (o->scale_d != 0) != (L->scale_d != 0) ||
            o->scale_a != L->scale_a || o->scale_b != L->scale_b || o->trans_a != L->trans_a || o->trans_b != L->trans_b) {
            fatal("%s: the operands are not warpgroup-uniform: thread %d of the warpgroup has descriptors 0x%llx, 0x%llx "
                  "and scale-d %d, thread 0 0x%llx, 0x%llx and %d",
                  where.c_str(), i, (unsigned long long)o->desc_a, (unsigned long long)o->desc_b, o->scale_d,
                  (unsigned long long)L->desc_a, (unsigned long long)L->desc_b, L->scale_d);
        }
    }
    int linear0 = 0;
    HopperBlock& h = hopper(&linear0);
    WgState& s = h.wg[wg];
    if (!s.fenced) {
        fatal("%s: no wgmma.fence since %s (the ISA requires one before the first wgmma.mma_async and between any other "
              "access of its registers and the wgmma; the emulator asks for one after every wgmma.wait_group)",
              where.c_str(), s.last_wait.file ? ("the warpgroup's last wgmma.wait_group at " + site_str(s.last_wait)).c_str()
                                              : "the kernel's start");
    }
    int reader = wg * 128;
    MmaRec rec;
    rec.pc = L->pc;
    std::vector<float> A(64 * 16), B((size_t)n * 16); // A[m][k], B[n][k]
    if (L->rs) {
        for (int tid = 0; tid < 128; tid++) {
            const WgmmaLane* l = (const WgmmaLane*)lanes[tid];
            int w = tid / 32, g = (tid % 32) / 4, q = tid % 4;
            for (int e = 0; e < 8; e++) {
                int row = 16 * w + g + 8 * ((e / 2) % 2), col = 2 * q + e % 2 + 8 * (e / 4);
                uint32_t reg = l->a[e / 2];
                A[row * 16 + col] = bf16_bits_to_float((uint16_t)(e % 2 ? reg >> 16 : reg & 0xffff));
            }
        }
    } else {
        read_operand(rec, decode_desc(L->desc_a), L->trans_a != 0, 64, A, "A", where, reader, L->pc, L->site);
    }
    read_operand(rec, decode_desc(L->desc_b), L->trans_b != 0, n, B, "B", where, reader, L->pc, L->site);
    if (L->scale_a < 0) { for (float& v : A) { v = -v; } }
    if (L->scale_b < 0) { for (float& v : B) { v = -v; } }
    float poison = wgmma_poison();
    for (int tid = 0; tid < 128; tid++) {
        const WgmmaLane* l = (const WgmmaLane*)lanes[tid];
        int w = tid / 32, g = (tid % 32) / 4, q = tid % 4;
        for (int e = 0; e < n / 2; e++) {
            int row = 16 * w + g + 8 * ((e / 2) % 2), col = 8 * (e / 4) + 2 * q + e % 2;
            float* p = l->dp[e];
            float acc = 0.0f;
            if (L->scale_d) {
                auto it = s.latest.find(p);
                acc = it != s.latest.end() ? it->second : l->din[e];
            }
            for (int k = 0; k < 16; k++) { acc += A[row * 16 + k] * B[(size_t)col * 16 + k]; }
            rec.regs.push_back(PendingReg{p, acc});
            s.npending[p]++;
            s.latest[p] = acc;
            l->dout[e] = poison;
        }
    }
    s.open.push_back(std::move(rec));
    uint64_t flops = 2ull * 64 * (uint64_t)n * 16;
    if (PtxCounters* c = current_launch_counters()) {
        c->wgmma++;
        c->wgmma_flops += flops;
    }
    count_wgmma(flops, 0);
}

void ptx_wgmma(int n, uint64_t desc_a, const uint32_t* a, uint64_t desc_b, bool scale_d, int scale_a, int scale_b,
               int trans_a, int trans_b, float* const* dp, const float* din, float* dout, Site site) {
    WgmmaLane lane{n, desc_a, desc_b, a != nullptr, {0, 0, 0, 0}, scale_d ? 1 : 0, scale_a, scale_b, trans_a, trans_b,
                   dp, din, dout, __builtin_return_address(0), site};
    if (a) { memcpy(lane.a, a, 16); }
    warpgroup_collective(wgmma_name(n), &lane, wgmma_run, site, lane.pc);
}

static void wgmma_fence_run(void* const lanes[128], int wg, const std::string&) {
    (void)lanes;
    hopper(nullptr).wg[wg].fenced = true;
}
void ptx_wgmma_fence(Site site) {
    warpgroup_collective("wgmma.fence.sync.aligned", nullptr, wgmma_fence_run, site, __builtin_return_address(0));
}

static void wgmma_commit_run(void* const lanes[128], int wg, const std::string&) {
    (void)lanes;
    WgState& s = hopper(nullptr).wg[wg];
    s.groups.push_back(std::move(s.open));
    s.open.clear();
}
void ptx_wgmma_commit_group(Site site) {
    warpgroup_collective("wgmma.commit_group.sync.aligned", nullptr, wgmma_commit_run, site, __builtin_return_address(0));
}

struct WaitLane {
    long long n;
    Site site;
};
static void wgmma_wait_run(void* const lanes[128], int wg, const std::string& where) {
    const WaitLane* L = (const WaitLane*)lanes[0];
    WgState& s = hopper(nullptr).wg[wg];
    while ((long long)s.groups.size() > L->n) {
        for (MmaRec& r : s.groups.front()) {
            for (size_t i = 0; i < r.smem.size(); i++) {
                if (*r.smem[i] != r.vals[i]) {
                    uint64_t off = 0;
                    shared_window_offset(r.smem[i], 2, &off);
                    fatal("%s: the shared memory that the wgmma.mma_async at %s reads (%s) changed before this "
                          "wgmma.wait_group (undefined on a GPU: the async proxy may read it until then)",
                          where.c_str(), source_line(r.pc).c_str(), shared_text(off).c_str());
                }
            }
            for (const PendingReg& pr : r.regs) {
                int left = --s.npending[pr.p];
                if (left > 0) { continue; } // a later wgmma of this warpgroup delivers into it
                uint32_t bits;
                memcpy(&bits, pr.p, 4);
                if (bits != WGMMA_POISON) {
                    fatal("%s: an accumulator register of the wgmma.mma_async at %s was written by the program before "
                          "this wgmma.wait_group (undefined on a GPU)",
                          where.c_str(), source_line(r.pc).c_str());
                }
                *pr.p = s.latest[pr.p];
                s.npending.erase(pr.p);
                s.latest.erase(pr.p);
            }
        }
        s.groups.pop_front();
    }
    s.fenced = false;
    s.last_wait = L->site;
}
void ptx_wgmma_wait_group(long long n, Site site) {
    if (n < 0 || n > 7) {
        fatal("%s: wgmma.wait_group %lld at %s: N is 0 .. 7", who().c_str(), n, site_str(site).c_str());
    }
    WaitLane lane{n, site};
    warpgroup_collective("wgmma.wait_group.sync.aligned", &lane, wgmma_wait_run, site, __builtin_return_address(0));
}

struct SetmaxnregLane {
    bool inc;
    long long r;
};
static void setmaxnreg_run(void* const lanes[128], int, const std::string& where) {
    const SetmaxnregLane* L = (const SetmaxnregLane*)lanes[0];
    for (int i = 0; i < 128; i++) {
        const SetmaxnregLane* o = (const SetmaxnregLane*)lanes[i];
        if (o->inc != L->inc || o->r != L->r) {
            fatal("%s: not warpgroup-uniform: thread %d of the warpgroup asks for %s %lld, thread 0 for %s %lld", where.c_str(),
                  i, o->inc ? "inc" : "dec", o->r, L->inc ? "inc" : "dec", L->r);
        }
    }
}
void ptx_setmaxnreg(bool inc, long long r, Site site) {
    if (r < 24 || r > 256 || r % 8 != 0) {
        fatal("%s: setmaxnreg %lld at %s: 24 .. 256, a multiple of 8", who().c_str(), r, site_str(site).c_str());
    }
    SetmaxnregLane lane{inc, r};
    warpgroup_collective(inc ? "setmaxnreg.inc.sync.aligned.u32" : "setmaxnreg.dec.sync.aligned.u32", &lane,
                         setmaxnreg_run, site, __builtin_return_address(0));
}

// ---- fences

// %globaltimer (PTX ISA "Special Registers"): a nanosecond timer; here the host's steady clock
uint64_t ptx_globaltimer() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void ptx_fence_proxy_async(Site site) {
    (void)site;
    int linear = 0;
    HopperBlock& h = hopper(&linear);
    for (auto& kv : h.mbars) {
        if (kv.second.init_thread == linear) { kv.second.fenced = true; }
    }
    check_proxy_fence(linear);
}

void ptx_fence_mbarrier_init(Site site) {
    (void)site;
    int linear = 0;
    HopperBlock& h = hopper(&linear);
    for (auto& kv : h.mbars) {
        if (kv.second.init_thread == linear) { kv.second.fenced = true; }
    }
}

// ---- mbarrier

static const int64_t TX_MAX = (1 << 20) - 1;

static Mbar& mbar_at(HopperBlock& h, uint64_t addr, const char* op, Site site) {
    auto it = h.mbars.find(addr);
    if (it == h.mbars.end()) {
        fatal("%s: %s at %s on %s, which no mbarrier.init of this block initialized", who().c_str(), op,
              site_str(site).c_str(), shared_text(addr).c_str());
    }
    return it->second;
}

std::string ptx_mbar_describe(uint64_t addr) {
    auto it = tl_h.mbars.find(addr);
    if (it == tl_h.mbars.end()) { return "not initialized"; }
    const Mbar& m = it->second;
    char s[256];
    snprintf(s, sizeof(s), "initialized at %s with count %u; phase %u, %u arrivals pending, tx-count %lld",
             m.init_pc ? source_line(m.init_pc).c_str() : site_str(m.init_site).c_str(), m.count, m.phase, m.pending, (long long)m.tx);
    return s;
}

// The phase completes: the copies whose bytes it waited for land now.
static void mbar_complete(HopperBlock& h, uint64_t addr, Mbar& m) {
    check_mbar_complete(addr);
    m.phase++;
    m.pending = m.count;
    m.tx = 0;
    for (size_t i = 0; i < h.tma.size();) {
        TmaCopy& c = h.tma[i];
        if (c.mbar != addr || !c.counted) {
            i++;
            continue;
        }
        memcpy(c.dst_ptr, c.image.data(), c.image.size());
        h.tokens.push_back(TokenInfo{addr, m.phase, c.pc, c.thread});
        check_async_write(c.dst_ptr, c.image.size(), (uint32_t)h.tokens.size());
        h.tma.erase(h.tma.begin() + (long)i);
    }
}

void ptx_mbar_init(uint64_t addr, uint32_t count, Site site) {
    int linear = 0;
    HopperBlock& h = hopper(&linear);
    void* p = shared_window_pointer(addr, 8);
    if (p == nullptr || addr % 8 != 0) {
        fatal("%s: mbarrier.init at %s: %s is not an 8-byte aligned object in this block's shared memory", who().c_str(),
              site_str(site).c_str(), shared_text(addr).c_str());
    }
    if (count < 1 || count > TX_MAX) {
        fatal("%s: mbarrier.init at %s: count %u (1 .. 2^20-1)", who().c_str(), site_str(site).c_str(), count);
    }
    for (const TmaCopy& c : h.tma) {
        if (c.mbar == addr) {
            fatal("%s: mbarrier.init at %s re-initializes the mbarrier at %s while the cp.async.bulk.tensor issued at %s "
                  "completes on it", who().c_str(), site_str(site).c_str(), shared_text(addr).c_str(), source_line(c.pc).c_str());
        }
    }
    Mbar m;
    m.count = m.pending = count;
    m.init_site = site;
    m.init_pc = __builtin_return_address(0);
    m.init_thread = linear;
    h.mbars[addr] = m;
    uint64_t word = count; // what the object holds is the hardware's business: something defined
    memcpy(p, &word, 8);
    check_async_write(p, 8, 0);
}

uint64_t ptx_mbar_arrive(uint64_t addr, uint32_t tx, bool expect_tx, Site site) {
    int linear = 0;
    HopperBlock& h = hopper(&linear);
    const char* op = expect_tx ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive";
    Mbar& m = mbar_at(h, addr, op, site);
    if (expect_tx) {
        m.tx += tx;
        if (m.tx > TX_MAX) {
            fatal("%s: %s at %s: the tx-count of the mbarrier at %s overflows (%lld > 2^20-1; %s)", who().c_str(), op,
                  site_str(site).c_str(), shared_text(addr).c_str(), (long long)m.tx, ptx_mbar_describe(addr).c_str());
        }
    }
    if (m.pending == 0) {
        fatal("%s: %s at %s: the mbarrier at %s has no pending arrival left in phase %u (more arrivals than its count %u; "
              "undefined)", who().c_str(), op, site_str(site).c_str(), shared_text(addr).c_str(), m.phase, m.count);
    }
    uint64_t state = m.phase;
    check_mbar_arrive(linear, addr);
    m.pending--;
    if (m.pending == 0 && m.tx == 0) { mbar_complete(h, addr, m); }
    return state;
}

bool ptx_mbar_ready(uint64_t addr, uint32_t parity) {
    auto it = tl_h.mbars.find(addr);
    return it != tl_h.mbars.end() && (it->second.phase & 1) != (parity & 1);
}

bool ptx_mbar_try_wait_parity(uint64_t addr, uint32_t parity, Site site) {
    int linear = 0;
    HopperBlock& h = hopper(&linear);
    Mbar& m = mbar_at(h, addr, "mbarrier.try_wait.parity", site);
    if ((m.phase & 1) != (parity & 1)) {
        uint32_t& seen = h.observed[linear][addr];
        if (seen < m.phase) { seen = m.phase; }
        check_mbar_observe(linear, addr);
        return true;
    }
    mbarrier_block(addr, parity, site, __builtin_return_address(0)); // until the phase completes; then false, as a GPU's timeout may answer
    return false;
}

// ---- cp.async.bulk.tensor and the tensor map (cuTensorMapEncodeTiled, runtime side below)

struct EmuTensorMap { // what our cuTensorMapEncodeTiled writes into the 128-byte CUtensorMap
    uint64_t magic;
    uint64_t global;
    uint32_t rank, elem_bytes, swizzle_bytes, nan_fill;
    uint64_t dims[5], strides[5]; // strides[0] = elem_bytes; strides[i] in bytes
    uint16_t box[5];              // 1 .. 256
    uint16_t dtype;
};
static const uint64_t TENSOR_MAP_MAGIC = 0x454d5554454e534dull; // "EMUTENSM"
static_assert(sizeof(EmuTensorMap) <= 128, "the emulator's tensor map fits a CUtensorMap");

void ptx_tma_load_2d(uint64_t dst, uint64_t map_addr, int32_t x, int32_t y, uint64_t mbar, Site site) {
    int linear = 0;
    HopperBlock& h = hopper(&linear);
    const char* op = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes";
    EmuTensorMap map;
    memcpy(&map, (const void*)(uintptr_t)map_addr, sizeof(map));
    if (map.magic != TENSOR_MAP_MAGIC) {
        fatal("%s: %s at %s: the tensor map at %p was not made by cuTensorMapEncodeTiled (pass the map as a "
              "const __grid_constant__ CUtensorMap kernel parameter and its address)",
              who().c_str(), op, site_str(site).c_str(), (void*)(uintptr_t)map_addr);
    }
    if (map.rank != 2) {
        fatal("%s: %s at %s: the tensor map has rank %u, the instruction .2d", who().c_str(), op, site_str(site).c_str(), map.rank);
    }
    Mbar& m = mbar_at(h, mbar, op, site);
    if (!m.fenced) {
        fatal("%s: %s at %s completes on the mbarrier at %s, initialized at %s by thread %d without a "
              "fence.mbarrier_init.release.cluster (or fence.proxy.async) after it: the async proxy may not see the init",
              who().c_str(), op, source_line(__builtin_return_address(0)).c_str(), shared_text(mbar).c_str(),
              source_line(m.init_pc).c_str(), m.init_thread);
    }
    uint32_t es = map.elem_bytes, bc = map.box[0], br = map.box[1], inner = bc * es, W = map.swizzle_bytes;
    size_t bytes = (size_t)inner * br;
    if (dst % 128 != 0) {
        fatal("%s: %s at %s: the shared destination %s is not 128-byte aligned", who().c_str(), op, site_str(site).c_str(),
              shared_text(dst).c_str());
    }
    unsigned char* dst_ptr = (unsigned char*)shared_window_pointer(dst, bytes);
    if (dst_ptr == nullptr) {
        fatal("%s: %s at %s: the box's %zu bytes at %s are not inside one shared variable of this block", who().c_str(), op,
              site_str(site).c_str(), bytes, shared_text(dst).c_str());
    }
    for (const TmaCopy& c : h.tma) {
        if (overlap(c.dst, c.image.size(), dst, bytes)) {
            fatal("%s: %s at %s writes %s, which the copy issued at %s (thread %d) still has in flight (no order between them)",
                  who().c_str(), op, site_str(site).c_str(), shared_text(dst).c_str(), source_line(c.pc).c_str(), c.thread);
        }
    }
    TmaCopy c;
    c.dst = dst, c.mbar = mbar, c.dst_ptr = dst_ptr, c.pc = __builtin_return_address(0), c.thread = linear;
    c.image.assign(bytes, 0);
    const void* pc = __builtin_return_address(0);
    unsigned char fill[8];
    memset(fill, 0, sizeof(fill));
    if (map.nan_fill) { memset(fill, 0xFF, sizeof(fill)); } // a NaN of the float types
    for (uint32_t r = 0; r < br; r++) {
        int64_t row = (int64_t)y + r;
        bool row_in = row >= 0 && (uint64_t)row < map.dims[1];
        // the row's in-bounds columns, one global read
        int64_t c0 = std::max<int64_t>(x, 0), c1 = std::min<int64_t>((int64_t)x + bc, (int64_t)map.dims[0]);
        const unsigned char* src = nullptr;
        if (row_in && c1 > c0) {
            src = (const unsigned char*)(uintptr_t)(map.global + (uint64_t)row * map.strides[1] + (uint64_t)c0 * es);
            bool freed = false;
            size_t n = (size_t)(c1 - c0) * es;
            if (!device_range_in_kernel(src, n, &freed)) {
                fatal("%s: %s at %s: row %lld of the tensor [%p, +%zu bytes) is not inside a device allocation%s",
                      who().c_str(), op, site_str(site).c_str(), (long long)row, (const void*)src, n, freed ? " (freed)" : "");
            }
            check_ptx_access(linear, src, n, false, pc);
        }
        for (uint32_t col = 0; col < bc; col++) {
            int64_t gc = (int64_t)x + col;
            uint64_t o = (uint64_t)r * inner + (uint64_t)col * es;
            uint64_t phys = W ? swizzled(dst + o, W == 128 ? 1 : W == 64 ? 2 : 3) - dst : o;
            if (row_in && gc >= c0 && gc < c1) {
                memcpy(&c.image[phys], src + (gc - c0) * es, es);
            } else {
                memcpy(&c.image[phys], fill, es);
            }
        }
    }
    memset(dst_ptr, 0xFF, bytes); // in flight
    h.tma.push_back(std::move(c));
    if (PtxCounters* counters = current_launch_counters()) {
        counters->tma++;
        counters->tma_bytes += bytes;
    }
    count_wgmma(0, bytes);
}

// No thread can run: every copy in flight completes its bytes on its mbarrier.
void ptx_block_idle() {
    if (!hopper_active()) { return; }
    HopperBlock& h = tl_h;
    std::vector<uint64_t> touched;
    for (TmaCopy& c : h.tma) {
        if (c.counted) { continue; }
        c.counted = true;
        Mbar& m = h.mbars[c.mbar];
        m.tx -= (int64_t)c.image.size();
        if (m.tx < -TX_MAX || (m.pending == 0 && m.tx < 0)) {
            fatal("%s: the cp.async.bulk.tensor issued at %s by thread %d brings %zu bytes to the mbarrier at %s, more than "
                  "its arrive.expect_tx announced: tx-count underflow (%s)",
                  current_block_text().c_str(), source_line(c.pc).c_str(),
                  c.thread, c.image.size(), shared_text(c.mbar).c_str(), ptx_mbar_describe(c.mbar).c_str());
        }
        touched.push_back(c.mbar);
    }
    for (uint64_t a : touched) {
        Mbar& m = h.mbars[a];
        if (m.pending == 0 && m.tx == 0) { mbar_complete(h, a, m); }
    }
}

void ptx_block_barrier() {
    if (!hopper_active() || tl_h.mbars.empty()) { return; }
    std::map<uint64_t, uint32_t> all;
    for (auto& o : tl_h.observed) {
        for (auto& kv : o) { all[kv.first] = std::max(all[kv.first], kv.second); }
    }
    for (auto& o : tl_h.observed) { o = all; }
}

void ptx_block_end() {
    if (!hopper_active()) { return; }
    std::string block = current_block_text();
    for (auto& kv : tl_h.wg) {
        const WgState& s = kv.second;
        const MmaRec* r = !s.open.empty() ? &s.open.front() : !s.groups.empty() && !s.groups.front().empty() ? &s.groups.front().front() : nullptr;
        if (r != nullptr) {
            fatal("%s: warpgroup %d ended with the wgmma.mma_async at %s not waited for (no wgmma.wait_group "
                  "covering it; its results were never delivered)", block.c_str(), kv.first, source_line(r->pc).c_str());
        }
    }
    if (!tl_h.tma.empty()) {
        const TmaCopy& c = tl_h.tma.front();
        fatal("%s ended with the cp.async.bulk.tensor issued at %s by thread %d in flight (its mbarrier at %s never "
              "completed the phase: %s)", block.c_str(), source_line(c.pc).c_str(), c.thread, shared_text(c.mbar).c_str(),
              ptx_mbar_describe(c.mbar).c_str());
    }
    tl_h = HopperBlock();
}

bool tma_token_seen(int linear, uint32_t token, std::string* what) {
    if (token == 0 || !hopper_active() || token > tl_h.tokens.size() || linear < 0 || linear >= (int)tl_h.observed.size()) {
        return true;
    }
    const TokenInfo& t = tl_h.tokens[token - 1];
    auto it = tl_h.observed[linear].find(t.mbar);
    if (it != tl_h.observed[linear].end() && it->second >= t.phase) { return true; }
    *what = "the cp.async.bulk.tensor issued at " + source_line(t.pc) + " by thread " + std::to_string(t.thread) +
            " brought them, completing phase " + std::to_string(t.phase - 1) + " of the mbarrier at " + shared_text(t.mbar) +
            ", and this thread has not seen that phase complete (no mbarrier.try_wait returning true for it, nor a "
            "__syncthreads after another thread's)";
    return false;
}

bool tma_in_flight(const void* p, size_t n, std::string* what) {
    if (tl_h.tma.empty() || !hopper_active()) { return false; }
    uint64_t off = 0;
    if (!shared_window_offset(p, n, &off)) { return false; }
    const TmaCopy* c = tma_at(off, n);
    if (c == nullptr) { return false; }
    *what = "the cp.async.bulk.tensor issued at " + source_line(c->pc) + " by thread " + std::to_string(c->thread) +
            " has not landed them (its mbarrier phase has not completed: a missing mbarrier wait?)";
    return true;
}

} // namespace emu

// ----------------------------------------------------------------------------
// the driver's cuTensorMapEncodeTiled, reached through cudaGetDriverEntryPointByVersion (rank 1-5
// encoded with the driver's checks; the emulator's copy instruction is .2d)

#include <cuda.h>

namespace emu {
static CUresult encode_fail(const char* why) {
    fprintf(stderr, "cuda-emu: cuTensorMapEncodeTiled: %s (CUDA_ERROR_INVALID_VALUE)\n", why);
    return CUDA_ERROR_INVALID_VALUE;
}
} // namespace emu

extern "C" CUresult emu_cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType type, cuuint32_t rank,
                                               void* global, const cuuint64_t* dims, const cuuint64_t* strides,
                                               const cuuint32_t* box, const cuuint32_t* estrides,
                                               CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                               CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    using namespace emu;
    (void)l2;
    uint32_t es = 0;
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: es = 1; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16: case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: es = 2; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32: case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: es = 4; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64: case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: es = 8; break;
    default: return encode_fail("a data type the emulator does not have (8, 16, 32, 64-bit integers and floats)");
    }
    if (tensorMap == nullptr || ((uintptr_t)tensorMap % 64) != 0) { return encode_fail("the CUtensorMap must be 64-byte aligned"); }
    if (rank < 1 || rank > 5) { return encode_fail("tensorRank must be 1 .. 5"); }
    if ((uintptr_t)global % 16 != 0) { return encode_fail("globalAddress must be 16-byte aligned"); }
    if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) { return encode_fail("interleaved layouts are not in the emulator"); }
    uint32_t W = swizzle == CU_TENSOR_MAP_SWIZZLE_NONE ? 0 : swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32
               : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64 : swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 128 : 1;
    if (W == 1) { return encode_fail("a swizzle mode the emulator does not have (none, 32B, 64B, 128B)"); }
    EmuTensorMap m;
    memset(&m, 0, sizeof(m));
    m.magic = TENSOR_MAP_MAGIC;
    m.global = (uint64_t)(uintptr_t)global;
    m.rank = rank;
    m.elem_bytes = es;
    m.swizzle_bytes = W;
    m.dtype = (uint16_t)type;
    m.nan_fill = oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    if (m.nan_fill && (type != CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && type != CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 &&
                       type != CU_TENSOR_MAP_DATA_TYPE_FLOAT32 && type != CU_TENSOR_MAP_DATA_TYPE_FLOAT64)) {
        return encode_fail("NaN out-of-bounds fill needs a floating-point type");
    }
    m.strides[0] = es;
    for (cuuint32_t i = 0; i < rank; i++) {
        if (dims[i] == 0 || dims[i] > (1ull << 32)) { return encode_fail("globalDim[i] must be 1 .. 2^32"); }
        if (box[i] == 0 || box[i] > 256) { return encode_fail("boxDim[i] must be 1 .. 256"); }
        if (estrides != nullptr && estrides[i] != 1) { return encode_fail("elementStrides other than 1 are not in the emulator"); }
        m.dims[i] = dims[i];
        m.box[i] = (uint16_t)box[i];
        if (i > 0) {
            uint64_t s = strides[i - 1];
            if (s % 16 != 0 || s >= (1ull << 40)) { return encode_fail("globalStrides must be multiples of 16 below 2^40"); }
            m.strides[i] = s;
        }
    }
    if ((box[0] * es) % 16 != 0) { return encode_fail("boxDim[0] * the element size must be a multiple of 16 bytes"); }
    if (W != 0 && box[0] * es != W) {
        return encode_fail("with a swizzle, the emulator needs boxDim[0] * the element size equal to the swizzle width "
                           "(a GPU allows it smaller)");
    }
    memset(tensorMap, 0, sizeof(*tensorMap));
    memcpy(tensorMap, &m, sizeof(m));
    return CUDA_SUCCESS;
}

// the same, for a program linked against the driver (-lcuda) that calls it by name
extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType type, cuuint32_t rank, void* global,
                                           const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                           const cuuint32_t* estrides, CUtensorMapInterleave interleave,
                                           CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                           CUtensorMapFloatOOBfill oob) {
    return emu_cuTensorMapEncodeTiled(tensorMap, type, rank, global, dims, strides, box, estrides, interleave, swizzle, l2, oob);
}
