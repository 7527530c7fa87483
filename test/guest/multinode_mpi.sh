#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Open MPI across two nodes of `contrib/vm/run --nodes 2`: mpirun --host
# node0:2,node1:2 starts node1's daemon through node-exec (plm_rsh_agent), and
# test/guest/mpi_check (point-to-point, collectives, one-sided with osc ucx;
# every byte checked) passes on the 2 x 2 ranks over UCX_TLS=rc_share,self
# and over rc_share,sm,self (in shared mode the second only), with pml ucx on
# every rank. Messages go up to 64 KiB (max_size below), 4 MiB with
# IBSHARE_TEST_LONG=1 (contrib/check --long), which also runs both jobs in
# both modes.
# Where it runs: multinode_mpi-shared.sh (the rc_share,sm,self job) in
# every CI run; this one, fallback mode, with both jobs in the long run
# only (contrib/check --long; issue 19: CI's time: the two nodes' path is
# the same code in both modes).
# The lanes: rc_share (or self) only in the first job; in the second, the
# endpoints that have no shared-memory transport (those to the other node)
# use rc_share, and pml ucx's to the node's other rank have no rc_share
# lane (issue 42: osc ucx's keep it, for atomics; each node holds 14 RC
# QPs at the most, 16 without sm). While each job runs, ibshare_info on each node shows one
# group of the job, whose members are exactly that node's ranks (their pids
# from UCX's log lines, which name the host), in the test's mode; after it,
# rdma res show on each node is back to what it was.
#
# The script runs itself on node0 (--guest OUTDIR PROG INFO), and
# info_sampler.sh on each node; the checks run here.

mpi_timeout=600

# The test bed's link is slow under load: with two ranks busy-polling on
# each guest's one vCPU, the kernel's rxe work gets a share of it, the link
# carries about 2 MB/s each way at once (13 MB/s one way, one pair), and
# requests are sent again (responders count duplicates with no frame lost
# on the link). So mpi_check's non-blocking checks keep 2 messages of 1 MiB
# and up outstanding per peer (not 4: 128 MiB each way at 4 MiB), and RC's
# transport timeout is 2 s (7 tries, 14 s before an endpoint fails; 1 s
# failed the rc_share,sm,self job with "transport retry counter exceeded"),
# 4 s in shared mode (the import provider's posts are system calls: 2 s
# failed the same way there). A dead peer is multinode_failure.sh's business.
large_depth=2
if [ "${IBSHARE_TEST_MODE:-}" = shared ]; then rc_timeout=4s; else rc_timeout=2s; fi
# Messages to 64 KiB (rendezvous already, many packets each) by default:
# the 1 MiB rows took 130 of the 144 s of mpi_check in a shared-mode job
# (CI, fresh machine, 2026-12-03), 4 MiB took 150 s of a 240 s job. The
# one-node MPI tests (mpi.sh) go to 4 MiB.
if [ "${IBSHARE_TEST_LONG:-0}" = 1 ]; then
    max_size=4194304
else
    max_size=65536
fi

# ---------------------------------------------------------------- guest side

# res NODE SUFFIX: NODE's PDs and MRs in OUT/NODE.res.SUFFIX
res() {
    node-exec "$1" 'rdma res show pd; rdma res show mr' > "$out/$1.res.$2"
}

# counters NODE SUFFIX: NODE's rxe and link counters (retries, sequence
# errors, drops) in OUT/NODE.counters.SUFFIX, for a failed job's log
counters() {
    node-exec "$1" 'rdma statistic show link rxe0/1; cat /proc/net/dev' \
        > "$out/$1.counters.$2" 2>&1
}

# job NAME TLS: one mpirun of PROG over UCX_TLS=TLS; OUT/NAME.out, .rc,
# NODE.NAME.info (the samplers'), NODE.res.NAME.before and .after
job() {
    for n in node0 node1; do
        res $n "$1.before"
        counters $n "$1.before"
    done
    pids=
    for n in node0 node1; do
        node-exec $n sh "$IBSHARE_SRCDIR/test/guest/info_sampler.sh" \
            "$out/$n.$1.info" "$info" &
        pids="$pids $!"
    done
    start=$(date +%s)
    timeout "$mpi_timeout" mpirun --allow-run-as-root \
        --host node0:2,node1:2 -np 4 --mca plm_rsh_agent node-exec \
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        --mca osc ucx --mca pml_base_verbose 10 \
        -x LD_PRELOAD="$IBSHARE_PRELOAD" -x UCX_TLS="$2" \
        -x UCX_NET_DEVICES=rxe0:1 -x UCX_LOG_LEVEL=info \
        -x UCX_RC_SHARE_TIMEOUT=$rc_timeout \
        "$prog" "$large_depth" "$max_size" < /dev/null > "$out/$1.out" 2>&1
    echo $? > "$out/$1.rc"
    echo "mpirun 2 x 2, UCX_TLS=$2: status $(cat "$out/$1.rc")," \
         "$(($(date +%s) - start)) s"
    # (killing node-exec kills the sampler on its node)
    # shellcheck disable=SC2086  # (a list of pids)
    kill $pids
    wait
    for n in node0 node1; do
        res $n "$1.after"
        counters $n "$1.after"
    done
}

# The jobs, "NAME TLS" a line: in shared mode the second, what users run
# (CI's time); both with IBSHARE_TEST_LONG=1 or in fallback mode
jobs() {
    [ "$IBSHARE_TEST_MODE" = shared ] && [ "${IBSHARE_TEST_LONG:-0}" != 1 ] ||
        echo "rc rc_share,self"
    echo "sm rc_share,sm,self"
}

guest() {
    out=$1 prog=$2 info=$3
    # (not a pipe into the loop: mpirun would read the next jobs from it)
    jobs > "$out/jobs"
    while read -r name tls; do
        job "$name" "$tls" < /dev/null
    done < "$out/jobs"
}

case ${1:-} in
--guest)
    guest "$2" "$3" "$4"
    exit 0
    ;;
esac

# ---------------------------------------------------------------- host side

. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/mpi_lib.sh"

mpi_prog mpi_check
[ -x "$prog" ] || finish

in_guest --nodes 2 --timeout 1200 --log "$tmpdir/console" sh \
    "$IBSHARE_SRCDIR/test/guest/multinode_mpi.sh" --guest "$tmpdir" "$prog" \
    "$IBSHARE_BUILDDIR/ibshare_info" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the two guests ran the job (status $rc)" test "$rc" -eq 0

sm_tls='posix|sysv|cma|knem|xpmem'

# check_job NAME TLS
check_job() {
    out=$tmpdir/$1.out
    label="2 x 2 ranks, UCX_TLS=$2"
    echo "=== $label"
    status=$(cat "$tmpdir/$1.rc" 2>/dev/null || echo none)
    grep -E '^((ok|FAIL): mpi_check|mpi_check: )' "$out" 2>/dev/null |
        sed 's/^/    /'
    check "$label: mpirun --host node0:2,node1:2 exits 0 (status $status)" \
        test "$status" = 0
    grep -E -q '^mpi_check: [1-9][0-9]* passed, 0 failed$' "$out" \
        2>/dev/null && ! grep -q '^FAIL: mpi_check' "$out"
    check "$label: mpi_check: all passed, 0 failed" test $? -eq 0
    n=$(grep -c 'select: component ucx selected' "$out" 2>/dev/null)
    check "$label: pml ucx selected by every rank (${n:-0} of 4)" \
        test "${n:-0}" -eq 4
    for lane in tag rma; do
        groups=$(lane_groups $lane "$out")
        found=$(echo "$groups" | sort -u | tr '\n' ' ')
        case $2 in
        *sm*)
            # The endpoints without shared memory (to the other node) have
            # rc_share; those with it (on the node) exist too, and pml
            # ucx's (the tag lanes) have no rc_share (issue 42; osc ucx's
            # keep it for atomics)
            remote=$(echo "$groups" | grep -v -E "(^| )($sm_tls|self)/")
            onnode=$(echo "$groups" | grep -E "(^| )($sm_tls)/" |
                     grep -v "self/")
            [ -n "$remote" ] &&
                ! echo "$remote" | grep -v -E "(^| )rc_share/" | grep -q . &&
                [ -n "$onnode" ] &&
                { [ "$lane" = rma ] || ! echo "$onnode" | grep -q "rc_share/"; }
            ;;
        *)
            [ -n "$groups" ] && echo "$groups" | grep -q 'rc_share/' &&
                ! echo "$groups" | tr ' ' '\n' |
                grep -v -e '^rc_share/' -e '^self/' | grep -q .
            ;;
        esac
        check "$label: $lane lanes: rc_share where no shared memory: $found" \
            test $? -eq 0
    done
    # The ranks of each node: the pids of UCX's log lines ("[host:pid  :...")
    for n in node0 node1; do
        grep -o "\[$n:[0-9]* *:" "$out" 2>/dev/null |
            sed 's/^.*:\([0-9]*\) *:$/\1/' | sort -u > "$tmpdir/$n.$1.ranks"
        info=$tmpdir/$n.$1.info
        echo "--- ibshare_info on $n while the job ran"
        cat "$info" 2>/dev/null
        check "$label: $n ran 2 ranks ($(tr '\n' ' ' < "$tmpdir/$n.$1.ranks"))" \
            test "$(grep -c . "$tmpdir/$n.$1.ranks")" -eq 2
        groups=$(grep -c '^group of job' "$info" 2>/dev/null)
        check "$label: $n: ibshare_info shows one group (${groups:-0})" \
            test "${groups:-0}" -eq 1
        sed -n 's/^  members: [0-9]* (pids \(.*\))$/\1/p' "$info" 2>/dev/null |
            tr ' ' '\n' | grep . | sort -u > "$tmpdir/$n.$1.members"
        check "$label: $n: the group's members are $n's ranks ($(tr '\n' ' ' \
            < "$tmpdir/$n.$1.members"))" \
            sh -c "test -s '$tmpdir/$n.$1.members' &&
                   cmp -s '$tmpdir/$n.$1.members' '$tmpdir/$n.$1.ranks'"
        mode=$(sed -n 's/^  mode: *//p' "$info" 2>/dev/null | head -n 1)
        check "$label: $n: the group runs in $IBSHARE_TEST_MODE mode (${mode:-none})" \
            test "$mode" = "$IBSHARE_TEST_MODE"
        rcs=$(grep -c " type RC " "$info.qp" 2>/dev/null)
        case $2 in
        *sm*)
            # One connection per pair of ifaces that talk, a QP at each
            # end: pml's to the 2 ranks of the other node and to itself,
            # none to the node's other rank (sm's; issue 42), osc's to all
            # 4 (atomics): 2 x (2 + 1) + 2 x 4 = 14, not 16
            check "$label: $n: at most 14 RC QPs, 2 x 3 + 2 x 4\
 (${rcs:-none} at the most)" \
                test "${rcs:-99}" -ge 1 -a "${rcs:-99}" -le 14 ;;
        *)
            # ... and to the node's other rank and to itself: 2 x 2 x 4
            check "$label: $n: at most 16 RC QPs, 2 x 2 x 4 (${rcs:-none}\
 at the most)" test "${rcs:-99}" -ge 1 -a "${rcs:-99}" -le 16 ;;
        esac
        check "$label: $n: after the job, rdma res show is what it was before" \
            sh -c "test -s '$tmpdir/$n.res.$1.before' &&
                   cmp -s '$tmpdir/$n.res.$1.before' '$tmpdir/$n.res.$1.after'"
    done
    if [ "$status" != 0 ]; then
        echo "--- mpirun output (tail)" >&2
        tail -n 40 "$out" >&2
        for n in node0 node1; do
            for w in before after; do
                echo "--- $n: rxe and link counters $w the job" >&2
                cat "$tmpdir/$n.counters.$1.$w" >&2
            done
        done
    fi
}

jobs > "$tmpdir/jobs"
while read -r name tls; do
    check_job "$name" "$tls"
done < "$tmpdir/jobs"
finish
