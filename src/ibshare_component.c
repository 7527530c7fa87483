/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The ibshare UCT component and its rc_share transport.
 *
 * UCX 1.13 loads only the modules compiled into it, so this library is
 * preloaded (LD_PRELOAD) and registers itself from its constructor; libuct
 * and libucs, which it links against, are initialised before it.
 */
#include "md/ibshare_device.h"
#include "md/ibshare_md.h"
#include "rc/rc_share.h"

#include <ucs/type/class.h>
#include <ucs/sys/compiler_def.h>


UCT_IBSHARE_COMPONENT_ADAPT_RKEY_UNPACK(uct_ibshare_rkey_unpack)

uct_component_t uct_ibshare_component = {
    .query_md_resources = uct_ibshare_query_md_resources,
    .md_open            = uct_ibshare_md_open,
    .cm_open            = (uct_component_cm_open_func_t)
                                  ucs_empty_function_return_unsupported,
    .rkey_unpack        = UCT_IBSHARE_OP(uct_ibshare_rkey_unpack),
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)
                                  ucs_empty_function_return_unsupported,
    .rkey_release       = uct_ibshare_rkey_release,
    UCT_IBSHARE_COMPONENT_OWN
    .name               = UCT_IBSHARE_COMPONENT_NAME,
    .md_config          = {
        .name           = "ibshare memory domain",
        .prefix         = "IBSHARE_",
        .table          = uct_ibshare_md_config_table,
        .size           = sizeof(uct_ibshare_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(
                                  &uct_ibshare_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)
                                  ucs_empty_function
};

UCT_TL_DEFINE_ENTRY(&uct_ibshare_component, rc_share,
                    uct_rc_share_query_tl_devices, uct_rc_share_iface_t,
                    "RC_SHARE_", uct_rc_share_iface_config_table,
                    uct_rc_share_iface_config_t);

UCT_SINGLE_TL_INIT(&uct_ibshare_component, rc_share, ctor,,)
