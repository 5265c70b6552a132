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
                  who().c_str(), site_str(c.site).c_str(), site_str(wait_site).c_str());
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

} // namespace emu
