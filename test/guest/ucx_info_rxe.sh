#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# In the soft-RoCE guest, UCX lists rc_share on rxe0:1 and UCP accepts
# UCX_TLS=rc_share.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest sh -c '
    run() { name=$1; shift; "$@" > "$dir/$name" 2> "$dir/$name.err"; echo $? > "$dir/$name.rc"; }
    dir=$1
    run devices env LD_PRELOAD=$IBSHARE_PRELOAD ucx_info -d
    run context env LD_PRELOAD=$IBSHARE_PRELOAD UCX_TLS=rc_share ucx_info -p -u t
    run ep      env LD_PRELOAD=$IBSHARE_PRELOAD UCX_TLS=rc_share ucx_info -e -u t
    run ep_self env LD_PRELOAD=$IBSHARE_PRELOAD UCX_TLS=rc_share,self ucx_info -e -u t
    run plain   env -u UCX_PLUGIN_PATH ucx_info -d
' sh "$tmpdir"
check "guest ran" test $? -eq 0

rc() { cat "$tmpdir/$1.rc"; }

check "ucx_info -d exits 0" test "$(rc devices)" -eq 0
check "ucx_info -d prints nothing on stderr" test ! -s "$tmpdir/devices.err"
cat "$tmpdir/devices.err" >&2

# Our block: memory domain rxe0, component ibshare, transport rc_share on rxe0:1
check "Memory domain rxe0 / Component ibshare / Transport rc_share / Device rxe0:1" \
      test "$(rc_share_devices "$tmpdir/devices")" -eq 1
grep -B1 -A6 "Component: ibshare" "$tmpdir/devices"

check "UCX_TLS=rc_share: the UCP context opens" test "$(rc context)" -eq 0
check "with rc_share/rxe0:1 as its resource" \
      grep -q "resource 0 .* rc_share/rxe0:1" "$tmpdir/context"
check "and nothing on stderr" test ! -s "$tmpdir/context.err"
cat "$tmpdir/context.err" >&2

for run in ep ep_self; do
    check "$run: no 'transport is not available' warning" \
          sh -c "! grep -q 'not available' '$tmpdir/$run.err' '$tmpdir/$run'"
done
check "UCX_TLS=rc_share,self ucx_info -e exits 0" test "$(rc ep_self)" -eq 0
check "UCX_TLS=rc_share ucx_info -e exits 0 (rc_share alone wires up)" \
      test "$(rc ep)" -eq 0
check "and its endpoint has an rc_share lane" \
      grep -q "lane\[0\]: .*rc_share/rxe0:1" "$tmpdir/ep"
grep "lane\[" "$tmpdir/ep"

check "without the module there is no rc_share" \
      sh -c "! grep -q 'rc_share' '$tmpdir/plain'"

finish
