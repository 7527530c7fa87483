#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# ibshare_info lists the devices and every live group: job key, device,
# leader pid, members (count and pids), mode, pool and slices used, MRs and
# registration counters; a member killed drops out of the list, a new
# leader shows after a takeover, a dead group is not listed.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

"$info" -d "$rundir" > "$tmpdir/empty"
check "ibshare_info exits 0 with no group" test $? -eq 0
if ! ls /sys/class/infiniband/* > /dev/null 2>&1; then
    check "and says there is no RDMA device" \
          grep -q "^no RDMA devices$" "$tmpdir/empty"
fi
check "and no live group" grep -q "^no live node group in $rundir" \
      "$tmpdir/empty"
"$info" -h > "$tmpdir/help"
check "-h prints the usage, exit 0" grep -q "^usage: ibshare_info" \
      "$tmpdir/help"
"$info" -x > /dev/null 2>&1
check "a bad option exits 1" test $? -eq 1

# shared mode, counters (regs done, avoided, MRs) published by each member
drive F -k info-job -m shared -n 10 -C 3,5,2 -H "$tmpdir/hold"
f=$!
lines 1 > /dev/null
drive M1 -k info-job -m shared -n 10 -C 1,2,1 -H "$tmpdir/hold"
m1=$!
lines 1 > /dev/null
drive M2 -k info-job -m shared -n 10 -H "$tmpdir/hold"
m2=$!
lines 1 > /dev/null

UCX_IBSHARE_RUNTIME_DIR=$rundir "$info" > "$tmpdir/live"
cat "$tmpdir/live"
check "UCX_IBSHARE_RUNTIME_DIR is the default directory" \
      grep -q "^group of job 'info-job' on fake0$" "$tmpdir/live"
check "the leader is the founder" grep -q "leader pid: *$f$" "$tmpdir/live"
check "3 members" grep -q "members: 3 (" "$tmpdir/live"
for p in $f $m1 $m2; do
    check "member pid $p listed" grep -q "members: 3 (.*\b$p\b" "$tmpdir/live"
done
check "shared mode" grep -q "mode: *shared$" "$tmpdir/live"
check "pool size, slices and use" \
      grep -q "pool: *655360 bytes, 10 slices of 65536 bytes, 3 used" \
      "$tmpdir/live"
check "MRs of the group (its pool MR) and of all members" \
      grep -q "MRs registered: 4 (the group's pool MR, and 3 of members)$" "$tmpdir/live"
check "registration counters summed" \
      grep -q "registrations: *4 done, 7 avoided$" "$tmpdir/live"

kill -KILL $m2
wait $m2 2> /dev/null
"$info" -d "$rundir" > "$tmpdir/killed"
check "a killed member drops out" grep -q "members: 2 (" "$tmpdir/killed"
check "its pid with it" sh -c "! grep -q '\b$m2\b' '$tmpdir/killed'"

# The leader killed: the next joiner waits for the takeover, so after it
# the list shows the new leader
kill -KILL $f
wait $f 2> /dev/null
drive J -k info-job -m shared -n 10 -H "$tmpdir/hold"
j=$!
lines 1 > /dev/null
"$info" -d "$rundir" > "$tmpdir/takeover"
check "after a takeover the surviving member leads" \
      grep -q "leader pid: *$m1$" "$tmpdir/takeover"
check "with the joiner, 2 members" grep -q "members: 2 (" "$tmpdir/takeover"

kill -KILL $m1 $j
wait $m1 $j 2> /dev/null
"$info" -d "$rundir" > "$tmpdir/dead"
check "a dead group is not listed, though its files are left" \
      sh -c "grep -q '^no live node group' '$tmpdir/dead' &&
             ls '$groupdir' | grep -q lock"

finish
