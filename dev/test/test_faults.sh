#!/usr/bin/env bash
# Faults: a rank that stops answering or dies, a full disk, corrupt checkpoint files. Each must
# end the job with a message and a non-zero exit in bounded time, and never damage the previous
# checkpoint. A slow disk is not a fault: ranks waiting for rank 0's checkpoint I/O for longer
# than -wt go on, within the I/O allowance -wi.
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

# a slow disk: strace delays rank 0's open of a file by 10 s (a disk that slow), longer than -wt 4;
# the other ranks wait for it at a checkpoint barrier timed by -wi (default 10 x -wt = 40 s)
slow() { # slow NAME FILE ARGS...: 3 ranks, rank 0's open of FILE (in $tmp/io) takes 10 s
    local name=$1 file=$2 start=$SECONDS; shift 2
    local args=("${T[@]}" -z 1 -wt 4 -o "$tmp/io" "$@")
    timeout 120 mpirun -np 1 strace -f -qq --seccomp-bpf -o /dev/null -e trace=openat -e inject=openat:delay_enter=10s \
        -P "$tmp/io/$file" "${args[@]}" : -np 2 "${args[@]}" > "$tmp/$name.txt" 2>&1
    echo "rc=$? secs=$((SECONDS - start))" >> "$tmp/$name.txt"
}
result() { sed -n "s/^rc=\([0-9]*\) secs=\([0-9]*\)$/\\$1/p" "$tmp/$2.txt"; }
"${T[@]}" -x 1 -wi -5 > "$tmp/wi.txt" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "error: flag -wi expects seconds >= 0, or -1 for 10 x -wt, got -5" "$tmp/wi.txt" \
    && ok "-wi -5: exit 1: $(grep -o 'error:.*' "$tmp/wi.txt")" || bad "-wi -5: exit $rc"
if ! strace -f -qq -o /dev/null -e inject=openat:delay_enter=1ms true 2> /dev/null; then
    echo "skip slow disk: strace cannot trace here (not installed, or ptrace refused)"
else
    slow slow_write model_00000002.bin.tmp -x 3 -n 2
    if [ "$(result 1 slow_write)" = 0 ] && [ "$(result 2 slow_write)" -ge 10 ] &&
       grep -q "checkpoint $tmp/io/DONE_00000002" "$tmp/slow_write.txt"; then
        ok "rank 0 writing a checkpoint for 10 s (-wt 4): the others wait at the I/O barrier, the job ends well in $(result 2 slow_write) s"
    else bad "slow checkpoint write: $(tail -1 "$tmp/slow_write.txt")"; grep -m2 error "$tmp/slow_write.txt"; fi
    slow slow_final model_00000004.bin.tmp -x 4 -y 1
    if [ "$(result 1 slow_final)" = 0 ] && grep -q "resumed from checkpoint 2" "$tmp/slow_final.txt" && [ -s "$tmp/io/model_00000004.bin" ]; then
        ok "rank 0 writing the final model for 10 s (-wt 4): the others wait for it, exit 0"
    else bad "slow final model write: $(tail -1 "$tmp/slow_final.txt")"; grep -m2 error "$tmp/slow_final.txt"; fi
    slow slow_read state_00000002_00002.bin -x 3 -y 1
    if [ "$(result 1 slow_read)" = 0 ] && grep -q "resumed from checkpoint 2" "$tmp/slow_read.txt"; then
        ok "rank 0 reading a checkpoint for 10 s on resume (-wt 4): the others wait for it, exit 0"
    else bad "slow checkpoint read: $(tail -1 "$tmp/slow_read.txt")"; grep -m2 error "$tmp/slow_read.txt"; fi
    slow slow_limit model_00000006.bin.tmp -x 6 -n 2 -y 1 -wi 6 # the allowance still ends a wait
    msg="error: no progress for [0-9]+ s at step 6 waiting for every rank to write its checkpoint files: .*flag -wi\)"
    if [ "$(result 1 slow_limit)" != 0 ] && [ "$(result 1 slow_limit)" != 124 ] && grep -qE "$msg" "$tmp/slow_limit.txt" &&
       [ ! -e "$tmp/io/DONE_00000006" ]; then
        ok "beyond -wi 6 the others abort: $(grep -m1 -oE "rank [0-9]\] $msg" "$tmp/slow_limit.txt")"
    else bad "-wi 6: $(tail -1 "$tmp/slow_limit.txt")"; grep -m2 error "$tmp/slow_limit.txt"; fi
fi

summary "faults"
