#!/usr/bin/env bash
# Faults: a rank that stops answering or dies, a full disk, corrupt checkpoint files. Each must
# end the job with a message and a non-zero exit in bounded time, and never damage the previous
# checkpoint.
# usage: dev/test/test_faults.sh
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
T=(./train_gpt2 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -t 32 -b 2)

# hang NAME SIGNAL: 3 ranks train; after 3 s one rank gets SIGNAL; the job must end by itself
hang() {
    local name=$1 sig=$2 start=$SECONDS
    ( timeout 120 mpirun -np 3 "${T[@]}" -z 3 -x 100000 -wt 5 > "$tmp/$name.txt" 2>&1; echo "rc=$?" >> "$tmp/$name.txt" ) &
    local job=$! pids=()
    for _ in $(seq 50); do sleep 0.2; pids=($(pgrep -x train_gpt2)); [ ${#pids[@]} -eq 3 ] && break; done
    sleep 3
    [ ${#pids[@]} -eq 3 ] && kill -"$sig" "${pids[1]}"
    wait $job
    kill -KILL "${pids[@]}" 2>/dev/null # a stopped rank cannot end by itself
    echo $((SECONDS - start)) > "$tmp/$name.secs"
}
hang stop STOP
rc=$(sed -n 's/^rc=//p' "$tmp/stop.txt"); secs=$(cat "$tmp/stop.secs")
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$secs" -lt 60 ] && grep -qE "\[rank [0-9]\] error: no progress for [0-9]+ s in [a-z-]+ at step [0-9]+" "$tmp/stop.txt"; then
    ok "a stopped rank: the others abort in ${secs} s (-wt 5): $(grep -m1 -o 'rank [0-9]\] error: no progress.*at step [0-9]*' "$tmp/stop.txt")"
else bad "stopped rank: rc $rc after ${secs} s"; grep -m3 -i error "$tmp/stop.txt"; fi
hang kill KILL
rc=$(sed -n 's/^rc=//p' "$tmp/kill.txt"); secs=$(cat "$tmp/kill.secs")
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$secs" -lt 60 ] && grep -qi "signal 9\|killed" "$tmp/kill.txt"; then
    ok "a killed rank: the job ends in ${secs} s with exit $rc (mpirun reports the signal)"
else bad "killed rank: rc $rc after ${secs} s"; tail -3 "$tmp/kill.txt"; fi

# a full disk while writing checkpoint 2: a file-size limit of 8 MB (the model file is 13 MB; MPI's
# own shared-memory files need a few MB)
"${T[@]}" -x 1 -n 1 -o "$tmp/disk" > /dev/null 2>&1
( ulimit -f 8192; "${T[@]}" -x 2 -n 1 -y 1 -o "$tmp/disk" > "$tmp/disk.txt" 2>&1 ); rc=$?
if [ $rc -eq 1 ] && grep -q "error: cannot write '$tmp/disk/model_00000002.bin.tmp': File too large" "$tmp/disk.txt" &&
   [ ! -e "$tmp/disk/model_00000002.bin" ] && [ ! -e "$tmp/disk/DONE_00000002" ]; then
    ok "full disk: exit 1, '$(grep -m1 -o "cannot write.*" "$tmp/disk.txt")', no checkpoint 2"
else bad "full disk: exit $rc"; tail -2 "$tmp/disk.txt"; fi
"${T[@]}" -x 2 -y 1 -o "$tmp/disk" > "$tmp/disk2.txt" 2>&1 && grep -q "resumed from checkpoint 1" "$tmp/disk2.txt" \
    && ok "after the full disk, checkpoint 1 still resumes" || bad "checkpoint 1 damaged"

# corrupt checkpoint files: each a message naming the file, exit 1
"${T[@]}" -x 1 -n 1 -o "$tmp/good" > /dev/null 2>&1
corrupt() { # corrupt NAME EXPECTED PYTHON-EDIT: edits a copy of the good checkpoint, resumes it
    local name=$1 expect=$2 edit=$3
    rm -rf "$tmp/$name"; cp -r "$tmp/good" "$tmp/$name"
    python3 -c "import sys; p = sys.argv[1]; $edit" "$tmp/$name" || { bad "$name: edit failed"; return; }
    timeout 60 "${T[@]}" -x 2 -y 1 -o "$tmp/$name" > "$tmp/$name.txt" 2>&1; local rc=$?
    if [ $rc -eq 1 ] && grep -qF -- "$expect" "$tmp/$name.txt"; then ok "$name: exit 1: $(grep -m1 -o 'error:.*' "$tmp/$name.txt")"
    else bad "$name: exit $rc, expected '$expect'"; tail -2 "$tmp/$name.txt"; fi
}
S="state_00000001_00000.bin"
corrupt "truncated state" "$S' is" "f = open(p + '/$S', 'r+b'); f.truncate(5000)"
corrupt "state wrong magic" "$S' has magic 7" "f = open(p + '/$S', 'r+b'); f.write((7).to_bytes(4, 'little'))"
corrupt "state of another step" "does not belong to checkpoint 1" "f = open(p + '/$S', 'r+b'); f.seek(8); f.write((5).to_bytes(4, 'little'))"
corrupt "garbled DONE marker" "DONE_00000001' should say how many ranks" "open(p + '/DONE_00000001', 'w').write('garbage')"
corrupt "truncated checkpoint model" "model_00000001.bin' is" "f = open(p + '/model_00000001.bin', 'r+b'); f.truncate(4096)"

summary "faults"
