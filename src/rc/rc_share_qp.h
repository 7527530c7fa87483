/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * rc_share's verbs objects of a connection: RC QPs and their state
 * transitions, the UD QP of the handshake, address handles.
 */
#ifndef UCT_RC_SHARE_QP_H_
#define UCT_RC_SHARE_QP_H_

#include "rc_share.h"


#define UCT_RC_SHARE_PSN_MASK 0xffffffu
#define UCT_RC_SHARE_GRH_LEN  40


/* A random 24-bit packet sequence number */
uint32_t uct_rc_share_psn_generate(void);

/* Creation attributes of every RC QP of the iface */
void uct_rc_share_qp_init_attr(const uct_rc_share_iface_t *iface,
                               struct ibv_qp_init_attr *init_attr);

/* An RC QP on the iface's SRQ, receive CQ and send CQ, in INIT state */
ucs_status_t uct_rc_share_qp_create(uct_rc_share_iface_t *iface,
                                    struct ibv_qp **qp_p);

/* INIT -> RTR -> RTS towards the remote QP at path */
ucs_status_t uct_rc_share_qp_connect(uct_rc_share_iface_t *iface,
                                     struct ibv_qp *qp,
                                     const uct_rc_share_device_addr_t *path,
                                     uint32_t remote_qpn, uint32_t remote_psn,
                                     uint32_t local_psn,
                                     enum ibv_mtu remote_mtu);

/*
 * Every verbs object of the iface is made and destroyed here, so that in
 * shared mode the md's ledger records it (ibshare_ledger.h): should the
 * process be killed, a survivor destroys what it left on the shared file.
 */
struct ibv_cq *uct_rc_share_cq_create(uct_rc_share_iface_t *iface, int cqe,
                                      struct ibv_comp_channel *channel);
void uct_rc_share_cq_destroy(uct_rc_share_iface_t *iface, struct ibv_cq *cq);
struct ibv_srq *uct_rc_share_srq_create(uct_rc_share_iface_t *iface,
                                        unsigned max_wr);
void uct_rc_share_srq_destroy(uct_rc_share_iface_t *iface,
                              struct ibv_srq *srq);
/* Any QP on the iface's PD */
struct ibv_qp *uct_rc_share_qp_new(uct_rc_share_iface_t *iface,
                                   struct ibv_qp_init_attr *init_attr);

/* Destroys a QP or an AH made here (its record goes first) */
void uct_rc_share_qp_destroy(uct_rc_share_iface_t *iface, struct ibv_qp *qp);
void uct_rc_share_ah_destroy(uct_rc_share_iface_t *iface, struct ibv_ah *ah);

/* Moves the QP to the error state: its outstanding requests complete
 * flushed */
void uct_rc_share_qp_set_error(struct ibv_qp *qp);

/* The handshake's UD QP on cq, ready to send and receive (rx_sge scatter
 * entries per receive) */
ucs_status_t uct_rc_share_ud_qp_create(uct_rc_share_iface_t *iface,
                                       struct ibv_cq *cq, uint32_t qkey,
                                       unsigned tx_count, unsigned rx_count,
                                       unsigned rx_sge, struct ibv_qp **qp_p);

/* A UD QP back to RTS through RESET, keeping its number (which is in the
 * iface address); its work requests are gone */
ucs_status_t uct_rc_share_ud_qp_reset(uct_rc_share_iface_t *iface,
                                      struct ibv_qp *qp, uint32_t qkey);

/* The QP's state (enum ibv_qp_state), -1 if it cannot be queried */
int uct_rc_share_qp_state(struct ibv_qp *qp);

/* An address handle to the port at dev (an iface address from UCP) */
struct ibv_ah *uct_rc_share_ah_create(uct_rc_share_iface_t *iface,
                                      const uct_rc_share_device_addr_t *dev);

/*
 * The source of a received UD packet (its work completion and the GRH that
 * precedes it), where replies go whatever the message claims: the
 * attributes of an address handle to it, and its address as an RC QP's
 * path. No object is made.
 */
ucs_status_t uct_rc_share_wc_source(uct_rc_share_iface_t *iface,
                                    const struct ibv_wc *wc,
                                    const struct ibv_grh *grh,
                                    struct ibv_ah_attr *ah_attr,
                                    uct_rc_share_device_addr_t *dev_p);

/* An address handle of those attributes, recorded */
struct ibv_ah *uct_rc_share_ah_from_attr(uct_rc_share_iface_t *iface,
                                         struct ibv_ah_attr *ah_attr);

#endif
