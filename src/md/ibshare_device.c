/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Verbs devices and ports as UCT sees them.
 */
#include "ibshare_device.h"

#include <ucs/debug/log_def.h>
#include <ucs/debug/memtrack.h>
#include <ucs/sys/string.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define UCT_IBSHARE_MAX_PORTS 32


/* Same rule as UCX's IB md: a device we cannot open is not a resource */
static int uct_ibshare_device_is_accessible(struct ibv_device *device)
{
    char path[PATH_MAX];

    ucs_snprintf_zero(path, sizeof(path), "/dev/infiniband/%s",
                      device->dev_name);
    return access(path, R_OK | W_OK) == 0;
}

ucs_status_t uct_ibshare_query_md_resources(uct_component_t *component,
                                            uct_md_resource_desc_t **resources_p,
                                            unsigned *num_resources_p)
{
    uct_md_resource_desc_t *resources;
    struct ibv_device **devices;
    int i, num_devices;
    unsigned count = 0;

    *resources_p     = NULL;
    *num_resources_p = 0;

    devices = ibv_get_device_list(&num_devices);
    if (devices == NULL) {
        ucs_debug("ibv_get_device_list() failed: %m; assuming no devices");
        return UCS_OK;
    }

    if (num_devices == 0) {
        ibv_free_device_list(devices);
        return UCS_OK;
    }

    resources = ucs_calloc(num_devices, sizeof(*resources), "ibshare md");
    if (resources == NULL) {
        ibv_free_device_list(devices);
        return UCS_ERR_NO_MEMORY;
    }

    for (i = 0; i < num_devices; ++i) {
        if (!uct_ibshare_device_is_accessible(devices[i])) {
            ucs_debug("%s: device file not accessible, skipping",
                      ibv_get_device_name(devices[i]));
            continue;
        }
        ucs_strncpy_zero(resources[count++].md_name,
                         ibv_get_device_name(devices[i]),
                         sizeof(resources->md_name));
    }

    ibv_free_device_list(devices);
    *resources_p     = resources;
    *num_resources_p = count;
    return UCS_OK;
}

/* Reads a sysfs attribute of a port */
static int uct_ibshare_port_attr_read(const char *ibdev_path, unsigned port,
                                      const char *attr, char *buf, size_t max)
{
    return ucs_read_file_str(buf, max, 1, "%s/ports/%u/%s", ibdev_path, port,
                             attr) > 0;
}

static int uct_ibshare_port_is_active(const char *ibdev_path, unsigned port)
{
    char state[64];

    /* The file reads "4: ACTIVE"; the number is enum ibv_port_state */
    return uct_ibshare_port_attr_read(ibdev_path, port, "state", state,
                                      sizeof(state)) &&
           (atoi(state) == IBV_PORT_ACTIVE);
}

/* The list is NULL-terminated, as ibv_get_device_list() returns it */
static struct ibv_device *uct_ibshare_device_find(struct ibv_device **devices,
                                                 const char *dev_name)
{
    for (; *devices != NULL; ++devices) {
        if (!strcmp(ibv_get_device_name(*devices), dev_name)) {
            return *devices;
        }
    }
    return NULL;
}

ucs_status_t uct_ibshare_device_query_ports(const char *dev_name,
                                            uct_tl_device_resource_t **ports_p,
                                            unsigned *num_ports_p)
{
    uct_tl_device_resource_t *ports;
    struct ibv_device **devices, *device;
    const char *ibdev_path;
    unsigned port, count = 0;
    char unused[64];

    devices = ibv_get_device_list(NULL);
    if (devices == NULL) {
        ucs_debug("ibv_get_device_list() failed: %m");
        return UCS_ERR_NO_DEVICE;
    }

    device = uct_ibshare_device_find(devices, dev_name);
    if (device == NULL) {
        ibv_free_device_list(devices);
        ucs_debug("%s: no such verbs device", dev_name);
        return UCS_ERR_NO_DEVICE;
    }

    ibdev_path = device->ibdev_path;
    ports      = ucs_calloc(UCT_IBSHARE_MAX_PORTS, sizeof(*ports), "ibshare ports");
    if (ports == NULL) {
        ibv_free_device_list(devices);
        return UCS_ERR_NO_MEMORY;
    }

    /* Port numbers start at 1; a switch's port 0 is not a transport port */
    for (port = 1; port <= UCT_IBSHARE_MAX_PORTS; ++port) {
        if (!uct_ibshare_port_attr_read(ibdev_path, port, "state", unused,
                                        sizeof(unused))) {
            break;
        }
        if (!uct_ibshare_port_is_active(ibdev_path, port)) {
            ucs_debug("%s:%u: port is not active, skipping", dev_name, port);
            continue;
        }
        ucs_snprintf_zero(ports[count].name, sizeof(ports->name), "%s:%u",
                          dev_name, port);
        ports[count].type       = UCT_DEVICE_TYPE_NET;
        ports[count].sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
        ++count;
    }

    ibv_free_device_list(devices);

    if (count == 0) {
        ucs_free(ports);
        ports = NULL;
    }

    *ports_p     = ports;
    *num_ports_p = count;
    return UCS_OK;
}

/* The device named dev_name, in *devices_p (the caller frees the list), or
 * NULL, logged */
static struct ibv_device *
uct_ibshare_device_lookup(const char *dev_name, struct ibv_device ***devices_p)
{
    struct ibv_device *device;

    *devices_p = ibv_get_device_list(NULL);
    if (*devices_p == NULL) {
        ucs_error("ibv_get_device_list() failed: %m");
        return NULL;
    }

    device = uct_ibshare_device_find(*devices_p, dev_name);
    if (device == NULL) {
        ucs_error("%s: no such verbs device", dev_name);
    }
    return device;
}

ucs_status_t uct_ibshare_device_guid(const char *dev_name, uint64_t *guid_p)
{
    struct ibv_device **devices, *device;

    device = uct_ibshare_device_lookup(dev_name, &devices);
    if (device != NULL) {
        *guid_p = ibv_get_device_guid(device);
    }

    if (devices != NULL) {
        ibv_free_device_list(devices);
    }
    return (device != NULL) ? UCS_OK : UCS_ERR_NO_DEVICE;
}

ucs_status_t uct_ibshare_device_open(const char *dev_name,
                                     struct ibv_context **context_p)
{
    struct ibv_device **devices, *device;
    struct ibv_context *context = NULL;

    device = uct_ibshare_device_lookup(dev_name, &devices);
    if (device != NULL) {
        context = ibv_open_device(device);
        if (context == NULL) {
            ucs_error("ibv_open_device(%s) failed: %m", dev_name);
        }
    }

    if (devices != NULL) {
        ibv_free_device_list(devices);
    }
    if (context == NULL) {
        return UCS_ERR_NO_DEVICE;
    }

    *context_p = context;
    return UCS_OK;
}

ucs_status_t uct_ibshare_device_parse_port(const char *tl_dev_name,
                                           const char *md_dev_name,
                                           uint8_t *port_num_p)
{
    const char *sep = strrchr(tl_dev_name, ':');
    char *end;
    unsigned long port;

    if ((sep == NULL) || (strlen(md_dev_name) != (size_t)(sep - tl_dev_name)) ||
        strncmp(tl_dev_name, md_dev_name, sep - tl_dev_name)) {
        ucs_error("device '%s' is not a port of '%s' (expected '%s:<port>')",
                  tl_dev_name, md_dev_name, md_dev_name);
        return UCS_ERR_NO_DEVICE;
    }

    errno = 0;
    port  = strtoul(sep + 1, &end, 10);
    if ((sep[1] == '\0') || (*end != '\0') || (errno != 0) || (port == 0) ||
        (port > UCT_IBSHARE_MAX_PORTS)) {
        ucs_error("device '%s': invalid port number '%s'", tl_dev_name,
                  sep + 1);
        return UCS_ERR_NO_DEVICE;
    }

    *port_num_p = port;
    return UCS_OK;
}
