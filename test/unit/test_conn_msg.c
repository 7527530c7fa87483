/**
 * The handshake message check: every malformed message is refused, the
 * liveness check and its answer included.
 */
#include "rc_share_conn.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>


static uct_rc_share_conn_msg_t valid_msg(void)
{
    uct_rc_share_conn_msg_t msg;

    memset(&msg, 0, sizeof(msg));
    msg.magic   = UCT_RC_SHARE_CONN_MAGIC;
    msg.version = UCT_RC_SHARE_CONN_VERSION;
    msg.type    = UCT_RC_SHARE_CONN_REQ;
    msg.mtu     = IBV_MTU_1024;
    msg.rc_qpn  = 0x12;
    msg.psn     = 0xabcdef;
    msg.ud_qpn  = 0x11;
    return msg;
}

static uct_rc_share_conn_msg_t valid_check(void)
{
    uct_rc_share_conn_msg_t msg = valid_msg();

    msg.type        = UCT_RC_SHARE_CONN_CHECK;
    msg.src_conn_id = 7;
    msg.dst_rc_qpn  = 0x13;
    msg.check_sn    = 0xffffffffu; /* any number: it wraps */
    return msg;
}

static uct_rc_share_conn_msg_t valid_check_rep(void)
{
    uct_rc_share_conn_msg_t msg = valid_check();

    msg.type        = UCT_RC_SHARE_CONN_CHECK_REP;
    msg.dst_conn_id = 7;
    msg.dst_rc_qpn  = 0;
    msg.result      = UCT_RC_SHARE_CONN_CHECK_CONNECTED;
    return msg;
}

static void test_valid(void **state)
{
    uct_rc_share_conn_msg_t msg = valid_msg();
    int type;

    for (type = UCT_RC_SHARE_CONN_REQ; type <= UCT_RC_SHARE_CONN_CHECK;
         ++type) {
        msg.type = type;
        assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    }

    msg = valid_check();
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)), UCS_OK);
    msg = valid_check_rep();
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)), UCS_OK);
    msg.result = UCT_RC_SHARE_CONN_CHECK_NO_CONN;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)), UCS_OK);
}

/* The layout the other side reads: a change must bump the version */
static void test_layout(void **state)
{
    assert_int_equal(sizeof(uct_rc_share_conn_msg_t), 71);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, result), 7);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, dst_rc_qpn), 44);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, check_sn), 48);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, dev), 52);
    assert_int_equal(UCT_RC_SHARE_CONN_VERSION, 2);
}

static void test_length(void **state)
{
    uct_rc_share_conn_msg_t msg = valid_msg();
    char big[sizeof(msg) + 8];

    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg) - 1),
                     UCS_ERR_MESSAGE_TRUNCATED);
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, 0),
                     UCS_ERR_MESSAGE_TRUNCATED);
    memcpy(big, &msg, sizeof(msg));
    assert_int_equal(uct_rc_share_conn_msg_check(big, sizeof(big)),
                     UCS_ERR_MESSAGE_TRUNCATED);
}

static void test_fields(void **state)
{
    uct_rc_share_conn_msg_t msg;

    msg = valid_msg(); msg.magic ^= 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_msg(); msg.version = UCT_RC_SHARE_CONN_VERSION + 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_UNSUPPORTED);
    /* A peer of version 1, which has no checks, is not talked to */
    msg = valid_msg(); msg.version = 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_UNSUPPORTED);
    msg = valid_msg(); msg.type = 0;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.type = UCT_RC_SHARE_CONN_CHECK_REP + 1;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.mtu = 0;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.mtu = IBV_MTU_4096 + 1;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.rc_qpn = 0x1000000; /* QPNs have 24 bits */
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.psn = 0x1000000;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.ud_qpn = 0xffffffff;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
}

/* The check and its answer: a result only in the answer, and a known one */
static void test_check_fields(void **state)
{
    uct_rc_share_conn_msg_t msg;
    int type;

    for (type = UCT_RC_SHARE_CONN_REQ; type <= UCT_RC_SHARE_CONN_CHECK;
         ++type) {
        msg = valid_check(); msg.type = type;
        msg.result = UCT_RC_SHARE_CONN_CHECK_CONNECTED;
        assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_ERR_INVALID_PARAM);
        msg.result = UCT_RC_SHARE_CONN_CHECK_NO_CONN;
        assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_ERR_INVALID_PARAM);
        msg.result = 0xff;
        assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_ERR_INVALID_PARAM);
    }

    msg = valid_check_rep(); msg.result = 0;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_check_rep(); msg.result = UCT_RC_SHARE_CONN_CHECK_NO_CONN + 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_check_rep(); msg.result = 0xff;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);

    msg = valid_check(); msg.dst_rc_qpn = 0x1000000; /* 24 bits */
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_check(); msg.rc_qpn = 0x1000000;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_check_rep(); msg.rc_qpn = 0xffffffff;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_check_rep(); msg.ud_qpn = 0x1000000;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_check(); msg.mtu = IBV_MTU_4096 + 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);

    msg = valid_check();
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg) - 1),
                     UCS_ERR_MESSAGE_TRUNCATED);
    msg = valid_check_rep(); msg.magic = 0;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_check_rep(); msg.version = 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_UNSUPPORTED);
}

/* Seeded random input: never accepted unless it is a well-formed message */
static void test_random(void **state)
{
    uct_rc_share_conn_msg_t msg;
    unsigned char buf[2 * sizeof(msg)];
    unsigned seed = 12345, i, accepted = 0;
    size_t length, k;

    for (i = 0; i < 200000; ++i) {
        length = rand_r(&seed) % sizeof(buf);
        for (k = 0; k < length; ++k) {
            buf[k] = rand_r(&seed);
        }
        if (i % 2) {
            /* Half the inputs start as a valid message with random damage */
            msg = (i % 3 == 0) ? valid_msg() :
                  (i % 3 == 1) ? valid_check() : valid_check_rep();
            memcpy(buf, &msg, sizeof(msg));
            buf[rand_r(&seed) % sizeof(msg)] ^= 1 << (rand_r(&seed) % 8);
            length = sizeof(msg);
        }
        if (uct_rc_share_conn_msg_check(buf, length) == UCS_OK) {
            memcpy(&msg, buf, sizeof(msg));
            assert_int_equal(length, sizeof(msg));
            assert_int_equal(msg.magic, UCT_RC_SHARE_CONN_MAGIC);
            assert_int_equal(msg.version, UCT_RC_SHARE_CONN_VERSION);
            assert_true((msg.type >= UCT_RC_SHARE_CONN_REQ) &&
                        (msg.type <= UCT_RC_SHARE_CONN_CHECK_REP));
            assert_true(msg.rc_qpn < 0x1000000);
            assert_true(msg.dst_rc_qpn < 0x1000000);
            if (msg.type == UCT_RC_SHARE_CONN_CHECK_REP) {
                assert_true((msg.result ==
                             UCT_RC_SHARE_CONN_CHECK_CONNECTED) ||
                            (msg.result == UCT_RC_SHARE_CONN_CHECK_NO_CONN));
            } else {
                assert_int_equal(msg.result, 0);
            }
            ++accepted;
        }
    }
    /* Damage to fields without a range (ids, GID) keeps a message valid */
    assert_true(accepted > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_length),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_check_fields),
        cmocka_unit_test(test_random),
    };

    return cmocka_run_group_tests_name("conn_msg", tests, NULL, NULL);
}
