/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Fault injection into a node group's hand-off, for the tests
 * (UCX_IBSHARE_FAULT, test/host/node_driver.c): the server exits or
 * misbehaves at a chosen point, and the tests see the group survive it.
 */
#include "ibshare_node_int.h"

#include <ucs/debug/log_def.h>

#include <unistd.h>


const char *uct_ibshare_node_fault_names[] = {
    [UCT_IBSHARE_FAULT_NONE]        = "none",
    [UCT_IBSHARE_FAULT_CREATE_EXIT] = "create_exit",
    [UCT_IBSHARE_FAULT_ACCEPT_EXIT] = "accept_exit",
    [UCT_IBSHARE_FAULT_JOIN_EXIT]   = "join_exit",
    [UCT_IBSHARE_FAULT_DESC_EXIT]   = "desc_exit",
    [UCT_IBSHARE_FAULT_STALL]       = "stall",
    [UCT_IBSHARE_FAULT_GARBAGE]     = "garbage",
    [UCT_IBSHARE_FAULT_TRUNCATED]   = "truncated",
    [UCT_IBSHARE_FAULT_IMPORT_FAIL] = "import_fail",
    [UCT_IBSHARE_FAULT_POLL_FAIL]   = "poll_fail",
    [UCT_IBSHARE_FAULT_NO_STATE]    = "no_state",
    [UCT_IBSHARE_FAULT_LAST]        = NULL
};


void UCS_F_NORETURN
uct_ibshare_node_fault_exit(uct_ibshare_node_t *node, const char *where)
{
    ucs_warn("%s: fault injection: the server exits %s", node->sock_path,
             where);
    _exit(UCT_IBSHARE_NODE_FAULT_STATUS);
}

/* The fault that strikes now; misbehaving faults strike once only, so that
 * a test sees the server survive its own misbehaviour */
unsigned uct_ibshare_node_fault_take(uct_ibshare_node_t *node,
                                     unsigned fault)
{
    unsigned expected = fault;

    if (__atomic_load_n(&node->fault, __ATOMIC_RELAXED) != fault) {
        return 0;
    }
    if ((fault == UCT_IBSHARE_FAULT_STALL) ||
        (fault == UCT_IBSHARE_FAULT_GARBAGE) ||
        (fault == UCT_IBSHARE_FAULT_TRUNCATED) ||
        (fault == UCT_IBSHARE_FAULT_POLL_FAIL)) {
        return __atomic_compare_exchange_n(&node->fault, &expected,
                                           UCT_IBSHARE_FAULT_NONE, 0,
                                           __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED);
    }
    return 1;
}

void uct_ibshare_node_set_fault(uct_ibshare_node_t *node, unsigned fault)
{
    __atomic_store_n(&node->fault, fault, __ATOMIC_RELAXED);
}
