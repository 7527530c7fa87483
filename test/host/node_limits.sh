#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A member at its fd limit: the kernel drops the fds that come with the
# descriptor (MSG_CTRUNC), and the member says so with RLIMIT_NOFILE and its
# figures, not that the server sent too many. A flood of connections that
# say nothing: the server logs far fewer warnings than it drops connections,
# with the count, and goes on serving.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

for mode in fallback shared; do
    fifo hold 5
    drive F.$mode -k limits-$mode -m $mode -t 3 -H "$tmpdir/hold"
    f=$!
    lines 1 > /dev/null

    # From too few fds to open the socket up to enough to join: some limit
    # in between leaves no room for the fds of the descriptor alone
    n=4
    while [ $n -le 16 ]; do
        (ulimit -n $n && exec "$driver" join -d "$rundir" -k limits-$mode \
             -m $mode -t 3) > "$tmpdir/J.$mode.$n" 2>&1 3>&- 4>&- 5>&- 6>&-
        n=$((n + 1))
    done
    cat "$tmpdir"/J.$mode.* > "$tmpdir/J.$mode"
    check "$mode: a limit left no room for the descriptor's fds" \
          grep -q "could not be received: the kernel found no free fd below our RLIMIT_NOFILE soft limit of [0-9]* (hard limit [0-9]*; [0-9a-z]* fds open); raise it (ulimit -n)" \
          "$tmpdir/J.$mode"
    # The count of our open fds (/proc/self/fd). No fd was free below the
    # limit when the descriptor came; before counting, the member closed
    # its socket and whatever of the descriptor's fds the kernel did install
    # (at most one fewer than it carries: the pool's in fallback mode, the
    # context's and the pool's in shared mode). Inherited fds above the
    # limit count too, so there is no upper bound.
    [ $mode = shared ] && carried=2 || carried=1
    grep -ho "soft limit of [0-9]* (hard limit [0-9]*; [0-9a-z]* fds open" \
        "$tmpdir/J.$mode" > "$tmpdir/counts.$mode"
    cat "$tmpdir/counts.$mode"
    check "$mode: the fds open are counted, at least the limit less $carried" \
          awk -v carried=$carried '
              { n++; if ($NF != "open" || $(NF - 2) !~ /^[0-9]+$/ ||
                         $(NF - 2) < $4 - carried) bad++ }
              END { exit !(n > 0 && bad == 0) }' "$tmpdir/counts.$mode"
    check "$mode: never that the server sent too many" \
          sh -c "! grep -q 'more than 2 file descriptors' '$tmpdir/J.$mode'"
    check "$mode: no failure leaked an fd" \
          sh -c "! grep '^failed' '$tmpdir/J.$mode' | grep -qv 'fdleak=0$'"
    check "$mode: a higher limit joins" \
          grep -q "^joined .* server=$f .*fds=ok" "$tmpdir/J.$mode.16"
    check "$mode: the server is alive" kill -0 $f
    exec 5>&-
    lines 1 > /dev/null
    wait $f
    check "$mode: and left cleanly (rc $?)" \
          grep -q "^left .* last=1 .*fdleak=0" "$tmpdir/F.$mode.out"
done

# 400 connections that say nothing: the server keeps 16 and drops the rest
# (its timeout outlasts the flood, so exactly 384)
fifo hold 5
drive S -k flood -t 6 -H "$tmpdir/hold"
s=$!
lines 1 > /dev/null
sock=$(ls "$groupdir"/*.sock)
start=$(date +%s)
"$driver" flood "$sock" 400 20 > "$tmpdir/flood.out" 2>&1 3>&- 4>&- 5>&- 6>&-
took=$(($(date +%s) - start))
check "every flood connection was closed by the server ($took s)" \
      grep -q "^flood 400 closed 400$" "$tmpdir/flood.out"

drive M -k flood -t 6
m=$!
lines 2 > "$tmpdir/M.out"
wait $m
check "after the flood a joiner is served (rc $?)" \
      grep -q "^joined .* server=$s .*fds=ok" "$tmpdir/M.out"

exec 5>&-
lines 1 > /dev/null
wait $s
check "the server left cleanly (rc $?)" \
      grep -q "^left .* last=1 .*fdleak=0" "$tmpdir/S.out"
warnings=$(count "dropping the oldest" "$tmpdir/S.err")
check "384 connections dropped, $warnings warnings for them" \
      test "$warnings" -ge 1 -a "$warnings" -le 20
check "the dropped ones are counted in a summary" \
      grep -q "connections dropped for room in the last 1 s (384 in all)" \
      "$tmpdir/S.err"
check "and in the server's last word" \
      grep -q "384 connections were dropped in all" "$tmpdir/S.err"
check "the log stays short ($(wc -l < "$tmpdir/S.err") lines)" \
      test "$(wc -l < "$tmpdir/S.err")" -le 60
check "no file left" no_files

finish
