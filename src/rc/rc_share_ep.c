/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share endpoint: one function per UCT operation, on the send queue of
 * its connection (rc_share_conn.h), whose sending half it is.
 *
 * An endpoint takes operations from the moment it is created: until its
 * connection's QP is connected they wait, in order, in the queue's backlog
 * (the data of short and bcopy operations copied at call time), which the
 * handshake's async side posts the moment the QP is connected (the backlog
 * is the async context's: rc_share_txq.h). The endpoint itself is told by
 * the main thread, once the connection says it is ready. The connection
 * tells the endpoint of its state through callbacks (ready, failed, and
 * tx_resumed when credits or send resources come back); the endpoint calls
 * nothing of the connection's internals.
 */
#include "rc_share.h"
#include "rc_share_conn.h"
#include "rc_share_qp.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/time/time.h>
#include <ucs/type/class.h>

#include <arpa/inet.h>
#include <string.h>


/*
 * Every one-sided operation is signaled, as rc_verbs does it; only active
 * messages are signaled selectively. A flush after a put or an atomic then
 * waits for that WR's own completion: with the put unsignaled it had to
 * post a NOP to learn it, one more post per put + flush, and on rxe each
 * post is a system call that runs the requester (put + flush took 1.6x
 * rc_verbs' time under UCP, contrib/bench_rma; issue 23).
 */
#define UCT_RC_SHARE_RMA_SIGNAL 1

static UCS_F_ALWAYS_INLINE uct_rc_share_iface_t *
uct_rc_share_ep_iface(const uct_rc_share_ep_t *ep)
{
    return ucs_derived_of(ep->super.super.iface, uct_rc_share_iface_t);
}

static void uct_rc_share_ep_cancel(uct_rc_share_ep_t *ep);

/* Whether a new operation may be issued now, when the fast check says no:
 * a connecting endpoint takes it into its backlog while there is room (a
 * backlog entry takes its send-queue slot and CQ entry when it is added;
 * only the main thread changes either count) */
static UCS_F_NOINLINE ucs_status_t
uct_rc_share_ep_no_tx(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    switch (ep->state) {
    case UCT_RC_SHARE_EP_CONNECTING:
        if (uct_rc_share_txq_has_room(ep->txq)) {
            return UCS_OK;
        }
        if (iface->tx.cq_available <= 0) {
            uct_rc_share_iface_tx_unstick(iface);
        }
        return UCS_ERR_NO_RESOURCE;
    case UCT_RC_SHARE_EP_FAILED:
        return (ep->fail_status == UCS_ERR_CANCELED) ?
               UCS_ERR_CANCELED : UCS_ERR_ENDPOINT_TIMEOUT;
    default:
        if (iface->tx.cq_available <= 0) {
            uct_rc_share_iface_tx_unstick(iface);
        }
        return UCS_ERR_NO_RESOURCE;
    }
}

/* Whether a new operation may be posted now */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_ep_check_tx(uct_rc_share_ep_t *ep)
{
    if (ucs_likely((ep->state == UCT_RC_SHARE_EP_CONNECTED) &&
                   uct_rc_share_txq_has_room(ep->txq))) {
        return UCS_OK;
    }

    return uct_rc_share_ep_no_tx(ep);
}

#define UCT_RC_SHARE_EP_CHECK_TX(_ep) \
    { \
        ucs_status_t _status = uct_rc_share_ep_check_tx(_ep); \
        if (ucs_unlikely(_status != UCS_OK)) { \
            return _status; \
        } \
    }

/* Flow control, when the window is down to the soft threshold: the AM
 * asks for credits (soft, then hard request), and with none left waits */
static UCS_F_NOINLINE ucs_status_t
uct_rc_share_ep_fc_request(uct_rc_share_ep_t *ep, uint32_t *fc_flags_p)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    if (!iface->config.fc_enabled) {
        *ep->fc_wnd = INT_MAX;
        return UCS_OK;
    }

    if (*ep->fc_wnd <= 0) {
        return UCS_ERR_NO_RESOURCE; /* until the receiver grants */
    }

    if (*ep->fc_wnd == iface->config.fc_soft_thresh) {
        *fc_flags_p = UCT_RC_SHARE_IMM_FC_SOFT_REQ;
    } else if (*ep->fc_wnd == iface->config.fc_hard_thresh) {
        *fc_flags_p = UCT_RC_SHARE_IMM_FC_HARD_REQ;
    }
    return UCS_OK;
}

#define UCT_RC_SHARE_EP_CHECK_FC(_ep, _iface, _fc_flags) \
    { \
        (_fc_flags) = 0; \
        if (ucs_unlikely(*(_ep)->fc_wnd <= (_iface)->config.fc_soft_thresh)) { \
            ucs_status_t _status = uct_rc_share_ep_fc_request(_ep, \
                                                              &(_fc_flags)); \
            if (_status != UCS_OK) { \
                return _status; \
            } \
        } \
    }

/* Descriptors held by unsignaled WRs come back when a NOP reports them;
 * until one is back, pending requests wait */
#define UCT_RC_SHARE_GET_TX_DESC(_iface, _desc) \
    { \
        (_desc) = ucs_mpool_get_inline(&(_iface)->tx_mp); \
        if (ucs_unlikely((_desc) == NULL)) { \
            (_iface)->tx.desc_starved = 1; \
            uct_rc_share_iface_tx_unstick(_iface); \
            return UCS_ERR_NO_RESOURCE; \
        } \
    }

static UCS_F_ALWAYS_INLINE void
uct_rc_share_tx_desc_setup(uct_rc_share_tx_desc_t *desc,
                           uct_completion_t *comp,
                           uct_rc_share_tx_handler_t handler)
{
    desc->comp    = comp;
    desc->handler = handler;
}

/* The ops entry of a user completion, or 0 for none */
static UCS_F_ALWAYS_INLINE uintptr_t
uct_rc_share_tx_op_comp(uct_completion_t *comp)
{
    return (comp != NULL) ? ((uintptr_t)comp | UCT_RC_SHARE_TX_OP_COMP) : 0;
}

static UCS_F_ALWAYS_INLINE ucs_async_context_t *
uct_rc_share_ep_async(const uct_rc_share_ep_t *ep)
{
    return uct_rc_share_ep_iface(ep)->super.worker->async;
}

/* Keeps an operation of a connecting endpoint in the backlog (or posts it,
 * when the async side posted the backlog already) */
static UCS_F_NOINLINE ucs_status_t
uct_rc_share_ep_backlog_add(uct_rc_share_ep_t *ep, struct ibv_send_wr *wr,
                            uintptr_t op)
{
    ucs_async_context_t *async = uct_rc_share_ep_async(ep);
    ucs_status_t status;

    UCS_ASYNC_BLOCK(async);
    status = uct_rc_share_txq_backlog_add(ep->txq,
                                          &uct_rc_share_ep_iface(ep)
                                                  ->backlog_mp,
                                          wr, op);
    UCS_ASYNC_UNBLOCK(async);
    return status;
}

/* Posts one WR of an operation, or keeps it while the endpoint connects */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_ep_post(uct_rc_share_ep_t *ep, struct ibv_send_wr *wr,
                     uintptr_t op, int signal)
{
    if (ucs_unlikely(ep->state != UCT_RC_SHARE_EP_CONNECTED)) {
        return uct_rc_share_ep_backlog_add(ep, wr, op);
    }

    return uct_rc_share_txq_post(ep->txq, wr, op, signal);
}

/* Posts one WR of an operation that takes nothing before it is posted
 * (short and zero-copy: no descriptor), or keeps it while the endpoint
 * connects. The WR is built before: the state is read once (after the
 * WR's stores it was read again, as they might alias it) */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_ep_issue(uct_rc_share_ep_t *ep, struct ibv_send_wr *wr,
                      uintptr_t op, int signal)
{
    ucs_status_t status;

    if (ucs_likely((ep->state == UCT_RC_SHARE_EP_CONNECTED) &&
                   uct_rc_share_txq_has_room(ep->txq))) {
        return uct_rc_share_txq_post(ep->txq, wr, op, signal);
    }

    status = uct_rc_share_ep_no_tx(ep);
    if (status != UCS_OK) {
        return status;
    }
    return uct_rc_share_ep_backlog_add(ep, wr, op);
}

/* Posting was refused for lack of CQ entries or descriptors, which the
 * tails of endpoints may hold with no completion to come: report them */
void uct_rc_share_iface_tx_unstick(uct_rc_share_iface_t *iface)
{
    uct_rc_share_ep_t *ep;

    if (ucs_likely(iface->tx.tailed == 0)) {
        return;
    }

    ucs_list_for_each(ep, &iface->ep_list, list) {
        if (ep->state == UCT_RC_SHARE_EP_CONNECTED) {
            (void)uct_rc_share_txq_report_tail(ep->txq);
        }
    }
}

static UCS_F_ALWAYS_INLINE void
uct_rc_share_wr_rdma(struct ibv_send_wr *wr, enum ibv_wr_opcode opcode,
                     struct ibv_sge *sge, int num_sge, size_t length,
                     uint64_t remote_addr, uct_rkey_t rkey)
{
    wr->opcode     = opcode;
    wr->send_flags = 0;
    wr->sg_list    = sge;
    wr->num_sge    = num_sge;
    uct_ibshare_rkey_resolve(rkey, remote_addr, length,
                             &wr->wr.rdma.remote_addr, &wr->wr.rdma.rkey);
}

static UCS_F_ALWAYS_INLINE void
uct_rc_share_wr_am(struct ibv_send_wr *wr, uint8_t id, uint32_t fc_flags,
                   struct ibv_sge *sge, int num_sge)
{
    wr->opcode     = IBV_WR_SEND_WITH_IMM;
    wr->send_flags = 0;
    wr->imm_data   = htonl(id | fc_flags);
    wr->sg_list    = sge;
    wr->num_sge    = num_sge;
}

/* Scatter list of a zero-copy request; returns the number of entries used */
static UCS_F_ALWAYS_INLINE int
uct_rc_share_iov_to_sge(struct ibv_sge *sge, const uct_iov_t *iov,
                        size_t iovcnt)
{
    int num_sge = 0;
    size_t i;

    for (i = 0; i < iovcnt; ++i) {
        if (iov[i].length == 0) {
            continue;
        }
        sge[num_sge].addr   = (uintptr_t)iov[i].buffer -
                              ((const uct_ibshare_mem_t*)iov[i].memh)->va_offset;
        sge[num_sge].length = uct_iov_get_length(&iov[i]);
        sge[num_sge].lkey   = ((const uct_ibshare_mem_t*)iov[i].memh)->lkey;
        ++num_sge;
    }
    return num_sge;
}

/* ------------------------------------------------------------ AM */

ucs_status_t uct_rc_share_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                      uint64_t header, const void *payload,
                                      unsigned length)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    struct ibv_send_wr wr;
    struct ibv_sge sge[2];
    ucs_status_t status;
    uint32_t fc_flags;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(sizeof(header) + length, 0, iface->config.max_inline,
                     "am_short");
    UCT_RC_SHARE_EP_CHECK_TX(ep);
    UCT_RC_SHARE_EP_CHECK_FC(ep, iface, fc_flags);

    sge[0].addr   = (uintptr_t)&header;
    sge[0].length = sizeof(header);
    sge[0].lkey   = 0;
    sge[1].addr   = (uintptr_t)payload;
    sge[1].length = length;
    sge[1].lkey   = 0;
    uct_rc_share_wr_am(&wr, id, fc_flags, sge, 2);
    wr.send_flags = IBV_SEND_INLINE;

    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, payload,
                       length, "TX: AM_SHORT");
    status = uct_rc_share_ep_post(ep, &wr, 0, 0);
    if (ucs_likely(status == UCS_OK)) {
        --*ep->fc_wnd;
        iface->counters.am_ops++;
        iface->counters.am_bytes += sizeof(header) + length;
    }
    return status;
}

ssize_t uct_rc_share_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                 uct_pack_callback_t pack_cb, void *arg,
                                 unsigned flags)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uct_rc_share_tx_desc_t *desc;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    uint32_t fc_flags;
    size_t length;

    UCT_CHECK_AM_ID(id);
    UCT_RC_SHARE_EP_CHECK_TX(ep);
    UCT_RC_SHARE_EP_CHECK_FC(ep, iface, fc_flags);
    UCT_RC_SHARE_GET_TX_DESC(iface, desc);

    length = pack_cb(desc->data, arg);
    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "am_bcopy");
    uct_rc_share_tx_desc_setup(desc, NULL, NULL);

    sge.length = length;
    sge.lkey   = desc->lkey;
    uct_rc_share_wr_am(&wr, id, fc_flags, &sge, 1);
    if (length <= iface->config.max_inline) {
        /* The provider copies inline data itself: our address, no IOVA */
        sge.addr      = (uintptr_t)desc->data;
        wr.send_flags = IBV_SEND_INLINE;
    } else {
        sge.addr      = uct_rc_share_buf_iova(iface, desc->data);
    }

    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, desc->data,
                       length, "TX: AM_BCOPY");
    status = uct_rc_share_ep_post(ep, &wr, (uintptr_t)desc, 0);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    --*ep->fc_wnd;
    iface->counters.am_ops++;
    iface->counters.am_bytes += length;
    return length;
}

ucs_status_t uct_rc_share_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                      const void *header,
                                      unsigned header_length,
                                      const uct_iov_t *iov, size_t iovcnt,
                                      unsigned flags, uct_completion_t *comp)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    struct ibv_sge sge[UCT_RC_SHARE_MAX_SEND_SGE];
    uct_rc_share_tx_desc_t *desc;
    struct ibv_send_wr wr;
    ucs_status_t status;
    uint32_t fc_flags;
    size_t length;
    int num_sge;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, UCT_RC_SHARE_MAX_SEND_SGE - 1, "am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, iface->config.max_am_hdr,
                     "am_zcopy header");
    length = header_length + uct_iov_total_length(iov, iovcnt);
    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "am_zcopy");
    UCT_RC_SHARE_EP_CHECK_TX(ep);
    UCT_RC_SHARE_EP_CHECK_FC(ep, iface, fc_flags);
    UCT_RC_SHARE_GET_TX_DESC(iface, desc);

    /* The header travels from the descriptor, the payload from user memory */
    memcpy(desc->data, header, header_length);
    uct_rc_share_tx_desc_setup(desc, comp, NULL);
    sge[0].addr   = uct_rc_share_buf_iova(iface, desc->data);
    sge[0].length = header_length;
    sge[0].lkey   = desc->lkey;
    num_sge       = 1 + uct_rc_share_iov_to_sge(&sge[1], iov, iovcnt);
    uct_rc_share_wr_am(&wr, id, fc_flags, sge, num_sge);

    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, header,
                       header_length, "TX: AM_ZCOPY");
    status = uct_rc_share_ep_post(ep, &wr, (uintptr_t)desc,
                                  comp != NULL);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    --*ep->fc_wnd;
    iface->counters.am_ops++;
    iface->counters.am_bytes += length;
    return UCS_INPROGRESS;
}

/* ------------------------------------------------------------ RMA */

ucs_status_t uct_rc_share_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                       unsigned length, uint64_t remote_addr,
                                       uct_rkey_t rkey)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    struct ibv_send_wr *wr      = &iface->put_inl_wr;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->config.max_inline, "put_short");

    iface->put_inl_sge.addr   = (uintptr_t)buffer;
    iface->put_inl_sge.length = length;
    wr->send_flags            = IBV_SEND_INLINE;
    uct_ibshare_rkey_resolve(rkey, remote_addr, length,
                             &wr->wr.rdma.remote_addr, &wr->wr.rdma.rkey);

    status = uct_rc_share_ep_issue(ep, wr, 0, UCT_RC_SHARE_RMA_SIGNAL);
    if (ucs_likely(status == UCS_OK)) {
        iface->counters.put_ops++;
        iface->counters.put_bytes += length;
    }
    return status;
}

ssize_t uct_rc_share_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                  void *arg, uint64_t remote_addr,
                                  uct_rkey_t rkey)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uct_rc_share_tx_desc_t *desc;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    size_t length;

    UCT_RC_SHARE_EP_CHECK_TX(ep);
    UCT_RC_SHARE_GET_TX_DESC(iface, desc);

    length = pack_cb(desc->data, arg);
    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "put_bcopy");
    uct_rc_share_tx_desc_setup(desc, NULL, NULL);

    sge.addr   = uct_rc_share_buf_iova(iface, desc->data);
    sge.length = length;
    sge.lkey   = desc->lkey;
    uct_rc_share_wr_rdma(&wr, IBV_WR_RDMA_WRITE, &sge, 1, length, remote_addr,
                         rkey);

    status = uct_rc_share_ep_post(ep, &wr, (uintptr_t)desc,
                                  UCT_RC_SHARE_RMA_SIGNAL);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    iface->counters.put_ops++;
    iface->counters.put_bytes += length;
    return length;
}

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_ep_rdma_zcopy(uct_rc_share_ep_t *ep, enum ibv_wr_opcode opcode,
                           const uct_iov_t *iov, size_t iovcnt,
                           uint64_t remote_addr, uct_rkey_t rkey,
                           uct_completion_t *comp, uint64_t *ops_counter,
                           uint64_t *bytes_counter)
{
    struct ibv_sge sge[UCT_RC_SHARE_MAX_SEND_SGE];
    size_t length = uct_iov_total_length(iov, iovcnt);
    struct ibv_send_wr wr;
    ucs_status_t status;

    UCT_CHECK_IOV_SIZE(iovcnt, UCT_RC_SHARE_MAX_SEND_SGE, "rdma_zcopy");

    /* No descriptor: the user's completion waits in the ops ring */
    uct_rc_share_wr_rdma(&wr, opcode, sge,
                         uct_rc_share_iov_to_sge(sge, iov, iovcnt), length,
                         remote_addr, rkey);

    status = uct_rc_share_ep_issue(ep, &wr, uct_rc_share_tx_op_comp(comp),
                                   UCT_RC_SHARE_RMA_SIGNAL);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    ++*ops_counter;
    *bytes_counter += length;
    return UCS_INPROGRESS;
}

ucs_status_t uct_rc_share_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    return uct_rc_share_ep_rdma_zcopy(ep, IBV_WR_RDMA_WRITE, iov, iovcnt,
                                      remote_addr, rkey, comp,
                                      &iface->counters.put_ops,
                                      &iface->counters.put_bytes);
}

static void uct_rc_share_get_bcopy_handler(uct_rc_share_tx_desc_t *desc)
{
    desc->get.cb(desc->get.arg, desc->data, desc->get.length);
}

ucs_status_t uct_rc_share_ep_get_bcopy(uct_ep_h tl_ep,
                                       uct_unpack_callback_t unpack_cb,
                                       void *arg, size_t length,
                                       uint64_t remote_addr, uct_rkey_t rkey,
                                       uct_completion_t *comp)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uct_rc_share_tx_desc_t *desc;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->config.seg_size, "get_bcopy");
    UCT_RC_SHARE_EP_CHECK_TX(ep);
    UCT_RC_SHARE_GET_TX_DESC(iface, desc);

    uct_rc_share_tx_desc_setup(desc, comp, uct_rc_share_get_bcopy_handler);
    desc->get.cb     = unpack_cb;
    desc->get.arg    = arg;
    desc->get.length = length;

    sge.addr   = uct_rc_share_buf_iova(iface, desc->data);
    sge.length = length;
    sge.lkey   = desc->lkey;
    uct_rc_share_wr_rdma(&wr, IBV_WR_RDMA_READ, &sge, 1, length, remote_addr,
                         rkey);

    status = uct_rc_share_ep_post(ep, &wr, (uintptr_t)desc, 1);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    iface->counters.get_ops++;
    iface->counters.get_bytes += length;
    return UCS_INPROGRESS;
}

ucs_status_t uct_rc_share_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    return uct_rc_share_ep_rdma_zcopy(ep, IBV_WR_RDMA_READ, iov, iovcnt,
                                      remote_addr, rkey, comp,
                                      &iface->counters.get_ops,
                                      &iface->counters.get_bytes);
}

/* ------------------------------------------------------------ atomics */

static void uct_rc_share_atomic_fetch_handler(uct_rc_share_tx_desc_t *desc)
{
    /* Plain verbs returns the old value in host order (rxe, and mlx5
     * without the big-endian reply mode that only mlx5 DV can select) */
    memcpy(desc->result, desc->data, sizeof(uint64_t));
}

static ucs_status_t
uct_rc_share_ep_atomic(uct_rc_share_ep_t *ep, enum ibv_wr_opcode opcode,
                       uint64_t compare_add, uint64_t swap,
                       uint64_t remote_addr, uct_rkey_t rkey, uint64_t *result,
                       uct_completion_t *comp)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uct_rc_share_tx_desc_t *desc;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;

    UCT_RC_SHARE_EP_CHECK_TX(ep);
    UCT_RC_SHARE_GET_TX_DESC(iface, desc);

    uct_rc_share_tx_desc_setup(desc, comp,
                               (result != NULL) ?
                               uct_rc_share_atomic_fetch_handler : NULL);
    desc->result = result;

    /* The old value always lands somewhere: in the descriptor */
    sge.addr                  = uct_rc_share_buf_iova(iface, desc->data);
    sge.length                = sizeof(uint64_t);
    sge.lkey                  = desc->lkey;
    wr.opcode                 = opcode;
    wr.send_flags             = 0;
    wr.sg_list                = &sge;
    wr.num_sge                = 1;
    wr.wr.atomic.compare_add  = compare_add;
    wr.wr.atomic.swap         = swap;
    uct_ibshare_rkey_resolve(rkey, remote_addr, sizeof(uint64_t),
                             &wr.wr.atomic.remote_addr, &wr.wr.atomic.rkey);

    status = uct_rc_share_ep_post(ep, &wr, (uintptr_t)desc,
                                  UCT_RC_SHARE_RMA_SIGNAL);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    iface->counters.atomic_ops++;
    return (result != NULL) ? UCS_INPROGRESS : UCS_OK;
}

ucs_status_t uct_rc_share_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode,
                                           uint64_t value,
                                           uint64_t remote_addr,
                                           uct_rkey_t rkey)
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }

    return uct_rc_share_ep_atomic(ucs_derived_of(tl_ep, uct_rc_share_ep_t),
                                  IBV_WR_ATOMIC_FETCH_AND_ADD, value, 0,
                                  remote_addr, rkey, NULL, NULL);
}

ucs_status_t uct_rc_share_ep_atomic64_fetch(uct_ep_h tl_ep,
                                            uct_atomic_op_t opcode,
                                            uint64_t value, uint64_t *result,
                                            uint64_t remote_addr,
                                            uct_rkey_t rkey,
                                            uct_completion_t *comp)
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }

    return uct_rc_share_ep_atomic(ucs_derived_of(tl_ep, uct_rc_share_ep_t),
                                  IBV_WR_ATOMIC_FETCH_AND_ADD, value, 0,
                                  remote_addr, rkey, result, comp);
}

ucs_status_t uct_rc_share_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                            uint64_t swap,
                                            uint64_t remote_addr,
                                            uct_rkey_t rkey, uint64_t *result,
                                            uct_completion_t *comp)
{
    return uct_rc_share_ep_atomic(ucs_derived_of(tl_ep, uct_rc_share_ep_t),
                                  IBV_WR_ATOMIC_CMP_AND_SWP, compare, swap,
                                  remote_addr, rkey, result, comp);
}

/* ------------------------------------------------------------ flush */

ucs_status_t uct_rc_share_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_rc_share_ep_t *ep = ucs_derived_of(tl_ep, uct_rc_share_ep_t);

    if (ucs_likely(ep->state == UCT_RC_SHARE_EP_CONNECTED)) {
        ep->txq->fence = 1;
    } else {
        UCS_ASYNC_BLOCK(uct_rc_share_ep_async(ep));
        ep->txq->fence = 1;
        UCS_ASYNC_UNBLOCK(uct_rc_share_ep_async(ep));
    }
    return UCS_OK;
}

/* Completes the flush requests whose operations are all done. A cancelled
 * endpoint's flushes succeed; a failed one's report the failure. */
static void uct_rc_share_ep_flush_progress(uct_rc_share_ep_t *ep)
{
    ucs_status_t status = ((ep->state == UCT_RC_SHARE_EP_FAILED) &&
                           (ep->fail_status != UCS_ERR_CANCELED)) ?
                          UCS_ERR_ENDPOINT_TIMEOUT : UCS_OK;

    uct_rc_share_txq_flush_progress(ep->txq, status,
                                    ep->state == UCT_RC_SHARE_EP_CONNECTING);
}

int uct_rc_share_ep_tx_idle(uct_rc_share_ep_t *ep)
{
    if (ep->state == UCT_RC_SHARE_EP_CONNECTING) {
        return 0; /* the handshake, and the backlog behind it */
    }

    if (ep->txq->posted == ep->txq->completed) {
        return 1;
    }

    if (ep->state == UCT_RC_SHARE_EP_CONNECTED) {
        /* A completion will report the last WR */
        (void)uct_rc_share_txq_report_tail(ep->txq);
    }
    return 0;
}

ucs_status_t uct_rc_share_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp)
{
    uct_rc_share_ep_t *ep = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    ucs_status_t status;

    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        uct_rc_share_ep_cancel(ep);
    } else if (!ucs_arbiter_group_is_empty(&ep->arb_group) &&
               (uct_rc_share_ep_iface(ep)->pending_cb_group !=
                &ep->arb_group)) {
        /* Requests wait in the pending queue: the flush waits behind them
         * (UCP adds it there), else it would complete before they are
         * even posted (UCP's get with UCX_PROTO_ENABLE=y and ep flush saw
         * its data before the reads had run). Called from the callback of
         * the group's head, that is the flush itself, queued there, with
         * every request before it done: refused, it never left the queue */
        return UCS_ERR_NO_RESOURCE;
    }

    if (uct_rc_share_ep_tx_idle(ep)) {
        return UCS_OK;
    }

    if (comp == NULL) {
        return UCS_INPROGRESS;
    }
    if (ucs_likely(ep->state == UCT_RC_SHARE_EP_CONNECTED)) {
        return uct_rc_share_txq_flush_add(ep->txq, comp) ?: UCS_INPROGRESS;
    }

    /* The async side may be posting the backlog that the flush counts */
    UCS_ASYNC_BLOCK(uct_rc_share_ep_async(ep));
    status = uct_rc_share_txq_flush_add(ep->txq, comp) ?: UCS_INPROGRESS;
    UCS_ASYNC_UNBLOCK(uct_rc_share_ep_async(ep));
    return status;
}

/*
 * Two checks; the first to fail fails the endpoint, once. The process: a
 * message to the peer iface's handshake QP, which its async context
 * answers (rc_share_conn.c); only that finds a peer killed in the node
 * group's shared mode, whose QPs outlive it and go on acknowledging RDMA.
 * The path: a zero-byte RDMA write on the connection's QP, kept because it
 * fails within the RC retry timeout (TIMEOUT x RETRY_COUNT, often sooner
 * than CHECK_TIMEOUT) where the peer's QP died with it (fallback mode, an
 * iface closed in the same process), and when the route broke, which the
 * UD check does not see; it also reports the queue's unsignaled tail.
 */
ucs_status_t uct_rc_share_ep_check(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp)
{
    uct_rc_share_ep_t *ep = ucs_derived_of(tl_ep, uct_rc_share_ep_t);

    UCT_IBSHARE_EP_KEEPALIVE_CHECK_PARAM(flags, comp);

    if (ep->state != UCT_RC_SHARE_EP_CONNECTED) {
        return UCS_OK; /* connecting (the handshake has its deadline), or
                          failed (already reported) */
    }

    uct_rc_share_conn_check(ep->conn);

    if (ep->txq->unsignaled != 0) {
        /* Unsignaled WRs may be done already: the NOP after them asks */
        return uct_rc_share_txq_report_tail(ep->txq);
    }

    if ((ep->txq->posted != ep->txq->completed) ||
        (uct_rc_share_ep_check_tx(ep) != UCS_OK)) {
        /* A signaled WR in flight tells the same; or no room now */
        return UCS_OK;
    }

    return uct_rc_share_txq_post_nop(ep->txq);
}

/* ------------------------------------------------------------ pending */

ucs_status_t uct_rc_share_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                         unsigned flags)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    /* Busy only with nothing queued before it: a flush refused because
     * requests are pending (uct_rc_share_ep_flush) queues behind them */
    if ((uct_rc_share_ep_check_tx(ep) == UCS_OK) &&
        !iface->tx.desc_starved && (*ep->fc_wnd > 0) &&
        ucs_arbiter_group_is_empty(&ep->arb_group)) {
        return UCS_ERR_BUSY;
    }

    uct_pending_req_arb_group_push(&ep->arb_group, req);
    ep->txq->owner_waits = 1; /* until the group is empty */
    if (ep->state == UCT_RC_SHARE_EP_CONNECTED) {
        ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    }
    return UCS_OK;
}

ucs_arbiter_cb_result_t
uct_rc_share_ep_process_pending(ucs_arbiter_t *arbiter,
                                ucs_arbiter_group_t *group,
                                ucs_arbiter_elem_t *elem, void *arg)
{
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    uct_rc_share_ep_t *ep  = ucs_container_of(group, uct_rc_share_ep_t,
                                              arb_group);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    ucs_arbiter_group_t *prev_group;
    ucs_status_t status;

    if (ep->state != UCT_RC_SHARE_EP_CONNECTED) {
        return UCS_ARBITER_CB_RESULT_DESCHED_GROUP;
    }
    if ((iface->tx.cq_available <= 0) || iface->tx.desc_starved) {
        return UCS_ARBITER_CB_RESULT_STOP; /* until a completion */
    }
    if ((ep->txq->sq_available <= 0) || (*ep->fc_wnd <= 0)) {
        return UCS_ARBITER_CB_RESULT_DESCHED_GROUP; /* a completion or a
                                                       grant reschedules */
    }

    ucs_trace_data("progressing pending request %p", req);
    /* In the iface, which outlives the callback (it may destroy the ep) */
    prev_group              = iface->pending_cb_group;
    iface->pending_cb_group = group;
    status                  = req->func(req);
    iface->pending_cb_group = prev_group;
    if (status == UCS_INPROGRESS) {
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP;
    } else if (status == UCS_OK) {
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    }
    return UCS_ARBITER_CB_RESULT_DESCHED_GROUP;
}

typedef struct {
    uct_pending_purge_callback_t cb;
    void                         *arg;
} uct_rc_share_purge_args_t;

static ucs_arbiter_cb_result_t
uct_rc_share_ep_purge_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                         ucs_arbiter_elem_t *elem, void *arg)
{
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    uct_rc_share_purge_args_t *args = arg;

    if (args->cb != NULL) {
        args->cb(req, args->arg);
    }
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

void uct_rc_share_ep_pending_purge(uct_ep_h tl_ep,
                                   uct_pending_purge_callback_t cb, void *arg)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uct_rc_share_purge_args_t args = {cb, arg};

    ucs_arbiter_group_purge(&iface->arbiter, &ep->arb_group,
                            uct_rc_share_ep_purge_cb, &args);
}

/* ------------------------------------------------------------ state */

/*
 * Fails the endpoint: the backlog completes with status, flushes report
 * the failure. Returns 1 if the endpoint was not failed before, and the
 * caller then reports the failure.
 */
static int uct_rc_share_ep_set_failed(uct_rc_share_ep_t *ep,
                                      ucs_status_t status)
{
    if (ep->state == UCT_RC_SHARE_EP_FAILED) {
        return 0;
    }

    ep->state       = UCT_RC_SHARE_EP_FAILED;
    ep->fail_status = status;
    UCS_ASYNC_BLOCK(uct_rc_share_ep_async(ep));
    uct_rc_share_txq_backlog_purge(ep->txq, status);
    UCS_ASYNC_UNBLOCK(uct_rc_share_ep_async(ep));
    uct_rc_share_ep_flush_progress(ep);
    return 1;
}

static void uct_rc_share_ep_report_failure(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    uct_iface_handle_ep_err(&iface->super.super, &ep->super.super,
                            ep->fail_status);
}

/*
 * The QP is connected: the backlog is posted (by the async side, as a rule,
 * when the handshake's answer came), and the endpoint is connected: new
 * operations are posted, pending requests dispatched.
 */
static void uct_rc_share_ep_conn_ready(void *owner)
{
    uct_rc_share_ep_t *ep       = owner;
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    ucs_status_t status;

    if (ep->state != UCT_RC_SHARE_EP_CONNECTING) {
        return;
    }

    UCS_ASYNC_BLOCK(uct_rc_share_ep_async(ep));
    status = uct_rc_share_txq_backlog_post(ep->txq);
    UCS_ASYNC_UNBLOCK(uct_rc_share_ep_async(ep));
    if (status != UCS_OK) {
        uct_rc_share_qp_set_error(ep->txq->qp);
        if (uct_rc_share_ep_set_failed(ep, status)) {
            uct_rc_share_ep_report_failure(ep);
        }
        return;
    }

    ep->state = UCT_RC_SHARE_EP_CONNECTED;
    if (!ucs_queue_is_empty(&ep->txq->flush_reqs)) {
        /* A flush issued while connecting waits for these WRs: a NOP
         * reports the unsignaled ones */
        (void)uct_rc_share_txq_report_tail(ep->txq);
    }
    uct_rc_share_ep_flush_progress(ep);
    ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    ucs_arbiter_dispatch(&iface->arbiter, 1, uct_rc_share_ep_process_pending,
                         NULL);
}

static void uct_rc_share_ep_conn_failed(void *owner, ucs_status_t status)
{
    uct_rc_share_ep_t *ep = owner;

    if (uct_rc_share_ep_set_failed(ep, status)) {
        uct_rc_share_ep_report_failure(ep);
    }
}

/* Credits came back, or send resources: a group descheduled for lack of
 * them may go on, and flushes may be done */
static void uct_rc_share_ep_conn_tx_resumed(void *owner)
{
    uct_rc_share_ep_t *ep = owner;

    if (ucs_arbiter_group_is_empty(&ep->arb_group)) {
        ep->txq->owner_waits = 0;
    } else if (ep->state == UCT_RC_SHARE_EP_CONNECTED) {
        ucs_arbiter_group_schedule(&uct_rc_share_ep_iface(ep)->arbiter,
                                   &ep->arb_group);
    }
    uct_rc_share_ep_flush_progress(ep);
}

static const uct_rc_share_conn_owner_ops_t uct_rc_share_ep_conn_ops = {
    .ready      = uct_rc_share_ep_conn_ready,
    .failed     = uct_rc_share_ep_conn_failed,
    .tx_resumed = uct_rc_share_ep_conn_tx_resumed
};

/*
 * flush(CANCEL): every operation of the endpoint completes with CANCELED
 * (the user's completions now: what is in flight on the connection, which
 * the peer may use too, completes to nobody), pending requests are dropped,
 * and the endpoint takes no more operations. That is no failure: nothing
 * is reported to the error handler.
 */
static void uct_rc_share_ep_cancel(uct_rc_share_ep_t *ep)
{
    if (ep->state == UCT_RC_SHARE_EP_CONNECTED) {
        (void)uct_rc_share_txq_report_tail(ep->txq);
    }
    (void)uct_rc_share_ep_set_failed(ep, UCS_ERR_CANCELED);
    UCS_ASYNC_BLOCK(uct_rc_share_ep_async(ep));
    uct_rc_share_txq_detach(ep->txq);
    UCS_ASYNC_UNBLOCK(uct_rc_share_ep_async(ep));
    uct_rc_share_ep_pending_purge(&ep->super.super, NULL, NULL);
}

/* ------------------------------------------------------------ life cycle */

static UCS_CLASS_INIT_FUNC(uct_rc_share_ep_t, const uct_ep_params_t *params)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(params->iface,
                                                 uct_rc_share_iface_t);
    ucs_status_t status;
    int connected;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    status = uct_rc_share_ep_params_check(params);
    if (status != UCS_OK) {
        return status;
    }

    if (iface->config.tx_qp_len >= UCS_BIT(15)) {
        ucs_error("rc_share: UCX_RC_SHARE_TX_QUEUE_LEN=%u is too long (at "
                  "most %lu)", iface->config.tx_qp_len, UCS_BIT(15) - 1);
        return UCS_ERR_INVALID_PARAM;
    }

    /* Classes are not zeroed: start every field of ours from zero */
    memset(UCS_PTR_BYTE_OFFSET(self, sizeof(self->super)), 0,
           sizeof(*self) - sizeof(self->super));
    ucs_arbiter_group_init(&self->arb_group);

    status = uct_rc_share_conn_open(
            iface, (const uct_rc_share_device_addr_t*)params->dev_addr,
            (const uct_rc_share_iface_addr_t*)params->iface_addr, self,
            &uct_rc_share_ep_conn_ops, &self->conn, &connected);
    if (status != UCS_OK) {
        return status;
    }

    self->txq    = uct_rc_share_conn_txq(self->conn);
    self->fc_wnd = uct_rc_share_conn_fc_wnd(self->conn);
    if (connected) {
        self->state = UCT_RC_SHARE_EP_CONNECTED;
    } else {
        self->state = UCT_RC_SHARE_EP_CONNECTING;
    }

    ucs_list_add_tail(&iface->ep_list, &self->list);
    ++iface->counters.eps;
    ucs_debug("rc_share ep %p: QP 0x%x, %s", self, self->txq->qp->qp_num,
              connected ? "connected (the peer's connection)" : "connecting");
    return UCS_OK;
}

/*
 * Every outstanding operation completes here, with CANCELED (the UCT
 * contract): the backlog, and the user's completions of the WRs in flight.
 * The connection lives on while the peer sends on it or its WRs are in
 * flight; nothing of them reaches the user.
 */
static UCS_CLASS_CLEANUP_FUNC(uct_rc_share_ep_t)
{
    uct_rc_share_ep_pending_purge(&self->super.super, NULL, NULL);
    ucs_arbiter_group_cleanup(&self->arb_group);
    uct_rc_share_conn_close(self->conn);
    ucs_list_del(&self->list);
}

UCS_CLASS_DEFINE(uct_rc_share_ep_t, uct_base_ep_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_rc_share_ep_t, uct_ep_t,
                                 const uct_ep_params_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_rc_share_ep_t, uct_ep_t);

ucs_status_t uct_rc_share_ep_create(const uct_ep_params_t *params,
                                    uct_ep_h *ep_p)
{
    return UCS_CLASS_NEW_FUNC_NAME(uct_rc_share_ep_t)(params, ep_p);
}

void uct_rc_share_ep_destroy(uct_ep_h tl_ep)
{
    UCS_CLASS_DELETE_FUNC_NAME(uct_rc_share_ep_t)(tl_ep);
}
