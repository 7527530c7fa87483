/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The verbs resources of one device in this process, and how they come from
 * the node group.
 */
#include "ibshare_resources.h"
#include "ibshare_device.h"
#include "ibshare_import.h"
#include "compat/ibshare_ucx_compat.h"

#include <ucs/debug/log_def.h>
#include <ucs/arch/cpu.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


#define UCT_IBSHARE_MR_ACCESS \
    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* Pool size when the job does not say how many ranks share the node */
#define UCT_IBSHARE_DEFAULT_SLICES  16
/* Slices beyond the expected members, for ranks that join later */
#define UCT_IBSHARE_SPARE_SLICES    2


const char *uct_ibshare_mode_names[] = {
    [UCT_IBSHARE_MODE_AUTO]    = "auto",
    [UCT_IBSHARE_MODE_SHARED]  = "shared",
    [UCT_IBSHARE_MODE_PRIVATE] = "private",
    [UCT_IBSHARE_MODE_LAST]    = NULL
};

static pthread_mutex_t uct_ibshare_resources_lock = PTHREAD_MUTEX_INITIALIZER;
static UCS_LIST_HEAD(uct_ibshare_resources_list);


/*
 * The most tasks a node of the Slurm step runs: SLURM_STEP_TASKS_PER_NODE
 * lists them as "4", "2(x3),1" (2 on each of 3 nodes, then 1). This node's
 * entry would need the step's node list: the most of any node is a pool
 * never too small. 0 (unknown) for anything else.
 */
static unsigned long uct_ibshare_slurm_local_tasks(const char *list)
{
    unsigned long most = 0, tasks, repeat;
    char *end;

    for (;;) {
        if (!isdigit((unsigned char)*list)) {
            return 0;
        }
        tasks = strtoul(list, &end, 10);
        if (strncmp(end, "(x", 2) == 0) {
            if (!isdigit((unsigned char)end[2])) {
                return 0;
            }
            repeat = strtoul(end + 2, &end, 10);
            if ((*end != ')') || (repeat == 0)) {
                return 0;
            }
            ++end;
        }
        most = ucs_max(most, tasks);
        if (*end == '\0') {
            return most;
        } else if (*end != ',') {
            return 0;
        }
        list = end + 1;
    }
}

/*
 * Job key and local size, first found wins: what each launcher sets.
 * MPICH's hydra names no job in the environment; a process it starts has
 * PMI_FD (or PMI_PORT) and MPI_LOCALNRANKS, and is a child of the job's
 * hydra_pmi_proxy on the node, one per job and node: the proxy's pid is
 * the key (a rank that a wrapper starts has the wrapper as its parent, and
 * then forms a group of its own, as before).
 */
static void uct_ibshare_job_from_env(uct_ibshare_share_params_t *params)
{
    const char *slurm_job, *slurm_step, *value;
    unsigned long members;
    int hydra = ((getenv("PMI_FD") != NULL) ||
                 (getenv("PMI_PORT") != NULL)) &&
                (getenv("MPI_LOCALNRANKS") != NULL);

    if (params->job_key[0] == '\0') {
        if ((value = getenv("PMIX_NAMESPACE")) != NULL) {
            ucs_strncpy_zero(params->job_key, value, sizeof(params->job_key));
        } else if ((value = getenv("OMPI_MCA_ess_base_jobid")) != NULL) {
            ucs_strncpy_zero(params->job_key, value, sizeof(params->job_key));
        } else if ((slurm_job = getenv("SLURM_JOB_ID")) != NULL) {
            slurm_step = getenv("SLURM_STEP_ID");
            ucs_snprintf_zero(params->job_key, sizeof(params->job_key),
                              "slurm-%s.%s", slurm_job,
                              (slurm_step != NULL) ? slurm_step : "0");
        } else if (hydra) {
            ucs_snprintf_zero(params->job_key, sizeof(params->job_key),
                              "hydra-%d", (int)getppid());
        }
    }

    value = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if ((value == NULL) && hydra) {
        value = getenv("MPI_LOCALNRANKS");
    }
    if (value != NULL) {
        members = strtoul(value, NULL, 10);
    } else if ((value = getenv("SLURM_STEP_TASKS_PER_NODE")) != NULL) {
        /* srun starts the ranks before Open MPI's MPI_Init sets its own */
        members = uct_ibshare_slurm_local_tasks(value);
    } else {
        members = 0;
    }
    /* (more than a pool holds: the pool's most, not a wrapped count) */
    params->expected_members = ucs_min(members, UCT_IBSHARE_DESC_MAX_SLICES);
}

void uct_ibshare_share_params_init(uct_ibshare_share_params_t *params,
                                   uct_ibshare_mode_t mode,
                                   const char *job_key,
                                   const char *runtime_dir, size_t pool_size,
                                   size_t slice_size,
                                   ucs_ternary_auto_value_t pool_huge,
                                   double join_timeout, unsigned fault)
{
    params->mode         = mode;
    params->pool_size    = pool_size;
    params->slice_size   = slice_size;
    params->pool_huge    = pool_huge;
    params->join_timeout = join_timeout;
    params->fault        = fault;
    ucs_strncpy_zero(params->job_key, job_key, sizeof(params->job_key));
    ucs_strncpy_zero(params->runtime_dir, runtime_dir,
                     sizeof(params->runtime_dir));
    uct_ibshare_job_from_env(params);
}

/* ------------------------------------------------------------ counters */

static void uct_ibshare_resources_publish(uct_ibshare_resources_t *res)
{
    if (res->node != NULL) {
        /* A shared pool MR is the group's, counted in the group's state:
         * it outlives the founder that registered it */
        uct_ibshare_node_set_counters(res->node, res->counters.regs_done,
                                      res->counters.regs_avoided,
                                      res->counters.mrs_held -
                                      res->pool_mr_founded);
    }
}

struct ibv_mr *uct_ibshare_resources_reg_mr(uct_ibshare_resources_t *res,
                                            void *address, size_t length,
                                            uint64_t iova)
{
    struct ibv_mr *mr;

    mr = ibv_reg_mr_iova(res->pd, address, length, iova,
                         UCT_IBSHARE_MR_ACCESS);
    if (mr == NULL) {
        return NULL;
    }
    uct_ibshare_resources_track(res, UCT_IBSHARE_OBJ_MR, mr->handle);

    pthread_mutex_lock(&res->lock);
    ++res->counters.regs_done;
    ++res->counters.mrs_held;
    uct_ibshare_resources_publish(res);
    pthread_mutex_unlock(&res->lock);
    return mr;
}

int uct_ibshare_resources_dereg_mr(uct_ibshare_resources_t *res,
                                   struct ibv_mr *mr)
{
    uint32_t handle = mr->handle;
    int ret;

    if (!uct_ibshare_resources_owned(res)) {
        return 0; /* the parent's MR: see uct_ibshare_resources_owned */
    }

    uct_ibshare_resources_untrack(res, UCT_IBSHARE_OBJ_MR, handle);
    ret = ibv_dereg_mr(mr);
    if (ret != 0) {
        uct_ibshare_resources_track(res, UCT_IBSHARE_OBJ_MR, handle);
    } else {
        pthread_mutex_lock(&res->lock);
        --res->counters.mrs_held;
        uct_ibshare_resources_publish(res);
        pthread_mutex_unlock(&res->lock);
    }
    return ret;
}

void uct_ibshare_resources_count_avoided(uct_ibshare_resources_t *res)
{
    pthread_mutex_lock(&res->lock);
    ++res->counters.regs_avoided;
    uct_ibshare_resources_publish(res);
    pthread_mutex_unlock(&res->lock);
}

/* ------------------------------------------------------------ founding */

/* A device context and PD of this process's own */
static ucs_status_t uct_ibshare_resources_open_own(uct_ibshare_resources_t *res)
{
    ucs_status_t status;

    status = uct_ibshare_device_open(res->dev_name, &res->context);
    if (status != UCS_OK) {
        return status;
    }

    res->pd = ibv_alloc_pd(res->context);
    if (res->pd == NULL) {
        ucs_error("%s: ibv_alloc_pd() failed: %m", res->dev_name);
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

static size_t
uct_ibshare_pool_size(const uct_ibshare_share_params_t *params)
{
    unsigned slices;

    if (params->pool_size != UCS_MEMUNITS_AUTO) {
        return params->pool_size;
    }

    slices = (params->expected_members != 0) ?
             params->expected_members + UCT_IBSHARE_SPARE_SLICES :
             UCT_IBSHARE_DEFAULT_SLICES;
    return (size_t)ucs_min(slices, UCT_IBSHARE_DESC_MAX_SLICES) *
           params->slice_size;
}

typedef struct {
    uct_ibshare_resources_t          *res;
    const uct_ibshare_share_params_t *params;
} uct_ibshare_found_arg_t;

/* The founder's part: device, PD, pool, and in shared mode the one MR */
static ucs_status_t uct_ibshare_group_create(void *arg,
                                             uct_ibshare_desc_t *desc,
                                             int *cmd_fd_p, int *pool_fd_p)
{
    uct_ibshare_found_arg_t *found             = arg;
    uct_ibshare_resources_t *res               = found->res;
    const uct_ibshare_share_params_t *params   = found->params;
    char reason[UCT_IBSHARE_IMPORT_REASON_MAX];
    uct_ibshare_sys_mem_t mem;
    char what[96];
    ucs_status_t status;

    status = uct_ibshare_resources_open_own(res);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_ibshare_import_probe(res->context, res->pd, reason,
                                      sizeof(reason));
    if (status == UCS_OK) {
        res->mode = UCT_IBSHARE_GROUP_SHARED;
    } else if (params->mode == UCT_IBSHARE_MODE_SHARED) {
        ucs_error("%s: UCX_IBSHARE_MODE=shared, but the provider cannot "
                  "import this context (%s; only mlx5 can); use "
                  "UCX_IBSHARE_MODE=auto or private", res->dev_name, reason);
        return status;
    } else {
        res->mode = UCT_IBSHARE_GROUP_FALLBACK;
        if (status == UCS_ERR_UNSUPPORTED) {
            ucs_info("%s: the provider cannot import a PD or MR (%s; only "
                     "mlx5 can); node group in fallback mode: each rank has "
                     "its own PD and registers its slice of the node pool",
                     res->dev_name, reason);
        } else {
            /* Has import, and it failed: a kernel or firmware matter the
             * administrator should hear of */
            ucs_warn("%s: the provider cannot import this context (%s); "
                     "node group in fallback mode: each rank has its own PD "
                     "and registers its slice of the node pool",
                     res->dev_name, reason);
        }
    }

    /* The pool is pinned whole in shared mode; either way its pages are
     * the node's once its slices are used */
    res->pool_size = uct_ibshare_pool_size(params);
    if (params->pool_size == UCS_MEMUNITS_AUTO) {
        ucs_snprintf_zero(what, sizeof(what), "the node pool (auto: %zu "
                          "slices of UCX_IBSHARE_SLICE_SIZE)",
                          res->pool_size / params->slice_size);
    } else {
        ucs_snprintf_zero(what, sizeof(what), "the node pool");
    }
    uct_ibshare_sys_mem_get(&mem);
    status = uct_ibshare_pool_check_memory("UCX_IBSHARE_POOL_SIZE",
                                           res->pool_size, what,
                                           params->pool_huge,
                                           res->mode ==
                                           UCT_IBSHARE_GROUP_SHARED, &mem);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_ibshare_pool_create("ucx-ibshare-pool", res->pool_size,
                                     params->pool_huge, &res->pool_fd);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_ibshare_pool_map(res->pool_fd, res->pool_size,
                                  &res->pool_address);
    if (status != UCS_OK) {
        return status;
    }

    /* The node layout starts at the founder's address: nothing requires it,
     * but it makes the founder's keys the identity */
    res->pool_iova = (uintptr_t)res->pool_address;

    memset(desc, 0, sizeof(*desc));
    if (res->mode == UCT_IBSHARE_GROUP_SHARED) {
        res->pool_mr = uct_ibshare_resources_reg_mr(res, res->pool_address,
                                                    res->pool_size,
                                                    res->pool_iova);
        if (res->pool_mr == NULL) {
            ucs_error("%s: registering the node pool (%zu bytes) failed: %m"
                      " (check ulimit -l)", res->dev_name, res->pool_size);
            return UCS_ERR_IO_ERROR;
        }
        res->pool_mr_founded = 1;
        desc->pd_handle = res->pd->handle;
        desc->mr_handle = res->pool_mr->handle;
        desc->lkey      = res->pool_mr->lkey;
        desc->rkey      = res->pool_mr->rkey;
        desc->has_cmd_fd = 1;
        *cmd_fd_p       = res->context->cmd_fd;
    } else {
        *cmd_fd_p       = -1;
    }

    desc->mode       = res->mode;
    desc->pool_iova  = res->pool_iova;
    desc->pool_size  = res->pool_size;
    desc->slice_size = params->slice_size;
    desc->num_slices = res->pool_size / params->slice_size;
    desc->port_guid  = ibv_get_device_guid(res->context->device);
    desc->port_num   = 1;
    ucs_strncpy_zero(desc->dev_name, res->dev_name, sizeof(desc->dev_name));
    *pool_fd_p       = res->pool_fd;
    return UCS_OK;
}

/* ------------------------------------------------------------ reclaiming */

/* The node group's server, for a member killed in shared mode: what its
 * ledger still records is destroyed on the shared file (node's thread) */
static ucs_status_t uct_ibshare_group_reclaim(int cmd_fd, int pool_fd,
                                              const uct_ibshare_desc_t *desc,
                                              uint32_t slice, pid_t pid)
{
    uct_ibshare_ledger_reclaimed_t done;
    ucs_status_t status;
    UCS_STRING_BUFFER_ONSTACK(strb, 128);
    const char *what;

    status = uct_ibshare_ledger_reclaim(cmd_fd, pool_fd,
                                        (uint64_t)slice * desc->slice_size,
                                        uct_ibshare_ledger_size(
                                                desc->slice_size),
                                        pid, &done);
    what = uct_ibshare_ledger_reclaimed_str(&done, &strb);
    if (status == UCS_OK) {
        ucs_info("%s: member pid %d died; destroyed what it left on the "
                 "group's device context (%s%s), slice %u is free again",
                 desc->dev_name, (int)pid, what,
                 (done.unrecorded > 0) ? ", and it had objects beyond its "
                 "ledger" : "", slice);
    } else if ((status == UCS_ERR_BUSY) || (status == UCS_ERR_UNSUPPORTED)) {
        ucs_warn("%s: member pid %d died; of what it left on the group's "
                 "device context, %s destroyed, %u refused by the kernel "
                 "(%s): slice %u stays retired until the node group ends",
                 desc->dev_name, (int)pid, what, done.failed,
                 strerror(done.first_errno), slice);
    } else {
        ucs_warn("%s: member pid %d died; its ledger could not be read: "
                 "slice %u stays retired until the node group ends",
                 desc->dev_name, (int)pid, slice);
    }
    return status;
}

/* ------------------------------------------------------------ joining */

/* A shared-mode joiner imports the leader's context, PD and MR; cmd_fd is
 * taken. On failure nothing is imported and reason says why. */
static ucs_status_t
uct_ibshare_group_import(uct_ibshare_resources_t *res,
                         const uct_ibshare_desc_t *desc, int cmd_fd,
                         const uct_ibshare_share_params_t *params,
                         char *reason, size_t max)
{
    ucs_status_t status;

    status = uct_ibshare_import(cmd_fd, desc->pd_handle, desc->mr_handle,
                                params->fault ==
                                UCT_IBSHARE_FAULT_IMPORT_FAIL,
                                &res->context, &res->pd, &res->pool_mr,
                                reason, max);
    if (status != UCS_OK) {
        return status;
    }

    if ((res->pool_mr->lkey != desc->lkey) ||
        (res->pool_mr->rkey != desc->rkey)) {
        ucs_snprintf_zero(reason, max, "the imported pool MR has keys "
                          "0x%x/0x%x, the descriptor says 0x%x/0x%x",
                          res->pool_mr->lkey, res->pool_mr->rkey, desc->lkey,
                          desc->rkey);
        uct_ibshare_import_release(res->dev_name, res->context, res->pd,
                                   res->pool_mr, 0);
        res->context = NULL;
        res->pd      = NULL;
        res->pool_mr = NULL;
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* A joiner's part: the pool, and the leader's objects or its own */
static ucs_status_t
uct_ibshare_group_attach(uct_ibshare_resources_t *res,
                         const uct_ibshare_node_member_t *member,
                         const uct_ibshare_share_params_t *params)
{
    const uct_ibshare_desc_t *desc = &member->desc;
    char reason[UCT_IBSHARE_IMPORT_REASON_MAX];
    ucs_status_t status;

    res->mode      = desc->mode;
    res->pool_fd   = member->pool_fd;
    res->pool_size = desc->pool_size;
    res->pool_iova = desc->pool_iova;
    status = uct_ibshare_pool_map(res->pool_fd, res->pool_size,
                                  &res->pool_address);
    if (status != UCS_OK) {
        if (member->cmd_fd >= 0) {
            close(member->cmd_fd);
        }
        return status;
    }

    if (desc->mode != UCT_IBSHARE_GROUP_SHARED) {
        return uct_ibshare_resources_open_own(res);
    }

    status = uct_ibshare_group_import(res, desc, member->cmd_fd, params,
                                      reason, sizeof(reason));
    if (status == UCS_OK) {
        return UCS_OK;
    }

    if (params->mode == UCT_IBSHARE_MODE_SHARED) {
        ucs_error("%s: importing the node group's objects failed (%s), and "
                  "UCX_IBSHARE_MODE=shared", res->dev_name, reason);
        return status;
    }

    /* The group and its pool still serve this rank; only its keys are its
     * own, as every rank's are in fallback mode */
    ucs_warn("%s: importing the node group's objects failed (%s); this rank "
             "runs its own PD and registers its slice of the node pool, as "
             "in fallback mode", res->dev_name, reason);
    res->mode = UCT_IBSHARE_GROUP_FALLBACK;
    return uct_ibshare_resources_open_own(res);
}

/* The rank's slice: its buffers, and in fallback mode its one MR */
static ucs_status_t uct_ibshare_slice_take(uct_ibshare_resources_t *res,
                                           const uct_ibshare_desc_t *desc)
{
    size_t offset = (size_t)desc->slice * desc->slice_size;
    void *address = UCS_PTR_BYTE_OFFSET(res->pool_address, offset);
    uct_ibshare_sys_mem_t mem;
    size_t ledger_size, mailbox_size;
    ucs_status_t status;

    if (res->mode == UCT_IBSHARE_GROUP_SHARED) {
        res->keys_address = res->pool_address;
        res->keys_length  = res->pool_size;
    } else {
        /* The founder's slice size, which may not be this rank's */
        uct_ibshare_sys_mem_get(&mem);
        status = uct_ibshare_pool_check_memory("UCX_IBSHARE_SLICE_SIZE",
                                               desc->slice_size,
                                               "this rank's slice",
                                               UCS_TRY, 1, &mem);
        if (status != UCS_OK) {
            return status;
        }

        res->pool_mr = uct_ibshare_resources_reg_mr(res, address,
                                                    desc->slice_size,
                                                    res->pool_iova + offset);
        if (res->pool_mr == NULL) {
            ucs_error("%s: registering slice %u (%zu bytes at IOVA 0x%lx) "
                      "failed: %m (check ulimit -l)", res->dev_name,
                      desc->slice, (size_t)desc->slice_size,
                      res->pool_iova + offset);
            return UCS_ERR_IO_ERROR;
        }
        res->keys_address = address;
        res->keys_length  = desc->slice_size;
    }

    res->va_offset = (uintptr_t)res->pool_address - res->pool_iova;
    ledger_size    = 0;
    if (res->mode == UCT_IBSHARE_GROUP_SHARED) {
        /* At the start of the slice, where a survivor looks for it */
        ledger_size = uct_ibshare_ledger_size(desc->slice_size);
        if (ledger_size == 0) {
            ucs_warn("%s: UCX_IBSHARE_SLICE_SIZE=%zu is too small for the "
                     "ledger of this rank's verbs objects: should it be "
                     "killed, they and its slice stay until the node group "
                     "ends", res->dev_name, (size_t)desc->slice_size);
        } else {
            status = uct_ibshare_ledger_open(address, ledger_size,
                                             &res->ledger);
            if (status != UCS_OK) {
                return status;
            }
        }
    }
    /* Shared mode: the slice's mailbox follows, where the processes of
     * the node look for it (uct_ibshare_resources_mailbox) */
    mailbox_size = 0;
    if ((res->mode == UCT_IBSHARE_GROUP_SHARED) &&
        (desc->slice_size >= ledger_size + 2 * UCT_IBSHARE_MAILBOX_SIZE)) {
        mailbox_size  = UCT_IBSHARE_MAILBOX_SIZE;
        res->mailbox  = UCS_PTR_BYTE_OFFSET(address, ledger_size);
        memset(res->mailbox, 0, mailbox_size);
    }
    res->slice_index    = desc->slice;
    res->num_slices     = desc->num_slices;
    res->slice_size     = desc->slice_size;
    res->mailbox_offset = ledger_size;
    status = uct_ibshare_slice_init(&res->slice,
                                    UCS_PTR_BYTE_OFFSET(address, ledger_size +
                                                        mailbox_size),
                                    desc->slice_size - ledger_size -
                                    mailbox_size);
    if (status != UCS_OK) {
        return status;
    }

    res->has_slice = 1;
    ucs_debug("%s: %s mode, slice %u of %u (%zu bytes), pool %zu bytes at "
              "IOVA 0x%lx", res->dev_name,
              uct_ibshare_group_mode_str(res->mode), desc->slice,
              desc->num_slices, (size_t)desc->slice_size, res->pool_size,
              res->pool_iova);
    return UCS_OK;
}

/* ------------------------------------------------------------ life cycle */

/* Everything but the node membership, in the order the man pages require:
 * the rank's QPs and CQs are gone (ifaces close before the md), then the MR,
 * the PD, the context */
static void uct_ibshare_resources_release(uct_ibshare_resources_t *res,
                                          int last_member)
{
    int destroy;
    int owned = uct_ibshare_resources_owned(res);

    if (res->has_slice) {
        uct_ibshare_slice_cleanup(&res->slice);
        res->has_slice = 0;
    }
    res->mailbox = NULL;
    uct_ibshare_ledger_close(res->ledger);
    res->ledger = NULL;

    /* Objects of our own go with us; shared ones only with the last member;
     * in a fork child, none: they are the parent's */
    destroy = owned &&
              ((res->mode != UCT_IBSHARE_GROUP_SHARED) || last_member);
    uct_ibshare_import_release(res->dev_name, res->context, res->pd,
                               res->pool_mr, destroy);
    res->context   = NULL;
    res->pd        = NULL;
    res->pool_mr   = NULL;
    res->va_offset = 0;

    if (res->pool_address != NULL) {
        uct_ibshare_pool_unmap(res->pool_address, res->pool_size);
        res->pool_address = NULL;
    }

    if (res->pool_fd >= 0) {
        close(res->pool_fd);
        res->pool_fd = -1;
    }
}

static void uct_ibshare_resources_leave(uct_ibshare_resources_t *res)
{
    int last = 1;

    if (res->node != NULL) {
        last      = uct_ibshare_node_leave(res->node);
        res->node = NULL;
    }
    uct_ibshare_resources_release(res, last);
}

static ucs_status_t
uct_ibshare_resources_open_private(uct_ibshare_resources_t *res)
{
    ucs_status_t status;

    res->mode = 0;
    status    = uct_ibshare_resources_open_own(res);
    if (status != UCS_OK) {
        return status;
    }

    ucs_debug("%s: private device context and PD", res->dev_name);
    return UCS_OK;
}

static ucs_status_t
uct_ibshare_resources_join(uct_ibshare_resources_t *res,
                           const uct_ibshare_share_params_t *params)
{
    uct_ibshare_found_arg_t found = {res, params};
    uct_ibshare_node_params_t node_params;
    uct_ibshare_node_member_t member;
    char retired_str[128];
    ucs_status_t status;
    int retired;

    /* The descriptor's GUID (uct_ibshare_group_create): a server of
     * another device is not our group's */
    status = uct_ibshare_device_guid(res->dev_name, &node_params.port_guid);
    if (status != UCS_OK) {
        return status;
    }

    node_params.runtime_dir = params->runtime_dir;
    node_params.job_key     = params->job_key;
    node_params.dev_name    = res->dev_name;
    node_params.timeout     = params->join_timeout;
    node_params.fault       = params->fault;
    node_params.create      = uct_ibshare_group_create;
    node_params.arg         = &found;
    node_params.reclaim     = uct_ibshare_group_reclaim;

    status = uct_ibshare_node_join(&node_params, &res->node, &member);
    if (status != UCS_OK) {
        /* A founder whose create() failed may have made some objects */
        uct_ibshare_resources_release(res, 1);
        return status;
    }

    res->founder = member.founder;
    if (!member.founder) {
        status = uct_ibshare_group_attach(res, &member, params);
        if (status != UCS_OK) {
            goto err_leave;
        }
    }
    /* Before any QP exists: a slice whose shared-mode holder dies is never
     * handed out again (its QPs outlive it in the shared context) */
    uct_ibshare_node_set_mode(res->node, res->mode);

    if (member.desc.slice == UCT_IBSHARE_DESC_NO_SLICE) {
        /* Under churn the pool runs out as killed members' slices stay
         * retired: say how many, the admin's cue (doc/node-sharing.md) */
        retired = uct_ibshare_node_slices_retired(res->node);
        retired_str[0] = '\0';
        if (retired > 0) {
            ucs_snprintf_zero(retired_str, sizeof(retired_str),
                              ", %d of them retired: held by members killed "
                              "in shared mode, whose objects were not "
                              "reclaimed", retired);
        }
        ucs_warn("%s: no free slice in the node pool (%u slices of %zu "
                 "bytes%s); this rank uses private resources (see "
                 "UCX_IBSHARE_POOL_SIZE)", res->dev_name,
                 member.desc.num_slices, (size_t)member.desc.slice_size,
                 retired_str);
        status = UCS_ERR_NO_ELEM; /* warned already */
        goto err_leave;
    }

    status = uct_ibshare_slice_take(res, &member.desc);
    if (status != UCS_OK) {
        goto err_leave;
    }

    uct_ibshare_resources_publish(res);
    return UCS_OK;

err_leave:
    uct_ibshare_resources_leave(res);
    return status;
}

static ucs_status_t
uct_ibshare_resources_open(uct_ibshare_resources_t *res,
                           const uct_ibshare_share_params_t *params)
{
    ucs_status_t status;

    if (params->mode == UCT_IBSHARE_MODE_PRIVATE) {
        return uct_ibshare_resources_open_private(res);
    }

    /* The settings' ranges were checked at md open */
    status = uct_ibshare_resources_join(res, params);
    if ((status == UCS_OK) || (params->mode == UCT_IBSHARE_MODE_SHARED)) {
        return status;
    }

    if (status != UCS_ERR_NO_ELEM) {
        ucs_warn("%s: could not join the node group (%s); this rank uses "
                 "private resources", res->dev_name,
                 ucs_status_string(status));
    }
    return uct_ibshare_resources_open_private(res);
}

static void uct_ibshare_resources_free(uct_ibshare_resources_t *res)
{
    pthread_mutex_destroy(&res->lock);
    ucs_free(res);
}

ucs_status_t
uct_ibshare_resources_get(const char *dev_name,
                          const uct_ibshare_share_params_t *params,
                          uct_ibshare_resources_t **res_p)
{
    uct_ibshare_resources_t *res;
    ucs_status_t status;

    pthread_mutex_lock(&uct_ibshare_resources_lock);
    ucs_list_for_each(res, &uct_ibshare_resources_list, list) {
        /* A fork child opens its own: those it inherited are the parent's */
        if (!strcmp(res->dev_name, dev_name) &&
            uct_ibshare_resources_owned(res)) {
            ++res->refcount;
            *res_p = res;
            status = UCS_OK;
            goto out;
        }
    }

    res = ucs_calloc(1, sizeof(*res), "ibshare resources");
    if (res == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto out;
    }

    res->refcount  = 1;
    res->pool_fd   = -1;
    res->owner_pid = getpid();
    ucs_strncpy_zero(res->dev_name, dev_name, sizeof(res->dev_name));
    pthread_mutex_init(&res->lock, NULL);

    status = uct_ibshare_resources_open(res, params);
    if (status != UCS_OK) {
        uct_ibshare_resources_release(res, 1);
        uct_ibshare_resources_free(res);
        goto out;
    }

    ucs_list_add_tail(&uct_ibshare_resources_list, &res->list);
    *res_p = res;

out:
    pthread_mutex_unlock(&uct_ibshare_resources_lock);
    return status;
}

void uct_ibshare_resources_put(uct_ibshare_resources_t *res)
{
    pthread_mutex_lock(&uct_ibshare_resources_lock);
    if (--res->refcount > 0) {
        pthread_mutex_unlock(&uct_ibshare_resources_lock);
        return;
    }

    ucs_list_del(&res->list);
    pthread_mutex_unlock(&uct_ibshare_resources_lock);

    ucs_info("%s: %s resources: %lu memory registrations, %lu avoided, %lu "
             "buffers beyond the slice", res->dev_name,
             res->mode ? uct_ibshare_group_mode_str(res->mode) : "private",
             res->counters.regs_done, res->counters.regs_avoided,
             res->counters.slice_overflows);
    uct_ibshare_resources_leave(res);
    uct_ibshare_resources_free(res);
}

/* ------------------------------------------------------------ buffers */

ucs_status_t uct_ibshare_resources_buf_alloc(uct_ibshare_resources_t *res,
                                             size_t length, const char *name,
                                             uct_ibshare_buf_t *buf)
{
    ucs_status_t status;
    size_t alloc_length;

    if (res->has_slice) {
        alloc_length = length;
        pthread_mutex_lock(&res->lock);
        status = uct_ibshare_slice_alloc(&res->slice, &alloc_length,
                                         &buf->address);
        if (status != UCS_OK) {
            /* Normal under load (pools grow): counted, nothing is lost */
            ++res->counters.slice_overflows;
            ucs_diag("%s: the rank's slice of the node pool is full (%zu of "
                     "%zu bytes used) allocating %zu bytes for %s; "
                     "registering extra memory (raise UCX_IBSHARE_SLICE_SIZE "
                     "or lower the queue lengths)", res->dev_name,
                     res->slice.used, res->slice.size, length, name);
        }
        pthread_mutex_unlock(&res->lock);
        if (status == UCS_OK) {
            buf->length = alloc_length;
            buf->lkey   = res->pool_mr->lkey;
            buf->mr     = NULL;
            return UCS_OK;
        }
    }

    length       = ucs_align_up(length, UCT_IBSHARE_POOL_ALIGN);
    buf->address = mmap(NULL, length, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf->address == MAP_FAILED) {
        ucs_error("%s: mmap(%zu) for %s failed: %m", res->dev_name, length,
                  name);
        return UCS_ERR_NO_MEMORY;
    }

    /* At the same offset from its address as the pool, so one translation
     * serves every buffer */
    buf->mr = uct_ibshare_resources_reg_mr(res, buf->address, length,
                                           (uintptr_t)buf->address -
                                           res->va_offset);
    if (buf->mr == NULL) {
        ucs_error("%s: ibv_reg_mr(%zu bytes for %s) failed: %m",
                  res->dev_name, length, name);
        munmap(buf->address, length);
        return UCS_ERR_IO_ERROR;
    }

    buf->length = length;
    buf->lkey   = buf->mr->lkey;
    return UCS_OK;
}

void uct_ibshare_resources_buf_free(uct_ibshare_resources_t *res,
                                    uct_ibshare_buf_t *buf)
{
    if (buf->mr == NULL) {
        pthread_mutex_lock(&res->lock);
        uct_ibshare_slice_free(&res->slice, buf->address);
        pthread_mutex_unlock(&res->lock);
        return;
    }

    uct_ibshare_resources_dereg_mr(res, buf->mr);
    munmap(buf->address, buf->length);
}

/* ------------------------------------------------------------ mpool */

typedef struct {
    uct_ibshare_resources_t      *res;
    uct_ibshare_mpool_obj_init_t obj_init;
} uct_ibshare_mpool_priv_t;

/* Each chunk starts with the buffer it came from */
typedef struct {
    uct_ibshare_buf_t            buf;
} UCS_V_ALIGNED(UCS_SYS_CACHE_LINE_SIZE) uct_ibshare_mpool_chunk_hdr_t;

static ucs_status_t uct_ibshare_mpool_chunk_alloc(ucs_mpool_t *mp,
                                                  size_t *size_p,
                                                  void **chunk_p)
{
    uct_ibshare_mpool_priv_t *priv = ucs_mpool_priv(mp);
    uct_ibshare_mpool_chunk_hdr_t *hdr;
    uct_ibshare_buf_t buf;
    ucs_status_t status;

    status = uct_ibshare_resources_buf_alloc(priv->res,
                                             *size_p + sizeof(*hdr),
                                             ucs_mpool_name(mp), &buf);
    if (status != UCS_OK) {
        return status;
    }

    hdr      = buf.address;
    hdr->buf = buf;
    *size_p  = buf.length - sizeof(*hdr);
    *chunk_p = hdr + 1;
    return UCS_OK;
}

static void uct_ibshare_mpool_chunk_release(ucs_mpool_t *mp, void *chunk)
{
    uct_ibshare_mpool_priv_t *priv     = ucs_mpool_priv(mp);
    uct_ibshare_mpool_chunk_hdr_t *hdr = (uct_ibshare_mpool_chunk_hdr_t*)
                                         chunk - 1;
    uct_ibshare_buf_t buf              = hdr->buf;

    uct_ibshare_resources_buf_free(priv->res, &buf);
}

static void uct_ibshare_mpool_obj_init(ucs_mpool_t *mp, void *obj,
                                       void *chunk)
{
    uct_ibshare_mpool_priv_t *priv     = ucs_mpool_priv(mp);
    uct_ibshare_mpool_chunk_hdr_t *hdr = (uct_ibshare_mpool_chunk_hdr_t*)
                                         chunk - 1;

    priv->obj_init(obj, hdr->buf.lkey);
}

static ucs_mpool_ops_t uct_ibshare_mpool_ops = {
    .chunk_alloc   = uct_ibshare_mpool_chunk_alloc,
    .chunk_release = uct_ibshare_mpool_chunk_release,
    .obj_init      = uct_ibshare_mpool_obj_init,
    .obj_cleanup   = NULL,
    .obj_str       = NULL
};

ucs_status_t uct_ibshare_mpool_init(uct_ibshare_resources_t *res,
                                    ucs_mpool_t *mp, size_t elem_size,
                                    size_t align_offset, size_t alignment,
                                    unsigned elems_per_chunk,
                                    unsigned max_elems,
                                    uct_ibshare_mpool_obj_init_t obj_init,
                                    const char *name)
{
    uct_ibshare_mpool_priv_t *priv;
    ucs_status_t status;

    status = uct_ibshare_ucx_mpool_init(mp, sizeof(*priv), elem_size,
                                        align_offset, alignment,
                                        elems_per_chunk, max_elems,
                                        &uct_ibshare_mpool_ops, name);
    if (status != UCS_OK) {
        return status;
    }

    priv           = ucs_mpool_priv(mp);
    priv->res      = res;
    priv->obj_init = obj_init;
    return UCS_OK;
}
