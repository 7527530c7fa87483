/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Incast: SENDERS rc_share ifaces (each with a worker and an async context
 * of its own, so its own QPs) send MESSAGES active messages each to one
 * receiver iface with the default receive queue, which does not call
 * progress for DELAY seconds: far more messages arrive than it has receive
 * buffers. Then everything progresses until every message is in and every
 * sender's flush is done. Runs in the guest with the module preloaded.
 *
 *   incast DEVICE SENDERS MESSAGES DELAY_S
 *
 * Prints one line of counts; exits 0 when every message arrived, each once,
 * and no endpoint failed (the error handler never ran), 1 otherwise.
 */
#include "guest_util.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define AM_ID       7
#define MSG_LENGTH  64
#define DEADLINE_S  300.0


typedef struct {
    ucs_async_context_t *async;
    uct_worker_h        worker;
    uct_iface_h         iface;
    uct_ep_h            ep;
    unsigned            sent;
    int                 flushed;
    uct_completion_t    flush_comp;
} node_t;


static unsigned received, duplicates, errors;
static unsigned char *seen; /* by sender * messages + index */
static unsigned num_messages;


static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static ucs_status_t am_handler(void *arg, void *data, size_t length,
                               unsigned flags)
{
    unsigned sender, index;

    memcpy(&sender, data, sizeof(sender));
    memcpy(&index, (char*)data + sizeof(sender), sizeof(index));
    if ((length != MSG_LENGTH) || (index >= num_messages) ||
        (seen[sender * num_messages + index]++ != 0)) {
        ++duplicates;
    } else {
        ++received;
    }
    return UCS_OK;
}

static ucs_status_t error_handler(void *arg, uct_ep_h ep, ucs_status_t status)
{
    fprintf(stderr, "incast: endpoint %p failed: %s\n", (void*)ep,
            ucs_status_string(status));
    ++errors;
    return UCS_OK;
}

typedef struct {
    unsigned sender, index;
} pack_arg_t;

static size_t pack(void *dest, void *arg)
{
    const pack_arg_t *p = arg;

    memset(dest, 0, MSG_LENGTH);
    memcpy(dest, &p->sender, sizeof(p->sender));
    memcpy((char*)dest + sizeof(p->sender), &p->index, sizeof(p->index));
    return MSG_LENGTH;
}

static void flush_done(uct_completion_t *comp)
{
    node_t *node = ucs_container_of(comp, node_t, flush_comp);

    node->flushed = (comp->status == UCS_OK) ? 1 : -1;
}

static int node_open(node_t *node, uct_md_h md, const char *dev,
                     int is_sender)
{
    uct_iface_config_t *config;
    uct_iface_params_t params;
    ucs_status_t status;

    memset(node, 0, sizeof(*node));
    if ((ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                  &node->async) != UCS_OK) ||
        (uct_worker_create(node->async, UCS_THREAD_MODE_SINGLE,
                           &node->worker) != UCS_OK) ||
        (uct_md_iface_config_read(md, "rc_share", NULL, NULL, &config) !=
         UCS_OK)) {
        return -1;
    }

    if (is_sender) {
        /* Senders receive nothing: a short receive queue each */
        (void)uct_config_modify(config, "RX_QUEUE_LEN", "16");
    }

    memset(&params, 0, sizeof(params));
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "rc_share";
    params.mode.device.dev_name = dev;
    params.err_handler          = error_handler;
    params.err_handler_flags    = UCT_CB_FLAG_ASYNC;

    status = uct_iface_open(md, node->worker, &params, config, &node->iface);
    uct_config_release(config);
    if (status != UCS_OK) {
        fprintf(stderr, "incast: uct_iface_open(%s) failed: %s\n", dev,
                ucs_status_string(status));
        return -1;
    }
    uct_iface_progress_enable(node->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    return 0;
}

static int connect_to(node_t *node, node_t *target)
{
    uct_iface_attr_t attr;
    uct_ep_params_t params;
    void *dev_addr, *iface_addr;
    int ret;

    if (uct_iface_query(target->iface, &attr) != UCS_OK) {
        return -1;
    }
    dev_addr   = malloc(attr.device_addr_len);
    iface_addr = malloc(attr.iface_addr_len);
    ret        = -1;
    if ((dev_addr != NULL) && (iface_addr != NULL) &&
        (uct_iface_get_device_address(target->iface, dev_addr) == UCS_OK) &&
        (uct_iface_get_address(target->iface, iface_addr) == UCS_OK)) {
        params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                            UCT_EP_PARAM_FIELD_DEV_ADDR |
                            UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface      = node->iface;
        params.dev_addr   = dev_addr;
        params.iface_addr = iface_addr;
        ret = (uct_ep_create(&params, &node->ep) == UCS_OK) ? 0 : -1;
    }
    free(dev_addr);
    free(iface_addr);
    return ret;
}

int main(int argc, char **argv)
{
    uct_md_config_t *md_config;
    node_t *senders, receiver;
    unsigned num_senders, i, sent = 0, abandoned = 0, flushed, failed, count;
    uct_component_h component;
    double start, delay, end, idle_since;
    ucs_status_t status;
    pack_arg_t arg;
    ssize_t len;
    char md_name[64], *colon;
    uct_md_h md;
    int ok;

    if (argc != 5) {
        fprintf(stderr, "usage: incast DEVICE SENDERS MESSAGES DELAY_S\n");
        return 2;
    }
    num_senders  = atoi(argv[2]);
    num_messages = atoi(argv[3]);
    delay        = atof(argv[4]);
    senders      = calloc(num_senders, sizeof(*senders));
    seen         = calloc((size_t)num_senders * num_messages, 1);

    /* The md is the device, the iface its port: rxe0 of rxe0:1 */
    snprintf(md_name, sizeof(md_name), "%s", argv[1]);
    colon = strchr(md_name, ':');
    if (colon != NULL) {
        *colon = '\0';
    }

    component = guest_find_component("ibshare");
    if ((component == NULL) || (senders == NULL) || (seen == NULL) ||
        (uct_md_config_read(component, NULL, NULL, &md_config) != UCS_OK) ||
        (uct_md_open(component, md_name, md_config, &md) != UCS_OK)) {
        fprintf(stderr, "incast: no ibshare md (module not preloaded?)\n");
        return 1;
    }
    uct_config_release(md_config);

    if (node_open(&receiver, md, argv[1], 0) != 0) {
        return 1;
    }
    uct_iface_set_am_handler(receiver.iface, AM_ID, am_handler, NULL,
                             UCT_CB_FLAG_ASYNC);
    for (i = 0; i < num_senders; ++i) {
        if ((node_open(&senders[i], md, argv[1], 1) != 0) ||
            (connect_to(&senders[i], &receiver) != 0)) {
            fprintf(stderr, "incast: sender %u: no iface or endpoint\n", i);
            return 1;
        }
    }

    /* Everyone sends; the receiver calls no progress for DELAY seconds */
    start = now();
    end   = start + DEADLINE_S;
    while ((sent + abandoned < num_senders * num_messages) && (now() < end)) {
        for (i = 0; i < num_senders; ++i) {
            if (senders[i].sent == num_messages) {
                continue;
            }
            arg.sender = i;
            arg.index  = senders[i].sent;
            len = uct_ep_am_bcopy(senders[i].ep, AM_ID, pack, &arg, 0);
            if (len >= 0) {
                ++senders[i].sent;
                ++sent;
            } else if (len != UCS_ERR_NO_RESOURCE) {
                fprintf(stderr, "incast: sender %u: am_bcopy: %s\n", i,
                        ucs_status_string((ucs_status_t)len));
                abandoned += num_messages - senders[i].sent;
                senders[i].sent = num_messages; /* gives up */
            }
            uct_worker_progress(senders[i].worker);
        }
        if (now() - start >= delay) {
            uct_worker_progress(receiver.worker);
        }
    }
    printf("incast: %u senders queued %u messages in %.1f s (the receiver "
           "idle for the first %.1f s)\n", num_senders, sent, now() - start,
           delay);

    while (now() - start < delay) {
        for (i = 0; i < num_senders; ++i) {
            uct_worker_progress(senders[i].worker);
        }
    }

    /* Everyone progresses until the messages are in and the flushes done */
    for (i = 0; i < num_senders; ++i) {
        senders[i].flush_comp.func   = flush_done;
        senders[i].flush_comp.count  = 1;
        senders[i].flush_comp.status = UCS_OK;
        senders[i].flushed           = 0;
        status = UCS_ERR_NO_RESOURCE;
        while ((status == UCS_ERR_NO_RESOURCE) && (now() < end)) {
            status = uct_ep_flush(senders[i].ep, 0, &senders[i].flush_comp);
            uct_worker_progress(senders[i].worker);
            uct_worker_progress(receiver.worker);
        }
        if (status == UCS_OK) {
            senders[i].flushed = 1;
        } else if (status != UCS_INPROGRESS) {
            senders[i].flushed = -1;
        }
    }
    do {
        flushed = failed = 0;
        uct_worker_progress(receiver.worker);
        for (i = 0; i < num_senders; ++i) {
            uct_worker_progress(senders[i].worker);
            flushed += senders[i].flushed != 0;
            failed  += senders[i].flushed < 0;
        }
    } while ((flushed < num_senders) && (now() < end));

    /* Every send is done (delivered, or failed): what was delivered is in
     * the receiver's queue; a message lost to a failed endpoint never
     * comes, so stop after 2 s without one */
    idle_since = now();
    while ((received + duplicates < sent) && (now() - idle_since < 2.0)) {
        count = received + duplicates;
        uct_worker_progress(receiver.worker);
        if (received + duplicates != count) {
            idle_since = now();
        }
    }

    ok = (received == num_senders * num_messages) && (duplicates == 0) &&
         (errors == 0) && (failed == 0);
    printf("incast: senders %u, messages %u, sent %u, received %u, "
           "duplicates or malformed %u, endpoint errors %u, failed flushes "
           "%u, %.1f s: %s\n", num_senders, num_senders * num_messages, sent,
           received, duplicates, errors, failed, now() - start,
           ok ? "PASS" : "FAIL");

    for (i = 0; i < num_senders; ++i) {
        uct_ep_destroy(senders[i].ep);
        uct_iface_close(senders[i].iface);
        uct_worker_destroy(senders[i].worker);
        ucs_async_context_destroy(senders[i].async);
    }
    uct_iface_close(receiver.iface);
    uct_worker_destroy(receiver.worker);
    ucs_async_context_destroy(receiver.async);
    uct_md_close(md);
    free(seen);
    free(senders);
    return ok ? 0 : 1;
}
