#!/usr/bin/env bash
# The ZeRO stages side by side on the CUDA trainer: per stage on N ranks, tokens/s, step time,
# the time collectives ran on the communication stream ("comm busy"), the share of it hidden
# behind compute, memory per rank, and bytes moved per step (nccl-tests' bus bytes).
#   dev/bench/bench_zero_cuda.sh [N] [logdir]      (default N = number of GPUs, at least 2)
# Env: BENCH_MODEL (gpt2_124M_bf16.bin), BENCH_B (8), BENCH_T (1024), BENCH_STEPS (10),
# BENCH_TRAINER (./train_gpt2cu; dev/gpu_check.sh --emu: ./train_gpt2cu_emu).
# Ranks start as N processes (-pn/-pr/-pi fs), rank r on GPU r % GPUs, each with its own
# NCCL_HOSTID, so N may exceed the GPUs (then they share, and only memory and bytes mean anything).
#
# Hidden share = 1 - exposed / busy, where exposed = t(stage, N ranks) - t(1 rank, same B): the
# time a step takes beyond the same per-GPU work without any communication. It needs one GPU per
# rank; with shared GPUs the script prints "n/a".
set -u
cd "$(dirname "$0")/../.."
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
N=${1:-$(( gpus > 2 ? gpus : 2 ))}
logdir=${2:-log_bench_zero_cuda}
model=${BENCH_MODEL:-gpt2_124M_bf16.bin}
B=${BENCH_B:-8} T=${BENCH_T:-1024} steps=${BENCH_STEPS:-10}
mkdir -p "$logdir"
trainer=${BENCH_TRAINER:-./train_gpt2cu}
[ -x "$trainer" ] || { echo "bench_zero_cuda: $trainer is missing (make $(basename "$trainer"))"; exit 1; }
[ -f "$model" ] || { echo "bench_zero_cuda: $model is missing (python3 train_gpt2.py)"; exit 1; }

# launch NAME N ARGS...: N ranks, rank 0's log in $logdir/NAME.log
launch() {
    local name=$1 n=$2; shift 2
    local pids=() r procs
    rm -rf "$logdir/rdv_$name"
    for ((r = 0; r < n; r++)); do
        procs=(); [ "$n" -gt 1 ] && procs=(-pn "$n" -pr "$r" -pi fs -pf "$logdir/rdv_$name")
        NCCL_HOSTID="bench-$name-$r" "$trainer" -e "$model" -b "$B" -t "$T" -r 0 -x "$steps" -v 0 -s 0 "${procs[@]}" "$@" \
            > "$logdir/$name$([ $r -gt 0 ] && echo ".r$r").log" 2>&1 &
        pids+=($!)
    done
    local rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    return $rc
}
# median over the steps after the first two (warm-up) of a field: ms, busy
median_of() { # median_of LOG REGEX   (the regex captures one number)
    grep '^step' "$1" | tail -n +3 | sed -nE "s/$2/\1/p" | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'
}

echo "machine: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1), $gpus GPU(s); $N ranks; $model B=$B T=$T"
launch one 1 -z 0 || echo "the 1-rank baseline failed: $logdir/one.log"
t1=$(median_of "$logdir/one.log" '.*\(([0-9.]+) ms,.*')
printf "%-16s %10s %10s %10s %8s %12s %14s %14s\n" config "tok/s" "step ms" "busy ms" hidden "MB/rank" "RS bytes" "AG bytes"
printf "%-16s %10s %10s %10s %8s %12s %14s %14s\n" "1 rank" "$(median_of "$logdir/one.log" '.*ms, ([0-9]+) tok\/s.*')" "$t1" - - \
    "$(sed -nE 's/^GPU memory allocated per rank: max ([0-9.]+) MB.*/\1/p' "$logdir/one.log")" - -
for cfg in "0" "1" "2" "3 default 1" "3 always 1" "3 never 0"; do
    set -- $cfg
    name=z$1${2:+_$2_$3}
    args=(-z "$1"); [ $# -gt 1 ] && args+=(-zr "$2" -zp "$3")
    if ! launch "$name" "$N" "${args[@]}"; then printf "%-16s failed: %s\n" "$name" "$logdir/$name.log"; continue; fi
    log="$logdir/$name.log"
    ms=$(median_of "$log" '.*\(([0-9.]+) ms,.*')
    busy=$(median_of "$log" '.*comm stream busy ([0-9.]+) ms.*')
    hidden=n/a
    if [ "$gpus" -ge "$N" ] && [ "$ms" != "-" ] && [ "$t1" != "-" ] && [ "$busy" != "-" ]; then
        hidden=$(awk -v t="$ms" -v t1="$t1" -v b="$busy" 'BEGIN { e = t - t1; if (e < 0) e = 0; h = b > 0 ? 1 - e / b : 1; if (h < 0) h = 0; printf "%.0f%%", 100 * h }')
    fi
    read -r rs ag < <(grep '^step' "$log" | tail -1 | sed -nE 's/.*reduce-scatter ([0-9]+) all-gather ([0-9]+).*/\1 \2/p')
    printf "%-16s %10s %10s %10s %8s %12s %14s %14s\n" "$name" "$(median_of "$log" '.*ms, ([0-9]+) tok\/s.*')" "$ms" "$busy" "$hidden" \
        "$(sed -nE 's/^GPU memory allocated per rank: max ([0-9.]+) MB.*/\1/p' "$log")" "${rs:--}" "${ag:--}"
done
[ "$gpus" -ge "$N" ] || echo "note: $N ranks share $gpus GPU(s): times are not meaningful, memory per rank and bytes are"
echo "logs: $logdir"
