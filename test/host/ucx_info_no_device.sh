#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Without an RDMA device the component lists nothing and says nothing.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

if ls /sys/class/infiniband/* >/dev/null 2>&1; then
    echo "this host has RDMA devices; the no-device case is tested elsewhere"
    with_module ucx_info -d > /dev/null
    exit $?
fi

with_module ucx_info -d > "$tmpdir/out" 2> "$tmpdir/err"
check "ucx_info -d exits 0" test $? -eq 0
check "no warning or error" test ! -s "$tmpdir/err"
cat "$tmpdir/err" >&2
check "no rc_share device listed" \
      sh -c "! grep -q 'rc_share' '$tmpdir/out'"
check "UCX's own transports still listed" grep -q "Transport: self" \
      "$tmpdir/out"

with_module env UCX_LOG_LEVEL=debug ucx_info -d > "$tmpdir/dbg" 2>&1
check "no error at debug level" sh -c "! grep -i 'ibshare.*error' '$tmpdir/dbg'"

finish
