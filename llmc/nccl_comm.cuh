/*
Communication for the CUDA trainer: the collectives the ZeRO stages need, over NCCL, with the
same names and counters as the CPU trainer's llmc/mpi_comm.h (DESIGN.md §5).

Processes. One process per GPU, started one of two ways:
- `mpirun -np N ./train_gpt2cu ...` (built with MPI): rank and size come from MPI, and rank 0's
  NCCL id is broadcast over MPI;
- without MPI, by flags: `-pn N -pr r -pi fs -pf DIR` (a shared directory) or `-pi tcp -ps
  HOST[:PORT]` (rank 0's address); the id travels through llmc/rendezvous.h. Slurm's srun, or
  a test starting N processes on one GPU, use this.
Each process takes the GPU of its local rank (modulo the GPUs it sees), so a test may put several
ranks on one GPU. NCCL 2.28 refuses that unless each rank's NCCL_HOSTID differs (it then uses its
socket transport); dev/test/test_zero_cuda.sh sets it.

Streams. Every collective runs on one communication stream, in the order the trainer issues it
(which is the same on every rank). The trainer orders it against its compute stream with events
(stream_wait_for, or cudaEventRecord + cudaStreamWaitEvent), so the host never blocks on a
collective except where it needs a number (the loss, the norm): comm_sync.

No hangs. The communicator is created non-blocking, so no NCCL call can block the host. Every
host wait polls: the CUDA event, NCCL's asynchronous error state (of every communicator of this
process: the world's and its -zg splits', whichever one the wait is on) and a deadline (-wt). On a
timeout or an error the rank aborts the communicator and exits with a message naming itself, the
step and the oldest collective still in flight (a peer that died is noticed by NCCL, or by the
deadline). Where ranks wait for each other's file I/O (rank 0 writing a model file, every rank
reading a checkpoint), comm_io_barrier waits instead, at most comm->io_timeout_s (flag -wi): a
slow disk is not a dead rank.

Counters. Each collective adds its bus bytes (nccl-tests' convention: reduce-scatter or
all-gather of a full buffer of S bytes moves S*(N-1)/N per rank) to its kind, so the trainer can
print what a step moved and the tests can hold it to the plan. Its time on the communication
stream is measured with events, for the benchmark's "share of communication hidden".

Build: NO_MULTI_GPU leaves NCCL out (one process only); USE_MPI (the Makefile's default when
mpicc exists, NO_USE_MPI=1 turns it off) adds the mpirun start.
*/
#ifndef LLMC_NCCL_COMM_CUH
#define LLMC_NCCL_COMM_CUH

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime.h>
#include "utils.h"
#include "cuda_common.cuh"
#include "rendezvous.h"
#ifndef NO_MULTI_GPU
#include <nccl.h>
#endif
#ifdef USE_MPI
#include <mpi.h>
#endif

// all-reduce: hybrid sharding's gradient shards across the groups (comm_all_reduce)
typedef enum { COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_SCALARS, COLL_ALL_REDUCE, NUM_COLL_KINDS } CollKind;
static const char* const COLL_NAMES[NUM_COLL_KINDS] = {"reduce-scatter", "all-gather", "scalars", "all-reduce"};

// The collectives issued and not yet known to be finished: a ring, oldest first.
#define COMM_RING 256
typedef struct {
    cudaEvent_t start, done; // around the collective on the communication stream
    CollKind kind;
    int unit;                // the model unit it moves (-1: none)
    int step;
} CommRecord;

// How this run's processes were started and find each other (flags -pn -pr -pi -pf -ps).
typedef struct {
    int num_processes;   // -pn (-1: not given)
    int process_rank;    // -pr (-1: not given)
    const char* method;  // -pi: fs or tcp
    const char* fs_dir;  // -pf
    const char* server;  // -ps
} ProcessFlags;

#define COMM_MAX_SPLITS 4 // hybrid sharding makes 2: the shard group and the ranks across groups
typedef struct Comm {
    int rank;
    int world_size;
    int local_rank;                   // among the processes of this node: picks the GPU
    int started_by_mpi;
    double bus_bytes[NUM_COLL_KINDS]; // since the last comm_reset_counters
    int calls[NUM_COLL_KINDS];        // collectives queued, since the last comm_reset_counters
    double busy_ms;                   // time collectives ran on the stream, since the last reset
    double timeout_s;                 // the longest host wait for the GPU or a collective (0: forever)
    double io_timeout_s;              // the longest wait at comm_io_barrier (0: forever)
    int step;                         // the training step, for messages
    cudaStream_t stream;              // the communication stream (a split's: its parent's)
    int is_split;                     // made by comm_split: the stream belongs to the parent
    const char* name;                 // for messages: "the world communicator", a split's own
    struct Comm* parent;              // a split's parent (NULL: the world's)
    struct Comm* splits[COMM_MAX_SPLITS]; // the world's: its live splits (NULL: finalized)
    CommRecord ring[COMM_RING];
    int ring_head, ring_count;        // oldest record, records in the ring
    double* scalars;                  // (world_size) device: comm_gather_doubles
    double* scalars_host;             // (world_size) pinned
#ifndef NO_MULTI_GPU
    ncclComm_t nccl;                  // NULL for one process
#endif
} Comm;

static inline double comm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ----------------------------------------------------------------------------
// errors and waiting

// The oldest collective still running, for a message ("" if none is known).
static inline void comm_describe_pending(const Comm* comm, char* out, size_t n) {
    out[0] = '\0';
    for (int i = 0; i < comm->ring_count; i++) {
        const CommRecord* r = &comm->ring[(comm->ring_head + i) % COMM_RING];
        if (cudaEventQuery(r->done) == cudaErrorNotReady) {
            if (r->unit >= 0) { snprintf(out, n, "%s of unit %d (issued at step %d)", COLL_NAMES[r->kind], r->unit, r->step); }
            else { snprintf(out, n, "%s (issued at step %d)", COLL_NAMES[r->kind], r->step); }
            return;
        }
    }
    (void)cudaGetLastError(); // the queries above leave cudaErrorNotReady behind
}

// The world communicator of comm's process: comm itself, or a split's parent.
static inline Comm* comm_world(Comm* comm) { return comm->parent != NULL ? comm->parent : comm; }

// Ends the run from a wait that cannot finish: every communicator of the process is aborted
// first (the splits, then the world's), so nothing is left blocking inside NCCL.
static inline void __attribute__((noreturn)) comm_give_up(Comm* comm, const char* why, const char* waiting_for) {
    char pending[256];
    comm_describe_pending(comm, pending, sizeof(pending));
#ifndef NO_MULTI_GPU
    Comm* world = comm_world(comm);
    for (int i = 0; i < COMM_MAX_SPLITS; i++) {
        Comm* s = world->splits[i];
        if (s != NULL && s->nccl != NULL) { ncclCommAbort(s->nccl); s->nccl = NULL; }
    }
    if (world->nccl != NULL) { ncclCommAbort(world->nccl); world->nccl = NULL; }
#endif
    fail("%s at step %d while waiting for %s%s%s", why, comm->step, waiting_for,
         pending[0] ? "; oldest collective in flight: " : "", pending);
}

#ifndef NO_MULTI_GPU
// NCCL's asynchronous state: ncclSuccess, ncclInProgress, or an error (which ends the run,
// naming the communicator).
static inline ncclResult_t comm_nccl_state(Comm* comm, const char* waiting_for) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(comm->nccl, &state);
    if (rc != ncclSuccess) { state = rc; }
    if (state != ncclSuccess && state != ncclInProgress) {
        char why[600];
        snprintf(why, sizeof(why), "NCCL error %s in %s (%s)", ncclGetErrorString(state), comm->name ? comm->name : "a communicator",
                 ncclGetLastError(comm->nccl));
        comm_give_up(comm, why, waiting_for);
    }
    return state;
}

// The same for every communicator of the process. A host wait calls this whichever
// communicator it waits on: a split's collectives share the stream with the world's, so when one
// fails on a GPU (its kernel never finishes) every later event stalls, and only the split's
// own state says why; polling the world's alone would end the wait at -wt, not at the error.
static inline void comm_nccl_state_all(Comm* comm, const char* waiting_for) {
    Comm* world = comm_world(comm);
    for (int i = 0; i < COMM_MAX_SPLITS; i++) {
        Comm* s = world->splits[i];
        if (s != NULL && s->nccl != NULL) { comm_nccl_state(s, waiting_for); }
    }
    if (world->nccl != NULL) { comm_nccl_state(world, waiting_for); }
}

// A non-blocking NCCL call returns ncclInProgress while it is still being set up; the next
// call on the communicator may only come once it has settled.
static inline void comm_nccl_settle(Comm* comm, ncclResult_t rc, const char* what) {
    if (rc != ncclSuccess && rc != ncclInProgress) {
        char why[512];
        snprintf(why, sizeof(why), "NCCL error %s (%s)", ncclGetErrorString(rc), ncclGetLastError(comm->nccl));
        comm_give_up(comm, why, what);
    }
    double start = comm_now();
    while (comm_nccl_state(comm, what) == ncclInProgress) {
        if (comm->timeout_s > 0 && comm_now() - start > comm->timeout_s) {
            comm_give_up(comm, "timed out (flag -wt)", what);
        }
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
}
#endif

// Waits on the host until `event` has happened, at most limit_s (0: forever), watching NCCL's
// error state; `hint` ends the timeout's message. It spins for the first 10 ms, then naps between
// polls, leaving the CPU to other ranks.
static inline void comm_wait_event_within(Comm* comm, cudaEvent_t event, const char* what, double limit_s, const char* hint) {
    double start = comm_now();
    for (long polls = 0;; polls++) {
        cudaError_t err = cudaEventQuery(event);
        if (err == cudaSuccess) { return; }
        if (err != cudaErrorNotReady) { cudaCheck(err); }
        // the runtime also keeps cudaErrorNotReady as this thread's last error: clear it, or the
        // next launch check (cudaGetLastError) would report it as a failed launch
        err = cudaGetLastError();
        if (err != cudaErrorNotReady) { cudaCheck(err); }
        if ((polls & 63) == 0) {
#ifndef NO_MULTI_GPU
            comm_nccl_state_all(comm, what);
#endif
            double waited = comm_now() - start;
            if (limit_s > 0 && waited > limit_s) {
                char why[256];
                snprintf(why, sizeof(why), "no progress for %.0f s (%s)", waited, hint);
                comm_give_up(comm, why, what);
            }
            if (waited > 0.01) { struct timespec nap = {0, 50000}; nanosleep(&nap, NULL); }
        }
    }
}

// The same, at most comm->timeout_s (flag -wt): the wait for the GPU or a collective.
static inline void comm_wait_event(Comm* comm, cudaEvent_t event, const char* what) {
    comm_wait_event_within(comm, event, what, comm->timeout_s, "another rank stopped answering? a longer wait: flag -wt");
}

// The host waits for everything queued so far on stream s (compute or communication). Used
// wherever the trainer would call cudaStreamSynchronize: that one could wait forever.
static inline void comm_sync(Comm* comm, cudaStream_t s, const char* what) {
    cudaEvent_t e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaCheck(cudaEventRecord(e, s));
    comm_wait_event(comm, e, what);
    cudaCheck(cudaEventDestroy(e));
}

// ----------------------------------------------------------------------------
// ordering the two streams

// Work queued on `waiter` from now on starts after what is queued on `s` so far (no host wait).
// `e` is the caller's event (cudaStreamWaitEvent copies its state, so it can be reused at once).
static inline void stream_wait_for(cudaStream_t waiter, cudaStream_t s, cudaEvent_t e) {
    cudaCheck(cudaEventRecord(e, s));
    cudaCheck(cudaStreamWaitEvent(waiter, e, 0));
}

// ----------------------------------------------------------------------------
// start-up

#ifdef USE_MPI
static void comm_mpi_abort_hook(void) { MPI_Abort(MPI_COMM_WORLD, 1); }

// Does the command line start this process by flags (-pn/-pr/-pi/-pf/-ps)? Read before
// parse_args, in its flag-value pairs, so a value that looks like a flag is not one.
static inline int comm_process_flags_given(int argc, char** argv) {
    static const char* const flags[] = {"-pn", "-pr", "-pi", "-pf", "-ps"};
    for (int i = 1; i < argc; i += 2) {
        for (int k = 0; k < 5; k++) { if (strcmp(argv[i], flags[k]) == 0) { return 1; } }
    }
    return 0;
}
#endif

// Before the flags are parsed: under mpirun (built with MPI), rank and size from MPI.
static inline void comm_bootstrap(Comm* comm, int* argc, char*** argv) {
    memset(comm, 0, sizeof(*comm));
    comm->name = "the world communicator";
    comm->world_size = 1;
    comm->timeout_s = 300.0;
    comm->io_timeout_s = 3000.0;
#ifdef USE_MPI
    // started by mpirun (OpenMPI, MPICH/PMI, PMIx)? A plain start must not need MPI at all.
    // Flags -pn/-pr/-pi win over the launcher's variables: srun sets PMIX_RANK/PMI_SIZE for
    // every task, MPI job or not, and the user asked for a start by flags.
    int by_launcher = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
    if (by_launcher && !comm_process_flags_given(*argc, *argv)) {
        MPI_Init(argc, argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &comm->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &comm->world_size);
        MPI_Comm local;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, comm->rank, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &comm->local_rank);
        MPI_Comm_free(&local);
        comm->started_by_mpi = 1;
        set_error_rank(comm->rank, comm->world_size);
        if (comm->world_size > 1) { g_fail_hook = comm_mpi_abort_hook; } // one rank failing ends the job at once
    }
#else
    (void)argc; (void)argv;
#endif
}

#ifndef NO_MULTI_GPU
// A start by flags, from comm_set_processes until rank 0 has handed out NCCL's id (comm_init):
// a failure of rank 0 meanwhile (a busy -o, a file only it opens) reaches the other ranks through
// the rendezvous in place of the id, so that they stop at once with its reason instead of
// waiting out -wt.
static Rendezvous g_comm_rendezvous;
static void comm_rendezvous_abort_hook(void) { rendezvous_abort(&g_comm_rendezvous, g_fail_text); }
#endif

// After the flags: the rank and size of a start without mpirun, checked.
static inline void comm_set_processes(Comm* comm, const ProcessFlags* pf) {
    int given = pf->num_processes != -1 || pf->process_rank != -1 || pf->method || pf->fs_dir || pf->server;
    // mpirun's ranks never get here with these flags: given them, comm_bootstrap leaves MPI out
    if (!given) { return; } // mpirun's ranks, or one process
    if (pf->num_processes < 1) { fail("flag -pn expects the number of processes >= 1 (with -pr, -pi)"); }
    if (pf->process_rank < 0) { fail("flag -pr expects this process's rank, 0..%d", pf->num_processes - 1); }
    comm->world_size = pf->num_processes;
    comm->rank = pf->process_rank;
    Rendezvous rv = {comm->rank, comm->world_size, pf->method, pf->fs_dir, pf->server, 1.0};
    if (comm->world_size > 1) { rendezvous_check(&rv); }
    else if (comm->rank != 0) { fail("flag -pr %d must be below -pn %d", comm->rank, comm->world_size); }
    // the GPU: the launcher's local rank if it says (Slurm, torchrun), else the rank
    const char* local = getenv("SLURM_LOCALID");
    if (local == NULL) { local = getenv("LOCAL_RANK"); }
    comm->local_rank = local != NULL ? atoi(local) : comm->rank;
    set_error_rank(comm->rank, comm->world_size);
#ifndef NO_MULTI_GPU
    if (comm->world_size > 1 && comm->rank == 0) {
        g_comm_rendezvous = rv;
        g_comm_rendezvous.timeout_s = RENDEZVOUS_ABORT_WAIT_S;
        g_fail_hook = comm_rendezvous_abort_hook;
    }
#endif
}

// On this rank's GPU (cudaSetDevice done): the communication stream, the scalar buffers, and
// for several ranks the NCCL communicator.
static inline void comm_init(Comm* comm, const ProcessFlags* pf) {
    // the highest priority: a collective's kernels get the GPU's next free SMs ahead of the
    // GEMMs queued on the compute stream, instead of waiting for them (overlap). Blocking
    // (cudaStreamDefault): a plain cudaMemcpy waits for it too.
    int least, greatest;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaCheck(cudaStreamCreateWithPriority(&comm->stream, cudaStreamDefault, greatest));
    for (int i = 0; i < COMM_RING; i++) {
        cudaCheck(cudaEventCreate(&comm->ring[i].start));
        cudaCheck(cudaEventCreate(&comm->ring[i].done));
    }
    comm->scalars = (double*)cuda_malloc_counted(NULL, comm->world_size * sizeof(double), "the scalars");
    cudaCheck(cudaMallocHost((void**)&comm->scalars_host, comm->world_size * sizeof(double)));
    if (comm->world_size == 1) { return; }
#ifdef NO_MULTI_GPU
    (void)pf;
    fail("this build has no NCCL (NO_MULTI_GPU): it runs one process, not %d", comm->world_size);
#else
    ncclUniqueId id;
    if (comm->rank == 0) {
        ncclResult_t rc = ncclGetUniqueId(&id);
        if (rc != ncclSuccess) { fail("ncclGetUniqueId: %s", ncclGetErrorString(rc)); }
    }
    Rendezvous rv = {comm->rank, comm->world_size, pf->method, pf->fs_dir, pf->server, comm->timeout_s > 0 ? comm->timeout_s : 1e9};
#ifdef USE_MPI
    if (comm->started_by_mpi) {
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    } else
#endif
    { rendezvous_broadcast(&rv, &id, sizeof(id)); }
    if (g_fail_hook == comm_rendezvous_abort_hook) { g_fail_hook = NULL; } // the id is out: too late to tell the ranks
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // every call returns at once; we poll with a deadline
    ncclResult_t rc = ncclCommInitRankConfig(&comm->nccl, comm->world_size, id, comm->rank, &config);
    if (rc != ncclSuccess && rc != ncclInProgress) {
        fail("ncclCommInitRankConfig: %s (%s)%s", ncclGetErrorString(rc), ncclGetLastError(NULL),
             rc == ncclInvalidUsage ? "; several ranks on one GPU need a different NCCL_HOSTID each" : "");
    }
    comm_nccl_settle(comm, rc, "the NCCL communicator to form (all ranks started? several ranks on one GPU need a different NCCL_HOSTID each)");
    if (!comm->started_by_mpi) { rendezvous_finish(&rv); } // every rank has read the id
#endif
}

// Hybrid sharding (llmc/zero_plan.h): a communicator of the parent's ranks with the same color,
// ranked by key (ncclCommSplit, collective over the parent). It queues its collectives on the
// parent's communication stream, so they stay in issue order with the parent's and the
// trainer's events order them as before; it counts its own bytes and stream time. The parent
// (the world's) keeps it in its list, so that every host wait polls its NCCL state too; `name`
// says which it is in messages. child stays where it is until comm_finalize.
static inline void comm_split(Comm* parent, int color, int key, Comm* child, const char* name) {
    *child = *parent;
    child->name = name;
    child->parent = parent;
    memset(child->splits, 0, sizeof(child->splits));
    int slot = 0;
    while (slot < COMM_MAX_SPLITS && parent->splits[slot] != NULL) { slot++; }
    if (parent->parent != NULL || slot == COMM_MAX_SPLITS) { fail("internal: comm_split of a split, or more than %d splits", COMM_MAX_SPLITS); }
    parent->splits[slot] = child;
    child->is_split = 1;
    child->ring_head = child->ring_count = 0;
    memset(child->bus_bytes, 0, sizeof(child->bus_bytes));
    child->busy_ms = 0.0;
    for (int i = 0; i < COMM_RING; i++) {
        cudaCheck(cudaEventCreate(&child->ring[i].start));
        cudaCheck(cudaEventCreate(&child->ring[i].done));
    }
    child->scalars = NULL; // the scalars go over the parent
    child->scalars_host = NULL;
#ifndef NO_MULTI_GPU
    child->nccl = NULL;
    child->rank = 0;
    child->world_size = 1;
    if (parent->nccl == NULL) { return; }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // as the parent: polled with a deadline
    ncclResult_t rc = ncclCommSplit(parent->nccl, color, key, &child->nccl, &config);
    if (rc != ncclSuccess && rc != ncclInProgress) { fail("ncclCommSplit: %s (%s)", ncclGetErrorString(rc), ncclGetLastError(NULL)); }
    comm_nccl_settle(child, rc, "the shard group's NCCL communicator to form (ncclCommSplit)");
    if (ncclCommUserRank(child->nccl, &child->rank) != ncclSuccess || ncclCommCount(child->nccl, &child->world_size) != ncclSuccess) {
        fail("ncclCommSplit: the new communicator's rank and size: %s", ncclGetLastError(child->nccl));
    }
#else
    (void)color; (void)key;
#endif
}

static inline void comm_finalize(Comm* comm) {
    comm_sync(comm, comm->stream, "the last collectives");
#ifndef NO_MULTI_GPU
    if (comm->nccl != NULL) {
        comm_nccl_settle(comm, ncclCommFinalize(comm->nccl), "the communicator to finalize");
        ncclCommDestroy(comm->nccl);
        comm->nccl = NULL;
    }
#endif
    for (int i = 0; i < COMM_RING; i++) {
        cudaCheck(cudaEventDestroy(comm->ring[i].start));
        cudaCheck(cudaEventDestroy(comm->ring[i].done));
    }
    if (comm->is_split) { // the rest is the parent's; it stops polling this one
        for (int i = 0; i < COMM_MAX_SPLITS; i++) { if (comm->parent->splits[i] == comm) { comm->parent->splits[i] = NULL; } }
        return;
    }
    cudaCheck(cudaFree(comm->scalars));
    cudaCheck(cudaFreeHost(comm->scalars_host));
    cudaCheck(cudaStreamDestroy(comm->stream));
#ifdef USE_MPI
    if (comm->started_by_mpi) { MPI_Finalize(); }
#endif
}

// ----------------------------------------------------------------------------
// counters

// Adds the stream time of records whose collectives are done; with `wait`, waits for all.
static inline void comm_collect_times(Comm* comm, int wait) {
    while (comm->ring_count > 0) {
        CommRecord* r = &comm->ring[comm->ring_head];
        if (wait) { comm_wait_event(comm, r->done, COLL_NAMES[r->kind]); }
        else if (cudaEventQuery(r->done) != cudaSuccess) { (void)cudaGetLastError(); return; }
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, r->start, r->done));
        comm->busy_ms += ms;
        comm->ring_head = (comm->ring_head + 1) % COMM_RING;
        comm->ring_count--;
    }
}

static inline void comm_reset_counters(Comm* comm) {
    comm_collect_times(comm, 0);
    memset(comm->bus_bytes, 0, sizeof(comm->bus_bytes));
    memset(comm->calls, 0, sizeof(comm->calls));
    comm->busy_ms = 0.0;
}

// ----------------------------------------------------------------------------
// collectives: queued on the communication stream; the host does not wait

#ifndef NO_MULTI_GPU
static inline ncclDataType_t nccl_type(size_t elem_size) {
    switch (elem_size) {
        case 2: return ncclBfloat16;
        case 4: return ncclFloat32;
        case 8: return ncclFloat64;
        default: fail("internal: no NCCL type of %zu bytes", elem_size);
    }
}
#endif

// Opens a record for a collective about to be queued (its start event goes first).
static inline CommRecord* comm_record_open(Comm* comm, CollKind kind, int unit, double bytes) {
    if (comm->ring_count == COMM_RING) { comm_collect_times(comm, 0); }
    if (comm->ring_count == COMM_RING) { // still full: wait for the oldest
        CommRecord* oldest = &comm->ring[comm->ring_head];
        comm_wait_event(comm, oldest->done, COLL_NAMES[oldest->kind]);
        comm_collect_times(comm, 0);
    }
    CommRecord* r = &comm->ring[(comm->ring_head + comm->ring_count) % COMM_RING];
    comm->ring_count++;
    r->kind = kind;
    r->unit = unit;
    r->step = comm->step;
    comm->bus_bytes[kind] += bytes;
    comm->calls[kind]++;
    cudaCheck(cudaEventRecord(r->start, comm->stream));
    return r;
}

static inline void comm_record_close(Comm* comm, CommRecord* r) { cudaCheck(cudaEventRecord(r->done, comm->stream)); }

// recv (n) = the sum over ranks of this rank's slice of send (N*n): rank r gets the sum of every
// rank's send[r*n .. (r+1)*n). In place when recv == send + rank*n.
static inline void comm_reduce_scatter(Comm* comm, const void* send, void* recv, size_t n, size_t elem_size, int unit) {
    CommRecord* r = comm_record_open(comm, COLL_REDUCE_SCATTER, unit, (double)n * elem_size * (comm->world_size - 1));
#ifndef NO_MULTI_GPU
    if (comm->nccl != NULL) {
        comm_nccl_settle(comm, ncclReduceScatter(send, recv, n, nccl_type(elem_size), ncclSum, comm->nccl, comm->stream),
                         "ncclReduceScatter to be queued");
    } else
#endif
    if (recv != send) { cudaCheck(cudaMemcpyAsync(recv, send, n * elem_size, cudaMemcpyDeviceToDevice, comm->stream)); }
    comm_record_close(comm, r);
}

// recv (N*n) = every rank's send (n) side by side, in rank order. In place when
// send == recv + rank*n.
static inline void comm_all_gather(Comm* comm, const void* send, void* recv, size_t n, size_t elem_size, int unit) {
    CommRecord* r = comm_record_open(comm, COLL_ALL_GATHER, unit, (double)n * elem_size * (comm->world_size - 1));
#ifndef NO_MULTI_GPU
    if (comm->nccl != NULL) {
        comm_nccl_settle(comm, ncclAllGather(send, recv, n, nccl_type(elem_size), comm->nccl, comm->stream),
                         "ncclAllGather to be queued");
    } else
#endif
    if (recv != send) { cudaCheck(cudaMemcpyAsync(recv, send, n * elem_size, cudaMemcpyDeviceToDevice, comm->stream)); }
    comm_record_close(comm, r);
}

// buf (n) = the sum over ranks of buf, in place, on every rank.
static inline void comm_all_reduce(Comm* comm, void* buf, size_t n, size_t elem_size, int unit) {
    CommRecord* r = comm_record_open(comm, COLL_ALL_REDUCE, unit, 2.0 * n * elem_size * (comm->world_size - 1) / comm->world_size);
#ifndef NO_MULTI_GPU
    if (comm->nccl != NULL) {
        comm_nccl_settle(comm, ncclAllReduce(buf, buf, n, nccl_type(elem_size), ncclSum, comm->nccl, comm->stream),
                         "ncclAllReduce to be queued");
    }
#else
    (void)buf;
#endif
    comm_record_close(comm, r);
}

// all[r] = rank r's value, on every rank (the host waits). Summing `all` in rank order gives
// every rank, and every stage, the same bits (an all-reduce may sum in any order).
static inline void comm_gather_doubles(Comm* comm, double mine, double* all) {
    int N = comm->world_size;
    comm->scalars_host[comm->rank] = mine;
    cudaCheck(cudaMemcpyAsync(comm->scalars + comm->rank, comm->scalars_host + comm->rank, sizeof(double),
                              cudaMemcpyHostToDevice, comm->stream));
    comm_all_gather(comm, comm->scalars + comm->rank, comm->scalars, 1, sizeof(double), -1);
    comm->bus_bytes[COLL_ALL_GATHER] -= (double)sizeof(double) * (N - 1); // counted as scalars
    comm->bus_bytes[COLL_SCALARS] += (double)sizeof(double) * (N - 1);
    comm->calls[COLL_ALL_GATHER]--;
    comm->calls[COLL_SCALARS]++;
    cudaCheck(cudaMemcpyAsync(comm->scalars_host, comm->scalars, N * sizeof(double), cudaMemcpyDeviceToHost, comm->stream));
    comm_sync(comm, comm->stream, "a scalar all-gather");
    memcpy(all, comm->scalars_host, N * sizeof(double));
}

// Every rank waits here until all have finished the file I/O named by `what` (a checkpoint's
// files written, a checkpoint read), at most comm->io_timeout_s (flag -wi). Placed right after
// the I/O, so that the next collective, timed by the shorter -wt, never waits for a disk. A
// scalar all-gather (counted as scalars), as comm_gather_doubles but with the I/O allowance.
static inline void comm_io_barrier(Comm* comm, const char* what) {
    if (comm->world_size == 1) { return; }
    comm_all_gather(comm, comm->scalars + comm->rank, comm->scalars, 1, sizeof(double), -1);
    comm->bus_bytes[COLL_ALL_GATHER] -= (double)sizeof(double) * (comm->world_size - 1);
    comm->bus_bytes[COLL_SCALARS] += (double)sizeof(double) * (comm->world_size - 1);
    comm->calls[COLL_ALL_GATHER]--;
    comm->calls[COLL_SCALARS]++;
    cudaEvent_t e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaCheck(cudaEventRecord(e, comm->stream));
    comm_wait_event_within(comm, e, what, comm->io_timeout_s, "a disk that slow, or a rank that stopped answering? a longer wait: flag -wi");
    cudaCheck(cudaEventDestroy(e));
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

// Checks every rank was started with the same flags (a launcher can start different ones). On
// a mismatch rank 0 names it, and every rank exits: all saw it, nobody is left waiting.
static inline void comm_check_same_args(Comm* comm, int argc, char** argv) {
    if (comm->world_size == 1) { return; }
    enum { LEN = 2048 };
    char mine[LEN] = {0};
    flags_line(mine, LEN, argc, argv);
    size_t N = comm->world_size;
    char* dev = (char*)cuda_malloc_counted(NULL, N * LEN, "the flags of every rank");
    char* all = (char*)mallocCheck(N * LEN);
    cudaCheck(cudaMemcpy(dev + comm->rank * LEN, mine, LEN, cudaMemcpyHostToDevice));
    comm_all_gather(comm, dev + comm->rank * LEN, dev, LEN / 8, 8, -1); // as doubles: bytes are bytes
    comm_sync(comm, comm->stream, "the flags of every rank"); // polled; then the plain copy finds the stream idle
    cudaCheck(cudaMemcpy(all, dev, N * LEN, cudaMemcpyDeviceToHost));
    comm_reset_counters(comm);
    for (size_t r = 1; r < N; r++) {
        if (strcmp(all, all + r * LEN) != 0) {
            if (comm->rank == 0) {
                fprintf(stderr, "error: ranks disagree on flags: rank 0 has '%s', rank %zu has '%s'\n", all, r, all + r * LEN);
            }
            exit(EXIT_FAILURE);
        }
    }
    free(all);
    cudaCheck(cudaFree(dev));
}

#endif // LLMC_NCCL_COMM_CUH
