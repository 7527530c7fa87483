/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node's engine (rc_share_node.h): a thread of the group's founder that
 * owns an rc_share iface of its own, one connection to each other node's
 * engine (and one to itself), and posts what the processes of the node put
 * in their send rings, with their keys.
 */
#include "rc_share_node.h"

#include <ucs/arch/atomic.h>
#include <ucs/async/async.h>
#include <ucs/datastruct/khash.h>
#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/time/time.h>

#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>


/* An engine ep's completion of one slot */
typedef struct uct_rc_share_node_engine_comp {
    uct_completion_t          comp;
    uct_rc_share_node_tx_slot_t *slot;
} uct_rc_share_node_engine_comp_t;

/* An AM kept for a receive ring that was full, in the receive buffer's
 * headroom */
typedef struct uct_rc_share_node_held {
    ucs_queue_elem_t          queue;
    uint32_t                  length;
} uct_rc_share_node_held_t;

/* The engine's view of one ring pair of the node */
typedef struct uct_rc_share_node_engine_ring {
    uint64_t                  generation;   /* 0: not attached */
    ucs_queue_head_t          held;         /* AMs for the full receive
                                               ring, in order */
    uct_rc_share_node_ring_t  *ring;
    void                      *tx_base, *rx_base;
    uint64_t                  tx_taken;     /* slots posted */
    uint64_t                  rx_head;
    size_t                    rx_data_max;
    size_t                    tx_data_max;
    uct_rc_share_node_engine_comp_t comps[UCT_RC_SHARE_NODE_RING_LEN];
} uct_rc_share_node_engine_ring_t;

/* A connection to a node's engine */
typedef struct uct_rc_share_node_route {
    uct_ep_h                  ep;
    ucs_status_t              status;       /* the ep failed: every slot for
                                               it completes so */
} uct_rc_share_node_route_t;

KHASH_MAP_INIT_INT64(uct_rc_share_node_routes, uct_rc_share_node_route_t*)


struct uct_rc_share_node_engine {
    unsigned                  refcount;
    uct_ibshare_md_t          *md;
    uct_ibshare_resources_t   *res;
    uct_rc_share_node_mailbox_t *mbox;
    ucs_async_context_t       *async;
    uct_worker_h              worker;
    uct_iface_h               iface;
    pthread_t                 thread;
    int                       thread_started;
    volatile int              stop;
    khash_t(uct_rc_share_node_routes) routes;
    uct_rc_share_node_engine_ring_t **rings; /* num_slices x RINGS_MAX */
    size_t                    am_max;       /* what our AM carries of a
                                               slot's data */
    size_t                    put_max, get_max; /* buffered RMA */
    unsigned                  held_now;     /* AMs in the rings' held
                                               queues */
    struct {
        uint64_t              posted, delivered, held, dropped;
    } counters;
};


static pthread_mutex_t uct_rc_share_node_engine_lock =
        PTHREAD_MUTEX_INITIALIZER;
static uct_rc_share_node_engine_t *uct_rc_share_node_engine_global;


/* ------------------------------------------------------------ rings */

static UCS_F_ALWAYS_INLINE void
uct_rc_share_node_slot_done(uct_rc_share_node_tx_slot_t *slot,
                            ucs_status_t status)
{
    slot->status = status;
    ucs_memory_cpu_store_fence();
    slot->state = UCT_RC_SHARE_NODE_SLOT_DONE;
}

static void uct_rc_share_node_engine_comp_cb(uct_completion_t *comp)
{
    uct_rc_share_node_engine_comp_t *ec =
            ucs_container_of(comp, uct_rc_share_node_engine_comp_t, comp);

    uct_rc_share_node_slot_done(ec->slot, comp->status);
}

static uct_completion_t *
uct_rc_share_node_engine_comp(uct_rc_share_node_engine_ring_t *er,
                              uint64_t index,
                              uct_rc_share_node_tx_slot_t *slot)
{
    uct_rc_share_node_engine_comp_t *ec = &er->comps[index %
                                                     UCT_RC_SHARE_NODE_RING_LEN];

    ec->comp.func   = uct_rc_share_node_engine_comp_cb;
    ec->comp.count  = 1;
    ec->comp.status = UCS_OK;
    ec->slot        = slot;
    return &ec->comp;
}

/* A ring of the node as the engine may use it: its bounds checked against
 * the pool (the memory is the node's; a process of the job's uid may still
 * write anything there) */
static int uct_rc_share_node_engine_ring_ok(uct_rc_share_node_engine_t *engine,
                                            const uct_rc_share_node_ring_t *ring)
{
    size_t pool_size = engine->res->pool_size;

    return (ring->num_slots == UCT_RC_SHARE_NODE_RING_LEN) &&
           (ring->slot_size >= UCT_RC_SHARE_NODE_SLOT_HDR + 64) &&
           (ring->slot_size % UCT_RC_SHARE_NODE_SLOT_HDR == 0) &&
           (ring->tx_offset % UCT_RC_SHARE_NODE_SLOT_HDR == 0) &&
           (ring->rx_slot_size % UCS_SYS_CACHE_LINE_SIZE == 0) &&
           (ring->rx_offset % UCS_SYS_CACHE_LINE_SIZE == 0) &&
           (ring->rx_slot_size > sizeof(uct_rc_share_node_rx_slot_t)) &&
           (ring->tx_offset <= pool_size) &&
           ((uint64_t)ring->slot_size * ring->num_slots <=
            pool_size - ring->tx_offset) &&
           (ring->rx_offset <= pool_size) &&
           ((uint64_t)ring->rx_slot_size * ring->num_slots <=
            pool_size - ring->rx_offset);
}

/* Drops what waits for a ring that is gone; returns how many */
static unsigned
uct_rc_share_node_engine_release_held(uct_rc_share_node_engine_t *engine,
                                      uct_rc_share_node_engine_ring_t *er)
{
    uct_rc_share_node_held_t *held;
    unsigned count = 0;

    while (!ucs_queue_is_empty(&er->held)) {
        held = ucs_queue_pull_elem_non_empty(&er->held,
                                             uct_rc_share_node_held_t, queue);
        uct_iface_release_desc(held);
        --engine->held_now;
        ++count;
    }
    return count;
}

/* The engine's state of ring (slice, index), attached if the ring is
 * active and of a new generation; NULL if it is not active */
static uct_rc_share_node_engine_ring_t *
uct_rc_share_node_engine_ring(uct_rc_share_node_engine_t *engine,
                              unsigned slice, unsigned index)
{
    uct_rc_share_node_engine_ring_t **erp;
    uct_rc_share_node_engine_ring_t *er;
    uct_rc_share_node_mailbox_t *mbox;
    uct_rc_share_node_ring_t *ring;
    uint64_t generation;

    mbox = uct_ibshare_resources_mailbox(engine->res, slice);
    if ((mbox == NULL) || (index >= UCT_RC_SHARE_NODE_RINGS_MAX) ||
        (mbox->magic != UCT_RC_SHARE_NODE_MAGIC)) {
        return NULL;
    }

    ring       = &mbox->rings[index];
    erp        = &engine->rings[slice * UCT_RC_SHARE_NODE_RINGS_MAX + index];
    er         = *erp;
    generation = ring->generation;
    ucs_memory_cpu_load_fence();

    if ((er != NULL) && (er->generation == generation)) {
        return (generation != 0) ? er : NULL;
    }

    if ((er != NULL) && (er->generation != 0)) {
        ucs_debug("rc_share node engine: ring %u of slice %u let go", index,
                  slice);
        engine->counters.dropped +=
                uct_rc_share_node_engine_release_held(engine, er);
        er->generation   = 0;
        ring->engine_gen = 0;
    }
    if (generation == 0) {
        return NULL;
    }

    if (!uct_rc_share_node_engine_ring_ok(engine, ring)) {
        ucs_error("rc_share node engine: ring %u of slice %u is malformed; "
                  "ignored", index, slice);
        ring->engine_gen = generation;
        return NULL;
    }

    if (er == NULL) {
        er = ucs_calloc(1, sizeof(*er), "rc_share_node_engine_ring");
        if (er == NULL) {
            return NULL;
        }
        ucs_queue_head_init(&er->held);
        *erp = er;
    }
    er->generation  = generation;
    er->ring        = ring;
    er->tx_base     = UCS_PTR_BYTE_OFFSET(engine->res->pool_address,
                                          ring->tx_offset);
    er->rx_base     = UCS_PTR_BYTE_OFFSET(engine->res->pool_address,
                                          ring->rx_offset);
    er->tx_taken    = 0;
    er->rx_head     = 0;
    er->rx_data_max = ring->rx_slot_size -
                      sizeof(uct_rc_share_node_rx_slot_t);
    er->tx_data_max = ring->slot_size - UCT_RC_SHARE_NODE_SLOT_HDR;
    ring->engine_gen = generation;
    ucs_debug("rc_share node engine: serving ring %u of slice %u (pid %u)",
              index, slice, ring->pid);
    return er;
}

/* ------------------------------------------------------------ receive */

/* Into the target's receive ring, if it has room */
static int uct_rc_share_node_engine_deliver(uct_rc_share_node_engine_ring_t *er,
                                            uint8_t am_id, const void *payload,
                                            size_t length)
{
    uct_rc_share_node_rx_slot_t *slot;

    if (er->rx_head - er->ring->rx_tail >= er->ring->num_slots) {
        return 0;
    }

    ucs_memory_cpu_load_fence();
    slot         = uct_rc_share_node_rx_slot(er->rx_base, er->ring,
                                             er->rx_head);
    slot->length = length;
    slot->am_id  = am_id;
    memcpy(slot->data, payload, length);
    ucs_memory_cpu_store_fence();
    er->ring->rx_head = ++er->rx_head;
    return 1;
}

/* The ring an engines' AM is for, or NULL: dropped (its iface is gone, or
 * never was, or the message is malformed) */
static uct_rc_share_node_engine_ring_t *
uct_rc_share_node_engine_rx_ring(uct_rc_share_node_engine_t *engine,
                                 const void *data, size_t length)
{
    const uct_rc_share_node_am_hdr_t *hdr = data;
    uct_rc_share_node_engine_ring_t *er;

    if (length < sizeof(*hdr)) {
        return NULL;
    }

    er = uct_rc_share_node_engine_ring(engine, hdr->slice, hdr->ring);
    if ((er == NULL) || (length - sizeof(*hdr) > er->rx_data_max)) {
        return NULL;
    }
    return er;
}

static int uct_rc_share_node_engine_rx(uct_rc_share_node_engine_ring_t *er,
                                       const void *data, size_t length)
{
    const uct_rc_share_node_am_hdr_t *hdr = data;

    return uct_rc_share_node_engine_deliver(er, hdr->am_id, hdr + 1,
                                            length - sizeof(*hdr));
}

static ucs_status_t uct_rc_share_node_engine_am_cb(void *arg, void *data,
                                                   size_t length,
                                                   unsigned flags)
{
    uct_rc_share_node_engine_t *engine = arg;
    uct_rc_share_node_engine_ring_t *er;
    uct_rc_share_node_held_t *held;

    er = uct_rc_share_node_engine_rx_ring(engine, data, length);
    if (er == NULL) {
        ++engine->counters.dropped;
        return UCS_OK;
    }

    /* In order: behind what waits for that ring already */
    if (ucs_queue_is_empty(&er->held) &&
        uct_rc_share_node_engine_rx(er, data, length)) {
        ++engine->counters.delivered;
        return UCS_OK;
    }

    if (!(flags & UCT_CB_PARAM_FLAG_DESC)) {
        ++engine->counters.dropped;
        return UCS_OK;
    }

    held         = UCS_PTR_BYTE_OFFSET(data, -(ptrdiff_t)sizeof(*held));
    held->length = length;
    ucs_queue_push(&er->held, &held->queue);
    ++engine->counters.held;
    ++engine->held_now;
    return UCS_INPROGRESS;
}

/* What waits for full rings, as they have room: a ring whose iface does
 * not progress holds the engine's buffers, not the other rings' messages */
static unsigned uct_rc_share_node_engine_deliver_held(
        uct_rc_share_node_engine_t *engine)
{
    unsigned i, count = 0;
    uct_rc_share_node_engine_ring_t *er;
    uct_rc_share_node_held_t *held;

    for (i = 0; i < engine->res->num_slices * UCT_RC_SHARE_NODE_RINGS_MAX;
         ++i) {
        er = engine->rings[i];
        if (er == NULL) {
            continue;
        }
        while (!ucs_queue_is_empty(&er->held)) {
            held = ucs_queue_head_elem_non_empty(&er->held,
                                                 uct_rc_share_node_held_t,
                                                 queue);
            if (!uct_rc_share_node_engine_rx(er, held + 1, held->length)) {
                break;
            }
            ucs_queue_pull_non_empty(&er->held);
            uct_iface_release_desc(held);
            ++engine->counters.delivered;
            --engine->held_now;
            ++count;
        }
    }
    return count;
}

/* ------------------------------------------------------------ send */

static ucs_status_t uct_rc_share_node_engine_ep_err(void *arg, uct_ep_h ep,
                                                    ucs_status_t status)
{
    uct_rc_share_node_engine_t *engine = arg;
    uct_rc_share_node_route_t *route;

    kh_foreach_value(&engine->routes, route, {
        if (route->ep == ep) {
            ucs_error("rc_share node engine: the connection to a node's "
                      "engine failed: %s; its operations fail",
                      ucs_status_string(status));
            route->status = status;
        }
    });
    return UCS_OK;
}

static uct_rc_share_node_route_t *
uct_rc_share_node_engine_route(uct_rc_share_node_engine_t *engine,
                               const uct_rc_share_node_tx_slot_t *slot)
{
    uct_rc_share_node_route_t *route;
    uct_ep_params_t params;
    ucs_status_t status;
    khiter_t iter;
    int ret;

    iter = kh_get(uct_rc_share_node_routes, &engine->routes, slot->engine.id);
    if (iter != kh_end(&engine->routes)) {
        return kh_val(&engine->routes, iter);
    }

    route = ucs_calloc(1, sizeof(*route), "rc_share_node_route");
    if (route == NULL) {
        return NULL;
    }

    params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                        UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = engine->iface;
    params.dev_addr   = (const uct_device_addr_t*)&slot->dev_addr;
    params.iface_addr = (const uct_iface_addr_t*)&slot->engine;
    status            = uct_ep_create(&params, &route->ep);
    if (status != UCS_OK) {
        ucs_error("rc_share node engine: no connection to engine 0x%" PRIx64
                  ": %s", slot->engine.id, ucs_status_string(status));
        route->ep     = NULL;
        route->status = status;
    }

    iter = kh_put(uct_rc_share_node_routes, &engine->routes, slot->engine.id,
                  &ret);
    kh_val(&engine->routes, iter) = route;
    ucs_debug("rc_share node engine: connection to engine 0x%" PRIx64,
              slot->engine.id);
    return route;
}

typedef struct {
    uct_rc_share_node_am_hdr_t hdr;
    const uct_rc_share_node_tx_slot_t *slot;
} uct_rc_share_node_am_pack_arg_t;

static size_t uct_rc_share_node_engine_pack_am(void *dest, void *arg)
{
    uct_rc_share_node_am_pack_arg_t *pack = arg;

    memcpy(dest, &pack->hdr, sizeof(pack->hdr));
    memcpy(UCS_PTR_BYTE_OFFSET(dest, sizeof(pack->hdr)), pack->slot->data,
           pack->slot->length);
    return sizeof(pack->hdr) + pack->slot->length;
}

static size_t uct_rc_share_node_engine_pack_put(void *dest, void *arg)
{
    const uct_rc_share_node_tx_slot_t *slot = arg;

    memcpy(dest, slot->data, slot->length);
    return slot->length;
}

static void uct_rc_share_node_engine_unpack_get(void *arg, const void *data,
                                                size_t length)
{
    uct_rc_share_node_tx_slot_t *slot = arg;

    memcpy(slot->data, data, length);
}

/* Posts one slot; UCS_ERR_NO_RESOURCE: not now, the slot stays first */
static ucs_status_t
uct_rc_share_node_engine_issue(uct_rc_share_node_engine_t *engine,
                               uct_rc_share_node_engine_ring_t *er,
                               uint64_t index,
                               uct_rc_share_node_tx_slot_t *slot)
{
    uct_ibshare_rkey_t rkey = { .va_offset = 0, .rkey = slot->rkey };
    uct_ibshare_mem_t memh  = { .mr = NULL, .lkey = slot->lkey };
    uct_rc_share_node_am_pack_arg_t pack;
    uct_rc_share_node_route_t *route;
    uct_iov_t iov;
    ucs_status_t status;
    ssize_t packed;
    uct_ep_h ep;

    route = uct_rc_share_node_engine_route(engine, slot);
    if (route == NULL) {
        return UCS_ERR_NO_RESOURCE; /* no memory: later */
    }
    if (route->status != UCS_OK) {
        uct_rc_share_node_slot_done(slot, route->status);
        return UCS_OK;
    }

    /* The slot is the node's memory: its lengths are checked as input */
    if ((slot->lkey == 0) &&
        (slot->length > ucs_min(er->tx_data_max,
                                (slot->op == UCT_RC_SHARE_NODE_OP_AM) ?
                                engine->am_max :
                                (slot->op == UCT_RC_SHARE_NODE_OP_PUT) ?
                                engine->put_max : engine->get_max))) {
        uct_rc_share_node_slot_done(slot, UCS_ERR_INVALID_PARAM);
        return UCS_OK;
    }

    ep           = route->ep;
    iov.buffer   = (void*)(uintptr_t)slot->local_addr;
    iov.length   = slot->length;
    iov.memh     = &memh;
    iov.stride   = 0;
    iov.count    = 1;
    if (slot->flags & UCT_RC_SHARE_NODE_SLOT_FENCE) {
        (void)uct_ep_fence(ep, 0);
    }

    switch (slot->op) {
    case UCT_RC_SHARE_NODE_OP_AM:
        pack.hdr.slice = slot->dst_slice;
        pack.hdr.ring  = slot->dst_ring;
        pack.hdr.am_id = slot->am_id;
        pack.slot      = slot;
        packed         = uct_ep_am_bcopy(ep, UCT_RC_SHARE_NODE_AM_ID,
                                         uct_rc_share_node_engine_pack_am,
                                         &pack, 0);
        status         = (packed < 0) ? (ucs_status_t)packed : UCS_OK;
        break;
    case UCT_RC_SHARE_NODE_OP_PUT:
        if (slot->lkey == 0) {
            packed = uct_ep_put_bcopy(ep, uct_rc_share_node_engine_pack_put,
                                      slot, slot->remote_addr,
                                      (uintptr_t)&rkey);
            status = (packed < 0) ? (ucs_status_t)packed : UCS_OK;
        } else {
            status = uct_ep_put_zcopy(ep, &iov, 1, slot->remote_addr,
                                      (uintptr_t)&rkey,
                                      uct_rc_share_node_engine_comp(er, index,
                                                                    slot));
        }
        break;
    case UCT_RC_SHARE_NODE_OP_GET:
        if (slot->lkey == 0) {
            status = uct_ep_get_bcopy(ep, uct_rc_share_node_engine_unpack_get,
                                      slot, slot->length, slot->remote_addr,
                                      (uintptr_t)&rkey,
                                      uct_rc_share_node_engine_comp(er, index,
                                                                    slot));
        } else {
            status = uct_ep_get_zcopy(ep, &iov, 1, slot->remote_addr,
                                      (uintptr_t)&rkey,
                                      uct_rc_share_node_engine_comp(er, index,
                                                                    slot));
        }
        break;
    case UCT_RC_SHARE_NODE_OP_ATOMIC_POST:
        status = uct_ep_atomic64_post(ep, slot->atomic_op, slot->value,
                                      slot->remote_addr, (uintptr_t)&rkey);
        break;
    case UCT_RC_SHARE_NODE_OP_ATOMIC_FETCH:
        status = uct_ep_atomic64_fetch(ep, slot->atomic_op, slot->value,
                                       (uint64_t*)&slot->value,
                                       slot->remote_addr, (uintptr_t)&rkey,
                                       uct_rc_share_node_engine_comp(er, index,
                                                                     slot));
        break;
    case UCT_RC_SHARE_NODE_OP_CSWAP:
        status = uct_ep_atomic_cswap64(ep, slot->compare, slot->value,
                                       slot->remote_addr, (uintptr_t)&rkey,
                                       (uint64_t*)&slot->value,
                                       uct_rc_share_node_engine_comp(er, index,
                                                                     slot));
        break;
    case UCT_RC_SHARE_NODE_OP_FLUSH:
        status = uct_ep_flush(ep, 0,
                              uct_rc_share_node_engine_comp(er, index, slot));
        break;
    default:
        status = UCS_ERR_INVALID_PARAM;
        break;
    }

    if (status == UCS_ERR_NO_RESOURCE) {
        return status;
    }
    ++engine->counters.posted;
    if (status != UCS_INPROGRESS) {
        uct_rc_share_node_slot_done(slot, status);
    }
    return UCS_OK;
}

/* What the ring's iface put in since the last time */
static unsigned uct_rc_share_node_engine_take(uct_rc_share_node_engine_t *engine,
                                              uct_rc_share_node_engine_ring_t *er)
{
    uint64_t head  = er->ring->tx_head;
    unsigned count = 0;
    uct_rc_share_node_tx_slot_t *slot;

    ucs_memory_cpu_load_fence();
    while (er->tx_taken != head) {
        slot = uct_rc_share_node_tx_slot(er->tx_base, er->ring, er->tx_taken);
        if (uct_rc_share_node_engine_issue(engine, er, er->tx_taken, slot) !=
            UCS_OK) {
            break;
        }
        ++er->tx_taken;
        ++count;
    }
    return count;
}

static unsigned uct_rc_share_node_engine_scan(uct_rc_share_node_engine_t *engine)
{
    uct_rc_share_node_engine_ring_t *er;
    unsigned slice, index, count = 0;

    for (slice = 0; slice < engine->res->num_slices; ++slice) {
        for (index = 0; index < UCT_RC_SHARE_NODE_RINGS_MAX; ++index) {
            er = uct_rc_share_node_engine_ring(engine, slice, index);
            if (er != NULL) {
                count += uct_rc_share_node_engine_take(engine, er);
            }
        }
    }
    return count;
}

static void *uct_rc_share_node_engine_thread(void *arg)
{
    uct_rc_share_node_engine_t *engine = arg;
    unsigned count, idle = 0;

    while (!engine->stop) {
        count  = uct_worker_progress(engine->worker);
        count += uct_rc_share_node_engine_scan(engine);
        if (engine->held_now != 0) {
            count += uct_rc_share_node_engine_deliver_held(engine);
        }
        if (count != 0) {
            idle = 0;
        } else if (++idle < 64) {
            sched_yield();
        } else {
            /* The ranks' cores are theirs: an idle engine sleeps */
            usleep(20);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ life cycle */

/* Any ring of another process still open */
static int uct_rc_share_node_engine_in_use(uct_rc_share_node_engine_t *engine)
{
    uct_rc_share_node_mailbox_t *mbox;
    unsigned slice, index;

    for (slice = 0; slice < engine->res->num_slices; ++slice) {
        mbox = uct_ibshare_resources_mailbox(engine->res, slice);
        if (mbox->magic != UCT_RC_SHARE_NODE_MAGIC) {
            continue;
        }
        for (index = 0; index < UCT_RC_SHARE_NODE_RINGS_MAX; ++index) {
            if (mbox->rings[index].generation != 0) {
                return 1;
            }
        }
    }
    return 0;
}

static void uct_rc_share_node_engine_destroy(uct_rc_share_node_engine_t *engine)
{
    uct_rc_share_node_route_t *route;
    unsigned i;

    engine->mbox->engine_ready = 0;
    if (engine->thread_started) {
        engine->stop = 1;
        pthread_join(engine->thread, NULL);
    }

    kh_foreach_value(&engine->routes, route, {
        if (route->ep != NULL) {
            uct_ep_destroy(route->ep);
        }
        ucs_free(route);
    });
    kh_destroy_inplace(uct_rc_share_node_routes, &engine->routes);

    if (engine->rings != NULL) {
        for (i = 0; i < engine->res->num_slices * UCT_RC_SHARE_NODE_RINGS_MAX;
             ++i) {
            if (engine->rings[i] != NULL) {
                uct_rc_share_node_engine_release_held(engine,
                                                      engine->rings[i]);
                engine->rings[i]->ring->engine_gen = 0;
                ucs_free(engine->rings[i]);
            }
        }
        ucs_free(engine->rings);
    }

    if (engine->iface != NULL) {
        ucs_info("rc_share node engine: posted %" PRIu64 " operations, "
                 "delivered %" PRIu64 " messages (%" PRIu64 " held for a "
                 "full ring), dropped %" PRIu64, engine->counters.posted,
                 engine->counters.delivered, engine->counters.held,
                 engine->counters.dropped);
        uct_iface_close(engine->iface);
    }
    if (engine->worker != NULL) {
        uct_worker_destroy(engine->worker);
    }
    if (engine->async != NULL) {
        ucs_async_context_destroy(engine->async);
    }
    ucs_free(engine);
}

static ucs_status_t
uct_rc_share_node_engine_create(uct_ibshare_md_t *md, const char *dev_name,
                                uct_rc_share_node_mailbox_t *mbox,
                                uct_rc_share_node_engine_t **engine_p)
{
    uct_rc_share_node_engine_t *engine;
    uct_iface_config_t *config;
    uct_iface_params_t params;
    uct_iface_attr_t attr;
    ucs_status_t status;
    int ret;

    engine = ucs_calloc(1, sizeof(*engine), "rc_share_node_engine");
    if (engine == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    engine->md   = md;
    engine->res  = md->res;
    engine->mbox = mbox;
    kh_init_inplace(uct_rc_share_node_routes, &engine->routes);

    engine->rings = ucs_calloc(engine->res->num_slices *
                               UCT_RC_SHARE_NODE_RINGS_MAX,
                               sizeof(*engine->rings),
                               "rc_share_node_engine_rings");
    if (engine->rings == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto err;
    }

    status = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                      &engine->async);
    if (status != UCS_OK) {
        goto err;
    }
    status = uct_worker_create(engine->async, UCS_THREAD_MODE_SINGLE,
                               &engine->worker);
    if (status != UCS_OK) {
        goto err;
    }

    status = uct_md_iface_config_read(&md->super, UCT_RC_SHARE_TL_NAME, NULL,
                                      NULL, &config);
    if (status != UCS_OK) {
        goto err;
    }
    /* The engine's own connections are per pair of engines */
    ucs_derived_of(config, uct_rc_share_iface_config_t)->node_conns = 0;

    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE |
                                  UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = UCT_RC_SHARE_TL_NAME;
    params.mode.device.dev_name = dev_name;
    params.rx_headroom          = sizeof(uct_rc_share_node_held_t);
    params.err_handler          = uct_rc_share_node_engine_ep_err;
    params.err_handler_arg      = engine;
    params.err_handler_flags    = 0;
    status = uct_iface_open(&md->super, engine->worker, &params, config,
                            &engine->iface);
    uct_config_release(config);
    if (status != UCS_OK) {
        goto err;
    }

    status = uct_iface_query(engine->iface, &attr);
    if (status != UCS_OK) {
        goto err;
    }
    engine->am_max  = attr.cap.am.max_bcopy -
                      sizeof(uct_rc_share_node_am_hdr_t);
    engine->put_max = attr.cap.put.max_bcopy;
    engine->get_max = attr.cap.get.max_bcopy;

    status = uct_iface_set_am_handler(engine->iface, UCT_RC_SHARE_NODE_AM_ID,
                                      uct_rc_share_node_engine_am_cb, engine,
                                      0);
    if (status != UCS_OK) {
        goto err;
    }
    uct_iface_progress_enable(engine->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);

    status = uct_iface_get_address(engine->iface,
                                   (uct_iface_addr_t*)&mbox->engine_addr);
    if (status != UCS_OK) {
        goto err;
    }

    ret = pthread_create(&engine->thread, NULL,
                         uct_rc_share_node_engine_thread, engine);
    if (ret != 0) {
        ucs_error("rc_share node engine: pthread_create failed: %s",
                  strerror(ret));
        status = UCS_ERR_IO_ERROR;
        goto err;
    }
    engine->thread_started = 1;

    mbox->engine_pid = getpid();
    mbox->magic      = UCT_RC_SHARE_NODE_MAGIC;
    ucs_memory_cpu_store_fence();
    mbox->engine_ready = 1;
    ucs_debug("%s: rc_share node engine 0x%" PRIx64 " started", dev_name,
              mbox->engine_addr.id);
    *engine_p = engine;
    return UCS_OK;

err:
    uct_rc_share_node_engine_destroy(engine);
    return status;
}

ucs_status_t uct_rc_share_node_engine_get(uct_ibshare_md_t *md,
                                          const char *dev_name,
                                          uct_rc_share_node_mailbox_t *mbox,
                                          uct_rc_share_node_engine_t **eng_p)
{
    ucs_status_t status = UCS_OK;

    pthread_mutex_lock(&uct_rc_share_node_engine_lock);
    if (uct_rc_share_node_engine_global == NULL) {
        status = uct_rc_share_node_engine_create(
                md, dev_name, mbox, &uct_rc_share_node_engine_global);
    }
    if (status == UCS_OK) {
        ++uct_rc_share_node_engine_global->refcount;
        *eng_p = uct_rc_share_node_engine_global;
    }
    pthread_mutex_unlock(&uct_rc_share_node_engine_lock);
    return status;
}

void uct_rc_share_node_engine_put(uct_rc_share_node_engine_t *engine)
{
    ucs_time_t deadline;

    pthread_mutex_lock(&uct_rc_share_node_engine_lock);
    if (--engine->refcount > 0) {
        pthread_mutex_unlock(&uct_rc_share_node_engine_lock);
        return;
    }
    uct_rc_share_node_engine_global = NULL;
    pthread_mutex_unlock(&uct_rc_share_node_engine_lock);

    /* The node's other processes still send through us: their traffic
     * would stop with the engine (doc/design/node-connections.md) */
    deadline = ucs_get_time() + ucs_time_from_sec(30.0);
    while (uct_rc_share_node_engine_in_use(engine) &&
           (ucs_get_time() < deadline)) {
        usleep(1000);
    }
    if (uct_rc_share_node_engine_in_use(engine)) {
        ucs_warn("rc_share node engine: stopping while processes of the node "
                 "still use it; their operations to other nodes fail");
    }
    uct_rc_share_node_engine_destroy(engine);
}
