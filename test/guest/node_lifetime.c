/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * One process of the node group lifetime test (test/guest/node_lifetime.sh):
 * joins the group of its job (the ibshare md and an rc_share iface on the
 * device), allocates a buffer from its slice and then, until it is told to
 * leave, talks to its peers without a pause: for each peer, in every round,
 * a put_zcopy of a pattern that changes every round into the peer's buffer,
 * in the region reserved for this sender, a flush, a get_zcopy of the same
 * region back and a byte-for-byte comparison. No synchronization between
 * the processes is needed: each sender owns its region in every buffer.
 * The peers run side by side (one state machine each): a dead peer holds up
 * nobody but itself.
 *
 *   node_lifetime DIR NAME INDEX DEVICE:PORT shared|fallback founder|member
 *                 [PEER...]
 *
 * INDEX (0..7) is the sender's region in its peers' buffers. The mode and
 * the role give the registrations the process must make: in fallback mode
 * one (its slice), in shared mode one in the founder (the pool) and none in
 * the others (they import it).
 *
 * Files in DIR (the script's side in node_lifetime.sh):
 *   addr.NAME      written: how to reach this process
 *   peers.NAME     read every second: more peers (names, whitespace apart)
 *   progress.NAME  written every second: rounds, per peer too
 *   leave.NAME     read: leave (so does DIR/stop)
 *   quiet.NAME     written when leaving: this process issues nothing more;
 *                  it then waits for its peers' quiet files before it
 *                  closes its endpoints (their last rounds may still target
 *                  its buffer)
 *   killed.NAME    read: the script killed NAME, at the time it holds
 *                  (seconds since the epoch); a peer failure without it is
 *                  an error
 *
 * A peer is found dead by the iface's error handler, by an operation's
 * error, or by uct_ep_check, called on every peer's endpoint every second;
 * the process reports "peer X failed: STATUS", drops the peer and goes on
 * with the others. Every wait has a deadline. At the end it prints
 * "rounds: N errors: M" and "registrations: N", and checks that leaving
 * closed every fd it opened.
 */
#define _GNU_SOURCE
#include "guest_util.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#define REGION        65536   /* one sender's part of a buffer */
#define MAX_SENDERS   8       /* regions in a buffer: INDEX < MAX_SENDERS */
#define MAX_PEERS     6
#define ADDR_MAX      256
#define NAME_MAX_LEN  32
#define OP_SECONDS    60.0    /* a round's operations complete or fail */
#define ADDR_SECONDS  60.0    /* a named peer publishes its address */
#define QUIET_SECONDS 30.0    /* peers go quiet once told to leave */
#define CHECK_PERIOD  1.0     /* uct_ep_check on every endpoint */
#define TICK_PERIOD   1.0     /* progress file, peers file, leave files */

static const char *my_name = "?";



typedef struct {
    uint64_t  buffer;       /* MAX_SENDERS regions of REGION bytes */
    uint32_t  index;
    int32_t   pid;
    uint32_t  dev_len, iface_len;
    uint8_t   dev[ADDR_MAX], iface[ADDR_MAX], rkey[ADDR_MAX];
} member_addr_t;

typedef enum {
    PEER_WAIT_ADDR,  /* named, its address not yet published */
    PEER_IDLE,       /* between rounds */
    PEER_PUT,        /* put posted, flush to post */
    PEER_PUT_WAIT,   /* put and flush posted */
    PEER_GET,        /* get to post */
    PEER_GET_WAIT,   /* get posted */
    PEER_DROPPED     /* failed and reported, or never reached */
} peer_state_t;

typedef struct {
    char              name[NAME_MAX_LEN];
    int               slot;           /* our local source and destination */
    peer_state_t      state;
    double            named_at;
    member_addr_t     addr;
    uct_ep_h          ep;
    uct_rkey_bundle_t rkey;
    int               have_rkey;
    uct_completion_t  put_comp, flush_comp, get_comp;
    uint64_t          round;          /* the round in flight */
    unsigned long     rounds;         /* completed and checked */
    double            op_deadline;
    double            last_check;
    /* Failure */
    ucs_status_t      fail_status;    /* UCS_OK: none seen */
    const char        *fail_how;
    double            fail_at;
    char              fail_line[256];
} peer_t;

static const char *dir;
static uct_worker_h worker;
static uct_component_h component;
static uct_iface_h iface;
static uct_allocated_memory_t mem;
static unsigned my_index;
static peer_t peers[MAX_PEERS];
static int num_peers;
static unsigned long rounds_done, errors;


static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static void path_of(char *path, size_t max, const char *what,
                    const char *name)
{
    snprintf(path, max, "%s/%s.%s", dir, what, name);
}

static int file_exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

static void publish(const char *what, const void *data, size_t length)
{
    char path[512];

    path_of(path, sizeof(path), what, my_name);
    guest_publish(path, data, length);
}


/* Our region in every peer's buffer, and our local copies of it */
static uint8_t *local_src(const peer_t *peer)
{
    return (uint8_t*)mem.address + (MAX_SENDERS + 2 * peer->slot) * REGION;
}

static uint8_t *local_dst(const peer_t *peer)
{
    return local_src(peer) + REGION;
}

static uint64_t remote_region(const peer_t *peer)
{
    return peer->addr.buffer + (uint64_t)my_index * REGION;
}

/* Different in every round, for every sender and every peer */
static void fill_pattern(uint8_t *buf, const peer_t *peer)
{
    uint64_t x = (peer->round + 1) * 0x9e3779b97f4a7c15ull ^
                 ((uint64_t)my_index << 56) ^ ((uint64_t)peer->slot << 48) ^
                 0x5bd1e995ull;
    uint64_t *words = (uint64_t*)buf;
    size_t i;

    for (i = 0; i < REGION / sizeof(*words); ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        words[i] = x;
    }
}

/* When the script killed NAME, or 0 if it did not */
static double killed_at(const char *name)
{
    char path[512];
    double when = 0;
    FILE *file;

    path_of(path, sizeof(path), "killed", name);
    file = fopen(path, "r");
    if (file == NULL) {
        return 0;
    }
    if (fscanf(file, "%lf", &when) != 1) {
        when = 0;
    }
    fclose(file);
    return when;
}

static int peer_quiet(const peer_t *peer)
{
    char path[512];

    path_of(path, sizeof(path), "quiet", peer->name);
    return file_exists(path);
}

static peer_t *peer_of_ep(uct_ep_h ep)
{
    int i;

    for (i = 0; i < num_peers; ++i) {
        if ((peers[i].ep == ep) && (peers[i].state != PEER_DROPPED)) {
            return &peers[i];
        }
    }
    return NULL;
}

/* Records the first failure seen of a peer; drive_peer() reports it */
static void peer_failed(peer_t *peer, ucs_status_t status, const char *how)
{
    if (peer->fail_status != UCS_OK) {
        return;
    }
    peer->fail_status = status;
    peer->fail_how    = how;
    peer->fail_at     = now();
}

static ucs_status_t error_handler(void *arg, uct_ep_h ep, ucs_status_t status)
{
    peer_t *peer = peer_of_ep(ep);

    if (peer == NULL) {
        printf("error handler: %s on an endpoint of no peer (%p)\n",
               ucs_status_string(status), (void*)ep);
        fflush(stdout);
        ++errors;
        return UCS_OK;
    }
    peer_failed(peer, status, "the iface's error handler");
    return UCS_OK;
}

static void add_peer(const char *name)
{
    peer_t *peer;
    int i;

    if (!strcmp(name, my_name)) {
        return;
    }
    for (i = 0; i < num_peers; ++i) {
        if (!strcmp(peers[i].name, name)) {
            return;
        }
    }
    if (num_peers == MAX_PEERS) {
        DIE("more than %d peers", MAX_PEERS);
    }
    peer = &peers[num_peers];
    memset(peer, 0, sizeof(*peer));
    snprintf(peer->name, sizeof(peer->name), "%s", name);
    peer->slot     = num_peers++;
    peer->state    = PEER_WAIT_ADDR;
    peer->named_at = now();
    peer->put_comp.func = peer->flush_comp.func = peer->get_comp.func =
                          guest_completed;
    printf("peer %s added\n", name);
    fflush(stdout);
}

static void read_peers_file(void)
{
    char path[512], name[NAME_MAX_LEN];
    FILE *file;

    path_of(path, sizeof(path), "peers", my_name);
    file = fopen(path, "r");
    if (file == NULL) {
        return;
    }
    while (fscanf(file, "%31s", name) == 1) {
        add_peer(name);
    }
    fclose(file);
}

/* The peer's address is published: its endpoint and key */
static int connect_peer(peer_t *peer)
{
    uct_ep_params_t ep_params;
    char path[512];
    ucs_status_t status;
    FILE *file;
    size_t got;

    path_of(path, sizeof(path), "addr", peer->name);
    file = fopen(path, "r");
    if (file == NULL) {
        return 0;
    }
    got = fread(&peer->addr, 1, sizeof(peer->addr), file);
    fclose(file);
    if (got != sizeof(peer->addr)) {
        DIE("%s: %zu bytes, not %zu", path, got, sizeof(peer->addr));
    }
    if (peer->addr.index >= MAX_SENDERS) {
        DIE("%s: index %u", path, peer->addr.index);
    }

    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                           UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = iface;
    ep_params.dev_addr   = (void*)peer->addr.dev;
    ep_params.iface_addr = (void*)peer->addr.iface;
    status = uct_ep_create(&ep_params, &peer->ep);
    if (status != UCS_OK) {
        DIE("uct_ep_create to %s: %s", peer->name, ucs_status_string(status));
    }
    status = uct_rkey_unpack(component, peer->addr.rkey, &peer->rkey);
    if (status != UCS_OK) {
        DIE("uct_rkey_unpack of %s's key: %s", peer->name,
            ucs_status_string(status));
    }
    peer->have_rkey  = 1;
    peer->state      = PEER_IDLE;
    peer->last_check = now();
    printf("peer %s (pid %d, index %u): endpoint created\n", peer->name,
           (int)peer->addr.pid, peer->addr.index);
    fflush(stdout);
    return 1;
}

static void release_peer(peer_t *peer)
{
    if (peer->have_rkey) {
        uct_rkey_release(component, &peer->rkey);
        peer->have_rkey = 0;
    }
    if (peer->ep != NULL) {
        /* Completes what is outstanding with CANCELED */
        uct_ep_destroy(peer->ep);
        peer->ep = NULL;
    }
    peer->state = PEER_DROPPED;
}

/* Reports a failure and drops the peer */
static void drop_failed_peer(peer_t *peer)
{
    double killed = killed_at(peer->name);
    char since[96];

    if (killed != 0) {
        snprintf(since, sizeof(since), "%.1f s after it was killed",
                 peer->fail_at - killed);
    } else {
        snprintf(since, sizeof(since), "it was not killed");
    }
    snprintf(peer->fail_line, sizeof(peer->fail_line),
             "peer %s failed: %s (seen by %s, %s; after %lu rounds)",
             peer->name, ucs_status_string(peer->fail_status),
             peer->fail_how, since, peer->rounds);
    printf("%s\n", peer->fail_line);
    if (killed != 0) {
        printf("peer %s report time: %.1f s\n", peer->name,
               peer->fail_at - killed);
    } else if (peer_quiet(peer)) {
        /* It left after its last round: nothing was lost */
        printf("(peer %s had left)\n", peer->name);
    } else {
        printf("FAIL: node_lifetime %s: peer %s failed without being "
               "killed\n", my_name, peer->name);
        ++errors;
    }
    fflush(stdout);
    release_peer(peer);
}

static void op_failed(peer_t *peer, const char *what, ucs_status_t status)
{
    peer_failed(peer, status, what);
}

/* Whether the completion is done; an error in it fails the peer */
static int comp_done(peer_t *peer, uct_completion_t *comp, const char *what)
{
    if (comp->count > 0) {
        return 0;
    }
    if (comp->status != UCS_OK) {
        op_failed(peer, what, comp->status);
    }
    return 1;
}

/* Runs the peer's round as far as it goes now; returns whether it moved */
static int drive_peer(peer_t *peer, int leaving)
{
    ucs_status_t status;
    uct_iov_t iov;
    size_t i;
    int bad;

    if (peer->state == PEER_DROPPED) {
        return 0;
    }

    if (peer->state == PEER_WAIT_ADDR) {
        if (connect_peer(peer)) {
            return 1;
        }
        if (now() > peer->named_at + ADDR_SECONDS) {
            CHECK(0, "peer %s published no address in %.0f s", peer->name,
                  ADDR_SECONDS);
            peer->state = PEER_DROPPED;
        }
        return 0;
    }

    if (peer->fail_status != UCS_OK) {
        drop_failed_peer(peer);
        return 1;
    }

    if ((peer->state != PEER_IDLE) && (now() > peer->op_deadline)) {
        printf("FAIL: node_lifetime %s: peer %s: round %" PRIu64 " did not "
               "complete in %.0f s (state %d)\n", my_name, peer->name,
               peer->round, OP_SECONDS, (int)peer->state);
        fflush(stdout);
        ++errors;
        peer_failed(peer, UCS_ERR_TIMED_OUT, "the round's deadline");
        drop_failed_peer(peer);
        return 1;
    }

    iov.memh   = mem.memh;
    iov.stride = 0;
    iov.count  = 1;
    iov.length = REGION;

    switch (peer->state) {
    case PEER_IDLE:
        if (leaving) {
            return 0;
        }
        fill_pattern(local_src(peer), peer);
        peer->op_deadline     = now() + OP_SECONDS;
        peer->put_comp.count  = 1;
        peer->put_comp.status = UCS_OK;
        iov.buffer = local_src(peer);
        status = uct_ep_put_zcopy(peer->ep, &iov, 1, remote_region(peer),
                                  peer->rkey.rkey, &peer->put_comp);
        if (status == UCS_ERR_NO_RESOURCE) {
            return 0;
        } else if (status == UCS_OK) {
            peer->put_comp.count = 0;
        } else if (status != UCS_INPROGRESS) {
            op_failed(peer, "put_zcopy", status);
            return 1;
        }
        peer->state = PEER_PUT;
        /* fall through */
    case PEER_PUT:
        peer->flush_comp.count  = 1;
        peer->flush_comp.status = UCS_OK;
        status = uct_ep_flush(peer->ep, 0, &peer->flush_comp);
        if (status == UCS_ERR_NO_RESOURCE) {
            return 1;
        } else if (status == UCS_OK) {
            peer->flush_comp.count = 0;
        } else if (status != UCS_INPROGRESS) {
            op_failed(peer, "flush", status);
            return 1;
        }
        peer->state = PEER_PUT_WAIT;
        /* fall through */
    case PEER_PUT_WAIT:
        if (!comp_done(peer, &peer->put_comp, "put_zcopy's completion") ||
            !comp_done(peer, &peer->flush_comp, "flush's completion")) {
            return 0;
        }
        if (peer->fail_status != UCS_OK) {
            return 1;
        }
        peer->state = PEER_GET;
        /* fall through */
    case PEER_GET:
        memset(local_dst(peer), 0, REGION);
        peer->get_comp.count  = 1;
        peer->get_comp.status = UCS_OK;
        iov.buffer = local_dst(peer);
        status = uct_ep_get_zcopy(peer->ep, &iov, 1, remote_region(peer),
                                  peer->rkey.rkey, &peer->get_comp);
        if (status == UCS_ERR_NO_RESOURCE) {
            return 1;
        } else if (status == UCS_OK) {
            peer->get_comp.count = 0;
        } else if (status != UCS_INPROGRESS) {
            op_failed(peer, "get_zcopy", status);
            return 1;
        }
        peer->state = PEER_GET_WAIT;
        /* fall through */
    case PEER_GET_WAIT:
        if (!comp_done(peer, &peer->get_comp, "get_zcopy's completion")) {
            return 0;
        }
        if (peer->fail_status != UCS_OK) {
            return 1;
        }
        for (i = 0, bad = 0; i < REGION; ++i) {
            bad += local_dst(peer)[i] != local_src(peer)[i];
        }
        if (bad != 0) {
            printf("FAIL: node_lifetime %s: peer %s round %" PRIu64 ": %d "
                   "of %d bytes read back differ from what was put\n",
                   my_name, peer->name, peer->round, bad, REGION);
            fflush(stdout);
            ++errors;
        }
        ++peer->round;
        ++peer->rounds;
        ++rounds_done;
        peer->state = PEER_IDLE;
        return 1;
    default:
        return 0;
    }
}

static void check_peers(double t)
{
    ucs_status_t status;
    int i;

    for (i = 0; i < num_peers; ++i) {
        if ((peers[i].state == PEER_WAIT_ADDR) ||
            (peers[i].state == PEER_DROPPED) ||
            (peers[i].fail_status != UCS_OK) ||
            (t < peers[i].last_check + CHECK_PERIOD)) {
            continue;
        }
        peers[i].last_check = t;
        status = uct_ep_check(peers[i].ep, 0, NULL);
        if ((status != UCS_OK) && (status != UCS_ERR_NO_RESOURCE)) {
            op_failed(&peers[i], "uct_ep_check", status);
        }
    }
}

static void write_progress(int leaving)
{
    char text[4096];
    size_t len;
    int i;

    len = snprintf(text, sizeof(text), "rounds %lu errors %lu leaving %d "
                   "time %.3f\n", rounds_done, errors, leaving, now());
    for (i = 0; (i < num_peers) && (len < sizeof(text)); ++i) {
        len += snprintf(text + len, sizeof(text) - len,
                        "peer %s rounds %lu %s\n", peers[i].name,
                        peers[i].rounds,
                        (peers[i].state == PEER_WAIT_ADDR) ? "waiting" :
                        (peers[i].state != PEER_DROPPED) ? "ok" :
                        (peers[i].fail_status != UCS_OK) ? "failed" :
                        "dropped");
    }
    publish("progress", text, ucs_min(len, sizeof(text) - 1));
}

static int told_to_leave(void)
{
    char path[512];

    path_of(path, sizeof(path), "leave", my_name);
    if (file_exists(path)) {
        return 1;
    }
    snprintf(path, sizeof(path), "%s/stop", dir);
    return file_exists(path);
}

static double left_at; /* when the process was told to leave */

/* Talks until told to leave, then until every live peer is quiet */
static void run(void)
{
    double t, next_tick = 0, quiet_deadline = 0;
    int leaving = 0, quiet = 0, moved, i, busy, waiting;

    for (;;) {
        moved = uct_worker_progress(worker) != 0;
        for (i = 0; i < num_peers; ++i) {
            moved |= drive_peer(&peers[i], leaving);
        }

        t = now();
        if (t >= next_tick) {
            next_tick = t + TICK_PERIOD;
            if (!leaving) {
                read_peers_file();
                if (told_to_leave()) {
                    leaving        = 1;
                    left_at        = t;
                    quiet_deadline = t + QUIET_SECONDS;
                    printf("leaving after %lu rounds\n", rounds_done);
                    fflush(stdout);
                }
            }
            write_progress(leaving);
        }
        check_peers(t);

        if (leaving) {
            for (i = 0, busy = 0, waiting = 0; i < num_peers; ++i) {
                busy    += (peers[i].state != PEER_IDLE) &&
                           (peers[i].state != PEER_DROPPED) &&
                           (peers[i].state != PEER_WAIT_ADDR);
                waiting += (peers[i].state == PEER_IDLE) &&
                           !peer_quiet(&peers[i]);
            }
            if (!quiet && (busy == 0)) {
                publish("quiet", "", 0);
                quiet = 1;
            }
            if (quiet && (waiting == 0)) {
                break;
            }
            if (t > quiet_deadline) {
                for (i = 0; i < num_peers; ++i) {
                    if ((peers[i].state != PEER_DROPPED) &&
                        ((peers[i].state != PEER_IDLE) ||
                         !peer_quiet(&peers[i]))) {
                        CHECK(0, "peer %s: not quiet %.0f s after we were "
                              "told to leave (state %d)", peers[i].name,
                              QUIET_SECONDS, (int)peers[i].state);
                    }
                }
                break;
            }
        }

        if (!moved) {
            usleep(1000); /* leaves the guest's CPUs to the others */
        }
    }
    write_progress(leaving);
}

int main(int argc, char **argv)
{
    uct_iface_params_t iface_params;
    uct_mem_alloc_params_t alloc;
    uct_iface_config_t *iface_config;
    uct_md_config_t *md_config;
    uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    member_addr_t self;
    uct_md_attr_t md_attr;
    uct_iface_attr_t attr;
    ucs_async_context_t *async;
    unsigned long regs, expected;
    ucs_status_t status;
    char md_name[64], *colon;
    int shared, founder, fds, i;
    double started = now();
    uct_md_h md;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((argc < 7) ||
        (strcmp(argv[5], "shared") && strcmp(argv[5], "fallback")) ||
        (strcmp(argv[6], "founder") && strcmp(argv[6], "member"))) {
        fprintf(stderr, "usage: %s DIR NAME INDEX DEVICE:PORT "
                "shared|fallback founder|member [PEER...]\n", argv[0]);
        return 2;
    }
    dir      = argv[1];
    my_name  = argv[2];
    snprintf(guest_name, sizeof(guest_name), "node_lifetime %s", my_name);
    my_index = (unsigned)atoi(argv[3]);
    shared   = !strcmp(argv[5], "shared");
    founder  = !strcmp(argv[6], "founder");
    if (my_index >= MAX_SENDERS) {
        DIE("INDEX %u: want 0 to %d", my_index, MAX_SENDERS - 1);
    }
    snprintf(md_name, sizeof(md_name), "%s", argv[4]);
    colon = strchr(md_name, ':');
    if (colon != NULL) {
        *colon = '\0';
    }
    expected = (shared && !founder) ? 0 : 1;

    component = guest_ibshare_component();
    fds       = guest_open_fds();
    if ((uct_md_config_read(component, NULL, NULL, &md_config) != UCS_OK) ||
        (uct_md_open(component, md_name, md_config, &md) != UCS_OK)) {
        DIE("cannot open md %s", md_name);
    }
    uct_config_release(md_config);
    if ((uct_md_query(md, &md_attr) != UCS_OK) ||
        (md_attr.rkey_packed_size > ADDR_MAX)) {
        DIE("uct_md_query, or a packed key over %d bytes", ADDR_MAX);
    }

    guest_open_worker(md, &async, &worker, &iface_config);

    /* Joins the group */
    memset(&iface_params, 0, sizeof(iface_params));
    iface_params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                        UCT_IFACE_PARAM_FIELD_DEVICE |
                                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    iface_params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    iface_params.mode.device.tl_name  = "rc_share";
    iface_params.mode.device.dev_name = argv[4];
    iface_params.err_handler          = error_handler;
    iface_params.err_handler_arg      = NULL;
    iface_params.err_handler_flags    = 0; /* from progress */
    status = uct_iface_open(md, worker, &iface_params, iface_config, &iface);
    uct_config_release(iface_config);
    if (status != UCS_OK) {
        DIE("uct_iface_open(rc_share/%s): %s", argv[4],
            ucs_status_string(status));
    }
    uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    if (uct_iface_query(iface, &attr) != UCS_OK) {
        DIE("uct_iface_query");
    }
    CHECK(attr.cap.flags & UCT_IFACE_FLAG_EP_CHECK,
          "the iface has ep_check (UCT_IFACE_FLAG_EP_CHECK)");

    regs = guest_registrations();
    CHECK(regs == expected, "joined the group (%s mode, %s) in %.1f s after "
          "%lu registration(s), expected %lu", argv[5], argv[6],
          now() - started, regs, expected);

    /* The buffer, from the slice: MAX_SENDERS regions for the senders, then
     * a source and a destination for each peer */
    memset(&alloc, 0, sizeof(alloc));
    alloc.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_MDS |
                       UCT_MEM_ALLOC_PARAM_FIELD_FLAGS;
    alloc.flags      = UCT_MD_MEM_ACCESS_ALL;
    alloc.mds.mds    = &md;
    alloc.mds.count  = 1;
    status = uct_mem_alloc((MAX_SENDERS + 2 * MAX_PEERS) * REGION, &method, 1,
                           &alloc, &mem);
    if (status != UCS_OK) {
        DIE("uct_mem_alloc(md ibshare): %s", ucs_status_string(status));
    }
    CHECK((mem.method == UCT_ALLOC_METHOD_MD) && (mem.md == md),
          "the buffer comes from the ibshare md (%p, %zu bytes)",
          mem.address, mem.length);
    CHECK(guest_registrations() == regs, "allocating from the slice registered "
          "nothing (%lu in all)", guest_registrations());
    memset(mem.address, 0, mem.length);

    memset(&self, 0, sizeof(self));
    self.buffer    = (uintptr_t)mem.address;
    self.index     = my_index;
    self.pid       = (int32_t)getpid();
    self.dev_len   = attr.device_addr_len;
    self.iface_len = attr.iface_addr_len;
    if ((attr.device_addr_len > ADDR_MAX) || (attr.iface_addr_len > ADDR_MAX)) {
        DIE("addresses over %d bytes", ADDR_MAX);
    }
    if ((uct_iface_get_device_address(iface, (void*)self.dev) != UCS_OK) ||
        (uct_iface_get_address(iface, (void*)self.iface) != UCS_OK) ||
        (uct_md_mkey_pack(md, mem.memh, self.rkey) != UCS_OK)) {
        DIE("cannot get our addresses");
    }
    for (i = 7; i < argc; ++i) {
        add_peer(argv[i]);
    }
    write_progress(0);
    publish("addr", &self, sizeof(self));
    printf("published (pid %d, index %u) %.1f s after start\n",
           (int)getpid(), my_index, now() - started);

    run();

    for (i = 0; i < num_peers; ++i) {
        if (peers[i].state != PEER_DROPPED) {
            release_peer(&peers[i]);
        }
    }
    for (i = 0; i < num_peers; ++i) {
        if (peers[i].fail_line[0] != '\0') {
            printf("%s\n", peers[i].fail_line);
        }
        printf("peer %s: %lu rounds\n", peers[i].name, peers[i].rounds);
    }
    printf("rounds: %lu errors: %lu\n", rounds_done, errors);
    CHECK(guest_registrations() == regs, "the whole run made no registration "
          "beyond the %s (%lu)", expected ? "pool or slice" : "import",
          guest_registrations());
    printf("registrations: %lu\n", guest_registrations());

    uct_mem_free(&mem);
    uct_iface_close(iface);
    uct_worker_destroy(worker);
    ucs_async_context_destroy(async);
    uct_md_close(md);
    CHECK(guest_open_fds() == fds, "leaving the group closed every fd it opened "
          "(%d before, %d after)", fds, guest_open_fds());
    printf("left %.1f s after it was told to\n", now() - left_at);
    return (guest_failures || errors) ? 1 : 0;
}
