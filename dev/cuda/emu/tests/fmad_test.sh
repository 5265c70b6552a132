#!/usr/bin/env bash
# The emulator's model of nvcc's contraction (README, "Contraction"): tests/fmad_probe.cu built
# with --fmad=true (EMU_FMAD=1) must give, pattern by pattern, what nvcc's contraction gives, and
# with --fmad=false (the default, EMU_FMAD=0) what no contraction gives; a run whose EMU_FMAD
# differs from the build's is refused. Where nvcc exists, its PTX for the same kernels must still
# fuse what the model says (fma.rn per kernel), so a toolkit that contracts otherwise is noticed.
# usage: dev/cuda/emu/tests/fmad_test.sh   (from anywhere; ~20 s)
set -u
cd "$(dirname "$0")/../../../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
SRC=dev/cuda/emu/tests/fmad_probe.cu
for mode in false true; do
    if dev/cuda/emu/nvcc-cpu --fmad=$mode -O2 $SRC -o "$tmp/probe_$mode" > "$tmp/build_$mode.txt" 2>&1; then
        out=$("$tmp/probe_$mode" 2>&1); rc=$?
        printf '%s\n' "$out" | grep -v '^ok' | head -n 12
        [ $rc -eq 0 ] && [[ $out == *"9 passed, 0 failed"* ]] && ok "--fmad=$mode: every pattern as modelled (9 probes)" \
            || bad "--fmad=$mode: exit $rc, $(printf '%s\n' "$out" | tail -n 1)"
    else bad "building the probe with --fmad=$mode: $(tail -n 3 "$tmp/build_$mode.txt")"; fi
done
# the environment decides without the flag; a run that asks for the other setting is refused
EMU_FMAD=1 dev/cuda/emu/nvcc-cpu -O2 $SRC -o "$tmp/probe_env" > /dev/null 2>&1 && "$tmp/probe_env" > /dev/null 2>&1 \
    && ok "EMU_FMAD=1 at build time = --fmad=true" || bad "EMU_FMAD=1 at build time"
msg=$(EMU_FMAD=1 "$tmp/probe_false" 2>&1); rc=$?
[ $rc -eq 86 ] && [[ $msg == *"EMU_FMAD=1 at run time, but this program was built with EMU_FMAD=0"* ]] \
    && ok "a --fmad=false program run with EMU_FMAD=1 is refused: $msg" || bad "EMU_FMAD=1 on a --fmad=false build: exit $rc '$msg'"
msg=$(dev/cuda/emu/nvcc-cpu --fmad=yes $SRC -o "$tmp/x" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $msg == *"--fmad: expected true or false"* ]] && ok "--fmad=yes refused: $msg" || bad "--fmad=yes: exit $rc '$msg'"
# nvcc's own PTX (NVVM's contraction; ptxas may still fuse a mul.f32 and an add.f32 that NVVM left
# apart: README): fma.rn.f32 per kernel, with --fmad=true and with --fmad=false
NVCC=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)}
if [ -n "$NVCC" ]; then
    declare -A want_true=([k_madd]=1 [k_two_products]=1 [k_product_used_twice]=0 [k_across_statements]=2
        [k_subtract]=0 [k_chain]=1 [k_intrinsics]=1 [k_functions]=2)
    for mode in true false; do
        if "$NVCC" -ptx -arch=sm_90 -O3 --fmad=$mode $SRC -o "$tmp/probe_$mode.ptx" 2> "$tmp/ptx_$mode.txt"; then
            got=$(awk '/\.entry/ { k = $3; sub(/\(.*/, "", k); n[k] = 0 } /fma\.rn\.f32/ { n[k]++ } END { for (k in n) print k, n[k] }' "$tmp/probe_$mode.ptx" | sort)
            good=1
            for k in "${!want_true[@]}"; do
                w=${want_true[$k]}; [ $mode = false ] && { w=0; [ $k = k_intrinsics ] && w=1; }
                [ "$(printf '%s\n' "$got" | awk -v k=$k '$1 == k { print $2 }')" = "$w" ] || { good=0; echo "     $k: fma.rn.f32 x$(printf '%s\n' "$got" | awk -v k=$k '$1 == k { print $2 }'), the model says $w"; }
            done
            [ $good = 1 ] && ok "nvcc --fmad=$mode: its PTX fuses per kernel what the model says ($(echo $got | tr '\n' ' '))" \
                || bad "nvcc --fmad=$mode: its PTX contracts otherwise than the emulator's model"
        else bad "nvcc -ptx --fmad=$mode: $(tail -n 3 "$tmp/ptx_$mode.txt")"; fi
    done
else echo "     (nvcc not found: its PTX is not compared)"; fi
echo "fmad: $passed passed, $failed failed"
[ $failed -eq 0 ]
