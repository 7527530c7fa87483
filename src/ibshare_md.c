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

#include <string.h>
#include <sys/mman.h>


#define UCT_IBSHARE_MR_ACCESS \
    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)


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
     UCS_CONFIG_TYPE_TABLE(uct_md_config_rcache_table)},

    {NULL}
};


static ucs_status_t uct_ibshare_mr_reg(uct_ibshare_md_t *md, void *address,
                                       size_t length, unsigned flags,
                                       uct_ibshare_mem_t *memh)
{
    struct ibv_mr *mr;

    mr = ibv_reg_mr(md->pd, address, length, UCT_IBSHARE_MR_ACCESS);
    if (mr == NULL) {
        uct_md_log_mem_reg_error(flags,
                                 "%s: ibv_reg_mr(address=%p length=%zu) "
                                 "failed: %m", md->dev_name, address, length);
        return UCS_ERR_IO_ERROR;
    }

    memh->mr   = mr;
    memh->lkey = mr->lkey;
    memh->rkey = mr->rkey;
    return UCS_OK;
}

static void uct_ibshare_mr_dereg(uct_ibshare_md_t *md, uct_ibshare_mem_t *memh)
{
    int ret = ibv_dereg_mr(memh->mr);

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
    .dump_region = uct_ibshare_rcache_dump_region_cb
};

static ucs_status_t uct_ibshare_md_rcache_create(uct_ibshare_md_t *md)
{
    const uct_md_rcache_config_t *cfg = &md->config.rcache_cfg;
    ucs_rcache_params_t params;

    params.region_struct_size = sizeof(uct_ibshare_rcache_region_t);
    params.alignment          = cfg->alignment;
    params.max_alignment      = ucs_get_page_size();
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority = cfg->event_prio;
    params.context            = md;
    params.ops                = &uct_ibshare_rcache_ops;
    params.flags              = cfg->purge_on_fork ?
                                UCS_RCACHE_FLAG_PURGE_ON_FORK : 0;
    params.max_regions        = cfg->max_regions;
    params.max_size           = cfg->max_size;
    params.max_unreleased     = cfg->max_unreleased;

    return ucs_rcache_create(&params, md->dev_name, NULL, &md->rcache);
}

static void uct_ibshare_md_resources_release(uct_ibshare_md_t *md)
{
    int ret;

    if (md->rcache != NULL) {
        ucs_rcache_destroy(md->rcache);
        md->rcache = NULL;
    }

    if (md->pd != NULL) {
        ret = ibv_dealloc_pd(md->pd);
        if (ret != 0) {
            ucs_warn("%s: ibv_dealloc_pd() failed: %s", md->dev_name,
                     strerror(ret));
        }
        md->pd = NULL;
    }

    if (md->context != NULL) {
        ibv_close_device(md->context);
        md->context = NULL;
    }
}

static ucs_status_t uct_ibshare_md_resources_open(uct_ibshare_md_t *md)
{
    ucs_status_t status;

    status = uct_ibshare_device_open(md->dev_name, &md->context);
    if (status != UCS_OK) {
        return status;
    }

    md->pd = ibv_alloc_pd(md->context);
    if (md->pd == NULL) {
        ucs_error("%s: ibv_alloc_pd() failed: %m", md->dev_name);
        status = UCS_ERR_NO_RESOURCE;
        goto err;
    }

    if (md->config.rcache != UCS_NO) {
        status = uct_ibshare_md_rcache_create(md);
        if (status != UCS_OK) {
            if (md->config.rcache == UCS_YES) {
                ucs_error("%s: failed to create the registration cache: %s",
                          md->dev_name, ucs_status_string(status));
                goto err;
            }
            ucs_debug("%s: registration cache unavailable (%s), registering "
                      "directly", md->dev_name, ucs_status_string(status));
        }
    }

    ucs_debug("%s: opened device context and PD", md->dev_name);
    return UCS_OK;

err:
    uct_ibshare_md_resources_release(md);
    return status;
}

ucs_status_t uct_ibshare_md_resources(uct_ibshare_md_t *md)
{
    ucs_status_t status = UCS_OK;

    pthread_mutex_lock(&md->lock);
    if (md->pd == NULL) {
        status = uct_ibshare_md_resources_open(md);
    }
    pthread_mutex_unlock(&md->lock);
    return status;
}

static ucs_status_t uct_ibshare_md_query(uct_md_h uct_md, uct_md_attr_t *attr)
{
    attr->cap.flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH |
                                 UCT_MD_FLAG_NEED_RKEY;
    attr->cap.reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.alloc_mem_types  = 0;
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.detect_mem_types = 0;
    attr->cap.max_alloc        = 0;
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

    if (md->rcache != NULL) {
        status = ucs_rcache_get(md->rcache, address, length,
                                PROT_READ | PROT_WRITE, &flags, &rregion);
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

static ucs_status_t
uct_ibshare_mkey_pack(uct_md_h uct_md, uct_mem_h uct_memh,
                      const uct_md_mkey_pack_params_t *params,
                      void *rkey_buffer)
{
    const uct_ibshare_mem_t *memh = uct_memh;
    uct_ibshare_packed_rkey_t *packed = rkey_buffer;

    packed->rkey = memh->rkey;
    return UCS_OK;
}

ucs_status_t uct_ibshare_rkey_unpack(uct_component_t *component,
                                     const void *rkey_buffer,
                                     uct_rkey_t *rkey_p, void **handle_p)
{
    const uct_ibshare_packed_rkey_t *packed = rkey_buffer;

    *rkey_p   = packed->rkey;
    *handle_p = NULL;
    return UCS_OK;
}

static void uct_ibshare_md_close(uct_md_h uct_md)
{
    uct_ibshare_md_t *md = ucs_derived_of(uct_md, uct_ibshare_md_t);

    uct_ibshare_md_resources_release(md);
    pthread_mutex_destroy(&md->lock);
    ucs_free(md);
}

static uct_md_ops_t uct_ibshare_md_ops = {
    .close                  = uct_ibshare_md_close,
    .query                  = uct_ibshare_md_query,
    .mem_reg                = uct_ibshare_mem_reg,
    .mem_dereg              = uct_ibshare_mem_dereg,
    .mkey_pack              = uct_ibshare_mkey_pack,
    .is_sockaddr_accessible = ucs_empty_function_return_zero_int,
    .detect_memory_type     = ucs_empty_function_return_unsupported,
};

ucs_status_t uct_ibshare_md_open(uct_component_t *component,
                                 const char *md_name,
                                 const uct_md_config_t *uct_md_config,
                                 uct_md_h *md_p)
{
    const uct_ibshare_md_config_t *config =
            ucs_derived_of(uct_md_config, uct_ibshare_md_config_t);
    uct_ibshare_md_t *md;

    md = ucs_calloc(1, sizeof(*md), "ibshare md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    md->super.ops       = &uct_ibshare_md_ops;
    md->super.component = component;
    md->config          = *config;
    ucs_strncpy_zero(md->dev_name, md_name, sizeof(md->dev_name));
    pthread_mutex_init(&md->lock, NULL);

    *md_p = &md->super;
    return UCS_OK;
}
