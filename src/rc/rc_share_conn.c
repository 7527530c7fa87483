/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share connections and their handshake (see rc_share_conn.h).
 *
 * Threads: the handshake (the UD QP, its buffers, the connection table and
 * every field of a connection but its send queue and window) is touched
 * under UCS_ASYNC_BLOCK of the worker's async context, which its handler
 * and timer hold while they run. The send queue, the window and the grants
 * are the main thread's, which posts and polls without the lock, but for
 * the queue's backlog: the async side connects a QP only while the main
 * thread posts nothing on it (its owner's operations wait in the backlog),
 * and posts the backlog the moment the handshake is done, which is the only
 * post the async side makes on an RC QP (rc_share_txq.h says why that is
 * safe). A connection is destroyed by the main thread only, once nothing
 * of the async side refers to it and its WRs are done.
 *
 * The RC QPs of a process killed in the node group's shared mode belong to
 * the shared uverbs file and live on, still acknowledging RDMA: only its
 * handshake side, which nobody answers on any more, tells that it is gone.
 * So the liveness check asks the peer's UD QP, and a connection that only
 * the peer uses is checked every CHECK_TIMEOUT.
 */
#include "rc_share_conn.h"
#include "rc_share_qp.h"

#include <ucs/datastruct/khash.h>
#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/time/time.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>


#define UCT_RC_SHARE_CONN_QKEY      0x1ee7a330u
/* Deep enough for a burst of requests: a UD receive that finds no buffer
 * is dropped, and a dropped request waits CONN_RETRY for its copy. With 64
 * and 32, UCX's gtest pending_ucs_ok_dc_arbiter_bug (2048 endpoints to one
 * iface, connected at once) took 26 to 441 s under TCG, and failed
 * endpoints with timeouts at CONN_RETRY=1s; with these, 5 s. 80 KiB of the
 * rank's slice per iface. */
#define UCT_RC_SHARE_CONN_RX_COUNT  512
#define UCT_RC_SHARE_CONN_TX_COUNT  128
#define UCT_RC_SHARE_CONN_BUF_SIZE  128   /* GRH + message, rounded up */
/* A receive takes its own buffer and then, for what is longer, one area
 * every receive shares, never read: a UD packet up to the largest MTU
 * lands whatever its length (a receive too short for its packet fails,
 * and puts the QP in error for good), and is dropped as malformed */
#define UCT_RC_SHARE_CONN_SPILL_SIZE 4096 /* IBV_MTU_4096 */
#define UCT_RC_SHARE_CONN_SEND_WR   UINT64_MAX /* receives use their index */
/* The first bytes of a message that keep their meaning in every version */
#define UCT_RC_SHARE_CONN_STABLE_LEN \
    ucs_offsetof(uct_rc_share_conn_msg_t, rc_qpn)
/* Connections made by peers' requests that are remembered once ended, so
 * that their request, sent again, makes nothing (256 KiB at most) */
#define UCT_RC_SHARE_CONN_ENDED_MAX 4096
/* How often the timer asks whether the UD QP is still in RTS */
#define UCT_RC_SHARE_CONN_QP_CHECK_SEC 1.0
/* At most this long for the DISCs of a closing iface to go out */
#define UCT_RC_SHARE_CONN_CLEANUP_DISC_SEC 2.0
/* The send CQ entries of grants (uct_rc_share_conn_grant_reserve): 64 KiB
 * of CQ at most; past it, grants wait for one another, never for the data
 * path or it for them */
#define UCT_RC_SHARE_CONN_GRANT_RESERVE_MAX 1024


typedef enum {
    UCT_RC_SHARE_CONN_CONNECTING, /* our request waits for its answer, the
                                     QP in INIT */
    UCT_RC_SHARE_CONN_CONNECTED,
    UCT_RC_SHARE_CONN_FAILED      /* the QP is in error or never connected */
} uct_rc_share_conn_state_t;

/* What the main thread has to do for a connection */
enum {
    UCT_RC_SHARE_CONN_EV_READY   = UCS_BIT(0), /* tell the owner: ready */
    UCT_RC_SHARE_CONN_EV_FAILED  = UCS_BIT(1), /* fail it (main_status) */
    UCT_RC_SHARE_CONN_EV_RELEASE = UCS_BIT(2)  /* destroy it if it is done */
};

/* What a check is for */
typedef enum {
    UCT_RC_SHARE_CONN_CHECK_NONE,
    UCT_RC_SHARE_CONN_CHECK_OWNER, /* ep_check: the peer lives */
    UCT_RC_SHARE_CONN_CHECK_IDLE   /* only the peer's half: is it there? */
} uct_rc_share_conn_check_kind_t;


/*
 * Who a peer iface is: all of its address (its id, its secret, its UD QP)
 * and the port its packets come from (by GID on RoCE, by LID and subnet on
 * InfiniBand). A message is the peer's only if it matches all of it: an
 * iface id, or even a whole iface address, is anyone's to claim who was
 * given it (every rank of the job is), but not the UD QP and port it
 * sends from. Filled by uct_rc_share_peer_id_init only (no padding, so
 * that it compares and hashes as bytes).
 */
typedef struct UCS_S_PACKED {
    uint64_t                  id;
    uint64_t                  secret;
    uint32_t                  ud_qpn;
    uint16_t                  lid;          /* InfiniBand; 0 on RoCE */
    union ibv_gid             gid;          /* RoCE; InfiniBand: the subnet
                                               prefix only */
} uct_rc_share_peer_id_t;

typedef struct {
    uct_rc_share_peer_id_t    peer;
    uint64_t                  sn;
} uct_rc_share_conn_key_t;

static UCS_F_ALWAYS_INLINE khint_t
uct_rc_share_peer_id_hash(uct_rc_share_peer_id_t peer)
{
    return kh_int64_hash_func(peer.id ^ peer.secret ^
                              ((uint64_t)peer.ud_qpn << 40) ^ peer.lid ^
                              peer.gid.global.subnet_prefix ^
                              peer.gid.global.interface_id);
}

static UCS_F_ALWAYS_INLINE int
uct_rc_share_peer_id_equal(uct_rc_share_peer_id_t a, uct_rc_share_peer_id_t b)
{
    return !memcmp(&a, &b, sizeof(a));
}

static UCS_F_ALWAYS_INLINE khint_t
uct_rc_share_conn_key_hash(uct_rc_share_conn_key_t key)
{
    return uct_rc_share_peer_id_hash(key.peer) ^
           kh_int64_hash_func(key.sn * 0x9e3779b97f4a7c15ull);
}

#define uct_rc_share_conn_key_equal(_a, _b) \
    (((_a).sn == (_b).sn) && uct_rc_share_peer_id_equal((_a).peer, (_b).peer))

KHASH_INIT(uct_rc_share_conns, uct_rc_share_conn_key_t, uct_rc_share_conn_t*,
           1, uct_rc_share_conn_key_hash, uct_rc_share_conn_key_equal)
KHASH_MAP_INIT_INT(uct_rc_share_qpns, uct_rc_share_conn_t*)
/* What we know of a peer iface we connect to: the number of our next
 * connection to it, and when it last answered one of our requests (0:
 * never). Only our own endpoints make these: a peer's request does not. */
typedef struct {
    uint64_t                  next_sn;
    ucs_time_t                answered;
} uct_rc_share_peer_t;

KHASH_INIT(uct_rc_share_peers, uct_rc_share_peer_id_t, uct_rc_share_peer_t, 1,
           uct_rc_share_peer_id_hash, uct_rc_share_peer_id_equal)
/* A set of peer ifaces (the timer's: checked now, found dead) */
KHASH_INIT(uct_rc_share_peer_set, uct_rc_share_peer_id_t, char, 0,
           uct_rc_share_peer_id_hash, uct_rc_share_peer_id_equal)
/* The connections that peers' requests made and that ended */
KHASH_INIT(uct_rc_share_ended, uct_rc_share_conn_key_t, char, 0,
           uct_rc_share_conn_key_hash, uct_rc_share_conn_key_equal)


struct uct_rc_share_conn {
    uct_rc_share_conn_tx_t    tx;           /* first (rc_share_conn.h) */
    int                       fc_wnd;       /* main thread */
    int                       grant_owed;   /* main thread: on
                                               iface->grants_owed */
    ucs_list_link_t           owed_list;
    uct_rc_share_iface_t      *iface;
    uct_rc_share_conn_key_t   key;
    uct_rc_share_conn_state_t state;

    /* Our half, the endpoint that sends on it, is tx.owner */
    int                       had_owner;    /* one left: never another */
    int                       by_peer;      /* the peer's request made it */
    /* The peer's half: it may send on it (its endpoint, or one it may
     * still open with this number); clear once it said it is gone */
    int                       peer_half;

    /* The peer (who it is: key.peer) */
    struct ibv_ah             *peer_ah;     /* to its UD QP */
    uct_rc_share_device_addr_t path;        /* of our RC QP to its */
    enum ibv_mtu              peer_mtu;
    uint32_t                  psn;          /* our QP's first */
    uint32_t                  remote_qpn;   /* its QP, once known */
    int                       qp_connected; /* ours is connected to it (it
                                               may still wait, CONNECTING,
                                               for the peer's to be) */
    int                       peer_ready;   /* its QP is connected to ours:
                                               it answered us */
    int                       disc_pending; /* our DISC goes once our WRs
                                               are done (main thread) */
    int                       confirming;   /* an owner came to a connection
                                               the peer made: it waits for
                                               the answer to a request that
                                               says peer_ready */

    /* Timers (async): a request or a check in flight puts it on timed */
    ucs_list_link_t           timed_list;
    int                       timed;
    ucs_time_t                deadline;
    ucs_time_t                next_retry;
    uct_rc_share_conn_check_kind_t check;
    uint32_t                  check_sn;
    ucs_time_t                check_deadline;
    uint64_t                  check_drops;  /* hs_dropped when it began */
    int                       check_extended; /* waited once more */
    ucs_time_t                check_next_retry;
    ucs_time_t                next_idle_check;

    /* Out of the table, a new connection of the peer's having its key
     * (iface->conn->superseded), until it is destroyed */
    ucs_list_link_t           superseded_list;
    int                       superseded;

    /* Work for the main thread (async) */
    ucs_list_link_t           main_list;
    unsigned                  main_events;
    ucs_status_t              main_status;
};


typedef struct {
    ucs_list_link_t           list;
    struct ibv_ah             *ah;
    uint64_t                  after;        /* UD sends posted before it */
} uct_rc_share_retired_ah_t;


struct uct_rc_share_conn_iface {
    uct_rc_share_iface_t      *iface;
    khash_t(uct_rc_share_conns) conns;
    khash_t(uct_rc_share_qpns) qpns;
    khash_t(uct_rc_share_peers) peers;      /* peer id -> what we know */
    unsigned                  count;
    ucs_list_link_t           timed;        /* uct_rc_share_conn_t */
    ucs_list_link_t           main;         /* uct_rc_share_conn_t */
    ucs_list_link_t           superseded;   /* uct_rc_share_conn_t */
    /* Requests that must not make a connection again: the last
     * UCT_RC_SHARE_CONN_ENDED_MAX connections made by peers' requests
     * that ended (a ring, oldest first out) */
    khash_t(uct_rc_share_ended) ended;
    uct_rc_share_conn_key_t   *ended_ring;
    unsigned                  ended_next;
    unsigned                  owners_waiting; /* owners of connecting or
                                                 checked connections */
    uct_worker_cb_id_t        main_prog_id;
    void                      (*drain_rx)(uct_rc_share_iface_t *iface);
    ucs_time_t                next_idle_scan;
    ucs_time_t                last_drop_log;
    unsigned                  drops_unlogged;
    ucs_time_t                last_version_log;
    uint64_t                  versions_seen[4]; /* bits: logged once each */
    unsigned                  versions_unlogged;
    int                       grants_available; /* of the send CQ's reserve
                                                   for grants (main) */
    ucs_time_t                next_qp_check;
    uint64_t                  qp_resets;

    /* The UD QP */
    struct ibv_comp_channel   *channel;
    int                       handler_set;
    int                       timer_id;
    struct ibv_cq             *cq;
    struct ibv_qp             *qp;
    uct_ibshare_buf_t         bufs;         /* rx_bufs, then tx_buf */
    void                      *rx_bufs;
    void                      *spill;       /* what a receive's buffer
                                               cannot hold, never read */
    int                       rx_sge;       /* 2; 1 (no spill) only in the
                                               test of the QP's recovery */
    void                      *tx_buf;
    unsigned                  tx_next;
    int                       tx_available;
    uint64_t                  tx_posted;    /* UD sends, in order */
    uint64_t                  tx_done;
    ucs_list_link_t           retired;      /* AHs those sends may use */

};


static const char *uct_rc_share_dev_name(const uct_rc_share_iface_t *iface)
{
    return iface->md->dev_name;
}

/*
 * How long a connection that only the peer uses goes unchecked: half the
 * check's timeout, so that one whose peer is gone goes within 2 x
 * CHECK_TIMEOUT (idle time, a quarter of it until the scan, the check's
 * own timeout).
 */
static UCS_F_ALWAYS_INLINE ucs_time_t
uct_rc_share_conn_idle_time(const uct_rc_share_iface_t *iface)
{
    return iface->config.check_timeout / 2;
}

static UCS_F_ALWAYS_INLINE ucs_async_context_t *
uct_rc_share_conn_async(const uct_rc_share_iface_t *iface)
{
    return iface->super.worker->async;
}

static UCS_F_ALWAYS_INLINE int
uct_rc_share_conn_eth(const uct_rc_share_iface_t *iface)
{
    return iface->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
}

/* The identity of the iface (id, secret, UD QP ud_qpn) at the port (lid,
 * gid): on RoCE its GID, on InfiniBand its LID in its subnet */
static void uct_rc_share_peer_id_init(const uct_rc_share_iface_t *iface,
                                      uct_rc_share_peer_id_t *peer,
                                      uint64_t id, uint64_t secret,
                                      uint32_t ud_qpn, uint16_t lid,
                                      union ibv_gid gid)
{
    memset(peer, 0, sizeof(*peer));
    peer->id     = id;
    peer->secret = secret;
    peer->ud_qpn = ud_qpn;
    if (uct_rc_share_conn_eth(iface)) {
        peer->gid = gid;
    } else {
        peer->lid                      = lid;
        peer->gid.global.subnet_prefix = gid.global.subnet_prefix;
    }
}

/* A received handshake message and where it really came from */
typedef struct {
    struct ibv_wc              *wc;
    struct ibv_grh             *grh;
    struct ibv_ah_attr         ah_attr;     /* to its source */
    uct_rc_share_device_addr_t source;      /* its source port, as a path */
    uct_rc_share_peer_id_t     sender;      /* the id and secret it claims,
                                               the UD QP and port it came
                                               from */
} uct_rc_share_conn_rx_t;

/* ------------------------------------------------------------ messages */

ucs_status_t uct_rc_share_conn_msg_check(const void *buf, size_t length)
{
    const uct_rc_share_conn_msg_t *msg = buf;
    int known_result;

    if (length < UCT_RC_SHARE_CONN_STABLE_LEN) {
        return UCS_ERR_MESSAGE_TRUNCATED;
    }
    if (msg->magic != UCT_RC_SHARE_CONN_MAGIC) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (msg->version != UCT_RC_SHARE_CONN_VERSION) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (length != sizeof(*msg)) {
        return UCS_ERR_MESSAGE_TRUNCATED;
    }
    if ((msg->type < UCT_RC_SHARE_CONN_REQ) ||
        (msg->type > UCT_RC_SHARE_CONN_CHECK_REP) ||
        (msg->mtu < IBV_MTU_256) || (msg->mtu > IBV_MTU_4096) ||
        (msg->rc_qpn & ~UCT_RC_SHARE_PSN_MASK) ||
        (msg->psn & ~UCT_RC_SHARE_PSN_MASK) ||
        (msg->dst_rc_qpn & ~UCT_RC_SHARE_PSN_MASK) ||
        (msg->src_ud_qpn & ~UCT_RC_SHARE_PSN_MASK) ||
        (msg->flags & ~(UCT_RC_SHARE_CONN_FLAG_TX |
                        UCT_RC_SHARE_CONN_FLAG_DETACHED))) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* Only a REJ and a CHECK_REP carry a result, and always a known one */
    switch (msg->type) {
    case UCT_RC_SHARE_CONN_REJ:
        known_result = (msg->result == UCT_RC_SHARE_CONN_REJ_NO_RESOURCE) ||
                       (msg->result == UCT_RC_SHARE_CONN_REJ_VERSION);
        break;
    case UCT_RC_SHARE_CONN_CHECK_REP:
        known_result = (msg->result == UCT_RC_SHARE_CONN_CHECK_CONNECTED) ||
                       (msg->result == UCT_RC_SHARE_CONN_CHECK_NO_CONN);
        break;
    default:
        known_result = (msg->result == 0);
        break;
    }
    return known_result ? UCS_OK : UCS_ERR_INVALID_PARAM;
}

/* Whether a log line of a flood may go now: at most one a second; the
 * lines held back meanwhile are counted in *unlogged */
static int uct_rc_share_conn_log_due(ucs_time_t *last, unsigned *unlogged)
{
    ucs_time_t now = ucs_get_time();

    if ((*last != 0) && (now - *last < ucs_time_from_sec(1.0))) {
        ++*unlogged;
        return 0;
    }
    *last = now;
    return 1;
}

/* A dropped message, logged at most once a second (a flood of strangers'
 * packets must not flood the log) */
static void uct_rc_share_conn_drop(uct_rc_share_iface_t *iface,
                                   const char *fmt, ...)
    UCS_F_PRINTF(2, 3);

static void uct_rc_share_conn_drop(uct_rc_share_iface_t *iface,
                                   const char *fmt, ...)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    unsigned unlogged             = ci->drops_unlogged;
    char why[192];
    va_list ap;

    ++iface->counters.hs_dropped;
    if (!uct_rc_share_conn_log_due(&ci->last_drop_log, &ci->drops_unlogged)) {
        return;
    }

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    ucs_warn("%s:%d: dropped a handshake message: %s (%" PRIu64 " dropped "
             "in all, %u since the last of these lines)",
             uct_rc_share_dev_name(iface), iface->port_num, why,
             iface->counters.hs_dropped, unlogged);
    ci->drops_unlogged = 0;
}

/*
 * An answer, with our secret, for a connection we do not have: our
 * endpoint went away while the peer answered (UCX's uct_cancel_test, a job
 * that closes before its requests are answered), or it came from another
 * QP or port than the peer's. Counted with the dropped messages, but
 * nothing is wrong: no warning, which would also fail every UCX test that
 * treats warnings as errors.
 */
static void uct_rc_share_conn_late(uct_rc_share_iface_t *iface,
                                   const char *what,
                                   const uct_rc_share_conn_rx_t *rx,
                                   const uct_rc_share_conn_msg_t *msg)
{
    ++iface->counters.hs_dropped;
    ucs_debug("%s:%d: dropped %s for connection %" PRIu64 " of iface 0x%"
              PRIx64 " from UD QP 0x%x, which we do not have",
              uct_rc_share_dev_name(iface), iface->port_num, what,
              msg->conn_sn, msg->src_iface_id, rx->wc->src_qp);
}

/* ------------------------------------------------------------ UD QP */

static void uct_rc_share_conn_post_recv(uct_rc_share_iface_t *iface,
                                        unsigned index)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    struct ibv_recv_wr wr, *bad_wr;
    struct ibv_sge sge[2];
    int ret;

    sge[0].addr   = uct_rc_share_buf_iova(iface, ci->rx_bufs) +
                    (index * UCT_RC_SHARE_CONN_BUF_SIZE);
    sge[0].length = UCT_RC_SHARE_CONN_BUF_SIZE;
    sge[0].lkey   = ci->bufs.lkey;
    sge[1].addr   = uct_rc_share_buf_iova(iface, ci->spill);
    sge[1].length = UCT_RC_SHARE_CONN_SPILL_SIZE;
    sge[1].lkey   = ci->bufs.lkey;
    wr.wr_id      = index;
    wr.next       = NULL;
    wr.sg_list    = sge;
    wr.num_sge    = ci->rx_sge;

    ret = ibv_post_recv(ci->qp, &wr, &bad_wr);
    if (ret != 0) {
        ucs_error("ibv_post_recv(UD) failed: %s", strerror(ret));
    }
}

/* The caller's retry timer resends what could not go now */
static ucs_status_t uct_rc_share_conn_send(uct_rc_share_iface_t *iface,
                                           struct ibv_ah *ah, uint32_t ud_qpn,
                                           const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    struct ibv_send_wr wr, *bad_wr;
    struct ibv_sge sge;
    void *buf;
    int ret;

    if (!uct_ibshare_resources_owned(iface->md->res)) {
        /* A fork child closing what it inherited: the QP is the parent's */
        return UCS_ERR_CANCELED;
    }
    if (ci->tx_available == 0) {
        return UCS_ERR_NO_RESOURCE;
    }

    buf = UCS_PTR_BYTE_OFFSET(ci->tx_buf,
                              ci->tx_next * UCT_RC_SHARE_CONN_BUF_SIZE);
    memcpy(buf, msg, sizeof(*msg));

    sge.addr              = uct_rc_share_buf_iova(iface, buf);
    sge.length            = sizeof(*msg);
    sge.lkey              = ci->bufs.lkey;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id              = UCT_RC_SHARE_CONN_SEND_WR;
    wr.opcode             = IBV_WR_SEND;
    wr.send_flags         = IBV_SEND_SIGNALED;
    wr.sg_list            = &sge;
    wr.num_sge            = 1;
    wr.wr.ud.ah           = ah;
    wr.wr.ud.remote_qpn   = ud_qpn;
    wr.wr.ud.remote_qkey  = UCT_RC_SHARE_CONN_QKEY;

    ret = ibv_post_send(ci->qp, &wr, &bad_wr);
    if (ret != 0) {
        ucs_error("ibv_post_send(UD) failed: %s", strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    --ci->tx_available;
    ++ci->tx_posted;
    ci->tx_next = (ci->tx_next + 1) % UCT_RC_SHARE_CONN_TX_COUNT;
    return UCS_OK;
}

/* An AH goes once the UD sends posted so far, which may use it, are done
 * (they complete in order) */
static void uct_rc_share_conn_retire_ah(uct_rc_share_iface_t *iface,
                                        struct ibv_ah *ah)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    uct_rc_share_retired_ah_t *retired;

    if (ah == NULL) {
        return;
    }
    if (ci->tx_done == ci->tx_posted) {
        uct_rc_share_ah_destroy(iface, ah);
        return;
    }

    retired = ucs_malloc(sizeof(*retired), "rc_share retired ah");
    if (retired == NULL) {
        uct_rc_share_ah_destroy(iface, ah); /* unlikely; a send fails at
                                                worst */
        return;
    }
    retired->ah    = ah;
    retired->after = ci->tx_posted;
    ucs_list_add_tail(&ci->retired, &retired->list);
}

static void uct_rc_share_conn_release_ahs(uct_rc_share_iface_t *iface,
                                          int all)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    uct_rc_share_retired_ah_t *retired, *tmp;

    ucs_list_for_each_safe(retired, tmp, &ci->retired, list) {
        if (!all && (retired->after > ci->tx_done)) {
            break; /* retired in order */
        }
        ucs_list_del(&retired->list);
        uct_rc_share_ah_destroy(iface, retired->ah);
        ucs_free(retired);
    }
}

/*
 * The UD QP went to the error state (a receive or send completed in error
 * other than a flush, or the timer found it so): nothing more would arrive
 * or go, and its number is in our iface address, so it comes back to RTS
 * through RESET, with every receive posted again. What was in flight is
 * gone: the requests and checks are resent by their timers. The caller
 * holds the async context.
 */
static void uct_rc_share_conn_ud_recover(uct_rc_share_iface_t *iface,
                                         int state)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    struct ibv_wc wc[8];
    unsigned i;

    if (!uct_ibshare_resources_owned(iface->md->res) ||
        (uct_rc_share_ud_qp_reset(iface, ci->qp, UCT_RC_SHARE_CONN_QKEY) !=
         UCS_OK)) {
        return;
    }
    /* The CQ is the UD QP's alone: what it still holds is of the old life */
    while (ibv_poll_cq(ci->cq, ucs_static_array_size(wc), wc) > 0) {
    }
    ci->tx_available = UCT_RC_SHARE_CONN_TX_COUNT;
    ci->tx_done      = ci->tx_posted;
    uct_rc_share_conn_release_ahs(iface, 1);
    for (i = 0; i < UCT_RC_SHARE_CONN_RX_COUNT; ++i) {
        uct_rc_share_conn_post_recv(iface, i);
    }
    ++ci->qp_resets;
    ucs_warn("%s:%d: the handshake's UD QP 0x%x was in state %d (error): "
             "reset to RTS (%" PRIu64 " time(s))",
             uct_rc_share_dev_name(iface), iface->port_num, ci->qp->qp_num,
             state, ci->qp_resets);
}

/* Makes sure that the UD QP is in RTS (the timer, once a second) */
static void uct_rc_share_conn_ud_check(uct_rc_share_iface_t *iface)
{
    int state = uct_rc_share_qp_state(iface->conn->qp);

    if ((state >= 0) && (state != IBV_QPS_RTS)) {
        uct_rc_share_conn_ud_recover(iface, state);
    }
}

/* The header every message of ours has; with conn, what it has of the
 * connection */
static void uct_rc_share_conn_msg_init(uct_rc_share_iface_t *iface,
                                       uct_rc_share_conn_msg_t *msg,
                                       uct_rc_share_conn_msg_type_t type,
                                       const uct_rc_share_conn_t *conn)
{
    memset(msg, 0, sizeof(*msg));
    msg->magic        = UCT_RC_SHARE_CONN_MAGIC;
    msg->version      = UCT_RC_SHARE_CONN_VERSION;
    msg->type         = type;
    msg->mtu          = iface->config.path_mtu;
    msg->src_iface_id = iface->id;
    msg->src_secret   = iface->secret;
    msg->src_ud_qpn   = iface->conn->qp->qp_num;
    msg->src_lid      = iface->port_attr.lid;
    msg->src_gid      = iface->gid;
    if (conn != NULL) {
        msg->dst_iface_id = conn->key.peer.id;
        msg->dst_secret   = conn->key.peer.secret;
        msg->conn_sn      = conn->key.sn;
        msg->rc_qpn       = conn->tx.txq.qp->qp_num;
        msg->psn          = conn->psn;
        msg->dst_rc_qpn   = conn->remote_qpn;
        msg->flags        = (conn->tx.owner != NULL) ?
                            UCT_RC_SHARE_CONN_FLAG_TX :
                            (conn->had_owner ? UCT_RC_SHARE_CONN_FLAG_DETACHED :
                             0);
    }
}

/* An answer to the message of rx: to its source, whatever it claims */
static void uct_rc_share_conn_answer(uct_rc_share_iface_t *iface,
                                     uct_rc_share_conn_rx_t *rx,
                                     const uct_rc_share_conn_msg_t *rep)
{
    struct ibv_ah *ah;

    if (iface->conn->tx_available == 0) {
        return; /* the requester asks again */
    }
    ah = uct_rc_share_ah_from_attr(iface, &rx->ah_attr);
    if (ah == NULL) {
        return;
    }
    (void)uct_rc_share_conn_send(iface, ah, rx->wc->src_qp, rep);
    uct_rc_share_conn_retire_ah(iface, ah);
}

/* An answer to msg that names no connection of ours (REJ, CHECK_REP) */
static void uct_rc_share_conn_answer_init(uct_rc_share_iface_t *iface,
                                          uct_rc_share_conn_msg_t *rep,
                                          uct_rc_share_conn_msg_type_t type,
                                          const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_msg_init(iface, rep, type, NULL);
    rep->dst_iface_id = msg->src_iface_id;
    rep->dst_secret   = msg->src_secret;
    rep->conn_sn      = msg->conn_sn;
}

static void uct_rc_share_conn_send_to_peer(uct_rc_share_conn_t *conn,
                                           uct_rc_share_conn_msg_type_t type)
{
    uct_rc_share_conn_msg_t msg;

    uct_rc_share_conn_msg_init(conn->iface, &msg, type, conn);
    if (type == UCT_RC_SHARE_CONN_CHECK) {
        msg.check_sn = conn->check_sn;
    }
    (void)uct_rc_share_conn_send(conn->iface, conn->peer_ah,
                                 conn->key.peer.ud_qpn, &msg);
}

/* ------------------------------------------------------------ table */

/*
 * A connection that a peer's request made has ended: its request, should
 * it come again, is a replay (a peer never asks again for a number its
 * request made: its next endpoint to us takes the next number), or a copy
 * that came late. Remembered, the oldest forgotten first.
 */
static void uct_rc_share_conn_ended_add(uct_rc_share_iface_t *iface,
                                        const uct_rc_share_conn_key_t *key)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    uct_rc_share_conn_key_t *slot;
    khiter_t it;
    int ret;

    if (ci->ended_ring == NULL) {
        ci->ended_ring = ucs_calloc(UCT_RC_SHARE_CONN_ENDED_MAX,
                                    sizeof(*ci->ended_ring),
                                    "rc_share ended conns");
        if (ci->ended_ring == NULL) {
            return;
        }
    }

    slot = &ci->ended_ring[ci->ended_next];
    if (kh_size(&ci->ended) == UCT_RC_SHARE_CONN_ENDED_MAX) {
        it = kh_get(uct_rc_share_ended, &ci->ended, *slot);
        if (it != kh_end(&ci->ended)) {
            kh_del(uct_rc_share_ended, &ci->ended, it);
        }
    }
    kh_put(uct_rc_share_ended, &ci->ended, *key, &ret);
    if (ret > 0) {
        *slot          = *key;
        ci->ended_next = (ci->ended_next + 1) % UCT_RC_SHARE_CONN_ENDED_MAX;
    }
}

static int uct_rc_share_conn_ended(uct_rc_share_iface_t *iface,
                                   const uct_rc_share_peer_id_t *peer,
                                   uint64_t sn)
{
    uct_rc_share_conn_key_t key;

    key.peer = *peer;
    key.sn   = sn;
    return kh_get(uct_rc_share_ended, &iface->conn->ended, key) !=
           kh_end(&iface->conn->ended);
}

static uct_rc_share_conn_t *
uct_rc_share_conn_find(uct_rc_share_iface_t *iface,
                       const uct_rc_share_peer_id_t *peer, uint64_t sn)
{
    uct_rc_share_conn_key_t key;
    khiter_t it;

    key.peer = *peer;
    key.sn   = sn;
    it       = kh_get(uct_rc_share_conns, &iface->conn->conns, key);
    return (it == kh_end(&iface->conn->conns)) ? NULL :
           kh_val(&iface->conn->conns, it);
}

/* Work for the main thread, which runs it from progress. A user asleep on
 * the event fd is not woken for it: event_arm says BUSY while an owner
 * waits on the handshake or work is queued (uct_rc_share_conn_busy) */
static unsigned uct_rc_share_conn_main_progress(void *arg);

static void uct_rc_share_conn_queue(uct_rc_share_conn_t *conn,
                                    unsigned events, ucs_status_t status)
{
    uct_rc_share_iface_t *iface   = conn->iface;
    uct_rc_share_conn_iface_t *ci = iface->conn;

    if (events & UCT_RC_SHARE_CONN_EV_FAILED) {
        conn->main_status = status;
    }
    if (conn->main_events == 0) {
        ucs_list_add_tail(&ci->main, &conn->main_list);
    }
    conn->main_events |= events;
    if (ci->main_prog_id == UCS_CALLBACKQ_ID_NULL) {
        ci->main_prog_id = uct_ibshare_ucx_callbackq_add_oneshot(
                &iface->super.worker->super.progress_q,
                uct_rc_share_conn_main_progress, iface);
    }
}

static void uct_rc_share_conn_timed_add(uct_rc_share_conn_t *conn)
{
    if (!conn->timed) {
        conn->timed = 1;
        ucs_list_add_tail(&conn->iface->conn->timed, &conn->timed_list);
    }
}

static void uct_rc_share_conn_timed_del(uct_rc_share_conn_t *conn)
{
    if (conn->timed) {
        conn->timed = 0;
        ucs_list_del(&conn->timed_list);
    }
}

/* Whether requests are resent for the connection until its deadline */
static int uct_rc_share_conn_requesting(const uct_rc_share_conn_t *conn)
{
    return (conn->state == UCT_RC_SHARE_CONN_CONNECTING) || conn->confirming;
}

/* Whether an owner waits on the handshake of the connection */
static int uct_rc_share_conn_owner_waits(const uct_rc_share_conn_t *conn)
{
    return (conn->tx.owner != NULL) &&
           (uct_rc_share_conn_requesting(conn) ||
            (conn->check == UCT_RC_SHARE_CONN_CHECK_OWNER));
}

static void uct_rc_share_conn_stop_check(uct_rc_share_conn_t *conn)
{
    if (conn->check == UCT_RC_SHARE_CONN_CHECK_OWNER) {
        --conn->iface->conn->owners_waiting;
    }
    conn->check = UCT_RC_SHARE_CONN_CHECK_NONE;
    if (!uct_rc_share_conn_requesting(conn)) {
        uct_rc_share_conn_timed_del(conn);
    }
}

/* The connection is done with (async): its QP fails, the owner is told */
static void uct_rc_share_conn_fail(uct_rc_share_conn_t *conn,
                                   ucs_status_t status)
{
    if (uct_rc_share_conn_requesting(conn) && (conn->tx.owner != NULL)) {
        --conn->iface->conn->owners_waiting;
    }
    conn->confirming = 0;
    uct_rc_share_conn_stop_check(conn);
    uct_rc_share_conn_timed_del(conn);
    conn->peer_half = 0;
    if (conn->state == UCT_RC_SHARE_CONN_FAILED) {
        return;
    }
    conn->state = UCT_RC_SHARE_CONN_FAILED;
    uct_rc_share_conn_queue(conn, UCT_RC_SHARE_CONN_EV_FAILED |
                            UCT_RC_SHARE_CONN_EV_RELEASE, status);
}

/* A new connection (n = sn) to peer, in the table, its QP in INIT */
static ucs_status_t
uct_rc_share_conn_new(uct_rc_share_iface_t *iface,
                      const uct_rc_share_peer_id_t *peer, uint64_t sn,
                      uct_rc_share_conn_t **conn_p)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    uct_rc_share_conn_t *conn;
    ucs_status_t status;
    khiter_t it;
    int ret;

    if (ci->count >= iface->config.max_conns) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }

    conn = ucs_calloc(1, sizeof(*conn), "rc_share conn");
    if (conn == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    conn->iface       = iface;
    conn->key.peer    = *peer;
    conn->key.sn      = sn;
    conn->state       = UCT_RC_SHARE_CONN_CONNECTING;
    conn->psn         = uct_rc_share_psn_generate();
    conn->peer_half   = 1; /* until the peer says it has none */
    conn->fc_wnd      = iface->config.fc_enabled ?
                        iface->config.fc_wnd_size : INT_MAX;
    status = uct_rc_share_txq_init(&conn->tx.txq, &iface->tx,
                                   iface->config.tx_qp_len, conn);
    if (status != UCS_OK) {
        goto err_free;
    }

    status = uct_rc_share_qp_create(iface, &conn->tx.txq.qp);
    if (status != UCS_OK) {
        goto err_txq;
    }

    status = UCS_ERR_NO_MEMORY;
    it     = kh_put(uct_rc_share_conns, &ci->conns, conn->key, &ret);
    if (ret <= 0) {
        goto err_qp;
    }
    kh_val(&ci->conns, it) = conn;
    it = kh_put(uct_rc_share_qpns, &ci->qpns, conn->tx.txq.qp->qp_num, &ret);
    if (ret <= 0) {
        kh_del(uct_rc_share_conns, &ci->conns,
               kh_get(uct_rc_share_conns, &ci->conns, conn->key));
        goto err_qp;
    }
    kh_val(&ci->qpns, it) = conn;

    ++ci->count;
    ++iface->counters.conns;
    *conn_p = conn;
    return UCS_OK;

err_qp:
    uct_rc_share_qp_destroy(iface, conn->tx.txq.qp);
err_txq:
    conn->tx.txq.qp = NULL;
    uct_rc_share_txq_cleanup(&conn->tx.txq);
err_free:
    ucs_free(conn);
    return status;
}

/* Why there is no new connection, for a log line */
static const char *uct_rc_share_conn_new_why(const uct_rc_share_iface_t *iface,
                                             ucs_status_t status, char *buf,
                                             size_t max)
{
    if (status == UCS_ERR_EXCEEDS_LIMIT) {
        snprintf(buf, max, "the iface has %u connections, as many as "
                 "UCX_RC_SHARE_MAX_CONNS=%u allows", iface->conn->count,
                 iface->config.max_conns);
    } else {
        snprintf(buf, max, "%s", ucs_status_string(status));
    }
    return buf;
}

/* Takes a connection out of the table (its key may be another's then) */
static void uct_rc_share_conn_unlist(uct_rc_share_conn_t *conn)
{
    uct_rc_share_conn_iface_t *ci = conn->iface->conn;
    khiter_t it;

    it = kh_get(uct_rc_share_conns, &ci->conns, conn->key);
    if ((it != kh_end(&ci->conns)) && (kh_val(&ci->conns, it) == conn)) {
        kh_del(uct_rc_share_conns, &ci->conns, it);
    }
}

/*
 * Our half is gone for good: the peer is told (DISC) once every WR of ours
 * on the connection is done, since it destroys its QP on it, and a WR of
 * ours still in flight would then wait out the RC retries (TIMEOUT x
 * RETRY_COUNT) and fail. Best effort: a lost DISC is found by the peer's
 * idle check. Main thread, async context blocked.
 */
static void uct_rc_share_conn_disconnect(uct_rc_share_conn_t *conn)
{
    if (conn->disc_pending && uct_rc_share_txq_idle(&conn->tx.txq) &&
        (conn->state != UCT_RC_SHARE_CONN_FAILED)) {
        conn->disc_pending = 0;
        uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_DISC);
    }
}

/* Main thread, async context blocked: the connection is no more */
static void uct_rc_share_conn_destroy(uct_rc_share_conn_t *conn)
{
    uct_rc_share_iface_t *iface   = conn->iface;
    uct_rc_share_conn_iface_t *ci = iface->conn;
    khiter_t it;

    ucs_debug("%s:%d: connection %" PRIu64 " to iface 0x%" PRIx64 " (QP "
              "0x%x) destroyed", uct_rc_share_dev_name(iface),
              iface->port_num, conn->key.sn, conn->key.peer.id,
              conn->tx.txq.qp->qp_num);
    uct_rc_share_conn_disconnect(conn);
    uct_rc_share_conn_timed_del(conn);
    if (conn->main_events != 0) {
        ucs_list_del(&conn->main_list);
        conn->main_events = 0;
    }
    if (conn->grant_owed) {
        ucs_list_del(&conn->owed_list);
    }

    if (conn->superseded) {
        ucs_list_del(&conn->superseded_list);
    } else {
        uct_rc_share_conn_unlist(conn);
    }
    if (conn->by_peer) {
        uct_rc_share_conn_ended_add(iface, &conn->key);
    }
    it = kh_get(uct_rc_share_qpns, &ci->qpns, conn->tx.txq.qp->qp_num);
    if (it != kh_end(&ci->qpns)) {
        kh_del(uct_rc_share_qpns, &ci->qpns, it);
    }
    --ci->count;

    uct_rc_share_qp_destroy(iface, conn->tx.txq.qp);
    uct_rc_share_txq_cleanup(&conn->tx.txq);
    uct_rc_share_conn_retire_ah(iface, conn->peer_ah);
    ucs_free(conn);
}

/* Whether the peer's half may send on the connection: the peer has not
 * said it is gone, and our QP takes its packets */
static int uct_rc_share_conn_peer_uses(const uct_rc_share_conn_t *conn)
{
    return conn->peer_half && conn->qp_connected &&
           (conn->state != UCT_RC_SHARE_CONN_FAILED);
}

/* Whether nothing needs the connection any more: no owner, the peer's half
 * gone (or the QP failed), no WR in flight (its completions name it) */
static int uct_rc_share_conn_done(const uct_rc_share_conn_t *conn)
{
    return (conn->tx.owner == NULL) && !uct_rc_share_conn_peer_uses(conn) &&
           uct_rc_share_txq_idle(&conn->tx.txq);
}

/* The caller holds the async context */
static void uct_rc_share_conn_release(uct_rc_share_conn_t *conn)
{
    if (uct_rc_share_conn_done(conn)) {
        uct_rc_share_conn_queue(conn, UCT_RC_SHARE_CONN_EV_RELEASE, UCS_OK);
    }
}

/* Our QP to the peer's (async), as its request or answer says: from now
 * on ours takes the peer's packets */
static ucs_status_t
uct_rc_share_conn_qp_to_peer(uct_rc_share_conn_t *conn,
                             const uct_rc_share_conn_msg_t *msg)
{
    ucs_status_t status;

    status = uct_rc_share_qp_connect(conn->iface, conn->tx.txq.qp, &conn->path,
                                     msg->rc_qpn, msg->psn, conn->psn,
                                     (enum ibv_mtu)msg->mtu);
    if (status != UCS_OK) {
        uct_rc_share_conn_fail(conn, status);
        return status;
    }

    conn->qp_connected = 1;
    conn->remote_qpn   = msg->rc_qpn;
    conn->peer_mtu     = (enum ibv_mtu)msg->mtu;
    ucs_debug("%s:%d: connection %" PRIu64 " to iface 0x%" PRIx64 ": QP "
              "0x%x connected to 0x%x",
              uct_rc_share_dev_name(conn->iface), conn->iface->port_num,
              conn->key.sn, conn->key.peer.id, conn->tx.txq.qp->qp_num,
              msg->rc_qpn);
    return UCS_OK;
}

/*
 * The peer's QP takes our packets too (it answered, or it asked and we
 * made ours its peer): ours may send. Before it, a packet would find the
 * peer's QP not yet connected, and only the RC retry (TIMEOUT, a second)
 * would bring it there.
 */
static void uct_rc_share_conn_established(uct_rc_share_conn_t *conn)
{
    if ((conn->tx.owner != NULL) && uct_rc_share_conn_requesting(conn)) {
        --conn->iface->conn->owners_waiting;
        /* What the owner sent goes out now, not when it next calls
         * progress, which it may never do before its peer answers; a post
         * that fails is the main thread's to handle, at READY */
        if (conn->qp_connected) {
            (void)uct_rc_share_txq_backlog_post(&conn->tx.txq);
        }
        uct_rc_share_conn_queue(conn, UCT_RC_SHARE_CONN_EV_READY, UCS_OK);
    }
    conn->state           = UCT_RC_SHARE_CONN_CONNECTED;
    conn->peer_ready      = 1;
    conn->confirming      = 0;
    conn->next_idle_check = ucs_get_time() +
                            uct_rc_share_conn_idle_time(conn->iface);
    if (conn->check == UCT_RC_SHARE_CONN_CHECK_NONE) {
        uct_rc_share_conn_timed_del(conn);
    }
}


/* ------------------------------------------------------------ messages in */

/* The peer's entry, created if new; NULL without memory */
static uct_rc_share_peer_t *
uct_rc_share_conn_peer(uct_rc_share_iface_t *iface,
                       const uct_rc_share_peer_id_t *peer_id)
{
    khash_t(uct_rc_share_peers) *peers = &iface->conn->peers;
    khiter_t it;
    int ret;

    it = kh_put(uct_rc_share_peers, peers, *peer_id, &ret);
    if (ret < 0) {
        return NULL;
    } else if (ret > 0) {
        kh_val(peers, it).next_sn  = 0;
        kh_val(peers, it).answered = 0;
    }
    return &kh_val(peers, it);
}

/* A request of the peer: a new connection of its, or one we made with the
 * same number (crossed requests), or the same again (an answer lost) */
static void uct_rc_share_conn_handle_req(uct_rc_share_iface_t *iface,
                                         uct_rc_share_conn_rx_t *rx,
                                         const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;
    uct_rc_share_conn_msg_t rep;
    ucs_status_t status;
    char why[128];

    conn = uct_rc_share_conn_find(iface, &rx->sender, msg->conn_sn);
    if ((conn != NULL) && !conn->by_peer && (conn->tx.owner == NULL) &&
        conn->qp_connected && (conn->remote_qpn != msg->rc_qpn)) {
        /*
         * The peer asks for connection n again with another QP: its own
         * connection n is gone (it destroyed it after our DISC, and its
         * next endpoint to us has that number), while ours waits for the
         * last of its half. Nothing of ours uses it: it goes, and the
         * request makes a new one (UCX's wireup_1sided tests reconnect
         * this way). Only the peer itself can send this (the key is its
         * UD QP and port too).
         */
        ucs_debug("%s:%d: connection %" PRIu64 " of iface 0x%" PRIx64
                  " (QP 0x%x, to 0x%x) superseded by the peer's request with "
                  "QP 0x%x", uct_rc_share_dev_name(iface), iface->port_num,
                  msg->conn_sn, msg->src_iface_id, conn->tx.txq.qp->qp_num,
                  conn->remote_qpn, msg->rc_qpn);
        uct_rc_share_conn_unlist(conn);
        ucs_list_add_tail(&iface->conn->superseded, &conn->superseded_list);
        conn->superseded   = 1;
        conn->disc_pending = 0;
        uct_rc_share_conn_fail(conn, UCS_ERR_CONNECTION_RESET);
        conn = NULL;
    }

    if ((conn == NULL) &&
        uct_rc_share_conn_ended(iface, &rx->sender, msg->conn_sn)) {
        uct_rc_share_conn_drop(iface, "a request for connection %" PRIu64
                               " of iface 0x%" PRIx64 ", which its request "
                               "made before and which ended (sent again, or "
                               "late)", msg->conn_sn, msg->src_iface_id);
        return;
    }

    if (conn == NULL) {
        status = uct_rc_share_conn_new(iface, &rx->sender, msg->conn_sn,
                                       &conn);
        if (status != UCS_OK) {
            ++iface->counters.hs_refused;
            ucs_diag("%s:%d: refused connection %" PRIu64 " of iface 0x%"
                     PRIx64 ": %s", uct_rc_share_dev_name(iface),
                     iface->port_num, msg->conn_sn, msg->src_iface_id,
                     uct_rc_share_conn_new_why(iface, status, why,
                                               sizeof(why)));
            uct_rc_share_conn_answer_init(iface, &rep, UCT_RC_SHARE_CONN_REJ,
                                          msg);
            rep.result = UCT_RC_SHARE_CONN_REJ_NO_RESOURCE;
            uct_rc_share_conn_answer(iface, rx, &rep);
            return;
        }

        ++iface->counters.conns_by_peers;
        conn->path    = rx->source;
        conn->peer_ah = uct_rc_share_ah_from_attr(iface, &rx->ah_attr);
        if ((conn->peer_ah == NULL) ||
            (uct_rc_share_conn_qp_to_peer(conn, msg) != UCS_OK)) {
            conn->state = UCT_RC_SHARE_CONN_FAILED;
            uct_rc_share_conn_queue(conn, UCT_RC_SHARE_CONN_EV_RELEASE,
                                    UCS_OK);
            return;
        }
        /* The peer's half may send now. Ours has no owner yet; one that
         * comes before the requester says its QP is connected (our
         * answer in) asks it first (confirming) */
        conn->by_peer         = 1;
        conn->state           = UCT_RC_SHARE_CONN_CONNECTED;
        conn->next_idle_check = ucs_get_time() +
                                uct_rc_share_conn_idle_time(iface);
        uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_REP);
        return;
    }

    switch (conn->state) {
    case UCT_RC_SHARE_CONN_CONNECTING:
        /* Both sides asked at once: our QP becomes the peer of the
         * requester's, and the answer says so. Ours waits to send until
         * the answer to our own request: the requester's QP may not be
         * connected yet (its request may have crossed ours) */
        if (!conn->qp_connected) {
            if (uct_rc_share_conn_qp_to_peer(conn, msg) != UCS_OK) {
                break;
            }
        } else if (conn->remote_qpn != msg->rc_qpn) {
            uct_rc_share_conn_drop(iface, "a request for connection %"
                                   PRIu64 " of iface 0x%" PRIx64 " with QP "
                                   "0x%x, which is connected to 0x%x",
                                   msg->conn_sn, msg->src_iface_id,
                                   msg->rc_qpn, conn->remote_qpn);
            break;
        }
        uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_REP);
        break;
    case UCT_RC_SHARE_CONN_CONNECTED:
        if (conn->remote_qpn == msg->rc_qpn) {
            /* Our answer was lost or late, or crossed its request */
            uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_REP);
        } else {
            uct_rc_share_conn_drop(iface, "a request for connection %"
                                   PRIu64 " of iface 0x%" PRIx64 " with QP "
                                   "0x%x, which is connected to 0x%x and "
                                   "used by an endpoint of ours",
                                   msg->conn_sn, msg->src_iface_id,
                                   msg->rc_qpn, conn->remote_qpn);
        }
        break;
    default:
        break; /* failed: the requester learns from its check */
    }
}

/* The target of conn answered: it lives. Its other requests wait for a
 * busy target (thousands of handshakes at once, a slow host), not a gone
 * one: their deadlines start again (uct_rc_share_conn_deadline; one entry
 * per peer, not a walk of the requests per answer) */
static void uct_rc_share_conn_target_alive(uct_rc_share_conn_t *conn)
{
    uct_rc_share_peer_t *peer = uct_rc_share_conn_peer(conn->iface,
                                                       &conn->key.peer);

    if (peer != NULL) {
        peer->answered = ucs_get_time();
    }
}

/* When a request of conn gives up: its own deadline, or later if the
 * target answered another request since */
static ucs_time_t uct_rc_share_conn_deadline(const uct_rc_share_conn_t *conn)
{
    khash_t(uct_rc_share_peers) *peers = &conn->iface->conn->peers;
    khiter_t it = kh_get(uct_rc_share_peers, peers, conn->key.peer);
    ucs_time_t answered;

    if (it == kh_end(peers)) {
        return conn->deadline;
    }
    answered = kh_val(peers, it).answered;
    return (answered == 0) ? conn->deadline :
           ucs_max(conn->deadline,
                   answered + conn->iface->config.conn_timeout);
}

static void uct_rc_share_conn_handle_rep(uct_rc_share_iface_t *iface,
                                         uct_rc_share_conn_rx_t *rx,
                                         const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, &rx->sender, msg->conn_sn);
    if (conn == NULL) {
        uct_rc_share_conn_late(iface, "an answer", rx, msg);
        return;
    }

    if (conn->confirming) {
        /* The requester answers our request of a connection it made:
         * its QP is connected to ours */
        if (conn->remote_qpn == msg->rc_qpn) {
            uct_rc_share_conn_established(conn);
        }
    } else if (conn->state == UCT_RC_SHARE_CONN_CONNECTING) {
        uct_rc_share_conn_target_alive(conn);
        if (!conn->qp_connected) {
            if (uct_rc_share_conn_qp_to_peer(conn, msg) != UCS_OK) {
                return;
            }
        } else if (conn->remote_qpn != msg->rc_qpn) {
            uct_rc_share_conn_drop(iface, "an answer for connection %" PRIu64
                                   " of iface 0x%" PRIx64 " with QP 0x%x, "
                                   "ours is connected to 0x%x", msg->conn_sn,
                                   msg->src_iface_id, msg->rc_qpn,
                                   conn->remote_qpn);
            return;
        }
        uct_rc_share_conn_established(conn);
    }
    /* Else a duplicate, or the answer to a request that crossed the
     * peer's: connected already */
}

static void uct_rc_share_conn_handle_rej(uct_rc_share_iface_t *iface,
                                         uct_rc_share_conn_rx_t *rx,
                                         const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, &rx->sender, msg->conn_sn);
    if (conn == NULL) {
        uct_rc_share_conn_late(iface, "a refusal", rx, msg);
        return;
    } else if (conn->state != UCT_RC_SHARE_CONN_CONNECTING) {
        uct_rc_share_conn_drop(iface, "a refusal of connection %" PRIu64
                               " of iface 0x%" PRIx64 " we do not wait for",
                               msg->conn_sn, msg->src_iface_id);
        return;
    }

    if (msg->result == UCT_RC_SHARE_CONN_REJ_NO_RESOURCE) {
        ucs_error("%s:%d: the remote iface refused the connection: it has "
                  "as many as its UCX_RC_SHARE_MAX_CONNS allows, or could "
                  "not make one (its log says which)",
                  uct_rc_share_dev_name(iface), iface->port_num);
        uct_rc_share_conn_fail(conn, UCS_ERR_NO_RESOURCE);
    } else {
        ucs_error("%s:%d: the remote iface refused the connection: it "
                  "speaks another rc_share protocol version (ours: %d): the "
                  "processes run different builds of ucx-ibshare",
                  uct_rc_share_dev_name(iface), iface->port_num,
                  UCT_RC_SHARE_CONN_VERSION);
        uct_rc_share_conn_fail(conn, UCS_ERR_UNSUPPORTED);
    }
}

static void uct_rc_share_conn_handle_disc(uct_rc_share_iface_t *iface,
                                          uct_rc_share_conn_rx_t *rx,
                                          const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, &rx->sender, msg->conn_sn);
    if (conn == NULL) {
        return; /* gone already, or not the peer's */
    }

    conn->peer_half = 0;
    if (!conn->had_owner && (conn->state == UCT_RC_SHARE_CONN_CONNECTED)) {
        /* Only the peer used it, and the peer is done: so is the
         * connection, which the peer may destroy once our DISC is in,
         * rather than find it gone at its next check (the main thread
         * sends it when our grants are done: uct_rc_share_conn_destroy) */
        conn->disc_pending = 1;
    }
    uct_rc_share_conn_release(conn);
}

/*
 * A peer asks whether we still have connection n with it. Answered here,
 * in the async context, so that a process that computes without calling
 * progress answers too: only a process that is gone stays silent. A check
 * from a peer whose half is gone for good is its DISC too.
 */
static void uct_rc_share_conn_handle_check(uct_rc_share_iface_t *iface,
                                           uct_rc_share_conn_rx_t *rx,
                                           const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_msg_t rep;
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, &rx->sender, msg->conn_sn);
    if ((conn != NULL) && (msg->flags & UCT_RC_SHARE_CONN_FLAG_DETACHED)) {
        conn->peer_half = 0;
        uct_rc_share_conn_release(conn);
    }

    uct_rc_share_conn_answer_init(iface, &rep, UCT_RC_SHARE_CONN_CHECK_REP,
                                  msg);
    rep.check_sn = msg->check_sn;
    /* Connected, or still asking for it: the peer's answer to our request
     * was lost or waits in our queue (a burst of thousands), and our next
     * request gets it again. Were that "no connection", the peer would
     * end its half, and refuse the next request as a replay of an ended
     * one */
    if ((conn != NULL) &&
        (((conn->state == UCT_RC_SHARE_CONN_CONNECTED) &&
          (conn->remote_qpn == msg->rc_qpn)) ||
         ((conn->state == UCT_RC_SHARE_CONN_CONNECTING) &&
          (!conn->qp_connected || (conn->remote_qpn == msg->rc_qpn)))) &&
        (conn->tx.txq.qp->qp_num == msg->dst_rc_qpn) &&
        ((conn->tx.owner != NULL) || conn->peer_half)) {
        rep.result = UCT_RC_SHARE_CONN_CHECK_CONNECTED;
        rep.rc_qpn = conn->tx.txq.qp->qp_num;
        rep.flags  = (conn->tx.owner != NULL) ? UCT_RC_SHARE_CONN_FLAG_TX :
                     (conn->had_owner ? UCT_RC_SHARE_CONN_FLAG_DETACHED : 0);
    } else {
        rep.result = UCT_RC_SHARE_CONN_CHECK_NO_CONN;
    }
    uct_rc_share_conn_answer(iface, rx, &rep);
}

static void
uct_rc_share_conn_handle_check_rep(uct_rc_share_iface_t *iface,
                                   uct_rc_share_conn_rx_t *rx,
                                   const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, &rx->sender, msg->conn_sn);
    if ((conn == NULL) || (conn->check == UCT_RC_SHARE_CONN_CHECK_NONE) ||
        (msg->check_sn != conn->check_sn)) {
        return; /* late, a duplicate, or not the peer's */
    }

    if (msg->result == UCT_RC_SHARE_CONN_CHECK_NO_CONN) {
        /* News only to an endpoint of ours: else the peer's DISC was lost */
        ucs_log((conn->tx.owner != NULL) ? UCS_LOG_LEVEL_DIAG :
                UCS_LOG_LEVEL_DEBUG, "%s:%d: iface 0x%" PRIx64 " no longer "
                "has connection %" PRIu64 " (our QP 0x%x)",
                uct_rc_share_dev_name(iface), iface->port_num,
                conn->key.peer.id, conn->key.sn, conn->tx.txq.qp->qp_num);
        uct_rc_share_conn_fail(conn, UCS_ERR_CONNECTION_RESET);
        return;
    }

    if (msg->rc_qpn != conn->remote_qpn) {
        return; /* "connected" with another QP than ours: no answer */
    }

    if ((conn->check == UCT_RC_SHARE_CONN_CHECK_IDLE) &&
        (msg->flags & UCT_RC_SHARE_CONN_FLAG_DETACHED)) {
        conn->peer_half = 0; /* its DISC was lost */
    }
    uct_rc_share_conn_stop_check(conn);
    conn->next_idle_check = ucs_get_time() +
                            uct_rc_share_conn_idle_time(iface);
    uct_rc_share_conn_release(conn);
}

/* A message of another protocol version (the first fields keep their
 * meaning from version 3 on): refused, where it proves it knows us. Each
 * version is named at error level once, later ones at most once a second
 * (a stranger alternating versions must not flood the log) */
static void uct_rc_share_conn_other_version(uct_rc_share_iface_t *iface,
                                            uct_rc_share_conn_rx_t *rx,
                                            const void *buf, size_t length)
{
    const uct_rc_share_conn_msg_t *msg = buf;
    uct_rc_share_conn_iface_t *ci      = iface->conn;
    uint64_t *seen = &ci->versions_seen[msg->version / 64];
    uint64_t bit   = UCS_BIT(msg->version % 64);
    unsigned unlogged;
    uct_rc_share_conn_msg_t rej;

    ++iface->counters.hs_dropped;
    if (!(*seen & bit)) {
        *seen |= bit;
        ucs_error("%s:%d: a handshake message of protocol version %d from "
                  "QP 0x%x, ours is %d: the processes run different builds "
                  "of ucx-ibshare", uct_rc_share_dev_name(iface),
                  iface->port_num, msg->version, rx->wc->src_qp,
                  UCT_RC_SHARE_CONN_VERSION);
    } else {
        unlogged = ci->versions_unlogged;
        if (uct_rc_share_conn_log_due(&ci->last_version_log,
                                      &ci->versions_unlogged)) {
            ucs_warn("%s:%d: another handshake message of protocol version "
                     "%d from QP 0x%x, ours is %d (%u more of other "
                     "versions since the last of these lines)",
                     uct_rc_share_dev_name(iface), iface->port_num,
                     msg->version, rx->wc->src_qp, UCT_RC_SHARE_CONN_VERSION,
                     unlogged);
            ci->versions_unlogged = 0;
        }
    }
    if ((msg->version < 3) || (length < UCT_RC_SHARE_CONN_STABLE_LEN) ||
        (msg->type != UCT_RC_SHARE_CONN_REQ) ||
        (msg->dst_iface_id != iface->id) ||
        (msg->dst_secret != iface->secret) ||
        (uct_rc_share_wc_source(iface, rx->wc, rx->grh, &rx->ah_attr,
                                &rx->source) != UCS_OK)) {
        return;
    }

    uct_rc_share_conn_answer_init(iface, &rej, UCT_RC_SHARE_CONN_REJ, msg);
    rej.result = UCT_RC_SHARE_CONN_REJ_VERSION;
    uct_rc_share_conn_answer(iface, rx, &rej);
}

/* Who sent rx's message: the id and secret it claims, from where it came.
 * It must claim to come from there too: a message captured and sent again
 * from another QP or host is dropped (its words are a stranger's). */
static int uct_rc_share_conn_rx_sender(uct_rc_share_iface_t *iface,
                                       uct_rc_share_conn_rx_t *rx,
                                       const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_peer_id_t claimed;

    if (uct_rc_share_wc_source(iface, rx->wc, rx->grh, &rx->ah_attr,
                               &rx->source) != UCS_OK) {
        ++iface->counters.hs_dropped;
        return 0;
    }

    uct_rc_share_peer_id_init(iface, &rx->sender, msg->src_iface_id,
                              msg->src_secret, rx->wc->src_qp,
                              rx->source.lid, rx->source.gid);
    uct_rc_share_peer_id_init(iface, &claimed, msg->src_iface_id,
                              msg->src_secret, msg->src_ud_qpn, msg->src_lid,
                              msg->src_gid);
    if (!uct_rc_share_peer_id_equal(claimed, rx->sender)) {
        uct_rc_share_conn_drop(iface, "a message of iface 0x%" PRIx64 " "
                               "that says it comes from UD QP 0x%x, but "
                               "came from QP 0x%x or another port (sent "
                               "again by another host?)", msg->src_iface_id,
                               msg->src_ud_qpn, rx->wc->src_qp);
        return 0;
    }
    return 1;
}

static void uct_rc_share_conn_handle_msg(uct_rc_share_iface_t *iface,
                                         uct_rc_share_conn_rx_t *rx,
                                         const void *buf, size_t length)
{
    const uct_rc_share_conn_msg_t *msg = buf;
    ucs_status_t status;

    status = uct_rc_share_conn_msg_check(buf, length);
    if (status == UCS_ERR_UNSUPPORTED) {
        uct_rc_share_conn_other_version(iface, rx, buf, length);
        return;
    } else if (status != UCS_OK) {
        uct_rc_share_conn_drop(iface, "malformed (%zu bytes from QP 0x%x): "
                               "%s", length, rx->wc->src_qp,
                               ucs_status_string(status));
        return;
    }

    /* Ours, and it proves it knows our address: else nothing happens */
    if ((msg->dst_iface_id != iface->id) ||
        (msg->dst_secret != iface->secret)) {
        uct_rc_share_conn_drop(iface, "%s from QP 0x%x without our %s",
                               (msg->type == UCT_RC_SHARE_CONN_REQ) ?
                               "a connection request" : "a message",
                               rx->wc->src_qp,
                               (msg->dst_iface_id != iface->id) ?
                               "iface id" : "secret");
        return;
    }

    if (!uct_rc_share_conn_rx_sender(iface, rx, msg)) {
        return;
    }

    switch (msg->type) {
    case UCT_RC_SHARE_CONN_REQ:
        uct_rc_share_conn_handle_req(iface, rx, msg);
        break;
    case UCT_RC_SHARE_CONN_REP:
        uct_rc_share_conn_handle_rep(iface, rx, msg);
        break;
    case UCT_RC_SHARE_CONN_REJ:
        uct_rc_share_conn_handle_rej(iface, rx, msg);
        break;
    case UCT_RC_SHARE_CONN_DISC:
        uct_rc_share_conn_handle_disc(iface, rx, msg);
        break;
    case UCT_RC_SHARE_CONN_CHECK:
        uct_rc_share_conn_handle_check(iface, rx, msg);
        break;
    case UCT_RC_SHARE_CONN_CHECK_REP:
        uct_rc_share_conn_handle_check_rep(iface, rx, msg);
        break;
    }
}

/* Handles what the UD CQ holds; the caller holds the async context. Every
 * receive is a stranger's until proven otherwise: only the first
 * CONN_BUF_SIZE bytes are read, whatever the packet's length */
static void uct_rc_share_conn_poll(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    uct_rc_share_conn_rx_t rx;
    struct ibv_wc wc[8];
    int i, n, in_error = 0;
    size_t length;
    void *buf;

    do {
        /* wc.opcode is undefined in error completions: tell by wr_id */
        n = ibv_poll_cq(ci->cq, ucs_static_array_size(wc), wc);
        for (i = 0; i < n; ++i) {
            if (wc[i].wr_id == UCT_RC_SHARE_CONN_SEND_WR) {
                ++ci->tx_available;
                ++ci->tx_done;
                if ((wc[i].status != IBV_WC_SUCCESS) &&
                    (wc[i].status != IBV_WC_WR_FLUSH_ERR)) {
                    ucs_diag("%s: handshake send failed: %s",
                             uct_rc_share_dev_name(iface),
                             ibv_wc_status_str(wc[i].status));
                    in_error = 1;
                }
                continue;
            }

            if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
                in_error = 1; /* the QP went to error, or is going away */
                continue;
            }

            if ((wc[i].status == IBV_WC_SUCCESS) &&
                (wc[i].wr_id < UCT_RC_SHARE_CONN_RX_COUNT) &&
                (wc[i].byte_len >= UCT_RC_SHARE_GRH_LEN)) {
                buf    = UCS_PTR_BYTE_OFFSET(ci->rx_bufs,
                                             wc[i].wr_id *
                                             UCT_RC_SHARE_CONN_BUF_SIZE);
                length = wc[i].byte_len - UCT_RC_SHARE_GRH_LEN;
                rx.wc  = &wc[i];
                rx.grh = buf;
                if (length <= (UCT_RC_SHARE_CONN_BUF_SIZE -
                               UCT_RC_SHARE_GRH_LEN)) {
                    uct_rc_share_conn_handle_msg(iface, &rx,
                                                 UCS_PTR_BYTE_OFFSET(buf,
                                                     UCT_RC_SHARE_GRH_LEN),
                                                 length);
                } else {
                    /* Its tail, in the spill area, is never read */
                    uct_rc_share_conn_drop(iface, "%zu bytes from QP 0x%x, "
                                           "longer than any message", length,
                                           wc[i].src_qp);
                }
            } else if (wc[i].status != IBV_WC_SUCCESS) {
                ucs_diag("%s: handshake receive failed: %s",
                         uct_rc_share_dev_name(iface),
                         ibv_wc_status_str(wc[i].status));
                in_error = 1;
            } else {
                uct_rc_share_conn_drop(iface, "%u bytes from QP 0x%x, "
                                       "shorter than a GRH", wc[i].byte_len,
                                       wc[i].src_qp);
            }
            if (wc[i].wr_id < UCT_RC_SHARE_CONN_RX_COUNT) {
                uct_rc_share_conn_post_recv(iface, wc[i].wr_id);
            }
        }
    } while (n == (int)ucs_static_array_size(wc));

    if (in_error) {
        uct_rc_share_conn_ud_check(iface);
    }
    if (!ucs_list_is_empty(&ci->retired)) {
        uct_rc_share_conn_release_ahs(iface, 0);
    }
}

/* ------------------------------------------------------------ timers */

static void uct_rc_share_conn_send_req(uct_rc_share_conn_t *conn)
{
    uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_REQ);
    conn->next_retry = ucs_get_time() + conn->iface->config.conn_retry;
}

static void uct_rc_share_conn_send_check(uct_rc_share_conn_t *conn)
{
    uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_CHECK);
    conn->check_next_retry = ucs_get_time() + conn->iface->config.conn_retry;
}

/* The caller holds the async context */
static void uct_rc_share_conn_start_check(uct_rc_share_conn_t *conn,
                                          uct_rc_share_conn_check_kind_t kind)
{
    if (conn->check != UCT_RC_SHARE_CONN_CHECK_NONE) {
        if ((kind == UCT_RC_SHARE_CONN_CHECK_OWNER) &&
            (conn->check == UCT_RC_SHARE_CONN_CHECK_IDLE)) {
            conn->check = kind; /* its answer serves both */
            ++conn->iface->conn->owners_waiting;
        }
        return;
    }

    conn->check          = kind;
    conn->check_deadline = ucs_get_time() + conn->iface->config.check_timeout;
    conn->check_drops    = conn->iface->counters.hs_dropped;
    conn->check_extended = 0;
    ++conn->check_sn; /* an answer to an earlier check is no answer */
    if (kind == UCT_RC_SHARE_CONN_CHECK_OWNER) {
        ++conn->iface->conn->owners_waiting;
    }
    uct_rc_share_conn_timed_add(conn);
    uct_rc_share_conn_send_check(conn);
}

/* Whether the check's time saw more bad handshake messages than our UD
 * receive queue holds: then it may have been full when the answer came,
 * and the check waits once more */
static int uct_rc_share_conn_check_flooded(const uct_rc_share_conn_t *conn)
{
    return !conn->check_extended &&
           ((conn->iface->counters.hs_dropped - conn->check_drops) >=
            UCT_RC_SHARE_CONN_RX_COUNT);
}

/* dead: the peers whose iface did not answer a check (the caller fails
 * their other connections) */
static void uct_rc_share_conn_timer_one(uct_rc_share_conn_t *conn,
                                        ucs_time_t now,
                                        khash_t(uct_rc_share_peer_set) *dead)
{
    uct_rc_share_iface_t *iface = conn->iface;
    int ret;

    if (uct_rc_share_conn_requesting(conn)) {
        if (now >= uct_rc_share_conn_deadline(conn)) {
            ucs_diag("%s:%d: no answer to the request of connection %" PRIu64
                     " to iface 0x%" PRIx64 " within %.1f s (the iface is "
                     "gone, or speaks another rc_share protocol than our "
                     "version %d)", uct_rc_share_dev_name(iface),
                     iface->port_num, conn->key.sn, conn->key.peer.id,
                     ucs_time_to_sec(iface->config.conn_timeout),
                     UCT_RC_SHARE_CONN_VERSION);
            uct_rc_share_conn_fail(conn, UCS_ERR_ENDPOINT_TIMEOUT);
        } else if (now >= conn->next_retry) {
            uct_rc_share_conn_send_req(conn);
        }
        return;
    }

    if (conn->check == UCT_RC_SHARE_CONN_CHECK_NONE) {
        uct_rc_share_conn_timed_del(conn);
    } else if ((now >= conn->check_deadline) &&
               uct_rc_share_conn_check_flooded(conn)) {
        /* The answer may be among what a flood of bad messages kept out
         * of our receive queue: a live peer must not fail for a
         * stranger's packets, a dead one is found one timeout later */
        ucs_diag("%s:%d: no answer from iface 0x%" PRIx64 " to the check of "
                 "connection %" PRIu64 " while %" PRIu64 " bad handshake "
                 "messages came: waiting %.1f s more",
                 uct_rc_share_dev_name(iface), iface->port_num,
                 conn->key.peer.id, conn->key.sn,
                 iface->counters.hs_dropped - conn->check_drops,
                 ucs_time_to_sec(iface->config.check_timeout));
        conn->check_extended = 1;
        conn->check_deadline = now + iface->config.check_timeout;
    } else if (now >= conn->check_deadline) {
        ucs_diag("%s:%d: no answer from iface 0x%" PRIx64 " to the check of "
                 "connection %" PRIu64 " within %.1f s",
                 uct_rc_share_dev_name(iface), iface->port_num,
                 conn->key.peer.id, conn->key.sn,
                 ucs_time_to_sec(iface->config.check_timeout));
        uct_rc_share_conn_fail(conn, UCS_ERR_ENDPOINT_TIMEOUT);
        kh_put(uct_rc_share_peer_set, dead, conn->key.peer, &ret);
    } else if (now >= conn->check_next_retry) {
        uct_rc_share_conn_send_check(conn);
    }
}

/* The connections that only the peer uses, which nobody else checks, get a
 * check every CHECK_TIMEOUT: a killed peer's, one whose DISC was lost, one
 * whose requester never finished. One check at a time per peer iface:
 * thousands of connections to one peer each sending a check at every scan
 * are more than a busy peer answers within CHECK_TIMEOUT (2,048 endpoints
 * of one process, connected at once, failed that way in the guest), and
 * one unanswered check ends them all (uct_rc_share_conn_fail_peers). The
 * caller holds the async context. */
static void uct_rc_share_conn_idle_scan(uct_rc_share_iface_t *iface,
                                        ucs_time_t now)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    khash_t(uct_rc_share_peer_set) checking;
    uct_rc_share_conn_t *conn;
    int ret;

    if (now < ci->next_idle_scan) {
        return;
    }
    ci->next_idle_scan = now + (uct_rc_share_conn_idle_time(iface) / 4);

    kh_init_inplace(uct_rc_share_peer_set, &checking);
    kh_foreach_value(&ci->conns, conn, {
        if (conn->check != UCT_RC_SHARE_CONN_CHECK_NONE) {
            kh_put(uct_rc_share_peer_set, &checking, conn->key.peer, &ret);
        }
    });
    kh_foreach_value(&ci->conns, conn, {
        if ((conn->tx.owner == NULL) && conn->peer_half &&
            (conn->state == UCT_RC_SHARE_CONN_CONNECTED) &&
            (conn->check == UCT_RC_SHARE_CONN_CHECK_NONE) &&
            (now >= conn->next_idle_check)) {
            kh_put(uct_rc_share_peer_set, &checking, conn->key.peer, &ret);
            if (ret != UCS_KH_PUT_KEY_PRESENT) {
                uct_rc_share_conn_start_check(conn,
                                              UCT_RC_SHARE_CONN_CHECK_IDLE);
            }
        }
    });
    kh_destroy_inplace(uct_rc_share_peer_set, &checking);
}

/* The ifaces in dead did not answer a check within CHECK_TIMEOUT: every
 * other connection to them fails too, as its own check would, one
 * CHECK_TIMEOUT after the other. The caller holds the async context. */
static void
uct_rc_share_conn_fail_peers(uct_rc_share_iface_t *iface,
                             const khash_t(uct_rc_share_peer_set) *dead)
{
    uct_rc_share_conn_t *conn;
    unsigned count = 0;

    /* Not those whose peer's half said DISC: the peer ended its use of
     * them before it went, and our endpoint on one learns of the peer
     * when it next sends or checks, as on UCX's rc_verbs. (A peer that
     * closed cleanly with 1,000 connections, some of whose DISCs were
     * lost, failed the endpoint of ours that it had said DISC for:
     * conn_stranger's churn, about one run in three) */
    kh_foreach_value(&iface->conn->conns, conn, {
        if ((conn->state != UCT_RC_SHARE_CONN_FAILED) && conn->peer_half &&
            (kh_get(uct_rc_share_peer_set, dead, conn->key.peer) !=
             kh_end(dead))) {
            uct_rc_share_conn_fail(conn, UCS_ERR_ENDPOINT_TIMEOUT);
            ++count;
        }
    });
    if (count > 0) {
        ucs_diag("%s:%d: %u more connections to the %u iface(s) that did "
                 "not answer a check failed with them",
                 uct_rc_share_dev_name(iface), iface->port_num, count,
                 kh_size(dead));
    }
}

/* The async context's timer, every CONN_RETRY (the context is blocked) */
static void uct_rc_share_conn_timer(int id, ucs_event_set_types_t events,
                                    void *arg)
{
    uct_rc_share_iface_t *iface = arg;
    ucs_time_t now              = ucs_get_time();
    khash_t(uct_rc_share_peer_set) dead;
    uct_rc_share_conn_t *conn, *tmp;

    kh_init_inplace(uct_rc_share_peer_set, &dead);
    ucs_list_for_each_safe(conn, tmp, &iface->conn->timed, timed_list) {
        uct_rc_share_conn_timer_one(conn, now, &dead);
    }
    /* After the walk: failing takes connections off the timed list */
    if (kh_size(&dead) > 0) {
        uct_rc_share_conn_fail_peers(iface, &dead);
    }
    kh_destroy_inplace(uct_rc_share_peer_set, &dead);
    uct_rc_share_conn_idle_scan(iface, now);
    if (now >= iface->conn->next_qp_check) {
        /* An error that raised no completion (or one we did not see)
         * would stop the handshake for good: look */
        iface->conn->next_qp_check =
                now + ucs_time_from_sec(UCT_RC_SHARE_CONN_QP_CHECK_SEC);
        uct_rc_share_conn_ud_check(iface);
    }
}

/* The async context's handler of the UD CQ's channel */
static void uct_rc_share_conn_async_handler(int fd,
                                            ucs_event_set_types_t events,
                                            void *arg)
{
    uct_rc_share_iface_t *iface = arg;
    struct ibv_cq *cq;
    void *cq_context;

    while (ibv_get_cq_event(iface->conn->channel, &cq, &cq_context) == 0) {
        ibv_ack_cq_events(cq, 1);
    }

    /* Armed before polling: a completion after the poll raises an event */
    if (ibv_req_notify_cq(iface->conn->cq, 0) != 0) {
        ucs_error("%s: ibv_req_notify_cq(handshake) failed: %m",
                  uct_rc_share_dev_name(iface));
    }
    uct_rc_share_conn_poll(iface);
}

/* ------------------------------------------------------------ main thread */

static unsigned uct_rc_share_conn_main_progress(void *arg)
{
    uct_rc_share_iface_t *iface   = arg;
    uct_rc_share_conn_iface_t *ci = iface->conn;
    ucs_async_context_t *async    = uct_rc_share_conn_async(iface);
    unsigned count                = 0;
    uct_rc_share_conn_t *conn;
    unsigned events;
    ucs_status_t status;

    UCS_ASYNC_BLOCK(async);
    ci->main_prog_id = UCS_CALLBACKQ_ID_NULL; /* oneshot: ran */
    /* One at a time: an owner's callback may close another connection */
    while (!ucs_list_is_empty(&ci->main)) {
        conn   = ucs_list_extract_head(&ci->main, uct_rc_share_conn_t,
                                       main_list);
        events = conn->main_events;
        status = conn->main_status;
        conn->main_events = 0;

        if (events & UCT_RC_SHARE_CONN_EV_FAILED) {
            uct_rc_share_qp_set_error(conn->tx.txq.qp);
        }
        if ((events & (UCT_RC_SHARE_CONN_EV_READY |
                       UCT_RC_SHARE_CONN_EV_FAILED)) &&
            (conn->tx.owner != NULL)) {
            UCS_ASYNC_UNBLOCK(async);
            if (events & UCT_RC_SHARE_CONN_EV_FAILED) {
                conn->tx.owner_ops->failed(conn->tx.owner, status);
            } else {
                conn->tx.owner_ops->ready(conn->tx.owner);
            }
            ++count;
            UCS_ASYNC_BLOCK(async);
            /* The owner may have closed it: that queued what is left. A
             * release that came with the news is queued again */
            if (events & UCT_RC_SHARE_CONN_EV_RELEASE) {
                uct_rc_share_conn_release(conn);
            }
            continue;
        }
        if ((events & UCT_RC_SHARE_CONN_EV_RELEASE) &&
            uct_rc_share_conn_done(conn)) {
            /* What the peer sent before it went is delivered first; the
             * callbacks run without the async context (and may queue
             * more, or make the connection busy again) */
            UCS_ASYNC_UNBLOCK(async);
            ci->drain_rx(iface);
            UCS_ASYNC_BLOCK(async);
            if ((conn->main_events == 0) && uct_rc_share_conn_done(conn)) {
                uct_rc_share_conn_destroy(conn);
            }
            ++count;
        }
    }
    UCS_ASYNC_UNBLOCK(async);
    return count;
}

int uct_rc_share_conn_busy(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    int busy;

    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));
    busy = (ci->owners_waiting != 0) || !ucs_list_is_empty(&ci->main);
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
    return busy;
}

unsigned uct_rc_share_conn_count(const uct_rc_share_iface_t *iface)
{
    return iface->conn->count;
}

/* ------------------------------------------------------------ owners */

/* The next number of a connection of ours to the peer */
static uint64_t uct_rc_share_conn_next_sn(uct_rc_share_iface_t *iface,
                                          const uct_rc_share_peer_id_t *peer_id)
{
    uct_rc_share_peer_t *peer = uct_rc_share_conn_peer(iface, peer_id);

    return (peer == NULL) ? UINT64_MAX : /* a number nobody uses */
           peer->next_sn++;
}

ucs_status_t uct_rc_share_conn_open(uct_rc_share_iface_t *iface,
                                    const uct_rc_share_device_addr_t *dev,
                                    const uct_rc_share_iface_addr_t *addr,
                                    void *owner,
                                    const uct_rc_share_conn_owner_ops_t *ops,
                                    uct_rc_share_conn_t **conn_p,
                                    int *connected_p)
{
    ucs_async_context_t *async = uct_rc_share_conn_async(iface);
    uct_rc_share_conn_t *conn;
    ucs_status_t status        = UCS_OK;
    uct_rc_share_peer_id_t peer;
    char why[128];
    uint64_t sn;

    /* The peer is all of its address: a connection another made with its
     * id (and even its secret, which every rank of the job has) from
     * another QP or port is not to it */
    uct_rc_share_peer_id_init(iface, &peer, addr->id, addr->secret,
                              uct_ibshare_unpack_uint24(addr->qpn), dev->lid,
                              dev->gid);

    UCS_ASYNC_BLOCK(async);
    do {
        sn   = uct_rc_share_conn_next_sn(iface, &peer);
        conn = uct_rc_share_conn_find(iface, &peer, sn);
        /* The peer's connection n, which no endpoint of ours used: ours
         * too. One that had an owner, or whose peer's half went, is not
         * for us: the next number */
    } while ((conn != NULL) &&
             ((conn->had_owner || !conn->peer_half ||
               (conn->state != UCT_RC_SHARE_CONN_CONNECTED))));

    if (conn != NULL) {
        conn->tx.owner     = owner;
        conn->tx.owner_ops = ops;
        conn->had_owner    = 1;
        if (conn->peer_ready) {
            *connected_p = 1;
            goto out;
        }
        /* The requester may not have our answer yet, and its QP then
         * drops what ours sends: we ask, and its answer says it has */
        conn->confirming = 1;
        conn->deadline   = ucs_get_time() + iface->config.conn_timeout;
        ++iface->conn->owners_waiting;
        uct_rc_share_conn_timed_add(conn);
        uct_rc_share_conn_send_req(conn);
        *connected_p     = 0;
        goto out;
    }

    status = uct_rc_share_conn_new(iface, &peer, sn, &conn);
    if (status != UCS_OK) {
        ucs_error("%s:%d: rc_share: no connection to iface 0x%" PRIx64
                  ": %s", uct_rc_share_dev_name(iface), iface->port_num,
                  addr->id, uct_rc_share_conn_new_why(iface, status, why,
                                                      sizeof(why)));
        if (status == UCS_ERR_EXCEEDS_LIMIT) {
            status = UCS_ERR_NO_RESOURCE;
        }
        conn = NULL;
        goto out;
    }

    conn->path        = *dev;
    conn->peer_mtu    = (enum ibv_mtu)addr->mtu;
    conn->peer_ah     = uct_rc_share_ah_create(iface, dev);
    if (conn->peer_ah == NULL) {
        conn->state = UCT_RC_SHARE_CONN_FAILED;
        uct_rc_share_conn_destroy(conn);
        conn   = NULL;
        status = UCS_ERR_UNREACHABLE;
        goto out;
    }

    conn->tx.owner     = owner;
    conn->tx.owner_ops = ops;
    conn->had_owner    = 1;
    conn->deadline     = ucs_get_time() + iface->config.conn_timeout;
    ++iface->conn->owners_waiting;
    uct_rc_share_conn_timed_add(conn);
    uct_rc_share_conn_send_req(conn);
    *connected_p    = 0;

out:
    UCS_ASYNC_UNBLOCK(async);
    *conn_p = conn;
    return status;
}

void uct_rc_share_conn_close(uct_rc_share_conn_t *conn)
{
    uct_rc_share_iface_t *iface = conn->iface;
    ucs_async_context_t *async  = uct_rc_share_conn_async(iface);
    int owned;

    owned = uct_ibshare_resources_owned(iface->md->res);
    /*
     * A fork child closing what it inherited does not touch UCX's async
     * state, which is not fork-safe: the child has the parent's async
     * locks (this context's, UCX's global handlers lock) as the parent's
     * async thread held them at the fork, but not the thread, so taking
     * one can wait forever; and the child's epoll set is the parent's,
     * from which removing a handler would take the parent's fds. The child
     * has one thread: nothing runs beside it.
     */
    if (owned) {
        UCS_ASYNC_BLOCK(async);
    }
    /* What the owner posted completes to nobody (the backlog is the async
     * context's); a NOP reports the unsignaled tail, so that the queue can
     * become idle */
    uct_rc_share_txq_detach(&conn->tx.txq);
    if ((conn->state == UCT_RC_SHARE_CONN_CONNECTED) && owned) {
        (void)uct_rc_share_txq_report_tail(&conn->tx.txq);
    }
    if (uct_rc_share_conn_owner_waits(conn)) {
        --iface->conn->owners_waiting;
    }
    if (conn->check == UCT_RC_SHARE_CONN_CHECK_OWNER) {
        conn->check = UCT_RC_SHARE_CONN_CHECK_IDLE; /* the answer still
                                                       serves */
    }
    conn->tx.owner = NULL;
    /* Nothing is to tell the owner any more; the connection stays queued
     * (main_events != 0) only for what is left */
    if (conn->main_events != 0) {
        conn->main_events &= ~(UCT_RC_SHARE_CONN_EV_READY |
                               UCT_RC_SHARE_CONN_EV_FAILED);
        if (conn->main_events == 0) {
            ucs_list_del(&conn->main_list);
        }
    }
    if (conn->confirming) {
        conn->confirming = 0;
        if (conn->check == UCT_RC_SHARE_CONN_CHECK_NONE) {
            uct_rc_share_conn_timed_del(conn);
        }
    }

    if ((conn->state == UCT_RC_SHARE_CONN_CONNECTING) &&
        !conn->qp_connected) {
        /* Nothing ever went on it: the peer, if it got the request, checks
         * its half and finds it gone */
        uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_DISC);
        conn->state = UCT_RC_SHARE_CONN_FAILED;
        uct_rc_share_conn_timed_del(conn);
    } else if (conn->state != UCT_RC_SHARE_CONN_FAILED) {
        /* Connected, or about to be (requests crossed: the peer may send
         * on it once our answer is in): kept for the peer's half */
        conn->disc_pending    = 1;
        conn->next_idle_check = ucs_get_time();
    }
    if (!uct_rc_share_txq_idle(&conn->tx.txq) &&
        !uct_rc_share_conn_peer_uses(conn) && owned) {
        /* Nobody sends on it any more: flush what is in flight */
        uct_rc_share_qp_set_error(conn->tx.txq.qp);
    }
    uct_rc_share_conn_disconnect(conn);
    uct_rc_share_conn_release(conn);
    if (owned) {
        UCS_ASYNC_UNBLOCK(async);
    }
}

uct_rc_share_txq_t *uct_rc_share_conn_txq(uct_rc_share_conn_t *conn)
{
    return &conn->tx.txq;
}

int *uct_rc_share_conn_fc_wnd(uct_rc_share_conn_t *conn)
{
    return &conn->fc_wnd;
}

void uct_rc_share_conn_check(uct_rc_share_conn_t *conn)
{
    ucs_async_context_t *async = uct_rc_share_conn_async(conn->iface);

    UCS_ASYNC_BLOCK(async);
    if (conn->state == UCT_RC_SHARE_CONN_CONNECTED) {
        uct_rc_share_conn_start_check(conn, UCT_RC_SHARE_CONN_CHECK_OWNER);
    }
    UCS_ASYNC_UNBLOCK(async);
}

/* ------------------------------------------------------------ send side */

unsigned uct_rc_share_conn_grant_reserve(unsigned max_conns)
{
    return ucs_min(max_conns, UCT_RC_SHARE_CONN_GRANT_RESERVE_MAX);
}

/*
 * Posts a pure grant on the connection; 0 if it must wait: a grant of the
 * connection is in flight, its queue has no room, or the grants' reserve
 * of CQ entries is used up. A grant is always signaled, and its CQ entry
 * is the reserve's, not the data path's: a peer that posts no receive
 * buffers holds it for as long as it likes (RNR retries are infinite), and
 * must not hold anything that other connections need.
 */
static int uct_rc_share_conn_post_grant(uct_rc_share_conn_t *conn)
{
    uct_rc_share_conn_iface_t *ci = conn->iface->conn;
    uct_rc_share_txq_t *txq       = &conn->tx.txq;
    struct ibv_send_wr wr;

    /* While the backlog is not empty, the async side may post it */
    if ((conn->tx.grant_sn != 0) || (txq->sq_available <= 0) ||
        (ci->grants_available <= 0) || (txq->backlog_len != 0) ||
        (conn->state != UCT_RC_SHARE_CONN_CONNECTED)) {
        return 0;
    }
    ucs_memory_cpu_load_fence(); /* the async side's posts, if it made any */

    memset(&wr, 0, sizeof(wr));
    wr.opcode   = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(UCT_RC_SHARE_IMM_FC_PURE_GRANT);
    if (uct_rc_share_txq_post(txq, &wr, 0, 1) != UCS_OK) {
        return 1; /* logged; the connection fails by its completions */
    }
    /* The entry the post took is the reserve's (txq_complete gives it to
     * the data path: uct_rc_share_conn_grant_done takes it back) */
    ++txq->res->cq_available;
    --ci->grants_available;
    conn->tx.grant_sn = txq->posted;
    return 1;
}

void uct_rc_share_conn_grant_done(uct_rc_share_conn_tx_t *tx)
{
    /* tx is the connection's first member */
    uct_rc_share_conn_t *conn = (uct_rc_share_conn_t*)tx;

    tx->grant_sn = 0;
    --tx->txq.res->cq_available;
    ++conn->iface->conn->grants_available;
}

void uct_rc_share_conn_grants_progress(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_t *conn, *tmp;

    ucs_list_for_each_safe(conn, tmp, &iface->grants_owed, owed_list) {
        if (!uct_rc_share_conn_post_grant(conn) &&
            (conn->state == UCT_RC_SHARE_CONN_CONNECTED)) {
            continue;
        }
        ucs_list_del(&conn->owed_list);
        conn->grant_owed = 0;
    }
}

int uct_rc_share_conn_fc_rx(uct_rc_share_iface_t *iface, uint32_t qp_num,
                            uint32_t imm)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    ucs_async_context_t *async    = uct_rc_share_conn_async(iface);
    uct_rc_share_conn_t *conn     = NULL;
    khiter_t it;

    /* The async side adds connections to the table */
    UCS_ASYNC_BLOCK(async);
    it = kh_get(uct_rc_share_qpns, &ci->qpns, qp_num);
    if (it != kh_end(&ci->qpns)) {
        conn = kh_val(&ci->qpns, it);
    }
    UCS_ASYNC_UNBLOCK(async);

    if (imm & UCT_RC_SHARE_IMM_FC_PURE_GRANT) {
        if (conn != NULL) {
            conn->fc_wnd = iface->config.fc_wnd_size;
            if (conn->tx.owner != NULL) {
                conn->tx.owner_ops->tx_resumed(conn->tx.owner);
            }
        }
        return 1;
    }

    if ((conn != NULL) && !conn->grant_owed &&
        !uct_rc_share_conn_post_grant(conn)) {
        conn->grant_owed = 1;
        ucs_list_add_tail(&iface->grants_owed, &conn->owed_list);
    }
    return 0;
}

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_conn_wc_status(enum ibv_wc_status status)
{
    if (ucs_likely(status == IBV_WC_SUCCESS)) {
        return UCS_OK;
    } else if (status == IBV_WC_WR_FLUSH_ERR) {
        return UCS_ERR_CANCELED;
    } else if ((status == IBV_WC_RETRY_EXC_ERR) ||
               (status == IBV_WC_RNR_RETRY_EXC_ERR)) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }
    return UCS_ERR_CONNECTION_RESET;
}

/* A completion in error: the connection fails, if it was connected; 1 if
 * it failed now and has an owner to tell */
static int
uct_rc_share_conn_tx_error(uct_rc_share_conn_t *conn, ucs_status_t status)
{
    ucs_async_context_t *async = uct_rc_share_conn_async(conn->iface);
    int newly_failed           = 0;

    UCS_ASYNC_BLOCK(async);
    if (conn->state == UCT_RC_SHARE_CONN_CONNECTED) {
        if (status != UCS_ERR_CANCELED) {
            ucs_diag("%s:%d: connection %" PRIu64 " to iface 0x%" PRIx64
                     " (QP 0x%x) failed: %s",
                     uct_rc_share_dev_name(conn->iface),
                     conn->iface->port_num, conn->key.sn, conn->key.peer.id,
                     conn->tx.txq.qp->qp_num, ucs_status_string(status));
        }
        uct_rc_share_conn_stop_check(conn);
        conn->state       = UCT_RC_SHARE_CONN_FAILED;
        conn->peer_half   = 0;
        conn->main_status = status;
        newly_failed      = (conn->tx.owner != NULL);
    }
    UCS_ASYNC_UNBLOCK(async);
    return newly_failed;
}

void uct_rc_share_conn_tx_orphan(uct_rc_share_conn_t *conn)
{
    ucs_async_context_t *async = uct_rc_share_conn_async(conn->iface);

    UCS_ASYNC_BLOCK(async);
    uct_rc_share_conn_disconnect(conn);
    uct_rc_share_conn_release(conn);
    UCS_ASYNC_UNBLOCK(async);
}

int uct_rc_share_conn_tx_failed(uct_rc_share_conn_t *conn, uint16_t sn,
                                enum ibv_wc_status wc_status)
{
    ucs_status_t status = uct_rc_share_conn_wc_status(wc_status);
    int newly_failed    = uct_rc_share_conn_tx_error(conn, status);

    (void)uct_rc_share_txq_complete(&conn->tx.txq, sn, status);
    return newly_failed;
}

void uct_rc_share_conn_report_failure(uct_rc_share_conn_t *conn)
{
    if (conn->tx.owner != NULL) {
        conn->tx.owner_ops->failed(conn->tx.owner, conn->main_status);
    }
}

/* ------------------------------------------------------------ iface */

static ucs_status_t uct_rc_share_conn_bufs_alloc(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    size_t rx_size = UCT_RC_SHARE_CONN_RX_COUNT * UCT_RC_SHARE_CONN_BUF_SIZE;
    size_t tx_size = UCT_RC_SHARE_CONN_TX_COUNT * UCT_RC_SHARE_CONN_BUF_SIZE;
    ucs_status_t status;

    /* From the rank's slice, like every other buffer */
    status = uct_ibshare_resources_buf_alloc(iface->md->res,
                                             rx_size + tx_size +
                                             UCT_RC_SHARE_CONN_SPILL_SIZE,
                                             "rc_share handshake", &ci->bufs);
    if (status != UCS_OK) {
        return status;
    }

    ci->rx_bufs      = ci->bufs.address;
    ci->tx_buf       = UCS_PTR_BYTE_OFFSET(ci->rx_bufs, rx_size);
    ci->spill        = UCS_PTR_BYTE_OFFSET(ci->tx_buf, tx_size);
    ci->tx_available = UCT_RC_SHARE_CONN_TX_COUNT;
    return UCS_OK;
}

ucs_status_t uct_rc_share_conn_iface_init(uct_rc_share_iface_t *iface,
                                          void (*drain_rx)(
                                                  uct_rc_share_iface_t*))
{
    uct_rc_share_conn_iface_t *ci;
    ucs_status_t status;
    unsigned i;

    UCS_STATIC_ASSERT(UCT_RC_SHARE_GRH_LEN + sizeof(uct_rc_share_conn_msg_t) <=
                      UCT_RC_SHARE_CONN_BUF_SIZE);
    UCS_STATIC_ASSERT(UCT_RC_SHARE_CONN_STABLE_LEN == 48);
    /* A receive holds a GRH and the largest UD payload of any port */
    UCS_STATIC_ASSERT(UCT_RC_SHARE_CONN_BUF_SIZE +
                      UCT_RC_SHARE_CONN_SPILL_SIZE >=
                      UCT_RC_SHARE_GRH_LEN + 4096);
    /* The wr_id's owner is the connection and its send half alike */
    UCS_STATIC_ASSERT(ucs_offsetof(uct_rc_share_conn_t, tx) == 0);

    ci = ucs_calloc(1, sizeof(*ci), "rc_share conn iface");
    if (ci == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    iface->conn      = ci;
    ci->iface        = iface;
    ci->drain_rx     = drain_rx;
    ci->main_prog_id = UCS_CALLBACKQ_ID_NULL;
    ci->timer_id     = -1;
    ci->grants_available = uct_rc_share_conn_grant_reserve(
            iface->config.max_conns);
    /* Tests only (test/guest/conn_stranger.sh): without the spill area an
     * oversized packet puts the UD QP in error, as before version 4, and
     * the recovery must bring it back */
    ci->rx_sge = (getenv("IBSHARE_TEST_UD_NO_SPILL") != NULL) ? 1 : 2;
    kh_init_inplace(uct_rc_share_conns, &ci->conns);
    kh_init_inplace(uct_rc_share_qpns, &ci->qpns);
    kh_init_inplace(uct_rc_share_peers, &ci->peers);
    kh_init_inplace(uct_rc_share_ended, &ci->ended);
    ucs_list_head_init(&ci->timed);
    ucs_list_head_init(&ci->main);
    ucs_list_head_init(&ci->superseded);
    ucs_list_head_init(&iface->grants_owed);
    ucs_list_head_init(&ci->retired);

    /* The secret: what nobody can guess, nor learn but from our address */
    if (getrandom(&iface->secret, sizeof(iface->secret), 0) !=
        sizeof(iface->secret)) {
        ucs_error("rc_share: getrandom() failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    ci->channel = ibv_create_comp_channel(iface->md->context);
    if (ci->channel == NULL) {
        ucs_error("%s: ibv_create_comp_channel(handshake) failed: %m",
                  uct_rc_share_dev_name(iface));
        return UCS_ERR_IO_ERROR;
    }

    status = ucs_sys_fcntl_modfl(ci->channel->fd, O_NONBLOCK, 0);
    if (status != UCS_OK) {
        return status;
    }

    ci->cq = uct_rc_share_cq_create(iface, UCT_RC_SHARE_CONN_RX_COUNT +
                                           UCT_RC_SHARE_CONN_TX_COUNT,
                                    ci->channel);
    if (ci->cq == NULL) {
        ucs_error("%s: ibv_create_cq(handshake) failed: %m",
                  uct_rc_share_dev_name(iface));
        return UCS_ERR_NO_RESOURCE;
    }

    status = uct_rc_share_conn_bufs_alloc(iface);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_rc_share_ud_qp_create(iface, ci->cq, UCT_RC_SHARE_CONN_QKEY,
                                       UCT_RC_SHARE_CONN_TX_COUNT,
                                       UCT_RC_SHARE_CONN_RX_COUNT, 2, &ci->qp);
    if (status != UCS_OK) {
        return status;
    }

    for (i = 0; i < UCT_RC_SHARE_CONN_RX_COUNT; ++i) {
        uct_rc_share_conn_post_recv(iface, i);
    }
    return UCS_OK;
}

/* The send completions of the UD CQ (the iface is going: its receives
 * are of no interest any more) */
static void uct_rc_share_conn_reap_sends(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    struct ibv_wc wc[16];
    int i, n;

    n = ibv_poll_cq(ci->cq, ucs_static_array_size(wc), wc);
    for (i = 0; i < n; ++i) {
        if (wc[i].wr_id == UCT_RC_SHARE_CONN_SEND_WR) {
            ++ci->tx_available;
            ++ci->tx_done;
        }
    }
}

void uct_rc_share_conn_iface_cleanup(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    uct_rc_share_conn_t *conn;
    ucs_time_t deadline;
    int owned;

    if (ci == NULL) {
        return;
    }

    /* The async handler is gone: the main thread is alone. (A fork child
     * closing what it inherited sends nothing and leaves the parent's
     * completions alone) */
    owned    = (ci->qp != NULL) &&
               uct_ibshare_resources_owned(iface->md->res);
    deadline = ucs_get_time() +
               ucs_time_from_sec(UCT_RC_SHARE_CONN_CLEANUP_DISC_SEC);
    kh_foreach_value(&ci->conns, conn, {
        if ((conn->state == UCT_RC_SHARE_CONN_CONNECTED) &&
            (ci->qp != NULL)) {
            /* Best effort: the peer's idle check finds it otherwise, and
             * fails the peer's endpoint on it. More than the send queue
             * holds (an iface with 1,000 connections) wait for room */
            while (owned && (ci->tx_available == 0) &&
                   (ucs_get_time() < deadline)) {
                uct_rc_share_conn_reap_sends(iface);
            }
            uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_DISC);
        }
    });
    while (owned && (ci->tx_available < UCT_RC_SHARE_CONN_TX_COUNT) &&
           (ucs_get_time() < deadline)) {
        uct_rc_share_conn_reap_sends(iface); /* out before the QP goes */
    }
    while (kh_size(&ci->conns) != 0) {
        kh_foreach_value(&ci->conns, conn, {
            uct_rc_share_conn_destroy(conn);
            break;
        });
    }
    while (!ucs_list_is_empty(&ci->superseded)) {
        uct_rc_share_conn_destroy(ucs_list_head(&ci->superseded,
                                                uct_rc_share_conn_t,
                                                superseded_list));
    }

    if (ci->qp != NULL) {
        uct_rc_share_qp_destroy(iface, ci->qp);
    }
    uct_rc_share_conn_release_ahs(iface, 1);
    if (ci->cq != NULL) {
        uct_rc_share_cq_destroy(iface, ci->cq);
    }
    if (ci->channel != NULL) {
        ibv_destroy_comp_channel(ci->channel);
    }
    if (ci->rx_bufs != NULL) {
        uct_ibshare_resources_buf_free(iface->md->res, &ci->bufs);
    }
    kh_destroy_inplace(uct_rc_share_conns, &ci->conns);
    kh_destroy_inplace(uct_rc_share_qpns, &ci->qpns);
    kh_destroy_inplace(uct_rc_share_peers, &ci->peers);
    kh_destroy_inplace(uct_rc_share_ended, &ci->ended);
    ucs_free(ci->ended_ring);
    ucs_free(ci);
    iface->conn = NULL;
}

void uct_rc_share_conn_iface_addr(const uct_rc_share_iface_t *iface,
                                  uct_rc_share_iface_addr_t *addr)
{
    uct_ibshare_pack_uint24(addr->qpn, iface->conn->qp->qp_num);
    addr->mtu    = iface->config.path_mtu;
    addr->id     = iface->id;
    addr->secret = iface->secret;
}

ucs_status_t uct_rc_share_conn_async_start(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    ucs_async_context_t *async    = uct_rc_share_conn_async(iface);
    ucs_status_t status;

    status = ucs_async_set_event_handler(async->mode, ci->channel->fd,
                                         UCS_EVENT_SET_EVREAD,
                                         uct_rc_share_conn_async_handler,
                                         iface, async);
    if (status != UCS_OK) {
        ucs_error("%s: could not handle the handshake in the async context: "
                  "%s", uct_rc_share_dev_name(iface),
                  ucs_status_string(status));
        return status;
    }
    ci->handler_set = 1;

    status = ucs_async_add_timer(async->mode, iface->config.conn_retry,
                                 uct_rc_share_conn_timer, iface, async,
                                 &ci->timer_id);
    if (status != UCS_OK) {
        ucs_error("%s: could not add the handshake's timer: %s",
                  uct_rc_share_dev_name(iface), ucs_status_string(status));
        return status;
    }

    UCS_ASYNC_BLOCK(async);
    uct_rc_share_conn_async_handler(ci->channel->fd, UCS_EVENT_SET_EVREAD,
                                    iface);
    UCS_ASYNC_UNBLOCK(async);
    return UCS_OK;
}

void uct_rc_share_conn_async_stop(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;

    if (ci == NULL) {
        return;
    }
    if (!uct_ibshare_resources_owned(iface->md->res)) {
        /* A fork child: see uct_rc_share_conn_close. The handlers stay
         * registered in the child's copy of UCX's tables */
        ci->timer_id    = -1;
        ci->handler_set = 0;
    }
    if (ci->timer_id >= 0) {
        ucs_async_remove_handler(ci->timer_id, 1);
        ci->timer_id = -1;
    }
    if (ci->handler_set) {
        ucs_async_remove_handler(ci->channel->fd, 1);
        ci->handler_set = 0;
    }

    /* The handlers are gone: nothing schedules the callback again */
    if (ci->main_prog_id != UCS_CALLBACKQ_ID_NULL) {
        uct_ibshare_ucx_callbackq_remove_oneshot(
                &iface->super.worker->super.progress_q, ci->main_prog_id,
                iface);
        ci->main_prog_id = UCS_CALLBACKQ_ID_NULL;
    }
}
