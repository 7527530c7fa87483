/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share's verbs objects of a connection (see rc_share_qp.h).
 */
#include "rc_share_qp.h"

#include <ucs/debug/log_def.h>
#include <ucs/sys/string.h>

#include <string.h>


uint32_t uct_rc_share_psn_generate(void)
{
    return (uint32_t)ucs_generate_uuid(0) & UCT_RC_SHARE_PSN_MASK;
}

static const char *uct_rc_share_dev_name(const uct_rc_share_iface_t *iface)
{
    return iface->md->dev_name;
}

/*
 * An AH the provider made in user space alone (mlx5 on InfiniBand) has no
 * kernel object: its handle is 0, which is never an AH's (the context's
 * first object holds it), and there is nothing to record.
 */
static void uct_rc_share_ah_track(uct_rc_share_iface_t *iface,
                                  struct ibv_ah *ah)
{
    if (ah->handle != 0) {
        uct_ibshare_resources_track(iface->md->res, UCT_IBSHARE_OBJ_AH,
                                    ah->handle);
    }
}

/* A fork child destroys nothing: see uct_ibshare_resources_owned */
static int uct_rc_share_qp_owned(const uct_rc_share_iface_t *iface)
{
    return uct_ibshare_resources_owned(iface->md->res);
}

void uct_rc_share_ah_destroy(uct_rc_share_iface_t *iface, struct ibv_ah *ah)
{
    if (!uct_rc_share_qp_owned(iface)) {
        return;
    }
    if (ah->handle != 0) {
        uct_ibshare_resources_untrack(iface->md->res, UCT_IBSHARE_OBJ_AH,
                                      ah->handle);
    }
    if (ibv_destroy_ah(ah) != 0) {
        ucs_warn("%s: ibv_destroy_ah() failed: %m",
                 uct_rc_share_dev_name(iface));
    }
}

void uct_rc_share_qp_destroy(uct_rc_share_iface_t *iface, struct ibv_qp *qp)
{
    if (!uct_rc_share_qp_owned(iface)) {
        return;
    }
    uct_ibshare_resources_untrack(iface->md->res, UCT_IBSHARE_OBJ_QP,
                                  qp->handle);
    if (ibv_destroy_qp(qp) != 0) {
        ucs_warn("%s: ibv_destroy_qp(0x%x) failed: %m",
                 uct_rc_share_dev_name(iface), qp->qp_num);
    }
}

struct ibv_cq *uct_rc_share_cq_create(uct_rc_share_iface_t *iface, int cqe,
                                      struct ibv_comp_channel *channel)
{
    struct ibv_cq *cq = ibv_create_cq(iface->md->context, cqe, NULL, channel,
                                      0);

    if (cq != NULL) {
        uct_ibshare_resources_track(iface->md->res, UCT_IBSHARE_OBJ_CQ,
                                    cq->handle);
    }
    return cq;
}

void uct_rc_share_cq_destroy(uct_rc_share_iface_t *iface, struct ibv_cq *cq)
{
    if (!uct_rc_share_qp_owned(iface)) {
        return;
    }
    uct_ibshare_resources_untrack(iface->md->res, UCT_IBSHARE_OBJ_CQ,
                                  cq->handle);
    if (ibv_destroy_cq(cq) != 0) {
        ucs_warn("%s: ibv_destroy_cq() failed: %m",
                 uct_rc_share_dev_name(iface));
    }
}

struct ibv_srq *uct_rc_share_srq_create(uct_rc_share_iface_t *iface,
                                        unsigned max_wr)
{
    struct ibv_srq_init_attr srq_attr;
    struct ibv_srq *srq;

    memset(&srq_attr, 0, sizeof(srq_attr));
    srq_attr.attr.max_wr  = max_wr;
    srq_attr.attr.max_sge = 1;
    srq = ibv_create_srq(iface->md->pd, &srq_attr);
    if (srq != NULL) {
        uct_ibshare_resources_track(iface->md->res, UCT_IBSHARE_OBJ_SRQ,
                                    srq->handle);
    }
    return srq;
}

void uct_rc_share_srq_destroy(uct_rc_share_iface_t *iface,
                              struct ibv_srq *srq)
{
    if (!uct_rc_share_qp_owned(iface)) {
        return;
    }
    uct_ibshare_resources_untrack(iface->md->res, UCT_IBSHARE_OBJ_SRQ,
                                  srq->handle);
    if (ibv_destroy_srq(srq) != 0) {
        ucs_warn("%s: ibv_destroy_srq() failed: %m",
                 uct_rc_share_dev_name(iface));
    }
}

/* A QP on the iface's PD, recorded */
struct ibv_qp *uct_rc_share_qp_new(uct_rc_share_iface_t *iface,
                                          struct ibv_qp_init_attr *init_attr)
{
    struct ibv_qp *qp = ibv_create_qp(iface->md->pd, init_attr);

    if (qp != NULL) {
        uct_ibshare_resources_track(iface->md->res, UCT_IBSHARE_OBJ_QP,
                                    qp->handle);
    }
    return qp;
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

struct ibv_ah *uct_rc_share_ah_create(uct_rc_share_iface_t *iface,
                                      const uct_rc_share_device_addr_t *dev)
{
    struct ibv_ah_attr ah_attr;
    struct ibv_ah *ah;

    uct_rc_share_ah_attr_fill(iface, dev, &ah_attr);
    ah = ibv_create_ah(iface->md->pd, &ah_attr);
    if (ah == NULL) {
        ucs_error("%s:%d: ibv_create_ah() failed: %m",
                  uct_rc_share_dev_name(iface), iface->port_num);
        return NULL;
    }
    uct_rc_share_ah_track(iface, ah);
    return ah;
}

ucs_status_t uct_rc_share_wc_source(uct_rc_share_iface_t *iface,
                                    const struct ibv_wc *wc,
                                    const struct ibv_grh *grh,
                                    struct ibv_ah_attr *ah_attr,
                                    uct_rc_share_device_addr_t *dev_p)
{
    int ret;

    /* Reads the GRH as RoCE v1, v2 over IPv4 or IPv6, or IB puts it */
    ret = ibv_init_ah_from_wc(iface->md->context, iface->port_num,
                              (struct ibv_wc*)wc, (struct ibv_grh*)grh,
                              ah_attr);
    if (ret != 0) {
        ucs_diag("%s:%d: ibv_init_ah_from_wc() failed: %s",
                 uct_rc_share_dev_name(iface), iface->port_num,
                 strerror(ret));
        return UCS_ERR_UNREACHABLE;
    }

    memset(dev_p, 0, sizeof(*dev_p));
    dev_p->flags = (iface->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) ?
                   UCT_RC_SHARE_ADDR_FLAG_ETH : 0;
    dev_p->lid   = ah_attr->dlid;
    if (ah_attr->is_global) {
        dev_p->gid = ah_attr->grh.dgid;
    } else {
        /* Our subnet, which routes by LID */
        dev_p->gid.global.subnet_prefix = iface->gid.global.subnet_prefix;
    }
    return UCS_OK;
}

struct ibv_ah *uct_rc_share_ah_from_attr(uct_rc_share_iface_t *iface,
                                         struct ibv_ah_attr *ah_attr)
{
    struct ibv_ah *ah = ibv_create_ah(iface->md->pd, ah_attr);

    if (ah == NULL) {
        ucs_error("%s:%d: ibv_create_ah(from a work completion) failed: %m",
                  uct_rc_share_dev_name(iface), iface->port_num);
        return NULL;
    }
    uct_rc_share_ah_track(iface, ah);
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
    /* Selective signaling (rc_share_txq.c), unless moderation is off */
    init_attr->sq_sig_all          = (iface->tx.moderation == 0);
}

ucs_status_t uct_rc_share_qp_create(uct_rc_share_iface_t *iface,
                                    struct ibv_qp **qp_p)
{
    struct ibv_qp_init_attr init_attr;
    struct ibv_qp_attr attr;
    struct ibv_qp *qp;
    int ret;

    uct_rc_share_qp_init_attr(iface, &init_attr);
    qp = uct_rc_share_qp_new(iface, &init_attr);
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
        uct_rc_share_qp_destroy(iface, qp);
        return UCS_ERR_IO_ERROR;
    }

    *qp_p = qp;
    return UCS_OK;
}

ucs_status_t uct_rc_share_qp_connect(uct_rc_share_iface_t *iface,
                                     struct ibv_qp *qp,
                                     const uct_rc_share_device_addr_t *path,
                                     uint32_t remote_qpn, uint32_t remote_psn,
                                     uint32_t local_psn,
                                     enum ibv_mtu remote_mtu)
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
    uct_rc_share_ah_attr_fill(iface, path, &attr.ah_attr);
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

void uct_rc_share_qp_set_error(struct ibv_qp *qp)
{
    struct ibv_qp_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_ERR;
    (void)ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

/* RESET -> INIT -> RTR -> RTS of a UD QP */
static int uct_rc_share_ud_qp_up(uct_rc_share_iface_t *iface,
                                 struct ibv_qp *qp, uint32_t qkey)
{
    struct ibv_qp_attr attr;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state   = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = iface->port_num;
    attr.qkey       = qkey;
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                        IBV_QP_PORT | IBV_QP_QKEY);
    if (ret == 0) {
        attr.qp_state = IBV_QPS_RTR;
        ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    }
    if (ret == 0) {
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn   = uct_rc_share_psn_generate();
        ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    return ret;
}

ucs_status_t uct_rc_share_ud_qp_create(uct_rc_share_iface_t *iface,
                                       struct ibv_cq *cq, uint32_t qkey,
                                       unsigned tx_count, unsigned rx_count,
                                       unsigned rx_sge, struct ibv_qp **qp_p)
{
    struct ibv_qp_init_attr init_attr;
    struct ibv_qp *qp;
    int ret;

    memset(&init_attr, 0, sizeof(init_attr));
    init_attr.qp_type          = IBV_QPT_UD;
    init_attr.send_cq          = cq;
    init_attr.recv_cq          = cq;
    init_attr.cap.max_send_wr  = tx_count;
    init_attr.cap.max_recv_wr  = rx_count;
    init_attr.cap.max_send_sge = 1;
    init_attr.cap.max_recv_sge = rx_sge;

    qp = uct_rc_share_qp_new(iface, &init_attr);
    if (qp == NULL) {
        ucs_error("%s: ibv_create_qp(UD) failed: %m",
                  uct_rc_share_dev_name(iface));
        return UCS_ERR_NO_RESOURCE;
    }

    ret = uct_rc_share_ud_qp_up(iface, qp, qkey);
    if (ret != 0) {
        ucs_error("%s: ibv_modify_qp(UD) failed: %s",
                  uct_rc_share_dev_name(iface), strerror(ret));
        uct_rc_share_qp_destroy(iface, qp);
        return UCS_ERR_IO_ERROR;
    }

    *qp_p = qp;
    return UCS_OK;
}

ucs_status_t uct_rc_share_ud_qp_reset(uct_rc_share_iface_t *iface,
                                      struct ibv_qp *qp, uint32_t qkey)
{
    struct ibv_qp_attr attr;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RESET;
    ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    if (ret == 0) {
        ret = uct_rc_share_ud_qp_up(iface, qp, qkey);
    }
    if (ret != 0) {
        ucs_error("%s: ibv_modify_qp(UD QP 0x%x, RESET -> RTS) failed: %s",
                  uct_rc_share_dev_name(iface), qp->qp_num, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

int uct_rc_share_qp_state(struct ibv_qp *qp)
{
    struct ibv_qp_init_attr init_attr;
    struct ibv_qp_attr attr;

    if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init_attr) != 0) {
        return -1;
    }
    return attr.qp_state;
}
