/**
 * rc_share endpoint: one function per UCT operation, on one RC QP.
 *
 * Work requests are numbered per endpoint (the sequence number is in the
 * wr_id, beside the endpoint). What a WR delivers when it is done, a
 * descriptor or the user's completion, waits in the endpoint's tx_ops ring
 * under its sequence number; an operation that delivers nothing (a short or
 * zero-copy request without completion) takes no descriptor.
 *
 * Signaling is selective, as in UCX's rc_verbs: a WR whose completion the
 * user waits for (a uct_completion_t, fetched data) is signaled, others only
 * every tx_moderation WRs, or when CQ entries run short. A completion stands
 * for its WR and every unsignaled WR before it: they return their send-queue
 * slots and CQ entries, and what they deliver is delivered, then. In error,
 * every WR completes, signaled or not (so each WR in flight holds a CQ
 * entry), the failed one with its error and those before it successfully.
 *
 * Unsignaled WRs after an endpoint's last signaled one (its tail) would
 * report nothing by themselves: flush, ep_check, destroy, and running out of
 * CQ entries or descriptors post a signaled zero-length RDMA write (a NOP)
 * after them. So that the NOP can always be posted, an endpoint with a tail
 * holds one more CQ entry, and one send-queue slot is kept for it.
 */
#include "rc_share.h"
#include "rc_share_conn.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/time/time.h>
#include <ucs/type/class.h>

#include <arpa/inet.h>
#include <string.h>


/* A tx_ops entry that is a user completion (a descriptor has bit 0 clear) */
#define UCT_RC_SHARE_TX_OP_COMP 1ul


typedef struct uct_rc_share_flush_req {
    ucs_queue_elem_t          queue;
    uct_completion_t          *comp;
    uint64_t                  sn;          /* done when tx_completed reaches it */
} uct_rc_share_flush_req_t;


static UCS_F_ALWAYS_INLINE uct_rc_share_iface_t *
uct_rc_share_ep_iface(const uct_rc_share_ep_t *ep)
{
    return ucs_derived_of(ep->super.super.iface, uct_rc_share_iface_t);
}

static void uct_rc_share_iface_tx_unstick(uct_rc_share_iface_t *iface);
static void uct_rc_share_ep_cancel(uct_rc_share_ep_t *ep);

/* Whether a new operation may be issued now, when the fast check says no:
 * a connecting endpoint takes it into its backlog while there is room (each
 * backlog entry gets a send-queue slot of its own when posted) */
static UCS_F_NOINLINE ucs_status_t
uct_rc_share_ep_no_tx(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    switch (ep->state) {
    case UCT_RC_SHARE_EP_CONNECTING:
        return (ep->backlog_len < (unsigned)ep->sq_available) ?
               UCS_OK : UCS_ERR_NO_RESOURCE;
    case UCT_RC_SHARE_EP_FAILED:
        return (ep->fail_status == UCS_ERR_CANCELED) ?
               UCS_ERR_CANCELED : UCS_ERR_ENDPOINT_TIMEOUT;
    default:
        if (iface->tx_cq_available <= 0) {
            uct_rc_share_iface_tx_unstick(iface);
        }
        return UCS_ERR_NO_RESOURCE;
    }
}

/* Whether a new operation may be posted now */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_ep_check_tx(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    if (ucs_likely((ep->state == UCT_RC_SHARE_EP_CONNECTED) &&
                   (ep->sq_available > 0) && (iface->tx_cq_available > 0))) {
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
        ep->fc_wnd = INT_MAX;
        return UCS_OK;
    }

    if (ep->fc_wnd <= 0) {
        return UCS_ERR_NO_RESOURCE; /* until the receiver grants */
    }

    if (ep->fc_wnd == iface->config.fc_soft_thresh) {
        *fc_flags_p = UCT_RC_SHARE_IMM_FC_SOFT_REQ;
    } else if (ep->fc_wnd == iface->config.fc_hard_thresh) {
        *fc_flags_p = UCT_RC_SHARE_IMM_FC_HARD_REQ;
    }
    return UCS_OK;
}

#define UCT_RC_SHARE_EP_CHECK_FC(_ep, _iface, _fc_flags) \
    { \
        (_fc_flags) = 0; \
        if (ucs_unlikely((_ep)->fc_wnd <= (_iface)->config.fc_soft_thresh)) { \
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
            (_iface)->tx_desc_starved = 1; \
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

/* The tx_ops entry of a user completion, or 0 for none */
static UCS_F_ALWAYS_INLINE uintptr_t
uct_rc_share_tx_op_comp(uct_completion_t *comp)
{
    return (comp != NULL) ? ((uintptr_t)comp | UCT_RC_SHARE_TX_OP_COMP) : 0;
}

/* Tail bookkeeping: an endpoint with unsignaled WRs after its last signaled
 * one holds one CQ entry more, for the NOP that may have to report them */
static UCS_F_ALWAYS_INLINE void
uct_rc_share_ep_tail_end(uct_rc_share_ep_t *ep, uct_rc_share_iface_t *iface)
{
    if (ep->tx_unsignaled != 0) {
        ep->tx_unsignaled = 0;
        --iface->tx_tailed;
        ++iface->tx_cq_available;
    }
}

/*
 * Posts one WR. op: what its completion delivers (a descriptor or a tagged
 * user completion), 0 for nothing. signal: the caller waits for it; other
 * WRs are signaled every tx_moderation WRs, and while CQ entries are few (so
 * that they come back). The caller has checked the resources; a NOP (which
 * reports a tail) needs none but its reserved slot and CQ entry.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_ep_post_wr(uct_rc_share_ep_t *ep, struct ibv_send_wr *wr,
                        uintptr_t op, int signal)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uint64_t sn                 = ep->tx_posted + 1;
    struct ibv_send_wr *bad_wr;
    int ret;

    signal = signal ||
             (ep->tx_unsignaled >= iface->config.tx_moderation) ||
             (iface->tx_cq_available <= (int)iface->config.tx_moderation);

    wr->wr_id       = uct_rc_share_wr_id(ep, sn);
    wr->next        = NULL;
    wr->send_flags |= (signal ? IBV_SEND_SIGNALED : 0) |
                      (ep->fence ? IBV_SEND_FENCE : 0);

    ret = ibv_post_send(ep->qp, wr, &bad_wr);
    if (ucs_unlikely(ret != 0)) {
        ucs_error("ibv_post_send(QP 0x%x) failed: %s", ep->qp->qp_num,
                  strerror(ret));
        if ((op != 0) && !(op & UCT_RC_SHARE_TX_OP_COMP)) {
            ucs_mpool_put_inline((void*)op);
        }
        return UCS_ERR_IO_ERROR;
    }

    ucs_assert(ep->tx_ops[sn & ep->tx_ops_mask] == 0);
    ep->tx_ops[sn & ep->tx_ops_mask] = op;
    ep->tx_posted                    = sn;
    ep->fence                        = 0;
    --ep->sq_available;
    --iface->tx_cq_available;
    if (signal) {
        uct_rc_share_ep_tail_end(ep, iface);
    } else if (ep->tx_unsignaled++ == 0) {
        ++iface->tx_tailed;
        --iface->tx_cq_available;
    }
    return UCS_OK;
}

/* What a tx_ops entry holds goes back, delivering nothing */
static void uct_rc_share_tx_op_release(uintptr_t op)
{
    if ((op != 0) && !(op & UCT_RC_SHARE_TX_OP_COMP)) {
        ucs_mpool_put_inline((void*)op);
    }
}

/* The user's completion of a tx_ops entry, if any, which no longer has it */
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

/* An operation of a connecting endpoint waits in its backlog, in order */
static UCS_F_NOINLINE ucs_status_t
uct_rc_share_ep_backlog_add(uct_rc_share_ep_t *ep,
                            const struct ibv_send_wr *wr, uintptr_t op,
                            int signal)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uct_rc_share_backlog_op_t *bop;
    size_t length = 0;
    int i;

    bop = ucs_mpool_get(&iface->backlog_mp);
    if (bop == NULL) {
        uct_rc_share_tx_op_release(op);
        return UCS_ERR_NO_MEMORY;
    }

    bop->wr         = *wr;
    bop->wr.next    = NULL;
    bop->wr.sg_list = bop->sge;
    bop->op         = op;
    bop->signal     = signal;
    if (ep->fence) {
        bop->wr.send_flags |= IBV_SEND_FENCE;
        ep->fence           = 0;
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

    ucs_queue_push(&ep->backlog, &bop->queue);
    ++ep->backlog_len;
    return UCS_OK;
}

/* Posts one WR of an operation, or keeps it while the endpoint connects */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_ep_post(uct_rc_share_ep_t *ep, struct ibv_send_wr *wr,
                     uintptr_t op, int signal)
{
    if (ucs_unlikely(ep->state != UCT_RC_SHARE_EP_CONNECTED)) {
        return uct_rc_share_ep_backlog_add(ep, wr, op, signal);
    }

    return uct_rc_share_ep_post_wr(ep, wr, op, signal);
}

/* Drops the backlog: every operation in it completes with status */
static void uct_rc_share_ep_backlog_purge(uct_rc_share_ep_t *ep,
                                          ucs_status_t status)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uct_rc_share_backlog_op_t *bop;
    uct_completion_t *comp;

    while (!ucs_queue_is_empty(&ep->backlog)) {
        bop = ucs_queue_pull_elem_non_empty(&ep->backlog,
                                            uct_rc_share_backlog_op_t, queue);
        --ep->backlog_len;
        comp = uct_rc_share_tx_op_take_comp(bop->op);
        uct_rc_share_tx_op_release(bop->op);
        ucs_mpool_put(bop);
        if (comp != NULL) {
            uct_invoke_completion(comp, status);
        }
        iface->tx_desc_starved = 0;
    }
}

/* A signaled zero-length RDMA write: its completion reports every WR before
 * it. Needs no memory key on either side. */
static ucs_status_t uct_rc_share_ep_post_nop(uct_rc_share_ep_t *ep)
{
    struct ibv_send_wr wr;

    wr.opcode              = IBV_WR_RDMA_WRITE;
    wr.send_flags          = 0;
    wr.sg_list             = NULL;
    wr.num_sge             = 0;
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey        = 0;
    return uct_rc_share_ep_post_wr(ep, &wr, 0, 1);
}

/* The endpoint's tail, if any, gets the NOP that reports it (the slot and
 * the CQ entry it needs are kept for it) */
static ucs_status_t uct_rc_share_ep_report_tail(uct_rc_share_ep_t *ep)
{
    if ((ep->tx_unsignaled == 0) || (ep->state != UCT_RC_SHARE_EP_CONNECTED)) {
        return UCS_OK; /* none, or a failed QP, which completes every WR */
    }

    ucs_assert(ep->sq_available >= 0);
    return uct_rc_share_ep_post_nop(ep);
}

/* Posting was refused for lack of CQ entries or descriptors, which the
 * tails of endpoints may hold with no completion to come: report them */
static void uct_rc_share_iface_tx_unstick(uct_rc_share_iface_t *iface)
{
    uct_rc_share_ep_t *ep;

    if (ucs_likely(iface->tx_tailed == 0)) {
        return;
    }

    ucs_list_for_each(ep, &iface->ep_list, list) {
        (void)uct_rc_share_ep_report_tail(ep);
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
        --ep->fc_wnd;
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

    --ep->fc_wnd;
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

    --ep->fc_wnd;
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
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->config.max_inline, "put_short");
    UCT_RC_SHARE_EP_CHECK_TX(ep);

    sge.addr   = (uintptr_t)buffer;
    sge.length = length;
    sge.lkey   = 0;
    uct_rc_share_wr_rdma(&wr, IBV_WR_RDMA_WRITE, &sge, 1, length, remote_addr,
                         rkey);
    wr.send_flags = IBV_SEND_INLINE;

    status = uct_rc_share_ep_post(ep, &wr, 0, 0);
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

    status = uct_rc_share_ep_post(ep, &wr, (uintptr_t)desc, 0);
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
    UCT_RC_SHARE_EP_CHECK_TX(ep);

    /* No descriptor: the user's completion waits in tx_ops */
    uct_rc_share_wr_rdma(&wr, opcode, sge,
                         uct_rc_share_iov_to_sge(sge, iov, iovcnt), length,
                         remote_addr, rkey);

    status = uct_rc_share_ep_post(ep, &wr, uct_rc_share_tx_op_comp(comp),
                                  comp != NULL);
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
                                  (result != NULL) || (comp != NULL));
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
    ucs_derived_of(tl_ep, uct_rc_share_ep_t)->fence = 1;
    return UCS_OK;
}

/* Moves the QP to the error state: outstanding requests complete flushed */
static void uct_rc_share_ep_qp_error(uct_rc_share_ep_t *ep)
{
    struct ibv_qp_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_ERR;
    (void)ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
}

/* Whether the endpoint has no WR in flight; if it has, makes sure that a
 * completion will report the last one */
int uct_rc_share_ep_tx_idle(uct_rc_share_ep_t *ep)
{
    if (ep->state == UCT_RC_SHARE_EP_CONNECTING) {
        return 0; /* the handshake, and the backlog behind it */
    }

    if (ep->tx_posted == ep->tx_completed) {
        return 1;
    }

    (void)uct_rc_share_ep_report_tail(ep);
    return 0;
}

ucs_status_t uct_rc_share_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp)
{
    uct_rc_share_ep_t *ep = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_flush_req_t *req;

    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        uct_rc_share_ep_cancel(ep);
    }

    if (uct_rc_share_ep_tx_idle(ep)) {
        return UCS_OK;
    }

    if (comp != NULL) {
        req = ucs_malloc(sizeof(*req), "rc_share flush");
        if (req == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        req->comp = comp;
        /* The last operation issued: posted, or last in the backlog */
        req->sn   = ep->tx_posted + ep->backlog_len;
        ucs_queue_push(&ep->flush_reqs, &req->queue);
    }
    return UCS_INPROGRESS;
}

/*
 * Completes the flush requests whose operations are all done. One beyond
 * the last WR posted waited for backlog operations: once the backlog is
 * gone (posted or dropped) and nothing is in flight, it is done too. A
 * cancelled endpoint's flushes succeed; a failed one's report the failure.
 */
static void uct_rc_share_ep_flush_reqs_progress(uct_rc_share_ep_t *ep)
{
    int backlog_gone = (ep->state != UCT_RC_SHARE_EP_CONNECTING) &&
                       (ep->tx_completed == ep->tx_posted);
    ucs_status_t status;
    uct_rc_share_flush_req_t *req;

    status = ((ep->state == UCT_RC_SHARE_EP_FAILED) &&
              (ep->fail_status != UCS_ERR_CANCELED)) ?
             UCS_ERR_ENDPOINT_TIMEOUT : UCS_OK;
    while (!ucs_queue_is_empty(&ep->flush_reqs)) {
        req = ucs_queue_head_elem_non_empty(&ep->flush_reqs,
                                            uct_rc_share_flush_req_t, queue);
        if ((req->sn > ep->tx_completed) && !backlog_gone) {
            break;
        }
        ucs_queue_pull_non_empty(&ep->flush_reqs);
        uct_invoke_completion(req->comp, status);
        ucs_free(req);
    }
}

/* Delivers what a WR done leaves: fetched data, the user's completion, the
 * descriptor back to its pool */
static UCS_F_ALWAYS_INLINE void
uct_rc_share_ep_tx_op_done(uct_rc_share_ep_t *ep, uct_rc_share_iface_t *iface,
                           uintptr_t op, ucs_status_t status)
{
    uct_rc_share_tx_desc_t *desc;

    if (op & UCT_RC_SHARE_TX_OP_COMP) {
        if (ucs_likely(ep->state != UCT_RC_SHARE_EP_ZOMBIE)) {
            uct_invoke_completion((uct_completion_t*)
                                  (op & ~UCT_RC_SHARE_TX_OP_COMP), status);
        }
        return;
    }

    desc = (uct_rc_share_tx_desc_t*)op;
    if (ucs_likely(ep->state != UCT_RC_SHARE_EP_ZOMBIE)) {
        /* A zombie's user is gone: nothing to deliver */
        if ((status == UCS_OK) && (desc->handler != NULL)) {
            desc->handler(desc);
        }
        if (desc->comp != NULL) {
            uct_invoke_completion(desc->comp, status);
        }
    }
    ucs_mpool_put_inline(desc);
    iface->tx_desc_starved = 0;
}

/* Releases what the WRs in flight hold, delivering nothing */
static void uct_rc_share_ep_tx_ops_drop(uct_rc_share_ep_t *ep)
{
    uintptr_t *entry;
    uint64_t sn;

    for (sn = ep->tx_completed + 1; sn <= ep->tx_posted; ++sn) {
        entry = &ep->tx_ops[sn & ep->tx_ops_mask];
        uct_rc_share_tx_op_release(*entry);
        *entry = 0;
    }
}

/* The user's completions of the WRs in flight are called now, with
 * CANCELED; what the WRs hold stays until the flushed QP reports them */
static void uct_rc_share_ep_tx_ops_cancel(uct_rc_share_ep_t *ep)
{
    uct_completion_t *comp;
    uintptr_t *entry;
    uint64_t sn;

    for (sn = ep->tx_completed + 1; sn <= ep->tx_posted; ++sn) {
        entry = &ep->tx_ops[sn & ep->tx_ops_mask];
        comp  = uct_rc_share_tx_op_take_comp(*entry);
        if (*entry & UCT_RC_SHARE_TX_OP_COMP) {
            *entry = 0;
        }
        if (comp != NULL) {
            uct_invoke_completion(comp, UCS_ERR_CANCELED);
        }
    }
}

/*
 * A send completion of the endpoint, of the WR numbered sn (its low 16
 * bits): it and the unsignaled WRs before it are done. In error, the WRs
 * before it succeeded (a QP completes in order, and stops at the first
 * error); the WR itself takes the status.
 */
void uct_rc_share_ep_tx_complete(uct_rc_share_ep_t *ep, uint16_t sn,
                                 ucs_status_t status)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    unsigned count = (uint16_t)(sn - (uint16_t)ep->tx_completed);
    uint64_t first = ep->tx_completed + 1;
    uint64_t last  = ep->tx_completed + count;
    uintptr_t *entry;
    uintptr_t op;
    uint64_t i;

    ucs_assertv((count >= 1) && (last <= ep->tx_posted),
                "ep %p: completion of sn %u, completed %" PRIu64 " posted %"
                PRIu64, ep, sn, ep->tx_completed, ep->tx_posted);

    /* Callbacks may post, but not past these entries: their slots and CQ
     * entries come back only after the loop */
    for (i = first; i <= last; ++i) {
        entry = &ep->tx_ops[i & ep->tx_ops_mask];
        op    = *entry;
        if (op != 0) {
            *entry = 0;
            uct_rc_share_ep_tx_op_done(ep, iface, op,
                                       (i == last) ? status : UCS_OK);
        }
    }

    ep->sq_available        += count;
    ep->tx_completed         = last;
    iface->tx_cq_available  += count;
    if (ep->tx_completed == ep->tx_posted) {
        /* The tail, if any, went in error completions: no NOP needed */
        uct_rc_share_ep_tail_end(ep, iface);
    }

    if (ucs_unlikely(ep->state == UCT_RC_SHARE_EP_ZOMBIE)) {
        if (ep->tx_completed == ep->tx_posted) {
            uct_rc_share_ep_zombie_release(ep);
        }
        return;
    }

    /* Credits came back: a group descheduled for lack of them may go on */
    ucs_arbiter_group_schedule(&uct_rc_share_ep_iface(ep)->arbiter,
                               &ep->arb_group);
    uct_rc_share_ep_flush_reqs_progress(ep);
}

/*
 * Two checks; the first to fail fails the endpoint, once. The process: a
 * message to the target iface's handshake QP, which its async context
 * answers (rc_share_conn.c); only that finds a peer killed in the node
 * group's shared mode, whose QPs outlive it and go on acknowledging RDMA.
 * The path: a zero-byte RDMA write on the endpoint's QP, kept because it
 * fails within the RC retry timeout (TIMEOUT x RETRY_COUNT, often sooner
 * than CHECK_TIMEOUT) where the peer's QP died with it (fallback mode, an
 * iface closed in the same process), and when the route or the passive QP
 * broke, which the UD check does not see; it also reports the endpoint's
 * unsignaled tail.
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

    uct_rc_share_conn_check_start(ep);

    if (ep->tx_unsignaled != 0) {
        /* Unsignaled WRs may be done already: the NOP after them asks */
        return uct_rc_share_ep_report_tail(ep);
    }

    if ((ep->tx_posted != ep->tx_completed) ||
        (uct_rc_share_ep_check_tx(ep) != UCS_OK)) {
        /* A signaled WR in flight tells the same; or no room now */
        return UCS_OK;
    }

    return uct_rc_share_ep_post_nop(ep);
}

/* ------------------------------------------------------------ pending */

ucs_status_t uct_rc_share_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                         unsigned flags)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    if ((uct_rc_share_ep_check_tx(ep) == UCS_OK) &&
        !iface->tx_desc_starved && (ep->fc_wnd > 0)) {
        return UCS_ERR_BUSY;
    }

    uct_pending_req_arb_group_push(&ep->arb_group, req);
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
    ucs_status_t status;

    if (ep->state != UCT_RC_SHARE_EP_CONNECTED) {
        return UCS_ARBITER_CB_RESULT_DESCHED_GROUP;
    }
    if ((iface->tx_cq_available <= 0) || iface->tx_desc_starved) {
        return UCS_ARBITER_CB_RESULT_STOP; /* until a completion */
    }
    if ((ep->sq_available <= 0) || (ep->fc_wnd <= 0)) {
        return UCS_ARBITER_CB_RESULT_DESCHED_GROUP; /* a completion or a
                                                       grant reschedules */
    }

    ucs_trace_data("progressing pending request %p", req);
    status = req->func(req);
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
 * Posts the backlog of an endpoint whose QP is connected, in order; with
 * too few CQ entries it stops, and the next send completion goes on (the
 * endpoint is on iface->draining meanwhile). Then the endpoint is
 * connected: new operations are posted, pending requests dispatched.
 */
void uct_rc_share_ep_backlog_drain(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    uct_rc_share_backlog_op_t *bop;
    ucs_status_t status;

    while (!ucs_queue_is_empty(&ep->backlog)) {
        if (iface->tx_cq_available <= 0) {
            return;
        }

        bop = ucs_queue_pull_elem_non_empty(&ep->backlog,
                                            uct_rc_share_backlog_op_t, queue);
        --ep->backlog_len;
        status = uct_rc_share_ep_post_wr(ep, &bop->wr, bop->op, bop->signal);
        ucs_mpool_put(bop);
        if (status != UCS_OK) {
            ucs_list_del(&ep->conn_list);
            if (uct_rc_share_ep_set_failed(ep, status)) {
                uct_rc_share_ep_report_failure(ep);
            }
            return;
        }
    }

    ucs_list_del(&ep->conn_list);
    ep->state = UCT_RC_SHARE_EP_CONNECTED;
    if (!ucs_queue_is_empty(&ep->flush_reqs)) {
        /* A flush issued while connecting waits for these WRs: a NOP
         * reports the unsignaled ones */
        (void)uct_rc_share_ep_report_tail(ep);
    }
    uct_rc_share_ep_flush_reqs_progress(ep);
    ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    ucs_arbiter_dispatch(&iface->arbiter, 1, uct_rc_share_ep_process_pending,
                         NULL);
}

/* The receiver granted credits: a full window again */
void uct_rc_share_ep_fc_grant(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);
    int fc_wnd                  = ep->fc_wnd;

    ep->fc_wnd = iface->config.fc_wnd_size;
    if ((fc_wnd <= 0) && (ep->state == UCT_RC_SHARE_EP_CONNECTED)) {
        ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
        ucs_arbiter_dispatch(&iface->arbiter, 1,
                             uct_rc_share_ep_process_pending, NULL);
    }
}

/* The QP of a connecting endpoint is up (the main thread learns it from
 * the handshake): its backlog goes out */
void uct_rc_share_ep_qp_ready(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    ucs_list_add_tail(&iface->draining, &ep->conn_list);
    uct_rc_share_ep_backlog_drain(ep);
}

/*
 * Fails the endpoint: what is posted is flushed (its completions carry the
 * error), the backlog completes with status. The caller has taken a
 * connecting endpoint off its handshake list. Returns 1 if the endpoint
 * was not failed before, and the caller then reports the failure.
 */
int uct_rc_share_ep_set_failed(uct_rc_share_ep_t *ep, ucs_status_t status)
{
    if ((ep->state == UCT_RC_SHARE_EP_FAILED) ||
        (ep->state == UCT_RC_SHARE_EP_ZOMBIE)) {
        return 0;
    }

    /* A failed endpoint is checked no more: the failure is reported once */
    uct_rc_share_conn_check_stop(ep);
    uct_rc_share_ep_qp_error(ep);
    ep->state        = UCT_RC_SHARE_EP_FAILED;
    ep->fail_status  = status;
    uct_rc_share_ep_backlog_purge(ep, status);
    uct_rc_share_ep_flush_reqs_progress(ep);
    return 1;
}

/*
 * flush(CANCEL): every operation of the endpoint completes with CANCELED
 * (what is posted when the flushed QP reports it), pending requests are
 * dropped, and the endpoint takes no more operations. That is no failure:
 * nothing is reported to the error handler.
 */
static void uct_rc_share_ep_cancel(uct_rc_share_ep_t *ep)
{
    if (ep->state == UCT_RC_SHARE_EP_CONNECTED) {
        /* Before the QP fails: unsignaled WRs done already would complete
         * no more */
        (void)uct_rc_share_ep_report_tail(ep);
    } else if (ep->state == UCT_RC_SHARE_EP_CONNECTING) {
        uct_rc_share_conn_ep_stop(ep);
    }

    (void)uct_rc_share_ep_set_failed(ep, UCS_ERR_CANCELED);
    uct_rc_share_ep_pending_purge(&ep->super.super, NULL, NULL);
}

void uct_rc_share_ep_report_failure(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    uct_iface_handle_ep_err(&iface->super.super, &ep->super.super,
                            ep->fail_status);
}

/* ------------------------------------------------------------ life cycle */

static UCS_CLASS_INIT_FUNC(uct_rc_share_ep_t, const uct_ep_params_t *params)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(params->iface,
                                                 uct_rc_share_iface_t);
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    if (!(params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) ||
        !(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR)) {
        ucs_error("rc_share: an endpoint needs the remote device and iface "
                  "addresses");
        return UCS_ERR_INVALID_PARAM;
    }

    /* wr_ids carry the endpoint in 48 bits and a 16-bit sequence number */
    if (((uintptr_t)self >> UCT_RC_SHARE_WR_ID_SN_SHIFT) != 0) {
        ucs_error("rc_share: endpoint address %p does not fit in %d bits",
                  self, UCT_RC_SHARE_WR_ID_SN_SHIFT);
        return UCS_ERR_UNSUPPORTED;
    }
    if (iface->config.tx_qp_len >= UCS_BIT(15)) {
        ucs_error("rc_share: UCX_RC_SHARE_TX_QUEUE_LEN=%u is too long (at "
                  "most %lu)", iface->config.tx_qp_len, UCS_BIT(15) - 1);
        return UCS_ERR_INVALID_PARAM;
    }

    /* Classes are not zeroed: start every field of ours from zero */
    memset(UCS_PTR_BYTE_OFFSET(self, sizeof(self->super)), 0,
           sizeof(*self) - sizeof(self->super));
    /* With selective signaling, one slot is kept for the NOP that reports
     * the unsignaled tail */
    self->sq_available = iface->config.tx_qp_len -
                         (iface->config.tx_moderation > 0);
    self->state        = UCT_RC_SHARE_EP_CONNECTING;
    self->fc_wnd       = iface->config.fc_enabled ?
                         iface->config.fc_wnd_size : INT_MAX;
    self->tx_ops_mask  = ucs_roundup_pow2(iface->config.tx_qp_len) - 1;
    ucs_queue_head_init(&self->flush_reqs);
    ucs_queue_head_init(&self->backlog);
    ucs_arbiter_group_init(&self->arb_group);

    self->tx_ops = ucs_calloc(self->tx_ops_mask + 1, sizeof(*self->tx_ops),
                              "rc_share tx_ops");
    if (self->tx_ops == NULL) {
        ucs_error("rc_share: failed to allocate %u tx_ops entries",
                  self->tx_ops_mask + 1);
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_rc_share_qp_create(iface, iface->send_cq,
                                    iface->config.tx_qp_len, &self->qp);
    if (status != UCS_OK) {
        goto err_free_ops;
    }

    status = uct_rc_share_conn_start(
            self, (const uct_rc_share_device_addr_t*)params->dev_addr,
            (const uct_rc_share_iface_addr_t*)params->iface_addr);
    if (status != UCS_OK) {
        ibv_destroy_qp(self->qp);
        goto err_free_ops;
    }

    ucs_list_add_tail(&iface->ep_list, &self->list);
    ++iface->counters.eps;
    ucs_debug("rc_share ep %p: QP 0x%x, connecting", self, self->qp->qp_num);
    return UCS_OK;

err_free_ops:
    ucs_free(self->tx_ops);
    return status;
}

static void uct_rc_share_ep_free(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    if (ibv_destroy_qp(ep->qp) != 0) {
        ucs_warn("ibv_destroy_qp(0x%x) failed: %m", ep->qp->qp_num);
    }
    /* A zombie freed with its iface: what its WRs held goes back now */
    uct_rc_share_ep_tx_ops_drop(ep);
    uct_rc_share_ep_tail_end(ep, iface);
    ucs_free(ep->tx_ops);
    ucs_class_free(ep);
}

/* Everything but the QP, which may still have requests in flight */
static UCS_CLASS_CLEANUP_FUNC(uct_rc_share_ep_t)
{
    uct_rc_share_flush_req_t *req;

    uct_rc_share_ep_pending_purge(&self->super.super, NULL, NULL);
    ucs_arbiter_group_cleanup(&self->arb_group);
    uct_rc_share_conn_ep_cleanup(self);

    ucs_queue_for_each_extract(req, &self->flush_reqs, queue, 1) {
        uct_invoke_completion(req->comp, UCS_ERR_CANCELED);
        ucs_free(req);
    }

    ucs_list_del(&self->list);
}

UCS_CLASS_DEFINE(uct_rc_share_ep_t, uct_base_ep_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_rc_share_ep_t, uct_ep_t,
                                 const uct_ep_params_t*);

ucs_status_t uct_rc_share_ep_create(const uct_ep_params_t *params,
                                    uct_ep_h *ep_p)
{
    return UCS_CLASS_NEW_FUNC_NAME(uct_rc_share_ep_t)(params, ep_p);
}

/*
 * Every outstanding operation completes here, with CANCELED (the UCT
 * contract): the backlog, and the user's completions of the WRs in flight.
 * Completions of the QP name the endpoint, so it lives on until they are
 * in: a destroyed endpoint with requests in flight becomes a zombie whose
 * QP is flushed, and its last completion frees it; nothing of a zombie
 * reaches the user.
 */
void uct_rc_share_ep_destroy(uct_ep_h tl_ep)
{
    uct_rc_share_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_share_ep_t);
    uct_rc_share_iface_t *iface = uct_rc_share_ep_iface(ep);

    UCS_CLASS_CLEANUP(uct_rc_share_ep_t, ep);
    uct_rc_share_ep_backlog_purge(ep, UCS_ERR_CANCELED);

    if (ep->tx_posted == ep->tx_completed) {
        uct_rc_share_ep_free(ep);
        return;
    }

    /* Every WR in flight must complete for the zombie to go: those that
     * are done already but unsignaled are reported by a NOP */
    (void)uct_rc_share_ep_report_tail(ep);
    uct_rc_share_ep_tx_ops_cancel(ep);
    uct_rc_share_ep_qp_error(ep);
    ep->state = UCT_RC_SHARE_EP_ZOMBIE;
    ucs_list_add_tail(&iface->zombie_eps, &ep->list);
}

void uct_rc_share_ep_zombie_release(uct_rc_share_ep_t *ep)
{
    ucs_list_del(&ep->list);
    uct_rc_share_ep_free(ep);
}
