#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# UCT between two nodes: the ucx_perftest pairs of perftest_uct.sh (active
# messages, put, get, 64-bit atomics; swap and 32-bit fetch-add refused by
# rc_share) with the server on node0 and the client on node1 of
# `contrib/vm/run --nodes 2`, each node with its own rxe0 on the link and the
# GID chosen by the transport; over rc_share, and over UCX's rc_verbs as a
# control, in one boot of the two guests. Every pair completes with finite,
# nonzero figures, the client ran on node1, and the traffic crossed the link.
# The control runs when an rc_share pair did not end as it should (it tells
# a broken link from a broken transport), and always with
# IBSHARE_TEST_LONG=1 (contrib/check --long): CI's time, 60 s.
# Then, in the same boot, multinode_failure.sh's cases: node1's processes
# killed under UCP and under Open MPI, seen from node0 (its head comment).
#
# The script runs itself on node0 (--guest OUTDIR PROG INFO), which runs
# the pairs and keeps their output in OUTDIR/TL, then the failure cases
# (mpi_check PROG, ibshare_info INFO) with theirs in OUTDIR/failure; the
# checks run here.

perftest_uct_lib=1
. "${IBSHARE_SRCDIR:?run through make check}/test/guest/perftest_uct.sh"
multinode_failure_lib=1
. "$IBSHARE_SRCDIR/test/guest/multinode_failure.sh"

# Fewer iterations than on one node: every packet crosses two emulated NICs
# (1000 bandwidth iterations took 16-23 s of each 64 KiB case; issue 19)
lat_iters=300
bw_iters=300
warmup=50

tls="rc_share rc_verbs"

# ---------------------------------------------------------------- guest side

# node_info NODE: its hostname, rxe0's link and its non-zero GIDs among the
# first 10 (the addresses' come first)
# shellcheck disable=SC2016  # (expanded by the node's shell)
node_info() {
    node-exec "$1" 'hostname; rdma link show rxe0/1;
        for g in /sys/class/infiniband/rxe0/ports/1/gids/[0-9]; do
            v=$(cat "$g" 2>/dev/null) &&
            [ "$v" != 0000:0000:0000:0000:0000:0000:0000:0000 ] &&
            echo "gid ${g##*/} $v"
        done'
}

# pairs_ended_well DIR: every pair of cases() in DIR ended as it should
# (both sides 0, or a refusal: both nonzero)
pairs_ended_well() {
    cases | while read -r name kind args; do
        for side in rc srvrc; do
            st=$(cat "$1/$name.$side" 2>/dev/null || echo none)
            case $kind in
            refuse) [ "$st" != 0 ] && [ "$st" != none ] ;;
            *) [ "$st" = 0 ] ;;
            esac || exit 1
        done
    done
}

# link_bytes: the bytes node1's link NIC has sent and received
link_bytes() {
    node-exec node1 "cat /sys/class/net/$link_dev/statistics/rx_bytes \
        /sys/class/net/$link_dev/statistics/tx_bytes" |
        awk '{ sum += $1 } END { print sum + 0 }'
}

if [ "${1:-}" = --guest ]; then
    # (not $out, which perftest_uct.sh's guest sets)
    mn_out=$2
    node_info node0 > "$mn_out/node0.info" 2>&1
    node_info node1 > "$mn_out/node1.info" 2>&1
    link_dev=$(sed -n 's/.* netdev \([^ ]*\).*/\1/p' "$mn_out/node1.info")
    # The server here, on node0; the client on node1, to node0's address
    perf_server_host=node0
    perf_client_via="node-exec node1 env LD_PRELOAD=$IBSHARE_PRELOAD"
    port=20100
    for tl in $tls; do
        if [ "$tl" != rc_share ] && [ "${IBSHARE_TEST_LONG:-0}" != 1 ] &&
           pairs_ended_well "$mn_out/rc_share"; then
            continue
        fi
        mkdir -p "$mn_out/$tl"
        before=$(link_bytes)
        guest "$mn_out/$tl" "$tl" "$port"
        echo $(($(link_bytes) - before)) > "$mn_out/$tl/link_bytes"
        port=$((port + 100))
    done
    mkdir -p "$mn_out/failure"
    failure_guest "$mn_out/failure" "$3" "$4"
    exit 0
fi

# ---------------------------------------------------------------- host side

. "$IBSHARE_SRCDIR/test/lib.sh"

# The transports choose the GID themselves
unset UCX_IB_GID_INDEX UCX_RC_SHARE_GID_INDEX

mpi_prog mpi_check
[ -x "$prog" ] || finish

in_guest --nodes 2 --timeout 1800 --log "$tmpdir/console" sh \
    "$IBSHARE_SRCDIR/test/guest/multinode_uct.sh" --guest "$tmpdir" \
    "$prog" "$IBSHARE_BUILDDIR/ibshare_info" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the two guests ran every ucx_perftest pair and both failure cases\
 (status $rc)" test "$rc" -eq 0

# Each node is itself, with rxe0 on its link NIC and the RoCE v2 GID of its
# own link address (169.254.1.<N+1>, a9fe:01NN)
for n in 0 1; do
    info=$tmpdir/node$n.info
    echo "--- node$n"
    cat "$info" 2>/dev/null
    check "node-exec node$n ran on node$n" \
        test "$(head -n 1 "$info" 2>/dev/null)" = "node$n"
    grep -q 'state ACTIVE.* netdev ' "$info" 2>/dev/null &&
        ! grep -q 'netdev dummy0' "$info"
    check "node$n: rxe0/1 active over the link NIC" test $? -eq 0
    gid=$(printf '0000:0000:0000:0000:0000:ffff:a9fe:01%02x' $((n + 1)))
    check "node$n: rxe0 has the GID $gid of its link address" \
        grep -q " $gid\$" "$info"
done

# The bytes of put_bw_zcopy and get_zcopy alone (64 KiB each iteration, one
# way each) crossed node1's link NIC
min_bytes=$((2 * bw_iters * 65536))
for tl in $tls; do
    if [ "$tl" != rc_share ] && [ ! -d "$tmpdir/$tl" ]; then
        echo "info: $test_name: every rc_share pair ended well: no $tl control"
        continue
    fi
    echo
    echo "=== $tl between node0 (server) and node1 (client)"
    check_pairs "$tmpdir/$tl" "$tl"
    bytes=$(cat "$tmpdir/$tl/link_bytes" 2>/dev/null || echo 0)
    check "$tl: $bytes bytes crossed node1's link NIC (at least $min_bytes)" \
        test "$bytes" -ge "$min_bytes"
    echo "ucx_perftest over $tl/rxe0:1, node1 to node0 (soft-RoCE under" \
         "QEMU/TCG: the figures only show the transport works, not how fast)"
    cat "$tmpdir/$tl/summary"
done

echo
failure_checks "$tmpdir/failure"
finish
