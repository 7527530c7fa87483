/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Where a peer runs, seen from here: this process, another process of this
 * node, or another node; and whether UCP has a shared-memory transport for
 * the second kind.
 *
 * Ranks of one node need no RDMA connection to each other when UCX's
 * shared-memory transports are there: they carry tag, RMA and atomics at a
 * fraction of the cost, and every RC connection costs a QP pair. UCP still
 * puts an RDMA transport on lanes to same-node peers (bandwidth lanes,
 * atomics), so rc_share says such peers are unreachable (on ifaces that
 * carry no atomics: uct_rc_share_iface_node_peers says why): it is the one
 * transport that can, since it knows which peers share its node. A node is
 * what UCX's shared-memory transports call one (uct_sm_iface_is_reachable):
 * the same boot (ucs_get_system_id) and IPC namespace. Peers in this
 * process stay reachable: UCX's gtest runs both sides in one process with
 * UCX_TLS set through ucp_config_modify, which no environment shows.
 */
#ifndef UCT_RC_SHARE_LOCALITY_H_
#define UCT_RC_SHARE_LOCALITY_H_

#include <ucs/sys/compiler_def.h>

#include <stdint.h>


/* Part of the device address, which UCP 1.13 packs in at most 31 bytes
 * (the path to the port takes 19) */
typedef struct UCS_S_PACKED uct_rc_share_locality {
    uint64_t                  node;         /* ucs_get_system_id(), mixed
                                               with the IPC namespace */
    uint32_t                  pid;
} uct_rc_share_locality_t;


void uct_rc_share_locality_get(uct_rc_share_locality_t *loc);

/* Whether a and b are processes of one node */
int uct_rc_share_locality_same_node(const uct_rc_share_locality_t *a,
                                    const uct_rc_share_locality_t *b);

/* Whether a and b are one process */
int uct_rc_share_locality_same_process(const uct_rc_share_locality_t *a,
                                       const uct_rc_share_locality_t *b);

/*
 * Whether UCP, with this value of UCX_TLS (NULL: not set, which means
 * "all"), opens a shared-memory transport that carries active messages
 * between processes of a node: posix or sysv, named or by an alias (sm,
 * shm, mm, all), and not excluded by a "^" list. The other shared-memory
 * transports (xpmem, a module Debian does not ship; cma and knem, RMA only)
 * do not count: a wrong "no" only leaves the connections as they were.
 */
int uct_rc_share_tls_has_shm(const char *tls);

#endif
