#!/usr/bin/env bash
# CPU training speed: train_gpt2 on GPT-2 124M, B=4, T=64 (llm.c's CPU reference config),
# a few steps; prints the median ms/step and tok/s over the steps after the first two (the
# first touches fresh memory: page faults, optimizer state allocation).
# usage: dev/bench/bench_cpu.sh [steps=10] [threads=nproc]     (needs gpt2_124M.bin: make references)
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${1:-10}
THREADS=${2:-$(nproc)}
[ -f gpt2_124M.bin ] || { echo "no gpt2_124M.bin: run 'make references' first"; exit 1; }
make -s train_gpt2
log=$(mktemp)
OMP_NUM_THREADS=$THREADS ./train_gpt2 -e gpt2_124M.bin -b 4 -t 64 -x "$STEPS" -v 0 -s 0 | tee "$log" | grep '^step' || true
grep -o '([0-9.]* ms' "$log" | tr -d '(' | awk '{print $1}' | tail -n +3 | sort -n | awk -v threads="$THREADS" '
    { t[NR] = $1 }
    END {
        if (NR == 0) { print "no timed steps (need steps > 2)"; exit 1 }
        med = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
        printf "GPT-2 124M, B=4, T=64, %d threads: median %.0f ms/step, %.0f tok/s (%d steps)\n", threads, med, 256000 / med, NR
        printf "llm.c plain-C reference on this machine kind: ~5900 ms/step -> %.1fx faster\n", 5900 / med
    }'
rm -f "$log"
grep -m1 "model name" /proc/cpuinfo | sed 's/^/cpu: /'
