/**
 * rc_share: the RC transport of the ibshare component.
 *
 * Every rank has its own CQs, SRQ and RC QPs on the PD the md provides. An
 * endpoint connects to a remote iface address by itself: a handshake over a
 * UD QP of each iface (rc_share_conn.c) creates a passive RC QP at the target
 * that is the peer of the endpoint's QP. So UCP needs no auxiliary transport
 * (which would open a second device context) for wire-up.
 */
#ifndef UCT_RC_SHARE_H_
#define UCT_RC_SHARE_H_

#include "ibshare_md.h"

#include <uct/base/uct_iface.h>
#include <uct/base/uct_worker.h>
#include <ucs/async/async.h>
#include <ucs/arch/cpu.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
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
    double                    timeout;      /* RC ack timeout */
    unsigned                  retry_count;
    double                    rnr_timeout;
    unsigned long             rnr_retry_count; /* UCS_ULUNITS_AUTO: by the
                                                  node group's mode */
    unsigned                  max_rd_atomic;
    double                    conn_timeout; /* handshake: give up after */
    double                    conn_retry;   /* handshake: resend after */
    double                    check_timeout; /* ep_check: give up after */
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


/* What a peer needs to start a connection: the iface address */
typedef struct UCS_S_PACKED uct_rc_share_iface_addr {
    uint8_t                   qpn[3];       /* UD QP of the handshake */
    uint8_t                   mtu;          /* enum ibv_mtu of our port */
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
    int                       signal;
    uint8_t                   inline_data[0];
} uct_rc_share_backlog_op_t;


/* Receive descriptor header; the payload follows at rx_payload_offset */
typedef struct uct_rc_share_rx_desc {
    uint32_t                  lkey;
} uct_rc_share_rx_desc_t;


/* The target side of a connection: a QP that only responds */
typedef struct uct_rc_share_passive {
    ucs_list_link_t           list;
    ucs_list_link_t           owed;         /* conn.grants_owed */
    int                       grant_owed;
    struct ibv_qp             *qp;
    struct ibv_ah             *ah;          /* to answer the requester */
    uint64_t                  src_iface_id;
    uint64_t                  src_conn_id;
    uint32_t                  remote_qpn;   /* the requester's QP */
    uint32_t                  psn;
} uct_rc_share_passive_t;


typedef struct uct_rc_share_counters {
    uint64_t                  am_ops,  am_bytes;
    uint64_t                  put_ops, put_bytes;
    uint64_t                  get_ops, get_bytes;
    uint64_t                  atomic_ops;
    uint64_t                  rx_ops,  rx_bytes;
    uint64_t                  eps, passive_qps;
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


typedef struct uct_rc_share_iface {
    uct_base_iface_t          super;
    uct_ibshare_md_t          *md;
    uint64_t                  buf_va_offset; /* bounce buffers: address - IOVA */
    uint8_t                   port_num;
    struct ibv_port_attr      port_attr;
    uint8_t                   gid_index;
    union ibv_gid             gid;
    uint64_t                  id;           /* tells handshakes apart */
    int                       has_atomics;

    struct ibv_comp_channel   *comp_channel;
    struct ibv_cq             *send_cq;
    struct ibv_cq             *recv_cq;
    uct_rc_share_cq_stash_t   send_stash;
    uct_rc_share_cq_stash_t   recv_stash;
    struct ibv_srq            *srq;
    ucs_mpool_t               tx_mp;
    ucs_mpool_t               rx_mp;
    int                       tx_cq_available; /* every WR in flight holds
                                                  one: in error, unsignaled
                                                  WRs complete too */
    int                       tx_desc_starved; /* a descriptor was refused;
                                                  cleared when one comes
                                                  back */
    unsigned                  tx_tailed;    /* eps with unsignaled WRs after
                                               their last signaled one: each
                                               holds one more CQ entry, for
                                               the WR that would report them */
    unsigned                  rx_to_post;   /* SRQ buffers to repost */
    ucs_arbiter_t             arbiter;      /* eps with pending requests */
    uct_recv_desc_t           release_desc;
    ucs_mpool_t               backlog_mp;   /* uct_rc_share_backlog_op_t */
    ucs_list_link_t           draining;     /* eps posting their backlog
                                               (conn_list) */

    /*
     * Connection handshake over UD. The UD CQ has a completion channel of
     * its own, handled in the worker's async context, so that a target
     * answers requests without calling progress. Everything here is
     * touched under UCS_ASYNC_BLOCK of the worker's async context.
     */
    struct {
        struct ibv_comp_channel *channel;
        int                   handler_set;
        struct ibv_cq         *cq;
        struct ibv_qp         *qp;
        ucs_list_link_t       connecting;   /* eps waiting for a reply */
        ucs_list_link_t       checking;     /* eps whose liveness check is
                                               in flight (check_list) */
        ucs_list_link_t       ready;        /* eps whose QP is connected,
                                               for the main thread */
        uct_worker_cb_id_t    ready_prog_id;
        ucs_list_link_t       passive;      /* uct_rc_share_passive_t */
        ucs_list_link_t       retired_ahs;  /* freed when the UD sends end */
        struct ibv_cq         *grant_cq;    /* sends of the passive QPs */
        unsigned              grants_in_flight;
        ucs_list_link_t       grants_owed;  /* passives whose grant waits
                                               for grant_cq room */
        uct_ibshare_buf_t     bufs;         /* rx_bufs, then tx_buf */
        void                  *rx_bufs;
        unsigned              rx_count;
        void                  *tx_buf;
        unsigned              tx_count;
        unsigned              tx_next;
        int                   tx_available;
        uint64_t              next_conn_id;
    } conn;

    ucs_list_link_t           ep_list;
    ucs_list_link_t           zombie_eps;   /* destroyed, QP draining */

    struct {
        size_t                seg_size;
        size_t                max_am_hdr;   /* am_zcopy header, in the
                                               descriptor */
        unsigned              tx_qp_len;
        unsigned              tx_moderation; /* unsignaled WRs in a row */
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
        int                   fc_enabled;
        int                   fc_wnd_size;
        int                   fc_soft_thresh; /* window left: soft request */
        int                   fc_hard_thresh; /* ... hard request */
    } config;

    uct_rc_share_counters_t   counters;
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
    UCT_RC_SHARE_EP_FAILED,
    UCT_RC_SHARE_EP_ZOMBIE      /* destroyed, waiting for its completions */
} uct_rc_share_ep_state_t;


typedef struct uct_rc_share_ep {
    uct_base_ep_t             super;
    struct ibv_qp             *qp;
    uct_rc_share_ep_state_t   state;
    ucs_status_t              fail_status;
    int                       sq_available;
    int                       fc_wnd;       /* AMs the receiver takes
                                               before it grants more */
    int                       fence;        /* next WR waits for RDMA reads */
    uint64_t                  tx_posted;    /* sequence number of the last WR */
    uint64_t                  tx_completed; /* ... of the last one done */
    unsigned                  tx_unsignaled; /* WRs since the last signaled */
    unsigned                  tx_ops_mask;
    uintptr_t                 *tx_ops;      /* by sequence number: what a WR
                                               delivers when done (a
                                               descriptor, or a completion
                                               tagged UCT_RC_SHARE_TX_OP_COMP),
                                               or 0 */
    ucs_queue_head_t          flush_reqs;   /* uct_rc_share_flush_req_t */
    ucs_queue_head_t          backlog;      /* uct_rc_share_backlog_op_t */
    unsigned                  backlog_len;
    ucs_arbiter_group_t       arb_group;
    ucs_list_link_t           list;         /* iface->ep_list */

    /* Handshake state */
    ucs_list_link_t           conn_list;    /* while connecting: in
                                               iface->conn.connecting, then
                                               conn.ready, then draining */
    ucs_status_t              conn_status;  /* of connecting the QP */
    struct ibv_ah             *ah;          /* to the remote UD QP */
    uint32_t                  remote_ud_qpn;
    enum ibv_mtu              remote_mtu;
    uct_rc_share_device_addr_t remote_dev;
    uint64_t                  conn_id;
    uint32_t                  psn;
    ucs_time_t                conn_deadline;
    ucs_time_t                conn_next_retry;
    uint64_t                  remote_iface_id; /* of the REP */
    uint32_t                  remote_qpn;   /* the passive QP, of the REP */

    /* Liveness check (ep_check), under the async context's lock like the
     * handshake */
    ucs_list_link_t           check_list;   /* in iface->conn.checking, or
                                               a failed list of progress */
    int                       check_pending; /* on check_list */
    ucs_status_t              check_status; /* INPROGRESS, or why it failed */
    uint32_t                  check_sn;
    ucs_time_t                check_deadline;
    ucs_time_t                check_next_retry;
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

/*
 * A send WR's wr_id: its endpoint, and above the 48 bits of a user-space
 * address, the low 16 bits of its sequence number (the send queue holds
 * fewer WRs than that). A completion reports its WR and every unsignaled WR
 * of the endpoint before it.
 */
#define UCT_RC_SHARE_WR_ID_SN_SHIFT 48

static UCS_F_ALWAYS_INLINE uint64_t
uct_rc_share_wr_id(const uct_rc_share_ep_t *ep, uint64_t sn)
{
    return (uintptr_t)ep | (sn << UCT_RC_SHARE_WR_ID_SN_SHIFT);
}

static UCS_F_ALWAYS_INLINE uct_rc_share_ep_t *
uct_rc_share_wr_id_ep(uint64_t wr_id)
{
    return (uct_rc_share_ep_t*)(uintptr_t)
           (wr_id & UCS_MASK(UCT_RC_SHARE_WR_ID_SN_SHIFT));
}

static UCS_F_ALWAYS_INLINE uint16_t uct_rc_share_wr_id_sn(uint64_t wr_id)
{
    return wr_id >> UCT_RC_SHARE_WR_ID_SN_SHIFT;
}

/* rc_share_ep.c: what the iface and the handshake tell an endpoint */
void uct_rc_share_ep_tx_complete(uct_rc_share_ep_t *ep, uint16_t sn,
                                 ucs_status_t status);
int uct_rc_share_ep_tx_idle(uct_rc_share_ep_t *ep);
int uct_rc_share_ep_set_failed(uct_rc_share_ep_t *ep, ucs_status_t status);
void uct_rc_share_ep_report_failure(uct_rc_share_ep_t *ep);
void uct_rc_share_ep_qp_ready(uct_rc_share_ep_t *ep);
void uct_rc_share_ep_fc_grant(uct_rc_share_ep_t *ep);
void uct_rc_share_ep_backlog_drain(uct_rc_share_ep_t *ep);
void uct_rc_share_ep_zombie_release(uct_rc_share_ep_t *ep);
ucs_arbiter_cb_result_t uct_rc_share_ep_process_pending(
        ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
        ucs_arbiter_elem_t *elem, void *arg);
extern uct_iface_ops_t uct_rc_share_iface_ops;

#endif
