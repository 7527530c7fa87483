/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The verbs resources of one device in this process: the context, the PD,
 * the node pool and the rank's slice of it, either shared with the node
 * group (imported from the leader, or in fallback mode the rank's own PD
 * with its slice registered) or private to the rank.
 *
 * One set per device and process, whatever the number of mds: Open MPI's pml
 * and osc each open the md, and the process joins the node group once.
 */
#ifndef UCT_IBSHARE_RESOURCES_H_
#define UCT_IBSHARE_RESOURCES_H_

#include "node/ibshare_desc.h"
#include "ibshare_ledger.h"
#include "node/ibshare_node.h"
#include "node/ibshare_pool.h"

#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/config/types.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <unistd.h>


typedef enum {
    UCT_IBSHARE_MODE_AUTO,      /* share; fall back when import fails */
    UCT_IBSHARE_MODE_SHARED,    /* share with import, or fail */
    UCT_IBSHARE_MODE_PRIVATE,   /* never join a node group */
    UCT_IBSHARE_MODE_LAST
} uct_ibshare_mode_t;

extern const char *uct_ibshare_mode_names[];


/* What the md config says about sharing, copied out of it at md open */
typedef struct uct_ibshare_share_params {
    uct_ibshare_mode_t        mode;
    char                      job_key[128];   /* "": a group of our own */
    unsigned                  expected_members; /* 0: unknown */
    char                      runtime_dir[256];
    size_t                    pool_size;      /* UCS_MEMUNITS_AUTO: choose */
    size_t                    slice_size;
    ucs_ternary_auto_value_t  pool_huge;
    double                    join_timeout;
    unsigned                  fault;          /* uct_ibshare_node_fault_t */
} uct_ibshare_share_params_t;


typedef struct uct_ibshare_resources {
    ucs_list_link_t           list;           /* process-wide */
    unsigned                  refcount;
    char                      dev_name[UCT_IBSHARE_DESC_DEV_MAX];
    uint32_t                  mode;           /* 0: private, or
                                                 uct_ibshare_group_mode_t */
    pthread_mutex_t           lock;           /* slice, counters */
    pid_t                     owner_pid;      /* made the verbs objects */

    struct ibv_context        *context;
    struct ibv_pd             *pd;
    uct_ibshare_node_t        *node;          /* NULL: private */

    /* The pool mapping and the keys this rank holds for part of it: the
     * whole pool in shared mode, its slice in fallback mode */
    int                       pool_fd;
    void                      *pool_address;
    size_t                    pool_size;
    uint64_t                  pool_iova;
    uint64_t                  va_offset;      /* pool_address - pool_iova:
                                                 every buffer handed out is
                                                 registered at address -
                                                 va_offset (0: private) */
    struct ibv_mr             *pool_mr;
    unsigned                  pool_mr_founded; /* 1: the shared pool MR,
                                                  registered here (counted
                                                  as the group's) */
    void                      *keys_address;
    size_t                    keys_length;
    uct_ibshare_slice_t       slice;
    int                       has_slice;
    uct_ibshare_ledger_t      *ledger;        /* shared mode: our objects on
                                                 the shared file, for a
                                                 survivor to destroy should
                                                 we be killed; else NULL */
    int                       founder;        /* this process created the
                                                 node group's objects */
    uint32_t                  slice_index;    /* ours, in the node layout */
    uint32_t                  num_slices;
    size_t                    slice_size;
    size_t                    mailbox_offset; /* in every slice */
    void                      *mailbox;       /* shared mode: ours, zeroed
                                                 when the slice was taken;
                                                 else NULL */

    struct {
        uint64_t              regs_done;      /* ibv_reg_mr* calls */
        uint64_t              regs_avoided;   /* mem_reg served by pool keys */
        uint64_t              mrs_held;
        uint64_t              slice_overflows; /* buffers registered apart
                                                  because the slice was
                                                  full */
    } counters;
} uct_ibshare_resources_t;


/* Memory with an lkey, registered at address - res->va_offset: from the
 * slice, or allocated and registered */
typedef struct uct_ibshare_buf {
    void                      *address;
    size_t                    length;
    uint32_t                  lkey;
    struct ibv_mr             *mr;            /* NULL: from the slice */
} uct_ibshare_buf_t;


/* Read the sharing settings out of the environment the md config gives */
void uct_ibshare_share_params_init(uct_ibshare_share_params_t *params,
                                   uct_ibshare_mode_t mode,
                                   const char *job_key,
                                   const char *runtime_dir, size_t pool_size,
                                   size_t slice_size,
                                   ucs_ternary_auto_value_t pool_huge,
                                   double join_timeout, unsigned fault);

/* Get this process's resources of a device, joining the node group at the
 * first call */
ucs_status_t
uct_ibshare_resources_get(const char *dev_name,
                          const uct_ibshare_share_params_t *params,
                          uct_ibshare_resources_t **res_p);

void uct_ibshare_resources_put(uct_ibshare_resources_t *res);

/* Every shared-mode slice starts (after its ledger) with a mailbox of this
 * size, which the md leaves to its users: rc_share's node connections keep
 * the rings of a process there (rc_share_node.h) */
#define UCT_IBSHARE_MAILBOX_SIZE  4096

/* The mailbox of a slice of the node, or NULL (fallback or private mode) */
static inline void *
uct_ibshare_resources_mailbox(const uct_ibshare_resources_t *res,
                              uint32_t slice)
{
    if ((res->mailbox == NULL) || (slice >= res->num_slices)) {
        return NULL;
    }
    return UCS_PTR_BYTE_OFFSET(res->pool_address,
                               (size_t)slice * res->slice_size +
                               res->mailbox_offset);
}

/* Does the rank hold keys for [address, address + length)? */
static inline int
uct_ibshare_resources_covers(const uct_ibshare_resources_t *res,
                             const void *address, size_t length)
{
    return (res->pool_mr != NULL) &&
           ((uintptr_t)address >= (uintptr_t)res->keys_address) &&
           ((uintptr_t)address + length <=
            (uintptr_t)res->keys_address + res->keys_length);
}

/*
 * Whether this process made the verbs objects of res. A fork child inherits
 * the device's file, and a destroy from it destroys the parent's object (the
 * kernel's ioctl interface takes any holder of the file), so a close in the
 * child destroys, posts and writes to the node's shared state nothing. Nor
 * does it enter UCX's async state (handlers, their locks, the epoll set the
 * child shares with the parent), which is not fork-safe: the ifaces leave
 * their handlers registered and the md is left as inherited (its rcache
 * could not be taken down). Open and teardown paths only: getpid() is a
 * system call.
 */
static inline int
uct_ibshare_resources_owned(const uct_ibshare_resources_t *res)
{
    return res->owner_pid == getpid();
}

/*
 * Every verbs object the rank creates on the device (QP, CQ, SRQ, AH, MR),
 * once it exists, and before it is destroyed: in shared mode the ledger
 * records it (see ibshare_ledger.h). The PD and the pool MR are the
 * group's, not the rank's: not these.
 */
static inline void
uct_ibshare_resources_track(const uct_ibshare_resources_t *res,
                            uct_ibshare_obj_type_t type, uint32_t handle)
{
    if ((res->ledger != NULL) && uct_ibshare_resources_owned(res)) {
        uct_ibshare_ledger_add(res->ledger, type, handle);
    }
}

static inline void
uct_ibshare_resources_untrack(const uct_ibshare_resources_t *res,
                              uct_ibshare_obj_type_t type, uint32_t handle)
{
    if ((res->ledger != NULL) && uct_ibshare_resources_owned(res)) {
        uct_ibshare_ledger_remove(res->ledger, type, handle);
    }
}

/* ibv_reg_mr with the counters kept; iova != address for pool memory */
struct ibv_mr *uct_ibshare_resources_reg_mr(uct_ibshare_resources_t *res,
                                            void *address, size_t length,
                                            uint64_t iova);

int uct_ibshare_resources_dereg_mr(uct_ibshare_resources_t *res,
                                   struct ibv_mr *mr);

void uct_ibshare_resources_count_avoided(uct_ibshare_resources_t *res);

ucs_status_t uct_ibshare_resources_buf_alloc(uct_ibshare_resources_t *res,
                                             size_t length, const char *name,
                                             uct_ibshare_buf_t *buf);

void uct_ibshare_resources_buf_free(uct_ibshare_resources_t *res,
                                    uct_ibshare_buf_t *buf);

/*
 * A memory pool whose chunks come from uct_ibshare_resources_buf_alloc;
 * obj_init gets each object's lkey.
 */
typedef void (*uct_ibshare_mpool_obj_init_t)(void *obj, uint32_t lkey);

ucs_status_t uct_ibshare_mpool_init(uct_ibshare_resources_t *res,
                                    ucs_mpool_t *mp, size_t elem_size,
                                    size_t align_offset, size_t alignment,
                                    unsigned elems_per_chunk,
                                    unsigned max_elems,
                                    uct_ibshare_mpool_obj_init_t obj_init,
                                    const char *name);

#endif
