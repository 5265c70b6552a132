#!/usr/bin/env bash
# Runs every test of `make test` and ends with one line "N passed, N failed" (the sum of the
# checks of all test programs; a program that dies without its own summary counts as 1 failed).
# `run_tests.sh check` (make check) runs the quick tier instead: one test from every level, a
# few minutes, for while you work; `make test` (everything, ~30 min) before a merge, and in CI.
set -u
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
total_passed=0; total_failed=0
# the user + system seconds of every finished child so far: bash's `times` (its second line), run
# in this shell (in $(...) it would count the subshell's children), so that each section's line
# says how much of its time used the cores: where to look when CI time is to be trimmed
cpu_file=$(mktemp); trap 'rm -f "$cpu_file"' EXIT
cpu_seconds() {
    awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); t += a[1] * 60 + a[2] } printf "%d\n", t }' "$cpu_file"
}
run_test() { # run_test NAME COMMAND...
    local name=$1; shift
    echo "=== $name: $*"
    local start=$SECONDS out rc cpu0 cpu1
    times > "$cpu_file"; cpu0=$(cpu_seconds)
    out=$("$@" 2>&1); rc=$?
    times > "$cpu_file"; cpu1=$(cpu_seconds)
    printf '%s\n' "$out"
    local summary p f
    summary=$(printf '%s\n' "$out" | grep -Eo '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -n "$summary" ]; then
        p=${summary%% passed*}; f=${summary#*, }; f=${f%% failed*}
    else
        p=0; f=1
    fi
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # a crash after a clean summary still fails
    total_passed=$((total_passed + p)); total_failed=$((total_failed + f))
    echo "=== $name: exit $rc, $p passed, $f failed, $((SECONDS - start)) s (CPU $((cpu1 - cpu0)) s)"
}
finish() { echo "$total_passed passed, $total_failed failed"; [ $total_failed -eq 0 ]; exit; }

if [ "${1:-}" = check ]; then # the quick tier: one test from every level
    run_test "test_gpt2 (tiny vs PyTorch)" ./test_gpt2 gpt2_tiny
    run_test "bad input" bash dev/test/test_bad_input.sh
    run_test "stage 3 = stage 0 on 2 ranks (CPU, emulated CUDA)" bash dev/test/test_stages_2ranks.sh
    if [ -x ./dev/cuda/test_kernels_fp32_emu ]; then
        run_test "emulated CUDA kernels: the layernorm family (fp32)" env EMU_THREADS=2 ./dev/cuda/test_kernels_fp32_emu --only layernorm
    else echo "=== emulated CUDA kernels skipped: no dev/cuda/test_kernels_fp32_emu (CUDA headers not found when building)"; fi
    finish
elif [ $# -gt 0 ]; then
    echo "usage: $0 [check]   (no argument: every test; check: the quick tier)"; exit 2
fi
run_test "test_gpt2 (GPT-2 124M vs PyTorch)" ./test_gpt2 gpt2_124M
run_test "test_gpt2 (tiny vs PyTorch)" ./test_gpt2 gpt2_tiny
run_test "sharding plan and sampler" ./dev/test/test_zero_plan
run_test "bad input" bash dev/test/test_bad_input.sh
run_test "train_gpt2 command line" bash dev/test/test_train_cli.sh
run_test "activation recompute -r 0/1/2 (CPU)" bash dev/test/test_recompute.sh
run_test "-z auto (CPU)" bash dev/test/test_zero_auto.sh
run_test "unit size -zu K (CPU)" env UNIT_SIZE_SECTIONS="A B C" bash dev/test/test_unit_size.sh
run_test "OpenAI's GPT-2 weights from safetensors (synthetic files)" bash dev/test/test_openai_weights.sh
run_test "FineWeb prep (local parquet fixture: decode, resume, bad input, trainer)" bash dev/test/test_fineweb.sh
run_test "the GPT-2 recipe, shrunk (fixture data, 2 ranks, a failure resumed, Slurm on the emulator)" bash dev/test/test_recipe.sh
run_test "HellaSwag (prep fixture, known answers, PyTorch, ranks, emulated CUDA)" bash dev/test/test_hellaswag.sh
run_test "bf16 tolerances vs a PyTorch twin of the rounding (tiny)" bash dev/test/test_bf16_bounds.sh
run_test "the reduce-scatter over MPI (order, memory)" bash dev/test/test_mpi_comm.sh
run_test "ZeRO stages over MPI" bash dev/test/test_zero.sh
run_test "one whole line per error message when every rank fails at once" bash dev/test/test_error_lines.sh
run_test "hybrid sharding -zg over MPI sub-communicators" bash dev/test/test_hybrid.sh
run_test "rendezvous without mpirun (fs, tcp)" bash dev/test/test_rendezvous.sh
run_test "NCCL found where GPU images keep it (Makefile)" bash dev/test/test_build_detect.sh
run_test "stage comparison and plots" bash dev/test/test_compare.sh
run_test "README and DESIGN.md samples = fresh runs (fields, not timings)" bash dev/test/test_doc_samples.sh
run_test "the docs' figures = the tree; the first hour as root; old and mutated figures fail (~75 s)" bash dev/test/test_doc_figures.sh --mutants
run_test "checkpoints and resume" bash dev/test/test_checkpoint.sh
run_test "faults: hangs, deaths, slow and full disk, corrupt checkpoints" bash dev/test/test_faults.sh
run_test "one job at a time in an output dir (lock)" bash dev/test/test_outdir_lock.sh
run_test "ASan + UBSan" bash dev/test/test_sanitizers.sh
run_test "fuzzing the loaders (libFuzzer, 15 s each)" bash dev/test/fuzz_loaders.sh 15
# CUDA: built by `make test` when nvcc exists. Without a GPU, what runs is the kernels' per-element
# math on the host and the CUDA trainer's input checks; dev/gpu_check.sh runs the rest on a GPU.
if [ -x ./train_gpt2cu ]; then
    run_test "CUDA attention math (host)" ./dev/test/test_attention_host
    run_test "bf16 attention on tensor cores: PTX and ptxas spills (sm_80, sm_90)" bash dev/test/test_attention_ptx.sh
    run_test "CUDA layernorm, encoder, GELU math (host)" ./dev/test/test_layers_host
    run_test "CUDA classifier, AdamW, norm math (host)" ./dev/test/test_update_host
    run_test "16-byte kernels: PTX vector loads and stores, no spills (nvcc, ptxas)" bash dev/test/test_ptx_16byte.sh
    run_test "train_gpt2cu bad input" env TRAIN_GPT2=./train_gpt2cu bash dev/test/test_bad_input.sh
else
    echo "=== CUDA tests skipped: no train_gpt2cu (nvcc not found when building)"
fi
# The CUDA code on the CPU emulator (dev/cuda/emu, built by `make emu`): the emulator's own
# checks, then our unchanged kernels, trainer and ZeRO stages under its schedules.
if [ -x ./train_gpt2cu_emu ]; then
    run_test "emulator: broken programs caught" bash dev/cuda/emu/tests/test_catalogue.sh
    run_test "emulator: cuBLASLt subset" bash dev/cuda/emu/tests/cublaslt_test.sh
    run_test "emulator: nvcc's fma contraction modelled (--fmad=true|false, EMU_FMAD), against nvcc's PTX" bash dev/cuda/emu/tests/fmad_test.sh
    run_test "emulator: NCCL across processes" env EMU_RUNTIME_SRCS="dev/cuda/emu/runtime.cpp dev/cuda/emu/streams.cpp dev/cuda/emu/kernel.cpp dev/cuda/emu/ptx.cpp dev/cuda/emu/check.cpp" bash dev/cuda/emu/tests/nccl_test.sh
    run_test "emulated CUDA kernels (fp32, threads forward)" env EMU_THREADS=2 ./dev/cuda/test_kernels_fp32_emu
    run_test "emulated CUDA kernels (fp32, threads reverse)" env EMU_THREADS=2 EMU_THREAD_ORDER=reverse ./dev/cuda/test_kernels_fp32_emu
    # EMU_CHECK=1 (memcheck, initcheck, racecheck of every load and store, the stream-order check, EMU_PROTECT) on the bf16
    # kernels and test_gpt2cu, in the builds with the access hooks (dev/cuda/emu/README.md); the
    # fp32 kernels under it (make dev/cuda/test_kernels_fp32_emu_check) would add ~75 s here
    run_test "emulated CUDA kernels (bf16, threads forward)" env EMU_THREADS=2 ./dev/cuda/test_kernels_emu
    run_test "emulated CUDA kernels (bf16, threads random, EMU_CHECK=1)" env EMU_THREADS=2 EMU_THREAD_ORDER=random EMU_SEED=3 EMU_CHECK=1 ./dev/cuda/test_kernels_emu_check
    run_test "emulated CUDA kernels (fp32, ASan, random schedule)" env EMU_THREADS=2 EMU_SCHEDULE=random ./dev/cuda/test_kernels_fp32_emu_asan
    run_test "emulated test_gpt2cu (tiny vs PyTorch, bf16, random schedule, EMU_CHECK=1 incl. stream order)" env EMU_THREADS=2 EMU_SCHEDULE=random EMU_CHECK=1 ./test_gpt2cu_emu_check gpt2_tiny
    # the trainer under EMU_CHECK=1: 2 ranks, stage 3, offload, eval, sampling, checkpoint and resume,
    # and one step with 64-channel heads (~2 min CPU; 6.7 min wall measured at load 13)
    run_test "emulated trainer under EMU_CHECK=1 (2 ranks, resume, 64-channel heads)" bash dev/test/test_emu_check.sh
    # fp32: one run under ASan with device memory protected and cuBLASLt's algorithms picked by
    # alignment (these were two runs of the same program). ASan makes it ~4x slower than a plain
    # build (250 s against 60 here), 60% of it in part 6's stage matrix: that takes 2 steps here
    # (every stage's code path runs at steps 1 and 2), and its 4 in the EMU_CHECK run above
    run_test "emulated test_gpt2cu (tiny vs PyTorch, fp32, ASan, device memory protected, algorithms by alignment, stages over 2 steps)" env EMU_THREADS=2 EMU_PROTECT=1 EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1 ./test_gpt2fp32cu_emu_asan gpt2_tiny 10 2
    run_test "emulated CUDA trainer = CPU trainer (random schedule)" env EMU_SCHEDULE=random EMU_SEED=11 bash dev/test/test_emu_trainer.sh
    run_test "sampling at length: 300 tokens, tiny and d12, = the CPU model's draws (emulated CUDA)" bash dev/test/test_sample.sh
    run_test "emulated ZeRO stages over NCCL (eager schedule, stream-order check)" env EMU_SCHEDULE=eager EMU_CHECK_STREAMS=1 bash dev/test/test_zero_emu.sh
    run_test "emulated optimizer offload -zo 1 (random schedule, stream-order check)" env EMU_SCHEDULE=random EMU_SEED=3 EMU_CHECK_STREAMS=1 bash dev/test/test_offload_emu.sh
    # EMU_FMAD=1: device code contracted into fma as nvcc's default does (dev/cuda/emu/README.md,
    # "Contraction"); the claims of bits between host and device code must hold there too
    run_test "emulated CUDA kernels (fp32, EMU_FMAD=1: contracted as nvcc does)" env EMU_FMAD=1 EMU_THREADS=2 ./dev/cuda/test_kernels_fp32_emu_fmad
    run_test "emulated optimizer offload -zo 1 = no offload, EMU_FMAD=1 (sections A, B)" env EMU_FMAD=1 OFFLOAD_SECTIONS="A B" OFFLOAD_BF16=./train_gpt2cu_emu_fmad OFFLOAD_FP32=./train_gpt2fp32cu_emu_fmad EMU_SCHEDULE=random EMU_SEED=5 bash dev/test/test_offload_emu.sh
    run_test "emulated launches and host syncs per step, 16-byte alignment refused" bash dev/test/test_step_sync.sh
    # -cg 1 = -cg 0 bitwise (bf16, fp32), its refusals; the stream-capture rules on the emulator (~1.5 min CPU together)
    run_test "emulator: stream capture and graphs (CUDA's rules, the calls a capture forbids named)" bash dev/cuda/emu/tests/graph_test.sh
    run_test "CUDA graph step -cg 1 = the plain step (emulated, bf16 and fp32), its refusals" bash dev/test/test_cuda_graph.sh
    run_test "-z auto (emulated CUDA)" env TRAIN=./train_gpt2cu_emu EMU_THREADS=2 bash dev/test/test_zero_auto.sh
    run_test "emulated hybrid sharding -zg over ncclCommSplit (fp32)" bash dev/test/test_hybrid_cuda.sh ./train_gpt2fp32cu_emu
    run_test "unit size -zu K (emulated CUDA, fp32 and bf16)" env UNIT_SIZE_SECTIONS=D bash dev/test/test_unit_size.sh
    run_test "gradient dtype -zd bf16|fp32 (emulated CUDA)" bash dev/test/test_reduce_dtype.sh
    run_test "the ZeRO knobs combined: -zg x -zu (CPU and emulated CUDA), -zd fp32 x -zg, -zo 1 x -zu, -zo 1 x -zg" bash dev/test/test_knob_matrix.sh
    run_test "emulated train_gpt2cu bad input" env TRAIN_GPT2=./train_gpt2cu_emu bash dev/test/test_bad_input.sh
    run_test "emulated start-up: srun/PMI variables with -pn flags, comm stream priority" bash dev/test/test_comm_start.sh
    run_test "performance model: counts from the traced step vs theory, occupancy, plan (~1-2 min)" ${PYTHON:-/usr/bin/python3} dev/perf/test_perf_model.py
    run_test "emulated NCCL error in a -zg split ends a wait on the world at once" bash dev/test/test_comm_errors.sh
    # the GPU check itself, every part and path on the emulated builds at tiny shapes (~3 min); its
    # first checks are the first GPU run's findings: sampling at length, -zo 1's bits under nvcc's
    # contraction (EMU_FMAD=1), bench_cuda.sh at a B whose batch outgrows the val file
    run_test "dev/gpu_check.sh --emu (the GPU run's parts and paths on the emulator)" bash -c 'rm -rf log_gpu_check_emu && dev/gpu_check.sh --emu log_gpu_check_emu'
else
    echo "=== emulated CUDA tests skipped: no train_gpt2cu_emu (CUDA headers not found when building)"
fi
finish
