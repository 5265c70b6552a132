#!/usr/bin/env bash
# Multi-rank tests of the ZeRO stages on the CPU trainer (mpirun, the tiny reference model).
#  A. N = 1..4, stages 0-3: every stage's final model is byte-identical to stage 0's at the same
#     N (all stages reduce with the same per-unit reduce-scatters and sum the norm in rank
#     order); each step's bytes equal the plan's; allocated memory equals the plan's and the
#     ZeRO formula for params and optimizer state.
#  B. stage 3 reshard policies and prefetch depths: byte-identical models; 'always' moves
#     exactly 1.5x stage 0's bytes.
#  C. gradient accumulation x3: byte-identical across stages; reduce-scatter bytes unchanged.
#  D. N ranks vs 1 rank on the same global batch (accumulation on the one rank): losses agree
#     to 1e-5 relative over 10 steps (the sums run in another order, so not bitwise).
#  E. evaluation and sampling under stage 3 give stage 0's val losses.
#  F. bad input under mpirun: a clear error, every rank exits, non-zero, no hang.
# usage: dev/test/test_zero.sh   (needs mpirun, train_gpt2 built with MPI, gpt2_tiny.bin)
set -u
cd "$(dirname "$0")/../.."
if ! command -v mpirun >/dev/null; then echo "mpirun not found: install openmpi-bin"; echo "zero: 0 passed, 1 failed"; exit 1; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1 # more ranks than the 2 cores
source dev/test/lib.sh

# zrun NAME N ARGS...: trains the tiny model on N ranks into $tmp/NAME (log NAME.txt)
zrun() {
    local name=$1 n=$2; shift 2
    timeout 300 mpirun -np "$n" ./train_gpt2 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -o "$tmp/$name" "$@" > "$tmp/$name.txt" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || { echo "     run $name (N=$n $*) exited $rc:"; tail -5 "$tmp/$name.txt"; }
    return $rc
}
source dev/test/zero_lib.sh # model_of, losses, norms, plan_bytes, step_bytes, check_stage, BYTES_CPU
same_model() { local a b; a=$(model_of "$1"); b=$(model_of "$2"); [ -n "$a" ] && [ -n "$b" ] && cmp -s "$a" "$b"; }

echo "--- A. every stage at N = 1..4"
for N in 1 2 3 4; do
    for z in 0 1 2 3; do
        name=n${N}z${z}
        zrun $name $N -z $z -x 4 || { bad "$name ran"; continue; }
        if [ $z -gt 0 ]; then
            if same_model $name n${N}z0 && [ "$(losses $name)" = "$(losses n${N}z0)" ]; then ok "N=$N stage $z: model byte-identical to stage 0"
            else bad "N=$N stage $z: differs from stage 0"; paste <(losses $name) <(losses n${N}z0); fi
        fi
        check_stage $name $N $z "$BYTES_CPU" # bytes = plan, memory = plan = ZeRO formula
    done
done

echo "--- B. stage 3 policies and prefetch (N=3)"
for cfg in "always 0" "always 2" "never 0" "never 2" "default 0" "default 3"; do
    set -- $cfg
    name=p_$1_$2
    zrun $name 3 -z 3 -zr $1 -zp $2 -x 4 || { bad "$name ran"; continue; }
    same_model $name n3z0 && ok "reshard $1, prefetch $2: model byte-identical to stage 0" || bad "reshard $1, prefetch $2: differs"
    [ "$(step_bytes $name)" = "$(plan_bytes $name)" ] && ok "reshard $1, prefetch $2: bytes = plan" || bad "reshard $1 prefetch $2 bytes"
done
read -r rs0 ag0 _ <<< "$(plan_bytes n3z0)"; read -r rs3 ag3 _ <<< "$(step_bytes p_always_0)"
[ $((2 * (rs3 + ag3))) -eq $((3 * (rs0 + ag0))) ] && ok "reshard always moves exactly 1.5x stage 0 ($((rs3 + ag3)) vs $((rs0 + ag0)))" \
    || bad "always: $((rs3 + ag3)) is not 1.5x $((rs0 + ag0))"
read -r rsn agn _ <<< "$(step_bytes p_never_0)"
[ $((rsn + agn)) -eq $((rs0 + ag0)) ] && ok "reshard never moves what stage 0 moves" || bad "never: $((rsn + agn)) != $((rs0 + ag0))"

echo "--- C. gradient accumulation x3 (N=2)"
for z in 0 1 2 3; do zrun acc_z$z 2 -z $z -d 384 -x 3 || bad "acc_z$z ran"; done
grep -q "3 micro-steps per step" "$tmp/acc_z0.txt" && ok "accumulation: 3 micro-steps" || bad "accumulation not 3 micro-steps"
for z in 1 2 3; do same_model acc_z$z acc_z0 && ok "accumulation: stage $z byte-identical to stage 0" || bad "accumulation: stage $z differs"; done
for z in 0 1 2 3; do
    read -r rs ag _ <<< "$(step_bytes acc_z$z)"; read -r rs1 ag1 _ <<< "$(step_bytes n2z$z)"
    [ "$(step_bytes acc_z$z)" = "$(plan_bytes acc_z$z)" ] && [ "$rs" = "$rs1" ] && { [ $z -lt 3 ] && [ "$ag" = "$ag1" ] || [ "$ag" = "$((3 * ag1))" ]; } \
        && ok "accumulation stage $z: one reduce-scatter per step ($rs), all-gather $ag" || bad "accumulation stage $z bytes: $rs $ag vs $rs1 $ag1"
done

echo "--- D. N ranks vs 1 rank, same global batch"
# losses within 1e-5 relative, and gradient norms (printed to 4 decimals) within 1e-4 relative
close() {
    paste <(losses "$1") <(losses "$2") <(norms "$1") <(norms "$2") | awk 'NF != 4 { exit 1 }
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) exit 1
          d = $3 - $4; if (d < 0) d = -d; if (d > 1e-4 * $3 + 1e-4) exit 1 } END { exit n < 10 }'
}
zrun one_b4 1 -b 4 -x 10 && zrun two_b2 2 -b 2 -z 2 -x 10 && close one_b4 two_b2 \
    && ok "2 ranks x B=2 (stage 2) = 1 rank x B=4: 10 losses and norms agree" || { bad "2 ranks vs 1 rank"; paste <(losses one_b4) <(losses two_b2) <(norms one_b4) <(norms two_b2); }
zrun one_acc4 1 -b 1 -d 128 -x 10 && zrun four_b1 4 -b 1 -z 3 -x 10 && close one_acc4 four_b1 \
    && ok "4 ranks x B=1 (stage 3) = 1 rank x 4 micro-steps: 10 losses and norms agree" || { bad "4 ranks vs 1 rank"; paste <(losses one_acc4) <(losses four_b1) <(norms one_acc4) <(norms four_b1); }

echo "--- E. evaluation and sampling under stage 3"
zrun ev0 2 -z 0 -x 2 -v 1 -m 3 -s 2 -g 4 && zrun ev3 2 -z 3 -x 2 -v 1 -m 3 -s 2 -g 4
if [ -n "$(grep 'val loss' "$tmp/ev0.txt")" ] && [ "$(grep 'val loss' "$tmp/ev0.txt")" = "$(grep 'val loss' "$tmp/ev3.txt")" ] &&
   [ "$(grep -A1 '^generating' "$tmp/ev0.txt")" = "$(grep -A1 '^generating' "$tmp/ev3.txt")" ]; then
    ok "stage 3 gives stage 0's val losses and samples"
else bad "stage 3 eval/sampling differ"; grep -E 'val loss|generating' -A1 "$tmp/ev0.txt" "$tmp/ev3.txt" | head; fi

zrun evn 2 -z 3 -zr never -zp 2 -x 1 -v 1 -m 3 && zrun eva0 2 -z 3 -zr always -zp 0 -x 1 -v 1 -m 3 \
    && zrun eva2 2 -z 3 -zr always -zp 2 -x 1 -v 1 -m 3 && check_eval_gathers evn eva0 eva2 || bad "stage 3 evaluation runs"

echo "--- F. bad input under mpirun"
python3 - "$tmp/small.bin" <<'PY'
import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, 600, *([0] * 253)) + struct.pack("<600H", *([198] * 600)))
PY
# fails NAME EXPECTED COMMAND...: non-zero (not a timeout), the message on stderr, within 60 s
fails() {
    local name=$1 expect=$2; shift 2
    timeout 60 "$@" > "$tmp/f.txt" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qF -- "$expect" "$tmp/f.txt"; then ok "$name: exit $rc: $(grep -F -- "$expect" "$tmp/f.txt" | head -1)"
    else bad "$name: exit $rc, expected '$expect'"; head -5 "$tmp/f.txt"; fi
}
T=(./train_gpt2 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -x 1)
fails "-z 5" "flag -z expects a ZeRO stage 0, 1, 2 or 3, got 5" mpirun -np 2 "${T[@]}" -z 5
fails "-zr with -z 1" "flag -zr applies only to -z 3 (got -z 1)" mpirun -np 2 "${T[@]}" -z 1 -zr always
fails "-zp with -z 2" "flag -zp applies only to -z 3 (got -z 2)" mpirun -np 2 "${T[@]}" -z 2 -zp 1
fails "bad -zr value" "flag -zr expects default, always or never, got 'sometimes'" mpirun -np 2 "${T[@]}" -z 3 -zr sometimes
fails "data too small for N*B*T" "has 600 tokens, fewer than one batch needs: ranks 4 x B 4 x T 64 + 1 = 1025" \
    mpirun -np 4 ./train_gpt2 -e "$MODEL" -i "$tmp/small.bin" -j "$tmp/small.bin" -v 0 -s 0 -x 1 -b 4 -t 64
fails "ranks disagree on flags" "ranks disagree on flags: rank 0 has" \
    mpirun -np 1 "${T[@]}" -b 2 : -np 1 "${T[@]}" -b 4
fails "-d not a multiple of B*T*ranks" "flag -d 100 must be a positive multiple of B*T*ranks = 4*64*2 = 512" mpirun -np 2 "${T[@]}" -d 100

summary "zero"
