#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# 64 processes of one job start joining at the same instant: exactly one
# founds the group (create() runs once), every one is served, all slices
# differ, the fds every member got are the founder's files; they leave
# together and exactly one of them is the last; no fd leaks, no file left.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

n=64
pids=
i=0
while [ $i -lt $n ]; do
    drive m$i -k election -n 80 -c "$tmpdir/creates" -S "$tmpdir/start" \
          -H "$tmpdir/hold"
    pids="$pids $!"
    i=$((i + 1))
done

lines $n > "$tmpdir/waiting"
check "all $n members wait at the start barrier" test $? -eq 0
exec 3>&-   # go

lines $n > "$tmpdir/joined"
check "all $n members report" test $? -eq 0
check "every member was served" \
      test "$(count '^joined' "$tmpdir/joined")" -eq $n
check "create() ran exactly once" test "$(count . "$tmpdir/creates")" -eq 1
check "exactly one founder" \
      test "$(count ' founder=1 ' "$tmpdir/joined")" -eq 1
founder=$(awk '{ print $2 }' "$tmpdir/creates")
check "the founder is the process that ran create()" \
      grep -q "^joined pid=$founder founder=1 " "$tmpdir/joined"
check "every member read the founder's pool through its fd" \
      test "$(count " pattern=$founder " "$tmpdir/joined")" -eq $n
check "every member's fds are right (CLOEXEC, fallback: no cmd_fd)" \
      test "$(count ' fds=ok' "$tmpdir/joined")" -eq $n
distinct=$(field slice "$tmpdir/joined" | grep -v '^-1$' | sort -u | wc -l)
check "$n distinct slices ($distinct)" test "$distinct" -eq $n

"$info" -d "$rundir" > "$tmpdir/info"
check "ibshare_info sees $n members" grep -qE "members: $n \(" "$tmpdir/info"

exec 5>&-   # leave
lines $n > "$tmpdir/left"
check "all $n members left" test $? -eq 0
wait_all $pids
check "every driver exited 0" test $? -eq 0
check "exactly one member was the last" \
      test "$(count ' last=1 ' "$tmpdir/left")" -eq 1
check "no member saw its slice overwritten" \
      test "$(count ' slice_ok=1 ' "$tmpdir/left")" -eq $n
check "no fd leaked" test "$(count ' fdleak=0' "$tmpdir/left")" -eq $n
check "the last member removed the group's files" no_files
cat "$tmpdir"/*.err >&2
check "nothing logged" sh -c "! cat '$tmpdir'/*.err | grep -q ."

finish
