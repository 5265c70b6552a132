#!/usr/bin/env bash
# One line per message under mpirun, always. Every rank of a job that fails on its flags prints
# the same error at the same moment; mpirun forwards each rank's stderr as the bytes arrive, so a
# message written in pieces (prefix, text, newline: three writes on an unbuffered stderr) can run
# into another rank's: "[rank 1] error: [rank 2] error: flag ...". llmc/utils.h's fail() writes
# each line with one write(2). The check: 4 ranks fail at once, ROUNDS times (default 12, ~1 s
# each); every line that holds "error:" must be exactly "[rank r] error: <the message>".
# A mutant fail() that writes the line in three pieces interleaves within a few rounds on two
# shared cores (so the check can fail: see the report of the change that added it).
# usage: dev/test/test_error_lines.sh [ROUNDS]   (TRAIN=./train_gpt2cu_emu for the CUDA trainer)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
TRAIN=${TRAIN:-./train_gpt2}
ROUNDS=${1:-12}
if ! command -v mpirun >/dev/null; then bad "mpirun not found: install openmpi-bin"; summary error_lines; exit 1; fi
# -zr without -z 3: refused by parse_args on every rank, before anything else is set up
msg="flag -zr applies only to -z 3 (got -z 1)"
broken=0; lines=0; ranks_seen=""
for round in $(seq "$ROUNDS"); do
    timeout 120 mpirun -np 4 "$TRAIN" -z 1 -zr always > "$tmp/out.txt" 2>&1
    while IFS= read -r line; do
        lines=$((lines + 1))
        if [[ "$line" =~ ^\[rank\ ([0-3])\]\ error:\ (.*)$ ]] && [ "${BASH_REMATCH[2]}" = "$msg" ]; then
            ranks_seen="$ranks_seen ${BASH_REMATCH[1]}"
        else
            broken=$((broken + 1)); echo "     round $round, a broken line: $line"
        fi
    done < <(grep "error:" "$tmp/out.txt")
done
if [ "$lines" -ge "$ROUNDS" ] && [ "$broken" -eq 0 ]; then
    ok "$ROUNDS rounds of 4 ranks failing at once: all $lines error lines whole (ranks seen:$(tr ' ' '\n' <<< "$ranks_seen" | sort -u | tr '\n' ' '))"
else bad "$ROUNDS rounds: $broken of $lines error lines broken (or fewer lines than rounds)"; fi
summary error_lines
