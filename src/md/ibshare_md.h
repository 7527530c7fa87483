/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * The ibshare memory domain: the verbs device context, the protection domain
 * and memory registration of one device.
 */
#ifndef UCT_IBSHARE_MD_H_
#define UCT_IBSHARE_MD_H_

#include "ibshare_resources.h"
#include "compat/ibshare_ucx_compat.h"

#include <uct/base/uct_md.h>
#include <ucs/memory/rcache.h>
#include <infiniband/verbs.h>
#include <pthread.h>


#define UCT_IBSHARE_COMPONENT_NAME "ibshare"

/* The largest slice: 4096 of them still fit in 64-bit IOVAs with room */
#define UCT_IBSHARE_SLICE_SIZE_MAX   UCS_TBYTE
/* The longest join step; beyond it a stuck founder only looks like a hang */
#define UCT_IBSHARE_JOIN_TIMEOUT_MAX 3600.0


extern uct_component_t uct_ibshare_component;


typedef struct uct_ibshare_md_config {
    uct_md_config_t           super;
    ucs_ternary_auto_value_t  rcache;       /* use the registration cache */
    uct_ibshare_rcache_config_t rcache_cfg;   /* its tuning (UCX's own table) */
    uct_ibshare_mode_t        mode;
    char                      *job_key;
    char                      *runtime_dir;
    size_t                    pool_size;
    size_t                    slice_size;
    ucs_ternary_auto_value_t  pool_huge;
    double                    join_timeout;
    unsigned                  fault;        /* tests only */
} uct_ibshare_md_config_t;


/* A registration: what mem_reg returns as the memh */
typedef struct uct_ibshare_mem {
    struct ibv_mr            *mr;           /* NULL: the pool's keys */
    uint32_t                  lkey;
    uint32_t                  rkey;
    uint64_t                  va_offset;    /* address - IOVA */
} uct_ibshare_mem_t;


/*
 * Packed remote key: what a peer needs to address our memory. Pool memory is
 * registered at its IOVA in the node layout, not at the owner's virtual
 * address, so the key carries the difference; UCP passes virtual addresses.
 */
typedef struct UCS_S_PACKED uct_ibshare_packed_rkey {
    uint32_t                  rkey;
    uint64_t                  va_offset;    /* owner's address - IOVA */
} uct_ibshare_packed_rkey_t;


/* Unpacked remote key: uct_rkey_t points to one of these */
typedef struct uct_ibshare_rkey {
    uint64_t                  va_offset;
    uint32_t                  rkey;
} uct_ibshare_rkey_t;


/*
 * The remote address and key a work request carries for the peer's virtual
 * address. UCT_INVALID_RKEY and 0 name no key ((rkey + 1) <= 1 catches
 * both), and a zero-length request may come with either: then key 0 goes
 * out, which grants no access, and the key is never dereferenced.
 */
static UCS_F_ALWAYS_INLINE void
uct_ibshare_rkey_resolve(uct_rkey_t rkey, uint64_t remote_addr, size_t length,
                         uint64_t *iova_p, uint32_t *key_p)
{
    const uct_ibshare_rkey_t *key = (const uct_ibshare_rkey_t*)rkey;

    if (ucs_unlikely((length == 0) || ((uct_rkey_t)(rkey + 1) <= 1))) {
        *iova_p = remote_addr;
        *key_p  = 0;
        return;
    }

    *iova_p = remote_addr - key->va_offset;
    *key_p  = key->rkey;
}


typedef struct uct_ibshare_md {
    uct_md_t                  super;
    char                      dev_name[UCT_DEVICE_NAME_MAX];
    ucs_ternary_auto_value_t  rcache_mode;
    uct_ibshare_rcache_config_t rcache_cfg;
    uct_ibshare_share_params_t share;

    /* Acquired at first use, not at md open: see uct_ibshare_md_resources() */
    pthread_mutex_t           lock;
    uct_ibshare_resources_t   *res;
    struct ibv_context        *context;     /* res->context */
    struct ibv_pd             *pd;          /* res->pd */
    uct_ibshare_mem_t         pool_memh;    /* keys of pool memory we hold */
    ucs_rcache_t              *rcache;
} uct_ibshare_md_t;


/*
 * Get the device context and PD (joining the node group) if not done yet. Every path that needs
 * verbs resources (iface open, registration) goes through here.
 */
ucs_status_t uct_ibshare_md_resources(uct_ibshare_md_t *md);

/* A setting's value as the user wrote it, for error messages: auto and inf
 * of unsigned long and size_t settings by name, a negative value (wrapped
 * around at wrap: UINT_MAX, ULONG_MAX or SIZE_MAX) with its sign */
const char *uct_ibshare_config_value_str(unsigned long value,
                                         unsigned long wrap, char *buf,
                                         size_t max);

/*
 * Refuse a bad value of the md's settings, naming the variable and the
 * accepted range; mem: what the system offers (uct_ibshare_sys_mem_get).
 * Needs no device: md open calls it before anything is created.
 */
ucs_status_t uct_ibshare_md_config_check(const uct_ibshare_md_config_t *config,
                                         const uct_ibshare_sys_mem_t *mem);

ucs_status_t uct_ibshare_md_open(uct_component_t *component,
                                 const char *md_name,
                                 const uct_md_config_t *uct_md_config,
                                 uct_md_h *md_p);

ucs_status_t uct_ibshare_rkey_unpack(uct_component_t *component,
                                     const void *rkey_buffer,
                                     uct_rkey_t *rkey_p, void **handle_p);

ucs_status_t uct_ibshare_rkey_release(uct_component_t *component,
                                      uct_rkey_t rkey, void *handle);

extern ucs_config_field_t uct_ibshare_md_config_table[];

#endif
