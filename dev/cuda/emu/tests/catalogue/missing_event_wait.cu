// BROKEN: a kernel on stream A writes a buffer, a kernel and a cudaMemcpyAsync (device to device) on stream B read it, with no cudaEventRecord/cudaStreamWaitEvent between the streams; the emulator's schedules must expose it: under EMU_SCHEDULE=lazy (B is synchronized first) and under random for some EMU_SEED, B reads the old bytes and the program prints "WRONG" and exits 1. With EMU_CHECK=1, under every schedule, the emulator must exit 86 with a "streams:" message naming the writing kernel and a reader on B, both lines and both streams.
// The exchange runs for several rounds (as in a training loop); a round is wrong when B saw
// anything but the bytes A wrote in that round.
#include <cuda_runtime.h>
#include <stdio.h>

#define N 1024
#define ROUNDS 16

__global__ void produce(float* buf, float value) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { buf[i] = value + i; }
}

__global__ void consume(const float* buf, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { out[i] = 2.0f * buf[i]; }
}

int main() {
    cudaStream_t a, b;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    float *buf, *out, *copy;
    cudaMalloc(&buf, N * sizeof(float));
    cudaMalloc(&out, N * sizeof(float));
    cudaMalloc(&copy, N * sizeof(float));
    produce<<<N / 256, 256, 0, a>>>(buf, 0.0f); // the old contents: 0, 1, 2, ...
    cudaDeviceSynchronize();
    static float h_out[N], h_copy[N];
    int wrong_rounds = 0;
    for (int r = 1; r <= ROUNDS; r++) {
        float value = 1000.0f * r;
        produce<<<N / 256, 256, 0, a>>>(buf, value); // BUG-write: the new contents: 1000 r, 1000 r + 1, ...
        // BUG: stream B does not wait for stream A's write (no cudaEventRecord + cudaStreamWaitEvent)
        consume<<<N / 256, 256, 0, b>>>(buf, out);                                   // BUG-read-kernel
        cudaMemcpyAsync(copy, buf, N * sizeof(float), cudaMemcpyDeviceToDevice, b); // BUG-read-copy
        cudaStreamSynchronize(b);
        cudaStreamSynchronize(a);
        cudaMemcpy(h_out, out, sizeof(h_out), cudaMemcpyDeviceToHost);
        cudaMemcpy(h_copy, copy, sizeof(h_copy), cudaMemcpyDeviceToHost);
        int wrong_kernel = 0, wrong_copy = 0;
        for (int i = 0; i < N; i++) {
            if (h_out[i] != 2.0f * (value + i)) { wrong_kernel++; }
            if (h_copy[i] != value + i) { wrong_copy++; }
        }
        if (wrong_kernel || wrong_copy) {
            printf("round %d: kernel on B: out[1] = %g (expected %g), %d wrong; copy on B: copy[1] = %g (expected %g), %d wrong\n",
                   r, h_out[1], 2.0f * (value + 1), wrong_kernel, h_copy[1], value + 1, wrong_copy);
            wrong_rounds++;
        }
    }
    printf("%d of %d rounds wrong\n", wrong_rounds, ROUNDS);
    printf(wrong_rounds ? "result: WRONG\n" : "result: right\n");
    return wrong_rounds ? 1 : 0;
}
