/*
 * The scale benchmark's MPI job (contrib/bench_scale): the time of the
 * window MPI_Init plus one 8-byte exchange. Each rank takes a clock that does
 * not depend on MPI (CLOCK_MONOTONIC, which all processes of a node share)
 * before MPI_Init, then exchanges 8 bytes with rank i^1 (a rank without a
 * partner, the last of an odd count or a single rank, sends to and receives
 * from itself), takes the clock again, and rank 0 prints the maximum over
 * the ranks of the elapsed time and the pids of every rank:
 *
 *   mpi_scale: ranks 4 window_s 15.123456 pids 101 102 103 104
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    uint64_t out, in = 0;
    double t0, t1, elapsed, max_elapsed;
    int rank, nranks, peer, pid, i;
    int *pids = NULL;

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
        pids = malloc(sizeof(*pids) * (size_t)nranks);
        if (pids == NULL) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        printf("mpi_scale: ranks %d window_s %.6f pids", nranks, max_elapsed);
        for (i = 0; i < nranks; ++i) {
            printf(" %d", pids[i]);
        }
        printf("\n");
        fflush(stdout);
        free(pids);
    }

    MPI_Finalize();
    return 0;
}
