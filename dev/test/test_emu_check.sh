#!/usr/bin/env bash
# The CUDA trainer on the emulator under EMU_CHECK=1 (dev/cuda/emu: memcheck, initcheck and
# racecheck of every load and store of our kernels, and device memory protected from host code):
# 2 ranks at ZeRO stage 3 with the optimizer state offloaded (-zo 1), evaluation, sampling, a
# checkpoint at step 2 and a resume from it to step 4, and one step of a model with 64-channel
# heads (the tensor-core attention at GPT-2's head size). Each run must end with status 0 and no
# "cuda-emu:" report on any rank, and give the losses and norms of the same 4 steps run without
# the checks (the checks only watch: they must not change what runs).
# Also, without the checks: -ak 1's memory table counts the sm_90a backward's dQ partial tiles.
# usage: dev/test/test_emu_check.sh [BIN]   (default ./train_gpt2cu_emu_check, the build with the access hooks: make train_gpt2cu_emu_check)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
BIN=${1:-./train_gpt2cu_emu_check}
[ -x "$BIN" ] || { echo "$BIN missing (make train_gpt2cu_emu_check)"; echo "emu_check: 0 passed, 1 failed"; exit 1; }
unset EMU_CHECK EMU_COUNTERS
COMMON=(-e "$MODEL" "${DATA[@]}" -b 2 -t 32 -z 3 -zo 1 -wt 120)

# run NAME ENV... -- ARGS...: 2 ranks into $tmp/ck (one output dir: the resume reads it), rank r's
# output in $tmp/NAME.r<r>.txt
run() {
    local name=$1 envs=() pids=() r rc=0
    shift
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    for r in 1 0; do
        env "${envs[@]}" NCCL_HOSTID="emucheck-$name-$r" timeout 900 "$BIN" "${COMMON[@]}" -o "$tmp/$name.out" \
            -pn 2 -pr $r -pi fs -pf "$tmp/rdv_$name" "$@" > "$tmp/$name.r$r.txt" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    [ $rc -eq 0 ] || { echo "     run $name exited $rc:"; tail -n 3 "$tmp/$name".r*.txt; }
    return $rc
}
# "STEP LOSS NORM" per step printed (the step without its "/total")
steps() { grep -ho 'step *[0-9]*/[0-9]*: train loss [0-9.]* norm [0-9.]*' "$@" | awk '{sub(/\/.*/, "", $2); print $2, $5, $7}'; }
quiet() { ! grep -h '^\(\[rank [0-9]*\] \)\?cuda-emu: ' "$tmp/$1".r*.txt | grep -v 'launch error' | head -3 | grep .; }

run plain EMU_CHECK=0 -- -x 4 -v 2 -s 2 -g 8 || bad "the run without checks failed"
if run checked EMU_CHECK=1 -- -x 2 -v 2 -s 2 -g 8 -n 2 && quiet checked; then
    ok "2 ranks, stage 3, -zo 1, eval, sampling, checkpoint at step 2: no report under EMU_CHECK=1"
else
    bad "the checked run to step 2 (a report or a failure above)"
fi
mv "$tmp/checked.out" "$tmp/resumed.out" 2>/dev/null
if run resumed EMU_CHECK=1 -- -x 4 -v 2 -s 2 -g 8 -y 1 && quiet resumed; then
    ok "the resume from step 2 to step 4: no report under EMU_CHECK=1"
else
    bad "the checked resume (a report or a failure above)"
fi
# A 64-channel head: the tiny model's heads have 16 channels, and the tensor-core attention
# kernels are templates over the head size (HS, llmc/attention.cuh), with per-warp work that grows
# with it: a warp-level race at the head size of GPT-2 (64) cannot show at 16. "d1" is a fresh
# model of one layer with one 64-channel head (C = 64); T = 128 gives two key tiles of 64 rows.
# -ak 1: the sm_90a attention kernels (wgmma, TMA, mbarriers; llmc/attention_sm90.cuh) at that
# head size, which the emulator runs where the build holds sm_90a (the Makefile's 90a).
if run hs64 EMU_CHECK=1 -- -e d1 -b 1 -t 128 -x 1 -v 0 -s 0 -ak 1 && quiet hs64; then
    ok "a 64-channel head (-e d1, T = 128) on the sm_90a attention kernels (-ak 1), one step on 2 ranks: no report under EMU_CHECK=1"
else
    bad "the checked run with 64-channel heads (a report or a failure above)"
fi
# -ak 1's memory: the sm_90a backward keeps dQ's fp32 partial tiles in attention_backward's scratch
# (llmc/attention.cuh), one 128-query x 64-channel tile (32 KB) per (query block, key block <= it)
# of each (b, h), between D (B NH T floats) and the qkv bias gradient's partials, each start
# rounded up to 64 floats (at both -ak). The activations row of the memory table must grow by
# exactly the tiles from -ak 0 to -ak 1 (no checks: the table, not the kernels, is tested).
# B = 2, T = 256, one 64-channel head: 2 x 3 tiles (not 2 x 4: the causal triangle) = 196,608 bytes.
acts() { awk -F'|' '$1 ~ /^activations / { gsub(/ /, "", $2); print $2 }' "$1"; }
for ak in 0 1; do
    EMU_CHECK=0 timeout 300 "$BIN" -e d1 "${DATA[@]}" -b 2 -t 256 -x 1 -v 0 -s 0 -ak $ak -o "$tmp/mem_ak$ak" \
        > "$tmp/mem_ak$ak.txt" 2>&1 || { echo "     -ak $ak run exited $?"; tail -n 3 "$tmp/mem_ak$ak.txt"; }
done
a0=$(acts "$tmp/mem_ak0.txt"); a1=$(acts "$tmp/mem_ak1.txt")
B=2; T=256; NH=1; HS=64; n=$(( (T + 127) / 128 ))
tiles=$(( B * NH * n * (n + 1) / 2 * 128 * HS )); want=$(( 4 * ( (tiles + 63) / 64 * 64 ) ))
if [ -n "$a0" ] && [ -n "$a1" ] && [ $((a1 - a0)) -eq $want ]; then
    ok "-ak 1's memory table: activations $a0 -> $a1 bytes, + $want = dQ's partial tiles (B $B, T $T, hs $HS)"
else
    bad "-ak 1's memory table: activations '$a0' -> '$a1' bytes, expected + $want (dQ's partial tiles, B $B, T $T)"
fi
want=$(steps "$tmp/plain.r0.txt")
got=$( (steps "$tmp/checked.r0.txt"; steps "$tmp/resumed.r0.txt") | sort -n -u)
if [ -n "$want" ] && [ "$(echo "$want" | wc -l)" = 4 ] && [ "$got" = "$want" ]; then
    ok "steps 1-4 under the checks (run, then resumed) = the run without them: $(echo "$want" | tr '\n' ' ')"
else
    bad "losses/norms differ: without checks [$(echo "$want" | tr '\n' ' ')], with [$(echo "$got" | tr '\n' ' ')]"
fi
summary emu_check
