/*
The CUDA emulator's cooperative_groups/reduce.h (see ../cooperative_groups.h): cg::reduce over a
thread_block_tile, and the guide's function objects. Every thread of the tile gets the result.

Order (the emulator's; a GPU's is not documented and may use a hardware reduction for 4-byte
integers): a butterfly, value = op(value, the value of the lane `offset` apart) for offset =
N/2, N/4, ..., 1. Each step is a shfl_xor of the tile, so every thread of the tile must take
part, as the guide requires.
*/
#ifndef EMU_COOPERATIVE_GROUPS_REDUCE_H
#define EMU_COOPERATIVE_GROUPS_REDUCE_H

#include <cooperative_groups.h>

#include <type_traits>
#include <utility>

namespace cooperative_groups {

template <typename T> struct plus {
    T operator()(const T& a, const T& b) const { return a + b; }
};
template <typename T> struct less { // the lesser value, not a bool
    T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <typename T> struct greater { // the greater value (compared with operator<)
    T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <typename T> struct bit_and {
    T operator()(const T& a, const T& b) const { return a & b; }
};
template <typename T> struct bit_or {
    T operator()(const T& a, const T& b) const { return a | b; }
};
template <typename T> struct bit_xor {
    T operator()(const T& a, const T& b) const { return a ^ b; }
};

namespace details {
template <typename G> struct is_tile : std::false_type {};
template <unsigned S, typename P> struct is_tile<thread_block_tile<S, P>> : std::true_type {};
} // namespace details

template <typename TyGroup, typename TyArg, typename TyOp>
inline auto reduce(const TyGroup& group, TyArg&& val, TyOp&& op, const char* f = __builtin_FILE(), int l = __builtin_LINE())
    -> decltype(op(val, val)) {
    static_assert(details::is_tile<TyGroup>::value,
                  "cg::reduce: the group must be a thread_block_tile (coalesced groups are not in the emulator's subset)");
    typedef typename std::decay<decltype(op(val, val))>::type Result;
    static_assert(std::is_trivially_copyable<Result>::value && sizeof(Result) <= 32,
                  "cg::reduce: a trivially copyable value of at most 32 bytes");
    Result v = val;
    for (int offset = (int)group.num_threads() / 2; offset > 0; offset /= 2) { v = op(v, group.shfl_xor(v, offset, f, l)); }
    return v;
}

} // namespace cooperative_groups

#endif // EMU_COOPERATIVE_GROUPS_REDUCE_H
