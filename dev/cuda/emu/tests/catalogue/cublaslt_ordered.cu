// CORRECT (stream order, cuBLASLt): cublaslt_unordered.cu's exchanges with an event between the streams, and two products on two streams at once writing the two row halves of one 16 x 8 matrix (leading dimension 16: their columns interleave in memory, their bytes do not overlap, so they need no order). Must exit 0 with "cublaslt_ordered passed" and no "cuda-emu:" line under EMU_CHECK=1 and every EMU_SCHEDULE.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>

#define M 8 // A and B are 8 x 8, fp32, column-major

static cublasLtHandle_t lt;

// D = A B on stream s (D's leading dimension ldd)
static void matmul(cudaStream_t s, float* d, int ldd, const float* a, const float* b) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, M, M);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, M, M, M);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, M, ldd);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint32_t align = 16; // d + 8 floats is 32-byte aligned only
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof(align));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof(align));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof(align));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof(align));
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heuristic, &found);
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st = cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heuristic.algo, NULL, 0, s);
    if (found == 0 || st != CUBLAS_STATUS_SUCCESS) { printf("cublasLtMatmul failed (%d)\n", (int)st); }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
}

int main() {
    cublasLtCreate(&lt);
    cudaStream_t a, b;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    float *ma, *mb, *d, *d2, *copy;
    cudaMalloc(&ma, M * M * sizeof(float));
    cudaMalloc(&mb, M * M * sizeof(float));
    cudaMalloc(&d, M * M * sizeof(float));
    cudaMalloc(&d2, 2 * M * M * sizeof(float)); // 16 x 8
    cudaMalloc(&copy, M * M * sizeof(float));
    static float h[2 * M * M];
    for (int i = 0; i < M * M; i++) { h[i] = (i % M == i / M) ? 2.0f : 0.0f; } // 2 I
    cudaMemcpy(mb, h, M * M * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(d, 0, M * M * sizeof(float));
    cudaDeviceSynchronize();
    for (int i = 0; i < M * M; i++) { h[i] = (float)i; }

    cudaMemcpyAsync(ma, h, M * M * sizeof(float), cudaMemcpyHostToDevice, a); // A: 0, 1, 2, ...
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(b, e, 0);
    matmul(b, d, M, ma, mb);                                                   // D = 2 A on B
    cudaEventRecord(e, b);
    cudaStreamWaitEvent(a, e, 0);
    cudaMemcpyAsync(copy, d, M * M * sizeof(float), cudaMemcpyDeviceToDevice, a);
    // the two row halves of d2 at once
    matmul(a, d2, 2 * M, ma, mb);
    matmul(b, d2 + M, 2 * M, ma, mb);
    cudaDeviceSynchronize();
    int failures = 0;
    cudaMemcpy(h, copy, M * M * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < M * M; i++) { failures += h[i] != 2.0f * i; }
    cudaMemcpy(h, d2, 2 * M * M * sizeof(float), cudaMemcpyDeviceToHost);
    for (int j = 0; j < M; j++) {
        for (int i = 0; i < 2 * M; i++) { failures += h[j * 2 * M + i] != 2.0f * (j * M + i % M); }
    }
    if (failures) {
        printf("cublaslt_ordered: %d wrong values\n", failures);
        return 1;
    }
    printf("cublaslt_ordered passed\n");
    return 0;
}
