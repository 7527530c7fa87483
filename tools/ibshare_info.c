/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * ibshare_info: the verbs devices ucx-ibshare sees, and every live node
 * group of this user on this node (job, server, members, mode, pool, MRs,
 * registration counters).
 *
 * Read-only: it takes no lock a group uses and removes nothing, so running
 * it never disturbs a job. With --clean it removes the files of dead groups
 * only, by the protocol a group's last member follows.
 */
#include "md/ibshare_device.h"
#include "node/ibshare_node.h"

#include <ucs/debug/memtrack_int.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static void ibshare_info_usage(FILE *stream)
{
    fprintf(stream,
            "usage: ibshare_info [-c] [-d DIR] [-h]\n"
            "  lists the RDMA devices and this user's live ucx-ibshare node "
            "groups\n"
            "  -c, --clean    first remove the lock and socket files of dead "
            "groups\n"
            "                 (killed jobs); a live group's are never "
            "touched\n"
            "  -d, --dir DIR  runtime directory of the groups (default:\n"
            "                 $UCX_IBSHARE_RUNTIME_DIR, else auto: "
            "$XDG_RUNTIME_DIR if usable,\n"
            "                 else /tmp)\n"
            "  -h, --help     this help\n");
}

/* Room for a string of up to UCT_IBSHARE_INFO_MAX bytes as printable()
 * writes it */
#define UCT_IBSHARE_INFO_MAX 255
typedef char ibshare_info_text_t[4 * UCT_IBSHARE_INFO_MAX + 1];

/*
 * What the terminal gets of a string from the group's files (the state any
 * member, or anyone who can write the file, may have written; a file name in
 * the runtime directory): at most UCT_IBSHARE_INFO_MAX bytes, every byte
 * outside printable ASCII as \xNN, so that no escape sequence reaches the
 * admin's terminal.
 */
static const char *ibshare_info_printable(const char *s, size_t max,
                                          ibshare_info_text_t buf)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c;
    size_t i, n = 0;

    for (i = 0; (i < max) && (i < UCT_IBSHARE_INFO_MAX) && (s[i] != '\0');
         ++i) {
        c = (unsigned char)s[i];
        if ((c >= 0x20) && (c < 0x7f) && (c != '\\')) {
            buf[n++] = (char)c;
        } else {
            buf[n++] = '\\';
            buf[n++] = 'x';
            buf[n++] = hex[c >> 4];
            buf[n++] = hex[c & 0xf];
        }
    }
    buf[n] = '\0';
    return buf;
}

static void ibshare_info_removed(const char *dir_path, const char *name,
                                 void *arg)
{
    ibshare_info_text_t text;

    printf("removed %s/%s\n", dir_path,
           ibshare_info_printable(name, UCT_IBSHARE_INFO_MAX, text));
}

static void ibshare_info_devices(void)
{
    uct_md_resource_desc_t *mds;
    uct_tl_device_resource_t *ports;
    unsigned num_mds, num_ports, i, j;

    /* Listing reads sysfs and opens no device context */
    if ((uct_ibshare_query_md_resources(NULL, &mds, &num_mds) != UCS_OK) ||
        (num_mds == 0)) {
        printf("no RDMA devices\n");
        return;
    }

    printf("devices:\n");
    for (i = 0; i < num_mds; ++i) {
        printf("  %s:", mds[i].md_name);
        if (uct_ibshare_device_query_ports(mds[i].md_name, &ports,
                                           &num_ports) != UCS_OK) {
            printf(" (ports unknown)\n");
            continue;
        }
        if (num_ports == 0) {
            printf(" no active port");
        }
        for (j = 0; j < num_ports; ++j) {
            printf(" %s", ports[j].name);
        }
        printf("\n");
        ucs_free(ports);
    }
    ucs_free(mds);
}

static void ibshare_info_group(const uct_ibshare_node_group_info_t *info,
                               void *arg)
{
    ibshare_info_text_t job_key, dev_name;
    unsigned i;

    printf("\ngroup of job '%s' on %s\n",
           ibshare_info_printable(info->job_key, sizeof(info->job_key),
                                  job_key),
           ibshare_info_printable(info->dev_name, sizeof(info->dev_name),
                                  dev_name));
    printf("  mode:           %s\n", uct_ibshare_group_mode_str(info->mode));
    if (info->server_pid != 0) {
        printf("  leader pid:     %d\n", (int)info->server_pid);
    } else {
        printf("  leader pid:     none (a member is taking over)\n");
    }
    printf("  members: %u (pids", info->num_members);
    for (i = 0; (i < info->num_members) && (i < UCT_IBSHARE_DESC_MAX_SLICES);
         ++i) {
        printf(" %d", (int)info->member_pids[i]);
    }
    printf(")\n");
    for (i = 0; (i < info->num_members) && (i < UCT_IBSHARE_DESC_MAX_SLICES);
         ++i) {
        printf("    pid %-8d ", (int)info->member_pids[i]);
        if (info->member_slices[i] == UCT_IBSHARE_DESC_NO_SLICE) {
            printf("no slice  ");
        } else {
            printf("slice %-3u ", info->member_slices[i]);
        }
        if (info->member_modes[i] == 0) {
            printf("(joining)\n");
        } else if ((info->member_modes[i] == UCT_IBSHARE_GROUP_FALLBACK) &&
                   (info->mode == UCT_IBSHARE_GROUP_SHARED)) {
            printf("fallback (its own PD: its import failed)\n");
        } else {
            printf("%s\n", uct_ibshare_group_mode_str(info->member_modes[i]));
        }
    }
    printf("  pool:           %" PRIu64 " bytes, %" PRIu64 " slices of %"
           PRIu64 " bytes, %u used", info->pool_size,
           (info->slice_size != 0) ? info->pool_size / info->slice_size : 0,
           info->slice_size, info->slices_used);
    if (info->slices_retired != 0) {
        printf(", %u retired (their shared-mode holders were killed)",
               info->slices_retired);
    }
    printf("\n");
    printf("  MRs registered: %" PRIu64, info->mrs_held);
    if (info->group_mrs != 0) {
        printf(" (the group's pool MR, and %" PRIu64 " of members)",
               info->mrs_held - info->group_mrs);
    }
    printf("\n");
    printf("  registrations:  %" PRIu64 " done, %" PRIu64 " avoided\n",
           info->regs_done, info->regs_avoided);
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"clean", no_argument,       NULL, 'c'},
        {"dir",   required_argument, NULL, 'd'},
        {"help",  no_argument,       NULL, 'h'},
        {NULL,    0,                 NULL, 0}
    };
    const char *dir = getenv("UCX_IBSHARE_RUNTIME_DIR");
    int opt, count, clean = 0;

    if ((dir == NULL) || (dir[0] == '\0')) {
        dir = UCT_IBSHARE_NODE_RUNTIME_DIR_AUTO;
    }

    while ((opt = getopt_long(argc, argv, "cd:h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            clean = 1;
            break;
        case 'd':
            dir = optarg;
            break;
        case 'h':
            ibshare_info_usage(stdout);
            return 0;
        default:
            ibshare_info_usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        ibshare_info_usage(stderr);
        return 1;
    }
    dir = uct_ibshare_node_runtime_dir(dir);

    if (clean) {
        count = uct_ibshare_node_clean(dir, ibshare_info_removed, NULL);
        if (count < 0) {
            fprintf(stderr, "ibshare_info: cannot clean the node groups in "
                    "%s: %s\n", dir, strerror(-count));
            return 1;
        }
        printf("removed the files of %d dead group%s in %s\n\n", count,
               (count == 1) ? "" : "s", dir);
    }

    ibshare_info_devices();

    count = uct_ibshare_node_list(dir, ibshare_info_group, NULL);
    if (count < 0) {
        fprintf(stderr, "ibshare_info: cannot list the node groups in %s: "
                "%s\n", dir, strerror(-count));
        return 1;
    }
    if (count == 0) {
        printf("\nno live node group in %s\n", dir);
    }
    return 0;
}
