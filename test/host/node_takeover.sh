#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The server dies at each step of a hand-off (UCX_IBSHARE_FAULT: after
# accept(), after reading the join message, after sending the descriptor)
# while other members are attached: a surviving member takes over, later
# joiners are served by it, and create() never runs a second time.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

for fault in accept_exit join_exit desc_exit; do
    fifo hold 5
    fifo arm 6
    key=takeover-$fault
    creates=$tmpdir/creates.$fault

    # The founder serves M1 and M2, then has the fault armed
    drive F.$fault -k $key -c "$creates" -A "$tmpdir/arm" -F $fault \
          -H "$tmpdir/hold"
    f=$!
    lines 1 > /dev/null
    drive M1.$fault -k $key -c "$creates" -H "$tmpdir/hold"
    m1=$!
    lines 1 > /dev/null
    drive M2.$fault -k $key -c "$creates" -H "$tmpdir/hold"
    m2=$!
    lines 1 > /dev/null
    exec 6>&-
    lines 1 > "$tmpdir/armed"
    check "$fault: the founder armed the fault" grep -q "^armed $f" \
          "$tmpdir/armed"

    # J meets the fault; with desc_exit it is served before the server dies
    drive J.$fault -k $key -c "$creates" -H "$tmpdir/hold"
    j=$!
    lines 1 > "$tmpdir/J.$fault"
    wait $f
    rc=$?
    check "$fault: the server exited at the fault point (status $rc)" \
          test $rc -eq 86
    check "$fault: and said so" grep -q "fault injection: the server exits" \
          "$tmpdir/F.$fault.err"
    server=$(field server "$tmpdir/J.$fault")
    if [ $fault = desc_exit ]; then
        check "$fault: J was served by the founder before it died" \
              test "$server" = "$f"
    else
        check "$fault: J was served by a surviving member ($server)" \
              test "$server" = "$m1" -o "$server" = "$m2"
    fi
    check "$fault: J got the founder's pool" \
          grep -q "founder=0 .* pattern=$f .*fds=ok" "$tmpdir/J.$fault"

    # A later joiner is served by whoever took over
    drive K.$fault -k $key -c "$creates"
    k=$!
    lines 2 > "$tmpdir/K.$fault"
    wait $k
    check "$fault: a later joiner was served and left (rc $?)" \
          grep -q "^left .* fdleak=0" "$tmpdir/K.$fault"
    server=$(field server "$tmpdir/K.$fault" | head -1)
    check "$fault: by a survivor ($server)" \
          test "$server" = "$m1" -o "$server" = "$m2" -o "$server" = "$j"
    check "$fault: create() ran once" test "$(count . "$creates")" -eq 1

    exec 5>&-
    lines 3 > "$tmpdir/left.$fault"
    wait_all $m1 $m2 $j
    check "$fault: the survivors left cleanly" test $? -eq 0
    check "$fault: one of them was the last" \
          test "$(count ' last=1 ' "$tmpdir/left.$fault")" -eq 1
    check "$fault: no file left" no_files
    check "$fault: the survivors logged nothing" \
          sh -c "! cat '$tmpdir'/[MJK]*.$fault.err | grep -q ."
    cat "$tmpdir"/[MJK]*.$fault.err >&2
done

finish
