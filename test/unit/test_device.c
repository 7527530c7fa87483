/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Device and port naming: what UCX users type in UCX_NET_DEVICES.
 */
#include "md/ibshare_device.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>


static void test_parse_port_valid(void **state)
{
    uint8_t port = 0;

    assert_int_equal(uct_ibshare_device_parse_port("mlx5_0:1", "mlx5_0",
                                                   &port), UCS_OK);
    assert_int_equal(port, 1);
    assert_int_equal(uct_ibshare_device_parse_port("rxe0:2", "rxe0", &port),
                     UCS_OK);
    assert_int_equal(port, 2);
}

static void test_parse_port_invalid(void **state)
{
    static const char *bad[] = {
        "rxe0", "rxe0:", "rxe0:0", "rxe0:x", "rxe0:1x", "rxe0:-1",
        "rxe0:99999999999999999999", "rxe1:1", "rxe:1", "rxe00:1", ":1", ""
    };
    uint8_t port = 7;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        assert_int_equal(uct_ibshare_device_parse_port(bad[i], "rxe0", &port),
                         UCS_ERR_NO_DEVICE);
        assert_int_equal(port, 7); /* untouched on error */
    }
}

static void test_query_ports_unknown_device(void **state)
{
    uct_tl_device_resource_t *ports = NULL;
    unsigned num_ports = 0;

    assert_int_equal(uct_ibshare_device_query_ports("no_such_dev0", &ports,
                                                    &num_ports),
                     UCS_ERR_NO_DEVICE);
}

static void test_md_resources_match_verbs(void **state)
{
    uct_md_resource_desc_t *resources;
    struct ibv_device **devices;
    unsigned i, num_resources;
    int num_devices = 0;

    assert_int_equal(uct_ibshare_query_md_resources(NULL, &resources,
                                                    &num_resources), UCS_OK);

    devices = ibv_get_device_list(&num_devices);
    if (devices != NULL) {
        ibv_free_device_list(devices);
    }

    /* Every md is a verbs device; a machine without RDMA lists none */
    assert_true(num_resources <= (unsigned)num_devices);
    for (i = 0; i < num_resources; ++i) {
        assert_true(resources[i].md_name[0] != '\0');
    }
    ucs_free(resources);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_port_valid),
        cmocka_unit_test(test_parse_port_invalid),
        cmocka_unit_test(test_query_ports_unknown_device),
        cmocka_unit_test(test_md_resources_match_verbs),
    };

    return cmocka_run_group_tests_name("device", tests, NULL, NULL);
}
