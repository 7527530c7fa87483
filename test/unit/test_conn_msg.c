/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The handshake message check (protocol version 4): every malformed
 * message is refused, every type with its results, the layout the other
 * side reads, and the stable prefix by which a message of another version
 * is told apart.
 */
#include "rc/rc_share_conn.h"

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
    msg.magic        = UCT_RC_SHARE_CONN_MAGIC;
    msg.version      = UCT_RC_SHARE_CONN_VERSION;
    msg.type         = UCT_RC_SHARE_CONN_REQ;
    msg.flags        = UCT_RC_SHARE_CONN_FLAG_TX;
    msg.src_iface_id = 0x1111;
    msg.dst_iface_id = 0x2222;
    msg.dst_secret   = 0xdeadbeefcafef00dull;
    msg.src_secret   = 0x0123456789abcdefull;
    msg.conn_sn      = 3;
    msg.mtu          = IBV_MTU_1024;
    msg.rc_qpn       = 0x12;
    msg.psn          = 0xabcdef;
    msg.src_ud_qpn   = 0x11;
    return msg;
}

static uct_rc_share_conn_msg_t valid_of(int type)
{
    uct_rc_share_conn_msg_t msg = valid_msg();

    msg.type = type;
    switch (type) {
    case UCT_RC_SHARE_CONN_REJ:
        msg.result = UCT_RC_SHARE_CONN_REJ_NO_RESOURCE;
        break;
    case UCT_RC_SHARE_CONN_CHECK:
        msg.dst_rc_qpn = 0x13;
        msg.check_sn   = 0xffffffffu; /* any number: it wraps */
        msg.flags      = UCT_RC_SHARE_CONN_FLAG_DETACHED;
        break;
    case UCT_RC_SHARE_CONN_CHECK_REP:
        msg.result = UCT_RC_SHARE_CONN_CHECK_CONNECTED;
        break;
    }
    return msg;
}

static void test_valid(void **state)
{
    uct_rc_share_conn_msg_t msg;
    int type;

    for (type = UCT_RC_SHARE_CONN_REQ; type <= UCT_RC_SHARE_CONN_CHECK_REP;
         ++type) {
        msg = valid_of(type);
        assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    }
    msg = valid_of(UCT_RC_SHARE_CONN_REJ);
    msg.result = UCT_RC_SHARE_CONN_REJ_VERSION;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)), UCS_OK);
    msg = valid_of(UCT_RC_SHARE_CONN_CHECK_REP);
    msg.result = UCT_RC_SHARE_CONN_CHECK_NO_CONN;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)), UCS_OK);
}

/* The layout the other side reads: a change must bump the version, and the
 * first 48 bytes keep their meaning in every version from 3 on */
static void test_layout(void **state)
{
    assert_int_equal(sizeof(uct_rc_share_conn_msg_t), 87);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, version), 4);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, type), 5);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, result), 6);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, src_iface_id), 8);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, dst_iface_id), 16);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, dst_secret), 24);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, src_secret), 32);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, conn_sn), 40);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, rc_qpn), 48);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, mtu), 64);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, src_ud_qpn), 65);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, src_lid), 69);
    assert_int_equal(offsetof(uct_rc_share_conn_msg_t, src_gid), 71);
    assert_int_equal(UCT_RC_SHARE_CONN_VERSION, 4);
}

static void test_length(void **state)
{
    uct_rc_share_conn_msg_t msg = valid_msg();
    char big[sizeof(msg) + 8];

    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg) - 1),
                     UCS_ERR_MESSAGE_TRUNCATED);
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, 0),
                     UCS_ERR_MESSAGE_TRUNCATED);
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, 47),
                     UCS_ERR_MESSAGE_TRUNCATED);
    memcpy(big, &msg, sizeof(msg));
    assert_int_equal(uct_rc_share_conn_msg_check(big, sizeof(big)),
                     UCS_ERR_MESSAGE_TRUNCATED);
}

/* Another version is told by the stable prefix, whatever its length */
static void test_versions(void **state)
{
    uct_rc_share_conn_msg_t msg;

    msg = valid_msg(); msg.version = UCT_RC_SHARE_CONN_VERSION + 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_UNSUPPORTED);
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, 48),
                     UCS_ERR_UNSUPPORTED);
    /* Version 2's messages were 71 bytes, version 3's 65: told apart, not
     * truncated */
    msg = valid_msg(); msg.version = 2;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_UNSUPPORTED);
    msg = valid_msg(); msg.version = 3;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, 65),
                     UCS_ERR_UNSUPPORTED);
    msg = valid_msg(); msg.version = 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_UNSUPPORTED);
}

static void test_fields(void **state)
{
    uct_rc_share_conn_msg_t msg;

    msg = valid_msg(); msg.magic ^= 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
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
    msg = valid_msg(); msg.dst_rc_qpn = 0xffffffff;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.src_ud_qpn = 0x1000000;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
    msg = valid_msg(); msg.flags = 0x4;
    assert_int_not_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_OK);
}

/* A result only in a REJ and a CHECK_REP, and a known one */
static void test_results(void **state)
{
    uct_rc_share_conn_msg_t msg;
    int type;

    for (type = UCT_RC_SHARE_CONN_REQ; type <= UCT_RC_SHARE_CONN_CHECK_REP;
         ++type) {
        msg = valid_of(type);
        msg.result = 0xff;
        assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_ERR_INVALID_PARAM);
        if ((type == UCT_RC_SHARE_CONN_REJ) ||
            (type == UCT_RC_SHARE_CONN_CHECK_REP)) {
            msg.result = 0;
        } else {
            msg.result = 1;
        }
        assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                         UCS_ERR_INVALID_PARAM);
    }
    msg = valid_of(UCT_RC_SHARE_CONN_REJ);
    msg.result = UCT_RC_SHARE_CONN_REJ_VERSION + 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
    msg = valid_of(UCT_RC_SHARE_CONN_CHECK_REP);
    msg.result = UCT_RC_SHARE_CONN_CHECK_NO_CONN + 1;
    assert_int_equal(uct_rc_share_conn_msg_check(&msg, sizeof(msg)),
                     UCS_ERR_INVALID_PARAM);
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
            msg = valid_of(UCT_RC_SHARE_CONN_REQ + (i / 2) % 6);
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
            assert_true(msg.flags < 4);
            if (msg.type == UCT_RC_SHARE_CONN_CHECK_REP) {
                assert_true((msg.result ==
                             UCT_RC_SHARE_CONN_CHECK_CONNECTED) ||
                            (msg.result == UCT_RC_SHARE_CONN_CHECK_NO_CONN));
            } else if (msg.type == UCT_RC_SHARE_CONN_REJ) {
                assert_true((msg.result ==
                             UCT_RC_SHARE_CONN_REJ_NO_RESOURCE) ||
                            (msg.result == UCT_RC_SHARE_CONN_REJ_VERSION));
            } else {
                assert_int_equal(msg.result, 0);
            }
            ++accepted;
        }
    }
    /* Damage to fields without a range (ids, secrets) keeps it valid */
    assert_true(accepted > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_length),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_results),
        cmocka_unit_test(test_random),
    };

    return cmocka_run_group_tests_name("conn_msg", tests, NULL, NULL);
}
