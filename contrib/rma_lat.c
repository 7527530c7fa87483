/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/*
 * rma_lat - what a one-sided UCP user waits for, per operation: an 8-byte
 * put followed by a flush (OpenSHMEM's shmem_putmem + shmem_quiet, MPI's
 * MPI_Put + MPI_Win_flush), a blocking 8-byte get, a flush with nothing
 * outstanding, and the puts' issue rate with one flush after many.
 * ucx_perftest flushes only once at the end of a run, so none of its tests
 * waits for a completion per operation (issue 23).
 *
 *   rma_lat [-p PORT]                                             server
 *   rma_lat -c HOST [-p PORT] [-n ITERS] [-b BATCHES] [-w WARMUP] [-o OPS]
 *                                                                 client
 *
 * The server maps a buffer, sends its worker address and the buffer's rkey
 * over TCP, and progresses until the client is done; the client runs each
 * operation WARMUP times, then BATCHES batches of ITERS, and prints per
 * operation the median and the minimum over the batches of the time per
 * operation, in us (OPS: a comma-separated subset of the names below, all
 * by default):
 *
 *   op put8_worker_flush median_us 12.34 min_us 11.00 batches 9 iters 200
 *      progress_per_op 41.0
 *
 * (one line; progress_per_op: the client's ucp_worker_progress calls per
 * operation, while it waited)
 *
 * The transports are UCX's choice (UCX_TLS, UCX_NET_DEVICES). With -t TL
 * -d DEV on both sides, the same loops run at UCT level on that transport
 * and device (rma_lat_uct.c): what UCP's protocols ask of a transport,
 * without UCP. Exit status 0 when every operation completed and the last
 * put's value came back in a get; 1 otherwise.
 */
#include "rma_lat.h"

#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

rma_lat_opts_t opts = { NULL, "13377", 200, 9, 50, NULL, NULL, NULL };
unsigned long progress_calls;

static ucp_context_h context;
static ucp_worker_h  worker;

void die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "rma_lat: %s: %s\n", what, ucs_status_string(status));
    exit(1);
}

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* ---------------------------------------------------------------- OOB */

void sock_full(int fd, void *buf, size_t len, int send_it)
{
    ssize_t n;

    while (len > 0) {
        n = send_it ? send(fd, buf, len, MSG_NOSIGNAL) : recv(fd, buf, len, 0);
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            fprintf(stderr, "rma_lat: %s on the control socket: %s\n",
                    send_it ? "send" : "recv",
                    (n == 0) ? "peer closed" : strerror(errno));
            exit(1);
        }
        buf  = (char*)buf + n;
        len -= (size_t)n;
    }
}

/* A blob: its length (network order), then its bytes */
void blob_send(int fd, const void *buf, size_t len)
{
    uint32_t n = htonl((uint32_t)len);

    sock_full(fd, &n, sizeof(n), 1);
    sock_full(fd, (void*)buf, len, 1);
}

void *blob_recv(int fd, size_t *len_p)
{
    uint32_t n;
    void *buf;

    sock_full(fd, &n, sizeof(n), 0);
    n = ntohl(n);
    if (n > (1u << 20)) {
        fprintf(stderr, "rma_lat: a control message of %u bytes\n", n);
        exit(1);
    }
    buf = malloc(n ? n : 1);
    if (buf == NULL) {
        fprintf(stderr, "rma_lat: out of memory\n");
        exit(1);
    }
    sock_full(fd, buf, n, 0);
    *len_p = n;
    return buf;
}

int sock_connect_or_listen(void)
{
    struct addrinfo hints = { 0 }, *res;
    int fd, one = 1, lfd, ret;

    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = (opts.server == NULL) ? AI_PASSIVE : 0;
    ret = getaddrinfo(opts.server, opts.port, &hints, &res);
    if (ret != 0) {
        fprintf(stderr, "rma_lat: %s:%s: %s\n", opts.server ?: "*", opts.port,
                gai_strerror(ret));
        exit(1);
    }

    fd = socket(res->ai_family, res->ai_socktype, 0);
    if (fd < 0) {
        perror("rma_lat: socket");
        exit(1);
    }
    if (opts.server != NULL) {
        /* The server may not listen yet: try for 30 s */
        for (ret = 0; ret < 300; ++ret) {
            if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
                break;
            }
            usleep(100000);
        }
        if (ret == 300) {
            perror("rma_lat: connect");
            exit(1);
        }
    } else {
        lfd = fd;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if ((bind(lfd, res->ai_addr, res->ai_addrlen) != 0) ||
            (listen(lfd, 1) != 0)) {
            perror("rma_lat: bind/listen");
            exit(1);
        }
        fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            perror("rma_lat: accept");
            exit(1);
        }
        close(lfd);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    freeaddrinfo(res);
    return fd;
}

/* ---------------------------------------------------------------- UCP */

static void wait_request(void *request, const char *what)
{
    ucs_status_t status;

    if (request == NULL) {
        return;
    }
    if (UCS_PTR_IS_ERR(request)) {
        die(what, UCS_PTR_STATUS(request));
    }
    do {
        ucp_worker_progress(worker);
        ++progress_calls;
        status = ucp_request_check_status(request);
    } while (status == UCS_INPROGRESS);
    ucp_request_free(request);
    if (status != UCS_OK) {
        die(what, status);
    }
}

static void ucp_setup(void)
{
    ucp_params_t params               = { 0 };
    ucp_worker_params_t worker_params = { 0 };
    ucs_status_t status;

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_RMA;
    status            = ucp_init(&params, NULL, &context);
    if (status != UCS_OK) {
        die("ucp_init", status);
    }

    worker_params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(context, &worker_params, &worker);
    if (status != UCS_OK) {
        die("ucp_worker_create", status);
    }
}

static void send_worker_address(int fd)
{
    ucp_address_t *address;
    size_t length;
    ucs_status_t status;

    status = ucp_worker_get_address(worker, &address, &length);
    if (status != UCS_OK) {
        die("ucp_worker_get_address", status);
    }
    blob_send(fd, address, length);
    ucp_worker_release_address(worker, address);
}

/* ---------------------------------------------------------------- server */

static int server(void)
{
    uint64_t buffer[512] = { 0 };
    ucp_mem_map_params_t mparams = { 0 };
    ucp_mem_h memh;
    void *rkey_buf;
    size_t rkey_len;
    uint64_t addr = (uintptr_t)buffer;
    struct pollfd pfd;
    ucs_status_t status;
    char done;
    int fd;

    ucp_setup();
    mparams.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                         UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mparams.address    = buffer;
    mparams.length     = sizeof(buffer);
    status             = ucp_mem_map(context, &mparams, &memh);
    if (status != UCS_OK) {
        die("ucp_mem_map", status);
    }
    status = ucp_rkey_pack(context, memh, &rkey_buf, &rkey_len);
    if (status != UCS_OK) {
        die("ucp_rkey_pack", status);
    }

    fd = sock_connect_or_listen();
    send_worker_address(fd);
    blob_send(fd, rkey_buf, rkey_len);
    blob_send(fd, &addr, sizeof(addr));
    ucp_rkey_buffer_release(rkey_buf);

    /* The client's wireup needs this side's progress; then one byte ends */
    pfd.fd     = fd;
    pfd.events = POLLIN;
    for (;;) {
        ucp_worker_progress(worker);
        if (poll(&pfd, 1, 0) > 0) {
            break;
        }
    }
    if (recv(fd, &done, 1, 0) != 1) {
        fprintf(stderr, "rma_lat: the client left without its last byte\n");
        return 1;
    }
    /* The client's endpoint closes only when this side acknowledges it */
    send(fd, &done, 1, MSG_NOSIGNAL);
    for (int i = 0; i < 1000; ++i) {
        ucp_worker_progress(worker);
        usleep(1000);
    }
    close(fd);
    ucp_mem_unmap(context, memh);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    return 0;
}

/* ---------------------------------------------------------------- client */

typedef struct {
    ucp_ep_h   ep;
    ucp_rkey_h rkey;
    uint64_t   raddr;
    uint64_t   value;
    uint64_t   got;
} rma_t;

static const ucp_request_param_t no_param = { 0 };

static void op_put8_worker_flush(void *arg)
{
    rma_t *r = arg;

    ++r->value;
    wait_request(ucp_put_nbx(r->ep, &r->value, 8, r->raddr, r->rkey,
                             &no_param), "ucp_put_nbx");
    wait_request(ucp_worker_flush_nbx(worker, &no_param),
                 "ucp_worker_flush_nbx");
}

static void op_put8_ep_flush(void *arg)
{
    rma_t *r = arg;

    ++r->value;
    wait_request(ucp_put_nbx(r->ep, &r->value, 8, r->raddr, r->rkey,
                             &no_param), "ucp_put_nbx");
    wait_request(ucp_ep_flush_nbx(r->ep, &no_param), "ucp_ep_flush_nbx");
}

static void op_get8(void *arg)
{
    rma_t *r = arg;

    wait_request(ucp_get_nbx(r->ep, &r->got, 8, r->raddr, r->rkey, &no_param),
                 "ucp_get_nbx");
}

static void op_worker_flush_idle(void *arg)
{
    (void)arg;
    wait_request(ucp_worker_flush_nbx(worker, &no_param),
                 "ucp_worker_flush_nbx");
}

/* 100 puts, one flush: the time per put (the issue rate) */
#define RMA_LAT_RATE_PUTS 100
static void op_put8_x100_one_flush(void *arg)
{
    rma_t *r = arg;

    for (int i = 0; i < RMA_LAT_RATE_PUTS; ++i) {
        ++r->value;
        wait_request(ucp_put_nbx(r->ep, &r->value, 8, r->raddr, r->rkey,
                                 &no_param), "ucp_put_nbx");
    }
    wait_request(ucp_worker_flush_nbx(worker, &no_param),
                 "ucp_worker_flush_nbx");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

/* NAME is in the comma-separated list of -o (or there is none) */
static int op_selected(const char *name)
{
    size_t len = strlen(name);
    const char *p;

    if (opts.ops == NULL) {
        return 1;
    }
    for (p = opts.ops; p != NULL; p = strchr(p, ',')) {
        p += (*p == ',');
        if ((strncmp(p, name, len) == 0) &&
            ((p[len] == ',') || (p[len] == '\0'))) {
            return 1;
        }
    }
    return 0;
}

void run_op(const char *name, void (*op)(void*), void *arg, long per_call)
{
    double t[RMA_LAT_MAX_BATCHES], start;
    unsigned long calls;
    long i, b;

    if (!op_selected(name)) {
        return;
    }

    for (i = 0; i < opts.warmup; ++i) {
        op(arg);
    }
    calls = progress_calls;
    for (b = 0; b < opts.batches; ++b) {
        start = now_us();
        for (i = 0; i < opts.iters; ++i) {
            op(arg);
        }
        t[b] = (now_us() - start) / (opts.iters * per_call);
    }
    qsort(t, opts.batches, sizeof(t[0]), cmp_double);
    calls = progress_calls - calls;
    printf("op %s median_us %.2f min_us %.2f batches %ld iters %ld "
           "progress_per_op %.1f\n", name, t[opts.batches / 2], t[0],
           opts.batches, opts.iters * per_call,
           (double)calls / (opts.batches * opts.iters * per_call));
    fflush(stdout);
}

static int client(void)
{
    ucp_ep_params_t ep_params = { 0 };
    ucp_request_param_t close_param = { 0 };
    ucs_status_t status;
    size_t len;
    void *address, *rkey_buf, *raddr;
    rma_t r = { 0 };
    char done = 1;
    int fd;

    ucp_setup();
    fd       = sock_connect_or_listen();
    address  = blob_recv(fd, &len);
    rkey_buf = blob_recv(fd, &len);
    raddr    = blob_recv(fd, &len);
    if (len != sizeof(r.raddr)) {
        fprintf(stderr, "rma_lat: a remote address of %zu bytes\n", len);
        return 1;
    }
    memcpy(&r.raddr, raddr, sizeof(r.raddr));

    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = address;
    status = ucp_ep_create(worker, &ep_params, &r.ep);
    if (status != UCS_OK) {
        die("ucp_ep_create", status);
    }
    status = ucp_ep_rkey_unpack(r.ep, rkey_buf, &r.rkey);
    if (status != UCS_OK) {
        die("ucp_ep_rkey_unpack", status);
    }

    /* The lanes up (UCP's wireup) before the first operation: outside
     * the op_ functions, which contrib/bench_rma --instructions counts */
    ++r.value;
    wait_request(ucp_put_nbx(r.ep, &r.value, 8, r.raddr, r.rkey, &no_param),
                 "ucp_put_nbx");
    wait_request(ucp_worker_flush_nbx(worker, &no_param),
                 "ucp_worker_flush_nbx");

    run_op("put8_worker_flush", op_put8_worker_flush, &r, 1);
    run_op("put8_ep_flush", op_put8_ep_flush, &r, 1);
    run_op("get8", op_get8, &r, 1);
    run_op("worker_flush_idle", op_worker_flush_idle, &r, 1);
    run_op("put8_rate", op_put8_x100_one_flush, &r, RMA_LAT_RATE_PUTS);

    /* Every put arrived: the last value comes back */
    op_get8(&r);
    if (!last_value_back(r.value, r.got)) {
        return 1;
    }

    ucp_rkey_destroy(r.rkey);
    sock_full(fd, &done, 1, 1);
    close_param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    close_param.flags        = 0; /* flush mode */
    wait_request(ucp_ep_close_nbx(r.ep, &close_param), "ucp_ep_close_nbx");
    sock_full(fd, &done, 1, 0);
    close(fd);
    free(address);
    free(rkey_buf);
    free(raddr);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    return 0;
}

int last_value_back(uint64_t put, uint64_t got)
{
    if (got != put) {
        fprintf(stderr, "rma_lat: the last put wrote %llu, a get read %llu\n",
                (unsigned long long)put, (unsigned long long)got);
        return 0;
    }
    printf("ok: the last put's value (%llu) came back\n",
           (unsigned long long)put);
    return 1;
}

static long parse_count(const char *s, long max)
{
    char *end;
    long v = strtol(s, &end, 10);

    if ((*s == '\0') || (*end != '\0') || (v < 1) || (v > max)) {
        fprintf(stderr, "rma_lat: bad count '%s' (want 1 to %ld)\n", s, max);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    int c;

    while ((c = getopt(argc, argv, "c:p:n:b:w:o:t:d:")) != -1) {
        switch (c) {
        case 'c':
            opts.server = optarg;
            break;
        case 'p':
            opts.port = optarg;
            break;
        case 'n':
            opts.iters = parse_count(optarg, 1000000);
            break;
        case 'b':
            opts.batches = parse_count(optarg, RMA_LAT_MAX_BATCHES);
            break;
        case 'w':
            opts.warmup = parse_count(optarg, 1000000);
            break;
        case 'o':
            opts.ops = optarg;
            break;
        case 't':
            opts.tl = optarg;
            break;
        case 'd':
            opts.dev = optarg;
            break;
        default:
            fprintf(stderr, "usage: rma_lat [-c HOST] [-p PORT] [-n ITERS] "
                            "[-b BATCHES] [-w WARMUP] [-o OPS] "
                            "[-t TL -d DEV]\n");
            return 2;
        }
    }
    if ((opts.tl == NULL) != (opts.dev == NULL)) {
        fprintf(stderr, "rma_lat: -t and -d go together\n");
        return 2;
    }
    if (opts.tl != NULL) {
        return (opts.server != NULL) ? uct_client() : uct_server();
    }
    return (opts.server != NULL) ? client() : server();
}
