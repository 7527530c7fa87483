#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The server misbehaves once (UCX_IBSHARE_FAULT: stall, garbage, truncated)
# while another member is attached: the joiner it misleads fails within its
# timeout with an error naming the cause and leaks no fd; the server lives
# on and serves the next joiner.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

for fault in stall garbage truncated; do
    fifo hold 5
    fifo arm 6
    key=misbehave-$fault
    creates=$tmpdir/creates.$fault

    drive F.$fault -k $key -c "$creates" -A "$tmpdir/arm" -F $fault \
          -H "$tmpdir/hold"
    f=$!
    lines 1 > /dev/null
    drive M.$fault -k $key -c "$creates" -H "$tmpdir/hold"
    m=$!
    lines 1 > /dev/null
    exec 6>&-
    lines 1 > /dev/null

    start=$(date +%s)
    drive V.$fault -k $key -c "$creates" -t 2
    v=$!
    lines 1 > "$tmpdir/V.$fault"
    wait $v
    rc=$?
    took=$(($(date +%s) - start))
    check "$fault: the misled joiner failed (rc $rc)" test $rc -eq 1
    check "$fault: after its 2 s timeout, not the default 30 s ($took s)" \
          test $took -lt 10
    check "$fault: without leaking an fd" \
          grep -q "^failed .* fdleak=0" "$tmpdir/V.$fault"
    case $fault in
        stall) cause="did not answer in time" ;;
        *)     cause="sent a bad answer" ;;
    esac
    check "$fault: and said why" grep -q "$cause" "$tmpdir/V.$fault.err"
    cat "$tmpdir/V.$fault.err"
    check "$fault: the server is alive" kill -0 $f

    drive J.$fault -k $key -c "$creates" -t 5
    j=$!
    lines 2 > "$tmpdir/J.$fault"
    wait $j
    check "$fault: the next joiner was served (rc $?)" \
          grep -q "^left .* fdleak=0" "$tmpdir/J.$fault"
    check "$fault: by the same server" \
          test "$(field server "$tmpdir/J.$fault" | head -1)" = "$f"
    check "$fault: create() ran once" test "$(count . "$creates")" -eq 1

    exec 5>&-
    lines 2 > "$tmpdir/left.$fault"
    wait_all $f $m
    check "$fault: the group left cleanly" test $? -eq 0
    check "$fault: one was the last" \
          test "$(count ' last=1 ' "$tmpdir/left.$fault")" -eq 1
    check "$fault: no file left" no_files
done

finish
