// CORRECT: stream semantics the emulator must honour under EMU_SCHEDULE=lazy, eager and random: the legacy default stream's implicit synchronization with blocking streams (cudaMemcpy/cudaMemset/kernels on stream 0), a cudaStreamNonBlocking stream not ordered with it (no deadlock; under lazy the unsynchronized read is stale), event record/query/synchronize, cudaEventElapsedTime (cudaErrorNotReady before completion under lazy, cudaErrorInvalidResourceHandle with cudaEventDisableTiming or an unrecorded event), cudaStreamQuery, pageable cudaMemcpyAsync sources staged at the call, work of a destroyed stream still done. Must exit 0 and print "stream_semantics_ok passed", also with EMU_CHECK=1 (without the deliberately unordered read).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1024

static int failures = 0;
#define EXPECT(cond, ...) \
    do { if (!(cond)) { printf("FAIL line %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

__global__ void set_to(float* x, float base) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { x[i] = base + i; }
}

__global__ void twice(const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { y[i] = 2.0f * x[i]; }
}

static float h[N];

// every h[i] == a * i + b
static bool all_equal(float a, float b) {
    for (int i = 0; i < N; i++) {
        if (h[i] != a * i + b) { return false; }
    }
    return true;
}

static const char* E(cudaError_t e) { return cudaGetErrorName(e); }

int main() {
    const char* sched = getenv("EMU_SCHEDULE");
    bool lazy = sched == nullptr || strcmp(sched, "lazy") == 0, eager = sched != nullptr && strcmp(sched, "eager") == 0;
    const char* check = getenv("EMU_CHECK");
    bool checked = check != nullptr && strcmp(check, "0") != 0;
    float *x, *y;
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&y, N * sizeof(float));
    cudaStream_t s1, nb;
    cudaStreamCreate(&s1);
    cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);

    // 1. the legacy default stream and a blocking stream, both ways
    set_to<<<N / 256, 256, 0, s1>>>(x, 10.0f);
    cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost); // waits for s1's kernel
    EXPECT(all_equal(1, 10), "cudaMemcpy on stream 0 after a kernel on a blocking stream: h[1] = %g", h[1]);

    cudaMemset(x, 0, N * sizeof(float)); // stream 0, asynchronous for device memory
    twice<<<N / 256, 256, 0, s1>>>(x, y); // waits for the memset
    cudaStreamSynchronize(s1);
    cudaMemcpy(h, y, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT(all_equal(0, 0), "a kernel on a blocking stream after cudaMemset on stream 0: h[1] = %g", h[1]);

    set_to<<<N / 256, 256, 0, s1>>>(x, 20.0f);
    twice<<<N / 256, 256>>>(x, y); // stream 0 waits for s1
    set_to<<<N / 256, 256, 0, s1>>>(x, 30.0f); // s1 waits for stream 0's kernel (which read x)
    cudaDeviceSynchronize();
    cudaMemcpy(h, y, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT(all_equal(2, 40), "kernel on stream 0 between kernels on a blocking stream: h[1] = %g", h[1]);
    cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT(all_equal(1, 30), "the last kernel on s1: h[1] = %g", h[1]);

    // 2. a non-blocking stream is not ordered with stream 0: no deadlock, and under lazy a read
    // on stream 0 that does not wait for it sees the old bytes
    set_to<<<N / 256, 256, 0, nb>>>(x, 40.0f);
    if (!checked) { // that read races with the kernel by design: EMU_CHECK=1 reports it (stream_order_copies nonblocking)
        cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost);
        if (lazy) { EXPECT(all_equal(1, 30), "under lazy, stream 0 must not wait for a non-blocking stream: h[1] = %g", h[1]); }
    }
    cudaStreamSynchronize(nb);
    cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT(all_equal(1, 40), "after cudaStreamSynchronize(nb): h[1] = %g", h[1]);
    set_to<<<N / 256, 256>>>(y, 1.0f); // stream 0 work, then a non-blocking stream's: both finish
    set_to<<<N / 256, 256, 0, nb>>>(x, 2.0f);
    cudaDeviceSynchronize();
    cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT(all_equal(1, 2), "after cudaDeviceSynchronize: h[1] = %g", h[1]);

    // 3. events
    cudaEvent_t ev, never, start, stop, untimed;
    cudaEventCreate(&ev);
    cudaEventCreate(&never);
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming);
    EXPECT(cudaEventQuery(never) == cudaSuccess, "a never-recorded event counts as complete");
    set_to<<<N / 256, 256, 0, s1>>>(x, 50.0f);
    cudaEventRecord(ev, s1);
    cudaError_t q = cudaEventQuery(ev);
    EXPECT(q == cudaSuccess || q == cudaErrorNotReady, "cudaEventQuery: %s", E(q));
    if (lazy) { EXPECT(q == cudaErrorNotReady, "under lazy the query must find the kernel pending: %s", E(q)); }
    if (eager) { EXPECT(q == cudaSuccess, "under eager the kernel has run: %s", E(q)); }
    EXPECT(cudaGetLastError() == q, "the query's answer is the last error");
    EXPECT(cudaEventSynchronize(ev) == cudaSuccess, "cudaEventSynchronize");
    EXPECT(cudaEventQuery(ev) == cudaSuccess, "cudaEventQuery after cudaEventSynchronize");
    cudaMemcpyAsync(h, x, sizeof(h), cudaMemcpyDeviceToHost, s1); // pageable destination: returns when done
    EXPECT(all_equal(1, 50), "cudaMemcpyAsync to pageable memory is complete on return: h[1] = %g", h[1]);

    // 4. cudaEventElapsedTime
    float ms = -1.0f;
    EXPECT(cudaEventElapsedTime(&ms, start, stop) == cudaErrorInvalidResourceHandle, "elapsed time of unrecorded events");
    cudaGetLastError();
    cudaEventRecord(start, s1);
    cudaEventRecord(untimed, s1);
    set_to<<<N / 256, 256, 0, s1>>>(x, 60.0f);
    cudaEventRecord(stop, s1);
    cudaError_t e = cudaEventElapsedTime(&ms, start, stop);
    if (lazy) { EXPECT(e == cudaErrorNotReady, "under lazy, elapsed time before the events completed: %s", E(e)); }
    else { EXPECT(e == cudaSuccess || e == cudaErrorNotReady, "elapsed time before a sync: %s", E(e)); }
    cudaGetLastError();
    cudaEventSynchronize(stop);
    e = cudaEventElapsedTime(&ms, start, stop);
    EXPECT(e == cudaSuccess && ms >= 0.0f, "elapsed time after the sync: %s, %g ms", E(e), ms);
    e = cudaEventElapsedTime(&ms, untimed, stop);
    EXPECT(e == cudaErrorInvalidResourceHandle, "elapsed time with cudaEventDisableTiming: %s", E(e));
    EXPECT(cudaGetLastError() == cudaErrorInvalidResourceHandle, "that error is the last error");

    // 5. cudaStreamQuery
    cudaStream_t empty;
    cudaStreamCreate(&empty);
    EXPECT(cudaStreamQuery(empty) == cudaSuccess, "an empty stream is complete");
    set_to<<<N / 256, 256, 0, s1>>>(x, 70.0f);
    q = cudaStreamQuery(s1);
    if (lazy) { EXPECT(q == cudaErrorNotReady, "under lazy, a stream with a queued kernel: %s", E(q)); }
    else { EXPECT(q == cudaSuccess || q == cudaErrorNotReady, "cudaStreamQuery: %s", E(q)); }
    cudaGetLastError();
    cudaStreamSynchronize(s1);
    EXPECT(cudaStreamQuery(s1) == cudaSuccess, "cudaStreamQuery after cudaStreamSynchronize");

    // 6. a pageable source of cudaMemcpyAsync may be reused as soon as the call returns
    for (int i = 0; i < N; i++) { h[i] = 3.0f * i; }
    cudaMemcpyAsync(x, h, sizeof(h), cudaMemcpyHostToDevice, s1);
    for (int i = 0; i < N; i++) { h[i] = -1.0f; }
    cudaStreamSynchronize(s1);
    cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT(all_equal(3, 0), "pageable source staged at the call: h[1] = %g", h[1]);

    // 7. a destroyed stream's queued work still runs
    cudaStream_t gone;
    cudaStreamCreate(&gone);
    set_to<<<N / 256, 256, 0, gone>>>(y, 80.0f);
    EXPECT(cudaStreamDestroy(gone) == cudaSuccess, "cudaStreamDestroy");
    cudaDeviceSynchronize();
    cudaMemcpy(h, y, sizeof(h), cudaMemcpyDeviceToHost);
    EXPECT(all_equal(1, 80), "the work of a destroyed stream: h[1] = %g", h[1]);

    EXPECT(cudaGetLastError() == cudaSuccess, "a stray error at the end");
    if (failures) {
        printf("stream_semantics_ok: %d failures\n", failures);
        return 1;
    }
    printf("stream_semantics_ok passed\n");
    return 0;
}
