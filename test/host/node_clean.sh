#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# ibshare_info --clean: the files of dead groups (a killed job's lock and
# socket, the lock file of a founder that died in create()) are removed and
# reported; a live group's are never touched, and it goes on serving.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

# A live group, L with M attached
drive L -k live -c "$tmpdir/creates.live" -H "$tmpdir/hold"
l=$!
lines 1 > /dev/null
drive M -k live -c "$tmpdir/creates.live" -H "$tmpdir/hold"
m=$!
lines 1 > /dev/null
live_files=$(ls "$groupdir")

# A killed job: its founder and member, both SIGKILLed
fifo hold2 7
"$driver" join -d "$rundir" -k killed -R "$tmpdir/ready" -H "$tmpdir/hold2" \
    > "$tmpdir/K1.out" 2> "$tmpdir/K1.err" 3>&- 4>&- 5>&- 6>&- 7>&- &
k1=$!
lines 1 > /dev/null
"$driver" join -d "$rundir" -k killed -R "$tmpdir/ready" -H "$tmpdir/hold2" \
    > "$tmpdir/K2.out" 2> "$tmpdir/K2.err" 3>&- 4>&- 5>&- 6>&- 7>&- &
k2=$!
lines 1 > /dev/null
kill -KILL $k1 $k2
wait $k1 $k2
exec 7>&-

# A founder that died inside create(): an empty lock file
drive C -k create-exit -f create_exit
wait $!
check "the failed founder exited inside create() (status $?)" test $? -eq 86

dead=$(ls "$groupdir" | grep -v -F -x "$live_files" | sort)
check "the dead groups left 3 files (2 locks, 1 socket)" \
      test "$(echo "$dead" | wc -l)" -eq 3
echo "$dead"

"$info" --clean -d "$rundir" > "$tmpdir/clean.out" 2> "$tmpdir/clean.err"
rc=$?
cat "$tmpdir/clean.out" "$tmpdir/clean.err"
check "--clean succeeded (rc $rc)" test $rc -eq 0
check "it removed the dead groups' files" \
      test -z "$(ls "$groupdir" | grep -v -F -x "$live_files")"
for f in $dead; do
    check "it reported $f" grep -q "^removed $groupdir/$f\$" \
          "$tmpdir/clean.out"
done
check "it counted 2 dead groups" \
      grep -q "^removed the files of 2 dead groups in $rundir\$" \
      "$tmpdir/clean.out"
check "the live group's files are still there" \
      test "$(ls "$groupdir")" = "$live_files"
check "and not reported" \
      test "$(grep -c '^removed /' "$tmpdir/clean.out")" -eq 3
check "the live group is still listed" \
      grep -q "group of job 'live'" "$tmpdir/clean.out"
check "with its 2 members" grep -q "members: 2 (pids $l $m)" \
      "$tmpdir/clean.out"
check "--clean logged nothing" test ! -s "$tmpdir/clean.err"

# The live group still serves, and no second create() ran
drive J -k live -c "$tmpdir/creates.live"
j=$!
lines 2 > "$tmpdir/J.out"
wait $j
check "a newcomer is still served by L (rc $?)" \
      grep -q "^joined pid=$j founder=0 .*server=$l " "$tmpdir/J.out"
check "create() of the live group ran once" \
      test "$(count . "$tmpdir/creates.live")" -eq 1

"$info" --clean -d "$rundir" > "$tmpdir/clean2.out" 2>&1
check "a second --clean removes nothing" \
      grep -q "^removed the files of 0 dead groups" "$tmpdir/clean2.out"
check "and the live group stays" test "$(ls "$groupdir")" = "$live_files"

exec 5>&-
lines 2 > /dev/null
wait_all $l $m
check "the live group's members left cleanly" test $? -eq 0
check "no file left" no_files

"$info" -c -d "$tmpdir/none" > "$tmpdir/none.out" 2>&1
check "--clean of a directory without groups succeeds (rc $?)" \
      grep -q "^removed the files of 0 dead groups" "$tmpdir/none.out"

"$info" --help > "$tmpdir/help.out"
check "--help names --clean" grep -q -- "--clean" "$tmpdir/help.out"

finish
