/**
 * rc_share iface: life cycle, port and GID selection, query.
 */
#include "rc_share.h"
#include "ibshare_device.h"

#include <ucs/debug/log_def.h>
#include <ucs/type/class.h>
#include <ucs/sys/string.h>

#include <arpa/inet.h>
#include <string.h>


static uct_iface_ops_t uct_rc_share_iface_ops;


ucs_config_field_t uct_rc_share_iface_config_table[] = {
    {"", "", NULL,
     ucs_offsetof(uct_rc_share_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"GID_INDEX", "auto",
     "Port GID table index used for RoCE traffic. \"auto\" takes the first\n"
     "RoCE v2 GID with an IPv4 address, then RoCE v2 IPv6, then RoCE v1, then\n"
     "any valid entry (index 0 for soft-RoCE on a link without an IP address).\n"
     "Ignored on InfiniBand ports.",
     ucs_offsetof(uct_rc_share_iface_config_t, gid_index),
     UCS_CONFIG_TYPE_ULUNITS},

    {NULL}
};

/* Lower is better; UINT_MAX means the entry is not usable */
static unsigned uct_rc_share_gid_rank(const struct ibv_gid_entry *entry)
{
    static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                 0xff, 0xff};
    static const union ibv_gid zero_gid;
    int is_v4 = !memcmp(entry->gid.raw, v4_mapped_prefix,
                        sizeof(v4_mapped_prefix));

    if (!memcmp(&entry->gid, &zero_gid, sizeof(zero_gid))) {
        return UINT_MAX;
    }

    switch (entry->gid_type) {
    case IBV_GID_TYPE_ROCE_V2:
        return is_v4 ? 0 : 1;
    case IBV_GID_TYPE_ROCE_V1:
        return is_v4 ? 2 : 3;
    default:
        return 4;
    }
}

static ucs_status_t uct_rc_share_iface_select_gid(uct_rc_share_iface_t *iface,
                                                  struct ibv_context *context,
                                                  unsigned long config_index)
{
    const char *dev_name = ibv_get_device_name(context->device);
    struct ibv_gid_entry entry;
    unsigned index, rank, best_rank = UINT_MAX;
    int ret;

    if (config_index != UCS_ULUNITS_AUTO) {
        if (config_index >= (unsigned long)iface->port_attr.gid_tbl_len) {
            ucs_error("%s:%d: UCX_RC_SHARE_GID_INDEX=%lu is out of range "
                      "(the GID table has %d entries)", dev_name,
                      iface->port_num, config_index,
                      iface->port_attr.gid_tbl_len);
            return UCS_ERR_INVALID_PARAM;
        }
        ret = ibv_query_gid_ex(context, iface->port_num, config_index, &entry,
                               0);
        if (ret != 0) {
            ucs_error("%s:%d: GID index %lu is not valid: %s", dev_name,
                      iface->port_num, config_index, strerror(ret));
            return UCS_ERR_INVALID_PARAM;
        }
        iface->gid_index = config_index;
        iface->gid       = entry.gid;
        return UCS_OK;
    }

    for (index = 0; index < (unsigned)iface->port_attr.gid_tbl_len; ++index) {
        if (ibv_query_gid_ex(context, iface->port_num, index, &entry, 0)) {
            continue; /* an empty slot of the table */
        }
        rank = uct_rc_share_gid_rank(&entry);
        if (rank < best_rank) {
            best_rank        = rank;
            iface->gid_index = index;
            iface->gid       = entry.gid;
        }
    }

    if (best_rank == UINT_MAX) {
        ucs_error("%s:%d: no valid GID in the port's GID table", dev_name,
                  iface->port_num);
        return UCS_ERR_NO_DEVICE;
    }

    return UCS_OK;
}

static ucs_status_t uct_rc_share_iface_query(uct_iface_h tl_iface,
                                             uct_iface_attr_t *attr)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);

    uct_base_iface_query(&iface->super, attr);

    attr->device_addr_len = sizeof(uct_rc_share_device_addr_t);
    attr->iface_addr_len  = 0;
    attr->ep_addr_len     = 0;
    /* The connection model, and no operation yet: UCP selects no lane here */
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE;
    attr->latency         = ucs_linear_func_make(1e-6, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = 1e9;
    attr->overhead        = 75e-9;
    attr->priority        = 0;
    return UCS_OK;
}

static ucs_status_t
uct_rc_share_iface_get_device_address(uct_iface_h tl_iface,
                                      uct_device_addr_t *addr)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    uct_rc_share_device_addr_t *dev_addr = (uct_rc_share_device_addr_t*)addr;

    dev_addr->flags = (iface->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) ?
                      UCT_RC_SHARE_ADDR_FLAG_ETH : 0;
    dev_addr->lid   = iface->port_attr.lid;
    dev_addr->gid   = iface->gid;
    return UCS_OK;
}

static int uct_rc_share_iface_is_reachable(const uct_iface_h tl_iface,
                                           const uct_device_addr_t *addr,
                                           const uct_iface_addr_t *iface_addr)
{
    uct_rc_share_iface_t *iface = ucs_derived_of(tl_iface,
                                                 uct_rc_share_iface_t);
    const uct_rc_share_device_addr_t *dev_addr =
            (const uct_rc_share_device_addr_t*)addr;
    int is_eth = iface->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;

    if ((dev_addr == NULL) ||
        (!!(dev_addr->flags & UCT_RC_SHARE_ADDR_FLAG_ETH) != is_eth)) {
        return 0;
    }

    /* InfiniBand: same subnet; RoCE: routed by IP, any GID may be reached */
    return is_eth || (dev_addr->gid.global.subnet_prefix ==
                      iface->gid.global.subnet_prefix);
}

static ucs_status_t uct_rc_share_ep_create(const uct_ep_params_t *params,
                                           uct_ep_h *ep_p)
{
    ucs_error("rc_share: endpoints are not implemented in this version");
    return UCS_ERR_UNSUPPORTED;
}

static UCS_CLASS_INIT_FUNC(uct_rc_share_iface_t, uct_md_h tl_md,
                           uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    uct_rc_share_iface_config_t *config =
            ucs_derived_of(tl_config, uct_rc_share_iface_config_t);
    uct_ibshare_md_t *md = ucs_derived_of(tl_md, uct_ibshare_md_t);
    ucs_status_t status;
    int ret;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("rc_share supports only UCT_IFACE_OPEN_MODE_DEVICE");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_rc_share_iface_ops,
                              &uct_base_iface_internal_ops, tl_md, worker,
                              params, tl_config
                              UCS_STATS_ARG(params->stats_root)
                              UCS_STATS_ARG(UCT_RC_SHARE_TL_NAME));

    status = uct_ibshare_device_parse_port(params->mode.device.dev_name,
                                           md->dev_name, &self->port_num);
    if (status != UCS_OK) {
        return status;
    }

    status = uct_ibshare_md_resources(md);
    if (status != UCS_OK) {
        return status;
    }

    ret = ibv_query_port(md->context, self->port_num, &self->port_attr);
    if (ret != 0) {
        ucs_error("%s: ibv_query_port(%d) failed: %s", md->dev_name,
                  self->port_num, strerror(ret));
        return UCS_ERR_NO_DEVICE;
    }

    if (self->port_attr.state != IBV_PORT_ACTIVE) {
        ucs_error("%s:%d: port is not active (state %s)", md->dev_name,
                  self->port_num, ibv_port_state_str(self->port_attr.state));
        return UCS_ERR_NO_DEVICE;
    }

    status = uct_rc_share_iface_select_gid(self, md->context,
                                           config->gid_index);
    if (status != UCS_OK) {
        return status;
    }

    ucs_debug("%s:%d: rc_share iface %p, GID index %d", md->dev_name,
              self->port_num, self, self->gid_index);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_rc_share_iface_t)
{
}

UCS_CLASS_DEFINE(uct_rc_share_iface_t, uct_base_iface_t);

static UCS_CLASS_DEFINE_DELETE_FUNC(uct_rc_share_iface_t, uct_iface_t);
static uct_iface_ops_t uct_rc_share_iface_ops = {
    .ep_create                = uct_rc_share_ep_create,
    .ep_destroy               = ucs_empty_function_do_assert_void,
    .ep_flush                 = uct_base_ep_flush,
    .ep_fence                 = uct_base_ep_fence,
    .iface_flush              = uct_base_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = ucs_empty_function,
    .iface_progress_disable   = ucs_empty_function,
    .iface_progress           = ucs_empty_function_return_zero,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_rc_share_iface_t),
    .iface_query              = uct_rc_share_iface_query,
    .iface_get_device_address = uct_rc_share_iface_get_device_address,
    .iface_get_address        = ucs_empty_function_return_success,
    .iface_is_reachable       = uct_rc_share_iface_is_reachable
};


UCS_CLASS_DEFINE_NEW_FUNC(uct_rc_share_iface_t, uct_iface_t, uct_md_h,
                          uct_worker_h, const uct_iface_params_t*,
                          const uct_iface_config_t*);

ucs_status_t uct_rc_share_query_tl_devices(uct_md_h tl_md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p)
{
    uct_ibshare_md_t *md = ucs_derived_of(tl_md, uct_ibshare_md_t);

    return uct_ibshare_device_query_ports(md->dev_name, devices_p,
                                          num_devices_p);
}
