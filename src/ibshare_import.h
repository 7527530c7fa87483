/**
 * The import verbs (rdma-core >= 31): the only place that calls them.
 *
 * Only the mlx5 provider implements them; every other provider (rxe, siw,
 * efa, ...) fails with EOPNOTSUPP, and then the node group runs in fallback
 * mode. See ibv_import_device(3), ibv_import_pd(3), ibv_import_mr(3).
 */
#ifndef UCT_IBSHARE_IMPORT_H_
#define UCT_IBSHARE_IMPORT_H_

#include <ucs/type/status.h>
#include <infiniband/verbs.h>


/*
 * Can members import objects of this context? Asks the provider by importing
 * pd's own handle into the same context (no second context needed), which
 * fails exactly as a member's import would. Returns UCS_OK,
 * UCS_ERR_UNSUPPORTED (EOPNOTSUPP: the provider has no import) or
 * UCS_ERR_IO_ERROR (something else, logged).
 */
ucs_status_t uct_ibshare_import_probe(struct ibv_context *context,
                                      struct ibv_pd *pd);

/*
 * Import the leader's context, PD and MR. cmd_fd becomes the new context's
 * (closed with it) on success, and is closed on failure.
 */
ucs_status_t uct_ibshare_import(const char *dev_name, int cmd_fd,
                                uint32_t pd_handle, uint32_t mr_handle,
                                struct ibv_context **context_p,
                                struct ibv_pd **pd_p, struct ibv_mr **mr_p);

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
