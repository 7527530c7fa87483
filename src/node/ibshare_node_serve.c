/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group's serving side: the thread every member runs, which takes
 * over serving when the SERVER byte comes free, accepts joiners, checks them
 * and hands them the descriptor and the fds (its test-only fault points are
 * in ibshare_node_fault.c). See ibshare_node_int.h for the locks.
 *
 * The server never blocks on one peer: connections wait for their JOIN
 * message in a table polled together, each with a deadline, so a peer that
 * connects and stalls delays nobody.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_OFD_SETLK, accept4, pipe2 */
#endif

#include "ibshare_node_int.h"
#include "ibshare_sock.h"

#include <ucs/debug/log_def.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sock.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


/* 1 if the slice was handed out recently and its joiner has not locked it */
static int uct_ibshare_node_slice_pending(uct_ibshare_node_t *node,
                                          uint32_t slice, ucs_time_t now)
{
    uct_ibshare_node_pending_t *p;

    for (p = node->pending; p < node->pending + UCT_IBSHARE_NODE_MAX_PENDING;
         ++p) {
        if ((p->expiry == 0) || (p->slice != slice)) {
            continue;
        }
        if ((p->expiry <= now) ||
            (uct_ibshare_lock_test(node->lock_fd,
                                   UCT_IBSHARE_LOCK_RECORD0 + slice) == 1)) {
            /* Locked: the lock tells from now on. Expired: the joiner
             * died or gave up before it locked the slice */
            p->expiry = 0;
            continue;
        }
        return 1;
    }
    return 0;
}

static void uct_ibshare_node_slice_handed(uct_ibshare_node_t *node,
                                          uint32_t slice)
{
    uct_ibshare_node_pending_t *p, *victim = node->pending;

    for (p = node->pending; p < node->pending + UCT_IBSHARE_NODE_MAX_PENDING;
         ++p) {
        if (p->expiry < victim->expiry) {
            victim = p;
        }
    }
    victim->slice  = slice;
    victim->expiry = uct_ibshare_node_deadline(node);
}

/*
 * Whether the free slice was last held by a member that died in shared mode.
 * Its QPs, CQs and receive buffers live on in the group's shared context
 * until the group ends, and its peers may still write into its memory
 * through the one pool MR: handing the slice to a newcomer would let them
 * overwrite the newcomer's buffers. A member that leaves clears its pid
 * before it lets go of the lock, so a pid left in an unlocked record is a
 * death.
 */
static int uct_ibshare_node_slice_retired(const uct_ibshare_node_t *node,
                                          uint32_t slice)
{
    const uct_ibshare_node_record_t *rec;

    if ((node->state == NULL) || (slice >= node->state->num_records)) {
        return 1; /* we cannot tell that it is free: it is not ours to give */
    }
    rec = &node->state->records[slice];
    return (__atomic_load_n(&rec->pid, __ATOMIC_ACQUIRE) != 0) &&
           (__atomic_load_n(&rec->mode, __ATOMIC_ACQUIRE) ==
            UCT_IBSHARE_GROUP_SHARED);
}

int uct_ibshare_node_slices_retired(uct_ibshare_node_t *node)
{
    uint32_t slice;
    int count = 0;

    if (node->state == NULL) {
        return -1;
    }
    for (slice = 0; slice < node->desc.num_slices; ++slice) {
        count += (slice != node->record) &&
                 (uct_ibshare_lock_test(node->lock_fd,
                                        UCT_IBSHARE_LOCK_RECORD0 + slice) ==
                  0) &&
                 uct_ibshare_node_slice_retired(node, slice);
    }
    return count;
}

uint32_t uct_ibshare_node_pick_slice(uct_ibshare_node_t *node)
{
    ucs_time_t now = ucs_get_time();
    uint32_t slice;

    for (slice = 0; slice < node->desc.num_slices; ++slice) {
        /* F_OFD_GETLK does not see our own lock */
        if ((slice != node->record) &&
            !uct_ibshare_node_slice_pending(node, slice, now) &&
            (uct_ibshare_lock_test(node->lock_fd,
                                   UCT_IBSHARE_LOCK_RECORD0 + slice) == 0) &&
            !uct_ibshare_node_slice_retired(node, slice)) {
            return slice;
        }
    }
    return UCT_IBSHARE_DESC_NO_SLICE;
}

/*
 * The verbs objects that members killed in shared mode left on the group's
 * shared file: the node's reclaim() destroys them, and their slices become
 * free (slice_retired above no longer holds). A slice whose objects the
 * kernel would not all give back stays retired, and is not tried again by
 * this server.
 */
static void uct_ibshare_node_reclaim_dead(uct_ibshare_node_t *node,
                                          ucs_time_t now)
{
    uct_ibshare_node_record_t *rec;
    ucs_status_t status;
    uint32_t slice;
    pid_t pid;

    if ((node->reclaim == NULL) || (node->state == NULL) ||
        (node->cmd_fd < 0) || (node->pool_fd < 0) ||
        (node->desc.mode != UCT_IBSHARE_GROUP_SHARED) ||
        (now < node->next_reclaim)) {
        return;
    }
    node->next_reclaim = now + ucs_time_from_msec(UCT_IBSHARE_NODE_RECLAIM_MS);

    for (slice = 0; slice < ucs_min(node->desc.num_slices,
                                    node->state->num_records); ++slice) {
        rec = &node->state->records[slice];
        pid = __atomic_load_n(&rec->pid, __ATOMIC_ACQUIRE);
        /* A member that leaves clears its pid before it lets go of its
         * lock: a pid in a record nobody holds is a death */
        if ((slice == node->record) || (pid == 0) ||
            (__atomic_load_n(&rec->mode, __ATOMIC_ACQUIRE) !=
             UCT_IBSHARE_GROUP_SHARED) ||
            (node->reclaim_failed[slice / 8] & UCS_BIT(slice % 8)) ||
            (uct_ibshare_lock_test(node->lock_fd,
                                   UCT_IBSHARE_LOCK_RECORD0 + slice) != 0)) {
            continue;
        }

        status = node->reclaim(node->cmd_fd, node->pool_fd, &node->desc,
                               slice, pid);
        if (status != UCS_OK) {
            node->reclaim_failed[slice / 8] |= UCS_BIT(slice % 8);
            continue;
        }

        rec->regs_done    = 0;
        rec->regs_avoided = 0;
        rec->mrs_held     = 0;
        __atomic_store_n(&rec->mode, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&rec->pid, 0, __ATOMIC_RELEASE);
    }
}

/* Best effort: the peer is dropped right after either way */
static void uct_ibshare_node_refuse(int fd, uint32_t reason,
                                    const uct_ibshare_ident_t *ident)
{
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    size_t length;

    length = uct_ibshare_msg_pack_refuse(buf, sizeof(buf), reason, ident);
    if (length > 0) {
        uct_ibshare_sock_send(fd, buf, length, NULL, 0,
                              ucs_get_time() + ucs_time_from_msec(100));
    }
}

static void uct_ibshare_node_conn_close(uct_ibshare_node_conn_t *conn)
{
    uct_ibshare_node_fork_lock();
    ucs_close_fd(&conn->fd);
    uct_ibshare_node_fork_unlock();
    conn->stalled = 0;
    conn->refused = 0;
}

/*
 * A connection made room for a newer one. A flood of connections from our
 * own uid would otherwise log a line for each: one warning a period, which
 * counts the ones it did not log, and a total when the server stops.
 */
static ucs_time_t uct_ibshare_node_drop_summary_time(uct_ibshare_node_t *node)
{
    return node->drop_warn_time +
           ucs_time_from_sec(UCT_IBSHARE_NODE_DROP_WARN_SEC);
}

/* The flood is over (a period without a warning): what was not logged */
static void uct_ibshare_node_drop_summary(uct_ibshare_node_t *node,
                                          ucs_time_t now)
{
    if ((node->conns_dropped_unlogged == 0) ||
        (now < uct_ibshare_node_drop_summary_time(node))) {
        return;
    }
    ucs_warn("%s: %lu more connections dropped for room in the last %d s "
             "(%lu in all)", node->sock_path, node->conns_dropped_unlogged,
             UCT_IBSHARE_NODE_DROP_WARN_SEC, node->conns_dropped);
    node->drop_warn_time         = now;
    node->conns_dropped_unlogged = 0;
}

static void uct_ibshare_node_conn_dropped(uct_ibshare_node_t *node, pid_t pid)
{
    ucs_time_t now = ucs_get_time();

    ++node->conns_dropped;
    if ((node->drop_warn_time != 0) &&
        (now - node->drop_warn_time <
         ucs_time_from_sec(UCT_IBSHARE_NODE_DROP_WARN_SEC))) {
        ++node->conns_dropped_unlogged;
        return;
    }

    ucs_warn("%s: %d connections wait for their join message; dropping the "
             "oldest, from pid %d (%lu dropped in all, %lu of them not "
             "logged; at most one such warning every %d s)",
             node->sock_path, UCT_IBSHARE_NODE_MAX_CONNS, (int)pid,
             node->conns_dropped, node->conns_dropped_unlogged,
             UCT_IBSHARE_NODE_DROP_WARN_SEC);
    node->drop_warn_time         = now;
    node->conns_dropped_unlogged = 0;
}

static void uct_ibshare_node_accept(uct_ibshare_node_t *node)
{
    uct_ibshare_node_conn_t *conn, *slot;
    pid_t pid;
    uid_t uid;
    int fd;

    for (;;) {
        /* Until the fd is in its slot: a fork child must see it there */
        uct_ibshare_node_fork_lock();
        fd = accept4(node->listen_fd, NULL, NULL,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            uct_ibshare_node_fork_unlock();
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            } else if (errno != EAGAIN) {
                /* EMFILE and the like: wait a little rather than spin on a
                 * listening socket that stays readable */
                ucs_error("%s: accept() failed: %m", node->sock_path);
                poll(&(struct pollfd){ .fd = node->stop_pipe[0],
                                       .events = POLLIN }, 1, 100);
            }
            return;
        }

        if (uct_ibshare_node_fault_take(node, UCT_IBSHARE_FAULT_ACCEPT_EXIT)) {
            uct_ibshare_node_fault_exit(node, "after accept()");
        }

        if (uct_ibshare_sock_peer_cred(fd, &pid, &uid) != UCS_OK) {
            close(fd);
            uct_ibshare_node_fork_unlock();
            continue;
        }
        if (uid != geteuid()) {
            ucs_error("%s: refused a connection from pid %d: it runs as uid "
                      "%u, not as uid %u", node->sock_path, (int)pid,
                      (unsigned)uid, (unsigned)geteuid());
            uct_ibshare_node_refuse(fd, UCT_IBSHARE_REFUSE_UID, NULL);
        }

        /* A free slot, else the one that has waited longest gives way:
         * peers that connect and say nothing must not lock others out */
        slot = NULL;
        for (conn = node->conns;
             conn < node->conns + UCT_IBSHARE_NODE_MAX_CONNS; ++conn) {
            if (conn->fd < 0) {
                slot = conn;
                break;
            } else if ((slot == NULL) || (conn->deadline < slot->deadline)) {
                slot = conn;
            }
        }
        if (slot->fd >= 0) {
            uct_ibshare_node_conn_dropped(node, slot->pid);
            ucs_close_fd(&slot->fd); /* the fork lock is ours already */
        }
        slot->fd       = fd;
        slot->pid      = pid;
        slot->deadline = uct_ibshare_node_deadline(node);
        slot->stalled  = 0;
        slot->refused  = uid != geteuid();
        uct_ibshare_node_fork_unlock();
    }
}

/* Reads the JOIN message of a readable connection and answers it */
static void uct_ibshare_node_handle(uct_ibshare_node_t *node,
                                    uct_ibshare_node_conn_t *conn)
{
    int fds[UCT_IBSHARE_SOCK_MAX_FDS];
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_ident_t ident;
    uct_ibshare_desc_t desc;
    uct_ibshare_msg_t msg;
    uint32_t reason;
    char err[256];
    ucs_status_t status;
    unsigned nfds, i;
    size_t length;

    /* No room for fds: any the peer sends are closed by the kernel */
    status = uct_ibshare_sock_recv(conn->fd, buf, sizeof(buf), &length, NULL,
                                   0, &nfds, ucs_get_time());
    if (conn->refused) {
        /* Its message is read: now closing does not reset the connection,
         * which would drop the REFUSE before the peer reads it */
        if (status != UCS_ERR_TIMED_OUT) {
            uct_ibshare_node_conn_close(conn);
        }
        return;
    }

    switch (status) {
    case UCS_OK:
        break;
    case UCS_ERR_TIMED_OUT:
        return; /* a spurious wake-up; the connection's deadline stands */
    case UCS_ERR_CONNECTION_RESET:
        ucs_debug("%s: pid %d closed the connection before its join "
                  "message", node->sock_path, (int)conn->pid);
        goto out_close;
    case UCS_ERR_MESSAGE_TRUNCATED:
        ucs_error("%s: pid %d sent a message longer than %d bytes; "
                  "dropping it", node->sock_path, (int)conn->pid,
                  UCT_IBSHARE_MSG_MAX);
        goto out_refuse;
    case UCS_ERR_EXCEEDS_LIMIT:
        ucs_error("%s: pid %d sent file descriptors with its join message; "
                  "dropping it", node->sock_path, (int)conn->pid);
        goto out_refuse;
    default:
        goto out_close;
    }

    status = uct_ibshare_msg_unpack(buf, length, &msg, err, sizeof(err));
    if (status != UCS_OK) {
        ucs_error("%s: bad join message from pid %d: %s", node->sock_path,
                  (int)conn->pid, err);
        goto out_refuse;
    }
    if (msg.type != UCT_IBSHARE_MSG_JOIN) {
        ucs_error("%s: pid %d sent a message of type %u instead of join",
                  node->sock_path, (int)conn->pid, msg.type);
        goto out_refuse;
    }

    /* A joiner of another group reached our socket (its path leads here):
     * our fds and slices are not its to have */
    uct_ibshare_desc_ident(&node->desc, &ident);
    reason = uct_ibshare_ident_compare(&msg.join.ident, &ident);
    if (reason != 0) {
        ucs_error("%s: refused pid %d: it wants job hash %016llx, device %s,"
                  " port GUID %016llx; we serve job hash %016llx, device %s, "
                  "port GUID %016llx (%s)", node->sock_path, (int)conn->pid,
                  (unsigned long long)msg.join.ident.job_hash,
                  msg.join.ident.dev_name,
                  (unsigned long long)msg.join.ident.port_guid,
                  (unsigned long long)ident.job_hash, ident.dev_name,
                  (unsigned long long)ident.port_guid,
                  uct_ibshare_refuse_reason_str(reason));
        uct_ibshare_node_refuse(conn->fd, reason, &ident);
        goto out_close;
    }

    if (uct_ibshare_node_fault_take(node, UCT_IBSHARE_FAULT_JOIN_EXIT)) {
        uct_ibshare_node_fault_exit(node, "after reading a join message");
    }
    if (uct_ibshare_node_fault_take(node, UCT_IBSHARE_FAULT_STALL)) {
        ucs_warn("%s: fault injection: never answering pid %d",
                 node->sock_path, (int)conn->pid);
        conn->stalled = 1;
        return;
    }

    desc            = node->desc;
    desc.slice      = uct_ibshare_node_pick_slice(node);
    desc.server_pid = getpid();
    length          = uct_ibshare_msg_pack_desc(buf, sizeof(buf), &desc);
    if (length == 0) {
        ucs_error("%s: the group's descriptor does not encode",
                  node->sock_path);
        goto out_close;
    }

    nfds = 0;
    if (desc.has_cmd_fd) {
        fds[nfds++] = node->cmd_fd;
    }
    fds[nfds++] = node->pool_fd;

    if (uct_ibshare_node_fault_take(node, UCT_IBSHARE_FAULT_GARBAGE)) {
        ucs_warn("%s: fault injection: garbage for pid %d", node->sock_path,
                 (int)conn->pid);
        for (i = 0; i < length; ++i) {
            buf[i] = (uint8_t)(i * 131 + 7);
        }
    } else if (uct_ibshare_node_fault_take(node,
                                           UCT_IBSHARE_FAULT_TRUNCATED)) {
        ucs_warn("%s: fault injection: half a descriptor for pid %d",
                 node->sock_path, (int)conn->pid);
        length /= 2;
    }

    status = uct_ibshare_sock_send(conn->fd, buf, length, fds, nfds,
                                   conn->deadline);
    if (status != UCS_OK) {
        ucs_error("%s: sending the descriptor to pid %d failed: %s",
                  node->sock_path, (int)conn->pid, ucs_status_string(status));
        goto out_close;
    }

    if (desc.slice != UCT_IBSHARE_DESC_NO_SLICE) {
        uct_ibshare_node_slice_handed(node, desc.slice);
    }
    ucs_debug("%s: served pid %d, slice %u", node->sock_path, (int)conn->pid,
              desc.slice);

    if (uct_ibshare_node_fault_take(node, UCT_IBSHARE_FAULT_DESC_EXIT)) {
        uct_ibshare_node_fault_exit(node, "after sending a descriptor");
    }
    goto out_close;

out_refuse:
    uct_ibshare_node_refuse(conn->fd, UCT_IBSHARE_REFUSE_BAD_MSG, NULL);
out_close:
    uct_ibshare_node_conn_close(conn);
}

/* One round of serving; returns 1 when asked to stop, -1 when serving
 * cannot go on (logged) */
static int uct_ibshare_node_serve(uct_ibshare_node_t *node)
{
    struct pollfd pfds[2 + UCT_IBSHARE_NODE_MAX_CONNS];
    uct_ibshare_node_conn_t *index[UCT_IBSHARE_NODE_MAX_CONNS];
    uct_ibshare_node_conn_t *conn;
    int timeout = -1, ms, ret;
    unsigned n = 2, i;
    ucs_time_t now;

    pfds[0].fd     = node->stop_pipe[0];
    pfds[0].events = POLLIN;
    pfds[1].fd     = node->listen_fd;
    pfds[1].events = POLLIN;
    for (conn = node->conns; conn < node->conns + UCT_IBSHARE_NODE_MAX_CONNS;
         ++conn) {
        if (conn->fd < 0) {
            continue;
        }
        ms      = uct_ibshare_sock_ms_left(conn->deadline);
        timeout = (timeout < 0) ? ms : ucs_min(timeout, ms);
        if (!conn->stalled) {
            index[n - 2]     = conn;
            pfds[n].fd       = conn->fd;
            pfds[n++].events = POLLIN;
        }
    }

    if (node->conns_dropped_unlogged > 0) {
        ms      = uct_ibshare_sock_ms_left(
                          uct_ibshare_node_drop_summary_time(node));
        timeout = (timeout < 0) ? ms : ucs_min(timeout, ms);
    }
    if ((node->reclaim != NULL) && (node->cmd_fd >= 0)) {
        timeout = (timeout < 0) ? UCT_IBSHARE_NODE_RECLAIM_MS :
                  ucs_min(timeout, UCT_IBSHARE_NODE_RECLAIM_MS);
    }

    ret = poll(pfds, n, timeout);
    if (uct_ibshare_node_fault_take(node, UCT_IBSHARE_FAULT_POLL_FAIL)) {
        ret   = -1;
        errno = EINVAL;
    }
    if (ret < 0) {
        if ((errno == EINTR) || (errno == EAGAIN)) {
            return 0;
        }
        ucs_error("%s: the serving thread's poll() failed: %m; pid %d stops "
                  "serving the group, another member takes over",
                  node->sock_path, (int)getpid());
        return -1;
    }

    if (pfds[0].revents) {
        return 1;
    }
    for (i = 2; i < n; ++i) {
        if (pfds[i].revents) {
            uct_ibshare_node_handle(node, index[i - 2]);
        }
    }
    if (pfds[1].revents) {
        uct_ibshare_node_accept(node);
    }

    now = ucs_get_time();
    uct_ibshare_node_drop_summary(node, now);
    uct_ibshare_node_reclaim_dead(node, now);
    for (conn = node->conns; conn < node->conns + UCT_IBSHARE_NODE_MAX_CONNS;
         ++conn) {
        if ((conn->fd >= 0) && (conn->deadline <= now)) {
            if (!conn->stalled && !conn->refused) {
                ucs_error("%s: pid %d sent no join message within %.1f s; "
                          "dropping it", node->sock_path, (int)conn->pid,
                          node->timeout);
            }
            uct_ibshare_node_conn_close(conn);
        }
    }
    return 0;
}

/* The thread holds the SERVER byte now: put the socket in place */
ucs_status_t uct_ibshare_node_take_over(uct_ibshare_node_t *node)
{
    ucs_status_t status;

    /* The previous server is dead or has left: its socket, if any, is
     * stale, and no one else serves while we hold the byte */
    if ((unlinkat(node->dir_fd, node->sock_name, 0) < 0) &&
        (errno != ENOENT)) {
        ucs_error("cannot remove the stale socket %s: %m", node->sock_path);
        return UCS_ERR_IO_ERROR;
    }

    uct_ibshare_node_fork_lock();
    status = uct_ibshare_sock_listen(node->dir_fd, node->sock_name,
                                     node->sock_path, &node->listen_fd);
    uct_ibshare_node_fork_unlock();
    if (status != UCS_OK) {
        return status;
    }

    if (node->state != NULL) {
        __atomic_store_n(&node->state->server_pid, getpid(),
                         __ATOMIC_RELAXED);
    }
    node->serving = 1;
    return UCS_OK;
}

void uct_ibshare_node_stop_serving(uct_ibshare_node_t *node)
{
    if (!node->serving) {
        return;
    }
    uct_ibshare_node_fork_lock();
    ucs_close_fd(&node->listen_fd);
    uct_ibshare_node_fork_unlock();
    /* We still hold the SERVER byte: the socket is ours to remove */
    unlinkat(node->dir_fd, node->sock_name, 0);
    if (node->state != NULL) {
        __atomic_store_n(&node->state->server_pid, 0, __ATOMIC_RELAXED);
    }
    uct_ibshare_lock_release(node->lock_fd, UCT_IBSHARE_LOCK_SERVER);
    node->serving = 0;
}

static void uct_ibshare_node_close_conns(uct_ibshare_node_t *node)
{
    uct_ibshare_node_conn_t *conn;

    for (conn = node->conns; conn < node->conns + UCT_IBSHARE_NODE_MAX_CONNS;
         ++conn) {
        uct_ibshare_node_conn_close(conn);
    }
}

/* 1 if stop was asked, after waiting at most ms */
static int uct_ibshare_node_wait_stop(uct_ibshare_node_t *node, int ms)
{
    struct pollfd pfd = { .fd = node->stop_pipe[0], .events = POLLIN };

    return poll(&pfd, 1, ms) > 0;
}

static void *uct_ibshare_node_thread(void *arg)
{
    uct_ibshare_node_t *node = arg;
    int ret;

    for (;;) {
        if (!node->serving) {
            if (uct_ibshare_lock_try(node->lock_fd, F_WRLCK,
                                     UCT_IBSHARE_LOCK_SERVER) == 0) {
                if (uct_ibshare_node_take_over(node) == UCS_OK) {
                    ucs_debug("%s: pid %d took over serving the group",
                              node->sock_path, (int)getpid());
                    continue;
                }
                /* Let another member try; it may fare better. Not too
                 * often: every try that fails logs an error */
                uct_ibshare_lock_release(node->lock_fd,
                                         UCT_IBSHARE_LOCK_SERVER);
                if (uct_ibshare_node_wait_stop(node, 1000)) {
                    break;
                }
            }
            if (uct_ibshare_node_wait_stop(node,
                                           UCT_IBSHARE_NODE_TAKEOVER_MS)) {
                break;
            }
        } else if ((ret = uct_ibshare_node_serve(node)) > 0) {
            break;
        } else if (ret < 0) {
            /* Joiners find no socket and ask again until a member takes
             * over; we try again only after the others had their chance */
            uct_ibshare_node_close_conns(node);
            uct_ibshare_node_stop_serving(node);
            if (uct_ibshare_node_wait_stop(node, 1000)) {
                break;
            }
        }
    }

    uct_ibshare_node_close_conns(node);
    if (node->conns_dropped > 0) {
        ucs_warn("%s: %lu connections were dropped in all while %d waited "
                 "for their join message (%lu since the last warning)",
                 node->sock_path, node->conns_dropped,
                 UCT_IBSHARE_NODE_MAX_CONNS, node->conns_dropped_unlogged);
    }
    return NULL;
}

ucs_status_t uct_ibshare_node_thread_start(uct_ibshare_node_t *node)
{
    sigset_t all, old;
    int ret;

    uct_ibshare_node_fork_lock();
    ret = pipe2(node->stop_pipe, O_CLOEXEC | O_NONBLOCK);
    uct_ibshare_node_fork_unlock();
    if (ret < 0) {
        ucs_error("pipe2() failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    /* Signals are for the application's threads, not ours */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    ret = pthread_create(&node->thread, NULL, uct_ibshare_node_thread, node);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ret != 0) {
        ucs_error("pthread_create() for the node group server failed: %s",
                  strerror(ret));
        return UCS_ERR_NO_RESOURCE;
    }

    node->thread_started = 1;
    return UCS_OK;
}

void uct_ibshare_node_thread_stop(uct_ibshare_node_t *node)
{
    if (!node->thread_started) {
        return;
    }
    if (write(node->stop_pipe[1], "x", 1) != 1) {
        ucs_warn("cannot wake the node group thread: %m");
    }
    pthread_join(node->thread, NULL);
    node->thread_started = 0;
}
