// BROKEN: cp.async's rules, one per run: (misaligned) a 16-byte copy from a source 8 bytes off 16-byte alignment; (past-end) a source past the end of its cudaMalloc allocation; (shared-dst) a destination that is not a .shared offset (a global pointer cut to 32 bits); (cg8) .cg with 8 bytes, given as "n" (16 only); (changed) the source rewritten after the copy is issued and before its wait; (same-group) two copies of one group to the same bytes. The emulator must exit 86 naming the line and the rule.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

template <int BYTES> __device__ void copy_cg(void* smem_generic, const void* gmem) {
    uint32_t dst = (uint32_t)__cvta_generic_to_shared(smem_generic);
    asm volatile("cp.async.cg.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(gmem), "n"(BYTES)); // BUG-cg8
}

__global__ void copies(float* src, float* out, int how) {
    __shared__ alignas(16) float s[64];
    int t = threadIdx.x;
    uint32_t dst = (uint32_t)__cvta_generic_to_shared(&s[t * 4]);
    if (how == 0) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + t * 4 + 2)); // BUG-misaligned
    } else if (how == 1) {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 64 + t * 4)); // BUG-past-end
    } else if (how == 2) {
        uint32_t not_shared = (uint32_t)(uintptr_t)(out + t * 4);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(not_shared), "l"(src + t * 4)); // BUG-shared-dst
    } else if (how == 3) {
        copy_cg<8>(&s[t * 4], src + t * 4);
    } else if (how == 4) {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + t * 4)); // BUG-changed-issue
        src[t * 4] = -1.0f;
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(src + t * 4)); // BUG-same-group-a
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(src + t * 4 + 2)); // BUG-same-group-b
    }
    asm volatile("cp.async.wait_all;"); // BUG-changed-wait
    out[t] = s[t * 4];
}

int main(int argc, char** argv) {
    const char* names[] = {"misaligned", "past-end", "shared-dst", "cg8", "changed", "same-group"};
    int how = 0;
    for (int i = 0; i < 6; i++) {
        if (argc > 1 && strcmp(argv[1], names[i]) == 0) { how = i; }
    }
    float *d_src, *d_out;
    cudaMalloc(&d_src, 64 * sizeof(float));
    cudaMalloc(&d_out, 64 * sizeof(float));
    cudaMemset(d_src, 0, 64 * sizeof(float));
    copies<<<1, 16>>>(d_src, d_out, how);
    cudaDeviceSynchronize();
    printf("the emulator did not stop the cp.async (%s)\n", names[how]);
    return 0;
}
