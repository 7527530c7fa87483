/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group: election, joining, founding, leaving. Serving is in
 * ibshare_node_serve.c, files and locks in ibshare_node_files.c; see
 * ibshare_node.h for the interface and ibshare_node_int.h for the locks.
 *
 * Join: under the JOIN lock, ask the socket; if nobody serves and MEMBERS
 * can be write-locked there is no group, so found one; if members are alive
 * but nobody serves, the server died and a member is about to take over:
 * drop the JOIN lock and ask again. Every member runs one thread that tries
 * the SERVER byte every UCT_IBSHARE_NODE_TAKEOVER_MS while someone else
 * holds it, so one survivor always takes over with its own dups of the fds
 * and its copy of the descriptor.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_OFD_SETLK */
#endif

#include "ibshare_node_int.h"
#include "ibshare_sock.h"

#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sock.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>


#define UCT_IBSHARE_NODE_RETRY_MS     10   /* a joiner asks again */


/* The group's name: one group per (job, device, user, boot, net namespace);
 * the boot id keeps a reboot from meeting stale files in a persistent
 * directory, the namespace keeps containers that share /tmp apart */
static void uct_ibshare_node_group_name(uct_ibshare_node_t *node,
                                        const char *dev_name)
{
    uint64_t hash = UCT_IBSHARE_FNV1A_INIT;
    uint64_t boot_hi = 0, boot_lo = 0, value;

    if (ucs_sys_get_boot_id(&boot_hi, &boot_lo) != UCS_OK) {
        ucs_debug("no boot id; the group name goes without it");
    }

    hash  = uct_ibshare_fnv1a(hash, node->job_key,
                                   strlen(node->job_key) + 1);
    hash  = uct_ibshare_fnv1a(hash, dev_name, strlen(dev_name) + 1);
    value = geteuid();
    hash  = uct_ibshare_fnv1a(hash, &value, sizeof(value));
    hash  = uct_ibshare_fnv1a(hash, &boot_hi, sizeof(boot_hi));
    hash  = uct_ibshare_fnv1a(hash, &boot_lo, sizeof(boot_lo));
    value = ucs_sys_get_ns(UCS_SYS_NS_TYPE_NET);
    hash  = uct_ibshare_fnv1a(hash, &value, sizeof(value));

    ucs_snprintf_zero(node->name, sizeof(node->name), "%016llx",
                      (unsigned long long)hash);
}

static ucs_status_t
uct_ibshare_node_init(uct_ibshare_node_t *node,
                      const uct_ibshare_node_params_t *params)
{
    uct_ibshare_node_conn_t *conn;
    ucs_status_t status;

    node->dir_fd       = -1;
    node->lock_fd      = -1;
    node->cmd_fd       = -1;
    node->pool_fd      = -1;
    node->listen_fd    = -1;
    node->stop_pipe[0] = -1;
    node->stop_pipe[1] = -1;
    for (conn = node->conns; conn < node->conns + UCT_IBSHARE_NODE_MAX_CONNS;
         ++conn) {
        conn->fd = -1;
    }
    node->record       = UCT_IBSHARE_NODE_NO_RECORD;
    node->timeout      = params->timeout;
    node->fault        = params->fault;
    node->reclaim      = params->reclaim;

    uct_ibshare_node_fork_track(node);

    if ((params->runtime_dir == NULL) || (params->runtime_dir[0] == '\0') ||
        (params->dev_name == NULL) || (params->dev_name[0] == '\0') ||
        (params->create == NULL) || !(params->timeout > 0)) {
        ucs_error("node group: a runtime directory, a device name, create() "
                  "and a positive timeout are required");
        return UCS_ERR_INVALID_PARAM;
    }

    if ((params->job_key != NULL) && (params->job_key[0] != '\0')) {
        if (strlen(params->job_key) >= sizeof(node->job_key)) {
            ucs_error("node group: job key '%s' is longer than %zu bytes",
                      params->job_key, sizeof(node->job_key) - 1);
            return UCS_ERR_INVALID_PARAM;
        }
        ucs_strncpy_zero(node->job_key, params->job_key,
                         sizeof(node->job_key));
    } else {
        /* No job to share with: a group of this process alone */
        ucs_snprintf_zero(node->job_key, sizeof(node->job_key), "pid-%d",
                          (int)getpid());
    }

    uct_ibshare_node_group_name(node, params->dev_name);
    node->ident.job_hash  = uct_ibshare_job_hash(node->job_key);
    node->ident.port_guid = params->port_guid;
    ucs_strncpy_zero(node->ident.dev_name, params->dev_name,
                     sizeof(node->ident.dev_name));
    ucs_snprintf_zero(node->lock_name, sizeof(node->lock_name), "%s%s",
                      node->name, UCT_IBSHARE_NODE_LOCK_SUFFIX);
    ucs_snprintf_zero(node->sock_name, sizeof(node->sock_name), "%s%s",
                      node->name, UCT_IBSHARE_NODE_SOCK_SUFFIX);

    uct_ibshare_node_fork_lock();
    status = uct_ibshare_node_dir_open(params->runtime_dir, 1,
                                       node->dir_path, sizeof(node->dir_path),
                                       &node->dir_fd);
    uct_ibshare_node_fork_unlock();
    if (status != UCS_OK) {
        return status;
    }

    ucs_snprintf_zero(node->lock_path, sizeof(node->lock_path), "%s/%s",
                      node->dir_path, node->lock_name);
    ucs_snprintf_zero(node->sock_path, sizeof(node->sock_path), "%s/%s",
                      node->dir_path, node->sock_name);
    return UCS_OK;
}

/* Releases everything the node holds; the kernel drops the locks with the
 * lock file's last fd. In a fork child the fds are closed already (-1) and
 * the state unmapped, so nothing of the group is touched. */
static void uct_ibshare_node_destroy(uct_ibshare_node_t *node)
{
    uct_ibshare_node_fork_lock();
    uct_ibshare_node_fork_untrack(node);
    if (node->listen_fd >= 0) {
        ucs_close_fd(&node->listen_fd);
        unlinkat(node->dir_fd, node->sock_name, 0);
    }
    if (node->state != NULL) {
        munmap(node->state, node->state_size);
        node->state = NULL;
    }
    ucs_close_fd(&node->cmd_fd);
    ucs_close_fd(&node->pool_fd);
    ucs_close_fd(&node->lock_fd);
    ucs_close_fd(&node->dir_fd);
    ucs_close_fd(&node->stop_pipe[0]);
    ucs_close_fd(&node->stop_pipe[1]);
    uct_ibshare_node_fork_unlock();
    ucs_free(node);
}

static ucs_status_t uct_ibshare_node_open_lock(uct_ibshare_node_t *node)
{
    struct stat st;

    uct_ibshare_node_fork_lock();
    node->lock_fd = openat(node->dir_fd, node->lock_name,
                           O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    uct_ibshare_node_fork_unlock();
    if (node->lock_fd < 0) {
        ucs_error("cannot open the node group lock file %s: %m",
                  node->lock_path);
        return UCS_ERR_IO_ERROR;
    }

    if (fstat(node->lock_fd, &st) < 0) {
        ucs_error("fstat(%s) failed: %m", node->lock_path);
        goto err;
    }
    if (!S_ISREG(st.st_mode) || (st.st_uid != geteuid())) {
        ucs_error("%s is not a regular file of uid %u; remove it",
                  node->lock_path, (unsigned)geteuid());
        goto err;
    }
    return UCS_OK;

err:
    uct_ibshare_node_fork_lock();
    ucs_close_fd(&node->lock_fd);
    uct_ibshare_node_fork_unlock();
    return UCS_ERR_IO_ERROR;
}

/* After the JOIN lock: is our lock file still the one at its path? The last
 * member unlinks it, and whoever opened it before that must open anew, or
 * two groups would live in two files */
static int uct_ibshare_node_lock_is_current(uct_ibshare_node_t *node)
{
    struct stat st_path, st_fd;

    return (fstatat(node->dir_fd, node->lock_name, &st_path,
                    AT_SYMLINK_NOFOLLOW) == 0) &&
           (fstat(node->lock_fd, &st_fd) == 0) &&
           (st_path.st_dev == st_fd.st_dev) &&
           (st_path.st_ino == st_fd.st_ino);
}

static void uct_ibshare_node_record_set(uct_ibshare_node_t *node,
                                        uint32_t pid)
{
    uct_ibshare_node_record_t *rec;

    if ((node->state == NULL) || (node->record >= node->state->num_records)) {
        return;
    }
    rec               = &node->state->records[node->record];
    rec->regs_done    = 0;
    rec->regs_avoided = 0;
    rec->mrs_held     = 0;
    __atomic_store_n(&rec->mode, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->pid, pid, __ATOMIC_RELEASE);
}

void uct_ibshare_node_set_mode(uct_ibshare_node_t *node, uint32_t mode)
{
    if ((node == NULL) || (node->state == NULL) ||
        (node->record >= node->state->num_records)) {
        return;
    }
    __atomic_store_n(&node->state->records[node->record].mode, mode,
                     __ATOMIC_RELEASE);
}

void uct_ibshare_node_set_counters(uct_ibshare_node_t *node,
                                   uint64_t regs_done, uint64_t regs_avoided,
                                   uint64_t mrs_held)
{
    uct_ibshare_node_record_t *rec;

    if ((node->state == NULL) || (node->record >= node->state->num_records)) {
        return;
    }
    rec = &node->state->records[node->record];
    __atomic_store_n(&rec->regs_done, regs_done, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->regs_avoided, regs_avoided, __ATOMIC_RELAXED);
    __atomic_store_n(&rec->mrs_held, mrs_held, __ATOMIC_RELAXED);
}

/* Takes a record byte, the member's entry in the state area */
static ucs_status_t uct_ibshare_node_take_record(uct_ibshare_node_t *node,
                                                 uint32_t slice)
{
    uint32_t i, num_records;
    int ret;

    if (slice != UCT_IBSHARE_DESC_NO_SLICE) {
        ret = uct_ibshare_lock_try(node->lock_fd, F_WRLCK,
                                   UCT_IBSHARE_LOCK_RECORD0 + slice);
        if (ret == -EAGAIN) {
            ucs_error("%s: we were handed slice %u, which another member "
                      "holds", node->lock_path, slice);
            return UCS_ERR_ALREADY_EXISTS;
        } else if (ret < 0) {
            return UCS_ERR_IO_ERROR;
        }
        node->record = slice;
        return UCS_OK;
    }

    /* No slice: a record past the slices, so ibshare_info still counts us;
     * the JOIN lock keeps other joiners from racing for it */
    num_records = node->desc.num_slices + UCT_IBSHARE_STATE_EXTRA_RECORDS;
    for (i = node->desc.num_slices; i < num_records; ++i) {
        if (uct_ibshare_lock_try(node->lock_fd, F_WRLCK,
                                 UCT_IBSHARE_LOCK_RECORD0 + i) == 0) {
            node->record = i;
            return UCS_OK;
        }
    }
    ucs_debug("%s: no record left; ibshare_info will not count us",
              node->lock_path);
    return UCS_OK;
}

static int uct_ibshare_node_dup(int fd)
{
    return (fd < 0) ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

/* The node's own dups of the group's fds, to serve joiners with */
static ucs_status_t uct_ibshare_node_dup_fds(uct_ibshare_node_t *node,
                                             int cmd_fd, int pool_fd)
{
    uct_ibshare_node_fork_lock();
    node->cmd_fd  = uct_ibshare_node_dup(cmd_fd);
    node->pool_fd = uct_ibshare_node_dup(pool_fd);
    uct_ibshare_node_fork_unlock();
    if ((node->pool_fd < 0) || ((cmd_fd >= 0) && (node->cmd_fd < 0))) {
        ucs_error("dup() of the group's fds (cmd fd %d, pool fd %d) failed: "
                  "%m", cmd_fd, pool_fd);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

/* With JOIN and MEMBERS write-locked: there is no group, make one */
static ucs_status_t
uct_ibshare_node_found(uct_ibshare_node_t *node,
                       const uct_ibshare_node_params_t *params,
                       uct_ibshare_node_member_t *member)
{
    int cmd_fd = -1, pool_fd = -1;
    uct_ibshare_desc_t desc;
    ucs_status_t status;
    char err[256];

    if (uct_ibshare_lock_try(node->lock_fd, F_WRLCK,
                             UCT_IBSHARE_LOCK_SERVER) != 0) {
        /* Nobody attached, yet the byte is held: a member on its way out;
         * ask again */
        uct_ibshare_lock_release(node->lock_fd, UCT_IBSHARE_LOCK_MEMBERS);
        ucs_snprintf_zero(node->last_err, sizeof(node->last_err),
                          "a leaving member still holds the server lock");
        return UCS_INPROGRESS;
    }

    ucs_debug("%s: founding the node group of job '%s' on %s",
              node->lock_path, node->job_key, params->dev_name);

    memset(&desc, 0, sizeof(desc));
    status          = params->create(params->arg, &desc, &cmd_fd, &pool_fd);
    member->founder = 1;
    if (uct_ibshare_node_fault_take(node, UCT_IBSHARE_FAULT_CREATE_EXIT)) {
        uct_ibshare_node_fault_exit(node, "inside create()");
    }
    if (status != UCS_OK) {
        ucs_debug("%s: create() failed: %s", node->lock_path,
                  ucs_status_string(status));
        return status;
    }

    desc.slice      = 0;
    desc.server_pid = getpid();
    desc.job_hash   = node->ident.job_hash;
    if ((pool_fd < 0) || ((cmd_fd >= 0) != (desc.has_cmd_fd == 1))) {
        ucs_error("%s: create() returned pool fd %d, cmd fd %d and "
                  "has_cmd_fd %u, which do not fit", node->lock_path, pool_fd,
                  cmd_fd, desc.has_cmd_fd);
        return UCS_ERR_INVALID_PARAM;
    }
    if (uct_ibshare_desc_check(&desc, err, sizeof(err)) != UCS_OK) {
        ucs_error("%s: create() made an invalid descriptor: %s",
                  node->lock_path, err);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((desc.port_guid != node->ident.port_guid) ||
        strcmp(desc.dev_name, node->ident.dev_name)) {
        /* Joiners compare their own with the descriptor's */
        ucs_error("%s: create() made a descriptor of device %s, port GUID "
                  "%016llx; the group is of %s, port GUID %016llx",
                  node->lock_path, desc.dev_name,
                  (unsigned long long)desc.port_guid, node->ident.dev_name,
                  (unsigned long long)node->ident.port_guid);
        return UCS_ERR_INVALID_PARAM;
    }
    node->desc = desc;

    status = uct_ibshare_node_dup_fds(node, cmd_fd, pool_fd);
    if (status != UCS_OK) {
        return status;
    }

    uct_ibshare_node_fork_lock();
    status = uct_ibshare_node_state_reset(node->lock_fd, node->lock_path,
                                          &desc, node->job_key, &node->state,
                                          &node->state_size);
    uct_ibshare_node_fork_unlock();
    if (status != UCS_OK) {
        return status;
    }

    status = uct_ibshare_node_take_record(node,
                                          uct_ibshare_node_pick_slice(node));
    if (status != UCS_OK) {
        return status;
    }
    node->desc.slice = node->record;
    uct_ibshare_node_record_set(node, getpid());

    /* The files of this group's predecessor, if it died, and of other dead
     * groups; then our socket */
    uct_ibshare_node_sweep(node->dir_fd, node->dir_path, node->name);
    status = uct_ibshare_node_take_over(node);
    if (status != UCS_OK) {
        return status;
    }

    /* Downgrade in place: OFD locks convert atomically, so no newcomer sees
     * the byte free in between */
    if (uct_ibshare_lock_try(node->lock_fd, F_RDLCK,
                             UCT_IBSHARE_LOCK_MEMBERS) != 0) {
        return UCS_ERR_IO_ERROR;
    }

    member->desc    = node->desc;
    member->cmd_fd  = -1;
    member->pool_fd = -1;
    return UCS_OK;
}

/* A server answered with a descriptor: become a member */
static ucs_status_t uct_ibshare_node_attach(uct_ibshare_node_t *node,
                                            const uct_ibshare_desc_t *desc,
                                            int *fds, ucs_time_t deadline,
                                            uct_ibshare_node_member_t *member)
{
    int cmd_fd  = desc->has_cmd_fd ? fds[0] : -1;
    int pool_fd = desc->has_cmd_fd ? fds[1] : fds[0];
    ucs_status_t status;

    node->desc = *desc;

    /* Nobody else takes MEMBERS exclusively while we hold the JOIN lock */
    status = uct_ibshare_lock_wait(node->lock_fd, F_RDLCK,
                                   UCT_IBSHARE_LOCK_MEMBERS, deadline);
    if (status != UCS_OK) {
        ucs_error("%s: cannot take the members lock: %s", node->lock_path,
                  ucs_status_string(status));
        return status;
    }

    status = uct_ibshare_node_take_record(node, desc->slice);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_ibshare_node_dup_fds(node, cmd_fd, pool_fd);
    if (status != UCS_OK) {
        return status;
    }

    /* The state is for ibshare_info and for retiring the slices of killed
     * shared-mode members: without it we still work, but should we serve,
     * we hand out no slice, since we cannot tell a free one from a retired
     * one (uct_ibshare_node_pick_slice) */
    uct_ibshare_node_fork_lock();
    if (uct_ibshare_node_fault_take(node, UCT_IBSHARE_FAULT_NO_STATE) ||
        (uct_ibshare_node_state_map(node->lock_fd, node->lock_path,
                                    desc->num_slices, &node->state,
                                    &node->state_size) != UCS_OK)) {
        node->state = NULL;
    }
    uct_ibshare_node_fork_unlock();
    uct_ibshare_node_record_set(node, getpid());

    member->desc    = *desc;
    member->cmd_fd  = cmd_fd;
    member->pool_fd = pool_fd;
    return UCS_OK;
}

/* The socket at our group's path leads to another group's server (a symlink,
 * a bind mount, a file put there): never take what it offers */
static ucs_status_t
uct_ibshare_node_wrong_group(uct_ibshare_node_t *node, uint32_t reason,
                             const uct_ibshare_ident_t *theirs,
                             const char *what)
{
    ucs_error("socket %s is served by job hash %016llx, device %s, port GUID"
              " %016llx (%s: %s); we are job '%s' (hash %016llx), device %s, "
              "port GUID %016llx. Remove the socket (is it a symlink or a "
              "bind mount?) or give this job its own UCX_IBSHARE_RUNTIME_DIR",
              node->sock_path, (unsigned long long)theirs->job_hash,
              theirs->dev_name, (unsigned long long)theirs->port_guid,
              uct_ibshare_refuse_reason_str(reason), what, node->job_key,
              (unsigned long long)node->ident.job_hash, node->ident.dev_name,
              (unsigned long long)node->ident.port_guid);
    return UCS_ERR_REJECTED;
}

/* One attempt, with the JOIN lock held. UCS_INPROGRESS: try again */
static ucs_status_t
uct_ibshare_node_join_locked(uct_ibshare_node_t *node,
                             const uct_ibshare_node_params_t *params,
                             ucs_time_t deadline,
                             uct_ibshare_node_member_t *member)
{
    int fds[UCT_IBSHARE_SOCK_MAX_FDS];
    uct_ibshare_ident_t ident;
    uct_ibshare_msg_t reply;
    ucs_status_t status;
    uint32_t reason;
    int ret;

    status = uct_ibshare_sock_request(node->dir_fd, node->sock_name,
                                      node->sock_path, &node->ident,
                                      deadline, &reply, fds, node->last_err,
                                      sizeof(node->last_err));
    switch (status) {
    case UCS_OK:
        break;
    case UCS_ERR_NO_ELEM:
        ret = uct_ibshare_lock_try(node->lock_fd, F_WRLCK,
                                   UCT_IBSHARE_LOCK_MEMBERS);
        if (ret == 0) {
            return uct_ibshare_node_found(node, params, member);
        } else if (ret != -EAGAIN) {
            return UCS_ERR_IO_ERROR;
        }
        /* Never a second group: a member is about to take over */
        ucs_snprintf_zero(node->last_err, sizeof(node->last_err),
                          "the server is gone and no member has taken over");
        return UCS_INPROGRESS;
    case UCS_ERR_CONNECTION_RESET:
        ucs_debug("%s: %s; asking again", node->lock_path, node->last_err);
        return UCS_INPROGRESS;
    default:
        return status;
    }

    if (reply.type == UCT_IBSHARE_MSG_REFUSE) {
        if (reply.refuse_reason == UCT_IBSHARE_REFUSE_BUSY) {
            ucs_snprintf_zero(node->last_err, sizeof(node->last_err),
                              "the server was busy");
            return UCS_INPROGRESS;
        }
        if (reply.refuse_reason >= UCT_IBSHARE_REFUSE_JOB) {
            return uct_ibshare_node_wrong_group(node, reply.refuse_reason,
                                                &reply.refuse_ident,
                                                "the server refused us");
        }
        ucs_error("%s: the server refused us (reason %u: %s)",
                  node->sock_path, reply.refuse_reason,
                  uct_ibshare_refuse_reason_str(reply.refuse_reason));
        return UCS_ERR_REJECTED;
    }

    /* Also against a server of the old format or one that lies: nothing of
     * another group's may be attached */
    uct_ibshare_desc_ident(&reply.desc, &ident);
    reason = uct_ibshare_ident_compare(&ident, &node->ident);
    if (reason != 0) {
        uct_ibshare_sock_close_fds(fds, UCT_IBSHARE_SOCK_MAX_FDS);
        return uct_ibshare_node_wrong_group(node, reason, &ident,
                                            "its descriptor says so");
    }

    status = uct_ibshare_node_attach(node, &reply.desc, fds, deadline,
                                     member);
    if (status != UCS_OK) {
        uct_ibshare_sock_close_fds(fds, UCT_IBSHARE_SOCK_MAX_FDS);
    }
    return status;
}

ucs_status_t uct_ibshare_node_join(const uct_ibshare_node_params_t *params,
                                   uct_ibshare_node_t **node_p,
                                   uct_ibshare_node_member_t *member)
{
    uct_ibshare_node_t *node;
    ucs_time_t deadline;
    ucs_status_t status;

    member->founder = 0;
    member->cmd_fd  = -1;
    member->pool_fd = -1;

    status = uct_ibshare_node_fork_init();
    if (status != UCS_OK) {
        return status;
    }

    node = ucs_calloc(1, sizeof(*node), "ibshare node");
    if (node == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_ibshare_node_init(node, params);
    if (status != UCS_OK) {
        goto err;
    }

    deadline = uct_ibshare_node_deadline(node);
    for (;;) {
        status = uct_ibshare_node_open_lock(node);
        if (status != UCS_OK) {
            goto err;
        }

        status = uct_ibshare_lock_wait(node->lock_fd, F_WRLCK,
                                       UCT_IBSHARE_LOCK_JOIN, deadline);
        if (status == UCS_ERR_TIMED_OUT) {
            ucs_error("%s: the join lock stayed taken for %.1f s",
                      node->lock_path, node->timeout);
            goto err;
        } else if (status != UCS_OK) {
            goto err;
        }

        if (uct_ibshare_node_lock_is_current(node)) {
            status = uct_ibshare_node_join_locked(node, params, deadline,
                                                  member);
            if (status != UCS_INPROGRESS) {
                break;
            }
        }

        /* Closing drops every lock of this description, the JOIN lock too,
         * so members may leave and take over meanwhile */
        uct_ibshare_node_fork_lock();
        ucs_close_fd(&node->lock_fd);
        uct_ibshare_node_fork_unlock();
        if (ucs_get_time() >= deadline) {
            ucs_error("%s: not served within %.1f s: %s", node->sock_path,
                      node->timeout, node->last_err);
            status = UCS_ERR_TIMED_OUT;
            goto err;
        }
        poll(NULL, 0, UCT_IBSHARE_NODE_RETRY_MS);
    }

    if (status != UCS_OK) {
        goto err;
    }

    status = uct_ibshare_node_thread_start(node);
    if (status != UCS_OK) {
        goto err_member;
    }

    uct_ibshare_lock_release(node->lock_fd, UCT_IBSHARE_LOCK_JOIN);
    ucs_debug("%s: joined as %s, slice %u, served by pid %u",
              node->lock_path, member->founder ? "founder" : "member",
              member->desc.slice, member->desc.server_pid);
    *node_p = node;
    return UCS_OK;

err_member:
    ucs_close_fd(&member->cmd_fd);
    ucs_close_fd(&member->pool_fd);
err:
    member->cmd_fd  = -1;
    member->pool_fd = -1;
    uct_ibshare_node_destroy(node);
    return status;
}

int uct_ibshare_node_leave(uct_ibshare_node_t *node)
{
    int have_join, last;

    if (node->forked) {
        /* A fork child of the member: its group fds are closed, its locks
         * and records are the parent's, it has no thread to stop */
        ucs_debug("%s: pid %d is a fork child of a member, not a member; "
                  "leaving the group alone", node->lock_path, (int)getpid());
        uct_ibshare_node_destroy(node);
        return 0;
    }

    /* Membership changes one at a time; a join in progress finishes
     * first, so no hand-off of ours is cut short */
    have_join = uct_ibshare_lock_wait(node->lock_fd, F_WRLCK,
                                      UCT_IBSHARE_LOCK_JOIN,
                                      uct_ibshare_node_deadline(node)) ==
                UCS_OK;
    if (!have_join) {
        ucs_warn("%s: the join lock stayed taken for %.1f s; leaving "
                 "without it", node->lock_path, node->timeout);
    }

    uct_ibshare_node_thread_stop(node);
    uct_ibshare_node_stop_serving(node);

    if (node->record != UCT_IBSHARE_NODE_NO_RECORD) {
        uct_ibshare_node_record_set(node, 0);
        uct_ibshare_lock_release(node->lock_fd,
                                 UCT_IBSHARE_LOCK_RECORD0 + node->record);
    }

    uct_ibshare_lock_release(node->lock_fd, UCT_IBSHARE_LOCK_MEMBERS);
    last = uct_ibshare_lock_try(node->lock_fd, F_WRLCK,
                                UCT_IBSHARE_LOCK_MEMBERS) == 0;

    /* The last one out removes the files; whoever opened the lock file
     * meanwhile sees it unlinked once it has the join lock */
    if (last && have_join) {
        unlinkat(node->dir_fd, node->sock_name, 0);
        unlinkat(node->dir_fd, node->lock_name, 0);
    }

    ucs_debug("%s: left the group%s", node->lock_path,
              last ? " as its last member" : "");
    uct_ibshare_node_destroy(node);
    return last;
}
