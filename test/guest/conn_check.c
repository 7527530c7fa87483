/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share's connections at UCT level (test/guest/conn_stranger.sh runs
 * them): a target that answers pings, pingers, requesters to kill, a loop
 * of endpoints that leave with grants outstanding, simultaneous connects.
 * Runs in the guest with the module preloaded.
 *
 *   conn_check DEVICE target FILE SECONDS
 *       An iface whose addresses go to FILE (hex, for pingers and the
 *       stranger): answers every ping (AM 1, which carries the pinger's
 *       addresses) with a pong (AM 2) on an endpoint back to the pinger,
 *       counts sink messages (AM 3), until SECONDS pass or SIGTERM.
 *   conn_check DEVICE ping FILE COUNT [HOLD_S [MY_FILE [WAIT_S]]]
 *       COUNT ping-pongs with the target of FILE; with HOLD_S, one more
 *       every 0.2 s for HOLD_S seconds (its own addresses in MY_FILE, for
 *       the stranger, which has WAIT_S seconds before the endpoint is
 *       made). Exits 0 if every pong came and the endpoint never failed;
 *       else prints the endpoint's error.
 *   conn_check DEVICE kill FILE BATCHES SIZE
 *       BATCHES times, SIZE requesters forked at once (forking saves each
 *       the start of a process in the emulated guest), each with an
 *       endpoint to FILE's target, then SIGKILL: half of them at once
 *       (their request is out, the answer not in), half once a sink
 *       message is flushed (the target has no endpoint of its own to
 *       them). Prints "BATCH CONNECTED TIME" a batch (TIME: of the kill,
 *       as UCX's log lines have it).
 *   conn_check DEVICE group FILE MEMBERS ROUNDS
 *       MEMBERS - 1 requesters that connect to FILE's target and stay (with
 *       the target a group of MEMBERS); then ROUNDS times one of them is
 *       killed and replaced. Prints the node's QPs and CQs (rdma res) when
 *       all are connected ("full Q C") and after each replacement ("round
 *       R Q C CONNECTED TIME", TIME: of the kill).
 *   conn_check DEVICE churn FILE ENDPOINTS MESSAGES
 *       ENDPOINTS times: an endpoint, MESSAGES sink messages (more than half
 *       the flow-control window, so that they ask for credits), destroyed
 *       at once, its grant still coming; then one endpoint sends 4 windows'
 *       worth (every one needs grants) and a ping, whose pong says how many
 *       sink messages the target got: all of them.
 *   conn_check DEVICE burst FILE COUNT
 *       COUNT endpoints to FILE's target created at once (their requests
 *       all go out together), then a sink message on each, each flushed;
 *       a ping's pong says the target got all COUNT. Exits 0 if it did and
 *       no endpoint failed.
 *   conn_check DEVICE simul ROUNDS
 *       Two ifaces of this process connect to each other ROUNDS times at
 *       about the same time (random delays, either first), exchange a
 *       message each way, flush and destroy both endpoints.
 *   conn_check DEVICE fork COUNT FORKS
 *       Two ifaces of this process exchange COUNT messages each way; FORKS
 *       times, a fork child closes everything it inherited and exits, and
 *       then the parent exchanges COUNT more each way (issue 21 item 3).
 *   conn_check DEVICE iface_first COUNT
 *       Two ifaces exchange COUNT messages each way; with COUNT more in
 *       flight, one iface closes with its endpoint open (it goes with the
 *       iface); the other side lives on (issue 21 item 4, under ASan in
 *       test/guest/sanitizers.sh).
 */
#include "guest_util.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define AM_PING     1
#define AM_PONG     2
#define AM_SINK     3
#define ADDR_MAX    48    /* an am_short carries it */
#define DEADLINE_S  120.0


typedef struct {
    uint8_t       dev_len, iface_len;
    unsigned char dev[ADDR_MAX], iface[ADDR_MAX];
} addr_t;

typedef struct {
    ucs_async_context_t *async;
    uct_worker_h        worker;
    uct_iface_h         iface;
    addr_t              addr;
    unsigned            pongs;
    unsigned            received;    /* simul: messages from the other */
    uint64_t            sink_seen;   /* in the last pong */
    unsigned            errors;
    ucs_status_t        error;
} node_t;


static uct_md_h md;
static const char *dev_name;
static volatile sig_atomic_t stop;
static uint64_t sinks;           /* target: sink messages */

/* target: the endpoints back to its pingers */
typedef struct {
    addr_t   addr;
    uct_ep_h ep;
} peer_t;
static peer_t *peers;
static unsigned num_peers;
static node_t *target_node;


static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static ucs_status_t error_handler(void *arg, uct_ep_h ep, ucs_status_t status)
{
    node_t *node = arg;

    ++node->errors;
    node->error = status;
    fprintf(stderr, "conn_check: endpoint %p failed: %s\n", (void*)ep,
            ucs_status_string(status));
    return UCS_OK;
}

static void node_open(node_t *node)
{
    uct_iface_config_t *config;
    uct_iface_params_t params;
    uct_iface_attr_t attr;
    ucs_status_t status;

    memset(node, 0, sizeof(*node));
    guest_open_worker(md, &node->async, &node->worker, &config);

    memset(&params, 0, sizeof(params));
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "rc_share";
    params.mode.device.dev_name = dev_name;
    params.err_handler          = error_handler;
    params.err_handler_arg      = node;
    params.err_handler_flags    = UCT_CB_FLAG_ASYNC;

    status = uct_iface_open(md, node->worker, &params, config, &node->iface);
    uct_config_release(config);
    if (status != UCS_OK) {
        DIE("uct_iface_open(%s): %s", dev_name, ucs_status_string(status));
    }
    uct_iface_progress_enable(node->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);

    if ((uct_iface_query(node->iface, &attr) != UCS_OK) ||
        (attr.device_addr_len > ADDR_MAX) || (attr.iface_addr_len > ADDR_MAX) ||
        (uct_iface_get_device_address(node->iface,
                                      (uct_device_addr_t*)node->addr.dev) !=
         UCS_OK) ||
        (uct_iface_get_address(node->iface,
                               (uct_iface_addr_t*)node->addr.iface) !=
         UCS_OK)) {
        DIE("cannot get the iface's addresses");
    }
    node->addr.dev_len   = attr.device_addr_len;
    node->addr.iface_len = attr.iface_addr_len;
}

static void node_close(node_t *node)
{
    uct_iface_close(node->iface);
    uct_worker_destroy(node->worker);
    ucs_async_context_destroy(node->async);
}

static uct_ep_h ep_create(node_t *node, const addr_t *addr)
{
    uct_ep_params_t params;
    ucs_status_t status;
    uct_ep_h ep;

    params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                        UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = node->iface;
    params.dev_addr   = (const uct_device_addr_t*)addr->dev;
    params.iface_addr = (const uct_iface_addr_t*)addr->iface;
    status = uct_ep_create(&params, &ep);
    if (status != UCS_OK) {
        fprintf(stderr, "conn_check: uct_ep_create: %s\n",
                ucs_status_string(status));
        return NULL;
    }
    return ep;
}

/* Sends an AM of length bytes of data, retrying while busy */
static int am_send(node_t *node, uct_ep_h ep, uint8_t id, const void *data,
                   size_t length)
{
    double end = now() + DEADLINE_S;
    ucs_status_t status;

    do {
        status = uct_ep_am_short(ep, id, 0, data, length);
        if (status == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(node->worker);
        }
    } while ((status == UCS_ERR_NO_RESOURCE) && (now() < end) &&
             (node->errors == 0));
    return (status == UCS_OK) ? 0 : -1;
}

static int flush_ep(node_t *node, uct_ep_h ep)
{
    uct_completion_t comp = {guest_completed, 1, UCS_OK};
    double end            = now() + DEADLINE_S;
    ucs_status_t status;

    do {
        status = uct_ep_flush(ep, 0, &comp);
        uct_worker_progress(node->worker);
    } while ((status == UCS_ERR_NO_RESOURCE) && (now() < end));
    if (status == UCS_INPROGRESS) {
        while ((comp.count != 0) && (now() < end) && (node->errors == 0)) {
            uct_worker_progress(node->worker);
        }
        status = (comp.count == 0) ? comp.status : UCS_ERR_TIMED_OUT;
    }
    return (status == UCS_OK) ? 0 : -1;
}

/* The address file: two lines of hex, device and iface address */
static void addr_write(const char *path, const addr_t *addr)
{
    char text[4 * ADDR_MAX + 8], *p = text;
    size_t i;

    for (i = 0; i < addr->dev_len; ++i) {
        p += sprintf(p, "%02x", addr->dev[i]);
    }
    *p++ = '\n';
    for (i = 0; i < addr->iface_len; ++i) {
        p += sprintf(p, "%02x", addr->iface[i]);
    }
    *p++ = '\n';
    guest_publish(path, text, p - text);
}

static size_t hex_read(FILE *file, unsigned char *buf)
{
    char line[4 * ADDR_MAX + 8];
    size_t n = 0;
    unsigned v;

    if (fgets(line, sizeof(line), file) == NULL) {
        return 0;
    }
    while ((n < ADDR_MAX) && (sscanf(line + 2 * n, "%2x", &v) == 1)) {
        buf[n++] = v;
    }
    return n;
}

static void addr_read(const char *path, addr_t *addr)
{
    double end = now() + 60;
    FILE *file;

    memset(addr, 0, sizeof(*addr));
    while (((file = fopen(path, "r")) == NULL) && (now() < end)) {
        usleep(50000);
    }
    if (file == NULL) {
        DIE("no address file %s", path);
    }
    addr->dev_len   = hex_read(file, addr->dev);
    addr->iface_len = hex_read(file, addr->iface);
    fclose(file);
    if ((addr->dev_len == 0) || (addr->iface_len == 0)) {
        DIE("malformed address file %s", path);
    }
}

/* ------------------------------------------------------------ target */

static uct_ep_h target_peer_ep(const addr_t *addr)
{
    unsigned i;

    for (i = 0; i < num_peers; ++i) {
        if (!memcmp(&peers[i].addr, addr, sizeof(*addr))) {
            return peers[i].ep;
        }
    }
    peers = realloc(peers, (num_peers + 1) * sizeof(*peers));
    peers[num_peers].addr = *addr;
    peers[num_peers].ep   = ep_create(target_node, addr);
    return peers[num_peers++].ep;
}

static ucs_status_t target_ping(void *arg, void *data, size_t length,
                                unsigned flags)
{
    addr_t addr;
    uct_ep_h ep;

    if (length != sizeof(uint64_t) + sizeof(addr)) {
        return UCS_OK;
    }
    memcpy(&addr, (char*)data + sizeof(uint64_t), sizeof(addr));
    ep = target_peer_ep(&addr);
    /* From the callback: no retry loop, a pinger whose pong could not go
     * now asks again */
    if (ep != NULL) {
        (void)uct_ep_am_short(ep, AM_PONG, sinks, NULL, 0);
    }
    return UCS_OK;
}

static ucs_status_t target_sink(void *arg, void *data, size_t length,
                                unsigned flags)
{
    ++sinks;
    return UCS_OK;
}

static void on_signal(int sig)
{
    stop = 1;
}

static int target(const char *path, double seconds)
{
    double end = now() + seconds;
    struct pollfd pfd;
    int event_fd;
    node_t node;
    unsigned i;

    signal(SIGTERM, on_signal);
    node_open(&node);
    target_node = &node;
    uct_iface_set_am_handler(node.iface, AM_PING, target_ping, &node, 0);
    uct_iface_set_am_handler(node.iface, AM_SINK, target_sink, &node, 0);
    addr_write(path, &node.addr);
    printf("target: serving (pid %d)\n", getpid());
    fflush(stdout);

    /* Asleep on the event fd when there is nothing to do: a busy target
     * would take one of the guest's two vCPUs from everything else */
    if (uct_iface_event_fd_get(node.iface, &event_fd) != UCS_OK) {
        DIE("uct_iface_event_fd_get failed");
    }
    pfd.fd     = event_fd;
    pfd.events = POLLIN;
    while (!stop && (now() < end)) {
        if ((uct_worker_progress(node.worker) == 0) &&
            (uct_iface_event_arm(node.iface, UCT_EVENT_SEND_COMP |
                                 UCT_EVENT_RECV) == UCS_OK)) {
            (void)poll(&pfd, 1, 100);
        }
    }

    printf("target: %u pingers, %" PRIu64 " sink messages, %u endpoint "
           "errors\n", num_peers, sinks, node.errors);
    for (i = 0; i < num_peers; ++i) {
        if (peers[i].ep != NULL) {
            uct_ep_destroy(peers[i].ep);
        }
    }
    node_close(&node);
    return 0;
}

/* ------------------------------------------------------------ pinger */

static ucs_status_t pinger_pong(void *arg, void *data, size_t length,
                                unsigned flags)
{
    node_t *node = arg;

    memcpy(&node->sink_seen, data, sizeof(uint64_t));
    ++node->pongs;
    return UCS_OK;
}

/* One ping-pong; 0 if the pong came */
static int ping_once(node_t *node, uct_ep_h ep)
{
    unsigned char msg[sizeof(addr_t)];
    unsigned pongs = node->pongs;
    double end     = now() + 10, resend = 0;

    memcpy(msg, &node->addr, sizeof(node->addr));
    while ((node->pongs == pongs) && (now() < end) && (node->errors == 0)) {
        if (now() >= resend) {
            /* The target answers from its callback, and may have had no
             * room for the pong: ask again */
            if (am_send(node, ep, AM_PING, msg, sizeof(msg)) != 0) {
                return -1;
            }
            resend = now() + 1.0;
        }
        uct_worker_progress(node->worker);
    }
    return (node->pongs != pongs) ? 0 : -1;
}

static void pinger_open(node_t *node)
{
    node_open(node);
    uct_iface_set_am_handler(node->iface, AM_PONG, pinger_pong, node, 0);
}

static int ping(const char *path, unsigned count, double hold,
                const char *my_path, double wait)
{
    unsigned i, ok = 0, tries = 0;
    double end;
    node_t node;
    addr_t addr;
    uct_ep_h ep;

    snprintf(guest_name, sizeof(guest_name), "ping %d", getpid());
    addr_read(path, &addr);
    pinger_open(&node);
    if (my_path != NULL) {
        addr_write(my_path, &node.addr);
    }
    end = now() + wait;
    while (now() < end) {
        uct_worker_progress(node.worker);
    }
    ep = ep_create(&node, &addr);
    if (ep == NULL) {
        return 1;
    }
    for (i = 0; i < count; ++i) {
        ok += ping_once(&node, ep) == 0;
    }
    end = now() + hold;
    while (now() < end) {
        ++tries;
        ok += ping_once(&node, ep) == 0;
        usleep(200000);
    }
    printf("ping: %u of %u pongs, %u endpoint errors%s%s\n", ok,
           count + tries, node.errors, node.errors ? ": " : "",
           node.errors ? ucs_status_string(node.error) : "");
    uct_ep_destroy(ep);
    node_close(&node);
    return ((ok == count + tries) && (node.errors == 0)) ? 0 : 1;
}

/* ------------------------------------------------------------ forked */

static void md_open_dev(void);

/*
 * A requester child: an endpoint to the target; connected: a sink message
 * flushed, a byte to report_fd, then progress until killed; else killed at
 * once, its request out
 */
static void UCS_F_NORETURN requester_child(const char *path, int connected,
                                           int report_fd)
{
    uint64_t payload = 0;
    node_t node;
    addr_t addr;
    uct_ep_h ep;
    char c = 1;

    double t0 = now(), t1, t2;

    snprintf(guest_name, sizeof(guest_name), "requester %d", getpid());
    md_open_dev();
    t1 = now();
    addr_read(path, &addr);
    pinger_open(&node);
    t2 = now();
    ep = ep_create(&node, &addr);
    if (ep == NULL) {
        _exit(1);
    }
    if (!connected) {
        uct_worker_progress(node.worker);
        raise(SIGKILL);
    }
    if ((am_send(&node, ep, AM_SINK, &payload, sizeof(payload)) != 0) ||
        (flush_ep(&node, ep) != 0) || (write(report_fd, &c, 1) != 1)) {
        printf("requester %d: the sink message did not go\n", getpid());
        _exit(1);
    }
    if (getenv("CONN_CHECK_TIMES") != NULL) {
        fprintf(stderr, "requester %d: md %.2f s, iface %.2f s, connected "
                "%.2f s\n", getpid(), t1 - t0, t2 - t1, now() - t2);
    }
    for (;;) {
        uct_worker_progress(node.worker);
        usleep(1000);
    }
}

static pid_t requester_fork(const char *path, int connected, int report_fd)
{
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        requester_child(path, connected, report_fd);
    } else if (pid < 0) {
        DIE("fork: %m");
    }
    return pid;
}

/* Reads the children's reports until count came or 120 s passed */
static unsigned reports_wait(int fd, unsigned count)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    double end        = now() + 120;
    unsigned got      = 0;
    char buf[64];
    ssize_t n;

    while ((got < count) && (now() < end)) {
        if (poll(&pfd, 1, 100) <= 0) {
            continue;
        }
        n = read(fd, buf, ucs_min(sizeof(buf), count - got));
        if (n <= 0) {
            break; /* every writer is gone */
        }
        got += n;
    }
    return got;
}

static void kill_wait(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static int kill_requesters(const char *path, unsigned batches,
                           unsigned size)
{
    pid_t pids[size];
    unsigned batch, k, connected;
    int fds[2];

    for (batch = 1; batch <= batches; ++batch) {
        if (pipe(fds) != 0) {
            DIE("pipe: %m");
        }
        for (k = 0; k < size; ++k) {
            pids[k] = requester_fork(path, k & 1, fds[1]);
        }
        close(fds[1]);
        connected = reports_wait(fds[0], size / 2);
        close(fds[0]);
        for (k = 0; k < size; ++k) {
            kill_wait(pids[k]);
        }
        printf("%u %u %.3f\n", batch, connected, now());
        fflush(stdout);
    }
    return 0;
}

/* The node's QPs and CQs, from rdma res's summary ("0: rxe0: pd 3 cq 25
 * qp 24 ..."): one command, which takes a second in the emulated guest */
static void node_objs(unsigned *qps, unsigned *cqs)
{
    char line[256], *p;
    FILE *f;

    *qps = *cqs = 0;
    if ((f = popen("rdma res show", "r")) == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if ((p = strstr(line, " cq ")) != NULL) {
            *cqs += strtoul(p + 4, NULL, 10);
        }
        if ((p = strstr(line, " qp ")) != NULL) {
            *qps += strtoul(p + 4, NULL, 10);
        }
    }
    pclose(f);
}

static int group_churn(const char *path, unsigned members, unsigned rounds)
{
    unsigned k, round, connected, n = members - 1;
    unsigned qps, cqs;
    double kill_time;
    pid_t pids[n];
    int fds[2];

    if (pipe(fds) != 0) {
        DIE("pipe: %m");
    }
    for (k = 0; k < n; ++k) {
        pids[k] = requester_fork(path, 1, fds[1]);
    }
    connected = reports_wait(fds[0], n);
    node_objs(&qps, &cqs);
    printf("full %u %u %u\n", qps, cqs, connected);
    fflush(stdout);

    for (round = 1; round <= rounds; ++round) {
        k         = (round - 1) % n;
        kill_time = now();
        kill_wait(pids[k]);
        pids[k]   = requester_fork(path, 1, fds[1]);
        connected = reports_wait(fds[0], 1);
        node_objs(&qps, &cqs);
        printf("round %u %u %u %u %.3f\n", round, qps, cqs, connected,
               kill_time);
        fflush(stdout);
    }

    for (k = 0; k < n; ++k) {
        kill_wait(pids[k]);
    }
    close(fds[0]);
    close(fds[1]);
    return 0;
}

/* A pinger to path's target with one endpoint that had a pong: the
 * endpoint, or NULL (said so for who); *before: the target's count of
 * sink messages then (other tests' among them) */
static uct_ep_h pinger_first(const char *path, const char *who, node_t *node,
                             addr_t *addr, uint64_t *before)
{
    uct_ep_h ep;

    addr_read(path, addr);
    pinger_open(node);
    ep = ep_create(node, addr);
    if ((ep == NULL) || (ping_once(node, ep) != 0)) {
        printf("%s: the target did not answer the first ping\n", who);
        return NULL;
    }
    *before = node->sink_seen;
    return ep;
}

static int churn(const char *path, unsigned num_eps, unsigned messages)
{
    uint64_t sent = 0, payload = 0, before;
    unsigned i, k;
    node_t node;
    addr_t addr;
    uct_ep_h ep;
    int ok;

    snprintf(guest_name, sizeof(guest_name), "churn");
    ep = pinger_first(path, "churn", &node, &addr, &before);
    if (ep == NULL) {
        return 1;
    }
    uct_ep_destroy(ep);

    for (i = 0; i < num_eps; ++i) {
        ep = ep_create(&node, &addr);
        if (ep == NULL) {
            return 1;
        }
        for (k = 0; k < messages; ++k) {
            if (am_send(&node, ep, AM_SINK, &payload, sizeof(payload)) != 0) {
                break;
            }
            ++sent;
        }
        /* Its sends acknowledged, its grant still coming: a destroy
         * cancels what is not yet sent (UCT's contract), so no destroy
         * before the flush */
        if (flush_ep(&node, ep) != 0) {
            printf("churn: endpoint %u did not flush\n", i);
            return 1;
        }
        uct_ep_destroy(ep);
    }

    /* One more: 4 windows' worth, each past the first needing grants */
    ep = ep_create(&node, &addr);
    for (k = 0; (ep != NULL) && (k < 4 * messages); ++k) {
        if (am_send(&node, ep, AM_SINK, &payload, sizeof(payload)) != 0) {
            break;
        }
        ++sent;
    }
    ok = (ep != NULL) && (flush_ep(&node, ep) == 0) &&
         (ping_once(&node, ep) == 0);
    CHECK(ok && (node.sink_seen - before == sent) && (node.errors == 0),
          "%u endpoints left with grants outstanding; then one sent %u "
          "messages, 4 windows: the target got %" PRIu64 " of %" PRIu64
          " sink messages, %u endpoint errors", num_eps, 4 * messages,
          node.sink_seen - before, sent, node.errors);
    if (ep != NULL) {
        uct_ep_destroy(ep);
    }
    node_close(&node);
    return guest_failures ? 1 : 0;
}

/* ------------------------------------------------------------ burst */

static int burst(const char *path, unsigned count)
{
    unsigned i, sent = 0, flushed = 0, pending;
    uint64_t payload = 0, before;
    uct_completion_t *comps;
    uct_ep_h first, *eps;
    ucs_status_t status;
    double end;
    node_t node;
    addr_t addr;
    double start;

    first = pinger_first(path, "burst", &node, &addr, &before);
    if (first == NULL) {
        return 1;
    }

    eps = calloc(count, sizeof(*eps));
    if (eps == NULL) {
        DIE("no memory for %u endpoints", count);
    }
    start = now();
    for (i = 0; i < count; ++i) {
        eps[i] = ep_create(&node, &addr);
        if (eps[i] == NULL) {
            break;
        }
    }
    for (i = 0; (i < count) && (eps[i] != NULL); ++i) {
        sent += am_send(&node, eps[i], AM_SINK, &payload,
                        sizeof(payload)) == 0;
    }
    /* flush_ep's completion lives on its stack: one that gives up on an
     * endpoint would leave it to the endpoint's destroy, which completes it
     * (CANCELED). These live until the endpoints are gone. */
    comps = calloc(count, sizeof(*comps));
    if (comps == NULL) {
        DIE("no memory for %u completions", count);
    }
    for (i = 0; (i < count) && (eps[i] != NULL); ++i) {
        comps[i].func   = guest_completed;
        comps[i].count  = 1;
        comps[i].status = UCS_OK;
        end             = now() + DEADLINE_S;
        while (((status = uct_ep_flush(eps[i], 0, &comps[i])) ==
                UCS_ERR_NO_RESOURCE) && (now() < end)) {
            uct_worker_progress(node.worker);
        }
        if (status == UCS_OK) {
            comps[i].count = 0;
        } else if (status != UCS_INPROGRESS) {
            comps[i].count  = 0; /* failed: counted as not flushed */
            comps[i].status = status;
        }
    }
    end = now() + DEADLINE_S;
    do {
        uct_worker_progress(node.worker);
        for (i = 0, pending = 0; (i < count) && (eps[i] != NULL); ++i) {
            pending += comps[i].count;
        }
    } while ((pending > 0) && (now() < end) && (node.errors == 0));
    for (i = 0; (i < count) && (eps[i] != NULL); ++i) {
        flushed += (comps[i].count == 0) && (comps[i].status == UCS_OK);
    }
    CHECK((ping_once(&node, first) == 0) && (node.errors == 0) &&
          (sent == count) && (flushed == count) &&
          (node.sink_seen - before == count),
          "%u endpoints to one target, connected at once: %u sent, %u "
          "flushed, the target got %" PRIu64 ", %u endpoint errors%s%s "
          "(%.1f s)", count, sent, flushed, node.sink_seen - before,
          node.errors, node.errors ? ": " : "",
          node.errors ? ucs_status_string(node.error) : "", now() - start);
    for (i = 0; (i < count) && (eps[i] != NULL); ++i) {
        uct_ep_destroy(eps[i]);
    }
    free(comps);
    free(eps);
    uct_ep_destroy(first);
    node_close(&node);
    return guest_failures ? 1 : 0;
}

/* ------------------------------------------------------------ simul */

static ucs_status_t simul_recv(void *arg, void *data, size_t length,
                               unsigned flags)
{
    ++((node_t*)arg)->received;
    return UCS_OK;
}

static void progress_for(node_t *a, node_t *b, double seconds)
{
    double end = now() + seconds;

    do {
        uct_worker_progress(a->worker);
        uct_worker_progress(b->worker);
    } while (now() < end);
}

static int simul(unsigned rounds)
{
    unsigned round, good = 0, seed = 7;
    uint64_t payload = 0;
    node_t a, b, *first, *second;
    double t_exchange = 0, t_flush = 0, t0, t1;
    uct_ep_h ab, ba;
    double end;
    int ok;

    snprintf(guest_name, sizeof(guest_name), "simul");
    node_open(&a);
    node_open(&b);
    uct_iface_set_am_handler(a.iface, AM_SINK, simul_recv, &a, 0);
    uct_iface_set_am_handler(b.iface, AM_SINK, simul_recv, &b, 0);

    for (round = 0; round < rounds; ++round) {
        first  = (rand_r(&seed) & 1) ? &a : &b;
        second = (first == &a) ? &b : &a;
        progress_for(&a, &b, (rand_r(&seed) % 2000) * 1e-6);
        /* The second's endpoint comes before, with or after the first's
         * request: 0 to 2 ms, while both progress */
        if (first == &a) {
            ab = ep_create(&a, &b.addr);
            progress_for(&a, &b, (rand_r(&seed) % 2000) * 1e-6);
            ba = ep_create(&b, &a.addr);
        } else {
            ba = ep_create(&b, &a.addr);
            progress_for(&a, &b, (rand_r(&seed) % 2000) * 1e-6);
            ab = ep_create(&a, &b.addr);
        }
        (void)second;
        if ((ab == NULL) || (ba == NULL)) {
            break;
        }

        t0         = now();
        a.received = b.received = 0;
        ok  = am_send(&a, ab, AM_SINK, &payload, sizeof(payload)) == 0;
        ok &= am_send(&b, ba, AM_SINK, &payload, sizeof(payload)) == 0;
        end = now() + 30;
        while (ok && ((a.received == 0) || (b.received == 0)) &&
               (now() < end)) {
            progress_for(&a, &b, 0);
        }
        ok &= (a.received == 1) && (b.received == 1);
        t1  = now();
        ok &= (flush_ep(&a, ab) == 0) && (flush_ep(&b, ba) == 0);
        good       += ok;
        t_exchange += t1 - t0;
        t_flush    += now() - t1;

        uct_ep_destroy(ab);
        uct_ep_destroy(ba);
        progress_for(&a, &b, 0.001);
    }
    progress_for(&a, &b, 0.5);
    printf("simul: a round took %.1f ms to connect and exchange, %.1f ms to "
           "flush\n", 1e3 * t_exchange / ucs_max(round, 1),
           1e3 * t_flush / ucs_max(round, 1));

    CHECK((good == rounds) && (a.errors == 0) && (b.errors == 0),
          "%u of %u rounds of simultaneous connects passed a message each "
          "way and flushed (endpoint errors %u, %u)", good, rounds, a.errors,
          b.errors);
    node_close(&a);
    node_close(&b);
    return guest_failures ? 1 : 0;
}

/* ------------------------------------------------------------ teardown */

static size_t pack_payload(void *dest, void *arg)
{
    memset(dest, 0x5a, 512);
    return 512;
}

/* count 512-byte bcopy AMs each way (their buffers and the receiver's are
 * in the slice, under its MR), every one arrived and flushed */
static int exchange(node_t *a, node_t *b, uct_ep_h ab, uct_ep_h ba,
                    unsigned count)
{
    double end = now() + DEADLINE_S;
    unsigned i;
    ssize_t len;

    a->received = b->received = 0;
    for (i = 0; i < 2 * count; ++i) {
        do {
            len = uct_ep_am_bcopy((i & 1) ? ba : ab, AM_SINK, pack_payload,
                                  NULL, 0);
            progress_for(a, b, 0);
        } while ((len == UCS_ERR_NO_RESOURCE) && (now() < end) &&
                 (a->errors + b->errors == 0));
        if (len != 512) {
            fprintf(stderr, "conn_check: am_bcopy %u: %s\n", i,
                    ucs_status_string((ucs_status_t)ucs_min(len, 0)));
            return -1;
        }
    }
    while (((a->received < count) || (b->received < count)) &&
           (now() < end) && (a->errors + b->errors == 0)) {
        progress_for(a, b, 0);
    }
    return ((a->received == count) && (b->received == count) &&
            (flush_ep(a, ab) == 0) && (flush_ep(b, ba) == 0)) ? 0 : -1;
}

/* Two ifaces of this process that count each other's sink messages, and an
 * endpoint each way */
static void pair_open(node_t *a, node_t *b, uct_ep_h *ab, uct_ep_h *ba)
{
    node_open(a);
    node_open(b);
    uct_iface_set_am_handler(a->iface, AM_SINK, simul_recv, a, 0);
    uct_iface_set_am_handler(b->iface, AM_SINK, simul_recv, b, 0);
    *ab = ep_create(a, &b->addr);
    *ba = ep_create(b, &a->addr);
    if ((*ab == NULL) || (*ba == NULL)) {
        DIE("cannot create the endpoints");
    }
}

/*
 * Issue 21 item 3: a fork child that closes everything it inherited (its
 * endpoints, ifaces, workers and md: Python's multiprocessing, a library
 * that re-initialises after fork) must leave the parent's verbs objects
 * alone, and the parent's async handlers: the parent goes on exchanging
 * messages afterwards. FORKS children one after another, since the fork
 * meets the parent's async thread wherever it is (a child that waited for
 * a lock that thread held at the fork hung in about 1 fork of 3). The
 * async contexts are UCX's own and not fork-safe (ucs_async_thread_stop in
 * a child takes the parent's wakeup pipe out of the shared epoll set and
 * joins a thread the child does not have): the children leave them.
 */
static int fork_close(unsigned count, unsigned forks)
{
    unsigned closed = 0, k;
    node_t a, b;
    uct_ep_h ab, ba;
    int status;
    pid_t pid;

    snprintf(guest_name, sizeof(guest_name), "teardown fork");
    pair_open(&a, &b, &ab, &ba);
    CHECK(exchange(&a, &b, ab, ba, count) == 0,
          "before the fork: %u messages each way", count);

    for (k = 0; k < forks; ++k) {
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid == 0) {
            uct_ep_destroy(ab);
            uct_ep_destroy(ba);
            uct_iface_close(a.iface);
            uct_iface_close(b.iface);
            uct_worker_destroy(a.worker);
            uct_worker_destroy(b.worker);
            uct_md_close(md);
            fflush(stdout); /* UCX's log: whole lines, not a cut buffer */
            fflush(stderr);
            _exit(0);
        }
        if ((pid > 0) && (waitpid(pid, &status, 0) == pid) &&
            WIFEXITED(status) && (WEXITSTATUS(status) == 0) &&
            (exchange(&a, &b, ab, ba, count) == 0)) {
            ++closed;
        }
    }
    CHECK(closed == forks, "%u of %u fork children closed their endpoints, "
          "ifaces, workers and md and exited 0, and after each the parent "
          "exchanged %u messages each way, flushed (endpoint errors %u, %u)",
          closed, forks, count, a.errors, b.errors);
    uct_ep_destroy(ab);
    uct_ep_destroy(ba);
    node_close(&a);
    node_close(&b);
    return guest_failures ? 1 : 0;
}

/*
 * Issue 21 item 4: the iface closed before its endpoints, with messages in
 * flight both ways: its endpoints go with it, and its QPs stop before its
 * buffers go (the sanitizers test runs this under ASan). The other side
 * sees its peer vanish, and lives.
 */
static int iface_first(unsigned count)
{
    node_t a, b;
    uct_ep_h ab, ba;
    unsigned i;

    snprintf(guest_name, sizeof(guest_name), "teardown iface_first");
    pair_open(&a, &b, &ab, &ba);
    CHECK(exchange(&a, &b, ab, ba, count) == 0, "%u messages each way",
          count);

    /* In flight, not waited for: as many as the endpoints take */
    for (i = 0; i < count; ++i) {
        (void)uct_ep_am_bcopy(ab, AM_SINK, pack_payload, NULL, 0);
        (void)uct_ep_am_bcopy(ba, AM_SINK, pack_payload, NULL, 0);
    }
    uct_worker_progress(b.worker);

    /* The iface takes its endpoints with it (as UCX's tcp iface does): ab
     * is not the user's to destroy afterwards */
    uct_iface_close(a.iface);
    uct_worker_destroy(a.worker);
    ucs_async_context_destroy(a.async);
    progress_for(&b, &b, 0.5);
    CHECK(1, "iface a closed with its endpoint open and messages in flight");

    progress_for(&b, &b, 0.5);
    uct_ep_destroy(ba);
    node_close(&b);
    CHECK(1, "the other side lived on and closed in order");
    return guest_failures ? 1 : 0;
}

/* ------------------------------------------------------------ main */

/* The md is the device, the iface its port: rxe0 of rxe0:1 */
static void md_open_dev(void)
{
    uct_md_config_t *md_config;
    char md_name[64], *colon;

    snprintf(md_name, sizeof(md_name), "%s", dev_name);
    colon = strchr(md_name, ':');
    if (colon != NULL) {
        *colon = '\0';
    }
    if ((uct_md_config_read(guest_ibshare_component(), NULL, NULL,
                            &md_config) != UCS_OK) ||
        (uct_md_open(guest_ibshare_component(), md_name, md_config, &md) !=
         UCS_OK)) {
        DIE("no ibshare md for %s", md_name);
    }
    uct_config_release(md_config);
}

int main(int argc, char **argv)
{
    const char *mode;
    int ret;

    if (argc < 3) {
        fprintf(stderr, "usage: conn_check DEVICE "
                "target|ping|kill|group|churn|burst|simul|fork|iface_first "
                "ARGS...\n");
        return 2;
    }
    dev_name = argv[1];
    mode     = argv[2];
    snprintf(guest_name, sizeof(guest_name), "conn_check %s", mode);

    /* The modules are loaded here, once: forked requesters open only the
     * md (the node group, the device) */
    (void)guest_ibshare_component();
    if (!strcmp(mode, "kill") && (argc == 6)) {
        return kill_requesters(argv[3], atoi(argv[4]), atoi(argv[5]));
    } else if (!strcmp(mode, "group") && (argc == 6)) {
        return group_churn(argv[3], atoi(argv[4]), atoi(argv[5]));
    }

    md_open_dev();
    if (!strcmp(mode, "target") && (argc == 5)) {
        ret = target(argv[3], atof(argv[4]));
    } else if (!strcmp(mode, "ping") && (argc >= 5) && (argc <= 8)) {
        ret = ping(argv[3], atoi(argv[4]), (argc >= 6) ? atof(argv[5]) : 0,
                   (argc >= 7) ? argv[6] : NULL,
                   (argc == 8) ? atof(argv[7]) : 0);
    } else if (!strcmp(mode, "churn") && (argc == 6)) {
        ret = churn(argv[3], atoi(argv[4]), atoi(argv[5]));
    } else if (!strcmp(mode, "burst") && (argc == 5)) {
        ret = burst(argv[3], atoi(argv[4]));
    } else if (!strcmp(mode, "simul") && (argc == 4)) {
        ret = simul(atoi(argv[3]));
    } else if (!strcmp(mode, "fork") && (argc == 5)) {
        ret = fork_close(atoi(argv[3]), atoi(argv[4]));
    } else if (!strcmp(mode, "iface_first") && (argc == 4)) {
        ret = iface_first(atoi(argv[3]));
    } else {
        fprintf(stderr, "conn_check: bad arguments for %s\n", mode);
        ret = 2;
    }
    /* Leaves the node group: only killed processes count as dead */
    uct_md_close(md);
    return ret;
}
