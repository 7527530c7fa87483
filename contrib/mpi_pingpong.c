/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/*
 * The demo's MPI job: ping-pong latency and bandwidth between ranks 0 and 1
 * at a few sizes, and an allreduce over all ranks; every message is checked.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(unsigned char *buf, size_t len, int seed)
{
    for (size_t i = 0; i < len; ++i) {
        buf[i] = (unsigned char)(i * 31 + seed);
    }
}

static int check(const unsigned char *buf, size_t len, int seed)
{
    for (size_t i = 0; i < len; ++i) {
        if (buf[i] != (unsigned char)(i * 31 + seed)) {
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {8, 1024, 65536, 1 << 20, 4 << 20};
    int rank, nranks, errors = 0, iters, i;
    unsigned char *buf;
    double start, usec;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    buf = malloc(4 << 20);

    if (rank == 0) {
        printf("%-10s %12s %14s\n", "size", "latency(us)", "bandwidth(MB/s)");
    }

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        size_t len = sizes[s];

        iters = (len <= 65536) ? 200 : 20;
        MPI_Barrier(MPI_COMM_WORLD);
        start = MPI_Wtime();
        for (i = 0; (rank < 2) && (i < iters); ++i) {
            if (rank == 0) {
                fill(buf, len, i);
                MPI_Send(buf, (int)len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)len, MPI_BYTE, 1, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                errors += !check(buf, len, i + 1);
            } else {
                MPI_Recv(buf, (int)len, MPI_BYTE, 0, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                errors += !check(buf, len, i);
                fill(buf, len, i + 1);
                MPI_Send(buf, (int)len, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
        usec = (MPI_Wtime() - start) * 1e6 / iters / 2;
        if (rank == 0) {
            printf("%-10zu %12.1f %14.1f\n", len, usec, len / usec);
        }
    }

    {
        long value = rank + 1, sum = 0;

        start = MPI_Wtime();
        MPI_Allreduce(&value, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        usec = (MPI_Wtime() - start) * 1e6;
        errors += sum != (long)nranks * (nranks + 1) / 2;
        if (rank == 0) {
            printf("allreduce over %d ranks: sum %ld (expected %ld), %.1f us\n",
                   nranks, sum, (long)nranks * (nranks + 1) / 2, usec);
        }
    }

    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s: %d data errors\n", errors ? "FAILED" : "verified", errors);
    }
    free(buf);
    MPI_Finalize();
    return errors != 0;
}
