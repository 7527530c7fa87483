/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Memory registration of the ibshare md, checked against the kernel's own
 * count of this process's MRs (`rdma res show mr`). Runs in the guest with
 * the module preloaded; argument: the md (device) name.
 */
#include "guest_util.h"

#include <uct/api/uct.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>




/* MRs the kernel holds for this process; *rkey_p gets the last one's rkey */
static int kernel_mr_count(unsigned *rkey_p)
{
    char cmd[128], line[512];
    const char *field;
    int count = 0;
    FILE *out;

    snprintf(cmd, sizeof(cmd), "rdma res show mr");
    out = popen(cmd, "r");
    if (out == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), out) != NULL) {
        char pid_field[32];

        snprintf(pid_field, sizeof(pid_field), " pid %d ", (int)getpid());
        if (strstr(line, pid_field) == NULL) {
            continue;
        }
        ++count;
        field = strstr(line, "rkey 0x");
        if ((field != NULL) && (rkey_p != NULL)) {
            *rkey_p = strtoul(field + 5, NULL, 16);
        }
    }
    return (pclose(out) == 0) ? count : -1;
}

/* Whether this process has a uverbs device file open */
static int uverbs_open(void)
{
    char path[300], target[256];
    struct dirent *entry;
    int found = 0;
    ssize_t len;
    DIR *dir;

    dir = opendir("/proc/self/fd");
    while ((dir != NULL) && ((entry = readdir(dir)) != NULL)) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", entry->d_name);
        len = readlink(path, target, sizeof(target) - 1);
        if (len > 0) {
            target[len] = '\0';
            found |= strncmp(target, "/dev/infiniband/uverbs", 22) == 0;
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return found;
}

static uct_md_h open_md(uct_component_h component, const char *name)
{
    uct_md_config_t *config;
    uct_md_h md;

    if (uct_md_config_read(component, NULL, NULL, &config) != UCS_OK) {
        return NULL;
    }
    if (uct_md_open(component, name, config, &md) != UCS_OK) {
        md = NULL;
    }
    uct_config_release(config);
    return md;
}

static void test_registration(uct_component_h component, const char *dev,
                              int rcache)
{
    static char buffer[1 << 20];
    uct_mem_h memh, memh2;
    uct_rkey_bundle_t rkey;
    uct_md_attr_t md_attr;
    unsigned kernel_rkey = 0;
    uint32_t packed_rkey;
    char packed[64];
    uct_md_h md;

    /* Registration of user memory only: no node group, no pool */
    setenv("UCX_IBSHARE_MODE", "private", 1);
    setenv("UCX_IBSHARE_RCACHE", rcache ? "yes" : "no", 1);
    md = open_md(component, dev);
    CHECK(md != NULL, "[rcache=%d] md %s opens", rcache, dev);
    if (md == NULL) {
        return;
    }

    CHECK(!uverbs_open(), "[rcache=%d] opening the md opens no device context",
          rcache);
    CHECK(uct_md_query(md, &md_attr) == UCS_OK, "md query");
    CHECK((md_attr.cap.flags & UCT_MD_FLAG_REG) &&
          (md_attr.rkey_packed_size <= sizeof(packed)),
          "md reports registration and a packed rkey that fits");

    CHECK(uct_md_mem_reg(md, buffer, sizeof(buffer), UCT_MD_MEM_ACCESS_ALL,
                         &memh) == UCS_OK, "[rcache=%d] mem_reg", rcache);
    CHECK(uverbs_open(), "the first registration opened the device");
    CHECK(kernel_mr_count(&kernel_rkey) == 1, "the kernel holds 1 MR");

    CHECK(uct_md_mkey_pack(md, memh, packed) == UCS_OK, "mkey_pack");
    /* The packed key starts with the 32-bit rkey (src/md/ibshare_md.h) */
    memcpy(&packed_rkey, packed, sizeof(packed_rkey));
    CHECK(packed_rkey == kernel_rkey, "the packed rkey 0x%x is the kernel's 0x%x",
          packed_rkey, kernel_rkey);
    CHECK(uct_rkey_unpack(component, packed, &rkey) == UCS_OK, "rkey_unpack");
    CHECK(uct_rkey_release(component, &rkey) == UCS_OK, "rkey_release");

    CHECK(uct_md_mem_reg(md, buffer + 4096, 4096, UCT_MD_MEM_ACCESS_ALL,
                         &memh2) == UCS_OK, "mem_reg of a part");
    CHECK(kernel_mr_count(NULL) == (rcache ? 1 : 2),
          "[rcache=%d] a part of a registered buffer makes %s", rcache,
          rcache ? "no new MR (cache hit)" : "a second MR");
    CHECK(uct_md_mem_dereg(md, memh2) == UCS_OK, "mem_dereg of the part");
    CHECK(uct_md_mem_dereg(md, memh) == UCS_OK, "mem_dereg");
    CHECK(kernel_mr_count(NULL) == (rcache ? 1 : 0),
          "[rcache=%d] after dereg the kernel holds %d MR", rcache,
          rcache ? 1 : 0);

    uct_md_close(md);
    CHECK(kernel_mr_count(NULL) == 0, "md close releases every MR");
    CHECK(!uverbs_open(), "md close closes the device");
}

int main(int argc, char **argv)
{
    const char *dev = (argc > 1) ? argv[1] : "rxe0";
    uct_component_h component;

    snprintf(guest_name, sizeof(guest_name), "md_reg");
    component = guest_find_component("ibshare");
    CHECK(component != NULL, "component ibshare is registered (preloaded)");
    if (component != NULL) {
        test_registration(component, dev, 1);
        test_registration(component, dev, 0);
    }
    return guest_failures ? 1 : 0;
}
