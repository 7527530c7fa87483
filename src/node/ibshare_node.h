/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group: the processes of one job that share one device on one
 * node. One of them (the server, at first the founder) hands the group's
 * descriptor and file descriptors to every process that joins.
 *
 * This layer knows nothing of verbs: the founder's create() callback makes
 * the resources, the bootstrap only elects, passes fds and descriptors and
 * keeps count of the members. So it runs and is tested without RDMA.
 *
 * Files, in <runtime_dir>/ucx-ibshare-<uid>/ (0700, owned by the user):
 *   <group>.lock  lock ranges (see ibshare_node.c) and the group's state,
 *                 which ibshare_info reads
 *   <group>.sock  the unix socket of the serving member
 * <group> is a hash of the job key, device, uid, boot id and network
 * namespace.
 */
#ifndef UCT_IBSHARE_NODE_H_
#define UCT_IBSHARE_NODE_H_

#include "ibshare_desc.h"

#include <ucs/type/status.h>
#include <sys/types.h>


/* UCX_IBSHARE_RUNTIME_DIR's default: $XDG_RUNTIME_DIR if usable, else /tmp */
#define UCT_IBSHARE_NODE_RUNTIME_DIR_AUTO  "auto"


/* Test-only fault injection (UCX_IBSHARE_FAULT): where the server dies or
 * misbehaves during a hand-off, or a joiner's import fails */
typedef enum {
    UCT_IBSHARE_FAULT_NONE,
    UCT_IBSHARE_FAULT_CREATE_EXIT,      /* founder exits inside create() */
    UCT_IBSHARE_FAULT_ACCEPT_EXIT,      /* server exits after accept() */
    UCT_IBSHARE_FAULT_JOIN_EXIT,        /* ... after reading the JOIN message */
    UCT_IBSHARE_FAULT_DESC_EXIT,        /* ... after sending the descriptor */
    UCT_IBSHARE_FAULT_STALL,            /* server accepts and never answers */
    UCT_IBSHARE_FAULT_GARBAGE,          /* server answers with garbage */
    UCT_IBSHARE_FAULT_TRUNCATED,        /* server answers half a descriptor */
    UCT_IBSHARE_FAULT_IMPORT_FAIL,      /* a joiner's ibv_import_mr fails */
    UCT_IBSHARE_FAULT_POLL_FAIL,        /* the serving thread's poll() fails */
    UCT_IBSHARE_FAULT_NO_STATE,         /* a joiner cannot map the state */
    UCT_IBSHARE_FAULT_LAST
} uct_ibshare_node_fault_t;

/* Names for the config table (UCS_CONFIG_TYPE_ENUM), NULL-terminated */
extern const char *uct_ibshare_node_fault_names[];


typedef struct uct_ibshare_node_params {
    const char  *runtime_dir;   /* parent of the per-user directory, or
                                   "auto" */
    const char  *job_key;       /* NULL or "": a group of this process alone */
    const char  *dev_name;      /* the device the group shares */
    uint64_t    port_guid;      /* of the port the group uses, as create()
                                   puts it in the descriptor: a server of
                                   another port is not our group */
    double      timeout;        /* seconds; bounds every blocking step */
    unsigned    fault;          /* uct_ibshare_node_fault_t, tests only */

    /*
     * Called in the founding member only, with the group locked: create the
     * shared resources and fill desc (everything but slice and server_pid).
     * *cmd_fd_p (-1 if none: fallback mode) and *pool_fd_p stay the
     * caller's; the node keeps dups of them to serve joiners.
     */
    ucs_status_t (*create)(void *arg, uct_ibshare_desc_t *desc,
                           int *cmd_fd_p, int *pool_fd_p);
    void        *arg;

    /*
     * Called in the serving member, from its thread, for a member pid that
     * died in shared mode holding slice: destroy what it left on the
     * group's shared uverbs file (cmd_fd and pool_fd are the server's dups
     * of the group's files, desc the group's descriptor). UCS_OK: nothing
     * of it is left, and its slice is free again. NULL: the slices of such
     * members stay retired until the group ends.
     */
    ucs_status_t (*reclaim)(int cmd_fd, int pool_fd,
                            const uct_ibshare_desc_t *desc, uint32_t slice,
                            pid_t pid);
} uct_ibshare_node_params_t;


/* What joining gives the caller */
typedef struct uct_ibshare_node_member {
    uct_ibshare_desc_t desc;    /* desc.slice: this member's slice, or
                                   UCT_IBSHARE_DESC_NO_SLICE if none was free */
    int                founder; /* create() ran in this process */
    int                cmd_fd;  /* joiner, shared mode: the caller's own dup
                                   (for ibv_import_device); else -1 */
    int                pool_fd; /* joiner: the caller's own fd; founder: -1
                                   (it has the fd create() returned) */
} uct_ibshare_node_member_t;


typedef struct uct_ibshare_node uct_ibshare_node_t;


/*
 * Join the group of (job, device), founding it if there is none. Exactly one
 * process of a group ever runs create(); if the server dies, a surviving
 * member takes over serving (it holds the same fds and descriptor), and a
 * newcomer waits for it rather than found a second group. Returns an error
 * naming the cause (bad directory, timeout, refused, malformed reply) and
 * leaves nothing behind when it fails. If it fails after create() ran,
 * member->founder is 1: what create() made is the caller's to destroy.
 */
ucs_status_t uct_ibshare_node_join(const uct_ibshare_node_params_t *params,
                                   uct_ibshare_node_t **node_p,
                                   uct_ibshare_node_member_t *member);

/*
 * Leave the group: give back the slice, stop serving. Returns 1 if no other
 * member is attached (the caller then destroys the shared objects), 0 if
 * others remain (the caller must leave them alone).
 */
int uct_ibshare_node_leave(uct_ibshare_node_t *node);

/*
 * Tests only: arm a serving fault (UCT_IBSHARE_FAULT_*) after joining, so
 * that the server misbehaves while other members are attached. Faults that
 * misbehave (stall, garbage, truncated) strike once; the others exit.
 */
void uct_ibshare_node_set_fault(uct_ibshare_node_t *node, unsigned fault);

/*
 * Publish this member's mode (uct_ibshare_group_mode_t: shared, or fallback
 * when it runs its own PD), before it creates any QP. A slice whose holder
 * dies in shared mode is never handed out again: the holder's QPs live on in
 * the group's shared context and may still write into it.
 */
void uct_ibshare_node_set_mode(uct_ibshare_node_t *node, uint32_t mode);

/* The slices retired now (held by shared-mode members that were killed and
 * not yet reclaimed), or -1 when this member cannot read the state */
int uct_ibshare_node_slices_retired(uct_ibshare_node_t *node);

/* Publish this member's registration counters for ibshare_info */
void uct_ibshare_node_set_counters(uct_ibshare_node_t *node,
                                   uint64_t regs_done, uint64_t regs_avoided,
                                   uint64_t mrs_held);


/* A live group as ibshare_info shows it */
typedef struct uct_ibshare_node_group_info {
    char     job_key[128];
    char     dev_name[UCT_IBSHARE_DESC_DEV_MAX];
    uint32_t mode;              /* uct_ibshare_group_mode_t */
    pid_t    server_pid;
    unsigned num_members;
    pid_t    member_pids[UCT_IBSHARE_DESC_MAX_SLICES];
    uint32_t member_modes[UCT_IBSHARE_DESC_MAX_SLICES]; /* 0: unknown */
    uint32_t member_slices[UCT_IBSHARE_DESC_MAX_SLICES]; /* or NO_SLICE */
    uint64_t pool_size;
    uint64_t slice_size;
    unsigned slices_used;
    unsigned slices_retired;    /* held by shared-mode members that died */
    uint64_t mrs_held;          /* MRs of the group and of every member */
    uint32_t group_mrs;         /* the group's own (shared mode: the pool
                                   MR), whoever registered it */
    uint64_t regs_done, regs_avoided;
} uct_ibshare_node_group_info_t;

/*
 * Call cb for every live group of this user in runtime_dir (stale files of
 * dead groups are skipped, not removed). Returns the number of live groups,
 * or a negative errno.
 */
int uct_ibshare_node_list(const char *runtime_dir,
                          void (*cb)(const uct_ibshare_node_group_info_t *info,
                                     void *arg),
                          void *arg);

/*
 * The runtime directory "auto" stands for: $XDG_RUNTIME_DIR if it is an
 * absolute path to a writable directory of our uid, else /tmp. Any other
 * runtime_dir is returned as it is.
 */
const char *uct_ibshare_node_runtime_dir(const char *runtime_dir);

/*
 * Remove the files of every dead group of this user in runtime_dir (a live
 * group's are never touched: the same lock test as the listing, then the
 * last member's protocol), calling cb with the directory's path and each
 * removed file's name. Returns the number of dead groups removed, or a
 * negative errno.
 */
int uct_ibshare_node_clean(const char *runtime_dir,
                           void (*cb)(const char *dir_path, const char *name,
                                      void *arg),
                           void *arg);

#endif
