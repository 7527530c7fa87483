/**
 * Component registration and configuration tables.
 */
#include "ibshare_md.h"
#include "rc_share.h"

#include <uct/api/uct.h>
#include <ucs/config/parser.h>
#include <ucs/sys/string.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>


/* Every named field documents itself (ucx_info -c -f prints the help) */
static unsigned check_table_help(const ucs_config_field_t *field)
{
    unsigned named = 0;

    for (; field->name != NULL; ++field) {
        if (field->name[0] == '\0') {
            continue; /* an inherited table; UCX documents its own fields */
        }
        assert_non_null(field->doc);
        assert_true(strlen(field->doc) > 10);
        ++named;
    }
    return named;
}

static void test_tables_documented(void **state)
{
    assert_true(check_table_help(uct_ibshare_md_config_table) >= 1);
    assert_true(check_table_help(uct_rc_share_iface_config_table) >= 1);
}

static void test_component_registered(void **state)
{
    uct_component_h *components;
    uct_component_attr_t attr;
    unsigned i, num_components;
    int found = 0;

    assert_int_equal(uct_query_components(&components, &num_components),
                     UCS_OK);
    for (i = 0; i < num_components; ++i) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                          UCT_COMPONENT_ATTR_FIELD_FLAGS;
        assert_int_equal(uct_component_query(components[i], &attr), UCS_OK);
        if (!strcmp(attr.name, UCT_IBSHARE_COMPONENT_NAME)) {
            found++;
            assert_int_equal(attr.flags, 0); /* no connection manager */
        }
    }
    uct_release_component_list(components);
    assert_int_equal(found, 1);
}

static void test_md_config_defaults_and_env(void **state)
{
    uct_ibshare_md_config_t config;

    memset(&config, 0, sizeof(config));
    unsetenv("UCX_IBSHARE_RCACHE");
    assert_int_equal(ucs_config_parser_fill_opts(&config,
                                                 uct_ibshare_md_config_table,
                                                 "UCX_", "IBSHARE_", 0),
                     UCS_OK);
    assert_int_equal(config.rcache, UCS_TRY);
    ucs_config_parser_release_opts(&config, uct_ibshare_md_config_table);

    setenv("UCX_IBSHARE_RCACHE", "no", 1);
    assert_int_equal(ucs_config_parser_fill_opts(&config,
                                                 uct_ibshare_md_config_table,
                                                 "UCX_", "IBSHARE_", 0),
                     UCS_OK);
    assert_int_equal(config.rcache, UCS_NO);
    ucs_config_parser_release_opts(&config, uct_ibshare_md_config_table);
    unsetenv("UCX_IBSHARE_RCACHE");
}

static void test_iface_config_bad_value(void **state)
{
    uct_rc_share_iface_config_t config;

    memset(&config, 0, sizeof(config));
    setenv("UCX_RC_SHARE_GID_INDEX", "3", 1);
    assert_int_equal(ucs_config_parser_fill_opts(&config,
                                                 uct_rc_share_iface_config_table,
                                                 "UCX_", "RC_SHARE_", 0),
                     UCS_OK);
    assert_int_equal(config.gid_index, 3);
    ucs_config_parser_release_opts(&config, uct_rc_share_iface_config_table);

    /* A value that is neither a number nor "auto" is refused, not guessed */
    setenv("UCX_RC_SHARE_GID_INDEX", "first", 1);
    assert_int_not_equal(ucs_config_parser_fill_opts(
                                 &config, uct_rc_share_iface_config_table,
                                 "UCX_", "RC_SHARE_", 0),
                         UCS_OK);
    unsetenv("UCX_RC_SHARE_GID_INDEX");

    memset(&config, 0, sizeof(config));
    assert_int_equal(ucs_config_parser_fill_opts(&config,
                                                 uct_rc_share_iface_config_table,
                                                 "UCX_", "RC_SHARE_", 0),
                     UCS_OK);
    assert_int_equal(config.gid_index, UCS_ULUNITS_AUTO);
    ucs_config_parser_release_opts(&config, uct_rc_share_iface_config_table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_documented),
        cmocka_unit_test(test_component_registered),
        cmocka_unit_test(test_md_config_defaults_and_env),
        cmocka_unit_test(test_iface_config_bad_value),
    };

    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
