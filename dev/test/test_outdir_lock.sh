#!/usr/bin/env bash
# One job at a time in an output dir (llmc/outdir_lock.h): while a job trains into -o, a second
# job with the same -o exits at once with one line naming the holder (pid, host, since when), and
# leaves the first one's files alone; the CUDA trainer (emulated) refuses too, and started with -pn
# its other rank stops at once with rank 0's reason (not at -wt); once the holder is
# killed (SIGKILL: the kernel releases its lock) a new job starts. With several ranks, a rank that
# outlives its rank 0 still holds the dir.
# usage: dev/test/test_outdir_lock.sh
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
T=(./train_gpt2 -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -t 32 -b 2)
started=() # what this test started and may leave running if it stops early: killed by pid on exit
cleanup() {
    local p
    for p in "${started[@]}"; do grep -qa 'train_gpt2\|mpirun' "/proc/$p/cmdline" 2> /dev/null && kill -KILL "$p"; done
    rm -rf "$tmp"
}
trap cleanup EXIT
host=$(hostname)

# holder DIR PID [SECONDS]: waits (default 30 s) until DIR/.lock names PID as its holder
holder() {
    for _ in $(seq $((${3:-30} * 10))); do grep -q "^pid $2 on host " "$1/.lock" 2> /dev/null && return 0; sleep 0.1; done
    return 1
}
# gone PID: waits until the process has ended
gone() { for _ in $(seq 100); do kill -0 "$1" 2> /dev/null || return 0; sleep 0.1; done; return 1; }
# refused NAME DIR HOLDER_PID LOCKER_PID CMD...: CMD must exit 1 within 30 s naming both
refused() {
    local name=$1 dir=$2 holder_pid=$3 locker_pid=$4 start=$SECONDS; shift 4
    timeout 120 "$@" > "$tmp/$name.txt" 2>&1; local rc=$? secs=$((SECONDS - start))
    local msg="error: output dir '$dir' is in use by another job \(pid $holder_pid on host $host since [0-9: +-]+, [0-9]+ ranks?\): '$dir/.lock' is held by pid $locker_pid; wait for it to end, or use another -o"
    if [ $rc -eq 1 ] && [ $secs -lt 30 ] && grep -qE "^(\[rank 0\] )?$msg$" "$tmp/$name.txt"; then
        ok "$name: exit 1 in ${secs} s: $(grep -m1 -o 'error:.*' "$tmp/$name.txt")"
    else bad "$name: exit $rc after ${secs} s"; tail -2 "$tmp/$name.txt"; fi
}

# one process holds the dir
"${T[@]}" -x 100000 -o "$tmp/a" > "$tmp/a.txt" 2>&1 &
a=$!; started+=($a)
holder "$tmp/a" $a || bad "the first job never took the lock: $(tail -2 "$tmp/a.txt")"
refused "second job, same -o" "$tmp/a" $a $a "${T[@]}" -x 1 -o "$tmp/a"
[ "$(head -c 8 "$tmp/a/main.log")" = "s:0 trl:" ] && [ ! -e "$tmp/a/model_00000001.bin" ] \
    && ok "the refused job left the first one's log and files alone" || bad "the refused job touched the dir"
if [ -x ./train_gpt2cu_emu ]; then
    refused "emulated CUDA trainer, same -o" "$tmp/a" $a $a ./train_gpt2cu_emu -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -t 32 -b 2 -x 1 -o "$tmp/a"
    # started without mpirun (-pn 2): rank 0 refuses the dir before it has handed out NCCL's id;
    # rank 1, waiting for that id with -wt 60, stops at once with rank 0's reason
    for pi in fs tcp; do
        where=(-pf "$tmp/rdv_$pi"); [ $pi = tcp ] && where=(-ps "127.0.0.1:$((20000 + $$ % 10000))")
        CU=(./train_gpt2cu_emu -e "$MODEL" "${DATA[@]}" -v 0 -s 0 -t 32 -b 2 -x 1 -o "$tmp/a" -wt 60 -pn 2 -pi $pi "${where[@]}")
        start=$SECONDS
        timeout 30 "${CU[@]}" -pr 1 > "$tmp/pn1_$pi.txt" 2>&1 & r1=$!
        refused "emulated CUDA trainer, -pn 2 -pi $pi, rank 0" "$tmp/a" $a $a "${CU[@]}" -pr 0
        wait $r1; rc=$?
        want="[rank 1] error: rendezvous $pi: rank 0 stopped before the ranks met: output dir '$tmp/a' is in use by another job"
        if [ $rc -eq 1 ] && [ $((SECONDS - start)) -lt 20 ] && grep -qF -- "$want" "$tmp/pn1_$pi.txt"; then
            ok "-pn 2 -pi $pi: rank 1 stops with rank 0's reason (exit 1, both done in $((SECONDS - start)) s, -wt 60)"
        else bad "-pn 2 -pi $pi: rank 1 exit $rc after $((SECONDS - start)) s"; tail -2 "$tmp/pn1_$pi.txt"; fi
    done
else echo "skip the CUDA trainer: no train_gpt2cu_emu (make train_gpt2cu_emu)"; fi
kill -KILL $a; wait $a 2> /dev/null
if "${T[@]}" -x 1 -o "$tmp/a" > "$tmp/a3.txt" 2>&1 && grep -q "wrote $tmp/a/model_00000001.bin" "$tmp/a3.txt"; then
    ok "after SIGKILL of the holder a third job trains in the dir (the kernel released the lock)"
else bad "third job after SIGKILL: $(tail -2 "$tmp/a3.txt")"; fi

# 2 ranks hold the dir; rank 0 is killed while rank 1 lives on (it and mpirun stopped, so that
# mpirun cannot end it)
mpirun -np 2 "${T[@]}" -x 100000 -o "$tmp/m" > "$tmp/m.txt" 2>&1 &
m=$!; started+=($m)
ranks=()
for _ in $(seq 100); do ranks=($(pgrep -P $m -x train_gpt2)); [ ${#ranks[@]} -eq 2 ] && break; sleep 0.1; done
started+=("${ranks[@]}")
for _ in $(seq 300); do grep -q " 2 ranks$" "$tmp/m/.lock" 2> /dev/null && break; sleep 0.1; done
r0=$(sed -n 's/^pid \([0-9]*\) .*/\1/p' "$tmp/m/.lock" 2> /dev/null) # rank 0: the one named in .lock
r1=${ranks[0]}; [ "$r1" = "$r0" ] && r1=${ranks[1]}
holder "$tmp/m" "$r0" 1 || bad "the 2-rank job never took the lock: $(tail -2 "$tmp/m.txt")"
for _ in $(seq 300); do grep -q "POSIX *ADVISORY *READ *$r1 " /proc/locks && break; sleep 0.1; done # rank 1 joined
kill -STOP $m "$r1"; kill -KILL "$r0"; gone "$r0"
refused "rank 1 outlives rank 0" "$tmp/m" "$r0" "$r1" "${T[@]}" -x 1 -o "$tmp/m"
kill -KILL "$r1" $m; wait $m 2> /dev/null; gone "$r1"
if "${T[@]}" -x 1 -o "$tmp/m" > "$tmp/m3.txt" 2>&1; then ok "once rank 1 is killed too, a new job trains in the dir"
else bad "after every rank died: $(tail -2 "$tmp/m3.txt")"; fi

started=() # all ended above
summary "outdir lock"
