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

/* Parses TABLE with VAR set to VALUE (unset when NULL) */
static ucs_status_t parse(void *config, ucs_config_field_t *table,
                          const char *prefix, const char *var,
                          const char *value)
{
    ucs_status_t status;

    if (value == NULL) {
        unsetenv(var);
    } else {
        setenv(var, value, 1);
    }
    status = uct_ibshare_ucx_config_fill_opts(config, table, "UCX_", prefix,
                                              0);
    unsetenv(var);
    return status;
}

static void test_md_config_defaults_and_env(void **state)
{
    static const struct {
        const char               *value;
        ucs_ternary_auto_value_t expected;
    } cases[] = {{NULL, UCS_TRY}, {"no", UCS_NO}, {"yes", UCS_YES}};
    uct_ibshare_md_config_t config;
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        memset(&config, 0, sizeof(config));
        assert_int_equal(parse(&config, uct_ibshare_md_config_table,
                               "IBSHARE_", "UCX_IBSHARE_RCACHE",
                               cases[i].value), UCS_OK);
        assert_int_equal(config.rcache, cases[i].expected);
        ucs_config_parser_release_opts(&config, uct_ibshare_md_config_table);
    }

    /* A value outside yes, no, try (and its alias maybe) is refused */
    assert_int_not_equal(parse(&config, uct_ibshare_md_config_table,
                               "IBSHARE_", "UCX_IBSHARE_RCACHE", "sometimes"),
                         UCS_OK);
}

static void test_iface_config_gid_index(void **state)
{
    static const struct {
        const char    *value;
        unsigned long expected;
    } cases[] = {{NULL, UCS_ULUNITS_AUTO}, {"auto", UCS_ULUNITS_AUTO},
                 {"3", 3}};
    uct_rc_share_iface_config_t config;
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        memset(&config, 0, sizeof(config));
        assert_int_equal(parse(&config, uct_rc_share_iface_config_table,
                               "RC_SHARE_", "UCX_RC_SHARE_GID_INDEX",
                               cases[i].value), UCS_OK);
        assert_int_equal(config.gid_index, cases[i].expected);
        ucs_config_parser_release_opts(&config,
                                       uct_rc_share_iface_config_table);
    }

    /* A value that is neither a number nor "auto" is refused, not guessed */
    assert_int_not_equal(parse(&config, uct_rc_share_iface_config_table,
                               "RC_SHARE_", "UCX_RC_SHARE_GID_INDEX",
                               "first"), UCS_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_documented),
        cmocka_unit_test(test_component_registered),
        cmocka_unit_test(test_md_config_defaults_and_env),
        cmocka_unit_test(test_iface_config_gid_index),
    };

    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
