/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/*
 * rma_lat_uct.c - rma_lat's loops at UCT level (rma_lat -t TL -d DEV): an
 * 8-byte put short followed by uct_ep_flush with a completion, or by
 * uct_iface_flush polled as UCP's worker flush polls it, a get bcopy of 8
 * bytes and a get zcopy of RMA_LAT_UCT_ZCOPY bytes waited for, and a flush
 * with nothing outstanding. Both transports run the same loops:
 * rc_share connects to the peer's iface, rc_verbs to the peer's endpoint.
 */
#include "rma_lat.h"

#include <uct/api/uct.h>

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* rc_verbs' smallest get zcopy (its max get bcopy + 1); both transports
 * use the same size */
#define RMA_LAT_UCT_ZCOPY 65

typedef struct {
    uct_component_h     component;
    uct_md_h            md;
    ucs_async_context_t *async;
    uct_worker_h        worker;
    uct_iface_h         iface;
    uct_iface_attr_t    attr;
    uct_ep_h            ep;
    uint64_t            buffer[64]; /* the target of the peer's RMA */
    uct_mem_h           memh;
} uct_side_t;

typedef struct {
    uct_side_t *side;
    uct_rkey_bundle_t rkey;
    uint64_t          raddr;
    uint64_t          value;
    uint64_t          got;
} uct_rma_t;

static void check(const char *what, ucs_status_t status)
{
    if (status != UCS_OK) {
        die(what, status);
    }
}

static void progress(uct_side_t *side)
{
    uct_worker_progress(side->worker);
    ++progress_calls;
}

static int iface_open(uct_side_t *side, uct_component_h component,
                      const char *md_name)
{
    uct_iface_params_t params = { 0 };
    uct_tl_resource_desc_t *tls;
    uct_iface_config_t *iface_config;
    uct_md_config_t *md_config;
    unsigned num_tls, i;
    int found = 0;

    check("uct_md_config_read",
          uct_md_config_read(component, NULL, NULL, &md_config));
    check("uct_md_open", uct_md_open(component, md_name, md_config,
                                     &side->md));
    uct_config_release(md_config);
    check("uct_md_query_tl_resources",
          uct_md_query_tl_resources(side->md, &tls, &num_tls));
    for (i = 0; i < num_tls; ++i) {
        found |= !strcmp(tls[i].tl_name, opts.tl) &&
                 !strcmp(tls[i].dev_name, opts.dev);
    }
    uct_release_tl_resource_list(tls);
    if (!found) {
        uct_md_close(side->md);
        return 0;
    }

    side->component = component;
    params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                        UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = opts.tl;
    params.mode.device.dev_name = opts.dev;
    check("uct_md_iface_config_read",
          uct_md_iface_config_read(side->md, opts.tl, NULL, NULL,
                                   &iface_config));
    check("uct_iface_open", uct_iface_open(side->md, side->worker, &params,
                                           iface_config, &side->iface));
    uct_config_release(iface_config);
    uct_iface_progress_enable(side->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    check("uct_iface_query", uct_iface_query(side->iface, &side->attr));
    return 1;
}

/* The md and iface of opts.tl on opts.dev, whichever component has them */
static void side_open(uct_side_t *side)
{
    uct_component_attr_t attr;
    uct_component_h *components;
    unsigned num, c, m;

    check("ucs_async_context_create",
          ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                   &side->async));
    check("uct_worker_create", uct_worker_create(side->async,
                                                 UCS_THREAD_MODE_SINGLE,
                                                 &side->worker));
    check("uct_query_components", uct_query_components(&components, &num));
    for (c = 0; c < num; ++c) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        check("uct_component_query", uct_component_query(components[c],
                                                         &attr));
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = calloc(attr.md_resource_count + 1,
                                   sizeof(*attr.md_resources));
        check("uct_component_query", uct_component_query(components[c],
                                                         &attr));
        for (m = 0; m < attr.md_resource_count; ++m) {
            if (iface_open(side, components[c],
                           attr.md_resources[m].md_name)) {
                free(attr.md_resources);
                uct_release_component_list(components);
                goto found;
            }
        }
        free(attr.md_resources);
    }
    fprintf(stderr, "rma_lat: no transport %s on device %s\n", opts.tl,
            opts.dev);
    exit(1);

found:
    if (!(side->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) &&
        !(side->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_EP)) {
        fprintf(stderr, "rma_lat: %s connects neither to an iface nor to "
                "an endpoint\n", opts.tl);
        exit(1);
    }
    check("uct_md_mem_reg", uct_md_mem_reg(side->md, side->buffer,
                                           sizeof(side->buffer),
                                           UCT_MD_MEM_ACCESS_ALL,
                                           &side->memh));
}

static void side_close(uct_side_t *side)
{
    if (side->ep != NULL) {
        uct_ep_destroy(side->ep);
    }
    uct_md_mem_dereg(side->md, side->memh);
    uct_iface_close(side->iface);
    uct_md_close(side->md);
    uct_worker_destroy(side->worker);
    ucs_async_context_destroy(side->async);
}

static int to_ep(const uct_side_t *side)
{
    return !(side->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
}

/* This side's device address, iface address and (connecting to endpoints)
 * endpoint address, each a blob (an empty one when there is none) */
static void send_addresses(int fd, uct_side_t *side)
{
    size_t dev_len   = side->attr.device_addr_len;
    size_t iface_len = side->attr.iface_addr_len;
    size_t ep_len    = side->attr.ep_addr_len;
    uint8_t *buf     = malloc(dev_len + iface_len + ep_len + 1);

    if (buf == NULL) {
        die("malloc", UCS_ERR_NO_MEMORY);
    }
    check("uct_iface_get_device_address",
          uct_iface_get_device_address(side->iface,
                                       (uct_device_addr_t*)buf));
    blob_send(fd, buf, dev_len);
    if (to_ep(side)) {
        check("uct_ep_get_address",
              uct_ep_get_address(side->ep, (uct_ep_addr_t*)buf));
        blob_send(fd, buf, ep_len);
    } else {
        check("uct_iface_get_address",
              uct_iface_get_address(side->iface, (uct_iface_addr_t*)buf));
        blob_send(fd, buf, iface_len);
    }
    free(buf);
}

static void ep_create(uct_side_t *side, const void *dev_addr,
                      const void *iface_addr)
{
    uct_ep_params_t params = { 0 };

    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = side->iface;
    if (iface_addr != NULL) {
        params.field_mask |= UCT_EP_PARAM_FIELD_DEV_ADDR |
                             UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.dev_addr    = dev_addr;
        params.iface_addr  = iface_addr;
    }
    check("uct_ep_create", uct_ep_create(&params, &side->ep));
}

/* The peer's addresses; connects this side's endpoint to them */
static void connect_to_peer(int fd, uct_side_t *side)
{
    void *dev_addr, *addr;
    size_t len;

    dev_addr = blob_recv(fd, &len);
    addr     = blob_recv(fd, &len);
    if (to_ep(side)) {
        check("uct_ep_connect_to_ep",
              uct_ep_connect_to_ep(side->ep, dev_addr, addr));
    } else {
        ep_create(side, dev_addr, addr);
    }
    free(dev_addr);
    free(addr);
}

/* ---------------------------------------------------------------- server */

int uct_server(void)
{
    uct_side_t side = { 0 };
    uint64_t addr;
    void *rkey_buf;
    size_t rkey_len;
    struct pollfd pfd;
    char byte = 1;
    int fd;

    side_open(&side);
    if (to_ep(&side)) {
        ep_create(&side, NULL, NULL);
    }
    fd = sock_connect_or_listen();
    send_addresses(fd, &side);

    {
        uct_md_attr_t md_attr;

        check("uct_md_query", uct_md_query(side.md, &md_attr));
        rkey_len = md_attr.rkey_packed_size;
    }
    rkey_buf = malloc(rkey_len + 1);
    if (rkey_buf == NULL) {
        die("malloc", UCS_ERR_NO_MEMORY);
    }
    check("uct_md_mkey_pack", uct_md_mkey_pack(side.md, side.memh,
                                               rkey_buf));
    blob_send(fd, rkey_buf, rkey_len);
    addr = (uintptr_t)side.buffer;
    blob_send(fd, &addr, sizeof(addr));
    free(rkey_buf);

    if (to_ep(&side)) {
        connect_to_peer(fd, &side);
        /* The client posts only once our QP can take its packets */
        sock_full(fd, &byte, 1, 1);
    }

    /* rc_share's handshake needs this side's progress; one byte ends */
    pfd.fd     = fd;
    pfd.events = POLLIN;
    do {
        uct_worker_progress(side.worker);
    } while (poll(&pfd, 1, 0) == 0);
    sock_full(fd, &byte, 1, 0);
    sock_full(fd, &byte, 1, 1);
    close(fd);
    side_close(&side);
    return 0;
}

/* ---------------------------------------------------------------- client */

static void completed(uct_completion_t *comp)
{
    (void)comp;
}

static void wait_comp(uct_side_t *side, uct_completion_t *comp,
                      ucs_status_t status, const char *what)
{
    if (status == UCS_INPROGRESS) {
        while (comp->count > 0) {
            progress(side);
        }
        status = comp->status;
    }
    check(what, status);
}

static void put8(uct_rma_t *r)
{
    ucs_status_t status;

    ++r->value;
    while ((status = uct_ep_put_short(r->side->ep, &r->value, 8, r->raddr,
                                      r->rkey.rkey)) == UCS_ERR_NO_RESOURCE) {
        progress(r->side);
    }
    check("uct_ep_put_short", status);
}

static void op_put8_ep_flush(void *arg)
{
    uct_rma_t *r          = arg;
    uct_completion_t comp = { completed, 1, UCS_OK };
    ucs_status_t status;

    put8(r);
    while ((status = uct_ep_flush(r->side->ep, 0, &comp)) ==
           UCS_ERR_NO_RESOURCE) {
        progress(r->side);
    }
    wait_comp(r->side, &comp, status, "uct_ep_flush");
}

/* As UCP's worker flush does: uct_iface_flush without a completion, polled
 * until it says UCS_OK */
static void iface_flush_polled(uct_side_t *side)
{
    ucs_status_t status;

    while ((status = uct_iface_flush(side->iface, 0, NULL)) != UCS_OK) {
        if ((status != UCS_INPROGRESS) && (status != UCS_ERR_NO_RESOURCE)) {
            die("uct_iface_flush", status);
        }
        progress(side);
    }
}

static void op_put8_iface_flush(void *arg)
{
    uct_rma_t *r = arg;

    put8(r);
    iface_flush_polled(r->side);
}

static void unpack8(void *arg, const void *data, size_t length)
{
    if (length == 8) {
        memcpy(arg, data, 8);
    }
}

static void op_get8_bcopy(void *arg)
{
    uct_rma_t *r          = arg;
    uct_completion_t comp = { completed, 1, UCS_OK };
    ucs_status_t status;

    while ((status = uct_ep_get_bcopy(r->side->ep, unpack8, &r->got, 8,
                                      r->raddr, r->rkey.rkey, &comp)) ==
           UCS_ERR_NO_RESOURCE) {
        progress(r->side);
    }
    wait_comp(r->side, &comp, status, "uct_ep_get_bcopy");
}

static void op_get_zcopy(void *arg)
{
    uct_rma_t *r          = arg;
    uct_completion_t comp = { completed, 1, UCS_OK };
    uct_iov_t iov         = { 0 };
    ucs_status_t status;

    iov.buffer = r->side->buffer;
    iov.length = RMA_LAT_UCT_ZCOPY;
    iov.memh   = r->side->memh;
    iov.count  = 1;
    while ((status = uct_ep_get_zcopy(r->side->ep, &iov, 1, r->raddr,
                                      r->rkey.rkey, &comp)) ==
           UCS_ERR_NO_RESOURCE) {
        progress(r->side);
    }
    wait_comp(r->side, &comp, status, "uct_ep_get_zcopy");
}

static void op_iface_flush_idle(void *arg)
{
    iface_flush_polled(((uct_rma_t*)arg)->side);
}

int uct_client(void)
{
    uct_side_t side = { 0 };
    uct_rma_t r     = { 0 };
    void *rkey_buf, *raddr;
    char byte = 1;
    size_t len;
    int fd;

    r.side = &side;
    side_open(&side);
    fd = sock_connect_or_listen();
    if (to_ep(&side)) {
        ep_create(&side, NULL, NULL);
    }
    connect_to_peer(fd, &side);
    rkey_buf = blob_recv(fd, &len);
    raddr    = blob_recv(fd, &len);
    if (len != sizeof(r.raddr)) {
        fprintf(stderr, "rma_lat: a remote address of %zu bytes\n", len);
        return 1;
    }
    memcpy(&r.raddr, raddr, sizeof(r.raddr));
    check("uct_rkey_unpack", uct_rkey_unpack(side.component, rkey_buf,
                                             &r.rkey));
    if (to_ep(&side)) {
        send_addresses(fd, &side);
        sock_full(fd, &byte, 1, 0);
    }

    /* The connection up (rc_share connects on the first send) before the
     * first operation: outside the op_ functions, which contrib/bench_rma
     * --instructions counts */
    put8(&r);
    iface_flush_polled(&side);

    run_op("put8_ep_flush", op_put8_ep_flush, &r, 1);
    run_op("put8_iface_flush", op_put8_iface_flush, &r, 1);
    run_op("get8_bcopy", op_get8_bcopy, &r, 1);
    run_op("get65_zcopy", op_get_zcopy, &r, 1);
    run_op("iface_flush_idle", op_iface_flush_idle, &r, 1);

    /* Every put arrived: the last value comes back */
    put8(&r);
    iface_flush_polled(&side);
    op_get8_bcopy(&r);
    if (!last_value_back(r.value, r.got)) {
        return 1;
    }

    sock_full(fd, &byte, 1, 1);
    sock_full(fd, &byte, 1, 0);
    close(fd);
    uct_rkey_release(side.component, &r.rkey);
    free(rkey_buf);
    free(raddr);
    side_close(&side);
    return 0;
}
