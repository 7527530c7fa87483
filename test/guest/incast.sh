#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Incast (test/guest/incast.c): 32 rc_share senders, 32 active messages
# each, to one receiver with the default receive queue (256 buffers) that
# calls no progress for its first 3 s: every message arrives once and no
# endpoint fails (receiver-not-ready retries are infinite by default). The
# connection timeout is cut to 2 s: the receiver must answer the handshakes
# from its async context, without progress. Control: with
# UCX_RC_SHARE_RNR_RETRY_COUNT=6 the same run fails endpoints, which shows
# that the test sees what it guards against.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

prog=$IBSHARE_BUILDDIR/test/guest/incast
in_guest --mem 3G --timeout 900 sh -c '
    export LD_PRELOAD=$IBSHARE_PRELOAD
    UCX_RC_SHARE_CONN_TIMEOUT=2s "$2" rxe0:1 32 32 3 > "$1/default" 2>&1
    echo $? > "$1/default.rc"
    UCX_RC_SHARE_RNR_RETRY_COUNT=6 "$2" rxe0:1 32 32 3 > "$1/rnr6" 2>&1
    echo $? > "$1/rnr6.rc"
' sh "$tmpdir" "$prog"
check "the guest ran both incasts" test $? -eq 0

cat "$tmpdir/default"
check "default settings: every message arrived, no endpoint failed (status\
 $(cat "$tmpdir/default.rc" 2>/dev/null))" \
    grep -q 'endpoint errors 0, failed flushes 0,.*: PASS$' "$tmpdir/default"
check "default settings: no UCX error or warning" \
    sh -c "! grep -qE 'UCX +(ERROR|WARN)' '$tmpdir/default'"

grep '^incast: senders' "$tmpdir/rnr6"
check "control, RNR_RETRY_COUNT=6: endpoints fail (status\
 $(cat "$tmpdir/rnr6.rc" 2>/dev/null))" \
    grep -q 'endpoint errors [1-9][0-9]*, .*: FAIL$' "$tmpdir/rnr6"
finish
