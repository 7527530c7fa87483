/**
 * The import verbs and their release.
 */
#include "ibshare_import.h"

#include <ucs/debug/log_def.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>


ucs_status_t uct_ibshare_import_probe(struct ibv_context *context,
                                      struct ibv_pd *pd)
{
    struct ibv_pd *probe;

    probe = ibv_import_pd(context, pd->handle);
    if (probe != NULL) {
        ibv_unimport_pd(probe);
        return UCS_OK;
    }

    if ((errno == EOPNOTSUPP) || (errno == ENOSYS)) {
        return UCS_ERR_UNSUPPORTED;
    }

    ucs_error("%s: ibv_import_pd(own handle %u) failed: %m",
              ibv_get_device_name(context->device), pd->handle);
    return UCS_ERR_IO_ERROR;
}

ucs_status_t uct_ibshare_import(const char *dev_name, int cmd_fd,
                                uint32_t pd_handle, uint32_t mr_handle,
                                struct ibv_context **context_p,
                                struct ibv_pd **pd_p, struct ibv_mr **mr_p)
{
    struct ibv_context *context;
    struct ibv_pd *pd;
    struct ibv_mr *mr;

    context = ibv_import_device(cmd_fd);
    if (context == NULL) {
        ucs_error("%s: ibv_import_device(fd %d) failed: %m", dev_name, cmd_fd);
        close(cmd_fd);
        return UCS_ERR_IO_ERROR;
    }

    pd = ibv_import_pd(context, pd_handle);
    if (pd == NULL) {
        ucs_error("%s: ibv_import_pd(handle %u) failed: %m", dev_name,
                  pd_handle);
        goto err_close;
    }

    mr = ibv_import_mr(pd, mr_handle);
    if (mr == NULL) {
        ucs_error("%s: ibv_import_mr(handle %u) failed: %m", dev_name,
                  mr_handle);
        ibv_unimport_pd(pd);
        goto err_close;
    }

    *context_p = context;
    *pd_p      = pd;
    *mr_p      = mr;
    return UCS_OK;

err_close:
    /* Closes cmd_fd, which the context owns now */
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
        if (destroy) {
            ret = ibv_dealloc_pd(pd);
            if (ret != 0) {
                ucs_warn("%s: ibv_dealloc_pd() failed: %s", dev_name,
                         strerror(ret));
            }
        } else {
            ibv_unimport_pd(pd);
        }
    }

    if (context != NULL) {
        ibv_close_device(context);
    }
}
