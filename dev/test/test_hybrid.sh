#!/usr/bin/env bash
# Hybrid sharding (-zg G, DESIGN.md §4-§5) on the CPU trainer: N = 4 ranks (mpirun), the tiny
# reference model, 4 steps.
#  A. G = 2, stages 1-3: the three final models are byte-identical (the same sums in the same
#     order: a ring inside the group, then a ring across the groups); losses and norms within
#     1e-5 relative of stage 0's (stage 0 adds the 4 ranks' gradients in one ring, the hybrid
#     run adds pairs first: another order of fp32 additions, so not bitwise); every step's bytes
#     inside the group and across the groups = the plan; allocated memory = the plan = the ZeRO
#     formula with G ranks sharing the state.
#  B. G = 4 = N is the plain stage: byte-identical model, the same bytes and memory lines.
#  C. G = 1: stages 1 and 3 give stage 0's model bit for bit (each element is then summed by
#     the cross-group ring, in stage 0's order), and hold stage 0's params, grads and optimizer.
#  D. checkpoints: one written with G = 2 (stage 3) resumes with G = 2 (stage 1) to the
#     uninterrupted run's model, and with G = 4 (stage 2) to what stage 0 resumes to.
#  E. -zg 3 with 4 ranks: one clear error, every rank exits.
#  F. -z auto -zg 2: stages 1-3 are candidates in groups of 2; with a budget of stage 2's total
#     (from a probe run's printed candidates) it picks the lowest stage that fits, and the run
#     allocates that stage's plan in 2 groups of 2.
# usage: dev/test/test_hybrid.sh   (needs mpirun, train_gpt2 built with MPI, gpt2_tiny.bin)
set -u
cd "$(dirname "$0")/../.."
if ! command -v mpirun >/dev/null; then echo "mpirun not found: install openmpi-bin"; echo "hybrid: 0 passed, 1 failed"; exit 1; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1 # more ranks than the 2 cores
source dev/test/lib.sh
N=4

# hrun NAME ARGS...: trains the tiny model on N ranks into $tmp/NAME (log NAME.txt)
hrun() {
    local name=$1; shift
    timeout 300 mpirun -np $N ./train_gpt2 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -o "$tmp/$name" "$@" > "$tmp/$name.txt" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || { echo "     run $name ($*) exited $rc:"; tail -5 "$tmp/$name.txt"; }
    return $rc
}
source dev/test/zero_lib.sh # model_of, losses, norms, plan_bytes, mem, padded, check_stage, BYTES_CPU
final() { ls "$tmp/$1"/model_0000000"$2".bin 2>/dev/null; }
same_model() { local a b; a=$(final "$1" "${3:-4}"); b=$(final "$2" "${3:-4}"); [ -n "$a" ] && [ -n "$b" ] && cmp -s "$a" "$b"; }
# the hybrid lines: inside the group as the plain stage's (without "| across ..."), and across
plan_across() { sed -n 's/^comm per step across groups (plan, bus bytes): all-reduce \([0-9]*\)$/\1/p' "$tmp/$1.txt"; }
step_inside() { sed -n 's/.*bytes sent: reduce-scatter \([0-9]*\) all-gather \([0-9]*\) scalars \([0-9]*\).*/\1 \2 \3/p' "$tmp/$1.txt" | sort -u; }
step_across() { sed -n 's/.*across groups: all-reduce \([0-9]*\)$/\1/p' "$tmp/$1.txt" | sort -u; }
# within REL A B: every line of the two columns agrees to REL relative
within() { paste <(echo "$2") <(echo "$3") | awk -v rel="$1" 'NF != 2 { bad = 1 } { d = $1 - $2; if (d < 0) d = -d; if (d > rel * ($2 < 0 ? -$2 : $2)) bad = 1 } END { exit bad || NR == 0 }'; }

# check_hybrid NAME STAGE G: bytes per step = plan (inside and across, exactly the plan's
# formula), memory = plan = the ZeRO formula over G ranks
check_hybrid() {
    local name=$1 z=$2 G=$3 R=$(( N / $3 )) P rs ag sc across good=1
    P=$(padded "$name")
    [ -n "$P" ] || { bad "$name: no padded parameter count"; return; }
    read -r rs ag sc <<< "$(plan_bytes "$name")"
    across=$(plan_across "$name")
    # the formula (DESIGN.md §5): reduce-scatter of P*4 bytes over G ranks; stages 1-2 all-gather
    # the params over G; the grad shard's all-reduce across R ranks 2*(P/G)*4*(R-1)/R
    [ "$rs" = $(( P * 4 * (G - 1) / G )) ] || { good=0; echo "     plan reduce-scatter $rs != P*4*(G-1)/G"; }
    if [ "$z" -lt 3 ]; then [ "$ag" = $(( P * 4 * (G - 1) / G )) ] || { good=0; echo "     plan all-gather $ag != P*4*(G-1)/G"; }; fi
    [ "$sc" = $(( 16 * (N - 1) )) ] || { good=0; echo "     plan scalars $sc"; }
    [ "$across" = $(( 2 * P / G * 4 * (R - 1) / R )) ] || { good=0; echo "     plan across '$across' != 2*(P/G)*4*(R-1)/R"; }
    [ "$(step_inside "$name")" = "$rs $ag $sc" ] || { good=0; echo "     steps inside '$(step_inside "$name")' != plan '$rs $ag $sc'"; }
    [ "$(step_across "$name")" = "$across" ] || { good=0; echo "     steps across '$(step_across "$name")' != plan '$across'"; }
    [ $good -eq 1 ] && ok "stage $z G=$G: bytes per step inside ($rs $ag $sc) and across ($across) = plan = formula" || bad "stage $z G=$G: bytes"
    good=1
    for row in params grads optimizer "gather buffers"; do
        [ -n "$(mem "$name" "$row" 2)" ] && [ "$(mem "$name" "$row" 2)" = "$(mem "$name" "$row" 3)" ] \
            || { good=0; echo "     $row: allocated '$(mem "$name" "$row" 2)' != plan '$(mem "$name" "$row" 3)'"; }
    done
    [ "$(mem "$name" params 2)" = $(( z < 3 ? 4 * P : 4 * P / G )) ] || { good=0; echo "     params $(mem "$name" params 2) != ZeRO over G"; }
    [ "$(mem "$name" optimizer 2)" = $(( 8 * P / G )) ] || { good=0; echo "     optimizer $(mem "$name" optimizer 2) != 8P/G"; }
    [ $good -eq 1 ] && ok "stage $z G=$G: memory = plan = ZeRO formula over G (P=$P)" || bad "stage $z G=$G: memory"
}

echo "--- A. G = 2 at N = 4, stages 1-3, against stage 0"
hrun z0 -z 0 -x 4 || bad "stage 0 ran"
for z in 1 2 3; do
    hrun z${z}g2 -z $z -zg 2 -x 4 || { bad "stage $z G=2 ran"; continue; }
    grep -q "^ZeRO stage $z, 4 ranks in 2 shard groups of 2" "$tmp/z${z}g2.txt" && ok "stage $z G=2: the table names the groups" || bad "stage $z G=2: no groups line"
    check_hybrid z${z}g2 $z 2
    # another order of additions than stage 0 (see the header): 1e-5 relative, what test_zero.sh
    # D allows for the same reason; measured here about 1e-7
    within 1e-5 "$(losses z${z}g2)" "$(losses z0)" && within 1e-5 "$(norms z${z}g2)" "$(norms z0)" \
        && ok "stage $z G=2: losses and norms within 1e-5 of stage 0's" \
        || { bad "stage $z G=2: losses or norms off stage 0's"; paste <(losses z${z}g2) <(losses z0) <(norms z${z}g2) <(norms z0); }
done
same_model z1g2 z2g2 && same_model z1g2 z3g2 && [ "$(losses z1g2)" = "$(losses z3g2)" ] \
    && ok "G=2: stages 1, 2 and 3 give byte-identical models" || bad "G=2: stages 1-3 differ"

echo "--- B. G = N = 4 is the plain stage"
hrun z2 -z 2 -x 4 || bad "stage 2 ran"
hrun z2g4 -z 2 -zg 4 -x 4 || bad "stage 2 G=4 ran"
same_model z2g4 z0 && same_model z2g4 z2 && ok "stage 2 G=4: model byte-identical to stage 0 and plain stage 2" || bad "stage 2 G=4 differs"
[ "$(grep -v 'tok/s\|peak RSS\|^wrote\|ms)' "$tmp/z2g4.txt")" = "$(grep -v 'tok/s\|peak RSS\|^wrote\|ms)' "$tmp/z2.txt")" ] \
    && [ -n "$(step_bytes z2g4)" ] && [ "$(step_bytes z2g4)" = "$(step_bytes z2)" ] && [ -z "$(plan_across z2g4)" ] \
    && ok "stage 2 G=4: the same table, plan and bytes as plain stage 2, nothing across groups" || bad "stage 2 G=4 prints otherwise"

echo "--- C. G = 1: stage 0's bits and memory"
for z in 1 3; do
    hrun z${z}g1 -z $z -zg 1 -x 4 || { bad "stage $z G=1 ran"; continue; }
    same_model z${z}g1 z0 && [ "$(losses z${z}g1)" = "$(losses z0)" ] && ok "stage $z G=1: model and losses bit-identical to stage 0" \
        || bad "stage $z G=1 differs from stage 0"
    check_hybrid z${z}g1 $z 1
done
[ "$(mem z1g1 params 2) $(mem z1g1 grads 2) $(mem z1g1 optimizer 2)" = "$(mem z0 params 2) $(mem z0 grads 2) $(mem z0 optimizer 2)" ] \
    && ok "stage 1 G=1 holds stage 0's params, grads and optimizer state" || bad "stage 1 G=1 memory differs from stage 0's"

echo "--- D. a checkpoint written with G = 2 resumes with G = 2 and G = 4"
hrun ck -z 3 -zg 2 -x 4 -n 2 || bad "checkpointing run ran"
resume() { # resume NAME ARGS...: from ck's checkpoint 2, to step 4
    local name=$1; shift
    mkdir -p "$tmp/$name"
    cp "$tmp"/ck/*_00000002* "$tmp/$name"/
    hrun "$name" -x 4 -y 1 "$@" || bad "$name ran"
    grep -q "resumed from checkpoint 2" "$tmp/$name.txt" || bad "$name did not resume from checkpoint 2"
}
resume r_z1g2 -z 1 -zg 2
same_model r_z1g2 ck && ok "G=2 checkpoint, resumed at stage 1 G=2: the uninterrupted run's model" || bad "G=2 -> G=2 resume differs"
resume r_z2g4 -z 2 -zg 4
resume r_z0 -z 0
same_model r_z2g4 r_z0 && ! same_model r_z2g4 ck && ok "G=2 checkpoint, resumed at stage 2 G=4: stage 0's resumed model (not G=2's)" \
    || bad "G=2 -> G=4 resume differs from stage 0's resume"

echo "--- E. bad input under mpirun"
out=$(timeout 60 mpirun -np $N ./train_gpt2 -e "$MODEL" "${DATA[@]}" -z 1 -zg 3 -x 1 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(echo "$out" | grep -c 'flag -zg 3 must divide the 4 ranks')" -ge 1 ] \
    && ok "-zg 3 with 4 ranks: exit $rc, '$(echo "$out" | grep -m1 'flag -zg')'" || { bad "-zg 3 with 4 ranks: exit $rc"; echo "$out" | tail -3; }

echo "--- F. -z auto -zg 2"
auto() { timeout 300 mpirun -np $N ./train_gpt2 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -x 1 -z auto -zg 2 -zm "$1" > "$tmp/$2.txt" 2>&1; }
auto 100000 probe
total() { sed -n "s/^  stage $1: plan .* = \([0-9.]*\) MB: .*/\1/p" "$tmp/probe.txt"; }
budget=$(total 2)
want=$(for s in 0 1 2 3; do awk -v t="$(total $s)" -v b="$budget" -v s=$s 'BEGIN { if (t != "" && t <= b) print s }'; done | head -1)
if [ -z "$budget" ] || ! grep -q "^  (stages 1-3 in shard groups of 2 ranks: -zg)$" "$tmp/probe.txt"; then bad "-z auto -zg 2: no candidates"; tail -3 "$tmp/probe.txt"
elif ! auto "$budget" pick; then bad "-z auto -zg 2 -zm $budget ran"; tail -3 "$tmp/pick.txt"
else
    got=$(sed -n 's/^  stage \([0-3]\): .*picked.*/\1/p' "$tmp/pick.txt")
    groups=" in 2 shard groups of 2"; [ "$want" = 0 ] && groups="," # stage 0 has no groups
    [ -n "$want" ] && [ "$got" = "$want" ] && grep -q "^ZeRO stage $want, 4 ranks$groups" "$tmp/pick.txt" \
        && [ "$(mem pick params 2)" = "$(mem pick params 3)" ] && [ "$(mem pick optimizer 2)" = "$(mem pick optimizer 3)" ] \
        && ok "-z auto -zg 2 -zm $budget: picked stage $got${groups%,}, the lowest that fits; allocated = its plan" \
        || { bad "-z auto -zg 2 -zm $budget: picked '$got', want '$want'"; grep "^  stage\|^ZeRO" "$tmp/pick.txt"; }
fi

summary hybrid
