/*
Communication for the CPU trainer: the few collectives the ZeRO stages need, over MPI when
built with USE_MPI (make does that when mpicc is found), else for one process.

Every collective adds its bus bytes (nccl-tests' convention, DESIGN.md §5) to a counter of its
kind, so the trainer can print what it moved and the tests can hold it to the plan. Bootstrap
and error plumbing stay here, away from the sharding logic in train_gpt2.c.

No hangs: MPI has no timeout of its own, so every wait polls its request against a deadline. A
rank that waits longer than comm->timeout_s for a collective names itself, the step and the
collective, and aborts the job (a rank that dies is noticed by mpirun, which ends the others).
Where ranks wait for each other's file I/O (rank 0 writing a model file, every rank reading a
checkpoint), comm_io_barrier waits instead, at most comm->io_timeout_s (flag -wi): a slow disk
is not a dead rank.
*/
#ifndef LLMC_MPI_COMM_H
#define LLMC_MPI_COMM_H

#include <stddef.h>
#include <string.h>
#include <limits.h>
#include <time.h>
#include "utils.h"
#ifdef USE_MPI
#include <mpi.h>
#endif

// The world's collectives, and hybrid sharding's (llmc/zero_plan.h) inside a shard group and
// across the groups: each a Comm of its own (comm_split), counting its own bytes.
typedef enum { COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_SCALARS, NUM_COLL_KINDS } CollKind;
static const char* const COLL_NAMES[NUM_COLL_KINDS] = {"reduce-scatter", "all-gather", "scalars"};

typedef struct {
    int rank;
    int world_size;                   // ranks in this communicator (a shard group's G, or all N)
#ifdef USE_MPI
    MPI_Comm mpi;                     // MPI_COMM_WORLD, or a sub-communicator (comm_split)
#endif
    double bus_bytes[NUM_COLL_KINDS]; // since the last comm_reset_counters
    int calls[NUM_COLL_KINDS];        // collectives started, since the last comm_reset_counters
    double timeout_s;                 // the longest wait for one collective (0: forever)
    double io_timeout_s;              // the longest wait at comm_io_barrier (0: forever)
    int step;                         // the training step, for messages
    int next_tag;                     // the ring reduce-scatters started so far (their tags)
} Comm;

#ifdef USE_MPI
// One collective in flight. A reduce-scatter is our own ring (below) and keeps its state here;
// the others are one MPI request.
typedef struct {
    MPI_Request req;       // the collective, or the ring round's receive
    MPI_Request send_req;  // the ring round's send
    CollKind kind;
    int round;             // ring: the round in flight, 0 .. N-2
    int tag;               // ring: this reduce-scatter's message tag
    const float* send;     // ring: the N*n input
    float* recv;           // ring: the n output
    float* partial;        // ring: 2*n floats, the partial sums passed along
    size_t n;
} CommRequest;
#define COMM_REQUEST_NULL ((CommRequest){MPI_REQUEST_NULL, MPI_REQUEST_NULL, COLL_SCALARS, 0, 0, NULL, NULL, NULL, 0})

static inline void mpi_check(int rc, const char* what, const char* file, int line) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fail("MPI error in %s: %s [%s:%d]", what, msg, file, line);
    }
}
#define mpiCheck(call) mpi_check((call), #call, __FILE__, __LINE__)

// A failing rank takes the whole job down: the other ranks would otherwise wait forever in
// their next collective.
static void comm_abort_hook(void) { MPI_Abort(MPI_COMM_WORLD, 1); }
#else
typedef struct { int pending; CollKind kind; } CommRequest;
#define COMM_REQUEST_NULL ((CommRequest){0, COLL_SCALARS})
#endif

static inline void comm_reset_counters(Comm* comm) {
    memset(comm->bus_bytes, 0, sizeof(comm->bus_bytes));
    memset(comm->calls, 0, sizeof(comm->calls));
}

static inline void comm_init(Comm* comm, int* argc, char*** argv) {
    memset(comm, 0, sizeof(*comm));
    comm->world_size = 1;
    comm->timeout_s = 300.0;
    comm->io_timeout_s = 3000.0;
#ifdef USE_MPI
    mpiCheck(MPI_Init(argc, argv));
    comm->mpi = MPI_COMM_WORLD;
    mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &comm->rank));
    mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &comm->world_size));
    set_error_rank(comm->rank, comm->world_size);
    if (comm->world_size > 1) { g_fail_hook = comm_abort_hook; }
#else
    (void)argc; (void)argv;
#endif
}

// A sub-communicator of parent's ranks with the same color, ranked by key (MPI_Comm_split);
// collective over parent. It keeps the parent's deadlines and counts its own bytes.
static inline void comm_split(const Comm* parent, int color, int key, Comm* child) {
    *child = *parent;
    comm_reset_counters(child);
    child->next_tag = 0;
#ifdef USE_MPI
    mpiCheck(MPI_Comm_split(parent->mpi, color, key, &child->mpi));
    mpiCheck(MPI_Comm_rank(child->mpi, &child->rank));
    mpiCheck(MPI_Comm_size(child->mpi, &child->world_size));
#else
    (void)color; (void)key;
#endif
}

static inline void comm_free(Comm* comm) {
#ifdef USE_MPI
    if (comm->mpi != MPI_COMM_WORLD) { MPI_Comm_free(&comm->mpi); }
#else
    (void)comm;
#endif
}

static inline void comm_finalize(Comm* comm) {
    (void)comm;
#ifdef USE_MPI
    MPI_Finalize();
#endif
}

static inline int comm_count(size_t n, const char* what) {
    if (n > INT_MAX) { fail("%s of %zu elements per rank exceeds MPI's int count", what, n); }
    return (int)n;
}

// Starts recv (n) = the sum over ranks of this rank's slice of send (N*n): rank r gets the sum
// of every rank's send[r*n .. (r+1)*n).
//
// A ring, written out rather than left to MPI_Ireduce_scatter_block: Open MPI's (libnbc)
// reduces through a tree to rank 0, which allocates 2.25x the whole N*n buffer (rank 2 of 4:
// 1.25x), so at GPT-2 124M on 4 ranks rank 0 held ~340 MB more than ranks 1 and 3, outside the
// plan. The ring needs 2*n floats on every rank, and its order of addition is fixed: in N-1
// rounds each rank passes a partial sum to the next rank (r+1), which adds its own slice; the
// partial for slice j starts at rank j+1 and ends at rank j, so slice j's sum is
// ((send_{j+1} + send_{j+2}) + ...) + send_j, the same at every stage. The rounds advance
// inside comm_wait (as MPI's own non-blocking collectives advance only inside MPI calls).
#ifdef USE_MPI
static inline const float* ring_slice(const CommRequest* q, int slice, int world_size) {
    return q->send + (size_t)((slice % world_size + world_size) % world_size) * q->n;
}

// Posts round q->round: send the partial for slice r-round-1 to rank r+1, receive the one for
// slice r-round-2 from rank r-1 (round 0 sends this rank's own slice: nothing is summed yet).
static inline void ring_post_round(Comm* comm, CommRequest* q) {
    int N = comm->world_size, r = comm->rank, k = q->round;
    const float* out = k == 0 ? ring_slice(q, r - 1, N) : q->partial + (size_t)((k - 1) % 2) * q->n;
    float* in = q->partial + (size_t)(k % 2) * q->n;
    int count = comm_count(q->n, "reduce-scatter");
    mpiCheck(MPI_Irecv(in, count, MPI_FLOAT, (r - 1 + N) % N, q->tag, comm->mpi, &q->req));
    mpiCheck(MPI_Isend(out, count, MPI_FLOAT, (r + 1) % N, q->tag, comm->mpi, &q->send_req));
}

// Round q->round has arrived: add this rank's own slice to the partial received, then post the
// next round; after the last one (which brought the partial of slice r) the sum is in recv.
// Returns 1 when the reduce-scatter is complete.
static inline int ring_next_round(Comm* comm, CommRequest* q) {
    int N = comm->world_size, r = comm->rank, k = q->round;
    float* in = q->partial + (size_t)(k % 2) * q->n;
    const float* mine = ring_slice(q, r - k - 2, N);
    float* out = k == N - 2 ? q->recv : in;
    for (size_t i = 0; i < q->n; i++) { out[i] = in[i] + mine[i]; }
    if (k == N - 2) { free(q->partial); *q = COMM_REQUEST_NULL; return 1; }
    q->round = k + 1;
    ring_post_round(comm, q);
    return 0;
}
#endif

static inline void comm_reduce_scatter_start(Comm* comm, const float* send, float* recv, size_t n, CommRequest* req) {
    comm->bus_bytes[COLL_REDUCE_SCATTER] += (double)n * sizeof(float) * (comm->world_size - 1);
    comm->calls[COLL_REDUCE_SCATTER]++;
#ifdef USE_MPI
    if (comm->world_size > 1) {
        *req = COMM_REQUEST_NULL;
        req->kind = COLL_REDUCE_SCATTER;
        req->tag = comm->next_tag;
        comm->next_tag = (comm->next_tag + 1) % 32768; // MPI guarantees tags up to 32767
        req->send = send; req->recv = recv; req->n = n;
        req->partial = (float*)mallocCheck(2 * n * sizeof(float));
        ring_post_round(comm, req);
        return;
    }
#endif
    memcpy(recv, send, n * sizeof(float)); // one rank: its slice is the sum
    *req = COMM_REQUEST_NULL;
}

// Starts recv (N*n) = every rank's send (n) side by side, in rank order.
static inline void comm_all_gather_start(Comm* comm, const float* send, float* recv, size_t n, CommRequest* req) {
    comm->bus_bytes[COLL_ALL_GATHER] += (double)n * sizeof(float) * (comm->world_size - 1);
    comm->calls[COLL_ALL_GATHER]++;
#ifdef USE_MPI
    if (comm->world_size > 1) {
        req->kind = COLL_ALL_GATHER;
        mpiCheck(MPI_Iallgather(send, comm_count(n, "all-gather"), MPI_FLOAT, recv, (int)n, MPI_FLOAT, comm->mpi, &req->req));
        return;
    }
#endif
    memcpy(recv, send, n * sizeof(float));
    *req = COMM_REQUEST_NULL;
}

// Starts the all-gather in place: buf (N*n) holds this rank's part at buf[rank*n], and gets
// every rank's part.
static inline void comm_all_gather_inplace_start(Comm* comm, float* buf, size_t n, CommRequest* req) {
    comm->bus_bytes[COLL_ALL_GATHER] += (double)n * sizeof(float) * (comm->world_size - 1);
    comm->calls[COLL_ALL_GATHER]++;
#ifdef USE_MPI
    if (comm->world_size > 1) {
        req->kind = COLL_ALL_GATHER;
        mpiCheck(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, comm_count(n, "all-gather"), MPI_FLOAT, comm->mpi, &req->req));
        return;
    }
#endif
    (void)buf; // one rank: its part is already the whole
    *req = COMM_REQUEST_NULL;
}

static inline double comm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Waits for a request, at most limit_s seconds (0: forever); `io` names the file I/O a barrier
// waits for (NULL: a collective, timed by -wt). Polling drives MPI's progress (and our ring's
// rounds): it spins for the first 10 ms, then naps 50 us once every 256 polls, so that waiting
// ranks leave the cores to the ranks still computing (the tests run more ranks than cores).
static inline void comm_wait_within(Comm* comm, CommRequest* req, double limit_s, const char* io) {
#ifdef USE_MPI
    if (req->req == MPI_REQUEST_NULL) { return; }
    double start = comm_now();
    for (long polls = 0;; polls++) {
        int done = 0;
        if (req->kind == COLL_REDUCE_SCATTER) {
            MPI_Request round[2] = {req->req, req->send_req};
            mpiCheck(MPI_Testall(2, round, &done, MPI_STATUSES_IGNORE));
            req->req = round[0]; req->send_req = round[1];
            if (done && ring_next_round(comm, req)) { return; }
            if (done) { start = comm_now(); polls = -1; continue; } // a round arrived: progress
        } else {
            mpiCheck(MPI_Test(&req->req, &done, MPI_STATUS_IGNORE));
            if (done) { return; }
        }
        if ((polls & 255) == 0) {
            double waited = comm_now() - start;
            if (limit_s > 0 && waited > limit_s) {
                if (io == NULL) {
                    fail("no progress for %.0f s in %s at step %d: another rank has stopped answering "
                         "(a longer wait: flag -wt)", waited, COLL_NAMES[req->kind], comm->step);
                }
                fail("no progress for %.0f s at step %d waiting for %s: a disk that slow, or a rank that "
                     "stopped answering (a longer wait: flag -wi)", waited, comm->step, io);
            }
            if (waited > 0.01) { struct timespec nap = {0, 50000}; nanosleep(&nap, NULL); }
        }
    }
#else
    (void)comm; (void)limit_s; (void)io;
    *req = COMM_REQUEST_NULL;
#endif
}

// 1 while a collective started with req has not been waited for (0 at one rank: nothing to wait for).
static inline int comm_pending(const CommRequest* req) {
#ifdef USE_MPI
    return req->req != MPI_REQUEST_NULL;
#else
    return req->pending;
#endif
}

// Waits for a collective, at most comm->timeout_s (flag -wt).
static inline void comm_wait(Comm* comm, CommRequest* req) { comm_wait_within(comm, req, comm->timeout_s, NULL); }

// buf (n, a multiple of N) = the sum over ranks of buf, on every rank: our ring reduce-scatter
// (its fixed order of addition) into this rank's n/N slice of buf, then an all-gather in place.
// In place is safe for the ring: it reads this rank's own slice only in its last round, element
// by element as it writes the sum there. The buffer sizes are the caller's to check.
static inline void comm_all_reduce(Comm* comm, float* buf, size_t n) {
    if (comm->world_size == 1) { return; }
    size_t part = n / comm->world_size;
    CommRequest req;
    comm_reduce_scatter_start(comm, buf, buf + (size_t)comm->rank * part, part, &req);
    comm_wait(comm, &req);
    comm_all_gather_inplace_start(comm, buf, part, &req);
    comm_wait(comm, &req);
}

// Every rank waits here until all have finished the file I/O named by `what` (a checkpoint's
// files written, a checkpoint read), at most comm->io_timeout_s (flag -wi). Placed right after
// the I/O, so that the next collective, timed by the shorter -wt, never waits for a disk.
static inline void comm_io_barrier(Comm* comm, const char* what) {
#ifdef USE_MPI
    if (comm->world_size == 1) { return; }
    CommRequest req = COMM_REQUEST_NULL;
    mpiCheck(MPI_Ibarrier(comm->mpi, &req.req));
    comm_wait_within(comm, &req, comm->io_timeout_s, what);
#else
    (void)comm; (void)what;
#endif
}

// all[r] = rank r's value, on every rank. Summing `all` in rank order gives every rank, and
// every stage, the same bits (an MPI_Allreduce may sum in any order).
static inline void comm_gather_doubles(Comm* comm, double mine, double* all) {
    comm->bus_bytes[COLL_SCALARS] += (double)sizeof(double) * (comm->world_size - 1);
    comm->calls[COLL_SCALARS]++;
#ifdef USE_MPI
    CommRequest req = COMM_REQUEST_NULL;
    mpiCheck(MPI_Iallgather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, comm->mpi, &req.req));
    comm_wait(comm, &req);
#else
    all[0] = mine;
#endif
}

// The sum over ranks of `mine`, in rank order.
static inline double comm_sum(Comm* comm, double mine) {
    double* all = (double*)mallocCheck(comm->world_size * sizeof(double));
    comm_gather_doubles(comm, mine, all);
    double sum = 0.0;
    for (int r = 0; r < comm->world_size; r++) { sum += all[r]; }
    free(all);
    return sum;
}

// Checks every rank was started with the same command line (mpirun can start different ones:
// `mpirun -np 1 ./a -b 4 : -np 1 ./a -b 2`). On a mismatch rank 0 names it and all ranks exit.
static inline void comm_check_same_args(Comm* comm, int argc, char** argv) {
    char mine[2048] = {0};
    flags_line(mine, sizeof(mine), argc, argv);
#ifdef USE_MPI
    if (comm->world_size == 1) { return; }
    char* all = (char*)mallocCheck(sizeof(mine) * comm->world_size);
    CommRequest req = COMM_REQUEST_NULL;
    mpiCheck(MPI_Iallgather(mine, sizeof(mine), MPI_CHAR, all, sizeof(mine), MPI_CHAR, comm->mpi, &req.req));
    comm_wait(comm, &req);
    for (int r = 1; r < comm->world_size; r++) {
        const char* theirs = all + sizeof(mine) * r;
        if (strcmp(all, theirs) != 0) {
            if (comm->rank == 0) {
                fprintf(stderr, "error: ranks disagree on flags: rank 0 has '%s', rank %d has '%s'\n", all, r, theirs);
            }
            MPI_Finalize(); // every rank saw the mismatch: a clean exit, nobody is left waiting
            exit(EXIT_FAILURE);
        }
    }
    free(all);
#else
    (void)comm;
#endif
}

#endif // LLMC_MPI_COMM_H
