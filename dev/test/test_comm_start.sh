#!/usr/bin/env bash
# llmc/nccl_comm.cuh's start-up on the CPU emulator (dev/cuda/emu), no GPU: the communication
# stream has the device's highest priority (NCCL's kernels do not queue behind the GEMMs), and
# with MPI built in, flags -pn/-pr/-pi decide the start even where a launcher's variables are
# set (srun exports PMIX_RANK/PMI_SIZE): no MPI_Init then; mpirun without those flags still
# starts by MPI. A flag's value that looks like a flag (-o -pn) is not taken for one.
#   dev/test/test_comm_start.sh      (about 10 s: one small nvcc-cpu build)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
[ -f /usr/local/cuda/include/cuda_runtime.h ] || { echo "     (no CUDA headers: skipped)"; summary "comm_start"; exit 0; }

# the program: comm_bootstrap and comm_init as the trainer calls them, then what they chose
cat > "$tmp/start.cu" <<'EOF'
#include "llmc/nccl_comm.cuh"
int main(int argc, char** argv) {
    Comm comm;
    comm_bootstrap(&comm, &argc, &argv);
    ProcessFlags one = {-1, -1, NULL, NULL, NULL};
    comm_init(&comm, &one);
    int least, greatest, priority;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaCheck(cudaStreamGetPriority(comm.stream, &priority));
    printf("priority %s (%d, range %d..%d) started_by_mpi %d\n", priority == greatest && greatest < least ? "highest" : "not the highest",
           priority, least, greatest, comm.started_by_mpi);
    comm_finalize(&comm);
    return 0;
}
EOF
mpi_flags=() mpi_libs=()
MPICC=$(command -v mpicc)
if [ -n "$MPICC" ]; then
    read -ra mpi_flags <<< "-DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $($MPICC --showme:compile)"
    read -ra mpi_libs <<< "$($MPICC --showme:link)"
fi
if ! dev/cuda/emu/nvcc-cpu -O1 -std=c++17 -I. -DENABLE_FP32 -DNO_MULTI_GPU "${mpi_flags[@]}" "$tmp/start.cu" -o "$tmp/start" \
        "${mpi_libs[@]}" > "$tmp/build.txt" 2>&1; then
    bad "build of the start-up program"; tail -5 "$tmp/build.txt"; summary "comm_start"; exit 1
fi
# started NAME EXPECTED CMD...: the program's line (the stream priority, how it started)
started() {
    local name=$1 expect=$2; shift 2
    local out; out=$(timeout 60 "$@" 2>&1 | grep '^priority')
    [[ "$out" == *"$expect"* ]] && ok "$name: $out" || { bad "$name: '$out', expected '$expect'"; timeout 60 "$@" 2>&1 | tail -3; }
}

started "plain start" "priority highest" "$tmp/start"
if [ -n "$MPICC" ]; then
    started "PMIX_RANK/PMI_SIZE set, -pn/-pr given (srun)" "started_by_mpi 0" env PMIX_RANK=0 PMI_SIZE=1 "$tmp/start" -pn 1 -pr 0
    started "PMI_SIZE set, -pi given" "started_by_mpi 0" env PMI_SIZE=1 "$tmp/start" -pi fs -pf "$tmp/rdv"
    if command -v mpirun >/dev/null; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        started "mpirun -np 1" "started_by_mpi 1" mpirun --oversubscribe -np 1 "$tmp/start"
        started "mpirun -np 1, a flag's value -pn (-o -pn)" "started_by_mpi 1" mpirun --oversubscribe -np 1 "$tmp/start" -o -pn
        started "mpirun -np 1 with -pn/-pr (flags win)" "started_by_mpi 0" mpirun --oversubscribe -np 1 "$tmp/start" -pn 1 -pr 0
    else
        echo "     (no mpirun: the mpirun starts are not tested here)"
    fi
else
    echo "     (no mpicc: built without MPI, the launcher cases are not tested here)"
fi
summary "comm_start"
