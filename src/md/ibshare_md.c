/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The ibshare memory domain: the verbs device context, the protection domain
 * and memory registration of one device.
 */
#include "ibshare_md.h"
#include "ibshare_device.h"

#include <ucm/api/ucm.h>
#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/sys/string.h>
#include <ucs/type/class.h>

#include <limits.h>
#include <string.h>
#include <sys/mman.h>


typedef struct uct_ibshare_rcache_region {
    ucs_rcache_region_t       super;
    uct_ibshare_mem_t         memh;
} uct_ibshare_rcache_region_t;


ucs_config_field_t uct_ibshare_md_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_ibshare_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"RCACHE", "try",
     "Cache memory registrations of user buffers (UCX's registration cache):\n"
     " yes - use the cache, fail if it cannot be created\n"
     " no  - register and deregister on every request\n"
     " try - use the cache if it can be created",
     ucs_offsetof(uct_ibshare_md_config_t, rcache),
     UCS_CONFIG_TYPE_TERNARY},

    {"", "", NULL,
     ucs_offsetof(uct_ibshare_md_config_t, rcache_cfg),
     UCS_CONFIG_TYPE_TABLE(UCT_IBSHARE_RCACHE_CONFIG_TABLE)},

    {"MODE", "auto",
     "How the ranks of a job on one node share the device:\n"
     " auto    - one node group per job and device: the leader opens the\n"
     "           device, the others import its PD and the pool MR; where the\n"
     "           provider cannot import (every one but mlx5), each rank has\n"
     "           its own PD and registers only its slice of the node pool\n"
     " shared  - like auto, but fail when the provider cannot import\n"
     " private - never join a group: own context, PD and registrations",
     ucs_offsetof(uct_ibshare_md_config_t, mode),
     UCS_CONFIG_TYPE_ENUM(uct_ibshare_mode_names)},

    {"JOB_KEY", "",
     "Which processes form a node group. Empty: taken from the launcher\n"
     "(PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, SLURM_JOB_ID.SLURM_STEP_ID,\n"
     "or under MPICH's hydra the pid of the node's hydra_pmi_proxy); a\n"
     "process without any forms a group of its own. At most 127 characters.",
     ucs_offsetof(uct_ibshare_md_config_t, job_key),
     UCS_CONFIG_TYPE_STRING},

    {"RUNTIME_DIR", "auto",
     "Where the node group keeps its lock and socket, in a subdirectory\n"
     "ucx-ibshare-<uid> that only the user can enter. auto: $XDG_RUNTIME_DIR\n"
     "if it is set and a writable directory of the user, else /tmp. Every\n"
     "rank of a job on a node must use the same directory. Not empty, at\n"
     "most 255 characters.",
     ucs_offsetof(uct_ibshare_md_config_t, runtime_dir),
     UCS_CONFIG_TYPE_STRING},

    {"POOL_SIZE", "auto",
     "Size of the node pool, a multiple of the slice size: 1 to 4096 slices,\n"
     "at most the node's available memory (MemAvailable). auto: one slice\n"
     "per rank on the node (OMPI_COMM_WORLD_LOCAL_SIZE, hydra's\n"
     "MPI_LOCALNRANKS, or srun's SLURM_STEP_TASKS_PER_NODE: its most) plus\n"
     "2 for ranks that join later, or 16 slices if the launcher does not say.",
     ucs_offsetof(uct_ibshare_md_config_t, pool_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"SLICE_SIZE", "11m",
     "Each rank's part of the node pool: its send and receive buffers, its\n"
     "handshake buffers and the memory it allocates through the md. A\n"
     "multiple of 4096 from 4k to 1t, at most the node's available memory\n"
     "(MemAvailable) and, where a rank pins it, RLIMIT_MEMLOCK (ulimit -l).",
     ucs_offsetof(uct_ibshare_md_config_t, slice_size),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"POOL_HUGE", "try",
     "Back the node pool with huge pages: yes, no, or try (use them if the\n"
     "system has enough free).",
     ucs_offsetof(uct_ibshare_md_config_t, pool_huge),
     UCS_CONFIG_TYPE_TERNARY},

    {"JOIN_TIMEOUT", "30s",
     "Longest wait for any step of joining the node group; then the rank\n"
     "uses private resources (or fails with MODE=shared). Above 0, at most\n"
     "1 hour.",
     ucs_offsetof(uct_ibshare_md_config_t, join_timeout),
     UCS_CONFIG_TYPE_TIME},

    {"FAULT", "none",
     "For tests only: make the serving member die or misbehave at one step\n"
     "of a hand-off (create_exit, accept_exit, join_exit, desc_exit, stall,\n"
     "garbage, truncated), or make this rank's import of the leader's MR\n"
     "fail (import_fail: it then runs its own PD, as in fallback mode).",
     ucs_offsetof(uct_ibshare_md_config_t, fault),
     UCS_CONFIG_TYPE_ENUM(uct_ibshare_node_fault_names)},

    {NULL}
};


const char *uct_ibshare_config_value_str(unsigned long value,
                                         unsigned long wrap, char *buf,
                                         size_t max)
{
    if ((wrap == ULONG_MAX) && (value == UCS_ULUNITS_AUTO)) {
        return "auto";
    } else if ((wrap == ULONG_MAX) && (value == UCS_ULUNITS_INF)) {
        return "inf";
    } else if (value > wrap / 2) {
        ucs_snprintf_zero(buf, max, "-%lu", wrap - value + 1);
    } else {
        ucs_snprintf_zero(buf, max, "%lu", value);
    }
    return buf;
}

ucs_status_t uct_ibshare_md_config_check(const uct_ibshare_md_config_t *config,
                                         const uct_ibshare_sys_mem_t *mem)
{
    size_t slice = config->slice_size;
    size_t pool  = config->pool_size;
    char value[32];

    if ((slice < UCT_IBSHARE_POOL_ALIGN) ||
        (slice > UCT_IBSHARE_SLICE_SIZE_MAX) ||
        (slice % UCT_IBSHARE_POOL_ALIGN)) {
        ucs_error("UCX_IBSHARE_SLICE_SIZE=%s is out of range (accepted: a "
                  "multiple of %d from %d to %zu bytes, 1t)",
                  uct_ibshare_config_value_str(slice, SIZE_MAX, value,
                                               sizeof(value)),
                  UCT_IBSHARE_POOL_ALIGN, UCT_IBSHARE_POOL_ALIGN,
                  (size_t)UCT_IBSHARE_SLICE_SIZE_MAX);
        return UCS_ERR_INVALID_PARAM;
    }

    /* Whole slices, as many as the descriptor can carry; the division
     * comes first so a wrapped negative value cannot overflow */
    if ((pool != UCS_MEMUNITS_AUTO) &&
        ((pool < slice) || (pool % slice) ||
         (pool / slice > UCT_IBSHARE_DESC_MAX_SLICES))) {
        ucs_error("UCX_IBSHARE_POOL_SIZE=%s is out of range (accepted: auto, "
                  "or a multiple of UCX_IBSHARE_SLICE_SIZE=%zu from 1 to %d "
                  "slices, %zu bytes)",
                  uct_ibshare_config_value_str(pool, SIZE_MAX, value,
                                               sizeof(value)), slice,
                  UCT_IBSHARE_DESC_MAX_SLICES,
                  (size_t)UCT_IBSHARE_DESC_MAX_SLICES * slice);
        return UCS_ERR_INVALID_PARAM;
    }

    if (!((config->join_timeout > 0) &&
          (config->join_timeout <= UCT_IBSHARE_JOIN_TIMEOUT_MAX))) {
        ucs_error("UCX_IBSHARE_JOIN_TIMEOUT=%gs is out of range (accepted: "
                  "above 0, at most %.0fs)", config->join_timeout,
                  UCT_IBSHARE_JOIN_TIMEOUT_MAX);
        return UCS_ERR_INVALID_PARAM;
    }

    /* Copied into fixed buffers: a longer value would be cut silently, and
     * a cut key could join another job's group */
    if (strlen(config->job_key) >=
        ucs_field_sizeof(uct_ibshare_share_params_t, job_key)) {
        ucs_error("UCX_IBSHARE_JOB_KEY has %zu characters (accepted: at most "
                  "%zu)", strlen(config->job_key),
                  ucs_field_sizeof(uct_ibshare_share_params_t, job_key) - 1);
        return UCS_ERR_INVALID_PARAM;
    }

    if ((config->runtime_dir[0] == '\0') ||
        (strlen(config->runtime_dir) >=
         ucs_field_sizeof(uct_ibshare_share_params_t, runtime_dir))) {
        ucs_error("UCX_IBSHARE_RUNTIME_DIR has %zu characters (accepted: 1 "
                  "to %zu)", strlen(config->runtime_dir),
                  ucs_field_sizeof(uct_ibshare_share_params_t, runtime_dir) -
                  1);
        return UCS_ERR_INVALID_PARAM;
    }

    /* A rank fills its slice with its own buffers: one larger than the
     * node's memory gets the process killed by the OOM killer as the slice
     * is pinned. The pool and the pinning limit are checked where they are
     * created and pinned, since they depend on the group's mode */
    if (config->mode != UCT_IBSHARE_MODE_PRIVATE) {
        return uct_ibshare_pool_check_memory("UCX_IBSHARE_SLICE_SIZE", slice,
                                             "each rank's slice",
                                             config->pool_huge, 0, mem);
    }
    return UCS_OK;
}

static ucs_status_t uct_ibshare_mr_reg(uct_ibshare_md_t *md, void *address,
                                       size_t length, unsigned flags,
                                       uct_ibshare_mem_t *memh)
{
    struct ibv_mr *mr;

    mr = uct_ibshare_resources_reg_mr(md->res, address, length,
                                      (uintptr_t)address);
    if (mr == NULL) {
        uct_md_log_mem_reg_error(flags,
                                 "%s: ibv_reg_mr(address=%p length=%zu) "
                                 "failed: %m", md->dev_name, address, length);
        return UCS_ERR_IO_ERROR;
    }

    memh->mr        = mr;
    memh->lkey      = mr->lkey;
    memh->rkey      = mr->rkey;
    memh->va_offset = 0;
    return UCS_OK;
}

static void uct_ibshare_mr_dereg(uct_ibshare_md_t *md, uct_ibshare_mem_t *memh)
{
    int ret = uct_ibshare_resources_dereg_mr(md->res, memh->mr);

    if (ret != 0) {
        ucs_warn("%s: ibv_dereg_mr() failed: %s", md->dev_name, strerror(ret));
    }
}

static ucs_status_t
uct_ibshare_rcache_mem_reg_cb(void *context, ucs_rcache_t *rcache, void *arg,
                              ucs_rcache_region_t *rregion,
                              uint16_t rcache_mem_reg_flags)
{
    uct_ibshare_rcache_region_t *region =
            ucs_derived_of(rregion, uct_ibshare_rcache_region_t);
    unsigned flags = *(unsigned*)arg;

    if (rcache_mem_reg_flags & UCS_RCACHE_MEM_REG_HIDE_ERRORS) {
        flags |= UCT_MD_MEM_FLAG_HIDE_ERRORS;
    }

    return uct_ibshare_mr_reg(context, (void*)region->super.super.start,
                              region->super.super.end -
                              region->super.super.start,
                              flags, &region->memh);
}

static void uct_ibshare_rcache_mem_dereg_cb(void *context,
                                            ucs_rcache_t *rcache,
                                            ucs_rcache_region_t *rregion)
{
    uct_ibshare_rcache_region_t *region =
            ucs_derived_of(rregion, uct_ibshare_rcache_region_t);

    uct_ibshare_mr_dereg(context, &region->memh);
}

static void uct_ibshare_rcache_dump_region_cb(void *context,
                                              ucs_rcache_t *rcache,
                                              ucs_rcache_region_t *rregion,
                                              char *buf, size_t max)
{
    uct_ibshare_rcache_region_t *region =
            ucs_derived_of(rregion, uct_ibshare_rcache_region_t);

    snprintf(buf, max, "lkey 0x%x rkey 0x%x", region->memh.lkey,
             region->memh.rkey);
}

static ucs_rcache_ops_t uct_ibshare_rcache_ops = {
    .mem_reg     = uct_ibshare_rcache_mem_reg_cb,
    .mem_dereg   = uct_ibshare_rcache_mem_dereg_cb,
    UCT_IBSHARE_RCACHE_OPS_OWN
    .dump_region = uct_ibshare_rcache_dump_region_cb
};

static ucs_status_t uct_ibshare_md_rcache_create(uct_ibshare_md_t *md)
{
    ucs_rcache_params_t params;

    uct_ibshare_ucx_rcache_params(&params, &md->rcache_cfg);
    params.region_struct_size = sizeof(uct_ibshare_rcache_region_t);
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.context            = md;
    params.ops                = &uct_ibshare_rcache_ops;

    return ucs_rcache_create(&params, md->dev_name, NULL, &md->rcache);
}

static void uct_ibshare_md_resources_release(uct_ibshare_md_t *md)
{
    if (md->rcache != NULL) {
        ucs_rcache_destroy(md->rcache);
        md->rcache = NULL;
    }

    if (md->res != NULL) {
        uct_ibshare_resources_put(md->res);
        md->res     = NULL;
        md->context = NULL;
        md->pd      = NULL;
    }
}

static ucs_status_t uct_ibshare_md_resources_open(uct_ibshare_md_t *md)
{
    uct_ibshare_resources_t *res;
    ucs_status_t status;

    status = uct_ibshare_resources_get(md->dev_name, &md->share, &md->res);
    if (status != UCS_OK) {
        return status;
    }

    res         = md->res;
    md->context = res->context;
    md->pd      = res->pd;
    if (res->pool_mr != NULL) {
        md->pool_memh.mr        = NULL;
        md->pool_memh.lkey      = res->pool_mr->lkey;
        md->pool_memh.rkey      = res->pool_mr->rkey;
        md->pool_memh.va_offset = res->va_offset;
    }

    if (md->rcache_mode != UCS_NO) {
        status = uct_ibshare_md_rcache_create(md);
        if (status != UCS_OK) {
            if (md->rcache_mode == UCS_YES) {
                ucs_error("%s: failed to create the registration cache: %s",
                          md->dev_name, ucs_status_string(status));
                goto err;
            }
            ucs_debug("%s: registration cache unavailable (%s), registering "
                      "directly", md->dev_name, ucs_status_string(status));
        }
    }

    return UCS_OK;

err:
    uct_ibshare_md_resources_release(md);
    return status;
}

ucs_status_t uct_ibshare_md_resources(uct_ibshare_md_t *md)
{
    ucs_status_t status = UCS_OK;

    pthread_mutex_lock(&md->lock);
    if (md->res == NULL) {
        status = uct_ibshare_md_resources_open(md);
    }
    pthread_mutex_unlock(&md->lock);
    return status;
}

static ucs_status_t uct_ibshare_md_query(uct_md_h uct_md, uct_md_attr_t *attr)
{
    uct_ibshare_md_t *md = ucs_derived_of(uct_md, uct_ibshare_md_t);
    int pool             = (md->share.mode != UCT_IBSHARE_MODE_PRIVATE);

    attr->cap.flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH |
                                 UCT_MD_FLAG_NEED_RKEY | UCT_MD_FLAG_ADVISE |
                                 (pool ? UCT_MD_FLAG_ALLOC : 0);
    attr->cap.reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.alloc_mem_types  = pool ? UCS_BIT(UCS_MEMORY_TYPE_HOST) : 0;
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.detect_mem_types = 0;
    attr->cap.max_alloc        = pool ? md->share.slice_size : 0;
    attr->cap.max_reg          = ULONG_MAX;
    attr->rkey_packed_size     = sizeof(uct_ibshare_packed_rkey_t);
    /* Same estimate UCX uses for its own verbs md */
    attr->reg_cost             = ucs_linear_func_make(16e-6, 0.06e-9);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t uct_ibshare_mem_reg(uct_md_h uct_md, void *address,
                                        size_t length, unsigned flags,
                                        uct_mem_h *memh_p)
{
    uct_ibshare_md_t *md = ucs_derived_of(uct_md, uct_ibshare_md_t);
    uct_ibshare_rcache_region_t *region;
    ucs_rcache_region_t *rregion;
    uct_ibshare_mem_t *memh;
    ucs_status_t status;

    status = uct_ibshare_md_resources(md);
    if (status != UCS_OK) {
        return status;
    }

    /* Pool memory the rank holds keys for: nothing to register */
    if (uct_ibshare_resources_covers(md->res, address, length)) {
        uct_ibshare_resources_count_avoided(md->res);
        *memh_p = &md->pool_memh;
        return UCS_OK;
    }

    if (md->rcache != NULL) {
        status = uct_ibshare_ucx_rcache_get(md->rcache, address, length,
                                            PROT_READ | PROT_WRITE, &flags,
                                            &rregion);
        if (status != UCS_OK) {
            return status;
        }
        region  = ucs_derived_of(rregion, uct_ibshare_rcache_region_t);
        *memh_p = &region->memh;
        return UCS_OK;
    }

    memh = ucs_malloc(sizeof(*memh), "ibshare memh");
    if (memh == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    status = uct_ibshare_mr_reg(md, address, length, flags, memh);
    if (status != UCS_OK) {
        ucs_free(memh);
        return status;
    }

    *memh_p = memh;
    return UCS_OK;
}

static ucs_status_t
uct_ibshare_mem_dereg(uct_md_h uct_md, const uct_md_mem_dereg_params_t *params)
{
    uct_ibshare_md_t *md = ucs_derived_of(uct_md, uct_ibshare_md_t);
    uct_ibshare_mem_t *memh;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);

    memh = params->memh;
    if (memh == &md->pool_memh) {
        return UCS_OK;
    }

    if (md->rcache != NULL) {
        ucs_rcache_region_put(md->rcache,
                              &ucs_container_of(memh,
                                                uct_ibshare_rcache_region_t,
                                                memh)->super);
        return UCS_OK;
    }

    uct_ibshare_mr_dereg(md, memh);
    ucs_free(memh);
    return UCS_OK;
}

/* Memory from the rank's slice of the node pool, with the pool's keys */
typedef struct uct_ibshare_alloc {
    uct_ibshare_mem_t         memh;         /* first: what UCT sees */
    uct_ibshare_buf_t         buf;
} uct_ibshare_alloc_t;

static ucs_status_t uct_ibshare_mem_alloc(uct_md_h uct_md, size_t *length_p,
                                          void **address_p,
                                          ucs_memory_type_t mem_type,
                                          unsigned flags,
                                          const char *alloc_name,
                                          uct_mem_h *memh_p)
{
    uct_ibshare_md_t *md = ucs_derived_of(uct_md, uct_ibshare_md_t);
    uct_ibshare_alloc_t *alloc;
    ucs_status_t status;

    if (mem_type != UCS_MEMORY_TYPE_HOST) {
        return UCS_ERR_UNSUPPORTED;
    }

    status = uct_ibshare_md_resources(md);
    if (status != UCS_OK) {
        return status;
    }

    alloc = ucs_malloc(sizeof(*alloc), "ibshare alloc");
    if (alloc == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    /* From the slice; a rank without one (private resources, or the slice
     * is full) gets memory registered for it, since UCX does not fall back
     * to another method once an md has failed */
    status = uct_ibshare_resources_buf_alloc(md->res, *length_p, alloc_name,
                                             &alloc->buf);
    if (status != UCS_OK) {
        ucs_free(alloc);
        return status;
    }

    if (alloc->buf.mr == NULL) {
        uct_ibshare_resources_count_avoided(md->res);
        alloc->memh = md->pool_memh;
    } else {
        alloc->memh.mr        = NULL; /* freed with the buffer */
        alloc->memh.lkey      = alloc->buf.mr->lkey;
        alloc->memh.rkey      = alloc->buf.mr->rkey;
        alloc->memh.va_offset = md->res->va_offset;
    }

    *length_p   = alloc->buf.length;
    *address_p  = alloc->buf.address;
    *memh_p     = &alloc->memh;
    return UCS_OK;
}

static ucs_status_t uct_ibshare_mem_free(uct_md_h uct_md, uct_mem_h memh)
{
    uct_ibshare_md_t *md       = ucs_derived_of(uct_md, uct_ibshare_md_t);
    uct_ibshare_alloc_t *alloc = ucs_container_of(memh, uct_ibshare_alloc_t,
                                                  memh);

    uct_ibshare_resources_buf_free(md->res, &alloc->buf);
    ucs_free(alloc);
    return UCS_OK;
}

static ucs_status_t
uct_ibshare_mkey_pack(uct_md_h uct_md, uct_mem_h uct_memh,
                      const uct_md_mkey_pack_params_t *params,
                      void *rkey_buffer)
{
    const uct_ibshare_mem_t *memh = uct_memh;
    uct_ibshare_packed_rkey_t *packed = rkey_buffer;

    packed->rkey      = memh->rkey;
    packed->va_offset = memh->va_offset;
    return UCS_OK;
}

ucs_status_t uct_ibshare_rkey_unpack(uct_component_t *component,
                                     const void *rkey_buffer,
                                     uct_rkey_t *rkey_p, void **handle_p)
{
    const uct_ibshare_packed_rkey_t *packed = rkey_buffer;
    uct_ibshare_rkey_t *rkey;

    rkey = ucs_malloc(sizeof(*rkey), "ibshare rkey");
    if (rkey == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    rkey->rkey      = packed->rkey;
    rkey->va_offset = packed->va_offset;
    *rkey_p         = (uintptr_t)rkey;
    *handle_p       = rkey;
    return UCS_OK;
}

ucs_status_t uct_ibshare_rkey_release(uct_component_t *component,
                                      uct_rkey_t rkey, void *handle)
{
    ucs_free(handle);
    return UCS_OK;
}

static void uct_ibshare_md_close(uct_md_h uct_md)
{
    uct_ibshare_md_t *md = ucs_derived_of(uct_md, uct_ibshare_md_t);

    if ((md->res != NULL) && !uct_ibshare_resources_owned(md->res)) {
        /*
         * A fork child leaves the md as it found it. UCX takes an rcache
         * down through its async thread's handler table, which the child
         * has in whatever state the parent's thread left it at the fork
         * (a lock held: the destroy waited forever), and the rcache, whose
         * memory hooks stay, calls back into the md and its resources.
         * They are the child's memory, gone with it; nothing here is the
         * child's to destroy (see uct_ibshare_resources_owned).
         */
        ucs_debug("%s: md %p closed in a fork child: left as inherited",
                  md->dev_name, md);
        return;
    }

    uct_ibshare_md_resources_release(md);
    pthread_mutex_destroy(&md->lock);
    ucs_free(md);
}

/* Every registration is pinned (no on-demand paging): the memory is there
 * already, which is all that UCT_MADV_WILLNEED asks */
static ucs_status_t uct_ibshare_mem_advise(uct_md_h uct_md, uct_mem_h memh,
                                           void *addr, size_t length,
                                           unsigned advice)
{
    if (advice != UCT_MADV_WILLNEED) {
        ucs_error("ibshare: memory advice %u is not supported", advice);
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_OK;
}

UCT_IBSHARE_MD_OPS_ADAPT(uct_ibshare_md_query, uct_ibshare_mem_alloc,
                         uct_ibshare_mem_reg, uct_ibshare_mkey_pack)

static uct_md_ops_t uct_ibshare_md_ops = {
    .close                  = uct_ibshare_md_close,
    .query                  = UCT_IBSHARE_OP(uct_ibshare_md_query),
    .mem_alloc              = UCT_IBSHARE_OP(uct_ibshare_mem_alloc),
    .mem_free               = uct_ibshare_mem_free,
    .mem_reg                = UCT_IBSHARE_OP(uct_ibshare_mem_reg),
    .mem_dereg              = uct_ibshare_mem_dereg,
    .mem_advise             = uct_ibshare_mem_advise,
    .mkey_pack              = UCT_IBSHARE_OP(uct_ibshare_mkey_pack),
    .detect_memory_type     = (uct_md_detect_memory_type_func_t)
                                      ucs_empty_function_return_unsupported,
    UCT_IBSHARE_MD_OPS_OWN
};

ucs_status_t uct_ibshare_md_open(uct_component_t *component,
                                 const char *md_name,
                                 const uct_md_config_t *uct_md_config,
                                 uct_md_h *md_p)
{
    const uct_ibshare_md_config_t *config =
            ucs_derived_of(uct_md_config, uct_ibshare_md_config_t);
    uct_ibshare_sys_mem_t mem;
    uct_ibshare_md_t *md;
    ucs_status_t status;

    /* Before any resource: the device is opened at first use */
    uct_ibshare_sys_mem_get(&mem);
    status = uct_ibshare_md_config_check(config, &mem);
    if (status != UCS_OK) {
        return status;
    }

    md = ucs_calloc(1, sizeof(*md), "ibshare md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    md->super.ops       = &uct_ibshare_md_ops;
    md->super.component = component;
    md->rcache_mode     = config->rcache;
    md->rcache_cfg      = config->rcache_cfg;
    uct_ibshare_share_params_init(&md->share, config->mode, config->job_key,
                                  config->runtime_dir, config->pool_size,
                                  config->slice_size, config->pool_huge,
                                  config->join_timeout, config->fault);
    ucs_strncpy_zero(md->dev_name, md_name, sizeof(md->dev_name));
    pthread_mutex_init(&md->lock, NULL);

    *md_p = &md->super;
    return UCS_OK;
}
