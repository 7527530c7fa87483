/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * OpenSHMEM over UCX (Open MPI's spml ucx): put, get, the atomics that spml
 * ucx carries (fetch-add, compare-swap, swap, add), shmem_barrier_all, a
 * reduction, and a symmetric heap large enough for a 64 MiB object, every
 * value checked. Each check prints `ok: shmem_check: ...` or
 * `FAIL: shmem_check: ...`; PE 0 prints the summary `shmem_check: N passed,
 * M failed` (all PEs' checks), and the program exits 1 when one failed.
 * Run with 2 or more PEs and SHMEM_SYMMETRIC_SIZE of at least 80M
 * (test/guest/mpi.sh).
 *
 * --latency: what a one-sided user waits for, timed on PE 0 against PE 1
 * (contrib/bench_rma, issue 23): an 8-byte shmem_putmem followed by
 * shmem_quiet, and a blocking 8-byte shmem_getmem; per operation the median
 * and the least of BATCHES batches of ITERS, in the lines of
 * contrib/rma_lat ("op NAME median_us X min_us Y ...").
 *
 *   shmem_check [BIG_MIB]   (default 64: the large symmetric object, MiB)
 *   shmem_check --latency ITERS BATCHES
 */
#include <shmem.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static int me, npes;
static long passed, failed;

/* The reductions' work and sync arrays (OpenSHMEM 1.4: Open MPI 4.1 has no
 * teams); every reduction goes through reduce(), whose barriers keep psync
 * from being reused before every PE is done with it */
#define REDUCE_MAX 1024
static long pwrk[REDUCE_MAX / 2 + 1 + SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static long psync[SHMEM_REDUCE_SYNC_SIZE];

static void reduce(long *dst, const long *src, int n, int max)
{
    shmem_barrier_all();
    if (max) {
        shmem_long_max_to_all(dst, src, n, 0, 0, npes, pwrk, psync);
    } else {
        shmem_long_sum_to_all(dst, src, n, 0, 0, npes, pwrk, psync);
    }
    shmem_barrier_all();
}

static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    if (ok) {
        ++passed;
    } else {
        ++failed;
    }
    /* Failures from every PE, successes from PE 0 */
    if (!ok || (me == 0)) {
        printf("%s: shmem_check: PE %d: ", ok ? "ok" : "FAIL", me);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
    }
}

static uint64_t pattern(int src, int dst, size_t idx)
{
    return ((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^
           (idx * 0x9e3779b97f4a7c15ull);
}

/* Every PE puts a block into its right neighbour's copy of big, at the
 * block's own offset, then reads its left neighbour's block back by get */
static void put_get(uint64_t *big, size_t words)
{
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    size_t block = words / (size_t)npes, i, bad = 0;
    uint64_t *src = malloc(block * sizeof(*src));
    uint64_t *dst = malloc(block * sizeof(*dst));

    if ((src == NULL) || (dst == NULL)) {
        check(0, "out of memory for %zu words", block);
        free(src);
        free(dst);
        return;
    }
    for (i = 0; i < block; ++i) {
        src[i] = pattern(me, right, i);
    }
    shmem_putmem(big + (size_t)me * block, src, block * sizeof(*src), right);
    shmem_quiet();
    shmem_barrier_all();

    /* What the left neighbour put here */
    for (i = 0; i < block; ++i) {
        bad += big[(size_t)left * block + i] != pattern(left, me, i);
    }
    check(bad == 0, "put %zu bytes into PE %d's symmetric object: %zu words "
          "wrong", block * sizeof(*src), right, bad);

    /* The same block, read from the right neighbour, which holds ours */
    shmem_getmem(dst, big + (size_t)me * block, block * sizeof(*dst), right);
    bad = 0;
    for (i = 0; i < block; ++i) {
        bad += dst[i] != pattern(me, right, i);
    }
    check(bad == 0, "get %zu bytes from PE %d: %zu words wrong",
          block * sizeof(*dst), right, bad);

    /* Small puts and gets, one word at a time, at the far end of the object:
     * the heap's last pages are mapped for the peers too */
    shmem_uint64_p(&big[words - 1 - (size_t)me], pattern(me, right, 1),
                   right);
    shmem_barrier_all();
    check(big[words - 1 - (size_t)left] == pattern(left, me, 1),
          "8-byte put at the end of the %zu MiB object",
          (words * sizeof(*big)) >> 20);
    check(shmem_uint64_g(&big[words - 1 - (size_t)me], right) ==
          pattern(me, right, 1), "8-byte get at the end of the object");
    shmem_barrier_all();
    free(src);
    free(dst);
}

static long counter, cswap_word, swap_word, add_word;

/* Every PE adds to and swaps words of PE 0, which checks the sums */
static void atomics(void)
{
    long old, expect, mine = 1000 + me;
    int i, rounds = 50, wins = 0, total_wins;
    static long sum_src, sum_dst;

    counter = cswap_word = swap_word = add_word = 0;
    shmem_barrier_all();

    for (i = 0; i < rounds; ++i) {
        old = shmem_long_atomic_fetch_add(&counter, me + 1, 0);
        if ((old < 0) ||
            (old > (long)rounds * npes * (npes + 1) / 2)) {
            check(0, "fetch-add returned %ld, out of range", old);
            break;
        }
        shmem_long_atomic_add(&add_word, 2, 0);
    }

    /* Compare-swap: one PE wins each value, 0 -> 1 -> 2 ... */
    for (i = 0; i < rounds; ++i) {
        expect = shmem_long_atomic_fetch(&cswap_word, 0);
        if (shmem_long_atomic_compare_swap(&cswap_word, expect, expect + 1,
                                           0) == expect) {
            ++wins;
        }
    }

    /* Swap: the words that come back are the ones that went in */
    old = shmem_long_atomic_swap(&swap_word, mine, 0);
    shmem_barrier_all();

    check(shmem_long_atomic_fetch(&counter, 0) ==
          (long)rounds * npes * (npes + 1) / 2, "fetch-add: PE 0's counter "
          "is the sum of every PE's adds");
    check(shmem_long_atomic_fetch(&add_word, 0) == 2L * rounds * npes,
          "add: PE 0's word is %ld", 2L * rounds * npes);

    sum_src = wins;
    reduce(&sum_dst, &sum_src, 1, 0);
    total_wins = (int)sum_dst;
    check(shmem_long_atomic_fetch(&cswap_word, 0) == total_wins,
          "compare-swap: PE 0's word (%ld) counts the wins of every PE (%d)",
          shmem_long_atomic_fetch(&cswap_word, 0), total_wins);

    /* Swap: one PE got 0, the others each another PE's value; what stays in
     * the word is the last one in. Sum of everything out + what stays =
     * sum of everything in. */
    sum_src = old;
    reduce(&sum_dst, &sum_src, 1, 0);
    check(sum_dst + shmem_long_atomic_fetch(&swap_word, 0) ==
          (long)npes * 1000 + (long)npes * (npes - 1) / 2,
          "swap: the values that came out and the one left add up");
    shmem_barrier_all();
}

/* A reduction of a vector: sum and max over the PEs */
static void reduction(void)
{
    enum { N = REDUCE_MAX };
    static long src[N], sum[N], max[N];
    long bad = 0;
    int i;

    for (i = 0; i < N; ++i) {
        src[i] = (long)i * (me + 1);
    }
    reduce(sum, src, N, 0);
    reduce(max, src, N, 1);
    for (i = 0; i < N; ++i) {
        bad += sum[i] != (long)i * npes * (npes + 1) / 2;
        bad += max[i] != (long)i * npes;
    }
    check(bad == 0, "sum and max of %d longs over %d PEs: %ld wrong", N,
          npes, bad);
}

/* ------------------------------------------------------------ latency */

#define LATENCY_MAX_BATCHES 64
#define LATENCY_WARMUP      50

static uint64_t lat_target, lat_value, lat_got;  /* symmetric */

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

static void op_put8_quiet(void)
{
    ++lat_value;
    shmem_putmem(&lat_target, &lat_value, sizeof(lat_value), 1);
    shmem_quiet();
}

static void op_get8(void)
{
    shmem_getmem(&lat_got, &lat_target, sizeof(lat_got), 1);
}

static void lat_op(const char *name, void (*op)(void), long iters,
                   long batches)
{
    double t[LATENCY_MAX_BATCHES], start;
    long i, b;

    for (i = 0; i < LATENCY_WARMUP; ++i) {
        op();
    }
    for (b = 0; b < batches; ++b) {
        start = now_us();
        for (i = 0; i < iters; ++i) {
            op();
        }
        t[b] = (now_us() - start) / iters;
    }
    qsort(t, batches, sizeof(*t), cmp_double);
    printf("op %s median_us %.2f min_us %.2f batches %ld iters %ld\n", name,
           t[batches / 2], t[0], batches, iters);
    fflush(stdout);
}

static int latency(long iters, long batches)
{
    if (me == 0) {
        lat_op("put8_quiet", op_put8_quiet, iters, batches);
        lat_op("get8", op_get8, iters, batches);
        check(lat_got == lat_value, "latency: the last put's value (%llu) "
              "came back (%llu)", (unsigned long long)lat_value,
              (unsigned long long)lat_got);
    }
    shmem_barrier_all();
    return failed ? 1 : 0;
}

static long parse_count(const char *s, long max)
{
    char *end;
    long v = strtol(s, &end, 10);

    return ((*s == '\0') || (*end != '\0') || (v < 1) || (v > max)) ? 0 : v;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    int lat      = (argc > 1) && (strcmp(argv[1], "--latency") == 0);
    long big_mib = (!lat && (argc > 1)) ? strtol(argv[1], NULL, 10) : 64;
    long iters   = (lat && (argc > 2)) ? parse_count(argv[2], 1000000) : 0;
    long batches = (lat && (argc > 3)) ?
                   parse_count(argv[3], LATENCY_MAX_BATCHES) : 0;
    int ret;
    size_t words = ((size_t)big_mib << 20) / sizeof(uint64_t);
    static long all_failed, my_failed, all_passed, my_passed;
    uint64_t *big;
    int i;

    shmem_init();
    for (i = 0; i < SHMEM_REDUCE_SYNC_SIZE; ++i) {
        psync[i] = SHMEM_SYNC_VALUE;
    }
    me   = shmem_my_pe();
    npes = shmem_n_pes();

    if ((npes < 2) || (big_mib < 1)) {
        if (me == 0) {
            fprintf(stderr, "shmem_check: needs 2 PEs or more and BIG_MIB "
                    ">= 1 (%d PEs, %ld MiB)\n", npes, big_mib);
        }
        shmem_finalize();
        return 2;
    }

    if (lat) {
        if ((iters == 0) || (batches == 0)) {
            if (me == 0) {
                fprintf(stderr, "shmem_check: --latency ITERS BATCHES (1 to "
                        "1000000, 1 to %d)\n", LATENCY_MAX_BATCHES);
            }
            ret = 2;
        } else {
            ret = latency(iters, batches);
        }
        shmem_finalize();
        return ret;
    }

    big = shmem_malloc(words * sizeof(*big));
    check(big != NULL, "shmem_malloc of %ld MiB", big_mib);
    if (big != NULL) {
        memset(big, 0, words * sizeof(*big));
        shmem_barrier_all();
        put_get(big, words);
    }
    atomics();
    reduction();

    my_failed = failed;
    my_passed = passed;
    reduce(&all_failed, &my_failed, 1, 0);
    reduce(&all_passed, &my_passed, 1, 0);
    if (me == 0) {
        printf("shmem_check: %ld passed, %ld failed\n", all_passed,
               all_failed);
        fflush(stdout);
    }
    if (big != NULL) {
        shmem_free(big);
    }
    shmem_finalize();
    return all_failed ? 1 : 0;
}
