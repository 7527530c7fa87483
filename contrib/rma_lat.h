/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/*
 * rma_lat.h - what the UCP program (rma_lat.c: the options, the control
 * socket, the timed loops) lends its UCT level (rma_lat_uct.c)
 */
#ifndef RMA_LAT_H
#define RMA_LAT_H

#include <ucs/sys/compiler_def.h>
#include <ucs/type/status.h>

#include <stddef.h>
#include <stdint.h>

#define RMA_LAT_MAX_BATCHES 1000

typedef struct {
    const char *server;  /* -c: the client's server; NULL on the server */
    const char *port;
    long       iters;
    long       batches;
    long       warmup;
    const char *ops;     /* -o: NULL for every operation */
    const char *tl;      /* -t and -d: UCT level on this transport/device */
    const char *dev;
} rma_lat_opts_t;

extern rma_lat_opts_t opts;
extern unsigned long  progress_calls; /* of the client, while it waits */

void UCS_F_NORETURN die(const char *what, ucs_status_t status);

/* The control socket: the server listens, the client connects */
int sock_connect_or_listen(void);
void sock_full(int fd, void *buf, size_t len, int send_it);
void blob_send(int fd, const void *buf, size_t len);
void *blob_recv(int fd, size_t *len_p);

/* Times OP(ARG) in batches and prints its line, if -o selects NAME; one
 * call of OP does PER_CALL operations */
void run_op(const char *name, void (*op)(void*), void *arg, long per_call);

/* Whether a get read back the last put's value: prints "ok: ..." (the
 * scripts' check) or the mismatch */
int last_value_back(uint64_t put, uint64_t got);

int uct_server(void);
int uct_client(void);

#endif
