#!/usr/bin/env bash
# make check's stage test (a few of test_zero.sh's and test_zero_emu.sh's checks): on 2 ranks, the
# tiny model, 3 steps, stage 3 gives stage 0's losses, norms and final model byte for byte
# (DESIGN.md §5.6), and allocates and sends what the plan says, on the CPU trainer under mpirun
# and on the emulated CUDA trainer (bf16 build, 2 processes started with -pn).
# usage: dev/test/test_stages_2ranks.sh   (about 1 minute on two shared cores)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
source dev/test/zero_lib.sh # model_of, losses, norms, same_run, check_stage, cuda_run, BYTES_*
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1

if ! command -v mpirun > /dev/null; then bad "mpirun not found: install openmpi-bin"
else
    for z in 0 3; do
        timeout 300 mpirun -np 2 ./train_gpt2 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -b 2 -t 32 -x 3 -z $z -o "$tmp/c$z" \
            > "$tmp/c$z.txt" 2>&1 || { bad "CPU stage $z ran"; tail -3 "$tmp/c$z.txt"; }
    done
    same_run c3 c0 && ok "CPU, 2 ranks: stage 3's model, losses and norms = stage 0's, byte for byte" \
        || bad "CPU, 2 ranks: stage 3 differs from stage 0"
    check_stage c3 2 3 "$BYTES_CPU"
fi

BIN=./train_gpt2cu_emu
if [ ! -x $BIN ] && [ ! -f /usr/local/cuda/include/cuda_runtime.h ]; then
    echo "     (no CUDA headers, so no $BIN: the emulated CUDA part skipped)"
elif [ ! -x $BIN ]; then bad "$BIN missing (make train_gpt2cu_emu)"
else
    export EMU_THREADS=${EMU_THREADS:-2}
    for z in 0 3; do cuda_run g$z $BIN 2 -x 3 -z $z || bad "emulated CUDA stage $z ran"; done
    same_run g3 g0 && ok "emulated CUDA, 2 ranks: stage 3's model, losses and norms = stage 0's, byte for byte" \
        || bad "emulated CUDA, 2 ranks: stage 3 differs from stage 0"
    check_stage g3 2 3 "$BYTES_BF16"
fi
summary "stages_2ranks"
