#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Open MPI over UCX on the transport under test (IBSHARE_TEST_TL, default
# rc_share; rc_verbs to check the test itself), in one guest boot:
# test/guest/mpi_check (point-to-point, collectives, one-sided; every byte
# checked) passes with 2 ranks (messages up to 4 MiB) and with 4 (up to 1
# MiB), with pml ucx and osc ucx really in use, and UCP's endpoint
# configuration (UCX_LOG_LEVEL=info) puts the transport under test, and
# nothing but it (or self), on the tag lanes (pml ucx) and the rma lanes
# (osc ucx). For rc_share, the transport's own counters (lines with
# "rc_share" and "bytes", printed at info level when its iface closes) must
# appear, every rank must have run on the node group's resources in the
# test's mode, and while 4 ranks run the kernel holds one PD and one pool MR
# for the node in shared mode (the import provider), one PD and one slice MR
# per rank in fallback mode. Also: pml ucx fails, instead of falling back
# to another pml, when UCX has no device; and 4 ranks with shared memory
# added to UCX_TLS (rc_share,sm,self) pass, pml ucx's endpoints between the
# node's ranks on sm alone, and with fewer RC QPs on the node than without
# sm: osc ucx's keep theirs for atomics (issue 42; multinode_mpi-shared.sh
# runs the same across two nodes).
#
# OpenSHMEM (Open MPI's oshrun, spml ucx; issue 22), in the same boot:
# shmem_check (put, get, atomics, barriers, reductions, a 64 MiB object)
# passes on 4 PEs (and on 2 in shared mode's long run) with the transport
# under test
# on the rma lanes and, for rc_share, one group of the job's PEs; with
# --mca opal_common_ucx_opal_mem_hooks 0, which avoids Open MPI 4.1.4's exit
# crash (ompi#11604); in shared mode in the long run (contrib/check --long)
# the same job without it ends the same way over the transport under test
# and over rc_v (Open MPI's, not ours).
#
# MPICH (Debian's 4.0.2, ch4:ucx; issue 22), in the same boot: mpi_check
# built with mpicc.mpich passes under its launcher, hydra (mpiexec.mpich),
# with MPIR_CVAR_NOLOCAL=1 (ranks of one node talk through UCX), in two jobs
# of 2 ranks at once and one of 4, with the transport under test on the tag
# and rma lanes. For rc_share, with no job key set by hand, ibshare_info
# (sampled while they run) shows one group per job, keyed hydra-<pid>, whose
# members are exactly the job's ranks: two groups for the two jobs at once.
#
# In fallback mode the default run (not the long one, IBSHARE_TEST_LONG=1)
# runs the 4 sampled ranks and the no-device job only: what differs between
# the modes is the node's device objects, which that job counts; the 2-rank
# job, MPICH and OpenSHMEM cross the same code in both modes and run in
# shared mode (CI's time).
#
# UCX_TLS: rc_share,self for rc_share; rc_verbs,ud_verbs,self for rc_verbs
# (rc_verbs needs ud_verbs for wire-up); TL,self otherwise.
#
# mpi_check is built here (mpicc) into $IBSHARE_BUILDDIR/test/guest; the
# script runs itself in the guest (--guest ...), which only runs mpirun and
# keeps the output; the checks run here.

mpi_timeout=400

# ---------------------------------------------------------------- guest side

# run_mpi OUT NAME NP TLS [mpirun options]: runs mpi_check ($prog, with
# the arguments $prog_args), output in OUT/NAME.out, exit status in
# OUT/NAME.rc
run_mpi() {
    out=$1 name=$2 np=$3 run_tls=$4
    shift 4
    start=$(date +%s)
    timeout "$mpi_timeout" mpirun --allow-run-as-root --oversubscribe \
        -np "$np" --mca pml ucx --mca pml_ucx_tls any \
        --mca pml_ucx_devices any --mca osc ucx --mca pml_base_verbose 10 \
        -x LD_PRELOAD="$IBSHARE_PRELOAD" -x UCX_TLS="$run_tls" \
        -x UCX_LOG_LEVEL=info "$@" "$prog" $prog_args > "$out/$name.out" 2>&1
    echo $? > "$out/$name.rc"
    echo "$name: $np ranks, UCX_TLS=$run_tls $*: status" \
         "$(cat "$out/$name.rc"), $(($(date +%s) - start)) s"
}

# run_mpi_sampled OUT NAME NP TLS [mpirun options]: run_mpi, with the
# kernel's PDs and MRs (rdma res show) sampled while it runs: OUT/NAME.pd.*
# and OUT/NAME.mr.* before, at the most PDs, at the most pool and slice MRs
# (of POOL_MRLEN and SLICE_MRLEN bytes: a PD comes before its MR, so the
# two are sampled apart), and after; OUT/NAME.qp.max at the most RC QPs
run_mpi_sampled() {
    for what in pd mr; do
        rdma res show $what > "$1/$2.$what.before"
        cp "$1/$2.$what.before" "$1/$2.$what.max"
    done
    run_mpi "$@" &
    job=$!
    most_pds=$(grep -c . "$1/$2.pd.before")
    most_mrs=0
    most_rc=0
    rdma res show qp > "$1/$2.qp.max"
    while kill -0 "$job" 2>/dev/null; do
        rdma res show qp > "$1/$2.qp.now"
        # (the most RC QPs, and of those the most UD QPs)
        n=$(($(grep -c " type RC " "$1/$2.qp.now") * 1000 +
             $(grep -c " type UD " "$1/$2.qp.now")))
        if [ "$n" -gt "$most_rc" ]; then
            most_rc=$n
            mv "$1/$2.qp.now" "$1/$2.qp.max"
        fi
        rdma res show pd > "$1/$2.pd.now"
        n=$(grep -c . "$1/$2.pd.now")
        if [ "$n" -gt "$most_pds" ]; then
            most_pds=$n
            mv "$1/$2.pd.now" "$1/$2.pd.max"
        fi
        rdma res show mr > "$1/$2.mr.now"
        n=$(grep -cE " mrlen ($POOL_MRLEN|$SLICE_MRLEN) " "$1/$2.mr.now")
        if [ "$n" -gt "$most_mrs" ]; then
            most_mrs=$n
            mv "$1/$2.mr.now" "$1/$2.mr.max"
        fi
        # Once a second: the ranks hold what is counted for the whole job,
        # and each sample is six programs started in the guest, whose CPU
        # the ranks need (5 a second made the job 2-2.5x longer than
        # np4_sm's; issue 19)
        sleep 1
    done
    wait "$job"
    for what in pd mr; do
        rdma res show $what > "$1/$2.$what.after"
    done
}

# The pool and slice of the sampled 4-rank job, in bytes
POOL_MRLEN=69206016 SLICE_MRLEN=11534336

# run_mpich OUT NAME NP: mpi_check built with MPICH's mpicc ($mpich_prog)
# under MPICH's launcher, hydra (mpiexec.mpich), on ch4:ucx: every pair of
# ranks through UCX (MPIR_CVAR_NOLOCAL=1: no shared memory between them),
# messages up to 64 KiB (the Open MPI jobs go to 4 MiB; this is about the
# launcher and MPICH's use of UCP); OUT/NAME.out and OUT/NAME.rc
run_mpich() {
    out=$1 name=$2 np=$3
    start=$(date +%s)
    timeout "$mpi_timeout" mpiexec.mpich -n "$np" \
        -genv LD_PRELOAD "$IBSHARE_PRELOAD" -genv UCX_TLS "$tls" \
        -genv UCX_NET_DEVICES rxe0:1 -genv UCX_LOG_LEVEL info \
        -genv MPIR_CVAR_NOLOCAL 1 "$mpich_prog" 4 65536 \
        < /dev/null > "$out/$name.out" 2>&1
    echo $? > "$out/$name.rc"
    echo "$name: $np ranks under mpiexec.mpich, UCX_TLS=$tls: status" \
         "$(cat "$out/$name.rc"), $(($(date +%s) - start)) s"
}

# mpich OUT: two MPICH jobs of 2 ranks at once (two hydra jobs of one user:
# two node groups), then one of 4 ranks, each with ibshare_info sampled
# (OUT/mpich_pair.info, OUT/mpich_np4.info)
mpich() {
    sh "$IBSHARE_SRCDIR/test/guest/info_sampler.sh" "$1/mpich_pair.info" \
        "$info" &
    sampler=$!
    run_mpich "$1" mpich_a 2 &
    job_a=$!
    run_mpich "$1" mpich_b 2
    wait "$job_a"
    kill "$sampler"
    sh "$IBSHARE_SRCDIR/test/guest/info_sampler.sh" "$1/mpich_np4.info" \
        "$info" &
    sampler=$!
    run_mpich "$1" mpich_np4 4
    kill "$sampler"
    wait
}

# run_shmem OUT NAME NP TLS [oshrun options]: shmem_check ($shmem_prog) on
# NP PEs under Open MPI's oshrun (spml ucx), a 128 MiB symmetric heap and a
# 64 MiB object in it; OUT/NAME.out and OUT/NAME.rc
run_shmem() {
    out=$1 name=$2 np=$3 run_tls=$4
    shift 4
    start=$(date +%s)
    timeout "$mpi_timeout" oshrun --allow-run-as-root --oversubscribe \
        -np "$np" --mca spml ucx --mca pml ucx --mca pml_ucx_tls any \
        --mca pml_ucx_devices any -x LD_PRELOAD="$IBSHARE_PRELOAD" \
        -x UCX_TLS="$run_tls" -x UCX_NET_DEVICES=rxe0:1 \
        -x UCX_LOG_LEVEL=info -x SHMEM_SYMMETRIC_SIZE=128M "$@" \
        "$shmem_prog" 64 < /dev/null > "$out/$name.out" 2>&1
    echo $? > "$out/$name.rc"
    echo "$name: $np PEs under oshrun, UCX_TLS=$run_tls $*: status" \
         "$(cat "$out/$name.rc"), $(($(date +%s) - start)) s"
}

# shmem OUT: OpenSHMEM on 4 PEs (ibshare_info sampled: OUT/shmem_np4.info),
# with the setting that avoids Open MPI 4.1.4's exit crash; in shared mode's
# long run (shared_long) also on 2, and without the setting, over the
# transport under test and over rc_v, to show the crash is Open MPI's (CI's
# time)
shmem() {
    [ "$(shared_long)" = 0 ] ||
        run_shmem "$1" shmem_np2 2 "$tls" $shmem_setting
    sh "$IBSHARE_SRCDIR/test/guest/info_sampler.sh" "$1/shmem_np4.info" \
        "$info" &
    sampler=$!
    run_shmem "$1" shmem_np4 4 "$tls" $shmem_setting
    kill "$sampler"
    wait
    if [ "$(shared_long)" = 1 ]; then
        run_shmem "$1" shmem_exit 2 "$tls"
        run_shmem "$1" shmem_exit_rc_v 2 rc_v,self
    fi
}

# Open MPI 4.1.4's oshmem dlcloses spml ucx (and with it common ucx's memory
# release callback, which spml ucx never deregisters: ompi#11604, fixed by
# ompi#11620) before MPI_Finalize frees memory through the OPAL memory
# hooks: every PE dies with SIGSEGV after shmem_finalize, over any transport.
# Without OPAL's hooks for UCX (UCX then uses its own), nothing is left to
# call.
shmem_setting="--mca opal_common_ucx_opal_mem_hooks 0"

# fallback_short: 1 in fallback mode's default run (the head comment); a
# function, as the host side knows the mode only from test/lib.sh
fallback_short() {
    if [ "$IBSHARE_TEST_MODE" != shared ] &&
       [ "${IBSHARE_TEST_LONG:-0}" != 1 ]; then
        echo 1
    else
        echo 0
    fi
}

# shared_long: 1 in shared mode's long run (IBSHARE_TEST_LONG=1), which
# adds the jobs that cross no code the default run leaves out: 4 ranks with
# sm added, OpenSHMEM on 2 PEs and without the setting (CI's time)
shared_long() {
    if [ "$IBSHARE_TEST_MODE" = shared ] &&
       [ "${IBSHARE_TEST_LONG:-0}" = 1 ]; then
        echo 1
    else
        echo 0
    fi
}

guest() {
    out=$1 tls=$2 sm_tls=$3 prog=$4 mpich_prog=$5 info=$6 shmem_prog=$7
    prog_args=
    [ "$(fallback_short)" = 1 ] ||
        run_mpi "$out" np2 2 "$tls" -x UCX_NET_DEVICES=rxe0:1
    # 4 ranks: messages up to 1 MiB, where the checks keep 4 outstanding
    # per peer (the 2 ranks go to 4 MiB; CI's time)
    prog_args="4 1048576"
    # (not against the second UCX generation: what it adds, the node's
    # device objects, is the module's, the same on both)
    [ "${IBSHARE_TEST_SCOPE:-}" != generation ] &&
    case $tls in
    rc_share,*)
        # With the node's device objects sampled: UCX's own ib md (which
        # opens a context and PD of its own while UCP starts) left out, a
        # pool of 6 slices (one job for both: each 4-rank run takes a
        # minute of guest time)
        run_mpi_sampled "$out" np4 4 "$tls" -x UCX_NET_DEVICES=rxe0:1 \
            -x UCX_MODULES=^ib,rdmacm -x UCX_IBSHARE_SLICE_SIZE=11m \
            -x UCX_IBSHARE_POOL_SIZE=66m ;;
    *)
        run_mpi "$out" np4 4 "$tls" -x UCX_NET_DEVICES=rxe0:1 ;;
    esac
    # Shared memory beside the transport (issue 42): on UCX 1.13 in every
    # run, messages to 64 KiB (the path between ranks is sm's; CI's time)
    if [ "${IBSHARE_TEST_SCOPE:-}" != generation ]; then
        prog_args="4 65536"
        run_mpi "$out" np4_sm 4 "$sm_tls" -x UCX_NET_DEVICES=rxe0:1
    fi
    run_mpi "$out" no_device 2 "$tls" -x UCX_NET_DEVICES=nonexistent0:1
    prog_args=
    [ -z "$mpich_prog" ] || mpich "$out"
    [ -z "$shmem_prog" ] || shmem "$out"
}

if [ "${1:-}" = --guest ]; then
    guest "$2" "$3" "$4" "$5" "${6:-}" "${7:-}" "${8:-}"
    exit 0
fi

# ---------------------------------------------------------------- host side

. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/mpi_lib.sh"

tl=${IBSHARE_TEST_TL:-rc_share}
mode=$IBSHARE_TEST_MODE
if [ "$mode" = shared ]; then fallback_lines=0; else fallback_lines=1; fi
case $tl in
rc_share) tls=rc_share,self ;;
rc_verbs) tls=rc_verbs,ud_verbs,self ;;
*) tls=$tl,self ;;
esac
sm_tls=${tls%,self},sm,self
echo "transport under test: $tl (IBSHARE_TEST_TL); UCX_TLS=$tls"

mpi_prog mpi_check
if [ ! -x "$prog" ]; then
    finish
fi
# MPICH's and OpenSHMEM's jobs: not against the second UCX generation
# (Debian's MPICH is built on Debian's UCX; what they check, the job key
# under hydra, is the module's, the same on both), nor in fallback mode's
# default run (fallback_short)
mpich_prog='' shmem_prog=''
if [ "${IBSHARE_TEST_SCOPE:-}" != generation ] &&
   [ "$(fallback_short)" = 0 ]; then
    ompi_prog=$prog
    mpi_prog mpi_check mpicc.mpich mpich
    mpich_prog=$prog
    mpi_prog shmem_check oshcc
    shmem_prog=$prog
    prog=$ompi_prog
    [ -x "$mpich_prog" ] && [ -x "$shmem_prog" ] || finish
fi

in_guest --mem 3G --timeout 1800 sh "$IBSHARE_SRCDIR/test/guest/mpi.sh" \
    --guest "$tmpdir" "$tls" "$sm_tls" "$prog" "$mpich_prog" \
    "$IBSHARE_BUILDDIR/ibshare_info" "$shmem_prog" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the guest ran every mpirun (status $rc)" test "$rc" -eq 0

status_of() {
    cat "$tmpdir/$1.rc" 2>/dev/null || echo none
}

runs="np2 np4"
[ "${IBSHARE_TEST_SCOPE:-}" != generation ] || runs=np2
[ "$(fallback_short)" = 0 ] || runs=np4
for run in $runs; do
    np=${run#np}
    out=$tmpdir/$run.out
    label="$np ranks, UCX_TLS=$tls"
    echo "--- $label"
    show "$out"
    check "$label: mpirun exits 0 (status $(status_of "$run"))" \
        test "$(status_of "$run")" = 0
    summary_ok "$out"
    check "$label: mpi_check: all passed, 0 failed" test $? -eq 0
    n=$(grep -c 'select: component ucx selected' "$out" 2>/dev/null)
    n=${n:-0}
    check "$label: pml ucx selected by every rank ($n of $np)" test "$n" -eq "$np"
    check_lanes "$label" "pml ucx" tag "$out"
    check_lanes "$label" "osc ucx" rma "$out"
    if [ "$tl" = rc_share ]; then
        grep -v -E "$ucp_ep_cfg_re" "$out" 2>/dev/null | grep 'rc_share.*bytes' \
            > "$tmpdir/counters"
        n=$(grep -c . "$tmpdir/counters")
        sed 's/^/    /' "$tmpdir/counters"
        check "$label: rc_share printed its counters (lines with rc_share\
 and bytes: $n)" test "$n" -gt 0
        # The ranks form one node group (fallback mode on Debian's rxe,
        # shared mode on the import provider), each with its slice big
        # enough for its pml and osc ifaces
        check_group "$label" "$np" "$out" rank one
        check "$label: no rank's slice of the node pool overflowed" \
            sh -c "! grep -q 'slice of the node pool is full' '$out'"
    fi
    tail_on_failure "$label" "$out" "$(status_of "$run")" summary_ok "$out"
done

# The node's device objects while the 4 ranks ran (rdma res show, sampled)
if [ "$tl" = rc_share ] && [ "$runs" != np2 ]; then
    label="4 ranks, UCX_TLS=$tls, device objects"
    echo "--- $label"
    obj=$tmpdir/np4
    sed 's/^/    /' "$obj.pd.max" "$obj.mr.max"
    pds=$(($(grep -c . "$obj.pd.max") - $(grep -c . "$obj.pd.before")))
    pool_mrs=$(grep -c " mrlen $POOL_MRLEN " "$obj.mr.max")
    slice_mrs=$(grep -c " mrlen $SLICE_MRLEN " "$obj.mr.max")
    if [ "$mode" = shared ]; then
        check "$label: one PD for the node while it ran ($pds)" \
            test "$pds" -eq 1
        check "$label: one pool MR (66 MiB) for the node ($pool_mrs), no\
 slice MR ($slice_mrs)" test "$pool_mrs" -eq 1 -a "$slice_mrs" -eq 0
    else
        check "$label: one PD per rank while it ran ($pds)" \
            test "$pds" -eq 4
        check "$label: one slice MR (11 MiB) per rank ($slice_mrs), no pool\
 MR ($pool_mrs)" test "$slice_mrs" -eq 4 -a "$pool_mrs" -eq 0
    fi
    # One connection per pair of ifaces, both directions on it, one QP at
    # each end. Each rank has two ifaces (UCP workers: pml ucx's and osc
    # ucx's, one UD QP each), each connects to the 3 peers' and to itself
    # (UCP's endpoint to its own rank has an rc_share lane: a QP connected
    # to itself): at most 2 x 4 x (3 + 1) = 32. Before, every direction of
    # a pair had its own QP pair: 2 x 4 x (2 x 3 + 1) = 56
    rcs=$(grep -c " type RC " "$obj.qp.max")
    uds=$(grep -c " type UD " "$obj.qp.max")
    check "$label: at most one RC QP per iface and peer iface, 2 x 4 x 4 =\
 32 ($rcs at the most; and $uds UD QPs, 2 a rank)" \
        test "$rcs" -ge 1 -a "$rcs" -le 32 -a "$uds" -eq 8
    check "$label: after the job the kernel holds the PDs and MRs it held\
 before" sh -c "cmp -s '$obj.pd.before' '$obj.pd.after' &&
                cmp -s '$obj.mr.before' '$obj.mr.after'"
fi

# Shared memory beside the transport (issue 42): pml ucx's endpoints
# between ranks of the node are sm's alone (UCX_RC_SHARE_INTRA_NODE=auto;
# its endpoint to its own rank keeps rc_share, as a peer in the process);
# osc ucx's keep rc_share, as they carry atomics (UCP's device atomics all
# go through one device). The connections (an RC QP each) are rc_share's
# own count, which every iface prints when it closes: a sample of rdma res
# show once a second misses most of a 12 s job. pml's 4 x 1 (itself) and
# osc's 4 x 3: 16, where the same job without sm (np4 above) makes 28.
# connections FILE: the sum of the connections its ifaces made
connections() {
    grep -v -E "$ucp_ep_cfg_re" "$1" 2>/dev/null |
        sed -n 's/.* \([0-9][0-9]*\) connections (.*/\1/p' |
        awk '{ n += $1 } END { print n + 0 }'
}
if [ "${IBSHARE_TEST_SCOPE:-}" != generation ]; then
    out=$tmpdir/np4_sm.out
    label="4 ranks, UCX_TLS=$sm_tls"
    echo "--- $label"
    show "$out"
    check "$label: mpirun exits 0 (status $(status_of np4_sm))" \
        test "$(status_of np4_sm)" = 0
    summary_ok "$out"
    check "$label: mpi_check: all passed, 0 failed" test $? -eq 0
    echo "info: $test_name: $label: lanes $(lanes_found tag "$out")" \
         "$(lanes_found rma "$out")"
    if [ "$tl" = rc_share ]; then
        # (the endpoints to the node's other ranks: sm's, not self's)
        onnode=$(lane_groups tag "$out" | grep -E '(^| )(sysv|posix)/' |
                 grep -v 'self/')
        [ -n "$onnode" ] && ! echo "$onnode" | grep -q 'rc_share/'
        check "$label: pml ucx: tag lanes to the node's ranks without\
 rc_share ($(lanes_found tag "$out"))" test $? -eq 0
        conns=$(connections "$out")
        conns_np4=$(connections "$tmpdir/np4.out")
        check "$label: rc_share made 1 to 16 connections, 4 x 1 + 4 x 3,\
 fewer than without sm ($conns; $conns_np4 without)" \
            test "$conns" -ge 1 -a "$conns" -le 16 -a "$conns" -lt "$conns_np4"
    fi
    tail_on_failure "$label" "$out" "$(status_of np4_sm)" summary_ok "$out"
fi

out=$tmpdir/no_device.out
label="2 ranks, UCX_NET_DEVICES=nonexistent0:1"
echo "--- $label (must fail)"
grep -E 'PML add procs failed|Destination is unreachable|mpi_check: ' \
    "$out" 2>/dev/null | head -n 5
status=$(status_of no_device)
[ "$status" != 0 ] && [ "$status" != none ] && [ "$status" != 124 ]
check "$label: pml ucx does not fall back: mpirun fails (status $status)" \
    test $? -eq 0
! grep -q '^mpi_check: .* passed' "$out" 2>/dev/null
check "$label: and mpi_check does not run" test $? -eq 0

[ -n "$mpich_prog" ] || finish

# OpenSHMEM (Open MPI's oshrun, spml ucx): shmem_check's own lines
shmem_show() {
    grep -E '^((ok|FAIL): shmem_check|shmem_check: )' "$1" 2>/dev/null |
        sed 's/^/    /'
}

# shmem_ok FILE NP: every PE's checks passed (10 each), none failed
shmem_ok() {
    grep -q "^shmem_check: $(($2 * 10)) passed, 0 failed\$" "$1" 2>/dev/null &&
        ! grep -q '^FAIL: shmem_check' "$1"
}

shmem_runs=shmem_np4
[ "$(shared_long)" = 0 ] || shmem_runs="shmem_np2 shmem_np4"
for run in $shmem_runs; do
    out=$tmpdir/$run.out
    np=${run#shmem_np}
    label="OpenSHMEM, $np PEs under oshrun, UCX_TLS=$tls"
    echo "--- $label"
    shmem_show "$out"
    check "$label: oshrun exits 0 (status $(status_of "$run"))" \
        test "$(status_of "$run")" = 0
    shmem_ok "$out" "$np"
    check "$label: shmem_check: all $((np * 10)) passed, 0 failed" test $? -eq 0
    check_lanes "$label" "spml ucx" rma "$out"
    [ "$tl" != rc_share ] || check_group "$label" "$np" "$out" PE
    tail_on_failure "$label" "$out" "$(status_of "$run")" shmem_ok "$out" "$np"
done
if [ "$tl" = rc_share ]; then
    echo "--- ibshare_info while shmem_np4 ran"
    cat "$tmpdir/shmem_np4.info" 2>/dev/null
    ranks_of "$tmpdir/shmem_np4.out" > "$tmpdir/shmem_np4.ranks"
    groups_of "$tmpdir/shmem_np4.info" > "$tmpdir/shmem.groups"
    key=$(cut -d' ' -f1 "$tmpdir/shmem.groups")
    members_of "$tmpdir/shmem_np4.info" "$key" > "$tmpdir/members"
    check "OpenSHMEM, 4 PEs: one group ($key), its members the job's 4 PEs\
 ($(tr '\n' ' ' < "$tmpdir/members"))" sh -c "
        test \$(grep -c . '$tmpdir/shmem.groups') -eq 1 &&
        test \$(grep -c . '$tmpdir/members') -eq 4 &&
        cmp -s '$tmpdir/members' '$tmpdir/shmem_np4.ranks'"
fi
if [ "$(shared_long)" = 1 ]; then
    # Open MPI's exit crash (ompi#11604): the same outcome over rc_v as over
    # the transport under test, after every check passed in both
    label="OpenSHMEM, 2 PEs, without opal_common_ucx_opal_mem_hooks 0"
    a=$(status_of shmem_exit) b=$(status_of shmem_exit_rc_v)
    echo "--- $label: status $a over $tl, $b over rc_v"
    grep -h 'Caught signal' "$tmpdir/shmem_exit.out" \
        "$tmpdir/shmem_exit_rc_v.out" 2>/dev/null | sed 's/^/    /'
    shmem_ok "$tmpdir/shmem_exit.out" 2 && shmem_ok "$tmpdir/shmem_exit_rc_v.out" 2
    check "$label: every check passed over $tl and over rc_v" test $? -eq 0
    check "$label: the exit is the same over $tl as over rc_v (status $a and\
 $b: Open MPI's, not the transport's)" test "$a" = "$b" -a "$a" != none
fi

# MPICH under hydra
for run in mpich_a mpich_b mpich_np4; do
    out=$tmpdir/$run.out
    case $run in mpich_np4) np=4 ;; *) np=2 ;; esac
    label="MPICH, $np ranks under mpiexec.mpich ($run), UCX_TLS=$tls"
    echo "--- $label"
    show "$out"
    check "$label: mpiexec exits 0 (status $(status_of "$run"))" \
        test "$(status_of "$run")" = 0
    summary_ok "$out"
    check "$label: mpi_check: all passed, 0 failed" test $? -eq 0
    ranks_of "$out" > "$tmpdir/$run.ranks"
    check "$label: UCX's log names $np ranks ($(tr '\n' ' ' \
        < "$tmpdir/$run.ranks"))" test "$(grep -c . "$tmpdir/$run.ranks")" -eq "$np"
    check_lanes "$label" ch4:ucx tag "$out"
    check_lanes "$label" ch4:ucx rma "$out"
    [ "$tl" != rc_share ] || check_group "$label" "$np" "$out" rank one
    tail_on_failure "$label" "$out" "$(status_of "$run")" summary_ok "$out"
done

# The groups, from ibshare_info while the jobs ran: no job key set by hand;
# the module takes hydra's (hydra-<pid of the node's hydra_pmi_proxy>)
if [ "$tl" = rc_share ]; then
    for info in mpich_pair mpich_np4; do
        echo "--- ibshare_info while $info ran"
        cat "$tmpdir/$info.info" 2>/dev/null
    done
    groups_of "$tmpdir/mpich_pair.info" > "$tmpdir/pair.groups"
    keys=$(cut -d' ' -f1 "$tmpdir/pair.groups" | sort -u | tr '\n' ' ')
    label="MPICH, two jobs of 2 ranks at once"
    check "$label: two groups, two hydra keys ($keys)" sh -c \
        "test \$(grep -c '^hydra-[0-9]* ' '$tmpdir/pair.groups') -eq 2 &&
         test \$(echo '$keys' | wc -w) -eq 2"
    for run in mpich_a mpich_b; do
        # shellcheck disable=SC2086  # (keys: words)
        found=$(group_with "$tmpdir/$run.ranks" "$tmpdir/mpich_pair.info" \
                $keys)
        check "$label: $run's ranks ($(tr '\n' ' ' < "$tmpdir/$run.ranks"))\
 are the members of one group (${found:-none})" test -n "$found"
    done
    groups_of "$tmpdir/mpich_np4.info" > "$tmpdir/np4.groups"
    key=$(cut -d' ' -f1 "$tmpdir/np4.groups")
    label="MPICH, 4 ranks"
    check "$label: one group, hydra's key ($key)" sh -c \
        "test \$(grep -c . '$tmpdir/np4.groups') -eq 1 &&
         grep -q '^hydra-[0-9]* ' '$tmpdir/np4.groups'"
    members_of "$tmpdir/mpich_np4.info" "$key" > "$tmpdir/members"
    check "$label: its members are the job's 4 ranks ($(tr '\n' ' ' \
        < "$tmpdir/members"))" sh -c "test -s '$tmpdir/members' &&
        cmp -s '$tmpdir/members' '$tmpdir/mpich_np4.ranks'"
fi

finish
