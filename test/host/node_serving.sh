#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Issue 21, items 1 and 2: what a serving member does when its own means
# fail.
# Item 2: the serving thread's poll() fails (UCX_IBSHARE_FAULT=poll_fail,
# armed after joining): the member logs why, removes its socket and lets go
# of the SERVER byte, so that another member takes over and the joiner that
# met the failure is served by it within the join timeout; the member that
# failed stays a member and leaves cleanly.
# Item 1: a shared-mode member that could not map the group's state
# (no_state) takes over after the founder is killed: it cannot tell a free
# slice from one a killed member retired, so it hands out none, and the
# joiner is told so (slice=-1) instead of getting the dead member's slice;
# a member that has the state counts the retired slices (the newcomer's
# warning, when it gets no slice, names that count).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

# ---- item 2
key=serving-poll
drive F -k $key -A "$tmpdir/arm" -F poll_fail -H "$tmpdir/hold"
f=$!
lines 1 > /dev/null
drive M -k $key -H "$tmpdir/hold"
m=$!
lines 1 > /dev/null
exec 6>&-
lines 1 > "$tmpdir/armed"
check "item 2: the founder armed the fault" grep -q "^armed $f" \
      "$tmpdir/armed"

start=$(date +%s)
drive J -k $key -t 10 -H "$tmpdir/hold"
j=$!
lines 1 > "$tmpdir/J"
took=$(($(date +%s) - start))
cat "$tmpdir/J"
check "item 2: the joiner that met the failure was served ($took s)" \
      grep -q "^joined .* fds=ok" "$tmpdir/J"
check "item 2: by the other member" test "$(field server "$tmpdir/J")" = "$m"
check "item 2: within the join timeout" test "$took" -lt 10
check "item 2: the failed server said why" \
      grep -q "poll() failed.*stops serving the group, another member takes over" \
      "$tmpdir/F.err"
check "item 2: and is still alive" kill -0 $f

drive K -k $key -H "$tmpdir/hold"
k=$!
lines 1 > "$tmpdir/K"
check "item 2: a later joiner is served too" \
      grep -q "^joined .* fds=ok" "$tmpdir/K"
exec 5>&-
lines 4 > "$tmpdir/left"
wait_all $f $m $j $k
check "item 2: every member left cleanly, the failed server too" \
      test $? -eq 0
check "item 2: one of them was the last" \
      test "$(count ' last=1 ' "$tmpdir/left")" -eq 1
check "item 2: no file left" no_files

# ---- item 1
fifo hold 5
key=serving-nostate
drive F1 -k $key -m shared -n 4 -M -H "$tmpdir/hold"
f1=$!
lines 1 > /dev/null
drive N -k $key -m shared -n 4 -f no_state -H "$tmpdir/hold"
n=$!
lines 1 > "$tmpdir/N"
check "item 1: the member without the state joined" \
      grep -q "^joined .* fds=ok" "$tmpdir/N"
kill -KILL $f1
wait $f1 2> /dev/null

drive J1 -k $key -m shared -n 4 -t 10 -H "$tmpdir/hold"
j1=$!
lines 1 > "$tmpdir/J1"
cat "$tmpdir/J1"
check "item 1: the joiner was served by the member without the state" \
      test "$(field server "$tmpdir/J1")" = "$n"
check "item 1: which handed out no slice (not the killed founder's 0)" \
      test "$(field slice "$tmpdir/J1")" = -1
check "item 1: the joiner, which has the state, counts 1 slice retired" \
      test "$(field retired "$tmpdir/J1")" = 1
check "item 1: the member without it, none it can count" \
      test "$(field retired "$tmpdir/N")" = -1
exec 5>&-
lines 2 > /dev/null
wait_all $n $j1
check "item 1: both left cleanly" test $? -eq 0
finish
