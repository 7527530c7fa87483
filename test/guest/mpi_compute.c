/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * A rank that computes without calling MPI while another's first messages
 * to it are in flight: rank 1 spins for COMPUTE_S seconds, making no MPI
 * call, while rank 0 sends it an 8-byte (eager) and a 1 MiB (rendezvous)
 * message, the first traffic between them (rank 0 first waits 5 s, so that
 * rank 1 has left MPI_Init and its progress), and waits for its answer. Then
 * rank 1 receives both, checks every byte and answers. Over a transport
 * whose target answers connection requests only from progress, rank 0's
 * endpoint would give up after its connection timeout.
 *
 *   mpirun -np 2 mpi_compute COMPUTE_S
 *
 * Rank 0 prints "mpi_compute: PASS ..." or "mpi_compute: FAIL ..."; the
 * exit status is 0 only on PASS.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>


#define BIG_LENGTH (1 << 20)


static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 131 + 7);
}

int main(int argc, char **argv)
{
    static unsigned char big[BIG_LENGTH];
    volatile uint64_t work = 0;
    double compute_s, start;
    MPI_Request reqs[2];
    int rank, size, ok = 1, answer = 0;
    uint64_t small = 0x1122334455667788ull;
    size_t i;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    compute_s = (argc > 1) ? atof(argv[1]) : 60.0;
    if (size != 2) {
        if (rank == 0) {
            printf("mpi_compute: FAIL: needs 2 ranks, has %d\n", size);
        }
        MPI_Finalize();
        return 1;
    }

    start = now();
    if (rank == 0) {
        for (i = 0; i < BIG_LENGTH; ++i) {
            big[i] = pattern(i);
        }
        while (now() - start < 5.0) {
            usleep(10000);
        }
        MPI_Isend(&small, 1, MPI_UINT64_T, 1, 1, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(big, BIG_LENGTH, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[1]);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(&answer, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("mpi_compute: %s: rank 1 computed %.0f s without MPI; rank 0's "
               "messages reached it, its answer (%s) came after %.1f s\n",
               answer ? "PASS" : "FAIL", compute_s,
               answer ? "every byte right" : "wrong bytes", now() - start);
        ok = answer;
    } else {
        /* No MPI call in here */
        while (now() - start < compute_s) {
            for (i = 0; i < 100000; ++i) {
                work += i ^ work;
            }
        }
        MPI_Recv(&small, 1, MPI_UINT64_T, 0, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Recv(big, BIG_LENGTH, MPI_BYTE, 0, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        answer = (small == 0x1122334455667788ull);
        for (i = 0; i < BIG_LENGTH; ++i) {
            answer &= big[i] == pattern(i);
        }
        MPI_Send(&answer, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
    }

    MPI_Finalize();
    return ok ? 0 : 1;
}
