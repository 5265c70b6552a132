// BROKEN (stream order, cuBLASLt): a cublasLtMatmul on one stream reads an operand that another stream writes, or writes what another stream reads, with nothing ordering them; with EMU_CHECK=1 the emulator must exit 86 with a "streams:" message naming the product and the other op, their streams and lines, under every EMU_SCHEDULE. Argument "input": stream A fills matrix A, the product on stream B reads it; "output": the product on A writes D, a copy on B reads D.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define M 8 // every matrix is 8 x 8, fp32, column-major

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
    cublasStatus_t st = cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heuristic.algo, NULL, 0, s); // BUG-product
    if (found == 0 || st != CUBLAS_STATUS_SUCCESS) { printf("cublasLtMatmul failed (%d)\n", (int)st); }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
}

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "input";
    cublasLtCreate(&lt);
    cudaStream_t a, b;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    float *ma, *mb, *d, *copy;
    cudaMalloc(&ma, M * M * sizeof(float));
    cudaMalloc(&mb, M * M * sizeof(float));
    cudaMalloc(&d, M * M * sizeof(float));
    cudaMalloc(&copy, M * M * sizeof(float));
    cudaMemset(ma, 0, M * M * sizeof(float));
    cudaMemset(mb, 0, M * M * sizeof(float));
    cudaMemset(d, 0, M * M * sizeof(float));
    cudaDeviceSynchronize();
    if (strcmp(how, "input") == 0) {
        cudaMemsetAsync(ma, 0, M * M * sizeof(float), a); // BUG-input-write
        matmul(b, d, M, ma, mb);                           // B does not wait for A
    } else if (strcmp(how, "output") == 0) {
        matmul(a, d, M, ma, mb);
        cudaMemcpyAsync(copy, d, M * M * sizeof(float), cudaMemcpyDeviceToDevice, b); // BUG-output-read
    } else {
        fprintf(stderr, "usage: cublaslt_unordered [input|output]\n");
        return 2;
    }
    cudaDeviceSynchronize();
    printf("cublaslt_unordered %s: done\n", how);
    return 0;
}
