#!/usr/bin/env bash
# Tests of the NCCL emulator, dev/cuda/emu/nccl.cpp. The script builds nccl_test.cpp against the
# stub runtime (nccl_stub_runtime.cpp), or against other runtime sources given in
# EMU_RUNTIME_SRCS. It runs every scenario as 1 to 3 separate processes, one per rank, and
# removes the shared-memory objects of its runs from /dev/shm at the end.
# The last line printed is "N passed, M failed"; the exit status is 0 when nothing failed.
#
#   dev/cuda/emu/tests/nccl_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
emu=$(dirname "$here")
work=$(mktemp -d /tmp/nccl_test.XXXXXX)
bin=$work/nccl_test
srcs=${EMU_RUNTIME_SRCS:-$here/nccl_stub_runtime.cpp}
CXX=${CXX:-g++}

# shellcheck disable=SC2086 # srcs may name several files
if ! $CXX -std=c++17 -I/usr/local/cuda/include -I"$emu" -Wall -Wextra -O2 "$emu/nccl.cpp" $srcs "$here/nccl_test.cpp" \
        -o "$bin" -lrt -lpthread 2>"$work/build.log"; then
    cat "$work/build.log"
    echo "0 passed, 1 failed"
    exit 1
fi
[ -s "$work/build.log" ] && cat "$work/build.log" # warnings

passed=0
failed=0
cases=0
pids=()
expect=()  # the exit status each started process must end with (default 0)
case_dir=

# run NAME FUNCTION ARGS...: one test case, which passes when the function returns 0.
run() {
    local name=$1
    shift
    cases=$((cases + 1))
    case_dir=$work/case$cases
    mkdir -p "$case_dir"
    pids=()
    expect=()
    if "$@"; then
        passed=$((passed + 1))
        echo "ok   $name"
    else
        failed=$((failed + 1))
        echo "FAIL $name ($case_dir)"
        tail -n 4 "$case_dir"/*.err 2>/dev/null | sed 's/^/    /'
    fi
}

# rank SCENARIO RANK NRANKS VARIANT [VAR=VALUE...]: starts one rank in the background. Each rank
# gets its own NCCL_HOSTID, so that ranks may share the emulated GPU (a VAR=VALUE can override it).
rank() {
    local sc=$1 r=$2 n=$3 v=$4 i=${#pids[@]}
    shift 4
    env NCCL_HOSTID="host-$r" "$@" timeout 60 "$bin" "$sc" "$r" "$n" "$case_dir/id" "$v" \
        >"$case_dir/p$i.out" 2>"$case_dir/p$i.err" &
    pids+=($!)
}

# ranks SCENARIO NRANKS VARIANT [VAR=VALUE...]: starts ranks 0..NRANKS-1.
ranks() {
    local sc=$1 n=$2 v=$3 r
    shift 3
    for ((r = 0; r < n; r++)); do rank "$sc" "$r" "$n" "$v" "$@"; done
}

# Waits for the started processes and compares their exit statuses with `expect`.
await() {
    local ok=0 i=0 pid st
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null # no "Killed" notice for the rank a test kills on purpose
        st=$?
        if [ "$st" != "${expect[$i]:-0}" ]; then
            echo "    process $i: exit status $st, expected ${expect[$i]:-0}"
            ok=1
        fi
        i=$((i + 1))
    done
    pids=()
    return $ok
}

# The shared-memory name of this case's communicator: the readable start of the unique id.
shm_name() { head -c 33 "$case_dir/id" 2>/dev/null | tr -d '/'; }

# Nothing of this case's communicator is left in /dev/shm (the ranks left cleanly).
shm_clean() {
    local name left
    name=$(shm_name)
    [ -n "$name" ] || { echo "    no id file"; return 1; }
    left=$(ls /dev/shm | grep "^$name" || true)
    [ -z "$left" ] || { echo "    left in /dev/shm:" $left; return 1; }
}

case_validation() { ranks validation 1 x && await && shm_clean; }
case_split() { ranks split "$@" && await && shm_clean; }
case_collectives() { ranks collectives "$@" && await && shm_clean; }
case_busy() { ranks busy 2 x EMU_NCCL_INPROGRESS="$1" && await && shm_clean; }
case_mismatch() { ranks mismatch "$1" "$2" && await && shm_clean; }
case_dupgpu() { ranks dupgpu 2 x NCCL_HOSTID=same-host && await && shm_clean; }
case_missing() { rank missing 0 2 x && await; }
case_missing_blocking() {
    expect=(86)
    rank missing 0 2 blocking EMU_HANG_TIMEOUT=1 && await &&
        grep -q "waited 1 s (EMU_HANG_TIMEOUT) for rank 1 of 2" "$case_dir/p0.err"
}
case_killed() {
    local n=$1 r
    for ((r = 0; r < n - 1; r++)); do expect+=(0); done
    expect+=(137) # SIGKILL, as reported by timeout
    ranks killed "$n" x && await && shm_clean
}
case_peer_leaves() { ranks peer-leaves 2 "$1" && await && shm_clean; }
case_abort_pending() { ranks abort-pending 2 x && await && shm_clean; }
case_duprank() {
    rank duprank 0 2 x
    sleep 0.3
    rank duprank 0 2 x NCCL_TEST_READ_ID=1
    await && [ "$(cat "$case_dir"/p*.out | grep -c 'OUTCOME refused')" = 1 ] &&
        [ "$(cat "$case_dir"/p*.out | grep -c 'OUTCOME waited')" = 1 ]
}
case_nranks() { rank nranks 0 2 x && rank nranks 1 3 x && await; }

run "validation: arguments, errors, unsupported calls (1 rank)" case_validation
run "collectives, 1 rank, blocking" case_collectives 1 blocking
run "collectives, 2 ranks, blocking" case_collectives 2 blocking
run "collectives, 3 ranks, blocking" case_collectives 3 blocking
run "collectives, 2 ranks, non-blocking" case_collectives 2 nonblocking
run "collectives, 3 ranks, non-blocking" case_collectives 3 nonblocking
run "collectives, 3 ranks, non-blocking, work runs only at syncs" case_collectives 3 nonblocking EMU_STUB_LAZY=1
run "collectives, 2 ranks, always ncclInProgress" case_collectives 2 nonblocking EMU_NCCL_INPROGRESS=1
run "ncclInProgress answers, polling, calls while busy" case_busy 1
run "EMU_NCCL_INPROGRESS=0: never ncclInProgress" case_busy 0
run "mismatched collectives (kind), 2 ranks" case_mismatch 2 kind
run "mismatched collectives (count), 3 ranks" case_mismatch 3 count
run "duplicate GPU refused (same NCCL_HOSTID)" case_dupgpu
run "a rank that never arrives: non-blocking init stays in progress, abort" case_missing
run "a rank that never arrives: blocking init ends at EMU_HANG_TIMEOUT" case_missing_blocking
run "a peer killed mid-run: ncclRemoteError, 2 ranks" case_killed 2
run "a peer killed mid-run: ncclRemoteError, 3 ranks" case_killed 3
run "a peer aborts while we wait: ncclRemoteError" case_peer_leaves abort
run "a peer exits while we wait: ncclRemoteError" case_peer_leaves exit
run "abort with a pending collective returns at once" case_abort_pending
run "a rank registered twice is refused" case_duprank
run "ranks disagree on nranks" case_nranks
run "ncclCommSplit, 4 ranks, blocking: parity by reversed key, NOCOLOR" case_split 4 blocking
run "ncclCommSplit, 3 ranks, non-blocking" case_split 3 nonblocking
run "ncclCommSplit, 4 ranks, NULL config inherits non-blocking" case_split 4 inherit EMU_NCCL_INPROGRESS=1

# remove what this script's runs left in /dev/shm (a never-completed init leaves its segment)
for ((k = 1; k <= cases; k++)); do
    name=$(head -c 33 "$work/case$k/id" 2>/dev/null | tr -d '/')
    [ -n "$name" ] && rm -f /dev/shm/"$name"*
done
if [ "$failed" = 0 ]; then rm -rf "$work"; fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
