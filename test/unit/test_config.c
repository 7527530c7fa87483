/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Component registration and configuration tables.
 */
#include "md/ibshare_md.h"
#include "md/ibshare_resources.h"
#include "rc/rc_share.h"

#include <uct/api/uct.h>
#include <ucs/config/parser.h>
#include <ucs/sys/string.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>


/* Every named field documents itself (ucx_info -c -f prints the help) */
static unsigned check_table_help(const ucs_config_field_t *field)
{
    unsigned named = 0;

    for (; field->name != NULL; ++field) {
        if (field->name[0] == '\0') {
            continue; /* an inherited table; UCX documents its own fields */
        }
        if (field->parser.read == ucs_config_sscanf_table) {
            /* ours, under a prefix of its own (UCX_RC_NAME) */
            named += check_table_help(field->parser.arg);
            continue;
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

/* ------------------------------------------------ refused values */

static char logged[4096];

/* Keeps what UCX logs at error level, as UCX's gtest does */
static ucs_log_func_rc_t
log_capture(const char *file, unsigned line, const char *function,
            ucs_log_level_t level,
            const ucs_log_component_config_t *comp_conf, const char *message,
            va_list ap)
{
    size_t used = strlen(logged);

    if (level <= UCS_LOG_LEVEL_ERROR) {
        vsnprintf(logged + used, sizeof(logged) - used, message, ap);
        ucs_strncpy_zero(logged + strlen(logged), "\n",
                         sizeof(logged) - strlen(logged));
    }
    return UCS_LOG_FUNC_RC_STOP;
}

static void assert_logged(const char *what)
{
    if (strstr(logged, what) == NULL) {
        fail_msg("\"%s\" is not in the message \"%s\"", what, logged);
    }
}

/* No memory limit: only the ranges decide */
static const uct_ibshare_sys_mem_t unlimited = {SIZE_MAX, 0, SIZE_MAX};

typedef struct {
    const char *var;      /* after UCX_IBSHARE_ or UCX_RC_SHARE_ */
    const char *value;
    const char *range;    /* a part of the accepted range, as logged */
} bad_value_t;

/* Parse VAR=VALUE (the rest at its defaults), check the table, and expect
 * a refusal that names the variable and its range */
static void check_refused(ucs_config_field_t *table, const char *prefix,
                          const bad_value_t *bad, void *config,
                          ucs_status_t (*check)(const void *config))
{
    char var[64];

    ucs_snprintf_zero(var, sizeof(var), "UCX_%s%s", prefix, bad->var);
    print_message("%s=%.40s\n", var, bad->value);
    assert_int_equal(parse(config, table, prefix, var, bad->value), UCS_OK);

    logged[0] = '\0';
    ucs_log_push_handler(log_capture);
    assert_int_equal(check(config), UCS_ERR_INVALID_PARAM);
    ucs_log_pop_handler();
    print_message("  %s", logged);

    assert_logged(var);
    assert_logged("accepted");
    assert_logged(bad->range);
    ucs_config_parser_release_opts(config, table);
}

static ucs_status_t md_check(const void *config)
{
    return uct_ibshare_md_config_check(config, &unlimited);
}

static ucs_status_t iface_check(const void *config)
{
    return uct_rc_share_iface_config_check(config);
}

static void test_md_config_refused(void **state)
{
    static char long_key[200], long_dir[300];
    const bad_value_t cases[] = {
        {"SLICE_SIZE",   "-11m",   "a multiple of 4096 from 4096"},
        {"SLICE_SIZE",   "0",      "a multiple of 4096 from 4096"},
        {"SLICE_SIZE",   "10000",  "a multiple of 4096 from 4096"},
        {"SLICE_SIZE",   "2t",     "1t"},
        {"SLICE_SIZE",   "inf",    "1t"},
        /* 4097 slices of the default 11m */
        {"POOL_SIZE",    "45067m", "from 1 to 4096 slices"},
        {"POOL_SIZE",    "5m",     "from 1 to 4096 slices"},
        {"POOL_SIZE",    "15m",    "a multiple of UCX_IBSHARE_SLICE_SIZE"},
        {"POOL_SIZE",    "-11m",   "from 1 to 4096 slices"},
        {"POOL_SIZE",    "0",      "from 1 to 4096 slices"},
        {"JOIN_TIMEOUT", "0",      "above 0, at most 3600s"},
        {"JOIN_TIMEOUT", "-1s",    "above 0, at most 3600s"},
        {"JOIN_TIMEOUT", "7200s",  "above 0, at most 3600s"},
        {"JOB_KEY",      long_key, "at most 127"},
        {"RUNTIME_DIR",  "",       "1 to 255"},
        {"RUNTIME_DIR",  long_dir, "1 to 255"},
    };
    uct_ibshare_md_config_t config;
    size_t i;

    memset(long_key, 'k', sizeof(long_key) - 1);
    memset(long_dir, 'd', sizeof(long_dir) - 1);
    long_dir[0] = '/';

    for (i = 0; i < ucs_static_array_size(cases); ++i) {
        memset(&config, 0, sizeof(config));
        check_refused(uct_ibshare_md_config_table, "IBSHARE_", &cases[i],
                      &config, md_check);
    }

    /* The defaults, and the system's own figures, pass */
    assert_int_equal(parse(&config, uct_ibshare_md_config_table, "IBSHARE_",
                           "UCX_IBSHARE_SLICE_SIZE", NULL), UCS_OK);
    assert_int_equal(md_check(&config), UCS_OK);
    ucs_config_parser_release_opts(&config, uct_ibshare_md_config_table);
}

static void test_md_config_memory(void **state)
{
    uct_ibshare_sys_mem_t mem = {3 * UCS_GBYTE, 0, SIZE_MAX};
    uct_ibshare_md_config_t config;

    /* A slice larger than the node's memory: refused at md open, long
     * before it is pinned (it got the process OOM-killed) */
    assert_int_equal(parse(&config, uct_ibshare_md_config_table, "IBSHARE_",
                           "UCX_IBSHARE_SLICE_SIZE", "8g"), UCS_OK);
    logged[0] = '\0';
    ucs_log_push_handler(log_capture);
    assert_int_equal(uct_ibshare_md_config_check(&config, &mem),
                     UCS_ERR_NO_MEMORY);
    ucs_log_pop_handler();
    print_message("  %s", logged);
    assert_logged("UCX_IBSHARE_SLICE_SIZE");
    assert_logged("8589934592");   /* asked */
    assert_logged("3221225472");   /* available */
    assert_logged("MemAvailable");
    assert_logged("at most");

    /* A private rank has no slice: the memory is not asked for */
    config.mode = UCT_IBSHARE_MODE_PRIVATE;
    assert_int_equal(uct_ibshare_md_config_check(&config, &mem), UCS_OK);
    ucs_config_parser_release_opts(&config, uct_ibshare_md_config_table);

    /* Huge pages count when the pool may use them */
    mem.huge_free = 16 * UCS_GBYTE;
    assert_int_equal(uct_ibshare_pool_check_memory("UCX_IBSHARE_POOL_SIZE",
                                                   8 * UCS_GBYTE, "the pool",
                                                   UCS_TRY, 0, &mem), UCS_OK);

    /* Pinned beyond RLIMIT_MEMLOCK: refused with the limit */
    mem.memlock = 64 * UCS_MBYTE;
    logged[0]   = '\0';
    ucs_log_push_handler(log_capture);
    assert_int_equal(uct_ibshare_pool_check_memory("UCX_IBSHARE_POOL_SIZE",
                                                   256 * UCS_MBYTE,
                                                   "the node pool", UCS_NO,
                                                   1, &mem),
                     UCS_ERR_EXCEEDS_LIMIT);
    ucs_log_pop_handler();
    print_message("  %s", logged);
    assert_logged("UCX_IBSHARE_POOL_SIZE");
    assert_logged("268435456");    /* asked */
    assert_logged("67108864");     /* the limit */
    assert_logged("RLIMIT_MEMLOCK");

    /* Not pinned (fallback mode pins slices only): the limit does not
     * apply, nor without a limit (unlimited, or CAP_IPC_LOCK) */
    assert_int_equal(uct_ibshare_pool_check_memory("UCX_IBSHARE_POOL_SIZE",
                                                   256 * UCS_MBYTE, "the pool",
                                                   UCS_NO, 0, &mem), UCS_OK);
    mem.memlock = SIZE_MAX;
    assert_int_equal(uct_ibshare_pool_check_memory("UCX_IBSHARE_POOL_SIZE",
                                                   256 * UCS_MBYTE, "the pool",
                                                   UCS_NO, 1, &mem), UCS_OK);
}

static void test_iface_config_refused(void **state)
{
    static const bad_value_t cases[] = {
        {"GID_INDEX",        "256",   "or 0 to 255"},
        {"SEG_SIZE",         "32",    "64 to 1073741824"},
        {"SEG_SIZE",         "-1",    "64 to 1073741824"},
        {"SEG_SIZE",         "2g",    "64 to 1073741824"},
        {"TX_QUEUE_LEN",     "0",     "1 to 65536"},
        {"TX_QUEUE_LEN",     "-1",    "1 to 65536"},
        {"TX_CQ_LEN",        "0",     "1 to 4194304"},
        {"TX_CQ_MODERATION", "100000", "0 to 65536"},
        {"RX_QUEUE_LEN",     "8",     "16 to 65536"},
        {"RX_QUEUE_LEN",     "1000000", "16 to 65536"},
        {"MAX_INLINE",       "8k",    "0 to 4096"},
        {"TX_MAX_BUFS",      "0",     "-1 for no limit"},
        {"RX_MAX_BUFS",      "-5",    "-1 for no limit"},
        {"TX_BUFS_GROW",     "100000", "0 to 65536"},
        {"TIMEOUT",          "0",     "above 0, at most 8796s"},
        {"TIMEOUT",          "-1s",   "above 0, at most 8796s"},
        {"TIMEOUT",          "10000s", "above 0, at most 8796s"},
        {"RETRY_COUNT",      "7",     "0 to 6"},
        {"RNR_TIMEOUT",      "0",     "at most 0.65536s"},
        {"RNR_TIMEOUT",      "1s",    "at most 0.65536s"},
        {"RNR_RETRY_COUNT",  "8",     "auto, or 0 to 7"},
        {"MAX_RD_ATOMIC",    "0",     "1 to 16"},
        {"MAX_RD_ATOMIC",    "17",    "1 to 16"},
        {"CONN_TIMEOUT",     "0",     "at most 3600s"},
        {"CONN_TIMEOUT",     "7200s", "at most 3600s"},
        {"CONN_RETRY",       "-1s",   "at most 3600s"},
        {"CHECK_TIMEOUT",    "0",     "at most 3600s"},
        {"FC_WND_SIZE",      "0",     "1 to 32767"},
        {"FC_WND_SIZE",      "40000", "1 to 32767"},
        {"FC_HARD_THRESH",   "0.6",   "0 < FC_HARD_THRESH < FC_SOFT_THRESH"},
        {"FC_SOFT_THRESH",   "1.5",   "0 < FC_HARD_THRESH < FC_SOFT_THRESH"},
    };
    uct_rc_share_iface_config_t config;
    size_t i;

    for (i = 0; i < ucs_static_array_size(cases); ++i) {
        memset(&config, 0, sizeof(config));
        check_refused(uct_rc_share_iface_config_table, "RC_SHARE_", &cases[i],
                      &config, iface_check);
    }

    assert_int_equal(parse(&config, uct_rc_share_iface_config_table,
                           "RC_SHARE_", "UCX_RC_SHARE_TIMEOUT", NULL), UCS_OK);
    assert_int_equal(iface_check(&config), UCS_OK);
    ucs_config_parser_release_opts(&config, uct_rc_share_iface_config_table);
}

/* UCX's generic RC names (UCX_RC_TIMEOUT, which UCP's own tests set) apply
 * to rc_share too, below its own UCX_RC_SHARE_ ones */
static void test_iface_config_rc_names(void **state)
{
    uct_rc_share_iface_config_t config;

    setenv("UCX_RC_RETRY_COUNT", "2", 1);
    setenv("UCX_RC_RNR_TIMEOUT", "10ms", 1);
    assert_int_equal(parse(&config, uct_rc_share_iface_config_table,
                           "RC_SHARE_", "UCX_RC_TIMEOUT", "10ms"), UCS_OK);
    assert_true(fabs(config.rc.timeout - 0.01) < 1e-9);
    assert_true(fabs(config.rc.rnr_timeout - 0.01) < 1e-9);
    assert_int_equal(config.rc.retry_count, 2);
    assert_int_equal(iface_check(&config), UCS_OK);
    ucs_config_parser_release_opts(&config, uct_rc_share_iface_config_table);

    /* Our own name wins */
    setenv("UCX_RC_SHARE_RETRY_COUNT", "4", 1);
    assert_int_equal(parse(&config, uct_rc_share_iface_config_table,
                           "RC_SHARE_", "UCX_RC_SHARE_TIMEOUT", "2s"), UCS_OK);
    unsetenv("UCX_RC_SHARE_RETRY_COUNT");
    assert_true(fabs(config.rc.timeout - 2.0) < 1e-9);
    assert_int_equal(config.rc.retry_count, 4);
    ucs_config_parser_release_opts(&config, uct_rc_share_iface_config_table);
    unsetenv("UCX_RC_RNR_TIMEOUT");

    /* A value valid for rc_verbs, not here: the message names the variable
     * the user set */
    assert_int_equal(parse(&config, uct_rc_share_iface_config_table,
                           "RC_SHARE_", "UCX_RC_RETRY_COUNT", "7"), UCS_OK);
    setenv("UCX_RC_RETRY_COUNT", "7", 1);
    logged[0] = '\0';
    ucs_log_push_handler(log_capture);
    assert_int_equal(iface_check(&config), UCS_ERR_INVALID_PARAM);
    ucs_log_pop_handler();
    unsetenv("UCX_RC_RETRY_COUNT");
    print_message("  %s", logged);
    assert_logged("UCX_RC_RETRY_COUNT=7");
    assert_logged("0 to 6");
    ucs_config_parser_release_opts(&config, uct_rc_share_iface_config_table);
}

static const char *launcher_vars[] = {
    "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID",
    "SLURM_STEP_ID", "PMI_FD", "PMI_PORT", "MPI_LOCALNRANKS",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE", NULL
};

/* The job key and the local size as the launcher's environment gives them */
static void job_from(const char *key, uct_ibshare_share_params_t *params,
                     ...)
{
    const char **var, *name;
    va_list ap;

    for (var = launcher_vars; *var != NULL; ++var) {
        unsetenv(*var);
    }
    va_start(ap, params);
    while ((name = va_arg(ap, const char*)) != NULL) {
        setenv(name, va_arg(ap, const char*), 1);
    }
    va_end(ap);
    uct_ibshare_share_params_init(params, UCT_IBSHARE_MODE_AUTO, key, "/tmp",
                                  0, 0, UCS_AUTO, 1.0, 0);
}

static void test_job_key_from_launchers(void **state)
{
    uct_ibshare_share_params_t params;
    char hydra_key[64];

    job_from("", &params, NULL);
    assert_string_equal(params.job_key, ""); /* a group of its own */
    assert_int_equal(params.expected_members, 0);

    job_from("mine", &params, "PMIX_NAMESPACE", "ns", NULL);
    assert_string_equal(params.job_key, "mine");

    job_from("", &params, "PMIX_NAMESPACE", "prterun-x-123@1",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "4", NULL);
    assert_string_equal(params.job_key, "prterun-x-123@1");
    assert_int_equal(params.expected_members, 4);

    job_from("", &params, "SLURM_JOB_ID", "77", "SLURM_STEP_ID", "3", NULL);
    assert_string_equal(params.job_key, "slurm-77.3");

    /* MPICH's hydra (issue 22): the node's hydra_pmi_proxy is the parent */
    snprintf(hydra_key, sizeof(hydra_key), "hydra-%d", (int)getppid());
    job_from("", &params, "PMI_FD", "5", "PMI_RANK", "2", "MPI_LOCALNRANKS",
             "4", NULL);
    assert_string_equal(params.job_key, hydra_key);
    assert_int_equal(params.expected_members, 4);
    job_from("", &params, "PMI_PORT", "host:1234", "MPI_LOCALNRANKS", "2",
             NULL);
    assert_string_equal(params.job_key, hydra_key);
    assert_int_equal(params.expected_members, 2);

    /* PMI_FD alone is any PMI-1 launcher, not hydra; Slurm comes first */
    job_from("", &params, "PMI_FD", "5", NULL);
    assert_string_equal(params.job_key, "");
    job_from("", &params, "SLURM_JOB_ID", "9", "PMI_FD", "5",
             "MPI_LOCALNRANKS", "2", NULL);
    assert_string_equal(params.job_key, "slurm-9.0");
    job_from("", &params, NULL);
}

/* srun --mpi=pmix: the key is PMIx's namespace, one per step; the local
 * size srun's tasks per node (issue 22), the most of any node */
static void test_local_size_from_slurm(void **state)
{
    static const struct {
        const char    *tasks;
        unsigned long expected;
    } cases[] = {
        {"4", 4}, {"2(x3),1", 2}, {"1,3(x2)", 3}, {"5(x1),2,7", 7},
        {"64", 64},
        /* not srun's format: unknown, the default pool */
        {"", 0}, {"x", 0}, {"4,", 0}, {"4(x", 0}, {"4(x0)", 0},
        {"4(x2", 0}, {"4(y2)", 0}, {"-4", 0}, {"4 ", 0}, {"(x2)", 0}
    };
    uct_ibshare_share_params_t params;
    unsigned i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        job_from("", &params, "PMIX_NAMESPACE", "slurm.pmix.12.1",
                 "SLURM_JOB_ID", "12", "SLURM_STEP_ID", "1",
                 "SLURM_STEP_TASKS_PER_NODE", cases[i].tasks, NULL);
        assert_string_equal(params.job_key, "slurm.pmix.12.1");
        if (params.expected_members != cases[i].expected) {
            fail_msg("SLURM_STEP_TASKS_PER_NODE='%s': %lu members, not %lu",
                     cases[i].tasks,
                     (unsigned long)params.expected_members,
                     cases[i].expected);
        }
    }

    /* Open MPI's and hydra's own counts come first */
    job_from("", &params, "SLURM_JOB_ID", "12",
             "SLURM_STEP_TASKS_PER_NODE", "8", "OMPI_COMM_WORLD_LOCAL_SIZE",
             "3", NULL);
    assert_int_equal(params.expected_members, 3);
    job_from("", &params, "SLURM_STEP_TASKS_PER_NODE", "8", "PMI_FD",
             "5", "MPI_LOCALNRANKS", "2", NULL);
    assert_int_equal(params.expected_members, 2);
    job_from("", &params, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_documented),
        cmocka_unit_test(test_component_registered),
        cmocka_unit_test(test_md_config_defaults_and_env),
        cmocka_unit_test(test_iface_config_gid_index),
        cmocka_unit_test(test_md_config_refused),
        cmocka_unit_test(test_md_config_memory),
        cmocka_unit_test(test_iface_config_refused),
        cmocka_unit_test(test_iface_config_rc_names),
        cmocka_unit_test(test_job_key_from_launchers),
        cmocka_unit_test(test_local_size_from_slurm),
    };

    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
