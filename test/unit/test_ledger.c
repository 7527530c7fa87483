/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The ledger of a shared-mode member's verbs objects (ibshare_ledger.h):
 * what a member writes into its slice, and what a reclaimer does with it.
 * It never acts on a ledger that is not the dead member's.
 * Without a device no destroy command can go out (a memfd is no uverbs
 * file): the reclaimer then keeps every entry. The guest tests
 * (conn_stranger-shared.sh) destroy real objects.
 */
#define _GNU_SOURCE
#include "md/ibshare_ledger.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>


#define SLICE_SIZE (2ul << 20)


typedef struct {
    int    fd;       /* the "pool": two slices */
    void   *address;
    size_t ledger_size;
} pool_t;


static void pool_open(pool_t *pool)
{
    pool->ledger_size = uct_ibshare_ledger_size(SLICE_SIZE);
    assert_true(pool->ledger_size > 0);
    assert_true(pool->ledger_size < SLICE_SIZE);
    pool->fd = memfd_create("test_ledger", MFD_CLOEXEC);
    assert_true(pool->fd >= 0);
    assert_int_equal(ftruncate(pool->fd, 2 * SLICE_SIZE), 0);
    pool->address = mmap(NULL, 2 * SLICE_SIZE, PROT_READ | PROT_WRITE,
                         MAP_SHARED, pool->fd, 0);
    assert_true(pool->address != MAP_FAILED);
}

static void pool_close(pool_t *pool)
{
    munmap(pool->address, 2 * SLICE_SIZE);
    close(pool->fd);
}

/* The words of entry i as a reader of the shared memory sees them: the
 * header is 32 bytes, then (type, handle) pairs */
static const uint32_t *entry_at(void *ledger, unsigned i)
{
    return (const uint32_t*)((char*)ledger + 32) + (2 * i);
}

/* Too small a slice spares no ledger; a big one a bounded one */
static void test_size(void **state)
{
    assert_int_equal(uct_ibshare_ledger_size(64 * 1024), 0);
    assert_true(uct_ibshare_ledger_size(1ul << 30) <= 128 * 1024);
    assert_true(uct_ibshare_ledger_size(1ul << 20) > 0);
}

/* Entries appear after add, vanish on remove, and are reused */
static void test_add_remove(void **state)
{
    uct_ibshare_ledger_t *ledger;
    pool_t pool;

    pool_open(&pool);
    assert_int_equal(uct_ibshare_ledger_open(pool.address, pool.ledger_size,
                                             &ledger), UCS_OK);
    uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_CQ, 7);
    uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_QP, 9);
    assert_int_equal(entry_at(pool.address, 0)[0], UCT_IBSHARE_OBJ_CQ);
    assert_int_equal(entry_at(pool.address, 0)[1], 7);
    assert_int_equal(entry_at(pool.address, 1)[0], UCT_IBSHARE_OBJ_QP);
    assert_int_equal(entry_at(pool.address, 1)[1], 9);

    uct_ibshare_ledger_remove(ledger, UCT_IBSHARE_OBJ_CQ, 7);
    assert_int_equal(entry_at(pool.address, 0)[0], UCT_IBSHARE_OBJ_NONE);
    /* Another type's handle 9 is another object */
    uct_ibshare_ledger_remove(ledger, UCT_IBSHARE_OBJ_CQ, 9);
    assert_int_equal(entry_at(pool.address, 1)[0], UCT_IBSHARE_OBJ_QP);

    uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_MR, 11);
    assert_int_equal(entry_at(pool.address, 0)[0], UCT_IBSHARE_OBJ_MR);
    assert_int_equal(entry_at(pool.address, 0)[1], 11);

    /* NULL: fallback or private mode, nothing recorded, no crash */
    uct_ibshare_ledger_add(NULL, UCT_IBSHARE_OBJ_QP, 1);
    uct_ibshare_ledger_remove(NULL, UCT_IBSHARE_OBJ_QP, 1);

    uct_ibshare_ledger_close(ledger);
    pool_close(&pool);
}

/* A full ledger counts what it could not record, and goes on */
static void test_full(void **state)
{
    uct_ibshare_ledger_reclaimed_t done;
    uct_ibshare_ledger_t *ledger;
    unsigned i, capacity;
    pool_t pool;

    pool_open(&pool);
    assert_int_equal(uct_ibshare_ledger_open(pool.address, 4096, &ledger),
                     UCS_OK);
    capacity = (4096 - 32) / 8;
    for (i = 0; i < capacity + 5; ++i) {
        uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_QP, 100 + i);
    }
    assert_int_equal(entry_at(pool.address, capacity - 1)[1],
                     100 + capacity - 1);
    uct_ibshare_ledger_remove(ledger, UCT_IBSHARE_OBJ_QP, 100);
    uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_QP, 5000);
    assert_int_equal(entry_at(pool.address, 0)[1], 5000);

    assert_int_equal(uct_ibshare_ledger_reclaim(pool.fd, pool.fd, 0, 4096,
                                                getpid(), &done),
                     UCS_ERR_UNSUPPORTED);
    assert_int_equal(done.unrecorded, 5);
    assert_int_equal(done.failed, capacity);
    uct_ibshare_ledger_close(ledger);
    pool_close(&pool);
}

/*
 * The reclaimer acts on the dead member's ledger only; where it cannot
 * send the kernel a destroy command (no uverbs file here) it keeps every
 * entry, and says so
 */
static void test_reclaim(void **state)
{
    uct_ibshare_ledger_reclaimed_t done;
    uct_ibshare_ledger_t *ledger;
    UCS_STRING_BUFFER_ONSTACK(what, 64);
    pool_t pool;

    pool_open(&pool);
    /* Slice 1's ledger, at the start of slice 1 */
    assert_int_equal(uct_ibshare_ledger_open((char*)pool.address + SLICE_SIZE,
                                             pool.ledger_size, &ledger),
                     UCS_OK);
    uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_CQ, 3);
    uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_QP, 4);
    uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_SRQ, 5);

    /* Not its ledger: another pid's */
    assert_int_equal(uct_ibshare_ledger_reclaim(pool.fd, pool.fd, SLICE_SIZE,
                                                pool.ledger_size,
                                                getpid() + 1, &done), UCS_OK);
    assert_int_equal(done.failed, 0);
    /* Slice 0 has none */
    assert_int_equal(uct_ibshare_ledger_reclaim(pool.fd, pool.fd, 0,
                                                pool.ledger_size, getpid(),
                                                &done), UCS_OK);
    assert_int_equal(done.failed, 0);
    /* No ledger in a slice too small for one */
    assert_int_equal(uct_ibshare_ledger_reclaim(pool.fd, pool.fd, SLICE_SIZE,
                                                0, getpid(), &done), UCS_OK);
    assert_int_equal(done.failed, 0);

    /* Its own, and no uverbs file to destroy them on: all three kept */
    assert_int_equal(uct_ibshare_ledger_reclaim(pool.fd, pool.fd, SLICE_SIZE,
                                                pool.ledger_size, getpid(),
                                                &done), UCS_ERR_UNSUPPORTED);
    assert_int_equal(done.failed, 3);
    assert_int_equal(done.first_errno, ENOTTY);
    assert_int_equal(entry_at((char*)pool.address + SLICE_SIZE, 0)[0],
                     UCT_IBSHARE_OBJ_CQ);
    assert_int_equal(entry_at((char*)pool.address + SLICE_SIZE, 1)[0],
                     UCT_IBSHARE_OBJ_QP);
    assert_int_equal(entry_at((char*)pool.address + SLICE_SIZE, 2)[0],
                     UCT_IBSHARE_OBJ_SRQ);
    assert_string_equal(uct_ibshare_ledger_reclaimed_str(&done, &what),
                        "nothing");

    /* A member that left closed its ledger: nothing to do */
    uct_ibshare_ledger_close(ledger);
    assert_int_equal(uct_ibshare_ledger_reclaim(pool.fd, pool.fd, SLICE_SIZE,
                                                pool.ledger_size, getpid(),
                                                &done), UCS_OK);
    assert_int_equal(done.failed, 0);

    done.destroyed[UCT_IBSHARE_OBJ_QP] = 2;
    done.destroyed[UCT_IBSHARE_OBJ_CQ] = 1;
    ucs_string_buffer_reset(&what);
    assert_string_equal(uct_ibshare_ledger_reclaimed_str(&done, &what),
                        "2 QPs, 1 CQ");
    pool_close(&pool);
}

/* A header that lies about its capacity does not make the reclaimer read
 * past the ledger */
static void test_reclaim_bounds(void **state)
{
    uct_ibshare_ledger_reclaimed_t done;
    uct_ibshare_ledger_t *ledger;
    uint32_t *header, *beyond;
    unsigned i;
    pool_t pool;

    pool_open(&pool);
    assert_int_equal(uct_ibshare_ledger_open(pool.address, 4096, &ledger),
                     UCS_OK);
    uct_ibshare_ledger_add(ledger, UCT_IBSHARE_OBJ_QP, 1);
    header    = pool.address;
    header[3] = UINT32_MAX; /* capacity */
    header[4] = UINT32_MAX; /* high */
    /* Entries past the 4096 bytes the reclaimer was told of: not read */
    beyond = (uint32_t*)((char*)pool.address + 4096);
    for (i = 0; i < 4096 / 8; ++i) {
        beyond[2 * i]     = UCT_IBSHARE_OBJ_QP;
        beyond[2 * i + 1] = 1000 + i;
    }
    assert_int_equal(uct_ibshare_ledger_reclaim(pool.fd, pool.fd, 0, 4096,
                                                getpid(), &done),
                     UCS_ERR_UNSUPPORTED);
    assert_int_equal(done.failed, (4096 - 32) / 8);
    assert_int_equal(beyond[0], UCT_IBSHARE_OBJ_QP);
    uct_ibshare_ledger_close(ledger);
    pool_close(&pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_add_remove),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_reclaim),
        cmocka_unit_test(test_reclaim_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
