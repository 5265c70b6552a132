/*
Included first into every .cu file that dev/cuda/emu/nvcc-cpu builds (g++ -include). It makes
the CUDA toolkit's own headers (cuda_runtime.h, cuda_bf16.h, cublasLt.h, nccl.h) compile for the
host, and supplies what nvcc would: threadIdx and friends, __syncthreads, the warp intrinsics,
atomics, a few device math functions, and the launch that `kernel<<<grid, block, smem,
stream>>>(args)` becomes (the driver rewrites that syntax into emu::launch(...)).

Marker tokens. __global__ and __shared__ expand to __emu_global__ and __emu_shared__, which no
compiler knows: the driver's rewriting pass (nvcc-cpu) turns them into a kernel prologue and into
per-block shared memory, after preprocessing, so macros inside kernels are already expanded.

Every device function that synchronizes threads takes the caller's file and line as default
arguments (__builtin_FILE/__builtin_LINE), so the emulator's messages name the source line.
*/
#ifndef EMU_DEVICE_H
#define EMU_DEVICE_H

#define __EMU_CUDA__ 1
#define __global__ __emu_global__
#define __shared__ __emu_shared__
#define __device__
#define __host__
#define __constant__ __emu_constant_unsupported__
#define __managed__ __emu_managed_unsupported__
#define __launch_bounds__(...) __emu_launch_bounds__(__VA_ARGS__)

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace emu {

// The built-in variables of the thread that runs now (one OS thread runs one block at a time;
// its fibers, one per CUDA thread, switch only at barriers and warp intrinsics, and the switch
// updates these). In gdb: `p emu_threadIdx`, `break kernel if emu_threadIdx.x == 3`.
struct Site { const char* file; int line; };

// kernel.cpp
bool kernel_entry(int max_threads_bound);      // the prologue the driver puts in every kernel
void* dynamic_shared();                        // this block's `extern __shared__` memory
bool shared_register(void* p, size_t bytes);   // a static __shared__ variable, refilled per block
void syncthreads(Site site);
void syncwarp(unsigned mask, Site site);
// A warp intrinsic: kind (below), the mask, this lane's value (bytes), the lane argument
// (srcLane, delta or laneMask) and width. Returns through `result` (bytes, same size).
enum WarpKind { WARP_SHFL, WARP_SHFL_UP, WARP_SHFL_DOWN, WARP_SHFL_XOR, WARP_BALLOT, WARP_ANY, WARP_ALL, WARP_SYNC,
                WARP_COLLECTIVE /* a PTX warp-collective instruction (ptx.cpp): mma.sync, ldmatrix */ };
unsigned warp_op(WarpKind kind, unsigned mask, const void* value, void* result, size_t bytes, int arg, int width, Site site);
unsigned activemask();
[[noreturn]] void device_trap(Site site);

// runtime.cpp / kernel.cpp: the launch
struct LaunchConfig {
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
    LaunchConfig(dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = 0) : grid(g), block(b), shared_bytes(smem), stream(s) {}
};
typedef void (*ThreadBody)(void* closure);
// Checks the configuration (records a launch error and returns without queuing if it is bad),
// then queues the grid on the stream. body(closure) runs one CUDA thread; `hold` keeps the
// closure alive until the kernel has run.
void launch_grid(const void* kernel, const char* name, Site site, const LaunchConfig& cfg, int bound,
                 ThreadBody body, void* closure, std::shared_ptr<void> hold);
void check_kernel_pointer(const char* name, Site site, int index, const void* p);
// The launch asks the kernel for its __launch_bounds__: while probing() is set, the kernel's
// prologue stores its bound in probe_bound() and returns at once. (Functions, not extern
// thread_local variables: UBSan mistakes those for null pointers.)
bool& probing();
int& probe_bound();

template <typename T> inline void check_arg(const char* name, Site site, int index, const T& value) {
    if constexpr (std::is_pointer<T>::value) { check_kernel_pointer(name, site, index, (const void*)value); }
    (void)name; (void)site; (void)index; (void)value;
}

template <typename Tuple, size_t... I>
inline void check_args(const char* name, Site site, const Tuple& t, std::index_sequence<I...>) {
    (check_arg(name, site, (int)I, std::get<I>(t)), ...);
}

// kernel<<<grid, block, smem, stream>>>(args...) becomes launch(kernel, "kernel", site, cfg, args...).
// The arguments are converted to the kernel's parameter types now (as CUDA copies them at the
// launch); each CUDA thread then calls the kernel with its own copy.
template <typename... P, typename... A>
inline void launch(void (*kernel)(P...), const char* name, Site site, const LaunchConfig& cfg, A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    typedef std::tuple<typename std::remove_cv<P>::type...> Args;
    struct Closure { void (*kernel)(P...); Args args; };
    auto closure = std::make_shared<Closure>(Closure{kernel, Args(std::forward<A>(args)...)});
    check_args(name, site, closure->args, std::index_sequence_for<P...>{});
    probing() = true; // the kernel's prologue returns at once, telling its __launch_bounds__
    probe_bound() = -1;
    std::apply(kernel, closure->args);
    probing() = false;
    if (probe_bound() < 0) { device_trap(site); }
    ThreadBody body = [](void* c) {
        Closure* cl = (Closure*)c;
        std::apply(cl->kernel, cl->args);
    };
    launch_grid((const void*)kernel, name, site, cfg, probe_bound(), body, closure.get(), closure);
}

} // namespace emu

// inline (defined in every file), not extern: GCC's UBSan mistakes an extern thread_local for a
// null pointer
inline thread_local uint3 emu_threadIdx, emu_blockIdx;
inline thread_local dim3 emu_blockDim, emu_gridDim;
#define threadIdx emu_threadIdx
#define blockIdx emu_blockIdx
#define blockDim emu_blockDim
#define gridDim emu_gridDim
static const int warpSize = 32;

// cuda_runtime.h declares this C++ overload (the kernel itself as argument) only under __CUDACC__,
// which g++ does not define: `cudaFuncSetAttribute(kernel, attr, value)` compiles as with nvcc.
template <class T> inline cudaError_t cudaFuncSetAttribute(T* func, enum cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute((const void*)func, attr, value);
}

#define EMU_SITE emu::Site{__builtin_FILE(), __builtin_LINE()}

inline void __syncthreads(const char* f = __builtin_FILE(), int l = __builtin_LINE()) { emu::syncthreads(emu::Site{f, l}); }
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    emu::syncwarp(mask, emu::Site{f, l});
}
inline unsigned __activemask() { return emu::activemask(); }
inline void __trap(const char* f = __builtin_FILE(), int l = __builtin_LINE()) { emu::device_trap(emu::Site{f, l}); }

template <typename T> inline T emu_warp_value(emu::WarpKind kind, unsigned mask, T var, int arg, int width, emu::Site site) {
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 16, "warp intrinsics move up to 16 bytes");
    T result;
    emu::warp_op(kind, mask, &var, &result, sizeof(T), arg, width, site);
    return result;
}
template <typename T> inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32,
                                           const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    return emu_warp_value(emu::WARP_SHFL, mask, var, src_lane, width, emu::Site{f, l});
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                                              const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    return emu_warp_value(emu::WARP_SHFL_UP, mask, var, (int)delta, width, emu::Site{f, l});
}
template <typename T> inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                                                const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    return emu_warp_value(emu::WARP_SHFL_DOWN, mask, var, (int)delta, width, emu::Site{f, l});
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32,
                                               const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    return emu_warp_value(emu::WARP_SHFL_XOR, mask, var, lane_mask, width, emu::Site{f, l});
}
inline unsigned __ballot_sync(unsigned mask, int pred, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    int p = pred != 0, r = 0;
    return emu::warp_op(emu::WARP_BALLOT, mask, &p, &r, sizeof(int), 0, 32, emu::Site{f, l});
}
inline int __any_sync(unsigned mask, int pred, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    int p = pred != 0, r = 0;
    return (int)emu::warp_op(emu::WARP_ANY, mask, &p, &r, sizeof(int), 0, 32, emu::Site{f, l});
}
inline int __all_sync(unsigned mask, int pred, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    int p = pred != 0, r = 0;
    return (int)emu::warp_op(emu::WARP_ALL, mask, &p, &r, sizeof(int), 0, 32, emu::Site{f, l});
}

// ----------------------------------------------------------------------------
// atomics: blocks may run on several OS threads at once (EMU_THREADS), so these are real atomics

template <typename T> inline T emu_atomic_update(T* address, T (*update)(T, T), T value) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4- or 8-byte values");
    typedef typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type Bits;
    Bits* bits = (Bits*)address;
    Bits old_bits = __atomic_load_n(bits, __ATOMIC_RELAXED), new_bits;
    T old_value;
    do {
        memcpy(&old_value, &old_bits, sizeof(T));
        T next = update(old_value, value);
        memcpy(&new_bits, &next, sizeof(T));
    } while (!__atomic_compare_exchange_n(bits, &old_bits, new_bits, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old_value;
}
template <typename T> inline T atomicAdd(T* address, T value) {
    return emu_atomic_update<T>(address, [](T a, T b) { return (T)(a + b); }, value);
}
template <typename T> inline T atomicMax(T* address, T value) {
    return emu_atomic_update<T>(address, [](T a, T b) { return a > b ? a : b; }, value);
}
template <typename T> inline T atomicMin(T* address, T value) {
    return emu_atomic_update<T>(address, [](T a, T b) { return a < b ? a : b; }, value);
}
template <typename T> inline T atomicExch(T* address, T value) {
    return emu_atomic_update<T>(address, [](T, T b) { return b; }, value);
}
template <typename T> inline T atomicCAS(T* address, T compare, T value) {
    __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ----------------------------------------------------------------------------
// device functions nvcc provides and g++ does not. Host libm does the arithmetic: results can
// differ from a GPU's in the last bits (the README says so).

template <typename T> inline T __ldg(const T* p) { return *p; }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

// ----------------------------------------------------------------------------
// Inline PTX. nvcc-cpu turns each `asm("...")` statement of a kernel whose instructions are in its
// table (see nvcc-cpu, "the PTX table") into calls of these (ptx.cpp), with the PTX ISA's
// semantics; any other asm is a compile error. Shared-memory operands are offsets in the block's
// .shared window (from __cvta_generic_to_shared), global ones device pointers.

namespace emu {
enum PtxType { PTX_BF16, PTX_F16 };
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 d, a, b, c (warp-collective)
void ptx_mma_m16n8k16(PtxType ab, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4], Site site);
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 d, [addr] (warp-collective)
void ptx_ldmatrix(int num, bool trans, uint64_t addr, uint32_t* d, Site site);
// cp.async.{ca,cg}.shared.global [dst], [src], cp_size{, src_size} (src_size < 0: none)
void ptx_cp_async(bool cg, uint64_t dst, uint64_t src, long long cp_size, long long src_size, Site site);
void ptx_cp_async_commit_group(Site site);
void ptx_cp_async_wait_group(long long n, Site site);
void ptx_cp_async_wait_all(Site site);
bool shared_offset_of(const void* p, uint64_t* offset); // kernel.cpp: the window offset of p
void* shared_pointer_of(uint64_t offset);               // kernel.cpp: the pointer at a window offset
[[noreturn]] void ptx_not_shared(const char* what, const void* p, Site site);
uint64_t ptx_generic_to_shared(uint64_t generic, const char* what, Site site); // the window offset, or an error

// Operands, with nvcc's rules for the constraint letters: "r" a 32-bit register (an integer of at
// most 4 bytes), "l" 64 bits (an 8-byte integer or a pointer), "h" 16 bits, "f" a .f32 register
// (a float), "d" .f64 (a double), "n" an integer constant (checked at compile time by the driver).
template <typename T> inline uint32_t ptx_in_r(const T& v) {
    static_assert(std::is_integral<T>::value && sizeof(T) <= 4, "asm operand type does not match constraint 'r'");
    return (uint32_t)v;
}
template <typename T> inline uint64_t ptx_in_l(const T& v) {
    static_assert((std::is_integral<T>::value || std::is_pointer<T>::value) && sizeof(T) == 8,
                  "asm operand type does not match constraint 'l'");
    return (uint64_t)v;
}
template <typename T> inline uint16_t ptx_in_h(const T& v) {
    static_assert(std::is_integral<T>::value && sizeof(T) <= 2, "asm operand type does not match constraint 'h'");
    return (uint16_t)v;
}
template <typename T> inline float ptx_in_f(const T& v) {
    static_assert(std::is_floating_point<T>::value, "asm operand type does not match constraint 'f'");
    return (float)v;
}
template <typename T> inline double ptx_in_d(const T& v) {
    static_assert(std::is_floating_point<T>::value, "asm operand type does not match constraint 'd'");
    return (double)v;
}
template <typename T> inline void ptx_out_r(T& dst, uint32_t v) {
    static_assert(std::is_integral<T>::value && sizeof(T) == 4, "asm output type does not match constraint 'r'");
    dst = (T)v;
}
template <typename T> inline void ptx_out_l(T& dst, uint64_t v) {
    static_assert(std::is_integral<T>::value && sizeof(T) == 8, "asm output type does not match constraint 'l'");
    dst = (T)v;
}
template <typename T> inline void ptx_out_h(T& dst, uint16_t v) {
    static_assert(std::is_integral<T>::value && sizeof(T) == 2, "asm output type does not match constraint 'h'");
    dst = (T)v;
}
template <typename T> inline void ptx_out_f(T& dst, float v) {
    static_assert(std::is_same<T, float>::value, "asm output type does not match constraint 'f'");
    dst = v;
}
template <typename T> inline void ptx_out_d(T& dst, double v) {
    static_assert(std::is_same<T, double>::value, "asm output type does not match constraint 'd'");
    dst = v;
}
} // namespace emu

// Generic <-> .shared window addresses (CUDA's address-space conversion intrinsics). A pointer that
// is not in the calling block's shared memory is an error (on a GPU the result is undefined).
inline size_t __cvta_generic_to_shared(const void* p, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    uint64_t offset = 0;
    if (!emu::shared_offset_of(p, &offset)) { emu::ptx_not_shared("__cvta_generic_to_shared", p, emu::Site{f, l}); }
    return (size_t)offset;
}
inline void* __cvta_shared_to_generic(size_t offset, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    void* p = emu::shared_pointer_of(offset);
    if (p == nullptr) { emu::ptx_not_shared("__cvta_shared_to_generic", (const void*)offset, emu::Site{f, l}); }
    return p;
}
inline unsigned int __isShared(const void* p) {
    uint64_t offset = 0;
    return emu::shared_offset_of(p, &offset) ? 1u : 0u;
}

#endif // EMU_DEVICE_H
