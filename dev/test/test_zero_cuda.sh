#!/usr/bin/env bash
# Multi-rank tests of the CUDA trainer's ZeRO stages (needs a GPU; dev/gpu_check.sh runs it).
# Ranks are N processes started by hand (-pn N -pr r -pi fs -pf DIR), so one GPU is enough: each
# gets its own NCCL_HOSTID, which NCCL 2.28 needs to put several ranks on one device (it then
# talks over its socket transport). The tiny reference model, like the CPU's dev/test/test_zero.sh:
#  A. N = 2, 3, stages 0-3: every stage's losses, norms and final model are byte-identical to
#     stage 0's at the same N (all stages reduce with the same per-unit reduce-scatters and sum
#     the norm in rank order); each step's bytes equal the plan's; allocated memory equals the
#     plan and the ZeRO formula (bf16: params 2P or 2P/N, optimizer 12P or 12P/N, grads 2P).
#  B. stage 3 reshard policies and prefetch depths: byte-identical; 'always' moves exactly 1.5x
#     stage 0's bytes, 'never' exactly stage 0's.
#  C. gradient accumulation x3: byte-identical across stages; one reduce-scatter per step.
#  D. N ranks vs 1 rank on the same global batch, within stated tolerances (fp32 and bf16).
#  E. evaluation and sampling under stage 3 give stage 0's val losses and samples.
#  F. a checkpoint written by 2 ranks in stage 3 resumes on 2 ranks in stage 1 (bitwise) and on
#     3 ranks (to tolerance); mpirun starts (if built with MPI) give the -pn run's bits.
#  G. no hangs: a rank that never starts, and a rank killed mid-run, end the others with a
#     message within the -wt deadline; bad process flags are one-line errors.
# Each section runs alone (ZERO_CUDA_SECTIONS=C): it makes the runs it compares with (need_run),
# and a run another section already made with the same arguments is reused, not repeated. Every
# step count that two runs are compared at comes from one variable: X (ZERO_CUDA_STEPS) for A's
# runs and everything compared with them (B, C, F's mpirun start), D_STEPS for D's pairs, and
# CK_STEPS for F's checkpoint runs (a checkpoint every CK_STEPS / 2 steps, resumed from there).
# usage: dev/test/test_zero_cuda.sh   (train_gpt2cu, train_gpt2fp32cu, gpt2_tiny.bin, the data)
# On the CPU emulator (dev/cuda/emu): ZERO_CUDA_BF16=./train_gpt2cu_emu ZERO_CUDA_FP32=./train_gpt2fp32cu_emu
# (dev/test/test_zero_emu.sh does that, under a chosen stream schedule).
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
# NCCL picks its algorithm from the message size and topology; pinning Ring/Simple keeps the
# reduction order a function of the size alone, so equal-size reductions in two runs (two
# stages) add in the same order and the bitwise checks test our schedule, not NCCL's tuner.
export NCCL_ALGO=Ring NCCL_PROTO=Simple
BF16=${ZERO_CUDA_BF16:-./train_gpt2cu} FP32=${ZERO_CUDA_FP32:-./train_gpt2fp32cu}
# ZERO_CUDA_SECTIONS picks sections (default all), ZERO_CUDA_STEPS the steps of A and B (default 4)
SECTIONS=" ${ZERO_CUDA_SECTIONS:-A B C D E F G} " X=${ZERO_CUDA_STEPS:-4}
D_STEPS=10 # D's tolerances are argued over 10 steps (below)
CK_STEPS=4 CK_AT=2 # F: checkpoints at steps 2 and 4, resumed from 2
ck_file() { printf '%s/%s_%08d' "$tmp/$1" "$2" "$3"; } # ck_file RUN model|state STEP: a checkpoint's path without .bin
want() { [[ "$SECTIONS" == *" $1 "* ]]; }
for b in $BF16 $FP32; do [ -x $b ] || { echo "$b missing (make cuda)"; echo "zero_cuda: 0 passed, 1 failed"; exit 1; }; done

source dev/test/zero_lib.sh # cuda_run, same_run, model_of, losses, norms, plan_bytes, step_bytes, check_stage, BYTES_BF16

# need_run NAME BIN N ARGS...: cuda_run's run NAME with these arguments, unless this script made
# it already with the same ones (then its exit status again); a NAME made with other arguments is
# removed and made anew
need_run() {
    local name=$1 key="$*"
    if [ -f "$tmp/$name.key" ] && [ "$(cat "$tmp/$name.key")" = "$key" ]; then return "$(cat "$tmp/$name.rc")"; fi
    rm -rf "$tmp/$name" "$tmp/$name.txt" "$tmp/$name".r*.txt "$tmp/rdv_$name"
    cuda_run "$@"
    local rc=$?
    echo "$key" > "$tmp/$name.key"; echo $rc > "$tmp/$name.rc"
    return $rc
}

if want A; then
echo "--- A. every stage at N = 2, 3 (bf16)"
for N in 2 3; do
    for z in 0 1 2 3; do
        name=n${N}z${z}
        need_run $name $BF16 $N -z $z -x $X || { bad "$name ran"; continue; }
        if [ $z -gt 0 ]; then
            need_run n${N}z0 $BF16 $N -z 0 -x $X || { bad "n${N}z0 ran"; continue; }
            same_run $name n${N}z0 && ok "N=$N stage $z: losses, norms and model byte-identical to stage 0" \
                || { bad "N=$N stage $z differs from stage 0"; paste <(losses $name) <(losses n${N}z0) <(norms $name) <(norms n${N}z0); }
        fi
        check_stage $name $N $z "$BYTES_BF16" # bytes = plan, memory = plan = ZeRO formula
    done
done

fi
if want B; then
echo "--- B. stage 3 policies and prefetch (N=3)"
need_run n3z0 $BF16 3 -z 0 -x $X || bad "n3z0 ran"
for cfg in "always 0" "always 2" "never 0" "never 2" "default 0" "default 3"; do
    set -- $cfg
    name=p_$1_$2
    cuda_run $name $BF16 3 -z 3 -zr $1 -zp $2 -x $X || { bad "$name ran"; continue; }
    same_run $name n3z0 && ok "reshard $1, prefetch $2: byte-identical to stage 0" || bad "reshard $1, prefetch $2: differs"
    [ "$(step_bytes $name)" = "$(plan_bytes $name)" ] && ok "reshard $1, prefetch $2: bytes = plan" || bad "reshard $1 prefetch $2 bytes"
done
read -r rs0 ag0 _ <<< "$(plan_bytes n3z0)"; read -r rs3 ag3 _ <<< "$(step_bytes p_always_0)"
[ -n "$rs3" ] && [ $((2 * (rs3 + ag3))) -eq $((3 * (rs0 + ag0))) ] && ok "reshard always moves exactly 1.5x stage 0" || bad "always: not 1.5x stage 0"
read -r rsn agn _ <<< "$(step_bytes p_never_0)"
[ -n "$rsn" ] && [ $((rsn + agn)) -eq $((rs0 + ag0)) ] && ok "reshard never moves what stage 0 moves" || bad "never: not stage 0's bytes"

fi
if want C; then
echo "--- C. gradient accumulation x3 (N=2)"
for z in 0 1 2 3; do
    need_run acc_z$z $BF16 2 -z $z -d 384 -x $X || bad "acc_z$z ran"
    need_run n2z$z $BF16 2 -z $z -x $X || bad "n2z$z ran" # one micro-step per step: its bytes per step
done
grep -q "3 micro-steps per step" "$tmp/acc_z0.txt" && ok "accumulation: 3 micro-steps" || bad "accumulation not 3 micro-steps"
for z in 1 2 3; do same_run acc_z$z acc_z0 && ok "accumulation: stage $z byte-identical to stage 0" || bad "accumulation: stage $z differs"; done
for z in 0 1 2 3; do
    read -r rs ag _ <<< "$(step_bytes acc_z$z)"; read -r rs1 _ <<< "$(step_bytes n2z$z)"
    [ -n "$rs" ] && [ "$(step_bytes acc_z$z)" = "$(plan_bytes acc_z$z)" ] && [ "$rs" = "$rs1" ] \
        && ok "accumulation stage $z: one reduce-scatter per step ($rs bytes), = plan" || bad "accumulation stage $z bytes: '$rs' vs '$rs1'"
done

fi
if want D; then
echo "--- D. N ranks vs 1 rank, same global batch"
# close A B LOSS_RTOL NORM_RTOL: 10 steps' losses and norms within relative tolerances
close() {
    paste <(losses "$1") <(losses "$2") <(norms "$1") <(norms "$2") | awk -v lt="$3" -v nt="$4" 'NF != 4 { exit 1 }
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > lt * $1) exit 1
          d = $3 - $4; if (d < 0) d = -d; if (d > nt * $3 + 1e-4) exit 1 } END { exit n < '"$D_STEPS"' }'
}
# fp32: 1e-4 on the losses (the CPU test's 1e-5 is for one fixed summation order; cuBLASLt picks
# its tiling per shape, and B=4 vs B=2 are different shapes, so the batch sums run in other
# orders too), 1e-3 on the norms (printed to 4 decimals, ~0.5-3).
cuda_run one_fp32 $FP32 1 -b 4 -x $D_STEPS && cuda_run two_fp32 $FP32 2 -b 2 -z 2 -x $D_STEPS && close one_fp32 two_fp32 1e-4 1e-3 \
    && ok "fp32: 2 ranks x B=2 (stage 2) = 1 rank x B=4 over $D_STEPS steps (1e-4)" || { bad "fp32: 2 ranks vs 1 rank"; paste <(losses one_fp32) <(losses two_fp32); }
cuda_run one_acc_fp32 $FP32 1 -b 1 -d 96 -x $D_STEPS && cuda_run three_fp32 $FP32 3 -b 1 -z 3 -x $D_STEPS && close one_acc_fp32 three_fp32 1e-4 1e-3 \
    && ok "fp32: 3 ranks x B=1 (stage 3) = 1 rank x 3 micro-steps over $D_STEPS steps (1e-4)" || { bad "fp32: 3 ranks vs 1 rank"; paste <(losses one_acc_fp32) <(losses three_fp32); }
# bf16: the gradients are rounded to 8 bits before the ranks add them (one rank rounds once after
# adding in fp32): ~2^-9 relative per element. AdamW's step is lr * m / sqrt(v), nearly the sign
# early on, so the two runs' weights drift apart by a few bf16 ulps per step; over 10 steps the
# loss moves by ~1% of its value in total and the runs differ by a small part of that. 5e-3 on
# the losses and 5e-2 on the norms leave room for that, while a missed rank's gradient (a 2x
# change in the update) or a wrong loss scale shows at once.
cuda_run one_bf16 $BF16 1 -b 4 -x $D_STEPS && cuda_run two_bf16 $BF16 2 -b 2 -z 1 -x $D_STEPS && close one_bf16 two_bf16 5e-3 5e-2 \
    && ok "bf16: 2 ranks x B=2 (stage 1) = 1 rank x B=4 over $D_STEPS steps (5e-3)" || { bad "bf16: 2 ranks vs 1 rank"; paste <(losses one_bf16) <(losses two_bf16) <(norms one_bf16) <(norms two_bf16); }

fi
if want E; then
echo "--- E. evaluation and sampling under stage 3"
# samples NAME: the text of the run's samples (between the two --- lines after each "generating:")
samples() { awk '/^generating:$/ { g = 1; n = 0; next } g && /^---$/ { if (++n == 2) g = 0; next } g' "$tmp/$1.txt"; }
cuda_run ev0 $BF16 2 -z 0 -x $X -v 1 -m 3 -s 2 -g 4 && cuda_run ev3 $BF16 2 -z 3 -x $X -v 1 -m 3 -s 2 -g 4
if [ -n "$(grep 'val loss' "$tmp/ev0.txt")" ] && [ "$(grep 'val loss' "$tmp/ev0.txt")" = "$(grep 'val loss' "$tmp/ev3.txt")" ] &&
   [ -n "$(samples ev0)" ] && [ "$(samples ev0)" = "$(samples ev3)" ]; then
    ok "stage 3 gives stage 0's val losses and samples"
else bad "stage 3 eval/sampling differ"; grep -E 'val loss|generating' -A1 "$tmp/ev0.txt" "$tmp/ev3.txt" | head; fi
cuda_run evn $BF16 2 -z 3 -zr never -zp 2 -x 1 -v 1 -m 3 && cuda_run eva0 $BF16 2 -z 3 -zr always -zp 0 -x 1 -v 1 -m 3 \
    && cuda_run eva2 $BF16 2 -z 3 -zr always -zp 2 -x 1 -v 1 -m 3 && check_eval_gathers evn eva0 eva2 || bad "stage 3 evaluation runs"

fi
if want F; then
echo "--- F. checkpoints across stages and ranks; mpirun"
last=$(printf '%08d' $CK_STEPS)
cuda_run ck_full $BF16 2 -z 3 -x $CK_STEPS -n $CK_AT && cp -r "$tmp/ck_full" "$tmp/ck_resume" \
    && rm -f "$tmp/ck_resume"/*_$last* && cuda_run ck_resume $BF16 2 -z 1 -x $CK_STEPS -y 1
if grep -q "resumed from checkpoint $CK_AT\b" "$tmp/ck_resume.txt" && cmp -s "$(ck_file ck_full model $CK_STEPS).bin" "$(ck_file ck_resume model $CK_STEPS).bin"; then
    ok "2 ranks stage 3 -> checkpoint at step $CK_AT -> 2 ranks stage 1: the step-$CK_STEPS model byte-identical"
else bad "resume on another stage differs"; fi
cuda_run ck3 $BF16 3 -z 2 -b 2 -x $CK_STEPS -n $CK_AT && cp -r "$tmp/ck3" "$tmp/ck3_to1" && rm -f "$tmp/ck3_to1"/*_$last* \
    && cuda_run ck3_to1 $BF16 1 -b 6 -x $CK_STEPS -y 1 && grep -q "resumed from checkpoint $CK_AT\b" "$tmp/ck3_to1.txt" \
    && [ "$(losses ck3_to1 | wc -l)" -eq $((CK_STEPS - CK_AT)) ] \
    && paste <(losses ck3 | tail -n $((CK_STEPS - CK_AT))) <(losses ck3_to1) | awk 'NF != 2 { exit 1 } { d = $1 - $2; if (d < 0) d = -d; if (d > 5e-3 * $1) exit 1 }' \
    && ok "3 ranks stage 2 -> checkpoint -> 1 rank (B=6): steps $((CK_AT + 1))-$CK_STEPS within 5e-3" || { bad "resume 3 ranks -> 1 rank"; paste <(losses ck3) <(losses ck3_to1); }
if command -v mpirun >/dev/null && grep -q -- "-DUSE_MPI" <(make -n -B "$(basename "$BF16")" 2>/dev/null); then
    need_run n2z2 $BF16 2 -z 2 -x $X || bad "n2z2 ran" # what the mpirun start must equal
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    # several ranks on one GPU need a NCCL_HOSTID each; under mpirun a shell sets it from the rank
    timeout 300 mpirun -np 2 bash -c 'NCCL_HOSTID=mpi-$OMPI_COMM_WORLD_RANK exec "$@"' _ $BF16 -e "$MODEL" "${DATA[@]}" \
        -v 0 -s 0 -b 2 -t 32 -z 2 -x $X -o "$tmp/mpi_z2" > "$tmp/mpi_z2.txt" 2>&1
    grep -q "(mpirun)" "$tmp/mpi_z2.txt" && same_run mpi_z2 n2z2 && ok "mpirun -np 2 stage 2 = the -pn run, bit for bit" \
        || { bad "mpirun -np 2 differs or failed"; tail -3 "$tmp/mpi_z2.txt"; }
else
    echo "     (no mpirun, or train_gpt2cu built without MPI: the mpirun start is not tested here)"
fi

fi
if want G; then
echo "--- G. no hangs, clear errors"
# fails NAME EXPECTED SECONDS COMMAND...: non-zero (not the timeout's 124), the message, in time
fails() {
    local name=$1 expect=$2 secs=$3; shift 3
    local t0=$SECONDS
    timeout "$secs" "$@" > "$tmp/f.txt" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qF -- "$expect" "$tmp/f.txt"; then ok "$name: exit $rc in $((SECONDS - t0)) s: $(grep -F -- "$expect" "$tmp/f.txt" | head -1 | cut -c1-150)"
    else bad "$name: exit $rc, expected '$expect'"; head -5 "$tmp/f.txt"; fi
}
T=($BF16 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32)
fails "rank 1 never starts" "rank 0] error:" 60 env NCCL_HOSTID=h0 "${T[@]}" -x 2 -pn 2 -pr 0 -pi fs -pf "$tmp/rdv_alone" -wt 5
fails "-pr beyond -pn" "flag -pr 2 must be below -pn 2" 20 "${T[@]}" -pn 2 -pr 2 -pi fs -pf "$tmp/rdv_x"
fails "-pn without -pi" "need -pi fs" 20 "${T[@]}" -pn 2 -pr 0
fails "-z 3 with -zr on -z 1" "flag -zr applies only to -z 3 (got -z 1)" 20 "${T[@]}" -z 1 -zr always
# a rank killed mid-run: the survivor ends with an error within the -wt deadline (10 s here)
rm -rf "$tmp/rdv_kill"
NCCL_HOSTID=k1 timeout 120 "${T[@]}" -x 100000 -pn 2 -pr 1 -pi fs -pf "$tmp/rdv_kill" -wt 10 > "$tmp/kill.r1.txt" 2>&1 &
victim=$!
NCCL_HOSTID=k0 timeout 120 "${T[@]}" -x 100000 -pn 2 -pr 0 -pi fs -pf "$tmp/rdv_kill" -wt 10 > "$tmp/kill.txt" 2>&1 &
survivor=$!
for i in $(seq 1 600); do grep -q "^step *3/" "$tmp/kill.txt" 2>/dev/null && break; sleep 0.1; done
t0=$SECONDS
kill -9 $(pgrep -P $victim) $victim 2>/dev/null # the trainer itself: $victim is the `timeout` around it
wait $survivor; rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "error:" "$tmp/kill.txt"; then
    ok "rank 1 killed at step 3: rank 0 exits $rc after $((SECONDS - t0)) s: $(grep 'error:' "$tmp/kill.txt" | head -1 | cut -c1-160)"
else bad "rank 1 killed: rank 0 exit $rc (124 = hung until the outer timeout)"; tail -3 "$tmp/kill.txt"; fi


fi

summary "zero_cuda"
