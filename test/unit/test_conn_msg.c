/**
 * The handshake message check: every malformed message is refused.
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

static void test_valid(void **state)
{
    uct_rc_share_conn_msg_t msg = valid_msg();
    int type;

    for (type = UCT_RC_SHARE_CONN_REQ; type <= UCT_RC_SHARE_CONN_DISC;
         ++type) {
        msg.type = type;
        assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    }
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
    msg = valid_msg(); msg.type = 0;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.type = UCT_RC_SHARE_CONN_DISC + 1;
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
            msg = valid_msg();
            memcpy(buf, &msg, sizeof(msg));
            buf[rand_r(&seed) % sizeof(msg)] ^= 1 << (rand_r(&seed) % 8);
            length = sizeof(msg);
        }
        if (uct_rc_share_conn_msg_check(buf, length) == UCS_OK) {
            memcpy(&msg, buf, sizeof(msg));
            assert_int_equal(length, sizeof(msg));
            assert_int_equal(msg.magic, UCT_RC_SHARE_CONN_MAGIC);
            assert_int_equal(msg.version, UCT_RC_SHARE_CONN_VERSION);
            assert_true((msg.type >= 1) && (msg.type <= 3));
            assert_true(msg.rc_qpn < 0x1000000);
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
        cmocka_unit_test(test_length),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_random),
    };

    return cmocka_run_group_tests_name("conn_msg", tests, NULL, NULL);
}
