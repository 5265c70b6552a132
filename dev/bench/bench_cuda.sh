#!/usr/bin/env bash
# The CUDA trainer's benchmark (issue: GPT-2 124M, T=1024, the largest B that fits, -r 0):
# tokens/s and MFU per batch size, the median over the timed steps (the first steps warm up).
#   dev/bench/bench_cuda.sh [logdir] [steps]       (default: log_bench_cuda, 12 steps)
# Tries B = 64, 48, 32, 16, 8 and reports each that fits; the largest that fits is the figure.
# Needs train_gpt2cu (make train_gpt2cu), gpt2_124M_bf16.bin and the tiny Shakespeare data.
# The environment may change what runs (dev/gpu_check.sh does; --emu runs the emulated trainer):
# BENCH_TRAINER (./train_gpt2cu), BENCH_MODEL (gpt2_124M_bf16.bin), BENCH_T (1024),
# BENCH_BATCHES ("64 48 32 16 8"), BENCH_ARGS (more trainer flags, e.g. -j FILE).
set -u
cd "$(dirname "$0")/../.."
logdir=${1:-log_bench_cuda}
steps=${2:-12}
mkdir -p "$logdir"
model=${BENCH_MODEL:-gpt2_124M_bf16.bin}
trainer=${BENCH_TRAINER:-./train_gpt2cu} T=${BENCH_T:-1024}
read -r -a extra <<< "${BENCH_ARGS:-}"
[ -x "$trainer" ] || { echo "bench_cuda: $trainer is missing (make $(basename "$trainer"))"; exit 1; }
[ -f "$model" ] || { echo "bench_cuda: $model is missing (python3 train_gpt2.py)"; exit 1; }
echo "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
printf "%-4s %-8s %12s %8s %12s %s\n" B status "tok/s" "MFU %" "GPU MB" log
for B in ${BENCH_BATCHES:-64 48 32 16 8}; do
    log="$logdir/bench_B$B.log"
    "$trainer" -e "$model" -b "$B" -t "$T" -r 0 -x "$steps" -v 0 -s 0 "${extra[@]}" >"$log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        printf "%-4s %-8s %12s %8s %12s %s\n" "$B" "rc=$rc" - - - "$log ($(tail -1 "$log" | cut -c1-80))"
        continue
    fi
    # step lines: "... (123.4 ms, 456789 tok/s, MFU 51.2%, GPU memory 12345 MB)"; skip the first 2 (warm-up)
    read -r toks mfu mem < <(grep '^step' "$log" | tail -n +3 | sed -E 's/.*ms, ([0-9]+) tok\/s(, MFU ([0-9.]+)%)?, GPU memory ([0-9]+) MB.*/\1 \3 \4/' |
        sort -n | awk '{t[NR]=$1; m[NR]=($2==""?"n/a":$2); g[NR]=$3} END {i=int((NR+1)/2); print t[i], m[i], g[i]}')
    printf "%-4s %-8s %12s %8s %12s %s\n" "$B" ok "$toks" "$mfu" "$mem" "$log"
done
