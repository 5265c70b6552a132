// Stream capture and graphs on the emulator (dev/cuda/emu/runtime.cpp, "Stream capture"), against
// CUDA's documented semantics (CUDA Programming Guide, "CUDA Graphs": "Stream Capture",
// "Prohibited and Unhandled Operations", "Invalidation"; runtime API cudaStreamBeginCapture,
// cudaGraphInstantiate, cudaGraphLaunch):
//  1. a captured kernel, copy and memset are not run at capture; each launch replays them in
//     captured order with the arguments as captured: a pointer or scalar changed on the host
//     after the capture does not reach the graph (the stale-argument case), a re-capture does;
//  2. a synchronous call during a global-mode capture (cudaMemcpy, cudaStreamSynchronize,
//     cudaMalloc, cudaDeviceSynchronize, cudaEventSynchronize) returns
//     cudaErrorStreamCaptureUnsupported, its warning names the call, and the capture's end
//     returns cudaErrorStreamCaptureInvalidated; the legacy default stream while a blocking stream
//     captures: cudaErrorStreamCaptureImplicit; a wait on an event recorded outside the capture:
//     cudaErrorStreamCaptureIsolation;
//  3. fork/join through events: a side stream that waits on an event recorded in the capture joins
//     it; its work must be joined back (else cudaErrorStreamCaptureUnjoined).
// usage: dev/cuda/emu/tests/graph_test.sh (builds this with nvcc-cpu)
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

static int passed = 0, failed = 0;
static void check(int ok, const char* what) {
    printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    if (ok) { passed++; } else { failed++; }
}

__global__ void axpb_kernel(float* y, const float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = __fmaf_rn(a, x[i], b); }
}

int main() {
    const int n = 64;
    float *x, *y, *y2, *host;
    cudaMalloc((void**)&x, n * sizeof(float));
    cudaMalloc((void**)&y, n * sizeof(float));
    cudaMalloc((void**)&y2, n * sizeof(float));
    cudaMallocHost((void**)&host, n * sizeof(float));
    float init[n];
    for (int i = 0; i < n; i++) { init[i] = (float)i; }
    cudaMemcpy(x, init, sizeof(init), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize(); // a copy from pageable memory may return before it lands; the other streams do not wait for it
    cudaStream_t s, side;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);

    // 1. capture: memset y, y = a*x + b, y copied to pinned host memory
    float a = 2.0f, b = 1.0f;
    float* out = y;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "cudaStreamBeginCapture");
    cudaStreamCaptureStatus status;
    cudaStreamIsCapturing(s, &status);
    check(status == cudaStreamCaptureStatusActive, "cudaStreamIsCapturing: active");
    cudaMemsetAsync(out, 0, n * sizeof(float), s);
    axpb_kernel<<<1, n, 0, s>>>(out, x, a, b, n);
    cudaMemcpyAsync(host, out, n * sizeof(float), cudaMemcpyDeviceToHost, s);
    check(cudaStreamEndCapture(s, &graph) == cudaSuccess, "cudaStreamEndCapture");
    size_t nodes = 0;
    cudaGraphGetNodes(graph, NULL, &nodes);
    check(nodes == 3, "the graph holds 3 nodes (memset, kernel, copy)");
    check(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "cudaGraphInstantiate");
    memset(host, 0, n * sizeof(float));
    cudaStreamSynchronize(s);
    check(host[5] == 0.0f, "nothing ran at capture");
    cudaGraphLaunch(exec, s);
    cudaStreamSynchronize(s);
    check(host[5] == 11.0f, "the launch ran the kernel (2*5+1)");
    // the stale-argument case: the host's a and out change, the graph keeps what it captured
    a = 3.0f;
    out = y2;
    host[5] = 0.0f;
    cudaGraphLaunch(exec, s);
    cudaStreamSynchronize(s);
    check(host[5] == 11.0f, "a second launch: the captured scalar and pointer, not the host's new ones");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    axpb_kernel<<<1, n, 0, s>>>(out, x, a, b, n);
    cudaMemcpyAsync(host, out, n * sizeof(float), cudaMemcpyDeviceToHost, s);
    cudaStreamEndCapture(s, &graph);
    cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphLaunch(exec, s);
    cudaStreamSynchronize(s);
    check(host[5] == 16.0f, "after a re-capture: the new scalar and pointer (3*5+1)");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    // 2. calls a capture forbids: each named, the capture invalidated
    struct { const char* name; int which; } illegal[] = {
        {"cudaMemcpy", 0}, {"cudaStreamSynchronize", 1}, {"cudaMalloc", 2}, {"cudaDeviceSynchronize", 3}, {"cudaEventSynchronize", 4},
    };
    cudaEvent_t ev;
    cudaEventCreate(&ev);
    cudaEventRecord(ev, side);
    for (int k = 0; k < 5; k++) {
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        axpb_kernel<<<1, n, 0, s>>>(y, x, a, b, n);
        cudaError_t e = cudaSuccess;
        void* p = NULL;
        switch (illegal[k].which) {
        case 0: e = cudaMemcpy(host, y, 4, cudaMemcpyDeviceToHost); break;
        case 1: e = cudaStreamSynchronize(s); break;
        case 2: e = cudaMalloc(&p, 256); break;
        case 3: e = cudaDeviceSynchronize(); break;
        case 4: e = cudaEventSynchronize(ev); break;
        }
        cudaError_t end = cudaStreamEndCapture(s, &graph);
        char what[160];
        snprintf(what, sizeof(what), "%s during capture: cudaErrorStreamCaptureUnsupported, then the end: cudaErrorStreamCaptureInvalidated",
                 illegal[k].name);
        check(e == cudaErrorStreamCaptureUnsupported && end == cudaErrorStreamCaptureInvalidated && graph == NULL, what);
        cudaGetLastError();
    }
    cudaStream_t blocking;
    cudaStreamCreate(&blocking);
    cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal);
    axpb_kernel<<<1, n, 0, 0>>>(y, x, a, b, n); // the legacy default stream
    cudaError_t launch = cudaGetLastError();
    check(launch == cudaErrorStreamCaptureImplicit && cudaStreamEndCapture(blocking, &graph) == cudaErrorStreamCaptureInvalidated,
          "a launch on the legacy default stream while a blocking stream captures: cudaErrorStreamCaptureImplicit");
    cudaEventRecord(ev, side);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaError_t iso = cudaStreamWaitEvent(s, ev, 0);
    check(iso == cudaErrorStreamCaptureIsolation && cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated,
          "a capturing stream waits for an event recorded outside: cudaErrorStreamCaptureIsolation");
    cudaGetLastError();

    // 3. fork and join: side computes y2 = x*a + b while s computes y; joined, both in the graph
    cudaEvent_t fork, join;
    cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaEventRecord(fork, s);
    cudaStreamWaitEvent(side, fork, 0);
    axpb_kernel<<<1, n, 0, side>>>(y2, x, 5.0f, 0.0f, n);
    axpb_kernel<<<1, n, 0, s>>>(y, x, 1.0f, 1.0f, n);
    cudaEventRecord(join, side);
    cudaStreamWaitEvent(s, join, 0);
    cudaMemcpyAsync(host, y2, n * sizeof(float), cudaMemcpyDeviceToHost, s);
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    check(end == cudaSuccess, "fork/join capture ends cleanly");
    cudaGraphInstantiate(&exec, graph, 0);
    host[5] = 0.0f;
    cudaGraphLaunch(exec, s);
    cudaStreamSynchronize(s);
    check(host[5] == 25.0f, "the side stream's kernel ran in the graph (5*5)");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaEventRecord(fork, s);
    cudaStreamWaitEvent(side, fork, 0);
    axpb_kernel<<<1, n, 0, side>>>(y2, x, 5.0f, 0.0f, n);
    end = cudaStreamEndCapture(s, &graph);
    check(end == cudaErrorStreamCaptureUnjoined, "a fork never joined back: cudaErrorStreamCaptureUnjoined");
    cudaGetLastError();
    cudaDeviceSynchronize();
    printf("graph_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
