/**
 * The ibshare memory domain: the verbs device context, the protection domain
 * and memory registration of one device.
 */
#ifndef UCT_IBSHARE_MD_H_
#define UCT_IBSHARE_MD_H_

#include <uct/base/uct_md.h>
#include <ucs/memory/rcache.h>
#include <infiniband/verbs.h>
#include <pthread.h>


#define UCT_IBSHARE_COMPONENT_NAME "ibshare"


extern uct_component_t uct_ibshare_component;


typedef struct uct_ibshare_md_config {
    uct_md_config_t           super;
    ucs_ternary_auto_value_t  rcache;       /* use the registration cache */
    uct_md_rcache_config_t    rcache_cfg;   /* its tuning (UCX's own table) */
} uct_ibshare_md_config_t;


/* A registration: what mem_reg returns as the memh */
typedef struct uct_ibshare_mem {
    struct ibv_mr            *mr;
    uint32_t                  lkey;
    uint32_t                  rkey;
} uct_ibshare_mem_t;


/* Packed remote key: what a peer needs to address our memory */
typedef struct UCS_S_PACKED uct_ibshare_packed_rkey {
    uint32_t                  rkey;
} uct_ibshare_packed_rkey_t;


typedef struct uct_ibshare_md {
    uct_md_t                  super;
    char                      dev_name[UCT_DEVICE_NAME_MAX];
    uct_ibshare_md_config_t   config;

    /* Opened at first use, not at md open: see uct_ibshare_md_resources() */
    pthread_mutex_t           lock;
    struct ibv_context       *context;
    struct ibv_pd            *pd;
    ucs_rcache_t             *rcache;
} uct_ibshare_md_t;


/*
 * Open the device and allocate the PD if not done yet. Every path that needs
 * verbs resources (iface open, registration) goes through here.
 */
ucs_status_t uct_ibshare_md_resources(uct_ibshare_md_t *md);

ucs_status_t uct_ibshare_md_open(uct_component_t *component,
                                 const char *md_name,
                                 const uct_md_config_t *uct_md_config,
                                 uct_md_h *md_p);

ucs_status_t uct_ibshare_rkey_unpack(uct_component_t *component,
                                     const void *rkey_buffer,
                                     uct_rkey_t *rkey_p, void **handle_p);

extern ucs_config_field_t uct_ibshare_md_config_table[];

#endif
