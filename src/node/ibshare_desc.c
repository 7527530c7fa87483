/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group's wire messages. See ibshare_desc.h.
 *
 * Wire layout, little-endian, no padding (offsets in bytes):
 *
 *   header   0 magic u32   4 version u16   6 type u16   8 body length u32
 *   JOIN     0 pid u32     4 uid u32     8 job_hash u64  16 port_guid u64
 *           24 dev_name[64]                                        (88)
 *   REFUSE   0 reason u32  4 job_hash u64  12 port_guid u64
 *           20 dev_name[64]                                        (84)
 *   DESC     0 mode        4 pd_handle     8 mr_handle  12 lkey  16 rkey
 *           20 pool_iova u64  28 pool_size u64  36 slice_size u64
 *           44 num_slices  48 slice  52 server_pid  56 has_cmd_fd
 *           60 port_guid u64  68 port_num u8  69 dev_name[64]
 *          133 job_hash u64                                       (141)
 *
 * JOIN names the group the joiner wants and REFUSE the server's own group
 * (JOB, DEVICE, GUID only; zeros otherwise), so both sides can tell a
 * socket that leads to another group and name both.
 *
 * Every byte of an accepted message is determined by the decoded fields
 * (fixed header values, exact lengths, zeros after dev_name's NUL), so a
 * message re-encodes to exactly itself: nothing unchecked can ride along.
 * port_guid travels as the 64-bit value the device reported; it is only
 * compared on this node, so its byte order does not matter here.
 *
 * Deliberately standalone (only ucs/type/status.h), so that the fuzz target
 * builds this file alone.
 */
#include "ibshare_desc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>


#define UCT_IBSHARE_MSG_HDR_LEN     12
#define UCT_IBSHARE_MSG_IDENT_LEN   (16 + UCT_IBSHARE_DESC_DEV_MAX)
#define UCT_IBSHARE_MSG_JOIN_LEN    (8 + UCT_IBSHARE_MSG_IDENT_LEN)
#define UCT_IBSHARE_MSG_REFUSE_LEN  (4 + UCT_IBSHARE_MSG_IDENT_LEN)
#define UCT_IBSHARE_MSG_DESC_LEN    (77 + UCT_IBSHARE_DESC_DEV_MAX)
#define UCT_IBSHARE_DESC_ALIGN      4096  /* page: what ibv_reg_mr pins */

/* A layout change must not break the header's "no message is longer" */
_Static_assert(UCT_IBSHARE_MSG_HDR_LEN + UCT_IBSHARE_MSG_DESC_LEN <=
               UCT_IBSHARE_MSG_MAX, "UCT_IBSHARE_MSG_MAX is too small");


/* A cursor over a message; put/get advance it. Byte by byte, so the wire
 * format depends neither on host byte order nor on struct layout. */
typedef struct {
    uint8_t *p;
} uct_ibshare_wr_t;

typedef struct {
    const uint8_t *p;
} uct_ibshare_rd_t;

static void uct_ibshare_put(uct_ibshare_wr_t *wr, uint64_t value,
                            unsigned size)
{
    unsigned i;

    for (i = 0; i < size; ++i) {
        *wr->p++ = (uint8_t)(value >> (8 * i));
    }
}

static uint64_t uct_ibshare_get(uct_ibshare_rd_t *rd, unsigned size)
{
    uint64_t value = 0;
    unsigned i;

    for (i = 0; i < size; ++i) {
        value |= (uint64_t)*rd->p++ << (8 * i);
    }
    return value;
}

static uint32_t uct_ibshare_get32(uct_ibshare_rd_t *rd)
{
    return (uint32_t)uct_ibshare_get(rd, 4);
}

/* Fills err (if there is room) and returns the decoder's error status */
static ucs_status_t UCS_F_PRINTF(3, 4)
uct_ibshare_msg_error(char *err, size_t err_max, const char *fmt, ...)
{
    va_list ap;

    if ((err != NULL) && (err_max > 0)) {
        va_start(ap, fmt);
        vsnprintf(err, err_max, fmt, ap);
        va_end(ap);
    }
    return UCS_ERR_INVALID_PARAM;
}

const char *uct_ibshare_group_mode_str(uint32_t mode)
{
    switch (mode) {
    case UCT_IBSHARE_GROUP_SHARED:
        return "shared";
    case UCT_IBSHARE_GROUP_FALLBACK:
        return "fallback";
    default:
        return "unknown";
    }
}

/* The name becomes part of file names and log lines: keep it to a safe set */
static int uct_ibshare_dev_name_char_ok(unsigned char c)
{
    return ((c >= 'a') && (c <= 'z')) || ((c >= 'A') && (c <= 'Z')) ||
           ((c >= '0') && (c <= '9')) || (c == '_') || (c == '.') ||
           (c == '-');
}

/* A device name field: NUL-terminated, not empty, of the safe set */
static ucs_status_t uct_ibshare_name_check(const char *name, size_t size,
                                           const char *what, char *err,
                                           size_t err_max)
{
    const char *nul;
    size_t i;

    nul = memchr(name, '\0', size);
    if (nul == NULL) {
        return uct_ibshare_msg_error(err, err_max,
                                     "%s dev_name has no NUL within its %zu "
                                     "bytes", what, size);
    }
    if (nul == name) {
        return uct_ibshare_msg_error(err, err_max, "%s dev_name is empty",
                                     what);
    }
    for (i = 0; &name[i] < nul; ++i) {
        if (!uct_ibshare_dev_name_char_ok((unsigned char)name[i])) {
            return uct_ibshare_msg_error(err, err_max,
                                         "%s dev_name has byte 0x%02x at "
                                         "offset %zu; only A-Z a-z 0-9 _ . -"
                                         " are allowed", what,
                                         (unsigned char)name[i], i);
        }
    }
    return UCS_OK;
}

/* On the wire only: the encoder writes the zeros after the NUL itself */
static ucs_status_t uct_ibshare_name_check_tail(const char *name,
                                                size_t size, const char *what,
                                                char *err, size_t err_max)
{
    size_t i;

    for (i = strnlen(name, size); i < size; ++i) {
        if (name[i] != '\0') {
            return uct_ibshare_msg_error(err, err_max,
                                         "%s dev_name has nonzero byte 0x%02x"
                                         " after its NUL, at offset %zu",
                                         what, (unsigned char)name[i], i);
        }
    }
    return UCS_OK;
}

uint64_t uct_ibshare_fnv1a(uint64_t hash, const void *data, size_t length)
{
    const uint8_t *p = data;

    while (length-- > 0) {
        hash = (hash ^ *p++) * 0x100000001b3ull;
    }
    return hash;
}

uint64_t uct_ibshare_job_hash(const char *job_key)
{
    return uct_ibshare_fnv1a(UCT_IBSHARE_FNV1A_INIT, job_key,
                             strlen(job_key) + 1);
}

void uct_ibshare_desc_ident(const uct_ibshare_desc_t *desc,
                            uct_ibshare_ident_t *ident)
{
    memset(ident, 0, sizeof(*ident));
    ident->job_hash  = desc->job_hash;
    ident->port_guid = desc->port_guid;
    memcpy(ident->dev_name, desc->dev_name,
           strnlen(desc->dev_name, sizeof(desc->dev_name) - 1));
}

uint32_t uct_ibshare_ident_compare(const uct_ibshare_ident_t *a,
                                   const uct_ibshare_ident_t *b)
{
    if (a->job_hash != b->job_hash) {
        return UCT_IBSHARE_REFUSE_JOB;
    }
    if (strncmp(a->dev_name, b->dev_name, sizeof(a->dev_name))) {
        return UCT_IBSHARE_REFUSE_DEVICE;
    }
    if (a->port_guid != b->port_guid) {
        return UCT_IBSHARE_REFUSE_GUID;
    }
    return 0;
}

const char *uct_ibshare_refuse_reason_str(uint32_t reason)
{
    switch (reason) {
    case UCT_IBSHARE_REFUSE_UID:
        return "another user";
    case UCT_IBSHARE_REFUSE_BAD_MSG:
        return "it did not understand our join message";
    case UCT_IBSHARE_REFUSE_BUSY:
        return "busy";
    case UCT_IBSHARE_REFUSE_JOB:
        return "another job";
    case UCT_IBSHARE_REFUSE_DEVICE:
        return "another device name";
    case UCT_IBSHARE_REFUSE_GUID:
        return "another port GUID";
    default:
        return "unknown";
    }
}

ucs_status_t uct_ibshare_desc_check(const uct_ibshare_desc_t *desc,
                                    char *err, size_t err_max)
{
    ucs_status_t status;

    if ((desc->mode != UCT_IBSHARE_GROUP_SHARED) &&
        (desc->mode != UCT_IBSHARE_GROUP_FALLBACK)) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor mode %" PRIu32 " is neither "
                                     "shared (%d) nor fallback (%d)",
                                     desc->mode, UCT_IBSHARE_GROUP_SHARED,
                                     UCT_IBSHARE_GROUP_FALLBACK);
    }

    /* The joiner learns from has_cmd_fd how many fds came with the message,
     * so it must agree with the mode, not merely be plausible */
    if (desc->has_cmd_fd > 1) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor has_cmd_fd %" PRIu32
                                     " is neither 0 nor 1", desc->has_cmd_fd);
    }
    if (desc->has_cmd_fd !=
        (uint32_t)(desc->mode == UCT_IBSHARE_GROUP_SHARED)) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor has_cmd_fd %" PRIu32
                                     " does not fit mode %s (only shared mode "
                                     "passes the cmd_fd)", desc->has_cmd_fd,
                                     uct_ibshare_group_mode_str(desc->mode));
    }

    if ((desc->slice_size == 0) ||
        (desc->slice_size % UCT_IBSHARE_DESC_ALIGN)) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor slice_size %" PRIu64
                                     " is not a nonzero multiple of %d",
                                     desc->slice_size, UCT_IBSHARE_DESC_ALIGN);
    }
    if ((desc->pool_size == 0) || (desc->pool_size % desc->slice_size)) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor pool_size %" PRIu64
                                     " is not a nonzero multiple of slice_size"
                                     " %" PRIu64, desc->pool_size,
                                     desc->slice_size);
    }
    if (desc->num_slices != desc->pool_size / desc->slice_size) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor num_slices %" PRIu32 " is not"
                                     " pool_size / slice_size = %" PRIu64,
                                     desc->num_slices,
                                     desc->pool_size / desc->slice_size);
    }
    if ((desc->num_slices < 1) ||
        (desc->num_slices > UCT_IBSHARE_DESC_MAX_SLICES)) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor num_slices %" PRIu32
                                     " is not in 1..%d", desc->num_slices,
                                     UCT_IBSHARE_DESC_MAX_SLICES);
    }
    if ((desc->slice >= desc->num_slices) &&
        (desc->slice != UCT_IBSHARE_DESC_NO_SLICE)) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor slice %" PRIu32 " is neither "
                                     "below num_slices %" PRIu32 " nor "
                                     "NO_SLICE", desc->slice,
                                     desc->num_slices);
    }

    if (desc->pool_iova % UCT_IBSHARE_DESC_ALIGN) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor pool_iova 0x%" PRIx64
                                     " is not a multiple of %d",
                                     desc->pool_iova, UCT_IBSHARE_DESC_ALIGN);
    }
    if (desc->pool_size > UINT64_MAX - desc->pool_iova) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor pool_iova 0x%" PRIx64
                                     " + pool_size 0x%" PRIx64 " overflows",
                                     desc->pool_iova, desc->pool_size);
    }

    if (desc->port_num == 0) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor port_num 0 is not a port "
                                     "number (they start at 1)");
    }

    status = uct_ibshare_name_check(desc->dev_name, sizeof(desc->dev_name),
                                    "descriptor", err, err_max);
    if (status != UCS_OK) {
        return status;
    }

    if (desc->server_pid == 0) {
        return uct_ibshare_msg_error(err, err_max,
                                     "descriptor server_pid is 0");
    }
    return UCS_OK;
}

static ucs_status_t uct_ibshare_msg_check_join(const uct_ibshare_msg_t *msg,
                                               char *err, size_t err_max)
{
    if (msg->join.pid == 0) {
        return uct_ibshare_msg_error(err, err_max, "join pid is 0");
    }
    return uct_ibshare_name_check(msg->join.ident.dev_name,
                                  sizeof(msg->join.ident.dev_name), "join",
                                  err, err_max);
}

static ucs_status_t
uct_ibshare_msg_check_refuse(const uct_ibshare_msg_t *msg, char *err,
                             size_t err_max)
{
    const uct_ibshare_ident_t *ident = &msg->refuse_ident;
    size_t i;

    if ((msg->refuse_reason < UCT_IBSHARE_REFUSE_UID) ||
        (msg->refuse_reason > UCT_IBSHARE_REFUSE_GUID)) {
        return uct_ibshare_msg_error(err, err_max,
                                     "refuse reason %" PRIu32 " is unknown",
                                     msg->refuse_reason);
    }
    if (msg->refuse_reason >= UCT_IBSHARE_REFUSE_JOB) {
        return uct_ibshare_name_check(ident->dev_name,
                                      sizeof(ident->dev_name), "refuse",
                                      err, err_max);
    }

    /* Nothing unchecked rides along: the other reasons name no group */
    for (i = 0; i < sizeof(ident->dev_name); ++i) {
        if (ident->dev_name[i] != '\0') {
            break;
        }
    }
    if ((ident->job_hash != 0) || (ident->port_guid != 0) ||
        (i < sizeof(ident->dev_name))) {
        return uct_ibshare_msg_error(err, err_max,
                                     "refuse reason %" PRIu32 " carries a "
                                     "group identity; only reasons %d..%d "
                                     "do", msg->refuse_reason,
                                     UCT_IBSHARE_REFUSE_JOB,
                                     UCT_IBSHARE_REFUSE_GUID);
    }
    return UCS_OK;
}

static void uct_ibshare_ident_read(uct_ibshare_rd_t *rd,
                                   uct_ibshare_ident_t *ident)
{
    ident->job_hash  = uct_ibshare_get(rd, 8);
    ident->port_guid = uct_ibshare_get(rd, 8);
    memcpy(ident->dev_name, rd->p, sizeof(ident->dev_name));
    rd->p += sizeof(ident->dev_name);
}

/* A name field as the decoder wants it: the name, then zeros */
static void uct_ibshare_name_write(uct_ibshare_wr_t *wr, const char *name,
                                   size_t size)
{
    size_t name_len = strnlen(name, size);

    memcpy(wr->p, name, name_len);
    memset(wr->p + name_len, 0, size - name_len);
    wr->p += size;
}

static void uct_ibshare_ident_write(uct_ibshare_wr_t *wr,
                                    const uct_ibshare_ident_t *ident)
{
    uct_ibshare_put(wr, ident->job_hash, 8);
    uct_ibshare_put(wr, ident->port_guid, 8);
    uct_ibshare_name_write(wr, ident->dev_name, sizeof(ident->dev_name));
}

static void uct_ibshare_desc_read(uct_ibshare_rd_t *rd,
                                  uct_ibshare_desc_t *desc)
{
    desc->mode       = uct_ibshare_get32(rd);
    desc->pd_handle  = uct_ibshare_get32(rd);
    desc->mr_handle  = uct_ibshare_get32(rd);
    desc->lkey       = uct_ibshare_get32(rd);
    desc->rkey       = uct_ibshare_get32(rd);
    desc->pool_iova  = uct_ibshare_get(rd, 8);
    desc->pool_size  = uct_ibshare_get(rd, 8);
    desc->slice_size = uct_ibshare_get(rd, 8);
    desc->num_slices = uct_ibshare_get32(rd);
    desc->slice      = uct_ibshare_get32(rd);
    desc->server_pid = uct_ibshare_get32(rd);
    desc->has_cmd_fd = uct_ibshare_get32(rd);
    desc->port_guid  = uct_ibshare_get(rd, 8);
    desc->port_num   = (uint8_t)uct_ibshare_get(rd, 1);
    memcpy(desc->dev_name, rd->p, sizeof(desc->dev_name));
    rd->p += sizeof(desc->dev_name);
    desc->job_hash   = uct_ibshare_get(rd, 8);
}

static void uct_ibshare_desc_write(uct_ibshare_wr_t *wr,
                                   const uct_ibshare_desc_t *desc)
{
    uct_ibshare_put(wr, desc->mode, 4);
    uct_ibshare_put(wr, desc->pd_handle, 4);
    uct_ibshare_put(wr, desc->mr_handle, 4);
    uct_ibshare_put(wr, desc->lkey, 4);
    uct_ibshare_put(wr, desc->rkey, 4);
    uct_ibshare_put(wr, desc->pool_iova, 8);
    uct_ibshare_put(wr, desc->pool_size, 8);
    uct_ibshare_put(wr, desc->slice_size, 8);
    uct_ibshare_put(wr, desc->num_slices, 4);
    uct_ibshare_put(wr, desc->slice, 4);
    uct_ibshare_put(wr, desc->server_pid, 4);
    uct_ibshare_put(wr, desc->has_cmd_fd, 4);
    uct_ibshare_put(wr, desc->port_guid, 8);
    uct_ibshare_put(wr, desc->port_num, 1);

    /* Whatever the caller's field holds after the name (snprintf leaves
     * the rest as it was) goes out as zeros: the decoder requires them */
    uct_ibshare_name_write(wr, desc->dev_name, sizeof(desc->dev_name));
    uct_ibshare_put(wr, desc->job_hash, 8);
}

ucs_status_t uct_ibshare_msg_unpack(const void *buf, size_t length,
                                    uct_ibshare_msg_t *msg, char *err,
                                    size_t err_max)
{
    uct_ibshare_rd_t rd = { buf };
    uint32_t magic, body_len, expected;
    uint16_t version, type;
    uct_ibshare_msg_t out;
    const char *type_name;
    ucs_status_t status;

    if (length < UCT_IBSHARE_MSG_HDR_LEN) {
        return uct_ibshare_msg_error(err, err_max,
                                     "message length %zu is shorter than its "
                                     "%d-byte header", length,
                                     UCT_IBSHARE_MSG_HDR_LEN);
    }

    magic    = uct_ibshare_get32(&rd);
    version  = (uint16_t)uct_ibshare_get(&rd, 2);
    type     = (uint16_t)uct_ibshare_get(&rd, 2);
    body_len = uct_ibshare_get32(&rd);

    /* Magic and version before the lengths: a peer of another version may
     * well have another layout, and that is the error worth reporting */
    if (magic != UCT_IBSHARE_MSG_MAGIC) {
        return uct_ibshare_msg_error(err, err_max,
                                     "message magic 0x%08" PRIx32 " is not "
                                     "0x%08x: not an ibshare message", magic,
                                     UCT_IBSHARE_MSG_MAGIC);
    }
    if (version != UCT_IBSHARE_MSG_VERSION) {
        return uct_ibshare_msg_error(err, err_max,
                                     "message version %u differs from this "
                                     "library's version %d (mixed ucx-ibshare"
                                     " installations on one node?)", version,
                                     UCT_IBSHARE_MSG_VERSION);
    }
    if (body_len != length - UCT_IBSHARE_MSG_HDR_LEN) {
        return uct_ibshare_msg_error(err, err_max,
                                     "message header length %" PRIu32 " does "
                                     "not match the %zu body bytes received",
                                     body_len,
                                     length - UCT_IBSHARE_MSG_HDR_LEN);
    }

    switch (type) {
    case UCT_IBSHARE_MSG_JOIN:
        type_name = "join";
        expected  = UCT_IBSHARE_MSG_JOIN_LEN;
        break;
    case UCT_IBSHARE_MSG_DESC:
        type_name = "descriptor";
        expected  = UCT_IBSHARE_MSG_DESC_LEN;
        break;
    case UCT_IBSHARE_MSG_REFUSE:
        type_name = "refuse";
        expected  = UCT_IBSHARE_MSG_REFUSE_LEN;
        break;
    default:
        return uct_ibshare_msg_error(err, err_max,
                                     "message type %u is unknown", type);
    }
    if (body_len != expected) {
        return uct_ibshare_msg_error(err, err_max,
                                     "%s message body length %" PRIu32
                                     " is not %" PRIu32, type_name, body_len,
                                     expected);
    }

    /* Decode into a copy: the caller sees nothing of a rejected message */
    memset(&out, 0, sizeof(out));
    out.type = type;
    switch (type) {
    case UCT_IBSHARE_MSG_JOIN:
        out.join.pid = uct_ibshare_get32(&rd);
        out.join.uid = uct_ibshare_get32(&rd);
        uct_ibshare_ident_read(&rd, &out.join.ident);
        status       = uct_ibshare_msg_check_join(&out, err, err_max);
        if (status == UCS_OK) {
            status = uct_ibshare_name_check_tail(
                    out.join.ident.dev_name, sizeof(out.join.ident.dev_name),
                    "join", err, err_max);
        }
        break;
    case UCT_IBSHARE_MSG_REFUSE:
        out.refuse_reason = uct_ibshare_get32(&rd);
        uct_ibshare_ident_read(&rd, &out.refuse_ident);
        status            = uct_ibshare_msg_check_refuse(&out, err, err_max);
        if (status == UCS_OK) {
            status = uct_ibshare_name_check_tail(
                    out.refuse_ident.dev_name,
                    sizeof(out.refuse_ident.dev_name), "refuse", err,
                    err_max);
        }
        break;
    default: /* UCT_IBSHARE_MSG_DESC */
        uct_ibshare_desc_read(&rd, &out.desc);
        status = uct_ibshare_desc_check(&out.desc, err, err_max);
        if (status != UCS_OK) {
            break;
        }
        status = uct_ibshare_name_check_tail(out.desc.dev_name,
                                             sizeof(out.desc.dev_name),
                                             "descriptor", err, err_max);
        break;
    }
    if (status != UCS_OK) {
        return status;
    }

    *msg = out;
    return UCS_OK;
}

/*
 * Write the header and hand back a cursor for the body. Every encoder builds
 * its message in a scratch buffer and runs the decoder over it, so the one
 * set of checks decides what goes out as well as what comes in.
 */
static uct_ibshare_wr_t uct_ibshare_msg_start(uint8_t *wire, uint16_t type,
                                              uint32_t body_len)
{
    uct_ibshare_wr_t wr = { wire };

    uct_ibshare_put(&wr, UCT_IBSHARE_MSG_MAGIC, 4);
    uct_ibshare_put(&wr, UCT_IBSHARE_MSG_VERSION, 2);
    uct_ibshare_put(&wr, type, 2);
    uct_ibshare_put(&wr, body_len, 4);
    return wr;
}

static size_t uct_ibshare_msg_finish(void *buf, size_t max,
                                     const uint8_t *wire, size_t length)
{
    uct_ibshare_msg_t msg;

    if ((length > max) ||
        (uct_ibshare_msg_unpack(wire, length, &msg, NULL, 0) != UCS_OK)) {
        return 0;
    }
    memcpy(buf, wire, length);
    return length;
}

size_t uct_ibshare_msg_pack_join(void *buf, size_t max, uint32_t pid,
                                 uint32_t uid,
                                 const uct_ibshare_ident_t *ident)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_wr_t wr;

    wr = uct_ibshare_msg_start(wire, UCT_IBSHARE_MSG_JOIN,
                               UCT_IBSHARE_MSG_JOIN_LEN);
    uct_ibshare_put(&wr, pid, 4);
    uct_ibshare_put(&wr, uid, 4);
    uct_ibshare_ident_write(&wr, ident);
    return uct_ibshare_msg_finish(buf, max, wire, wr.p - wire);
}

size_t uct_ibshare_msg_pack_desc(void *buf, size_t max,
                                 const uct_ibshare_desc_t *desc)
{
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_wr_t wr;

    wr = uct_ibshare_msg_start(wire, UCT_IBSHARE_MSG_DESC,
                               UCT_IBSHARE_MSG_DESC_LEN);
    uct_ibshare_desc_write(&wr, desc);
    return uct_ibshare_msg_finish(buf, max, wire, wr.p - wire);
}

size_t uct_ibshare_msg_pack_refuse(void *buf, size_t max, uint32_t reason,
                                   const uct_ibshare_ident_t *ident)
{
    static const uct_ibshare_ident_t none;
    uint8_t wire[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_wr_t wr;

    wr = uct_ibshare_msg_start(wire, UCT_IBSHARE_MSG_REFUSE,
                               UCT_IBSHARE_MSG_REFUSE_LEN);
    uct_ibshare_put(&wr, reason, 4);
    uct_ibshare_ident_write(&wr, (ident != NULL) ? ident : &none);
    return uct_ibshare_msg_finish(buf, max, wire, wr.p - wire);
}

size_t uct_ibshare_msg_pack(void *buf, size_t max,
                            const uct_ibshare_msg_t *msg)
{
    switch (msg->type) {
    case UCT_IBSHARE_MSG_JOIN:
        return uct_ibshare_msg_pack_join(buf, max, msg->join.pid,
                                         msg->join.uid, &msg->join.ident);
    case UCT_IBSHARE_MSG_DESC:
        return uct_ibshare_msg_pack_desc(buf, max, &msg->desc);
    case UCT_IBSHARE_MSG_REFUSE:
        return uct_ibshare_msg_pack_refuse(buf, max, msg->refuse_reason,
                                           &msg->refuse_ident);
    default:
        return 0;
    }
}
