// BROKEN: device memory used after cudaFree; the emulator must exit 86 with a message containing "freed": mode "arg" passes the freed pointer as a kernel argument (caught at the launch), mode "indirect" passes it inside a struct (caught when the kernel reads it), mode "memcpy" copies from it with cudaMemcpy.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

__global__ void sum(const float* in, float* out, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) { s += in[i]; }
    *out = s;
}

struct View { const float* data; int n; };

__global__ void sum_view(View v, float* out) {
    float s = 0.0f;
    for (int i = 0; i < v.n; i++) { s += v.data[i]; } // BUG-indirect-read: the read of freed memory
    *out = s;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "arg";
    const int n = 256;
    float *d_in, *d_out, h[n];
    for (int i = 0; i < n; i++) { h[i] = 1.0f; }
    cudaMalloc(&d_in, n * sizeof(float));
    cudaMalloc(&d_out, sizeof(float));
    cudaMemcpy(d_in, h, sizeof(h), cudaMemcpyHostToDevice);
    cudaFree(d_in);
    if (strcmp(mode, "arg") == 0) {
        sum<<<1, 1>>>(d_in, d_out, n); // BUG-arg: d_in was freed above
    } else if (strcmp(mode, "indirect") == 0) {
        View v{d_in, n};
        sum_view<<<1, 1>>>(v, d_out); // BUG-indirect: the struct holds the freed pointer
    } else {
        cudaMemcpy(h, d_in, sizeof(h), cudaMemcpyDeviceToHost); // BUG-memcpy: a copy from freed memory
    }
    float s = 0.0f;
    cudaMemcpy(&s, d_out, sizeof(float), cudaMemcpyDeviceToHost);
    printf("the emulator did not catch the use after free (%g)\n", s);
    return 0;
}
