// CORRECT (the host and pinned memory): pinned_before_sync.cu done right: the host reads a pinned destination only after the copy was waited for (cudaStreamSynchronize, cudaEventSynchronize), overwrites a pinned source only after its copy was waited for, and meanwhile touches only bytes the pending copies do not write (other bytes of the same page included) or that they only read. Must exit 0 with "pinned_after_sync passed" and no "cuda-emu:" line under EMU_CHECK=1 and every EMU_SCHEDULE.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define N 1024 // floats: 4 KiB, one page

int main() {
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaEvent_t done;
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    float *d, *pinned, *pinned2;
    cudaMalloc(&d, N * sizeof(float));
    cudaMallocHost(&pinned, N * sizeof(float));
    cudaMallocHost(&pinned2, N * sizeof(float));
    static float h[N];
    for (int i = 0; i < N; i++) { h[i] = 1.0f + i; }
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    for (int i = 0; i < N; i++) { pinned[i] = -1.0f; }
    int failures = 0;

    // device -> pinned: the first 64 floats; the host works on the rest of the page meanwhile
    cudaMemcpyAsync(pinned, d, 64 * sizeof(float), cudaMemcpyDeviceToHost, s);
    float sum = 0.0f;
    for (int i = 64; i < N; i++) { pinned[i] = 2.0f * pinned[i]; } // not the copy's bytes
    cudaStreamSynchronize(s);
    for (int i = 0; i < 64; i++) { sum += pinned[i]; } // 1 + ... + 64
    failures += sum != 2080.0f || pinned[100] != -2.0f;

    // pinned -> device: the host may read the source while the copy is pending, and write it after
    for (int i = 0; i < N; i++) { pinned2[i] = 5.0f; }
    cudaMemcpyAsync(d, pinned2, N * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaEventRecord(done, s);
    float peek = pinned2[3]; // the copy only reads these bytes
    cudaEventSynchronize(done);
    for (int i = 0; i < N; i++) { pinned2[i] = 7.0f; }
    cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    failures += peek != 5.0f || h[0] != 5.0f;

    // host to host between pinned buffers, and a pinned memset (both synchronous)
    cudaMemcpy(pinned, pinned2, N * sizeof(float), cudaMemcpyHostToHost);
    failures += pinned[9] != 7.0f;
    cudaMemset(pinned2, 0, N * sizeof(float));
    failures += pinned2[9] != 0.0f;

    cudaFreeHost(pinned);
    cudaFreeHost(pinned2);
    if (failures) {
        printf("pinned_after_sync: %d wrong values\n", failures);
        return 1;
    }
    printf("pinned_after_sync passed\n");
    return 0;
}
