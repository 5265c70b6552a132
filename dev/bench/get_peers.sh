#!/usr/bin/env bash
# Fills peers/ (git-ignored) with the peers' sources that dev/gpu_check.sh builds and times beside
# ours, so that they travel to a GPU machine that has no network (the device tool's `carry`):
#   peers/llm.c            karpathy/llm.c at f1e2ace (the commit measured on the H200 on 2026-11-28):
#                          train_gpt2.cu, llmc/, Makefile, LICENSE (~0.4 MB)
#   peers/cudnn-frontend   NVIDIA/cudnn-frontend's include/ and LICENSE (header-only, ~3.5 MB), for
#                          llm.c's cuDNN flash attention (USE_CUDNN=1)
# usage: dev/bench/get_peers.sh [LLMC_REPO [CUDNN_FRONTEND_REPO]]
#   each REPO a git URL or a local clone (default: the projects' GitHub URLs; needs the network
#   or a local clone). Nothing of the peers is built or changed here; gpu_check.sh builds copies.
set -eu
cd "$(dirname "$0")/../.."
llmc_repo=${1:-https://github.com/karpathy/llm.c}
fe_repo=${2:-https://github.com/NVIDIA/cudnn-frontend}
LLMC_COMMIT=f1e2ace
FE_REF=${CUDNN_FRONTEND_REF:-HEAD} # the H200 run used the headers current on 2026-11-28 (3929da2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# export PATHS... of REPO at REF into peers/NAME
export_tree() {
    local repo=$1 ref=$2 name=$3; shift 3
    if [ -d "$repo/.git" ] || [ -f "$repo/HEAD" ]; then git -C "$repo" archive "$ref" "$@" > "$tmp/$name.tar"
    else git clone -q --filter=blob:none --no-checkout "$repo" "$tmp/$name.git" && git -C "$tmp/$name.git" archive "$ref" "$@" > "$tmp/$name.tar"; fi
    rm -rf "peers/$name" && mkdir -p "peers/$name" && tar -xf "$tmp/$name.tar" -C "peers/$name"
    echo "peers/$name: $repo at $(git -C "$repo" rev-parse --short "$ref" 2>/dev/null || git -C "$tmp/$name.git" rev-parse --short "$ref")"
}
export_tree "$llmc_repo" "$LLMC_COMMIT" llm.c train_gpt2.cu llmc Makefile LICENSE
export_tree "$fe_repo" "$FE_REF" cudnn-frontend include LICENSE.txt
du -sh peers
