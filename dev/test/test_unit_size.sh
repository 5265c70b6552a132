#!/usr/bin/env bash
# Unit size, -zu K (FSDP's wrap policy: K transformer blocks per unit), on both trainers. Every
# run is checked against arithmetic done here from the model's shape, not read from the trainer:
# the padded count P, the units (1 + ceil(L/K), the last holding the rest), the collectives per
# step (plan and counted), stage 3's gather buffers U_0 + min(D+1, units-1)·U_1 and its
# all-gather bytes; and against stage 0's losses:
#  A. CPU, a fresh d4 (L = 4; K = 3 leaves a last unit of 1 block), N = 2: K = 1, 2, 3 at
#     stages 0-3 (K = 1 at 0 and 3); memory = plan = ZeRO formula and bytes = plan
#     (check_stage); losses, norms and final model byte-identical to K = 1 stage 0.
#  B. CPU, N = 3: each K's stage 3 byte-identical to its own stage 0; K = 2, 3 against K = 1 to
#     1e-5 (losses) and 1e-4 (norms) relative, not bitwise: the ring reduce-scatter starts each
#     slice's sum at the rank after the slice's owner (DESIGN.md §6.1), and K moves the slice
#     boundaries, so an element's three addends associate differently; the norm's per-rank
#     partial sums cover other elements too. At N = 2 a sum has two addends, and a + b = b + a
#     exactly, so A is bitwise.
#  C. checkpoints: written with K = 2 (stage 3), resumed with K = 1 (stage 1), and written with
#     K = 3, resumed with K = 1 (stage 2), all at N = 2: the step-4 model byte-identical to the
#     uninterrupted run.
#  D. the CUDA trainer on the emulator (train_gpt2fp32cu_emu, a fresh d3: L = 3, K = 2 leaves a
#     last unit of 1 block), N = 2: K = 1 stage 0, K = 2 stages 0 and 3, K = 3 stage 3; the
#     same arithmetic, and byte-identical to K = 1 stage 0 (the emulated NCCL adds in rank order);
#     and the bf16 build (train_gpt2cu_emu, the tiny bf16 model, L = 2): K = 2 stage 3 against
#     K = 1 stage 0 the same way.
# usage: dev/test/test_unit_size.sh   (train_gpt2 with MPI; D needs make train_gpt2fp32cu_emu train_gpt2cu_emu)
# UNIT_SIZE_SECTIONS picks sections (default "A B C D"; C needs A's runs).
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
if ! command -v mpirun >/dev/null; then echo "mpirun not found: install openmpi-bin"; echo "unit_size: 0 passed, 1 failed"; exit 1; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1
source dev/test/zero_lib.sh # losses, norms, plan_bytes, step_bytes, mem, padded, check_stage, BYTES_CPU
X=3 # steps per run
SECTIONS=" ${UNIT_SIZE_SECTIONS:-A B C D} "
want() { [[ "$SECTIONS" == *" $1 "* ]]; }

# zrun NAME N ARGS...: the CPU trainer on a fresh d4 on N ranks into $tmp/NAME (log NAME.txt)
zrun() {
    local name=$1 n=$2; shift 2
    timeout 300 mpirun -np "$n" ./train_gpt2 -e d4 "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -x $X -o "$tmp/$name" "$@" > "$tmp/$name.txt" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || { echo "     run $name (N=$n $*) exited $rc:"; tail -3 "$tmp/$name.txt"; }
    return $rc
}
# erun NAME N ARGS...: the emulated fp32 CUDA trainer on a fresh d3, N processes (-pn) into
# $tmp/NAME; EMU_BIN and EMU_MODEL pick another build and model
erun() {
    local name=$1 n=$2; shift 2
    local pids=() r log rc=0
    for ((r = n - 1; r >= 0; r--)); do
        log="$tmp/$name.txt"; [ $r -gt 0 ] && log="$tmp/$name.r$r.txt"
        NCCL_HOSTID="unitsize-$name-$r" timeout 600 ${EMU_BIN:-./train_gpt2fp32cu_emu} -e ${EMU_MODEL:-d3} "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -x 2 -wt 120 \
            -o "$tmp/$name" -pn "$n" -pr "$r" -pi fs -pf "$tmp/rdv_$name" "$@" > "$log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    [ $rc -eq 0 ] || { echo "     run $name (N=$n $*) exited $rc:"; tail -3 "$tmp/$name"*.txt; }
    return $rc
}
final_model() { echo "$tmp/$1/model_$(printf %08d "$2").bin"; }
same_run() { # same_run A B STEPS: losses, norms and the final model byte-identical
    [ -n "$(losses "$1")" ] && [ "$(losses "$1")" = "$(losses "$2")" ] && [ "$(norms "$1")" = "$(norms "$2")" ] \
        && cmp -s "$(final_model "$1" "$3")" "$(final_model "$2" "$3")"
}
close() { # close A B: losses 1e-5 and norms 1e-4 relative (see B above for why not bitwise)
    paste <(losses "$1") <(losses "$2") <(norms "$1") <(norms "$2") | awk 'NF != 4 { exit 1 }
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) exit 1
          d = $3 - $4; if (d < 0) d = -d; if (d > 1e-4 * $3 + 1e-4) exit 1 } END { exit n < 2 }'
}

# The units of a model of L layers, width C (Vp = 50304, maxT = 1024: a fresh dN) at N ranks
# with K blocks per unit, from GPT-2's shapes: a block holds 12C^2 + 13C elements (qkv 3C^2 + 3C,
# attention projection C^2 + C, fc 4C^2 + 4C, fc projection 4C^2 + C, two layernorms 4C), unit 0
# wte + wpe + lnf = (Vp + maxT + 2)C; each unit is padded to a multiple of 16N.
# Sets U0, U1 (the first block unit, the largest), ULAST, NB (block units), P.
units() {
    local L=$1 C=$2 N=$3 K=$4 m=$((16 * $3))
    local blk=$((12 * C * C + 13 * C)) rest
    pad() { echo $(( ($1 + m - 1) / m * m )); }
    NB=$(( (L + K - 1) / K )); rest=$(( L - (NB - 1) * K ))
    U0=$(pad $(( (50304 + 1024 + 2) * C ))); U1=$(pad $((K * blk))); ULAST=$(pad $((rest * blk)))
    P=$(( U0 + (NB - 1) * U1 + ULAST ))
}
# check_units NAME N STAGE K L C BYTES_PER_PARAM: the run against units' arithmetic
check_units() {
    local name=$1 N=$2 z=$3 K=$4 L=$5 C=$6 b=$7 good=1 rs ag want_ag plan_calls step_calls
    units "$L" "$C" "$N" "$K"
    [ "$(padded "$name")" = "$P" ] || { good=0; echo "     padded $(padded "$name") != $P"; }
    grep -q "$K blocks per unit ($((1 + NB)) units)" "$tmp/$name.txt" || { good=0; echo "     no '$K blocks per unit ($((1 + NB)) units)'"; }
    # collectives per step: a reduce-scatter per unit; stages 0-2 an all-gather per unit; stage 3
    # (reshard default) unit 0 twice and the block units in the forward, all but the last again
    want_ag=$(( z < 3 ? 1 + NB : 2 + 2 * NB - 1 ))
    plan_calls=$(sed -n 's/^collectives per step (plan): reduce-scatter \([0-9]*\), all-gather \([0-9]*\)$/\1 \2/p' "$tmp/$name.txt")
    step_calls=$(sed -n 's/.*| collectives: reduce-scatter \([0-9]*\) all-gather \([0-9]*\) |.*/\1 \2/p' "$tmp/$name.txt" | sort -u)
    [ "$plan_calls" = "$((1 + NB)) $want_ag" ] && [ "$step_calls" = "$plan_calls" ] \
        || { good=0; echo "     collectives: plan '$plan_calls', steps '$step_calls', expected '$((1 + NB)) $want_ag'"; }
    if [ "$z" -eq 3 ]; then # prefetch 1: two block slots (one if there is one block unit), each U_1
        local slots=$(( NB < 2 ? NB : 2 ))
        [ "$(mem "$name" "gather buffers" 2)" = "$(( (U0 + slots * U1) * b ))" ] \
            || { good=0; echo "     gather buffers $(mem "$name" "gather buffers" 2) != (U0 + $slots U1) x $b = $(( (U0 + slots * U1) * b ))"; }
        read -r rs ag _ <<< "$(step_bytes "$name")"
        # every unit of 16N elements: (N-1)/N of it is a whole number of elements
        [ "$ag" = "$(( (2 * U0 + 2 * (P - U0) - ULAST) / N * (N - 1) * b ))" ] \
            || { good=0; echo "     all-gather $ag != (2 U0 + 2 (P - U0) - U_last) (N-1)/N x $b"; }
    fi
    [ $good -eq 1 ] && ok "$name: N=$N stage $z K=$K: P, $((1 + NB)) units, collectives$([ "$z" -eq 3 ] && echo ", gather buffers, all-gather bytes") = arithmetic" \
        || bad "$name: N=$N stage $z K=$K: unit arithmetic"
}

want A && echo "--- A. CPU, d4, N = 2: K = 1, 2, 3, stages 0-3"
want A && for cfg in "1 0" "1 3" "2 0" "2 1" "2 2" "2 3" "3 0" "3 1" "3 2" "3 3"; do
    set -- $cfg
    K=$1 z=$2 name=a_k$1_z$2
    extra=(); [ "$cfg" = "2 3" ] || [ "$cfg" = "3 0" ] && extra=(-n 2) # checkpoints for C
    zrun $name 2 -z $z -zu $K "${extra[@]}" || { bad "$name ran"; continue; }
    check_stage $name 2 $z "$BYTES_CPU"
    check_units $name 2 $z $K 4 256 4
    [ "$name" = a_k1_z0 ] && continue
    same_run $name a_k1_z0 $X && ok "$name: losses, norms, final model byte-identical to K=1 stage 0" \
        || { bad "$name differs from K=1 stage 0"; paste <(losses $name) <(losses a_k1_z0) <(norms $name) <(norms a_k1_z0); }
done

if want B; then
echo "--- B. CPU, d4, N = 3"
for cfg in "1 0" "1 3" "2 0" "2 3" "3 0" "3 3"; do
    set -- $cfg
    zrun b_k$1_z$2 3 -z $2 -zu $1 || { bad "b_k$1_z$2 ran"; continue; }
    check_units b_k$1_z$2 3 $2 $1 4 256 4
done
for K in 1 2 3; do
    same_run b_k${K}_z3 b_k${K}_z0 $X && ok "N=3 K=$K: stage 3 byte-identical to stage 0" || bad "N=3 K=$K: stage 3 differs from stage 0"
done
for K in 2 3; do
    close b_k${K}_z0 b_k1_z0 && ok "N=3 K=$K: losses and norms = K=1's (1e-5, 1e-4)" \
        || { bad "N=3 K=$K vs K=1"; paste <(losses b_k${K}_z0) <(losses b_k1_z0) <(norms b_k${K}_z0) <(norms b_k1_z0); }
done
fi

if want C; then
echo "--- C. checkpoints across K (N = 2)"
resume_from() { mkdir -p "$tmp/$3"; cp "$tmp/$1"/*_$(printf %08d "$2")* "$tmp/$3/"; }
X=4
resume_from a_k2_z3 2 c21 && zrun c21 2 -z 1 -zu 1 -y 1 && grep -q "resumed from checkpoint 2" "$tmp/c21.txt" \
    && zrun c_ref 2 -z 0 -zu 1 && cmp -s "$(final_model c21 4)" "$(final_model c_ref 4)" \
    && ok "written with K=2 (stage 3), resumed with K=1 (stage 1) at step 2: step-4 model byte-identical" || bad "checkpoint K=2 -> K=1"
resume_from a_k3_z0 2 c31 && zrun c31 2 -z 2 -zu 1 -y 1 && grep -q "resumed from checkpoint 2" "$tmp/c31.txt" \
    && cmp -s "$(final_model c31 4)" "$(final_model c_ref 4)" \
    && ok "written with K=3 (stage 0), resumed with K=1 (stage 2) at step 2: step-4 model byte-identical" || bad "checkpoint K=3 -> K=1"
fi

want D && echo "--- D. the CUDA trainer on the emulator (train_gpt2fp32cu_emu, d3, N = 2)"
if ! want D; then :
elif [ -x ./train_gpt2fp32cu_emu ]; then
    export NCCL_ALGO=Ring NCCL_PROTO=Simple EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1 # as test_zero_emu.sh
    for cfg in "1 0" "2 0" "2 3" "3 3"; do
        set -- $cfg
        name=d_k$1_z$2
        erun $name 2 -z $2 -zu $1 || { bad "$name ran"; continue; }
        check_stage $name 2 $2 "4 4 12" # fp32 params and grads; fp32 master + m + v
        check_units $name 2 $2 $1 3 192 4
        [ "$name" = d_k1_z0 ] && continue
        same_run $name d_k1_z0 2 && ok "$name: losses, norms, final model byte-identical to K=1 stage 0" \
            || { bad "$name differs from K=1 stage 0"; paste <(losses $name) <(losses d_k1_z0) <(norms $name) <(norms d_k1_z0); }
    done
    if [ -x ./train_gpt2cu_emu ]; then # bf16: 2-byte params and grads; the tiny model's C = 64
        for cfg in "1 0" "2 3"; do
            set -- $cfg
            name=bf16_k$1_z$2
            EMU_BIN=./train_gpt2cu_emu EMU_MODEL=gpt2_tiny_bf16.bin erun $name 2 -z $2 -zu $1 || { bad "$name ran"; continue; }
            check_stage $name 2 $2 "$BYTES_BF16"
        done
        units 2 64 2 2 # the tiny model at N = 2, K = 2: one block unit
        [ "$(mem bf16_k2_z3 "gather buffers" 2)" = "$(( (U0 + U1) * 2 ))" ] && grep -q "2 blocks per unit (2 units)" "$tmp/bf16_k2_z3.txt" \
            && same_run bf16_k2_z3 bf16_k1_z0 2 && ok "bf16, K=2 stage 3: gather buffers (U0 + U1) x 2 bytes; byte-identical to K=1 stage 0" \
            || { bad "bf16, K=2 stage 3"; paste <(losses bf16_k2_z3) <(losses bf16_k1_z0) <(norms bf16_k2_z3) <(norms bf16_k1_z0); }
    else
        bad "train_gpt2cu_emu not built (make train_gpt2cu_emu)"
    fi
else
    bad "train_gpt2fp32cu_emu not built (make train_gpt2fp32cu_emu)"
fi

summary unit_size
