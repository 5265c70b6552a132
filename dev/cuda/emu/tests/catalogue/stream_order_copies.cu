// BROKEN (stream order, copies and memsets): two streams touch one buffer, one of them writing, with nothing ordering them; with EMU_CHECK=1 the emulator must exit 86 with a "streams:" message naming both ops, their streams and lines, under every EMU_SCHEDULE (lazy, eager, random with any seed), whatever ran first. One mistake per argument: write-read (a memset on A, a copy on B reads it), read-write (B copies it out, A overwrites it without waiting for B), write-write (two memsets), nonblocking (a cudaStreamNonBlocking stream writes, a cudaMemcpy on the legacy stream reads: the legacy stream's implicit synchronization does not cover non-blocking streams), wait-before-record (B waits on the event before A records it: the wait is on the earlier record). Without EMU_CHECK the program runs and exits 0 (the data may be stale, silently).
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define N 4096 // bytes

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "write-read";
    cudaStream_t a, b, nb;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    char *x, *y;
    cudaMalloc(&x, N);
    cudaMalloc(&y, N);
    cudaMemset(x, 1, N); // written once, waited for: every read below reads written bytes
    cudaMemset(y, 2, N);
    cudaDeviceSynchronize();
    static char h[N];
    if (strcmp(how, "write-read") == 0) {
        cudaMemsetAsync(x, 3, N, a);                               // BUG-wr-a
        cudaMemcpyAsync(y, x, N, cudaMemcpyDeviceToDevice, b);     // BUG-wr-b: B does not wait for A
    } else if (strcmp(how, "read-write") == 0) {
        cudaMemcpyAsync(y, x, N, cudaMemcpyDeviceToDevice, b);     // BUG-rw-b
        cudaMemsetAsync(x, 4, N, a);                               // BUG-rw-a: A may overwrite x before B read it
    } else if (strcmp(how, "write-write") == 0) {
        cudaMemsetAsync(x, 5, N, a);                               // BUG-ww-a
        cudaMemsetAsync(x + N / 2, 6, N / 2, b);                   // BUG-ww-b: which value is left is up to chance
    } else if (strcmp(how, "nonblocking") == 0) {
        cudaMemsetAsync(x, 7, N, nb);                              // BUG-nb-a
        cudaMemcpy(h, x, N, cudaMemcpyDeviceToHost);               // BUG-nb-b: stream 0 does not wait for nb
    } else if (strcmp(how, "wait-before-record") == 0) {
        cudaStreamWaitEvent(b, e, 0);                              // waits for nothing: e was never recorded
        cudaMemsetAsync(x, 8, N, a);                               // BUG-wbr-a
        cudaEventRecord(e, a);
        cudaMemcpyAsync(y, x, N, cudaMemcpyDeviceToDevice, b);     // BUG-wbr-b
    } else {
        fprintf(stderr, "usage: stream_order_copies [write-read|read-write|write-write|nonblocking|wait-before-record]\n");
        return 2;
    }
    cudaDeviceSynchronize();
    printf("stream_order_copies %s: done\n", how);
    return 0;
}
