/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers
 * Copyright (C) Mellanox Technologies Ltd. 2001-2019. ALL RIGHTS RESERVED.
 *   (the helpers copied from UCX's uct/ib/base, under UCX's BSD-3-Clause) */
/**
 * The helpers of UCX's uct/ib/base that rc_share needs: that library is a
 * module of UCX (libuct_ib), not one a module outside it can link to, and
 * its headers pull in its own config. One copy here, the same in both UCX
 * generations, with UCX's semantics, so that rc_share encodes what rc_verbs
 * encodes for the same setting.
 */
#ifndef UCT_IBSHARE_IB_COMPAT_H_
#define UCT_IBSHARE_IB_COMPAT_H_

#include <stdint.h>


typedef uint8_t uct_ibshare_uint24_t[3];

/* uct_ib_pack_uint24: a QP number on the wire, little-endian */
static inline void uct_ibshare_pack_uint24(uct_ibshare_uint24_t buf,
                                           uint32_t val)
{
    buf[0] = (val >> 0)  & 0xFF;
    buf[1] = (val >> 8)  & 0xFF;
    buf[2] = (val >> 16) & 0xFF;
}

/* uct_ib_unpack_uint24 */
static inline uint32_t uct_ibshare_unpack_uint24(const uct_ibshare_uint24_t buf)
{
    return buf[0] | ((uint32_t)buf[1] << 8) | ((uint32_t)buf[2] << 16);
}

/* uct_ib_to_qp_fabric_time: seconds to the QP's local ACK timeout
 * (4.096 us * 2^value, the nearest; 0: none) */
uint8_t uct_ibshare_to_qp_fabric_time(double seconds);

/* uct_ib_to_rnr_fabric_time: seconds to the RNR timer's code (IBTA
 * 9.7.5.2.8's table, the nearest; 0: the longest, 655.36 ms) */
uint8_t uct_ibshare_to_rnr_fabric_time(double seconds);

#endif
