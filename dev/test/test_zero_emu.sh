#!/usr/bin/env bash
# dev/test/test_zero_cuda.sh (the multi-rank ZeRO tests written for a GPU) on the CPU emulator's
# builds (dev/cuda/emu), under the caller's EMU_SCHEDULE: every stage at N = 2, 3 byte-identical
# to stage 0 with bytes and memory = plan = ZeRO formula (A, 2 steps), stage 3's reshard
# policies and prefetch depths (B), evaluation and sampling (E), and no hangs (G: a rank that
# never starts, a rank killed mid-run). The other sections (accumulation, N vs 1 rank, checkpoints,
# mpirun) take minutes each on two cores: ZERO_CUDA_SECTIONS="C D F" runs them by hand.
# usage: dev/test/test_zero_emu.sh   (make emu)
cd "$(dirname "$0")/../.."
export ZERO_CUDA_BF16=./train_gpt2cu_emu ZERO_CUDA_FP32=./train_gpt2fp32cu_emu
# cuBLASLt's summation order follows each pointer's alignment promise, as a GPU's heuristic may:
# stages stay byte-identical only if every matmul promises the same (llmc/matmul.cuh)
export EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1
export ZERO_CUDA_SECTIONS=${ZERO_CUDA_SECTIONS:-A B E G} ZERO_CUDA_STEPS=${ZERO_CUDA_STEPS:-2}
exec bash dev/test/test_zero_cuda.sh
