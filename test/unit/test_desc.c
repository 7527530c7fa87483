/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group's message codec: round trips, one case per rejection rule,
 * truncation, and seeded random input (accepted => re-encodes to itself).
 *
 * Messages under test are written here by hand, at the offsets the codec
 * documents, so a layout change in the codec shows up as a failure and
 * invalid messages can be built that the encoder would refuse to write.
 */
#include "node/ibshare_desc.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>


#define HDR_LEN     12
#define IDENT_LEN   (16 + UCT_IBSHARE_DESC_DEV_MAX)
#define JOIN_LEN    (HDR_LEN + 8 + IDENT_LEN)
#define REFUSE_LEN  (HDR_LEN + 4 + IDENT_LEN)
#define DESC_LEN    (HDR_LEN + 77 + UCT_IBSHARE_DESC_DEV_MAX)
#define ERR_MAX     256


/* A joiner's group, valid as JOIN and as REFUSE(JOB..GUID) carry it */
static const uct_ibshare_ident_t ident_ok = {
    .job_hash  = 0x1122334455667788ull,
    .port_guid = 0x0102030405060708ull,
    .dev_name  = "mlx5_0"
};


static void put_le(uint8_t *p, uint64_t value, unsigned size)
{
    unsigned i;

    for (i = 0; i < size; ++i) {
        p[i] = (uint8_t)(value >> (8 * i));
    }
}

static size_t wire_header(uint8_t *buf, uint32_t type, uint32_t body_len)
{
    put_le(buf + 0, UCT_IBSHARE_MSG_MAGIC, 4);
    put_le(buf + 4, UCT_IBSHARE_MSG_VERSION, 2);
    put_le(buf + 6, type, 2);
    put_le(buf + 8, body_len, 4);
    return HDR_LEN + body_len;
}

/* The descriptor as the codec lays it out, whatever its fields hold */
static size_t wire_desc(uint8_t *buf, const uct_ibshare_desc_t *desc)
{
    uint8_t *b = buf + HDR_LEN;

    put_le(b + 0, desc->mode, 4);
    put_le(b + 4, desc->pd_handle, 4);
    put_le(b + 8, desc->mr_handle, 4);
    put_le(b + 12, desc->lkey, 4);
    put_le(b + 16, desc->rkey, 4);
    put_le(b + 20, desc->pool_iova, 8);
    put_le(b + 28, desc->pool_size, 8);
    put_le(b + 36, desc->slice_size, 8);
    put_le(b + 44, desc->num_slices, 4);
    put_le(b + 48, desc->slice, 4);
    put_le(b + 52, desc->server_pid, 4);
    put_le(b + 56, desc->has_cmd_fd, 4);
    put_le(b + 60, desc->port_guid, 8);
    b[68] = desc->port_num;
    memcpy(b + 69, desc->dev_name, UCT_IBSHARE_DESC_DEV_MAX);
    put_le(b + 133, desc->job_hash, 8);
    return wire_header(buf, UCT_IBSHARE_MSG_DESC, DESC_LEN - HDR_LEN);
}

static uct_ibshare_desc_t valid_desc(void)
{
    uct_ibshare_desc_t desc;

    memset(&desc, 0, sizeof(desc));
    desc.mode       = UCT_IBSHARE_GROUP_SHARED;
    desc.pd_handle  = 0x11;
    desc.mr_handle  = 0x22;
    desc.lkey       = 0x3344;
    desc.rkey       = 0x5566;
    desc.pool_iova  = 0x7f0000000000ull;
    desc.slice_size = 2 * 1024 * 1024;
    desc.num_slices = 64;
    desc.pool_size  = desc.slice_size * desc.num_slices;
    desc.slice      = 3;
    desc.server_pid = 4242;
    desc.has_cmd_fd = 1;
    desc.port_guid  = 0x0102030405060708ull;
    desc.port_num   = 1;
    strcpy(desc.dev_name, "mlx5_0");
    desc.job_hash   = 0x1122334455667788ull;
    return desc;
}

/* Copy into a buffer of exactly length bytes, so that ASan or valgrind see
 * any read beyond it, and decode */
static ucs_status_t unpack_exact(const uint8_t *wire, size_t length,
                                 uct_ibshare_msg_t *msg, char *err)
{
    ucs_status_t status;
    uint8_t *buf;

    buf = malloc(length);
    assert_true((buf != NULL) || (length == 0));
    if (length > 0) {
        memcpy(buf, wire, length);
    }
    status = uct_ibshare_msg_unpack(buf, length, msg, err, ERR_MAX);
    free(buf);
    return status;
}

static void expect_rejected(const uint8_t *wire, size_t length,
                            const char *word)
{
    char err[ERR_MAX];
    uct_ibshare_msg_t msg, untouched;

    memset(err, 'x', sizeof(err));
    memset(&msg, 0xa5, sizeof(msg));
    memcpy(&untouched, &msg, sizeof(msg));
    assert_int_equal(unpack_exact(wire, length, &msg, err),
                     UCS_ERR_INVALID_PARAM);
    assert_non_null(memchr(err, '\0', sizeof(err)));
    if (strstr(err, word) == NULL) {
        fail_msg("error \"%s\" does not name \"%s\"", err, word);
    }
    /* A rejected message leaves the caller's struct alone */
    assert_memory_equal(&msg, &untouched, sizeof(msg));
}

/* desc is invalid in field: rejected on the wire, by the check and by the
 * encoder, each time naming field */
static void expect_desc_rejected(const uct_ibshare_desc_t *desc,
                                 const char *field)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    char err[ERR_MAX];
    size_t length;

    length = wire_desc(wire, desc);
    expect_rejected(wire, length, field);

    assert_int_equal(uct_ibshare_desc_check(desc, err, sizeof(err)),
                     UCS_ERR_INVALID_PARAM);
    if (strstr(err, field) == NULL) {
        fail_msg("check error \"%s\" does not name \"%s\"", err, field);
    }
    assert_int_equal(uct_ibshare_msg_pack_desc(wire, sizeof(wire), desc), 0);
}

static void expect_round_trip(const uint8_t *wire, size_t length,
                              uct_ibshare_msg_t *msg)
{
    char err[ERR_MAX] = "";

    if (unpack_exact(wire, length, msg, err) != UCS_OK) {
        fail_msg("valid message rejected: %s", err);
    }
}


static void test_wire_layout(void **state)
{
    /* "ibsh", version 2, JOIN, 88 body bytes, pid, uid, job hash, GUID:
     * all little-endian; then the name and its zeros */
    static const uint8_t expected[HDR_LEN + 24] = {
        0x69, 0x62, 0x73, 0x68, 0x02, 0x00, 0x01, 0x00, 0x58, 0x00, 0x00, 0x00,
        0x04, 0x03, 0x02, 0x01, 0x0d, 0x0c, 0x0b, 0x0a,
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01
    };
    uint8_t buf[UCT_IBSHARE_MSG_MAX], wire[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_desc_t desc = valid_desc();
    uint8_t name[UCT_IBSHARE_DESC_DEV_MAX] = "mlx5_0";

    assert_int_equal(UCT_IBSHARE_MSG_VERSION, 2);
    assert_int_equal(uct_ibshare_msg_pack_join(buf, sizeof(buf), 0x01020304,
                                               0x0a0b0c0d, &ident_ok),
                     JOIN_LEN);
    assert_memory_equal(buf, expected, sizeof(expected));
    assert_memory_equal(buf + sizeof(expected), name, sizeof(name));

    assert_int_equal(uct_ibshare_msg_pack_desc(buf, sizeof(buf), &desc),
                     DESC_LEN);
    assert_int_equal(wire_desc(wire, &desc), DESC_LEN);
    assert_memory_equal(buf, wire, DESC_LEN);
    assert_true(DESC_LEN <= UCT_IBSHARE_MSG_MAX);
}

static void test_round_trip_join(void **state)
{
    static const uint32_t uids[] = { 0, 1000, UINT32_MAX };
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_msg_t msg;
    size_t length, i;

    for (i = 0; i < sizeof(uids) / sizeof(uids[0]); ++i) {
        length = uct_ibshare_msg_pack_join(buf, sizeof(buf), 4711 + i,
                                           uids[i], &ident_ok);
        assert_int_equal(length, JOIN_LEN);
        expect_round_trip(buf, length, &msg);
        assert_int_equal(msg.type, UCT_IBSHARE_MSG_JOIN);
        assert_int_equal(msg.join.pid, 4711 + i);
        assert_int_equal(msg.join.uid, uids[i]);
        assert_int_equal(msg.join.ident.job_hash, ident_ok.job_hash);
        assert_int_equal(msg.join.ident.port_guid, ident_ok.port_guid);
        assert_string_equal(msg.join.ident.dev_name, ident_ok.dev_name);
    }
}

static void test_round_trip_refuse(void **state)
{
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_msg_t msg;
    uint32_t reason;
    size_t length;

    for (reason = UCT_IBSHARE_REFUSE_UID; reason <= UCT_IBSHARE_REFUSE_BUSY;
         ++reason) {
        length = uct_ibshare_msg_pack_refuse(buf, sizeof(buf), reason, NULL);
        assert_int_equal(length, REFUSE_LEN);
        expect_round_trip(buf, length, &msg);
        assert_int_equal(msg.type, UCT_IBSHARE_MSG_REFUSE);
        assert_int_equal(msg.refuse_reason, reason);
        assert_int_equal(msg.refuse_ident.job_hash, 0);
        assert_int_equal(msg.refuse_ident.dev_name[0], '\0');
    }

    /* A group mismatch names the server's group */
    for (reason = UCT_IBSHARE_REFUSE_JOB; reason <= UCT_IBSHARE_REFUSE_GUID;
         ++reason) {
        assert_int_equal(uct_ibshare_msg_pack_refuse(buf, sizeof(buf), reason,
                                                     NULL), 0);
        length = uct_ibshare_msg_pack_refuse(buf, sizeof(buf), reason,
                                             &ident_ok);
        assert_int_equal(length, REFUSE_LEN);
        expect_round_trip(buf, length, &msg);
        assert_int_equal(msg.refuse_reason, reason);
        assert_int_equal(msg.refuse_ident.job_hash, ident_ok.job_hash);
        assert_int_equal(msg.refuse_ident.port_guid, ident_ok.port_guid);
        assert_string_equal(msg.refuse_ident.dev_name, ident_ok.dev_name);
    }
}

/* Field by field: struct assignment need not copy the padding */
static void assert_desc_equal(const uct_ibshare_desc_t *a,
                              const uct_ibshare_desc_t *b)
{
    assert_int_equal(a->mode, b->mode);
    assert_int_equal(a->pd_handle, b->pd_handle);
    assert_int_equal(a->mr_handle, b->mr_handle);
    assert_int_equal(a->lkey, b->lkey);
    assert_int_equal(a->rkey, b->rkey);
    assert_int_equal(a->pool_iova, b->pool_iova);
    assert_int_equal(a->pool_size, b->pool_size);
    assert_int_equal(a->slice_size, b->slice_size);
    assert_int_equal(a->num_slices, b->num_slices);
    assert_int_equal(a->slice, b->slice);
    assert_int_equal(a->server_pid, b->server_pid);
    assert_int_equal(a->has_cmd_fd, b->has_cmd_fd);
    assert_int_equal(a->port_guid, b->port_guid);
    assert_int_equal(a->port_num, b->port_num);
    assert_memory_equal(a->dev_name, b->dev_name, sizeof(a->dev_name));
    assert_int_equal(a->job_hash, b->job_hash);
}

static void round_trip_desc(const uct_ibshare_desc_t *desc)
{
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_msg_t msg;
    size_t length;

    length = uct_ibshare_msg_pack_desc(buf, sizeof(buf), desc);
    assert_int_equal(length, DESC_LEN);
    expect_round_trip(buf, length, &msg);
    assert_int_equal(msg.type, UCT_IBSHARE_MSG_DESC);
    assert_desc_equal(&msg.desc, desc);
}

static void test_round_trip_desc(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    round_trip_desc(&desc);

    desc.mode       = UCT_IBSHARE_GROUP_FALLBACK;
    desc.has_cmd_fd = 0;
    desc.slice      = UCT_IBSHARE_DESC_NO_SLICE;
    round_trip_desc(&desc);

    /* The limits: one slice of one page at IOVA 0; the most slices, the
     * last of them, ending at the top of the address space */
    desc = valid_desc();
    desc.slice_size = 4096;
    desc.num_slices = 1;
    desc.pool_size  = 4096;
    desc.pool_iova  = 0;
    desc.slice      = 0;
    round_trip_desc(&desc);

    desc.num_slices = UCT_IBSHARE_DESC_MAX_SLICES;
    desc.pool_size  = desc.slice_size * desc.num_slices;
    desc.slice      = desc.num_slices - 1;
    desc.pool_iova  = 0 - desc.pool_size - 4096;
    desc.port_num   = 255;
    desc.server_pid = UINT32_MAX;
    memset(desc.dev_name, 'a', sizeof(desc.dev_name) - 1);
    memcpy(desc.dev_name, "Zz09_.-", 7);
    round_trip_desc(&desc);
}

/* The caller's buffer may hold anything after the name: zeros go out */
static void test_pack_zero_fills_name(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_msg_t msg;
    size_t length, i;

    memset(desc.dev_name, '#', sizeof(desc.dev_name));
    memcpy(desc.dev_name, "rxe0", 5);
    assert_int_equal(uct_ibshare_desc_check(&desc, NULL, 0), UCS_OK);
    length = uct_ibshare_msg_pack_desc(buf, sizeof(buf), &desc);
    assert_int_equal(length, DESC_LEN);
    expect_round_trip(buf, length, &msg);
    assert_string_equal(msg.desc.dev_name, "rxe0");
    for (i = 5; i < sizeof(msg.desc.dev_name); ++i) {
        assert_int_equal(msg.desc.dev_name[i], 0);
    }
}

static void test_pack_small_buffer(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();
    uint8_t buf[UCT_IBSHARE_MSG_MAX + 1];
    size_t max;

    for (max = 0; max < DESC_LEN; ++max) {
        memset(buf, 0xee, sizeof(buf));
        assert_int_equal(uct_ibshare_msg_pack_desc(buf, max, &desc), 0);
        if (max < JOIN_LEN) {
            assert_int_equal(uct_ibshare_msg_pack_join(buf, max, 1, 1,
                                                       &ident_ok), 0);
        }
        if (max < REFUSE_LEN) {
            assert_int_equal(uct_ibshare_msg_pack_refuse(buf, max, 1, NULL), 0);
        }
        /* Nothing written on failure */
        assert_int_equal(buf[0], 0xee);
        assert_int_equal(buf[max], 0xee);
    }
    assert_int_equal(uct_ibshare_msg_pack_desc(buf, DESC_LEN, &desc),
                     DESC_LEN);
    assert_int_equal(uct_ibshare_msg_pack_join(buf, JOIN_LEN, 1, 1, &ident_ok),
                     JOIN_LEN);
    assert_int_equal(uct_ibshare_msg_pack_refuse(buf, REFUSE_LEN, 1, NULL),
                     REFUSE_LEN);
}

static void test_mode_str(void **state)
{
    assert_string_equal(uct_ibshare_group_mode_str(UCT_IBSHARE_GROUP_SHARED),
                        "shared");
    assert_string_equal(
            uct_ibshare_group_mode_str(UCT_IBSHARE_GROUP_FALLBACK),
            "fallback");
    assert_string_equal(uct_ibshare_group_mode_str(0), "unknown");
    assert_string_equal(uct_ibshare_group_mode_str(3), "unknown");
    assert_string_equal(uct_ibshare_group_mode_str(UINT32_MAX), "unknown");
}

/* err_max 0 writes nothing; a short err is cut, still NUL-terminated */
static void test_err_buffer(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_msg_t msg;
    char err[16];
    size_t length;

    length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    wire[0] ^= 1;

    memset(err, 'x', sizeof(err));
    assert_int_equal(uct_ibshare_msg_unpack(wire, length, &msg, err, 0),
                     UCS_ERR_INVALID_PARAM);
    assert_int_equal(err[0], 'x');
    assert_int_equal(uct_ibshare_msg_unpack(wire, length, &msg, NULL, 0),
                     UCS_ERR_INVALID_PARAM);

    assert_int_equal(uct_ibshare_msg_unpack(wire, length, &msg, err, 1),
                     UCS_ERR_INVALID_PARAM);
    assert_int_equal(err[0], '\0');
    assert_int_equal(err[1], 'x');

    assert_int_equal(uct_ibshare_msg_unpack(wire, length, &msg, err, 8),
                     UCS_ERR_INVALID_PARAM);
    assert_int_equal(strlen(err), 7);
    assert_int_equal(err[8], 'x');
}

/* ---------------------------------------------------------------- header */

static void test_reject_short_header(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];

    uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    expect_rejected(wire, 0, "header");
    expect_rejected(wire, HDR_LEN - 1, "header");
}

static void test_reject_header_length(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    size_t length;

    memset(wire, 0, sizeof(wire));
    length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    put_le(wire + 8, 9, 4);
    expect_rejected(wire, length, "header length 9");
    put_le(wire + 8, 8 + (1ull << 31), 4);
    expect_rejected(wire, length, "header length");
    /* Right field, wrong amount of data received */
    put_le(wire + 8, 8, 4);
    expect_rejected(wire, length + 1, "header length 8");
}

static void test_reject_magic(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    size_t length;

    length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    wire[3] ^= 0x80;
    expect_rejected(wire, length, "magic 0xe8736269");
}

static void test_reject_version(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    size_t length;

    length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    put_le(wire + 4, UCT_IBSHARE_MSG_VERSION + 1, 2);
    expect_rejected(wire, length, "version 3");
    expect_rejected(wire, length, "version 2");
    /* The format before the group's identity */
    put_le(wire + 4, 1, 2);
    expect_rejected(wire, length, "message version 1 differs");
    put_le(wire + 4, 0, 2);
    expect_rejected(wire, length, "version 0");
}

static void test_reject_type(void **state)
{
    static const uint32_t types[] = { 0, 4, 0x100, 0xffff };
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    char word[32];
    size_t length, i;

    for (i = 0; i < sizeof(types) / sizeof(types[0]); ++i) {
        length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
        put_le(wire + 6, types[i], 2);
        snprintf(word, sizeof(word), "type %u", types[i]);
        expect_rejected(wire, length, word);
    }
}

/* A consistent header whose body does not have its type's size */
static void test_reject_body_length(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_desc_t desc = valid_desc();
    size_t length;

    memset(wire, 0, sizeof(wire));
    length = wire_header(wire, UCT_IBSHARE_MSG_JOIN, 4);
    put_le(wire + HDR_LEN, 1, 4);
    expect_rejected(wire, length, "join message body length 4");
    length = wire_header(wire, UCT_IBSHARE_MSG_REFUSE, 8);
    expect_rejected(wire, length, "refuse message body length 8");
    wire_desc(wire, &desc);
    length = wire_header(wire, UCT_IBSHARE_MSG_DESC, DESC_LEN - HDR_LEN - 1);
    expect_rejected(wire, length, "descriptor message body length");
    length = wire_header(wire, UCT_IBSHARE_MSG_DESC, 0);
    expect_rejected(wire, length, "descriptor message body length 0");
}

/* ------------------------------------------------------------ join/refuse */

static void test_reject_join_pid(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    size_t length;

    assert_int_equal(uct_ibshare_msg_pack_join(wire, sizeof(wire), 0, 1,
                                               &ident_ok), 0);
    length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    put_le(wire + HDR_LEN, 0, 4);
    expect_rejected(wire, length, "pid");
}

static void test_reject_refuse_reason(void **state)
{
    static const uint32_t reasons[] = { 0, UCT_IBSHARE_REFUSE_GUID + 1,
                                        UINT32_MAX };
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    char word[32];
    size_t length, i;

    for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); ++i) {
        assert_int_equal(uct_ibshare_msg_pack_refuse(wire, sizeof(wire),
                                                     reasons[i], NULL), 0);
        length = uct_ibshare_msg_pack_refuse(wire, sizeof(wire), 1, NULL);
        put_le(wire + HDR_LEN, reasons[i], 4);
        snprintf(word, sizeof(word), "reason %u", reasons[i]);
        expect_rejected(wire, length, word);
    }
}

/* JOIN's device name is checked as the descriptor's is */
static void test_reject_join_dev_name(void **state)
{
    uct_ibshare_ident_t ident = ident_ok;
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    size_t length;

    ident.dev_name[0] = '\0';
    assert_int_equal(uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1,
                                               &ident), 0);
    length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    wire[HDR_LEN + 24] = '\0';
    expect_rejected(wire, length, "join dev_name is empty");

    length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    wire[HDR_LEN + 24 + 2] = '/';
    expect_rejected(wire, length, "join dev_name has byte 0x2f");

    length = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 1, &ident_ok);
    wire[length - 1] = 'x';
    expect_rejected(wire, length, "join dev_name has nonzero byte");
}

/* A mismatch refusal must name a group; the others must name none */
static void test_reject_refuse_ident(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    size_t length;

    length = uct_ibshare_msg_pack_refuse(wire, sizeof(wire),
                                         UCT_IBSHARE_REFUSE_BAD_MSG, NULL);
    put_le(wire + HDR_LEN + 4, 1, 8);
    expect_rejected(wire, length, "carries a group identity");

    length = uct_ibshare_msg_pack_refuse(wire, sizeof(wire),
                                         UCT_IBSHARE_REFUSE_UID, NULL);
    wire[length - 1] = 'a';
    expect_rejected(wire, length, "carries a group identity");

    /* JOB with the name of BUSY's (none) */
    length = uct_ibshare_msg_pack_refuse(wire, sizeof(wire),
                                         UCT_IBSHARE_REFUSE_BUSY, NULL);
    put_le(wire + HDR_LEN, UCT_IBSHARE_REFUSE_JOB, 4);
    expect_rejected(wire, length, "refuse dev_name is empty");

    length = uct_ibshare_msg_pack_refuse(wire, sizeof(wire),
                                         UCT_IBSHARE_REFUSE_GUID, &ident_ok);
    wire[length - 1] = 'x';
    expect_rejected(wire, length, "refuse dev_name has nonzero byte");
}

/* Which field differs, job first; the descriptor names its group */
static void test_ident_compare(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();
    uct_ibshare_ident_t a = ident_ok, b;

    uct_ibshare_desc_ident(&desc, &b);
    assert_int_equal(uct_ibshare_ident_compare(&a, &b), 0);

    b.port_guid ^= 1;
    assert_int_equal(uct_ibshare_ident_compare(&a, &b),
                     UCT_IBSHARE_REFUSE_GUID);
    strcpy(b.dev_name, "mlx5_1");
    assert_int_equal(uct_ibshare_ident_compare(&a, &b),
                     UCT_IBSHARE_REFUSE_DEVICE);
    b.job_hash = uct_ibshare_job_hash("plant");
    assert_int_equal(uct_ibshare_ident_compare(&a, &b),
                     UCT_IBSHARE_REFUSE_JOB);

    /* The hash is of the whole key: a prefix is another job */
    assert_true(uct_ibshare_job_hash("plant") !=
                uct_ibshare_job_hash("plan"));
    assert_true(uct_ibshare_job_hash("") != uct_ibshare_job_hash("x"));
    assert_int_equal(uct_ibshare_job_hash("plant"),
                     uct_ibshare_job_hash("plant"));
    /* FNV-1a's published vector ("a"), and the key's with its NUL: the
     * names of groups on disk stay what they were */
    assert_int_equal(uct_ibshare_fnv1a(UCT_IBSHARE_FNV1A_INIT, "a", 1),
                     0xaf63dc4c8601ec8cull);
    assert_int_equal(uct_ibshare_job_hash("a"), 0x089be207b544f1e4ull);

    assert_string_equal(uct_ibshare_refuse_reason_str(UCT_IBSHARE_REFUSE_JOB),
                        "another job");
    assert_string_equal(uct_ibshare_refuse_reason_str(0), "unknown");
}

/* A descriptor of another job decodes fine: the joiner's compare catches it */
static void test_desc_job_hash(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();
    uct_ibshare_ident_t ident;
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_msg_t msg;
    size_t length;

    desc.job_hash = uct_ibshare_job_hash("other");
    length = uct_ibshare_msg_pack_desc(wire, sizeof(wire), &desc);
    assert_int_equal(length, DESC_LEN);
    expect_round_trip(wire, length, &msg);
    assert_int_equal(msg.desc.job_hash, uct_ibshare_job_hash("other"));
    uct_ibshare_desc_ident(&msg.desc, &ident);
    assert_int_equal(uct_ibshare_ident_compare(&ident, &ident_ok),
                     UCT_IBSHARE_REFUSE_JOB);
}

/* ------------------------------------------------------------ descriptor */

static void test_reject_desc_mode(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.mode = 0;
    expect_desc_rejected(&desc, "mode 0");
    desc.mode = 3;
    expect_desc_rejected(&desc, "mode 3");
}

static void test_reject_desc_has_cmd_fd_range(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.has_cmd_fd = 2;
    expect_desc_rejected(&desc, "has_cmd_fd 2");
    desc.has_cmd_fd = UINT32_MAX;
    expect_desc_rejected(&desc, "has_cmd_fd 4294967295");
}

static void test_reject_desc_has_cmd_fd_mode(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.has_cmd_fd = 0;
    expect_desc_rejected(&desc, "has_cmd_fd 0");
    desc.mode       = UCT_IBSHARE_GROUP_FALLBACK;
    desc.has_cmd_fd = 1;
    expect_desc_rejected(&desc, "has_cmd_fd 1");
}

static void test_reject_desc_slice_size(void **state)
{
    static const uint64_t sizes[] = { 0, 1, 4095, 4097, 6144 };
    uct_ibshare_desc_t desc;
    char word[64];
    size_t i;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        desc            = valid_desc();
        desc.slice_size = sizes[i];
        snprintf(word, sizeof(word), "slice_size %llu",
                 (unsigned long long)sizes[i]);
        expect_desc_rejected(&desc, word);
    }
}

static void test_reject_desc_pool_size(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.pool_size = 0;
    expect_desc_rejected(&desc, "pool_size 0");
    desc.pool_size = desc.slice_size * desc.num_slices + 4096;
    expect_desc_rejected(&desc, "pool_size");
    desc.pool_size = desc.slice_size / 2;
    expect_desc_rejected(&desc, "pool_size");
}

static void test_reject_desc_num_slices_mismatch(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.num_slices += 1;
    expect_desc_rejected(&desc, "num_slices 65");
    desc.num_slices = 0;
    expect_desc_rejected(&desc, "num_slices 0");
}

static void test_reject_desc_num_slices_range(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.slice_size = 4096;
    desc.num_slices = UCT_IBSHARE_DESC_MAX_SLICES + 1;
    desc.pool_size  = desc.slice_size * desc.num_slices;
    expect_desc_rejected(&desc, "num_slices 4097");
    /* 2^32 slices: num_slices (32 bits) cannot even hold the count */
    desc.pool_size  = desc.slice_size << 32;
    desc.num_slices = 0;
    expect_desc_rejected(&desc, "num_slices 0");
}

static void test_reject_desc_slice(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.slice = desc.num_slices;
    expect_desc_rejected(&desc, "slice 64");
    desc.slice = UCT_IBSHARE_DESC_NO_SLICE - 1;
    expect_desc_rejected(&desc, "slice 4294967294");
}

static void test_reject_desc_pool_iova_align(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.pool_iova += 1;
    expect_desc_rejected(&desc, "pool_iova 0x7f0000000001");
    desc.pool_iova = 2048;
    expect_desc_rejected(&desc, "pool_iova 0x800");
}

static void test_reject_desc_pool_iova_overflow(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    /* Ends exactly at 2^64: the end does not fit in 64 bits */
    desc.pool_iova = 0 - desc.pool_size;
    expect_desc_rejected(&desc, "pool_iova");
    desc.pool_iova = 0 - (uint64_t)4096;
    expect_desc_rejected(&desc, "overflows");
}

static void test_reject_desc_port_num(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.port_num = 0;
    expect_desc_rejected(&desc, "port_num 0");
}

static void test_reject_desc_dev_name_nul(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    memset(desc.dev_name, 'a', sizeof(desc.dev_name));
    expect_desc_rejected(&desc, "dev_name has no NUL");
}

static void test_reject_desc_dev_name_empty(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    memset(desc.dev_name, 0, sizeof(desc.dev_name));
    expect_desc_rejected(&desc, "dev_name is empty");
}

static void test_reject_desc_dev_name_chars(void **state)
{
    static const char bad[] = { ' ', '/', ':', '%', '\n', '\x7f', '\x80',
                                '\xff' };
    uct_ibshare_desc_t desc;
    char word[64];
    size_t i;

    for (i = 0; i < sizeof(bad); ++i) {
        desc             = valid_desc();
        desc.dev_name[4] = bad[i];
        snprintf(word, sizeof(word), "dev_name has byte 0x%02x at offset 4",
                 (unsigned char)bad[i]);
        expect_desc_rejected(&desc, word);
    }
}

/* Only the decoder sees these bytes: the encoder writes zeros there */
static void test_reject_desc_dev_name_trailing(void **state)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_desc_t desc = valid_desc();
    size_t length, offset;

    for (offset = 7; offset < UCT_IBSHARE_DESC_DEV_MAX; offset += 8) {
        desc                  = valid_desc();
        desc.dev_name[offset] = 'x';
        length = wire_desc(wire, &desc);
        expect_rejected(wire, length, "dev_name has nonzero byte 0x78 after");
    }
}

static void test_reject_desc_server_pid(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();

    desc.server_pid = 0;
    expect_desc_rejected(&desc, "server_pid");
}

/* ------------------------------------------------------------ truncation */

static void test_truncation(void **state)
{
    uct_ibshare_desc_t desc = valid_desc();
    uint8_t wire[UCT_IBSHARE_MSG_MAX + 1];
    uct_ibshare_msg_t msg;
    size_t lengths[3], length, i;

    for (i = 0; i < 3; ++i) {
        switch (i) {
        case 0:
            lengths[i] = uct_ibshare_msg_pack_join(wire, sizeof(wire), 1, 0,
                                                   &ident_ok);
            break;
        case 1:
            lengths[i] = uct_ibshare_msg_pack_refuse(wire, sizeof(wire), 2,
                                                     NULL);
            break;
        default:
            lengths[i] = uct_ibshare_msg_pack_desc(wire, sizeof(wire), &desc);
            break;
        }
        assert_true(lengths[i] > 0);
        for (length = 0; length < lengths[i]; ++length) {
            expect_rejected(wire, length, "length");
        }
        /* One byte too many is as wrong as one too few */
        wire[lengths[i]] = 0;
        expect_rejected(wire, lengths[i] + 1, "header length");
        expect_round_trip(wire, lengths[i], &msg);
    }
}

/* ------------------------------------------------------------ random */

typedef struct {
    uint64_t s;
} rng_t;

/* xorshift64*: a few lines, the same sequence on every libc */
static uint64_t rng_next(rng_t *rng)
{
    rng->s ^= rng->s >> 12;
    rng->s ^= rng->s << 25;
    rng->s ^= rng->s >> 27;
    return rng->s * 0x2545f4914f6cdd1dull;
}

static uint32_t rng_below(rng_t *rng, uint64_t n)
{
    return (uint32_t)(rng_next(rng) % n);
}

static uct_ibshare_desc_t random_desc(rng_t *rng)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
    uct_ibshare_desc_t desc;
    size_t name_len, i;

    memset(&desc, 0, sizeof(desc));
    desc.mode       = rng_below(rng, 2) ? UCT_IBSHARE_GROUP_SHARED :
                                          UCT_IBSHARE_GROUP_FALLBACK;
    desc.has_cmd_fd = (desc.mode == UCT_IBSHARE_GROUP_SHARED);
    desc.pd_handle  = (uint32_t)rng_next(rng);
    desc.mr_handle  = (uint32_t)rng_next(rng);
    desc.lkey       = (uint32_t)rng_next(rng);
    desc.rkey       = (uint32_t)rng_next(rng);
    desc.slice_size = 4096ull * (1 + rng_below(rng, 1024));
    desc.num_slices = 1 + rng_below(rng, UCT_IBSHARE_DESC_MAX_SLICES);
    desc.pool_size  = desc.slice_size * desc.num_slices;
    desc.pool_iova  = (rng_next(rng) >> 24) << 12;
    desc.slice      = rng_below(rng, 4) ? rng_below(rng, desc.num_slices) :
                                          UCT_IBSHARE_DESC_NO_SLICE;
    desc.server_pid = 1 + rng_below(rng, UINT32_MAX);
    desc.port_guid  = rng_next(rng);
    desc.port_num   = (uint8_t)(1 + rng_below(rng, 255));
    desc.job_hash   = rng_next(rng);
    name_len        = 1 + rng_below(rng, UCT_IBSHARE_DESC_DEV_MAX - 1);
    for (i = 0; i < name_len; ++i) {
        desc.dev_name[i] = chars[rng_below(rng, sizeof(chars) - 1)];
    }
    return desc;
}

/* A valid message of a random type */
static size_t random_valid(rng_t *rng, uint8_t *buf, size_t max)
{
    uct_ibshare_desc_t desc;
    uint32_t reason;
    size_t length;

    switch (rng_below(rng, 3)) {
    case 0:
        length = uct_ibshare_msg_pack_join(buf, max,
                                           1 + rng_below(rng, UINT32_MAX),
                                           (uint32_t)rng_next(rng),
                                           &ident_ok);
        break;
    case 1:
        reason = 1 + rng_below(rng, UCT_IBSHARE_REFUSE_GUID);
        length = uct_ibshare_msg_pack_refuse(buf, max, reason,
                                             (reason >= UCT_IBSHARE_REFUSE_JOB)
                                             ? &ident_ok : NULL);
        break;
    default:
        desc   = random_desc(rng);
        length = uct_ibshare_msg_pack_desc(buf, max, &desc);
        break;
    }
    assert_true(length > 0);
    return length;
}

static void mutate(rng_t *rng, uint8_t *buf, size_t *length, size_t max)
{
    static const uint8_t edges[] = { 0, 1, 0x7f, 0x80, 0xff };
    size_t pos;

    switch (rng_below(rng, 6)) {
    case 0: /* a bit flip */
    case 1:
        if (*length > 0) {
            buf[rng_below(rng, *length)] ^= (uint8_t)(1u << rng_below(rng, 8));
        }
        break;
    case 2: /* a byte changed */
        if (*length > 0) {
            buf[rng_below(rng, *length)] = (uint8_t)rng_next(rng);
        }
        break;
    case 3: /* a boundary value */
        if (*length > 0) {
            buf[rng_below(rng, *length)] = edges[rng_below(rng,
                                                           sizeof(edges))];
        }
        break;
    case 4: /* truncated or extended */
        pos = rng_below(rng, max + 1);
        while (*length < pos) {
            buf[(*length)++] = (uint8_t)rng_next(rng);
        }
        *length = pos;
        break;
    default: /* length changed with a matching header, to go past it */
        *length = HDR_LEN + rng_below(rng, max - HDR_LEN + 1);
        put_le(buf + 8, *length - HDR_LEN, 4);
        break;
    }
}

static uint64_t test_seed(void)
{
    const char *env = getenv("IBSHARE_TEST_SEED");

    if ((env != NULL) && (*env != '\0')) {
        return strtoull(env, NULL, 0);
    }
    return (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

/* Accepted => re-encodes byte for byte; nothing read beyond length */
static void test_random(void **state)
{
    enum { ITERATIONS = 200000, MAX = UCT_IBSHARE_MSG_MAX + 16 };
    uint8_t wire[MAX], out[UCT_IBSHARE_MSG_MAX], *buf;
    unsigned long accepted[3] = { 0 }, i;
    uint64_t seed = test_seed();
    char err[ERR_MAX];
    uct_ibshare_msg_t msg;
    size_t length, out_len;
    unsigned kind, m;
    ucs_status_t status;
    rng_t rng;

    print_message("seed %llu (set IBSHARE_TEST_SEED to repeat)\n",
                  (unsigned long long)seed);
    memset(wire, 0, sizeof(wire));
    rng.s = seed | 1; /* xorshift's one forbidden state is 0 */

    for (i = 0; i < ITERATIONS; ++i) {
        kind = rng_below(&rng, 3);
        if (kind == 0) {
            /* Random bytes, mostly with the right magic and version so that
             * the later checks see them too */
            length = rng_below(&rng, MAX + 1);
            for (m = 0; m < length; ++m) {
                wire[m] = (uint8_t)rng_next(&rng);
            }
            if ((length >= HDR_LEN) && rng_below(&rng, 4)) {
                wire_header(wire, 1 + rng_below(&rng, 3),
                            (uint32_t)(length - HDR_LEN));
            }
        } else {
            /* A valid message, damaged a little (kind 1) or a lot (2) */
            length = random_valid(&rng, wire, sizeof(wire));
            for (m = (kind == 1) ? 1 : 2 + rng_below(&rng, 6); m > 0; --m) {
                mutate(&rng, wire, &length, MAX);
            }
        }

        buf = malloc(length);
        assert_true((buf != NULL) || (length == 0));
        if (length > 0) {
            memcpy(buf, wire, length);
        }
        err[0] = 'x';
        status = uct_ibshare_msg_unpack(buf, length, &msg, err, sizeof(err));
        if (status == UCS_OK) {
            out_len = uct_ibshare_msg_pack(out, sizeof(out), &msg);
            if ((out_len != length) || memcmp(out, buf, length)) {
                fail_msg("iteration %lu (seed %llu): accepted a message of "
                         "%zu bytes that re-encodes to %zu other bytes", i,
                         (unsigned long long)seed, length, out_len);
            }
            ++accepted[kind];
        } else {
            assert_int_equal(status, UCS_ERR_INVALID_PARAM);
            assert_true((err[0] != 'x') && (err[0] != '\0'));
            assert_non_null(memchr(err, '\0', sizeof(err)));
        }
        free(buf);
    }

    print_message("accepted: %lu random, %lu lightly and %lu heavily "
                  "damaged of %d\n", accepted[0], accepted[1], accepted[2],
                  ITERATIONS);
    /* Damage to fields without a range (keys, handles, uid) keeps a message
     * valid: if nothing damaged is ever accepted, the loop tests little */
    assert_true(accepted[1] > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_layout),
        cmocka_unit_test(test_round_trip_join),
        cmocka_unit_test(test_round_trip_refuse),
        cmocka_unit_test(test_round_trip_desc),
        cmocka_unit_test(test_pack_zero_fills_name),
        cmocka_unit_test(test_pack_small_buffer),
        cmocka_unit_test(test_mode_str),
        cmocka_unit_test(test_err_buffer),
        cmocka_unit_test(test_reject_short_header),
        cmocka_unit_test(test_reject_header_length),
        cmocka_unit_test(test_reject_magic),
        cmocka_unit_test(test_reject_version),
        cmocka_unit_test(test_reject_type),
        cmocka_unit_test(test_reject_body_length),
        cmocka_unit_test(test_reject_join_pid),
        cmocka_unit_test(test_reject_refuse_reason),
        cmocka_unit_test(test_reject_desc_mode),
        cmocka_unit_test(test_reject_desc_has_cmd_fd_range),
        cmocka_unit_test(test_reject_desc_has_cmd_fd_mode),
        cmocka_unit_test(test_reject_desc_slice_size),
        cmocka_unit_test(test_reject_desc_pool_size),
        cmocka_unit_test(test_reject_desc_num_slices_mismatch),
        cmocka_unit_test(test_reject_desc_num_slices_range),
        cmocka_unit_test(test_reject_desc_slice),
        cmocka_unit_test(test_reject_desc_pool_iova_align),
        cmocka_unit_test(test_reject_desc_pool_iova_overflow),
        cmocka_unit_test(test_reject_desc_port_num),
        cmocka_unit_test(test_reject_desc_dev_name_nul),
        cmocka_unit_test(test_reject_desc_dev_name_empty),
        cmocka_unit_test(test_reject_desc_dev_name_chars),
        cmocka_unit_test(test_reject_desc_dev_name_trailing),
        cmocka_unit_test(test_reject_desc_server_pid),
        cmocka_unit_test(test_reject_join_dev_name),
        cmocka_unit_test(test_reject_refuse_ident),
        cmocka_unit_test(test_ident_compare),
        cmocka_unit_test(test_desc_job_hash),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_random),
    };

    return cmocka_run_group_tests_name("desc", tests, NULL, NULL);
}
