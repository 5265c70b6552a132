#!/usr/bin/env bash
# Checkpoints and resume (-n, -nk, -y) on the tiny model under mpirun:
#  - same ranks and stage: resuming from step 3 gives the uninterrupted run's step-6 model, byte
#    for byte (stage 1 and stage 3);
#  - another stage (3 -> 1, same ranks): byte-identical too, since the stages are;
#  - resharded: 2 ranks x B=3 -> 3 ranks x B=2, and 4 ranks -> 1 rank with 4 micro-steps (same
#    tokens per step): steps 4-6 match the uninterrupted run (losses 1e-5, norms 1e-4 relative;
#    the sums run in another order);
#  - a checkpoint without its DONE marker is skipped; -nk keeps the newest; a marker whose files
#    are missing, a checkpoint of another model, and -n without -o are clear errors.
# usage: dev/test/test_checkpoint.sh
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
# crun DIR N ARGS...: the tiny model on N ranks with output (and checkpoints) in $tmp/DIR
crun() {
    local dir=$1 n=$2; shift 2
    timeout 300 mpirun -np "$n" ./train_gpt2 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -t 32 -o "$tmp/$dir" "$@" > "$tmp/$dir.txt" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || { echo "     run $dir (N=$n $*) exited $rc:"; grep -m2 error "$tmp/$dir.txt"; }
    return $rc
}
# resume_from SRC STEP DST: a fresh output dir holding only checkpoint STEP of SRC
resume_from() { mkdir -p "$tmp/$3"; cp "$tmp/$1"/*_$(printf %08d "$2")* "$tmp/$3/"; }
losses() { grep -o 'step *[0-9]*/[0-9]*: train loss [0-9.]* norm [0-9.]*' "$tmp/$1.txt" | awk '{print $2, $5, $7}'; }
same_steps() { # the steps both runs printed agree: losses 1e-5, norms 1e-4 relative
    join <(losses "$1") <(losses "$2") | awk '{ n++; d = $2 - $4; if (d < 0) d = -d; if (d > 1e-5 * $2) exit 1
        d = $3 - $5; if (d < 0) d = -d; if (d > 1e-4 * $3 + 1e-4) exit 1 } END { exit n < 3 }'
}

for z in 1 3; do
    crun a$z 2 -b 2 -z $z -x 6 -n 3 && resume_from a$z 3 b$z && crun b$z 2 -b 2 -z $z -x 6 -y 1
    if grep -q "resumed from checkpoint 3" "$tmp/b$z.txt" && cmp -s "$tmp/a$z/model_00000006.bin" "$tmp/b$z/model_00000006.bin"; then
        ok "stage $z, 2 ranks: resumed at step 3, step-6 model byte-identical to the uninterrupted run"
    else bad "stage $z resume differs"; fi
done
resume_from a3 3 c && crun c 2 -b 2 -z 1 -x 6 -y 1 && cmp -s "$tmp/a3/model_00000006.bin" "$tmp/c/model_00000006.bin" \
    && ok "stage 3 checkpoint resumed as stage 1: byte-identical" || bad "stage 3 -> 1 differs"

crun r23a 2 -b 3 -z 2 -x 6 -n 3 && resume_from r23a 3 r23b && crun r23b 3 -b 2 -z 3 -x 6 -y 1
same_steps r23a r23b && ok "2 ranks x B=3 (stage 2) -> 3 ranks x B=2 (stage 3): steps 4-6 match" \
    || { bad "2 -> 3 ranks"; join <(losses r23a) <(losses r23b); }
crun r41a 4 -b 1 -z 1 -x 6 -n 3 && resume_from r41a 3 r41b && crun r41b 1 -b 1 -d 128 -x 6 -y 1
same_steps r41a r41b && ok "4 ranks (stage 1) -> 1 rank x 4 micro-steps: steps 4-6 match" \
    || { bad "4 -> 1 ranks"; join <(losses r41a) <(losses r41b); }

# a crash before the marker: the files of step 6 without DONE_6 are not a checkpoint
resume_from a1 3 d && cp "$tmp/a1"/model_00000006.bin "$tmp/a1"/state_00000006_* "$tmp/d/"
crun d 2 -b 2 -z 1 -x 6 -y 1 && grep -q "resumed from checkpoint 3" "$tmp/d.txt" \
    && ok "files without a DONE marker are skipped (resumed from 3, not 6)" || bad "incomplete checkpoint used"
crun k 1 -b 2 -x 6 -n 2 -nk 1
[ "$(cd "$tmp/k" && ls | grep -v main.log | tr '\n' ' ')" = "DONE_00000006 model_00000006.bin state_00000006_00000.bin " ] \
    && ok "-nk 1 keeps only the newest checkpoint" || { bad "-nk 1 left: $(ls "$tmp/k" | tr '\n' ' ')"; }
crun e 1 -b 2 -x 1 -y 1 && grep -q "no complete checkpoint" "$tmp/e.txt" && ok "-y 1 without a checkpoint starts from step 0" || bad "-y 1 on an empty dir"

resume_from a1 3 f && rm "$tmp/f/state_00000003_00001.bin"
crun f 2 -b 2 -z 1 -x 6 -y 1; grep -q "cannot open '$tmp/f/state_00000003_00001.bin'" "$tmp/f.txt" \
    && ok "a DONE marker without its files names the missing file" || bad "missing state file not reported"
resume_from a1 3 g
timeout 60 mpirun -np 2 ./train_gpt2 -e d1 "${DATA[@]}" -v 0 -s 0 -t 32 -b 2 -x 6 -y 1 -o "$tmp/g" > "$tmp/g.txt" 2>&1
grep -q "is a different model" "$tmp/g.txt" && ok "a checkpoint of another model size is refused" || bad "other model accepted"
timeout 60 ./train_gpt2 -e "$MODEL" "${DATA[@]}" -n 2 > "$tmp/h.txt" 2>&1
[ $? -ne 0 ] && grep -q "flags -n and -y need an output dir -o" "$tmp/h.txt" && ok "-n without -o is refused" || bad "-n without -o"

summary "checkpoint"
