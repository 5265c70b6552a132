#!/usr/bin/env bash
# Installs what gpt2-zero needs on a fresh Debian machine (run as root): the C toolchain,
# OpenMPI, Node.js with npm (for the GPT-2 BPE package), and Debian's PyTorch, NumPy and
# Matplotlib for the reference model and plots. OpenBLAS matters: without it numpy and torch
# use the reference BLAS and run ~40x slower. Packages already installed are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES="gcc make nodejs npm libopenmpi-dev openmpi-bin python3-torch python3-numpy python3-matplotlib libopenblas0-pthread"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing
fi
npm ci --no-audit --no-fund --loglevel=error
echo "dependencies ready"
