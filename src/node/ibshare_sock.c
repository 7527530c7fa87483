/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group's unix socket and fd passing. See ibshare_sock.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* struct ucred, MSG_CMSG_CLOEXEC */
#endif

#include "ibshare_sock.h"

#include "compat/ibshare_ucx_compat.h"

#include <ucs/debug/log_def.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sock.h>
#include <ucs/sys/string.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>


/* Control buffer for the fds of one message, aligned as cmsghdr wants */
typedef union {
    struct cmsghdr hdr;
    char           buf[CMSG_SPACE(sizeof(int) * UCT_IBSHARE_SOCK_MAX_FDS)];
} uct_ibshare_sock_control_t;


int uct_ibshare_sock_ms_left(ucs_time_t deadline)
{
    ucs_time_t now = ucs_get_time();
    double ms;

    if (now >= deadline) {
        return 0;
    }

    /* Round up: poll(0) would spin until the deadline has truly passed */
    ms = ucs_time_to_msec(deadline - now) + 1;
    return (ms > 60000.0) ? 60000 : (int)ms;
}

static void UCS_F_PRINTF(3, 4)
uct_ibshare_sock_err(char *err, size_t err_max, const char *fmt, ...)
{
    va_list ap;

    if ((err == NULL) || (err_max == 0)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, err_max, fmt, ap);
    va_end(ap);
}

void uct_ibshare_sock_close_fds(int *fds, unsigned nfds)
{
    unsigned i;

    for (i = 0; i < nfds; ++i) {
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
}

static ucs_status_t uct_ibshare_sock_count_fd(uct_ibshare_dirent_t *entry,
                                              void *arg)
{
    *(int*)arg += entry->d_name[0] != '.';
    return UCS_OK;
}

/* Our open fds, or -1 if they cannot be counted (no fd left to do it) */
static int uct_ibshare_sock_count_fds(void)
{
    int count = 0;

    if (ucs_sys_readdir("/proc/self/fd", uct_ibshare_sock_count_fd,
                        &count) != UCS_OK) {
        return -1;
    }
    return count - 1; /* the directory's own */
}

/* The server's fds did not fit under our RLIMIT_NOFILE: say so, in figures
 * (logged whole: err may be too short for it) */
static void uct_ibshare_sock_fd_limit_err(const char *path, pid_t pid,
                                          char *err, size_t err_max)
{
    struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
    char open_fds[32], msg[512];
    int count;

    count = uct_ibshare_sock_count_fds();
    if (count >= 0) {
        snprintf(open_fds, sizeof(open_fds), "%d", count);
    } else {
        snprintf(open_fds, sizeof(open_fds), "all");
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    snprintf(msg, sizeof(msg), "the file descriptors from server pid %d at "
             "%s could not be received: the kernel found no free fd below our"
             " RLIMIT_NOFILE soft limit of %llu (hard limit %llu; %s fds "
             "open); raise it (ulimit -n) or open fewer files", (int)pid,
             path, (unsigned long long)rl.rlim_cur,
             (unsigned long long)rl.rlim_max, open_fds);
    ucs_error("%s", msg);
    uct_ibshare_sock_err(err, err_max, "%s", msg);
}

/*
 * The address of name in the directory open as dir_fd. Linux has no bindat()
 * or connectat(): the directory's /proc/self/fd link stands for it, so a
 * directory renamed or replaced by a symlink after its checks can never
 * redirect the socket. AT_FDCWD: name is the path itself.
 */
static ucs_status_t uct_ibshare_sock_addr(int dir_fd, const char *name,
                                          const char *path,
                                          struct sockaddr_un *addr)
{
    int len;

    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    if (dir_fd == AT_FDCWD) {
        len = snprintf(addr->sun_path, sizeof(addr->sun_path), "%s", name);
    } else {
        len = snprintf(addr->sun_path, sizeof(addr->sun_path),
                       "/proc/self/fd/%d/%s", dir_fd, name);
    }

    if ((len < 0) || (len >= (int)sizeof(addr->sun_path))) {
        ucs_error("the address of unix socket %s (%s in directory fd %d) "
                  "takes %d bytes, but sun_path holds at most %zu", path,
                  name, dir_fd, len, sizeof(addr->sun_path) - 1);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

ucs_status_t uct_ibshare_sock_listen(int dir_fd, const char *name,
                                     const char *path, int *fd_p)
{
    struct sockaddr_un addr;
    int fd;

    if (uct_ibshare_sock_addr(dir_fd, name, path, &addr) != UCS_OK) {
        return UCS_ERR_INVALID_PARAM;
    }

    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ucs_error("socket(AF_UNIX, SOCK_SEQPACKET) failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) < 0) {
        ucs_error("bind(%s) of %s failed: %m%s", addr.sun_path, path,
                  ((errno == ENOENT) && (dir_fd != AT_FDCWD)) ?
                  " (is /proc mounted?)" : "");
        close(fd);
        return UCS_ERR_IO_ERROR;
    }

    if (listen(fd, SOMAXCONN) < 0) {
        ucs_error("listen(%s) failed: %m", path);
        close(fd);
        unlinkat(dir_fd, name, 0);
        return UCS_ERR_IO_ERROR;
    }

    *fd_p = fd;
    return UCS_OK;
}

ucs_status_t uct_ibshare_sock_peer_cred(int fd, pid_t *pid_p, uid_t *uid_p)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        ucs_error("getsockopt(SO_PEERCRED) failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    *pid_p = cred.pid;
    *uid_p = cred.uid;
    return UCS_OK;
}

ucs_status_t uct_ibshare_sock_send(int fd, const void *buf, size_t length,
                                   const int *fds, unsigned nfds,
                                   ucs_time_t deadline)
{
    uct_ibshare_sock_control_t control;
    struct cmsghdr *cmsg;
    struct msghdr msg;
    struct iovec iov;
    struct pollfd pfd;
    ssize_t ret;

    if (nfds > UCT_IBSHARE_SOCK_MAX_FDS) {
        return UCS_ERR_INVALID_PARAM;
    }

    memset(&msg, 0, sizeof(msg));
    iov.iov_base   = (void*)buf;
    iov.iov_len    = length;
    msg.msg_iov    = &iov;
    msg.msg_iovlen = 1;
    if (nfds > 0) {
        memset(&control, 0, sizeof(control));
        msg.msg_control    = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        cmsg               = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level   = SOL_SOCKET;
        cmsg->cmsg_type    = SCM_RIGHTS;
        cmsg->cmsg_len     = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nfds);
    }

    for (;;) {
        ret = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (ret >= 0) {
            /* A seqpacket message goes out whole or not at all */
            return (ret == (ssize_t)length) ? UCS_OK : UCS_ERR_IO_ERROR;
        }

        if ((errno == EPIPE) || (errno == ECONNRESET)) {
            return UCS_ERR_CONNECTION_RESET;
        } else if ((errno != EAGAIN) && (errno != EINTR)) {
            ucs_error("sendmsg() on a node group socket failed: %m");
            return UCS_ERR_IO_ERROR;
        }

        pfd.fd     = fd;
        pfd.events = POLLOUT;
        ret        = poll(&pfd, 1, uct_ibshare_sock_ms_left(deadline));
        if ((ret == 0) ||
            ((ret < 0) && (errno == EINTR) && (ucs_get_time() >= deadline))) {
            return UCS_ERR_TIMED_OUT;
        } else if ((ret < 0) && (errno != EINTR)) {
            ucs_error("poll() on a node group socket failed: %m");
            return UCS_ERR_IO_ERROR;
        }
    }
}

/* Takes the fds out of a received message; those beyond max are closed */
static unsigned uct_ibshare_sock_take_fds(struct msghdr *msg, int *fds,
                                          unsigned max)
{
    struct cmsghdr *cmsg;
    unsigned i, n, count = 0;
    int fd;

    for (cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL;
         cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if ((cmsg->cmsg_level != SOL_SOCKET) ||
            (cmsg->cmsg_type != SCM_RIGHTS)) {
            continue;
        }
        n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < n; ++i) {
            memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
            if (count < max) {
                fds[count++] = fd;
            } else {
                close(fd);
            }
        }
    }
    return count;
}

ucs_status_t uct_ibshare_sock_recv(int fd, void *buf, size_t max,
                                   size_t *length_p, int *fds,
                                   unsigned max_fds, unsigned *nfds_p,
                                   ucs_time_t deadline)
{
    uct_ibshare_sock_control_t control;
    struct msghdr msg;
    struct iovec iov;
    struct pollfd pfd;
    unsigned nfds;
    ssize_t ret;

    *nfds_p = 0;
    max_fds = ucs_min(max_fds, UCT_IBSHARE_SOCK_MAX_FDS);

    for (;;) {
        pfd.fd     = fd;
        pfd.events = POLLIN;
        ret        = poll(&pfd, 1, uct_ibshare_sock_ms_left(deadline));
        if (ret == 0) {
            return UCS_ERR_TIMED_OUT;
        } else if (ret < 0) {
            if (errno != EINTR) {
                ucs_error("poll() on a node group socket failed: %m");
                return UCS_ERR_IO_ERROR;
            }
            continue;
        }

        memset(&msg, 0, sizeof(msg));
        iov.iov_base   = buf;
        iov.iov_len    = max;
        msg.msg_iov    = &iov;
        msg.msg_iovlen = 1;
        /* Without room for fds the kernel closes any that come along and
         * says so with MSG_CTRUNC */
        if (max_fds > 0) {
            msg.msg_control    = control.buf;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * max_fds);
        }

        ret = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (ret < 0) {
            if ((errno == EAGAIN) || (errno == EINTR)) {
                continue;
            } else if ((errno == ECONNRESET) || (errno == EPIPE)) {
                return UCS_ERR_CONNECTION_RESET;
            }
            ucs_error("recvmsg() on a node group socket failed: %m");
            return UCS_ERR_IO_ERROR;
        }
        break;
    }

    nfds = (max_fds > 0) ? uct_ibshare_sock_take_fds(&msg, fds, max_fds) : 0;
    if (ret == 0) {
        uct_ibshare_sock_close_fds(fds, nfds);
        return UCS_ERR_CONNECTION_RESET;
    }
    if (msg.msg_flags & MSG_TRUNC) {
        uct_ibshare_sock_close_fds(fds, nfds);
        return UCS_ERR_MESSAGE_TRUNCATED;
    }
    if (msg.msg_flags & MSG_CTRUNC) {
        uct_ibshare_sock_close_fds(fds, nfds);
        /* With room left for more, the kernel had fds to give but could
         * not install them: we are at RLIMIT_NOFILE, the peer is fine */
        return (nfds < max_fds) ? UCS_ERR_NO_RESOURCE : UCS_ERR_EXCEEDS_LIMIT;
    }

    *length_p = ret;
    *nfds_p   = nfds;
    return UCS_OK;
}

static ucs_status_t uct_ibshare_sock_connect(int dir_fd, const char *name,
                                             const char *path,
                                             ucs_time_t deadline, int *fd_p,
                                             char *err, size_t err_max)
{
    struct sockaddr_un addr;
    int fd;

    if (uct_ibshare_sock_addr(dir_fd, name, path, &addr) != UCS_OK) {
        uct_ibshare_sock_err(err, err_max, "the address of socket %s is "
                             "too long", path);
        return UCS_ERR_INVALID_PARAM;
    }

    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        uct_ibshare_sock_err(err, err_max, "socket() failed: %m");
        ucs_error("socket(AF_UNIX, SOCK_SEQPACKET) failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    for (;;) {
        if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) == 0) {
            *fd_p = fd;
            return UCS_OK;
        }

        if ((errno == ENOENT) || (errno == ECONNREFUSED)) {
            uct_ibshare_sock_err(err, err_max, "nobody serves %s: %m", path);
            close(fd);
            return UCS_ERR_NO_ELEM;
        } else if ((errno != EAGAIN) && (errno != EINTR)) {
            uct_ibshare_sock_err(err, err_max, "connect(%s) failed: %m",
                                 path);
            ucs_error("connect(%s) failed: %m", path);
            close(fd);
            return UCS_ERR_IO_ERROR;
        }

        /* EAGAIN: the server's backlog is full; it drains quickly */
        if (ucs_get_time() >= deadline) {
            uct_ibshare_sock_err(err, err_max, "connect(%s): the server's "
                                 "backlog stayed full", path);
            close(fd);
            return UCS_ERR_TIMED_OUT;
        }
        poll(NULL, 0, 1);
    }
}

ucs_status_t uct_ibshare_sock_request(int dir_fd, const char *name,
                                      const char *path,
                                      const uct_ibshare_ident_t *ident,
                                      ucs_time_t deadline,
                                      uct_ibshare_msg_t *reply, int *fds,
                                      char *err, size_t err_max)
{
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    char decode_err[256];
    unsigned nfds, expected;
    ucs_status_t status;
    size_t length;
    pid_t pid;
    uid_t uid;
    int fd;

    fds[0] = fds[1] = -1;
    status = uct_ibshare_sock_connect(dir_fd, name, path, deadline, &fd, err,
                                      err_max);
    if (status != UCS_OK) {
        return status;
    }

    /* Before anything is sent: our pid and what we get back are for our
     * own user only, and so are the fds a server of another user would
     * hand us */
    status = uct_ibshare_sock_peer_cred(fd, &pid, &uid);
    if (status != UCS_OK) {
        uct_ibshare_sock_err(err, err_max, "SO_PEERCRED of %s failed", path);
        goto out;
    }
    if (uid != geteuid()) {
        uct_ibshare_sock_err(err, err_max, "the server at %s (pid %d) runs as "
                             "uid %u, not as our uid %u", path, (int)pid,
                             (unsigned)uid, (unsigned)geteuid());
        ucs_error("refusing to join: %s", err);
        status = UCS_ERR_REJECTED;
        goto out;
    }

    length = uct_ibshare_msg_pack_join(buf, sizeof(buf), getpid(), geteuid(),
                                       ident);
    if (length == 0) {
        uct_ibshare_sock_err(err, err_max, "our join message for device "
                             "'%s' does not encode", ident->dev_name);
        ucs_error("%s", err);
        status = UCS_ERR_INVALID_PARAM;
        goto out;
    }
    status = uct_ibshare_sock_send(fd, buf, length, NULL, 0, deadline);
    if (status == UCS_ERR_CONNECTION_RESET) {
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s closed the "
                             "connection before our join message",
                             (int)pid, path);
        goto out;
    } else if (status == UCS_ERR_TIMED_OUT) {
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s did not take "
                             "our join message in time", (int)pid, path);
        goto out;
    } else if (status != UCS_OK) {
        uct_ibshare_sock_err(err, err_max, "sending the join message to %s "
                             "failed", path);
        goto out;
    }

    status = uct_ibshare_sock_recv(fd, buf, sizeof(buf), &length, fds,
                                   UCT_IBSHARE_SOCK_MAX_FDS, &nfds, deadline);
    switch (status) {
    case UCS_OK:
        break;
    case UCS_ERR_CONNECTION_RESET:
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s closed the "
                             "connection without an answer (did it die?)",
                             (int)pid, path);
        goto out;
    case UCS_ERR_TIMED_OUT:
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s did not "
                             "answer in time", (int)pid, path);
        ucs_error("%s", err);
        goto out;
    case UCS_ERR_MESSAGE_TRUNCATED:
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s sent a "
                             "message longer than %d bytes", (int)pid, path,
                             UCT_IBSHARE_MSG_MAX);
        ucs_error("%s", err);
        status = UCS_ERR_IO_ERROR;
        goto out;
    case UCS_ERR_NO_RESOURCE:
        /* Our socket's fd counts too, and is of no use any more */
        ucs_close_fd(&fd);
        uct_ibshare_sock_fd_limit_err(path, pid, err, err_max);
        goto out;
    case UCS_ERR_EXCEEDS_LIMIT:
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s sent more "
                             "than %d file descriptors", (int)pid, path,
                             UCT_IBSHARE_SOCK_MAX_FDS);
        ucs_error("%s", err);
        status = UCS_ERR_IO_ERROR;
        goto out;
    default:
        uct_ibshare_sock_err(err, err_max, "receiving from server pid %d at "
                             "%s failed", (int)pid, path);
        goto out;
    }

    status = uct_ibshare_msg_unpack(buf, length, reply, decode_err,
                                    sizeof(decode_err));
    if (status != UCS_OK) {
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s sent a bad "
                             "answer: %s", (int)pid, path, decode_err);
        ucs_error("%s", err);
        status = UCS_ERR_IO_ERROR;
        goto out_close_fds;
    }

    switch (reply->type) {
    case UCT_IBSHARE_MSG_DESC:
        expected = reply->desc.has_cmd_fd ? 2 : 1;
        break;
    case UCT_IBSHARE_MSG_REFUSE:
        expected = 0;
        break;
    default:
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s answered "
                             "with a message of type %u", (int)pid, path,
                             reply->type);
        ucs_error("%s", err);
        status = UCS_ERR_IO_ERROR;
        goto out_close_fds;
    }

    if (nfds != expected) {
        uct_ibshare_sock_err(err, err_max, "server pid %d at %s sent %u file "
                             "descriptors with its answer, not %u", (int)pid,
                             path, nfds, expected);
        ucs_error("%s", err);
        status = UCS_ERR_IO_ERROR;
        goto out_close_fds;
    }
    goto out;

out_close_fds:
    uct_ibshare_sock_close_fds(fds, nfds);
out:
    ucs_close_fd(&fd);
    return status;
}
