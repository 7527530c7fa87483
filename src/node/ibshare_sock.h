/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The node group's unix socket: SOCK_SEQPACKET, so every message arrives
 * whole or is reported truncated, and file descriptors travel beside the
 * descriptor as SCM_RIGHTS. Every call is bounded by a deadline; nothing
 * here blocks without one.
 */
#ifndef UCT_IBSHARE_SOCK_H_
#define UCT_IBSHARE_SOCK_H_

#include "ibshare_desc.h"

#include <ucs/time/time.h>
#include <ucs/type/status.h>
#include <sys/types.h>


/* At most this many fds come with one message (cmd_fd and pool fd) */
#define UCT_IBSHARE_SOCK_MAX_FDS  2


/* Milliseconds from now to deadline, for poll(): 0 once it has passed */
int uct_ibshare_sock_ms_left(ucs_time_t deadline);


/*
 * Binds and listens at name (which must not exist) in the directory open as
 * dir_fd, or at the path name with AT_FDCWD; path names the socket in
 * messages. Non-blocking, CLOEXEC.
 */
ucs_status_t uct_ibshare_sock_listen(int dir_fd, const char *name,
                                     const char *path, int *fd_p);

/* The credentials of the peer of a connected socket */
ucs_status_t uct_ibshare_sock_peer_cred(int fd, pid_t *pid_p, uid_t *uid_p);

/*
 * Sends one message with nfds file descriptors beside it (nfds may be 0),
 * waiting at most until deadline for room. Never raises SIGPIPE.
 * UCS_ERR_CONNECTION_RESET if the peer is gone.
 */
ucs_status_t uct_ibshare_sock_send(int fd, const void *buf, size_t length,
                                   const int *fds, unsigned nfds,
                                   ucs_time_t deadline);

/*
 * Receives one message (at most max bytes) and up to max_fds file
 * descriptors, waiting at most until deadline. The fds are CLOEXEC and the
 * caller's to close. A message longer than max or more fds than max_fds is
 * an error, and then no fd is left open. UCS_ERR_CONNECTION_RESET when the
 * peer closed or reset the connection, UCS_ERR_TIMED_OUT at the deadline.
 */
ucs_status_t uct_ibshare_sock_recv(int fd, void *buf, size_t max,
                                   size_t *length_p, int *fds,
                                   unsigned max_fds, unsigned *nfds_p,
                                   ucs_time_t deadline);

/*
 * The joiner's side of a hand-off: connect to the server at name in the
 * directory open as dir_fd (AT_FDCWD: at the path name; path names it in
 * messages), check that it runs as our effective uid, send JOIN (naming
 * the group of ident), receive and decode the answer.
 * On UCS_OK, *reply is a DESC (with exactly the fds it announces in fds,
 * cmd_fd first) or a REFUSE (no fds). Errors:
 *  UCS_ERR_NO_ELEM           nobody listens at path (no socket, refused)
 *  UCS_ERR_CONNECTION_RESET  the server went away mid hand-off: worth a
 *                            retry, a surviving member takes over
 *  UCS_ERR_TIMED_OUT         no answer before deadline
 *  UCS_ERR_NO_RESOURCE       the fds did not fit under RLIMIT_NOFILE
 *  other                     a bad answer or another user's server; logged
 * The retryable ones are logged at debug level only; the cause is also
 * written to err.
 */
ucs_status_t uct_ibshare_sock_request(int dir_fd, const char *name,
                                      const char *path,
                                      const uct_ibshare_ident_t *ident,
                                      ucs_time_t deadline,
                                      uct_ibshare_msg_t *reply, int *fds,
                                      char *err, size_t err_max);

/* Closes the fds and sets them to -1 */
void uct_ibshare_sock_close_fds(int *fds, unsigned nfds);

#endif
