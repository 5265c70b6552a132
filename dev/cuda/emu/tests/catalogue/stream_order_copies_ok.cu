// CORRECT (stream order, copies and memsets): stream_order_copies.cu's exchanges, each ordered: an event (cudaEventRecord on A, cudaStreamWaitEvent on B) both ways, disjoint halves of one allocation written by two streams at once (as the trainers' slabs are), a blocking stream and the legacy default stream (implicit synchronization, both ways), a non-blocking stream waited for with cudaStreamSynchronize, the host waiting through cudaEventQuery polling. Must exit 0 with "stream_order_copies_ok passed" and no "cuda-emu:" line under EMU_CHECK=1 and every EMU_SCHEDULE.
#include <cuda_runtime.h>
#include <stdio.h>

#define N 4096 // bytes

int main() {
    cudaStream_t a, b, nb;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    char *x, *y;
    cudaMalloc(&x, N);
    cudaMalloc(&y, N);
    cudaMemset(x, 1, N);
    cudaMemset(y, 2, N);
    cudaDeviceSynchronize();
    static char h[N];
    int failures = 0;

    // write on A, read on B: B waits for A's event
    cudaMemsetAsync(x, 3, N, a);
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(b, e, 0);
    cudaMemcpyAsync(y, x, N, cudaMemcpyDeviceToDevice, b);
    // read on B, then write on A: A waits for B's event (the event may be recorded again at once)
    cudaEventRecord(e, b);
    cudaStreamWaitEvent(a, e, 0);
    cudaMemsetAsync(x, 4, N, a);
    // disjoint halves of one allocation, at once (after both streams' work above)
    cudaDeviceSynchronize();
    cudaMemsetAsync(x, 5, N / 2, a);
    cudaMemsetAsync(x + N / 2, 6, N / 2, b);
    cudaDeviceSynchronize();
    cudaMemcpy(h, y, N, cudaMemcpyDeviceToHost);
    failures += h[0] != 3;
    cudaMemcpy(h, x, N, cudaMemcpyDeviceToHost);
    failures += h[0] != 5 || h[N - 1] != 6;

    // a blocking stream and the legacy default stream order each other
    cudaMemsetAsync(x, 9, N, a);
    cudaMemcpy(h, x, N, cudaMemcpyDeviceToHost); // stream 0 waits for A, the host for the copy
    failures += h[7] != 9;
    cudaMemsetAsync(y, 10, N, 0);
    cudaMemcpyAsync(x, y, N, cudaMemcpyDeviceToDevice, b); // B waits for stream 0
    // a non-blocking stream, ordered through the host both ways
    cudaStreamSynchronize(b); // y's readers and writers so far are done, and the host knows it
    cudaMemsetAsync(y, 11, N, nb);
    cudaStreamSynchronize(nb);
    cudaMemcpy(h, y, N, cudaMemcpyDeviceToHost);
    failures += h[7] != 11;
    // the host learns through polling that the work is done
    cudaMemsetAsync(y, 12, N, a);
    cudaEventRecord(e, a);
    while (cudaEventQuery(e) == cudaErrorNotReady) {}
    cudaMemcpyAsync(x, y, N, cudaMemcpyDeviceToDevice, nb); // ordered after the memset through the host
    cudaStreamSynchronize(nb);
    cudaMemcpy(h, x, N, cudaMemcpyDeviceToHost);
    failures += h[7] != 12;
    (void)cudaGetLastError(); // the polling's cudaErrorNotReady
    if (failures) {
        printf("stream_order_copies_ok: %d wrong values\n", failures);
        return 1;
    }
    printf("stream_order_copies_ok passed\n");
    return 0;
}
