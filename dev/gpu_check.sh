#!/usr/bin/env bash
# The one command for a machine with a GPU: build the CUDA targets, make the PyTorch reference
# files if missing, test every kernel and the whole trainer in both precisions, benchmark, and
# print a short table last. Works offline with no installs (needs nvcc, a python3 with torch for
# the reference files, and the tokenized data: `make data` here, or carry
# dev/data/tinyshakespeare/ and gpt2_tokenizer.bin along).
#   dev/gpu_check.sh LOGDIR [all|one|multi]
# `one` runs the one-GPU checks and benchmark, `multi` the ZeRO stages on several ranks (test and
# benchmark): two calls that each fit a 10-minute device slot; `all` (default) runs both.
set -u
cd "$(dirname "$0")/.."
logdir=${1:?usage: dev/gpu_check.sh LOGDIR [all|one|multi]}
part=${2:-all}
case "$part" in all|one|multi) ;; *) echo "dev/gpu_check.sh: the part must be all, one or multi, got '$part'"; exit 2 ;; esac
one() { [ "$part" != multi ]; }
multi() { [ "$part" != one ]; }
mkdir -p "$logdir"
declare -a names results
record() { names+=("$1"); results+=("$2"); }
run() { # run NAME LOGFILE CMD...: records PASS/FAIL (with the last summary line) from the exit status
    local name=$1 log=$2; shift 2
    echo "== $name: $*" | tee -a "$logdir/gpu_check.log"
    "$@" >"$log" 2>&1
    local rc=$?
    local summary
    summary=$(grep -E "passed, [0-9]+ failed" "$log" | tail -1)
    [ -z "$summary" ] && summary=$(tail -1 "$log" | cut -c1-100)
    if [ $rc -eq 0 ]; then record "$name" "PASS  $summary"; else record "$name" "FAIL (rc $rc)  $summary  [$log]"; fi
    echo "   rc $rc: $summary" | tee -a "$logdir/gpu_check.log"
}

# the machine
{
    echo "date: $(date -u)"
    nvidia-smi -L 2>&1 || echo "nvidia-smi not found"
    command -v nvcc >/dev/null && nvcc --version | tail -2 || /usr/local/cuda/bin/nvcc --version | tail -2
    if command -v mpirun >/dev/null; then echo "mpirun: $(mpirun --version 2>&1 | head -1)"; else echo "mpirun: not found (multi-rank tests run without MPI)"; fi
} 2>&1 | tee "$logdir/machine.txt"

# a python with torch: the plain python3 on the lent machines, Debian's /usr/bin/python3 here
PY=""
for p in python3 /usr/bin/python3; do
    if "$p" -c "import torch" >/dev/null 2>&1; then PY=$p; break; fi
done

# build (GPU_COMPUTE_CAPABILITY from the device when nvidia-smi can tell, else sm_80 + sm_90)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
jobs=$(nproc 2>/dev/null || echo 4)
run "build (make cuda)" "$logdir/build.log" make -j"$jobs" cuda dev/cuda/test_kernels dev/cuda/test_kernels_fp32 ${cc:+GPU_COMPUTE_CAPABILITY=$cc}

# the reference files (train_gpt2.py writes them from the tokenized val data)
if [ ! -f gpt2_124M_debug_state.bin ] || [ ! -f gpt2_tiny_debug_state.bin ]; then
    if [ ! -f dev/data/tinyshakespeare/tiny_shakespeare_val.bin ]; then
        record "reference files" "FAIL  dev/data/tinyshakespeare/*.bin missing: run make data where npm works and carry them"
    elif [ -z "$PY" ]; then
        record "reference files" "FAIL  no python3 with torch found"
    else
        run "reference files (124M)" "$logdir/ref_124M.log" "$PY" train_gpt2.py --model d12
        run "reference files (tiny)" "$logdir/ref_tiny.log" "$PY" train_gpt2.py --model tiny
    fi
fi

if one; then
# every kernel against its CPU twin, and twice for the same bits
run "kernels fp32" "$logdir/kernels_fp32.log" ./dev/cuda/test_kernels_fp32
run "kernels bf16" "$logdir/kernels_bf16.log" ./dev/cuda/test_kernels
# the whole trainer against PyTorch; save -> reload -> continue
for prefix in gpt2_tiny gpt2_124M; do
    run "test_gpt2fp32cu $prefix" "$logdir/test_fp32_$prefix.log" ./test_gpt2fp32cu "$prefix"
    run "test_gpt2cu $prefix" "$logdir/test_bf16_$prefix.log" ./test_gpt2cu "$prefix"
done
# the trainer's command line end to end: a few steps with eval, sampling and a checkpoint, then a resume
run "train_gpt2cu short run" "$logdir/train_short.log" ./train_gpt2cu -e gpt2_124M_bf16.bin -b 4 -t 256 -x 4 -v 2 -m 2 -s 4 -g 16 -n 2 -o "$logdir/run"
run "train_gpt2cu resume" "$logdir/train_resume.log" ./train_gpt2cu -e gpt2_124M_bf16.bin -b 4 -t 256 -x 6 -v 0 -s 0 -y 1 -o "$logdir/run"

# the benchmark
dev/bench/bench_cuda.sh "$logdir/bench" 12 | tee "$logdir/bench.txt"
best=$(awk '$2 == "ok" {print "B=" $1 ": " $3 " tok/s, MFU " $4 "%"; exit}' "$logdir/bench.txt")
kernel_bench="$logdir/kernels_bench.txt"
./dev/cuda/test_kernels --bench >"$kernel_bench" 2>&1 || echo "kernel benchmark failed: see $kernel_bench"
fi
if multi; then
# several ranks on this GPU (-pn, NCCL_HOSTID per rank): every ZeRO stage vs stage 0, bytes, memory
run "ZeRO stages, 2-3 ranks on one GPU" "$logdir/zero_cuda.log" bash dev/test/test_zero_cuda.sh
# the ZeRO stages side by side, 2 ranks on this GPU: memory per rank and bytes (times are shared)
BENCH_STEPS=6 dev/bench/bench_zero_cuda.sh 2 "$logdir/bench_zero" | tee "$logdir/bench_zero.txt"
fi

echo
echo "==== gpu_check summary ($(head -2 "$logdir/machine.txt" | tail -1)) ===="
fails=0
for i in "${!names[@]}"; do
    printf "%-32s %s\n" "${names[$i]}" "${results[$i]}"
    case "${results[$i]}" in FAIL*) fails=$((fails + 1)) ;; esac
done
if one; then
printf "%-32s %s\n" "benchmark (124M, T=1024, -r 0)" "${best:-no batch size fit: see $logdir/bench}"
printf "%-32s %s\n" "kernel times vs floors" "$kernel_bench"
fi
multi && printf "%-32s %s\n" "ZeRO stages, 2 ranks (bench)" "$logdir/bench_zero.txt"
echo "logs: $logdir"
exit $((fails > 0))
