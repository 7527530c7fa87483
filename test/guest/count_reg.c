/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Preloaded before the module in guest tests and benchmarks: counts memory
 * registrations (calls and bytes), device contexts opened (ibv_open_device)
 * and contexts imported (ibv_import_device calls that succeeded: another
 * process's kernel context, counted apart). rdma-core's
 * ibv_reg_mr and ibv_reg_mr_iova are macros that route to one of three
 * exported functions, so all three are counted; a call that rdma-core makes
 * from inside another is counted once.
 *
 * Programs read the counts through dlsym("ibshare_test_registrations") etc.;
 * with IBSHARE_COUNT_DIR set, every process also writes them at exit to
 * $IBSHARE_COUNT_DIR/count.<pid> as "registrations bytes contexts imports".
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#undef ibv_reg_mr
#undef ibv_reg_mr_iova


typedef struct ibv_mr *(*reg_mr_fn_t)(struct ibv_pd*, void*, size_t, int);
typedef struct ibv_mr *(*reg_mr_iova_fn_t)(struct ibv_pd*, void*, size_t,
                                           uint64_t, int);
typedef struct ibv_mr *(*reg_mr_iova2_fn_t)(struct ibv_pd*, void*, size_t,
                                            uint64_t, unsigned);

typedef struct ibv_context *(*open_device_fn_t)(struct ibv_device*);
typedef struct ibv_context *(*import_device_fn_t)(int);

static __thread int depth;
static unsigned long registrations, registered_bytes, contexts, imports;

/* Read by the test programs through dlsym() */
unsigned long ibshare_test_registrations(void);
unsigned long ibshare_test_registered_bytes(void);
unsigned long ibshare_test_contexts(void);
unsigned long ibshare_test_imports(void);

unsigned long ibshare_test_registrations(void)
{
    return __atomic_load_n(&registrations, __ATOMIC_RELAXED);
}

unsigned long ibshare_test_registered_bytes(void)
{
    return __atomic_load_n(&registered_bytes, __ATOMIC_RELAXED);
}

unsigned long ibshare_test_contexts(void)
{
    return __atomic_load_n(&contexts, __ATOMIC_RELAXED);
}

unsigned long ibshare_test_imports(void)
{
    return __atomic_load_n(&imports, __ATOMIC_RELAXED);
}

static void write_counts(void)
{
    const char *dir = getenv("IBSHARE_COUNT_DIR");
    char path[4096];
    FILE *file;

    if (dir == NULL) {
        return;
    }
    snprintf(path, sizeof(path), "%s/count.%d", dir, (int)getpid());
    file = fopen(path, "w");
    if (file != NULL) {
        fprintf(file, "%lu %lu %lu %lu\n", ibshare_test_registrations(),
                ibshare_test_registered_bytes(), ibshare_test_contexts(),
                ibshare_test_imports());
        fclose(file);
    }
}

__attribute__((constructor)) static void count_reg_init(void)
{
    atexit(write_counts);
}

static void *next_symbol(const char *name)
{
    void *sym = dlsym(RTLD_NEXT, name);
    void *verbs;

    if (sym == NULL) {
        /* Where UCX dlopens the module (1.22) instead of it being preloaded,
         * nothing has loaded libibverbs yet: load it, for everyone */
        verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
        sym   = (verbs == NULL) ? NULL : dlsym(verbs, name);
    }
    if (sym == NULL) {
        fprintf(stderr, "count_reg: %s not found: %s\n", name, dlerror());
        abort();
    }
    return sym;
}

static void count_enter(size_t length)
{
    if (depth++ == 0) {
        __atomic_add_fetch(&registrations, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&registered_bytes, length, __ATOMIC_RELAXED);
    }
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    static open_device_fn_t next;

    if (next == NULL) {
        next = (open_device_fn_t)next_symbol("ibv_open_device");
    }
    __atomic_add_fetch(&contexts, 1, __ATOMIC_RELAXED);
    return next(device);
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
    static import_device_fn_t next;
    struct ibv_context *context;

    if (next == NULL) {
        next = (import_device_fn_t)next_symbol("ibv_import_device");
    }
    /* Only what was imported: a probe where the provider cannot import
     * fails, and imports nothing */
    context = next(cmd_fd);
    if (context != NULL) {
        __atomic_add_fetch(&imports, 1, __ATOMIC_RELAXED);
    }
    return context;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
                          int access)
{
    static reg_mr_fn_t next;
    struct ibv_mr *mr;

    if (next == NULL) {
        next = (reg_mr_fn_t)next_symbol("ibv_reg_mr");
    }
    count_enter(length);
    mr = next(pd, addr, length, access);
    --depth;
    return mr;
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
                               uint64_t iova, int access)
{
    static reg_mr_iova_fn_t next;
    struct ibv_mr *mr;

    if (next == NULL) {
        next = (reg_mr_iova_fn_t)next_symbol("ibv_reg_mr_iova");
    }
    count_enter(length);
    mr = next(pd, addr, length, iova, access);
    --depth;
    return mr;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                uint64_t iova, unsigned int access)
{
    static reg_mr_iova2_fn_t next;
    struct ibv_mr *mr;

    if (next == NULL) {
        next = (reg_mr_iova2_fn_t)next_symbol("ibv_reg_mr_iova2");
    }
    count_enter(length);
    mr = next(pd, addr, length, iova, access);
    --depth;
    return mr;
}
