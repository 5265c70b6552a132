/*
Small checked wrappers around the C library, shared by every program in the project.

Each check prints one line naming the source location, the file or call, and what was
expected, then exits non-zero. Bad input must never become a segfault or a hang.
The rank prefix is set by the trainers once MPI (or NCCL) is up, so a failure on
rank 3 of 4 says so.
*/
#ifndef LLMC_UTILS_H
#define LLMC_UTILS_H

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

// "[rank r] " once a multi-process run is up; empty for a single process
static char g_rank_prefix[32] = "";

static inline void set_error_rank(int rank, int world_size) {
    if (world_size > 1) { snprintf(g_rank_prefix, sizeof(g_rank_prefix), "[rank %d] ", rank); }
}

// Called by fail() before it exits; a multi-process run sets it to take all ranks down.
static void (*g_fail_hook)(void) = NULL;
// The message of the failure under way (no prefix, no newline), for the hook to pass on.
static char g_fail_text[1024] = "";

// Print one line to stderr and exit(1). Used for every user-facing error. The line goes out in
// one write(2): stderr is unbuffered, so printing the prefix, the text and the newline with three
// calls would be three writes, and under mpirun, where every rank often fails at the same moment
// (a bad flag), another rank's line could land between them.
static inline void __attribute__((noreturn, format(printf, 1, 2))) fail(const char* fmt, ...) {
    char small[4096];
    char* line = small;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int prefix = snprintf(small, sizeof(small), "%serror: ", g_rank_prefix);
    int text = vsnprintf(small + prefix, sizeof(small) - prefix, fmt, ap);
    size_t len = (size_t)prefix + (text > 0 ? (size_t)text : 0);
    if (len + 1 >= sizeof(small)) { // a long message (a whole command line): the exact size
        line = (char*)malloc(len + 2);
        if (line == NULL) { line = small; len = sizeof(small) - 2; }
        else { memcpy(line, small, (size_t)prefix); vsnprintf(line + prefix, len - prefix + 1, fmt, again); }
    }
    va_end(again);
    va_end(ap);
    snprintf(g_fail_text, sizeof(g_fail_text), "%.*s", (int)(len - (size_t)prefix), line + prefix);
    line[len++] = '\n';
    fflush(stdout); // what the run printed before the error comes first
    for (size_t done = 0; done < len;) {
        ssize_t n = write(STDERR_FILENO, line + done, len - done);
        if (n < 0 && errno == EINTR) { continue; }
        if (n <= 0) { break; }
        done += (size_t)n;
    }
    if (g_fail_hook != NULL) { g_fail_hook(); }
    exit(EXIT_FAILURE);
}

// ----------------------------------------------------------------------------
// files

static inline FILE* fopen_check(const char* path, const char* mode, const char* file, int line) {
    FILE* fp = fopen(path, mode);
    if (fp == NULL) {
        fail("cannot open '%s' (mode %s): %s [%s:%d]", path, mode, strerror(errno), file, line);
    }
    return fp;
}
#define fopenCheck(path, mode) fopen_check(path, mode, __FILE__, __LINE__)

// fread that names the file being read (the caller passes its path) when it comes up short
static inline void fread_check(void* ptr, size_t size, size_t nmemb, FILE* stream, const char* what,
                               const char* file, int line) {
    size_t got = fread(ptr, size, nmemb, stream);
    if (got != nmemb) {
        fail("'%s' is truncated: wanted %zu items of %zu bytes, got %zu [%s:%d]",
             what, nmemb, size, got, file, line);
    }
}
#define freadCheck(ptr, size, nmemb, stream, what) fread_check(ptr, size, nmemb, stream, what, __FILE__, __LINE__)

static inline void fwrite_check(const void* ptr, size_t size, size_t nmemb, FILE* stream, const char* what,
                                const char* file, int line) {
    if (fwrite(ptr, size, nmemb, stream) != nmemb) {
        fail("cannot write '%s': %s [%s:%d]", what, strerror(errno), file, line);
    }
}
#define fwriteCheck(ptr, size, nmemb, stream, what) fwrite_check(ptr, size, nmemb, stream, what, __FILE__, __LINE__)

static inline void fclose_check(FILE* fp, const char* what, const char* file, int line) {
    if (fclose(fp) != 0) { fail("cannot close '%s': %s [%s:%d]", what, strerror(errno), file, line); }
}
#define fcloseCheck(fp, what) fclose_check(fp, what, __FILE__, __LINE__)

static inline void fseek_check(FILE* fp, long off, int whence, const char* what, const char* file, int line) {
    if (fseek(fp, off, whence) != 0) {
        fail("cannot seek in '%s' to %ld: %s [%s:%d]", what, off, strerror(errno), file, line);
    }
}
#define fseekCheck(fp, off, whence, what) fseek_check(fp, off, whence, what, __FILE__, __LINE__)

// size of an open file in bytes (leaves the position at the start)
static inline long file_size(FILE* fp, const char* what) {
    fseekCheck(fp, 0, SEEK_END, what);
    long size = ftell(fp);
    fseekCheck(fp, 0, SEEK_SET, what);
    return size;
}

// Every binary file of the project starts with 256 little-endian int32s. Reads them and
// checks the magic number and the version against the allowed ones; names the file if not.
#define HEADER_INTS 256
static inline void read_header(FILE* fp, int header[HEADER_INTS], const char* path, int magic,
                               const char* kind) {
    long size = file_size(fp, path);
    if (size < (long)(HEADER_INTS * sizeof(int))) {
        fail("'%s' is %ld bytes, too short for the %zu-byte header of a %s file",
             path, size, HEADER_INTS * sizeof(int), kind);
    }
    freadCheck(header, sizeof(int), HEADER_INTS, fp, path);
    if (header[0] != magic) {
        fail("'%s' has magic %d, expected %d (a %s file)", path, header[0], magic, kind);
    }
}

// ----------------------------------------------------------------------------
// memory

static inline void* malloc_check(size_t size, const char* file, int line) {
    void* ptr = malloc(size);
    if (ptr == NULL && size > 0) { fail("out of memory allocating %zu bytes [%s:%d]", size, file, line); }
    return ptr;
}
#define mallocCheck(size) malloc_check(size, __FILE__, __LINE__)

static inline void* calloc_check(size_t n, size_t size, const char* file, int line) {
    void* ptr = calloc(n, size);
    if (ptr == NULL && n > 0 && size > 0) {
        fail("out of memory allocating %zu x %zu bytes [%s:%d]", n, size, file, line);
    }
    return ptr;
}
#define callocCheck(n, size) calloc_check(n, size, __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// parsing numbers from flags: the whole string must be a number, else name the flag

static inline long parse_long(const char* flag, const char* s) {
    char* end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') { fail("flag %s expects an integer, got '%s'", flag, s); }
    return v;
}

static inline float parse_float(const char* flag, const char* s) {
    char* end = NULL;
    errno = 0;
    float v = strtof(s, &end);
    if (errno != 0 || end == s || *end != '\0') { fail("flag %s expects a number, got '%s'", flag, s); }
    return v;
}

// Peak resident memory of this process in bytes (Linux VmHWM), 0 if unknown.
static inline size_t peak_rss_bytes(void) {
    FILE* fp = fopen("/proc/self/status", "r");
    if (fp == NULL) { return 0; }
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof(line), fp)) {
        if (strncmp(line, "VmHWM:", 6) == 0) { kb = strtoull(line + 6, NULL, 10); break; }
    }
    fclose(fp);
    return kb * 1024;
}

// Seconds on a monotonic clock, for timing steps.
static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ----------------------------------------------------------------------------
// command line

// The command line as one string, for comparing the ranks' flags: every flag but -pr (with
// its value), the one flag that differs from rank to rank.
static inline void flags_line(char* out, size_t n, int argc, char** argv) {
    out[0] = '\0';
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-pr") == 0) { i++; continue; }
        strncat(out, argv[i], n - strlen(out) - 2);
        strncat(out, " ", n - strlen(out) - 1);
    }
}

#endif // LLMC_UTILS_H
