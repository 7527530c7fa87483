dnl SPDX-License-Identifier: BSD-3-Clause
dnl Copyright (c) 2026, the ucx-ibshare developers
# Checks of UCX's internal API, which a UCT component compiles against and
# which changes between UCX releases (doc/ucx-versions.md lists the changes).
# Each defines a macro to 1 or 0 in src/compat/ibshare_ucx_api.h, which
# src/compat/ibshare_ucx_compat.h reads; the caller sets CPPFLAGS to reach the UCX
# internal headers.

# IBSHARE_UCX_CHECK(MACRO, DESCRIPTION, BODY)
# Compiles BODY (statements; _Static_assert is handy) with UCX's base
# headers; MACRO is 1 in config.h when it compiles.
AC_DEFUN([IBSHARE_UCX_CHECK], [
    AC_CACHE_CHECK([whether UCX $2], [ibshare_cv_$1],
        [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <uct/base/uct_component.h>
#include <ucs/memory/rcache.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/config/global_opts.h>
#include <ucs/sys/sys.h>
#include <dirent.h>
#define SAME_TYPE(_a, _b) _Static_assert(__builtin_types_compatible_p(_a, _b), #_a)
]], [[$3]])],
            [ibshare_cv_$1=yes], [ibshare_cv_$1=no])])
    AS_IF([test "x$ibshare_cv_$1" = xyes],
          [AC_DEFINE([$1], [1], [UCX $2])],
          [AC_DEFINE([$1], [0], [UCX $2])])
])

# IBSHARE_UCX_API_CHECKS: every check the compatibility header needs
AC_DEFUN([IBSHARE_UCX_API_CHECKS], [
    IBSHARE_UCX_CHECK([IBSHARE_UCX_MD_ATTR_V2],
        [md query fills uct_md_attr_v2_t],
        [SAME_TYPE(uct_md_query_func_t,
                   ucs_status_t (*)(uct_md_h, uct_md_attr_v2_t*));])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_MEM_ALLOC_SYS_DEV],
        [md mem_alloc takes a system device],
        [SAME_TYPE(uct_md_mem_alloc_func_t,
                   ucs_status_t (*)(uct_md_h, size_t*, void**,
                                    ucs_memory_type_t, ucs_sys_device_t,
                                    unsigned, const char*, uct_mem_h*));])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_MEM_REG_PARAMS],
        [md mem_reg takes uct_md_mem_reg_params_t],
        [SAME_TYPE(uct_md_mem_reg_func_t,
                   ucs_status_t (*)(uct_md_h, void*, size_t,
                                    const uct_md_mem_reg_params_t*,
                                    uct_mem_h*));])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_MKEY_PACK_ADDRESS],
        [md mkey_pack takes the address and length],
        [SAME_TYPE(uct_md_mkey_pack_func_t,
                   ucs_status_t (*)(uct_md_h, uct_mem_h, void*, size_t,
                                    const uct_md_mkey_pack_params_t*,
                                    void*));])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_MD_MEM_ATTACH],
        [md ops have mem_attach (and no is_sockaddr_accessible)],
        [uct_md_ops_t ops = {.mem_attach = NULL}; (void)ops;])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_RKEY_UNPACK_PARAMS],
        [component rkey_unpack takes uct_rkey_unpack_params_t],
        [SAME_TYPE(uct_component_rkey_unpack_func_t,
                   ucs_status_t (*)(uct_component_t*, const void*,
                                    const uct_rkey_unpack_params_t*,
                                    uct_rkey_t*, void**));])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_RKEY_COMPARE],
        [components have rkey_compare],
        [uct_component_t c = {.rkey_compare = uct_base_rkey_compare}; (void)c;])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_IFACE_IS_REACHABLE_V2],
        [ifaces have internal ops with iface_is_reachable_v2],
        [uct_iface_internal_ops_t ops = {.iface_is_reachable_v2 = NULL}; (void)ops;])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_RCACHE_CONFIG],
        [has ucs_rcache_config_t and ucs_rcache_set_params],
        [ucs_rcache_params_t p; ucs_rcache_config_t *c = NULL;
         ucs_rcache_set_params(&p, c);])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_RCACHE_GET_ALIGNMENT],
        [ucs_rcache_get takes an alignment],
        [SAME_TYPE(__typeof__(&ucs_rcache_get),
                   ucs_status_t (*)(ucs_rcache_t*, void*, size_t, size_t,
                                    int, void*, ucs_rcache_region_t**));])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_RCACHE_MERGE],
        [rcache ops have merge],
        [ucs_rcache_ops_t ops = {.merge = NULL}; (void)ops;])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_CALLBACKQ_ONESHOT_KEY],
        [callback queues take oneshot callbacks by key],
        [SAME_TYPE(__typeof__(&ucs_callbackq_add_oneshot),
                   void (*)(ucs_callbackq_t*, ucs_callbackq_key_t,
                            ucs_callback_t, void*));])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_MPOOL_PARAMS],
        [ucs_mpool_init takes ucs_mpool_params_t],
        [ucs_mpool_params_t p; ucs_mpool_params_reset(&p);])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_KEEPALIVE_CHECK_COMP],
        [UCT_EP_KEEPALIVE_CHECK_PARAM checks a completion],
        [unsigned flags = 0; uct_completion_t *comp = NULL;
         UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_CONFIG_FILL_ENTRY],
        [ucs_config_parser_fill_opts takes a global list entry],
        [SAME_TYPE(__typeof__(&ucs_config_parser_fill_opts),
                   ucs_status_t (*)(void*, ucs_config_global_list_entry_t*,
                                    const char*, int));])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_PLUGIN_PATH],
        [loads modules from UCX_PLUGIN_PATH and its module directory],
        [ucs_global_opts_t o; (void)o.plugin_path;])
    IBSHARE_UCX_CHECK([IBSHARE_UCX_READDIR_CONST_ENTRY],
        [passes ucs_sys_readdir's callback a const entry],
        [SAME_TYPE(ucs_sys_readdir_cb_t,
                   ucs_status_t (*)(const struct dirent*, void*));])
    AC_CHECK_HEADERS([ucs/sys/ptr_arith.h])
])

# IBSHARE_UCX_WARNING_FLAGS(VAR): appends to VAR what UCX's idioms need to
# compile warning-free with -Wall -Wextra: -Wno-cast-function-type where its
# empty-function stubs are prototyped (1.22), since UCX casts them to every
# op type it leaves unsupported
AC_DEFUN([IBSHARE_UCX_WARNING_FLAGS], [
    ibshare_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -Wextra -Werror"
    AC_CACHE_CHECK([whether casting UCX's stubs to op types is warning-free],
        [ibshare_cv_stub_cast],
        [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <uct/base/uct_iface.h>]],
            [[uct_ep_atomic32_post_func_t f = (uct_ep_atomic32_post_func_t)
                  ucs_empty_function_return_unsupported; (void)f;]])],
            [ibshare_cv_stub_cast=yes], [ibshare_cv_stub_cast=no])])
    CFLAGS=$ibshare_save_CFLAGS
    AS_IF([test "x$ibshare_cv_stub_cast" = xno],
          [$1="$$1 -Wno-cast-function-type"])
])
