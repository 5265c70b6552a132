/*
Floating-point operations with one rounding each (round to nearest even) that no compiler may
contract or reassociate: the same bits from a kernel and from host code. Where the project promises
bits between the two (the offloaded optimizer, -zo 1, against the GPU's AdamW), the shared
arithmetic is written with these.

Why: nvcc contracts a*b + c into one fma by default (--fmad=true; also across statements, in
whatever pairs its optimizer finds), the host compiler does not on x86-64 (no FMA instructions
without -march) and does on other machines. On the device these are the intrinsics that the CUDA
documentation promises are never merged into an fma (__fmul_rn, __fadd_rn, ...) and __fmaf_rn; on
the host, plain operators compiled with -ffp-contract=off (the Makefile's NVCC_FLAGS and host test
rule pass it) and fmaf, which rounds once. The emulator (dev/cuda/emu) has the intrinsics too, and
its EMU_FMAD=1 builds contract the rest of device code as nvcc does, so a claim that rests on
these is tested there under both settings.
*/
#ifndef LLMC_FP_RN_CUH
#define LLMC_FP_RN_CUH

#include <math.h>

#if defined(__CUDA_ARCH__) || defined(__EMU_CUDA__)
#define FP_RN_DEVICE 1 // the intrinsics (the emulator's for host code too: one definition for both)
#else
#define FP_RN_DEVICE 0
#endif

__host__ __device__ inline float rn_mul(float a, float b) {
#if FP_RN_DEVICE
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
__host__ __device__ inline float rn_add(float a, float b) {
#if FP_RN_DEVICE
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
__host__ __device__ inline float rn_sub(float a, float b) {
#if FP_RN_DEVICE
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
__host__ __device__ inline float rn_div(float a, float b) {
#if FP_RN_DEVICE
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
__host__ __device__ inline float rn_sqrt(float a) {
#if FP_RN_DEVICE
    return __fsqrt_rn(a);
#else
    return sqrtf(a);
#endif
}
// a*b + c rounded once
__host__ __device__ inline float rn_fma(float a, float b, float c) {
#if FP_RN_DEVICE
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}

#endif // LLMC_FP_RN_CUH
