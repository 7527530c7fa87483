#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A member forks without exec (a fork-based helper, Python multiprocessing):
# the child keeps none of the group's files (lock file fds or mapping,
# listening socket), so when the serving member is killed while the child
# lives, a survivor takes over and serves newcomers in time, and
# ibshare_info shows the survivor. A child that calls the leave path and
# exits leaves the parent's membership as it was.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

timeout=5

# ms: milliseconds since the epoch
ms() {
    echo $(($(date +%s%N) / 1000000))
}

# The founder serves and forks a sleeper; M joins
drive F -k fork -t $timeout -P sleep -H "$tmpdir/hold"
f=$!
lines 2 > "$tmpdir/F.lines"
check "the founder joined" grep -q "^joined pid=$f founder=1 " \
      "$tmpdir/F.lines"
child=$(sed -n 's/^forked pid=\([0-9]*\)$/\1/p' "$tmpdir/F.lines")
check "and forked a child ($child)" test -n "$child"
drive M -k fork -t $timeout -H "$tmpdir/hold"
m=$!
lines 1 > "$tmpdir/M.lines"
check "M was served by the founder" \
      grep -q "^joined pid=$m founder=0 .* server=$f .*fds=ok" \
      "$tmpdir/M.lines"

# What the child holds of the group: nothing
check "the child sleeps" kill -0 "$child"
ls -l /proc/"$child"/fd > "$tmpdir/child.fd" 2> /dev/null
check "the child's fds are readable" grep -q . "$tmpdir/child.fd"
check "the child holds no fd of the group's lock file or socket" \
      sh -c "! grep -q -e '\.lock\$' -e '\.sock\$' -e '$groupdir' \
             '$tmpdir/child.fd'"
check "nor a mapping of the lock file" \
      sh -c "! grep -q '\.lock' /proc/$child/maps"
inodes=$(sed -n 's/.*socket:\[\([0-9]*\)\].*/\1/p' "$tmpdir/child.fd")
listening=0
for inode in $inodes; do
    # /proc/net/unix: Num RefCount Protocol Flags Type St Inode Path;
    # flags 00010000 is a listening socket
    if awk -v i="$inode" '$7 == i && $4 == "00010000"' /proc/net/unix |
       grep -q .; then
        listening=$((listening + 1))
    fi
done
check "nor a listening unix socket ($listening)" test $listening -eq 0

# The server killed while its child lives: M takes over in time
kill -KILL $f
wait $f 2> /dev/null
start=$(ms)
drive J -k fork -t $timeout -H "$tmpdir/hold"
j=$!
lines 1 $((timeout + 5)) > "$tmpdir/J.lines"
took=$(($(ms) - start))
check "a newcomer joined while the child lives" \
      grep -q "^joined pid=$j founder=0 .*pattern=$f .*fds=ok" \
      "$tmpdir/J.lines"
check "served by the survivor M" \
      test "$(field server "$tmpdir/J.lines")" = "$m"
check "within the join timeout ($took ms < ${timeout}000 ms)" \
      test $took -lt $((timeout * 1000))
check "the child still lives" kill -0 "$child"

"$info" -d "$rundir" > "$tmpdir/info"
cat "$tmpdir/info"
check "ibshare_info shows the survivor as leader" \
      grep -q "leader pid: *$m$" "$tmpdir/info"
check "not the dead founder" sh -c "! grep -q '\b$f\b' '$tmpdir/info'"
check "with 2 members" grep -q "members: 2 (" "$tmpdir/info"

kill -KILL "$child"
exec 5>&-
lines 2 > "$tmpdir/left"
wait_all $m $j
check "M and J left cleanly" test $? -eq 0
check "one of them was the last" \
      test "$(count ' last=1 ' "$tmpdir/left")" -eq 1
check "no file left" no_files

# A child that leaves and exits normally while its parent stays a member
fifo hold 5
drive P -k fork-leave -t $timeout -P leave -H "$tmpdir/hold"
p=$!
lines 3 > "$tmpdir/P.lines"
cat "$tmpdir/P.lines"
check "the parent joined as founder" grep -q "^joined pid=$p founder=1 " \
      "$tmpdir/P.lines"
check "its child left as no member (last=0) and closed every fd" \
      grep -q "^child pid=[0-9]* last=0 fdleak=0$" "$tmpdir/P.lines"
check "and exited 0" grep -q "^forked pid=[0-9]* status=0$" \
      "$tmpdir/P.lines"
check "the parent still serves (its socket is there)" \
      sh -c "ls '$groupdir' | grep -q '\.sock$'"

"$info" -d "$rundir" > "$tmpdir/info.leave"
cat "$tmpdir/info.leave"
check "ibshare_info: the parent leads" \
      grep -q "leader pid: *$p$" "$tmpdir/info.leave"
check "and is a member" grep -q "members: 1 (pids $p)" "$tmpdir/info.leave"

drive K -k fork-leave -t $timeout
k=$!
lines 2 > "$tmpdir/K.lines"
wait $k
check "a newcomer is served by the parent (rc $?)" \
      grep -q "^joined pid=$k founder=0 .* server=$p .*fds=ok" \
      "$tmpdir/K.lines"
check "and leaves as not the last" \
      grep -q "^left pid=$k last=0 slice_ok=1 fdleak=0$" "$tmpdir/K.lines"

exec 5>&-
lines 1 > "$tmpdir/P.left"
wait $p
check "the parent left cleanly (rc $?)" test $? -eq 0
check "as the last member" \
      grep -q "^left pid=$p last=1 slice_ok=1 fdleak=0$" "$tmpdir/P.left"
check "no file left" no_files
check "nobody logged anything" \
      sh -c "! cat '$tmpdir'/[MJPK].err | grep -q ."
cat "$tmpdir"/*.err >&2

# The child's leave path under valgrind (which follows forks): no memory
# error, no leak, in the child as in the parent
if command -v valgrind > /dev/null; then
    valgrind -q --error-exitcode=99 --leak-check=full \
        --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect \
        "$driver" join -d "$rundir" -k fork-vg -m shared -P leave \
        > "$tmpdir/V.out" 2> "$tmpdir/V.err" 3>&- 4>&- 5>&- 6>&-
    check "valgrind: the member and its child exit 0 (rc $?)" test $? -eq 0
    check "valgrind: the child left as no member, status 0" \
          grep -q "^forked pid=[0-9]* status=0$" "$tmpdir/V.out"
    check "valgrind: the parent left last" \
          grep -q "^left pid=[0-9]* last=1 slice_ok=1 fdleak=0$" \
          "$tmpdir/V.out"
    check "valgrind: nothing reported" sh -c "! grep -q . '$tmpdir/V.err'"
    cat "$tmpdir/V.err" >&2
    check "no file left" no_files
fi

finish
