/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * A process's side of the node connections (rc_share_node.h): the iface's
 * ring pair, and endpoints that put every operation in the send ring for
 * the node's engine to post. Nothing here makes a QP.
 */
#include "rc_share_node.h"

#include <uct/base/uct_iov.inl>
#include <ucs/arch/atomic.h>
#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/sys/string.h>
#include <ucs/time/time.h>
#include <ucs/type/class.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>


/* What the iface keeps of an operation in a send slot: the slot itself is
 * shared memory, and holds nothing of this process's addresses */
typedef struct uct_rc_share_node_op_info {
    struct uct_rc_share_node_ep *ep;        /* NULL: destroyed since */
    uct_completion_t          *comp;
    uct_unpack_callback_t     unpack;       /* get_bcopy */
    void                      *unpack_arg;
    uint64_t                  *result;      /* fetching atomics */
} uct_rc_share_node_op_info_t;


typedef struct uct_rc_share_node_ep {
    uct_base_ep_t             super;
    uct_rc_share_wire_device_addr_t dev_addr;
    uct_rc_share_node_addr_t  dst;
    unsigned                  outstanding;  /* slots not retired */
    unsigned                  unflushed;    /* operations since the last
                                               flush went to the engine */
    int                       fence;        /* the next operation fences */
    ucs_queue_head_t          pending;      /* uct_pending_req_t, by priv */
    ucs_list_link_t           list;
} uct_rc_share_node_ep_t;


struct uct_rc_share_node_iface {
    uct_rc_share_iface_t      *iface;
    uct_rc_share_node_engine_t *engine;     /* the founder's process only */
    uct_rc_share_node_mailbox_t *mbox;      /* ours */
    uct_rc_share_node_ring_t  *ring;
    unsigned                  ring_index;
    uct_ibshare_buf_t         tx_buf, rx_buf;
    uint64_t                  tx_head, tx_retired, rx_tail;
    size_t                    data_max;     /* a send slot's data */
    uct_rc_share_iface_addr_t engine_addr;
    ucs_list_link_t           eps;
    uct_rc_share_node_op_info_t info[UCT_RC_SHARE_NODE_RING_LEN];
};


/* The process's mailbox is written by its ifaces, one at a time */
static pthread_mutex_t uct_rc_share_node_mbox_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t        uct_rc_share_node_generation;


static UCS_F_ALWAYS_INLINE uct_rc_share_iface_t *
uct_rc_share_node_ep_iface(const uct_rc_share_node_ep_t *ep)
{
    return ucs_derived_of(ep->super.super.iface, uct_rc_share_iface_t);
}

static UCS_F_ALWAYS_INLINE uct_rc_share_node_iface_t *
uct_rc_share_node_ep_node(const uct_rc_share_node_ep_t *ep)
{
    return uct_rc_share_node_ep_iface(ep)->node;
}

/* ------------------------------------------------------------ send ring */

/* A send slot is free: the engine is done with one we have not reused */
static UCS_F_ALWAYS_INLINE int
uct_rc_share_node_has_room(const uct_rc_share_node_iface_t *node)
{
    return node->tx_head - node->tx_retired < UCT_RC_SHARE_NODE_RING_LEN;
}

/* A free send slot for an operation of ep, or NULL */
static UCS_F_ALWAYS_INLINE uct_rc_share_node_tx_slot_t *
uct_rc_share_node_slot_get(uct_rc_share_node_iface_t *node,
                           uct_rc_share_node_ep_t *ep, uint8_t op)
{
    uct_rc_share_node_tx_slot_t *slot;

    if (ucs_unlikely(!uct_rc_share_node_has_room(node))) {
        return NULL;
    }

    slot = uct_rc_share_node_tx_slot(node->tx_buf.address, node->ring,
                                     node->tx_head);
    slot->op        = op;
    slot->flags     = ep->fence ? UCT_RC_SHARE_NODE_SLOT_FENCE : 0;
    slot->dst_slice = ep->dst.slice;
    slot->dst_ring  = ep->dst.ring;
    slot->lkey      = 0;
    slot->length    = 0;
    slot->dev_addr  = ep->dev_addr;
    slot->engine    = ep->dst.engine;
    node->info[node->tx_head % UCT_RC_SHARE_NODE_RING_LEN] =
            (uct_rc_share_node_op_info_t){ .ep = ep };
    return slot;
}

static UCS_F_ALWAYS_INLINE uct_rc_share_node_op_info_t *
uct_rc_share_node_slot_info(uct_rc_share_node_iface_t *node)
{
    return &node->info[node->tx_head % UCT_RC_SHARE_NODE_RING_LEN];
}

/* Hands the slot to the engine */
static UCS_F_ALWAYS_INLINE void
uct_rc_share_node_slot_post(uct_rc_share_node_iface_t *node,
                            uct_rc_share_node_ep_t *ep,
                            uct_rc_share_node_tx_slot_t *slot)
{
    slot->state = UCT_RC_SHARE_NODE_SLOT_POSTED;
    ep->fence   = 0;
    ++ep->outstanding;
    if (slot->op != UCT_RC_SHARE_NODE_OP_FLUSH) {
        ++ep->unflushed;
    }
    ucs_memory_cpu_store_fence();
    node->ring->tx_head = ++node->tx_head;
}

/* Retires the slots the engine is done with, in order */
static unsigned uct_rc_share_node_retire(uct_rc_share_node_iface_t *node)
{
    unsigned count = 0;
    uct_rc_share_node_op_info_t *info;
    uct_rc_share_node_tx_slot_t *slot;
    ucs_status_t status;

    while (node->tx_retired != node->tx_head) {
        slot = uct_rc_share_node_tx_slot(node->tx_buf.address, node->ring,
                                         node->tx_retired);
        if (slot->state != UCT_RC_SHARE_NODE_SLOT_DONE) {
            break;
        }
        ucs_memory_cpu_load_fence();

        info   = &node->info[node->tx_retired % UCT_RC_SHARE_NODE_RING_LEN];
        status = (ucs_status_t)slot->status;
        if ((status == UCS_OK) && (info->ep != NULL)) {
            if (info->unpack != NULL) {
                info->unpack(info->unpack_arg, slot->data, slot->length);
            }
            if (info->result != NULL) {
                *info->result = slot->value;
            }
        }
        if (info->comp != NULL) {
            uct_invoke_completion(info->comp, status);
        }
        if (info->ep != NULL) {
            --info->ep->outstanding;
            if ((status != UCS_OK) && (status != UCS_ERR_CANCELED)) {
                ucs_debug("rc_share node ep %p: operation %d failed: %s",
                          info->ep, slot->op, ucs_status_string(status));
                uct_iface_handle_ep_err(&node->iface->super.super,
                                        &info->ep->super.super, status);
            }
        }
        slot->state = 0;
        ++node->tx_retired;
        ++count;
    }
    return count;
}

/* Active messages the engine put in our receive ring */
static unsigned uct_rc_share_node_poll_rx(uct_rc_share_node_iface_t *node)
{
    uct_rc_share_iface_t *iface = node->iface;
    uct_rc_share_node_rx_slot_t *slot;
    unsigned count = 0;

    while (node->rx_tail != node->ring->rx_head) {
        ucs_memory_cpu_load_fence();
        slot = uct_rc_share_node_rx_slot(node->rx_buf.address, node->ring,
                                         node->rx_tail);
        /* What the peer's endpoint sent, as the per-pair path checks it:
         * an id out of range or nobody's is dropped and counted */
        if (ucs_unlikely((slot->am_id >= UCT_AM_ID_MAX) ||
                         (slot->length > node->data_max) ||
                         (iface->super.am[slot->am_id].cb ==
                          iface->am_stub))) {
            iface->counters.rx_dropped++;
        } else {
            uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV,
                               slot->am_id, slot->data, slot->length,
                               "RX: AM (node)");
            iface->counters.rx_ops++;
            iface->counters.rx_bytes += slot->length;
            /* No descriptor to keep: the handler copies what it keeps */
            (void)uct_iface_invoke_am(&iface->super, slot->am_id, slot->data,
                                      slot->length, 0);
        }
        ucs_memory_cpu_fence(); /* done reading the slot before giving it */
        node->ring->rx_tail = ++node->rx_tail;
        ++count;
    }
    return count;
}

static void uct_rc_share_node_dispatch_pending(uct_rc_share_node_iface_t *node)
{
    uct_rc_share_node_ep_t *ep;
    uct_pending_req_t *req;
    ucs_status_t status;

    ucs_list_for_each(ep, &node->eps, list) {
        while (!ucs_queue_is_empty(&ep->pending) &&
               uct_rc_share_node_has_room(node)) {
            req = ucs_container_of(ucs_queue_pull_non_empty(&ep->pending),
                                   uct_pending_req_t, priv);
            status = req->func(req);
            if (status == UCS_OK) {
                continue; /* done: off the queue */
            }
            /* UCS_INPROGRESS: some of it went, the rest stays first */
            ucs_queue_push_head(&ep->pending, (ucs_queue_elem_t*)req->priv);
            if (status != UCS_INPROGRESS) {
                return;
            }
        }
    }
}

static unsigned uct_rc_share_node_iface_progress(uct_iface_h tl_iface)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    uct_rc_share_node_iface_t *node = iface->node;
    unsigned count;

    count  = uct_rc_share_node_retire(node);
    count += uct_rc_share_node_poll_rx(node);
    if (count != 0) {
        uct_rc_share_node_dispatch_pending(node);
    }
    ucs_async_check_miss(iface->super.worker->async);
    return count;
}

/* ------------------------------------------------------------ AM */

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_node_am_post(uct_rc_share_node_ep_t *ep,
                          uct_rc_share_node_tx_slot_t *slot, uint8_t id,
                          size_t length)
{
    uct_rc_share_iface_t *iface = uct_rc_share_node_ep_iface(ep);

    slot->am_id  = id;
    slot->length = length;
    uct_rc_share_node_slot_post(iface->node, ep, slot);
    iface->counters.am_ops++;
    iface->counters.am_bytes += length;
    return UCS_OK;
}

static ucs_status_t uct_rc_share_node_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                                  uint64_t header,
                                                  const void *payload,
                                                  unsigned length)
{
    uct_rc_share_node_ep_t *ep      = ucs_derived_of(tl_ep,
                                                     uct_rc_share_node_ep_t);
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    uct_rc_share_node_tx_slot_t *slot;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(sizeof(header) + length, 0,
                     node->iface->config.max_inline, "am_short");
    slot = uct_rc_share_node_slot_get(node, ep, UCT_RC_SHARE_NODE_OP_AM);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    memcpy(slot->data, &header, sizeof(header));
    memcpy(slot->data + sizeof(header), payload, length);
    uct_iface_trace_am(&node->iface->super, UCT_AM_TRACE_TYPE_SEND, id,
                       slot->data, sizeof(header) + length,
                       "TX: AM_SHORT (node)");
    return uct_rc_share_node_am_post(ep, slot, id, sizeof(header) + length);
}

static ssize_t uct_rc_share_node_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                             uct_pack_callback_t pack_cb,
                                             void *arg, unsigned flags)
{
    uct_rc_share_node_ep_t *ep      = ucs_derived_of(tl_ep,
                                                     uct_rc_share_node_ep_t);
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    uct_rc_share_node_tx_slot_t *slot;
    size_t length;

    UCT_CHECK_AM_ID(id);
    slot = uct_rc_share_node_slot_get(node, ep, UCT_RC_SHARE_NODE_OP_AM);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    length = pack_cb(slot->data, arg);
    UCT_CHECK_LENGTH(length, 0, node->data_max, "am_bcopy");
    uct_iface_trace_am(&node->iface->super, UCT_AM_TRACE_TYPE_SEND, id,
                       slot->data, length, "TX: AM_BCOPY (node)");
    uct_rc_share_node_am_post(ep, slot, id, length);
    return length;
}

/* The payload is copied into the slot: done when the call returns */
static ucs_status_t
uct_rc_share_node_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header,
                              unsigned header_length, const uct_iov_t *iov,
                              size_t iovcnt, unsigned flags,
                              uct_completion_t *comp)
{
    uct_rc_share_node_ep_t *ep      = ucs_derived_of(tl_ep,
                                                     uct_rc_share_node_ep_t);
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    uct_rc_share_node_tx_slot_t *slot;
    size_t length;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, UCT_RC_SHARE_MAX_SEND_SGE - 1, "am_zcopy");
    length = header_length + uct_iov_total_length(iov, iovcnt);
    UCT_CHECK_LENGTH(length, 0, node->data_max, "am_zcopy");
    slot = uct_rc_share_node_slot_get(node, ep, UCT_RC_SHARE_NODE_OP_AM);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    memcpy(slot->data, header, header_length);
    uct_iov_to_buffer(iov, iovcnt, NULL, slot->data + header_length, SIZE_MAX);
    uct_iface_trace_am(&node->iface->super, UCT_AM_TRACE_TYPE_SEND, id,
                       slot->data, length, "TX: AM_ZCOPY (node)");
    return uct_rc_share_node_am_post(ep, slot, id, length);
}

/* ------------------------------------------------------------ RMA */

static UCS_F_ALWAYS_INLINE void
uct_rc_share_node_slot_remote(uct_rc_share_node_tx_slot_t *slot,
                              uint64_t remote_addr, uct_rkey_t rkey,
                              size_t length)
{
    uct_ibshare_rkey_resolve(rkey, remote_addr, length, &slot->remote_addr,
                             &slot->rkey);
    slot->length = length;
}

static ucs_status_t uct_rc_share_node_ep_put_short(uct_ep_h tl_ep,
                                                   const void *buffer,
                                                   unsigned length,
                                                   uint64_t remote_addr,
                                                   uct_rkey_t rkey)
{
    uct_rc_share_node_ep_t *ep      = ucs_derived_of(tl_ep,
                                                     uct_rc_share_node_ep_t);
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    uct_rc_share_node_tx_slot_t *slot;

    UCT_CHECK_LENGTH(length, 0, node->iface->config.max_inline, "put_short");
    slot = uct_rc_share_node_slot_get(node, ep, UCT_RC_SHARE_NODE_OP_PUT);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    memcpy(slot->data, buffer, length);
    uct_rc_share_node_slot_remote(slot, remote_addr, rkey, length);
    uct_rc_share_node_slot_post(node, ep, slot);
    node->iface->counters.put_ops++;
    node->iface->counters.put_bytes += length;
    return UCS_OK;
}

static ssize_t uct_rc_share_node_ep_put_bcopy(uct_ep_h tl_ep,
                                              uct_pack_callback_t pack_cb,
                                              void *arg, uint64_t remote_addr,
                                              uct_rkey_t rkey)
{
    uct_rc_share_node_ep_t *ep      = ucs_derived_of(tl_ep,
                                                     uct_rc_share_node_ep_t);
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    uct_rc_share_node_tx_slot_t *slot;
    size_t length;

    slot = uct_rc_share_node_slot_get(node, ep, UCT_RC_SHARE_NODE_OP_PUT);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    length = pack_cb(slot->data, arg);
    UCT_CHECK_LENGTH(length, 0, node->data_max, "put_bcopy");
    uct_rc_share_node_slot_remote(slot, remote_addr, rkey, length);
    uct_rc_share_node_slot_post(node, ep, slot);
    node->iface->counters.put_ops++;
    node->iface->counters.put_bytes += length;
    return length;
}

/* One scatter entry: the engine posts it as it is, with our key */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_node_ep_rdma_zcopy(uct_rc_share_node_ep_t *ep, uint8_t op,
                                const uct_iov_t *iov, size_t iovcnt,
                                uint64_t remote_addr, uct_rkey_t rkey,
                                uct_completion_t *comp)
{
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    const uct_ibshare_mem_t *memh;
    uct_rc_share_node_tx_slot_t *slot;
    size_t length;

    UCT_CHECK_IOV_SIZE(iovcnt, 1, "rdma_zcopy (node)");
    length = uct_iov_total_length(iov, iovcnt);
    slot   = uct_rc_share_node_slot_get(node, ep, op);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    if (length != 0) {
        memh             = iov[0].memh;
        slot->local_addr = (uintptr_t)iov[0].buffer - memh->va_offset;
        slot->lkey       = memh->lkey;
    }
    uct_rc_share_node_slot_remote(slot, remote_addr, rkey, length);
    uct_rc_share_node_slot_info(node)->comp = comp;
    uct_rc_share_node_slot_post(node, ep, slot);
    if (op == UCT_RC_SHARE_NODE_OP_PUT) {
        node->iface->counters.put_ops++;
        node->iface->counters.put_bytes += length;
    } else {
        node->iface->counters.get_ops++;
        node->iface->counters.get_bytes += length;
    }
    return UCS_INPROGRESS;
}

static ucs_status_t uct_rc_share_node_ep_put_zcopy(uct_ep_h tl_ep,
                                                   const uct_iov_t *iov,
                                                   size_t iovcnt,
                                                   uint64_t remote_addr,
                                                   uct_rkey_t rkey,
                                                   uct_completion_t *comp)
{
    return uct_rc_share_node_ep_rdma_zcopy(
            ucs_derived_of(tl_ep, uct_rc_share_node_ep_t),
            UCT_RC_SHARE_NODE_OP_PUT, iov, iovcnt, remote_addr, rkey, comp);
}

static ucs_status_t uct_rc_share_node_ep_get_zcopy(uct_ep_h tl_ep,
                                                   const uct_iov_t *iov,
                                                   size_t iovcnt,
                                                   uint64_t remote_addr,
                                                   uct_rkey_t rkey,
                                                   uct_completion_t *comp)
{
    return uct_rc_share_node_ep_rdma_zcopy(
            ucs_derived_of(tl_ep, uct_rc_share_node_ep_t),
            UCT_RC_SHARE_NODE_OP_GET, iov, iovcnt, remote_addr, rkey, comp);
}

static ucs_status_t uct_rc_share_node_ep_get_bcopy(uct_ep_h tl_ep,
                                                   uct_unpack_callback_t unpack,
                                                   void *arg, size_t length,
                                                   uint64_t remote_addr,
                                                   uct_rkey_t rkey,
                                                   uct_completion_t *comp)
{
    uct_rc_share_node_ep_t *ep      = ucs_derived_of(tl_ep,
                                                     uct_rc_share_node_ep_t);
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    uct_rc_share_node_op_info_t *info;
    uct_rc_share_node_tx_slot_t *slot;

    UCT_CHECK_LENGTH(length, 0, node->data_max, "get_bcopy");
    slot = uct_rc_share_node_slot_get(node, ep, UCT_RC_SHARE_NODE_OP_GET);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    uct_rc_share_node_slot_remote(slot, remote_addr, rkey, length);
    info             = uct_rc_share_node_slot_info(node);
    info->comp       = comp;
    info->unpack     = unpack;
    info->unpack_arg = arg;
    uct_rc_share_node_slot_post(node, ep, slot);
    node->iface->counters.get_ops++;
    node->iface->counters.get_bytes += length;
    return UCS_INPROGRESS;
}

/* ------------------------------------------------------------ atomics */

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_rc_share_node_ep_atomic(uct_rc_share_node_ep_t *ep, uint8_t op,
                            uct_atomic_op_t atomic_op, uint64_t value,
                            uint64_t compare, uint64_t *result,
                            uint64_t remote_addr, uct_rkey_t rkey,
                            uct_completion_t *comp)
{
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    uct_rc_share_node_op_info_t *info;
    uct_rc_share_node_tx_slot_t *slot;

    if (!node->iface->has_atomics) {
        return UCS_ERR_UNSUPPORTED;
    }

    slot = uct_rc_share_node_slot_get(node, ep, op);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    slot->atomic_op = atomic_op;
    slot->value     = value;
    slot->compare   = compare;
    uct_rc_share_node_slot_remote(slot, remote_addr, rkey, sizeof(uint64_t));
    info         = uct_rc_share_node_slot_info(node);
    info->comp   = comp;
    info->result = result;
    uct_rc_share_node_slot_post(node, ep, slot);
    node->iface->counters.atomic_ops++;
    return (result == NULL) ? UCS_OK : UCS_INPROGRESS;
}

static ucs_status_t uct_rc_share_node_ep_atomic64_post(uct_ep_h tl_ep,
                                                       unsigned opcode,
                                                       uint64_t value,
                                                       uint64_t remote_addr,
                                                       uct_rkey_t rkey)
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }
    return uct_rc_share_node_ep_atomic(
            ucs_derived_of(tl_ep, uct_rc_share_node_ep_t),
            UCT_RC_SHARE_NODE_OP_ATOMIC_POST, UCT_ATOMIC_OP_ADD, value, 0,
            NULL, remote_addr, rkey, NULL);
}

static ucs_status_t
uct_rc_share_node_ep_atomic64_fetch(uct_ep_h tl_ep, uct_atomic_op_t opcode,
                                    uint64_t value, uint64_t *result,
                                    uint64_t remote_addr, uct_rkey_t rkey,
                                    uct_completion_t *comp)
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }
    return uct_rc_share_node_ep_atomic(
            ucs_derived_of(tl_ep, uct_rc_share_node_ep_t),
            UCT_RC_SHARE_NODE_OP_ATOMIC_FETCH, opcode, value, 0, result,
            remote_addr, rkey, comp);
}

static ucs_status_t
uct_rc_share_node_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                    uint64_t swap, uint64_t remote_addr,
                                    uct_rkey_t rkey, uint64_t *result,
                                    uct_completion_t *comp)
{
    return uct_rc_share_node_ep_atomic(
            ucs_derived_of(tl_ep, uct_rc_share_node_ep_t),
            UCT_RC_SHARE_NODE_OP_CSWAP, UCT_ATOMIC_OP_CSWAP, swap, compare,
            result, remote_addr, rkey, comp);
}

/* ------------------------------------------------------------ flush */

static ucs_status_t uct_rc_share_node_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                               uct_completion_t *comp)
{
    uct_rc_share_node_ep_t *ep      = ucs_derived_of(tl_ep,
                                                     uct_rc_share_node_ep_t);
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);
    uct_rc_share_node_tx_slot_t *slot;

    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        /* What the engine has cannot be taken back: it completes */
        uct_ep_pending_purge(tl_ep, NULL, NULL);
    }

    if ((ep->outstanding == 0) && (ep->unflushed == 0)) {
        return UCS_OK;
    }
    if ((ep->unflushed == 0) && (comp == NULL)) {
        return UCS_INPROGRESS;
    }

    slot = uct_rc_share_node_slot_get(node, ep, UCT_RC_SHARE_NODE_OP_FLUSH);
    if (slot == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }
    uct_rc_share_node_slot_info(node)->comp = comp;
    ep->unflushed                           = 0;
    uct_rc_share_node_slot_post(node, ep, slot);
    return UCS_INPROGRESS;
}

static ucs_status_t uct_rc_share_node_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    ucs_derived_of(tl_ep, uct_rc_share_node_ep_t)->fence = 1;
    return UCS_OK;
}

static ucs_status_t uct_rc_share_node_iface_flush(uct_iface_h tl_iface,
                                                  unsigned flags,
                                                  uct_completion_t *comp)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    ucs_status_t status         = UCS_OK;
    uct_rc_share_node_ep_t *ep;

    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED;
    }

    ucs_list_for_each(ep, &iface->node->eps, list) {
        if (!ucs_queue_is_empty(&ep->pending) ||
            (uct_rc_share_node_ep_flush(&ep->super.super, 0, NULL) !=
             UCS_OK)) {
            status = UCS_INPROGRESS;
        }
    }
    return status;
}

static ucs_status_t uct_rc_share_node_iface_fence(uct_iface_h tl_iface,
                                                  unsigned flags)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    uct_rc_share_node_ep_t *ep;

    ucs_list_for_each(ep, &iface->node->eps, list) {
        ep->fence = 1;
    }
    return UCS_OK;
}

/* Events: the rings raise none, so a sleeper must poll */
static ucs_status_t uct_rc_share_node_iface_event_arm(uct_iface_h tl_iface,
                                                      unsigned events)
{
    return UCS_ERR_BUSY;
}

/* ------------------------------------------------------------ pending */

static ucs_status_t uct_rc_share_node_ep_pending_add(uct_ep_h tl_ep,
                                                     uct_pending_req_t *req,
                                                     unsigned flags)
{
    uct_rc_share_node_ep_t *ep      = ucs_derived_of(tl_ep,
                                                     uct_rc_share_node_ep_t);
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(ep);

    if (ucs_queue_is_empty(&ep->pending) &&
        uct_rc_share_node_has_room(node)) {
        return UCS_ERR_BUSY;
    }

    UCS_STATIC_ASSERT(sizeof(ucs_queue_elem_t) <= UCT_PENDING_REQ_PRIV_LEN);
    ucs_queue_push(&ep->pending, (ucs_queue_elem_t*)req->priv);
    return UCS_OK;
}

static void uct_rc_share_node_ep_pending_purge(uct_ep_h tl_ep,
                                               uct_pending_purge_callback_t cb,
                                               void *arg)
{
    uct_rc_share_node_ep_t *ep = ucs_derived_of(tl_ep,
                                                uct_rc_share_node_ep_t);
    uct_pending_req_t *req;

    while (!ucs_queue_is_empty(&ep->pending)) {
        req = ucs_container_of(ucs_queue_pull_non_empty(&ep->pending),
                               uct_pending_req_t, priv);
        if (cb != NULL) {
            cb(req, arg);
        }
    }
}

/* The node's connections are the engine's, which sees their failures */
static ucs_status_t
uct_rc_share_node_ep_check(uct_ep_h tl_ep, unsigned flags,
                           uct_completion_t *comp)
{
    return UCS_OK;
}

/* ------------------------------------------------------------ life cycle */

static UCS_CLASS_INIT_FUNC(uct_rc_share_node_ep_t,
                           const uct_ep_params_t *params)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(params->iface,
                                                 uct_rc_share_iface_t);
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    status = uct_rc_share_ep_params_check(params);
    if (status != UCS_OK) {
        return status;
    }

    if (!(((const uct_rc_share_iface_addr_t*)params->iface_addr)->mtu &
          UCT_RC_SHARE_ADDR_MTU_NODE)) {
        ucs_error("rc_share: the peer's address has no node ring "
                  "(UCX_RC_SHARE_NODE_CONNS=n there)");
        return UCS_ERR_UNREACHABLE;
    }

    memcpy(&self->dev_addr, params->dev_addr, sizeof(self->dev_addr));
    memcpy(&self->dst,
           UCS_PTR_BYTE_OFFSET(params->iface_addr,
                               sizeof(uct_rc_share_iface_addr_t)),
           sizeof(self->dst));
    if ((self->dst.ring >= UCT_RC_SHARE_NODE_RINGS_MAX) ||
        (self->dst.engine.id == 0)) {
        ucs_error("rc_share: the peer's node ring address is malformed");
        return UCS_ERR_INVALID_ADDR;
    }

    self->outstanding = 0;
    self->unflushed   = 0;
    self->fence       = 0;
    ucs_queue_head_init(&self->pending);
    ucs_list_add_tail(&iface->node->eps, &self->list);
    ++iface->counters.eps;
    ucs_debug("rc_share node ep %p: to slice %u ring %u, engine 0x%" PRIx64,
              self, self->dst.slice, self->dst.ring, self->dst.engine.id);
    return UCS_OK;
}

/* What is in the engine's hands completes there; the user hears CANCELED
 * now, and nothing after */
static UCS_CLASS_CLEANUP_FUNC(uct_rc_share_node_ep_t)
{
    uct_rc_share_node_iface_t *node = uct_rc_share_node_ep_node(self);
    uct_rc_share_node_op_info_t *info;
    uint64_t i;

    uct_rc_share_node_ep_pending_purge(&self->super.super, NULL, NULL);
    for (i = node->tx_retired; i != node->tx_head; ++i) {
        info = &node->info[i % UCT_RC_SHARE_NODE_RING_LEN];
        if (info->ep != self) {
            continue;
        }
        if (info->comp != NULL) {
            uct_invoke_completion(info->comp, UCS_ERR_CANCELED);
        }
        info->ep   = NULL;
        info->comp = NULL;
    }
    ucs_list_del(&self->list);
}

UCS_CLASS_DEFINE(uct_rc_share_node_ep_t, uct_base_ep_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_rc_share_node_ep_t, uct_ep_t,
                                 const uct_ep_params_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_rc_share_node_ep_t, uct_ep_t);

/* ------------------------------------------------------------ the rings */

/* The engine's address, from the mailbox of the process that runs it */
static ucs_status_t
uct_rc_share_node_find_engine(uct_ibshare_resources_t *res, double timeout,
                              uct_rc_share_iface_addr_t *addr)
{
    ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(timeout);
    uct_rc_share_node_mailbox_t *mbox;
    uint32_t slice;

    do {
        for (slice = 0; slice < res->num_slices; ++slice) {
            mbox = uct_ibshare_resources_mailbox(res, slice);
            if ((mbox->magic == UCT_RC_SHARE_NODE_MAGIC) &&
                mbox->engine_ready) {
                ucs_memory_cpu_load_fence();
                *addr = mbox->engine_addr;
                return UCS_OK;
            }
        }
        usleep(1000);
    } while (ucs_get_time() < deadline);

    ucs_error("%s: no node engine in the node group after %.0f s: "
              "UCX_RC_SHARE_NODE_CONNS=on needs it on the group's founder "
              "too", res->dev_name, timeout);
    return UCS_ERR_UNREACHABLE;
}

static ucs_status_t
uct_rc_share_node_ring_alloc(uct_rc_share_node_iface_t *node, size_t length,
                             const char *name, uct_ibshare_buf_t *buf)
{
    uct_ibshare_resources_t *res = node->iface->md->res;
    ucs_status_t status;

    status = uct_ibshare_resources_buf_alloc(res, length, name, buf);
    if (status != UCS_OK) {
        return status;
    }
    if (buf->mr != NULL) {
        ucs_error("%s: no room in this rank's slice for the %s (%zu bytes): "
                  "raise UCX_IBSHARE_SLICE_SIZE", res->dev_name, name,
                  length);
        uct_ibshare_resources_buf_free(res, buf);
        buf->address = NULL;
        return UCS_ERR_NO_MEMORY;
    }
    memset(buf->address, 0, length);
    return UCS_OK;
}

static uint64_t uct_rc_share_node_pool_offset(uct_ibshare_resources_t *res,
                                              const void *address)
{
    return UCS_PTR_BYTE_DIFF(res->pool_address, address);
}

ucs_status_t uct_rc_share_node_iface_init(uct_rc_share_iface_t *iface,
                                          double timeout,
                                          uct_rc_share_node_iface_t **node_p)
{
    uct_ibshare_resources_t *res = iface->md->res;
    uct_rc_share_node_iface_t *node;
    uct_rc_share_node_ring_t *ring;
    ucs_status_t status;
    char dev_name[UCT_DEVICE_NAME_MAX];
    size_t slot_size;
    unsigned i;

    if (res->mailbox == NULL) {
        return UCS_ERR_UNSUPPORTED;
    }

    node = ucs_calloc(1, sizeof(*node), "rc_share_node_iface");
    if (node == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    node->iface = iface;
    node->mbox  = res->mailbox;
    ucs_list_head_init(&node->eps);
    UCS_STATIC_ASSERT(sizeof(uct_rc_share_node_mailbox_t) <=
                      UCT_IBSHARE_MAILBOX_SIZE);

    if (res->founder) {
        ucs_snprintf_zero(dev_name, sizeof(dev_name), "%s:%d",
                          iface->md->dev_name, iface->port_num);
        status = uct_rc_share_node_engine_get(iface->md, dev_name, node->mbox,
                                              &node->engine);
        if (status != UCS_OK) {
            goto err;
        }
    }

    status = uct_rc_share_node_find_engine(res, timeout, &node->engine_addr);
    if (status != UCS_OK) {
        goto err;
    }

    /* Room for the engine's header on its AM, as on a put */
    node->data_max = iface->config.seg_size -
                     sizeof(uct_rc_share_node_am_hdr_t);
    /* A multiple of the header: every slot's header is aligned as its
     * type says (the ring starts on a page) */
    slot_size      = ucs_align_up(UCT_RC_SHARE_NODE_SLOT_HDR +
                                  iface->config.seg_size,
                                  UCT_RC_SHARE_NODE_SLOT_HDR);
    status = uct_rc_share_node_ring_alloc(node,
                                          slot_size *
                                          UCT_RC_SHARE_NODE_RING_LEN,
                                          "node send ring", &node->tx_buf);
    if (status != UCS_OK) {
        goto err;
    }
    status = uct_rc_share_node_ring_alloc(node,
                                          slot_size *
                                          UCT_RC_SHARE_NODE_RING_LEN,
                                          "node receive ring", &node->rx_buf);
    if (status != UCS_OK) {
        goto err;
    }

    pthread_mutex_lock(&uct_rc_share_node_mbox_lock);
    for (i = 0; i < UCT_RC_SHARE_NODE_RINGS_MAX; ++i) {
        if (node->mbox->rings[i].generation == 0) {
            break;
        }
    }
    if (i == UCT_RC_SHARE_NODE_RINGS_MAX) {
        pthread_mutex_unlock(&uct_rc_share_node_mbox_lock);
        ucs_error("%s: this process has %d node-connected ifaces already, "
                  "the most", iface->md->dev_name,
                  UCT_RC_SHARE_NODE_RINGS_MAX);
        status = UCS_ERR_EXCEEDS_LIMIT;
        goto err;
    }
    ring               = &node->mbox->rings[i];
    node->ring         = ring;
    node->ring_index   = i;
    ring->slot_size    = slot_size;
    ring->rx_slot_size = slot_size;
    ring->num_slots    = UCT_RC_SHARE_NODE_RING_LEN;
    ring->tx_offset    = uct_rc_share_node_pool_offset(res,
                                                       node->tx_buf.address);
    ring->rx_offset    = uct_rc_share_node_pool_offset(res,
                                                       node->rx_buf.address);
    ring->pid          = getpid();
    ring->tx_head      = 0;
    ring->rx_head      = 0;
    ring->rx_tail      = 0;
    node->mbox->magic  = UCT_RC_SHARE_NODE_MAGIC;
    ucs_memory_cpu_store_fence();
    ring->generation   = ((uint64_t)getpid() << 32) |
                         ++uct_rc_share_node_generation;
    pthread_mutex_unlock(&uct_rc_share_node_mbox_lock);

    ucs_debug("%s: rc_share iface %p: node ring %u of slice %u, engine 0x%"
              PRIx64 "%s", iface->md->dev_name, iface, i, res->slice_index,
              node->engine_addr.id, (node->engine != NULL) ? " (ours)" : "");
    *node_p = node;
    return UCS_OK;

err:
    uct_rc_share_node_iface_cleanup(node);
    return status;
}

void uct_rc_share_node_iface_cleanup(uct_rc_share_node_iface_t *node)
{
    uct_ibshare_resources_t *res = node->iface->md->res;
    ucs_time_t deadline;

    if (node->ring != NULL) {
        /* What the engine still does for us: its completions write our
         * slots, and it must let go of the ring before the memory goes */
        deadline = ucs_get_time() + ucs_time_from_sec(5.0);
        while ((node->tx_retired != node->tx_head) &&
               (ucs_get_time() < deadline)) {
            uct_rc_share_node_retire(node);
        }
        node->ring->generation = 0;
        ucs_memory_cpu_fence();
        deadline = ucs_get_time() + ucs_time_from_sec(1.0);
        while ((node->ring->engine_gen != 0) && (ucs_get_time() < deadline)) {
            usleep(100);
        }
        if (node->ring->engine_gen != 0) {
            ucs_warn("%s: the node engine did not let go of ring %u",
                     node->iface->md->dev_name, node->ring_index);
        }
    }

    if (node->rx_buf.address != NULL) {
        uct_ibshare_resources_buf_free(res, &node->rx_buf);
    }
    if (node->tx_buf.address != NULL) {
        uct_ibshare_resources_buf_free(res, &node->tx_buf);
    }
    if (node->engine != NULL) {
        uct_rc_share_node_engine_put(node->engine);
    }
    ucs_free(node);
}

void uct_rc_share_node_iface_addr(const uct_rc_share_node_iface_t *node,
                                  uct_rc_share_node_addr_t *addr)
{
    addr->engine = node->engine_addr;
    addr->slice  = node->iface->md->res->slice_index;
    addr->ring   = node->ring_index;
}

/* ------------------------------------------------------------ ops */

void uct_rc_share_node_iface_query(const uct_rc_share_node_iface_t *node,
                                   uct_iface_attr_t *attr)
{
    attr->iface_addr_len  += sizeof(uct_rc_share_node_addr_t);
    attr->cap.am.max_bcopy = node->data_max;
    attr->cap.am.max_zcopy = node->data_max;
    attr->cap.put.max_bcopy = node->data_max;
    attr->cap.get.max_bcopy = node->data_max;
    attr->cap.put.max_iov  = 1;
    attr->cap.get.max_iov  = 1;
    attr->cap.am.max_short = ucs_min(attr->cap.am.max_short,
                                     node->data_max);
    /* The hand-offs to and from the engines, through shared memory */
    attr->latency.c       += 2 * 300e-9;
    /* The rings raise no event: an iface that UCP armed would never learn
     * of a message in its ring (UCP deactivates an iface that supports
     * receive events until one comes) */
    attr->cap.event_flags  = 0;
}

void uct_rc_share_node_iface_destroy_eps(uct_rc_share_node_iface_t *node)
{
    uct_rc_share_node_ep_t *ep, *tmp;

    if (!ucs_list_is_empty(&node->eps)) {
        ucs_warn("rc_share iface %p closed with %zu node endpoints still "
                 "open; destroying them", node->iface,
                 ucs_list_length(&node->eps));
    }
    ucs_list_for_each_safe(ep, tmp, &node->eps, list) {
        UCS_CLASS_DELETE(uct_rc_share_node_ep_t, ep);
    }
}

static ucs_status_t uct_rc_share_node_ep_create(const uct_ep_params_t *params,
                                                uct_ep_h *ep_p)
{
    return UCS_CLASS_NEW_FUNC_NAME(uct_rc_share_node_ep_t)(params, ep_p);
}

void uct_rc_share_node_ops_apply(uct_iface_ops_t *ops)
{
    ops->ep_am_short       = uct_rc_share_node_ep_am_short;
    ops->ep_am_bcopy       = uct_rc_share_node_ep_am_bcopy;
    ops->ep_am_zcopy       = uct_rc_share_node_ep_am_zcopy;
    ops->ep_put_short      = uct_rc_share_node_ep_put_short;
    ops->ep_put_bcopy      = uct_rc_share_node_ep_put_bcopy;
    ops->ep_put_zcopy      = uct_rc_share_node_ep_put_zcopy;
    ops->ep_get_bcopy      = uct_rc_share_node_ep_get_bcopy;
    ops->ep_get_zcopy      = uct_rc_share_node_ep_get_zcopy;
    ops->ep_atomic64_post  = uct_rc_share_node_ep_atomic64_post;
    ops->ep_atomic64_fetch = uct_rc_share_node_ep_atomic64_fetch;
    ops->ep_atomic_cswap64 = uct_rc_share_node_ep_atomic_cswap64;
    ops->ep_pending_add    = uct_rc_share_node_ep_pending_add;
    ops->ep_pending_purge  = uct_rc_share_node_ep_pending_purge;
    ops->ep_flush          = uct_rc_share_node_ep_flush;
    ops->ep_fence          = uct_rc_share_node_ep_fence;
    ops->ep_check          = uct_rc_share_node_ep_check;
    ops->ep_create         = uct_rc_share_node_ep_create;
    ops->ep_destroy        = UCS_CLASS_DELETE_FUNC_NAME(uct_rc_share_node_ep_t);
    ops->iface_flush       = uct_rc_share_node_iface_flush;
    ops->iface_fence       = uct_rc_share_node_iface_fence;
    ops->iface_progress    = uct_rc_share_node_iface_progress;
    ops->iface_event_arm   = uct_rc_share_node_iface_event_arm;
}
