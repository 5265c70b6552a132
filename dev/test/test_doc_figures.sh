#!/usr/bin/env bash
# Every figure in the prose of README.md, DESIGN.md, dev/cuda/NOTES.md and the dev/*/README.md
# files, regenerated from the tree (dev/test/doc_figures.py says how, and lists them in FIGURES),
# and the first hour as root (run bits, OpenMPI's root variables, files made before use, the
# README's multi-rank example). --mutants: issue 31's 8 old figures put back, and each checked
# figure's last digit changed, must each fail. ~75 s with --mutants on 2 cores at load average 15
# (ptxas: ~40 s of it). --list-unchecked: the unit figures (MB, ms, %) of NOTES.md and dev/bench,
# dev/scripts' READMEs that nothing checks yet.
# usage: dev/test/test_doc_figures.sh [--only SUBSTRING] [--mutants] [--list-unchecked]   (from anywhere)
set -u
cd "$(dirname "$0")/../.."
make -s dev/bench/zero_plan_print >/dev/null || { echo "doc figures: 0 passed, 1 failed (make dev/bench/zero_plan_print)"; exit 1; }
/usr/bin/python3 dev/test/doc_figures.py "$@"
