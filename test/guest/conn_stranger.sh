#!/bin/sh
# rc_share's connection layer attacked and churned, in one guest boot
# (test/guest/conn_check.c, UCT; test/guest/stranger.c, raw verbs, a host
# of the fabric that is no member of the job). A target iface (conn_check
# target) must:
#   - create no QP for 10,000 requests without its secret, nor for 1,000
#     with guessed ones, and answer none of them;
#   - keep a real pinger's connection healthy while a stranger sends it
#     answers, refusals, "no such connection" and DISCs that claim to come
#     from the target (forged source);
#   - live on, and go on serving, after active messages with id 64 and 255,
#     unknown flags, no immediate data, and one longer than its buffers on
#     a connection (before, id 64 aborted the process);
#   - refuse a request of protocol version 4 with REJ(VERSION) and name
#     both versions for one of version 2;
#   - be back at its QP baseline within 2 x CHECK_TIMEOUT (+ 2 s for the
#     emulated guest) after 100 requesters are killed with SIGKILL, half
#     in the handshake and half connected (before: every passive QP of a
#     requester lived until the iface closed);
#   - keep flow control working after 1,000 endpoints left with their
#     grants outstanding (before: grants_in_flight leaked iface-wide);
#   - with UCX_RC_SHARE_MAX_CONNS=4, let 4 of 8 pingers connect and refuse
#     the others, whose endpoints fail naming the variable.
# And two ifaces that connect to each other at once 1,000 times (random
# delays) make exactly one connection each per round (conn_check simul).
# Runs in both modes (conn_stranger-shared.sh).

check_timeout=3    # UCX_RC_SHARE_CHECK_TIMEOUT of the whole test, seconds

# ---------------------------------------------------------------- guest side

# qps PID: the kernel's QPs of process PID (the kernel names the thread
# that created a QP: the async thread makes the peers' connections)
qps() {
    qp_tids=$(ls "/proc/$1/task" 2>/dev/null | tr '\n' '|')
    rdma res show qp 2>/dev/null |
        grep -c -E " pid (${qp_tids%|}) " 2>/dev/null || :
}

# wait_qps PID N SECONDS OUT: until PID has N QPs (at most SECONDS); the
# seconds it took, or "timeout", into OUT
wait_qps() {
    wq_start=$(date +%s.%N)
    wq_end=$(echo "$wq_start $3" | awk '{ print $1 + $2 }')
    while [ "$(qps "$1")" -ne "$2" ]; do
        if awk "BEGIN { exit !($(date +%s.%N) > $wq_end) }"; then
            echo timeout > "$4"
            return
        fi
        sleep 0.2
    done
    echo "$(date +%s.%N) $wq_start" | awk '{ printf "%.1f\n", $1 - $2 }' > "$4"
}

start_target() { # NAME [env...]
    name=$1
    shift
    env "$@" "$cc" $dev target "$out/$name.addr" 900 \
        > "$out/$name.out" 2>&1 &
    echo $! > "$out/$name.pid"
    i=0
    while [ ! -f "$out/$name.addr" ] && [ $i -lt 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}

guest() {
    out=$1
    cc=$IBSHARE_BUILDDIR/test/guest/conn_check
    st=$IBSHARE_BUILDDIR/test/guest/stranger
    dev=rxe0:1
    LD_PRELOAD=$IBSHARE_PRELOAD
    UCX_RC_SHARE_CHECK_TIMEOUT=${check_timeout}s
    UCX_LOG_LEVEL=info
    export LD_PRELOAD UCX_RC_SHARE_CHECK_TIMEOUT UCX_LOG_LEVEL

    start_target T
    t=$(cat "$out/T.pid")
    qps "$t" > "$out/base"
    "$cc" $dev ping "$out/T.addr" 3 > "$out/ping0.out" 2>&1
    echo $? > "$out/ping0.rc"
    # (the target keeps its endpoint back to each pinger, and so the
    # connection: one QP more)
    qps "$t" > "$out/ping0.qps"

    # Strangers: a flood, guesses
    base=$(cat "$out/ping0.qps")
    LD_PRELOAD= "$st" rxe0 flood "$out/T.addr" 10000 > "$out/flood.out" 2>&1
    echo $? > "$out/flood.rc"
    qps "$t" > "$out/flood.qps"
    LD_PRELOAD= "$st" rxe0 guess "$out/T.addr" 1000 > "$out/guess.out" 2>&1
    echo $? > "$out/guess.rc"
    qps "$t" > "$out/guess.qps"

    # Forged answers to a pinger that holds its connection meanwhile
    "$cc" $dev ping "$out/T.addr" 1 8 "$out/V.addr" > "$out/victim.out" 2>&1 &
    v=$!
    i=0
    while [ ! -f "$out/V.addr" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    sleep 1
    LD_PRELOAD= "$st" rxe0 forge "$out/T.addr" "$out/V.addr" \
        > "$out/forge.out" 2>&1
    echo $? > "$out/forge.rc"
    wait $v
    echo $? > "$out/victim.rc"

    # Bad messages on a connection, then a real pinger
    LD_PRELOAD= "$st" rxe0 inject "$out/T.addr" > "$out/inject.out" 2>&1
    echo $? > "$out/inject.rc"
    "$cc" $dev ping "$out/T.addr" 3 > "$out/ping1.out" 2>&1
    echo $? > "$out/ping1.rc"
    LD_PRELOAD= "$st" rxe0 version "$out/T.addr" > "$out/version.out" 2>&1
    echo $? > "$out/version.rc"

    # 100 requesters killed, half in the handshake, half connected (they
    # ping not: the target keeps no endpoint of its own to them)
    qps "$t" > "$out/before_kill"
    # (the node's: in shared mode a killed member's own objects stay)
    rdma res show qp | grep -c . > "$out/node_qps.before_kill"
    rdma res show cq | grep -c . > "$out/node_cqs.before_kill"
    : > "$out/killed"
    for batch in 1 2 3 4 5; do
        pids=
        for k in 1 2 3 4 5 6 7 8 9 10; do
            "$cc" $dev connect "$out/T.addr" handshake \
                > /dev/null 2>&1 &
            pids="$pids $!"
            "$cc" $dev connect "$out/T.addr" connected \
                > "$out/conn.$batch.$k" 2>&1 &
            pids="$pids $!"
        done
        # (each connected one prints its line: wait for all ten)
        i=0
        while [ "$(cat "$out"/conn.$batch.* 2>/dev/null |
                   grep -c '^connected$')" -lt 10 ] && [ $i -lt 600 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        # shellcheck disable=SC2086  # (a list of pids)
        kill -KILL $pids 2>/dev/null
        # shellcheck disable=SC2086
        wait $pids 2>/dev/null
        echo "$batch $(cat "$out"/conn.$batch.* | grep -c '^connected$')" \
            >> "$out/killed"
    done
    kill -0 "$t" && echo alive > "$out/T.after_kill"
    qps "$t" > "$out/kill.peak"
    wait_qps "$t" "$(cat "$out/before_kill")" $((2 * check_timeout + 2)) \
        "$out/kill.gone"
    wait_qps "$t" "$(cat "$out/before_kill")" 60 "$out/kill.gone_late"
    rdma res show qp | grep -c . > "$out/node_qps.after_kill"
    rdma res show cq | grep -c . > "$out/node_cqs.after_kill"

    # Endpoints that leave with their grants outstanding
    qps "$t" > "$out/before_churn"
    UCX_RC_SHARE_FC_WND_SIZE=16 "$cc" $dev churn "$out/T.addr" 1000 12 \
        > "$out/churn.out" 2>&1
    echo $? > "$out/churn.rc"
    # (but the last endpoint's, which pinged)
    wait_qps "$t" $(($(cat "$out/before_churn") + 1)) 20 "$out/churn.gone"

    kill -TERM "$t"
    wait "$t"
    echo $? > "$out/T.rc"

    # Simultaneous connects
    "$cc" $dev simul 1000 > "$out/simul.out" 2>&1
    echo $? > "$out/simul.rc"

    # At most 4 connections: 4 of 8 pingers
    start_target T2 UCX_RC_SHARE_MAX_CONNS=4
    t2=$(cat "$out/T2.pid")
    qps "$t2" > "$out/base2"
    pids=
    for k in 1 2 3 4 5 6 7 8; do
        "$cc" $dev ping "$out/T2.addr" 1 6 > "$out/max.$k" 2>&1 &
        pids="$pids $!"
    done
    sleep 3
    qps "$t2" > "$out/max.qps"
    for p in $pids; do
        wait "$p"
        echo $? >> "$out/max.rcs"
    done
    # The refused left nothing; the target keeps its endpoints to the others
    qps "$t2" > "$out/max.after"
    kill -TERM "$t2"
    wait "$t2"
}

if [ "${1:-}" = --guest ]; then
    guest "$2"
    exit 0
fi

# ---------------------------------------------------------------- host side

. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest --timeout 1200 sh "$IBSHARE_SRCDIR/test/guest/conn_stranger.sh" \
    --guest "$tmpdir" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the guest ran the test (status $rc)" test "$rc" -eq 0

o=$tmpdir
got() { cat "$o/$1" 2>/dev/null || echo none; }
show() { sed 's/^/    /' "$o/$1" 2>/dev/null; }
# secs_ok FILE: wait_qps reached its count: a number of seconds there
secs_ok() { grep -q -x '[0-9][0-9.]*' "$o/$1" 2>/dev/null; }
base=$(got base)
held=$(got ping0.qps)

echo "--- target"
grep "^target:" "$o/T.out" | sed "s/^/    /"
grep -E 'dropped|refused|version' "$o/T.out" 2>/dev/null | head -n 12 |
    sed 's/^/    /'
check "the target has its baseline of QPs ($base: its handshake QP)" \
    test "$base" = 1
check "a pinger's pings answered ($(got ping0.rc)); the target keeps its\
 endpoint back, one connection: $held QPs" \
    test "$(got ping0.rc)" = 0 -a "$held" = 2

show flood.out
check "10,000 requests without the secret: no QP ($(got flood.qps), before\
 $held)" test "$(got flood.rc)" = 0 -a "$(got flood.qps)" = "$held"
n=$(grep -c 'dropped a handshake message' "$o/T.out")
check "the target logged the drops, at most once a second ($n lines)" \
    test "$n" -ge 1 -a "$n" -le 60
show guess.out
check "1,000 guessed secrets: no answer, no QP ($(got guess.qps))" \
    test "$(got guess.rc)" = 0 -a "$(got guess.qps)" = "$held"

show forge.out
grep -E '^ping:' "$o/victim.out" | sed 's/^/    /'
check "forged answers, refusals, \"no such connection\" and DISCs: the\
 victim's connection stays healthy (status $(got victim.rc))" \
    test "$(got forge.rc)" = 0 -a "$(got victim.rc)" = 0

show inject.out
check "bad messages on a connection (AM id 64, 255, unknown flags, no\
 immediate data, too long) were sent" test "$(got inject.rc)" = 0
grep -E '^ping:' "$o/ping1.out" | sed 's/^/    /'
check "the target lives and serves after them ($(got ping1.rc))" \
    test "$(got ping1.rc)" = 0
check "the target counted and logged the messages it dropped" \
    grep -q 'dropped a message on QP' "$o/T.out"
show version.out
check "protocol versions: REJ(VERSION) for 4, nothing for 2" \
    test "$(got version.rc)" = 0
check "the target names both versions for version 4's and 2's requests" \
    sh -c "grep -q 'protocol version 4 .*ours is 3' '$o/T.out' &&
           grep -q 'protocol version 2 .*ours is 3' '$o/T.out'"

echo "--- 100 requesters killed (batch, connected before the kill):"
show killed
check "50 requesters connected before they were killed" \
    test "$(awk '{ s += $2 } END { print s + 0 }' "$o/killed" 2>/dev/null)" \
    -eq 50
check "the target lives after the kills" test "$(got T.after_kill)" = alive
check "the target's QPs ($(got kill.peak) after the kills) back to what\
 they were ($(got before_kill)) within 2 x CHECK_TIMEOUT + 2 s:\
 $(got kill.gone) s (at all: $(got kill.gone_late) s)" secs_ok kill.gone

qb=$(got node_qps.before_kill) qa=$(got node_qps.after_kill)
cb=$(got node_cqs.before_kill) ca=$(got node_cqs.after_kill)
echo "info: $test_name: the node's QPs $qb -> $qa and CQs $cb -> $ca after\
 100 processes were killed (mode $IBSHARE_TEST_MODE)"
if [ "$IBSHARE_TEST_MODE" = shared ]; then
    # A killed member's own QPs and CQs stay on the shared file until the
    # group ends: a bound per process, measured, never silent
    check "shared mode: what 100 killed members leave on the node is at\
 most 3 QPs and 3 CQs each ($((qa - qb)) QPs, $((ca - cb)) CQs)" \
        test "$((qa - qb))" -le 300 -a "$((ca - cb))" -le 300
else
    check "fallback mode: 100 killed processes leave no QP or CQ on the\
 node ($qb -> $qa QPs, $cb -> $ca CQs)" test "$qa" -eq "$qb" -a "$ca" -eq "$cb"
fi

show churn.out
check "1,000 endpoints left with grants outstanding; flow control works\
 after them" test "$(got churn.rc)" = 0
check "and their connections went ($(got churn.gone) s)" secs_ok churn.gone
check "the target exits 0 after all this ($(got T.rc)), no endpoint\
 error of its own" sh -c "test '$(got T.rc)' = 0 &&
    grep -q ' 0 endpoint errors' '$o/T.out'"

echo "--- simultaneous connects"
grep -E '^(ok|FAIL)|connections' "$o/simul.out" | sed 's/^/    /'
check "1,000 rounds of simultaneous connects passed both ways ($(got\
 simul.rc))" test "$(got simul.rc)" = 0
n=$(grep -c ' 1000 connections (' "$o/simul.out")
check "each iface made exactly one connection a round (1000 each:\
 $n of 2 ifaces)" test "$n" -eq 2

echo "--- UCX_RC_SHARE_MAX_CONNS=4, 8 pingers"
for k in 1 2 3 4 5 6 7 8; do
    grep -h -E '^ping:|MAX_CONNS' "$o/max.$k" 2>/dev/null | sed 's/^/    /'
done
ok=$(grep -c '^0$' "$o/max.rcs" 2>/dev/null)
refused=$(grep -l 'UCX_RC_SHARE_MAX_CONNS' "$o"/max.[1-8] 2>/dev/null | wc -l)
base2=$(got base2)
check "4 pingers connected ($ok), 4 failed naming UCX_RC_SHARE_MAX_CONNS\
 ($refused)" test "${ok:-0}" -eq 4 -a "$refused" -eq 4
check "the target held $(got max.qps) QPs while they ran and $(got\
 max.after) after: its baseline $base2 and the 4 connections" sh -c "
    test '$(got max.qps)' = $((${base2:-0} + 4)) &&
    test '$(got max.after)' = $((${base2:-0} + 4))"
finish
