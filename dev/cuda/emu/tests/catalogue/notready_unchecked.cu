// DOCUMENTED BEHAVIOUR: polling cudaEventQuery until cudaSuccess leaves cudaErrorNotReady as the thread's last error (as the CUDA runtime does), so a launch check with cudaGetLastError() right after the loop reports cudaErrorNotReady although the launch was fine; after clearing it the launch check is clean. Run under EMU_SCHEDULE=lazy (the query then certainly finds the work pending); exit 0 and "notready_unchecked passed" when the emulator behaves so.
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void busy(float* x) { x[threadIdx.x] = 2.0f * threadIdx.x; }

static int failures = 0;
#define EXPECT(cond, ...) \
    do { if (!(cond)) { printf("FAIL line %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

int main() {
    float* d;
    cudaMalloc(&d, 64 * sizeof(float));
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaEvent_t done;
    cudaEventCreate(&done);
    EXPECT(cudaGetLastError() == cudaSuccess, "setup");

    busy<<<1, 64, 0, s>>>(d);
    cudaEventRecord(done, s);
    int polls = 0;
    cudaError_t q;
    while ((q = cudaEventQuery(done)) != cudaSuccess) {
        EXPECT(q == cudaErrorNotReady, "cudaEventQuery: %s", cudaGetErrorName(q));
        if (q != cudaErrorNotReady || ++polls > 1000) { break; }
    }
    printf("cudaEventQuery answered cudaErrorNotReady %d times\n", polls);
    EXPECT(polls > 0, "under lazy the first query must find the kernel pending");
    EXPECT(cudaPeekAtLastError() == cudaErrorNotReady, "cudaPeekAtLastError after polling");
    EXPECT(cudaPeekAtLastError() == cudaErrorNotReady, "cudaPeekAtLastError does not clear");

    busy<<<1, 64, 0, s>>>(d); // a correct launch
    cudaError_t check = cudaGetLastError(); // BUG: the unchecked polling's cudaErrorNotReady shows up here
    printf("launch check after polling: %s\n", cudaGetErrorName(check));
    EXPECT(check == cudaErrorNotReady, "expected the kept cudaErrorNotReady, got %s", cudaGetErrorName(check));
    EXPECT(cudaGetLastError() == cudaSuccess, "cudaGetLastError clears the last error");

    // the right way: clear the error the polling leaves, then check the launch
    busy<<<1, 64, 0, s>>>(d);
    cudaEventRecord(done, s);
    while ((q = cudaEventQuery(done)) == cudaErrorNotReady) {}
    EXPECT(q == cudaSuccess, "cudaEventQuery: %s", cudaGetErrorName(q));
    (void)cudaGetLastError(); // clears cudaErrorNotReady
    busy<<<1, 64, 0, s>>>(d);
    check = cudaGetLastError();
    printf("launch check after clearing: %s\n", cudaGetErrorName(check));
    EXPECT(check == cudaSuccess, "after clearing, the launch check must be clean: %s", cudaGetErrorName(check));

    // cudaStreamQuery leaves it too
    busy<<<1, 64, 0, s>>>(d);
    q = cudaStreamQuery(s);
    EXPECT(q == cudaErrorNotReady, "cudaStreamQuery with a pending kernel under lazy: %s", cudaGetErrorName(q));
    EXPECT(cudaGetLastError() == cudaErrorNotReady, "cudaStreamQuery's cudaErrorNotReady is the last error");
    cudaStreamSynchronize(s);
    EXPECT(cudaStreamQuery(s) == cudaSuccess, "cudaStreamQuery after the sync");
    EXPECT(cudaGetLastError() == cudaSuccess, "nothing left at the end");
    if (failures) { printf("notready_unchecked: %d failures\n", failures); return 1; }
    printf("notready_unchecked passed\n");
    return 0;
}
