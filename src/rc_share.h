/**
 * rc_share: the RC transport of the ibshare component.
 */
#ifndef UCT_RC_SHARE_H_
#define UCT_RC_SHARE_H_

#include "ibshare_md.h"

#include <uct/base/uct_iface.h>


#define UCT_RC_SHARE_TL_NAME     "rc_share"


typedef struct uct_rc_share_iface_config {
    uct_iface_config_t        super;
    unsigned long             gid_index;    /* UCS_ULUNITS_AUTO: choose */
} uct_rc_share_iface_config_t;


/* What a peer needs to reach our port: packed into the device address */
typedef struct UCS_S_PACKED uct_rc_share_device_addr {
    uint8_t                   flags;        /* UCT_RC_SHARE_ADDR_FLAG_xx */
    uint16_t                  lid;
    union ibv_gid             gid;
} uct_rc_share_device_addr_t;


enum {
    UCT_RC_SHARE_ADDR_FLAG_ETH = UCS_BIT(0)  /* RoCE: routed by GID, no LID */
};


typedef struct uct_rc_share_iface {
    uct_base_iface_t          super;
    uint8_t                   port_num;
    struct ibv_port_attr      port_attr;
    uint8_t                   gid_index;
    union ibv_gid             gid;
} uct_rc_share_iface_t;


ucs_status_t uct_rc_share_query_tl_devices(uct_md_h md,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p);

extern ucs_config_field_t uct_rc_share_iface_config_table[];

UCS_CLASS_DECLARE_NEW_FUNC(uct_rc_share_iface_t, uct_iface_t, uct_md_h,
                           uct_worker_h, const uct_iface_params_t*,
                           const uct_iface_config_t*);

#endif
