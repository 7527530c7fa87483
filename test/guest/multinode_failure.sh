#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A node whose processes die, seen from the other node of `contrib/vm/run
# --nodes 2`, never a hang:
# 1. UCP over rc_share alone with error handling (ucx_perftest -e, keepalive
#    1 s): the server on node1 is killed (SIGKILL) mid-run; the client's
#    error handler on node0 reports the endpoint failure within 40 s.
# 2. Open MPI, 2 x 2 ranks of mpi_check over UCX_TLS=rc_share,self: once the
#    job runs its checks, every rank on node1 is killed (SIGKILL). mpirun
#    exits with an error within 120 s of the kill and says which rank died;
#    no rank is left on either node; node0's node group has ended and
#    rdma res show on node0 is back to what it was before the job.
#
# The script runs itself on node0 (--guest OUTDIR PROG INFO); the checks run
# here. multinode_uct.sh sources it with multinode_failure_lib=1 and runs
# both cases in its own boot of the two guests, after its pairs
# (failure_guest, failure_checks): it runs there in every `make check`
# (a boot of two guests less: CI's time); alone, for a developer, with
# `make check TESTS=test/guest/multinode_failure.sh`.

# ---------------------------------------------------------------- guest side

# wait_until CMD...: until CMD succeeds, at most 60 s
wait_until() {
    wu_n=0
    until "$@" || [ $wu_n -ge 120 ]; do
        sleep 0.5
        wu_n=$((wu_n + 1))
    done
}

# seconds_until LIMIT CMD...: wait until CMD succeeds, at most LIMIT s;
# prints the seconds it took
seconds_until() {
    su_start=$(date +%s) su_limit=$1
    shift
    until "$@" || [ $(($(date +%s) - su_start)) -ge "$su_limit" ]; do
        sleep 0.5
    done
    echo $(($(date +%s) - su_start))
}

ucp_peer() {
    export UCX_TLS=rc_share,self UCX_NET_DEVICES=rxe0:1 \
           UCX_KEEPALIVE_INTERVAL=1s
    node-exec node1 env LD_PRELOAD="$IBSHARE_PRELOAD" \
        UCX_TLS=$UCX_TLS UCX_NET_DEVICES=$UCX_NET_DEVICES \
        UCX_KEEPALIVE_INTERVAL=$UCX_KEEPALIVE_INTERVAL \
        ucx_perftest -p 14201 -t tag_lat -e -n 100000000 -w 10 \
        > "$out/ucp.srv" 2>&1 &
    srv=$!
    wait_until node-exec node1 'ss -Hltn "sport = :14201" | grep -q .'
    LD_PRELOAD=$IBSHARE_PRELOAD ucx_perftest node1 -p 14201 -t tag_lat -e \
        -n 100000000 -w 10 > "$out/ucp.cli" 2>&1 &
    cli=$!
    wait_until grep -q "^\[thread 0\]" "$out/ucp.cli"
    node-exec node1 pkill -KILL -x ucx_perftest && echo killed > "$out/ucp.killed"
    seconds_until 40 grep -q "error handler" "$out/ucp.cli" > "$out/ucp.report_s"
    kill "$cli" 2>/dev/null
    wait "$cli"
    wait "$srv"
}

# ranks NODE: the pids of mpi_check on NODE
ranks() {
    node-exec "$1" pgrep -x mpi_check | tr '\n' ' '
}

mpi_kill() {
    res=$out/node0.res
    rdma res show pd > "$res.before"
    rdma res show mr >> "$res.before"
    mpirun --allow-run-as-root \
        --host node0:2,node1:2 -np 4 --mca plm_rsh_agent node-exec \
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        --mca osc ucx \
        -x LD_PRELOAD="$IBSHARE_PRELOAD" -x UCX_TLS=rc_share,self \
        -x UCX_NET_DEVICES=rxe0:1 "$prog" > "$out/mpi.out" 2>&1 &
    mpi=$!
    # (the first checks ran: every rank is past MPI_Init and its wire-up)
    wait_until sh -c "[ \$(grep -c '^ok: mpi_check' '$out/mpi.out') -ge 3 ]"
    echo "node0: $(ranks node0)" > "$out/ranks.before"
    echo "node1: $(ranks node1)" >> "$out/ranks.before"
    env -u LD_PRELOAD "$info" > "$out/info.during" 2>&1
    node-exec node1 pkill -KILL -x mpi_check && echo killed > "$out/mpi.killed"
    seconds_until 120 sh -c "! kill -0 $mpi 2>/dev/null" > "$out/mpi.exit_s"
    if kill -0 "$mpi" 2>/dev/null; then
        echo hung > "$out/mpi.rc"
        kill -KILL "$mpi"
        wait "$mpi"
    else
        wait "$mpi"
        echo $? > "$out/mpi.rc"
    fi
    # (the runtime's last kills of node0's ranks may still be under way)
    wait_until sh -c "[ -z \"\$(pgrep -x mpi_check)\" ]"
    echo "node0: $(ranks node0)" > "$out/ranks.after"
    echo "node1: $(ranks node1)" >> "$out/ranks.after"
    env -u LD_PRELOAD "$info" > "$out/info.after" 2>&1
    rdma res show pd > "$res.after"
    rdma res show mr >> "$res.after"
}

# failure_guest OUTDIR PROG INFO: both cases, their output in OUTDIR
failure_guest() {
    out=$1 prog=$2 info=$3
    ucp_peer
    mpi_kill
}

if [ -z "${multinode_failure_lib:-}" ] && [ "${1:-}" = --guest ]; then
    failure_guest "$2" "$3" "$4"
    exit 0
fi

# ---------------------------------------------------------------- host side

# failure_checks DIR: the checks of both cases, on failure_guest's DIR
failure_checks() {
    fdir=$1
    echo "=== UCP: the server on node1 killed, the client on node0"
    check "the client made progress before the kill" \
        grep -q "^\[thread 0\]" "$fdir/ucp.cli"
    check "the server on node1 was killed" test -s "$fdir/ucp.killed"
    grep "error handler" "$fdir/ucp.cli"
    echo "reported $(cat "$fdir/ucp.report_s" 2>/dev/null) s after the kill"
    check "node0's error handler reported the dead peer on node1 within 40 s" \
        grep -qE "error handler called with status .*(Endpoint timeout|Connection reset)" \
        "$fdir/ucp.cli"
    check "no crash on node0" \
        sh -c "! grep -qE 'Segmentation|Assertion|backtrace' '$fdir/ucp.cli'"

    echo "=== Open MPI 2 x 2 over rc_share,self: node1's ranks killed"
    out=$fdir/mpi.out
    grep -E '^(ok|FAIL): mpi_check' "$out" 2>/dev/null | sed 's/^/    /'
    cat "$fdir/ranks.before" 2>/dev/null
    grep -c '^[^ ]*: [0-9]' "$fdir/ranks.before" 2>/dev/null | grep -q '^2$' &&
        [ "$(wc -w < "$fdir/ranks.before")" -eq 6 ]
    check "two ranks ran on each node before the kill" test $? -eq 0
    sed -n '/^group/,$p' "$fdir/info.during" 2>/dev/null
    check "node0's group had node0's two ranks" \
        grep -qE '^  members: 2 ' "$fdir/info.during"
    check "node1's ranks were killed" test -s "$fdir/mpi.killed"
    status=$(cat "$fdir/mpi.rc" 2>/dev/null || echo none)
    echo "mpirun: status $status, $(cat "$fdir/mpi.exit_s" 2>/dev/null) s after the kill"
    grep -E 'exited on signal|killed|aborted|Endpoint|Connection' "$out" |
        head -n 8 | sed 's/^/    /'
    [ "$status" != 0 ] && [ "$status" != hung ] && [ "$status" != none ]
    check "mpirun exits with an error within 120 s, no hang (status $status)" \
        test $? -eq 0
    check "mpirun names a rank killed by signal 9" \
        grep -qE 'rank [0-9]+ with PID [0-9]+ on node node1 exited on signal 9' \
        "$out"
    cat "$fdir/ranks.after" 2>/dev/null
    check "no rank is left on either node" \
        sh -c "[ \"\$(wc -w < '$fdir/ranks.after')\" -eq 2 ]"
    check "node0's group ended with the job" \
        sh -c "! grep -q '^group of job' '$fdir/info.after'"
    check "rdma res show on node0 is back to what it was before the job" \
        sh -c "test -s '$fdir/node0.res.before' &&
               cmp -s '$fdir/node0.res.before' '$fdir/node0.res.after'"
    if [ "$status" = 0 ] || [ "$status" = hung ]; then
        echo "--- mpirun output (tail)" >&2
        tail -n 40 "$out" >&2
    fi
}

[ -z "${multinode_failure_lib:-}" ] || return 0

. "${IBSHARE_SRCDIR:?}/test/lib.sh"

mpi_prog mpi_check
[ -x "$prog" ] || finish

# The transports choose the GID themselves
unset UCX_IB_GID_INDEX UCX_RC_SHARE_GID_INDEX

in_guest --nodes 2 --timeout 900 --log "$tmpdir/console" sh \
    "$IBSHARE_SRCDIR/test/guest/multinode_failure.sh" --guest "$tmpdir" \
    "$prog" "$IBSHARE_BUILDDIR/ibshare_info" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the two guests ran both cases (status $rc)" test "$rc" -eq 0
failure_checks "$tmpdir"
finish
