#!/usr/bin/env bash
# Every figure in the prose of README.md, DESIGN.md, dev/cuda/NOTES.md and the dev/*/README.md
# files, regenerated from the tree (dev/test/doc_figures.py says how, and lists them in FIGURES),
# and the first hour as root (run bits, OpenMPI's root variables, files made before use, the
# README's multi-rank example). ~1 min on 2 cores (ptxas for NOTES.md's table: ~30 s of it).
# usage: dev/test/test_doc_figures.sh [--only SUBSTRING]   (from anywhere)
set -u
cd "$(dirname "$0")/../.."
make -s dev/bench/zero_plan_print >/dev/null || { echo "doc figures: 0 passed, 1 failed (make dev/bench/zero_plan_print)"; exit 1; }
/usr/bin/python3 dev/test/doc_figures.py "$@"
