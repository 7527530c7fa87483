/**
 * rc_share connection establishment: RC QP state transitions and the UD
 * handshake (see rc_share_conn.h).
 *
 * The UD CQ has a completion channel of its own, whose fd is handled in the
 * worker's async context (a thread, or a signal): a target creates the
 * passive QP and answers a request even while its process never calls
 * progress, and a requester's QP is connected as soon as the reply is in.
 * Only the main thread changes an endpoint's state and posts its WRs: the
 * async side moves the endpoint to conn.ready and schedules the main thread
 * through the worker's progress queue. Everything of the handshake (the UD
 * QP and its buffers, the lists, the retired AHs) is touched under
 * UCS_ASYNC_BLOCK, which the async side holds while its handler runs; the
 * data path never takes it.
 *
 * The same UD QPs carry the liveness check of connected endpoints
 * (ep_check): the RC QPs of a process killed in the node group's shared
 * mode belong to the shared uverbs file and live on, still acknowledging
 * RDMA, so only its handshake side, which nobody answers on any more, tells
 * that it is gone. The main thread times the checks with the requests.
 */
#include "rc_share_conn.h"

#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/time/time.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>


#define UCT_RC_SHARE_CONN_QKEY      0x1ee7a330u
#define UCT_RC_SHARE_CONN_RX_COUNT  64
#define UCT_RC_SHARE_CONN_TX_COUNT  32
#define UCT_RC_SHARE_GRH_LEN        40
#define UCT_RC_SHARE_CONN_BUF_SIZE  128   /* GRH + message, rounded up */
#define UCT_RC_SHARE_PSN_MASK       0xffffffu
#define UCT_RC_SHARE_CONN_SEND_WR   UINT64_MAX /* receives use their index */
#define UCT_RC_SHARE_GRANT_CQ_LEN   256
#define UCT_RC_SHARE_PASSIVE_SQ_LEN 16   /* a passive QP sends only grants;
                                            one refused finds others in
                                            flight */


ucs_status_t uct_rc_share_conn_msg_check(const void *buf, size_t length)
{
    const uct_rc_share_conn_msg_t *msg = buf;

    if (length != sizeof(*msg)) {
        return UCS_ERR_MESSAGE_TRUNCATED;
    }
    if (msg->magic != UCT_RC_SHARE_CONN_MAGIC) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (msg->version != UCT_RC_SHARE_CONN_VERSION) {
        return UCS_ERR_UNSUPPORTED;
    }
    if ((msg->type < UCT_RC_SHARE_CONN_REQ) ||
        (msg->type > UCT_RC_SHARE_CONN_CHECK_REP) ||
        (msg->mtu < IBV_MTU_256) || (msg->mtu > IBV_MTU_4096) ||
        (msg->rc_qpn & ~UCT_RC_SHARE_PSN_MASK) ||
        (msg->psn & ~UCT_RC_SHARE_PSN_MASK) ||
        (msg->ud_qpn & ~UCT_RC_SHARE_PSN_MASK) ||
        (msg->dst_rc_qpn & ~UCT_RC_SHARE_PSN_MASK)) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* Only an answer carries a result, and always one */
    if ((msg->type == UCT_RC_SHARE_CONN_CHECK_REP) ?
        ((msg->result != UCT_RC_SHARE_CONN_CHECK_CONNECTED) &&
         (msg->result != UCT_RC_SHARE_CONN_CHECK_NO_CONN)) :
        (msg->result != 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

static const char *uct_rc_share_dev_name(const uct_rc_share_iface_t *iface)
{
    return iface->md->dev_name;
}

static UCS_F_ALWAYS_INLINE ucs_async_context_t *
uct_rc_share_conn_async(const uct_rc_share_iface_t *iface)
{
    return iface->super.worker->async;
}

static void uct_rc_share_ah_attr_fill(const uct_rc_share_iface_t *iface,
                                      const uct_rc_share_device_addr_t *dev,
                                      struct ibv_ah_attr *ah_attr)
{
    memset(ah_attr, 0, sizeof(*ah_attr));
    ah_attr->port_num = iface->port_num;
    ah_attr->dlid     = dev->lid;
    if ((dev->flags & UCT_RC_SHARE_ADDR_FLAG_ETH) ||
        (dev->gid.global.subnet_prefix != iface->gid.global.subnet_prefix)) {
        ah_attr->is_global      = 1;
        ah_attr->grh.dgid       = dev->gid;
        ah_attr->grh.sgid_index = iface->gid_index;
        ah_attr->grh.hop_limit  = 64;
    }
}

static struct ibv_ah *
uct_rc_share_ah_create(uct_rc_share_iface_t *iface,
                       const uct_rc_share_device_addr_t *dev)
{
    struct ibv_ah_attr ah_attr;
    struct ibv_ah *ah;

    uct_rc_share_ah_attr_fill(iface, dev, &ah_attr);
    ah = ibv_create_ah(iface->md->pd, &ah_attr);
    if (ah == NULL) {
        ucs_error("%s:%d: ibv_create_ah() failed: %m",
                  uct_rc_share_dev_name(iface), iface->port_num);
    }
    return ah;
}

void uct_rc_share_qp_init_attr(const uct_rc_share_iface_t *iface,
                               struct ibv_qp_init_attr *init_attr)
{
    memset(init_attr, 0, sizeof(*init_attr));
    init_attr->qp_type             = IBV_QPT_RC;
    init_attr->send_cq             = iface->send_cq;
    init_attr->recv_cq             = iface->recv_cq;
    init_attr->srq                 = iface->srq;
    init_attr->cap.max_send_wr     = iface->config.tx_qp_len;
    init_attr->cap.max_send_sge    = UCT_RC_SHARE_MAX_SEND_SGE;
    init_attr->cap.max_inline_data = iface->config.max_inline;
    /* Selective signaling (rc_share_ep.c), unless moderation is off */
    init_attr->sq_sig_all          = (iface->config.tx_moderation == 0);
}

ucs_status_t uct_rc_share_qp_create(uct_rc_share_iface_t *iface,
                                    struct ibv_cq *send_cq,
                                    unsigned max_send_wr,
                                    struct ibv_qp **qp_p)
{
    struct ibv_qp_init_attr init_attr;
    struct ibv_qp_attr attr;
    struct ibv_qp *qp;
    int ret;

    uct_rc_share_qp_init_attr(iface, &init_attr);
    init_attr.send_cq         = send_cq;
    init_attr.cap.max_send_wr = max_send_wr;

    qp = ibv_create_qp(iface->md->pd, &init_attr);
    if (qp == NULL) {
        ucs_error("%s:%d: ibv_create_qp(RC, send_wr=%u inline=%u) failed: %m",
                  uct_rc_share_dev_name(iface), iface->port_num,
                  iface->config.tx_qp_len, iface->config.max_inline);
        return UCS_ERR_NO_RESOURCE;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = iface->port_num;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC;
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (ret != 0) {
        ucs_error("ibv_modify_qp(RC QP 0x%x, INIT) failed: %s", qp->qp_num,
                  strerror(ret));
        ibv_destroy_qp(qp);
        return UCS_ERR_IO_ERROR;
    }

    *qp_p = qp;
    return UCS_OK;
}

/* INIT -> RTR -> RTS towards the remote QP */
static ucs_status_t
uct_rc_share_qp_connect(uct_rc_share_iface_t *iface, struct ibv_qp *qp,
                        const uct_rc_share_device_addr_t *dev,
                        uint32_t remote_qpn, uint32_t remote_psn,
                        uint32_t local_psn, enum ibv_mtu remote_mtu)
{
    struct ibv_qp_attr attr;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state           = IBV_QPS_RTR;
    attr.path_mtu           = ucs_min(iface->config.path_mtu, remote_mtu);
    attr.dest_qp_num        = remote_qpn;
    attr.rq_psn             = remote_psn;
    attr.max_dest_rd_atomic = iface->config.max_rd_atomic;
    attr.min_rnr_timer      = iface->config.rnr_timeout;
    uct_rc_share_ah_attr_fill(iface, dev, &attr.ah_attr);
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC |
                                   IBV_QP_MIN_RNR_TIMER);
    if (ret != 0) {
        ucs_error("ibv_modify_qp(RC QP 0x%x, RTR, dest 0x%x) failed: %s",
                  qp->qp_num, remote_qpn, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state      = IBV_QPS_RTS;
    attr.sq_psn        = local_psn;
    attr.timeout       = iface->config.timeout;
    attr.retry_cnt     = iface->config.retry_count;
    attr.rnr_retry     = iface->config.rnr_retry_count;
    attr.max_rd_atomic = iface->config.max_rd_atomic;
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN |
                                   IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    if (ret != 0) {
        ucs_error("ibv_modify_qp(RC QP 0x%x, RTS) failed: %s", qp->qp_num,
                  strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    return UCS_OK;
}

static uint32_t uct_rc_share_psn_generate(void)
{
    return (uint32_t)ucs_generate_uuid(0) & UCT_RC_SHARE_PSN_MASK;
}

/* ------------------------------------------------------------ UD QP */

static void uct_rc_share_conn_post_recv(uct_rc_share_iface_t *iface,
                                        unsigned index)
{
    struct ibv_recv_wr wr, *bad_wr;
    struct ibv_sge sge;
    int ret;

    sge.addr   = uct_rc_share_buf_iova(iface, iface->conn.rx_bufs) +
                 (index * UCT_RC_SHARE_CONN_BUF_SIZE);
    sge.length = UCT_RC_SHARE_CONN_BUF_SIZE;
    sge.lkey   = iface->conn.bufs.lkey;
    wr.wr_id   = index;
    wr.next    = NULL;
    wr.sg_list = &sge;
    wr.num_sge = 1;

    ret = ibv_post_recv(iface->conn.qp, &wr, &bad_wr);
    if (ret != 0) {
        ucs_error("ibv_post_recv(UD) failed: %s", strerror(ret));
    }
}

static ucs_status_t uct_rc_share_conn_send(uct_rc_share_iface_t *iface,
                                           struct ibv_ah *ah, uint32_t ud_qpn,
                                           const uct_rc_share_conn_msg_t *msg)
{
    struct ibv_send_wr wr, *bad_wr;
    struct ibv_sge sge;
    void *buf;
    int ret;

    if (iface->conn.tx_available == 0) {
        return UCS_ERR_NO_RESOURCE; /* the caller's retry timer resends */
    }

    buf = UCS_PTR_BYTE_OFFSET(iface->conn.tx_buf,
                              iface->conn.tx_next * UCT_RC_SHARE_CONN_BUF_SIZE);
    memcpy(buf, msg, sizeof(*msg));

    sge.addr              = uct_rc_share_buf_iova(iface, buf);
    sge.length            = sizeof(*msg);
    sge.lkey              = iface->conn.bufs.lkey;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id              = UCT_RC_SHARE_CONN_SEND_WR;
    wr.opcode             = IBV_WR_SEND;
    wr.send_flags         = IBV_SEND_SIGNALED;
    wr.sg_list            = &sge;
    wr.num_sge            = 1;
    wr.wr.ud.ah           = ah;
    wr.wr.ud.remote_qpn   = ud_qpn;
    wr.wr.ud.remote_qkey  = UCT_RC_SHARE_CONN_QKEY;

    ret = ibv_post_send(iface->conn.qp, &wr, &bad_wr);
    if (ret != 0) {
        ucs_error("ibv_post_send(UD) failed: %s", strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    --iface->conn.tx_available;
    iface->conn.tx_next = (iface->conn.tx_next + 1) % UCT_RC_SHARE_CONN_TX_COUNT;
    return UCS_OK;
}

static void uct_rc_share_conn_msg_init(uct_rc_share_iface_t *iface,
                                       uct_rc_share_conn_msg_t *msg,
                                       uct_rc_share_conn_msg_type_t type)
{
    memset(msg, 0, sizeof(*msg));
    msg->magic        = UCT_RC_SHARE_CONN_MAGIC;
    msg->version      = UCT_RC_SHARE_CONN_VERSION;
    msg->type         = type;
    msg->mtu          = iface->config.path_mtu;
    msg->src_iface_id = iface->id;
    msg->ud_qpn       = iface->conn.qp->qp_num;
    msg->dev.flags    = (iface->port_attr.link_layer ==
                         IBV_LINK_LAYER_ETHERNET) ?
                        UCT_RC_SHARE_ADDR_FLAG_ETH : 0;
    msg->dev.lid      = iface->port_attr.lid;
    msg->dev.gid      = iface->gid;
}

static ucs_status_t uct_rc_share_ud_qp_create(uct_rc_share_iface_t *iface)
{
    struct ibv_qp_init_attr init_attr;
    struct ibv_qp_attr attr;
    int ret;

    memset(&init_attr, 0, sizeof(init_attr));
    init_attr.qp_type          = IBV_QPT_UD;
    init_attr.send_cq          = iface->conn.cq;
    init_attr.recv_cq          = iface->conn.cq;
    init_attr.cap.max_send_wr  = UCT_RC_SHARE_CONN_TX_COUNT;
    init_attr.cap.max_recv_wr  = UCT_RC_SHARE_CONN_RX_COUNT;
    init_attr.cap.max_send_sge = 1;
    init_attr.cap.max_recv_sge = 1;

    iface->conn.qp = ibv_create_qp(iface->md->pd, &init_attr);
    if (iface->conn.qp == NULL) {
        ucs_error("%s: ibv_create_qp(UD) failed: %m",
                  uct_rc_share_dev_name(iface));
        return UCS_ERR_NO_RESOURCE;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state   = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = iface->port_num;
    attr.qkey       = UCT_RC_SHARE_CONN_QKEY;
    ret = ibv_modify_qp(iface->conn.qp, &attr, IBV_QP_STATE |
                        IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (ret == 0) {
        attr.qp_state = IBV_QPS_RTR;
        ret = ibv_modify_qp(iface->conn.qp, &attr, IBV_QP_STATE);
    }
    if (ret == 0) {
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn   = uct_rc_share_psn_generate();
        ret = ibv_modify_qp(iface->conn.qp, &attr,
                            IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (ret != 0) {
        ucs_error("%s: ibv_modify_qp(UD) failed: %s",
                  uct_rc_share_dev_name(iface), strerror(ret));
        return UCS_ERR_IO_ERROR;
    }

    return UCS_OK;
}

static ucs_status_t uct_rc_share_conn_bufs_alloc(uct_rc_share_iface_t *iface)
{
    size_t rx_size = UCT_RC_SHARE_CONN_RX_COUNT * UCT_RC_SHARE_CONN_BUF_SIZE;
    size_t tx_size = UCT_RC_SHARE_CONN_TX_COUNT * UCT_RC_SHARE_CONN_BUF_SIZE;

    ucs_status_t status;

    /* From the rank's slice, like every other buffer */
    status = uct_ibshare_resources_buf_alloc(iface->md->res, rx_size + tx_size,
                                             "rc_share handshake",
                                             &iface->conn.bufs);
    if (status != UCS_OK) {
        return status;
    }

    iface->conn.rx_bufs = iface->conn.bufs.address;
    iface->conn.tx_buf  = UCS_PTR_BYTE_OFFSET(iface->conn.rx_bufs, rx_size);

    iface->conn.tx_available = UCT_RC_SHARE_CONN_TX_COUNT;
    return UCS_OK;
}

ucs_status_t uct_rc_share_conn_init(uct_rc_share_iface_t *iface)
{
    ucs_status_t status;
    unsigned i;

    UCS_STATIC_ASSERT(UCT_RC_SHARE_GRH_LEN + sizeof(uct_rc_share_conn_msg_t) <=
                      UCT_RC_SHARE_CONN_BUF_SIZE);

    ucs_list_head_init(&iface->conn.connecting);
    ucs_list_head_init(&iface->conn.checking);
    ucs_list_head_init(&iface->conn.passive);
    iface->conn.next_conn_id = 1;

    ucs_list_head_init(&iface->conn.ready);
    ucs_list_head_init(&iface->conn.grants_owed);
    iface->conn.ready_prog_id = UCS_CALLBACKQ_ID_NULL;

    iface->conn.grant_cq = ibv_create_cq(iface->md->context,
                                         UCT_RC_SHARE_GRANT_CQ_LEN, NULL, NULL,
                                         0);
    if (iface->conn.grant_cq == NULL) {
        ucs_error("%s: ibv_create_cq(grants, %d) failed: %m",
                  uct_rc_share_dev_name(iface), UCT_RC_SHARE_GRANT_CQ_LEN);
        return UCS_ERR_NO_RESOURCE;
    }

    iface->conn.channel = ibv_create_comp_channel(iface->md->context);
    if (iface->conn.channel == NULL) {
        ucs_error("%s: ibv_create_comp_channel(handshake) failed: %m",
                  uct_rc_share_dev_name(iface));
        return UCS_ERR_IO_ERROR;
    }

    status = ucs_sys_fcntl_modfl(iface->conn.channel->fd, O_NONBLOCK, 0);
    if (status != UCS_OK) {
        return status;
    }

    iface->conn.cq = ibv_create_cq(iface->md->context,
                                   UCT_RC_SHARE_CONN_RX_COUNT +
                                   UCT_RC_SHARE_CONN_TX_COUNT, NULL,
                                   iface->conn.channel, 0);
    if (iface->conn.cq == NULL) {
        ucs_error("%s: ibv_create_cq(handshake) failed: %m",
                  uct_rc_share_dev_name(iface));
        return UCS_ERR_NO_RESOURCE;
    }

    status = uct_rc_share_conn_bufs_alloc(iface);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_rc_share_ud_qp_create(iface);
    if (status != UCS_OK) {
        return status;
    }

    for (i = 0; i < UCT_RC_SHARE_CONN_RX_COUNT; ++i) {
        uct_rc_share_conn_post_recv(iface, i);
    }
    return UCS_OK;
}

typedef struct {
    ucs_list_link_t list;
    struct ibv_ah   *ah;
} uct_rc_share_retired_ah_t;

static void uct_rc_share_conn_release_ahs(uct_rc_share_iface_t *iface)
{
    uct_rc_share_retired_ah_t *retired, *tmp;

    ucs_list_for_each_safe(retired, tmp, &iface->conn.retired_ahs, list) {
        ucs_list_del(&retired->list);
        ibv_destroy_ah(retired->ah);
        ucs_free(retired);
    }
}

/* An AH that UD sends in flight may use goes when they are done; the
 * caller holds the async context */
static void uct_rc_share_conn_retire_ah(uct_rc_share_iface_t *iface,
                                        struct ibv_ah *ah)
{
    uct_rc_share_retired_ah_t *retired;

    retired = ucs_malloc(sizeof(*retired), "rc_share retired ah");
    if (retired == NULL) {
        ibv_destroy_ah(ah); /* unlikely; the send fails at worst */
        return;
    }

    retired->ah = ah;
    ucs_list_add_tail(&iface->conn.retired_ahs, &retired->list);
}

static void uct_rc_share_passive_destroy(uct_rc_share_iface_t *iface,
                                         uct_rc_share_passive_t *passive)
{
    ucs_list_del(&passive->list);
    if (passive->grant_owed) {
        ucs_list_del(&passive->owed);
    }
    if (ibv_destroy_qp(passive->qp) != 0) {
        ucs_warn("ibv_destroy_qp(passive RC QP) failed: %m");
    }
    if (passive->ah != NULL) {
        ibv_destroy_ah(passive->ah);
    }
    ucs_free(passive);
}

void uct_rc_share_conn_cleanup(uct_rc_share_iface_t *iface)
{
    uct_rc_share_passive_t *passive, *tmp;

    ucs_list_for_each_safe(passive, tmp, &iface->conn.passive, list) {
        uct_rc_share_passive_destroy(iface, passive);
    }

    if (iface->conn.qp != NULL) {
        ibv_destroy_qp(iface->conn.qp);
    }
    uct_rc_share_conn_release_ahs(iface);
    if (iface->conn.cq != NULL) {
        ibv_destroy_cq(iface->conn.cq);
    }
    if (iface->conn.channel != NULL) {
        ibv_destroy_comp_channel(iface->conn.channel);
    }
    /* After the passive QPs that send on it */
    if (iface->conn.grant_cq != NULL) {
        ibv_destroy_cq(iface->conn.grant_cq);
    }
    if (iface->conn.rx_bufs != NULL) {
        uct_ibshare_resources_buf_free(iface->md->res, &iface->conn.bufs);
        iface->conn.rx_bufs = NULL;
    }
}

uint32_t uct_rc_share_conn_ud_qpn(const uct_rc_share_iface_t *iface)
{
    return iface->conn.qp->qp_num;
}

/* ------------------------------------------------------------ requester */

static void uct_rc_share_conn_send_req(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                 uct_rc_share_iface_t);
    uct_rc_share_conn_msg_t msg;

    uct_rc_share_conn_msg_init(iface, &msg, UCT_RC_SHARE_CONN_REQ);
    msg.src_conn_id = ep->conn_id;
    msg.rc_qpn      = ep->qp->qp_num;
    msg.psn         = ep->psn;
    (void)uct_rc_share_conn_send(iface, ep->ah, ep->remote_ud_qpn, &msg);
    ep->conn_next_retry = ucs_get_time() + iface->config.conn_retry;
}

ucs_status_t uct_rc_share_conn_start(uct_rc_share_ep_t *ep,
                                     const uct_rc_share_device_addr_t *dev,
                                     const uct_rc_share_iface_addr_t *addr)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                 uct_rc_share_iface_t);

    ep->remote_dev    = *dev;
    ep->remote_ud_qpn = addr->qpn[0] | (addr->qpn[1] << 8) |
                        ((uint32_t)addr->qpn[2] << 16);
    ep->remote_mtu    = (enum ibv_mtu)addr->mtu;
    ep->conn_id       = iface->conn.next_conn_id++;
    ep->psn           = uct_rc_share_psn_generate();
    ep->ah            = uct_rc_share_ah_create(iface, dev);
    if (ep->ah == NULL) {
        return UCS_ERR_UNREACHABLE;
    }

    ep->state         = UCT_RC_SHARE_EP_CONNECTING;
    ep->conn_deadline = ucs_get_time() + iface->config.conn_timeout;
    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));
    ucs_list_add_tail(&iface->conn.connecting, &ep->conn_list);
    uct_rc_share_conn_send_req(ep);
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
    return UCS_OK;
}

void uct_rc_share_conn_ep_stop(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                 uct_rc_share_iface_t);

    ucs_assert(ep->state == UCT_RC_SHARE_EP_CONNECTING);
    /* On conn.connecting or conn.ready (async side), or draining */
    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));
    ucs_list_del(&ep->conn_list);
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
}

void uct_rc_share_conn_ep_cleanup(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                 uct_rc_share_iface_t);
    uct_rc_share_conn_msg_t msg;

    if (ep->state == UCT_RC_SHARE_EP_CONNECTING) {
        uct_rc_share_conn_ep_stop(ep);
    }
    uct_rc_share_conn_check_stop(ep);

    if (ep->ah == NULL) {
        return;
    }

    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));

    /* Best effort: if lost, the target drops its QP when its iface closes */
    uct_rc_share_conn_msg_init(iface, &msg, UCT_RC_SHARE_CONN_DISC);
    msg.src_conn_id = ep->conn_id;
    (void)uct_rc_share_conn_send(iface, ep->ah, ep->remote_ud_qpn, &msg);

    uct_rc_share_conn_retire_ah(iface, ep->ah);
    ep->ah = NULL;
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
}

/* The caller holds the async context */
static void uct_rc_share_conn_send_check(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                 uct_rc_share_iface_t);
    uct_rc_share_conn_msg_t msg;

    uct_rc_share_conn_msg_init(iface, &msg, UCT_RC_SHARE_CONN_CHECK);
    msg.src_conn_id = ep->conn_id;
    msg.rc_qpn      = ep->qp->qp_num;
    msg.dst_rc_qpn  = ep->remote_qpn;
    msg.check_sn    = ep->check_sn;
    (void)uct_rc_share_conn_send(iface, ep->ah, ep->remote_ud_qpn, &msg);
    ep->check_next_retry = ucs_get_time() + iface->config.conn_retry;
}

void uct_rc_share_conn_check_start(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                 uct_rc_share_iface_t);

    ucs_assert(ep->state == UCT_RC_SHARE_EP_CONNECTED);
    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));
    if (!ep->check_pending) {
        ep->check_pending  = 1;
        ep->check_status   = UCS_INPROGRESS;
        ep->check_deadline = ucs_get_time() + iface->config.check_timeout;
        ++ep->check_sn; /* an answer to an earlier check is no answer */
        ucs_list_add_tail(&iface->conn.checking, &ep->check_list);
        uct_rc_share_conn_send_check(ep);
    }
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
}

void uct_rc_share_conn_check_stop(uct_rc_share_ep_t *ep)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(ep->super.super.iface,
                                                 uct_rc_share_iface_t);

    /* An answer clears it in the async context: read under the lock */
    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));
    if (ep->check_pending) {
        /* Off conn.checking, or off the failed list of a progress whose
         * error handler destroys or fails this endpoint */
        ucs_list_del(&ep->check_list);
        ep->check_pending = 0;
    }
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
}

/* Main thread: the endpoints whose reply came, one at a time (a callback
 * of one may destroy another) */
static unsigned uct_rc_share_conn_ready_progress(void *arg)
{
    uct_rc_share_iface_t *iface = arg;
    ucs_async_context_t *async  = uct_rc_share_conn_async(iface);
    unsigned count              = 0;
    uct_rc_share_ep_t *ep;

    UCS_ASYNC_BLOCK(async);
    iface->conn.ready_prog_id = UCS_CALLBACKQ_ID_NULL; /* oneshot: ran */
    while (!ucs_list_is_empty(&iface->conn.ready)) {
        ep = ucs_list_extract_head(&iface->conn.ready, uct_rc_share_ep_t,
                                   conn_list);
        UCS_ASYNC_UNBLOCK(async);

        if (ep->conn_status == UCS_OK) {
            uct_rc_share_ep_qp_ready(ep);
        } else if (uct_rc_share_ep_set_failed(ep, ep->conn_status)) {
            uct_rc_share_ep_report_failure(ep);
        }
        ++count;

        UCS_ASYNC_BLOCK(async);
    }
    UCS_ASYNC_UNBLOCK(async);
    return count;
}

/*
 * The target of ep answered: it lives. Its other requests wait for a busy
 * target (thousands of handshakes at once, a slow host), not a gone one:
 * their deadlines start again, so that the timeout fires only for a
 * target that stopped answering.
 */
static void uct_rc_share_conn_target_alive(uct_rc_share_iface_t *iface,
                                           const uct_rc_share_ep_t *ep)
{
    ucs_time_t deadline = ucs_get_time() + iface->config.conn_timeout;
    uct_rc_share_ep_t *other;

    ucs_list_for_each(other, &iface->conn.connecting, conn_list) {
        if ((other->remote_ud_qpn == ep->remote_ud_qpn) &&
            !memcmp(&other->remote_dev.gid, &ep->remote_dev.gid,
                    sizeof(ep->remote_dev.gid))) {
            other->conn_deadline = deadline;
        }
    }
}

static void uct_rc_share_conn_handle_rep(uct_rc_share_iface_t *iface,
                                         const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_ep_t *ep;
    ucs_status_t status;

    ucs_list_for_each(ep, &iface->conn.connecting, conn_list) {
        if (ep->conn_id != msg->dst_conn_id) {
            continue;
        }

        /* The main thread posts nothing on the QP of a connecting
         * endpoint, and takes the lock we hold to touch it otherwise */
        ucs_list_del(&ep->conn_list);
        status = uct_rc_share_qp_connect(iface, ep->qp, &ep->remote_dev,
                                         msg->rc_qpn, msg->psn, ep->psn,
                                         (enum ibv_mtu)msg->mtu);
        ep->conn_status     = status;
        ep->remote_iface_id = msg->src_iface_id; /* what checks ask */
        ep->remote_qpn      = msg->rc_qpn;
        ucs_list_add_tail(&iface->conn.ready, &ep->conn_list);
        if (iface->conn.ready_prog_id == UCS_CALLBACKQ_ID_NULL) {
            iface->conn.ready_prog_id = uct_ibshare_ucx_callbackq_add_oneshot(
                    &iface->super.worker->super.progress_q,
                    uct_rc_share_conn_ready_progress, iface);
        }
        ucs_debug("ep %p: QP 0x%x connected to 0x%x: %s", ep, ep->qp->qp_num,
                  msg->rc_qpn, ucs_status_string(status));
        uct_rc_share_conn_target_alive(iface, ep);
        return;
    }
    /* A duplicate reply of a connection made already: nothing to do */
}

/* Resends unanswered requests; endpoints past their deadline (a target
 * that is gone: a live one answers from its async context) go to
 * timed_out */
static unsigned uct_rc_share_conn_timers(uct_rc_share_iface_t *iface,
                                         ucs_list_link_t *timed_out)
{
    ucs_time_t now = ucs_get_time();
    uct_rc_share_ep_t *ep, *tmp;
    unsigned count = 0;

    ucs_list_for_each_safe(ep, tmp, &iface->conn.connecting, conn_list) {
        if (now >= ep->conn_deadline) {
            ucs_list_del(&ep->conn_list);
            ucs_list_add_tail(timed_out, &ep->conn_list);
            ucs_diag("%s:%d: no answer to the connection request of ep %p "
                     "within %.1f s", uct_rc_share_dev_name(iface),
                     iface->port_num, ep,
                     ucs_time_to_sec(iface->config.conn_timeout));
            ++count;
        } else if (now >= ep->conn_next_retry) {
            uct_rc_share_conn_send_req(ep);
            ++count;
        }
    }
    return count;
}

/* Resends unanswered checks; those past their deadline (a target gone,
 * or stopped) or answered "no such connection" go to failed */
static unsigned uct_rc_share_conn_check_timers(uct_rc_share_iface_t *iface,
                                               ucs_list_link_t *failed)
{
    ucs_time_t now = ucs_get_time();
    uct_rc_share_ep_t *ep, *tmp;
    unsigned count = 0;

    ucs_list_for_each_safe(ep, tmp, &iface->conn.checking, check_list) {
        if ((ep->check_status == UCS_INPROGRESS) &&
            (now >= ep->check_deadline)) {
            ucs_diag("%s:%d: no answer to the liveness check of ep %p "
                     "within %.1f s", uct_rc_share_dev_name(iface),
                     iface->port_num, ep,
                     ucs_time_to_sec(iface->config.check_timeout));
            ep->check_status = UCS_ERR_ENDPOINT_TIMEOUT;
        }

        if (ep->check_status != UCS_INPROGRESS) {
            ucs_list_del(&ep->check_list);
            ucs_list_add_tail(failed, &ep->check_list);
            ++count;
        } else if (now >= ep->check_next_retry) {
            uct_rc_share_conn_send_check(ep);
            ++count;
        }
    }
    return count;
}

/* ------------------------------------------------------------ target */

static uct_rc_share_passive_t *
uct_rc_share_passive_find(uct_rc_share_iface_t *iface,
                          const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_passive_t *passive;

    ucs_list_for_each(passive, &iface->conn.passive, list) {
        if ((passive->src_iface_id == msg->src_iface_id) &&
            (passive->src_conn_id == msg->src_conn_id)) {
            return passive;
        }
    }
    return NULL;
}

static void uct_rc_share_conn_send_rep(uct_rc_share_iface_t *iface,
                                       const uct_rc_share_passive_t *passive,
                                       uint32_t ud_qpn)
{
    uct_rc_share_conn_msg_t rep;

    uct_rc_share_conn_msg_init(iface, &rep, UCT_RC_SHARE_CONN_REP);
    rep.dst_conn_id = passive->src_conn_id;
    rep.rc_qpn      = passive->qp->qp_num;
    rep.psn         = passive->psn;
    (void)uct_rc_share_conn_send(iface, passive->ah, ud_qpn, &rep);
}

static void uct_rc_share_conn_handle_req(uct_rc_share_iface_t *iface,
                                         const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_passive_t *passive;
    ucs_status_t status;

    passive = uct_rc_share_passive_find(iface, msg);
    if (passive != NULL) {
        /* Our reply was lost or late: send it again */
        uct_rc_share_conn_send_rep(iface, passive, msg->ud_qpn);
        return;
    }

    passive = ucs_calloc(1, sizeof(*passive), "rc_share passive");
    if (passive == NULL) {
        return; /* the requester retries */
    }

    passive->src_iface_id = msg->src_iface_id;
    passive->src_conn_id  = msg->src_conn_id;
    passive->remote_qpn   = msg->rc_qpn;
    passive->psn          = uct_rc_share_psn_generate();
    passive->ah           = uct_rc_share_ah_create(iface, &msg->dev);
    if (passive->ah == NULL) {
        ucs_free(passive);
        return;
    }

    /* Its only sends are grants, on a CQ of their own: the data path's
     * send CQ accounting knows nothing of them */
    status = uct_rc_share_qp_create(iface, iface->conn.grant_cq,
                                    UCT_RC_SHARE_PASSIVE_SQ_LEN, &passive->qp);
    if (status == UCS_OK) {
        status = uct_rc_share_qp_connect(iface, passive->qp, &msg->dev,
                                         msg->rc_qpn, msg->psn, passive->psn,
                                         (enum ibv_mtu)msg->mtu);
        if (status != UCS_OK) {
            ibv_destroy_qp(passive->qp);
        }
    }
    if (status != UCS_OK) {
        ibv_destroy_ah(passive->ah);
        ucs_free(passive);
        return;
    }

    ucs_list_add_tail(&iface->conn.passive, &passive->list);
    ++iface->counters.passive_qps;
    ucs_debug("passive QP 0x%x for requester QP 0x%x", passive->qp->qp_num,
              msg->rc_qpn);
    uct_rc_share_conn_send_rep(iface, passive, msg->ud_qpn);
}

static void uct_rc_share_conn_handle_disc(uct_rc_share_iface_t *iface,
                                          const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_passive_t *passive = uct_rc_share_passive_find(iface, msg);

    if (passive != NULL) {
        uct_rc_share_passive_destroy(iface, passive);
    }
}

/*
 * A requester asks whether we still have the passive QP of its endpoint.
 * Answered here, in the async context, so that a process that computes
 * without calling progress answers too: only a process that is gone stays
 * silent. Without the passive QP there is no AH to the requester: one made
 * for the answer goes when the send is done.
 */
static void uct_rc_share_conn_handle_check(uct_rc_share_iface_t *iface,
                                           const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_passive_t *passive = uct_rc_share_passive_find(iface, msg);
    uct_rc_share_conn_msg_t rep;
    struct ibv_ah *ah;

    uct_rc_share_conn_msg_init(iface, &rep, UCT_RC_SHARE_CONN_CHECK_REP);
    rep.dst_conn_id = msg->src_conn_id;
    rep.check_sn    = msg->check_sn;

    if ((passive != NULL) && (passive->remote_qpn == msg->rc_qpn) &&
        (passive->qp->qp_num == msg->dst_rc_qpn)) {
        rep.result = UCT_RC_SHARE_CONN_CHECK_CONNECTED;
        rep.rc_qpn = passive->qp->qp_num;
        (void)uct_rc_share_conn_send(iface, passive->ah, msg->ud_qpn, &rep);
        return;
    }

    if (iface->conn.tx_available == 0) {
        return; /* the requester asks again */
    }

    ah = uct_rc_share_ah_create(iface, &msg->dev);
    if (ah == NULL) {
        return;
    }

    rep.result = UCT_RC_SHARE_CONN_CHECK_NO_CONN;
    (void)uct_rc_share_conn_send(iface, ah, msg->ud_qpn, &rep);
    uct_rc_share_conn_retire_ah(iface, ah);
}

/* The answer to a check: an endpoint still connected is done with it; one
 * whose connection the target no longer has waits for the main thread to
 * fail it (progress, which event_arm keeps running meanwhile) */
static void
uct_rc_share_conn_handle_check_rep(uct_rc_share_iface_t *iface,
                                   const uct_rc_share_conn_msg_t *msg)
{
    uct_rc_share_ep_t *ep;

    ucs_list_for_each(ep, &iface->conn.checking, check_list) {
        if (ep->conn_id != msg->dst_conn_id) {
            continue;
        }

        if ((msg->check_sn != ep->check_sn) ||
            (ep->check_status != UCS_INPROGRESS)) {
            return; /* a late answer to an earlier check, or a duplicate */
        }

        if (msg->result == UCT_RC_SHARE_CONN_CHECK_NO_CONN) {
            ucs_diag("%s:%d: ep %p: the target iface no longer has the "
                     "connection of QP 0x%x", uct_rc_share_dev_name(iface),
                     iface->port_num, ep, ep->qp->qp_num);
            ep->check_status = UCS_ERR_CONNECTION_RESET;
        } else if ((msg->src_iface_id == ep->remote_iface_id) &&
                   (msg->rc_qpn == ep->remote_qpn)) {
            ucs_list_del(&ep->check_list);
            ep->check_pending = 0;
        }
        /* Else "connected" from another iface than ours: not an answer */
        return;
    }
}

static void uct_rc_share_conn_handle_msg(uct_rc_share_iface_t *iface,
                                         const void *buf, size_t length)
{
    const uct_rc_share_conn_msg_t *msg = buf;
    ucs_status_t status;

    status = uct_rc_share_conn_msg_check(buf, length);
    if (status != UCS_OK) {
        ucs_diag("%s:%d: dropped a malformed handshake message (%zu bytes): "
                 "%s", uct_rc_share_dev_name(iface), iface->port_num, length,
                 ucs_status_string(status));
        return;
    }

    switch (msg->type) {
    case UCT_RC_SHARE_CONN_REQ:
        uct_rc_share_conn_handle_req(iface, msg);
        break;
    case UCT_RC_SHARE_CONN_REP:
        uct_rc_share_conn_handle_rep(iface, msg);
        break;
    case UCT_RC_SHARE_CONN_DISC:
        uct_rc_share_conn_handle_disc(iface, msg);
        break;
    case UCT_RC_SHARE_CONN_CHECK:
        uct_rc_share_conn_handle_check(iface, msg);
        break;
    case UCT_RC_SHARE_CONN_CHECK_REP:
        uct_rc_share_conn_handle_check_rep(iface, msg);
        break;
    }
}

/* Handles what the UD CQ holds; the caller holds the async context */
static unsigned uct_rc_share_conn_poll(uct_rc_share_iface_t *iface)
{
    struct ibv_wc wc[8];
    unsigned count = 0;
    void *buf;
    int i, n;

    do {
        /* wc.opcode is undefined in error completions: tell by wr_id */
        n = ibv_poll_cq(iface->conn.cq, ucs_static_array_size(wc), wc);
        for (i = 0; i < n; ++i) {
            if (wc[i].wr_id == UCT_RC_SHARE_CONN_SEND_WR) {
                ++iface->conn.tx_available;
                if ((wc[i].status != IBV_WC_SUCCESS) &&
                    (wc[i].status != IBV_WC_WR_FLUSH_ERR)) {
                    ucs_diag("%s: handshake send failed: %s",
                             uct_rc_share_dev_name(iface),
                             ibv_wc_status_str(wc[i].status));
                }
                continue;
            }

            if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
                continue; /* the QP is going away */
            }

            if ((wc[i].status == IBV_WC_SUCCESS) &&
                (wc[i].byte_len >= UCT_RC_SHARE_GRH_LEN)) {
                buf = UCS_PTR_BYTE_OFFSET(iface->conn.rx_bufs,
                                          wc[i].wr_id *
                                          UCT_RC_SHARE_CONN_BUF_SIZE);
                uct_rc_share_conn_handle_msg(iface,
                                             UCS_PTR_BYTE_OFFSET(buf,
                                                     UCT_RC_SHARE_GRH_LEN),
                                             wc[i].byte_len -
                                             UCT_RC_SHARE_GRH_LEN);
            } else {
                ucs_diag("%s: handshake receive failed: %s",
                         uct_rc_share_dev_name(iface),
                         ibv_wc_status_str(wc[i].status));
            }
            uct_rc_share_conn_post_recv(iface, wc[i].wr_id);
        }
        count += (n > 0) ? n : 0;
    } while (n == (int)ucs_static_array_size(wc));

    if ((iface->conn.tx_available == UCT_RC_SHARE_CONN_TX_COUNT) &&
        !ucs_list_is_empty(&iface->conn.retired_ahs)) {
        uct_rc_share_conn_release_ahs(iface);
    }
    return count;
}

/* The async context's handler of the UD CQ's channel: the async context is
 * blocked for us (a thread, or a signal handler: only verbs calls and what
 * UCX's own handlers do) */
static void uct_rc_share_conn_async_handler(int fd,
                                            ucs_event_set_types_t events,
                                            void *arg)
{
    uct_rc_share_iface_t *iface = arg;
    struct ibv_cq *cq;
    void *cq_context;

    while (ibv_get_cq_event(iface->conn.channel, &cq, &cq_context) == 0) {
        ibv_ack_cq_events(cq, 1);
    }

    /* Armed before polling: a completion after the poll raises an event */
    if (ibv_req_notify_cq(iface->conn.cq, 0) != 0) {
        ucs_error("%s: ibv_req_notify_cq(handshake) failed: %m",
                  uct_rc_share_dev_name(iface));
    }
    (void)uct_rc_share_conn_poll(iface);
}

ucs_status_t uct_rc_share_conn_async_start(uct_rc_share_iface_t *iface)
{
    ucs_async_context_t *async = uct_rc_share_conn_async(iface);
    ucs_status_t status;

    status = ucs_async_set_event_handler(async->mode,
                                         iface->conn.channel->fd,
                                         UCS_EVENT_SET_EVREAD,
                                         uct_rc_share_conn_async_handler,
                                         iface, async);
    if (status != UCS_OK) {
        ucs_error("%s: could not handle the handshake in the async context: "
                  "%s", uct_rc_share_dev_name(iface),
                  ucs_status_string(status));
        return status;
    }
    iface->conn.handler_set = 1;

    UCS_ASYNC_BLOCK(async);
    uct_rc_share_conn_async_handler(iface->conn.channel->fd,
                                    UCS_EVENT_SET_EVREAD, iface);
    UCS_ASYNC_UNBLOCK(async);
    return UCS_OK;
}

void uct_rc_share_conn_async_stop(uct_rc_share_iface_t *iface)
{
    if (iface->conn.handler_set) {
        ucs_async_remove_handler(iface->conn.channel->fd, 1);
        iface->conn.handler_set = 0;
    }

    /* The handler is gone: nothing schedules the callback again */
    if (iface->conn.ready_prog_id != UCS_CALLBACKQ_ID_NULL) {
        uct_ibshare_ucx_callbackq_remove_oneshot(
                &iface->super.worker->super.progress_q,
                iface->conn.ready_prog_id, iface);
        iface->conn.ready_prog_id = UCS_CALLBACKQ_ID_NULL;
    }
}

unsigned uct_rc_share_conn_progress(uct_rc_share_iface_t *iface)
{
    ucs_async_context_t *async;
    ucs_list_link_t timed_out, check_failed;
    ucs_status_t status;
    uct_rc_share_ep_t *ep;
    unsigned count;

    /* Read without the lock: a request or a check just answered waits one
     * more progress at worst */
    if (ucs_likely(ucs_list_is_empty(&iface->conn.connecting) &&
                   ucs_list_is_empty(&iface->conn.checking))) {
        return 0;
    }

    async = uct_rc_share_conn_async(iface);
    ucs_list_head_init(&timed_out);
    ucs_list_head_init(&check_failed);
    UCS_ASYNC_BLOCK(async);
    count  = uct_rc_share_conn_timers(iface, &timed_out);
    count += uct_rc_share_conn_check_timers(iface, &check_failed);
    UCS_ASYNC_UNBLOCK(async);

    /* One at a time: the error handler of one may destroy another (which
     * takes it off these lists) */
    while (!ucs_list_is_empty(&timed_out)) {
        ep = ucs_list_extract_head(&timed_out, uct_rc_share_ep_t, conn_list);
        if (uct_rc_share_ep_set_failed(ep, UCS_ERR_ENDPOINT_TIMEOUT)) {
            uct_rc_share_ep_report_failure(ep);
        }
    }

    while (!ucs_list_is_empty(&check_failed)) {
        UCS_ASYNC_BLOCK(async);
        ep = ucs_list_extract_head(&check_failed, uct_rc_share_ep_t,
                                   check_list);
        ep->check_pending = 0;
        status            = ep->check_status;
        UCS_ASYNC_UNBLOCK(async);

        if (uct_rc_share_ep_set_failed(ep, status)) {
            uct_rc_share_ep_report_failure(ep);
        }
    }
    return count;
}

int uct_rc_share_conn_busy(uct_rc_share_iface_t *iface)
{
    int busy;

    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));
    busy = !ucs_list_is_empty(&iface->conn.connecting) ||
           !ucs_list_is_empty(&iface->conn.ready) ||
           !ucs_list_is_empty(&iface->conn.checking);
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
    return busy || !ucs_list_is_empty(&iface->draining);
}

/* ------------------------------------------------------------ grants */

/* Posts a pure grant on the passive QP; returns 0 if grant_cq has no room
 * for its completion now. The caller holds the async context. */
static int uct_rc_share_passive_post_grant(uct_rc_share_iface_t *iface,
                                           uct_rc_share_passive_t *passive)
{
    struct ibv_send_wr wr, *bad_wr;
    int ret;

    if (iface->conn.grants_in_flight >= UCT_RC_SHARE_GRANT_CQ_LEN) {
        return 0;
    }

    memset(&wr, 0, sizeof(wr));
    wr.wr_id      = passive->qp->qp_num;
    wr.opcode     = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data   = htonl(UCT_RC_SHARE_IMM_FC_PURE_GRANT);
    ret = ibv_post_send(passive->qp, &wr, &bad_wr);
    if (ret != 0) {
        /* A passive QP in error: its requester is gone */
        ucs_diag("%s: grant on passive QP 0x%x not posted: %s",
                 uct_rc_share_dev_name(iface), passive->qp->qp_num,
                 strerror(ret));
        return 1;
    }

    ++iface->conn.grants_in_flight;
    return 1;
}

/* The caller holds the async context */
static unsigned uct_rc_share_conn_grants_poll(uct_rc_share_iface_t *iface)
{
    uct_rc_share_passive_t *passive;
    struct ibv_wc wc[16];
    int i, n;

    n = ibv_poll_cq(iface->conn.grant_cq, ucs_static_array_size(wc), wc);
    for (i = 0; i < n; ++i) {
        --iface->conn.grants_in_flight;
        if ((wc[i].status != IBV_WC_SUCCESS) &&
            (wc[i].status != IBV_WC_WR_FLUSH_ERR)) {
            ucs_diag("%s: grant on passive QP 0x%x failed: %s",
                     uct_rc_share_dev_name(iface), (unsigned)wc[i].wr_id,
                     ibv_wc_status_str(wc[i].status));
        }
    }

    while (!ucs_list_is_empty(&iface->conn.grants_owed)) {
        passive = ucs_list_head(&iface->conn.grants_owed,
                                uct_rc_share_passive_t, owed);
        if (!uct_rc_share_passive_post_grant(iface, passive)) {
            break;
        }
        ucs_list_del(&passive->owed);
        passive->grant_owed = 0;
    }
    return (n > 0) ? n : 0;
}

void uct_rc_share_conn_fc_grant(uct_rc_share_iface_t *iface, uint32_t qp_num)
{
    uct_rc_share_passive_t *passive;

    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));
    (void)uct_rc_share_conn_grants_poll(iface);
    ucs_list_for_each(passive, &iface->conn.passive, list) {
        if (passive->qp->qp_num != qp_num) {
            continue;
        }
        if (!passive->grant_owed &&
            !uct_rc_share_passive_post_grant(iface, passive)) {
            passive->grant_owed = 1;
            ucs_list_add_tail(&iface->conn.grants_owed, &passive->owed);
        }
        break;
    }
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
}

unsigned uct_rc_share_conn_grants_progress(uct_rc_share_iface_t *iface)
{
    unsigned count;

    /* Read without the lock: grants owed imply grants in flight */
    if (ucs_likely(iface->conn.grants_in_flight == 0)) {
        return 0;
    }

    UCS_ASYNC_BLOCK(uct_rc_share_conn_async(iface));
    count = uct_rc_share_conn_grants_poll(iface);
    UCS_ASYNC_UNBLOCK(uct_rc_share_conn_async(iface));
    return count;
}
