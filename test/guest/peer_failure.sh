#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A peer that dies is reported to UCP as an error, not a hang: UCP-level
# ucx_perftest with error handling (-e) and keepalive over rc_share alone,
# both processes in one node group; the server is killed (SIGKILL) mid-run;
# the client's error handler must report the endpoint failure within 40 s of
# the kill. In shared mode the server's QPs outlive it in the group's shared
# context, so only the endpoint check's question to the process finds it. (ucx_perftest itself
# keeps waiting after that, so the client is stopped then.)
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest --timeout 200 sh -c '
    out=$1
    # One job: in shared mode the server is a member of the client'"'"'s group,
    # whose QPs outlive it; only the endpoint check can find it dead
    export LD_PRELOAD=$IBSHARE_PRELOAD UCX_TLS=rc_share,self \
           UCX_NET_DEVICES=rxe0:1 UCX_KEEPALIVE_INTERVAL=1s \
           UCX_IBSHARE_JOB_KEY=peer-failure-test
    # until CMD succeeds, at most 60 s: a loaded host slows the guest down,
    # and a fixed sleep would kill the server before the pair even started
    wait_until() {
        n=0
        until "$@" || [ $n -ge 120 ]; do sleep 0.5; n=$((n + 1)); done
    }
    ucx_perftest -p 14101 -t tag_lat -e -n 100000000 -w 10 > "$out/srv" 2>&1 &
    srv=$!
    wait_until sh -c "ss -ltn | grep -q :14101"
    ucx_perftest 127.0.0.1 -p 14101 -t tag_lat -e -n 100000000 \
        -w 10 > "$out/cli" 2>&1 &
    cli=$!
    wait_until grep -q "^\[thread 0\]" "$out/cli"
    env -u LD_PRELOAD "$IBSHARE_BUILDDIR/ibshare_info" > "$out/info" 2>&1
    kill -0 "$srv" && echo running > "$out/srv.alive"
    kill -9 "$srv"
    # The error handler must report the dead peer within 40 s of the kill
    killed=$(date +%s)
    n=0
    until grep -q "error handler" "$out/cli" || [ $n -ge 80 ]; do
        sleep 0.5; n=$((n + 1))
    done
    echo $(($(date +%s) - killed)) > "$out/report_s"
    kill "$cli" 2>/dev/null
    wait "$cli"
    echo $? > "$out/cli.rc"
' sh "$tmpdir"
check "guest ran" test $? -eq 0

check "the server was running when it was killed" test -s "$tmpdir/srv.alive"
check "the client made progress before" grep -q "^\[thread 0\]" "$tmpdir/cli"
sed -n '/^group/,$p' "$tmpdir/info"
check "server and client were one node group ($IBSHARE_TEST_MODE mode)" \
      sh -c "grep -qE '^  mode: +$IBSHARE_TEST_MODE\$' '$tmpdir/info' &&
             grep -qE '^  members: 2 ' '$tmpdir/info'"
grep "error handler" "$tmpdir/cli"
echo "reported $(cat "$tmpdir/report_s" 2>/dev/null) s after the kill"
check "the client's error handler reported the dead peer" \
      grep -qE "error handler called with status .*(Endpoint timeout|Connection reset)" \
      "$tmpdir/cli"
check "no crash" sh -c "! grep -qE 'Segmentation|Assertion|backtrace' '$tmpdir/cli'"
finish
