/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * A host of the fabric that is no member of the job: raw verbs, no UCX. It
 * sends rc_share's handshake messages (protocol version 3, the layout
 * copied here: the wire is the contract) to the UD QP of an iface whose
 * address file conn_check wrote, with the public Q_Key, as anyone on the
 * fabric could. test/guest/conn_stranger.sh checks what the target then
 * holds and whether it still serves.
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
 *                                    data, one longer than its buffers
 *   stranger DEVICE version FILE     a request of version 4 (refused with
 *                                    REJ(VERSION)) and one of version 2
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

enum { REQ = 1, REP, REJ, DISC, CHECK, CHECK_REP };

typedef struct __attribute__((packed)) {
    uint32_t magic;
    uint8_t  version, type, result, flags;
    uint64_t src_iface_id, dst_iface_id, dst_secret, src_secret, conn_sn;
    uint32_t rc_qpn, psn, dst_rc_qpn, check_sn;
    uint8_t  mtu;
} msg_t;

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
static struct ibv_cq *cq;
static struct ibv_qp *ud;
static struct ibv_mr *mr;
static char *buf;                /* RX_COUNT receive buffers, then send */
static int gid_index;
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

static void open_device(const char *name)
{
    struct ibv_device **list;
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;
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

    pd  = ibv_alloc_pd(ctx);
    cq  = ibv_create_cq(ctx, 256, NULL, NULL, 0);
    buf = calloc(1, RX_COUNT * BUF_SIZE + BIG);
    if ((pd == NULL) || (cq == NULL) || (buf == NULL)) {
        DIE("verbs objects: %m");
    }
    mr = ibv_reg_mr(pd, buf, RX_COUNT * BUF_SIZE + BIG,
                    IBV_ACCESS_LOCAL_WRITE);
    if (mr == NULL) {
        DIE("ibv_reg_mr: %m");
    }

    memset(&init, 0, sizeof(init));
    init.qp_type          = IBV_QPT_UD;
    init.send_cq          = cq;
    init.recv_cq          = cq;
    init.cap.max_send_wr  = 64;
    init.cap.max_recv_wr  = RX_COUNT;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    ud = ibv_create_qp(pd, &init);
    if (ud == NULL) {
        DIE("ibv_create_qp(UD): %m");
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qkey     = QKEY;
    if (ibv_modify_qp(ud, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_QKEY) != 0) {
        DIE("UD INIT: %m");
    }
    attr.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(ud, &attr, IBV_QP_STATE) != 0) {
        DIE("UD RTR: %m");
    }
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn   = 0;
    if (ibv_modify_qp(ud, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
        DIE("UD RTS: %m");
    }

    for (i = 0; i < RX_COUNT; ++i) {
        struct ibv_sge sge = {(uintptr_t)buf + i * BUF_SIZE, BUF_SIZE,
                              mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1},
                           *bad;

        if (ibv_post_recv(ud, &wr, &bad) != 0) {
            DIE("ibv_post_recv: %m");
        }
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

static void ud_send(struct ibv_ah *ah, uint32_t qpn, const void *data,
                    size_t length)
{
    char *sbuf = buf + RX_COUNT * BUF_SIZE;
    struct ibv_sge sge;
    struct ibv_send_wr wr, *bad;
    struct ibv_wc wc;

    /* One at a time through the send buffer: wait for the last */
    while (outstanding > 0) {
        if (ibv_poll_cq(cq, 1, &wc) > 0) {
            if (wc.wr_id == UINT64_MAX) {
                --outstanding;
            } else {
                /* A receive: answers are looked at by wait_answer */
                struct ibv_sge rs = {(uintptr_t)buf + wc.wr_id * BUF_SIZE,
                                     BUF_SIZE, mr->lkey};
                struct ibv_recv_wr rwr = {.wr_id = wc.wr_id, .sg_list = &rs,
                                          .num_sge = 1}, *rbad;

                fprintf(stderr, "stranger: an answer while sending "
                        "(%u bytes)\n", wc.byte_len);
                (void)ibv_post_recv(ud, &rwr, &rbad);
            }
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
    if (ibv_post_send(ud, &wr, &bad) != 0) {
        DIE("ibv_post_send(UD): %m");
    }
    ++outstanding;
}

/* The first answer within seconds (its message in *msg), or 0 */
static int wait_answer(double seconds, msg_t *msg)
{
    double end = now() + seconds;
    struct ibv_wc wc;
    int got = 0;

    while (!got && (now() < end)) {
        if (ibv_poll_cq(cq, 1, &wc) <= 0) {
            usleep(1000);
            continue;
        }
        if (wc.wr_id == UINT64_MAX) {
            --outstanding;
            continue;
        }
        if ((wc.status == IBV_WC_SUCCESS) &&
            (wc.byte_len >= GRH_LEN + 48)) {
            memset(msg, 0, sizeof(*msg));
            memcpy(msg, buf + wc.wr_id * BUF_SIZE + GRH_LEN,
                   wc.byte_len - GRH_LEN < sizeof(*msg) ?
                   wc.byte_len - GRH_LEN : sizeof(*msg));
            got = 1;
        }
        {
            struct ibv_sge rs = {(uintptr_t)buf + wc.wr_id * BUF_SIZE,
                                 BUF_SIZE, mr->lkey};
            struct ibv_recv_wr rwr = {.wr_id = wc.wr_id, .sg_list = &rs,
                                      .num_sge = 1}, *rbad;

            (void)ibv_post_recv(ud, &rwr, &rbad);
        }
    }
    return got;
}

static msg_t msg_make(int type, const target_t *t, uint64_t dst_secret)
{
    msg_t m;

    memset(&m, 0, sizeof(m));
    m.magic        = MAGIC;
    m.version      = 3;
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

static struct ibv_qp *rc_connect(const target_t *t, msg_t *rep_p)
{
    struct ibv_ah *ah = ah_to(t);
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;
    struct ibv_qp *qp;
    msg_t req, rep;
    uint32_t psn = random64() & 0xffffff;

    memset(&init, 0, sizeof(init));
    init.qp_type          = IBV_QPT_RC;
    init.send_cq          = cq;
    init.recv_cq          = cq;
    init.cap.max_send_wr  = 16;
    init.cap.max_recv_wr  = 1;
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

    req        = msg_make(REQ, t, t->iface.secret);
    req.rc_qpn = qp->qp_num;
    req.psn    = psn;
    req.conn_sn = 0;
    ud_send(ah, t->ud_qpn, &req, sizeof(req));
    if (!wait_answer(10.0, &rep) || (rep.type != REP)) {
        DIE("no REP to a request with the target's secret");
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state              = IBV_QPS_RTR;
    attr.path_mtu              = IBV_MTU_1024;
    attr.dest_qp_num           = rep.rc_qpn;
    attr.rq_psn                = rep.psn;
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
    ibv_destroy_ah(ah);
    *rep_p = rep;
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
        if ((ibv_poll_cq(cq, 1, &wc) > 0) && (wc.wr_id == 7)) {
            return wc.status;
        }
    }
    return IBV_WC_RESP_TIMEOUT_ERR;
}

static void inject(const target_t *t)
{
    enum ibv_wc_status st;
    struct ibv_qp *qp;
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
    m.version = 4;
    ud_send(ah, t->ud_qpn, &m, sizeof(m));
    got = wait_answer(5.0, &answer);
    CHECK(got && (answer.type == REJ) && (answer.result == 2) &&
          (answer.version == 3) && (answer.dst_secret == m.src_secret),
          "a request of version 4 is refused with REJ(VERSION) of version 3 "
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

int main(int argc, char **argv)
{
    target_t t, victim;

    if (argc < 4) {
        fprintf(stderr, "usage: stranger DEVICE "
                "flood|guess|forge|inject|version FILE [N|VICTIM]\n");
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
    } else {
        fprintf(stderr, "stranger: bad arguments\n");
        return 2;
    }
    return failures ? 1 : 0;
}
