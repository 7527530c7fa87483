/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The import verbs (rdma-core >= 31): the only place that calls them.
 *
 * Only the mlx5 provider implements them; every other provider (rxe, siw,
 * efa, ...) fails with EOPNOTSUPP, and then the node group runs in fallback
 * mode. See ibv_import_device(3), ibv_import_pd(3), ibv_import_mr(3).
 *
 * Nothing here logs an import that fails: the caller decides whether that
 * ends the rank's membership, falls back, or is the answer to a probe, and
 * says so once, with the reason these functions write (the call and its
 * errno).
 */
#ifndef UCT_IBSHARE_IMPORT_H_
#define UCT_IBSHARE_IMPORT_H_

#include <ucs/type/status.h>
#include <infiniband/verbs.h>
#include <stddef.h>


/* Room for a reason: "ibv_import_mr(handle 4294967295): <strerror>" */
#define UCT_IBSHARE_IMPORT_REASON_MAX 160


/*
 * Can other processes import this context and PD? Asks the provider the way
 * a member would: imports the device from a dup of the context's cmd_fd and
 * pd's handle into it, then lets both go. (mlx5 refuses, with EINVAL, to
 * import a context the kernel gave static UAR registers; a PD import into the
 * same context would not show that.) Returns UCS_OK, UCS_ERR_UNSUPPORTED
 * (the provider has no import: EOPNOTSUPP) or UCS_ERR_IO_ERROR (it has, and
 * it failed); reason says which call failed and why.
 */
ucs_status_t uct_ibshare_import_probe(struct ibv_context *context,
                                      struct ibv_pd *pd, char *reason,
                                      size_t max);

/*
 * Import the leader's context, PD and MR. Takes cmd_fd, whatever happens:
 * on success the new context holds the fd it needs, on failure nothing is
 * left. fail_mr: test-only fault injection, the MR import fails after the
 * context and PD were imported (so their release runs). On failure, reason
 * names the call and its errno.
 */
ucs_status_t uct_ibshare_import(int cmd_fd, uint32_t pd_handle,
                                uint32_t mr_handle, int fail_mr,
                                struct ibv_context **context_p,
                                struct ibv_pd **pd_p, struct ibv_mr **mr_p,
                                char *reason, size_t max);

/*
 * Let go of the shared PD and MR and close the context, in the order the man
 * pages require (QPs and CQs on the PD must be gone already). destroy: this
 * was the last member, so the objects are destroyed; otherwise they are only
 * unimported and live on for the other members. Works on objects this
 * process created as well as on imported ones.
 */
void uct_ibshare_import_release(const char *dev_name,
                                struct ibv_context *context, struct ibv_pd *pd,
                                struct ibv_mr *mr, int destroy);

#endif
