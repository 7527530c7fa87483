/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/*
 * The scale benchmark's MPI job (contrib/bench_scale): the time of the
 * window MPI_Init plus one 8-byte exchange plus one MPI_Alltoall of 256 ints
 * per rank, and what the node holds once every rank is connected to every
 * other. Each rank takes a clock that does not depend on MPI
 * (CLOCK_MONOTONIC, which all processes of a node share) before MPI_Init,
 * then exchanges 8 bytes with rank i^1 (a rank without a partner, the last
 * of an odd count or a single rank, sends to and receives from itself), then
 * sends 256 ints to every rank and receives 256 from every rank
 * (MPI_Alltoall), and takes the clock again. 1 KiB per peer keeps Open MPI
 * 4.1's fixed decision (coll tuned) on algorithms that send to every peer
 * directly (linear_sync below 32 ranks, linear from 32; two_proc at 2):
 * below 512 bytes it takes the modified Bruck algorithm from 16 ranks on,
 * which reaches log2(N) peers only, and the job would not be connected all
 * to all. Both messages are checked (abort on a wrong value).
 *
 * Then, after a barrier (every rank's alltoall is done, its connections
 * still open), the first rank of every host samples the node (node_sample:
 * the kernel's QPs and CQs, the bytes of its memory regions, the kernel's
 * memory) and a second barrier holds the others until it is done, so that
 * no rank closes anything before. Rank 0 prints the maximum over the ranks
 * of the elapsed time and the pids of every rank, the host name of every
 * rank (in the same order), and a line per host with that host's sample;
 * and, to show where the window goes, each phase's longest time over the
 * ranks (MPI_Init; the exchange; the alltoall, which makes most of the
 * connections):
 *
 *   mpi_scale: ranks 4 window_s 15.123456 pids 101 102 103 104
 *   mpi_scale: phases_s init 9.1 exchange 1.2 alltoall 4.8
 *   mpi_scale: hosts node0 node0 node1 node1
 *   mpi_scale: node node0 qp Q cq C mr_bytes B kmem_kb K
 *   mpi_scale: node node1 qp Q cq C mr_bytes B kmem_kb K
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

/* The ints each rank sends to every rank in the alltoall */
#define ALLTOALL_COUNT 256

/* The node's sample: QPs, CQs, bytes of memory regions, kernel memory (kB) */
#define NODE_FIELDS 4
#define PHASES      3

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

/* The value rank src sends to rank dst at index i of its alltoall block */
static int alltoall_value(int src, int dst, int i)
{
    return (int)((((unsigned)src * 65521u + (unsigned)dst) * ALLTOALL_COUNT +
                  (unsigned)i) & 0x7fffffffu);
}

/* Adds to sums[k] the number that follows the word names[k] in every line of
 * the output of cmd (the words: separated by blanks); -1 if cmd fails */
static int sum_words(const char *cmd, const char *const *names, int nnames,
                     long long *sums)
{
    char line[4096], *word, *next, *save;
    FILE *out;
    int k;

    out = popen(cmd, "r");
    if (out == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), out) != NULL) {
        word = strtok_r(line, " \t\n", &save);
        while (word != NULL) {
            next = strtok_r(NULL, " \t\n", &save);
            for (k = 0; (k < nnames) && (next != NULL); ++k) {
                if (strcmp(word, names[k]) == 0) {
                    sums[k] += strtoll(next, NULL, 10);
                }
            }
            word = next;
        }
    }
    return (pclose(out) == 0) ? 0 : -1;
}

/*
 * The node's sample, into res[NODE_FIELDS]: the kernel's QPs and CQs on every
 * RDMA device (the summary lines of rdma res show, "0: rxe0: pd 3 cq 25 qp
 * 24 ..."), the bytes of every memory region (the mrlen of rdma res show
 * mr: the pinned user memory), and the kernel's unreclaimable memory in kB
 * (/proc/meminfo: SUnreclaim + KernelStack + PageTables + VmallocUsed; read
 * first, before rdma's processes exist). contrib/bench_scale takes the same
 * sums in the guest before each job, the node's baseline. 0, or -1 on
 * failure.
 */
static int node_sample(long long *res)
{
    static const char *const res_names[] = {"qp", "cq"};
    static const char *const mr_names[]  = {"mrlen"};
    static const char *const mem_names[] = {"SUnreclaim:", "KernelStack:",
                                            "PageTables:", "VmallocUsed:"};
    char line[256], name[64];
    long long kb;
    FILE *meminfo;
    int k;

    memset(res, 0, sizeof(*res) * NODE_FIELDS);
    meminfo = fopen("/proc/meminfo", "r");
    if (meminfo == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), meminfo) != NULL) {
        if (sscanf(line, "%63s %lld", name, &kb) != 2) {
            continue;
        }
        for (k = 0; k < 4; ++k) {
            if (strcmp(name, mem_names[k]) == 0) {
                res[3] += kb;
            }
        }
    }
    fclose(meminfo);
    if ((sum_words("rdma res show", res_names, 2, res) != 0) ||
        (sum_words("rdma res show mr", mr_names, 1, res + 2) != 0)) {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t out, in = 0;
    double t0, t_init, t_exchange, t1;
    double phases[PHASES], max_phases[PHASES], elapsed, max_elapsed;
    int rank, nranks, peer, pid, i, j, local_rank;
    int *pids = NULL, *a2a_out, *a2a_in;
    long long res[NODE_FIELDS + 1] = {0};
    long long *all_res = NULL;
    char host[HOST_LEN];
    char *hosts = NULL;
    MPI_Comm local;

    host_name(host);
    count_dir_per_node(host);

    t0 = now();
    MPI_Init(&argc, &argv);
    t_init = now();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    a2a_out = malloc(sizeof(int) * ALLTOALL_COUNT * (size_t)nranks);
    a2a_in  = malloc(sizeof(int) * ALLTOALL_COUNT * (size_t)nranks);
    if ((a2a_out == NULL) || (a2a_in == NULL)) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (j = 0; j < nranks; ++j) {
        for (i = 0; i < ALLTOALL_COUNT; ++i) {
            a2a_out[j * ALLTOALL_COUNT + i] = alltoall_value(rank, j, i);
            a2a_in[j * ALLTOALL_COUNT + i]  = -1;
        }
    }

    peer = rank ^ 1;
    if (peer >= nranks) {
        peer = rank;
    }
    out = 0x5ca1e000u + (uint64_t)rank;
    MPI_Sendrecv(&out, 1, MPI_UINT64_T, peer, 0, &in, 1, MPI_UINT64_T, peer,
                 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    t_exchange = now();
    MPI_Alltoall(a2a_out, ALLTOALL_COUNT, MPI_INT, a2a_in, ALLTOALL_COUNT,
                 MPI_INT, MPI_COMM_WORLD);
    t1 = now();

    if (in != 0x5ca1e000u + (uint64_t)peer) {
        fprintf(stderr, "mpi_scale: rank %d: got 0x%llx from rank %d\n", rank,
                (unsigned long long)in, peer);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (j = 0; j < nranks; ++j) {
        for (i = 0; i < ALLTOALL_COUNT; ++i) {
            if (a2a_in[j * ALLTOALL_COUNT + i] != alltoall_value(j, rank, i)) {
                fprintf(stderr, "mpi_scale: rank %d: alltoall: got %d at %d"
                        " from rank %d, expected %d\n", rank,
                        a2a_in[j * ALLTOALL_COUNT + i], i, j,
                        alltoall_value(j, rank, i));
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
    }
    free(a2a_in);
    free(a2a_out);

    /* The node's sample: by the first rank of each host, while every rank
     * holds its connections (res[NODE_FIELDS] = 1: this rank sampled) */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                        MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (local_rank == 0) {
        if (node_sample(res) != 0) {
            fprintf(stderr, "mpi_scale: rank %d (%s): could not sample the"
                    " node (rdma res show, /proc/meminfo)\n", rank, host);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        res[NODE_FIELDS] = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&local);

    elapsed = t1 - t0;
    MPI_Reduce(&elapsed, &max_elapsed, 1, MPI_DOUBLE, MPI_MAX, 0,
               MPI_COMM_WORLD);
    phases[0] = t_init - t0;
    phases[1] = t_exchange - t_init;
    phases[2] = t1 - t_exchange;
    MPI_Reduce(phases, max_phases, PHASES, MPI_DOUBLE, MPI_MAX, 0,
               MPI_COMM_WORLD);
    pid = (int)getpid();
    if (rank == 0) {
        pids    = malloc(sizeof(*pids) * (size_t)nranks);
        hosts   = malloc(HOST_LEN * (size_t)nranks);
        all_res = malloc(sizeof(res) * (size_t)nranks);
        if ((pids == NULL) || (hosts == NULL) || (all_res == NULL)) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    MPI_Gather(res, NODE_FIELDS + 1, MPI_LONG_LONG, all_res, NODE_FIELDS + 1,
               MPI_LONG_LONG, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        printf("mpi_scale: ranks %d window_s %.6f pids", nranks, max_elapsed);
        for (i = 0; i < nranks; ++i) {
            printf(" %d", pids[i]);
        }
        printf("\nmpi_scale: phases_s init %.6f exchange %.6f alltoall %.6f",
               max_phases[0], max_phases[1], max_phases[2]);
        printf("\nmpi_scale: hosts");
        for (i = 0; i < nranks; ++i) {
            printf(" %s", hosts + (size_t)i * HOST_LEN);
        }
        printf("\n");
        for (i = 0; i < nranks; ++i) {
            const long long *r = all_res + (size_t)i * (NODE_FIELDS + 1);

            if (r[NODE_FIELDS]) {
                printf("mpi_scale: node %s qp %lld cq %lld mr_bytes %lld"
                       " kmem_kb %lld\n", hosts + (size_t)i * HOST_LEN, r[0],
                       r[1], r[2], r[3]);
            }
        }
        fflush(stdout);
        free(all_res);
        free(hosts);
        free(pids);
    }

    MPI_Finalize();
    return 0;
}
