// BROKEN: the kernel builds mma's A fragment with registers a1 and a2 swapped (it assumes register 1 holds columns 8-15 of row groupID, where the PTX ISA puts row groupID + 8, columns 0-7 there); the emulator follows the ISA's layout, so the 16x8x16 product is wrong and the program prints "result: WRONG" and exits 1.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__device__ uint32_t pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    uint16_t l, h;
    memcpy(&l, &lo, 2);
    memcpy(&h, &hi, 2);
    return (uint32_t)l | ((uint32_t)h << 16);
}

// D (16, 8) = A (16, 16) @ B (16, 8), all row-major, one warp
__global__ void one_tile(const __nv_bfloat16* A, const __nv_bfloat16* B, float* D) {
    int lane = threadIdx.x, g = lane >> 2, t = lane % 4;
    uint32_t a[4], b[2];
    a[0] = pack2(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
    a[1] = pack2(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]); // BUG: the ISA's a2,a3 are row g+8, columns 2t, 2t+1
    a[2] = pack2(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
    a[3] = pack2(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
    b[0] = pack2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    b[1] = pack2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    float d[4];
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
    for (int i = 0; i < 4; i++) { D[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)] = d[i]; }
}

int main() {
    __nv_bfloat16 hA[16 * 16], hB[16 * 8];
    float hD[16 * 8];
    for (int i = 0; i < 16 * 16; i++) { hA[i] = __float2bfloat16((float)(i % 7 - 3)); }
    for (int i = 0; i < 16 * 8; i++) { hB[i] = __float2bfloat16((float)(i % 5 - 2)); }
    __nv_bfloat16 *dA, *dB;
    float* dD;
    cudaMalloc(&dA, sizeof(hA));
    cudaMalloc(&dB, sizeof(hB));
    cudaMalloc(&dD, sizeof(hD));
    cudaMemcpy(dA, hA, sizeof(hA), cudaMemcpyHostToDevice);
    cudaMemcpy(dB, hB, sizeof(hB), cudaMemcpyHostToDevice);
    one_tile<<<1, 32>>>(dA, dB, dD);
    cudaMemcpy(hD, dD, sizeof(hD), cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 8; j++) {
            float want = 0.0f; // small integers: exact in any order
            for (int k = 0; k < 16; k++) { want += __bfloat162float(hA[i * 16 + k]) * __bfloat162float(hB[k * 8 + j]); }
            wrong += hD[i * 8 + j] != want;
        }
    }
    printf("result: %s (%d of 128 elements differ from the CPU's product)\n", wrong ? "WRONG" : "right", wrong);
    return wrong ? 1 : 0;
}
