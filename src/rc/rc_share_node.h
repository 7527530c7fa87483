/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Node connections (UCX_RC_SHARE_NODE_CONNS=on, a prototype; design in
 * doc/design/node-connections.md, "A: the leader posts for the node").
 *
 * The founder of the node group runs the node's engine: a thread with an
 * rc_share iface of its own, whose connections (one per pair of nodes, and
 * one to itself for the node's own processes) carry every rc_share
 * operation of every process of the node. A process's iface does not
 * connect at all: its endpoints put each operation in the iface's send
 * ring, in its slice of the node pool, and the engine posts it with the
 * process's own keys (the PD is the node's: every lkey is valid to the
 * engine). Active messages come back through the target iface's receive
 * ring, which the engine fills from its receive buffers. So the RC QPs of
 * a node are N + 1 at N nodes, whatever the ranks per node.
 *
 * Where the rings are: every shared-mode slice has a mailbox (ibshare_
 * resources.h) that holds a uct_rc_share_node_mailbox_t, with a ring pair
 * per iface of the process; the engine's address is in its own process's
 * mailbox, which a process finds by scanning the node's slices.
 *
 * Every ring has one writer per field: the iface fills send slots and
 * moves tx_head; the engine marks each slot done (in any order: the iface
 * retires them in order) and fills receive slots, moving rx_head; the
 * iface moves rx_tail.
 */
#ifndef UCT_RC_SHARE_NODE_H_
#define UCT_RC_SHARE_NODE_H_

#include "rc_share.h"

#include <ucs/datastruct/queue.h>


#define UCT_RC_SHARE_NODE_MAGIC        0x6962736e6f646531ull /* "ibsnode1" */
#define UCT_RC_SHARE_NODE_RINGS_MAX    8     /* ifaces per process */
#define UCT_RC_SHARE_NODE_RING_LEN     32    /* slots of a ring */
#define UCT_RC_SHARE_NODE_SLOT_HDR     256   /* send slot header */
#define UCT_RC_SHARE_NODE_AM_ID        0     /* the engines' own AM */


/* What an endpoint asks the engine to do */
typedef enum {
    UCT_RC_SHARE_NODE_OP_AM,        /* data in the slot */
    UCT_RC_SHARE_NODE_OP_PUT,       /* lkey 0: data in the slot */
    UCT_RC_SHARE_NODE_OP_GET,       /* lkey 0: into the slot */
    UCT_RC_SHARE_NODE_OP_ATOMIC_POST,
    UCT_RC_SHARE_NODE_OP_ATOMIC_FETCH,
    UCT_RC_SHARE_NODE_OP_CSWAP,
    UCT_RC_SHARE_NODE_OP_FLUSH,
    UCT_RC_SHARE_NODE_OP_LAST
} uct_rc_share_node_op_t;


/* A send slot's state */
enum {
    UCT_RC_SHARE_NODE_SLOT_POSTED = 1, /* the iface's, until the engine */
    UCT_RC_SHARE_NODE_SLOT_DONE   = 2  /* result and status are valid */
};

/* A send slot's flags */
#define UCT_RC_SHARE_NODE_SLOT_FENCE  UCS_BIT(0) /* after what came before */


/* In the iface address's mtu: a node ring follows (uct_rc_share_node_
 * addr_t), and the iface reaches only peers that have one */
#define UCT_RC_SHARE_ADDR_MTU_NODE     0x80

/* Where an iface of a process of another (or this) node is: its node's
 * engine, and its ring there. Follows the iface address on the wire. */
typedef struct UCS_S_PACKED uct_rc_share_node_addr {
    uct_rc_share_iface_addr_t engine;
    uint16_t                  slice;
    uint8_t                   ring;
} uct_rc_share_node_addr_t;


/* The engines' AM: its header, then the user's AM */
typedef struct UCS_S_PACKED uct_rc_share_node_am_hdr {
    uint16_t                  slice;        /* the target iface's ring */
    uint8_t                   ring;
    uint8_t                   am_id;        /* the user's */
} uct_rc_share_node_am_hdr_t;


typedef struct uct_rc_share_node_tx_slot {
    volatile uint32_t         state;        /* UCT_RC_SHARE_NODE_SLOT_xx */
    int32_t                   status;       /* ucs_status_t, when done */
    uint8_t                   op;           /* uct_rc_share_node_op_t */
    uint8_t                   am_id;
    uint8_t                   atomic_op;    /* uct_atomic_op_t */
    uint8_t                   dst_ring;
    uint16_t                  dst_slice;
    uint16_t                  flags;        /* UCT_RC_SHARE_NODE_SLOT_FENCE */
    uint32_t                  length;
    uint32_t                  lkey;         /* 0: the slot's data */
    uint32_t                  rkey;
    uint32_t                  reserved2;
    uint64_t                  local_addr;   /* as the lkey's MR knows it */
    uint64_t                  remote_addr;  /* resolved: as the rkey's */
    uint64_t                  value;        /* atomics; fetched: result */
    uint64_t                  compare;
    uct_rc_share_wire_device_addr_t dev_addr; /* the target's device */
    uct_rc_share_iface_addr_t engine;       /* and its node's engine */
    uint8_t                   data[0]
                              UCS_V_ALIGNED(UCT_RC_SHARE_NODE_SLOT_HDR);
} uct_rc_share_node_tx_slot_t;


typedef struct uct_rc_share_node_rx_slot {
    uint32_t                  length;
    uint8_t                   am_id;
    uint8_t                   data[0] UCS_V_ALIGNED(64);
} uct_rc_share_node_rx_slot_t;


/* A ring pair in a mailbox; the counters count slots since activation */
typedef struct uct_rc_share_node_ring {
    volatile uint64_t         generation;   /* 0: free; else who owns it */
    uint32_t                  slot_size;
    uint32_t                  num_slots;
    uint64_t                  tx_offset;    /* in the pool */
    uint64_t                  rx_offset;
    uint32_t                  rx_slot_size;
    uint32_t                  pid;
    uint8_t                   pad0[UCS_SYS_CACHE_LINE_SIZE - 40];
    volatile uint64_t         tx_head;      /* the iface's */
    uint8_t                   pad1[UCS_SYS_CACHE_LINE_SIZE - 8];
    volatile uint64_t         rx_head;      /* the engine's */
    volatile uint64_t         engine_gen;   /* the generation the engine
                                               serves; 0 once it let go */
    uint8_t                   pad2[UCS_SYS_CACHE_LINE_SIZE - 16];
    volatile uint64_t         rx_tail;      /* the iface's */
    uint8_t                   pad3[UCS_SYS_CACHE_LINE_SIZE - 8];
} uct_rc_share_node_ring_t;


typedef struct uct_rc_share_node_mailbox {
    volatile uint64_t         magic;        /* set once the rest is valid */
    volatile uint32_t         engine_ready; /* this process runs the engine */
    uint32_t                  engine_pid;
    uct_rc_share_iface_addr_t engine_addr;
    uint8_t                   pad[UCS_SYS_CACHE_LINE_SIZE - 16 -
                                  sizeof(uct_rc_share_iface_addr_t)];
    uct_rc_share_node_ring_t  rings[UCT_RC_SHARE_NODE_RINGS_MAX];
} uct_rc_share_node_mailbox_t;


/* The iface's side of its ring pair (rc_share_node_ep.c) */
/* The node's engine, in the founder's process (rc_share_node_engine.c) */
typedef struct uct_rc_share_node_engine uct_rc_share_node_engine_t;


/*
 * Join iface to the node connections: in the founder's process, start the
 * engine (or take a reference to it); in every process, claim a ring pair
 * and wait (at most timeout) for the engine's address. UCS_ERR_UNSUPPORTED:
 * the node group is not in shared mode; the iface then runs per pair.
 */
ucs_status_t uct_rc_share_node_iface_init(uct_rc_share_iface_t *iface,
                                          double timeout,
                                          uct_rc_share_node_iface_t **node_p);

void uct_rc_share_node_iface_cleanup(uct_rc_share_node_iface_t *node);

/* Our ring's address, which follows the iface address */
void uct_rc_share_node_iface_addr(const uct_rc_share_node_iface_t *node,
                                  uct_rc_share_node_addr_t *addr);

/* The operations of an iface whose endpoints are all node endpoints: its
 * endpoints', flush, fence, progress and event arming */
void uct_rc_share_node_ops_apply(uct_iface_ops_t *ops);

/* What changes in the iface's attributes: the engine's header takes room
 * in every AM, a zero-copy RMA has one scatter entry */
void uct_rc_share_node_iface_query(const uct_rc_share_node_iface_t *node,
                                   uct_iface_attr_t *attr);

/* Destroys the endpoints the user left */
void uct_rc_share_node_iface_destroy_eps(uct_rc_share_node_iface_t *node);


/* The engine's life cycle: the founder's node-mode ifaces hold it */
ucs_status_t uct_rc_share_node_engine_get(uct_ibshare_md_t *md,
                                          const char *dev_name,
                                          uct_rc_share_node_mailbox_t *mbox,
                                          uct_rc_share_node_engine_t **eng_p);

void uct_rc_share_node_engine_put(uct_rc_share_node_engine_t *engine);


static UCS_F_ALWAYS_INLINE uct_rc_share_node_tx_slot_t *
uct_rc_share_node_tx_slot(void *ring_base, const uct_rc_share_node_ring_t *ring,
                          uint64_t index)
{
    return UCS_PTR_BYTE_OFFSET(ring_base,
                               (index % ring->num_slots) * ring->slot_size);
}

static UCS_F_ALWAYS_INLINE uct_rc_share_node_rx_slot_t *
uct_rc_share_node_rx_slot(void *ring_base, const uct_rc_share_node_ring_t *ring,
                          uint64_t index)
{
    return UCS_PTR_BYTE_OFFSET(ring_base,
                               (index % ring->num_slots) * ring->rx_slot_size);
}

#endif
