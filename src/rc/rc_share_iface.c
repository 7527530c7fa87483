/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share iface: life cycle, port and GID selection, CQs and SRQ, receive
 * buffers, progress, query.
 */
#include "rc_share.h"
#include "rc_share_conn.h"
#include "rc_share_node.h"
#include "rc_share_qp.h"
#include "md/ibshare_device.h"

#include <ucs/arch/bitops.h>
#include <ucs/debug/log_def.h>
#include <ucs/sys/string.h>
#include <ucs/time/time.h>
#include <ucs/type/class.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>


#define UCT_RC_SHARE_RX_BATCH      16
#define UCT_RC_SHARE_POLL_BATCH    16

/* Bounds of the settings that need no device to check */
#define UCT_RC_SHARE_SEG_SIZE_MIN     64
#define UCT_RC_SHARE_SEG_SIZE_MAX     UCS_GBYTE
#define UCT_RC_SHARE_QUEUE_LEN_MAX    65536
#define UCT_RC_SHARE_CQ_LEN_MAX       4194304
#define UCT_RC_SHARE_MAX_INLINE_MAX   4096
/* IB's longest ACK timeout, 4.096 us * 2^31, and RNR timer, 655.36 ms */
#define UCT_RC_SHARE_TIMEOUT_MAX      8796.0
#define UCT_RC_SHARE_RNR_TIMEOUT_MAX  0.65536
/* The handshake's and the check's: longer only looks like a hang */
#define UCT_RC_SHARE_CONN_TIME_MAX    3600.0
#define UCT_RC_SHARE_MAX_CONNS_MAX    1048576
/* The AM flags a receiver knows */
#define UCT_RC_SHARE_IMM_KNOWN        (UCT_RC_SHARE_IMM_AM_MASK | \
                                       UCT_RC_SHARE_IMM_FC_MASK)


/* The settings UCX's RC transports share (UCX_RC_TIMEOUT and the like, from
 * their "RC_" sub-table): a job tuned for rc_verbs or rc_mlx5 gets the same
 * timeouts here, and UCX_RC_SHARE_NAME still overrides UCX_RC_NAME. */
static ucs_config_field_t uct_rc_share_rc_config_table[] = {
    {"TIMEOUT", "1.0s",
     "Transport retry timeout of RC QPs (local ACK timeout); with\n"
     "RETRY_COUNT it bounds how long a dead peer goes unnoticed. Above 0, at\n"
     "most 8796s (IB's longest).",
     ucs_offsetof(uct_rc_share_rc_config_t, timeout),
     UCS_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", "6",
     "Transport retries of RC QPs before the endpoint fails (0-6). 7 is not\n"
     "accepted: soft-RoCE (rxe) takes it as \"retry forever\", and a dead\n"
     "peer would then never be reported.",
     ucs_offsetof(uct_rc_share_rc_config_t, retry_count),
     UCS_CONFIG_TYPE_UINT},

    {"RNR_TIMEOUT", "30ms",
     "Delay before a send to a receiver with no free receive buffer is\n"
     "retried. Above 0, at most 655.36ms (IB's longest).",
     ucs_offsetof(uct_rc_share_rc_config_t, rnr_timeout),
     UCS_CONFIG_TYPE_TIME},

    {"RNR_RETRY_COUNT", "auto",
     "Receiver-not-ready retries before the endpoint fails (0-7). 7, as the\n"
     "InfiniBand specification defines it, retries as long as the receiver's\n"
     "QP lives: a receiver out of buffers pushes its senders back instead of\n"
     "failing them. A dead receiver is found otherwise: its QPs die with it\n"
     "(the transport retries, RETRY_COUNT, report it), or, in the node\n"
     "group's shared mode, where a killed member's QPs live on until the\n"
     "group ends, the endpoint check (CHECK_TIMEOUT, UCP's keepalive) does.\n"
     "\"auto\": 7 in both modes.",
     ucs_offsetof(uct_rc_share_rc_config_t, rnr_retry_count),
     UCS_CONFIG_TYPE_ULUNITS},

    {NULL}
};


ucs_config_field_t uct_rc_share_iface_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_rc_share_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"GID_INDEX", "auto",
     "Port GID table index used for RoCE traffic. \"auto\" takes the first\n"
     "RoCE v2 GID with an IPv4 address, then RoCE v2 IPv6, then RoCE v1, then\n"
     "any valid entry (index 0 for soft-RoCE on a link without an IP address).\n"
     "Ignored on InfiniBand ports. auto, or 0 to 255 below the port's GID\n"
     "table length.",
     ucs_offsetof(uct_rc_share_iface_config_t, gid_index),
     UCS_CONFIG_TYPE_ULUNITS},

    {"SEG_SIZE", "8256",
     "Size of a send or receive bounce buffer: the largest active message\n"
     "and the largest buffered put or get. 64 to 1g, at most the port's\n"
     "largest message.",
     ucs_offsetof(uct_rc_share_iface_config_t, seg_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"TX_QUEUE_LEN", "256",
     "Send work requests per endpoint (RC QP send queue length): 1 to 65536.",
     ucs_offsetof(uct_rc_share_iface_config_t, tx_queue_len),
     UCS_CONFIG_TYPE_UINT},

    {"TX_CQ_LEN", "4096",
     "Send completion queue length, shared by the endpoints of an iface:\n"
     "the most send operations in flight on the iface. 1 to 4194304.",
     ucs_offsetof(uct_rc_share_iface_config_t, tx_cq_len),
     UCS_CONFIG_TYPE_UINT},

    {"TX_CQ_MODERATION", "64",
     "Most active messages an endpoint sends in a row without asking for a\n"
     "completion (0: every one asks); one-sided operations (put, get,\n"
     "atomics) always ask, as do messages whose completion the user waits\n"
     "for. The completion of one request reports those before it. 0 to\n"
     "65536, lowered to a quarter of TX_QUEUE_LEN and of TX_CQ_LEN.",
     ucs_offsetof(uct_rc_share_iface_config_t, tx_cq_moderation),
     UCS_CONFIG_TYPE_UINT},

    {"RX_QUEUE_LEN", "256",
     "Receive buffers in the shared receive queue of an iface. They come from\n"
     "the rank's slice of the node pool (UCX_IBSHARE_SLICE_SIZE), like the\n"
     "send buffers (TX_MAX_BUFS), and a process may have two ifaces (Open\n"
     "MPI's pml and osc). 16 to 65536.",
     ucs_offsetof(uct_rc_share_iface_config_t, rx_queue_len),
     UCS_CONFIG_TYPE_UINT},

    {"MAX_INLINE", "128",
     "Largest send whose data is copied into the work request (short\n"
     "active messages and puts): 0 to 4096. The device may lower it.",
     ucs_offsetof(uct_rc_share_iface_config_t, max_inline),
     UCS_CONFIG_TYPE_MEMUNITS},

    UCT_IBSHARE_IFACE_MPOOL_CONFIG_FIELDS("TX_", 256, 64, "send",
            ucs_offsetof(uct_rc_share_iface_config_t, tx_mp),
            "\nOtherwise 1 or more; TX_BUFS_GROW 0 to 65536."),

    UCT_IBSHARE_IFACE_MPOOL_CONFIG_FIELDS("RX_", -1, 0, "receive",
            ucs_offsetof(uct_rc_share_iface_config_t, rx_mp),
            "\nOtherwise 1 or more; RX_BUFS_GROW 0 to 65536."),

    {"RC_", "", NULL,
     ucs_offsetof(uct_rc_share_iface_config_t, rc),
     UCS_CONFIG_TYPE_TABLE(uct_rc_share_rc_config_table)},

    {"MAX_RD_ATOMIC", "4",
     "RDMA reads and atomics in flight per endpoint, in each direction: 1 to\n"
     "16.",
     ucs_offsetof(uct_rc_share_iface_config_t, max_rd_atomic),
     UCS_CONFIG_TYPE_UINT},

    {"CONN_TIMEOUT", "30s",
     "How long an endpoint waits for the target iface to answer its\n"
     "connection request before it fails with a timeout. Above 0, at most 1\n"
     "hour.",
     ucs_offsetof(uct_rc_share_iface_config_t, conn_timeout),
     UCS_CONFIG_TYPE_TIME},

    {"FC_ENABLE", "y",
     "Credit-based flow control of active messages (like UCX's RC\n"
     "transports): a sender keeps at most FC_WND_SIZE messages ahead of what\n"
     "the receiver has processed; the receiver grants more on the QP the\n"
     "request came on.",
     ucs_offsetof(uct_rc_share_iface_config_t, fc_enable),
     UCS_CONFIG_TYPE_BOOL},

    {"FC_WND_SIZE", "512",
     "Flow control window: active messages an endpoint sends without a\n"
     "grant from the receiver (1-32767).",
     ucs_offsetof(uct_rc_share_iface_config_t, fc_wnd_size),
     UCS_CONFIG_TYPE_UINT},

    {"FC_SOFT_THRESH", "0.5",
     "Part of the window left when a sender asks for credits, with its\n"
     "message (above FC_HARD_THRESH, below 1).",
     ucs_offsetof(uct_rc_share_iface_config_t, fc_soft_thresh),
     UCS_CONFIG_TYPE_DOUBLE},

    {"FC_HARD_THRESH", "0.25",
     "Part of the window left when a sender asks again (above 0).",
     ucs_offsetof(uct_rc_share_iface_config_t, fc_hard_thresh),
     UCS_CONFIG_TYPE_DOUBLE},

    {"CONN_RETRY", "100ms",
     "Interval at which an unanswered connection request is sent again\n"
     "(the handshake runs over unreliable datagrams). Above 0, at most 1\n"
     "hour.",
     ucs_offsetof(uct_rc_share_iface_config_t, conn_retry),
     UCS_CONFIG_TYPE_TIME},

    {"CHECK_TIMEOUT", "10s",
     "How long the liveness check of an endpoint (ep_check, which UCP's\n"
     "keepalive calls) waits for the remote iface to answer before the\n"
     "endpoint fails with a timeout. The check is a message to the remote\n"
     "iface's handshake QP, resent every CONN_RETRY and answered from the\n"
     "remote process's async context, so it finds a dead process even in the\n"
     "node group's shared mode, where the QPs of a killed member live on and\n"
     "go on acknowledging RDMA. A dead peer is reported within\n"
     "UCX_KEEPALIVE_INTERVAL + CHECK_TIMEOUT; a live one answers within\n"
     "milliseconds, and 10 s leaves room for a loaded node or an emulated\n"
     "(TCG) guest. Above 0, at most 1 hour.",
     ucs_offsetof(uct_rc_share_iface_config_t, check_timeout),
     UCS_CONFIG_TYPE_TIME},

    {"MAX_CONNS", "4096",
     "Most connections of an iface: one per pair of ifaces that talk, in\n"
     "either direction or both. A connection request past it is refused\n"
     "(the requester's endpoint fails with \"no resources\"), as is a new\n"
     "endpoint. Bounds the QPs and memory a peer can make an iface hold.\n"
     "1 to 1048576.",
     ucs_offsetof(uct_rc_share_iface_config_t, max_conns),
     UCS_CONFIG_TYPE_UINT},

    {"INTRA_NODE", "auto",
     "Whether to reach the other processes of this node (same boot and IPC\n"
     "namespace, as UCX's shared-memory transports tell it), which costs a\n"
     "connection, a QP at each end, per pair of processes. auto: not for\n"
     "UCP when UCX_TLS (unset means all) has a shared-memory transport for\n"
     "active messages (posix or sysv, or sm, shm, mm, all), which then\n"
     "carries tag and RMA between them, unless the iface may carry atomics\n"
     "(UCP's device atomics must all go through one device; with\n"
     "UCX_ATOMIC_MODE=cpu they do not); always for a UCT user (an iface\n"
     "opened without UCP's features field: ucx_perftest -t rc_share).\n"
     "on: always (UCP given its transports by ucp_config_modify, which no\n"
     "environment shows); off: never, atomics or not. Peers in the same\n"
     "process are always reachable.",
     ucs_offsetof(uct_rc_share_iface_config_t, intra_node),
     UCS_CONFIG_TYPE_ON_OFF_AUTO},

    {"NODE_CONNS", "n",
     "A prototype (doc/design/node-connections.md): every endpoint goes\n"
     "through the node's engine, a thread of the node group's founder that\n"
     "holds one connection per pair of nodes (and one to its own node), so\n"
     "the node's RC QPs do not grow with its ranks. Needs shared mode, and\n"
     "the same setting on every process of the job; the processes of the\n"
     "node are reached through the engine too. Each iface takes two rings\n"
     "of 32 bounce buffers from its rank's slice.",
     ucs_offsetof(uct_rc_share_iface_config_t, node_conns),
     UCS_CONFIG_TYPE_BOOL},

    {NULL}
};


/* Lower is better; UINT_MAX means the entry is not usable */
static unsigned uct_rc_share_gid_rank(const struct ibv_gid_entry *entry)
{
    static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                 0xff, 0xff};
    static const union ibv_gid zero_gid;
    int is_v4 = !memcmp(entry->gid.raw, v4_mapped_prefix,
                        sizeof(v4_mapped_prefix));

    if (!memcmp(&entry->gid, &zero_gid, sizeof(zero_gid))) {
        return UINT_MAX;
    }

    switch (entry->gid_type) {
    case IBV_GID_TYPE_ROCE_V2:
        return is_v4 ? 0 : 1;
    case IBV_GID_TYPE_ROCE_V1:
        return is_v4 ? 2 : 3;
    default:
        return 4;
    }
}

static ucs_status_t uct_rc_share_iface_select_gid(uct_rc_share_iface_t *iface,
                                                  struct ibv_context *context,
                                                  unsigned long config_index)
{
    const char *dev_name = ibv_get_device_name(context->device);
    struct ibv_gid_entry entry;
    unsigned index, rank, best_rank = UINT_MAX;
    int ret;

    if (config_index != UCS_ULUNITS_AUTO) {
        if (config_index >= (unsigned long)iface->port_attr.gid_tbl_len) {
            ucs_error("%s:%d: UCX_RC_SHARE_GID_INDEX=%lu is out of range "
                      "(the GID table has %d entries)", dev_name,
                      iface->port_num, config_index,
                      iface->port_attr.gid_tbl_len);
            return UCS_ERR_INVALID_PARAM;
        }
        ret = ibv_query_gid_ex(context, iface->port_num, config_index, &entry,
                               0);
        if (ret != 0) {
            ucs_error("%s:%d: GID index %lu is not valid: %s", dev_name,
                      iface->port_num, config_index, strerror(ret));
            return UCS_ERR_INVALID_PARAM;
        }
        iface->gid_index = config_index;
        iface->gid       = entry.gid;
        return UCS_OK;
    }

    for (index = 0; index < (unsigned)iface->port_attr.gid_tbl_len; ++index) {
        if (ibv_query_gid_ex(context, iface->port_num, index, &entry, 0)) {
            continue; /* an empty slot of the table */
        }
        rank = uct_rc_share_gid_rank(&entry);
        if (rank < best_rank) {
            best_rank        = rank;
            iface->gid_index = index;
            iface->gid       = entry.gid;
        }
    }

    if (best_rank == UINT_MAX) {
        ucs_error("%s:%d: no valid GID in the port's GID table", dev_name,
                  iface->port_num);
        return UCS_ERR_NO_DEVICE;
    }

    return UCS_OK;
}

/* Link speed of the port in bytes per second, from its speed and width */
static double uct_rc_share_iface_bandwidth(const struct ibv_port_attr *attr)
{
    double gbps;
    int lanes;

    switch (attr->active_speed) {
    case 1:   gbps = 2.0;      break; /* SDR, 8b/10b */
    case 2:   gbps = 4.0;      break; /* DDR */
    case 4:   gbps = 8.0;      break; /* QDR */
    case 8:   gbps = 10.0;     break; /* FDR10 */
    case 16:  gbps = 13.64;    break; /* FDR */
    case 32:  gbps = 25.0;     break; /* EDR */
    case 64:  gbps = 50.0;     break; /* HDR */
    case 128: gbps = 100.0;    break; /* NDR */
    default:  gbps = 10.0;     break;
    }

    switch (attr->active_width) {
    case 2:  lanes = 4;  break;
    case 4:  lanes = 8;  break;
    case 8:  lanes = 12; break;
    case 16: lanes = 2;  break;
    default: lanes = 1;  break;
    }

    return gbps * lanes * 1e9 / 8 * 0.9;
}

static ucs_status_t uct_rc_share_iface_query(uct_iface_h tl_iface,
                                             uct_iface_attr_t *attr)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    size_t seg_size    = iface->config.seg_size;
    size_t max_msg     = iface->port_attr.max_msg_sz;
    size_t mtu         = 128ul << iface->config.path_mtu;

    uct_base_iface_query(&iface->super, attr);

    /* UCP 1.13 packs at most 31 bytes of a device address */
    UCS_STATIC_ASSERT(sizeof(uct_rc_share_wire_device_addr_t) <= 31);
    attr->device_addr_len = sizeof(uct_rc_share_wire_device_addr_t);
    attr->iface_addr_len  = sizeof(uct_rc_share_iface_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                            UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                            UCT_IFACE_FLAG_AM_ZCOPY |
                            UCT_IFACE_FLAG_PUT_SHORT |
                            UCT_IFACE_FLAG_PUT_BCOPY |
                            UCT_IFACE_FLAG_PUT_ZCOPY |
                            UCT_IFACE_FLAG_GET_BCOPY |
                            UCT_IFACE_FLAG_GET_ZCOPY |
                            UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                            UCT_IFACE_FLAG_EP_CHECK |
                            UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP |
                            UCT_IFACE_FLAG_EVENT_RECV |
                            UCT_IFACE_FLAG_EVENT_FD;

    if (iface->has_atomics) {
        attr->cap.flags |= UCT_IFACE_FLAG_ATOMIC_DEVICE;
        /* What plain verbs has: 64-bit fetch-and-add and compare-and-swap */
        attr->cap.atomic64.op_flags  = UCS_BIT(UCT_ATOMIC_OP_ADD);
        attr->cap.atomic64.fop_flags = UCS_BIT(UCT_ATOMIC_OP_ADD) |
                                       UCS_BIT(UCT_ATOMIC_OP_CSWAP);
    }

    attr->cap.am.max_short       = iface->config.max_inline;
    attr->cap.am.max_bcopy       = seg_size;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = seg_size;
    attr->cap.am.max_hdr         = iface->config.max_am_hdr;
    attr->cap.am.max_iov         = UCT_RC_SHARE_MAX_SEND_SGE - 1;
    attr->cap.am.opt_zcopy_align = UCS_SYS_PCI_MAX_PAYLOAD;
    attr->cap.am.align_mtu       = mtu;

    attr->cap.put.max_short       = iface->config.max_inline;
    attr->cap.put.max_bcopy       = seg_size;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = max_msg;
    attr->cap.put.max_iov         = UCT_RC_SHARE_MAX_SEND_SGE;
    attr->cap.put.opt_zcopy_align = UCS_SYS_PCI_MAX_PAYLOAD;
    attr->cap.put.align_mtu       = mtu;

    attr->cap.get.max_bcopy       = seg_size;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = max_msg;
    attr->cap.get.max_iov         = UCT_RC_SHARE_MAX_SEND_SGE;
    attr->cap.get.opt_zcopy_align = UCS_SYS_PCI_MAX_PAYLOAD;
    attr->cap.get.align_mtu       = mtu;

    /* The same model UCX uses for its verbs RC transport */
    attr->latency             = ucs_linear_func_make(700e-9 + 75e-9, 1e-9);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = uct_rc_share_iface_bandwidth(&iface->port_attr);
    attr->overhead            = 75e-9;
    attr->priority            = 0;
    if (iface->node != NULL) {
        uct_rc_share_node_iface_query(iface->node, attr);
    }
    return UCS_OK;
}

static ucs_status_t
uct_rc_share_iface_get_device_address(uct_iface_h tl_iface,
                                      uct_device_addr_t *addr)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    uct_rc_share_wire_device_addr_t *dev_addr =
            (uct_rc_share_wire_device_addr_t*)addr;

    dev_addr->path.flags = (iface->port_attr.link_layer ==
                            IBV_LINK_LAYER_ETHERNET) ?
                           UCT_RC_SHARE_ADDR_FLAG_ETH : 0;
    dev_addr->path.lid   = iface->port_attr.lid;
    dev_addr->path.gid   = iface->gid;
    dev_addr->locality   = iface->locality;
    return UCS_OK;
}

static ucs_status_t uct_rc_share_iface_get_address(uct_iface_h tl_iface,
                                                   uct_iface_addr_t *addr)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);

    uct_rc_share_conn_iface_addr(iface, (uct_rc_share_iface_addr_t*)addr);
    if (iface->node != NULL) {
        ((uct_rc_share_iface_addr_t*)addr)->mtu |= UCT_RC_SHARE_ADDR_MTU_NODE;
        uct_rc_share_node_iface_addr(iface->node,
                                     UCS_PTR_BYTE_OFFSET(addr,
                                             sizeof(uct_rc_share_iface_addr_t)));
    }
    return UCS_OK;
}

/* A peer in another process of this node, when UCP has shared memory for
 * it (rc_share_locality.h): said once per iface, at diag level, as the
 * usual case is a job that runs exactly so */
static int uct_rc_share_iface_node_peer_ok(uct_rc_share_iface_t *iface,
                                           const uct_rc_share_locality_t *peer)
{
    if (iface->config.node_peers ||
        !uct_rc_share_locality_same_node(&iface->locality, peer) ||
        uct_rc_share_locality_same_process(&iface->locality, peer)) {
        return 1;
    }

    if (!iface->node_peer_logged) {
        iface->node_peer_logged = 1;
        ucs_diag("%s:%d: processes of this node are left to UCX's shared "
                 "memory (UCX_TLS=%s); UCX_RC_SHARE_INTRA_NODE=on reaches "
                 "them over rc_share", iface->md->dev_name,
                 iface->port_num, getenv("UCX_TLS") ?: "all, by default");
    }
    return 0;
}

static int uct_rc_share_iface_is_reachable(const uct_iface_h tl_iface,
                                           const uct_device_addr_t *addr,
                                           const uct_iface_addr_t *iface_addr)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    const uct_rc_share_wire_device_addr_t *dev_addr =
            (const uct_rc_share_wire_device_addr_t*)addr;
    int is_eth = iface->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;

    if ((dev_addr == NULL) ||
        (!!(dev_addr->path.flags & UCT_RC_SHARE_ADDR_FLAG_ETH) != is_eth) ||
        !uct_rc_share_iface_node_peer_ok(iface, &dev_addr->locality)) {
        return 0;
    }

    /* A peer through a node engine and one per pair cannot talk: their
     * endpoints reach different things (UCX_RC_SHARE_NODE_CONNS differs) */
    if ((iface_addr != NULL) &&
        (!!(((const uct_rc_share_iface_addr_t*)iface_addr)->mtu &
            UCT_RC_SHARE_ADDR_MTU_NODE) != (iface->node != NULL))) {
        return 0;
    }

    /* InfiniBand: same subnet; RoCE: routed by IP, any GID may be reached */
    return is_eth || (dev_addr->path.gid.global.subnet_prefix ==
                      iface->gid.global.subnet_prefix);
}

UCT_IBSHARE_IFACE_OPS_ADAPT(uct_rc_share_iface_is_reachable)

/* ------------------------------------------------------------ receive */

static void uct_rc_share_rx_desc_init(void *obj, uint32_t lkey)
{
    uct_rc_share_rx_desc_t *desc = obj;

    desc->lkey = lkey;
}

static void uct_rc_share_tx_desc_init(void *obj, uint32_t lkey)
{
    uct_rc_share_tx_desc_t *desc = obj;

    desc->lkey = lkey;
}

static void uct_rc_share_iface_release_desc(uct_recv_desc_t *self, void *desc)
{
    uct_rc_share_iface_t *iface = ucs_container_of(self, uct_rc_share_iface_t,
                                                   release_desc);

    ucs_mpool_put_inline(UCS_PTR_BYTE_OFFSET(desc,
                                             -(ptrdiff_t)iface->config
                                                     .rx_headroom_offset));
}

/* Posts receive buffers to the SRQ; returns how many */
static unsigned uct_rc_share_iface_post_recv(uct_rc_share_iface_t *iface,
                                             unsigned count)
{
    struct ibv_recv_wr wrs[UCT_RC_SHARE_RX_BATCH], *bad_wr;
    struct ibv_sge sges[UCT_RC_SHARE_RX_BATCH];
    uct_rc_share_rx_desc_t *desc;
    unsigned i, n = ucs_min(count, UCT_RC_SHARE_RX_BATCH);
    int ret;

    for (i = 0; i < n; ++i) {
        desc = ucs_mpool_get_inline(&iface->rx_mp);
        if (desc == NULL) {
            break;
        }
        sges[i].addr   = uct_rc_share_buf_iova(iface,
                                 UCS_PTR_BYTE_OFFSET(
                                     desc, iface->config.rx_payload_offset));
        sges[i].length = iface->config.seg_size;
        sges[i].lkey   = desc->lkey;
        wrs[i].wr_id   = (uintptr_t)desc;
        wrs[i].sg_list = &sges[i];
        wrs[i].num_sge = 1;
        wrs[i].next    = &wrs[i + 1];
    }

    if (i == 0) {
        return 0;
    }

    wrs[i - 1].next = NULL;
    ret = ibv_post_srq_recv(iface->srq, wrs, &bad_wr);
    if (ret != 0) {
        ucs_fatal("ibv_post_srq_recv() failed: %s", strerror(ret));
    }
    return i;
}

static void uct_rc_share_iface_refill_rx(uct_rc_share_iface_t *iface)
{
    unsigned posted;

    while (iface->rx_to_post > 0) {
        posted = uct_rc_share_iface_post_recv(iface, iface->rx_to_post);
        if (posted == 0) {
            break; /* no buffer now; the next progress tries again */
        }
        iface->rx_to_post -= posted;
    }
}

/*
 * A message that is no valid active message of ours (no immediate data,
 * an AM id past UCT_AM_ID_MAX, flags we do not know): dropped and
 * counted, with a warning at most once a second. Only a peer we connected
 * with can send on the connection, but a broken or malicious one must not
 * abort the process (UCX's handler table asserts on the id).
 */
static UCS_F_NOINLINE void
uct_rc_share_iface_rx_drop(uct_rc_share_iface_t *iface,
                           const struct ibv_wc *wc, const char *why)
{
    ucs_time_t now = ucs_get_time();

    ++iface->counters.rx_dropped;
    if ((iface->rx_drop_logged == 0) ||
        (now - iface->rx_drop_logged >= ucs_time_from_sec(1.0))) {
        iface->rx_drop_logged = now;
        ucs_warn("%s:%d: dropped a message on QP 0x%x: %s (opcode %d, "
                 "flags 0x%x, immediate 0x%x, %u bytes; %" PRIu64 " dropped "
                 "in all)", iface->md->dev_name, iface->port_num, wc->qp_num,
                 why, wc->opcode, wc->wc_flags, ntohl(wc->imm_data),
                 wc->byte_len, iface->counters.rx_dropped);
    }
}

static UCS_F_ALWAYS_INLINE unsigned
uct_rc_share_iface_poll_rx(uct_rc_share_iface_t *iface)
{
    struct ibv_wc wc[UCT_RC_SHARE_POLL_BATCH];
    uct_rc_share_rx_desc_t *desc;
    ucs_status_t status;
    void *payload;
    uint32_t imm;
    uint8_t am_id;
    int i, n;

    n = uct_rc_share_cq_poll(iface->recv_cq, &iface->recv_stash,
                             UCT_RC_SHARE_POLL_BATCH, wc);
    if (n <= 0) {
        if (ucs_unlikely(iface->rx_to_post >= UCT_RC_SHARE_RX_BATCH)) {
            /* Buffers the user kept came back: with the receive queue
             * empty, senders wait in RNR retries and nothing arrives that
             * would repost them */
            uct_rc_share_iface_refill_rx(iface);
        }
        return 0;
    }

    for (i = 0; i < n; ++i) {
        desc = (uct_rc_share_rx_desc_t*)(uintptr_t)wc[i].wr_id;
        ++iface->rx_to_post;

        if (ucs_unlikely(wc[i].status != IBV_WC_SUCCESS)) {
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                ucs_diag("%s:%d: receive completion error on QP 0x%x: %s",
                         iface->md->dev_name, iface->port_num, wc[i].qp_num,
                         ibv_wc_status_str(wc[i].status));
            }
            ucs_mpool_put_inline(desc);
            continue;
        }

        imm = ntohl(wc[i].imm_data);
        if (ucs_unlikely((wc[i].opcode != IBV_WC_RECV) ||
                         !(wc[i].wc_flags & IBV_WC_WITH_IMM) ||
                         (imm & ~UCT_RC_SHARE_IMM_KNOWN) ||
                         ((imm & UCT_RC_SHARE_IMM_AM_MASK) >=
                          UCT_AM_ID_MAX))) {
            uct_rc_share_iface_rx_drop(iface, &wc[i],
                                       "not an active message of rc_share");
            ucs_mpool_put_inline(desc);
            continue;
        }

        if (ucs_unlikely(imm & UCT_RC_SHARE_IMM_FC_MASK) &&
            uct_rc_share_conn_fc_rx(iface, wc[i].qp_num, imm)) {
            ucs_mpool_put_inline(desc); /* a pure grant */
            continue;
        }

        payload = UCS_PTR_BYTE_OFFSET(desc, iface->config.rx_payload_offset);
        am_id   = imm & UCT_RC_SHARE_IMM_AM_MASK;
        if (ucs_unlikely(iface->super.am[am_id].cb == iface->am_stub)) {
            /* UCX's stub would log three lines a message: a peer that
             * sends ids nobody handles must not flood the log */
            uct_rc_share_iface_rx_drop(iface, &wc[i],
                                       "no handler for its active message "
                                       "id");
            ucs_mpool_put_inline(desc);
            continue;
        }
        iface->counters.rx_ops++;
        iface->counters.rx_bytes += wc[i].byte_len;
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id,
                           payload, wc[i].byte_len, "RX: AM");
        status = uct_iface_invoke_am(&iface->super, am_id, payload,
                                     wc[i].byte_len, UCT_CB_PARAM_FLAG_DESC);
        if (status == UCS_OK) {
            ucs_mpool_put_inline(desc);
        } else {
            /* The user keeps the buffer and releases it later */
            uct_recv_desc(UCS_PTR_BYTE_OFFSET(desc,
                                              iface->config.rx_headroom_offset)) =
                    &iface->release_desc;
        }
    }

    if (iface->rx_to_post >= UCT_RC_SHARE_RX_BATCH) {
        uct_rc_share_iface_refill_rx(iface);
    }
    return n;
}

/* Every receive completion there is, delivered (see
 * uct_rc_share_conn_iface_init) */
static void uct_rc_share_iface_drain_rx(uct_rc_share_iface_t *iface)
{
    while (uct_rc_share_iface_poll_rx(iface) != 0) {
    }
}

/* ------------------------------------------------------------ send */

static UCS_F_ALWAYS_INLINE unsigned
uct_rc_share_iface_poll_tx(uct_rc_share_iface_t *iface)
{
    struct ibv_wc wc[UCT_RC_SHARE_POLL_BATCH];
    uct_rc_share_conn_t *failed[UCT_RC_SHARE_POLL_BATCH];
    int i, n, num_failed;

    n = uct_rc_share_cq_poll(iface->send_cq, &iface->send_stash,
                             UCT_RC_SHARE_POLL_BATCH, wc);
    if (n <= 0) {
        if (ucs_unlikely(!ucs_arbiter_is_empty(&iface->arbiter))) {
            /* A request queued behind others while the resources were
             * there (a flush behind pending requests), or a group
             * rescheduled by a grant, waits for no completion */
            ucs_arbiter_dispatch(&iface->arbiter, 1,
                                 uct_rc_share_ep_process_pending, NULL);
        }
        return 0;
    }

    num_failed = uct_rc_share_conn_tx_complete(wc, n, failed);

    /* Reported after the batch: the handler may destroy the endpoint */
    for (i = 0; i < num_failed; ++i) {
        uct_rc_share_conn_report_failure(failed[i]);
    }

    if (ucs_unlikely(!ucs_list_is_empty(&iface->grants_owed))) {
        uct_rc_share_conn_grants_progress(iface);
    }

    ucs_arbiter_dispatch(&iface->arbiter, 1, uct_rc_share_ep_process_pending,
                         NULL);
    return n;
}

static unsigned uct_rc_share_iface_progress(uct_iface_h tl_iface)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    unsigned count;

    count  = uct_rc_share_iface_poll_rx(iface);
    count += uct_rc_share_iface_poll_tx(iface);
    /* A handshake event that came while the async context was blocked
     * waits in its missed queue, and only this runs it: UCP does it in its
     * progress, a plain UCT user (ucx_perftest) may not */
    ucs_async_check_miss(iface->super.worker->async);
    return count;
}

/* ------------------------------------------------------------ events */

static ucs_status_t uct_rc_share_iface_event_fd_get(uct_iface_h tl_iface,
                                                    int *fd_p)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);

    *fd_p = iface->comp_channel->fd;
    return UCS_OK;
}

static ucs_status_t uct_rc_share_iface_event_arm(uct_iface_h tl_iface,
                                                 unsigned events)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    struct ibv_cq *cq;
    void *cq_context;
    int got_event = 0;

    /* Drain what the channel holds: those completions are not seen yet */
    while (ibv_get_cq_event(iface->comp_channel, &cq, &cq_context) == 0) {
        ibv_ack_cq_events(cq, 1);
        got_event = 1;
    }

    if ((ibv_req_notify_cq(iface->recv_cq, 0) != 0) ||
        (ibv_req_notify_cq(iface->send_cq, 0) != 0)) {
        ucs_error("ibv_req_notify_cq() failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    if (got_event) {
        return UCS_ERR_BUSY;
    }

    /* A completion that arrived after the last progress and before arming
     * raises no event; nor does what the handshake's async side queues
     * for progress (a connection ready or failed, a liveness check's
     * verdict: a sleeper would learn of a dead peer only when something
     * else woke it, UCP's keepalive timer one interval later, a UCT user
     * maybe never). A live peer answers within a round trip, so that is
     * what polling costs it; a dead one, CHECK_TIMEOUT once. */
    if (uct_rc_share_cq_stash_fill(iface->recv_cq, &iface->recv_stash) ||
        uct_rc_share_cq_stash_fill(iface->send_cq, &iface->send_stash) ||
        uct_rc_share_conn_busy(iface)) {
        return UCS_ERR_BUSY;
    }

    return UCS_OK;
}

/* ------------------------------------------------------------ flush */

static ucs_status_t uct_rc_share_iface_flush(uct_iface_h tl_iface,
                                             unsigned flags,
                                             uct_completion_t *comp)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    ucs_status_t status         = UCS_OK;
    uct_rc_share_ep_t *ep;

    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED;
    }

    ucs_list_for_each(ep, &iface->ep_list, list) {
        /* Not done: each ep with WRs in flight gets a completion coming;
         * requests still pending are not issued yet (as rc's iface flush,
         * which counts an ep's NO_RESOURCE as in progress) */
        if (!ucs_arbiter_group_is_empty(&ep->arb_group) ||
            !uct_rc_share_ep_tx_idle(ep)) {
            status = UCS_INPROGRESS;
        }
    }
    return status;
}

static ucs_status_t uct_rc_share_iface_fence(uct_iface_h tl_iface,
                                             unsigned flags)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    uct_rc_share_ep_t *ep;

    ucs_list_for_each(ep, &iface->ep_list, list) {
        ep->txq->fence = 1;
    }
    return UCS_OK;
}

/* ------------------------------------------------------------ life cycle */

static ucs_status_t uct_rc_share_iface_create_queues(
        uct_rc_share_iface_t *iface, const uct_rc_share_iface_config_t *config)
{
    int flags;

    iface->comp_channel = ibv_create_comp_channel(iface->md->context);
    if (iface->comp_channel == NULL) {
        ucs_error("%s: ibv_create_comp_channel() failed: %m",
                  iface->md->dev_name);
        return UCS_ERR_IO_ERROR;
    }

    flags = fcntl(iface->comp_channel->fd, F_GETFL);
    if ((flags < 0) ||
        (fcntl(iface->comp_channel->fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
        ucs_error("fcntl(completion channel, O_NONBLOCK) failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    /* Beyond TX_CQ_LEN, the grants' own entries: what peers that post no
     * receive buffers hold (a grant to them never completes) is never the
     * data path's */
    iface->send_cq = uct_rc_share_cq_create(iface, config->tx_cq_len +
                                            uct_rc_share_conn_grant_reserve(
                                                    config->max_conns),
                                            iface->comp_channel);
    iface->recv_cq = uct_rc_share_cq_create(iface, config->rx_queue_len,
                                            iface->comp_channel);
    if ((iface->send_cq == NULL) || (iface->recv_cq == NULL)) {
        ucs_error("%s: ibv_create_cq(send %u, receive %u) failed: %m",
                  iface->md->dev_name, config->tx_cq_len,
                  config->rx_queue_len);
        return UCS_ERR_NO_RESOURCE;
    }
    iface->tx.cq_available = config->tx_cq_len;

    iface->srq = uct_rc_share_srq_create(iface, config->rx_queue_len);
    if (iface->srq == NULL) {
        ucs_error("%s: ibv_create_srq(%u) failed: %m", iface->md->dev_name,
                  config->rx_queue_len);
        return UCS_ERR_NO_RESOURCE;
    }

    return UCS_OK;
}

/* Whether UCX's generic UCX_RC_NAME sets the setting too ("RC_" table) */
static int uct_rc_share_config_inherited(const char *name)
{
    const ucs_config_field_t *field;

    for (field = uct_rc_share_rc_config_table; field->name != NULL; ++field) {
        if (!strcmp(field->name, name)) {
            return 1;
        }
    }
    return 0;
}

/* The variable a setting's value came from, for its error message:
 * UCX_RC_NAME when only UCX's generic name is set (RC_RETRY_COUNT=7 is
 * valid for rc_verbs), else UCX_RC_SHARE_NAME */
static const char *uct_rc_share_config_var(const char *name, char *buf,
                                           size_t max)
{
    ucs_snprintf_zero(buf, max, "UCX_RC_SHARE_%s", name);
    if ((getenv(buf) == NULL) && uct_rc_share_config_inherited(name)) {
        ucs_snprintf_zero(buf, max, "UCX_RC_%s", name);
        if (getenv(buf) == NULL) {
            ucs_snprintf_zero(buf, max, "UCX_RC_SHARE_%s", name);
        }
    }
    return buf;
}

/* A number as the user gave it: a negative one wraps around */
/* value is wrapped around at wrap (UINT_MAX or SIZE_MAX: the field's type) */
static int uct_rc_share_config_range_ok(const char *name, unsigned long value,
                                        unsigned long min, unsigned long max,
                                        unsigned long wrap)
{
    char str[32], var[64];

    if ((value >= min) && (value <= max)) {
        return 1;
    }

    ucs_error("%s=%s is out of range (accepted: %lu to %lu)",
              uct_rc_share_config_var(name, var, sizeof(var)),
              uct_ibshare_config_value_str(value, wrap, str, sizeof(str)),
              min, max);
    return 0;
}

static int uct_rc_share_config_uint_ok(const char *name, unsigned value,
                                       unsigned min, unsigned max)
{
    return uct_rc_share_config_range_ok(name, value, min, max, UINT_MAX);
}

static int uct_rc_share_config_size_ok(const char *name, size_t value,
                                       size_t min, size_t max)
{
    return uct_rc_share_config_range_ok(name, value, min, max, SIZE_MAX);
}

/* NaN fails both comparisons, and so is refused too */
static int uct_rc_share_config_time_ok(const char *name, double value,
                                       double max)
{
    char var[64];

    if ((value > 0) && (value <= max)) {
        return 1;
    }

    ucs_error("%s=%gs is out of range (accepted: above 0, at most %gs)",
              uct_rc_share_config_var(name, var, sizeof(var)), value, max);
    return 0;
}

static int uct_rc_share_config_mpool_ok(const char *prefix,
                                        const uct_iface_mpool_config_t *mp)
{
    int max_bufs = (int)mp->max_bufs; /* an INT setting, -1: no limit */
    char name[32];

    if ((max_bufs == -1) || (max_bufs > 0)) {
        ucs_snprintf_zero(name, sizeof(name), "%sBUFS_GROW", prefix);
        return uct_rc_share_config_uint_ok(name, mp->bufs_grow, 0,
                                           UCT_RC_SHARE_QUEUE_LEN_MAX);
    }

    ucs_error("UCX_RC_SHARE_%sMAX_BUFS=%d is out of range (accepted: -1 for "
              "no limit, or 1 to %d)", prefix, max_bufs, INT_MAX);
    return 0;
}

ucs_status_t
uct_rc_share_iface_config_check(const uct_rc_share_iface_config_t *config)
{
    char str[32], var[64];

    if ((config->gid_index != UCS_ULUNITS_AUTO) &&
        (config->gid_index > UINT8_MAX)) {
        ucs_error("UCX_RC_SHARE_GID_INDEX=%s is out of range (accepted: auto, "
                  "or 0 to %d, below the port's GID table length)",
                  uct_ibshare_config_value_str(config->gid_index, ULONG_MAX,
                                               str, sizeof(str)), UINT8_MAX);
        return UCS_ERR_INVALID_PARAM;
    }

    if ((config->rc.rnr_retry_count != UCS_ULUNITS_AUTO) &&
        (config->rc.rnr_retry_count > 7)) {
        ucs_error("%s=%s is out of range (accepted: auto, or 0 to 7)",
                  uct_rc_share_config_var("RNR_RETRY_COUNT", var,
                                          sizeof(var)),
                  uct_ibshare_config_value_str(config->rc.rnr_retry_count,
                                               ULONG_MAX, str, sizeof(str)));
        return UCS_ERR_INVALID_PARAM;
    }

    if (!uct_rc_share_config_size_ok("SEG_SIZE", config->seg_size,
                                     UCT_RC_SHARE_SEG_SIZE_MIN,
                                     UCT_RC_SHARE_SEG_SIZE_MAX) ||
        !uct_rc_share_config_uint_ok("TX_QUEUE_LEN", config->tx_queue_len, 1,
                                     UCT_RC_SHARE_QUEUE_LEN_MAX) ||
        !uct_rc_share_config_uint_ok("TX_CQ_LEN", config->tx_cq_len, 1,
                                     UCT_RC_SHARE_CQ_LEN_MAX) ||
        !uct_rc_share_config_uint_ok("TX_CQ_MODERATION",
                                     config->tx_cq_moderation, 0,
                                     UCT_RC_SHARE_QUEUE_LEN_MAX) ||
        !uct_rc_share_config_uint_ok("RX_QUEUE_LEN", config->rx_queue_len,
                                     UCT_RC_SHARE_RX_BATCH,
                                     UCT_RC_SHARE_QUEUE_LEN_MAX) ||
        !uct_rc_share_config_size_ok("MAX_INLINE", config->max_inline, 0,
                                     UCT_RC_SHARE_MAX_INLINE_MAX) ||
        !uct_rc_share_config_mpool_ok("TX_", &config->tx_mp) ||
        !uct_rc_share_config_mpool_ok("RX_", &config->rx_mp) ||
        !uct_rc_share_config_time_ok("TIMEOUT", config->rc.timeout,
                                     UCT_RC_SHARE_TIMEOUT_MAX) ||
        /* rxe takes a retry count of 7 as "retry forever" */
        !uct_rc_share_config_uint_ok("RETRY_COUNT", config->rc.retry_count, 0,
                                     6) ||
        !uct_rc_share_config_time_ok("RNR_TIMEOUT", config->rc.rnr_timeout,
                                     UCT_RC_SHARE_RNR_TIMEOUT_MAX) ||
        !uct_rc_share_config_uint_ok("MAX_RD_ATOMIC", config->max_rd_atomic,
                                     1, 16) ||
        !uct_rc_share_config_time_ok("CONN_TIMEOUT", config->conn_timeout,
                                     UCT_RC_SHARE_CONN_TIME_MAX) ||
        !uct_rc_share_config_time_ok("CONN_RETRY", config->conn_retry,
                                     UCT_RC_SHARE_CONN_TIME_MAX) ||
        !uct_rc_share_config_time_ok("CHECK_TIMEOUT", config->check_timeout,
                                     UCT_RC_SHARE_CONN_TIME_MAX) ||
        !uct_rc_share_config_uint_ok("FC_WND_SIZE", config->fc_wnd_size, 1,
                                     INT16_MAX) ||
        !uct_rc_share_config_uint_ok("MAX_CONNS", config->max_conns, 1,
                                     UCT_RC_SHARE_MAX_CONNS_MAX)) {
        return UCS_ERR_INVALID_PARAM;
    }

    if (!((config->fc_hard_thresh > 0) &&
          (config->fc_hard_thresh < config->fc_soft_thresh) &&
          (config->fc_soft_thresh < 1))) {
        ucs_error("UCX_RC_SHARE_FC_HARD_THRESH=%g and UCX_RC_SHARE_FC_SOFT_"
                  "THRESH=%g are out of range (accepted: 0 < FC_HARD_THRESH "
                  "< FC_SOFT_THRESH < 1)", config->fc_hard_thresh,
                  config->fc_soft_thresh);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/*
 * Whether the iface reaches the other processes of this node (the help of
 * INTRA_NODE; rc_share_locality.h). UCX_TLS is UCP's, which opens every
 * iface with its features: an iface opened without them (ucx_perftest -t,
 * Open MPI's btl/uct) has a UCT user, who has no shared memory of UCP's.
 * An iface that may carry atomics keeps them: UCP's device atomics are
 * atomic with each other only when they all go through the one device
 * (a peer that only sm reaches gets software atomics, which UCP refuses
 * beside device ones: "got software atomic request while device atomics
 * are selected"), unless UCX_ATOMIC_MODE=cpu makes them all the CPU's.
 */
static int
uct_rc_share_iface_node_peers(const uct_rc_share_iface_config_t *config,
                              const uct_iface_params_t *params)
{
    const char *atomic_mode = getenv("UCX_ATOMIC_MODE");
    uint64_t features;

    if (config->intra_node != UCS_CONFIG_AUTO) {
        return config->intra_node == UCS_CONFIG_ON;
    }
    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_FEATURES) ||
        !uct_rc_share_tls_has_shm(getenv("UCX_TLS"))) {
        return 1;
    }

    features = params->features;
    return (features & (UCT_IFACE_FEATURE_AMO32 | UCT_IFACE_FEATURE_AMO64)) &&
           ((atomic_mode == NULL) || (strcasecmp(atomic_mode, "cpu") != 0));
}

static ucs_status_t uct_rc_share_iface_init_config(
        uct_rc_share_iface_t *iface, const uct_rc_share_iface_config_t *config,
        const uct_iface_params_t *params)
{
    size_t rx_headroom = UCT_IFACE_PARAM_VALUE(params, rx_headroom,
                                               RX_HEADROOM, 0);

    /* The one bound that comes from the device */
    if (config->seg_size > iface->port_attr.max_msg_sz) {
        ucs_error("%s:%d: UCX_RC_SHARE_SEG_SIZE=%zu is out of range "
                  "(accepted: %d to %u, the port's largest message)",
                  iface->md->dev_name, iface->port_num, config->seg_size,
                  UCT_RC_SHARE_SEG_SIZE_MIN, iface->port_attr.max_msg_sz);
        return UCS_ERR_INVALID_PARAM;
    }

    iface->config.seg_size           = config->seg_size;
    iface->config.max_am_hdr         = ucs_min(config->seg_size / 2, 256);
    iface->config.tx_qp_len          = config->tx_queue_len;
    iface->tx.moderation             = ucs_min(config->tx_cq_moderation,
                                               ucs_min(config->tx_queue_len,
                                                       config->tx_cq_len) / 4);
    iface->config.max_inline         = config->max_inline;
    /* A multiple of 8: the pool puts its element header (a pointer) right
     * before the descriptor, and aligns the payload to a cache line */
    iface->config.rx_payload_offset  = ucs_align_up_pow2(
            sizeof(uct_rc_share_rx_desc_t) + sizeof(uct_recv_desc_t) +
            rx_headroom, sizeof(void*));
    iface->config.rx_headroom_offset = iface->config.rx_payload_offset -
                                       rx_headroom;
    iface->config.path_mtu           = iface->port_attr.active_mtu;
    iface->config.timeout            = uct_ibshare_to_qp_fabric_time(
                                               config->rc.timeout);
    iface->config.retry_count        = config->rc.retry_count;
    iface->config.rnr_timeout        = uct_ibshare_to_rnr_fabric_time(
                                               config->rc.rnr_timeout);
    /* Infinite in shared mode too: 6 retries of 30 ms failed the senders
     * of any receiver that paused for a fifth of a second (an incast); a
     * killed member's senders learn of it from the endpoint check */
    iface->config.rnr_retry_count    =
            (config->rc.rnr_retry_count != UCS_ULUNITS_AUTO) ?
            config->rc.rnr_retry_count : 7;
    iface->config.max_rd_atomic      = config->max_rd_atomic;
    iface->config.conn_timeout       = ucs_time_from_sec(config->conn_timeout);
    iface->config.conn_retry         = ucs_time_from_sec(config->conn_retry);
    iface->config.check_timeout      = ucs_time_from_sec(config->check_timeout);
    iface->config.max_conns          = config->max_conns;
    iface->config.node_peers         = uct_rc_share_iface_node_peers(config,
                                                                     params);
    iface->config.fc_enabled         = config->fc_enable;
    iface->config.fc_wnd_size        = config->fc_wnd_size;
    iface->config.fc_soft_thresh     = ucs_max((int)(config->fc_soft_thresh *
                                                     config->fc_wnd_size), 1);
    iface->config.fc_hard_thresh     = ucs_max((int)(config->fc_hard_thresh *
                                                     config->fc_wnd_size), 1);
    return UCS_OK;
}

/* The device may offer less inline data than asked: learn it from a QP */
static ucs_status_t uct_rc_share_iface_probe_inline(uct_rc_share_iface_t *iface)
{
    struct ibv_qp_init_attr init_attr;
    struct ibv_qp *qp;

    uct_rc_share_qp_init_attr(iface, &init_attr);
    while ((qp = uct_rc_share_qp_new(iface, &init_attr)) == NULL) {
        if (init_attr.cap.max_inline_data == 0) {
            ucs_error("%s: ibv_create_qp(RC, send_wr=%u) failed: %m",
                      iface->md->dev_name, iface->config.tx_qp_len);
            return UCS_ERR_NO_RESOURCE;
        }
        init_attr.cap.max_inline_data /= 2;
    }

    iface->config.max_inline = ucs_min(init_attr.cap.max_inline_data,
                                       iface->config.max_inline);
    uct_rc_share_qp_destroy(iface, qp);
    return UCS_OK;
}

static ucs_status_t uct_rc_share_iface_query_atomics(uct_rc_share_iface_t *iface)
{
    struct ibv_device_attr dev_attr;
    int ret;

    ret = ibv_query_device(iface->md->context, &dev_attr);
    if (ret != 0) {
        ucs_error("%s: ibv_query_device() failed: %s", iface->md->dev_name,
                  strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    iface->has_atomics = dev_attr.atomic_cap != IBV_ATOMIC_NONE;
    return UCS_OK;
}

static void uct_rc_share_iface_release(uct_rc_share_iface_t *iface)
{
    uct_rc_share_conn_async_stop(iface);
    if (!uct_ibshare_resources_owned(iface->md->res)) {
        /*
         * A fork child leaves the queues, connections and buffers as
         * inherited. The buffers are in the node pool, which it shares
         * with the parent (MAP_SHARED): returning a descriptor, or
         * cleaning a memory pool, writes into the parent's free and
         * in-flight elements (a child's ucs_mpool_cleanup cut the
         * parent's free lists: 63 descriptors lost per fork).
         */
        return;
    }
    if (iface->node != NULL) {
        uct_rc_share_node_iface_destroy_eps(iface->node);
        uct_rc_share_node_iface_cleanup(iface->node);
        iface->node = NULL;
    }
    uct_rc_share_conn_iface_cleanup(iface);
    uct_rc_share_tx_res_cleanup(&iface->tx); /* the queues' flushes are
                                                 back */
    if (iface->backlog_mp.data != NULL) {
        ucs_mpool_cleanup(&iface->backlog_mp, 1);
    }
    if (iface->srq != NULL) {
        uct_rc_share_srq_destroy(iface, iface->srq);
    }
    /* Buffers go after the queues that could still write into them */
    if (iface->rx_mp.data != NULL) {
        ucs_mpool_cleanup(&iface->rx_mp, 0);
    }
    if (iface->tx_mp.data != NULL) {
        ucs_mpool_cleanup(&iface->tx_mp, 1);
    }
    if (iface->send_cq != NULL) {
        uct_rc_share_cq_destroy(iface, iface->send_cq);
    }
    if (iface->recv_cq != NULL) {
        uct_rc_share_cq_destroy(iface, iface->recv_cq);
    }
    if (iface->comp_channel != NULL) {
        ibv_destroy_comp_channel(iface->comp_channel);
    }
}

static UCS_CLASS_INIT_FUNC(uct_rc_share_iface_t, uct_md_h tl_md,
                           uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    uct_rc_share_iface_config_t *config =
            ucs_derived_of(tl_config, uct_rc_share_iface_config_t);
    uct_ibshare_md_t *md = ucs_derived_of(tl_md, uct_ibshare_md_t);
    size_t rx_align, rx_align_offset;
    ucs_status_t status;
    int ret;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("rc_share supports only UCT_IFACE_OPEN_MODE_DEVICE");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_rc_share_iface_ops,
                              UCT_IBSHARE_IFACE_INTERNAL_OPS(
                                      uct_rc_share_iface_is_reachable),
                              tl_md, worker,
                              params, tl_config
                              UCS_STATS_ARG(params->stats_root)
                              UCS_STATS_ARG(UCT_RC_SHARE_TL_NAME));
    /* Classes are not zeroed: start every field of ours from zero */
    memset(UCS_PTR_BYTE_OFFSET(self, sizeof(self->super)), 0,
           sizeof(*self) - sizeof(self->super));
    /* Before anyone sets a handler, every id has UCX's stub */
    self->am_stub      = self->super.am[0].cb;
    self->md           = md;
    self->id           = ucs_generate_uuid((uintptr_t)self);
    uct_rc_share_locality_get(&self->locality);
    self->release_desc.cb = uct_rc_share_iface_release_desc;
    ucs_list_head_init(&self->ep_list);
    ucs_arbiter_init(&self->arbiter);
    self->put_inl_wr.opcode  = IBV_WR_RDMA_WRITE;
    self->put_inl_wr.sg_list = &self->put_inl_sge;
    self->put_inl_wr.num_sge = 1;

    status = uct_rc_share_iface_config_check(config);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_ibshare_device_parse_port(params->mode.device.dev_name,
                                           md->dev_name, &self->port_num);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_ibshare_md_resources(md);
    if (status != UCS_OK) {
        return status;
    }

    ret = ibv_query_port(md->context, self->port_num, &self->port_attr);
    if (ret != 0) {
        ucs_error("%s: ibv_query_port(%d) failed: %s", md->dev_name,
                  self->port_num, strerror(ret));
        return UCS_ERR_NO_DEVICE;
    }

    if (self->port_attr.state != IBV_PORT_ACTIVE) {
        ucs_error("%s:%d: port is not active (state %s)", md->dev_name,
                  self->port_num, ibv_port_state_str(self->port_attr.state));
        return UCS_ERR_NO_DEVICE;
    }

    status = uct_rc_share_iface_select_gid(self, md->context,
                                           config->gid_index);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_rc_share_iface_init_config(self, config, params);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_rc_share_iface_query_atomics(self);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_rc_share_iface_create_queues(self, config);
    if (status != UCS_OK) {
        goto err;
    }

    status = uct_rc_share_iface_probe_inline(self);
    if (status != UCS_OK) {
        goto err;
    }

    /* Node connections: the rings first, as they must be in the slice;
     * the iface's own buffers are then only the per-pair path's, which
     * its endpoints never take (nor its receive queue: none is posted) */
    if (config->node_conns) {
        status = uct_rc_share_node_iface_init(self, md->share.join_timeout,
                                              &self->node);
        if (status == UCS_ERR_UNSUPPORTED) {
            ucs_warn("%s:%d: UCX_RC_SHARE_NODE_CONNS=on needs the node "
                     "group in shared mode (it runs %s); connecting per "
                     "pair of ifaces", md->dev_name, self->port_num,
                     uct_ibshare_group_mode_str(md->res->mode));
        } else if (status != UCS_OK) {
            goto err;
        } else {
            uct_rc_share_node_ops_apply(&self->super.super.ops);
        }
    }

    /* Bounce buffers come from the rank's slice of the node pool, which
     * is registered already */
    self->buf_va_offset = md->res->va_offset;
    status = uct_ibshare_mpool_init(md->res, &self->tx_mp,
                                    sizeof(uct_rc_share_tx_desc_t) +
                                    self->config.seg_size,
                                    sizeof(uct_rc_share_tx_desc_t),
                                    UCS_SYS_CACHE_LINE_SIZE,
                                    config->tx_mp.bufs_grow,
                                    config->tx_mp.max_bufs,
                                    uct_rc_share_tx_desc_init, "rc_share_tx");
    if (status != UCS_OK) {
        goto err;
    }

    /* The payload aligned as the user asks (am_alignment and its offset),
     * by default to a cache line */
    if ((params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT) &&
        !ucs_is_pow2(params->am_alignment)) {
        ucs_error("rc_share: am_alignment %zu is not a power of 2",
                  params->am_alignment);
        status = UCS_ERR_INVALID_PARAM;
        goto err;
    }
    status = uct_iface_param_am_alignment(params, self->config.seg_size,
                                          self->config.rx_payload_offset,
                                          self->config.rx_payload_offset,
                                          &rx_align, &rx_align_offset);
    if (status != UCS_OK) {
        goto err;
    }

    status = uct_ibshare_mpool_init(md->res, &self->rx_mp,
                                    self->config.rx_payload_offset +
                                    self->config.seg_size,
                                    rx_align_offset, rx_align,
                                    (config->rx_mp.bufs_grow != 0) ?
                                    config->rx_mp.bufs_grow :
                                    config->rx_queue_len,
                                    config->rx_mp.max_bufs,
                                    uct_rc_share_rx_desc_init, "rc_share_rx");
    if (status != UCS_OK) {
        goto err;
    }

    self->rx_to_post = (self->node == NULL) ? config->rx_queue_len : 0;
    uct_rc_share_iface_refill_rx(self);
    if (self->rx_to_post != 0) {
        ucs_error("%s: could not post %u receive buffers",
                  md->dev_name, config->rx_queue_len);
        status = UCS_ERR_NO_MEMORY;
        goto err;
    }

    status = uct_rc_share_tx_res_init(&self->tx);
    if (status != UCS_OK) {
        goto err;
    }

    status = uct_ibshare_ucx_mpool_init(&self->backlog_mp, 0,
                            sizeof(uct_rc_share_backlog_op_t) +
                            self->config.max_inline, 0, sizeof(uint64_t), 16,
                            UINT_MAX, &uct_rc_share_malloc_mpool_ops,
                            "rc_share_backlog");
    if (status != UCS_OK) {
        goto err;
    }

    status = uct_rc_share_conn_iface_init(self, uct_rc_share_iface_drain_rx);
    if (status != UCS_OK) {
        goto err;
    }

    /* Last: from here the async context may answer handshakes */
    status = uct_rc_share_conn_async_start(self);
    if (status != UCS_OK) {
        goto err;
    }


    ucs_debug("%s:%d: rc_share iface %p (0x%" PRIx64 "): GID index %d, MTU "
              "%d, inline %u", md->dev_name, self->port_num, self, self->id,
              self->gid_index, 128 << self->config.path_mtu,
              self->config.max_inline);
    return UCS_OK;

err:
    uct_rc_share_iface_release(self);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_rc_share_iface_t)
{
    const uct_rc_share_counters_t *c = &self->counters;
    uct_rc_share_ep_t *ep, *tmp;

    /* The endpoints go first, with the iface they need (as UCX's tcp iface
     * does): their connections, then every QP, stop before the buffers
     * that the device could still write go (iface_release) */
    if (!ucs_list_is_empty(&self->ep_list)) {
        ucs_warn("rc_share iface %p closed with %zu endpoints still open; "
                 "destroying them", self, ucs_list_length(&self->ep_list));
        ucs_list_for_each_safe(ep, tmp, &self->ep_list, list) {
            uct_rc_share_ep_destroy(&ep->super.super);
        }
    }

    ucs_info("rc_share %s:%d: sent %" PRIu64 " AM (%" PRIu64 " bytes), %"
             PRIu64 " put (%" PRIu64 " bytes), %" PRIu64 " get (%" PRIu64
             " bytes), %" PRIu64 " atomics; received %" PRIu64 " AM (%" PRIu64
             " bytes); %" PRIu64 " endpoints, %" PRIu64 " connections (%"
             PRIu64 " opened by peers), %u left; dropped %" PRIu64
             " messages, %" PRIu64 " handshake messages; refused %" PRIu64
             " connections", self->md->dev_name, self->port_num, c->am_ops,
             c->am_bytes, c->put_ops, c->put_bytes, c->get_ops, c->get_bytes,
             c->atomic_ops, c->rx_ops, c->rx_bytes, c->eps, c->conns,
             c->conns_by_peers,
             (self->conn != NULL) ? uct_rc_share_conn_count(self) : 0,
             c->rx_dropped, c->hs_dropped, c->hs_refused);

    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    ucs_arbiter_cleanup(&self->arbiter);
    uct_rc_share_iface_release(self);
}

UCS_CLASS_DEFINE(uct_rc_share_iface_t, uct_base_iface_t);

static UCS_CLASS_DEFINE_DELETE_FUNC(uct_rc_share_iface_t, uct_iface_t);

uct_iface_ops_t uct_rc_share_iface_ops = {
    .ep_am_short              = uct_rc_share_ep_am_short,
    .ep_am_short_iov          = uct_base_ep_am_short_iov,
    .ep_am_bcopy              = uct_rc_share_ep_am_bcopy,
    .ep_am_zcopy              = uct_rc_share_ep_am_zcopy,
    .ep_put_short             = uct_rc_share_ep_put_short,
    .ep_put_bcopy             = uct_rc_share_ep_put_bcopy,
    .ep_put_zcopy             = uct_rc_share_ep_put_zcopy,
    .ep_get_bcopy             = uct_rc_share_ep_get_bcopy,
    .ep_get_zcopy             = uct_rc_share_ep_get_zcopy,
    .ep_atomic64_post         = uct_rc_share_ep_atomic64_post,
    .ep_atomic64_fetch        = uct_rc_share_ep_atomic64_fetch,
    .ep_atomic_cswap64        = uct_rc_share_ep_atomic_cswap64,
    .ep_atomic32_post         = (uct_ep_atomic32_post_func_t)
                                        ucs_empty_function_return_unsupported,
    .ep_atomic32_fetch        = (uct_ep_atomic32_fetch_func_t)
                                        ucs_empty_function_return_unsupported,
    .ep_atomic_cswap32        = (uct_ep_atomic_cswap32_func_t)
                                        ucs_empty_function_return_unsupported,
    .ep_pending_add           = uct_rc_share_ep_pending_add,
    .ep_pending_purge         = uct_rc_share_ep_pending_purge,
    .ep_flush                 = uct_rc_share_ep_flush,
    .ep_fence                 = uct_rc_share_ep_fence,
    .ep_check                 = uct_rc_share_ep_check,
    .ep_create                = uct_rc_share_ep_create,
    .ep_destroy               = uct_rc_share_ep_destroy,
    .iface_flush              = uct_rc_share_iface_flush,
    .iface_fence              = uct_rc_share_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_rc_share_iface_progress,
    .iface_event_fd_get       = uct_rc_share_iface_event_fd_get,
    .iface_event_arm          = uct_rc_share_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_rc_share_iface_t),
    .iface_query              = uct_rc_share_iface_query,
    .iface_get_device_address = uct_rc_share_iface_get_device_address,
    .iface_get_address        = uct_rc_share_iface_get_address,
    .iface_is_reachable       = UCT_IBSHARE_IFACE_IS_REACHABLE(
                                        uct_rc_share_iface_is_reachable)
};

UCS_CLASS_DEFINE_NEW_FUNC(uct_rc_share_iface_t, uct_iface_t, uct_md_h,
                          uct_worker_h, const uct_iface_params_t*,
                          const uct_iface_config_t*);

ucs_status_t uct_rc_share_query_tl_devices(uct_md_h tl_md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p)
{
    uct_ibshare_md_t *md = ucs_derived_of(tl_md, uct_ibshare_md_t);

    return uct_ibshare_device_query_ports(md->dev_name, devices_p,
                                          num_devices_p);
}
