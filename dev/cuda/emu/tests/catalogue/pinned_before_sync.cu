// BROKEN: cudaMemcpyAsync into pinned host memory, and the host reads the buffer before cudaStreamSynchronize; under EMU_SCHEDULE=lazy the host must see the old bytes (the program prints "before the sync: old bytes" and, after the sync, "after the sync: new bytes"). Likewise a pinned source overwritten before the asynchronous copy ran: the device gets the overwritten bytes ("source overwritten"). Exit 1 when either shows; under eager (every op runs when queued) neither shows and the exit status is 0. With EMU_CHECK=1, under every schedule, the early read is fatal (a "streams:" message naming the read's line and the copy's), and with the argument "reuse" (only the second mistake) the overwrite is.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define N 512

int main(int argc, char** argv) {
    bool only_reuse = argc > 1 && strcmp(argv[1], "reuse") == 0;
    cudaStream_t s;
    cudaStreamCreate(&s);
    float *d, *d2, *pinned, *pinned_src;
    cudaMalloc(&d, N * sizeof(float));
    cudaMalloc(&d2, N * sizeof(float));
    cudaMallocHost(&pinned, N * sizeof(float));
    cudaMallocHost(&pinned_src, N * sizeof(float));
    static float h[N];
    for (int i = 0; i < N; i++) { h[i] = 1.0f + i; }
    cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
    for (int i = 0; i < N; i++) { pinned[i] = -1.0f; }
    int bugs = 0;

    // 1. device -> pinned host, read too early
    if (!only_reuse) {
        cudaMemcpyAsync(pinned, d, N * sizeof(float), cudaMemcpyDeviceToHost, s); // BUG-copy-down
        float early = pinned[7]; // BUG-early: read before cudaStreamSynchronize(s)
        if (early == -1.0f) {
            printf("before the sync: old bytes (pinned[7] = %g)\n", early);
            bugs++;
        } else {
            printf("before the sync: the copy had already run (pinned[7] = %g)\n", early);
        }
        cudaStreamSynchronize(s);
        if (pinned[7] == 8.0f) { printf("after the sync: new bytes (pinned[7] = %g)\n", pinned[7]); }
        else { printf("after the sync: WRONG (pinned[7] = %g)\n", pinned[7]); return 2; }
    }

    // 2. pinned host -> device, source reused before the copy ran
    for (int i = 0; i < N; i++) { pinned_src[i] = 5.0f; }
    cudaMemcpyAsync(d2, pinned_src, N * sizeof(float), cudaMemcpyHostToDevice, s); // BUG-copy-up
    for (int i = 0; i < N; i++) { pinned_src[i] = 7.0f; } // BUG-reuse: the copy may not have read it yet
    cudaStreamSynchronize(s);
    cudaMemcpy(h, d2, sizeof(h), cudaMemcpyDeviceToHost);
    if (h[0] == 7.0f) {
        printf("source overwritten: the device got the bytes written after cudaMemcpyAsync (%g, not 5)\n", h[0]);
        bugs++;
    } else {
        printf("source read at the call: the device got %g\n", h[0]);
    }
    cudaFreeHost(pinned);
    cudaFreeHost(pinned_src);
    return bugs ? 1 : 0;
}
