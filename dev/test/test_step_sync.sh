#!/usr/bin/env bash
# Launches and host waits per optimizer step of the CUDA trainer, and the 16-byte alignment its
# kernels rely on, on the CPU emulator (dev/cuda/emu), tiny model, micro-steps of B=2 x T=32:
#  A. one rank, 2 micro-steps per step (-d 128), 1 and 2 blocks per unit (-zu): from the
#     emulator's trace of every op (EMU_TRACE=1), each step launches AdamW once per unit (the
#     start-up table's units: 3, then 2; the old update launched once per tensor, 4 + 12 L = 28),
#     the norm's two kernels once (not twice per unit), and the layernorm backward as two kernels
#     per layernorm (2 L + 1 of them) per micro-step (the one-pass kernel and the column sums);
#     the step line's host syncs are 2 whatever the micro-steps (the norm and the step's end: the
#     losses are read at the end, not waited for each micro-step).
#  B. two ranks, fp32, under the lazy schedule (queued work runs only when something waits for
#     it): stages 1 and 2, which no longer make the compute stream wait for every all-gather after
#     the update but each unit for its own, give stage 0's losses, norms and final model bytes;
#     rank 0 launches AdamW once per unit of its shard, and syncs twice per step.
#  C. the 16-byte kernels refuse a pointer off a 16-byte boundary with a message naming it (each
#     launcher, through dev/cuda/test_kernels --misaligned), and so does the trainer built with
#     activations carved at 8-byte instead of 256-byte boundaries (T = 33 makes the (B,T) fp32
#     losses 264 bytes, so the next tensor starts 8 bytes off).
#  D. (STEP_SYNC_MUTANTS=1; two more emulated builds and three runs, left out of make test for its
#     time) mutants of train_gpt2.cu that the checks above must catch: a host wait for the GPU
#     after each micro-step (the old loss read) fails A's count; stages 1-2 without the compute's
#     wait for a unit's all-gather train differently from stage 0 under the lazy schedule.
# usage: dev/test/test_step_sync.sh   (make emu; ~1 minute on 2 cores, ~2 with STEP_SYNC_MUTANTS=1)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
source dev/test/zero_lib.sh # losses, norms
export NCCL_ALGO=Ring NCCL_PROTO=Simple EMU_CUBLASLT_ALGO_BY_ALIGNMENT=1 OMP_NUM_THREADS=1
unset EMU_SCHEDULE # each section names its schedule
BF16=./train_gpt2cu_emu FP32=./train_gpt2fp32cu_emu KERNELS=./dev/cuda/test_kernels_emu
for b in $BF16 $FP32 $KERNELS; do [ -x $b ] || { echo "$b missing (make emu)"; echo "step_sync: 0 passed, 1 failed"; exit 1; }; done
L=2 # gpt2_tiny's layers

# mutant NAME SED_SCRIPT: train_gpt2.cu edited by sed (which must change it), built for the emulator (fp32)
mutant() {
    sed "$2" train_gpt2.cu > "$tmp/$1.cu"
    ! cmp -s train_gpt2.cu "$tmp/$1.cu" || { echo "     the edit '$2' changes nothing in train_gpt2.cu"; return 1; }
    dev/cuda/emu/nvcc-cpu -O2 -I. -DENABLE_FP32 -Xcompiler -fopenmp "$tmp/$1.cu" -o "$tmp/bin_$1" > "$tmp/build_$1.txt" 2>&1 \
        || { tail -n 3 "$tmp/build_$1.txt"; return 1; }
}
# the mutants build while section A runs
MUTANTS=${STEP_SYNC_MUTANTS:-0}
if [ "$MUTANTS" = 1 ]; then
    mutant sync_per_micro 's/^\(        gpt2_train_micro_step(model, .*, micro == grad_accum - 1);\)$/\1 wait_for_gpu(model, "the loss");/' &
    mutant no_unit_wait '/gathered\[u\], 0)); \/\/ the compute waits, not the host$/d' &
fi
mutant carve8 's/round_up(parts\[i\].n \* parts\[i\].size, 256)/round_up(parts[i].n * parts[i].size, 8)/' &

# one NAME BIN ARGS...: one rank, traced, into $tmp/NAME.txt (stdout and the trace interleaved)
one() {
    local name=$1 bin=$2; shift 2
    EMU_TRACE=1 timeout 300 "$bin" -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 "$@" > "$tmp/$name.txt" 2>&1 ||
        { echo "     run $name exited $?"; tail -n 3 "$tmp/$name.txt"; return 1; }
}
# per_step NAME PATTERN: how many traced ops match PATTERN before each step line, one count per step
per_step() { awk -v pat="$2" '/^cuda-emu trace: op/ && $0 ~ pat {n++} /^step /{print n + 0; n = 0}' "$tmp/$1.txt"; }
syncs() { sed -n 's/^step .*, \([0-9]*\) host syncs).*/\1/p' "$tmp/$1.txt"; }
units() { sed -n 's/.* blocks per unit (\([0-9]*\) units).*/\1/p' "$tmp/$1.txt"; }
# check_steps NAME MICRO: the counts of section A in every step of run NAME (MICRO micro-steps per step)
check_steps() {
    local name=$1 micro=$2 u want
    u=$(units "$name")
    [ -n "$u" ] || { bad "$name: no units in the start-up table"; return; }
    want=$(printf '%s\n' "$u" "$u")
    [ "$(per_step "$name" "kernel adamw_kernel")" = "$want" ] \
        && ok "$name: AdamW launched once per unit, $u per step (per tensor it was $((4 + 12 * L)))" \
        || bad "$name: AdamW launches per step '$(per_step "$name" "kernel adamw_kernel" | tr '\n' ' ')', want $u"
    [ "$(per_step "$name" "kernel global_norm_(partial|finish)_kernel")" = "$(printf '2\n2')" ] \
        && ok "$name: the norm's 2 kernels once per step (per unit it was $((2 * u)))" \
        || bad "$name: norm launches per step '$(per_step "$name" "kernel global_norm_" | tr '\n' ' ')', want 2"
    want=$(( (2 * L + 1) * micro ))
    # the one-pass kernel: a block per chunk, or (issue 30) a warp per chunk where C allows (the tiny model's 64)
    [ "$(per_step "$name" "kernel layernorm_backward_(warp_)?kernel")" = "$(printf '%s\n' $want $want)" ] &&
        [ "$(per_step "$name" "kernel layernorm_backward_dweight_kernel")" = "$(printf '%s\n' $want $want)" ] &&
        [ "$(per_step "$name" "kernel layernorm_backward")" = "$(printf '%s\n' $((2 * want)) $((2 * want)))" ] \
        && ok "$name: layernorm backward = the one-pass kernel + the column sums, $want each per step ((2L+1) x $micro micro-steps)" \
        || bad "$name: layernorm backward launches '$(per_step "$name" "kernel layernorm_backward" | tr '\n' ' ')', want 2 x $want"
    [ "$(syncs "$name")" = "$(printf '2\n2')" ] && ok "$name: 2 host syncs per step with $micro micro-steps" \
        || bad "$name: host syncs per step '$(syncs "$name" | tr '\n' ' ')', want 2 (the norm and the step's end)"
}

echo "--- A. one rank: launches and host syncs per step (2 micro-steps)"
one zu1 $BF16 -x 2 -d 128 && check_steps zu1 2
one zu2 $BF16 -x 2 -d 128 -zu 2 && check_steps zu2 2

echo "--- B. stages 1-2 wait per unit for their all-gathers: stage 0's bits under the lazy schedule (2 ranks, fp32)"
# run NAME BIN ARGS...: two ranks (-pn) into $tmp/NAME; rank 0's output (and trace) in NAME.txt
run() {
    local name=$1 bin=$2; shift 2
    local pids=() r log rc=0
    for r in 1 0; do
        log="$tmp/$name.txt"; [ $r -gt 0 ] && log="$tmp/$name.r$r.txt"
        NCCL_HOSTID="sync-$name-$r" EMU_TRACE=$((r == 0)) timeout 300 "$bin" -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 \
            -wt 60 -o "$tmp/$name" -pn 2 -pr $r -pi fs -pf "$tmp/rdv_$name" "$@" > "$log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    [ $rc -eq 0 ] || { echo "     run $name ($*) exited $rc:"; tail -n 3 "$tmp/$name"*.txt; }
    return $rc
}
same_run() { # same final model, losses and norms
    local a b; a=$(ls "$tmp/$1"/model_*.bin 2>/dev/null | tail -n 1); b=$(ls "$tmp/$2"/model_*.bin 2>/dev/null | tail -n 1)
    [ -n "$a" ] && [ -n "$b" ] && cmp -s "$a" "$b" && [ -n "$(losses "$1")" ] &&
        [ "$(losses "$1")" = "$(losses "$2")" ] && [ "$(norms "$1")" = "$(norms "$2")" ]
}
run z0 $FP32 -z 0 -x 2 -d 128 || bad "stage 0 ran"
for z in 1 2; do
    run z$z $FP32 -z $z -x 2 -d 128 || { bad "stage $z ran"; continue; }
    same_run z$z z0 && ok "stage $z, lazy schedule: stage 0's losses, norms and model bytes ($(losses z$z | tr '\n' ' '))" \
        || { bad "stage $z differs from stage 0"; paste <(losses z$z) <(losses z0) <(norms z$z) <(norms z0); }
    u=$(units z$z)
    [ -n "$u" ] && [ "$(per_step z$z "kernel adamw_kernel")" = "$(printf '%s\n' "$u" "$u")" ] \
        && ok "stage $z: rank 0 launches AdamW once per unit shard ($u per step)" || bad "stage $z: AdamW launches '$(per_step z$z "kernel adamw_kernel" | tr '\n' ' ')'"
    [ "$(syncs z$z)" = "$(printf '2\n2')" ] && ok "stage $z: 2 host syncs per step" || bad "stage $z: host syncs '$(syncs z$z | tr '\n' ' ')'"
done

echo "--- C. a pointer off a 16-byte boundary is refused, with its name"
for k in gelu layernorm layernorm_backward encoder dbias classifier; do
    $KERNELS --misaligned $k > "$tmp/mis_$k.txt" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -q "error: .* at 0x[0-9a-f]* is not 16-byte aligned" "$tmp/mis_$k.txt" \
        && ok "$k: refused ($(grep -o 'error: [^(]*' "$tmp/mis_$k.txt"))" || { bad "$k: exit $rc, no refusal"; tail -n 2 "$tmp/mis_$k.txt"; }
done
wait # the mutants
if [ -x "$tmp/bin_carve8" ]; then
    timeout 300 "$tmp/bin_carve8" -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 33 -x 1 > "$tmp/carve8.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && grep -q "is not 16-byte aligned" "$tmp/carve8.txt" && ! grep -q "^step" "$tmp/carve8.txt" \
        && ok "activations carved at 8 bytes (T=33): refused before a step ($(grep -o 'error: [^(]*' "$tmp/carve8.txt" | head -n 1))" \
        || { bad "activations carved at 8 bytes: exit $rc"; tail -n 2 "$tmp/carve8.txt"; }
else bad "building the mutant carve8"; fi

echo "--- D. mutants"
if [ "$MUTANTS" != 1 ]; then echo "     skipped (STEP_SYNC_MUTANTS=1 runs them)"; fi
if [ "$MUTANTS" = 1 ] && [ -x "$tmp/bin_sync_per_micro" ]; then
    one sync_per_micro "$tmp/bin_sync_per_micro" -x 2 -d 128
    s=$(syncs sync_per_micro | tr '\n' ' ')
    [ -n "$s" ] && [ "$s" != "2 2 " ] && ok "a host wait per micro-step is seen: $s host syncs per step, not 2" \
        || bad "a host wait per micro-step not seen ('$s')"
elif [ "$MUTANTS" = 1 ]; then bad "building the mutant sync_per_micro"; fi
if [ "$MUTANTS" = 1 ] && [ -x "$tmp/bin_no_unit_wait" ]; then
    run no_unit_wait "$tmp/bin_no_unit_wait" -z 1 -x 2 -d 128 > /dev/null 2>&1
    [ -n "$(losses no_unit_wait)" ] && [ -n "$(losses z0)" ] && [ "$(losses no_unit_wait) $(norms no_unit_wait)" != "$(losses z0) $(norms z0)" ] \
        && ok "stage 1 without the compute's wait for a unit's all-gather trains differently: $(losses no_unit_wait | tr '\n' ' ')vs $(losses z0 | tr '\n' ' ')" \
        || bad "stage 1 without the per-unit wait: not seen ($(losses no_unit_wait | tr '\n' ' '))"
elif [ "$MUTANTS" = 1 ]; then bad "building the mutant no_unit_wait"; fi
summary step_sync
