#!/bin/sh
# A peer that dies is reported to UCP as an error, not a hang: UCP-level
# ucx_perftest with error handling (-e) and keepalive over rc_share alone;
# the server is killed (SIGKILL) mid-run; the client's error handler must
# report the endpoint failure within 40 s. (ucx_perftest itself keeps
# waiting after that, so the client is stopped by a timeout.)
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest --timeout 200 sh -c '
    out=$1
    export LD_PRELOAD=$IBSHARE_PRELOAD UCX_TLS=rc_share,self \
           UCX_NET_DEVICES=rxe0:1 UCX_KEEPALIVE_INTERVAL=1s
    ucx_perftest -p 14101 -t tag_lat -e -n 100000000 -w 10 > "$out/srv" 2>&1 &
    srv=$!
    sleep 2
    timeout 45 ucx_perftest 127.0.0.1 -p 14101 -t tag_lat -e -n 100000000 \
        -w 10 > "$out/cli" 2>&1 &
    cli=$!
    sleep 5
    kill -0 "$srv" && echo running > "$out/srv.alive"
    kill -9 "$srv"
    date +%s > "$out/killed"
    wait "$cli"
    echo $? > "$out/cli.rc"
' sh "$tmpdir"
check "guest ran" test $? -eq 0

check "the server was running when it was killed" test -s "$tmpdir/srv.alive"
check "the client made progress before" grep -q "^\[thread 0\]" "$tmpdir/cli"
grep "error handler" "$tmpdir/cli"
check "the client's error handler reported the dead peer" \
      grep -qE "error handler called with status .*(Endpoint timeout|Connection reset)" \
      "$tmpdir/cli"
check "no crash" sh -c "! grep -qE 'Segmentation|Assertion|backtrace' '$tmpdir/cli'"
finish
