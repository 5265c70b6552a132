/*
The CPU trainer's reduce-scatter (llmc/mpi_comm.h: a ring of our own), under mpirun -np N:
  1. every rank's slice equals, bit for bit, the sum in the order the ring documents
     (((send_{j+1} + send_{j+2}) + ...) + send_j for slice j), on inputs whose sum depends on
     the order, for several sizes (1 element up to more than one round of a big buffer);
  2. three reduce-scatters in flight at once, waited for in another order than started;
  3. memory: a reduce-scatter of N*n floats raises no rank's peak resident memory by more than
     its 2*n floats of partial sums (+ 4 MB slack); Open MPI's MPI_Ireduce_scatter_block (tree to
     rank 0) raised rank 0's by 2.25 * N*n.
Ends with "mpi_comm: N passed, N failed" (rank 0).
usage: mpirun -np N dev/test/test_mpi_comm
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "../../llmc/mpi_comm.h"

static int passed = 0, failed = 0;
static void check(Comm* comm, int ok, const char* what) {
    // a check passes only if it passes on every rank
    double all_ok = comm_sum(comm, ok ? 1.0 : 0.0);
    int good = all_ok == comm->world_size;
    if (good) { passed++; } else { failed++; }
    if (comm->rank == 0) { printf("%s %s (N = %d)\n", good ? "ok  " : "FAIL", what, comm->world_size); }
}

// Rank r's input element i: magnitudes 2^-20 .. 2^20 with both signs, so that the order of
// addition changes the rounded sum.
static float input(int r, size_t i) {
    unsigned h = (unsigned)(r * 2654435761u) ^ (unsigned)(i * 40503u + 7u);
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    float mant = 1.0f + (float)(h & 0xffff) / 65536.0f;
    int ex = (int)((h >> 16) % 41) - 20;
    return ((h >> 31) ? -1.0f : 1.0f) * ldexpf(mant, ex);
}

// The ring's documented order for slice j of N ranks, element i of the slice (of n).
static float ring_order_sum(int N, int j, size_t n, size_t i) {
    float s = input((j + 1) % N, (size_t)j * n + i);
    for (int k = 2; k <= N; k++) { s += input((j + k) % N, (size_t)j * n + i); }
    return s;
}

static float* make_send(int r, int N, size_t n) {
    float* send = (float*)mallocCheck((size_t)N * n * sizeof(float));
    for (size_t i = 0; i < (size_t)N * n; i++) { send[i] = input(r, i); }
    return send;
}

static int matches_ring_order(Comm* comm, const float* recv, size_t n, size_t* rank_order_differs) {
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        float want = ring_order_sum(comm->world_size, comm->rank, n, i);
        if (memcmp(&want, &recv[i], sizeof(float)) != 0) { ok = 0; }
        float naive = 0.0f; // rank order, to show that the order matters on these inputs
        for (int r = 0; r < comm->world_size; r++) { naive += input(r, (size_t)comm->rank * n + i); }
        if (naive != want) { (*rank_order_differs)++; }
    }
    return ok;
}

int main(int argc, char** argv) {
    Comm comm;
    comm_init(&comm, &argc, &argv);
    comm.timeout_s = 60;
    int N = comm.world_size, r = comm.rank;
    char what[256];

    // 1. sizes: one element, odd, and larger than a round
    size_t sizes[] = {1, 1001, 300000};
    for (int s = 0; s < 3; s++) {
        size_t n = sizes[s], differs = 0;
        float* send = make_send(r, N, n);
        float* recv = (float*)mallocCheck(n * sizeof(float));
        CommRequest req;
        comm_reduce_scatter_start(&comm, send, recv, n, &req);
        comm_wait(&comm, &req);
        int ok = matches_ring_order(&comm, recv, n, &differs);
        snprintf(what, sizeof(what), "reduce-scatter of %zu per rank = the ring's order, bit for bit (rank order differs in %zu)", n, differs);
        check(&comm, ok, what);
        free(send); free(recv);
    }

    // 2. three in flight, waited for as 2, 0, 1
    {
        size_t n[3] = {777, 50000, 3};
        float *send[3], *recv[3];
        CommRequest req[3];
        for (int k = 0; k < 3; k++) {
            send[k] = make_send(r, N, n[k]);
            recv[k] = (float*)mallocCheck(n[k] * sizeof(float));
            comm_reduce_scatter_start(&comm, send[k], recv[k], n[k], &req[k]);
        }
        int order[3] = {2, 0, 1}, ok = 1;
        for (int k = 0; k < 3; k++) { comm_wait(&comm, &req[order[k]]); }
        for (int k = 0; k < 3; k++) {
            size_t differs = 0;
            ok &= matches_ring_order(&comm, recv[k], n[k], &differs);
            free(send[k]); free(recv[k]);
        }
        check(&comm, ok, "three reduce-scatters in flight, waited out of order");
    }

    // 3. peak memory of one reduce-scatter of N * 4M floats
    {
        size_t n = (size_t)4 << 20;
        float* send = make_send(r, N, n);
        float* recv = (float*)mallocCheck(n * sizeof(float));
        memset(recv, 0x7f, n * sizeof(float)); // touched now (a zero memset may become calloc)
        double before = (double)peak_rss_bytes();
        CommRequest req;
        comm_reduce_scatter_start(&comm, send, recv, n, &req);
        comm_wait(&comm, &req);
        double grew = (double)peak_rss_bytes() - before, allowed = 2.0 * n * sizeof(float) + (4 << 20);
        double all[64] = {0};
        if (N <= 64) { comm_gather_doubles(&comm, grew, all); }
        double worst = 0; int worst_rank = 0;
        for (int k = 0; k < N && k < 64; k++) { if (all[k] > worst) { worst = all[k]; worst_rank = k; } }
        snprintf(what, sizeof(what), "reduce-scatter of %d x %zu MB: peak memory grew at most %.1f MB (rank %d), allowed %.1f MB (2 x n + 4 MB)",
                 N, n * sizeof(float) >> 20, worst / 1048576.0, worst_rank, allowed / 1048576.0);
        check(&comm, grew <= allowed, what);
        free(send); free(recv);
    }

    if (r == 0) { printf("mpi_comm: %d passed, %d failed\n", passed, failed); }
    comm_finalize(&comm);
    return failed == 0 ? 0 : 1;
}
