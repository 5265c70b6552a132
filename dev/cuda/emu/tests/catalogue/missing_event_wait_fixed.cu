// CORRECT: missing_event_wait.cu with the cross-stream dependency in place (cudaEventRecord on A, cudaStreamWaitEvent on B); the result must be right under EMU_SCHEDULE=lazy, eager and random with any EMU_SEED (exit 0, "result: right"), and with EMU_CHECK=1 no "cuda-emu:" line.
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
    cudaEvent_t written;
    cudaEventCreateWithFlags(&written, cudaEventDisableTiming);
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
        produce<<<N / 256, 256, 0, a>>>(buf, value); // the new contents: 1000 r, 1000 r + 1, ...
        cudaEventRecord(written, a); // FIXED: B waits for A's write
        cudaStreamWaitEvent(b, written, 0);
        consume<<<N / 256, 256, 0, b>>>(buf, out);
        cudaMemcpyAsync(copy, buf, N * sizeof(float), cudaMemcpyDeviceToDevice, b);
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
