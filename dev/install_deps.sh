#!/usr/bin/env bash
# Installs what gpt2-zero needs on a fresh Debian machine (run as root): the C toolchain (and
# clang for fuzzing),
# OpenMPI, Node.js with npm (for the GPT-2 BPE package), and Debian's PyTorch, NumPy and
# Matplotlib for the reference model and plots. OpenBLAS matters: without it numpy and torch
# use the reference BLAS and run ~40x slower. What is already there is skipped; that is
# judged by the command, not the package name (Node.js from another source brings its own npm,
# and Debian's npm package would conflict with it).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=""
need() { missing="$missing $1"; }
command -v gcc >/dev/null || need gcc
command -v clang >/dev/null || need clang # with libclang-rt-dev: libFuzzer, for dev/test/fuzz_loaders.sh
echo 'int LLVMFuzzerTestOneInput(const char* d, long n) { return (int)(d[0] + n) * 0; }' |
    clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || need libclang-rt-dev
command -v make >/dev/null || need make
command -v strace >/dev/null || need strace # dev/test/test_faults.sh: a slow disk, made by delaying one open
command -v node >/dev/null || need nodejs
command -v npm >/dev/null || need npm
command -v mpicc >/dev/null || need libopenmpi-dev
command -v mpirun >/dev/null || need openmpi-bin
/usr/bin/python3 -c "import torch" 2>/dev/null || need python3-torch
/usr/bin/python3 -c "import numpy" 2>/dev/null || need python3-numpy
/usr/bin/python3 -c "import matplotlib" 2>/dev/null || need python3-matplotlib
dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q "install ok installed" || need libopenblas0-pthread
if [ -n "$missing" ]; then
    echo "installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing
fi
npm ci --no-audit --no-fund --loglevel=error
echo "dependencies ready"
