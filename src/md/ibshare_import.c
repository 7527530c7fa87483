/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The import verbs and their release.
 */
#include "ibshare_import.h"

#include <ucs/debug/log_def.h>
#include <ucs/sys/string.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>


static void uct_ibshare_import_reason(char *reason, size_t max,
                                      const char *call, uint32_t handle,
                                      int err)
{
    if (handle == UINT32_MAX) {
        ucs_snprintf_zero(reason, max, "%s: %s", call, strerror(err));
    } else {
        ucs_snprintf_zero(reason, max, "%s(handle %u): %s", call, handle,
                          strerror(err));
    }
}

/* Whether fd_a and fd_b are the same open file description */
static int uct_ibshare_same_file(int fd_a, int fd_b)
{
    pid_t pid = getpid();

    return syscall(SYS_kcmp, pid, pid, KCMP_FILE, fd_a, fd_b) == 0;
}

/*
 * ibv_import_device() on a dup of cmd_fd, which the caller keeps. Who owns
 * the fd that ibv_import_device() got is not fixed when it fails: the
 * provider's import_context closes it on its failures (verbs_uninit_context),
 * but libibverbs fails before it (not a uverbs fd, no such device, a provider
 * without import) and leaves it open. Closing it blindly could close a file
 * another thread just opened under the same number; so the dup is closed
 * here only while it is still the caller's open file (kcmp(2)). Where kcmp
 * is missing, a failed import may leak the dup, never close a stranger.
 */
static struct ibv_context *uct_ibshare_import_device(int cmd_fd, int *err_p)
{
    struct ibv_context *context;
    int fd, err;

    fd = fcntl(cmd_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        *err_p = errno;
        return NULL;
    }

    context = ibv_import_device(fd);
    if (context != NULL) {
        return context;
    }

    err = (errno != 0) ? errno : EIO;
    if (uct_ibshare_same_file(cmd_fd, fd)) {
        close(fd);
    }
    *err_p = err;
    return NULL;
}

ucs_status_t uct_ibshare_import_probe(struct ibv_context *context,
                                      struct ibv_pd *pd, char *reason,
                                      size_t max)
{
    struct ibv_context *probe_context;
    struct ibv_pd *probe_pd;
    int err;

    probe_context = uct_ibshare_import_device(context->cmd_fd, &err);
    if (probe_context == NULL) {
        uct_ibshare_import_reason(reason, max, "ibv_import_device",
                                  UINT32_MAX, err);
        goto err;
    }

    probe_pd = ibv_import_pd(probe_context, pd->handle);
    if (probe_pd == NULL) {
        err = (errno != 0) ? errno : EIO;
        uct_ibshare_import_reason(reason, max, "ibv_import_pd", pd->handle,
                                  err);
        ibv_close_device(probe_context);
        goto err;
    }

    ibv_unimport_pd(probe_pd);
    ibv_close_device(probe_context);
    reason[0] = '\0';
    return UCS_OK;

err:
    return ((err == EOPNOTSUPP) || (err == ENOSYS)) ? UCS_ERR_UNSUPPORTED :
                                                      UCS_ERR_IO_ERROR;
}

ucs_status_t uct_ibshare_import(int cmd_fd, uint32_t pd_handle,
                                uint32_t mr_handle, int fail_mr,
                                struct ibv_context **context_p,
                                struct ibv_pd **pd_p, struct ibv_mr **mr_p,
                                char *reason, size_t max)
{
    struct ibv_context *context;
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    int err;

    context = uct_ibshare_import_device(cmd_fd, &err);
    close(cmd_fd);
    if (context == NULL) {
        uct_ibshare_import_reason(reason, max, "ibv_import_device",
                                  UINT32_MAX, err);
        return UCS_ERR_IO_ERROR;
    }

    pd = ibv_import_pd(context, pd_handle);
    if (pd == NULL) {
        uct_ibshare_import_reason(reason, max, "ibv_import_pd", pd_handle,
                                  (errno != 0) ? errno : EIO);
        goto err_close;
    }

    if (fail_mr) {
        ucs_snprintf_zero(reason, max, "ibv_import_mr(handle %u): %s "
                          "(injected: UCX_IBSHARE_FAULT=import_fail)",
                          mr_handle, strerror(EPERM));
        goto err_unimport_pd;
    }

    mr = ibv_import_mr(pd, mr_handle);
    if (mr == NULL) {
        uct_ibshare_import_reason(reason, max, "ibv_import_mr", mr_handle,
                                  (errno != 0) ? errno : EIO);
        goto err_unimport_pd;
    }

    *context_p = context;
    *pd_p      = pd;
    *mr_p      = mr;
    return UCS_OK;

err_unimport_pd:
    ibv_unimport_pd(pd);
err_close:
    ibv_close_device(context);
    return UCS_ERR_IO_ERROR;
}

void uct_ibshare_import_release(const char *dev_name,
                                struct ibv_context *context, struct ibv_pd *pd,
                                struct ibv_mr *mr, int destroy)
{
    int ret;

    if (mr != NULL) {
        if (destroy) {
            ret = ibv_dereg_mr(mr);
            if (ret != 0) {
                ucs_warn("%s: ibv_dereg_mr(pool) failed: %s", dev_name,
                         strerror(ret));
            }
        } else {
            ibv_unimport_mr(mr);
        }
    }

    if (pd != NULL) {
        ret = destroy ? ibv_dealloc_pd(pd) : 0;
        if (ret == EBUSY) {
            /* QPs of a killed member of the group still use the PD: they
             * live in the shared context, which the kernel frees with its
             * last file descriptor, ours among them */
            ucs_debug("%s: the shared PD is still in use by a killed "
                      "member's QPs; the kernel frees it with the group's "
                      "last context", dev_name);
        } else if (ret != 0) {
            ucs_warn("%s: ibv_dealloc_pd() failed: %s", dev_name,
                     strerror(ret));
        }
        if (!destroy || (ret != 0)) {
            ibv_unimport_pd(pd);
        }
    }

    if (context != NULL) {
        ibv_close_device(context);
    }
}
