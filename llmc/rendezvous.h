/*
Rendezvous: hands one small blob, NCCL's 128-byte ncclUniqueId, from rank 0 to every rank of a
job whose processes were started without mpirun: by Slurm's srun, or by a test that starts N
processes by hand.

Why: NCCL builds its own fast links between GPUs, but only after every rank holds the same
unique id. Rank 0 creates that id, and NCCL leaves it to "any CPU communication system" to pass
it on. Under mpirun the trainer gets it from MPI (MPI_Bcast). This header covers runs without
MPI. It moves opaque bytes and includes no CUDA or NCCL header, so any machine can build and
test it.

Two methods (-pi). fs: rank 0 publishes the blob as a file in a directory that every rank can
see (-pf). That can be a shared filesystem across nodes, or any directory when all ranks run on
one node. tcp: rank 0 listens on a port (-ps host[:port]), and each other rank connects and
receives the blob. It is for clusters with no shared directory.

No hangs: every wait ends at timeout_s in fail(), with one line that names the rank (via
set_error_rank), the method, the file or address, and what was expected. And a rank 0 that stops
before it has handed out the blob (the trainer's output dir is busy, say) hands out its reason
instead (rendezvous_abort): the other ranks stop at once with it, not at the timeout.
*/
#ifndef LLMC_RENDEZVOUS_H
#define LLMC_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <poll.h>
#include <netdb.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include "utils.h"

#define RENDEZVOUS_PORT 29500        // torch.distributed's default, so cluster scripts look familiar
#define RENDEZVOUS_MAGIC 0x52445a31  // "RDZ1": tells a stray file or connection from ours
#define RENDEZVOUS_FILE "rendezvous.bin"
#define RENDEZVOUS_ABORT_MAGIC 0x52445a58 // "RDZX": the file holds rank 0's reason for stopping, not the blob
#define RENDEZVOUS_ABORT_SIZE 0xFFFFFFFFu // tcp: sent in place of the blob's size, then the reason's size and text
#define RENDEZVOUS_REASON_MAX 1023        // bytes of a reason passed on
#define RENDEZVOUS_ABORT_WAIT_S 10.0      // how long a stopping rank 0 waits at most for the others to hear it

typedef struct {
    int rank;            // this process, 0..world_size-1
    int world_size;      // number of processes
    const char* method;  // "fs" (shared directory) or "tcp"
    const char* fs_dir;  // fs: a directory every rank can see
    const char* server;  // tcp: "host" or "host:port" where rank 0 listens (port default RENDEZVOUS_PORT)
    double timeout_s;    // how long any rank waits for the others before failing (> 0)
} Rendezvous;

// rendezvous.bin is this header, then the blob (n bytes)
typedef struct { int32_t magic; int32_t world_size; int64_t n; } RendezvousFileHeader;

static inline void __attribute__((noreturn, format(printf, 2, 3)))
rendezvous_fail(const Rendezvous* rv, const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fail("rendezvous %s: %s", rv->method, msg);
}

// Splits "host" or "host:port" (IPv4 or a name). Returns 0 if server is neither.
static inline int rendezvous_split_server(const char* server, char* host, size_t cap, int* port) {
    const char* colon = strrchr(server, ':');
    size_t len = colon != NULL ? (size_t)(colon - server) : strlen(server);
    *port = RENDEZVOUS_PORT;
    if (colon != NULL) {
        char* end = NULL;
        long p = strtol(colon + 1, &end, 10);
        if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || p < 1 || p > 65535) { return 0; }
        *port = (int)p;
    }
    if (len == 0 || len >= cap) { return 0; }
    memcpy(host, server, len);
    host[len] = '\0';
    return 1;
}

// A flag the chosen method does not use fails too: a flag that is silently ignored hides typos.
static inline void rendezvous_check(const Rendezvous* rv) {
    const char* m = rv->method != NULL ? rv->method : "";
    int fs = strcmp(m, "fs") == 0, tcp = strcmp(m, "tcp") == 0;
    int has_dir = rv->fs_dir != NULL && rv->fs_dir[0] != '\0';
    int has_server = rv->server != NULL && rv->server[0] != '\0';
    char host[256];
    int port;
    if (m[0] == '\0') { fail("flags -pn/-pr need -pi fs (with -pf DIR) or -pi tcp (with -ps HOST[:PORT])"); }
    if (!fs && !tcp) { fail("flag -pi expects fs or tcp, got '%s'", m); }
    if (fs && !has_dir) { fail("flag -pi fs needs a shared directory -pf"); }
    if (fs && has_server) { fail("flag -ps applies only to -pi tcp (got -pi fs)"); }
    if (tcp && !has_server) { fail("flag -pi tcp needs rank 0's address -ps host[:port]"); }
    if (tcp && has_dir) { fail("flag -pf applies only to -pi fs (got -pi tcp)"); }
    if (tcp && !rendezvous_split_server(rv->server, host, sizeof(host), &port)) {
        fail("flag -ps expects host or host:port with a port in 1..65535, got '%s'", rv->server);
    }
    if (rv->world_size < 1) { fail("flag -pn expects a number of processes >= 1, got %d", rv->world_size); }
    if (rv->rank < 0) { fail("flag -pr expects a rank >= 0, got %d", rv->rank); }
    if (rv->rank >= rv->world_size) { fail("flag -pr %d must be below -pn %d", rv->rank, rv->world_size); }
    if (!(rv->timeout_s > 0)) { fail("the rendezvous timeout must be > 0 s, got %g", rv->timeout_s); }
}

// Milliseconds to the deadline, for poll(); rounded up so that a poll that times out has reached it.
static inline int rendezvous_ms_left(double deadline) {
    double ms = (deadline - now_seconds()) * 1000.0;
    return ms <= 0 ? 0 : ms > 1e9 ? 1000000000 : (int)ms + 1;
}

static inline void rendezvous_nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// ----------------------------------------------------------------------------
// fs: a file in a shared directory

static inline void rendezvous_fs_path(const Rendezvous* rv, char* path, size_t cap) {
    if ((size_t)snprintf(path, cap, "%s/%s", rv->fs_dir, RENDEZVOUS_FILE) >= cap) {
        rendezvous_fail(rv, "directory name too long: '%s'", rv->fs_dir);
    }
}

// mkdir -p: a job script may point -pf at a fresh per-job directory that nobody has created yet.
// 0, or the errno of the part that could not be created (dir then ends at that part).
static inline int rendezvous_try_mkdirs(char* dir) {
    for (char* p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0') { continue; }
        char c = *p;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) { return errno; }
        *p = c;
        if (c == '\0') { return 0; }
    }
}

static inline void rendezvous_mkdirs(const Rendezvous* rv, char* dir) {
    int e = rendezvous_try_mkdirs(dir);
    if (e != 0) { rendezvous_fail(rv, "cannot create the directory '%s': %s", dir, strerror(e)); }
}

// The magic of the file at path (0 if it cannot be read).
static inline int32_t rendezvous_fs_magic(const char* path) {
    int32_t magic = 0;
    FILE* fp = fopen(path, "rb");
    if (fp != NULL) {
        if (fread(&magic, sizeof(magic), 1, fp) != 1) { magic = 0; }
        fclose(fp);
    }
    return magic;
}

// Rank 0 writes under a temporary name and then publishes with link(). The file appears whole
// (readers never see half of it), and unlike rename(), link() will not replace an existing
// file, so a file left by a crashed run is reported here. Without that check, rank 0 would
// overwrite it after the other ranks had already read the stale id. (A reason left by a rank 0
// that stopped, rendezvous_abort, holds no id: it is replaced.)
static inline void rendezvous_fs_publish(const Rendezvous* rv, const char* path, const void* blob, size_t n) {
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof(dir), "%s", rv->fs_dir); // fits: rendezvous_fs_path checked the longer path
    rendezvous_mkdirs(rv, dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    FILE* fp = fopenCheck(tmp, "wb");
    RendezvousFileHeader h = {RENDEZVOUS_MAGIC, rv->world_size, (int64_t)n};
    fwriteCheck(&h, sizeof(h), 1, fp, tmp);
    fwriteCheck(blob, 1, n, fp, tmp);
    // fsync: on a shared filesystem, another node reads only what has reached the server
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) { rendezvous_fail(rv, "cannot write '%s': %s", tmp, strerror(errno)); }
    fcloseCheck(fp, tmp);
    int rc = link(tmp, path), e = errno;
    if (rc != 0 && e == EEXIST && rendezvous_fs_magic(path) == RENDEZVOUS_ABORT_MAGIC) {
        rc = rename(tmp, path); e = errno; // an earlier job's rank 0 stopped and left its reason: no id anyone reads
    }
    unlink(tmp);
    if (rc != 0 && e == EEXIST) {
        rendezvous_fail(rv, "'%s' exists, left by an earlier run: give each job its own -pf directory, "
                        "or remove the file", path);
    }
    if (rc != 0) { rendezvous_fail(rv, "cannot link '%s' to '%s': %s", tmp, path, strerror(e)); }
}

// A stale file is indistinguishable from a fresh one here: its id would send this rank into an
// NCCL setup that never completes. That is why rank 0 refuses to run next to one, and
// rendezvous_finish removes the file after every run.
static inline void rendezvous_fs_read(const Rendezvous* rv, const char* path, void* blob, size_t n, double deadline) {
    FILE* fp;
    while ((fp = fopen(path, "rb")) == NULL) {
        if (errno != ENOENT) { rendezvous_fail(rv, "cannot open '%s': %s", path, strerror(errno)); }
        if (now_seconds() > deadline) {
            rendezvous_fail(rv, "no rendezvous file '%s' from rank 0 after %g s (is rank 0 running, with the same -pf?)",
                            path, rv->timeout_s);
        }
        rendezvous_nap_ms(10);
    }
    RendezvousFileHeader h;
    size_t got = fread(&h, 1, sizeof(h), fp);
    if (got == sizeof(h) && h.magic == RENDEZVOUS_ABORT_MAGIC) {
        char why[RENDEZVOUS_REASON_MAX + 1];
        size_t k = fread(why, 1, h.n >= 0 && h.n < RENDEZVOUS_REASON_MAX ? (size_t)h.n : RENDEZVOUS_REASON_MAX, fp);
        why[k] = '\0';
        fclose(fp);
        char told[4200]; // tells rank 0 this rank has read it, so that it can remove the file
        snprintf(told, sizeof(told), "%s.told.%d", path, rv->rank);
        int fd = open(told, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) { close(fd); }
        rendezvous_fail(rv, "rank 0 stopped before the ranks met: %s", why);
    }
    if (got == sizeof(h) && h.magic == RENDEZVOUS_MAGIC && h.world_size == rv->world_size && h.n == (int64_t)n) {
        got += fread(blob, 1, n, fp);
    }
    fclose(fp);
    if (got < sizeof(h)) { rendezvous_fail(rv, "'%s' is truncated: %zu bytes, expected %zu + %zu", path, got, sizeof(h), n); }
    if (h.magic != RENDEZVOUS_MAGIC) { rendezvous_fail(rv, "'%s' has magic %d, expected %d", path, (int)h.magic, RENDEZVOUS_MAGIC); }
    if (h.world_size != rv->world_size) {
        rendezvous_fail(rv, "'%s': rank 0 started %d ranks, this rank was given -pn %d", path, (int)h.world_size, rv->world_size);
    }
    if (h.n != (int64_t)n) { rendezvous_fail(rv, "'%s' holds %lld bytes, expected %zu", path, (long long)h.n, n); }
    if (got < sizeof(h) + n) { rendezvous_fail(rv, "'%s' is truncated: %zu bytes, expected %zu + %zu", path, got, sizeof(h), n); }
}

// ----------------------------------------------------------------------------
// tcp: rank 0 listens, the others connect

static inline void rendezvous_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Sends or receives exactly n bytes: 0, or why not (ETIMEDOUT at the deadline, EPIPE when the
// other side closed, or the call's errno). poll() before each call bounds the wait by the
// deadline even when the other side stops halfway.
static inline int rendezvous_io(int fd, void* buf, size_t n, int sending, double deadline) {
    char* p = (char*)buf;
    while (n > 0) {
        struct pollfd pfd = {fd, (short)(sending ? POLLOUT : POLLIN), 0};
        int r = poll(&pfd, 1, rendezvous_ms_left(deadline));
        if (r == 0 && now_seconds() >= deadline) { return ETIMEDOUT; }
        if (r <= 0) { continue; } // EINTR, or a wait longer than poll() takes
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) { continue; }
        if (k == 0) { return EPIPE; }
        if (k < 0) { return errno; }
        p += k; n -= (size_t)k;
    }
    return 0;
}

// The same, failing with a message: `what` names the bytes and the other side.
static inline void rendezvous_transfer(const Rendezvous* rv, int fd, void* buf, size_t n, int sending,
                                       double deadline, const char* what) {
    int e = rendezvous_io(fd, buf, n, sending, deadline);
    const char* verb = sending ? "sending" : "receiving";
    if (e == ETIMEDOUT) { rendezvous_fail(rv, "timed out after %g s %s %s", rv->timeout_s, verb, what); }
    if (e == EPIPE) { rendezvous_fail(rv, "connection closed while %s %s (the other side's error says why)", verb, what); }
    if (e != 0) { rendezvous_fail(rv, "error %s %s: %s", verb, what, strerror(e)); }
}

// A nonblocking socket listening on port (every address), or -1 (errno says why).
static inline int rendezvous_tcp_listen(int port, int backlog) {
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (ls < 0) { return -1; }
    // SO_REUSEADDR: the port of a job that just ended stays in TIME_WAIT for a minute
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons((uint16_t)port);
    if (bind(ls, (struct sockaddr*)&addr, sizeof(addr)) != 0 || listen(ls, backlog) != 0) {
        int e = errno;
        close(ls);
        errno = e;
        return -1;
    }
    rendezvous_nonblocking(ls);
    return ls;
}

// Rank 0 replies only after every rank has joined and passed the checks. If one rank is wrong,
// rank 0 fails before anyone holds the id, and the waiting ranks fail on the closed connection.
// Replying early would let them enter an NCCL setup that can never complete.
static inline void rendezvous_tcp_serve(const Rendezvous* rv, int port, const void* blob, size_t n, double deadline) {
    int ls = rendezvous_tcp_listen(port, rv->world_size);
    if (ls < 0) {
        rendezvous_fail(rv, "cannot listen on port %d: %s (another job on it? choose one with -ps host:port)", port, strerror(errno));
    }
    int* fds = (int*)mallocCheck(rv->world_size * sizeof(int)); // fds[r]: rank r's connection, -1 until it joins
    for (int r = 0; r < rv->world_size; r++) { fds[r] = -1; }
    for (int joined = 0; joined < rv->world_size - 1;) {
        struct pollfd pfd = {ls, POLLIN, 0};
        if (poll(&pfd, 1, rendezvous_ms_left(deadline)) == 0 && now_seconds() >= deadline) {
            int missing = 1;
            while (fds[missing] >= 0) { missing++; }
            rendezvous_fail(rv, "only %d of the %d other ranks connected to port %d within %g s (rank %d did not)",
                            joined, rv->world_size - 1, port, rv->timeout_s, missing);
        }
        struct sockaddr_in from;
        socklen_t len = sizeof(from);
        int fd = accept(ls, (struct sockaddr*)&from, &len);
        if (fd < 0) { continue; } // nothing yet, EINTR, or a connection reset before we took it
        rendezvous_nonblocking(fd);
        char ip[INET_ADDRSTRLEN] = "?", what[128];
        inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
        snprintf(what, sizeof(what), "the hello of a rank connecting from %s", ip);
        uint32_t hello[3]; // magic, rank, world_size
        rendezvous_transfer(rv, fd, hello, sizeof(hello), 0, deadline, what);
        int magic = (int)ntohl(hello[0]), rank = (int)ntohl(hello[1]), world = (int)ntohl(hello[2]);
        if (magic != RENDEZVOUS_MAGIC) {
            rendezvous_fail(rv, "a connection from %s to port %d sent magic %d, expected %d: not one of our ranks",
                            ip, port, magic, RENDEZVOUS_MAGIC);
        }
        if (world != rv->world_size) {
            rendezvous_fail(rv, "rank %d (from %s) was given -pn %d, rank 0 has -pn %d", rank, ip, world, rv->world_size);
        }
        if (rank < 1 || rank >= rv->world_size) { rendezvous_fail(rv, "a peer from %s says it is rank %d, expected 1..%d", ip, rank, rv->world_size - 1); }
        if (fds[rank] >= 0) { rendezvous_fail(rv, "two processes say they are rank %d (the second from %s): check each one's -pr", rank, ip); }
        fds[rank] = fd;
        joined++;
    }
    close(ls);
    uint32_t size = htonl((uint32_t)n);
    for (int r = 1; r < rv->world_size; r++) {
        char what[64];
        snprintf(what, sizeof(what), "the blob to rank %d", r);
        rendezvous_transfer(rv, fds[r], &size, sizeof(size), 1, deadline, what);
        rendezvous_transfer(rv, fds[r], (void*)blob, n, 1, deadline, what);
        close(fds[r]);
    }
    free(fds);
}

// Retries because rank 0 may start later than this rank. Each connect() is nonblocking and
// polled, because a host that drops packets would otherwise hold a blocking connect for minutes.
static inline int rendezvous_tcp_connect(const Rendezvous* rv, const char* host, int port, double deadline) {
    char service[16], why[128] = "no attempt";
    snprintf(service, sizeof(service), "%d", port);
    for (;;) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int g = getaddrinfo(host, service, &hints, &res);
        if (g != 0 && g != EAI_AGAIN) { rendezvous_fail(rv, "cannot resolve the host '%s' of -ps: %s", host, gai_strerror(g)); }
        if (g == EAI_AGAIN) { snprintf(why, sizeof(why), "%s", gai_strerror(g)); }
        for (struct addrinfo* a = res; a != NULL; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (fd < 0) { continue; }
            rendezvous_nonblocking(fd);
            int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
            if (err == EINPROGRESS) {
                struct pollfd pfd = {fd, POLLOUT, 0};
                socklen_t len = sizeof(err);
                if (poll(&pfd, 1, rendezvous_ms_left(deadline)) != 1) { err = ETIMEDOUT; }
                else { getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len); }
            }
            if (err == 0) { freeaddrinfo(res); return fd; }
            snprintf(why, sizeof(why), "%s", strerror(err));
            close(fd);
        }
        if (res != NULL) { freeaddrinfo(res); }
        if (now_seconds() >= deadline) {
            rendezvous_fail(rv, "could not connect to rank 0 at %s:%d within %g s (last error: %s): is rank 0 running, with the same -ps?",
                            host, port, rv->timeout_s, why);
        }
        rendezvous_nap_ms(50);
    }
}

static inline void rendezvous_tcp_fetch(const Rendezvous* rv, const char* host, int port, void* blob, size_t n, double deadline) {
    int fd = rendezvous_tcp_connect(rv, host, port, deadline);
    char what[400];
    uint32_t hello[3] = {htonl(RENDEZVOUS_MAGIC), htonl((uint32_t)rv->rank), htonl((uint32_t)rv->world_size)};
    snprintf(what, sizeof(what), "this rank's hello to rank 0 at %s:%d", host, port);
    rendezvous_transfer(rv, fd, hello, sizeof(hello), 1, deadline, what);
    snprintf(what, sizeof(what), "the blob from rank 0 at %s:%d", host, port);
    uint32_t size = 0;
    rendezvous_transfer(rv, fd, &size, sizeof(size), 0, deadline, what);
    if (ntohl(size) == RENDEZVOUS_ABORT_SIZE) { // rank 0 stopped: its reason follows
        char why[RENDEZVOUS_REASON_MAX + 1];
        uint32_t len = 0;
        rendezvous_transfer(rv, fd, &len, sizeof(len), 0, deadline, what);
        len = ntohl(len) < RENDEZVOUS_REASON_MAX ? ntohl(len) : RENDEZVOUS_REASON_MAX;
        rendezvous_transfer(rv, fd, why, len, 0, deadline, what);
        why[len] = '\0';
        rendezvous_fail(rv, "rank 0 stopped before the ranks met: %s", why);
    }
    if (ntohl(size) != n) { rendezvous_fail(rv, "rank 0 at %s:%d sends %u bytes, this rank expected %zu", host, port, ntohl(size), n); }
    rendezvous_transfer(rv, fd, blob, n, 0, deadline, what);
    close(fd);
}

// ----------------------------------------------------------------------------
// the API

// Every rank gets rank 0's n bytes in blob (rank 0's blob is the source).
static inline void rendezvous_broadcast(const Rendezvous* rv, void* blob, size_t n) {
    rendezvous_check(rv);
    set_error_rank(rv->rank, rv->world_size); // from here on, every failure names this rank
    if (rv->world_size == 1) { return; }
    if (n > UINT32_MAX) { rendezvous_fail(rv, "a blob of %zu bytes is too large (at most 4 GiB)", n); }
    double deadline = now_seconds() + rv->timeout_s;
    if (strcmp(rv->method, "fs") == 0) {
        char path[4096];
        rendezvous_fs_path(rv, path, sizeof(path));
        if (rv->rank == 0) { rendezvous_fs_publish(rv, path, blob, n); }
        else { rendezvous_fs_read(rv, path, blob, n, deadline); }
    } else {
        char host[256];
        int port;
        rendezvous_split_server(rv->server, host, sizeof(host), &port);
        if (rv->rank == 0) { rendezvous_tcp_serve(rv, port, blob, n, deadline); }
        else { rendezvous_tcp_fetch(rv, host, port, blob, n, deadline); }
    }
}

// Rank 0, stopping before it has handed out the blob (a busy output dir, a file only it reads):
// hands out `why` in its place, so that the other ranks stop at once with rank 0's reason
// instead of waiting out the timeout. fs: the reason is published as the file, under its own
// magic, until every other rank has read it or RENDEZVOUS_ABORT_WAIT_S (or the timeout, if
// shorter) has passed; then rank 0 removes it (one left by a killed rank 0 is replaced by the
// next job's). tcp: rank 0 listens, and tells each rank that connects, for as long at most.
// A rank that comes later fails at its timeout as before. Silent and best effort: it runs
// inside fail(), after rank 0's own message; where it cannot (the port taken, an id already
// published) nothing changes.
static inline void rendezvous_abort(const Rendezvous* rv, const char* why) {
    if (rv->rank != 0 || rv->world_size <= 1 || rv->method == NULL) { return; }
    size_t n = strlen(why) < RENDEZVOUS_REASON_MAX ? strlen(why) : RENDEZVOUS_REASON_MAX;
    if (strcmp(rv->method, "fs") == 0) {
        char path[4096], tmp[4200], dir[4096];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", rv->fs_dir, RENDEZVOUS_FILE) >= sizeof(path)) { return; }
        snprintf(dir, sizeof(dir), "%s", rv->fs_dir);
        if (rendezvous_try_mkdirs(dir) != 0) { return; }
        snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
        FILE* fp = fopen(tmp, "wb");
        if (fp == NULL) { return; }
        RendezvousFileHeader h = {RENDEZVOUS_ABORT_MAGIC, rv->world_size, (int64_t)n};
        int written = fwrite(&h, sizeof(h), 1, fp) == 1 && fwrite(why, 1, n, fp) == n && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
        fclose(fp);
        // an id already published stays (a rank may be reading it); an earlier reason is replaced
        int published = written && link(tmp, path) == 0;
        if (written && !published && errno == EEXIST && rendezvous_fs_magic(path) == RENDEZVOUS_ABORT_MAGIC) {
            published = rename(tmp, path) == 0;
        }
        unlink(tmp);
        if (!published) { return; }
        // Each rank that read the reason leaves a file saying so (rendezvous_fs_read). Once all
        // have, or at the wait's end, the reason and those files go: a later job using this
        // directory must not find it (its other ranks could read it before its rank 0 replaces it).
        double deadline = now_seconds() + (rv->timeout_s < RENDEZVOUS_ABORT_WAIT_S ? rv->timeout_s : RENDEZVOUS_ABORT_WAIT_S);
        for (;;) {
            int told = 0;
            for (int r = 1; r < rv->world_size; r++) {
                snprintf(tmp, sizeof(tmp), "%s.told.%d", path, r);
                told += access(tmp, F_OK) == 0;
            }
            if (told == rv->world_size - 1 || now_seconds() >= deadline) { break; }
            rendezvous_nap_ms(20);
        }
        unlink(path);
        for (int r = 1; r < rv->world_size; r++) {
            snprintf(tmp, sizeof(tmp), "%s.told.%d", path, r);
            unlink(tmp);
        }
        return;
    }
    char host[256];
    int port;
    if (!rendezvous_split_server(rv->server, host, sizeof(host), &port)) { return; }
    int ls = rendezvous_tcp_listen(port, rv->world_size);
    if (ls < 0) { return; }
    double wait_s = rv->timeout_s < RENDEZVOUS_ABORT_WAIT_S ? rv->timeout_s : RENDEZVOUS_ABORT_WAIT_S;
    double deadline = now_seconds() + wait_s;
    uint32_t head[2] = {htonl(RENDEZVOUS_ABORT_SIZE), htonl((uint32_t)n)};
    for (int told = 0; told < rv->world_size - 1 && now_seconds() < deadline;) {
        struct pollfd pfd = {ls, POLLIN, 0};
        if (poll(&pfd, 1, rendezvous_ms_left(deadline)) <= 0) { continue; }
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) { continue; }
        rendezvous_nonblocking(fd);
        // its hello first (12 bytes): closing with unread bytes would reset the connection
        // and could drop the reason before the rank reads it
        uint32_t hello[3];
        double by = now_seconds() + 1.0 < deadline ? now_seconds() + 1.0 : deadline;
        if (rendezvous_io(fd, hello, sizeof(hello), 0, by) == 0 && rendezvous_io(fd, head, sizeof(head), 1, by) == 0 &&
            rendezvous_io(fd, (void*)why, n, 1, by) == 0) {
            told++;
        }
        close(fd);
    }
    close(ls);
}

// Called by every rank once all ranks are known to have read the blob (the trainer: after the
// NCCL communicator is up, which needs every rank's id). fs: rank 0 removes the file, so the next
// job that uses this directory does not find it. tcp: nothing is left over.
static inline void rendezvous_finish(const Rendezvous* rv) {
    if (strcmp(rv->method, "fs") != 0 || rv->rank != 0 || rv->world_size == 1) { return; }
    char path[4096];
    rendezvous_fs_path(rv, path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT) { rendezvous_fail(rv, "cannot remove '%s': %s", path, strerror(errno)); }
}

#endif // LLMC_RENDEZVOUS_H
