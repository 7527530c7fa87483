/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * libFuzzer target for the node group's message decoder (contrib/fuzz builds
 * and runs it). Whatever a peer on the socket sends must either be refused
 * with a NUL-terminated reason, or be a message that re-encodes to exactly
 * the bytes received: anything else aborts.
 *
 * Built with -DFUZZ_DESC_SEEDS instead, it is a small program that writes
 * one valid message of each type into the directory given, as the starting
 * corpus (random bytes alone would rarely get past the magic).
 */
#include "node/ibshare_desc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#ifndef FUZZ_DESC_SEEDS

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t out[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_msg_t msg;
    char err[128];
    size_t length;

    memset(err, 'x', sizeof(err));
    if (uct_ibshare_msg_unpack(data, size, &msg, err, sizeof(err)) !=
        UCS_OK) {
        if ((memchr(err, '\0', sizeof(err)) == NULL) || (err[0] == '\0')) {
            fprintf(stderr, "fuzz_desc: rejected without a reason\n");
            abort();
        }
        return 0;
    }

    length = uct_ibshare_msg_pack(out, sizeof(out), &msg);
    if ((length != size) || (memcmp(out, data, size) != 0)) {
        fprintf(stderr, "fuzz_desc: accepted %zu bytes (type %u) that "
                "re-encode to %zu other bytes\n", size, msg.type, length);
        abort();
    }
    return 0;
}

#else

static int fuzz_desc_write(const char *dir, const char *name,
                           const uint8_t *buf, size_t length)
{
    char path[4096];
    FILE *file;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    file = fopen(path, "wb");
    if ((file == NULL) || (fwrite(buf, 1, length, file) != length) ||
        (fclose(file) != 0)) {
        perror(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint8_t buf[UCT_IBSHARE_MSG_MAX];
    uct_ibshare_ident_t ident;
    uct_ibshare_desc_t desc;
    size_t length;

    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }

    memset(&desc, 0, sizeof(desc));
    desc.mode       = UCT_IBSHARE_GROUP_SHARED;
    desc.pd_handle  = 1;
    desc.mr_handle  = 2;
    desc.lkey       = 0x1234;
    desc.rkey       = 0x5678;
    desc.pool_iova  = 0x7f0000000000ull;
    desc.slice_size = 1 << 21;
    desc.num_slices = 16;
    desc.pool_size  = desc.slice_size * desc.num_slices;
    desc.slice      = 0;
    desc.server_pid = 1000;
    desc.has_cmd_fd = 1;
    desc.port_guid  = 0x0102030405060708ull;
    desc.port_num   = 1;
    strcpy(desc.dev_name, "mlx5_0");
    length = uct_ibshare_msg_pack_desc(buf, sizeof(buf), &desc);
    if ((length == 0) || fuzz_desc_write(argv[1], "desc_shared", buf, length)) {
        return 1;
    }

    desc.mode       = UCT_IBSHARE_GROUP_FALLBACK;
    desc.has_cmd_fd = 0;
    desc.slice      = UINT32_MAX;
    strcpy(desc.dev_name, "rxe0");
    length = uct_ibshare_msg_pack_desc(buf, sizeof(buf), &desc);
    if ((length == 0) ||
        fuzz_desc_write(argv[1], "desc_fallback", buf, length)) {
        return 1;
    }

    memset(&ident, 0, sizeof(ident));
    ident.job_hash  = uct_ibshare_job_hash("job");
    ident.port_guid = 0x0102030405060708ull;
    strcpy(ident.dev_name, "rxe0");
    length = uct_ibshare_msg_pack_join(buf, sizeof(buf), 1234, 1000, &ident);
    if ((length == 0) || fuzz_desc_write(argv[1], "join", buf, length)) {
        return 1;
    }

    length = uct_ibshare_msg_pack_refuse(buf, sizeof(buf),
                                         UCT_IBSHARE_REFUSE_UID, NULL);
    if ((length == 0) || fuzz_desc_write(argv[1], "refuse", buf, length)) {
        return 1;
    }

    length = uct_ibshare_msg_pack_refuse(buf, sizeof(buf),
                                         UCT_IBSHARE_REFUSE_JOB, &ident);
    if ((length == 0) ||
        fuzz_desc_write(argv[1], "refuse_job", buf, length)) {
        return 1;
    }
    return 0;
}

#endif
