#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# What a one-sided UCP user's put + flush costs on the wire (issue 23): an
# 8-byte ucp_put_nbx and then ucp_ep_flush_nbx, many times
# (contrib/rma_lat), over UCX_TLS=rc_v and over rc_share on rxe0:1 (server
# and client in one guest, no shared memory); the device's packet counter
# (`rdma statistic`: requests, ACKs and the handshake, both ends) over each
# run. rc_verbs signals every put, so a flush waits for the put's own
# completion: one request and one ACK per operation. rc_share left puts
# unsignaled and its flush posted a NOP to learn of them: on rxe a second
# post (a system call) and twice the packets, which made put + flush 1.6-1.8
# times rc_verbs' time (contrib/bench_rma). Checks: both runs complete, the
# last put's value comes back in a get, UCP's RMA lane is the transport
# asked for, and rc_share sends at most 10 % more packets per operation
# than rc_verbs (the module before the fix, 29f935b: 8,007 against 4,012;
# after: 4,007 against 4,014).
# Where it runs: rma_flush-shared.sh (shared mode) in every CI run; this
# one, fallback mode, in the long run (the operations are the same code in
# both modes).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

ops=2000 # 200 warm-up and 9 batches of 200
prog=$IBSHARE_BUILDDIR/contrib/rma_lat
check "contrib/rma_lat is built" test -x "$prog"
[ -x "$prog" ] || finish

in_guest --timeout 600 sh -c '
    out=$1 prog=$2
    export LD_PRELOAD=$IBSHARE_PRELOAD UCX_NET_DEVICES=rxe0:1
    pkts() {
        rdma statistic show link rxe0/1 |
            sed -n "s/.* sent_pkts \([0-9]*\) .*/\1/p"
    }
    port=23000
    for tl in rc_v rc_share; do
        port=$((port + 1))
        pkts > "$out/$tl.before"
        UCX_TLS=$tl timeout 300 "$prog" -p $port > "$out/$tl.srv" 2>&1 &
        UCX_TLS=$tl UCX_LOG_LEVEL=info timeout 300 "$prog" -c 127.0.0.1 \
            -p $port -o put8_ep_flush -w 200 -b 9 -n 200 > "$out/$tl.cli" 2>&1
        echo $? > "$out/$tl.rc"
        wait $!
        echo $? > "$out/$tl.srvrc"
        pkts > "$out/$tl.after"
    done
' sh "$tmpdir" "$prog"
check "the guest ran both pairs" test $? -eq 0

for tl in rc_v rc_share; do
    case $tl in rc_v) lane=rc_verbs ;; *) lane=rc_share ;; esac
    grep -v ' INFO ' "$tmpdir/$tl.cli"
    check "$tl: client and server exit 0 (status $(cat "$tmpdir/$tl.rc"\
 2>/dev/null), $(cat "$tmpdir/$tl.srvrc" 2>/dev/null))" \
        test "$(cat "$tmpdir/$tl.rc" 2>/dev/null)/$(cat \
            "$tmpdir/$tl.srvrc" 2>/dev/null)" = 0/0
    check "$tl: the last put's value came back" \
        grep -q "^ok: the last put's value" "$tmpdir/$tl.cli"
    check "$tl: UCP's RMA lane is $lane on rxe0:1" \
        grep -q "rma($lane/rxe0:1" "$tmpdir/$tl.cli"
done

# sent TL: the packets rxe0 sent during TL's run
sent() {
    before=$(cat "$tmpdir/$1.before" 2>/dev/null)
    after=$(cat "$tmpdir/$1.after" 2>/dev/null)
    echo $((${after:-0} - ${before:-0}))
}
verbs=$(sent rc_v) share=$(sent rc_share)
echo "packets sent by rxe0 over $ops put + flush: rc_v $verbs," \
     "rc_share $share"
check "rxe0 counted packets over both runs ($verbs, $share)" \
    test "$verbs" -ge "$ops" -a "$share" -ge "$ops"
check "rc_share: at most 10 % more packets than rc_verbs per put + flush\
 ($share against $verbs)" \
    test $((share * 10)) -le $((verbs * 11))
finish
