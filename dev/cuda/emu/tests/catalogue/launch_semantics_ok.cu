// CORRECT: launches with nvcc's call semantics: arguments converted to the parameter types (a long and a size_t for int parameters, a double for a float, an int for a bool), template arguments deduced from the arguments (and a default template argument), an overloaded kernel name resolved by the argument types, a parameter pack, an unnamed parameter, a launch through a function pointer; results compared with values computed on the host; must exit 0 and print "launch_semantics_ok passed" under every EMU_THREAD_ORDER and EMU_CHECK=1. Also compiles with nvcc -arch=sm_80 and sm_90.
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdio.h>

__global__ void fill(float* x, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] = v + (float)i; }
}

template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] += a * x[i]; }
}

template <int N = 4, typename T>
__global__ void times(T* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] *= (T)N; }
}

// one name, two kernels: the argument types choose
__global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] += 1.0f; }
}
__global__ void add_one(int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] += 1; }
}

template <typename... Ts>
__global__ void sum_args(float* out, Ts... xs) {
    if (threadIdx.x == 0 && blockIdx.x == 0) { out[0] = (0.0f + ... + (float)xs); }
}

__global__ void flag(int* out, bool on, int) { // the last parameter is unnamed
    if (threadIdx.x == 0) { out[0] = on ? 7 : 3; }
}

static int failures = 0;
static void expect(bool ok, const char* what) {
    if (!ok) {
        printf("launch_semantics_ok: WRONG %s\n", what);
        failures++;
    }
}

int main() {
    const int n = 100;
    float *x, *y, *s;
    int *k, *f;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    cudaMalloc(&s, sizeof(float));
    cudaMalloc(&k, n * sizeof(int));
    cudaMalloc(&f, sizeof(int));
    long n_long = n;
    size_t n_size = n;
    fill<<<(n + 31) / 32, 32>>>(x, n_long, 1.5);   // long -> int, double -> float
    fill<<<(n + 31) / 32, 32>>>(y, n_size, 0);     // size_t -> int, int -> float
    axpy<<<(n + 31) / 32, 32>>>(2.0f, x, y, n_size); // T = float, deduced
    times<<<(n + 31) / 32, 32>>>(y, n);             // N = 4 (default), T = float
    times<3><<<(n + 31) / 32, 32>>>(y, n_long);     // N = 3, T = float
    add_one<<<(n + 31) / 32, 32>>>(y, n);           // the float* overload
    cudaMemset(k, 0, n * sizeof(int));
    add_one<<<(n + 31) / 32, 32>>>(k, n_long);      // the int* overload
    sum_args<<<1, 1>>>(s, 1, 2.5, 3.0f, 4L);        // Ts = int, double, float, long
    void (*kernel)(int*, bool, int) = flag;
    kernel<<<1, 32>>>(f, 1, 0);                     // a function pointer; int -> bool
    float hy[n], hs;
    int hk[n], hf;
    cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
    cudaMemcpy(hk, k, sizeof(hk), cudaMemcpyDeviceToHost);
    cudaMemcpy(&hs, s, sizeof(hs), cudaMemcpyDeviceToHost);
    cudaMemcpy(&hf, f, sizeof(hf), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++) {
        float want = (0.0f + (float)i + 2.0f * (1.5f + (float)i)) * 4.0f * 3.0f + 1.0f; // exact in fp32 for i < 100
        if (hy[i] != want) {
            printf("launch_semantics_ok: WRONG y[%d] = %g, expected %g\n", i, hy[i], want);
            failures++;
            break;
        }
        if (hk[i] != 1) {
            printf("launch_semantics_ok: WRONG k[%d] = %d, expected 1\n", i, hk[i]);
            failures++;
            break;
        }
    }
    expect(hs == 10.5f, "sum_args(1, 2.5, 3.0f, 4L) != 10.5");
    expect(hf == 7, "flag through a function pointer");
    expect(cudaGetLastError() == cudaSuccess, "a launch error");
    if (failures == 0) { printf("launch_semantics_ok passed\n"); }
    return failures == 0 ? 0 : 1;
}
