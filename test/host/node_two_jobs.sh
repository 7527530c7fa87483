#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Two jobs start on the node at the same instant, 16 processes each: two
# groups, two create() calls, every process served by its own job's group
# with its own job's pool; the same job on another device is a third group.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

n=16
pids=
for job in job-a job-b; do
    i=0
    while [ $i -lt $n ]; do
        drive $job.$i -k $job -c "$tmpdir/creates" -S "$tmpdir/start" \
              -H "$tmpdir/hold"
        pids="$pids $!"
        i=$((i + 1))
    done
done
lines $((2 * n)) > /dev/null
exec 3>&-
lines $((2 * n)) > /dev/null

check "create() ran twice" test "$(count . "$tmpdir/creates")" -eq 2
for job in job-a job-b; do
    founder=$(awk -v job=$job '$3 == job { print $2 }' "$tmpdir/creates")
    cat "$tmpdir"/$job.*.out > "$tmpdir/$job.joined"
    check "$job: one create() ($founder)" test "$(echo $founder | wc -w)" -eq 1
    check "$job: all $n served by the job's own group" \
          test "$(count "server=$founder .*pattern=$founder .*fds=ok" \
                  "$tmpdir/$job.joined")" -eq $n
    check "$job: one founder" \
          test "$(count ' founder=1 ' "$tmpdir/$job.joined")" -eq 1
    distinct=$(field slice "$tmpdir/$job.joined" | sort -u | wc -l)
    check "$job: $n distinct slices" test "$distinct" -eq $n
done

"$info" -d "$rundir" > "$tmpdir/info"
cat "$tmpdir/info"
check "ibshare_info lists two groups" \
      test "$(count "^group of job 'job-[ab]' on fake0" "$tmpdir/info")" -eq 2
check "of $n members each" \
      test "$(count "members: $n (" "$tmpdir/info")" -eq 2

drive other -k job-a -D fake1 -c "$tmpdir/creates" -t 3
o=$!
lines 2 > "$tmpdir/other"
wait $o
check "job-a on another device is a group of its own" \
      grep -q "^joined pid=$o founder=1 " "$tmpdir/other"

exec 5>&-
lines $((2 * n)) > "$tmpdir/left"
wait_all $pids
check "all left cleanly" test $? -eq 0
check "one last member per job" \
      test "$(count ' last=1 ' "$tmpdir/left")" -eq 2
check "no file left" no_files

finish
