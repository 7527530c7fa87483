#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Node connections (UCX_RC_SHARE_NODE_CONNS=on, the prototype of
# doc/design/node-connections.md) across the two nodes of
# `contrib/vm/run --nodes 2`, in shared mode (node_conns-shared.sh; the
# engine posts with every member's keys, which needs the node's one PD):
# - test/guest/mpi_check on 2 x 2 ranks over UCX_TLS=rc_share,sm,self
#   (point-to-point, collectives, one-sided with osc ucx and its atomics;
#   every byte checked) passes, and each node's engine says it ran;
# - contrib/mpi_scale (MPI_Init, an exchange and an alltoall, both checked)
#   on 2 x P ranks for P = 2, 4, 8 passes, and each node's QPs (mpi_scale's
#   own sample after its alltoall) grow with P by the ranks' UD QPs alone,
#   at most P + 3 (the kernel's GSI QP, the P handshake UD QPs, the
#   engine's UD QP and its one RC QP to the other node); RC QPs, sampled
#   while the jobs run, at most 2 everywhere (one to the other node's
#   engine, one for the engine's connection to itself, a QP connected to
#   itself, which carries what osc ucx's ifaces send to the node's other
#   ranks). The per-pair path holds up to P x 2P RC QPs more (contrib/
#   bench_scale --nodes 2 has the rows).
# The ranks' own ifaces still have their UD QP each (the per-pair
# handshake's), which the RC count leaves out.
#
# The script runs itself on node0 (--guest OUTDIR CHECK SCALE INFO).

mpi_timeout=600

# job NAME NP PROG ARGS...: mpirun of PROG on NP ranks per node; OUT/NAME.out,
# .rc, NODE.NAME.info(.qp) (the samplers')
job() {
    jname=$1 np=$2
    shift 2
    pids=
    for n in node0 node1; do
        node-exec $n sh "$IBSHARE_SRCDIR/test/guest/info_sampler.sh" \
            "$out/$n.$jname.info" "$info" &
        pids="$pids $!"
    done
    start=$(date +%s)
    timeout "$mpi_timeout" mpirun --allow-run-as-root --oversubscribe \
        --host "node0:$np,node1:$np" -np $((2 * np)) \
        --mca plm_rsh_agent node-exec \
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        --mca osc ucx --mca btl ^openib \
        -x LD_PRELOAD="$IBSHARE_PRELOAD" -x UCX_TLS=rc_share,sm,self \
        -x UCX_NET_DEVICES=rxe0:1 -x UCX_LOG_LEVEL=info \
        -x UCX_RC_SHARE_NODE_CONNS=y -x UCX_RC_SHARE_TIMEOUT=4s \
        "$@" < /dev/null > "$out/$jname.out" 2>&1
    echo $? > "$out/$jname.rc"
    echo "mpirun 2 x $np ($jname): status $(cat "$out/$jname.rc")," \
         "$(($(date +%s) - start)) s"
    # shellcheck disable=SC2086  # (a list of pids)
    kill $pids
    wait
}

guest() {
    out=$1 check_prog=$2 scale_prog=$3 info=$4
    job check 2 "$check_prog" 2 65536
    for p in 2 4 8; do
        job "scale$p" "$p" "$scale_prog"
    done
}

case ${1:-} in
--guest)
    guest "$2" "$3" "$4" "$5"
    exit 0
    ;;
esac

# ---------------------------------------------------------------- host side

. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/mpi_lib.sh"

check "node connections need shared mode (IBSHARE_TEST_MODE=$IBSHARE_TEST_MODE)" \
    test "$IBSHARE_TEST_MODE" = shared
[ "$IBSHARE_TEST_MODE" = shared ] || finish

mpi_prog mpi_check
check_prog=$prog
scale_prog=$IBSHARE_BUILDDIR/test/guest/mpi_scale
mpicc -O2 -Wall -Wextra -o "$scale_prog" "$IBSHARE_SRCDIR/contrib/mpi_scale.c"
check "mpi_scale is built (mpicc)" test -x "$scale_prog"
[ -x "$check_prog" ] && [ -x "$scale_prog" ] || finish

in_guest --nodes 2 --timeout 1500 --log "$tmpdir/console" sh \
    "$IBSHARE_SRCDIR/test/guest/node_conns.sh" --guest "$tmpdir" \
    "$check_prog" "$scale_prog" "$IBSHARE_BUILDDIR/ibshare_info" \
    > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the two guests ran the jobs (status $rc)" test "$rc" -eq 0

# rc_qps NAME NODE: the most RC QPs NODE held while job NAME ran, as the
# sampler saw them (once a second or slower: it may miss a short job's
# connections, never see more than there were), or "none"
rc_qps() {
    rq_n=$(grep -c " type RC " "$tmpdir/$2.$1.info.qp" 2>/dev/null)
    echo "${rq_n:-none}"
}

# node_qps NAME NODE: every QP of NODE (RC, UD and the kernel's GSI QP) in
# mpi_scale's own sample, taken after its alltoall while every rank holds
# its connections, or "none"
node_qps() {
    awk -v node="$2" '$1 == "mpi_scale:" && $2 == "node" && $3 == node {
                          print $5; exit }' "$tmpdir/$1.out" 2>/dev/null |
        grep . || echo none
}

# common NAME LABEL RANKS: what every job shows
common() {
    out=$tmpdir/$1.out
    status=$(cat "$tmpdir/$1.rc" 2>/dev/null || echo none)
    check "$2: mpirun exits 0 (status $status)" test "$status" = 0
    n=$(grep -c 'rc_share node engine: posted [1-9]' "$out" 2>/dev/null)
    check "$2: an engine on each node posted for it (${n:-0} of 2)" \
        test "${n:-0}" -eq 2
    if grep -q -E 'UCX  +ERROR' "$out"; then
        grep -E 'UCX  +ERROR' "$out" | head -n 5 | sed 's/^/    /'
        check "$2: no UCX error in the job's log" false
    fi
    if [ "$status" != 0 ]; then
        tail -n 30 "$out" >&2
    fi
}

echo "=== mpi_check, 2 x 2 ranks"
grep -E '^((ok|FAIL): mpi_check|mpi_check: )' "$tmpdir/check.out" 2>/dev/null |
    sed 's/^/    /'
common check "mpi_check 2 x 2"
grep -E -q '^mpi_check: [1-9][0-9]* passed, 0 failed$' "$tmpdir/check.out" \
    2>/dev/null && ! grep -q '^FAIL: mpi_check' "$tmpdir/check.out"
check "mpi_check 2 x 2: all passed, 0 failed" test $? -eq 0
for n in node0 node1; do
    q=$(rc_qps check $n)
    check "mpi_check 2 x 2: $n held at most 2 RC QPs ($q)" \
        test "$q" != none -a "$q" -ge 1 -a "$q" -le 2
done

echo "=== mpi_scale, 2 x P ranks"
first=
for p in 2 4 8; do
    label="mpi_scale 2 x $p"
    grep '^mpi_scale: ' "$tmpdir/scale$p.out" 2>/dev/null | sed 's/^/    /'
    common "scale$p" "$label"
    grep -q "^mpi_scale: ranks $((2 * p)) window_s" "$tmpdir/scale$p.out" \
        2>/dev/null
    check "$label: every rank's exchange and alltoall checked" test $? -eq 0
    for n in node0 node1; do
        q=$(rc_qps "scale$p" $n)
        echo "    $n: $q RC QPs at the most, as sampled"
        check "$label: $n held at most 2 RC QPs, as sampled ($q)" \
            test "$q" != none -a "$q" -le 2
        # The node's QPs grow with P only by the ranks' UD QPs: the GSI
        # QP, P UD QPs, the engine's UD QP and its RC QP to node1/node0
        # (the per-pair path holds P x 2P RC QPs more)
        q=$(node_qps "scale$p" $n)
        check "$label: $n held at most P + 3 = $((p + 3)) QPs after the\
 alltoall ($q)" test "$q" != none -a "$q" -le $((p + 3))
        [ "$q" = none ] || q=$((q - p))
        first=${first:-$q}
        check "$label: $n held as many QPs less its ranks' as at P = 2 ($q,\
 $first)" test "$q" = "$first"
    done
done
finish
