#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# UCT-level conformance of the transport under test (IBSHARE_TEST_TL, default
# rc_share; rc_verbs to check the test itself) on rxe0:1, in one guest boot:
# ucx_perftest active messages, put, get and 64-bit atomics complete every
# iteration with finite, nonzero figures; the unsupported atomics (swap,
# 32-bit fetch-add) are refused cleanly (rc_share only; for other transports
# what happened is reported), and nothing crashes or hangs.
#
# The script runs itself in the guest (--guest OUTDIR TL), which only runs the
# ucx_perftest pairs and keeps their output in OUTDIR; the checks run here.
# multinode_uct.sh sources it with perftest_uct_lib=1 for its cases, guest
# and check_pairs only (the pairs between two guests).
#
# Where it runs: perftest_uct-shared.sh (UCX 1.13) in every CI run; this
# one, fallback mode, in the long run only (contrib/check --long; issue 19:
# CI's time: the operations are the same code in both modes). Against UCX
# 1.22, the same operations run in sanitizers.sh's pairs (make
# check-sanitize-generation). In shared mode's default run, seven of the
# fifteen pairs (the ones sanitizers-shared.sh runs with the same options,
# in the same mode on the same UCX: $sanitized below) are left to that test
# (CI's time, about 45 s); the long run, and multinode_uct.sh between two
# nodes, run all of them.

lat_iters=1000
bw_iters=2000
warmup=100
client_timeout=60
server_grace=15

# The pairs that sanitizers-shared.sh runs with the same options
# (left_to_sanitizers, test/guest/perf_pair.sh): in shared mode's default
# run they are its (and multinode_uct.sh runs every case, between two nodes)
sanitized="am_lat am_bw_bcopy am_bw_zcopy put_bw_zcopy get_zcopy fadd cswap"

# The test cases, one a line: NAME KIND ucx_perftest-options
# KIND: lat, bw (must complete) or refuse (unsupported atomics)
cases() {
    left_to_sanitizers "$sanitized" <<EOF
am_lat        lat    -t am_lat -D short -s 8
am_bw_short   bw     -t am_bw -D short -s 8
am_bw_bcopy   bw     -t am_bw -D bcopy -s 1024
am_bw_zcopy   bw     -t am_bw -D zcopy -s 4096
put_lat       lat    -t put_lat -D short -s 8
put_bw_short  bw     -t put_bw -D short -s 8
put_bw_bcopy  bw     -t put_bw -D bcopy -s 2048
put_bw_zcopy  bw     -t put_bw -D zcopy -s 65536
get_bcopy     bw     -t get -D bcopy -s 2048
get_zcopy     bw     -t get -D zcopy -s 65536
add_lat       lat    -t add_lat -s 8
fadd          lat    -t fadd -s 8
cswap         lat    -t cswap -s 8
swap          refuse -t swap -s 8
fadd32        refuse -t fadd -s 4
EOF
}

iters_of() {
    case $1 in
    bw) echo "$bw_iters" ;;
    *) echo "$lat_iters" ;;
    esac
}

# ---------------------------------------------------------------- guest side

. "$IBSHARE_SRCDIR/test/guest/perf_pair.sh"

# guest OUT TL [PORT]: every case's pair over TL, the output in OUT, on ports
# from PORT (default 20100) on
guest() {
    out=$1 tl=$2
    LD_PRELOAD=$IBSHARE_PRELOAD
    export LD_PRELOAD
    cases | while read -r name kind args; do
        echo "$name $args -x $tl -d rxe0:1 -n $(iters_of "$kind") -w $warmup"
    done | perf_pairs "$out" "${3:-20100}"
}

if [ -z "${perftest_uct_lib:-}" ] && [ "${1:-}" = --guest ]; then
    guest "$2" "$3"
    exit 0
fi

# ---------------------------------------------------------------- host side

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

# ended STATUS...: every process ended by itself: status known, no timeout
# (124), not killed, not by a signal (129..192; ucx_perftest's own failure
# status is 255)
ended() {
    for status; do
        case $status in
        none | killed | 124) return 1 ;;
        esac
        [ "$status" -le 128 ] || [ "$status" -gt 192 ] || return 1
    done
}

status_of() {
    cat "$pdir/$1" 2>/dev/null || echo none
}

# check_pairs DIR TL: checks the pairs of cases() over TL whose output the
# guest left in DIR; the table of their figures goes to DIR/summary
check_pairs() {
    pdir=$1 tl=$2
    summary=$pdir/summary
    row_fmt='%-14s %-6s %-6s %6s %9s %10s %10s %11s  %s\n'
    # shellcheck disable=SC2059  # (the format is a variable)
    printf "$row_fmt" test layout size iters "p50(us)" "lat(us)" "bw(MB/s)" \
        "msg/s" result > "$summary"

    cases > "$pdir/cases"
    while read -r name kind args; do
        # shellcheck disable=SC2086  # (args is a list of options)
        set -- $args
        layout=-
        size=8
        while [ $# -gt 1 ]; do
            case $1 in
            -D) layout=$2 ;;
            -s) size=$2 ;;
            esac
            shift
        done
        cli=$pdir/$name.cli
        srv=$pdir/$name.srv
        crc=$(status_of "$name.rc")
        src=$(status_of "$name.srvrc")
        label="$name ($args -x $tl)"

        no_crash "$cli" "$srv"
        check "$label: no crash" test $? -eq 0

        if [ "$kind" = refuse ]; then
            if [ "$crc" = 0 ]; then
                what="accepted (client exit 0)"
            elif grep -E -i -q 'unsupported|not support' "$cli" "$srv"; then
                what="refused: $(grep -E -i -h 'unsupported|not support' "$cli" |
                                 head -n 1 | sed 's/.*UCX  ERROR *//')"
            else
                what="client exit $crc, no 'unsupported' message"
            fi
            ended "$crc" "$src"
            check "$label: client and server end, no hang (status $crc/$src)" \
                test $? -eq 0
            if [ "$tl" = rc_share ]; then
                [ "$crc" != 0 ] && [ "$crc" != none ]
                check "$label: refused cleanly (status $crc): $what" test $? -eq 0
            else
                echo "info: $test_name: $label: $what (no expectation for $tl)"
            fi
            # shellcheck disable=SC2059
            printf "$row_fmt" "$name" "$layout" "$size" - - - - - "$what" \
                >> "$summary"
            continue
        fi

        iters=$(iters_of "$kind")
        row=$(final_row "$cli")
        # shellcheck disable=SC2086  # (row is a list of figures)
        if figures_ok "$size" "$iters" $row; then figures=ok; else figures=bad; fi
        check "$label: client exits 0 (status $crc)" test "$crc" = 0
        check "$label: server exits 0 (status $src)" test "$src" = 0
        check "$label: Final row: $iters iterations, finite nonzero figures" \
            test "$figures" = ok
        if [ "$figures" != ok ] || [ "$crc" != 0 ] || [ "$src" != 0 ]; then
            echo "--- $name: client output (tail)" >&2
            tail -n 15 "$cli" >&2
            echo "--- $name: server output (tail)" >&2
            tail -n 15 "$srv" >&2
        fi
        result=FAIL
        if [ "$figures" = ok ] && [ "$crc" = 0 ] && [ "$src" = 0 ]; then
            result=ok
        fi
        # shellcheck disable=SC2086
        set -- $row
        if [ $# -eq 8 ]; then
            # shellcheck disable=SC2059
            printf "$row_fmt" "$name" "$layout" "$size" "$1" "$2" "$4" "$6" "$8" \
                "$result" >> "$summary"
        else
            # shellcheck disable=SC2059
            printf "$row_fmt" "$name" "$layout" "$size" - - - - - \
                "FAIL (no Final row)" >> "$summary"
        fi
    done < "$pdir/cases"
}

[ -z "${perftest_uct_lib:-}" ] || return 0

. "${IBSHARE_SRCDIR:?}/test/lib.sh"

tl=${IBSHARE_TEST_TL:-rc_share}
echo "transport under test: $tl (IBSHARE_TEST_TL)"

in_guest --timeout 1200 sh "$IBSHARE_SRCDIR/test/guest/perftest_uct.sh" \
    --guest "$tmpdir" "$tl" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the guest ran every ucx_perftest pair (status $rc)" test "$rc" -eq 0

check_pairs "$tmpdir" "$tl"

echo
echo "ucx_perftest over $tl/rxe0:1 (soft-RoCE under QEMU/TCG: the figures only" \
     "show the transport works, not how fast)"
cat "$tmpdir/summary"
finish
