#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Registration on rxe0: lazy device open, MR counts and rkeys as the kernel
# sees them, with and without the registration cache (test/guest/md_reg.c);
# then the same under valgrind: no invalid access, no definite leak.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

prog=$IBSHARE_BUILDDIR/test/guest/md_reg

in_guest sh -c 'LD_PRELOAD=$IBSHARE_PRELOAD "$1" rxe0' sh "$prog"
check "md_reg passes in the guest" test $? -eq 0

# libibverbs keeps its device list for the life of the process: "possibly
# lost" blocks from ibv_get_device_list are its cache, not ours.
in_guest sh -c 'LD_PRELOAD=$IBSHARE_PRELOAD valgrind -q --error-exitcode=9 \
    --leak-check=full --errors-for-leak-kinds=definite \
    --show-possibly-lost=no "$1" rxe0' sh "$prog" > "$tmpdir/vg" 2>&1
rc=$?
grep -v '^ok:' "$tmpdir/vg"
check "md_reg is clean under valgrind" test "$rc" -eq 0
finish
