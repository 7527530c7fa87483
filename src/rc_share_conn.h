/**
 * rc_share connection establishment: RC QP state transitions, and the
 * handshake over a UD QP of each iface that pairs an endpoint's QP with a
 * passive QP at the target iface.
 *
 * UD is unreliable: requests are resent until a reply comes or the
 * connection timeout expires; a duplicate request gets the same reply.
 * Every message is checked for length, magic and version before use.
 */
#ifndef UCT_RC_SHARE_CONN_H_
#define UCT_RC_SHARE_CONN_H_

#include "rc_share.h"


#define UCT_RC_SHARE_CONN_MAGIC    0x48535243u /* "RCSH" */
#define UCT_RC_SHARE_CONN_VERSION  1


typedef enum {
    UCT_RC_SHARE_CONN_REQ  = 1,  /* requester's QP: please create a peer */
    UCT_RC_SHARE_CONN_REP  = 2,  /* here is the peer QP */
    UCT_RC_SHARE_CONN_DISC = 3   /* requester went away: drop the peer */
} uct_rc_share_conn_msg_type_t;


typedef struct UCS_S_PACKED uct_rc_share_conn_msg {
    uint32_t                   magic;
    uint8_t                    version;
    uint8_t                    type;
    uint8_t                    mtu;          /* sender's port MTU */
    uint8_t                    reserved;
    uint64_t                   src_iface_id;
    uint64_t                   src_conn_id;  /* requester's endpoint */
    uint64_t                   dst_conn_id;  /* REP: the REQ's src_conn_id */
    uint32_t                   rc_qpn;
    uint32_t                   psn;
    uint32_t                   ud_qpn;       /* where to answer */
    uct_rc_share_device_addr_t dev;          /* where to answer */
} uct_rc_share_conn_msg_t;


ucs_status_t uct_rc_share_conn_init(uct_rc_share_iface_t *iface);

void uct_rc_share_conn_cleanup(uct_rc_share_iface_t *iface);

uint32_t uct_rc_share_conn_ud_qpn(const uct_rc_share_iface_t *iface);

/* Creation attributes of every RC QP of the iface */
void uct_rc_share_qp_init_attr(const uct_rc_share_iface_t *iface,
                               struct ibv_qp_init_attr *init_attr);

/* An RC QP on the iface's SRQ and receive CQ and on send_cq, in INIT
 * state */
ucs_status_t uct_rc_share_qp_create(uct_rc_share_iface_t *iface,
                                    struct ibv_cq *send_cq,
                                    unsigned max_send_wr,
                                    struct ibv_qp **qp_p);

/* Installs the async handler of the handshake (the iface is complete) */
ucs_status_t uct_rc_share_conn_async_start(uct_rc_share_iface_t *iface);

/* Removes it; the async context calls nothing of the iface after this */
void uct_rc_share_conn_async_stop(uct_rc_share_iface_t *iface);

/* Starts the handshake of a new endpoint (whose QP exists) */
ucs_status_t uct_rc_share_conn_start(uct_rc_share_ep_t *ep,
                                     const uct_rc_share_device_addr_t *dev,
                                     const uct_rc_share_iface_addr_t *addr);

/* Takes a connecting endpoint off the handshake: no reply reaches it */
void uct_rc_share_conn_ep_stop(uct_rc_share_ep_t *ep);

/* Releases the endpoint's handshake state and tells the target */
void uct_rc_share_conn_ep_cleanup(uct_rc_share_ep_t *ep);

/* Main thread: resends and timeouts of the requests (and, in the async
 * context's poll mode, the messages) */
unsigned uct_rc_share_conn_progress(uct_rc_share_iface_t *iface);

/* Flow control: grants credits to the requester of the passive QP qp_num
 * (main thread) */
void uct_rc_share_conn_fc_grant(uct_rc_share_iface_t *iface, uint32_t qp_num);

/* Completions of the grants; grants that waited for room */
unsigned uct_rc_share_conn_grants_progress(uct_rc_share_iface_t *iface);

/* Whether an endpoint of the iface is connecting (for event_arm) */
int uct_rc_share_conn_busy(uct_rc_share_iface_t *iface);

/* Checks a received message; pure, for the tests */
ucs_status_t uct_rc_share_conn_msg_check(const void *buf, size_t length);

#endif
