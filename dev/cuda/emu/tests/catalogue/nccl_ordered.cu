// CORRECT (stream order, NCCL): nccl_unordered.cu with events between the compute and communication streams (as llmc/nccl_comm.cuh orders them), and a reduce-scatter of one half of a gradient slab on the communication stream while the compute stream writes the other half (disjoint bytes of one allocation need no order). One rank. Must exit 0 with "nccl_ordered passed" and no "cuda-emu:" line under EMU_CHECK=1 and every EMU_SCHEDULE.
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>

#define N 1024 // floats

int main() {
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
        printf("ncclCommInitRank failed\n");
        return 2;
    }
    cudaStream_t compute, comms;
    cudaStreamCreate(&compute);
    cudaStreamCreate(&comms);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    float *grads, *sum, *copy;
    cudaMalloc(&grads, N * sizeof(float));
    cudaMalloc(&sum, N * sizeof(float));
    cudaMalloc(&copy, N * sizeof(float));
    cudaMemset(sum, 0, N * sizeof(float));
    cudaDeviceSynchronize();

    cudaMemsetAsync(grads, 0, N * sizeof(float), compute); // zero bits: 0.0f
    cudaEventRecord(e, compute);
    cudaStreamWaitEvent(comms, e, 0);
    ncclAllReduce(grads, sum, N, ncclFloat, ncclSum, comm, comms);
    cudaEventRecord(e, comms);
    cudaStreamWaitEvent(compute, e, 0);
    cudaMemcpyAsync(copy, sum, N * sizeof(float), cudaMemcpyDeviceToDevice, compute);
    // the slab: the collective reduces the first half, the compute stream writes the second
    cudaEventRecord(e, compute);
    cudaStreamWaitEvent(comms, e, 0);
    ncclReduceScatter(grads, sum, N / 2, ncclFloat, ncclSum, comm, comms);
    cudaMemsetAsync(grads + N / 2, 0, N / 2 * sizeof(float), compute);
    cudaDeviceSynchronize();
    static float h[N];
    cudaMemcpy(h, copy, sizeof(h), cudaMemcpyDeviceToHost);
    int failures = 0;
    for (int i = 0; i < N; i++) { failures += h[i] != 0.0f; }
    ncclCommDestroy(comm);
    if (failures) {
        printf("nccl_ordered: %d wrong values\n", failures);
        return 1;
    }
    printf("nccl_ordered passed\n");
    return 0;
}
