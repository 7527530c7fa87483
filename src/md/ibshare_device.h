/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers */
/**
 * Verbs devices and ports as UCT sees them.
 *
 * Ports are read from sysfs, not through ibv_query_port(): listing resources
 * must not open a device context, since ucp_init() and ucx_info list every
 * component's resources in every process, and a context per process is what
 * this project exists to avoid.
 */
#ifndef UCT_IBSHARE_DEVICE_H_
#define UCT_IBSHARE_DEVICE_H_

#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <infiniband/verbs.h>


ucs_status_t uct_ibshare_query_md_resources(uct_component_t *component,
                                            uct_md_resource_desc_t **resources_p,
                                            unsigned *num_resources_p);

/* Active ports of one device, named "<device>:<port>" like UCX's IB devices */
ucs_status_t uct_ibshare_device_query_ports(const char *dev_name,
                                            uct_tl_device_resource_t **ports_p,
                                            unsigned *num_ports_p);

ucs_status_t uct_ibshare_device_open(const char *dev_name,
                                     struct ibv_context **context_p);

/* The GUID the device reports (ibv_get_device_guid), without opening it */
ucs_status_t uct_ibshare_device_guid(const char *dev_name, uint64_t *guid_p);

/* Splits "<device>:<port>" into its parts; the device must be md_dev_name */
ucs_status_t uct_ibshare_device_parse_port(const char *tl_dev_name,
                                           const char *md_dev_name,
                                           uint8_t *port_num_p);

#endif
