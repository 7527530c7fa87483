/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Internals of the node group shared by ibshare_node.c (election, joining,
 * leaving), ibshare_node_serve.c (the member's thread: serving, taking over)
 * and ibshare_node_files.c (the per-user directory, the state area of the
 * lock file, listing and sweeping groups).
 *
 * The lock file <group>.lock carries OFD byte-range locks (fcntl
 * F_OFD_SETLK): released by the kernel when the process dies, like flock,
 * but several independent ones on one file, and owned by the open file
 * description, so two joins in one process do not share them. Bytes:
 *
 *   SERVER    exclusive: held by the member that serves joiners
 *   MEMBERS   shared by every attached member; whoever can write-lock it
 *             knows that no member is attached ("no group yet", as opposed
 *             to "server gone, members alive")
 *   JOIN      exclusive, held while a process joins, founds or leaves, so
 *             membership changes one at a time
 *   RECORD0+i exclusive, held by the owner of record i: slice i for
 *             i < num_slices, after that members that got no slice
 *
 * Locks are advisory and independent of the file's contents; the state area
 * at offset 0 is what ibshare_info reads.
 */
#ifndef UCT_IBSHARE_NODE_INT_H_
#define UCT_IBSHARE_NODE_INT_H_

#include "ibshare_node.h"

#include <ucs/datastruct/list.h>
#include <ucs/time/time.h>
#include <limits.h>
#include <pthread.h>
#include <sys/types.h>
#include <sys/un.h>


#define UCT_IBSHARE_LOCK_SERVER    0
#define UCT_IBSHARE_LOCK_MEMBERS   1
#define UCT_IBSHARE_LOCK_JOIN      2
#define UCT_IBSHARE_LOCK_RECORD0   16

#define UCT_IBSHARE_NODE_DIR_PREFIX     "ucx-ibshare-"
#define UCT_IBSHARE_NODE_NAME_LEN       16    /* hex digits of the hash */
#define UCT_IBSHARE_NODE_LOCK_SUFFIX    ".lock"
#define UCT_IBSHARE_NODE_SOCK_SUFFIX    ".sock"

#define UCT_IBSHARE_STATE_MAGIC         0x74736269u  /* "ibst" */
#define UCT_IBSHARE_STATE_VERSION       1
/* Records for members that got no slice (the pool was full) */
#define UCT_IBSHARE_STATE_EXTRA_RECORDS 256
#define UCT_IBSHARE_STATE_MAX_RECORDS \
    (UCT_IBSHARE_DESC_MAX_SLICES + UCT_IBSHARE_STATE_EXTRA_RECORDS)


/* One member, as ibshare_info shows it; pid 0: free. A record that keeps
 * its pid with nobody holding its lock belongs to a member that died; in
 * shared mode its slice is retired (see uct_ibshare_node_pick_slice). */
typedef struct uct_ibshare_node_record {
    uint32_t pid;
    uint32_t mode;          /* uct_ibshare_group_mode_t of the member (a
                               shared group's member whose import failed
                               runs in fallback mode); 0: not yet known */
    uint64_t regs_done;
    uint64_t regs_avoided;
    uint64_t mrs_held;      /* its own, the group's not counted */
} uct_ibshare_node_record_t;


/*
 * The state area at the start of the lock file, mapped MAP_SHARED by every
 * member. Written by the founder (reset), by each member (its own record)
 * and by the server (server_pid). Readers check magic, version and sizes
 * before they believe anything, and take liveness from the locks, never from
 * the pids written here.
 */
typedef struct uct_ibshare_node_state {
    uint32_t magic;         /* written last by the founder */
    uint32_t version;
    uint32_t header_size;   /* sizeof(uct_ibshare_node_state_t) */
    uint32_t record_size;   /* sizeof(uct_ibshare_node_record_t) */
    uint32_t num_records;   /* num_slices + UCT_IBSHARE_STATE_EXTRA_RECORDS */
    uint32_t num_slices;
    uint32_t mode;          /* uct_ibshare_group_mode_t */
    uint32_t founder_pid;
    uint32_t server_pid;    /* 0 while nobody serves */
    uint32_t group_mrs;     /* MRs of the group rather than of a member
                               (shared mode: the pool's), which outlive
                               whoever registered them */
    uint64_t pool_size;
    uint64_t slice_size;
    char     job_key[128];  /* truncated if longer; the hash has it all */
    char     dev_name[UCT_IBSHARE_DESC_DEV_MAX];
    uct_ibshare_node_record_t records[];
} uct_ibshare_node_state_t;


#define UCT_IBSHARE_NODE_TAKEOVER_MS  100  /* a member tries to serve */
#define UCT_IBSHARE_NODE_MAX_CONNS    16   /* connections awaiting JOIN */
#define UCT_IBSHARE_NODE_MAX_PENDING  16   /* slices handed, not yet locked */
#define UCT_IBSHARE_NODE_NO_RECORD    UINT32_MAX
#define UCT_IBSHARE_NODE_FAULT_STATUS 86   /* exit status of a fault */
#define UCT_IBSHARE_NODE_DROP_WARN_SEC 1   /* at most one drop warning */
#define UCT_IBSHARE_NODE_RECLAIM_MS   500 /* the server looks for dead
                                             shared-mode members */


/* A connection accepted by the server, waiting for its JOIN message */
typedef struct {
    int        fd;
    pid_t      pid;
    ucs_time_t deadline;
    int        stalled;     /* UCT_IBSHARE_FAULT_STALL: never answered */
    int        refused;     /* another uid: REFUSE sent, waiting for its
                               message before closing */
} uct_ibshare_node_conn_t;

/* A slice handed to a joiner that has not locked it yet */
typedef struct {
    uint32_t   slice;
    ucs_time_t expiry;      /* 0: unused */
} uct_ibshare_node_pending_t;


/* The node: one member's view of its group (ibshare_node.c joins and
 * leaves, ibshare_node_serve.c serves) */
struct uct_ibshare_node {
    char                       dir_path[PATH_MAX];
    char                       name[UCT_IBSHARE_NODE_NAME_LEN + 1];
    char                       lock_name[UCT_IBSHARE_NODE_NAME_LEN + 8];
    char                       sock_name[UCT_IBSHARE_NODE_NAME_LEN + 8];
    char                       lock_path[PATH_MAX];
    char                       sock_path[PATH_MAX];
    char                       job_key[128];
    uct_ibshare_ident_t        ident;        /* the group we belong to */
    double                     timeout;
    unsigned                   fault;        /* atomic: set_fault() */

    int                        dir_fd;
    int                        lock_fd;
    int                        cmd_fd;       /* our dups, to serve with */
    int                        pool_fd;
    int                        listen_fd;
    int                        stop_pipe[2];
    pthread_t                  thread;
    int                        thread_started;
    int                        serving;      /* the thread's, once started */

    uct_ibshare_desc_t         desc;         /* slice and server_pid set per
                                                hand-off */
    uint32_t                   record;       /* our record (= our slice) */
    uct_ibshare_node_state_t   *state;
    size_t                     state_size;

    uct_ibshare_node_conn_t    conns[UCT_IBSHARE_NODE_MAX_CONNS];
    uct_ibshare_node_pending_t pending[UCT_IBSHARE_NODE_MAX_PENDING];
    char                       last_err[256]; /* why the last try failed */

    /* Connections dropped for room (the server's thread only): a flood
     * logs one warning per UCT_IBSHARE_NODE_DROP_WARN_SEC, then a total */
    unsigned long              conns_dropped;
    unsigned long              conns_dropped_unlogged;
    ucs_time_t                 drop_warn_time;

    /* Dead shared-mode members' objects (the server's thread only) */
    ucs_status_t               (*reclaim)(int cmd_fd, int pool_fd,
                                          const uct_ibshare_desc_t *desc,
                                          uint32_t slice, pid_t pid);
    ucs_time_t                 next_reclaim;
    uint8_t                    reclaim_failed[UCT_IBSHARE_DESC_MAX_SLICES /
                                              8]; /* logged, tried again
                                                     only at takeover */

    ucs_list_link_t            list;         /* in the process's nodes, which
                                                a fork child lets go of */
    int                        forked;       /* we are a fork child of the
                                                member: nothing of the group
                                                is ours */
};


static inline ucs_time_t
uct_ibshare_node_deadline(const struct uct_ibshare_node *node)
{
    return ucs_get_time() + ucs_time_from_sec(node->timeout);
}

/*
 * A fork child inherits every fd, and fork shares the open file description
 * (and with it the OFD locks), so the child handler closes the group's fds
 * of every node (ibshare_node_fork.c). Whoever creates or closes an fd of a
 * node, or maps its state, holds this lock meanwhile, so that a fork in
 * another thread sees every fd recorded in the node. Short sections only:
 * fork() waits for it.
 */
void uct_ibshare_node_fork_lock(void);
void uct_ibshare_node_fork_unlock(void);

/* Once per process, before the first node: the atfork handlers */
ucs_status_t uct_ibshare_node_fork_init(void);

/* A node's fds are closed in a fork child from track until untrack (which
 * needs the fork lock held, as the node's fds close under it too) */
void uct_ibshare_node_fork_track(uct_ibshare_node_t *node);
void uct_ibshare_node_fork_untrack(uct_ibshare_node_t *node);

/* The fault that strikes now (set: take it); misbehaving faults strike once */
unsigned uct_ibshare_node_fault_take(uct_ibshare_node_t *node,
                                     unsigned fault);
void UCS_F_NORETURN uct_ibshare_node_fault_exit(uct_ibshare_node_t *node,
                                                const char *where);

/* The first slice nobody holds or was just handed, or NO_SLICE */
uint32_t uct_ibshare_node_pick_slice(uct_ibshare_node_t *node);

/* With the SERVER byte held: replace a stale socket by ours, listen */
ucs_status_t uct_ibshare_node_take_over(uct_ibshare_node_t *node);

/* Serving ends (we leave, or the serving thread failed): the socket goes,
 * then the SERVER byte, so that another member takes over */
void uct_ibshare_node_stop_serving(uct_ibshare_node_t *node);

/* The member's thread: serves, or waits to take over */
ucs_status_t uct_ibshare_node_thread_start(uct_ibshare_node_t *node);
void uct_ibshare_node_thread_stop(uct_ibshare_node_t *node);


/* Lock helpers: 0 on success, -EAGAIN if another holder conflicts, another
 * negative errno (logged) on failure */
int uct_ibshare_lock_try(int fd, short type, off_t offset);
void uct_ibshare_lock_release(int fd, off_t offset);
/* 1 if another open file description holds a lock on the byte, 0 if not,
 * negative errno on failure */
int uct_ibshare_lock_test(int fd, off_t offset);
/* Polls uct_ibshare_lock_try() until it succeeds or deadline passes */
ucs_status_t uct_ibshare_lock_wait(int fd, short type, off_t offset,
                                   ucs_time_t deadline);

/*
 * How uct_ibshare_lock_wait() sleeps between tries: every millisecond for
 * the first WAIT_SHORT_MS, which most holds take (a hand-off, a leave), then
 * twice as long each time, up to WAIT_MAX_MS. A node's worth of waiters
 * polling every millisecond behind a long hold (the founder registering the
 * pool, the members joining one at a time) took the CPU from the holder:
 * 32 ranks on 2 cores spent twice as long in MPI_Init (doc/scale.md). Backing
 * off from the first try instead made every short hold cost up to 32 ms
 * (UCX's UCT gtest, which opens and closes groups all the time: 93 s to 112 s).
 */
#define UCT_IBSHARE_WAIT_SHORT_MS 50
#define UCT_IBSHARE_WAIT_MAX_MS   32

/*
 * Opens <runtime_dir>/ucx-ibshare-<euid> (creating it 0700 if create is set)
 * and checks that it is a directory of our own, closed to everyone else.
 * path gets its name. With create == 0, a missing directory is
 * UCS_ERR_NO_ELEM and not logged.
 */
ucs_status_t uct_ibshare_node_dir_open(const char *runtime_dir, int create,
                                       char *path, size_t max, int *fd_p);

/* 1 if name is "<16 hex digits><suffix>" */
int uct_ibshare_node_is_group_file(const char *name, const char *suffix);

size_t uct_ibshare_node_state_size(uint32_t num_records);

/* Founder: (re)initialize the state area of the lock file and map it */
ucs_status_t uct_ibshare_node_state_reset(int fd, const char *lock_path,
                                          const uct_ibshare_desc_t *desc,
                                          const char *job_key,
                                          uct_ibshare_node_state_t **state_p,
                                          size_t *size_p);

/* Joiner: map the state area the founder wrote, after checking it */
ucs_status_t uct_ibshare_node_state_map(int fd, const char *lock_path,
                                        uint32_t num_slices,
                                        uct_ibshare_node_state_t **state_p,
                                        size_t *size_p);

/*
 * Removes the files of dead groups in the directory (no member attached, no
 * join in progress), other than the group named keep. Called by a founder:
 * jobs get new keys, so the files of a killed job are never reused.
 */
void uct_ibshare_node_sweep(int dir_fd, const char *dir_path,
                            const char *keep);

#endif
