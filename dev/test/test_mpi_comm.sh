#!/usr/bin/env bash
# The CPU trainer's reduce-scatter (llmc/mpi_comm.h) on 1-4 ranks: dev/test/test_mpi_comm.c.
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
if ! command -v mpirun >/dev/null; then bad "mpirun not found: install openmpi-bin"; summary mpi_comm; exit 1; fi
for n in 1 2 3 4; do
    out=$(timeout 120 mpirun -np "$n" ./dev/test/test_mpi_comm 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(ok|FAIL) '
    p=$(printf '%s\n' "$out" | sed -n 's/^mpi_comm: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
    if [ $rc -ne 0 ] || [ -z "$p" ]; then bad "test_mpi_comm on $n ranks: exit $rc"; continue; fi
    passed=$((passed + ${p% *})); failed=$((failed + ${p#* }))
done
summary mpi_comm
