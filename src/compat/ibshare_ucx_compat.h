/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * What differs between the UCX internal APIs the module builds against
 * (Debian's 1.13.1 and upstream 1.22.0; doc/ucx-versions.md lists the
 * changes): configure's checks (m4/ibshare_ucx.m4) set the IBSHARE_UCX_*
 * macros of ibshare_ucx_api.h, and only this header reads them. The md and the
 * transport keep one signature per operation, the 1.13 one, and name their
 * functions in the ops tables through UCT_IBSHARE_OP(); where UCX wants
 * another signature, the adapters below, made by UCT_IBSHARE_MD_OPS_ADAPT()
 * and UCT_IBSHARE_IFACE_OPS_ADAPT(), convert.
 */
#ifndef UCT_IBSHARE_UCX_COMPAT_H_
#define UCT_IBSHARE_UCX_COMPAT_H_

#include "compat/ibshare_ucx_api.h"

#include <uct/base/uct_component.h>
#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/memory/rcache.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <dirent.h>
#include <string.h>
#if HAVE_UCS_SYS_PTR_ARITH_H
#  include <ucs/sys/ptr_arith.h> /* ucs_align_up, in ucs/sys/math.h before */
#endif


/* ------------------------------------------------------------- ops tables */

/*
 * The function an ops table holds for _func: its adapter, which calls it
 * (where the signatures are the same, it only forwards, and is inlined)
 */
#define UCT_IBSHARE_OP(_func)  _func##_ucx


/* ----------------------------------------------------------------- md ops */

#if IBSHARE_UCX_MD_ATTR_V2
/*
 * The md reports through the v1 attributes, which UCX 1.22 still has. UCP
 * 1.22 keeps a cache of registrations of its own, and its protocols register
 * only with mds whose registrations it may cache (it asserts so): ours may
 * be, since a memh stays valid until it is deregistered.
 */
#  define UCT_IBSHARE_MD_ADAPT_QUERY(_func) \
    static ucs_status_t _func##_ucx(uct_md_h md, uct_md_attr_v2_t *attr) \
    { \
        uct_md_attr_t v1; \
        ucs_status_t status = _func(md, &v1); \
        \
        uct_md_base_md_query(attr); \
        attr->max_alloc        = v1.cap.max_alloc; \
        attr->max_reg          = v1.cap.max_reg; \
        attr->flags            = v1.cap.flags; \
        attr->reg_mem_types    = v1.cap.reg_mem_types; \
        attr->cache_mem_types  = v1.cap.reg_mem_types; \
        attr->detect_mem_types = v1.cap.detect_mem_types; \
        attr->alloc_mem_types  = v1.cap.alloc_mem_types; \
        attr->access_mem_types = v1.cap.access_mem_types; \
        attr->reg_cost         = v1.reg_cost; \
        attr->rkey_packed_size = v1.rkey_packed_size; \
        attr->local_cpus       = v1.local_cpus; \
        return status; \
    }
#else
#  define UCT_IBSHARE_MD_ADAPT_QUERY(_func) \
    static ucs_status_t _func##_ucx(uct_md_h md, uct_md_attr_t *attr) \
    { \
        return _func(md, attr); \
    }
#endif

#if IBSHARE_UCX_MEM_ALLOC_SYS_DEV
/* Host memory only: the system device does not matter */
#  define UCT_IBSHARE_MD_ADAPT_MEM_ALLOC(_func) \
    static ucs_status_t _func##_ucx(uct_md_h md, size_t *length_p, \
                                    void **address_p, \
                                    ucs_memory_type_t mem_type, \
                                    ucs_sys_device_t sys_dev, unsigned flags, \
                                    const char *alloc_name, uct_mem_h *memh_p) \
    { \
        return _func(md, length_p, address_p, mem_type, flags, alloc_name, \
                     memh_p); \
    }
#else
#  define UCT_IBSHARE_MD_ADAPT_MEM_ALLOC(_func) \
    static ucs_status_t _func##_ucx(uct_md_h md, size_t *length_p, \
                                    void **address_p, \
                                    ucs_memory_type_t mem_type, \
                                    unsigned flags, const char *alloc_name, \
                                    uct_mem_h *memh_p) \
    { \
        return _func(md, length_p, address_p, mem_type, flags, alloc_name, \
                     memh_p); \
    }
#endif

#if IBSHARE_UCX_MEM_REG_PARAMS
#  define UCT_IBSHARE_MD_ADAPT_MEM_REG(_func) \
    static ucs_status_t _func##_ucx(uct_md_h md, void *address, size_t length, \
                                    const uct_md_mem_reg_params_t *params, \
                                    uct_mem_h *memh_p) \
    { \
        return _func(md, address, length, \
                     UCT_MD_MEM_REG_FIELD_VALUE(params, flags, FIELD_FLAGS, \
                                                0), \
                     memh_p); \
    }
#else
#  define UCT_IBSHARE_MD_ADAPT_MEM_REG(_func) \
    static ucs_status_t _func##_ucx(uct_md_h md, void *address, size_t length, \
                                    unsigned flags, uct_mem_h *memh_p) \
    { \
        return _func(md, address, length, flags, memh_p); \
    }
#endif

#if IBSHARE_UCX_MKEY_PACK_ADDRESS
/* The key covers the whole registration: the address does not matter */
#  define UCT_IBSHARE_MD_ADAPT_MKEY_PACK(_func) \
    static ucs_status_t _func##_ucx(uct_md_h md, uct_mem_h memh, \
                                    void *address, size_t length, \
                                    const uct_md_mkey_pack_params_t *params, \
                                    void *buffer) \
    { \
        return _func(md, memh, params, buffer); \
    }
#else
#  define UCT_IBSHARE_MD_ADAPT_MKEY_PACK(_func) \
    static ucs_status_t _func##_ucx(uct_md_h md, uct_mem_h memh, \
                                    const uct_md_mkey_pack_params_t *params, \
                                    void *buffer) \
    { \
        return _func(md, memh, params, buffer); \
    }
#endif

/* The md ops one UCX generation has and the other has not */
#if IBSHARE_UCX_MD_MEM_ATTACH
#  define UCT_IBSHARE_MD_OPS_OWN \
    .mem_attach = (uct_md_mem_attach_func_t) \
            ucs_empty_function_return_unsupported
#else
#  define UCT_IBSHARE_MD_OPS_OWN \
    .is_sockaddr_accessible = \
            (uct_md_is_sockaddr_accessible_func_t) \
            ucs_empty_function_return_zero_int
#endif

/* Defines the adapters of an md's query, mem_alloc, mem_reg and mkey_pack */
#define UCT_IBSHARE_MD_OPS_ADAPT(_query, _mem_alloc, _mem_reg, _mkey_pack) \
    UCT_IBSHARE_MD_ADAPT_QUERY(_query) \
    UCT_IBSHARE_MD_ADAPT_MEM_ALLOC(_mem_alloc) \
    UCT_IBSHARE_MD_ADAPT_MEM_REG(_mem_reg) \
    UCT_IBSHARE_MD_ADAPT_MKEY_PACK(_mkey_pack)


/* -------------------------------------------------------------- component */

#if IBSHARE_UCX_RKEY_UNPACK_PARAMS
#  define UCT_IBSHARE_COMPONENT_ADAPT_RKEY_UNPACK(_func) \
    static ucs_status_t _func##_ucx(uct_component_t *component, \
                                    const void *rkey_buffer, \
                                    const uct_rkey_unpack_params_t *params, \
                                    uct_rkey_t *rkey_p, void **handle_p) \
    { \
        return _func(component, rkey_buffer, rkey_p, handle_p); \
    }
#else
#  define UCT_IBSHARE_COMPONENT_ADAPT_RKEY_UNPACK(_func) \
    static ucs_status_t _func##_ucx(uct_component_t *component, \
                                    const void *rkey_buffer, \
                                    uct_rkey_t *rkey_p, void **handle_p) \
    { \
        return _func(component, rkey_buffer, rkey_p, handle_p); \
    }
#endif

#if IBSHARE_UCX_RKEY_COMPARE
/* Two unpacked keys differ unless they are one: UCP only deduplicates */
#  define UCT_IBSHARE_COMPONENT_OWN \
    .rkey_compare = uct_base_rkey_compare,
#else
#  define UCT_IBSHARE_COMPONENT_OWN
#endif


/* ---------------------------------------------------------------- iface */

#if IBSHARE_UCX_IFACE_IS_REACHABLE_V2
/*
 * UCX 1.22 asks through iface_is_reachable_v2, in the iface's internal ops,
 * with a scope: the network (any peer), or the device (this one only).
 */
#  define UCT_IBSHARE_IFACE_ADAPT_IS_REACHABLE(_func) \
    static int _func##_ucx(const uct_iface_h iface, \
                           const uct_iface_is_reachable_params_t *params) \
    { \
        if (!uct_iface_is_reachable_params_valid( \
                    params, UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR)) { \
            return 0; \
        } \
        if (!_func(iface, params->device_addr, \
                   UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, \
                                   iface_addr, IFACE_ADDR, NULL))) { \
            uct_iface_fill_info_str_buf(params, \
                                        "different link layer or subnet, " \
                                        "or a process of this node left " \
                                        "to shared memory"); \
            return 0; \
        } \
        return uct_iface_scope_is_reachable(iface, params); \
    } \
    \
    static uct_iface_internal_ops_t _func##_internal_ops = { \
        .iface_query_v2        = uct_iface_base_query_v2, \
        .iface_estimate_perf   = uct_base_iface_estimate_perf, \
        .iface_vfs_refresh     = (uct_iface_vfs_refresh_func_t) \
                ucs_empty_function, \
        .ep_query              = (uct_ep_query_func_t) \
                ucs_empty_function_return_unsupported, \
        .ep_invalidate         = (uct_ep_invalidate_func_t) \
                ucs_empty_function_return_unsupported, \
        .ep_connect_to_ep_v2   = (uct_ep_connect_to_ep_v2_func_t) \
                ucs_empty_function_return_unsupported, \
        .iface_is_reachable_v2 = _func##_ucx, \
        .ep_is_connected       = uct_base_ep_is_connected, \
        .ep_get_device_ep      = (uct_ep_get_device_ep_func_t) \
                ucs_empty_function_return_unsupported \
    };
/* The iface op itself: UCX's, which calls the internal one */
#  define UCT_IBSHARE_IFACE_IS_REACHABLE(_func)  uct_base_iface_is_reachable
#  define UCT_IBSHARE_IFACE_INTERNAL_OPS(_func)  (&_func##_internal_ops)
#else
#  define UCT_IBSHARE_IFACE_ADAPT_IS_REACHABLE(_func)
#  define UCT_IBSHARE_IFACE_IS_REACHABLE(_func)  _func
#  define UCT_IBSHARE_IFACE_INTERNAL_OPS(_func)  (&uct_base_iface_internal_ops)
#endif

/*
 * Defines what the iface ops table and the iface's constructor name with
 * UCT_IBSHARE_IFACE_IS_REACHABLE(_is_reachable) and
 * UCT_IBSHARE_IFACE_INTERNAL_OPS(_is_reachable)
 */
#define UCT_IBSHARE_IFACE_OPS_ADAPT(_is_reachable) \
    UCT_IBSHARE_IFACE_ADAPT_IS_REACHABLE(_is_reachable)

#if IBSHARE_UCX_KEEPALIVE_CHECK_COMP
#  define UCT_IBSHARE_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp) \
    UCT_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp)
#else
/* UCX 1.22 leaves the completion to the transport: ours completes nothing
 * later (a failed check fails the endpoint), so it takes none, as on 1.13 */
#  define UCT_IBSHARE_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp) \
    UCT_EP_KEEPALIVE_CHECK_PARAM(_flags) \
    UCT_CHECK_PARAM((_comp) == NULL, "Unsupported completion on ep_check");
#endif

/*
 * An iface's buffer pool settings, with the names and meaning UCX 1.13 gives
 * them in every version (1.22's macro adds MAX_CHUNK_SIZE and GROW_FACTOR,
 * which a pool carved from the node pool's slice does not use)
 */
#define UCT_IBSHARE_IFACE_MPOOL_CONFIG_FIELDS(_prefix, _dfl_max, _dfl_grow, \
                                              _mp_name, _offset, _desc) \
    {_prefix "MAX_BUFS", UCS_PP_QUOTE(_dfl_max), \
     "Maximal number of " _mp_name " buffers for the interface. -1 is " \
     "infinite." _desc, \
     (_offset) + ucs_offsetof(uct_iface_mpool_config_t, max_bufs), \
     UCS_CONFIG_TYPE_INT}, \
    \
    {_prefix "BUFS_GROW", UCS_PP_QUOTE(_dfl_grow), \
     "How much buffers are added every time the " _mp_name " memory pool " \
     "grows.\n0 means the value is chosen by the transport.", \
     (_offset) + ucs_offsetof(uct_iface_mpool_config_t, bufs_grow), \
     UCS_CONFIG_TYPE_UINT}


/* ------------------------------------------------------------ ucs helpers */

/* ucs_mpool_init with the arguments UCX 1.13 takes */
static inline ucs_status_t
uct_ibshare_ucx_mpool_init(ucs_mpool_t *mp, size_t priv_size, size_t elem_size,
                           size_t align_offset, size_t alignment,
                           unsigned elems_per_chunk, unsigned max_elems,
                           ucs_mpool_ops_t *ops, const char *name)
{
#if IBSHARE_UCX_MPOOL_PARAMS
    ucs_mpool_params_t params;

    ucs_mpool_params_reset(&params);
    params.priv_size       = priv_size;
    params.elem_size       = elem_size;
    params.align_offset    = align_offset;
    params.alignment       = alignment;
    params.elems_per_chunk = elems_per_chunk;
    params.max_elems       = max_elems;
    params.ops             = ops;
    params.name            = name;
    return ucs_mpool_init(&params, mp);
#else
    return ucs_mpool_init(mp, priv_size, elem_size, align_offset, alignment,
                          elems_per_chunk, max_elems, ops, name);
#endif
}

/* ucs_config_parser_fill_opts with the arguments UCX 1.13 takes */
static inline ucs_status_t
uct_ibshare_ucx_config_fill_opts(void *opts, ucs_config_field_t *fields,
                                 const char *env_prefix,
                                 const char *table_prefix, int ignore_errors)
{
#if IBSHARE_UCX_CONFIG_FILL_ENTRY
    ucs_config_global_list_entry_t entry = {
        .name   = table_prefix,
        .prefix = table_prefix,
        .table  = fields
    };

    return ucs_config_parser_fill_opts(opts, &entry, env_prefix,
                                       ignore_errors);
#else
    return ucs_config_parser_fill_opts(opts, fields, env_prefix, table_prefix,
                                       ignore_errors);
#endif
}

#if IBSHARE_UCX_CALLBACKQ_ONESHOT_KEY
static int uct_ibshare_ucx_callbackq_any(const ucs_callbackq_elem_t *elem,
                                         void *arg)
{
    return 1;
}
#endif

/*
 * A callback the worker's progress runs once, added from any thread; the id
 * it returns (never UCS_CALLBACKQ_ID_NULL) removes it before it ran, with
 * the same arg. UCX 1.22 keys oneshot callbacks by arg instead.
 */
static inline int
uct_ibshare_ucx_callbackq_add_oneshot(ucs_callbackq_t *cbq, ucs_callback_t cb,
                                      void *arg)
{
#if IBSHARE_UCX_CALLBACKQ_ONESHOT_KEY
    ucs_callbackq_add_oneshot(cbq, arg, cb, arg);
    return 0;
#else
    return ucs_callbackq_add_safe(cbq, cb, arg, UCS_CALLBACKQ_FLAG_ONESHOT);
#endif
}

static inline void
uct_ibshare_ucx_callbackq_remove_oneshot(ucs_callbackq_t *cbq, int id,
                                         void *arg)
{
#if IBSHARE_UCX_CALLBACKQ_ONESHOT_KEY
    ucs_callbackq_remove_oneshot(cbq, arg, uct_ibshare_ucx_callbackq_any,
                                 NULL);
#else
    ucs_callbackq_remove_safe(cbq, id);
#endif
}

/* The registration cache's settings: UCX's table of them, and its type */
#if IBSHARE_UCX_RCACHE_CONFIG
typedef ucs_rcache_config_t uct_ibshare_rcache_config_t;
#  define UCT_IBSHARE_RCACHE_CONFIG_TABLE  ucs_config_rcache_table
#else
typedef uct_md_rcache_config_t uct_ibshare_rcache_config_t;
#  define UCT_IBSHARE_RCACHE_CONFIG_TABLE  uct_md_config_rcache_table
#endif

/* Registration cache parameters from its settings */
static inline void
uct_ibshare_ucx_rcache_params(ucs_rcache_params_t *params,
                              const uct_ibshare_rcache_config_t *config)
{
#if IBSHARE_UCX_RCACHE_CONFIG
    ucs_rcache_set_params(params, config);
#else
    memset(params, 0, sizeof(*params));
    uct_md_set_rcache_params(params, config);
    params->max_alignment = ucs_get_page_size();
#endif
}

/* The rcache ops one UCX generation has: 1.22 calls merge, unchecked, when
 * a new region overlaps cached ones; a region holds nothing to merge */
#if IBSHARE_UCX_RCACHE_MERGE
#  define UCT_IBSHARE_RCACHE_OPS_OWN \
    .merge = (void (*)(void*, ucs_rcache_t*, void*, ucs_rcache_region_t*)) \
            ucs_empty_function,
#else
#  define UCT_IBSHARE_RCACHE_OPS_OWN
#endif

/* ucs_rcache_get; where it takes an alignment, the default of 1.13's
 * UCX_*_RCACHE_ADDR_ALIGN */
static inline ucs_status_t
uct_ibshare_ucx_rcache_get(ucs_rcache_t *rcache, void *address, size_t length,
                           int prot, void *arg, ucs_rcache_region_t **region_p)
{
#if IBSHARE_UCX_RCACHE_GET_ALIGNMENT
    return ucs_rcache_get(rcache, address, length, UCS_SYS_CACHE_LINE_SIZE,
                          prot, arg, region_p);
#else
    return ucs_rcache_get(rcache, address, length, prot, arg, region_p);
#endif
}

/* The entry a callback of ucs_sys_readdir gets */
#if IBSHARE_UCX_READDIR_CONST_ENTRY
typedef const struct dirent uct_ibshare_dirent_t;
#else
typedef struct dirent uct_ibshare_dirent_t;
#endif

#endif
