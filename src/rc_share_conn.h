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
/* 2: the liveness check (CHECK, CHECK_REP; result, dst_rc_qpn, check_sn).
 * A version 1 peer would drop the check and time out endpoints that are
 * fine, so the versions do not talk at all. */
#define UCT_RC_SHARE_CONN_VERSION  2


typedef enum {
    UCT_RC_SHARE_CONN_REQ       = 1, /* requester's QP: please create a peer */
    UCT_RC_SHARE_CONN_REP       = 2, /* here is the peer QP */
    UCT_RC_SHARE_CONN_DISC      = 3, /* requester went away: drop the peer */
    UCT_RC_SHARE_CONN_CHECK     = 4, /* requester: is my peer QP still
                                        there? (ep_check) */
    UCT_RC_SHARE_CONN_CHECK_REP = 5  /* the answer, in result */
} uct_rc_share_conn_msg_type_t;


/* CHECK_REP: what the target has for the requester's connection */
typedef enum {
    UCT_RC_SHARE_CONN_CHECK_CONNECTED = 1, /* the passive QP it paired */
    UCT_RC_SHARE_CONN_CHECK_NO_CONN   = 2  /* none: the target lives, the
                                              connection does not */
} uct_rc_share_conn_check_result_t;


typedef struct UCS_S_PACKED uct_rc_share_conn_msg {
    uint32_t                   magic;
    uint8_t                    version;
    uint8_t                    type;
    uint8_t                    mtu;          /* sender's port MTU */
    uint8_t                    result;       /* CHECK_REP: a
                                                uct_rc_share_conn_check_result_t;
                                                else 0 */
    uint64_t                   src_iface_id;
    uint64_t                   src_conn_id;  /* requester's endpoint */
    uint64_t                   dst_conn_id;  /* REP, CHECK_REP: the
                                                requester's src_conn_id */
    uint32_t                   rc_qpn;       /* REQ, CHECK: the requester's
                                                QP; REP, CHECK_REP: the
                                                passive QP */
    uint32_t                   psn;
    uint32_t                   ud_qpn;       /* where to answer */
    uint32_t                   dst_rc_qpn;   /* CHECK: the passive QP the
                                                requester's is connected to */
    uint32_t                   check_sn;     /* CHECK, CHECK_REP: which check
                                                of the endpoint */
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

/* Main thread: resends and timeouts of the requests and of the checks
 * (and, in the async context's poll mode, the messages) */
unsigned uct_rc_share_conn_progress(uct_rc_share_iface_t *iface);

/* Flow control: grants credits to the requester of the passive QP qp_num
 * (main thread) */
void uct_rc_share_conn_fc_grant(uct_rc_share_iface_t *iface, uint32_t qp_num);

/* Completions of the grants; grants that waited for room */
unsigned uct_rc_share_conn_grants_progress(uct_rc_share_iface_t *iface);

/*
 * The liveness check of a connected endpoint (ep_check): a CHECK to the
 * target iface's UD QP, which answers from its async context whether it
 * still has the passive QP of the endpoint. Resent every conn_retry; no
 * answer within check_timeout fails the endpoint with ENDPOINT_TIMEOUT,
 * "no such connection" with CONNECTION_RESET (both from progress). One
 * check at a time: does nothing while one is in flight.
 */
void uct_rc_share_conn_check_start(uct_rc_share_ep_t *ep);

/* Forgets the endpoint's check, if one is in flight: nothing of it reaches
 * the endpoint afterwards (main thread) */
void uct_rc_share_conn_check_stop(uct_rc_share_ep_t *ep);

/* Whether an endpoint of the iface is connecting or checking (for
 * event_arm) */
int uct_rc_share_conn_busy(uct_rc_share_iface_t *iface);

/* Checks a received message; pure, for the tests */
ucs_status_t uct_rc_share_conn_msg_check(const void *buf, size_t length);

#endif
