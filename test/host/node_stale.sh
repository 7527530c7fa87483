#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A group whose members are all killed (SIGKILL) leaves its lock file and
# socket behind: ibshare_info does not list it, the next job with the same
# key founds a new group cleanly over the stale files, and a founder of any
# other group removes the files of dead groups (never of live ones).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

# start_group KEY: a founder and a member, holding; sets $a and $b
start_group() {
    drive $1.A -k $1 -c "$tmpdir/creates" -H "$tmpdir/hold"
    a=$!
    lines 1 > /dev/null
    drive $1.B -k $1 -c "$tmpdir/creates" -H "$tmpdir/hold"
    b=$!
    lines 1 > /dev/null
}

start_group stale-a
kill -KILL $a $b
wait $a $b 2> /dev/null  # "Killed"
check "the killed group left a lock file and a socket" \
      test "$(ls "$groupdir" | grep -c '\.\(lock\|sock\)$')" -eq 2
"$info" -d "$rundir" > "$tmpdir/info"
check "ibshare_info lists no live group" \
      grep -q "^no live node group" "$tmpdir/info"

drive N -k stale-a -c "$tmpdir/creates" -t 3
n=$!
lines 2 > "$tmpdir/N.out"
wait $n
check "the next job with the same key founds a new group (rc $?)" \
      grep -q "^joined pid=$n founder=1 .*fds=ok" "$tmpdir/N.out"
check "and, the last to leave, removes its files" no_files
check "it logged nothing" test ! -s "$tmpdir/N.err"

start_group stale-b
dead=$(ls "$groupdir")
kill -KILL $a $b
wait $a $b 2> /dev/null  # "Killed"
fifo hold 5
start_group stale-c
live=$(ls "$groupdir" | grep -v -F "$dead" | tr '\n' ' ')
check "another job's founder removed the dead group's files" \
      sh -c "! ls '$groupdir' | grep -q -F '$dead'"
check "and kept its own ($live)" test "$(echo $live | wc -w)" -eq 2

# a live group is not swept: stale-c survives a third group's founding
drive D -k stale-d -c "$tmpdir/creates" -t 3
d=$!
lines 2 > /dev/null
wait $d
check "a live group's files survive another founder" \
      sh -c "ls '$groupdir' | grep -c . | grep -qx 2"
drive E -k stale-c -c "$tmpdir/creates" -t 3
e=$!
lines 2 > "$tmpdir/E.out"
wait $e
check "and it still serves" grep -q "^joined .* server=$a " "$tmpdir/E.out"

exec 5>&-
lines 2 > /dev/null
wait_all $a $b
check "the live group left cleanly" test $? -eq 0
check "no file left" no_files

finish
