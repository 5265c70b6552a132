#!/usr/bin/env bash
# The rendezvous that hands NCCL's id to ranks started without mpirun (llmc/rendezvous.h), run
# through dev/test/rendezvous_demo (built by make): fs and tcp with 3 ranks started in reverse
# order; a rank 0 that stops before the rendezvous tells the others its reason at once; and each
# way it must fail with a message and a non-zero exit instead of hanging.
# usage: dev/test/test_rendezvous.sh
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
D=dev/test/rendezvous_demo
[ -x "$D" ] || { bad "$D is not built (make $D)"; summary "rendezvous"; exit; }
# below Linux's ephemeral range (32768+), where a connect that retries could meet itself
PORT=$((20000 + $$ % 10000))

# three METHOD WHERE NAME: ranks 2, 1, then 0 (last, after a delay), every rank must print the same
# blob; the ranks other than 0 start with 0xEE bytes, so a blob that never arrived shows
three() {
    local method=$1 where=$2 name=$3 pids=() rc=0
    for r in 2 1; do timeout 20 "$D" "$method" $r 3 "$where" 5 > "$tmp/$name.$r" 2>&1 & pids+=($!); done
    sleep 0.3
    timeout 20 "$D" "$method" 0 3 "$where" 5 > "$tmp/$name.0" 2>&1 || rc=$?
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    local n blobs
    n=$(cat "$tmp/$name".[012] | grep -c '^rank [012] blob ')
    blobs=$(cat "$tmp/$name".[012] | sed -n 's/^rank [012] blob //p' | sort -u)
    if [ $rc -eq 0 ] && [ "$n" -eq 3 ] && [ "$(echo "$blobs" | wc -l)" -eq 1 ] && [[ "$blobs" != *eeeeeeee* ]]; then
        ok "$method, 3 ranks started in reverse order: all exit 0 with rank 0's blob ${blobs:0:16}..."
    else bad "$method, 3 ranks: exit $rc, $n blobs: $blobs"; cat "$tmp/$name".[012]; fi
}
three fs "$tmp/fs/job1" fs
[ -d "$tmp/fs/job1" ] && [ -z "$(ls -A "$tmp/fs/job1")" ] && ok "fs: rank 0 created -pf and removed rendezvous.bin after finishing" \
    || bad "fs: left behind: $(ls -A "$tmp/fs/job1" 2>&1)"
three tcp "127.0.0.1:$PORT" tcp

# told METHOD WHERE NAME: rank 0 stops before the rendezvous (as the trainer's rank 0 does when it
# refuses a busy -o); ranks 1 and 2, already waiting with a 30 s timeout, stop within 3 s with
# its reason, and so does rank 0 (it has told both)
told() {
    local method=$1 where=$2 name=$3 pids=() start=$SECONDS rc0=0 rc=0 n
    for r in 2 1; do timeout 60 "$D" "$method" $r 3 "$where" 30 > "$tmp/$name.$r" 2>&1 & pids+=($!); done
    sleep 0.3
    timeout 60 "$D" "$method" 0 3 "$where" 30 "output dir '/x' is in use by another job" > "$tmp/$name.0" 2>&1 || rc0=$?
    for p in "${pids[@]}"; do wait "$p" || rc=$((rc + $?)); done
    n=$(cat "$tmp/$name".[12] | grep -c "^\[rank [12]\] error: rendezvous $method: rank 0 stopped before the ranks met: output dir '/x' is in use by another job$")
    if [ $rc0 -eq 1 ] && [ $rc -eq 2 ] && [ "$n" -eq 2 ] && [ $((SECONDS - start)) -le 3 ]; then
        ok "$method: rank 0 stops before the rendezvous: ranks 1, 2 stop in $((SECONDS - start)) s with its reason (timeout 30 s)"
    else bad "$method: rank 0 stopped: exits $rc0 / $rc, $n lines with the reason, $((SECONDS - start)) s"; cat "$tmp/$name".[012]; fi
}
told fs "$tmp/fs/told" fs_told
[ -z "$(ls -A "$tmp/fs/told")" ] && ok "fs: rank 0's reason removed once both ranks had read it" || bad "fs told: left $(ls -A "$tmp/fs/told")"
told tcp "127.0.0.1:$((PORT + 5))" tcp_told
# a reason left by a rank 0 killed while it waited to be read: the next job's rank 0 replaces it
timeout 20 "$D" fs 0 3 "$tmp/fs/killed" 10 "stale reason" > /dev/null 2>&1 &
for _ in $(seq 50); do [ -e "$tmp/fs/killed/rendezvous.bin" ] && break; sleep 0.1; done
kill -KILL $! 2> /dev/null; wait $! 2> /dev/null
timeout 20 "$D" fs 0 3 "$tmp/fs/killed" 5 > "$tmp/killed.0" 2>&1 &
p0=$!; sleep 0.3
timeout 20 "$D" fs 1 3 "$tmp/fs/killed" 5 > "$tmp/killed.1" 2>&1 & p1=$!
timeout 20 "$D" fs 2 3 "$tmp/fs/killed" 5 > "$tmp/killed.2" 2>&1; rc=$?
wait $p0 && wait $p1 && [ $rc -eq 0 ] && [ "$(sed -n 's/^rank [012] blob //p' "$tmp"/killed.[012] | sort -u | wc -l)" -eq 1 ] \
    && ok "fs: a reason left by a killed rank 0 is replaced by the next job's rank 0, whose ranks get its blob" \
    || { bad "fs: after a killed rank 0's reason"; cat "$tmp"/killed.[012]; }

# expect NAME EXPECTED COMMAND...: exit 1 within a few seconds, with EXPECTED in the message
expect() {
    local name=$1 want=$2 start=$SECONDS rc=0; shift 2
    timeout 20 "$@" > "$tmp/out" 2>&1 || rc=$?
    if [ $rc -eq 1 ] && [ $((SECONDS - start)) -le 5 ] && grep -qF -- "$want" "$tmp/out"; then
        ok "$name: exit 1 in $((SECONDS - start)) s: $(grep -m1 -o 'error:.*' "$tmp/out")"
    else bad "$name: exit $rc after $((SECONDS - start)) s, expected '$want'"; cat "$tmp/out"; fi
}
mkdir -p "$tmp/stale"; echo old > "$tmp/stale/rendezvous.bin"
expect "fs: a file left by an earlier run" \
    "[rank 0] error: rendezvous fs: '$tmp/stale/rendezvous.bin' exists, left by an earlier run: give each job its own -pf directory, or remove the file" \
    "$D" fs 0 2 "$tmp/stale" 5
[ "$(ls -A "$tmp/stale")" = rendezvous.bin ] && [ "$(cat "$tmp/stale/rendezvous.bin")" = old ] \
    && ok "fs: the old file is untouched and no temporary file is left" || bad "fs stale: $(ls -A "$tmp/stale")"
expect "fs: rank 0 missing" "[rank 1] error: rendezvous fs: no rendezvous file '$tmp/none/rendezvous.bin' from rank 0 after 1 s" \
    "$D" fs 1 2 "$tmp/none" 1
timeout 20 "$D" fs 0 2 "$tmp/mismatch" 5 > /dev/null 2>&1 &
expect "fs: rank 0 has -pn 2, rank 1 -pn 3" "[rank 1] error: rendezvous fs: '$tmp/mismatch/rendezvous.bin': rank 0 started 2 ranks, this rank was given -pn 3" \
    "$D" fs 1 3 "$tmp/mismatch" 5
wait
expect "tcp: rank 0 missing" "[rank 1] error: rendezvous tcp: could not connect to rank 0 at 127.0.0.1:$((PORT + 1)) within 1 s" \
    "$D" tcp 1 2 "127.0.0.1:$((PORT + 1))" 1
timeout 20 "$D" tcp 1 3 "127.0.0.1:$((PORT + 2))" 5 > "$tmp/peer" 2>&1 &
expect "tcp: rank 0 has -pn 2, rank 1 -pn 3" "[rank 0] error: rendezvous tcp: rank 1 (from 127.0.0.1) was given -pn 3, rank 0 has -pn 2" \
    "$D" tcp 0 2 "127.0.0.1:$((PORT + 2))" 5
if ! wait $! && grep -q "connection closed while receiving the blob from rank 0" "$tmp/peer"; then
    ok "tcp mismatch: rank 1 fails too: $(grep -m1 -o 'error:.*' "$tmp/peer")"
else bad "tcp mismatch: rank 1 did not fail on the closed connection"; cat "$tmp/peer"; fi
timeout 20 "$D" tcp 1 3 "127.0.0.1:$((PORT + 3))" 5 > /dev/null 2>&1 &
timeout 20 "$D" tcp 1 3 "127.0.0.1:$((PORT + 3))" 5 > /dev/null 2>&1 &
expect "tcp: two processes given rank 1" "[rank 0] error: rendezvous tcp: two processes say they are rank 1" \
    "$D" tcp 0 3 "127.0.0.1:$((PORT + 3))" 5
wait
expect "tcp: no other rank connects" "[rank 0] error: rendezvous tcp: only 0 of the 2 other ranks connected to port $((PORT + 4)) within 1 s (rank 1 did not)" \
    "$D" tcp 0 3 "127.0.0.1:$((PORT + 4))" 1
expect "bad method" "error: flag -pi expects fs or tcp, got 'x'" "$D" x 0 2 "$tmp/x" 5
expect "rank out of range" "error: flag -pr 3 must be below -pn 2" "$D" fs 3 2 "$tmp/x" 5
expect "bad port" "error: flag -ps expects host or host:port with a port in 1..65535, got 'localhost:99999'" \
    "$D" tcp 1 2 localhost:99999 5
summary "rendezvous"
