/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * One member of a node group test (test/guest/node_group.sh): opens the
 * rc_share iface (which joins the group), allocates a buffer from its slice,
 * RDMA-writes a pattern into the next member's buffer and reads it back,
 * checking the registrations it makes on the way (count_reg.c is
 * preloaded).
 *
 *   node_member DIR INDEX COUNT DEVICE:PORT MODE
 *
 * MODE is the group mode the device gives: "fallback" (every provider but
 * mlx5: each member registers its slice, once) or "shared" (mlx5: the
 * leader registers the pool, once, and the others nothing; the script adds
 * up the "registrations: N" lines), or "any" (no registration checks: a
 * member may run with private resources).
 *
 * Members meet through files in DIR: addr.<i> (how to reach member i),
 * written.<i> (member i's write is flushed), read.<i> (member i read it
 * back), checked.<i> (member i checked its buffer); the script creates
 * DIR/release when it has looked at the live group.
 */
#define _GNU_SOURCE
#include "guest_util.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#define BUF_SIZE      65536
#define ADDR_MAX      256
#define WAIT_SECONDS  120

static int my_index;



typedef struct {
    uint64_t  buffer;
    uint32_t  dev_len, iface_len, rkey_len;
    uint8_t   dev[ADDR_MAX], iface[ADDR_MAX], rkey[ADDR_MAX];
} member_addr_t;

static const char *dir;
static uct_worker_h worker;



static void path_of(char *path, size_t max, const char *what, int index)
{
    snprintf(path, max, "%s/%s.%d", dir, what, index);
}

static void publish(const char *what, const void *data, size_t length)
{
    char path[512];

    path_of(path, sizeof(path), what, my_index);
    guest_publish(path, data, length);
}

/* Waits, progressing UCT (peers' handshakes need us), until a file exists */
static void wait_for(const char *path)
{
    time_t deadline = time(NULL) + WAIT_SECONDS;
    struct stat st;

    while (stat(path, &st) != 0) {
        if (time(NULL) > deadline) {
            DIE("timed out waiting for %s", path);
        }
        uct_worker_progress(worker);
        usleep(1000);
    }
}

static void wait_all(const char *what, int count)
{
    char path[512];
    int i;

    for (i = 0; i < count; ++i) {
        path_of(path, sizeof(path), what, i);
        wait_for(path);
    }
}

static void read_addr(int index, member_addr_t *addr)
{
    char path[512];
    FILE *file;

    path_of(path, sizeof(path), "addr", index);
    file = fopen(path, "r");
    if ((file == NULL) || (fread(addr, 1, sizeof(*addr), file) !=
                           sizeof(*addr))) {
        DIE("cannot read %s", path);
    }
    fclose(file);
}


/* Runs an operation that may need retries until the QP is connected */
static void wait_comp(uct_completion_t *comp, ucs_status_t status,
                      const char *what)
{
    time_t deadline = time(NULL) + WAIT_SECONDS;

    if (status == UCS_OK) {
        return;
    }
    if (status != UCS_INPROGRESS) {
        DIE("%s: %s", what, ucs_status_string(status));
    }
    while (comp->count > 0) {
        if (time(NULL) > deadline) {
            DIE("%s: timed out", what);
        }
        uct_worker_progress(worker);
    }
    if (comp->status != UCS_OK) {
        DIE("%s completed with %s", what, ucs_status_string(comp->status));
    }
}

int main(int argc, char **argv)
{
    uct_completion_t comp = {.func = guest_completed};
    uct_allocated_memory_t local, source, second, readback;
    uct_iface_params_t iface_params;
    uct_mem_alloc_params_t alloc;
    uct_iface_config_t *iface_config;
    uct_md_config_t *md_config;
    uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    member_addr_t self, peer;
    uct_rkey_bundle_t rkey;
    uct_ep_params_t ep_params;
    uct_component_h component;
    uct_iface_attr_t attr;
    ucs_async_context_t *async;
    unsigned long regs;
    uct_mem_h memh;
    uct_iface_h iface;
    uct_ep_h ep;
    uct_md_h md, md2;
    ucs_status_t status;
    char path[512], md_name[64], *colon;
    uint8_t *bytes;
    int count, next, prev, i, bad, shared, any, fds;
    uct_iov_t iov;

    if ((argc != 6) || (strcmp(argv[5], "shared") &&
                        strcmp(argv[5], "fallback") && strcmp(argv[5], "any"))) {
        fprintf(stderr, "usage: %s DIR INDEX COUNT DEVICE:PORT "
                "shared|fallback|any\n", argv[0]);
        return 2;
    }
    shared   = !strcmp(argv[5], "shared");
    any      = !strcmp(argv[5], "any");
    dir      = argv[1];
    my_index = atoi(argv[2]);
    snprintf(guest_name, sizeof(guest_name), "node_member %d", my_index);
    count    = atoi(argv[3]);
    next     = (my_index + 1) % count;
    prev     = (my_index + count - 1) % count;
    snprintf(md_name, sizeof(md_name), "%s", argv[4]);
    colon = strchr(md_name, ':');
    if (colon != NULL) {
        *colon = '\0';
    }

    component = guest_ibshare_component();
    fds       = guest_open_fds();
    /* Two mds, as Open MPI's pml and osc each open one: one membership */
    if ((uct_md_config_read(component, NULL, NULL, &md_config) != UCS_OK) ||
        (uct_md_open(component, md_name, md_config, &md) != UCS_OK) ||
        (uct_md_open(component, md_name, md_config, &md2) != UCS_OK)) {
        DIE("cannot open md %s", md_name);
    }
    uct_config_release(md_config);
    CHECK(guest_registrations() == 0, "opening the md registers nothing");

    guest_open_worker(md, &async, &worker, &iface_config);

    memset(&iface_params, 0, sizeof(iface_params));
    iface_params.field_mask            = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                         UCT_IFACE_PARAM_FIELD_DEVICE;
    iface_params.open_mode             = UCT_IFACE_OPEN_MODE_DEVICE;
    iface_params.mode.device.tl_name   = "rc_share";
    iface_params.mode.device.dev_name  = argv[4];
    status = uct_iface_open(md, worker, &iface_params, iface_config, &iface);
    uct_config_release(iface_config);
    if (status != UCS_OK) {
        DIE("uct_iface_open(rc_share/%s): %s", argv[4],
            ucs_status_string(status));
    }
    uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);

    regs = guest_registrations();
    if (any) {
        printf("iface open after %lu registration(s)\n", regs);
    } else if (shared) {
        CHECK(regs <= 1, "the iface is open after %lu registration(s), "
              "expected 1 in the leader (the pool) and 0 in the others",
              regs);
    } else {
        CHECK(regs == 1, "the iface is open after %lu registration(s), "
              "expected 1: the rank's slice (buffers come from it)", regs);
    }

    /* Memory from the slice: no registration, and mem_reg of it none */
    memset(&alloc, 0, sizeof(alloc));
    alloc.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_MDS |
                       UCT_MEM_ALLOC_PARAM_FIELD_FLAGS;
    alloc.flags      = UCT_MD_MEM_ACCESS_ALL;
    alloc.mds.mds    = &md;
    alloc.mds.count  = 1;
    if ((uct_mem_alloc(BUF_SIZE, &method, 1, &alloc, &local) != UCS_OK) ||
        (uct_mem_alloc(BUF_SIZE, &method, 1, &alloc, &source) != UCS_OK) ||
        (uct_mem_alloc(BUF_SIZE, &method, 1, &alloc, &readback) != UCS_OK)) {
        DIE("uct_mem_alloc(md ibshare) failed");
    }
    CHECK((local.method == UCT_ALLOC_METHOD_MD) && (local.md == md),
          "mem_alloc is served by the ibshare md (%p)", local.address);
    CHECK(uct_md_mem_reg(md, local.address, BUF_SIZE, UCT_MD_MEM_ACCESS_ALL,
                         &memh) == UCS_OK, "mem_reg of slice memory");
    uct_md_mem_dereg(md, memh);
    CHECK(any || (guest_registrations() == regs), "allocating from the slice and "
          "registering slice memory made no verbs registration (%lu in all)",
          guest_registrations());

    alloc.mds.mds = &md2;
    CHECK(uct_mem_alloc(BUF_SIZE, &method, 1, &alloc, &second) == UCS_OK,
          "mem_alloc from a second md of the same device");
    CHECK(any || (guest_registrations() == regs), "the second md shares the "
          "process's "
          "membership and slice: no registration (%lu in all)",
          guest_registrations());
    uct_mem_free(&second);
    uct_md_close(md2);

    memset(local.address, 0, BUF_SIZE);
    for (i = 0, bytes = source.address; i < BUF_SIZE; ++i) {
        bytes[i] = (uint8_t)(my_index * 31 + i * 7 + (i >> 8));
    }

    /* Tell the others how to reach us */
    memset(&self, 0, sizeof(self));
    if (uct_iface_query(iface, &attr) != UCS_OK) {
        DIE("uct_iface_query");
    }
    self.buffer    = (uintptr_t)local.address;
    self.dev_len   = attr.device_addr_len;
    self.iface_len = attr.iface_addr_len;
    self.rkey_len  = ADDR_MAX;
    if ((uct_iface_get_device_address(iface, (void*)self.dev) != UCS_OK) ||
        (uct_iface_get_address(iface, (void*)self.iface) != UCS_OK) ||
        (uct_md_mkey_pack(md, local.memh, self.rkey) != UCS_OK)) {
        DIE("cannot get our addresses");
    }
    publish("addr", &self, sizeof(self));
    wait_all("addr", count);

    /* RDMA-write our pattern into the next member's slice */
    read_addr(next, &peer);
    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                           UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = iface;
    ep_params.dev_addr   = (void*)peer.dev;
    ep_params.iface_addr = (void*)peer.iface;
    if ((uct_ep_create(&ep_params, &ep) != UCS_OK) ||
        (uct_rkey_unpack(component, peer.rkey, &rkey) != UCS_OK)) {
        DIE("cannot reach member %d", next);
    }

    iov.buffer = source.address;
    iov.length = BUF_SIZE;
    iov.memh   = source.memh;
    iov.stride = 0;
    iov.count  = 1;
    comp.count = 1;
    do {
        status = uct_ep_put_zcopy(ep, &iov, 1, peer.buffer, rkey.rkey, &comp);
        uct_worker_progress(worker);
    } while (status == UCS_ERR_NO_RESOURCE);
    wait_comp(&comp, status, "put_zcopy");

    comp.count  = 1;
    comp.status = UCS_OK;
    do {
        status = uct_ep_flush(ep, 0, &comp);
        uct_worker_progress(worker);
    } while (status == UCS_ERR_NO_RESOURCE);
    wait_comp(&comp, status, "flush");
    publish("written", "", 0);
    wait_all("written", count);

    /* Our buffer holds the previous member's pattern, byte for byte */
    for (i = 0, bad = 0, bytes = local.address; i < BUF_SIZE; ++i) {
        bad += bytes[i] != (uint8_t)(prev * 31 + i * 7 + (i >> 8));
    }
    CHECK(bad == 0, "member %d's RDMA write into our slice arrived intact "
          "(%d of %d bytes differ)", prev, bad, BUF_SIZE);

    /* And what we wrote reads back from the next member's slice */
    memset(readback.address, 0, BUF_SIZE);
    iov.buffer  = readback.address;
    iov.memh    = readback.memh;
    comp.count  = 1;
    comp.status = UCS_OK;
    do {
        status = uct_ep_get_zcopy(ep, &iov, 1, peer.buffer, rkey.rkey, &comp);
        uct_worker_progress(worker);
    } while (status == UCS_ERR_NO_RESOURCE);
    wait_comp(&comp, status, "get_zcopy");
    CHECK(!memcmp(readback.address, source.address, BUF_SIZE),
          "an RDMA read of member %d's slice returns what we wrote there",
          next);
    /* Nobody leaves (its QPs with it) while a peer still reads from it */
    publish("read", "", 0);
    wait_all("read", count);
    CHECK(any || (guest_registrations() == regs), "the whole run made no "
          "registration beyond the pool or slice (%lu)", guest_registrations());
    printf("registrations: %lu\n", guest_registrations());

    publish("checked", "", 0);
    snprintf(path, sizeof(path), "%s/release", dir);
    wait_for(path);

    uct_rkey_release(component, &rkey);
    uct_ep_destroy(ep);
    uct_mem_free(&readback);
    uct_mem_free(&source);
    uct_mem_free(&local);
    uct_iface_close(iface);
    uct_worker_destroy(worker);
    ucs_async_context_destroy(async);
    uct_md_close(md);
    CHECK(guest_open_fds() == fds, "leaving the group closed every fd it "
          "opened (%d before, %d after)", fds, guest_open_fds());
    return guest_failures ? 1 : 0;
}
