/*
The CUDA emulator's cooperative_groups.h. nvcc-cpu puts this folder before the toolkit's headers,
so `#include <cooperative_groups.h>` finds this file: the toolkit's own is device code that g++
cannot compile. It implements the part of the documented API (CUDA Programming Guide, "Cooperative
Groups") that our kernels and the usual fast kernels use, on the emulator's barrier and warp
intrinsics, so their rules are checked the same way:

  thread_block  this_thread_block()   sync, thread_rank, num_threads/size, group_index,
                                      thread_index, dim_threads/group_dim
  thread_block_tile<N, Parent>        tiled_partition<N>(block or tile), N = 1, 2, 4, ..., 32:
                                      sync, thread_rank, num_threads/size, meta_group_rank,
                                      meta_group_size, shfl, shfl_up, shfl_down, shfl_xor, any,
                                      all, ballot
  thread_group                        what the two above convert to: sync, thread_rank, num_threads
  cg::sync(group)
  cooperative_groups/reduce.h         cg::reduce(tile, value, op), op plus, less, greater, bit_and,
                                      bit_or, bit_xor (or any callable)

Rules checked (each with the caller's line): every thread of a tile must take part in its
collectives (they are the warp intrinsics, with the tile's lanes as the mask: a lane that exited
or waits elsewhere is an error); thread_block::sync is __syncthreads; tiled_partition needs a
parent whose size is a multiple of N (a block of 48 threads cannot be cut in tiles of 32).
Not here (they do not build): tiles larger than 32, coalesced_threads(), this_grid(), clusters,
labeled/binary partitions, memcpy_async, scans, match_any/match_all, barrier_arrive/wait.
*/
#ifndef EMU_COOPERATIVE_GROUPS_H
#define EMU_COOPERATIVE_GROUPS_H

#ifndef EMU_DEVICE_H
#error "this is the CUDA emulator's cooperative_groups.h: build with dev/cuda/emu/nvcc-cpu"
#endif

#include <stdio.h>
#include <string.h>
#include <type_traits>

namespace cooperative_groups {

namespace details {

// the calling thread's rank in its block, the block's size
inline unsigned block_rank() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline unsigned block_size() { return blockDim.x * blockDim.y * blockDim.z; }

// The lanes of the calling thread's tile of `size` threads, as a warp mask: tiles are runs of
// consecutive ranks, so a tile of at most 32 lies inside one warp.
inline unsigned tile_mask(unsigned size) {
    unsigned lane = block_rank() % 32, first = lane & ~(size - 1);
    return (size == 32 ? 0xffffffffu : ((1u << size) - 1)) << first;
}

// A shuffle among a tile's lanes. The guide allows any trivially copyable type up to 32 bytes;
// the emulator's shuffle moves 16, so a larger value goes in two halves (both lanes do both).
template <typename T> inline T shuffle(emu::WarpKind kind, unsigned mask, const T& var, int arg, int width, emu::Site site) {
    static_assert(std::is_trivially_copyable<T>::value, "cooperative groups shuffle a trivially copyable type");
    static_assert(sizeof(T) <= 32, "cooperative groups shuffle at most 32 bytes");
    unsigned char in[32] = {0}, out[32];
    memcpy(in, &var, sizeof(T));
    for (size_t at = 0; at < sizeof(T); at += 16) {
        size_t n = sizeof(T) - at < 16 ? sizeof(T) - at : 16;
        emu::warp_op(kind, mask, in + at, out + at, n, arg, width, site);
    }
    T result;
    memcpy(&result, out, sizeof(T));
    return result;
}

inline unsigned vote(emu::WarpKind kind, unsigned mask, int pred, emu::Site site) {
    int p = pred != 0, r = 0;
    return emu::warp_op(kind, mask, &p, &r, sizeof(int), 0, 32, site);
}

[[noreturn]] inline void partition_error(unsigned parent, unsigned size, emu::Site site) {
    char text[160];
    snprintf(text, sizeof(text), "tiled_partition<%u> of a group of %u threads: the size must be a multiple of %u",
             size, parent, size);
    emu::device_error(text, site);
}

} // namespace details

// ---------------------------------------------------------------------------------------------
// thread_group: the generic handle (a whole block, or a tile of `size` threads)

class thread_group {
  public:
    unsigned long long num_threads() const { return size_; }
    unsigned long long size() const { return size_; }
    unsigned long long thread_rank() const { return tile_ ? details::block_rank() % size_ : details::block_rank(); }
    void sync(const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        if (tile_) {
            emu::syncwarp(details::tile_mask(size_), emu::Site{f, l});
        } else {
            emu::syncthreads(emu::Site{f, l});
        }
    }

  protected:
    thread_group(unsigned size, bool tile) : size_(size), tile_(tile) {}
    unsigned size_;
    bool tile_;
};

// ---------------------------------------------------------------------------------------------
// thread_block: the calling thread's block

class thread_block : public thread_group {
  public:
    static void sync(const char* f = __builtin_FILE(), int l = __builtin_LINE()) { emu::syncthreads(emu::Site{f, l}); }
    static unsigned int thread_rank() { return details::block_rank(); }
    static unsigned int num_threads() { return details::block_size(); }
    static unsigned int size() { return details::block_size(); }
    static dim3 group_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    static dim3 thread_index() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    static dim3 dim_threads() { return blockDim; }
    static dim3 group_dim() { return blockDim; }

  private:
    thread_block() : thread_group(details::block_size(), false) {}
    friend thread_block this_thread_block();
};

inline thread_block this_thread_block() { return thread_block(); }

// ---------------------------------------------------------------------------------------------
// thread_block_tile<Size, ParentT>: Size consecutive threads (by thread_rank) of the parent;
// ParentT = void keeps the parent out of the type, as the guide's thread_block_tile<32> does

template <unsigned int Size, typename ParentT = void> class thread_block_tile;

template <unsigned int Size> class thread_block_tile<Size, void> : public thread_group {
    static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0,
                  "thread_block_tile: the emulator has tiles of 1, 2, 4, 8, 16 or 32 threads (larger tiles are not in "
                  "its subset)");

  public:
    static constexpr unsigned int tile_size = Size;
    unsigned long long num_threads() const { return Size; }
    unsigned long long size() const { return Size; }
    unsigned long long thread_rank() const { return details::block_rank() % Size; }
    unsigned long long meta_group_rank() const { return meta_rank_; }
    unsigned long long meta_group_size() const { return meta_size_; }

    void sync(const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        emu::syncwarp(details::tile_mask(Size), emu::Site{f, l});
    }
    template <typename T>
    T shfl(T var, unsigned int src_rank, const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        return details::shuffle(emu::WARP_SHFL, details::tile_mask(Size), var, (int)src_rank, Size, emu::Site{f, l});
    }
    template <typename T> T shfl_up(T var, int delta, const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        return details::shuffle(emu::WARP_SHFL_UP, details::tile_mask(Size), var, delta, Size, emu::Site{f, l});
    }
    template <typename T> T shfl_down(T var, int delta, const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        return details::shuffle(emu::WARP_SHFL_DOWN, details::tile_mask(Size), var, delta, Size, emu::Site{f, l});
    }
    template <typename T>
    T shfl_xor(T var, int lane_mask, const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        return details::shuffle(emu::WARP_SHFL_XOR, details::tile_mask(Size), var, lane_mask, Size, emu::Site{f, l});
    }
    int any(int predicate, const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        return (int)details::vote(emu::WARP_ANY, details::tile_mask(Size), predicate, emu::Site{f, l});
    }
    int all(int predicate, const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        return (int)details::vote(emu::WARP_ALL, details::tile_mask(Size), predicate, emu::Site{f, l});
    }
    // bit r for the tile's thread of rank r
    unsigned int ballot(int predicate, const char* f = __builtin_FILE(), int l = __builtin_LINE()) const {
        unsigned mask = details::tile_mask(Size);
        return details::vote(emu::WARP_BALLOT, mask, predicate, emu::Site{f, l}) >> (__builtin_ctz(mask));
    }

  protected:
    thread_block_tile(unsigned meta_rank, unsigned meta_size)
        : thread_group(Size, true), meta_rank_(meta_rank), meta_size_(meta_size) {}
    unsigned meta_rank_, meta_size_;
};

namespace details {
template <typename P> struct parent_size { static constexpr unsigned value = 0; static constexpr bool valid = false; };
template <> struct parent_size<thread_block> { static constexpr unsigned value = 1024; static constexpr bool valid = true; };
template <unsigned S, typename P> struct parent_size<thread_block_tile<S, P>> {
    static constexpr unsigned value = S;
    static constexpr bool valid = true;
};
} // namespace details

template <unsigned int Size, typename ParentT> class thread_block_tile : public thread_block_tile<Size, void> {
    static_assert(details::parent_size<ParentT>::valid, "tiled_partition: the parent must be a thread_block or a thread_block_tile");
    static_assert(std::is_same<ParentT, thread_block>::value || Size < details::parent_size<ParentT>::value,
                  "tiled_partition: a tile of a tile must be smaller than its parent");

  public:
    thread_block_tile(unsigned meta_rank, unsigned meta_size) : thread_block_tile<Size, void>(meta_rank, meta_size) {}
};

// a tile of a tile keeps only the size in its parent type: what a further partition needs
template <unsigned int Size, typename ParentT>
inline thread_block_tile<Size, ParentT> tiled_partition(const ParentT& parent, const char* f = __builtin_FILE(),
                                                        int l = __builtin_LINE()) {
    unsigned parent_size = (unsigned)parent.num_threads(), rank = (unsigned)parent.thread_rank();
    if (parent_size % Size != 0) { details::partition_error(parent_size, Size, emu::Site{f, l}); }
    return thread_block_tile<Size, ParentT>(rank / Size, parent_size / Size);
}

template <typename Group> inline void sync(const Group& g, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    g.sync(f, l);
}

} // namespace cooperative_groups

#endif // EMU_COOPERATIVE_GROUPS_H
