#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# UCP over the transport under test (IBSHARE_TEST_TL, default rc_share;
# rc_verbs to check the test itself) on rxe0:1, in one guest boot: ucx_perftest
# tag matching, put and get, at 8 B (eager) and 64 KiB (rendezvous), complete
# every iteration with finite, nonzero figures, and UCP's endpoint
# configuration (UCX_LOG_LEVEL=info: "ep_cfg[N]: tag(...)", "rma(...)") puts
# the transport under test, and nothing but it (or self), on the tag and rma
# lanes. Three cases wait for completions by sleeping (-E sleep:
# ucp_worker_wait on the iface's event fd, armed through the CQs) instead of
# polling: tag_lat at 8 B and 64 KiB, and tag_bw. (ucx_perftest's RMA tests
# never complete with -E sleep, over UCX's rc_verbs too: left out.)
#
# Where it runs: perftest_ucp-shared.sh (UCX 1.13) in every CI run, and
# the same pairs, sleeping ones included, in fallback mode against UCX 1.22
# under the sanitizers (sanitizers.sh, make check-sanitize-generation);
# this one, fallback mode on 1.13, in the long run only (contrib/check
# --long; issue 19: CI's time). In shared mode's default run, six of the
# eleven pairs (the ones sanitizers-shared.sh runs with the same options, in
# the same mode on the same UCX: $sanitized below) are left to that test
# (CI's time, about 50 s); the long run runs all of them.
#
# UCX_TLS: rc_share,self for rc_share; rc_verbs,ud_verbs,self for rc_verbs
# (rc_verbs needs ud_verbs for wire-up); TL,self otherwise.
#
# The script runs itself in the guest (--guest OUTDIR TL TLS), which only runs
# the ucx_perftest pairs and keeps their output in OUTDIR; the checks run here.

iters=1000
warmup=100
client_timeout=90
server_grace=15

# The pairs that sanitizers-shared.sh runs with the same options
# (left_to_sanitizers, test/guest/perf_pair.sh): in shared mode's default
# run they are its; tag_lat_8_sleep stays, the event path in the plain build
sanitized="tag_bw_65536 ucp_put_bw_65536 ucp_get_8 ucp_get_65536
tag_lat_64K_sleep tag_bw_8_sleep"

# The test cases, one a line: NAME LANE ucx_perftest-options
# LANE: the UCP lane (tag or rma) that must use the transport under test
cases() {
    left_to_sanitizers "$sanitized" <<EOF
tag_lat_8         tag  -t tag_lat -s 8
tag_lat_65536     tag  -t tag_lat -s 65536
tag_bw_8          tag  -t tag_bw -s 8
tag_bw_65536      tag  -t tag_bw -s 65536
ucp_put_bw_8      rma  -t ucp_put_bw -s 8
ucp_put_bw_65536  rma  -t ucp_put_bw -s 65536
ucp_get_8         rma  -t ucp_get -s 8
ucp_get_65536     rma  -t ucp_get -s 65536
tag_lat_8_sleep   tag  -t tag_lat -s 8 -E sleep
tag_lat_64K_sleep tag  -t tag_lat -s 65536 -E sleep
tag_bw_8_sleep    tag  -t tag_bw -s 8 -E sleep
EOF
}

# ---------------------------------------------------------------- guest side

. "$IBSHARE_SRCDIR/test/guest/perf_pair.sh"

guest() {
    out=$1 tl=$2 tls=$3
    LD_PRELOAD=$IBSHARE_PRELOAD
    UCX_TLS=$tls
    UCX_NET_DEVICES=rxe0:1
    UCX_LOG_LEVEL=info
    export LD_PRELOAD UCX_TLS UCX_NET_DEVICES UCX_LOG_LEVEL
    cases | while read -r name lane args; do
        echo "$name $args -n $iters -w $warmup"
    done | perf_pairs "$out" 20300
}

if [ "${1:-}" = --guest ]; then
    guest "$2" "$3" "$4"
    exit 0
fi

# ---------------------------------------------------------------- host side

. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/mpi_lib.sh"

tl=${IBSHARE_TEST_TL:-rc_share}
case $tl in
rc_share) tls=rc_share,self ;;
rc_verbs) tls=rc_verbs,ud_verbs,self ;;
*) tls=$tl,self ;;
esac
echo "transport under test: $tl (IBSHARE_TEST_TL); UCX_TLS=$tls"

in_guest --timeout 1200 sh "$IBSHARE_SRCDIR/test/guest/perftest_ucp.sh" \
    --guest "$tmpdir" "$tl" "$tls" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the guest ran every ucx_perftest pair (status $rc)" test "$rc" -eq 0

# final_row FILE: the fields of ucx_perftest's "Final:" row (iterations,
# latency 50%ile/average/overall in us, bandwidth average/overall in MB/s,
# message rate average/overall), or nothing
final_row() {
    awk '$1 == "Final:" { row = $2; for (i = 3; i <= 9; i++) row = row " " $i }
         END { if (row != "") print row }' "$1" 2>/dev/null
}

# no_crash FILE...: no sign of a crash in the outputs
no_crash() {
    ! grep -E -q 'Segmentation fault|Assertion|backtrace|Caught signal|Aborted' \
        "$@"
}

status_of() {
    cat "$tmpdir/$1" 2>/dev/null || echo none
}

summary=$tmpdir/summary
row_fmt='%-17s %6s %6s %9s %10s %10s %11s  %-5s %s\n'
# shellcheck disable=SC2059  # (the format is a variable)
printf "$row_fmt" test size iters "p50(us)" "lat(us)" "bw(MB/s)" "msg/s" \
    result "lanes (client)" > "$summary"

cases > "$tmpdir/cases"
while read -r name lane args; do
    # shellcheck disable=SC2086  # (args is a list of options)
    set -- $args
    size=8
    while [ $# -gt 1 ]; do
        [ "$1" = -s ] && size=$2
        shift
    done
    cli=$tmpdir/$name.cli
    srv=$tmpdir/$name.srv
    crc=$(status_of "$name.rc")
    src=$(status_of "$name.srvrc")
    label="$name ($args, UCX_TLS=$tls)"

    row=$(final_row "$cli")
    # shellcheck disable=SC2086  # (row is a list of figures)
    if figures_ok "$size" "$iters" $row; then figures=ok; else figures=bad; fi
    check "$label: client exits 0 (status $crc)" test "$crc" = 0
    check "$label: server exits 0 (status $src)" test "$src" = 0
    check "$label: Final row: $iters iterations, finite nonzero figures" \
        test "$figures" = ok
    no_crash "$cli" "$srv"
    check "$label: no crash" test $? -eq 0
    lanes_ok "$tl" "$lane" "$cli" "$srv"
    lanes_rc=$?
    found=$(lane_groups "$lane" "$cli" "$srv" | sort -u | tr '\n' ';')
    check "$label: $lane lanes of client and server on $tl (or self) only:\
 found $lane(${found%;})" test "$lanes_rc" -eq 0
    result=FAIL
    if [ "$figures" = ok ] && [ "$crc" = 0 ] && [ "$src" = 0 ]; then
        result=ok
    else
        echo "--- $name: client output (tail)" >&2
        tail -n 15 "$cli" >&2
        echo "--- $name: server output (tail)" >&2
        tail -n 15 "$srv" >&2
    fi
    lanes=$(grep -h -o -E "($ucp_ep_cfg_re).*" "$cli" 2>/dev/null | head -n 1)
    # shellcheck disable=SC2086
    set -- $row
    if [ $# -eq 8 ]; then
        # shellcheck disable=SC2059
        printf "$row_fmt" "$name" "$size" "$1" "$2" "$4" "$6" "$8" "$result" \
            "$lanes" >> "$summary"
    else
        # shellcheck disable=SC2059
        printf "$row_fmt" "$name" "$size" - - - - - FAIL "$lanes" >> "$summary"
    fi
done < "$tmpdir/cases"

echo
echo "ucx_perftest (UCP) with UCX_TLS=$tls on rxe0:1 (soft-RoCE under" \
     "QEMU/TCG: the figures only show the transport works, not how fast)"
cat "$summary"
finish
