/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The send queue of one RC QP: work requests numbered in order, what each
 * delivers when it is done, selective signaling, the backlog of a QP that
 * is not connected yet, and flush requests.
 *
 * Work requests are numbered per QP (the sequence number is in the wr_id,
 * beside the owner's address). What a WR delivers when it is done, a
 * descriptor or the user's completion, waits in the ops ring under its
 * sequence number; an operation that delivers nothing (a short or
 * zero-copy request without completion) takes no descriptor.
 *
 * Signaling is selective, as in UCX's rc_verbs: a WR whose completion the
 * user waits for is signaled, others only every `moderation` WRs, or when
 * CQ entries run short. A completion stands for its WR and every unsignaled
 * WR before it: they return their send-queue slots and CQ entries, and
 * what they deliver is delivered, then. In error, every WR completes,
 * signaled or not (so each WR in flight holds a CQ entry), the failed one
 * with its error and those before it successfully.
 *
 * Unsignaled WRs after a queue's last signaled one (its tail) would report
 * nothing by themselves: flush, ep_check, the owner's end, and running out
 * of CQ entries or descriptors post a signaled zero-length RDMA write (a
 * NOP) after them. So that the NOP can always be posted, a queue with a
 * tail holds one more CQ entry, and one send-queue slot is kept for it.
 *
 * The backlog is the async context's (its functions are called holding it):
 * the handshake's async side posts it the moment the QP is connected, so
 * that what a user sent to a new peer goes out although the user may never
 * call progress again (UCX's wakeup test sends, then sleeps on the event
 * fd of the receiver). A backlog entry takes its send-queue slot and CQ
 * entry when it is added, and is posted signaled: the async side's posts
 * write only the queue's ring and sequence number, never a counter the
 * main thread's posts and completions change. While the backlog is not
 * empty the main thread posts nothing on the QP; once it is posted
 * (`connected`) the queue is the main thread's alone.
 *
 * The QP belongs to a connection (rc_share_conn.c), which both directions
 * of a pair of ifaces share: the queue outlives the endpoint that posted on
 * it, and once the endpoint is gone its completions deliver nothing.
 */
#ifndef UCT_RC_SHARE_TXQ_H_
#define UCT_RC_SHARE_TXQ_H_

#include "rc_share.h"

#include <ucs/datastruct/mpool.inl>


/* An ops entry that is a user completion (a descriptor has bit 0 clear) */
#define UCT_RC_SHARE_TX_OP_COMP 1ul


struct uct_rc_share_txq {
    struct ibv_qp             *qp;
    uct_rc_share_tx_res_t     *res;
    uintptr_t                 wr_id_base;   /* the owner's address */
    int                       sq_available;
    int                       fence;        /* next WR waits for RDMA reads */
    int                       deliver;      /* 0: nothing reaches the user */
    uint64_t                  posted;       /* sequence number of the last
                                               WR */
    uint64_t                  completed;    /* ... of the last one done */
    unsigned                  unsignaled;   /* WRs since the last signaled */
    unsigned                  ops_mask;
    uintptr_t                 *ops;         /* by sequence number */
    ucs_queue_head_t          backlog;      /* uct_rc_share_backlog_op_t */
    unsigned                  backlog_len;
    int                       connected;    /* the backlog is posted: WRs
                                               go to the QP */
    ucs_queue_head_t          flush_reqs;   /* uct_rc_share_flush_req_t */
    int                       owner_waits;  /* the owner has requests
                                               pending for send resources:
                                               completions tell it */
};


/* A flush request: done when the queue's completed WRs reach sn */
typedef struct uct_rc_share_flush_req {
    ucs_queue_elem_t          queue;
    uct_completion_t          *comp;
    uint64_t                  sn;
} uct_rc_share_flush_req_t;


/*
 * A send WR's wr_id: the queue's owner, and above the 48 bits of a
 * user-space address, the low 16 bits of its sequence number (the send
 * queue holds fewer WRs than that).
 */
#define UCT_RC_SHARE_WR_ID_SN_SHIFT 48

static UCS_F_ALWAYS_INLINE void *uct_rc_share_wr_id_owner(uint64_t wr_id)
{
    return (void*)(uintptr_t)(wr_id & UCS_MASK(UCT_RC_SHARE_WR_ID_SN_SHIFT));
}

static UCS_F_ALWAYS_INLINE uint16_t uct_rc_share_wr_id_sn(uint64_t wr_id)
{
    return wr_id >> UCT_RC_SHARE_WR_ID_SN_SHIFT;
}


/* Memory pool operations for pools of plain (unregistered) memory */
extern ucs_mpool_ops_t uct_rc_share_malloc_mpool_ops;

/* What the queues of an iface share beyond the counters: the pool of their
 * flush requests */
ucs_status_t uct_rc_share_tx_res_init(uct_rc_share_tx_res_t *res);

void uct_rc_share_tx_res_cleanup(uct_rc_share_tx_res_t *res);

ucs_status_t uct_rc_share_txq_init(uct_rc_share_txq_t *txq,
                                   uct_rc_share_tx_res_t *res,
                                   unsigned qp_len, void *owner);

/* Releases what the WRs in flight hold, delivering nothing, and completes
 * the backlog and the flush requests with CANCELED */
void uct_rc_share_txq_cleanup(uct_rc_share_txq_t *txq);

/* Whether a WR may be posted now (the QP is connected) */
static UCS_F_ALWAYS_INLINE int
uct_rc_share_txq_has_room(const uct_rc_share_txq_t *txq)
{
    return (txq->sq_available > 0) && (txq->res->cq_available > 0);
}

/* Tail bookkeeping: a queue with unsignaled WRs after its last signaled
 * one holds one CQ entry more, for the NOP that may have to report them */
static UCS_F_ALWAYS_INLINE void
uct_rc_share_txq_tail_end(uct_rc_share_txq_t *txq)
{
    if (txq->unsignaled != 0) {
        txq->unsignaled = 0;
        --txq->res->tailed;
        ++txq->res->cq_available;
    }
}

/* (logs the failure, releases op) */
void uct_rc_share_txq_post_failed(uct_rc_share_txq_t *txq, uintptr_t op,
                                  int ret);

/* Posts one WR (the caller checked the room). op: what its completion
 * delivers, 0 for nothing. signal: the caller waits for it. Inline, as the
 * completion below: each is on the path of every operation, and as calls
 * they cost a tenth of rc_share's instructions per put + flush or get
 * (doc/bench.md, issue 23). */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_txq_post(uct_rc_share_txq_t *txq, struct ibv_send_wr *wr,
                      uintptr_t op, int signal)
{
    uct_rc_share_tx_res_t *res = txq->res;
    uint64_t sn                = txq->posted + 1;
    struct ibv_send_wr *bad_wr;
    int ret;

    signal = signal || (txq->unsignaled >= res->moderation) ||
             (res->cq_available <= (int)res->moderation);

    wr->wr_id       = txq->wr_id_base | (sn << UCT_RC_SHARE_WR_ID_SN_SHIFT);
    wr->next        = NULL;
    wr->send_flags |= (signal ? IBV_SEND_SIGNALED : 0) |
                      (txq->fence ? IBV_SEND_FENCE : 0);

    ret = ibv_post_send(txq->qp, wr, &bad_wr);
    if (ucs_unlikely(ret != 0)) {
        uct_rc_share_txq_post_failed(txq, op, ret);
        return UCS_ERR_IO_ERROR;
    }

    ucs_assert(txq->ops[sn & txq->ops_mask] == 0);
    txq->ops[sn & txq->ops_mask] = op;
    txq->posted                  = sn;
    txq->fence                   = 0;
    --txq->sq_available;
    --res->cq_available;
    if (signal) {
        uct_rc_share_txq_tail_end(txq);
    } else if (txq->unsignaled++ == 0) {
        ++res->tailed;
        --res->cq_available;
    }
    return UCS_OK;
}

/* Keeps an operation for when the QP is connected, in order (inline data
 * copied: the caller may reuse its buffer), taking its send-queue slot and
 * CQ entry now (the caller checked the room); once the backlog is posted,
 * posts it. Either way its WR is signaled. The caller holds the async
 * context. */
ucs_status_t uct_rc_share_txq_backlog_add(uct_rc_share_txq_t *txq,
                                          ucs_mpool_t *mp,
                                          struct ibv_send_wr *wr,
                                          uintptr_t op);

/* Posts the backlog of a connected QP, in order, and from then on the
 * queue is connected: UCS_OK, or an error when a post failed (the entry
 * that failed and those after it stay). The caller holds the async
 * context; it may be the async thread. */
ucs_status_t uct_rc_share_txq_backlog_post(uct_rc_share_txq_t *txq);

/* Drops the backlog: every operation in it completes with status. The
 * caller holds the async context. */
void uct_rc_share_txq_backlog_purge(uct_rc_share_txq_t *txq,
                                    ucs_status_t status);

/* A signaled zero-length RDMA write that reports the unsignaled tail, if
 * there is one (the slot and the CQ entry it needs are kept for it) */
ucs_status_t uct_rc_share_txq_report_tail(uct_rc_share_txq_t *txq);

/* The same, with no tail to report: a round trip to the peer (ep_check) */
ucs_status_t uct_rc_share_txq_post_nop(uct_rc_share_txq_t *txq);

/* (logs a completion that is not of this queue's WRs) */
void uct_rc_share_txq_complete_invalid(const uct_rc_share_txq_t *txq,
                                       uint16_t sn);

/* Delivers what a WR done leaves: fetched data, the user's completion, the
 * descriptor back to its pool */
static UCS_F_ALWAYS_INLINE void
uct_rc_share_txq_op_done(uct_rc_share_txq_t *txq, uintptr_t op,
                         ucs_status_t status)
{
    uct_rc_share_tx_desc_t *desc;

    if (op & UCT_RC_SHARE_TX_OP_COMP) {
        if (ucs_likely(txq->deliver)) {
            uct_invoke_completion((uct_completion_t*)
                                  (op & ~UCT_RC_SHARE_TX_OP_COMP), status);
        }
        return;
    }

    desc = (uct_rc_share_tx_desc_t*)op;
    if (ucs_likely(txq->deliver)) {
        if ((status == UCS_OK) && (desc->handler != NULL)) {
            desc->handler(desc);
        }
        if (desc->comp != NULL) {
            uct_invoke_completion(desc->comp, status);
        }
    }
    ucs_mpool_put_inline(desc);
    txq->res->desc_starved = 0;
}

/*
 * A send completion of the WR numbered sn (its low 16 bits): it and the
 * unsignaled WRs before it are done. In error, the WRs before it succeeded
 * (a QP completes in order, and stops at the first error); the WR itself
 * takes the status. Returns how many WRs it completed, 0 for a completion
 * that is not of this queue's WRs (which must not happen).
 */
static UCS_F_ALWAYS_INLINE unsigned
uct_rc_share_txq_complete(uct_rc_share_txq_t *txq, uint16_t sn,
                          ucs_status_t status)
{
    unsigned count = (uint16_t)(sn - (uint16_t)txq->completed);
    uint64_t last  = txq->completed + count;
    uintptr_t *entry;
    uintptr_t op;
    uint64_t i;

    if (ucs_unlikely((count == 0) || (last > txq->posted))) {
        uct_rc_share_txq_complete_invalid(txq, sn);
        return 0;
    }

    /* Callbacks may post, but not past these entries: their slots and CQ
     * entries come back only after the loop (count >= 1) */
    i = txq->completed;
    do {
        entry = &txq->ops[++i & txq->ops_mask];
        op    = *entry;
        if (op != 0) {
            *entry = 0;
            uct_rc_share_txq_op_done(txq, op, (i == last) ? status : UCS_OK);
        }
    } while (i < last);

    txq->sq_available      += count;
    txq->completed          = last;
    txq->res->cq_available += count;
    if (txq->completed == txq->posted) {
        /* The tail, if any, went in error completions: no NOP needed */
        uct_rc_share_txq_tail_end(txq);
    }
    return count;
}

/* Whether no WR is in flight and none waits in the backlog */
static UCS_F_ALWAYS_INLINE int
uct_rc_share_txq_idle(const uct_rc_share_txq_t *txq)
{
    return (txq->posted == txq->completed) && (txq->backlog_len == 0);
}

/* A flush of everything issued so far (posted, or in the backlog): comp
 * is called when it is all done (uct_rc_share_txq_flush_progress) */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_txq_flush_add(uct_rc_share_txq_t *txq, uct_completion_t *comp)
{
    uct_rc_share_flush_req_t *req;

    req = ucs_mpool_get_inline(&txq->res->flush_mp);
    if (req == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    req->comp = comp;
    /* The last operation issued: posted, or last in the backlog */
    req->sn   = txq->posted + txq->backlog_len;
    ucs_queue_push(&txq->flush_reqs, &req->queue);
    return UCS_OK;
}

/* Whether a flush request may be done: the oldest one's WRs are, or none
 * is in flight. Inline, as every send completion asks it while a flush
 * waits (a call per completion cost more than the completion itself:
 * doc/bench.md, issue 23). */
static UCS_F_ALWAYS_INLINE int
uct_rc_share_txq_flush_due(const uct_rc_share_txq_t *txq)
{
    const uct_rc_share_flush_req_t *req;

    if (ucs_likely(ucs_queue_is_empty(&txq->flush_reqs))) {
        return 0;
    }
    req = ucs_queue_head_elem_non_empty(&txq->flush_reqs,
                                        uct_rc_share_flush_req_t, queue);
    return (req->sn <= txq->completed) || (txq->completed == txq->posted);
}

/* Completes the flush requests whose operations are all done, with
 * status. While connecting, the backlog may still be posted; otherwise
 * it is gone (posted or dropped), and with nothing in flight every flush
 * is done. Inline, as flush_due: a flush's completion comes here. */
static UCS_F_ALWAYS_INLINE void
uct_rc_share_txq_flush_done(uct_rc_share_txq_t *txq, ucs_status_t status,
                            int connecting)
{
    int backlog_gone = !connecting && (txq->completed == txq->posted);
    uct_rc_share_flush_req_t *req;

    while (!ucs_queue_is_empty(&txq->flush_reqs)) {
        req = ucs_queue_head_elem_non_empty(&txq->flush_reqs,
                                            uct_rc_share_flush_req_t, queue);
        if ((req->sn > txq->completed) && !backlog_gone) {
            break;
        }
        ucs_queue_pull_non_empty(&txq->flush_reqs);
        uct_invoke_completion(req->comp, status);
        ucs_mpool_put_inline(req);
    }
}

static UCS_F_ALWAYS_INLINE void
uct_rc_share_txq_flush_progress(uct_rc_share_txq_t *txq, ucs_status_t status,
                                int connecting)
{
    if (uct_rc_share_txq_flush_due(txq)) {
        uct_rc_share_txq_flush_done(txq, status, connecting);
    }
}

/* The user's completions of the WRs in flight are called now with
 * CANCELED, and nothing else reaches the user (deliver = 0); what the WRs
 * hold stays until their completions come */
void uct_rc_share_txq_detach(uct_rc_share_txq_t *txq);

#endif
