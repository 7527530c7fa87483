/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group's wire messages: what a joiner sends to the member that
 * serves the group, and the descriptor it gets back (with the file
 * descriptors, which travel beside it as SCM_RIGHTS).
 *
 * Pure code: no I/O, no global state, so the decoder can be fuzzed. Every
 * message is little-endian on the wire with a fixed layout; the decoder
 * checks length, magic, version and every field's range before it fills
 * anything the caller uses.
 */
#ifndef UCT_IBSHARE_DESC_H_
#define UCT_IBSHARE_DESC_H_

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>


#define UCT_IBSHARE_MSG_MAGIC        0x68736269u  /* "ibsh" on the wire */
/* 2: the group's identity in JOIN, DESC and REFUSE */
#define UCT_IBSHARE_MSG_VERSION      2
#define UCT_IBSHARE_MSG_MAX          256          /* no message is longer */
#define UCT_IBSHARE_DESC_DEV_MAX     64           /* with the NUL */
#define UCT_IBSHARE_DESC_MAX_SLICES  4096
#define UCT_IBSHARE_DESC_NO_SLICE    UINT32_MAX


typedef enum {
    UCT_IBSHARE_MSG_JOIN   = 1, /* joiner -> server: please serve me */
    UCT_IBSHARE_MSG_DESC   = 2, /* server -> joiner: descriptor, fds beside */
    UCT_IBSHARE_MSG_REFUSE = 3  /* server -> joiner: no, and why */
} uct_ibshare_msg_type_t;


typedef enum {
    UCT_IBSHARE_GROUP_SHARED   = 1, /* members import the leader's PD and MR */
    UCT_IBSHARE_GROUP_FALLBACK = 2  /* import unsupported: each member has its
                                       own PD and registers its own slice */
} uct_ibshare_group_mode_t;


typedef enum {
    UCT_IBSHARE_REFUSE_UID     = 1, /* peer runs as another user */
    UCT_IBSHARE_REFUSE_BAD_MSG = 2, /* the join message did not decode */
    UCT_IBSHARE_REFUSE_BUSY    = 3, /* the server is leaving; try again */
    /* The joiner belongs to another group than the server's (a socket
     * path that leads to another group): the first field that differs */
    UCT_IBSHARE_REFUSE_JOB     = 4, /* job key hash */
    UCT_IBSHARE_REFUSE_DEVICE  = 5, /* device name */
    UCT_IBSHARE_REFUSE_GUID    = 6  /* port GUID */
} uct_ibshare_refuse_reason_t;


/* Whose group it is: what a joiner and a server compare before the joiner
 * takes anything of the group's */
typedef struct uct_ibshare_ident {
    uint64_t job_hash;      /* uct_ibshare_job_hash() of the job key */
    uint64_t port_guid;     /* as the device reports it */
    char     dev_name[UCT_IBSHARE_DESC_DEV_MAX]; /* NUL-terminated */
} uct_ibshare_ident_t;


/* What a joiner needs to use the group's resources */
typedef struct uct_ibshare_desc {
    uint32_t mode;          /* uct_ibshare_group_mode_t */
    uint32_t pd_handle;     /* shared mode: for ibv_import_pd */
    uint32_t mr_handle;     /* shared mode: for ibv_import_mr */
    uint32_t lkey;          /* shared mode: the pool MR's keys */
    uint32_t rkey;
    uint64_t pool_iova;     /* IOVA of the pool's first byte */
    uint64_t pool_size;     /* bytes; a multiple of slice_size */
    uint64_t slice_size;    /* bytes; a multiple of 4096 */
    uint32_t num_slices;    /* pool_size / slice_size */
    uint32_t slice;         /* the joiner's slice, or UCT_IBSHARE_DESC_NO_SLICE */
    uint32_t server_pid;    /* the member that served this descriptor */
    uint32_t has_cmd_fd;    /* 1: the fds are cmd_fd then pool fd; 0: pool fd */
    uint64_t port_guid;     /* as the device reports it (network order) */
    uint8_t  port_num;      /* 1..255 */
    char     dev_name[UCT_IBSHARE_DESC_DEV_MAX]; /* NUL-terminated */
    uint64_t job_hash;      /* the group's job, uct_ibshare_job_hash() */
} uct_ibshare_desc_t;


/* A decoded message */
typedef struct uct_ibshare_msg {
    uint32_t type;          /* uct_ibshare_msg_type_t */
    union {
        struct {
            uint32_t            pid;
            uint32_t            uid;
            uct_ibshare_ident_t ident;  /* the group the joiner wants */
        } join;
        uct_ibshare_desc_t desc;
        struct {
            uint32_t            refuse_reason; /* uct_ibshare_refuse_reason_t */
            /* JOB, DEVICE, GUID: the server's own group; else all zero */
            uct_ibshare_ident_t refuse_ident;
        };
    };
} uct_ibshare_msg_t;


/*
 * Encoders: write one message into buf (at most max bytes) and return its
 * length, or 0 if it does not fit or the descriptor is itself invalid (the
 * encoder applies the decoder's checks, so a server never sends what a
 * joiner would reject).
 */
size_t uct_ibshare_msg_pack_join(void *buf, size_t max, uint32_t pid,
                                 uint32_t uid,
                                 const uct_ibshare_ident_t *ident);
size_t uct_ibshare_msg_pack_desc(void *buf, size_t max,
                                 const uct_ibshare_desc_t *desc);
/* ident: the server's group for JOB, DEVICE and GUID; NULL for the others */
size_t uct_ibshare_msg_pack_refuse(void *buf, size_t max, uint32_t reason,
                                   const uct_ibshare_ident_t *ident);

/* Any decoded message, encoded again: 0 for an unknown type */
size_t uct_ibshare_msg_pack(void *buf, size_t max,
                            const uct_ibshare_msg_t *msg);

/*
 * Decoder: UCS_OK and *msg filled, or UCS_ERR_INVALID_PARAM with a sentence
 * naming what is wrong in err (never NULL-terminated garbage: err always ends
 * in a NUL). Reads exactly length bytes of buf, never more.
 */
ucs_status_t uct_ibshare_msg_unpack(const void *buf, size_t length,
                                    uct_ibshare_msg_t *msg, char *err,
                                    size_t err_max);

/*
 * The decoder's checks of a descriptor's fields, for the side that builds
 * one: the encoder only answers 0, this names the field (same err rules as
 * the decoder). The bytes after dev_name's NUL are not checked here; the
 * encoder sends them as zeros.
 */
ucs_status_t uct_ibshare_desc_check(const uct_ibshare_desc_t *desc,
                                    char *err, size_t err_max);

const char *uct_ibshare_group_mode_str(uint32_t mode);

/* 64-bit FNV-1a of length bytes at data, going on from hash (start from
 * UCT_IBSHARE_FNV1A_INIT): the node's names and the job key's hash. Neither
 * needs more than spreading names (ucs has no such hash of bytes). */
#define UCT_IBSHARE_FNV1A_INIT 0xcbf29ce484222325ull
uint64_t uct_ibshare_fnv1a(uint64_t hash, const void *data, size_t length);

/* The job key's hash (FNV-1a of the key and its NUL) */
uint64_t uct_ibshare_job_hash(const char *job_key);

/* The identity a descriptor names */
void uct_ibshare_desc_ident(const uct_ibshare_desc_t *desc,
                            uct_ibshare_ident_t *ident);

/*
 * Which of JOB, DEVICE, GUID differs first between two identities (in that
 * order), or 0 if they are the same group's.
 */
uint32_t uct_ibshare_ident_compare(const uct_ibshare_ident_t *a,
                                   const uct_ibshare_ident_t *b);

/* Names the refuse reason, for log lines */
const char *uct_ibshare_refuse_reason_str(uint32_t reason);

#endif
