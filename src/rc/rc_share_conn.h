/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share connections: one RC QP pair per pair of ifaces (and per
 * connection number, below), carrying both directions, made by a handshake
 * over a UD QP of each iface.
 *
 * A connection has two halves. Ours: the endpoint of this iface that sends
 * on it (its owner). The peer's: the peer iface's endpoint to us, which
 * sends on the same QP pair. Connections are numbered per pair of ifaces:
 * this iface's n-th endpoint to a peer and the peer's n-th endpoint to us
 * make connection n, so two ifaces that connect to each other at the same
 * time end with one QP pair, each side's QP the peer of the other's,
 * whoever's request came first (as UCX's tcp transport numbers its
 * connections, and as ucs_conn_match matches them). A connection is gone
 * when both halves are: the owner left (its endpoint was destroyed) and
 * the peer said so of its own (DISC), or the peer no longer has it, or is
 * found dead (the idle check).
 *
 * Every iface draws a random 64-bit secret at creation and gives it in its
 * iface address. A request, a check and a DISC must carry the receiver's
 * secret, and an answer the requester's; anything else is dropped without
 * creating anything (hs_dropped). Answers go to the packet's source (its
 * GRH and source QP), never to an address the message names. An on-path
 * attacker who reads the packets learns the secrets: as with every RDMA
 * transport, the fabric is not defended against one.
 *
 * The handshake runs in the worker's async context (its UD CQ has a
 * completion channel, and an async timer resends requests and checks), so
 * a process answers without calling progress; what the main thread must do
 * (connect an endpoint, fail it, destroy a connection) is queued for its
 * progress. Only the main thread posts on a connection's QP.
 */
#ifndef UCT_RC_SHARE_CONN_H_
#define UCT_RC_SHARE_CONN_H_

#include "rc_share_txq.h"


#define UCT_RC_SHARE_CONN_MAGIC    0x48535243u /* "RCSH" */
/*
 * 4: every message names the sender's UD QP and port address, which must
 * be where it came from; a peer is its whole address (id, secret, UD QP,
 * port), not the id it claims. 3: connections shared by both directions,
 * numbered per pair of ifaces; secrets; REJ. 2: the liveness check. Peers
 * of different versions do not talk: a request of another version is
 * dropped with an error that names both (and from version 3 on, refused
 * with REJ(VERSION): the first 48 bytes of a message keep their meaning in
 * every later version).
 */
#define UCT_RC_SHARE_CONN_VERSION  4


typedef enum {
    UCT_RC_SHARE_CONN_REQ       = 1, /* my QP of connection n: connect */
    UCT_RC_SHARE_CONN_REP       = 2, /* here is mine */
    UCT_RC_SHARE_CONN_REJ       = 3, /* refused (result: why) */
    UCT_RC_SHARE_CONN_DISC      = 4, /* my half of n is gone for good */
    UCT_RC_SHARE_CONN_CHECK     = 5, /* do you still have connection n? */
    UCT_RC_SHARE_CONN_CHECK_REP = 6  /* the answer (result) */
} uct_rc_share_conn_msg_type_t;

/* REJ: why */
typedef enum {
    UCT_RC_SHARE_CONN_REJ_NO_RESOURCE = 1, /* at UCX_RC_SHARE_MAX_CONNS */
    UCT_RC_SHARE_CONN_REJ_VERSION     = 2  /* another protocol version */
} uct_rc_share_conn_rej_reason_t;

/* CHECK_REP: what the receiver has of the connection */
typedef enum {
    UCT_RC_SHARE_CONN_CHECK_CONNECTED = 1, /* it, with these QPs */
    UCT_RC_SHARE_CONN_CHECK_NO_CONN   = 2  /* not it: the iface lives, the
                                              connection does not */
} uct_rc_share_conn_check_result_t;

/* flags: the sender's half of the connection */
enum {
    UCT_RC_SHARE_CONN_FLAG_TX       = UCS_BIT(0), /* has an endpoint on it */
    UCT_RC_SHARE_CONN_FLAG_DETACHED = UCS_BIT(1)  /* had one, gone for good */
};


typedef struct UCS_S_PACKED uct_rc_share_conn_msg {
    /* The same in every version from 3 on */
    uint32_t                   magic;
    uint8_t                    version;
    uint8_t                    type;
    uint8_t                    result;       /* REJ: a rej_reason; CHECK_REP:
                                                a check_result; else 0 */
    uint8_t                    flags;        /* UCT_RC_SHARE_CONN_FLAG_xx */
    uint64_t                   src_iface_id;
    uint64_t                   dst_iface_id;
    uint64_t                   dst_secret;   /* the receiver's */
    uint64_t                   src_secret;   /* the sender's (for answers) */
    uint64_t                   conn_sn;      /* the connection's number */
    /* Version 3 */
    uint32_t                   rc_qpn;       /* the sender's QP of it */
    uint32_t                   psn;          /* REQ, REP: its first PSN */
    uint32_t                   dst_rc_qpn;   /* CHECK, DISC: the receiver's
                                                QP, as the sender knows it */
    uint32_t                   check_sn;     /* CHECK, CHECK_REP */
    uint8_t                    mtu;          /* the sender's port MTU */
    /* Version 4: where the message comes from, as the receiver's work
     * completion must show it */
    uint32_t                   src_ud_qpn;   /* the sender's UD QP */
    uint16_t                   src_lid;      /* InfiniBand: its port's LID */
    union ibv_gid              src_gid;      /* RoCE: its GID */
} uct_rc_share_conn_msg_t;


/* What a connection tells the endpoint that owns it (main thread) */
typedef struct uct_rc_share_conn_owner_ops {
    /* The QP is connected: the backlog may be posted */
    void (*ready)(void *owner);
    /* The connection failed (its QP is in error or never connected) */
    void (*failed)(void *owner, ucs_status_t status);
    /* Credits came back (a grant), or a completion freed send resources */
    void (*tx_resumed)(void *owner);
} uct_rc_share_conn_owner_ops_t;


/*
 * What the send completion reads of a connection, inline in the iface's
 * progress (below): its send queue, whose wr_ids name the connection, and
 * our half, the owner. The first member of every connection (a wr_id's
 * owner is the connection and its send half alike); the rest is
 * rc_share_conn.c's.
 */
typedef struct uct_rc_share_conn_tx {
    uct_rc_share_txq_t                  txq;      /* main thread */
    void                                *owner;
    const uct_rc_share_conn_owner_ops_t *owner_ops;
    uint64_t                            grant_sn; /* the WR of the grant in
                                                     flight, 0: none */
} uct_rc_share_conn_tx_t;


/*
 * The iface's connections, the handshake's QP and buffers. drain_rx takes
 * every completion of the iface's receive CQ (main thread): a QP is
 * destroyed only after it, since a provider may drop the receive
 * completions of a destroyed QP from the CQ (mlx5 does), and a peer that
 * said DISC may have messages there still.
 */
ucs_status_t uct_rc_share_conn_iface_init(uct_rc_share_iface_t *iface,
                                          void (*drain_rx)(
                                                  uct_rc_share_iface_t*));

/* Destroys every connection, then the handshake's objects (the async
 * handler is stopped) */
void uct_rc_share_conn_iface_cleanup(uct_rc_share_iface_t *iface);

/* Installs the async handler and timer of the handshake (the iface is
 * complete); removes them: the async context calls nothing of the iface
 * afterwards */
ucs_status_t uct_rc_share_conn_async_start(uct_rc_share_iface_t *iface);
void uct_rc_share_conn_async_stop(uct_rc_share_iface_t *iface);

/* The iface address: the handshake's UD QP, the MTU, the id and secret */
void uct_rc_share_conn_iface_addr(const uct_rc_share_iface_t *iface,
                                  uct_rc_share_iface_addr_t *addr);

/*
 * A connection to the iface at (dev, addr) whose sending half is owner's:
 * the one the peer made with the same number, if it is there and
 * connected (*connected_p = 1: owner may post at once), else a new one,
 * whose request goes out now (*connected_p = 0; ops->ready or ->failed
 * follow). Fails with NO_RESOURCE past UCX_RC_SHARE_MAX_CONNS.
 */
ucs_status_t uct_rc_share_conn_open(uct_rc_share_iface_t *iface,
                                    const uct_rc_share_device_addr_t *dev,
                                    const uct_rc_share_iface_addr_t *addr,
                                    void *owner,
                                    const uct_rc_share_conn_owner_ops_t *ops,
                                    uct_rc_share_conn_t **conn_p,
                                    int *connected_p);

/*
 * The owner leaves (main thread): the user's completions of its operations
 * in flight are called with CANCELED, nothing else of them reaches it, the
 * peer is told, and the connection goes once the peer's half is gone too
 * and its WRs are done. Calls none of owner's callbacks.
 */
void uct_rc_share_conn_close(uct_rc_share_conn_t *conn);

/* The connection's send queue */
uct_rc_share_txq_t *uct_rc_share_conn_txq(uct_rc_share_conn_t *conn);

/* Flow control: AMs the owner may send before the receiver grants more */
int *uct_rc_share_conn_fc_wnd(uct_rc_share_conn_t *conn);

/*
 * The liveness check of the peer (ep_check): a CHECK to its UD QP, which
 * its async context answers. Resent every CONN_RETRY; no answer within
 * CHECK_TIMEOUT fails the connection with ENDPOINT_TIMEOUT, "no such
 * connection" with CONNECTION_RESET. One at a time: does nothing while one
 * is in flight.
 */
void uct_rc_share_conn_check(uct_rc_share_conn_t *conn);

/* (a completion in error, in uct_rc_share_conn_tx_complete: the
 * connection fails, and the queue completes with the error; 1 if it failed
 * now and has an owner to tell) */
int uct_rc_share_conn_tx_failed(uct_rc_share_conn_t *conn, uint16_t sn,
                                enum ibv_wc_status wc_status);

/* (the grant in flight on a connection is done: its CQ entry goes back to
 * the grants' reserve) */
void uct_rc_share_conn_grant_done(uct_rc_share_conn_tx_t *tx);

/* (a completion of a connection whose owner is gone, likewise) */
void uct_rc_share_conn_tx_orphan(uct_rc_share_conn_t *conn);

/*
 * A batch of send completions of the iface's send CQ, each of the
 * connection its wr_id names (main thread). The connections that failed now
 * go into failed (room for n), their number returned: the caller then tells
 * their owners (uct_rc_share_conn_report_failure), after the batch.
 * Inline: the completion of every put, get and flush passes here, and as a
 * call it cost 50 of a blocking UCP get's 1,070 instructions (doc/bench.md,
 * issue 23). The owner only hears of it when something of its waits, for
 * the same reason.
 */
static UCS_F_ALWAYS_INLINE int
uct_rc_share_conn_tx_complete(const struct ibv_wc *wc, int n,
                              uct_rc_share_conn_t **failed)
{
    uct_rc_share_conn_tx_t *tx;
    int i, newly_failed, num_failed = 0;
    uint16_t sn;

    for (i = 0; i < n; ++i) {
        tx           = uct_rc_share_wr_id_owner(wc[i].wr_id);
        sn           = uct_rc_share_wr_id_sn(wc[i].wr_id);
        newly_failed = 0;
        if (ucs_likely(wc[i].status == IBV_WC_SUCCESS)) {
            (void)uct_rc_share_txq_complete(&tx->txq, sn, UCS_OK);
        } else {
            newly_failed = uct_rc_share_conn_tx_failed(
                    (uct_rc_share_conn_t*)tx, sn, wc[i].status);
        }

        if (ucs_unlikely(tx->grant_sn != 0) &&
            (tx->txq.completed >= tx->grant_sn)) {
            uct_rc_share_conn_grant_done(tx);
        }

        /* (a completion callback may have closed the owner's endpoint;
         * a newly failed one hears of it after the batch) */
        if (ucs_unlikely(tx->owner == NULL)) {
            uct_rc_share_conn_tx_orphan((uct_rc_share_conn_t*)tx);
        } else if (newly_failed) {
            failed[num_failed++] = (uct_rc_share_conn_t*)tx;
        } else if (tx->txq.owner_waits ||
                   uct_rc_share_txq_flush_due(&tx->txq)) {
            tx->owner_ops->tx_resumed(tx->owner);
        }
    }
    return num_failed;
}

/* Tells the owner of a connection that failed in a batch, after it */
void uct_rc_share_conn_report_failure(uct_rc_share_conn_t *conn);

/* Grants that waited: for the one in flight on their connection (one at
 * a time: it restores the whole window, whatever asked for it
 * meanwhile), for room in their QP's send queue, or for an entry of the
 * grants' reserve (main thread) */
void uct_rc_share_conn_grants_progress(uct_rc_share_iface_t *iface);

/* How many send CQ entries the grants have of their own, beyond TX_CQ_LEN:
 * as many as connections, up to a bound */
unsigned uct_rc_share_conn_grant_reserve(unsigned max_conns);

/*
 * The flow-control flags of a message received on QP qp_num (main
 * thread): a pure grant restores the window of that connection's owner
 * (returns 1: no active message); a request for credits is granted on the
 * connection (returns 0: the message goes on).
 */
int uct_rc_share_conn_fc_rx(uct_rc_share_iface_t *iface, uint32_t qp_num,
                            uint32_t imm);

/* Whether the main thread has handshake work to wait for: an owner whose
 * connection is connecting or checking, or queued work (event_arm) */
int uct_rc_share_conn_busy(uct_rc_share_iface_t *iface);

/* How many connections the iface has (tests, ibshare statistics) */
unsigned uct_rc_share_conn_count(const uct_rc_share_iface_t *iface);

/* Checks a received message; pure, for the tests */
ucs_status_t uct_rc_share_conn_msg_check(const void *buf, size_t length);

#endif
