#!/usr/bin/env bash
# The docs are true by construction: every start-up table, step line and sample output in
# README.md, DESIGN.md and the dev/*/README.md files the README's text moved to sits under a marker
# naming the command that produces it, and dev/test/doc_samples.py runs each command (the tiny
# model, a few steps, the CPU trainer and the emulated CUDA trainer) and compares the sample with
# the output field by field, timings aside; a benchmark table too slow to rerun has its plan
# columns compared with dev/bench/zero_plan_print.
# An unmarked block of trainer output, or a line count in the prose, fails too.
# usage: dev/test/test_doc_samples.sh   (from anywhere; needs make references and make data first)
set -u
cd "$(dirname "$0")/../.."
for f in gpt2_124M.bin gpt2_tiny.bin dev/data/tinyshakespeare/tiny_shakespeare_val.bin; do
    [ -f "$f" ] || { echo "doc samples: $f missing (make data references makes it)"; echo "doc samples: 0 passed, 1 failed"; exit 1; }
done
make -s train_gpt2 dev/bench/zero_plan_print >/dev/null || { echo "doc samples: 0 passed, 1 failed (make)"; exit 1; }
export OMP_NUM_THREADS=1
/usr/bin/python3 dev/test/doc_samples.py README.md DESIGN.md dev/bench/README.md dev/cuda/README.md dev/test/README.md dev/data/README.md dev/scripts/README.md
