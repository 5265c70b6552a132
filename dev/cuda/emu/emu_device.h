/*
Included first into every .cu file that dev/cuda/emu/nvcc-cpu builds (g++ -include). It makes
the CUDA toolkit's own headers (cuda_runtime.h, cuda_bf16.h, cublasLt.h, nccl.h) compile for the
host, and supplies what nvcc would: threadIdx and friends, __syncthreads, the warp intrinsics,
atomics, a few device math functions, the loads and stores with cache hints, the operands of
inline PTX (which the driver turns into calls), and the launch that `kernel<<<grid, block, smem,
stream>>>(args)` becomes (the driver rewrites that syntax into emu::launch_call(...)).

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
// EMU_FMAD_BUILD (nvcc-cpu defines it: --fmad, EMU_FMAD): 1 = device code contracts a*b + c into
// an fma as nvcc's default --fmad=true does (README, "Contraction"); then __device__ and __host__
// are marker tokens too, so the driver can give device-only functions the contraction.
#if defined(EMU_FMAD_BUILD)
#define EMU_FMAD_NOTE 1 // a program's .cu file (not the emulator's library): it registers below
#else
#define EMU_FMAD_BUILD 0
#endif
#if EMU_FMAD_BUILD
#define __device__ __emu_device__
#define __host__ __emu_host__
#else
#define __device__
#define __host__
#endif
#define __constant__ __emu_constant_unsupported__
#define __managed__ __emu_managed_unsupported__
#define __launch_bounds__(...) __emu_launch_bounds__(__VA_ARGS__)

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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
void* dynamic_shared();                        // this block's `extern __shared__` memory
// A static `__shared__ T name[N];` (nvcc-cpu rewrites it into a reference to this): the block's
// copy of the variable whose key is `key` (a static of the declaring function), placed in the
// block's shared memory by the first thread that reaches the declaration and filled with 0xFF.
void* static_shared(const void* key, size_t bytes, size_t align, const char* name, Site site);
void count_mma_flops(uint64_t flops);          // EMU_COUNTERS: tensor-core FLOPs of this thread's mma
bool note_instrumented_unit();                 // check.cpp: this .cu file has the access hooks
void syncthreads(Site site);
void barrier_sync(unsigned id, Site site);     // bar.sync id with every thread of the block
void syncwarp(unsigned mask, Site site);
// A warp intrinsic: kind (below), the mask, this lane's value (bytes), the lane argument
// (srcLane, delta or laneMask) and width. Returns through `result` (bytes, same size).
enum WarpKind { WARP_SHFL, WARP_SHFL_UP, WARP_SHFL_DOWN, WARP_SHFL_XOR, WARP_BALLOT, WARP_ANY, WARP_ALL, WARP_SYNC,
                WARP_COLLECTIVE /* a PTX warp-collective instruction (ptx.cpp): mma.sync, ldmatrix */ };
unsigned warp_op(WarpKind kind, unsigned mask, const void* value, void* result, size_t bytes, int arg, int width, Site site);
unsigned activemask();
[[noreturn]] void device_trap(Site site);
[[noreturn]] void device_error(const char* text, Site site); // ptx.cpp: "<kernel, block, thread>: <text> at <site>"

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
// Checks a pointer argument; a pointer into device or pinned memory also becomes part of the
// launch's footprint for the stream-order check (read only when it points to const).
void check_kernel_pointer(const char* name, Site site, int index, const void* p, bool to_const);

template <typename T> inline void check_arg(const char* name, Site site, int index, const T& value) {
    if constexpr (std::is_pointer<T>::value) {
        check_kernel_pointer(name, site, index, (const void*)value, std::is_const<typename std::remove_pointer<T>::type>::value);
    }
    (void)name; (void)site; (void)index; (void)value;
}

template <typename Tuple, size_t... I>
inline void check_args(const char* name, Site site, const Tuple& t, std::index_sequence<I...>) {
    (check_arg(name, site, (int)I, std::get<I>(t)), ...);
}

// The launch. nvcc-cpu rewrites `k<<<grid, block, smem, stream>>>(args)` into
//     emu::launch_call(emu::LaunchConfig(grid, block, smem, stream), "k", site, [&]() { k(args); })
// so the launch is an ordinary call of `k`: the compiler resolves an overloaded name, deduces
// template arguments and converts each argument to its parameter's type exactly as for any call
// (and refuses, naming the line, what a call would refuse), as nvcc does for a launch. The call
// is made with this thread's launch slot set; the prologue nvcc-cpu puts in every __global__
// function (kernel_entry) then takes the kernel's own address and its parameters, already
// converted, queues the grid and returns at once. Each CUDA thread later calls the kernel with
// its own copy of those parameters, and then the prologue lets the body run.
struct PendingLaunch {
    const LaunchConfig* cfg;
    const char* name;
    Site site;
    bool taken;
};
PendingLaunch*& pending_launch();  // kernel.cpp: this host thread's launch slot (null: none)
// kernel.cpp: a __global__ function entered outside a launch and outside a block: an
// unconfigured call from host code (`k(args)` without <<<...>>>); ends the process naming the
// caller's line (`caller`: the kernel's return address).
void kernel_entered(const char* kernel, const void* caller);
[[noreturn]] void launch_of_host_function(const char* name, Site site); // kernel.cpp

// A parameter's type without its top-level qualifiers, in the prologue's decltype (never called).
template <typename T> T unqualified(T);

template <typename... P, typename... Q>
inline bool kernel_entry(int bound, const char* kernel, const void* caller, void (*self)(P...), Q&... params) {
    PendingLaunch* pl = pending_launch();
    if (__builtin_expect(pl == nullptr, 1)) {
        kernel_entered(kernel, caller);
        return false;
    }
    pending_launch() = nullptr; // taken: calls the kernel makes from here on are not this launch
    pl->taken = true;
    typedef std::tuple<typename std::remove_cv<P>::type...> Args;
    struct Closure { void (*kernel)(P...); Args args; };
    auto closure = std::make_shared<Closure>(Closure{self, Args(params...)});
    check_args(pl->name, pl->site, closure->args, std::index_sequence_for<P...>{});
    ThreadBody body = [](void* c) {
        Closure* cl = (Closure*)c;
        std::apply(cl->kernel, cl->args);
    };
    launch_grid((const void*)self, pl->name, pl->site, *pl->cfg, bound, body, closure.get(), closure);
    return true;
}

template <typename Call> inline void launch_call(const LaunchConfig& cfg, const char* name, Site site, Call&& call) {
    static_assert(std::is_void<decltype(call())>::value,
                  "a launch <<<...>>> of a function that returns a value: only a __global__ function (void) can be launched");
    PendingLaunch pl{&cfg, name, site, false};
    PendingLaunch* outer = pending_launch(); // an argument expression may launch a kernel itself
    pending_launch() = &pl;
    call();
    pending_launch() = outer;
    if (!pl.taken) { launch_of_host_function(name, site); }
}

} // namespace emu

#ifdef EMU_ACCESS_HOOKS // nvcc-cpu compiled this file with the access hooks (check.cpp)
inline const bool emu_hooked_unit = emu::note_instrumented_unit();
#endif

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
inline void __barrier_sync(unsigned id, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {
    emu::barrier_sync(id, emu::Site{f, l});
}
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
// CUDA's overload sets (device_atomic_functions.h, sm_20/32/60/90_atomic_functions.h,
// cuda_fp16.h, cuda_bf16.h), not templates: an argument converts as to any of them (an int added
// to an unsigned int), and a type CUDA declares no overload for does not build.
#define EMU_ATOMIC_RMW(NAME, T, EXPR) \
    inline T NAME(T* address, T val) { return emu_atomic_update<T>(address, [](T a, T b) -> T { return EXPR; }, val); }
#define EMU_ATOMIC_INT(NAME, EXPR) \
    EMU_ATOMIC_RMW(NAME, int, EXPR) EMU_ATOMIC_RMW(NAME, unsigned int, EXPR) EMU_ATOMIC_RMW(NAME, unsigned long long, EXPR)
EMU_ATOMIC_INT(atomicAdd, (decltype(a))((unsigned long long)a + (unsigned long long)b))
EMU_ATOMIC_RMW(atomicAdd, float, a + b)
EMU_ATOMIC_RMW(atomicAdd, double, a + b)
EMU_ATOMIC_RMW(atomicSub, int, (int)((unsigned)a - (unsigned)b))
EMU_ATOMIC_RMW(atomicSub, unsigned int, a - b)
EMU_ATOMIC_INT(atomicExch, ((void)a, b))
EMU_ATOMIC_RMW(atomicExch, float, ((void)a, b))
EMU_ATOMIC_INT(atomicMin, a < b ? a : b)
EMU_ATOMIC_RMW(atomicMin, long long, a < b ? a : b)
EMU_ATOMIC_INT(atomicMax, a > b ? a : b)
EMU_ATOMIC_RMW(atomicMax, long long, a > b ? a : b)
EMU_ATOMIC_INT(atomicAnd, a & b)
EMU_ATOMIC_RMW(atomicAnd, long long, a & b)
EMU_ATOMIC_INT(atomicOr, a | b)
EMU_ATOMIC_RMW(atomicOr, long long, a | b)
EMU_ATOMIC_INT(atomicXor, a ^ b)
EMU_ATOMIC_RMW(atomicXor, long long, a ^ b)
EMU_ATOMIC_RMW(atomicInc, unsigned int, a >= b ? 0u : a + 1u)
EMU_ATOMIC_RMW(atomicDec, unsigned int, (a == 0u || a > b) ? b : a - 1u)
#undef EMU_ATOMIC_INT
#undef EMU_ATOMIC_RMW
inline int atomicCAS(int* address, int compare, int val) {
    __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
inline unsigned int atomicCAS(unsigned int* address, unsigned int compare, unsigned int val) {
    __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare, unsigned long long val) {
    __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
inline unsigned short atomicCAS(unsigned short* address, unsigned short compare, unsigned short val) {
    __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
// 16-bit floating point adds: a compare-and-swap of the 2 bytes; the two halves of a __half2 or
// __nv_bfloat162 are each atomic (CUDA promises no more), float2/float4 (sm_90) each component.
template <typename H> inline H emu_atomic_add16(H* address, H val) {
    unsigned short* bits = (unsigned short*)address;
    unsigned short old_bits = __atomic_load_n(bits, __ATOMIC_RELAXED), new_bits;
    H old_value;
    do {
        memcpy((void*)&old_value, &old_bits, 2);
        H next = (H)((float)old_value + (float)val);
        memcpy(&new_bits, (const void*)&next, 2);
    } while (!__atomic_compare_exchange_n(bits, &old_bits, new_bits, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old_value;
}
inline __half atomicAdd(__half* address, __half val) { return emu_atomic_add16(address, val); }
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 val) { return emu_atomic_add16(address, val); }
inline __half2 atomicAdd(__half2* address, __half2 val) {
    __half lo = emu_atomic_add16(&address->x, val.x), hi = emu_atomic_add16(&address->y, val.y);
    return __half2(lo, hi);
}
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* address, __nv_bfloat162 val) {
    __nv_bfloat16 lo = emu_atomic_add16(&address->x, val.x), hi = emu_atomic_add16(&address->y, val.y);
    return __nv_bfloat162(lo, hi);
}
inline float2 atomicAdd(float2* address, float2 val) {
    return make_float2(atomicAdd(&address->x, val.x), atomicAdd(&address->y, val.y));
}
inline float4 atomicAdd(float4* address, float4 val) {
    return make_float4(atomicAdd(&address->x, val.x), atomicAdd(&address->y, val.y), atomicAdd(&address->z, val.z),
                       atomicAdd(&address->w, val.w));
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ----------------------------------------------------------------------------
// device functions nvcc provides and g++ does not. Host libm does the arithmetic: results can
// differ from a GPU's in the last bits (the README says so).

// The rounded arithmetic intrinsics: one IEEE operation each, round to nearest even, never
// contracted into an fma (nvcc's documented promise for __fmul_rn and __fadd_rn). The empty asm
// statements hide the operands' and the result's origin from g++, so even in device code built
// with contraction (EMU_FMAD=1) no multiply next to them fuses with them. __fmaf_rn is one fma.
#if defined(__x86_64__) || defined(__i386__)
#define EMU_OPAQUE(x) __asm__("" : "+x"(x))
#elif defined(__aarch64__)
#define EMU_OPAQUE(x) __asm__("" : "+w"(x))
#else
#define EMU_OPAQUE(x) __asm__("" : "+m"(x))
#endif
inline float __fmul_rn(float a, float b) { EMU_OPAQUE(a); EMU_OPAQUE(b); float r = a * b; EMU_OPAQUE(r); return r; }
inline float __fadd_rn(float a, float b) { EMU_OPAQUE(a); EMU_OPAQUE(b); float r = a + b; EMU_OPAQUE(r); return r; }
inline float __fsub_rn(float a, float b) { EMU_OPAQUE(a); EMU_OPAQUE(b); float r = a - b; EMU_OPAQUE(r); return r; }
inline float __fdiv_rn(float a, float b) { EMU_OPAQUE(a); EMU_OPAQUE(b); float r = a / b; EMU_OPAQUE(r); return r; }
inline float __fsqrt_rn(float a) { EMU_OPAQUE(a); float r = sqrtf(a); EMU_OPAQUE(r); return r; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dmul_rn(double a, double b) { EMU_OPAQUE(a); EMU_OPAQUE(b); double r = a * b; EMU_OPAQUE(r); return r; }
inline double __dadd_rn(double a, double b) { EMU_OPAQUE(a); EMU_OPAQUE(b); double r = a + b; EMU_OPAQUE(r); return r; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }

inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
inline int __double2hiint(double x) { return (int)((unsigned long long)__double_as_longlong(x) >> 32); }
inline int __double2loint(double x) { return (int)(unsigned)(unsigned long long)__double_as_longlong(x); }
inline double __hiloint2double(int hi, int lo) {
    return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// min and max as CUDA's headers declare them (crt/math_functions.h): every integer pairing of a
// width (mixed signedness gives the unsigned type, as C's conversions would), float, double,
// and float with double.
#define EMU_MINMAX(R, A, B) \
    inline R min(const A a, const B b) { return (R)a < (R)b ? (R)a : (R)b; } \
    inline R max(const A a, const B b) { return (R)a > (R)b ? (R)a : (R)b; }
#define EMU_MINMAX_WIDTH(S, U) EMU_MINMAX(S, S, S) EMU_MINMAX(U, U, U) EMU_MINMAX(U, S, U) EMU_MINMAX(U, U, S)
EMU_MINMAX_WIDTH(int, unsigned int)
EMU_MINMAX_WIDTH(long int, unsigned long int)
EMU_MINMAX_WIDTH(long long int, unsigned long long int)
#undef EMU_MINMAX_WIDTH
#undef EMU_MINMAX
inline float min(const float a, const float b) { return fminf(a, b); }
inline float max(const float a, const float b) { return fmaxf(a, b); }
inline double min(const double a, const double b) { return fmin(a, b); }
inline double max(const double a, const double b) { return fmax(a, b); }
inline double min(const float a, const double b) { return fmin((double)a, b); }
inline double max(const float a, const double b) { return fmax((double)a, b); }
inline double min(const double a, const float b) { return fmin(a, (double)b); }
inline double max(const double a, const float b) { return fmax(a, (double)b); }

// ----------------------------------------------------------------------------
// Loads and stores with cache hints: __ldg (read-only cache), __ldcg/__ldca/__ldcs/__ldlu/__ldcv,
// __stwb/__stcg/__stcs/__stwt (the Programming Guide's "Load/Store Functions Using Cache
// Hints"). The hints are performance only: here a plain load or store, for the documented types
// only (other types do not build), at the type's natural alignment: a float4 at an address that
// is not 16-byte aligned is an error naming the line, where a GPU faults ("misaligned address").

namespace emu {
template <typename T> struct cache_hint_type : std::false_type {};
#define EMU_CACHE_HINT_TYPE(T) template <> struct cache_hint_type<T> : std::true_type {};
EMU_CACHE_HINT_TYPE(char) EMU_CACHE_HINT_TYPE(signed char) EMU_CACHE_HINT_TYPE(short) EMU_CACHE_HINT_TYPE(int)
EMU_CACHE_HINT_TYPE(long) EMU_CACHE_HINT_TYPE(long long) EMU_CACHE_HINT_TYPE(unsigned char)
EMU_CACHE_HINT_TYPE(unsigned short) EMU_CACHE_HINT_TYPE(unsigned int) EMU_CACHE_HINT_TYPE(unsigned long)
EMU_CACHE_HINT_TYPE(unsigned long long) EMU_CACHE_HINT_TYPE(char2) EMU_CACHE_HINT_TYPE(char4)
EMU_CACHE_HINT_TYPE(short2)
EMU_CACHE_HINT_TYPE(short4) EMU_CACHE_HINT_TYPE(int2) EMU_CACHE_HINT_TYPE(int4) EMU_CACHE_HINT_TYPE(longlong2)
EMU_CACHE_HINT_TYPE(uchar2) EMU_CACHE_HINT_TYPE(uchar4) EMU_CACHE_HINT_TYPE(ushort2) EMU_CACHE_HINT_TYPE(ushort4)
EMU_CACHE_HINT_TYPE(uint2) EMU_CACHE_HINT_TYPE(uint4) EMU_CACHE_HINT_TYPE(ulonglong2) EMU_CACHE_HINT_TYPE(float)
EMU_CACHE_HINT_TYPE(float2) EMU_CACHE_HINT_TYPE(float4) EMU_CACHE_HINT_TYPE(double) EMU_CACHE_HINT_TYPE(double2)
EMU_CACHE_HINT_TYPE(__nv_bfloat16) EMU_CACHE_HINT_TYPE(__nv_bfloat162) EMU_CACHE_HINT_TYPE(__half)
EMU_CACHE_HINT_TYPE(__half2)
#undef EMU_CACHE_HINT_TYPE

[[noreturn]] void misaligned_access(const char* what, const void* p, size_t bytes, Site site); // ptx.cpp

template <typename T> inline void check_hinted_access(const char* what, const T* p, Site site) {
    static_assert(cache_hint_type<typename std::remove_cv<T>::type>::value,
                  "not a type of the CUDA load/store functions with cache hints (char ... unsigned long long, "
                  "char2 ... ulonglong2, float, float2, float4, double, double2, __half, __half2, __nv_bfloat16, "
                  "__nv_bfloat162)");
    if ((uintptr_t)p % alignof(T) != 0) { misaligned_access(what, (const void*)p, alignof(T), site); }
}
template <typename T> struct same_type { typedef T type; }; // a parameter that does not take part in deduction
} // namespace emu

#define EMU_LOAD_WITH_HINT(name)                                                                                      \
    template <typename T> inline T name(const T* p, const char* f = __builtin_FILE(), int l = __builtin_LINE()) {      \
        emu::check_hinted_access(#name, p, emu::Site{f, l});                                                           \
        return *p;                                                                                                     \
    }
#define EMU_STORE_WITH_HINT(name)                                                                                     \
    template <typename T>                                                                                              \
    inline void name(T* p, typename emu::same_type<T>::type v, const char* f = __builtin_FILE(),                       \
                     int l = __builtin_LINE()) {                                                                       \
        emu::check_hinted_access(#name, p, emu::Site{f, l});                                                           \
        *p = v;                                                                                                        \
    }
EMU_LOAD_WITH_HINT(__ldg)
EMU_LOAD_WITH_HINT(__ldcg)
EMU_LOAD_WITH_HINT(__ldca)
EMU_LOAD_WITH_HINT(__ldcs)
EMU_LOAD_WITH_HINT(__ldlu)
EMU_LOAD_WITH_HINT(__ldcv)
EMU_STORE_WITH_HINT(__stwb)
EMU_STORE_WITH_HINT(__stcg)
EMU_STORE_WITH_HINT(__stcs)
EMU_STORE_WITH_HINT(__stwt)
#undef EMU_LOAD_WITH_HINT
#undef EMU_STORE_WITH_HINT

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
// sm_90a (llmc/wgmma.cuh): wgmma (warpgroup-collective; a == nullptr: A from desc_a), the fences,
// mbarriers (.shared offsets), cp.async.bulk.tensor.2d (map_addr: the CUtensorMap's address), setmaxnreg
void ptx_wgmma(int n, uint64_t desc_a, const uint32_t* a, uint64_t desc_b, bool scale_d, int scale_a, int scale_b,
               int trans_a, int trans_b, float* const* dp, const float* din, float* dout, Site site);
void ptx_wgmma_fence(Site site);
void ptx_wgmma_commit_group(Site site);
void ptx_wgmma_wait_group(long long n, Site site);
void ptx_setmaxnreg(bool inc, long long r, Site site);
void ptx_fence_proxy_async(Site site);
uint64_t ptx_globaltimer(); // %globaltimer: nanoseconds (the host's steady clock)
void ptx_fence_mbarrier_init(Site site);
void ptx_mbar_init(uint64_t addr, uint32_t count, Site site);
uint64_t ptx_mbar_arrive(uint64_t addr, uint32_t tx, bool expect_tx, Site site);
bool ptx_mbar_try_wait_parity(uint64_t addr, uint32_t parity, Site site);
void ptx_tma_load_2d(uint64_t dst, uint64_t map_addr, int32_t x, int32_t y, uint64_t mbar, Site site);
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

// How this .cu file was built (EMU_FMAD_BUILD): runtime.cpp refuses a run whose EMU_FMAD says
// otherwise (contraction is chosen at build time, as nvcc's --fmad is) and an fma build on a CPU
// without FMA instructions.
namespace emu { bool note_fmad_build(int fmad); }
#ifdef EMU_FMAD_NOTE
[[maybe_unused]] static const bool emu_fmad_noted = emu::note_fmad_build(EMU_FMAD_BUILD);
#endif

#endif // EMU_DEVICE_H
