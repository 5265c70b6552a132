#!/usr/bin/env bash
# The CUDA trainer on the CPU emulator (dev/cuda/emu) against the CPU trainer, on the tiny model:
#  A. CUDA fp32 (train_gpt2fp32cu_emu, ranks started with -pn) against train_gpt2 (mpirun) on
#     1, 2 and 3 ranks, every stage, and stage 3's reshard policies and prefetch depths 0, 1, 2:
#     every step's loss within 1e-5 relative and norm within 1e-4 (the two trainers sum in
#     different orders: blocked GEMM against cuBLASLt's, per-thread against per-warp sums);
#     and 2 ranks x B=2 against 1 rank x B=4 (the same global batch);
#  B. checkpoints cross the trainers: CUDA (2 ranks, stage 3) -> CPU (1 rank, B doubled) and
#     CPU (2 ranks, stage 1) -> CUDA (3 ranks, stage 2, same tokens per step): the resumed steps
#     match the uninterrupted run of the other trainer (1e-5 / 1e-4);
#  C. the emulator can see a missing stream ordering in the trainer: a copy of train_gpt2.cu
#     without the event wait before each reduce-scatter (unit_grads_done) must, under the random
#     schedule, end or train differently from the real one (the collective may read gradients
#     the backward has not written yet). A check that cannot fail proves nothing.
# The stream schedule is the caller's EMU_SCHEDULE (run_tests.sh runs it eager and random).
# usage: dev/test/test_emu_trainer.sh
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
CU=./train_gpt2fp32cu_emu
for b in $CU ./train_gpt2; do [ -x $b ] || { echo "$b missing (make emu train_gpt2)"; echo "emu_trainer: 0 passed, 1 failed"; exit 1; }; done
COMMON=(-e "$MODEL" "${DATA[@]}" -v 0 -s 0 -t 32)

# cpu NAME N ARGS...: train_gpt2 under mpirun; cuda NAME N ARGS...: the emulated CUDA trainer
cpu() {
    local name=$1 n=$2; shift 2
    timeout 600 mpirun -np "$n" ./train_gpt2 "${COMMON[@]}" -o "$tmp/$name" "$@" > "$tmp/$name.txt" 2>&1 ||
        { echo "     cpu run $name exited $?"; tail -n 3 "$tmp/$name.txt"; return 1; }
}
cuda() {
    local name=$1 n=$2; shift 2
    local pids=() r log rc=0
    for ((r = n - 1; r >= 0; r--)); do
        log="$tmp/$name.txt"; [ $r -gt 0 ] && log="$tmp/$name.r$r.txt"
        local procs=()
        [ "$n" -gt 1 ] && procs=(-pn "$n" -pr "$r" -pi fs -pf "$tmp/rdv_$name")
        NCCL_HOSTID="emu-$name-$r" timeout 600 $CU "${COMMON[@]}" -wt 120 -o "$tmp/$name" "${procs[@]}" "$@" > "$log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    [ $rc -eq 0 ] || { echo "     cuda run $name exited $rc"; tail -n 3 "$tmp/$name"*.txt; }
    return $rc
}
steps() { grep -o 'step *[0-9]*/[0-9]*: train loss [0-9.]* norm [0-9.]*' "$tmp/$1.txt" | awk '{print $2, $5, $7}'; }
# agree A B MIN: the steps both printed (at least MIN) agree, losses 1e-5 and norms 1e-4 relative
agree() {
    join <(steps "$1") <(steps "$2") | awk -v min="$3" '{ n++; d = $2 - $4; if (d < 0) d = -d; if (d > 1e-5 * $2) exit 1
        d = $3 - $5; if (d < 0) d = -d; if (d > 1e-4 * $3) exit 1 } END { exit n < min }'
}
show() { join <(steps "$1") <(steps "$2") | sed 's/^/     /'; }

echo "--- A. CUDA fp32 on the emulator = train_gpt2 (schedule ${EMU_SCHEDULE:-lazy})"
for cfg in "1 0" "2 0" "2 1" "2 2" "2 3" "3 0" "3 1" "3 2" "3 3"; do
    set -- $cfg
    n=$1 z=$2
    cpu c_n${n}z$z $n -b 2 -z $z -x 3 && cuda g_n${n}z$z $n -b 2 -z $z -x 3 && agree c_n${n}z$z g_n${n}z$z 3 \
        && ok "N=$n stage $z: 3 steps, CUDA = CPU (loss 1e-5, norm 1e-4)" || { bad "N=$n stage $z: CUDA vs CPU"; show c_n${n}z$z g_n${n}z$z; }
done
cuda g_n1b4 1 -b 4 -z 0 -x 3 && agree g_n1b4 g_n2z2 3 \
    && ok "CUDA: 2 ranks x B=2 (stage 2) = 1 rank x B=4 (loss 1e-5, norm 1e-4)" || { bad "CUDA: 2 ranks vs 1 rank"; show g_n1b4 g_n2z2; }
for cfg in "always 0" "always 2" "never 1" "default 2"; do
    set -- $cfg
    name=n3_$1_$2
    cuda g_$name 3 -b 2 -z 3 -zr $1 -zp $2 -x 3 && agree c_n3z3 g_$name 3 \
        && ok "N=3 stage 3 reshard $1 prefetch $2: CUDA = CPU" || { bad "N=3 stage 3 reshard $1 prefetch $2"; show c_n3z3 g_$name; }
done

echo "--- B. checkpoints between the trainers"
cuda g_ck 2 -b 2 -z 3 -x 4 -n 2 && mkdir -p "$tmp/c_from_g" && cp "$tmp/g_ck"/*_00000002* "$tmp/c_from_g/" \
    && cpu c_from_g 1 -b 4 -x 4 -y 1 && grep -q "resumed from checkpoint 2" "$tmp/c_from_g.txt" && agree g_ck c_from_g 2 \
    && ok "CUDA 2 ranks stage 3 -> checkpoint at step 2 -> CPU 1 rank: steps 3-4 agree" || { bad "CUDA -> CPU resume"; show g_ck c_from_g; }
cpu c_ck 2 -b 3 -z 1 -x 4 -n 2 && mkdir -p "$tmp/g_from_c" && cp "$tmp/c_ck"/*_00000002* "$tmp/g_from_c/" \
    && cuda g_from_c 3 -b 2 -z 2 -x 4 -y 1 && grep -q "resumed from checkpoint 2" "$tmp/g_from_c.txt" && agree c_ck g_from_c 2 \
    && ok "CPU 2 ranks stage 1 -> checkpoint at step 2 -> CUDA 3 ranks stage 2: steps 3-4 agree" || { bad "CPU -> CUDA resume"; show c_ck g_from_c; }

echo "--- C. a missing event wait in the trainer is seen"
awk '/^static void unit_grads_done/ { f = 1 } f && /stream_wait_for\(comm->stream, model->stream, model->handoff\);/ { f = 0; print "    // (removed: the compute-to-comm event wait)"; next } { print }' \
    train_gpt2.cu > "$tmp/train_nowait.cu"
if cmp -s train_gpt2.cu "$tmp/train_nowait.cu"; then bad "mutation: the event wait in unit_grads_done was not found"
elif dev/cuda/emu/nvcc-cpu -O2 -I. -DENABLE_FP32 "$tmp/train_nowait.cu" -o "$tmp/train_nowait" > "$tmp/build_nowait.txt" 2>&1; then
    CU_REAL=$CU; CU=$tmp/train_nowait
    EMU_SCHEDULE=random EMU_SEED=2 cuda nowait 2 -b 2 -z 2 -x 2 > /dev/null 2>&1
    CU=$CU_REAL
    EMU_SCHEDULE=random EMU_SEED=2 cuda withwait 2 -b 2 -z 2 -x 2 || bad "the real trainer under the random schedule"
    if [ "$(steps nowait)" != "$(steps withwait)" ]; then
        ok "without the wait, 2 ranks stage 2 under the random schedule: $(steps nowait | tr '\n' ' ' | cut -c1-60)vs $(steps withwait | tr '\n' ' ' | cut -c1-60)"
    else bad "the trainer without its event wait trained the same: the schedule did not expose it"; fi
else bad "building the mutated trainer"; tail -n 3 "$tmp/build_nowait.txt"; fi
summary "emu_trainer"
