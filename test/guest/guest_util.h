/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * What the guest's UCT test programs share (node_member, node_lifetime,
 * incast, md_reg): finding the component, counting open fds, the counts of
 * the preloaded count_reg.so, and files written whole for their peers.
 */
#ifndef IBSHARE_TEST_GUEST_UTIL_H_
#define IBSHARE_TEST_GUEST_UTIL_H_

#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>


/* Who prints the check lines ("node_member 3"), and how many failed */
extern char guest_name[64];
extern int guest_failures;

/* One line "ok: NAME: ..." or "FAIL: NAME: ...", which the scripts read */
#define CHECK(_cond, ...) \
    do { \
        int _ok = !!(_cond); \
        printf("%s: %s: ", _ok ? "ok" : "FAIL", guest_name); \
        printf(__VA_ARGS__); \
        printf("\n"); \
        fflush(stdout); \
        guest_failures += !_ok; \
    } while (0)

#define DIE(...) \
    do { \
        CHECK(0, __VA_ARGS__); \
        exit(1); \
    } while (0)


/* The registered component called name, or NULL */
uct_component_h guest_find_component(const char *name);

/* The ibshare component; dies if it is not registered (not preloaded) */
uct_component_h guest_ibshare_component(void);

/* The process's open file descriptors */
int guest_open_fds(void);

/* count_reg.so's ibv_reg_mr* count; dies if it is not preloaded */
unsigned long guest_registrations(void);

/* Writes path through a temporary file and rename(), so that a reader sees
 * all of it or nothing; dies if it cannot */
void guest_publish(const char *path, const void *data, size_t length);

/* A thread-mode async context, a worker on it, and the rc_share iface
 * configuration of md (to release); dies if any fails */
void guest_open_worker(uct_md_h md, ucs_async_context_t **async_p,
                       uct_worker_h *worker_p,
                       uct_iface_config_t **iface_config_p);

/* A completion callback for tests that only poll comp->count */
void guest_completed(uct_completion_t *comp);

#endif
