#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# In the soft-RoCE guest (2.9 GiB), `ucx_info -d` with a bad UCX_IBSHARE_* or
# UCX_RC_SHARE_* value ends within seconds, not OOM-killed (SLICE_SIZE=8g
# was, after 89 s, with no message), and says which variable is wrong; a
# slice pinned beyond RLIMIT_MEMLOCK is refused with the limit (the rank
# then runs on private resources, as when it cannot join). The same
# run with good values still lists rc_share. One guest boot for all cases.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

# name|settings|what the output must say (an extended regular expression)
cat > "$tmpdir/cases" <<'EOF'
slice_8g|UCX_IBSHARE_SLICE_SIZE=8g|UCX_IBSHARE_SLICE_SIZE=8G.*MemAvailable
slice_negative|UCX_IBSHARE_SLICE_SIZE=-11m|UCX_IBSHARE_SLICE_SIZE=-11534336 is out of range \(accepted:
pool_4097|UCX_IBSHARE_POOL_SIZE=45067m|UCX_IBSHARE_POOL_SIZE=47256174592 is out of range \(accepted:.*4096 slices
pool_small|UCX_IBSHARE_POOL_SIZE=4m|UCX_IBSHARE_POOL_SIZE=4194304 is out of range
join_timeout_0|UCX_IBSHARE_JOIN_TIMEOUT=0|UCX_IBSHARE_JOIN_TIMEOUT=0s is out of range \(accepted: above 0
tx_queue_0|UCX_RC_SHARE_TX_QUEUE_LEN=0|UCX_RC_SHARE_TX_QUEUE_LEN=0 is out of range \(accepted: 1 to
rnr_timeout_1s|UCX_RC_SHARE_RNR_TIMEOUT=1s|UCX_RC_SHARE_RNR_TIMEOUT=1s is out of range \(accepted:
memlock|IBSHARE_MEMLOCK_KB=4096|UCX_IBSHARE_(SLICE|POOL)_SIZE=.*RLIMIT_MEMLOCK.*4194304
good|UCX_IBSHARE_SLICE_SIZE=12m UCX_IBSHARE_POOL_SIZE=48m UCX_IBSHARE_JOIN_TIMEOUT=5s|
EOF

# Each case: its exit status, seconds and output. memlock runs without
# CAP_IPC_LOCK (dropped from the bounding set, so root loses it too) and
# with ulimit -l lowered: the kernel would refuse the pinning anyway.
cat > "$tmpdir/run.sh" <<'EOF'
dir=$1
while IFS='|' read -r name settings expect; do
    start=$(date +%s)
    case $name in
    memlock)
        env $settings LD_PRELOAD=$IBSHARE_PRELOAD \
            setpriv --bounding-set -ipc_lock \
            sh -c 'ulimit -l $IBSHARE_MEMLOCK_KB && exec timeout 60 ucx_info -d'
        ;;
    *)
        env $settings LD_PRELOAD=$IBSHARE_PRELOAD timeout 60 ucx_info -d
        ;;
    esac < /dev/null > "$dir/$name.out" 2>&1
    echo $? > "$dir/$name.rc"
    echo $(($(date +%s) - start)) > "$dir/$name.time"
done < "$dir/cases"
EOF

in_guest sh "$tmpdir/run.sh" "$tmpdir"
check "guest ran" test $? -eq 0

while IFS='|' read -r name settings expect; do
    rc=$(cat "$tmpdir/$name.rc")
    secs=$(cat "$tmpdir/$name.time")
    echo "== $name: $settings: exit $rc in $secs s" >&2
    grep -E 'UCX_(IBSHARE|RC_SHARE)_|ERROR|WARN' "$tmpdir/$name.out" >&2
    check "$name: not killed (exit $rc is not 137, nor 124 of timeout)" \
          test "$rc" -ne 137 -a "$rc" -ne 124
    check "$name: ends within 30 s ($secs s)" test "$secs" -le 30
    if [ "$name" = good ]; then
        check "$name: exits 0" test "$rc" -eq 0
        check "$name: rc_share on rxe0:1 listed" \
              test "$(rc_share_devices "$tmpdir/$name.out")" -eq 1
        check "$name: no error" \
              sh -c "! grep -q ERROR '$tmpdir/$name.out'"
    else
        check "$name: the message names the variable: /$expect/" \
              grep -Eq "$expect" "$tmpdir/$name.out"
        # A slice the rank may not pin: it says so, and goes private
        if [ "$name" = memlock ]; then
            check "$name: the rank runs on private resources, and says so" \
                  grep -q 'this rank uses private resources' \
                  "$tmpdir/$name.out"
        fi
        # The md refuses its settings at open: nothing of it is listed
        case $settings in
        UCX_IBSHARE_*)
            check "$name: no rc_share listed" \
                  test "$(rc_share_devices "$tmpdir/$name.out")" -eq 0 ;;
        esac
    fi
done < "$tmpdir/cases"

finish
