/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The import's ownership of the cmd_fd it is given: taken whatever happens,
 * closed exactly once. libibverbs fails before the provider (not a char
 * device; no verbs device of that number) and leaves the fd it got open; a
 * provider's import_context closes it on its own failures. Here, without a
 * device, the first kind: nothing may be left open, and a file another
 * thread opens meanwhile must survive.
 */
#define _GNU_SOURCE
#include "md/ibshare_import.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>


static int open_fds(void)
{
    struct dirent *entry;
    int count = 0;
    DIR *dir;

    dir = opendir("/proc/self/fd");
    assert_non_null(dir);
    while ((entry = readdir(dir)) != NULL) {
        count += entry->d_name[0] != '.';
    }
    closedir(dir);
    return count - 1;
}

static void expect_import_fails(int fd)
{
    char reason[UCT_IBSHARE_IMPORT_REASON_MAX] = "";
    struct ibv_context *context = NULL;
    struct ibv_pd *pd               = NULL;
    struct ibv_mr *mr               = NULL;

    assert_int_equal(uct_ibshare_import(fd, 1, 2, 0, &context, &pd, &mr,
                                        reason, sizeof(reason)),
                     UCS_ERR_IO_ERROR);
    assert_null(context);
    assert_null(pd);
    assert_null(mr);
    /* The caller's one warning names the call and the errno */
    assert_non_null(strstr(reason, "ibv_import_device: "));
}

/* /dev/null is a char device, but no verbs device's */
static void test_import_char_device(void **state)
{
    int before = open_fds();
    int fd     = open("/dev/null", O_RDWR | O_CLOEXEC);

    assert_true(fd >= 0);
    expect_import_fails(fd);
    assert_int_equal(open_fds(), before);
    assert_int_equal(fcntl(fd, F_GETFD), -1);
}

/* A pipe is no char device at all */
static void test_import_pipe(void **state)
{
    int before = open_fds();
    int fds[2];

    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    expect_import_fails(fds[0]);
    assert_int_equal(open_fds(), before + 1);
    close(fds[1]);
    assert_int_equal(open_fds(), before);
}

/* The fd numbers freed by one import are taken by the next open: the files
 * opened after a failed import stay open (a second close of a number would
 * close them) */
static void test_import_closes_once(void **state)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int next_a, next_b;

    assert_true(fd >= 0);
    expect_import_fails(fd);
    next_a = open("/dev/null", O_RDONLY | O_CLOEXEC);
    next_b = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true((next_a >= 0) && (next_b >= 0));
    expect_import_fails(open("/dev/zero", O_RDWR | O_CLOEXEC));
    assert_int_not_equal(fcntl(next_a, F_GETFD), -1);
    assert_int_not_equal(fcntl(next_b, F_GETFD), -1);
    close(next_a);
    close(next_b);
}

/*
 * In the guest (test/guest/import_fd.sh): a uverbs fd with no context on it.
 * Debian's rxe provider has no import_context, so libibverbs fails first and
 * leaves the fd open; the import provider's import_context fails its context
 * query and closes the fd itself. Either way nothing stays open, and what is
 * opened next survives.
 */
static void test_import_uverbs_without_context(void **state)
{
    int before, fd, next;

    before = open_fds();
    fd     = open("/dev/infiniband/uverbs0", O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    expect_import_fails(fd);
    assert_int_equal(open_fds(), before);
    next = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(next >= 0);
    expect_import_fails(open("/dev/infiniband/uverbs0", O_RDWR | O_CLOEXEC));
    assert_int_not_equal(fcntl(next, F_GETFD), -1);
    close(next);
    assert_int_equal(open_fds(), before);
    print_message("uverbs fd without a context: refused, closed once\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import_char_device),
        cmocka_unit_test(test_import_pipe),
        cmocka_unit_test(test_import_closes_once),
    };
    const struct CMUnitTest uverbs_tests[] = {
        cmocka_unit_test(test_import_uverbs_without_context),
    };
    int failed;

    failed = cmocka_run_group_tests_name("import", tests, NULL, NULL);
    if (access("/dev/infiniband/uverbs0", R_OK | W_OK) != 0) {
        print_message("no verbs device: the uverbs case runs in the guest "
                      "(test/guest/import_fd.sh)\n");
        return failed;
    }
    return failed | cmocka_run_group_tests_name("import on uverbs0",
                                                uverbs_tests, NULL, NULL);
}
