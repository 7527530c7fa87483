/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share connections and their handshake (see rc_share_conn.h).
 *
 * Threads: the handshake (the UD QP, its buffers, the connection table and
 * every field of a connection but its send queue and window) is touched
 * under UCS_ASYNC_BLOCK of the worker's async context, which its handler
 * and timer hold while they run. The send queue, the window and the grants
 * are the main thread's, which posts and polls without the lock; the async
 * side never posts on an RC QP, and connects a QP only while the main
 * thread posts nothing on it (its owner's operations wait in the backlog
 * until ready). A connection is destroyed by the main thread only, once
 * nothing of the async side refers to it and its WRs are done.
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
#define UCT_RC_SHARE_CONN_SEND_WR   UINT64_MAX /* receives use their index */
/* The first bytes of a message that keep their meaning in every version */
#define UCT_RC_SHARE_CONN_STABLE_LEN \
    ucs_offsetof(uct_rc_share_conn_msg_t, rc_qpn)


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


typedef struct {
    uint64_t peer_id;
    uint64_t sn;
} uct_rc_share_conn_key_t;

static UCS_F_ALWAYS_INLINE khint_t
uct_rc_share_conn_key_hash(uct_rc_share_conn_key_t key)
{
    return kh_int64_hash_func(key.peer_id ^ (key.sn * 0x9e3779b97f4a7c15ull));
}

#define uct_rc_share_conn_key_equal(_a, _b) \
    (((_a).peer_id == (_b).peer_id) && ((_a).sn == (_b).sn))

KHASH_INIT(uct_rc_share_conns, uct_rc_share_conn_key_t, uct_rc_share_conn_t*,
           1, uct_rc_share_conn_key_hash, uct_rc_share_conn_key_equal)
KHASH_MAP_INIT_INT(uct_rc_share_qpns, uct_rc_share_conn_t*)
/* What we know of a peer iface: the number of our next connection to it,
 * and when it last answered one of our requests (0: never) */
typedef struct {
    uint64_t                  next_sn;
    ucs_time_t                answered;
} uct_rc_share_peer_t;

KHASH_MAP_INIT_INT64(uct_rc_share_peers, uct_rc_share_peer_t)
/* A set of peer ifaces (the timer's: checked now, found dead) */
KHASH_SET_INIT_INT64(uct_rc_share_peer_set)


struct uct_rc_share_conn {
    uct_rc_share_conn_tx_t    tx;           /* first (rc_share_conn.h) */
    int                       fc_wnd;       /* main thread */
    int                       grant_owed;   /* main thread */
    ucs_list_link_t           owed_list;    /* iface->grants_owed */
    uct_rc_share_iface_t      *iface;
    uct_rc_share_conn_key_t   key;
    uct_rc_share_conn_state_t state;

    /* Our half, the endpoint that sends on it, is tx.owner */
    int                       had_owner;    /* one left: never another */
    /* The peer's half: it may send on it (its endpoint, or one it may
     * still open with this number); clear once it said it is gone */
    int                       peer_half;

    /* The peer */
    uint64_t                  peer_secret;
    uint32_t                  peer_ud_qpn;
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
    ucs_time_t                check_next_retry;
    ucs_time_t                next_idle_check;

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
    unsigned                  owners_waiting; /* owners of connecting or
                                                 checked connections */
    uct_worker_cb_id_t        main_prog_id;
    void                      (*drain_rx)(uct_rc_share_iface_t *iface);
    ucs_time_t                next_idle_scan;
    ucs_time_t                last_drop_log;
    unsigned                  drops_unlogged;
    ucs_time_t                last_version_log;
    uint8_t                   last_version;

    /* The UD QP */
    struct ibv_comp_channel   *channel;
    int                       handler_set;
    int                       timer_id;
    struct ibv_cq             *cq;
    struct ibv_qp             *qp;
    uct_ibshare_buf_t         bufs;         /* rx_bufs, then tx_buf */
    void                      *rx_bufs;
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

/* A dropped message, logged at most once a second (a flood of strangers'
 * packets must not flood the log) */
static void uct_rc_share_conn_drop(uct_rc_share_iface_t *iface,
                                   const char *fmt, ...)
    UCS_F_PRINTF(2, 3);

static void uct_rc_share_conn_drop(uct_rc_share_iface_t *iface,
                                   const char *fmt, ...)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    ucs_time_t now                = ucs_get_time();
    char why[192];
    va_list ap;

    ++iface->counters.hs_dropped;
    if ((ci->last_drop_log != 0) &&
        (now - ci->last_drop_log < ucs_time_from_sec(1.0))) {
        ++ci->drops_unlogged;
        return;
    }

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    ucs_warn("%s:%d: dropped a handshake message: %s (%" PRIu64 " dropped "
             "in all, %u since the last of these lines)",
             uct_rc_share_dev_name(iface), iface->port_num, why,
             iface->counters.hs_dropped, ci->drops_unlogged);
    ci->last_drop_log  = now;
    ci->drops_unlogged = 0;
}

/*
 * An answer, with our secret, for a connection we no longer have: our
 * endpoint went away while the peer answered (UCX's uct_cancel_test, a job
 * that closes before its requests are answered). Counted with the dropped
 * messages, but nothing is wrong: no warning, which would also fail every
 * UCX test that treats warnings as errors.
 */
static void uct_rc_share_conn_late(uct_rc_share_iface_t *iface,
                                   const char *what,
                                   const uct_rc_share_conn_msg_t *msg)
{
    ++iface->counters.hs_dropped;
    ucs_debug("%s:%d: dropped %s for connection %" PRIu64 " of iface 0x%"
              PRIx64 ", which we no longer have",
              uct_rc_share_dev_name(iface), iface->port_num, what,
              msg->conn_sn, msg->src_iface_id);
}

/* ------------------------------------------------------------ UD QP */

static void uct_rc_share_conn_post_recv(uct_rc_share_iface_t *iface,
                                        unsigned index)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    struct ibv_recv_wr wr, *bad_wr;
    struct ibv_sge sge;
    int ret;

    sge.addr   = uct_rc_share_buf_iova(iface, ci->rx_bufs) +
                 (index * UCT_RC_SHARE_CONN_BUF_SIZE);
    sge.length = UCT_RC_SHARE_CONN_BUF_SIZE;
    sge.lkey   = ci->bufs.lkey;
    wr.wr_id   = index;
    wr.next    = NULL;
    wr.sg_list = &sge;
    wr.num_sge = 1;

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
    if (conn != NULL) {
        msg->dst_iface_id = conn->key.peer_id;
        msg->dst_secret   = conn->peer_secret;
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

/* An answer to the packet of wc: to its source, whatever it claims */
static void uct_rc_share_conn_answer(uct_rc_share_iface_t *iface,
                                     struct ibv_wc *wc, struct ibv_grh *grh,
                                     const uct_rc_share_conn_msg_t *rep)
{
    uct_rc_share_device_addr_t dev;
    struct ibv_ah *ah;

    if ((iface->conn->tx_available == 0) ||
        (uct_rc_share_ah_from_wc(iface, wc, grh, &ah, &dev) != UCS_OK)) {
        return; /* the requester asks again */
    }
    (void)uct_rc_share_conn_send(iface, ah, wc->src_qp, rep);
    uct_rc_share_conn_retire_ah(iface, ah);
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
                                 conn->peer_ud_qpn, &msg);
}

/* ------------------------------------------------------------ table */

static uct_rc_share_conn_t *
uct_rc_share_conn_find(uct_rc_share_iface_t *iface, uint64_t peer_id,
                       uint64_t sn)
{
    uct_rc_share_conn_key_t key = {peer_id, sn};
    khiter_t it;

    it = kh_get(uct_rc_share_conns, &iface->conn->conns, key);
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

static uct_rc_share_conn_t *
uct_rc_share_conn_new(uct_rc_share_iface_t *iface, uint64_t peer_id,
                      uint64_t sn)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    uct_rc_share_conn_t *conn;
    ucs_status_t status;
    khiter_t it;
    int ret;

    if (ci->count >= iface->config.max_conns) {
        return NULL;
    }

    conn = ucs_calloc(1, sizeof(*conn), "rc_share conn");
    if (conn == NULL) {
        return NULL;
    }

    conn->iface       = iface;
    conn->key.peer_id = peer_id;
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

    it = kh_put(uct_rc_share_conns, &ci->conns, conn->key, &ret);
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
    return conn;

err_qp:
    uct_rc_share_qp_destroy(iface, conn->tx.txq.qp);
err_txq:
    conn->tx.txq.qp = NULL;
    uct_rc_share_txq_cleanup(&conn->tx.txq);
err_free:
    ucs_free(conn);
    return NULL;
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
              iface->port_num, conn->key.sn, conn->key.peer_id,
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

    it = kh_get(uct_rc_share_conns, &ci->conns, conn->key);
    if (it != kh_end(&ci->conns)) {
        kh_del(uct_rc_share_conns, &ci->conns, it);
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
              conn->key.sn, conn->key.peer_id, conn->tx.txq.qp->qp_num,
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

/*
 * Whether an answer comes from the peer of conn: it carries our secret and
 * the peer's (as we know it), and came from its UD QP. An on-path attacker
 * passes this; nobody else does.
 */
static int uct_rc_share_conn_from_peer(const uct_rc_share_conn_t *conn,
                                       const struct ibv_wc *wc,
                                       const uct_rc_share_conn_msg_t *msg)
{
    return (msg->src_secret == conn->peer_secret) &&
           (wc->src_qp == conn->peer_ud_qpn);
}

static void uct_rc_share_conn_handle_req(uct_rc_share_iface_t *iface,
                                         struct ibv_wc *wc,
                                         struct ibv_grh *grh,
                                         const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;
    uct_rc_share_conn_msg_t rep;
    ucs_status_t status;

    conn = uct_rc_share_conn_find(iface, msg->src_iface_id, msg->conn_sn);
    if (conn == NULL) {
        conn = uct_rc_share_conn_new(iface, msg->src_iface_id,
                                     msg->conn_sn);
        if (conn == NULL) {
            ++iface->counters.hs_refused;
            ucs_diag("%s:%d: refused connection %" PRIu64 " of iface 0x%"
                     PRIx64 ": %u connections, UCX_RC_SHARE_MAX_CONNS=%u",
                     uct_rc_share_dev_name(iface), iface->port_num,
                     msg->conn_sn, msg->src_iface_id, iface->conn->count,
                     iface->config.max_conns);
            uct_rc_share_conn_msg_init(iface, &rep, UCT_RC_SHARE_CONN_REJ,
                                       NULL);
            rep.dst_iface_id = msg->src_iface_id;
            rep.dst_secret   = msg->src_secret;
            rep.conn_sn      = msg->conn_sn;
            rep.result       = UCT_RC_SHARE_CONN_REJ_NO_RESOURCE;
            uct_rc_share_conn_answer(iface, wc, grh, &rep);
            return;
        }

        ++iface->counters.conns_by_peers;
        conn->peer_secret = msg->src_secret;
        conn->peer_ud_qpn = wc->src_qp;
        status = uct_rc_share_ah_from_wc(iface, wc, grh, &conn->peer_ah,
                                         &conn->path);
        if ((status != UCS_OK) ||
            (uct_rc_share_conn_qp_to_peer(conn, msg) != UCS_OK)) {
            conn->state = UCT_RC_SHARE_CONN_FAILED;
            uct_rc_share_conn_queue(conn, UCT_RC_SHARE_CONN_EV_RELEASE,
                                    UCS_OK);
            return;
        }
        /* The peer's half may send now. Ours has no owner yet; one that
         * comes before the requester says its QP is connected (our
         * answer in) asks it first (confirming) */
        conn->state           = UCT_RC_SHARE_CONN_CONNECTED;
        conn->next_idle_check = ucs_get_time() +
                                uct_rc_share_conn_idle_time(iface);
        uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_REP);
        return;
    }

    if (!uct_rc_share_conn_from_peer(conn, wc, msg)) {
        uct_rc_share_conn_drop(iface, "a request for connection %" PRIu64
                               " of iface 0x%" PRIx64 " from another QP "
                               "(0x%x) or with another secret than the "
                               "connection's", msg->conn_sn,
                               msg->src_iface_id, wc->src_qp);
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
                                   "0x%x, which is connected to 0x%x",
                                   msg->conn_sn, msg->src_iface_id,
                                   msg->rc_qpn, conn->remote_qpn);
        }
        break;
    default:
        break; /* failed: the requester learns from its check */
    }
}

/* The peer's entry, created if new; NULL without memory */
static uct_rc_share_peer_t *uct_rc_share_conn_peer(uct_rc_share_iface_t *iface,
                                                   uint64_t peer_id)
{
    khash_t(uct_rc_share_peers) *peers = &iface->conn->peers;
    khiter_t it;
    int ret;

    it = kh_put(uct_rc_share_peers, peers, peer_id, &ret);
    if (ret < 0) {
        return NULL;
    } else if (ret > 0) {
        kh_val(peers, it).next_sn  = 0;
        kh_val(peers, it).answered = 0;
    }
    return &kh_val(peers, it);
}

/* The target of conn answered: it lives. Its other requests wait for a
 * busy target (thousands of handshakes at once, a slow host), not a gone
 * one: their deadlines start again (uct_rc_share_conn_deadline; one entry
 * per peer, not a walk of the requests per answer) */
static void uct_rc_share_conn_target_alive(uct_rc_share_conn_t *conn)
{
    uct_rc_share_peer_t *peer = uct_rc_share_conn_peer(conn->iface,
                                                       conn->key.peer_id);

    if (peer != NULL) {
        peer->answered = ucs_get_time();
    }
}

/* When a request of conn gives up: its own deadline, or later if the
 * target answered another request since */
static ucs_time_t uct_rc_share_conn_deadline(const uct_rc_share_conn_t *conn)
{
    khash_t(uct_rc_share_peers) *peers = &conn->iface->conn->peers;
    khiter_t it = kh_get(uct_rc_share_peers, peers, conn->key.peer_id);
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
                                         struct ibv_wc *wc,
                                         const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, msg->src_iface_id, msg->conn_sn);
    if (conn == NULL) {
        uct_rc_share_conn_late(iface, "an answer", msg);
        return;
    } else if (!uct_rc_share_conn_from_peer(conn, wc, msg)) {
        uct_rc_share_conn_drop(iface, "an answer for connection %" PRIu64
                               " of iface 0x%" PRIx64 ", which came from "
                               "elsewhere", msg->conn_sn, msg->src_iface_id);
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
                                         struct ibv_wc *wc,
                                         const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, msg->src_iface_id, msg->conn_sn);
    if (conn == NULL) {
        uct_rc_share_conn_late(iface, "a refusal", msg);
        return;
    } else if ((conn->state != UCT_RC_SHARE_CONN_CONNECTING) ||
               !uct_rc_share_conn_from_peer(conn, wc, msg)) {
        uct_rc_share_conn_drop(iface, "a refusal of connection %" PRIu64
                               " of iface 0x%" PRIx64 " we do not wait for",
                               msg->conn_sn, msg->src_iface_id);
        return;
    }

    if (msg->result == UCT_RC_SHARE_CONN_REJ_NO_RESOURCE) {
        ucs_error("%s:%d: the remote iface refused the connection: it has "
                  "as many as its UCX_RC_SHARE_MAX_CONNS allows",
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
                                          struct ibv_wc *wc,
                                          const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, msg->src_iface_id, msg->conn_sn);
    if ((conn == NULL) || !uct_rc_share_conn_from_peer(conn, wc, msg)) {
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
                                           struct ibv_wc *wc,
                                           struct ibv_grh *grh,
                                           const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_msg_t rep;
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, msg->src_iface_id, msg->conn_sn);
    if ((conn != NULL) && !uct_rc_share_conn_from_peer(conn, wc, msg)) {
        uct_rc_share_conn_drop(iface, "a check of connection %" PRIu64 " of "
                               "iface 0x%" PRIx64 " from another QP or with "
                               "another secret", msg->conn_sn,
                               msg->src_iface_id);
        return;
    }

    if ((conn != NULL) && (msg->flags & UCT_RC_SHARE_CONN_FLAG_DETACHED)) {
        conn->peer_half = 0;
        uct_rc_share_conn_release(conn);
    }

    uct_rc_share_conn_msg_init(iface, &rep, UCT_RC_SHARE_CONN_CHECK_REP,
                               NULL);
    rep.dst_iface_id = msg->src_iface_id;
    rep.dst_secret   = msg->src_secret;
    rep.conn_sn      = msg->conn_sn;
    rep.check_sn     = msg->check_sn;
    if ((conn != NULL) && (conn->state == UCT_RC_SHARE_CONN_CONNECTED) &&
        (conn->remote_qpn == msg->rc_qpn) &&
        (conn->tx.txq.qp->qp_num == msg->dst_rc_qpn) &&
        ((conn->tx.owner != NULL) || conn->peer_half)) {
        rep.result = UCT_RC_SHARE_CONN_CHECK_CONNECTED;
        rep.rc_qpn = conn->tx.txq.qp->qp_num;
        rep.flags  = (conn->tx.owner != NULL) ? UCT_RC_SHARE_CONN_FLAG_TX :
                     (conn->had_owner ? UCT_RC_SHARE_CONN_FLAG_DETACHED : 0);
    } else {
        rep.result = UCT_RC_SHARE_CONN_CHECK_NO_CONN;
    }
    uct_rc_share_conn_answer(iface, wc, grh, &rep);
}

static void
uct_rc_share_conn_handle_check_rep(uct_rc_share_iface_t *iface,
                                   struct ibv_wc *wc,
                                   const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_conn_t *conn;

    conn = uct_rc_share_conn_find(iface, msg->src_iface_id, msg->conn_sn);
    if ((conn == NULL) || (conn->check == UCT_RC_SHARE_CONN_CHECK_NONE) ||
        (msg->check_sn != conn->check_sn) ||
        !uct_rc_share_conn_from_peer(conn, wc, msg)) {
        return; /* late, a duplicate, or not the peer's */
    }

    if (msg->result == UCT_RC_SHARE_CONN_CHECK_NO_CONN) {
        /* News only to an endpoint of ours: else the peer's DISC was lost */
        ucs_log((conn->tx.owner != NULL) ? UCS_LOG_LEVEL_DIAG :
                UCS_LOG_LEVEL_DEBUG, "%s:%d: iface 0x%" PRIx64 " no longer "
                "has connection %" PRIu64 " (our QP 0x%x)",
                uct_rc_share_dev_name(iface), iface->port_num,
                conn->key.peer_id, conn->key.sn, conn->tx.txq.qp->qp_num);
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
 * meaning from version 3 on): refused, where it proves it knows us */
static void uct_rc_share_conn_other_version(uct_rc_share_iface_t *iface,
                                            struct ibv_wc *wc,
                                            struct ibv_grh *grh,
                                            const void *buf, size_t length)
{
    const uct_rc_share_conn_msg_t *msg = buf;
    uct_rc_share_conn_iface_t *ci      = iface->conn;
    uct_rc_share_conn_msg_t rej;

    ++iface->counters.hs_dropped;
    if ((ci->last_version_log == 0) ||
        (ucs_get_time() - ci->last_version_log >= ucs_time_from_sec(1.0)) ||
        (msg->version != ci->last_version)) {
        /* Apart from the drops: a clear error for each version seen */
        ucs_error("%s:%d: a handshake message of protocol version %d from "
                  "QP 0x%x, ours is %d: the processes run different builds "
                  "of ucx-ibshare", uct_rc_share_dev_name(iface),
                  iface->port_num, msg->version, wc->src_qp,
                  UCT_RC_SHARE_CONN_VERSION);
        ci->last_version_log = ucs_get_time();
        ci->last_version     = msg->version;
    }
    if ((msg->version < 3) || (length < UCT_RC_SHARE_CONN_STABLE_LEN) ||
        (msg->type != UCT_RC_SHARE_CONN_REQ) ||
        (msg->dst_iface_id != iface->id) ||
        (msg->dst_secret != iface->secret)) {
        return;
    }

    uct_rc_share_conn_msg_init(iface, &rej, UCT_RC_SHARE_CONN_REJ, NULL);
    rej.dst_iface_id = msg->src_iface_id;
    rej.dst_secret   = msg->src_secret;
    rej.conn_sn      = msg->conn_sn;
    rej.result       = UCT_RC_SHARE_CONN_REJ_VERSION;
    uct_rc_share_conn_answer(iface, wc, grh, &rej);
}

static void uct_rc_share_conn_handle_msg(uct_rc_share_iface_t *iface,
                                         struct ibv_wc *wc,
                                         struct ibv_grh *grh,
                                         const void *buf, size_t length)
{
    const uct_rc_share_conn_msg_t *msg = buf;
    ucs_status_t status;

    status = uct_rc_share_conn_msg_check(buf, length);
    if (status == UCS_ERR_UNSUPPORTED) {
        uct_rc_share_conn_other_version(iface, wc, grh, buf, length);
        return;
    } else if (status != UCS_OK) {
        uct_rc_share_conn_drop(iface, "malformed (%zu bytes from QP 0x%x): "
                               "%s", length, wc->src_qp,
                               ucs_status_string(status));
        return;
    }

    /* Ours, and it proves it knows our address: else nothing happens */
    if ((msg->dst_iface_id != iface->id) ||
        (msg->dst_secret != iface->secret)) {
        uct_rc_share_conn_drop(iface, "%s from QP 0x%x without our %s",
                               (msg->type == UCT_RC_SHARE_CONN_REQ) ?
                               "a connection request" : "a message",
                               wc->src_qp,
                               (msg->dst_iface_id != iface->id) ?
                               "iface id" : "secret");
        return;
    }

    switch (msg->type) {
    case UCT_RC_SHARE_CONN_REQ:
        uct_rc_share_conn_handle_req(iface, wc, grh, msg);
        break;
    case UCT_RC_SHARE_CONN_REP:
        uct_rc_share_conn_handle_rep(iface, wc, msg);
        break;
    case UCT_RC_SHARE_CONN_REJ:
        uct_rc_share_conn_handle_rej(iface, wc, msg);
        break;
    case UCT_RC_SHARE_CONN_DISC:
        uct_rc_share_conn_handle_disc(iface, wc, msg);
        break;
    case UCT_RC_SHARE_CONN_CHECK:
        uct_rc_share_conn_handle_check(iface, wc, grh, msg);
        break;
    case UCT_RC_SHARE_CONN_CHECK_REP:
        uct_rc_share_conn_handle_check_rep(iface, wc, msg);
        break;
    }
}

/* Handles what the UD CQ holds; the caller holds the async context */
static void uct_rc_share_conn_poll(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    struct ibv_wc wc[8];
    void *buf;
    int i, n;

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
                }
                continue;
            }

            if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
                continue; /* the QP is going away */
            }

            if ((wc[i].status == IBV_WC_SUCCESS) &&
                (wc[i].byte_len >= UCT_RC_SHARE_GRH_LEN)) {
                buf = UCS_PTR_BYTE_OFFSET(ci->rx_bufs,
                                          wc[i].wr_id *
                                          UCT_RC_SHARE_CONN_BUF_SIZE);
                uct_rc_share_conn_handle_msg(iface, &wc[i], buf,
                                             UCS_PTR_BYTE_OFFSET(buf,
                                                     UCT_RC_SHARE_GRH_LEN),
                                             wc[i].byte_len -
                                             UCT_RC_SHARE_GRH_LEN);
            } else {
                ucs_diag("%s: handshake receive failed: %s",
                         uct_rc_share_dev_name(iface),
                         ibv_wc_status_str(wc[i].status));
            }
            uct_rc_share_conn_post_recv(iface, wc[i].wr_id);
        }
    } while (n == (int)ucs_static_array_size(wc));

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
    ++conn->check_sn; /* an answer to an earlier check is no answer */
    if (kind == UCT_RC_SHARE_CONN_CHECK_OWNER) {
        ++conn->iface->conn->owners_waiting;
    }
    uct_rc_share_conn_timed_add(conn);
    uct_rc_share_conn_send_check(conn);
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
                     iface->port_num, conn->key.sn, conn->key.peer_id,
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
    } else if (now >= conn->check_deadline) {
        ucs_diag("%s:%d: no answer from iface 0x%" PRIx64 " to the check of "
                 "connection %" PRIu64 " within %.1f s",
                 uct_rc_share_dev_name(iface), iface->port_num,
                 conn->key.peer_id, conn->key.sn,
                 ucs_time_to_sec(iface->config.check_timeout));
        uct_rc_share_conn_fail(conn, UCS_ERR_ENDPOINT_TIMEOUT);
        kh_put(uct_rc_share_peer_set, dead, conn->key.peer_id, &ret);
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
            kh_put(uct_rc_share_peer_set, &checking, conn->key.peer_id, &ret);
        }
    });
    kh_foreach_value(&ci->conns, conn, {
        if ((conn->tx.owner == NULL) && conn->peer_half &&
            (conn->state == UCT_RC_SHARE_CONN_CONNECTED) &&
            (conn->check == UCT_RC_SHARE_CONN_CHECK_NONE) &&
            (now >= conn->next_idle_check)) {
            kh_put(uct_rc_share_peer_set, &checking, conn->key.peer_id, &ret);
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

    kh_foreach_value(&iface->conn->conns, conn, {
        if ((conn->state != UCT_RC_SHARE_CONN_FAILED) &&
            (kh_get(uct_rc_share_peer_set, dead, conn->key.peer_id) !=
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
                                          uint64_t peer_id)
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
    uint64_t sn;

    UCS_ASYNC_BLOCK(async);
    do {
        sn   = uct_rc_share_conn_next_sn(iface, addr->id);
        conn = uct_rc_share_conn_find(iface, addr->id, sn);
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

    conn = uct_rc_share_conn_new(iface, addr->id, sn);
    if (conn == NULL) {
        ucs_error("%s:%d: rc_share: no connection to iface 0x%" PRIx64
                  ": this iface has %u, as many as UCX_RC_SHARE_MAX_CONNS=%u "
                  "allows (or there is no memory)",
                  uct_rc_share_dev_name(iface), iface->port_num, addr->id,
                  iface->conn->count, iface->config.max_conns);
        status = UCS_ERR_NO_RESOURCE;
        goto out;
    }

    conn->path        = *dev;
    conn->peer_secret = addr->secret;
    conn->peer_ud_qpn = uct_ibshare_unpack_uint24(addr->qpn);
    conn->peer_mtu    = (enum ibv_mtu)addr->mtu;
    conn->peer_ah     = uct_rc_share_ah_create(iface, dev);
    if (conn->peer_ah == NULL) {
        conn->state = UCT_RC_SHARE_CONN_FAILED;
        uct_rc_share_conn_destroy(conn);
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

    /* What the owner posted completes to nobody; a NOP reports the
     * unsignaled tail, so that the queue can become idle */
    uct_rc_share_txq_detach(&conn->tx.txq);
    owned = uct_ibshare_resources_owned(iface->md->res);
    if ((conn->state == UCT_RC_SHARE_CONN_CONNECTED) && owned) {
        (void)uct_rc_share_txq_report_tail(&conn->tx.txq);
    }

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

/* Posts a pure grant on the connection; 0 if its queue has no room now */
static int uct_rc_share_conn_post_grant(uct_rc_share_conn_t *conn)
{
    struct ibv_send_wr wr;

    if (!uct_rc_share_txq_has_room(&conn->tx.txq) ||
        (conn->state != UCT_RC_SHARE_CONN_CONNECTED)) {
        return 0;
    }

    memset(&wr, 0, sizeof(wr));
    wr.opcode   = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(UCT_RC_SHARE_IMM_FC_PURE_GRANT);
    /* Without an owner no later WR reports it: a signaled grant leaves no
     * tail, so that the queue of a peer's half can become idle */
    (void)uct_rc_share_txq_post(&conn->tx.txq, &wr, 0, conn->tx.owner == NULL);
    return 1;
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
                     conn->iface->port_num, conn->key.sn, conn->key.peer_id,
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
    status = uct_ibshare_resources_buf_alloc(iface->md->res, rx_size + tx_size,
                                             "rc_share handshake", &ci->bufs);
    if (status != UCS_OK) {
        return status;
    }

    ci->rx_bufs      = ci->bufs.address;
    ci->tx_buf       = UCS_PTR_BYTE_OFFSET(ci->rx_bufs, rx_size);
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
    kh_init_inplace(uct_rc_share_conns, &ci->conns);
    kh_init_inplace(uct_rc_share_qpns, &ci->qpns);
    kh_init_inplace(uct_rc_share_peers, &ci->peers);
    ucs_list_head_init(&ci->timed);
    ucs_list_head_init(&ci->main);
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
                                       UCT_RC_SHARE_CONN_RX_COUNT, &ci->qp);
    if (status != UCS_OK) {
        return status;
    }

    for (i = 0; i < UCT_RC_SHARE_CONN_RX_COUNT; ++i) {
        uct_rc_share_conn_post_recv(iface, i);
    }
    return UCS_OK;
}

void uct_rc_share_conn_iface_cleanup(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_iface_t *ci = iface->conn;
    uct_rc_share_conn_t *conn;

    if (ci == NULL) {
        return;
    }

    /* The async handler is gone: the main thread is alone */
    kh_foreach_value(&ci->conns, conn, {
        if ((conn->state == UCT_RC_SHARE_CONN_CONNECTED) &&
            (ci->qp != NULL)) {
            /* Best effort: the peer's idle check finds it otherwise */
            uct_rc_share_conn_send_to_peer(conn, UCT_RC_SHARE_CONN_DISC);
        }
    });
    while (kh_size(&ci->conns) != 0) {
        kh_foreach_value(&ci->conns, conn, {
            uct_rc_share_conn_destroy(conn);
            break;
        });
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
