/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share: the RC transport of the ibshare component.
 *
 * Every rank has its own CQs, SRQ and RC QPs on the PD the md provides. An
 * endpoint connects to a remote iface address by itself: a handshake over a
 * UD QP of each iface (rc_share_conn.c) makes one RC connection per pair of
 * ifaces, which carries both directions: this iface's endpoint to the peer
 * and the peer's endpoint to this iface. So UCP needs no auxiliary
 * transport (which would open a second device context) for wire-up.
 *
 * Layers, each using only those below it: the iface and the endpoints
 * (rc_share_iface.c, rc_share_ep.c), the connections (rc_share_conn.c; it
 * tells an endpoint of its connection's state through callbacks), the send
 * queue of a QP (rc_share_txq.c), the verbs objects (rc_share_qp.c).
 */
#ifndef UCT_RC_SHARE_H_
#define UCT_RC_SHARE_H_

#include "compat/ibshare_ib_compat.h"
#include "md/ibshare_md.h"
#include "rc_share_locality.h"

#include <uct/base/uct_iface.h>
#include <uct/base/uct_worker.h>
#include <ucs/async/async.h>
#include <ucs/arch/cpu.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/debug/log_def.h>
#include <ucs/datastruct/queue.h>


#define UCT_RC_SHARE_TL_NAME      "rc_share"
#define UCT_RC_SHARE_MAX_SEND_SGE 4   /* scatter entries of a send request */

/*
 * Immediate data of a send: the AM id, and the flow control flags. A
 * sender asks for credits (soft, then hard request) as its window shrinks;
 * the receiver answers on the passive QP the request came on with a pure
 * grant, a zero-length send that restores the sender's window.
 */
#define UCT_RC_SHARE_IMM_AM_MASK       0xffu
#define UCT_RC_SHARE_IMM_FC_SOFT_REQ   UCS_BIT(8)
#define UCT_RC_SHARE_IMM_FC_HARD_REQ   UCS_BIT(9)
#define UCT_RC_SHARE_IMM_FC_PURE_GRANT UCS_BIT(10)
#define UCT_RC_SHARE_IMM_FC_MASK       (UCT_RC_SHARE_IMM_FC_SOFT_REQ | \
                                        UCT_RC_SHARE_IMM_FC_HARD_REQ | \
                                        UCT_RC_SHARE_IMM_FC_PURE_GRANT)


/* The settings that UCX's RC transports name UCX_RC_NAME too */
typedef struct uct_rc_share_rc_config {
    double                    timeout;      /* RC ack timeout */
    unsigned                  retry_count;
    double                    rnr_timeout;
    unsigned long             rnr_retry_count; /* UCS_ULUNITS_AUTO: 7 */
} uct_rc_share_rc_config_t;


typedef struct uct_rc_share_iface_config {
    uct_iface_config_t        super;
    unsigned long             gid_index;    /* UCS_ULUNITS_AUTO: choose */
    size_t                    seg_size;
    unsigned                  tx_queue_len; /* send WRs per QP */
    unsigned                  tx_cq_len;
    unsigned                  tx_cq_moderation; /* unsignaled WRs in a row */
    unsigned                  rx_queue_len; /* SRQ receive buffers */
    size_t                    max_inline;   /* memunits: a size_t */
    uct_iface_mpool_config_t  tx_mp;
    uct_iface_mpool_config_t  rx_mp;
    uct_rc_share_rc_config_t  rc;
    unsigned                  max_rd_atomic;
    double                    conn_timeout; /* handshake: give up after */
    double                    conn_retry;   /* handshake: resend after */
    double                    check_timeout; /* ep_check: give up after */
    unsigned                  max_conns;    /* connections of the iface */
    int                       intra_node;   /* ucs_on_off_auto_value_t */
    int                       node_conns;   /* through the node's engine
                                               (rc_share_node.h) */
    int                       fc_enable;
    unsigned                  fc_wnd_size;
    double                    fc_soft_thresh;
    double                    fc_hard_thresh;
} uct_rc_share_iface_config_t;


/* What a peer needs to reach our port: the device address */
typedef struct UCS_S_PACKED uct_rc_share_device_addr {
    uint8_t                   flags;        /* UCT_RC_SHARE_ADDR_FLAG_xx */
    uint16_t                  lid;
    union ibv_gid             gid;
} uct_rc_share_device_addr_t;


/* The device address as peers get it: the path to our port, then where
 * we run (rc_share_locality.h) */
typedef struct UCS_S_PACKED uct_rc_share_wire_device_addr {
    uct_rc_share_device_addr_t path;
    uct_rc_share_locality_t   locality;
} uct_rc_share_wire_device_addr_t;


/* What a peer needs to start a connection: the iface address */
typedef struct UCS_S_PACKED uct_rc_share_iface_addr {
    uct_ibshare_uint24_t      qpn;          /* UD QP of the handshake */
    uint8_t                   mtu;          /* enum ibv_mtu of our port */
    uint64_t                  id;           /* the iface, among all */
    uint64_t                  secret;       /* what a handshake message to
                                               it must carry */
} uct_rc_share_iface_addr_t;


enum {
    UCT_RC_SHARE_ADDR_FLAG_ETH = UCS_BIT(0)  /* RoCE: routed by GID, no LID */
};


/* Send descriptor: bounce buffer and what to do when the send completes */
typedef struct uct_rc_share_tx_desc uct_rc_share_tx_desc_t;
typedef void (*uct_rc_share_tx_handler_t)(uct_rc_share_tx_desc_t *desc);

struct uct_rc_share_tx_desc {
    uct_completion_t          *comp;
    uct_rc_share_tx_handler_t handler;      /* NULL: nothing to deliver */
    union {
        struct {
            uct_unpack_callback_t cb;
            void                  *arg;
            size_t                length;
        } get;                              /* get_bcopy */
        uint64_t                  *result;  /* atomic fetch */
    };
    uint32_t                  lkey;
    uint8_t                   data[0] UCS_V_ALIGNED(UCS_SYS_CACHE_LINE_SIZE);
};


/*
 * An operation issued while its endpoint connects: the work request as it
 * will be posted, its scatter list (user memory of zero-copy requests, a
 * descriptor of bcopy ones) or, for inline sends, a copy of their data taken
 * at call time, since the caller may reuse its buffer once the call returns.
 */
typedef struct uct_rc_share_backlog_op {
    ucs_queue_elem_t          queue;
    struct ibv_send_wr        wr;
    struct ibv_sge            sge[UCT_RC_SHARE_MAX_SEND_SGE];
    uintptr_t                 op;           /* the tx_ops entry it will get */
    uint8_t                   inline_data[0];
} uct_rc_share_backlog_op_t;


/* Receive descriptor header; the payload follows at rx_payload_offset */
typedef struct uct_rc_share_rx_desc {
    uint32_t                  lkey;
} uct_rc_share_rx_desc_t;


typedef struct uct_rc_share_counters {
    uint64_t                  am_ops,  am_bytes;
    uint64_t                  put_ops, put_bytes;
    uint64_t                  get_ops, get_bytes;
    uint64_t                  atomic_ops;
    uint64_t                  rx_ops,  rx_bytes;
    uint64_t                  eps;
    uint64_t                  conns;        /* made, ours and the peers' */
    uint64_t                  conns_by_peers;
    uint64_t                  rx_dropped;   /* messages that were no valid
                                               active message */
    uint64_t                  hs_dropped;   /* handshake messages dropped:
                                               malformed, wrong secret, no
                                               such connection */
    uint64_t                  hs_refused;   /* requests refused (MAX_CONNS) */
} uct_rc_share_counters_t;


/*
 * A completion that event_arm took from a CQ. Arming reports only
 * completions that arrive after it (rxe raises no event for one already in
 * the CQ), so event_arm polls once after arming; what it finds waits here
 * for the next progress, which must take it before polling the CQ.
 */
typedef struct uct_rc_share_cq_stash {
    struct ibv_wc             wc;
    int                       valid;
} uct_rc_share_cq_stash_t;


typedef struct uct_rc_share_conn_iface uct_rc_share_conn_iface_t;
typedef struct uct_rc_share_node_iface uct_rc_share_node_iface_t;

/* The iface's send resources, which the send queue of every connection
 * draws from (rc_share_txq.h) */
typedef struct uct_rc_share_tx_res {
    int                       cq_available; /* every WR in flight holds one:
                                               in error, unsignaled WRs
                                               complete too */
    unsigned                  tailed;       /* queues with unsignaled WRs
                                               after their last signaled
                                               one: each holds one more CQ
                                               entry, for the NOP */
    unsigned                  moderation;   /* unsignaled WRs in a row */
    int                       desc_starved; /* a descriptor was refused;
                                               cleared when one comes back */
    ucs_mpool_t               flush_mp;     /* flush requests of the
                                               queues (rc_share_txq.c) */
} uct_rc_share_tx_res_t;

typedef struct uct_rc_share_iface {
    uct_base_iface_t          super;
    uct_ibshare_md_t          *md;
    uint64_t                  buf_va_offset; /* bounce buffers: address - IOVA */
    uint8_t                   port_num;
    struct ibv_port_attr      port_attr;
    uint8_t                   gid_index;
    union ibv_gid             gid;
    uint64_t                  id;           /* tells ifaces apart */
    uint64_t                  secret;       /* in our iface address: what a
                                               stranger cannot know */
    int                       has_atomics;

    struct ibv_comp_channel   *comp_channel;
    struct ibv_cq             *send_cq;
    struct ibv_cq             *recv_cq;
    uct_rc_share_cq_stash_t   send_stash;
    uct_rc_share_cq_stash_t   recv_stash;
    struct ibv_srq            *srq;
    ucs_mpool_t               tx_mp;
    ucs_mpool_t               rx_mp;
    uct_rc_share_tx_res_t     tx;           /* what every send queue draws
                                               from */
    unsigned                  rx_to_post;   /* SRQ buffers to repost */
    ucs_arbiter_t             arbiter;      /* eps with pending requests */
    ucs_arbiter_group_t       *pending_cb_group; /* whose request's callback
                                                    runs now, if any */
    uct_recv_desc_t           release_desc;
    ucs_mpool_t               backlog_mp;   /* uct_rc_share_backlog_op_t */
    ucs_list_link_t           grants_owed;  /* connections whose grant waits
                                               for room (rc_share_conn.c) */
    ucs_list_link_t           ep_list;

    /* The connections and their handshake (rc_share_conn.c) */
    uct_rc_share_conn_iface_t *conn;

    /* UCX_RC_SHARE_NODE_CONNS=on: every endpoint goes through the node's
     * engine, none connects (rc_share_node.h); else NULL */
    uct_rc_share_node_iface_t *node;

    /* put_short's WR, filled in place as rc_verbs' (only the buffer, the
     * length and the remote address change): built on the stack it cost
     * a third more instructions than rc_verbs' put_short (doc/bench.md,
     * issue 23) */
    struct ibv_send_wr        put_inl_wr;
    struct ibv_sge            put_inl_sge;

    struct {
        size_t                seg_size;
        size_t                max_am_hdr;   /* am_zcopy header, in the
                                               descriptor */
        unsigned              tx_qp_len;
        unsigned              max_inline;
        size_t                rx_payload_offset;
        size_t                rx_headroom_offset;
        enum ibv_mtu          path_mtu;
        uint8_t               timeout;      /* encoded for ibv_modify_qp */
        uint8_t               retry_count;
        uint8_t               rnr_timeout;
        uint8_t               rnr_retry_count;
        uint8_t               max_rd_atomic;
        ucs_time_t            conn_timeout;
        ucs_time_t            conn_retry;
        ucs_time_t            check_timeout;
        unsigned              max_conns;
        int                   node_peers;   /* other processes of this node
                                               are reachable */
        int                   fc_enabled;
        int                   fc_wnd_size;
        int                   fc_soft_thresh; /* window left: soft request */
        int                   fc_hard_thresh; /* ... hard request */
    } config;

    uct_rc_share_counters_t   counters;
    ucs_time_t                rx_drop_logged; /* last warning of a drop */
    uct_rc_share_locality_t   locality;     /* where we run */
    int                       node_peer_logged; /* said once that it
                                               leaves them to shm */
    uct_am_callback_t         am_stub;      /* UCX's handler of an AM id
                                               nobody set (it warns for
                                               every message) */
} uct_rc_share_iface_t;


/*
 * The address a work request gives for a bounce buffer. Pool memory is
 * registered at its IOVA in the node layout, not at this process's address,
 * and local access through the lkey uses the IOVA too.
 */
#define uct_rc_share_buf_iova(_iface, _ptr) \
    ((uintptr_t)(_ptr) - (_iface)->buf_va_offset)


/* Polls up to num completions, the stashed one first */
static UCS_F_ALWAYS_INLINE int
uct_rc_share_cq_poll(struct ibv_cq *cq, uct_rc_share_cq_stash_t *stash,
                     int num, struct ibv_wc *wc)
{
    int n = 0, ret;

    if (ucs_unlikely(stash->valid)) {
        wc[0]        = stash->wc;
        stash->valid = 0;
        n            = 1;
    }

    ret = ibv_poll_cq(cq, num - n, wc + n);
    return (ret > 0) ? (n + ret) : n;
}


/* Returns nonzero if the CQ has a completion, which it then keeps stashed */
static UCS_F_ALWAYS_INLINE int
uct_rc_share_cq_stash_fill(struct ibv_cq *cq, uct_rc_share_cq_stash_t *stash)
{
    if (!stash->valid) {
        stash->valid = ibv_poll_cq(cq, 1, &stash->wc) > 0;
    }
    return stash->valid;
}


typedef enum {
    UCT_RC_SHARE_EP_CONNECTING, /* until the QP is up and the backlog posted */
    UCT_RC_SHARE_EP_CONNECTED,
    UCT_RC_SHARE_EP_FAILED
} uct_rc_share_ep_state_t;


typedef struct uct_rc_share_conn uct_rc_share_conn_t;
typedef struct uct_rc_share_txq uct_rc_share_txq_t;

typedef struct uct_rc_share_ep {
    uct_base_ep_t             super;
    uct_rc_share_ep_state_t   state;
    uct_rc_share_txq_t        *txq;         /* the connection's send queue */
    uct_rc_share_conn_t       *conn;        /* whose sending half is ours */
    int                       *fc_wnd;      /* the connection's window */
    ucs_status_t              fail_status;
    ucs_arbiter_group_t       arb_group;
    ucs_list_link_t           list;         /* iface->ep_list */
} uct_rc_share_ep_t;


ucs_status_t uct_rc_share_query_tl_devices(uct_md_h md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p);

extern ucs_config_field_t uct_rc_share_iface_config_table[];

/*
 * Refuse a bad value of the iface's settings, naming the variable and the
 * accepted range. Needs no device: iface open calls it before the md's
 * resources are acquired (the bounds a device sets are checked later).
 */
ucs_status_t
uct_rc_share_iface_config_check(const uct_rc_share_iface_config_t *config);

UCS_CLASS_DECLARE_NEW_FUNC(uct_rc_share_iface_t, uct_iface_t, uct_md_h,
                           uct_worker_h, const uct_iface_params_t*,
                           const uct_iface_config_t*);

/* Both kinds of endpoint connect to an iface: its device and iface
 * addresses are needed */
static inline ucs_status_t
uct_rc_share_ep_params_check(const uct_ep_params_t *params)
{
    if (!(params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) ||
        !(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR)) {
        ucs_error("rc_share: an endpoint needs the remote device and iface "
                  "addresses");
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* rc_share_ep.c: the operations */
ucs_status_t uct_rc_share_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                      uint64_t header, const void *payload,
                                      unsigned length);
ssize_t uct_rc_share_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                 uct_pack_callback_t pack_cb, void *arg,
                                 unsigned flags);
ucs_status_t uct_rc_share_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                      const void *header,
                                      unsigned header_length,
                                      const uct_iov_t *iov, size_t iovcnt,
                                      unsigned flags, uct_completion_t *comp);
ucs_status_t uct_rc_share_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                       unsigned length, uint64_t remote_addr,
                                       uct_rkey_t rkey);
ssize_t uct_rc_share_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                  void *arg, uint64_t remote_addr,
                                  uct_rkey_t rkey);
ucs_status_t uct_rc_share_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_rc_share_ep_get_bcopy(uct_ep_h tl_ep,
                                       uct_unpack_callback_t unpack_cb,
                                       void *arg, size_t length,
                                       uint64_t remote_addr, uct_rkey_t rkey,
                                       uct_completion_t *comp);
ucs_status_t uct_rc_share_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_rc_share_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode,
                                           uint64_t value,
                                           uint64_t remote_addr,
                                           uct_rkey_t rkey);
ucs_status_t uct_rc_share_ep_atomic64_fetch(uct_ep_h tl_ep,
                                            uct_atomic_op_t opcode,
                                            uint64_t value, uint64_t *result,
                                            uint64_t remote_addr,
                                            uct_rkey_t rkey,
                                            uct_completion_t *comp);
ucs_status_t uct_rc_share_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                            uint64_t swap,
                                            uint64_t remote_addr,
                                            uct_rkey_t rkey, uint64_t *result,
                                            uct_completion_t *comp);
ucs_status_t uct_rc_share_ep_pending_add(uct_ep_h tl_ep,
                                         uct_pending_req_t *req,
                                         unsigned flags);
void uct_rc_share_ep_pending_purge(uct_ep_h tl_ep,
                                   uct_pending_purge_callback_t cb, void *arg);
ucs_status_t uct_rc_share_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp);
ucs_status_t uct_rc_share_ep_fence(uct_ep_h tl_ep, unsigned flags);
ucs_status_t uct_rc_share_ep_check(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp);
ucs_status_t uct_rc_share_ep_create(const uct_ep_params_t *params,
                                    uct_ep_h *ep_p);
void uct_rc_share_ep_destroy(uct_ep_h tl_ep);

/* rc_share_ep.c: for the iface */
ucs_arbiter_cb_result_t uct_rc_share_ep_process_pending(
        ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
        ucs_arbiter_elem_t *elem, void *arg);
int uct_rc_share_ep_tx_idle(uct_rc_share_ep_t *ep);
void uct_rc_share_iface_tx_unstick(uct_rc_share_iface_t *iface);
extern uct_iface_ops_t uct_rc_share_iface_ops;

#endif
