/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * A host of the fabric that is no member of the job: raw verbs, no UCX. It
 * sends rc_share's handshake messages (protocol version 4, the layout
 * copied here: the wire is the contract) to the UD QP of an iface whose
 * address file conn_check wrote, with the public Q_Key, as anyone on the
 * fabric could. Its messages say truthfully where they come from (its UD
 * QP and GID), unless a mode says otherwise. test/guest/conn_stranger.sh
 * checks what the target then holds and whether it still serves.
 *
 *   stranger DEVICE flood FILE N     N connection requests without the
 *                                    target's secret (random ones, and 0)
 *   stranger DEVICE guess FILE N     N requests with guessed secrets; then
 *                                    waits 2 s: no answer may come
 *   stranger DEVICE forge FILE VICTIM  to the iface of VICTIM (a pinger of
 *                                    FILE's target), answers, refusals,
 *                                    checks' answers "no such connection"
 *                                    and DISCs claiming to come from the
 *                                    target (with the victim's secret, as
 *                                    one who knows its address, but not the
 *                                    target's, and from another QP)
 *   stranger DEVICE inject FILE      a real handshake, as one who knows the
 *                                    target's address; then on the RC QP
 *                                    messages that are no active message:
 *                                    AM id 64, unknown flags, no immediate
 *                                    data, one longer than its buffers, and
 *                                    100 of an id below 32 nobody handles
 *   stranger DEVICE version FILE     requests of version 5 and of version
 *                                    3 (refused with REJ(VERSION)) and one
 *                                    of version 2 (no answer)
 *   stranger DEVICE versions FILE N  N requests of versions 5 and 6 in
 *                                    turn, half with the secret
 *   stranger DEVICE oversize FILE    UD packets of every length from 0 to
 *                                    the port's MTU, garbage or a request
 *                                    with trailing bytes; then a request:
 *                                    the target must still answer it
 *   stranger DEVICE withhold FILE CONNS MSGS SECONDS
 *                                    CONNS RC connections that never post a
 *                                    receive buffer, MSGS messages asking
 *                                    for credits (FC_HARD_REQ) on each;
 *                                    they stay SECONDS (the target's grants
 *                                    to them never complete)
 *   stranger DEVICE impersonate FILE VICTIM SECONDS
 *                                    requests to FILE's iface claiming
 *                                    VICTIM's id and secret (as any rank
 *                                    that has its address could), from our
 *                                    own UD QP, handshakes completed; counts
 *                                    for SECONDS what arrives on those QPs
 *                                    (nothing may) and answers no check;
 *                                    one more claiming VICTIM's UD QP too
 *                                    (no answer may come)
 *   stranger DEVICE replay FILE      a connection made and ended (DISC);
 *                                    its request sent again, from the same
 *                                    UD QP and from another: no answer
 *
 * Prints "ok:"/"FAIL:" lines; exits 1 if one failed.
 */
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>


#define QKEY        0x1ee7a330u
#define MAGIC       0x48535243u
#define GRH_LEN     40
#define BUF_SIZE    128
#define RX_COUNT    32
#define BIG         (64 * 1024)
#define RX2_BASE    1000        /* wr_id of the second UD QP's receives */
#define RX2_COUNT   8
#define IMM_HARD_REQ (1u << 9)  /* rc_share's FC_HARD_REQ */

enum { REQ = 1, REP, REJ, DISC, CHECK, CHECK_REP };

typedef struct __attribute__((packed)) {
    uint32_t magic;
    uint8_t  version, type, result, flags;
    uint64_t src_iface_id, dst_iface_id, dst_secret, src_secret, conn_sn;
    uint32_t rc_qpn, psn, dst_rc_qpn, check_sn;
    uint8_t  mtu;
    uint32_t src_ud_qpn;        /* version 4 */
    uint16_t src_lid;
    union ibv_gid src_gid;
} msg_t;

#define MSG_V3_LEN  65          /* a version 3 message: up to mtu */

typedef struct __attribute__((packed)) {
    uint8_t       flags;
    uint16_t      lid;
    union ibv_gid gid;
} dev_addr_t;

typedef struct __attribute__((packed)) {
    uint8_t  qpn[3];
    uint8_t  mtu;
    uint64_t id;
    uint64_t secret;
} iface_addr_t;

typedef struct {
    dev_addr_t   dev;
    iface_addr_t iface;
    uint32_t     ud_qpn;
} target_t;


static int failures;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;       /* the UD QPs' */
static struct ibv_cq *rc_cq;    /* the RC QPs' */
static struct ibv_qp *ud;
static struct ibv_qp *ud2;      /* another UD QP (replay), or NULL */
static struct ibv_mr *mr;
static char *buf;               /* RX_COUNT receive buffers, then send,
                                   then RX2_COUNT of ud2's */
static int gid_index;
static union ibv_gid my_gid;
static struct ibv_port_attr port_attr;

#define CHECK(_cond, ...) \
    do { \
        int _ok = !!(_cond); \
        printf("%s: stranger: ", _ok ? "ok" : "FAIL"); \
        printf(__VA_ARGS__); \
        printf("\n"); \
        fflush(stdout); \
        failures += !_ok; \
    } while (0)

#define DIE(...) \
    do { \
        CHECK(0, __VA_ARGS__); \
        exit(1); \
    } while (0)


static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t random64(void)
{
    uint64_t v = 0;

    if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
        DIE("getrandom: %m");
    }
    return v;
}

static void hex_line(FILE *file, void *out, size_t length)
{
    char line[512];
    unsigned v;
    size_t i;

    if (fgets(line, sizeof(line), file) == NULL) {
        DIE("short address file");
    }
    for (i = 0; i < length; ++i) {
        if (sscanf(line + 2 * i, "%2x", &v) != 1) {
            DIE("malformed address file");
        }
        ((unsigned char*)out)[i] = v;
    }
}

static void target_read(const char *path, target_t *t)
{
    FILE *file = fopen(path, "r");

    if (file == NULL) {
        DIE("cannot open %s: %m", path);
    }
    hex_line(file, &t->dev, sizeof(t->dev));
    hex_line(file, &t->iface, sizeof(t->iface));
    fclose(file);
    t->ud_qpn = t->iface.qpn[0] | (t->iface.qpn[1] << 8) |
                ((uint32_t)t->iface.qpn[2] << 16);
}

/* The GID the transports pick on this port: the first RoCE v2 IPv4 one,
 * else index 0 (soft-RoCE over dummy0 has only the link-local one) */
static int pick_gid(void)
{
    union ibv_gid gid;
    int i;

    for (i = 0; i < port_attr.gid_tbl_len && i < 16; ++i) {
        if ((ibv_query_gid(ctx, 1, i, &gid) == 0) &&
            (gid.raw[10] == 0xff) && (gid.raw[11] == 0xff)) {
            return i;
        }
    }
    return 0;
}

#define RX2_OFFSET  (RX_COUNT * BUF_SIZE + BIG)
#define BUF_TOTAL   (RX2_OFFSET + RX2_COUNT * BUF_SIZE)

/* The receive buffer of wr_id, and the QP it belongs to */
static void recv_post(uint64_t wr_id)
{
    int second          = wr_id >= RX2_BASE;
    size_t offset       = second ? RX2_OFFSET + (wr_id - RX2_BASE) * BUF_SIZE :
                                   wr_id * BUF_SIZE;
    struct ibv_sge sge  = {(uintptr_t)buf + offset, BUF_SIZE, mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1},
                       *bad;

    if (ibv_post_recv(second ? ud2 : ud, &wr, &bad) != 0) {
        DIE("ibv_post_recv: %m");
    }
}

static char *recv_buf(uint64_t wr_id)
{
    return buf + ((wr_id >= RX2_BASE) ?
                  RX2_OFFSET + (wr_id - RX2_BASE) * BUF_SIZE :
                  wr_id * BUF_SIZE);
}

static struct ibv_qp *ud_new(unsigned rx_count)
{
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;
    struct ibv_qp *qp;

    memset(&init, 0, sizeof(init));
    init.qp_type          = IBV_QPT_UD;
    init.send_cq          = cq;
    init.recv_cq          = cq;
    init.cap.max_send_wr  = 64;
    init.cap.max_recv_wr  = rx_count;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    qp = ibv_create_qp(pd, &init);
    if (qp == NULL) {
        DIE("ibv_create_qp(UD): %m");
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qkey     = QKEY;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_QKEY) != 0) {
        DIE("UD INIT: %m");
    }
    attr.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) != 0) {
        DIE("UD RTR: %m");
    }
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn   = 0;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
        DIE("UD RTS: %m");
    }
    return qp;
}

static void open_device(const char *name)
{
    struct ibv_device **list;
    int i, n;

    list = ibv_get_device_list(&n);
    for (i = 0; (list != NULL) && (i < n); ++i) {
        if (!strcmp(ibv_get_device_name(list[i]), name)) {
            ctx = ibv_open_device(list[i]);
        }
    }
    if (ctx == NULL) {
        DIE("no device %s", name);
    }
    ibv_free_device_list(list);
    if (ibv_query_port(ctx, 1, &port_attr) != 0) {
        DIE("ibv_query_port: %m");
    }
    gid_index = pick_gid();
    if (ibv_query_gid(ctx, 1, gid_index, &my_gid) != 0) {
        DIE("ibv_query_gid: %m");
    }

    pd    = ibv_alloc_pd(ctx);
    cq    = ibv_create_cq(ctx, 256, NULL, NULL, 0);
    rc_cq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
    buf   = calloc(1, BUF_TOTAL);
    if ((pd == NULL) || (cq == NULL) || (rc_cq == NULL) || (buf == NULL)) {
        DIE("verbs objects: %m");
    }
    mr = ibv_reg_mr(pd, buf, BUF_TOTAL, IBV_ACCESS_LOCAL_WRITE);
    if (mr == NULL) {
        DIE("ibv_reg_mr: %m");
    }

    ud = ud_new(RX_COUNT);
    for (i = 0; i < RX_COUNT; ++i) {
        recv_post(i);
    }
}

/* A second UD QP, which receives too */
static void open_ud2(void)
{
    unsigned i;

    ud2 = ud_new(RX2_COUNT);
    for (i = 0; i < RX2_COUNT; ++i) {
        recv_post(RX2_BASE + i);
    }
}

static struct ibv_ah *ah_to(const target_t *t)
{
    struct ibv_ah_attr attr;
    struct ibv_ah *ah;

    memset(&attr, 0, sizeof(attr));
    attr.port_num       = 1;
    attr.dlid           = t->dev.lid;
    attr.is_global      = 1;
    memcpy(&attr.grh.dgid, &t->dev.gid, sizeof(attr.grh.dgid));
    attr.grh.sgid_index = gid_index;
    attr.grh.hop_limit  = 64;
    ah = ibv_create_ah(pd, &attr);
    if (ah == NULL) {
        DIE("ibv_create_ah: %m");
    }
    return ah;
}

static unsigned outstanding;    /* UD sends */

/* Handles one UD completion; 1 if it was a receive (its message, at most
 * sizeof(msg_t), in *msg, from the QP *qpn) */
static int ud_completion(const struct ibv_wc *wc, msg_t *msg, uint32_t *qpn)
{
    int got = 0;

    if (wc->wr_id == UINT64_MAX) {
        --outstanding;
        return 0;
    }
    if ((wc->status == IBV_WC_SUCCESS) && (wc->byte_len >= GRH_LEN + 48)) {
        memset(msg, 0, sizeof(*msg));
        memcpy(msg, recv_buf(wc->wr_id) + GRH_LEN,
               wc->byte_len - GRH_LEN < sizeof(*msg) ?
               wc->byte_len - GRH_LEN : sizeof(*msg));
        *qpn = (wc->wr_id >= RX2_BASE) ? ud2->qp_num : ud->qp_num;
        got  = 1;
    }
    recv_post(wc->wr_id);
    return got;
}

static void ud_send_on(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn,
                       const void *data, size_t length)
{
    char *sbuf = buf + RX_COUNT * BUF_SIZE;
    struct ibv_sge sge;
    struct ibv_send_wr wr, *bad;
    struct ibv_wc wc;
    uint32_t from;
    msg_t m;

    /* One at a time through the send buffer: wait for the last */
    while (outstanding > 0) {
        if ((ibv_poll_cq(cq, 1, &wc) > 0) && ud_completion(&wc, &m, &from)) {
            /* Answers are looked at by wait_answer */
            fprintf(stderr, "stranger: an answer while sending (type %d)\n",
                    m.type);
        }
    }
    memcpy(sbuf, data, length);
    sge.addr   = (uintptr_t)sbuf;
    sge.length = length;
    sge.lkey   = mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id             = UINT64_MAX;
    wr.opcode            = IBV_WR_SEND;
    wr.send_flags        = IBV_SEND_SIGNALED;
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = qpn;
    wr.wr.ud.remote_qkey = QKEY;
    if (ibv_post_send(qp, &wr, &bad) != 0) {
        DIE("ibv_post_send(UD, %zu bytes): %m", length);
    }
    ++outstanding;
}

static void ud_send(struct ibv_ah *ah, uint32_t qpn, const void *data,
                    size_t length)
{
    ud_send_on(ud, ah, qpn, data, length);
}

/* The first answer within seconds (its message in *msg), or 0 */
static int wait_answer(double seconds, msg_t *msg)
{
    double end = now() + seconds;
    struct ibv_wc wc;
    uint32_t qpn;

    while (now() < end) {
        if (ibv_poll_cq(cq, 1, &wc) <= 0) {
            usleep(1000);
        } else if (ud_completion(&wc, msg, &qpn)) {
            return 1;
        }
    }
    return 0;
}

/* A message from us, truthful about where it comes from */
static msg_t msg_make(int type, const target_t *t, uint64_t dst_secret)
{
    msg_t m;

    memset(&m, 0, sizeof(m));
    m.magic        = MAGIC;
    m.version      = 4;
    m.type         = type;
    m.mtu          = IBV_MTU_1024;
    m.flags        = 1;
    m.src_iface_id = random64();
    m.dst_iface_id = t->iface.id;
    m.dst_secret   = dst_secret;
    m.src_secret   = random64();
    m.conn_sn      = random64() % 4;
    m.rc_qpn       = random64() & 0xffffff;
    m.psn          = random64() & 0xffffff;
    m.src_ud_qpn   = ud->qp_num;
    m.src_lid      = port_attr.lid;
    m.src_gid      = my_gid;
    return m;
}

/* ------------------------------------------------------------ modes */

static void flood(const target_t *t, unsigned n)
{
    struct ibv_ah *ah = ah_to(t);
    double start      = now();
    msg_t m;
    unsigned i;

    for (i = 0; i < n; ++i) {
        /* No secret, a random one, and the right id or another's */
        m = msg_make(REQ, t, (i % 3 == 0) ? 0 : random64());
        if (i % 5 == 0) {
            m.dst_iface_id = random64();
        }
        ud_send(ah, t->ud_qpn, &m, sizeof(m));
    }
    CHECK(1, "sent %u connection requests without the target's secret in "
          "%.1f s", n, now() - start);
    ibv_destroy_ah(ah);
}

static void guess(const target_t *t, unsigned n)
{
    struct ibv_ah *ah = ah_to(t);
    msg_t m, answer;
    unsigned i;

    for (i = 0; i < n; ++i) {
        m = msg_make(REQ, t, random64());
        ud_send(ah, t->ud_qpn, &m, sizeof(m));
    }
    CHECK(!wait_answer(2.0, &answer), "%u requests with guessed secrets "
          "got no answer in 2 s", n);
    ibv_destroy_ah(ah);
}

static void forge(const target_t *t, const target_t *victim)
{
    struct ibv_ah *ah = ah_to(victim);
    static const int types[] = {REP, REJ, CHECK_REP, DISC};
    unsigned i, k, sent = 0;
    msg_t m;

    for (k = 0; k < 50; ++k) {
        for (i = 0; i < sizeof(types) / sizeof(types[0]); ++i) {
            /* The victim's secret (we know its address), the target's id,
             * the victim's first connection, but not the target's secret
             * and not from the target's QP */
            m = msg_make(types[i], victim, victim->iface.secret);
            m.src_iface_id = t->iface.id;
            m.conn_sn      = k % 2;
            m.result       = (types[i] == REJ) ? 1 :
                             (types[i] == CHECK_REP) ? 2 : 0;
            m.check_sn     = k;
            ud_send(ah, victim->ud_qpn, &m, sizeof(m));
            ++sent;
        }
    }
    CHECK(1, "sent %u forged answers, refusals, \"no such connection\" and "
          "DISCs to the victim, claiming to come from the target", sent);
    ibv_destroy_ah(ah);
}

#define RC_RX_BASE  5000        /* wr_id of the RC QPs' receives */
#define RC_RX_SIZE  256

static struct ibv_qp *rc_qp_new(unsigned rx_count)
{
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;
    struct ibv_qp *qp;
    unsigned i;

    memset(&init, 0, sizeof(init));
    init.qp_type          = IBV_QPT_RC;
    init.send_cq          = rc_cq;
    init.recv_cq          = rc_cq;
    init.cap.max_send_wr  = 16;
    init.cap.max_recv_wr  = rx_count ? rx_count : 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    qp = ibv_create_qp(pd, &init);
    if (qp == NULL) {
        DIE("ibv_create_qp(RC): %m");
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state        = IBV_QPS_INIT;
    attr.port_num        = 1;
    attr.qp_access_flags = 0;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
        DIE("RC INIT: %m");
    }
    /* (all into one scratch area: only that something came counts) */
    for (i = 0; i < rx_count; ++i) {
        struct ibv_sge sge = {(uintptr_t)buf + RX_COUNT * BUF_SIZE + 8192 +
                              (i % 32) * RC_RX_SIZE, RC_RX_SIZE, mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = RC_RX_BASE + i, .sg_list = &sge,
                                 .num_sge = 1}, *bad;

        if (ibv_post_recv(qp, &wr, &bad) != 0) {
            DIE("ibv_post_recv(RC): %m");
        }
    }
    return qp;
}

static void rc_qp_connect(struct ibv_qp *qp, const target_t *t,
                          const msg_t *rep, uint32_t psn)
{
    struct ibv_qp_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state              = IBV_QPS_RTR;
    attr.path_mtu              = IBV_MTU_1024;
    attr.dest_qp_num           = rep->rc_qpn;
    attr.rq_psn                = rep->psn;
    attr.max_dest_rd_atomic    = 1;
    attr.min_rnr_timer         = 12;
    attr.ah_attr.port_num      = 1;
    attr.ah_attr.dlid          = t->dev.lid;
    attr.ah_attr.is_global     = 1;
    memcpy(&attr.ah_attr.grh.dgid, &t->dev.gid, sizeof(attr.ah_attr.grh.dgid));
    attr.ah_attr.grh.sgid_index = gid_index;
    attr.ah_attr.grh.hop_limit = 64;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
        DIE("RC RTR: %m");
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state      = IBV_QPS_RTS;
    attr.sq_psn        = psn;
    attr.timeout       = 14;
    attr.retry_cnt     = 3;
    attr.rnr_retry     = 3;
    attr.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN |
                      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
        DIE("RC RTS: %m");
    }
}

/* The handshake of *req (its QP and PSN filled in here) for a new RC QP
 * with rx_count receive buffers; the QP, connected, or NULL if no REP came
 * within seconds */
static struct ibv_qp *rc_connect_as(const target_t *t, msg_t *req,
                                    unsigned rx_count, double seconds,
                                    msg_t *rep_p)
{
    struct ibv_ah *ah = ah_to(t);
    struct ibv_qp *qp = rc_qp_new(rx_count);
    msg_t rep;

    req->rc_qpn = qp->qp_num;
    req->psn    = random64() & 0xffffff;
    ud_send(ah, t->ud_qpn, req, sizeof(*req));
    ibv_destroy_ah(ah);
    if (!wait_answer(seconds, &rep) || (rep.type != REP)) {
        ibv_destroy_qp(qp);
        return NULL;
    }
    rc_qp_connect(qp, t, &rep, req->psn);
    *rep_p = rep;
    return qp;
}

static struct ibv_qp *rc_connect(const target_t *t, msg_t *rep_p)
{
    msg_t req = msg_make(REQ, t, t->iface.secret);
    struct ibv_qp *qp;

    req.conn_sn = 0;
    qp = rc_connect_as(t, &req, 0, 10.0, rep_p);
    if (qp == NULL) {
        DIE("no REP to a request with the target's secret");
    }
    return qp;
}

/* Posts one send; returns its completion status */
static enum ibv_wc_status rc_send(struct ibv_qp *qp, enum ibv_wr_opcode op,
                                  uint32_t imm, size_t length)
{
    char *sbuf = buf + RX_COUNT * BUF_SIZE;
    struct ibv_sge sge = {(uintptr_t)sbuf, (uint32_t)length, mr->lkey};
    struct ibv_send_wr wr, *bad;
    double end = now() + 30;
    struct ibv_wc wc;

    memset(sbuf, 0x5a, length);
    memset(&wr, 0, sizeof(wr));
    wr.wr_id      = 7;
    wr.opcode     = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data   = htonl(imm);
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    if (ibv_post_send(qp, &wr, &bad) != 0) {
        return IBV_WC_GENERAL_ERR;
    }
    while (now() < end) {
        if ((ibv_poll_cq(rc_cq, 1, &wc) > 0) && (wc.wr_id == 7)) {
            return wc.status;
        }
    }
    return IBV_WC_RESP_TIMEOUT_ERR;
}

static void inject(const target_t *t)
{
    enum ibv_wc_status st;
    struct ibv_qp *qp;
    unsigned i, ok;
    msg_t rep;

    qp = rc_connect(t, &rep);
    CHECK(1, "connected an RC QP to the target's 0x%x as one who knows its "
          "address", rep.rc_qpn);

    st = rc_send(qp, IBV_WR_SEND_WITH_IMM, 64, 16);
    CHECK(st == IBV_WC_SUCCESS, "sent an active message with id 64 (%s)",
          ibv_wc_status_str(st));
    st = rc_send(qp, IBV_WR_SEND_WITH_IMM, 255, 16);
    CHECK(st == IBV_WC_SUCCESS, "sent one with id 255 (%s)",
          ibv_wc_status_str(st));
    st = rc_send(qp, IBV_WR_SEND_WITH_IMM, 0x10005, 16);
    CHECK(st == IBV_WC_SUCCESS, "sent one with flags rc_share does not "
          "know (%s)", ibv_wc_status_str(st));
    st = rc_send(qp, IBV_WR_SEND, 0, 16);
    CHECK(st == IBV_WC_SUCCESS, "sent one without immediate data (%s)",
          ibv_wc_status_str(st));
    /* An id below UCX's 32, which the target never set: UCX's stub would
     * warn for each */
    for (i = ok = 0; i < 100; ++i) {
        ok += rc_send(qp, IBV_WR_SEND_WITH_IMM, 17, 16) == IBV_WC_SUCCESS;
    }
    CHECK(ok == 100, "sent 100 active messages with id 17, which the "
          "target has no handler for (%u completed)", ok);
    /* Longer than the receive buffers: the target's receive fails, and
     * so does the connection, whatever our side makes of it */
    st = rc_send(qp, IBV_WR_SEND_WITH_IMM, 5, BIG);
    CHECK(1, "sent one of %d bytes, longer than the target's buffers (%s)",
          BIG, ibv_wc_status_str(st));
    ibv_destroy_qp(qp);
}

static void version(const target_t *t)
{
    struct ibv_ah *ah = ah_to(t);
    unsigned char old[71];
    msg_t m, answer;
    int got;

    m         = msg_make(REQ, t, t->iface.secret);
    m.version = 5;
    ud_send(ah, t->ud_qpn, &m, sizeof(m));
    got = wait_answer(5.0, &answer);
    CHECK(got && (answer.type == REJ) && (answer.result == 2) &&
          (answer.version == 4) && (answer.dst_secret == m.src_secret),
          "a request of version 5 is refused with REJ(VERSION) of version 4 "
          "(%s: type %d, result %d, version %d)", got ? "answer" : "none",
          answer.type, answer.result, answer.version);

    /* Version 3: 65 bytes, without the source */
    m         = msg_make(REQ, t, t->iface.secret);
    m.version = 3;
    ud_send(ah, t->ud_qpn, &m, MSG_V3_LEN);
    got = wait_answer(5.0, &answer);
    CHECK(got && (answer.type == REJ) && (answer.result == 2) &&
          (answer.version == 4) && (answer.dst_secret == m.src_secret),
          "a request of version 3 is refused with REJ(VERSION) of version 4 "
          "(%s: type %d, result %d, version %d)", got ? "answer" : "none",
          answer.type, answer.result, answer.version);

    /* Version 2: the magic, version and type where they always were */
    memset(old, 0, sizeof(old));
    memcpy(old, &m, 6);
    old[4] = 2;
    ud_send(ah, t->ud_qpn, old, sizeof(old));
    CHECK(!wait_answer(2.0, &answer), "a request of version 2 gets no "
          "answer (it carries no secret)");
    ibv_destroy_ah(ah);
}

static void versions(const target_t *t, unsigned n)
{
    struct ibv_ah *ah = ah_to(t);
    double start      = now();
    msg_t m, answer;
    unsigned i;

    for (i = 0; i < n; ++i) {
        m         = msg_make(REQ, t, (i % 4 < 2) ? t->iface.secret : 0);
        m.version = 5 + (i % 2);
        ud_send(ah, t->ud_qpn, &m, sizeof(m));
        while (wait_answer(0, &answer)) {
            /* (the REJ(VERSION)s to those with the secret) */
        }
    }
    CHECK(1, "sent %u requests of versions 5 and 6 in turn in %.1f s", n,
          now() - start);
    ibv_destroy_ah(ah);
}

/* A request with the target's secret answered within seconds: its UD QP
 * receives and sends. The connection it made goes at once (DISC) */
static int answers(const target_t *t, double seconds, double *took)
{
    struct ibv_ah *ah = ah_to(t);
    double start      = now(), end = start + seconds;
    msg_t req, answer;
    int got = 0;

    req = msg_make(REQ, t, t->iface.secret);
    while (!got && (now() < end)) {
        ud_send(ah, t->ud_qpn, &req, sizeof(req));
        got = wait_answer(0.5, &answer) && (answer.type == REP) &&
              (answer.dst_iface_id == req.src_iface_id);
    }
    *took = now() - start;
    if (got) {
        req.type       = DISC;
        req.dst_rc_qpn = answer.rc_qpn;
        ud_send(ah, t->ud_qpn, &req, sizeof(req));
    }
    ibv_destroy_ah(ah);
    return got;
}

static void oversize(const target_t *t)
{
    struct ibv_ah *ah = ah_to(t);
    unsigned mtu      = 128u << port_attr.active_mtu;
    unsigned length, sent = 0;
    unsigned char *p  = malloc(mtu);
    double took;
    msg_t m;

    if (p == NULL) {
        DIE("malloc: %m");
    }
    /* Every length, in steps past the message's own: garbage, and a
     * request (with the secret) followed by garbage */
    for (length = 0; length <= mtu;
         length += (length < 2 * BUF_SIZE) ? 1 : 61) {
        unsigned i;

        for (i = 0; i < length; ++i) {
            p[i] = random64();
        }
        if ((length % 2) && (length > sizeof(m))) {
            m = msg_make(REQ, t, t->iface.secret);
            memcpy(p, &m, sizeof(m));
        }
        ud_send(ah, t->ud_qpn, p, length);
        ++sent;
    }
    ud_send(ah, t->ud_qpn, p, mtu);
    ++sent;
    CHECK(1, "sent %u UD packets of 0 to %u bytes (the port's MTU)", sent,
          mtu);
    CHECK(answers(t, 20.0, &took), "the target answered a request after "
          "them (in %.1f s)", took);
    free(p);
    ibv_destroy_ah(ah);
}

static void withhold(const target_t *t, unsigned conns, unsigned msgs,
                     double seconds)
{
    struct ibv_qp **qps = calloc(conns, sizeof(*qps));
    unsigned i, k, ok = 0, sent = 0;
    msg_t rep;

    if (qps == NULL) {
        DIE("calloc: %m");
    }
    for (i = 0; i < conns; ++i) {
        qps[i] = rc_connect(t, &rep);
        ++ok;
    }
    for (k = 0; k < msgs; ++k) {
        for (i = 0; i < conns; ++i) {
            /* A sink message (AM 3) that asks for credits at once */
            sent += rc_send(qps[i], IBV_WR_SEND_WITH_IMM, 3 | IMM_HARD_REQ,
                            16) == IBV_WC_SUCCESS;
        }
    }
    CHECK(sent == conns * msgs, "%u connections that post no receive "
          "buffer sent %u messages asking for credits (%u completed)", ok,
          conns * msgs, sent);
    printf("withhold: holding\n");
    fflush(stdout);
    usleep(seconds * 1e6);
    for (i = 0; i < conns; ++i) {
        ibv_destroy_qp(qps[i]);
    }
    free(qps);
}

static void impersonate(const target_t *t, const target_t *victim,
                        double seconds)
{
    struct ibv_qp *qps[4];
    struct ibv_ah *ah;
    unsigned i, n = 0, n4, received = 0;
    double end;
    struct ibv_wc wc;
    msg_t req, rep, answer;

    for (i = 0; i < 4; ++i) {
        req              = msg_make(REQ, t, t->iface.secret);
        req.src_iface_id = victim->iface.id;
        req.src_secret   = victim->iface.secret;
        req.conn_sn      = i;
        qps[n] = rc_connect_as(t, &req, 16, 5.0, &rep);
        n     += qps[n] != NULL;
    }
    CHECK(1, "connections 0-3 asked for as the victim (its id and secret, "
          "from our own UD QP): %u of 4 made", n);

    /* Claiming its UD QP too: the completion shows ours */
    ah               = ah_to(t);
    req              = msg_make(REQ, t, t->iface.secret);
    req.src_iface_id = victim->iface.id;
    req.src_secret   = victim->iface.secret;
    req.src_ud_qpn   = victim->ud_qpn;
    req.conn_sn      = 4;
    ud_send(ah, t->ud_qpn, &req, sizeof(req));
    n4  = 0;
    end = now() + 2.0;
    while (now() < end) {
        /* (checks of the connections above come too) */
        n4 += wait_answer(end - now(), &answer) && (answer.conn_sn == 4) &&
              ((answer.type == REP) || (answer.type == REJ));
    }
    CHECK(n4 == 0, "a request claiming the victim's UD QP as well gets no "
          "answer (%u)", n4);
    ibv_destroy_ah(ah);

    printf("impersonate: listening\n");
    fflush(stdout);
    /* No check answered (our UD QP's receives are left where they are) */
    end = now() + seconds;
    while (now() < end) {
        if (ibv_poll_cq(rc_cq, 1, &wc) <= 0) {
            usleep(1000);
        } else if ((wc.wr_id >= RC_RX_BASE) &&
                   (wc.status != IBV_WC_WR_FLUSH_ERR)) {
            ++received;
        }
    }
    CHECK(received == 0, "nothing meant for the victim arrived on those "
          "connections in %.0f s (%u messages)", seconds, received);
    for (i = 0; i < n; ++i) {
        ibv_destroy_qp(qps[i]);
    }
}

static void replay(const target_t *t)
{
    struct ibv_ah *ah = ah_to(t);
    msg_t req, rep, disc, answer;
    struct ibv_qp *qp;
    int got;

    req         = msg_make(REQ, t, t->iface.secret);
    req.conn_sn = 0;
    qp = rc_connect_as(t, &req, 0, 10.0, &rep);
    CHECK(qp != NULL, "a connection made (the target's QP 0x%x)",
          (qp != NULL) ? rep.rc_qpn : 0);
    if (qp == NULL) {
        return;
    }

    disc            = req;
    disc.type       = DISC;
    disc.flags      = 2;
    disc.dst_rc_qpn = rep.rc_qpn;
    ud_send(ah, t->ud_qpn, &disc, sizeof(disc));
    got = wait_answer(10.0, &answer);
    CHECK(got && (answer.type == DISC), "and ended: our DISC answered with "
          "the target's (%s, type %d)", got ? "answer" : "none",
          got ? answer.type : 0);
    ibv_destroy_qp(qp);
    printf("replay: ended\n");
    fflush(stdout);
    sleep(1);

    /* The same bytes again, as one who captured them */
    ud_send(ah, t->ud_qpn, &req, sizeof(req));
    CHECK(!wait_answer(3.0, &answer), "the request sent again from its "
          "own UD QP gets no answer");
    open_ud2();
    ud_send_on(ud2, ah, t->ud_qpn, &req, sizeof(req));
    CHECK(!wait_answer(3.0, &answer), "nor from another UD QP");
    ibv_destroy_ah(ah);
}

int main(int argc, char **argv)
{
    target_t t, victim;

    if (argc < 4) {
        fprintf(stderr, "usage: stranger DEVICE "
                "flood|guess|forge|inject|version|versions|oversize|"
                "withhold|impersonate|replay FILE [ARGS]\n");
        return 2;
    }
    open_device(argv[1]);
    target_read(argv[3], &t);

    if (!strcmp(argv[2], "flood") && (argc == 5)) {
        flood(&t, atoi(argv[4]));
    } else if (!strcmp(argv[2], "guess") && (argc == 5)) {
        guess(&t, atoi(argv[4]));
    } else if (!strcmp(argv[2], "forge") && (argc == 5)) {
        target_read(argv[4], &victim);
        forge(&t, &victim);
    } else if (!strcmp(argv[2], "inject")) {
        inject(&t);
    } else if (!strcmp(argv[2], "version")) {
        version(&t);
    } else if (!strcmp(argv[2], "versions") && (argc == 5)) {
        versions(&t, atoi(argv[4]));
    } else if (!strcmp(argv[2], "oversize")) {
        oversize(&t);
    } else if (!strcmp(argv[2], "withhold") && (argc == 7)) {
        withhold(&t, atoi(argv[4]), atoi(argv[5]), atof(argv[6]));
    } else if (!strcmp(argv[2], "impersonate") && (argc == 6)) {
        target_read(argv[4], &victim);
        impersonate(&t, &victim, atof(argv[5]));
    } else if (!strcmp(argv[2], "replay")) {
        replay(&t);
    } else {
        fprintf(stderr, "stranger: bad arguments\n");
        return 2;
    }
    return failures ? 1 : 0;
}
