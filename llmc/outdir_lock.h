/*
One job at a time in an output directory (-o): plain C, shared by the CPU and CUDA trainers.

Why: when mpirun is killed, its ranks can live on for seconds and keep writing checkpoints into
-o. A job relaunched at once with -y 1 into the same directory would train beside them, and the
two would interleave their files. So a job holds a lock on `-o/.lock` for its whole life, and a
second job is refused with one line naming the holder.

Who holds it: every rank, not only rank 0. Every rank writes into -o (its state file), and any
of them may be the one that outlives the others; a lock held by rank 0 alone would let a new
job in while ranks 1..N-1 of the old one still write. Rank 0 takes the lock exclusively (no
process of any other job may hold it), writes its name into the file (pid, host, when, ranks)
and turns the lock into a shared one; after a barrier the other ranks take it shared too. A new
job's rank 0 thus gets its exclusive lock only once every rank of the old job is gone.

The locks are POSIX record locks (fcntl) on the whole file: the kernel releases them when the
process ends, however it ends (SIGKILL included); turning rank 0's exclusive lock into a shared
one is atomic, so no other job can slip in between (flock(2) does not promise that); and NFS
v3/v4 implements them across machines, so ranks on several nodes sharing -o all count. A
process must not open the lock file a second time: closing any descriptor of it would drop the
lock. On a filesystem without locks the job runs with a warning. Where -o is node-local on
several machines, each machine's ranks lock their own copy.

The file is hidden (.lock) and stays after the job: it is the lock's place, not a sign of a
running job. A held lock is the sign.
*/
#ifndef LLMC_OUTDIR_LOCK_H
#define LLMC_OUTDIR_LOCK_H

#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include "utils.h"

#define OUTDIR_LOCK_NAME ".lock"

// Sets a lock of `type` (F_RDLCK shared, F_WRLCK exclusive) on the whole file, without waiting.
static inline int outdir_lock_set(int fd, short type) {
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = type;
    fl.l_whence = SEEK_SET; // l_start 0, l_len 0: the whole file, however long
    return fcntl(fd, F_SETLK, &fl);
}

// Opens dir's lock file, creating it; -1 when dir is not a directory (the caller's next file in
// dir, the log, names that problem in its own words).
static inline int outdir_lock_open(const char* dir, char* path, size_t n) {
    snprintf(path, n, "%s/%s", dir, OUTDIR_LOCK_NAME);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno != ENOTDIR && errno != ENOENT) {
        fail("cannot open the output dir's lock file '%s': %s (flag -o)", path, strerror(errno));
    }
    return fd;
}

// Refuses the job: one line naming the job that holds dir (as its rank 0 wrote it into the file)
// and the process holding the lock now (that rank 0, or a rank of its job that outlived it).
static inline void __attribute__((noreturn)) outdir_lock_refuse(int fd, const char* dir, const char* path) {
    char holder[256] = "";
    ssize_t got = pread(fd, holder, sizeof(holder) - 1, 0);
    holder[got > 0 ? got : 0] = '\0';
    holder[strcspn(holder, "\n")] = '\0';
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    char now[64] = "";
    if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid > 0) { snprintf(now, sizeof(now), " by pid %d", (int)fl.l_pid); }
    fail("output dir '%s' is in use by another job (%s): '%s' is held%s; wait for it to end, or use another -o",
         dir, holder[0] ? holder : "it has not written its name yet", path, now);
}

// A filesystem without locks (or another failure to lock that is not a holder): the job runs.
static inline void outdir_lock_unsupported(int fd, const char* path) {
    fprintf(stderr, "%swarning: cannot lock '%s' (%s): a second job in this output dir would not be refused\n",
            g_rank_prefix, path, strerror(errno));
    close(fd);
}

// Rank 0, before anything in dir is read or written: takes the lock, or refuses the job with one
// line naming the holder. The descriptor stays open for the life of the process.
static inline void outdir_lock_take(const char* dir, int world_size) {
    char path[1100];
    int fd = outdir_lock_open(dir, path, sizeof(path));
    if (fd < 0) { return; }
    if (outdir_lock_set(fd, F_WRLCK) != 0) {
        if (errno == EACCES || errno == EAGAIN) { outdir_lock_refuse(fd, dir, path); }
        outdir_lock_unsupported(fd, path);
        return;
    }
    char host[128] = "?", when[64] = "?", line[512];
    gethostname(host, sizeof(host) - 1);
    time_t t = time(NULL);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %z", localtime(&t));
    int n = snprintf(line, sizeof(line), "pid %d on host %s since %s, %d rank%s\n", (int)getpid(), host, when, world_size,
                     world_size == 1 ? "" : "s");
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) {
        fail("cannot write the output dir's lock file '%s': %s", path, strerror(errno));
    }
    // shared from now on, so that the other ranks can join; atomic, so no other job gets in between
    if (outdir_lock_set(fd, F_RDLCK) != 0) { fail("cannot turn the lock on '%s' into a shared one: %s", path, strerror(errno)); }
}

// Every other rank, after a barrier behind rank 0's outdir_lock_take: holds the lock (shared)
// too, so the job keeps dir for as long as any of its ranks lives.
static inline void outdir_lock_join(const char* dir) {
    char path[1100];
    int fd = outdir_lock_open(dir, path, sizeof(path));
    if (fd < 0) { return; }
    if (outdir_lock_set(fd, F_RDLCK) != 0) {
        // held exclusively: another job's rank 0 (dir is node-local here, and it is another's)
        if (errno == EACCES || errno == EAGAIN) { outdir_lock_refuse(fd, dir, path); }
        close(fd); // no locks on this filesystem: rank 0 has said so
    }
}

#endif // LLMC_OUTDIR_LOCK_H
