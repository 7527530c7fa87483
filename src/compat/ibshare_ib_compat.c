/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026, the ucx-ibshare developers
 * Copyright (C) Mellanox Technologies Ltd. 2001-2019. ALL RIGHTS RESERVED.
 *   (the helpers copied from UCX's uct/ib/base, under UCX's BSD-3-Clause) */
/**
 * UCX's IB fabric time encoders (uct/ib/base/ib_device.c), see
 * ibshare_ib_compat.h.
 */
#include "ibshare_ib_compat.h"

#include <math.h>


#define UCT_IBSHARE_FABRIC_TIME_MAX 32

static const double uct_ibshare_rnr_time_ms[UCT_IBSHARE_FABRIC_TIME_MAX] = {
    655.36,  0.01,  0.02,   0.03,   0.04,   0.06,   0.08,   0.12,
      0.16,  0.24,  0.32,   0.48,   0.64,   0.96,   1.28,   1.92,
      2.56,  3.84,  5.12,   7.68,  10.24,  15.36,  20.48,  30.72,
     40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52
};


uint8_t uct_ibshare_to_qp_fabric_time(double seconds)
{
    double to = log(seconds / 4.096e-6) / log(2.0);

    if (to < 1) {
        return 1; /* very small timeout */
    } else if ((long)(to + 0.5) >= UCT_IBSHARE_FABRIC_TIME_MAX) {
        return 0; /* no timeout */
    } else {
        return (long)(to + 0.5);
    }
}

uint8_t uct_ibshare_to_rnr_fabric_time(double seconds)
{
    double time_ms = seconds * 1e3;
    uint8_t idx, next_index;
    double avg_ms;

    for (idx = 1; idx < UCT_IBSHARE_FABRIC_TIME_MAX; idx++) {
        next_index = (idx + 1) % UCT_IBSHARE_FABRIC_TIME_MAX;
        if (time_ms <= uct_ibshare_rnr_time_ms[next_index]) {
            avg_ms = (uct_ibshare_rnr_time_ms[idx] +
                      uct_ibshare_rnr_time_ms[next_index]) * 0.5;
            return (time_ms < avg_ms) ? idx : next_index;
        }
    }

    return 0; /* the longest */
}
