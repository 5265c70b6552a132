#!/usr/bin/env bash
# -z auto on 2 ranks (the tiny model): the trainer picks the lowest ZeRO stage whose plan, plus
# what it allocates outside the plan, fits the budget per rank (-zm MB), and prints each stage.
#  - a budget above every stage's total picks stage 0;
#  - a budget of the smallest total (rounded up to the printed 0.1 MB) picks the lowest stage
#    with that total; the run then allocates that stage's plan, and what -z auto counted outside
#    the plan is what the trainer allocated outside it (the activations row; CUDA: + workspace);
#  - a budget below every total stops every rank naming the least total and its stage (no hang),
#    also in shard groups of 1 (-zg 1), where that stage is 0;
#  - -zm without -z auto, -zm 0, and (CPU) -z auto without -zm are refused.
# The arithmetic of the pick itself is checked in dev/test/test_zero_plan.c.
# usage: dev/test/test_zero_auto.sh  (TRAIN=./train_gpt2cu_emu for the emulated CUDA trainer)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
TRAIN=${TRAIN:-./train_gpt2}
case "$TRAIN" in *cu*) cuda=1; MODEL=gpt2_tiny_bf16.bin ;; *) cuda=0 ;; esac
if ! command -v mpirun >/dev/null; then bad "mpirun not found: install openmpi-bin"; summary zero_auto; exit 1; fi
source dev/test/zero_lib.sh # mem
run() { # run NAME ARGS...: 2 ranks, one step (CUDA: two ranks on one device need a NCCL_HOSTID each)
    local name=$1; shift
    timeout 600 mpirun -np 2 bash -c 'NCCL_HOSTID=auto-$OMPI_COMM_WORLD_RANK exec "$@"' _ "$TRAIN" -e "$MODEL" "${DATA[@]}" \
        -b 2 -t 32 -x 1 -v 0 -s 0 "$@" > "$tmp/$name.txt" 2>&1
}
# candidate NAME STAGE: the plan MB -z auto printed for STAGE; picked NAME: the stage it picked
candidate() { sed -n "s/^  stage $2: plan \([0-9.]*\) MB + .*/\1/p" "$tmp/$1.txt"; }
total() { sed -n "s/^  stage $2: plan .* = \([0-9.]*\) MB: .*/\1/p" "$tmp/$1.txt"; }
outside() { sed -n 's/^-z auto: .*; outside the plan \([0-9.]*\) MB .*/\1/p' "$tmp/$1.txt"; }
picked() { sed -n 's/^  stage \([0-3]\): .*picked.*/\1/p' "$tmp/$1.txt"; }
table_stage() { sed -n 's/^ZeRO stage \([0-3]\),.*/\1/p' "$tmp/$1.txt"; }
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d <= 0.051 && d >= -0.051) }'; }
mb() { awk -v x="$1" 'BEGIN { printf "%.1f", x / 1048576 }'; }

run big -z auto -zm 100000
if [ "$(picked big)" = 0 ] && [ "$(table_stage big)" = 0 ]; then ok "a budget above every stage picks stage 0"
else bad "budget 100000 MB: picked '$(picked big)', table stage '$(table_stage big)'"; tail -8 "$tmp/big.txt"; fi

# least NAME: "STAGE TOTAL", the smallest total run NAME printed and the lowest stage that has it
least_of() {
    local least="" want="" s t
    for s in 0 1 2 3; do
        t=$(total "$1" $s)
        if [ -n "$t" ] && { [ -z "$least" ] || awk -v a="$t" -v b="$least" 'BEGIN { exit !(a < b) }'; }; then least=$t; want=$s; fi
    done
    [ -n "$least" ] && echo "$want $least"
}
# no_fit NAME WHAT ARGS...: a budget 0.2 MB below the least total of run NAME stops every rank,
# and the message names that least total and its stage (not stage 3's, which can be larger)
no_fit() {
    local name=$1 what=$2; shift 2
    local want least small rc n
    read -r want least <<< "$(least_of "$name")"
    small=$(awk -v x="$least" 'BEGIN { printf "%.2f", x - 0.2 }')
    run small -z auto -zm "$small" "$@"; rc=$?
    n=$(grep -c "error: -z auto: no stage fits in $(awk -v x="$small" 'BEGIN { printf "%.1f", x }') MB per rank: the least any stage needs is stage $want's $least MB" "$tmp/small.txt")
    if [ $rc -ne 0 ] && [ "$n" -ge 1 ] && [ $rc -ne 124 ]; then ok "$what, budget $small MB: no stage fits, every rank stops (exit $rc) naming the least need, stage $want's $least MB"
    else bad "$what, budget $small MB: exit $rc, $n error lines naming stage $want's $least MB"; tail -5 "$tmp/small.txt"; fi
}

read -r want least <<< "$(least_of big)"
if [ -z "$least" ]; then bad "no candidates printed"; tail -8 "$tmp/big.txt"
else
    budget=$(awk -v x="$least" 'BEGIN { printf "%.2f", x + 0.05 }')
    run fit -z auto -zm "$budget"
    got=$(picked fit)
    if [ "$got" = "$want" ] && [ "$(table_stage fit)" = "$want" ]; then ok "budget $budget MB picks stage $want, the lowest with the smallest total ($least MB)"
    else bad "budget $budget MB: picked '$got', table stage '$(table_stage fit)', expected $want"; tail -8 "$tmp/fit.txt"; fi
    # the candidate's plan = what the run's table says the plan allocates; outside = the rest it allocated
    plan_sum=0
    for row in params grads optimizer "gather buffers" "comm scratch"; do
        v=$(mem fit "$row" 3); plan_sum=$((plan_sum + ${v:-0}))
    done
    other=$(mem fit activations 2); [ "$cuda" = 1 ] && other=$((other + $(mem fit workspace 2)))
    if near "$(candidate fit "$want")" "$(mb $plan_sum)" && near "$(outside fit)" "$(mb "$other")"; then
        ok "stage $want's candidate = the run's plan ($(mb $plan_sum) MB) and outside = its allocations ($(mb "$other") MB)"
    else bad "candidate plan '$(candidate fit "$want")' vs table $(mb $plan_sum) MB; outside '$(outside fit)' vs $(mb "$other") MB"; fi
    no_fit big "all ranks in one shard group"
fi
# in shard groups of 1 (-zg 1) stages 1-3 shard nothing and only add buffers: stage 0 needs least
run big1 -z auto -zm 100000 -zg 1
if [ -n "$(least_of big1)" ]; then no_fit big1 "-zg 1" -zg 1
else bad "-zg 1: no candidates printed"; tail -8 "$tmp/big1.txt"; fi

if [ "$cuda" = 1 ]; then # no -zm: the device's free memory, the least over the ranks
    run free -z auto
    if grep -q "^-z auto: .* MB per rank (the GPU's free memory, least over the ranks)" "$tmp/free.txt" && [ -n "$(picked free)" ] \
        && [ "$(picked free)" = "$(table_stage free)" ]; then ok "without -zm: the GPU's free memory, stage $(picked free) picked"
    else bad "-z auto without -zm"; tail -5 "$tmp/free.txt"; fi
fi

refused() { # refused WHAT MESSAGE ARGS...
    local what=$1 msg=$2; shift 2
    run refused "$@"; local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "$msg" "$tmp/refused.txt"; then ok "$what refused: $msg"
    else bad "$what: exit $rc"; tail -3 "$tmp/refused.txt"; fi
}
refused "-zm without -z auto" "flag -zm applies only to -z auto" -z 1 -zm 100
refused "-zm 0" "flag -zm expects MB > 0" -z auto -zm 0
[ "$cuda" = 0 ] && refused "-z auto without -zm on the CPU" "needs -zm" -z auto
summary zero_auto
