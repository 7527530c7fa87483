#!/bin/sh
# Open MPI over UCX on the transport under test (IBSHARE_TEST_TL, default
# rc_share; rc_verbs to check the test itself), in one guest boot:
# test/guest/mpi_check (point-to-point, collectives, one-sided; every byte
# checked) passes with 2 and with 4 ranks, with pml ucx and osc ucx really in
# use, and UCP's endpoint configuration (UCX_LOG_LEVEL=info) puts the
# transport under test, and nothing but it (or self), on the tag lanes (pml
# ucx) and the rma lanes (osc ucx). For rc_share, the transport's own
# counters (lines with "rc_share" and "bytes", printed at info level when its
# iface closes) must appear, every rank must have run on the node group's
# resources in the test's mode, and while 4 ranks run the kernel holds one
# PD and one pool MR for the node in shared mode (the import provider), one
# PD and one slice MR per rank in fallback mode. Also: 4 ranks with shared memory added to UCX_TLS
# pass (lanes only reported), and pml ucx fails, instead of falling back to
# another pml, when UCX has no device.
#
# UCX_TLS: rc_share,self for rc_share; rc_verbs,ud_verbs,self for rc_verbs
# (rc_verbs needs ud_verbs for wire-up); TL,self otherwise.
#
# mpi_check is built here (mpicc) into $IBSHARE_BUILDDIR/test/guest; the
# script runs itself in the guest (--guest ...), which only runs mpirun and
# keeps the output; the checks run here.

mpi_timeout=400

# ---------------------------------------------------------------- guest side

# run_mpi OUT NAME NP TLS [mpirun options]: runs mpi_check ($prog), output in
# OUT/NAME.out, exit status in OUT/NAME.rc
run_mpi() {
    out=$1 name=$2 np=$3 run_tls=$4
    shift 4
    start=$(date +%s)
    timeout "$mpi_timeout" mpirun --allow-run-as-root --oversubscribe \
        -np "$np" --mca pml ucx --mca pml_ucx_tls any \
        --mca pml_ucx_devices any --mca osc ucx --mca pml_base_verbose 10 \
        -x LD_PRELOAD="$IBSHARE_PRELOAD" -x UCX_TLS="$run_tls" \
        -x UCX_LOG_LEVEL=info "$@" "$prog" > "$out/$name.out" 2>&1
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
        n=$(grep -c " type RC " "$1/$2.qp.now")
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

guest() {
    out=$1 tls=$2 sm_tls=$3 prog=$4
    run_mpi "$out" np2 2 "$tls" -x UCX_NET_DEVICES=rxe0:1
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
    run_mpi "$out" np4_sm 4 "$sm_tls" -x UCX_NET_DEVICES=rxe0:1
    run_mpi "$out" no_device 2 "$tls" -x UCX_NET_DEVICES=nonexistent0:1
}

if [ "${1:-}" = --guest ]; then
    guest "$2" "$3" "$4" "$5"
    exit 0
fi

# ---------------------------------------------------------------- host side

. "${IBSHARE_SRCDIR:?}/test/lib.sh"

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

in_guest --mem 3G --timeout 1800 sh "$IBSHARE_SRCDIR/test/guest/mpi.sh" \
    --guest "$tmpdir" "$tls" "$sm_tls" "$prog" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the guest ran every mpirun (status $rc)" test "$rc" -eq 0

status_of() {
    cat "$tmpdir/$1.rc" 2>/dev/null || echo none
}

# lane_groups LANE FILE: the resource lists of LANE in UCP's ep_cfg lines,
# one a line ("rc_verbs/rxe0:1", "self/memory0 rc_verbs/rxe0:1", ...)
lane_groups() {
    grep -h -E "$ucp_ep_cfg_re" "$2" 2>/dev/null |
        grep -o " $1([^)]*)" | sed "s/^ $1(//; s/)\$//"
}

# lanes_ok TL LANE FILE: LANE appears, uses TL, and no other transport than
# TL or self
lanes_ok() {
    groups=$(lane_groups "$2" "$3")
    [ -n "$groups" ] || return 1
    echo "$groups" | grep -E -q "(^| )$1/" || return 1
    ! echo "$groups" | tr ' ' '\n' | grep -v -e "^$1/" -e '^self/' | grep -q .
}

lanes_found() {
    lane_groups "$1" "$2" | sort -u | sed "s/^/$1(/; s/\$/)/" | tr '\n' ' ' |
        sed 's/ $//'
}

# mpi_check's own lines (its checks, the figures, the summary), indented
show() {
    grep -E '^((ok|FAIL): mpi_check|mpi_check: )' "$1" 2>/dev/null |
        sed 's/^/    /'
}

summary_ok() {
    grep -E -q '^mpi_check: [1-9][0-9]* passed, 0 failed$' "$1" 2>/dev/null &&
        ! grep -q '^FAIL: mpi_check' "$1"
}

runs="np2 np4"
[ "${IBSHARE_TEST_SCOPE:-}" != generation ] || runs=np2
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
    lanes_ok "$tl" tag "$out"
    lanes_rc=$?
    check "$label: pml ucx: tag lanes on $tl (or self) only: found\
 $(lanes_found tag "$out")" test "$lanes_rc" -eq 0
    lanes_ok "$tl" rma "$out"
    lanes_rc=$?
    check "$label: osc ucx: rma lanes on $tl (or self) only: found\
 $(lanes_found rma "$out")" test "$lanes_rc" -eq 0
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
        n=$(grep -c "rxe0: $mode resources: [0-9]* memory registrations" \
            "$out")
        check "$label: every rank used the node group's resources in $mode\
 mode ($n of $np)" test "$n" -eq "$np"
        n=$(grep -c 'node group in fallback mode' "$out")
        check "$label: one group for the job: $fallback_lines fallback-mode\
 line(s) ($n)" test "$n" -eq "$fallback_lines"
        check "$label: no rank's slice of the node pool overflowed" \
            sh -c "! grep -q 'slice of the node pool is full' '$out'"
    fi
    if [ "$(status_of "$run")" != 0 ] || ! summary_ok "$out"; then
        echo "--- $label: output (tail)" >&2
        tail -n 40 "$out" >&2
    fi
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
if [ "$(status_of np4_sm)" != 0 ] || ! summary_ok "$out"; then
    echo "--- $label: output (tail)" >&2
    tail -n 40 "$out" >&2
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

finish
