/*
 * The scale benchmark's MPI job (contrib/bench_scale): the time of the
 * window MPI_Init plus one 8-byte exchange. Each rank takes a clock that does
 * not depend on MPI (CLOCK_MONOTONIC, which all processes of a node share)
 * before MPI_Init, then exchanges 8 bytes with rank i^1 (a rank without a
 * partner, the last of an odd count or a single rank, sends to and receives
 * from itself), takes the clock again, and rank 0 prints the maximum over
 * the ranks of the elapsed time and the pids of every rank, then the host
 * name of every rank (in the same order):
 *
 *   mpi_scale: ranks 4 window_s 15.123456 pids 101 102 103 104
 *   mpi_scale: hosts node0 node0 node1 node1
 *
 * With IBSHARE_COUNT_PER_NODE=1, each rank first appends its host name to
 * IBSHARE_COUNT_DIR (test/guest/count_reg.c, preloaded, writes its counts
 * at exit to $IBSHARE_COUNT_DIR/count.<pid>, reading the variable then):
 * the ranks of several nodes that share the directory, whose pids may be
 * the same, write to DIR/<host>/ (contrib/bench_scale --nodes 2 makes those
 * directories).
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOST_LEN 64

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The host name, at most HOST_LEN - 1 characters, no spaces */
static void host_name(char *host)
{
    size_t i;

    if (gethostname(host, HOST_LEN) != 0) {
        strcpy(host, "?");
    }
    host[HOST_LEN - 1] = '\0';
    for (i = 0; host[i] != '\0'; ++i) {
        if (host[i] == ' ') {
            host[i] = '_';
        }
    }
}

/* IBSHARE_COUNT_DIR=DIR/<host> when IBSHARE_COUNT_PER_NODE=1; before MPI_Init
 * starts any thread */
static void count_dir_per_node(const char *host)
{
    const char *per_node = getenv("IBSHARE_COUNT_PER_NODE");
    const char *dir      = getenv("IBSHARE_COUNT_DIR");
    char path[4096];

    if ((per_node == NULL) || (strcmp(per_node, "1") != 0) ||
        (dir == NULL)) {
        return;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, host);
    if (setenv("IBSHARE_COUNT_DIR", path, 1) != 0) {
        perror("mpi_scale: setenv IBSHARE_COUNT_DIR");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    uint64_t out, in = 0;
    double t0, t1, elapsed, max_elapsed;
    int rank, nranks, peer, pid, i;
    int *pids = NULL;
    char host[HOST_LEN];
    char *hosts = NULL;

    host_name(host);
    count_dir_per_node(host);

    t0 = now();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    peer = rank ^ 1;
    if (peer >= nranks) {
        peer = rank;
    }
    out = 0x5ca1e000u + (uint64_t)rank;
    MPI_Sendrecv(&out, 1, MPI_UINT64_T, peer, 0, &in, 1, MPI_UINT64_T, peer,
                 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    t1 = now();

    if (in != 0x5ca1e000u + (uint64_t)peer) {
        fprintf(stderr, "mpi_scale: rank %d: got 0x%llx from rank %d\n", rank,
                (unsigned long long)in, peer);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    elapsed = t1 - t0;
    MPI_Reduce(&elapsed, &max_elapsed, 1, MPI_DOUBLE, MPI_MAX, 0,
               MPI_COMM_WORLD);
    pid = (int)getpid();
    if (rank == 0) {
        pids  = malloc(sizeof(*pids) * (size_t)nranks);
        hosts = malloc(HOST_LEN * (size_t)nranks);
        if ((pids == NULL) || (hosts == NULL)) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, 0,
               MPI_COMM_WORLD);

    if (rank == 0) {
        printf("mpi_scale: ranks %d window_s %.6f pids", nranks, max_elapsed);
        for (i = 0; i < nranks; ++i) {
            printf(" %d", pids[i]);
        }
        printf("\nmpi_scale: hosts");
        for (i = 0; i < nranks; ++i) {
            printf(" %s", hosts + (size_t)i * HOST_LEN);
        }
        printf("\n");
        fflush(stdout);
        free(hosts);
        free(pids);
    }

    MPI_Finalize();
    return 0;
}
