#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# figures_ok (test/lib.sh), the guest tests' reading of a ucx_perftest
# "Final:" row: the last interval's averages may be nan or inf, whatever
# 0/0 and x/0 print (CI's multinode_uct failed a complete run once on
# "1000 11006.000 -nan 12081.251 -nan 5.17 -nan 83", and a fresh machine's
# on an inf in rc_verbs' put_bw zcopy 64 KiB row); an overall figure or the
# percentile that is not a finite number, missing iterations, a negative
# figure, or a zero overall figure from 1 KiB on still fail.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

accepts() {
    check "accepted: $*" figures_ok "$@"
}
refuses() {
    ! figures_ok "$@"
    check "refused: $*" test $? -eq 0
}

accepts 65536 1000 1000 11006.000 -nan 12081.251 -nan 5.17 -nan 83
accepts 65536 1000 1000 11006.000 12.0 12081.251 4.1 5.17 3 83
accepts 8 1000 1000 16.000 16.2 16.5 0.5 0.00 61000 60000
accepts 65536 2000 2000 120.000 inf 130.2 inf 480.1 inf 3700
accepts 65536 2000 2000 120.000 0.000 130.2 -inf 480.1 INF 3700
accepts 65536 2000 2000 120.000 nan 130.2 inf 480.1 -nan 3700
refuses 65536 2000 2000 120.000 12.0 inf 4.1 480.1 3 3700
refuses 65536 2000 2000 120.000 12.0 130.2 4.1 inf 3 3700
refuses 65536 2000 2000 120.000 12.0 130.2 4.1 480.1 3 inf
refuses 65536 2000 2000 inf 12.0 130.2 4.1 480.1 3 3700
refuses 65536 2000 2000 120.000 12.0 130.2 4.1 -480.1 3 3700
refuses 65536 2000 2000 120.000 -12.0 130.2 4.1 480.1 3 3700
refuses 65536 2000 2000 120.000 12.0 0.000 4.1 480.1 3 3700
refuses 65536 2000 2000 120.000 12.0 130.2 4.1 480.1 3 0
refuses 65536 2000 2000 120.000 12.0 130.2 4.1 480.1 3 3700 extra
refuses 65536 1000 1000 11006.000 12.0 -nan 4.1 5.17 3 83
refuses 65536 1000 1000 11006.000 12.0 12081.251 4.1 -nan 3 83
refuses 65536 1000 1000 11006.000 12.0 12081.251 4.1 5.17 3 -nan
refuses 65536 1000 1000 -nan 12.0 12081.251 4.1 5.17 3 83
refuses 65536 1000 999 11006.000 12.0 12081.251 4.1 5.17 3 83
refuses 65536 1000 1000 11006.000 12.0 12081.251 4.1 0.00 3 83
refuses 8 1000 1000 16.000 16.2 inf 0.5 0.00 61000 60000
refuses 8 1000 1000 16.000 16.2 16.5 0.5 0.00 61000
finish
