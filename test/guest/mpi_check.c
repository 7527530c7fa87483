/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * MPI conformance over UCX: point-to-point (eager and rendezvous sizes,
 * blocking and non-blocking, MPI_ANY_SOURCE), collectives and one-sided
 * communication, every byte checked against a pattern that depends on the
 * sender, the receiver, the size and the iteration.
 *
 * Prints one line per check (`ok: mpi_check: ...` / `FAIL: mpi_check: ...`),
 * an informative ping-pong latency and bandwidth, and the summary
 * `mpi_check: N passed, M failed`; exits 1 when a check failed.
 * Run with 2 or more ranks (test/guest/mpi.sh runs it with the module
 * preloaded and pml ucx, osc ucx).
 *
 *   mpi_check [LARGE_DEPTH [MAX_SIZE]]
 *
 * LARGE_DEPTH (default 4, 1 to 32): the non-blocking checks' messages
 * outstanding per peer at 1 MiB and above. MAX_SIZE (default 4194304, at
 * least 65536): the point-to-point and one-sided checks stop at this
 * message size. Across the test bed's two nodes
 * (test/guest/multinode_mpi.sh) the default's 128 MiB each way at 4 MiB
 * takes minutes over a link that carries about 2 MB/s each way.
 */
#include <mpi.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int rank, nranks;
static int passed, failed;
static double record_since;   /* when the last check ended */

static const size_t p2p_sizes[] = {
    0, 1, 8, 1024, 8192, 65536, 1 << 20, 4 << 20
};
#define NUM_P2P_SIZES (sizeof(p2p_sizes) / sizeof(p2p_sizes[0]))

static const size_t rma_sizes[] = {8, 4096, 65536, 1 << 20};
#define NUM_RMA_SIZES (sizeof(rma_sizes) / sizeof(rma_sizes[0]))
#define RMA_SLOT      ((size_t)1 << 20)   /* largest of rma_sizes */


static void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);

    if (p == NULL) {
        fprintf(stderr, "mpi_check: rank %d: out of memory (%zu bytes)\n",
                rank, size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* The byte at index idx of the message from src to dst, len bytes long, in
 * iteration iter of test number test. */
static uint8_t pattern_byte(int test, int src, int dst, size_t len, int iter,
                            size_t idx)
{
    uint32_t seed = (uint32_t)test * 2246822519u + (uint32_t)src * 1000003u +
                    (uint32_t)dst * 10007u + (uint32_t)len * 31u +
                    (uint32_t)iter * 7919u;
    uint32_t h    = ((uint32_t)idx + seed) * 2654435761u;

    return (uint8_t)((h >> 24) ^ (h >> 11));
}

static void fill(void *buf, int test, int src, int dst, size_t len, int iter)
{
    uint8_t *p = buf;
    size_t i;

    for (i = 0; i < len; ++i) {
        p[i] = pattern_byte(test, src, dst, len, iter, i);
    }
}

/* Compares all of buf with the pattern; reports the first mismatch. */
static int verify(const void *buf, int test, int src, int dst, size_t len,
                  int iter, const char *what)
{
    const uint8_t *p = buf;
    size_t i, bad = 0, first = 0;
    uint8_t expected;

    for (i = 0; i < len; ++i) {
        expected = pattern_byte(test, src, dst, len, iter, i);
        if (p[i] != expected) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    if (bad != 0) {
        fprintf(stderr, "mpi_check: rank %d: %s: %zu of %zu bytes from rank "
                "%d (iteration %d) differ, first at offset %zu: 0x%02x, "
                "expected 0x%02x\n", rank, what, bad, len, src, iter, first,
                p[first], pattern_byte(test, src, dst, len, iter, first));
        return 0;
    }
    return 1;
}

static int check_count(const MPI_Status *status, size_t len, const char *what)
{
    int count;

    MPI_Get_count(status, MPI_BYTE, &count);
    if ((size_t)count != len) {
        fprintf(stderr, "mpi_check: rank %d: %s: received %d bytes from rank "
                "%d, expected %zu\n", rank, what, count, status->MPI_SOURCE,
                len);
        return 0;
    }
    return 1;
}

/* Every rank passes its own verdict; the check passes when all ranks agree */
static void record(int local_ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void record(int local_ok, const char *fmt, ...)
{
    double now;
    int all_ok;
    va_list ap;

    MPI_Allreduce(&local_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    now = MPI_Wtime();
    if (all_ok) {
        ++passed;
    } else {
        ++failed;
    }
    if (rank == 0) {
        printf("%s: mpi_check: ", all_ok ? "ok" : "FAIL");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        /* (where a slow test bed spends a job's time) */
        printf(" (%.1f s)\n", now - record_since);
        fflush(stdout);
    }
    record_since = now;
}

/* ------------------------------------------------------------ p2p */

enum {
    T_RING = 1, T_SENDRECV, T_NB_PRE, T_NB_UNEXP, T_ANY, T_BCAST, T_ALLTOALL,
    T_PUT, T_GET, T_LOCK_PUT, T_LOCK_GET
};

#define ITERS 2

/* Blocking MPI_Send/MPI_Recv around a ring; odd ranks receive first */
static int p2p_ring(size_t len)
{
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    char *sbuf = xmalloc(len), *rbuf = xmalloc(len);
    MPI_Status status;
    int ok = 1, iter;

    for (iter = 0; iter < ITERS; ++iter) {
        fill(sbuf, T_RING, rank, next, len, iter);
        memset(rbuf, 0, len);
        if (rank % 2 == 0) {
            MPI_Send(sbuf, (int)len, MPI_BYTE, next, iter, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)len, MPI_BYTE, prev, iter, MPI_COMM_WORLD,
                     &status);
        } else {
            MPI_Recv(rbuf, (int)len, MPI_BYTE, prev, iter, MPI_COMM_WORLD,
                     &status);
            MPI_Send(sbuf, (int)len, MPI_BYTE, next, iter, MPI_COMM_WORLD);
        }
        ok &= check_count(&status, len, "ring");
        ok &= verify(rbuf, T_RING, prev, rank, len, iter, "ring");
    }
    free(sbuf);
    free(rbuf);
    return ok;
}

/* MPI_Sendrecv with every other rank (shift by 1 .. nranks-1) */
static int p2p_sendrecv(size_t len)
{
    char *sbuf = xmalloc(len), *rbuf = xmalloc(len);
    MPI_Status status;
    int ok = 1, shift, to, from;

    for (shift = 1; shift < nranks; ++shift) {
        to   = (rank + shift) % nranks;
        from = (rank + nranks - shift) % nranks;
        fill(sbuf, T_SENDRECV, rank, to, len, shift);
        memset(rbuf, 0, len);
        MPI_Sendrecv(sbuf, (int)len, MPI_BYTE, to, shift, rbuf, (int)len,
                     MPI_BYTE, from, shift, MPI_COMM_WORLD, &status);
        ok &= check_count(&status, len, "sendrecv");
        ok &= verify(rbuf, T_SENDRECV, from, rank, len, shift, "sendrecv");
    }
    free(sbuf);
    free(rbuf);
    return ok;
}

static int large_depth = 4;
static size_t max_size  = 4 << 20;

static size_t min_size(size_t a, size_t b)
{
    return (a < b) ? a : b;
}

static int nb_depth(size_t len)
{
    return (len >= (1 << 20)) ? large_depth : 32;
}

/*
 * Non-blocking: `depth` messages to and from every other rank outstanding at
 * once, then one MPI_Waitall. With prepost, the receives are posted (and a
 * barrier passed) before any send; otherwise the sends go first and the
 * receives are posted after a barrier (unexpected messages).
 */
static int p2p_nonblocking(size_t len, int prepost)
{
    int test = prepost ? T_NB_PRE : T_NB_UNEXP;
    int depth = nb_depth(len), npeers = nranks - 1;
    int nmsg = depth * npeers, ok = 1, i, k, p, peer, idx;
    char **sbufs = xmalloc(sizeof(char *) * (size_t)nmsg);
    char **rbufs = xmalloc(sizeof(char *) * (size_t)nmsg);
    MPI_Request *reqs = xmalloc(sizeof(MPI_Request) * 2 * (size_t)nmsg);
    MPI_Status *stats = xmalloc(sizeof(MPI_Status) * 2 * (size_t)nmsg);

    for (p = 0; p < npeers; ++p) {
        peer = (rank + 1 + p) % nranks;
        for (k = 0; k < depth; ++k) {
            idx        = p * depth + k;
            sbufs[idx] = xmalloc(len);
            rbufs[idx] = xmalloc(len);
            fill(sbufs[idx], test, rank, peer, len, k);
            memset(rbufs[idx], 0, len);
        }
    }

    for (i = 0; i < 2; ++i) {
        if ((i == 0) == (prepost != 0)) {
            for (p = 0; p < npeers; ++p) {
                peer = (rank + 1 + p) % nranks;
                for (k = 0; k < depth; ++k) {
                    idx = p * depth + k;
                    MPI_Irecv(rbufs[idx], (int)len, MPI_BYTE, peer, k,
                              MPI_COMM_WORLD, &reqs[nmsg + idx]);
                }
            }
        } else {
            for (p = 0; p < npeers; ++p) {
                peer = (rank + 1 + p) % nranks;
                for (k = 0; k < depth; ++k) {
                    idx = p * depth + k;
                    MPI_Isend(sbufs[idx], (int)len, MPI_BYTE, peer, k,
                              MPI_COMM_WORLD, &reqs[idx]);
                }
            }
        }
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    MPI_Waitall(2 * nmsg, reqs, stats);

    for (p = 0; p < npeers; ++p) {
        peer = (rank + 1 + p) % nranks;
        for (k = 0; k < depth; ++k) {
            idx = p * depth + k;
            ok &= check_count(&stats[nmsg + idx], len, "non-blocking");
            ok &= verify(rbufs[idx], test, peer, rank, len, k,
                         "non-blocking");
            free(sbufs[idx]);
            free(rbufs[idx]);
        }
    }
    free(sbufs);
    free(rbufs);
    free(reqs);
    free(stats);
    return ok;
}

/* Rank 0 receives with MPI_ANY_SOURCE (and MPI_ANY_TAG) from all others */
static int p2p_any_source(size_t len)
{
    int depth = nb_depth(len) / 2, ok = 1, k, n;
    int *seen = xmalloc(sizeof(int) * (size_t)nranks * (size_t)depth);
    char *buf = xmalloc(len);
    MPI_Request *reqs;
    MPI_Status status;

    if (rank == 0) {
        memset(seen, 0, sizeof(int) * (size_t)nranks * (size_t)depth);
        for (n = 0; n < (nranks - 1) * depth; ++n) {
            memset(buf, 0, len);
            MPI_Recv(buf, (int)len, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                     MPI_COMM_WORLD, &status);
            if ((status.MPI_SOURCE <= 0) || (status.MPI_SOURCE >= nranks) ||
                (status.MPI_TAG < 0) || (status.MPI_TAG >= depth)) {
                fprintf(stderr, "mpi_check: any-source: bad source %d or tag "
                        "%d\n", status.MPI_SOURCE, status.MPI_TAG);
                ok = 0;
                continue;
            }
            ++seen[status.MPI_SOURCE * depth + status.MPI_TAG];
            ok &= check_count(&status, len, "any-source");
            ok &= verify(buf, T_ANY, status.MPI_SOURCE, 0, len,
                         status.MPI_TAG, "any-source");
        }
        for (n = depth; n < nranks * depth; ++n) {
            if (seen[n] != 1) {
                fprintf(stderr, "mpi_check: any-source: message %d from rank "
                        "%d received %d times\n", n % depth, n / depth,
                        seen[n]);
                ok = 0;
            }
        }
    } else {
        char **sbufs = xmalloc(sizeof(char *) * (size_t)depth);

        reqs = xmalloc(sizeof(MPI_Request) * (size_t)depth);
        for (k = 0; k < depth; ++k) {
            sbufs[k] = xmalloc(len);
            fill(sbufs[k], T_ANY, rank, 0, len, k);
            MPI_Isend(sbufs[k], (int)len, MPI_BYTE, 0, k, MPI_COMM_WORLD,
                      &reqs[k]);
        }
        MPI_Waitall(depth, reqs, MPI_STATUSES_IGNORE);
        for (k = 0; k < depth; ++k) {
            free(sbufs[k]);
        }
        free(sbufs);
        free(reqs);
    }
    free(buf);
    free(seen);
    return ok;
}

/* ------------------------------------------------------------ collectives */

static int coll_bcast(size_t len, int root)
{
    char *buf = xmalloc(len);
    int ok;

    if (rank == root) {
        fill(buf, T_BCAST, root, 0, len, 0);
    } else {
        memset(buf, 0, len);
    }
    MPI_Bcast(buf, (int)len, MPI_BYTE, root, MPI_COMM_WORLD);
    ok = verify(buf, T_BCAST, root, 0, len, 0, "bcast");
    free(buf);
    return ok;
}

static int coll_allreduce(int count)
{
    long long *in = xmalloc(sizeof(long long) * (size_t)count);
    long long *out = xmalloc(sizeof(long long) * (size_t)count);
    long long expected, n = nranks;
    int ok = 1, i;

    for (i = 0; i < count; ++i) {
        in[i]  = (long long)(rank + 1) * (i + 1) + ((long long)i << 33);
        out[i] = -1;
    }
    MPI_Allreduce(in, out, count, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; i < count; ++i) {
        expected = (long long)(i + 1) * (n * (n + 1) / 2) +
                   n * ((long long)i << 33);
        if (out[i] != expected) {
            if (ok) {
                fprintf(stderr, "mpi_check: rank %d: allreduce[%d] = %lld, "
                        "expected %lld\n", rank, i, out[i], expected);
            }
            ok = 0;
        }
    }
    free(in);
    free(out);
    return ok;
}

static int coll_alltoall(size_t block)
{
    char *sbuf = xmalloc(block * (size_t)nranks);
    char *rbuf = xmalloc(block * (size_t)nranks);
    int ok = 1, j;

    for (j = 0; j < nranks; ++j) {
        fill(sbuf + block * (size_t)j, T_ALLTOALL, rank, j, block, 0);
    }
    memset(rbuf, 0, block * (size_t)nranks);
    MPI_Alltoall(sbuf, (int)block, MPI_BYTE, rbuf, (int)block, MPI_BYTE,
                 MPI_COMM_WORLD);
    for (j = 0; j < nranks; ++j) {
        ok &= verify(rbuf + block * (size_t)j, T_ALLTOALL, j, rank, block, 0,
                     "alltoall");
    }
    free(sbuf);
    free(rbuf);
    return ok;
}

/* ------------------------------------------------------------ one-sided */

/*
 * The window has one slot of RMA_SLOT bytes per rank: origin r puts into slot
 * r of every target, and gets from slot `target` of every target (which the
 * target filled itself). Accumulates go to an array of long long after the
 * slots.
 */
#define ACC_COUNT 4096

typedef struct {
    MPI_Win win;
    char *base;          /* local window memory */
    const char *kind;
    void *own;           /* MPI_Win_create's buffer, freed by us */
} window_t;

static size_t win_size(void)
{
    return RMA_SLOT * (size_t)nranks + ACC_COUNT * sizeof(long long);
}

static void window_open(window_t *w, int allocate)
{
    MPI_Aint size = (MPI_Aint)win_size();

    if (allocate) {
        MPI_Win_allocate(size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->base,
                         &w->win);
        w->kind = "win_allocate";
        w->own  = NULL;
    } else {
        w->own  = xmalloc((size_t)size);
        w->base = w->own;
        MPI_Win_create(w->base, size, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                       &w->win);
        w->kind = "win_create";
    }
}

static void window_close(window_t *w)
{
    MPI_Win_free(&w->win);
    free(w->own);
}

/* Sets the local window, under an exclusive lock of ourselves */
static void window_reset(window_t *w, int test, size_t len)
{
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w->win);
    memset(w->base, 0, win_size());
    if (test != 0) {
        fill(w->base + RMA_SLOT * (size_t)rank, test, rank, rank, len, 0);
    }
    MPI_Win_unlock(rank, w->win);
}

static int window_verify_slots(window_t *w, int test, size_t len,
                               const char *what)
{
    int ok = 1, origin;

    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, w->win);
    for (origin = 0; origin < nranks; ++origin) {
        ok &= verify(w->base + RMA_SLOT * (size_t)origin, test, origin, rank,
                     len, 0, what);
    }
    MPI_Win_unlock(rank, w->win);
    return ok;
}

static int rma_put(window_t *w, size_t len, int lock)
{
    int test = lock ? T_LOCK_PUT : T_PUT, ok, target;
    char *src = xmalloc(len * (size_t)nranks);

    window_reset(w, 0, len);
    MPI_Barrier(MPI_COMM_WORLD);
    for (target = 0; target < nranks; ++target) {
        fill(src + len * (size_t)target, test, rank, target, len, 0);
    }
    if (!lock) {
        MPI_Win_fence(0, w->win);
    }
    for (target = 0; target < nranks; ++target) {
        if (lock) {
            MPI_Win_lock(MPI_LOCK_SHARED, target, 0, w->win);
        }
        MPI_Put(src + len * (size_t)target, (int)len, MPI_BYTE, target,
                (MPI_Aint)(RMA_SLOT * (size_t)rank), (int)len, MPI_BYTE,
                w->win);
        if (lock) {
            MPI_Win_unlock(target, w->win);
        }
    }
    if (!lock) {
        MPI_Win_fence(0, w->win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ok = window_verify_slots(w, test, len, lock ? "lock put" : "fence put");
    MPI_Barrier(MPI_COMM_WORLD);
    free(src);
    return ok;
}

static int rma_get(window_t *w, size_t len, int lock)
{
    int test = lock ? T_LOCK_GET : T_GET, ok = 1, target;
    char *dst = xmalloc(len * (size_t)nranks);

    window_reset(w, test, len);
    memset(dst, 0, len * (size_t)nranks);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!lock) {
        MPI_Win_fence(0, w->win);
    }
    for (target = 0; target < nranks; ++target) {
        if (lock) {
            MPI_Win_lock(MPI_LOCK_SHARED, target, 0, w->win);
        }
        MPI_Get(dst + len * (size_t)target, (int)len, MPI_BYTE, target,
                (MPI_Aint)(RMA_SLOT * (size_t)target), (int)len, MPI_BYTE,
                w->win);
        if (lock) {
            MPI_Win_unlock(target, w->win);
        }
    }
    if (!lock) {
        MPI_Win_fence(0, w->win);
    }
    for (target = 0; target < nranks; ++target) {
        ok &= verify(dst + len * (size_t)target, test, target, target, len, 0,
                     lock ? "lock get" : "fence get");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(dst);
    return ok;
}

/* Every rank adds (rank + 1) * (i + 1) to element i on every target, twice */
static int rma_accumulate(window_t *w, int lock)
{
    long long *src = xmalloc(sizeof(long long) * ACC_COUNT);
    long long *acc, expected, n = nranks;
    MPI_Aint disp = (MPI_Aint)(RMA_SLOT * (size_t)nranks);
    int ok = 1, i, target, round;

    window_reset(w, 0, 0);
    for (i = 0; i < ACC_COUNT; ++i) {
        src[i] = (long long)(rank + 1) * (i + 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (!lock) {
        MPI_Win_fence(0, w->win);
    }
    for (round = 0; round < 2; ++round) {
        for (target = 0; target < nranks; ++target) {
            if (lock) {
                MPI_Win_lock(MPI_LOCK_SHARED, target, 0, w->win);
            }
            MPI_Accumulate(src, ACC_COUNT, MPI_LONG_LONG, target, disp,
                           ACC_COUNT, MPI_LONG_LONG, MPI_SUM, w->win);
            if (lock) {
                MPI_Win_unlock(target, w->win);
            }
        }
    }
    if (!lock) {
        MPI_Win_fence(0, w->win);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, w->win);
    acc = (long long *)(void *)(w->base + disp);
    for (i = 0; i < ACC_COUNT; ++i) {
        expected = 2 * (long long)(i + 1) * (n * (n + 1) / 2);
        if (acc[i] != expected) {
            if (ok) {
                fprintf(stderr, "mpi_check: rank %d: accumulate[%d] = %lld, "
                        "expected %lld\n", rank, i, acc[i], expected);
            }
            ok = 0;
        }
    }
    MPI_Win_unlock(rank, w->win);
    MPI_Barrier(MPI_COMM_WORLD);
    free(src);
    return ok;
}

/* ------------------------------------------------------------ figures */

static void pingpong(void)
{
    const int lat_iters = 1000, bw_iters = 20, warmup = 10;
    const size_t bw_len = min_size(1 << 20, max_size);
    char *buf = xmalloc(bw_len);
    MPI_Request *reqs = xmalloc(sizeof(MPI_Request) * (size_t)bw_iters);
    double t0 = 0, lat = 0, bw = 0;
    char ack = 0;
    int i;

    memset(buf, 1, bw_len);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank <= 1) {
        int peer = 1 - rank;

        for (i = -warmup; i < lat_iters; ++i) {
            if (i == 0) {
                t0 = MPI_Wtime();
            }
            if (rank == 0) {
                MPI_Send(buf, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                MPI_Send(buf, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }
        lat = (MPI_Wtime() - t0) * 1e6 / lat_iters / 2;

        for (i = -1; i < 3; ++i) {
            int k;

            if (i == 0) {
                t0 = MPI_Wtime();
            }
            for (k = 0; k < bw_iters; ++k) {
                if (rank == 0) {
                    MPI_Isend(buf, (int)bw_len, MPI_BYTE, peer, 2,
                              MPI_COMM_WORLD, &reqs[k]);
                } else {
                    MPI_Irecv(buf, (int)bw_len, MPI_BYTE, peer, 2,
                              MPI_COMM_WORLD, &reqs[k]);
                }
            }
            MPI_Waitall(bw_iters, reqs, MPI_STATUSES_IGNORE);
            if (rank == 0) {
                MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            } else {
                MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
            }
        }
        bw = 3.0 * bw_iters * (double)bw_len / (MPI_Wtime() - t0) / 1e6;
    }
    if (rank == 0) {
        printf("mpi_check: ping-pong 0<->1: 8 B latency %.2f us, %zu B "
               "bandwidth %.1f MB/s (informative)\n", lat, bw_len, bw);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(reqs);
    free(buf);
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    window_t w;
    size_t s, len;
    int i, root, allocate, lock;
    static const int allreduce_counts[] = {1, 1000, 262144};
    static const size_t alltoall_blocks[] = {8, 4096, 262144};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    if (argc > 1) {
        char *end;
        long depth = strtol(argv[1], &end, 10);

        if ((end == argv[1]) || (*end != '\0') || (depth < 1) ||
            (depth > 32)) {
            if (rank == 0) {
                fprintf(stderr, "mpi_check: LARGE_DEPTH '%s': want 1 to "
                        "32\n", argv[1]);
            }
            MPI_Finalize();
            return 1;
        }
        large_depth = (int)depth;
    }
    if (argc > 2) {
        char *end;
        unsigned long long size = strtoull(argv[2], &end, 10);

        if ((end == argv[2]) || (*end != '\0') || (size < 65536) ||
            (size > (4 << 20))) {
            if (rank == 0) {
                fprintf(stderr, "mpi_check: MAX_SIZE '%s': want 65536 to "
                        "4194304\n", argv[2]);
            }
            MPI_Finalize();
            return 1;
        }
        max_size = (size_t)size;
    }
    if (nranks < 2) {
        if (rank == 0) {
            fprintf(stderr, "mpi_check: needs at least 2 ranks\n");
        }
        MPI_Finalize();
        return 1;
    }
    if (rank == 0) {
        printf("mpi_check: %d ranks\n", nranks);
        fflush(stdout);
    }
    record_since = MPI_Wtime();

    for (s = 0; (s < NUM_P2P_SIZES) && (p2p_sizes[s] <= max_size); ++s) {
        len = p2p_sizes[s];
        record(p2p_ring(len), "p2p blocking send/recv ring, %zu B", len);
        record(p2p_sendrecv(len), "p2p sendrecv with every rank, %zu B", len);
        record(p2p_nonblocking(len, 1),
               "p2p isend/irecv/waitall, receives preposted, %d outstanding "
               "per peer, %zu B", nb_depth(len), len);
        record(p2p_nonblocking(len, 0),
               "p2p isend/irecv/waitall, unexpected, %d outstanding per peer, "
               "%zu B", nb_depth(len), len);
        record(p2p_any_source(len), "p2p MPI_ANY_SOURCE receives at rank 0, "
               "%zu B", len);
    }

    for (root = 0; root < nranks; ++root) {
        int ok = 1;

        ok &= coll_bcast(1, root);
        ok &= coll_bcast(8192, root);
        ok &= coll_bcast(min_size(1 << 20, max_size), root);
        record(ok, "MPI_Bcast from root %d, 1 B, 8 KiB, %zu B", root,
               min_size(1 << 20, max_size));
    }
    for (i = 0; i < 3; ++i) {
        record(coll_allreduce(allreduce_counts[i]),
               "MPI_Allreduce MPI_SUM, %d long long", allreduce_counts[i]);
    }
    for (i = 0; i < 3; ++i) {
        record(coll_alltoall(alltoall_blocks[i]),
               "MPI_Alltoall, %zu B per rank", alltoall_blocks[i]);
    }

    for (allocate = 0; allocate <= 1; ++allocate) {
        window_open(&w, allocate);
        for (lock = 0; lock <= 1; ++lock) {
            const char *epoch = lock ? "lock/unlock" : "fence";

            for (s = 0; (s < NUM_RMA_SIZES) && (rma_sizes[s] <= max_size);
                 ++s) {
                len = rma_sizes[s];
                record(rma_put(&w, len, lock), "%s MPI_Put to every rank, %s, "
                       "%zu B", w.kind, epoch, len);
                record(rma_get(&w, len, lock), "%s MPI_Get from every rank, "
                       "%s, %zu B", w.kind, epoch, len);
            }
            record(rma_accumulate(&w, lock), "%s MPI_Accumulate MPI_SUM to "
                   "every rank, %s, %d long long", w.kind, epoch, ACC_COUNT);
        }
        window_close(&w);
    }

    pingpong();

    if (rank == 0) {
        printf("mpi_check: %d passed, %d failed\n", passed, failed);
        fflush(stdout);
    }
    MPI_Finalize();
    return (failed == 0) ? 0 : 1;
}
