// BROKEN (stream order, NCCL): a collective on the communication stream reads a buffer the compute stream writes, or writes what the compute stream then reads, with no event between the streams (one rank); with EMU_CHECK=1 the emulator must exit 86 with a "streams:" message naming the collective and the other op, their streams and lines, under every EMU_SCHEDULE. Argument "send": the compute stream writes the gradients, ncclAllReduce on the communication stream reduces them; "recv": ncclAllGather writes the gathered buffer, a copy on the compute stream reads it.
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#define N 1024 // floats

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "send";
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
    float *grads, *sum, *copy;
    cudaMalloc(&grads, N * sizeof(float));
    cudaMalloc(&sum, N * sizeof(float));
    cudaMalloc(&copy, N * sizeof(float));
    cudaMemset(grads, 0, N * sizeof(float));
    cudaMemset(sum, 0, N * sizeof(float));
    cudaDeviceSynchronize();
    if (strcmp(how, "send") == 0) {
        cudaMemsetAsync(grads, 0, N * sizeof(float), compute);                 // BUG-send-write
        ncclAllReduce(grads, sum, N, ncclFloat, ncclSum, comm, comms);          // BUG-send-collective
    } else if (strcmp(how, "recv") == 0) {
        ncclAllGather(grads, sum, N, ncclFloat, comm, comms);                   // BUG-recv-collective
        cudaMemcpyAsync(copy, sum, N * sizeof(float), cudaMemcpyDeviceToDevice, compute); // BUG-recv-read
    } else {
        fprintf(stderr, "usage: nccl_unordered [send|recv]\n");
        return 2;
    }
    cudaDeviceSynchronize();
    ncclCommDestroy(comm);
    printf("nccl_unordered %s: done\n", how);
    return 0;
}
