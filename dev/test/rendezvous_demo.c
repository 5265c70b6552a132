/*
One rank of a rendezvous (llmc/rendezvous.h) without NCCL, for dev/test/test_rendezvous.sh:
rank 0 makes a 128-byte blob (the size of an ncclUniqueId) from its pid, so that every run
differs, and every rank prints what it received.
    rendezvous_demo METHOD RANK WORLD DIR_OR_SERVER TIMEOUT_S [REASON]
prints one line "rank R blob <256 hex digits>". With REASON, rank 0 stops before the rendezvous
with fail(REASON), its fail() hook handing REASON to the other ranks (rendezvous_abort), as the
CUDA trainer's rank 0 does when it refuses a busy output dir.
*/
#include <stdio.h>
#include <unistd.h>
#include "../../llmc/rendezvous.h"

static Rendezvous g_rv;
static void abort_hook(void) { rendezvous_abort(&g_rv, g_fail_text); }

int main(int argc, char** argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s fs|tcp RANK WORLD DIR_OR_SERVER TIMEOUT_S [REASON]\n", argv[0]);
        return 1;
    }
    Rendezvous rv;
    memset(&rv, 0, sizeof(rv));
    rv.method = argv[1];
    rv.rank = (int)parse_long("-pr", argv[2]);
    rv.world_size = (int)parse_long("-pn", argv[3]);
    if (strcmp(rv.method, "tcp") == 0) { rv.server = argv[4]; } else { rv.fs_dir = argv[4]; }
    rv.timeout_s = parse_float("timeout", argv[5]);
    if (argc == 7 && rv.rank == 0) {
        rendezvous_check(&rv);
        set_error_rank(rv.rank, rv.world_size);
        g_rv = rv;
        g_fail_hook = abort_hook;
        fail("%s", argv[6]);
    }

    unsigned char blob[128];
    uint32_t x = (uint32_t)getpid() * 2654435761u; // a different blob every run
    for (int i = 0; i < 128; i++) {
        x = x * 1664525u + 1013904223u;
        blob[i] = rv.rank == 0 ? (unsigned char)(x >> 24) : 0xEE; // 0xEE: a rank that received nothing shows it
    }
    rendezvous_broadcast(&rv, blob, sizeof(blob));
    printf("rank %d blob ", rv.rank);
    for (int i = 0; i < 128; i++) { printf("%02x", blob[i]); }
    printf("\n");
    fflush(stdout);
    // The trainer calls rendezvous_finish once the NCCL communicator is up, which proves that every
    // rank has read the id. The demo has no such second channel, so rank 0 waits long enough for
    // ranks that are already polling (every 10 ms) before it removes the file.
    if (rv.rank == 0) { rendezvous_nap_ms(500); }
    rendezvous_finish(&rv);
    return 0;
}
