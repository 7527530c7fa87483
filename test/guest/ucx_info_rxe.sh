#!/bin/sh
# In the soft-RoCE guest, UCX lists rc_share on rxe0:1 and accepts UCX_TLS.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest sh -c '
    LD_PRELOAD=$IBSHARE_MODULE ucx_info -d > "$1/devices" 2> "$1/devices.err"
    echo $? > "$1/devices.rc"
    LD_PRELOAD=$IBSHARE_MODULE UCX_TLS=rc_share ucx_info -e -u t \
        > "$1/tls" 2>&1
    echo $? > "$1/tls.rc"
    ucx_info -d > "$1/plain" 2>&1
' sh "$tmpdir"
check "guest ran" test $? -eq 0

check "ucx_info -d exits 0" test "$(cat "$tmpdir/devices.rc")" -eq 0
check "ucx_info -d prints no warning or error" test ! -s "$tmpdir/devices.err"
cat "$tmpdir/devices.err" >&2

# The rc_share block: component, then transport, then device rxe0:1
awk '
    /# Component: ibshare/  { comp = 1 }
    comp && /# Memory domain: rxe0/ { md = 1 }
    md && /# *Transport: rc_share/ { tl = 1 }
    tl && /# *Device: rxe0:1/ { dev = 1; exit }
    END { exit !dev }
' "$tmpdir/devices"
check "Component ibshare, md rxe0, Transport rc_share, Device rxe0:1" \
      test $? -eq 0
grep -n -A4 "Transport: rc_share" "$tmpdir/devices"

check "UCX_TLS=rc_share ucx_info -e exits 0" \
      test "$(cat "$tmpdir/tls.rc")" -eq 0
check "no 'not available' warning" \
      sh -c "! grep -q 'not available' '$tmpdir/tls'"
check "no error" sh -c "! grep -q 'ERROR' '$tmpdir/tls'"
cat "$tmpdir/tls" | head -20

check "without the module there is no rc_share" \
      sh -c "! grep -q 'rc_share' '$tmpdir/plain'"

finish
