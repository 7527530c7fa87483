/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node pool's file: what its seals refuse, and what they do not (the
 * trust model in doc/node-sharing.md rests on both), and the checks a
 * member makes before it maps a pool it received.
 */
#define _GNU_SOURCE
#include "node/ibshare_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>
#include <cmocka.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif


#define POOL_SIZE  (16 * UCT_IBSHARE_POOL_ALIGN)


static int pool_create(void)
{
    int fd = -1;

    assert_int_equal(uct_ibshare_pool_create("test_pool", POOL_SIZE, UCS_NO,
                                             &fd), UCS_OK);
    assert_true(fd >= 0);
    return fd;
}

/* Nobody can resize the pool or lift its seals: a member's mapping and the
 * registration always cover real pages of the right file size */
static void test_seals_refuse_resize(void **state)
{
    int fd = pool_create();
    int seals;

    seals = fcntl(fd, F_GET_SEALS);
    assert_int_equal(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
                     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);

    errno = 0;
    assert_int_not_equal(ftruncate(fd, POOL_SIZE / 2), 0);
    assert_int_equal(errno, EPERM);
    errno = 0;
    assert_int_not_equal(ftruncate(fd, POOL_SIZE * 2), 0);
    assert_int_equal(errno, EPERM);
    errno = 0;
    assert_int_not_equal(fallocate(fd, 0, 0, POOL_SIZE * 2), 0);
    assert_int_equal(errno, EPERM);
    errno = 0;
    assert_int_not_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
    assert_int_equal(errno, EPERM);
    close(fd);
}

/*
 * The limit doc/node-sharing.md states: a holder of the fd can still punch
 * a hole, and the pages a mapping sees change under it. If a kernel ever
 * refuses this, the trust model's text must change with it.
 */
static void test_seals_allow_punch(void **state)
{
    size_t page = UCT_IBSHARE_POOL_ALIGN;
    void *address;
    char *pool;
    int fd = pool_create();

    assert_int_equal(uct_ibshare_pool_map(fd, POOL_SIZE, &address), UCS_OK);
    pool = address;
    memset(pool, 0x5a, POOL_SIZE);

    assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                               page, page), 0);
    assert_int_equal(pool[page], 0);          /* a fresh page */
    assert_int_equal(pool[0], 0x5a);          /* its neighbours kept */
    assert_int_equal(pool[2 * page], 0x5a);
    assert_int_equal(madvise(pool + 2 * page, page, MADV_REMOVE), 0);
    assert_int_equal(pool[2 * page], 0);

    /* What would stop it, and why it is not used: no writable mapping can
     * be made afterwards, so no newcomer could map its slice */
    assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
    assert_int_equal(errno, EPERM); /* F_SEAL_SEAL is set: even this */

    uct_ibshare_pool_unmap(address, POOL_SIZE);
    close(fd);
}

/* The same seal on a pool of our own, without F_SEAL_SEAL */
static void test_future_write_refuses_punch(void **state)
{
    size_t page = UCT_IBSHARE_POOL_ALIGN;
    char *pool;
    void *map;
    int fd;

    fd = memfd_create("test_pool_fw", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, POOL_SIZE), 0);
    pool = mmap(NULL, POOL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(pool != MAP_FAILED);
    memset(pool, 0x5a, POOL_SIZE);

    assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0);
    assert_int_not_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE |
                                   FALLOC_FL_KEEP_SIZE, page, page), 0);
    assert_int_not_equal(madvise(pool + page, page, MADV_REMOVE), 0);
    assert_int_equal(pool[page], 0x5a);
    pool[page] = 1;                           /* old mappings still write */

    map = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(map == MAP_FAILED);           /* a newcomer could not */
    assert_int_equal(errno, EPERM);

    munmap(pool, POOL_SIZE);
    close(fd);
}

/* A member refuses a pool it could see shrink, or of another size */
static void test_map_checks(void **state)
{
    void *address;
    int fd;

    fd = memfd_create("test_pool_unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, POOL_SIZE), 0);
    assert_int_equal(uct_ibshare_pool_map(fd, POOL_SIZE, &address),
                     UCS_ERR_INVALID_PARAM);
    close(fd);

    fd = pool_create();
    assert_int_equal(uct_ibshare_pool_map(fd, POOL_SIZE * 2, &address),
                     UCS_ERR_INVALID_PARAM);
    close(fd);
}

/* /proc/meminfo's MemAvailable, as sysinfo's free memory bounds it */
static void test_sys_mem(void **state)
{
    uct_ibshare_sys_mem_t mem;
    struct sysinfo info;

    uct_ibshare_sys_mem_get(&mem);
    assert_int_equal(sysinfo(&info), 0);
    assert_true(mem.available != SIZE_MAX);
    assert_true(mem.available >= (size_t)info.freeram * info.mem_unit / 2);
    assert_true(mem.available <= (size_t)info.totalram * info.mem_unit);
    assert_true(mem.memlock > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seals_refuse_resize),
        cmocka_unit_test(test_seals_allow_punch),
        cmocka_unit_test(test_future_write_refuses_punch),
        cmocka_unit_test(test_map_checks),
        cmocka_unit_test(test_sys_mem),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
