// CORRECT: misaligned_vector.cu with rows starting at in + 4 i (16-byte aligned); float4 and int4 loads pass silently under EMU_CHECK=1, and the sums are right.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void sum4_float(const float* in, float* out) {
    int i = threadIdx.x;
    float4 v = *(const float4*)(in + 4 * i); // FIXED: aligned
    out[i] = v.x + v.y + v.z + v.w;
}

__global__ void sum4_int(const int* in, int* out) {
    int i = threadIdx.x;
    int4 v = *(const int4*)(in + 4 * i);
    out[i] = v.x + v.y + v.z + v.w;
}

int main() {
    const int n = 32;
    static int hi[4 * n];
    static float hf[4 * n];
    for (int i = 0; i < 4 * n; i++) { hi[i] = i, hf[i] = (float)i; }
    int *in_i, *out_i;
    float *in_f, *out_f;
    cudaMalloc(&in_i, sizeof(hi));
    cudaMalloc(&in_f, sizeof(hf));
    cudaMalloc(&out_i, n * sizeof(int));
    cudaMalloc(&out_f, n * sizeof(float));
    cudaMemcpy(in_i, hi, sizeof(hi), cudaMemcpyHostToDevice);
    cudaMemcpy(in_f, hf, sizeof(hf), cudaMemcpyHostToDevice);
    sum4_int<<<1, n>>>(in_i, out_i);
    sum4_float<<<1, n>>>(in_f, out_f);
    int ri[n];
    float rf[n];
    cudaMemcpy(ri, out_i, sizeof(ri), cudaMemcpyDeviceToHost);
    cudaMemcpy(rf, out_f, sizeof(rf), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < n; i++) { bad += ri[i] != 16 * i + 6 || rf[i] != (float)(16 * i + 6); }
    printf("misaligned_vector_fixed: %s\n", bad ? "WRONG" : "right");
    return bad ? 1 : 0;
}
