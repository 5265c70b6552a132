#!/usr/bin/env bash
# llmc/nccl_comm.cuh's host waits on the CPU emulator (dev/cuda/emu), no GPU: a NCCL error inside
# a -zg split communicator ends a wait on the world communicator at once, naming the split, not
# at the -wt deadline.
# Two ranks (-pn 2, -pi fs) form the world and split it (both ranks in one split). Rank 0 queues
# an all-gather on the split, then one on the world, and waits on the world (comm_sync). Rank 1,
# alive, never calls the world's all-gather, so rank 0's communication stream stalls behind it,
# as it stalls on a GPU when a collective fails there; 1 s later rank 1 aborts its side of the
# split, and rank 0's split reports ncclRemoteError. Only the split's state says what happened:
# a wait polling the world's alone ran to -wt (20 s here) and reported "no progress".
#   dev/test/test_comm_errors.sh      (about 15 s: one small nvcc-cpu build)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
[ -f /usr/local/cuda/include/cuda_runtime.h ] || { echo "     (no CUDA headers: skipped)"; summary "comm_errors"; exit 0; }

cat > "$tmp/split.cu" <<'EOF'
#include <unistd.h>
#include "llmc/nccl_comm.cuh"
int main(int argc, char** argv) {
    int rank = atoi(argv[1]);
    Comm world;
    comm_bootstrap(&world, &argc, &argv);
    ProcessFlags pf = {2, rank, "fs", argv[2], NULL};
    comm_set_processes(&world, &pf);
    world.timeout_s = 20.0;
    cudaCheck(cudaSetDevice(0));
    comm_init(&world, &pf);
    Comm split;
    comm_split(&world, 0, rank, &split, "the test's split");
    double* buf = (double*)cuda_malloc_counted(NULL, 2 * sizeof(double), "buf");
    comm_sum(&world, 1.0); // both ranks are up
    if (rank == 1) {
        sleep(1); // rank 0 is waiting by now
        ncclCommAbort(split.nccl);
        sleep(30); // alive: the world's collective just never comes (the test kills this rank)
        return 0;
    }
    comm_all_gather(&split, buf + rank, buf, 1, sizeof(double), 0); // rank 1 aborts: ncclRemoteError
    comm_all_gather(&world, buf + rank, buf, 1, sizeof(double), -1); // rank 1 never calls it: stalls
    comm_sync(&world, world.stream, "the world's all-gather");
    printf("the wait ended without an error\n");
    return 0;
}
EOF
if ! dev/cuda/emu/nvcc-cpu -O1 -std=c++17 -I. -I/usr/local/cuda/include -DENABLE_FP32 "$tmp/split.cu" -o "$tmp/split" -lcudart -lnccl \
        > "$tmp/build.txt" 2>&1; then
    bad "build of the split-error program"; tail -5 "$tmp/build.txt"; summary "comm_errors"; exit 1
fi
NCCL_HOSTID=split-1 timeout 60 "$tmp/split" 1 "$tmp/rdv" > "$tmp/r1.txt" 2>&1 & r1=$!
start=$SECONDS
NCCL_HOSTID=split-0 timeout 60 "$tmp/split" 0 "$tmp/rdv" > "$tmp/r0.txt" 2>&1; rc=$?
secs=$((SECONDS - start))
kill "$r1" 2> /dev/null; wait "$r1" 2> /dev/null
want="[rank 0] error: NCCL error remote process exited or there was a network error in the test's split"
if [ $rc -eq 1 ] && [ $secs -lt 15 ] && grep -qF -- "$want" "$tmp/r0.txt" && grep -q "while waiting for the world's all-gather" "$tmp/r0.txt"; then
    ok "an error in a split ends a wait on the world in $secs s (-wt 20): $(grep -o 'error: NCCL error.*in the test.s split' "$tmp/r0.txt")"
else bad "a split's error during a wait on the world: exit $rc after $secs s"; cat "$tmp/r0.txt" "$tmp/r1.txt" | tail -5; fi
summary "comm_errors"
