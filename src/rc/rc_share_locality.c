/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Where a peer runs (see rc_share_locality.h).
 */
#include "rc_share_locality.h"

#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <ucs/sys/uid.h>

#include <string.h>
#include <unistd.h>


enum {
    UCT_RC_SHARE_SHM_POSIX = UCS_BIT(0),
    UCT_RC_SHARE_SHM_SYSV  = UCS_BIT(1),
    UCT_RC_SHARE_SHM_ALL   = UCT_RC_SHARE_SHM_POSIX | UCT_RC_SHARE_SHM_SYSV
};


void uct_rc_share_locality_get(uct_rc_share_locality_t *loc)
{
    uint64_t ipc_ns = ucs_sys_get_ns(UCS_SYS_NS_TYPE_IPC);

    memset(loc, 0, sizeof(*loc));
    /* Equal for two processes of one boot and IPC namespace; for others
     * equal by chance only (1 in 2^64) */
    loc->node = ucs_get_system_id() ^ (ipc_ns * 0x9e3779b97f4a7c15ull);
    loc->pid  = getpid();
}

int uct_rc_share_locality_same_node(const uct_rc_share_locality_t *a,
                                    const uct_rc_share_locality_t *b)
{
    return a->node == b->node;
}

int uct_rc_share_locality_same_process(const uct_rc_share_locality_t *a,
                                       const uct_rc_share_locality_t *b)
{
    return uct_rc_share_locality_same_node(a, b) && (a->pid == b->pid);
}

/* The shared-memory transports a name of UCX_TLS stands for (UCP 1.13's
 * and 1.22's aliases: ucp_tl_aliases) */
static unsigned
uct_rc_share_tls_name_shm(const char *name, size_t len, int strict)
{
    static const struct {
        const char *name;
        unsigned   shm;
        int        alias;
    } names[] = {
        {"all",   UCT_RC_SHARE_SHM_ALL,   1},
        {"sm",    UCT_RC_SHARE_SHM_ALL,   1},
        {"shm",   UCT_RC_SHARE_SHM_ALL,   1},
        {"mm",    UCT_RC_SHARE_SHM_ALL,   1},
        {"posix", UCT_RC_SHARE_SHM_POSIX, 0},
        {"sysv",  UCT_RC_SHARE_SHM_SYSV,  0}
    };
    size_t i;

    for (i = 0; i < ucs_static_array_size(names); ++i) {
        if ((strlen(names[i].name) == len) && !(strict && names[i].alias) &&
            (strncmp(names[i].name, name, len) == 0)) {
            return names[i].shm;
        }
    }
    return 0;
}

int uct_rc_share_tls_has_shm(const char *tls)
{
    unsigned listed = 0;
    const char *name, *end, *colon;
    int negate, strict;
    size_t len;

    if (tls == NULL) {
        return 1; /* UCP's default, "all" */
    }

    negate = (tls[0] == '^');
    name   = tls + negate;
    while (*name != '\0') {
        end = strchr(name, ',');
        len = (end != NULL) ? (size_t)(end - name) : strlen(name);
        /* "\\name": the transport of that name, no alias; "name:aux": an
         * auxiliary transport, still opened */
        strict = (len > 0) && (name[0] == '\\');
        colon  = memchr(name, ':', len);
        if (colon != NULL) {
            len = colon - name;
        }
        listed |= uct_rc_share_tls_name_shm(name + strict, len - strict,
                                            strict);
        if (end == NULL) {
            break;
        }
        name = end + 1;
    }

    return negate ? (listed != UCT_RC_SHARE_SHM_ALL) : (listed != 0);
}
