/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * What the guest's UCT test programs share (see guest_util.h).
 */
#define _GNU_SOURCE
#include "guest_util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <string.h>


char guest_name[64] = "?";
int guest_failures;


uct_component_h guest_find_component(const char *name)
{
    uct_component_h *components, found = NULL;
    uct_component_attr_t attr;
    unsigned count, i;

    if (uct_query_components(&components, &count) != UCS_OK) {
        return NULL;
    }
    for (i = 0; (i < count) && (found == NULL); ++i) {
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, name)) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    return found;
}

uct_component_h guest_ibshare_component(void)
{
    uct_component_h component = guest_find_component("ibshare");

    if (component == NULL) {
        DIE("component ibshare is not registered (module not preloaded?)");
    }
    return component;
}

int guest_open_fds(void)
{
    struct dirent *entry;
    int count = 0;
    DIR *fd_dir;

    fd_dir = opendir("/proc/self/fd");
    if (fd_dir == NULL) {
        return -1;
    }
    while ((entry = readdir(fd_dir)) != NULL) {
        count += entry->d_name[0] != '.';
    }
    closedir(fd_dir);
    return count - 1; /* the directory's own */
}

unsigned long guest_registrations(void)
{
    static unsigned long (*count)(void);

    if (count == NULL) {
        count = (unsigned long (*)(void))dlsym(RTLD_DEFAULT,
                                               "ibshare_test_registrations");
        if (count == NULL) {
            DIE("count_reg.so is not preloaded");
        }
    }
    return count();
}

void guest_publish(const char *path, const void *data, size_t length)
{
    char tmp[4096];
    FILE *file;
    int ok;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    file = fopen(tmp, "w");
    ok   = file != NULL;
    if (ok) {
        ok = fwrite(data, 1, length, file) == length;
        ok = (fclose(file) == 0) && ok;
    }
    if (!ok || (rename(tmp, path) != 0)) {
        DIE("cannot write %s: %m", path);
    }
}

void guest_open_worker(uct_md_h md, ucs_async_context_t **async_p,
                       uct_worker_h *worker_p,
                       uct_iface_config_t **iface_config_p)
{
    if ((ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                  async_p) != UCS_OK) ||
        (uct_worker_create(*async_p, UCS_THREAD_MODE_SINGLE, worker_p) !=
         UCS_OK) ||
        (uct_md_iface_config_read(md, "rc_share", NULL, NULL,
                                  iface_config_p) != UCS_OK)) {
        DIE("cannot create a worker");
    }
}

void guest_completed(uct_completion_t *comp)
{
}
