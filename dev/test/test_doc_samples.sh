#!/usr/bin/env bash
# The docs are true by construction: every start-up table, step line and sample output in
# README.md and DESIGN.md sits under a marker naming the command that produces it, and
# dev/test/doc_samples.py runs each command (the tiny model, a few steps, the CPU trainer and the
# emulated CUDA trainer) and compares the sample with the output field by field, timings aside;
# a benchmark table too slow to rerun has its plan columns compared with dev/bench/zero_plan_print.
# An unmarked block of trainer output, or a line count in the prose, fails too.
set -u
cd "$(dirname "$0")/../.."
make -s train_gpt2 dev/bench/zero_plan_print >/dev/null || { echo "doc samples: 0 passed, 1 failed (make)"; exit 1; }
export OMP_NUM_THREADS=1
/usr/bin/python3 dev/test/doc_samples.py README.md DESIGN.md
