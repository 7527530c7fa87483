/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The send queue of one RC QP (see rc_share_txq.h).
 */
#include "rc_share_txq.h"

#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/sys/math.h>

#include <string.h>


/* Pools of plain memory: flush requests, and the iface's backlog */
ucs_mpool_ops_t uct_rc_share_malloc_mpool_ops = {
    .chunk_alloc   = ucs_mpool_chunk_malloc,
    .chunk_release = ucs_mpool_chunk_free,
    .obj_init      = NULL,
    .obj_cleanup   = NULL,
    .obj_str       = NULL
};

/* A flush that waits is a request per ep flush (UCP flushes after every
 * put that shmem_quiet or MPI_Win_flush waits for): from a pool, not
 * malloc, as rc_verbs' flush descriptors */
ucs_status_t uct_rc_share_tx_res_init(uct_rc_share_tx_res_t *res)
{
    return uct_ibshare_ucx_mpool_init(&res->flush_mp, 0,
                                      sizeof(uct_rc_share_flush_req_t), 0,
                                      UCS_SYS_CACHE_LINE_SIZE, 64, UINT_MAX,
                                      &uct_rc_share_malloc_mpool_ops,
                                      "rc_share_flush");
}

void uct_rc_share_tx_res_cleanup(uct_rc_share_tx_res_t *res)
{
    if (res->flush_mp.data != NULL) {
        ucs_mpool_cleanup(&res->flush_mp, 1);
    }
}

ucs_status_t uct_rc_share_txq_init(uct_rc_share_txq_t *txq,
                                   uct_rc_share_tx_res_t *res,
                                   unsigned qp_len, void *owner)
{
    memset(txq, 0, sizeof(*txq));
    txq->res          = res;
    txq->wr_id_base   = (uintptr_t)owner;
    txq->deliver      = 1;
    /* With selective signaling, one slot is kept for the NOP that reports
     * the unsignaled tail */
    txq->sq_available = qp_len - (res->moderation > 0);
    txq->ops_mask     = ucs_roundup_pow2(qp_len) - 1;
    ucs_queue_head_init(&txq->backlog);
    ucs_queue_head_init(&txq->flush_reqs);

    /* wr_ids carry the owner in 48 bits and a 16-bit sequence number */
    if ((txq->wr_id_base >> UCT_RC_SHARE_WR_ID_SN_SHIFT) != 0) {
        ucs_error("rc_share: address %p does not fit in %d bits", owner,
                  UCT_RC_SHARE_WR_ID_SN_SHIFT);
        return UCS_ERR_UNSUPPORTED;
    }

    txq->ops = ucs_calloc(txq->ops_mask + 1, sizeof(*txq->ops),
                          "rc_share tx ops");
    if (txq->ops == NULL) {
        ucs_error("rc_share: failed to allocate %u tx ops entries",
                  txq->ops_mask + 1);
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

/* What an ops entry holds goes back, delivering nothing */
static void uct_rc_share_tx_op_release(uintptr_t op)
{
    if ((op != 0) && !(op & UCT_RC_SHARE_TX_OP_COMP)) {
        ucs_mpool_put_inline((void*)op);
    }
}

/* The user's completion of an ops entry, if any, which no longer has it */
static uct_completion_t *uct_rc_share_tx_op_take_comp(uintptr_t op)
{
    uct_rc_share_tx_desc_t *desc;
    uct_completion_t *comp;

    if (op & UCT_RC_SHARE_TX_OP_COMP) {
        return (uct_completion_t*)(op & ~UCT_RC_SHARE_TX_OP_COMP);
    } else if (op == 0) {
        return NULL;
    }

    desc          = (uct_rc_share_tx_desc_t*)op;
    comp          = desc->comp;
    desc->comp    = NULL;
    desc->handler = NULL;
    return comp;
}

void uct_rc_share_txq_post_failed(uct_rc_share_txq_t *txq, uintptr_t op,
                                  int ret)
{
    ucs_error("ibv_post_send(QP 0x%x) failed: %s", txq->qp->qp_num,
              strerror(ret));
    uct_rc_share_tx_op_release(op);
}

ucs_status_t uct_rc_share_txq_backlog_add(uct_rc_share_txq_t *txq,
                                          ucs_mpool_t *mp,
                                          struct ibv_send_wr *wr,
                                          uintptr_t op)
{
    uct_rc_share_backlog_op_t *bop;
    size_t length = 0;
    int i;

    if (txq->connected) {
        /* The async side posted the backlog, and the owner does not know
         * yet: signaled, as a tail of unsignaled WRs would wait for a NOP
         * that only a connected owner posts (flush, cancel, ep_check) */
        return uct_rc_share_txq_post(txq, wr, op, 1);
    }

    bop = ucs_mpool_get(mp);
    if (bop == NULL) {
        uct_rc_share_tx_op_release(op);
        return UCS_ERR_NO_MEMORY;
    }

    bop->wr         = *wr;
    bop->wr.next    = NULL;
    bop->wr.sg_list = bop->sge;
    bop->op         = op;
    if (txq->fence) {
        bop->wr.send_flags |= IBV_SEND_FENCE;
        txq->fence          = 0;
    }

    if (wr->send_flags & IBV_SEND_INLINE) {
        /* The caller may reuse its buffer once we return */
        for (i = 0; i < wr->num_sge; ++i) {
            memcpy(bop->inline_data + length,
                   (const void*)(uintptr_t)wr->sg_list[i].addr,
                   wr->sg_list[i].length);
            length += wr->sg_list[i].length;
        }
        bop->sge[0].addr   = (uintptr_t)bop->inline_data;
        bop->sge[0].length = length;
        bop->sge[0].lkey   = 0;
        bop->wr.num_sge    = 1;
    } else {
        memcpy(bop->sge, wr->sg_list, sizeof(*wr->sg_list) * wr->num_sge);
    }

    ucs_queue_push(&txq->backlog, &bop->queue);
    ++txq->backlog_len;
    --txq->sq_available;
    --txq->res->cq_available;
    return UCS_OK;
}

/*
 * Posts a backlog entry, whose slot and CQ entry are taken. The ring entry
 * and the sequence number are written before the post: the main thread may
 * poll the completion before ibv_post_send returns here.
 */
static ucs_status_t
uct_rc_share_txq_post_reserved(uct_rc_share_txq_t *txq,
                               uct_rc_share_backlog_op_t *bop)
{
    uint64_t sn = txq->posted + 1;
    struct ibv_send_wr *bad_wr;
    int ret;

    bop->wr.wr_id       = txq->wr_id_base |
                          (sn << UCT_RC_SHARE_WR_ID_SN_SHIFT);
    bop->wr.send_flags |= IBV_SEND_SIGNALED;
    ucs_assert(txq->ops[sn & txq->ops_mask] == 0);
    ucs_assert(txq->unsignaled == 0);
    txq->ops[sn & txq->ops_mask] = bop->op;
    txq->posted                  = sn;
    ucs_memory_cpu_store_fence();

    ret = ibv_post_send(txq->qp, &bop->wr, &bad_wr);
    if (ucs_unlikely(ret != 0)) {
        /* (the entry keeps its op: the purge releases it) */
        uct_rc_share_txq_post_failed(txq, 0, ret);
        txq->ops[sn & txq->ops_mask] = 0;
        txq->posted                  = sn - 1;
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

ucs_status_t uct_rc_share_txq_backlog_post(uct_rc_share_txq_t *txq)
{
    uct_rc_share_backlog_op_t *bop;
    ucs_status_t status;

    while (!ucs_queue_is_empty(&txq->backlog)) {
        bop    = ucs_queue_head_elem_non_empty(&txq->backlog,
                                               uct_rc_share_backlog_op_t,
                                               queue);
        status = uct_rc_share_txq_post_reserved(txq, bop);
        if (status != UCS_OK) {
            return status;
        }
        ucs_queue_pull_non_empty(&txq->backlog);
        ucs_mpool_put(bop);
        /* The main thread reads the length without the async context (a
         * grant waits while it is not 0): the post's stores come first */
        ucs_memory_cpu_store_fence();
        --txq->backlog_len;
    }

    txq->connected = 1;
    return UCS_OK;
}

void uct_rc_share_txq_backlog_purge(uct_rc_share_txq_t *txq,
                                    ucs_status_t status)
{
    uct_rc_share_backlog_op_t *bop;
    uct_completion_t *comp;

    while (!ucs_queue_is_empty(&txq->backlog)) {
        bop = ucs_queue_pull_elem_non_empty(&txq->backlog,
                                            uct_rc_share_backlog_op_t, queue);
        --txq->backlog_len;
        ++txq->sq_available;
        ++txq->res->cq_available;
        comp = uct_rc_share_tx_op_take_comp(bop->op);
        uct_rc_share_tx_op_release(bop->op);
        ucs_mpool_put(bop);
        if ((comp != NULL) && txq->deliver) {
            uct_invoke_completion(comp, status);
        }
        txq->res->desc_starved = 0;
    }
}

ucs_status_t uct_rc_share_txq_post_nop(uct_rc_share_txq_t *txq)
{
    struct ibv_send_wr wr;

    /* Needs no memory key on either side */
    wr.opcode              = IBV_WR_RDMA_WRITE;
    wr.send_flags          = 0;
    wr.sg_list             = NULL;
    wr.num_sge             = 0;
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey        = 0;
    return uct_rc_share_txq_post(txq, &wr, 0, 1);
}

ucs_status_t uct_rc_share_txq_report_tail(uct_rc_share_txq_t *txq)
{
    if (txq->unsignaled == 0) {
        return UCS_OK;
    }

    ucs_assert(txq->sq_available >= 0);
    return uct_rc_share_txq_post_nop(txq);
}

void uct_rc_share_txq_complete_invalid(const uct_rc_share_txq_t *txq,
                                       uint16_t sn)
{
    ucs_error("QP 0x%x: completion of WR %u, but %" PRIu64 " are done "
              "and %" PRIu64 " posted", txq->qp->qp_num, sn, txq->completed,
              txq->posted);
}

void uct_rc_share_txq_detach(uct_rc_share_txq_t *txq)
{
    uct_rc_share_flush_req_t *req;
    uct_completion_t *comp;
    uintptr_t *entry;
    uint64_t sn;

    uct_rc_share_txq_backlog_purge(txq, UCS_ERR_CANCELED);
    ucs_queue_for_each_extract(req, &txq->flush_reqs, queue, 1) {
        uct_invoke_completion(req->comp, UCS_ERR_CANCELED);
        ucs_mpool_put_inline(req);
    }

    for (sn = txq->completed + 1; sn <= txq->posted; ++sn) {
        entry = &txq->ops[sn & txq->ops_mask];
        comp  = uct_rc_share_tx_op_take_comp(*entry);
        if (*entry & UCT_RC_SHARE_TX_OP_COMP) {
            *entry = 0;
        }
        if (comp != NULL) {
            uct_invoke_completion(comp, UCS_ERR_CANCELED);
        }
    }
    txq->deliver = 0;
}

void uct_rc_share_txq_cleanup(uct_rc_share_txq_t *txq)
{
    uint64_t sn;

    if (txq->deliver) {
        uct_rc_share_txq_detach(txq);
    }
    /* (only with the iface, whose CQ goes too: a QP that may still have
     * completions in the CQ is never destroyed before they are polled) */
    for (sn = txq->completed + 1; sn <= txq->posted; ++sn) {
        uct_rc_share_tx_op_release(txq->ops[sn & txq->ops_mask]);
    }
    txq->res->cq_available += txq->posted - txq->completed;
    txq->completed          = txq->posted;
    uct_rc_share_txq_tail_end(txq);
    ucs_free(txq->ops);
    txq->ops = NULL;
}
