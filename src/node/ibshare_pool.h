/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node pool: one shared memory file (memfd) that every member of a node
 * group maps, cut into equal slices, one per member. In shared mode the
 * whole pool is one MR; in fallback mode each member registers its slice.
 * Either way a slice has the same IOVA on every member (the node layout), so
 * keys and addresses are handled by one code path.
 */
#ifndef UCT_IBSHARE_POOL_H_
#define UCT_IBSHARE_POOL_H_

#include <ucs/datastruct/list.h>
#include <ucs/type/status.h>
#include <ucs/config/types.h>
#include <stddef.h>
#include <stdint.h>


/* The page size the pool and slices are aligned to */
#define UCT_IBSHARE_POOL_ALIGN  4096


/* What the system lets the pool and a slice take, read before either is
 * created or pinned */
typedef struct uct_ibshare_sys_mem {
    size_t                    available;    /* MemAvailable; SIZE_MAX: not
                                               known */
    size_t                    huge_free;    /* free huge pages, in bytes */
    size_t                    memlock;      /* what a process may pin;
                                               SIZE_MAX: no limit */
} uct_ibshare_sys_mem_t;

/* From /proc/meminfo, RLIMIT_MEMLOCK and CAP_IPC_LOCK (which lifts it) */
void uct_ibshare_sys_mem_get(uct_ibshare_sys_mem_t *mem);

/*
 * Refuse size bytes (the value of the variable var, what says for what) when
 * they exceed the available memory (and free huge pages when huge is not
 * UCS_NO), or, when pinned, the memlock limit. The message names var and
 * the figures.
 */
ucs_status_t uct_ibshare_pool_check_memory(const char *var, size_t size,
                                           const char *what,
                                           ucs_ternary_auto_value_t huge,
                                           int pinned,
                                           const uct_ibshare_sys_mem_t *mem);


/*
 * Create the pool file: size bytes, sealed against shrinking and growing, so
 * every mapping and registration covers the whole file. The seals do not
 * stop a holder of the fd from punching holes (pages then differ between
 * the CPU and the registration): that is inside the trust boundary, the
 * uid (doc/node-sharing.md, "Trust model"). huge: try huge pages first
 * (UCS_TRY), require them (UCS_YES) or not (UCS_NO).
 */
ucs_status_t uct_ibshare_pool_create(const char *name, size_t size,
                                     ucs_ternary_auto_value_t huge,
                                     int *fd_p);

/* Map a pool file received from another member, after checking its size
 * and seals (a pool that could shrink is refused) */
ucs_status_t uct_ibshare_pool_map(int fd, size_t size, void **address_p);

void uct_ibshare_pool_unmap(void *address, size_t size);


/*
 * A first-fit allocator over one slice: the rank's bounce buffers, handshake
 * buffers and mem_alloc requests come from here. Not thread safe: the caller
 * holds its lock.
 */
typedef struct uct_ibshare_slice {
    void                      *address;
    size_t                    size;
    size_t                    used;
    ucs_list_link_t           extents;      /* by address, covering it all */
} uct_ibshare_slice_t;

ucs_status_t uct_ibshare_slice_init(uct_ibshare_slice_t *slice, void *address,
                                    size_t size);

void uct_ibshare_slice_cleanup(uct_ibshare_slice_t *slice);

/* length is rounded up to UCT_IBSHARE_POOL_ALIGN; the block is page aligned */
ucs_status_t uct_ibshare_slice_alloc(uct_ibshare_slice_t *slice,
                                     size_t *length_p, void **address_p);

void uct_ibshare_slice_free(uct_ibshare_slice_t *slice, void *address);

#endif
