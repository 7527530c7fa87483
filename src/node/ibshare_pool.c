/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node pool file and the allocator of one slice.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, file seals */
#endif

#include "ibshare_pool.h"
#include "compat/ibshare_ucx_compat.h"

#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#define UCT_IBSHARE_POOL_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* CAP_IPC_LOCK of linux/capability.h, without its conflicting types */
#define UCT_IBSHARE_CAP_IPC_LOCK 14


typedef struct uct_ibshare_extent {
    ucs_list_link_t           list;
    size_t                    offset;
    size_t                    length;
    int                       in_use;
} uct_ibshare_extent_t;


static size_t uct_ibshare_meminfo_bytes(const char *meminfo, const char *name)
{
    size_t name_len  = strlen(name);
    const char *line = meminfo;
    unsigned long value;
    char *end;

    while ((line != NULL) && (*line != '\0')) {
        if (!strncmp(line, name, name_len) && (line[name_len] == ':')) {
            value = strtoul(line + name_len + 1, &end, 10);
            /* Counts of huge pages have no unit, sizes are in kB */
            return (strncmp(end, " kB", 3) == 0) ? value * UCS_KBYTE : value;
        }
        line = strchr(line, '\n');
        line = (line == NULL) ? NULL : line + 1;
    }
    return SIZE_MAX;
}

void uct_ibshare_sys_mem_get(uct_ibshare_sys_mem_t *mem)
{
    char meminfo[8192];
    size_t huge_pages, huge_size;
    uint32_t caps;
    struct rlimit limit;

    if (ucs_read_file_str(meminfo, sizeof(meminfo), 1, "/proc/meminfo") < 0) {
        meminfo[0] = '\0';     /* all unknown */
    }
    mem->available = uct_ibshare_meminfo_bytes(meminfo, "MemAvailable");
    huge_pages     = uct_ibshare_meminfo_bytes(meminfo, "HugePages_Free");
    huge_size      = uct_ibshare_meminfo_bytes(meminfo, "Hugepagesize");
    mem->huge_free = ((huge_pages == SIZE_MAX) || (huge_size == SIZE_MAX)) ?
                     0 : huge_pages * huge_size;

    /* The kernel pins past the limit for a holder of CAP_IPC_LOCK */
    if ((ucs_sys_get_proc_cap(&caps) == UCS_OK) &&
        (caps & UCS_BIT(UCT_IBSHARE_CAP_IPC_LOCK))) {
        mem->memlock = SIZE_MAX;
    } else if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) {
        ucs_debug("getrlimit(RLIMIT_MEMLOCK) failed: %m");
        mem->memlock = SIZE_MAX;
    } else {
        mem->memlock = (limit.rlim_cur == RLIM_INFINITY) ? SIZE_MAX :
                       limit.rlim_cur;
    }
}

ucs_status_t uct_ibshare_pool_check_memory(const char *var, size_t size,
                                           const char *what,
                                           ucs_ternary_auto_value_t huge,
                                           int pinned,
                                           const uct_ibshare_sys_mem_t *mem)
{
    char asked[16], avail[16], limit[16];
    size_t room;

    room = mem->available;
    if ((huge != UCS_NO) && (room != SIZE_MAX)) {
        room = ucs_max(room, mem->huge_free);
    }

    ucs_memunits_to_str(size, asked, sizeof(asked));
    if (size > room) {
        ucs_memunits_to_str(room, avail, sizeof(avail));
        ucs_error("%s=%s: %s would take %zu bytes, more than the %zu bytes "
                  "(%s) of MemAvailable%s in /proc/meminfo; accepted: at most "
                  "%s", var, asked, what, size, room, avail,
                  (huge != UCS_NO) ? " or free huge pages" : "", avail);
        return UCS_ERR_NO_MEMORY;
    }

    if (pinned && (size > mem->memlock)) {
        ucs_memunits_to_str(mem->memlock, limit, sizeof(limit));
        ucs_error("%s=%s: %s would pin %zu bytes, more than RLIMIT_MEMLOCK "
                  "(ulimit -l) allows, %zu bytes (%s), without CAP_IPC_LOCK; "
                  "accepted: at most %s, or raise the limit", var, asked,
                  what, size, mem->memlock, limit, limit);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    return UCS_OK;
}

static ucs_status_t uct_ibshare_pool_try_create(const char *name, size_t size,
                                                unsigned flags, int *fd_p)
{
    void *address;
    int fd;

    fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
    if (fd < 0) {
        return UCS_ERR_UNSUPPORTED;
    }

    if (ftruncate(fd, size) != 0) {
        goto err;
    }

    if (flags & MFD_HUGETLB) {
        /* A shared huge page mapping reserves its pages when it is made, so
         * this fails now, not with SIGBUS at the first touch */
        address = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (address == MAP_FAILED) {
            goto err;
        }
        munmap(address, size);
    }

    if (fcntl(fd, F_ADD_SEALS, UCT_IBSHARE_POOL_SEALS) != 0) {
        goto err;
    }

    *fd_p = fd;
    return UCS_OK;

err:
    close(fd);
    return UCS_ERR_NO_MEMORY;
}

ucs_status_t uct_ibshare_pool_create(const char *name, size_t size,
                                     ucs_ternary_auto_value_t huge,
                                     int *fd_p)
{
    ucs_status_t status;

    if (huge != UCS_NO) {
        status = uct_ibshare_pool_try_create(name, size, MFD_HUGETLB, fd_p);
        if (status == UCS_OK) {
            ucs_debug("node pool: %zu bytes in huge pages", size);
            return UCS_OK;
        }
        if (huge == UCS_YES) {
            ucs_error("node pool: cannot get %zu bytes of huge pages "
                      "(UCX_IBSHARE_POOL_HUGE=yes); see HugePages_Free in "
                      "/proc/meminfo", size);
            return status;
        }
    }

    status = uct_ibshare_pool_try_create(name, size, 0, fd_p);
    if (status != UCS_OK) {
        ucs_error("node pool: cannot create a sealed memfd of %zu bytes: %m",
                  size);
    }
    return status;
}

ucs_status_t uct_ibshare_pool_map(int fd, size_t size, void **address_p)
{
    struct stat st;
    void *address;
    int seals;

    seals = fcntl(fd, F_GET_SEALS);
    if ((fstat(fd, &st) != 0) || (seals < 0)) {
        ucs_error("node pool: cannot inspect the pool fd: %m");
        return UCS_ERR_INVALID_PARAM;
    }

    if ((size_t)st.st_size != size) {
        ucs_error("node pool: the pool file has %lld bytes, the descriptor "
                  "says %zu", (long long)st.st_size, size);
        return UCS_ERR_INVALID_PARAM;
    }

    if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
        (F_SEAL_SHRINK | F_SEAL_GROW)) {
        ucs_error("node pool: the pool file is not sealed against resizing "
                  "(seals 0x%x)", seals);
        return UCS_ERR_INVALID_PARAM;
    }

    address = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (address == MAP_FAILED) {
        ucs_error("node pool: mmap(%zu bytes) failed: %m", size);
        return UCS_ERR_NO_MEMORY;
    }

    *address_p = address;
    return UCS_OK;
}

void uct_ibshare_pool_unmap(void *address, size_t size)
{
    if (munmap(address, size) != 0) {
        ucs_warn("node pool: munmap(%p, %zu) failed: %m", address, size);
    }
}

/* ------------------------------------------------------------ slice */

static uct_ibshare_extent_t *
uct_ibshare_extent_new(size_t offset, size_t length, int in_use)
{
    uct_ibshare_extent_t *extent = ucs_malloc(sizeof(*extent),
                                              "ibshare extent");

    if (extent != NULL) {
        extent->offset = offset;
        extent->length = length;
        extent->in_use = in_use;
    }
    return extent;
}

ucs_status_t uct_ibshare_slice_init(uct_ibshare_slice_t *slice, void *address,
                                    size_t size)
{
    uct_ibshare_extent_t *all = uct_ibshare_extent_new(0, size, 0);

    if (all == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    slice->address = address;
    slice->size    = size;
    slice->used    = 0;
    ucs_list_head_init(&slice->extents);
    ucs_list_add_tail(&slice->extents, &all->list);
    return UCS_OK;
}

void uct_ibshare_slice_cleanup(uct_ibshare_slice_t *slice)
{
    uct_ibshare_extent_t *extent, *tmp;

    if (slice->used != 0) {
        ucs_warn("slice %p: %zu bytes still allocated at cleanup",
                 slice->address, slice->used);
    }

    ucs_list_for_each_safe(extent, tmp, &slice->extents, list) {
        ucs_list_del(&extent->list);
        ucs_free(extent);
    }
}

ucs_status_t uct_ibshare_slice_alloc(uct_ibshare_slice_t *slice,
                                     size_t *length_p, void **address_p)
{
    size_t length = ucs_align_up(*length_p, UCT_IBSHARE_POOL_ALIGN);
    uct_ibshare_extent_t *extent, *rest;

    if (length == 0) {
        return UCS_ERR_INVALID_PARAM;
    }

    ucs_list_for_each(extent, &slice->extents, list) {
        if (extent->in_use || (extent->length < length)) {
            continue;
        }

        if (extent->length > length) {
            rest = uct_ibshare_extent_new(extent->offset + length,
                                          extent->length - length, 0);
            if (rest == NULL) {
                return UCS_ERR_NO_MEMORY;
            }
            ucs_list_insert_after(&extent->list, &rest->list);
            extent->length = length;
        }

        extent->in_use = 1;
        slice->used   += length;
        *length_p      = length;
        *address_p     = UCS_PTR_BYTE_OFFSET(slice->address, extent->offset);
        return UCS_OK;
    }

    return UCS_ERR_NO_MEMORY;
}

/* Merge next into extent if both are free */
static void uct_ibshare_extent_merge(uct_ibshare_slice_t *slice,
                                     uct_ibshare_extent_t *extent,
                                     uct_ibshare_extent_t *next)
{
    if (extent->in_use || next->in_use) {
        return;
    }

    extent->length += next->length;
    ucs_list_del(&next->list);
    ucs_free(next);
}

void uct_ibshare_slice_free(uct_ibshare_slice_t *slice, void *address)
{
    size_t offset = UCS_PTR_BYTE_DIFF(slice->address, address);
    uct_ibshare_extent_t *extent;

    ucs_list_for_each(extent, &slice->extents, list) {
        if ((extent->offset != offset) || !extent->in_use) {
            continue;
        }

        extent->in_use = 0;
        slice->used   -= extent->length;
        if (extent->list.next != &slice->extents) {
            uct_ibshare_extent_merge(slice, extent,
                                     ucs_list_next(&extent->list,
                                                   uct_ibshare_extent_t,
                                                   list));
        }
        if (extent->list.prev != &slice->extents) {
            uct_ibshare_extent_merge(slice,
                                     ucs_list_prev(&extent->list,
                                                   uct_ibshare_extent_t,
                                                   list),
                                     extent);
        }
        return;
    }

    ucs_warn("slice %p: free of %p, which it did not allocate",
             slice->address, address);
}
