/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Where a peer runs (rc_share_locality.h): which values of UCX_TLS give UCP
 * a shared-memory transport for the processes of a node, and the node and
 * process comparisons.
 */
#include "rc/rc_share.h"
#include "rc/rc_share_locality.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>


static void test_tls_with_shm(void **state)
{
    static const char *with[] = {
        NULL, "all", "sm", "shm", "mm", "posix", "sysv",
        "rc_share,sm,self", "rc_share,self,posix", "sysv,rc_share",
        "rc_share,sm:aux", "\\posix,rc_share", "^rc_verbs", "^rc_share,cma",
        "^posix", "^sysv,cma", "^xpmem,knem,cma", "ud_v,mm"
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(with) / sizeof(with[0]); ++i) {
        if (!uct_rc_share_tls_has_shm(with[i])) {
            fail_msg("UCX_TLS=%s has posix or sysv", with[i] ?: "(unset)");
        }
    }
}

static void test_tls_without_shm(void **state)
{
    static const char *without[] = {
        "", "rc_share", "rc_share,self", "rc_share,self,cma",
        "rc_share,xpmem,knem", "\\sm,rc_share", "\\shm", "^all", "^sm",
        "^shm", "^sm,all", "^mm,rc_verbs", "^posix,sysv", "^sysv,posix,rc_share",
        "smx", "posixx,sys", "rc_share,,self", "s", "^"
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(without) / sizeof(without[0]); ++i) {
        /* "^" alone excludes nothing: UCP then has every transport */
        int expect = (strcmp(without[i], "^") == 0);
        if (uct_rc_share_tls_has_shm(without[i]) != expect) {
            fail_msg("UCX_TLS=%s: %s expected", without[i],
                     expect ? "shm" : "no shm");
        }
    }
}

static void test_locality(void **state)
{
    uct_rc_share_locality_t self, other;

    (void)state;
    uct_rc_share_locality_get(&self);
    assert_int_equal(self.pid, getpid());
    assert_true(self.node != 0);
    /* UCP 1.13 packs a device address in at most 31 bytes (address.c:
     * "Assertion `value <= max_value' failed: value 39, max_value 31") */
    assert_true(sizeof(uct_rc_share_wire_device_addr_t) <= 31);

    other = self;
    assert_true(uct_rc_share_locality_same_node(&self, &other));
    assert_true(uct_rc_share_locality_same_process(&self, &other));

    other.pid = self.pid + 1; /* another process of this node */
    assert_true(uct_rc_share_locality_same_node(&self, &other));
    assert_false(uct_rc_share_locality_same_process(&self, &other));

    other = self;
    other.node ^= 1; /* another node or IPC namespace, our pid by chance */
    assert_false(uct_rc_share_locality_same_node(&self, &other));
    assert_false(uct_rc_share_locality_same_process(&self, &other));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_with_shm),
        cmocka_unit_test(test_tls_without_shm),
        cmocka_unit_test(test_locality)
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
