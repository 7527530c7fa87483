/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The copies of UCX's uct/ib helpers (compat/ibshare_ib_compat.h): what
 * rc_verbs encodes for the same settings (UCX's defaults and the bounds of
 * rc_share's configuration) and the QP number's wire form.
 */
#include "compat/ibshare_ib_compat.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>


static void test_qp_fabric_time(void **state)
{
    assert_int_equal(uct_ibshare_to_qp_fabric_time(1.0), 18);      /* default */
    assert_int_equal(uct_ibshare_to_qp_fabric_time(8796.0), 31);   /* max */
    assert_int_equal(uct_ibshare_to_qp_fabric_time(20000.0), 0);   /* none */
    assert_int_equal(uct_ibshare_to_qp_fabric_time(1e-6), 1);
    /* the nearest power: 2^17 * 4.096 us = 0.537 s, 2^18 = 1.07 s */
    assert_int_equal(uct_ibshare_to_qp_fabric_time(0.7), 17);
    assert_int_equal(uct_ibshare_to_qp_fabric_time(0.8), 18);
}

static void test_rnr_fabric_time(void **state)
{
    assert_int_equal(uct_ibshare_to_rnr_fabric_time(30e-3), 23);  /* default */
    assert_int_equal(uct_ibshare_to_rnr_fabric_time(10e-6), 1);   /* shortest */
    assert_int_equal(uct_ibshare_to_rnr_fabric_time(0.65536), 0); /* longest */
    assert_int_equal(uct_ibshare_to_rnr_fabric_time(1.0), 0);
    /* the nearest of 20.48 ms (22) and 30.72 ms (23) */
    assert_int_equal(uct_ibshare_to_rnr_fabric_time(25e-3), 22);
    assert_int_equal(uct_ibshare_to_rnr_fabric_time(26e-3), 23);
}

static void test_uint24(void **state)
{
    uct_ibshare_uint24_t buf;

    uct_ibshare_pack_uint24(buf, 0xabcdef);
    assert_int_equal(buf[0], 0xef);
    assert_int_equal(buf[1], 0xcd);
    assert_int_equal(buf[2], 0xab);
    assert_int_equal(uct_ibshare_unpack_uint24(buf), 0xabcdef);
    uct_ibshare_pack_uint24(buf, 0x12345678);   /* a QPN has 24 bits */
    assert_int_equal(uct_ibshare_unpack_uint24(buf), 0x345678);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qp_fabric_time),
        cmocka_unit_test(test_rnr_fabric_time),
        cmocka_unit_test(test_uint24),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
