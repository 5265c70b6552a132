/*
A minimal synchronous stand-in for the emulator's runtime, to test cublaslt.cpp on its own
(dev/cuda/emu/tests/cublaslt_test.cpp says how to build it). It provides what cublaslt.cpp takes
from emu_internal.h, plus the four CUDA runtime calls the test uses:
  - enqueue runs the op at once (no streams, no schedule), ApiScope does nothing;
  - device memory is whatever cudaMalloc here returned (256-byte aligned, as on a GPU), and
    device_range/check_device_range know those allocations;
  - fatal prints "cuda-emu: <message>" and exits with status 86, as the real one does;
  - warn prints "cuda-emu: <message>" once per distinct text.
cudaMemcpy copies whatever it is given; cudaStreamSynchronize has nothing to wait for.
*/

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <set>
#include <string>

#include "emu_internal.h"

namespace {

std::map<uintptr_t, size_t> g_allocations;  // base address -> bytes

std::string format(const char* fmt, va_list ap) {
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

}  // namespace

namespace emu {

void fatal(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = format(fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda-emu: %s\n", msg.c_str());
    fflush(stderr);
    exit(86);
}

void warn(const char* fmt, ...) {
    static std::set<std::string> seen;
    va_list ap;
    va_start(ap, fmt);
    std::string msg = format(fmt, ap);
    va_end(ap);
    if (seen.insert(msg).second) { fprintf(stderr, "cuda-emu: %s\n", msg.c_str()); }
}

ApiScope::ApiScope(const char*) {}
ApiScope::~ApiScope() {}

cudaError_t enqueue(cudaStream_t, const std::string&, OpFn fn) {
    while (!fn()) {}
    return cudaSuccess;
}

// (what the op touches is for the real runtime's stream-order check)
cudaError_t enqueue(cudaStream_t s, const std::string& what, OpFn fn, OpDetails) { return enqueue(s, what, std::move(fn)); }

cudaError_t stream_wait_all(cudaStream_t) { return cudaSuccess; }

bool device_range(const void* p, size_t n, const void** alloc_base, size_t* alloc_bytes) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_allocations.upper_bound(a);
    if (it == g_allocations.begin()) { return false; }
    --it;
    uintptr_t base = it->first, end = it->first + it->second;
    bool inside = n == 0 ? a <= end : (a + n <= end && a + n > a);
    if (a < base || !inside) { return false; }
    if (alloc_base != nullptr) { *alloc_base = (const void*)base; }
    if (alloc_bytes != nullptr) { *alloc_bytes = it->second; }
    return true;
}

void check_device_range(const void* p, size_t n, const char* who, const char* what) {
    if (!device_range(p, n)) { fatal("%s: %s at %p (%zu bytes) is not inside one device allocation", who, what, p, n); }
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
    static uint64_t state = 1;
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

}  // namespace emu

cudaError_t cudaMalloc(void** devPtr, size_t size) {
    if (devPtr == nullptr) { return cudaErrorInvalidValue; }
    size_t bytes = (size + 255) / 256 * 256;
    void* p = aligned_alloc(256, bytes == 0 ? 256 : bytes);
    if (p == nullptr) { return cudaErrorMemoryAllocation; }
    g_allocations[(uintptr_t)p] = size;
    *devPtr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void* devPtr) {
    if (devPtr == nullptr) { return cudaSuccess; }
    auto it = g_allocations.find((uintptr_t)devPtr);
    if (it == g_allocations.end()) { return cudaErrorInvalidValue; }
    g_allocations.erase(it);
    free(devPtr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind) {
    if (count > 0) { memmove(dst, src, count); }
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
