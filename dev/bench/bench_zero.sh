#!/usr/bin/env bash
# The ZeRO stages side by side on the CPU trainer: each stage at N ranks on one machine, a few
# steps each; prints step time, tok/s, the memory each rank allocated per category and their sum
# (the model state, which the tests hold to the plan), the measured peak RSS per rank, and the
# bytes each rank sent per step. Communication is memory copies here, so the
# times say what the bookkeeping costs, not what a network would.
# usage: dev/bench/bench_zero.sh [model=gpt2_124M.bin] [ranks="1 2 4"] [steps=4]
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${1:-gpt2_124M.bin}
RANKS=${2:-1 2 4}
STEPS=${3:-4}
[ -f "$MODEL" ] || { echo "no $MODEL: run 'make references' first"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # mpirun refuses root without them
command -v mpirun >/dev/null || { echo "mpirun not found: install openmpi-bin"; exit 1; }
make -s train_gpt2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cores=$(nproc)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf "%-2s %-5s | %9s %8s | %10s %10s %10s %10s %10s | %9s | %12s %12s\n" N stage "ms/step" "tok/s" \
    "params MB" "grads MB" "optim MB" "buffers MB" "state MB" "RSS MB" "RS MB/step" "AG MB/step"
for N in $RANKS; do
    threads=$(( cores / N > 0 ? cores / N : 1 ))
    for z in 0 1 2 3; do
        OMP_NUM_THREADS=$threads mpirun --bind-to none -np "$N" ./train_gpt2 -e "$MODEL" -b 4 -t 64 -x "$STEPS" -v 0 -s 0 -z "$z" > "$log" 2>&1 \
            || { echo "N=$N z=$z failed:"; tail -3 "$log"; continue; }
        python3 - "$N" "$z" "$log" <<'PY'
import re, sys
N, z, text = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
mem = {row: int(m.group(1)) for row in ("params", "grads", "optimizer", "gather buffers")
       for m in [re.search(r"^%s\s*\|\s*(\d+)" % row, text, re.M)]}
times = [float(t) for t in re.findall(r"^step .*\(([0-9.]+) ms", text, re.M)][1:]
tokens = int(re.search(r"\((\d+) tokens\)", text).group(1))
sent = re.findall(r"reduce-scatter (\d+) all-gather (\d+)", text)
rs, ag = map(int, sent[-1]) if sent else (0, 0)
rss = float(re.search(r"peak RSS per rank: max ([0-9.]+) MB", text).group(1))
ms = sum(times) / len(times) if times else 0.0
MB = 1048576
print("%-2s %-5s | %9.0f %8.0f | %10.1f %10.1f %10.1f %10.1f %10.1f | %9.1f | %12.1f %12.1f" % (
    N, z, ms, tokens / ms * 1000 if ms else 0, mem["params"] / MB, mem["grads"] / MB, mem["optimizer"] / MB,
    mem["gather buffers"] / MB, sum(mem.values()) / MB, rss, rs / MB, ag / MB))
PY
    done
done
echo "(ms/step: mean over steps 2..$STEPS; $cores cores shared by the ranks; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
