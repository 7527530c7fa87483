#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A joiner checks whose group it joined: a group's socket path that leads to
# another live group's server (a symlink) gives a refusal naming both groups,
# never a member of the wrong group; a JOIN of another job, device or port
# GUID, sent raw, gets a REFUSE naming what differed, and the server goes on
# serving its own members.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

guid=0123456789abcdef

# plant on fake0 first, so that its socket is the only one
drive P -k plant -D fake0 -t 3 -H "$tmpdir/hold"
p=$!
lines 1 > /dev/null
plant_sock=$(ls "$groupdir"/*.sock)

drive O -k other -D fake1 -t 3 -H "$tmpdir/hold"
o=$!
lines 1 > /dev/null
other_sock=$(ls "$groupdir"/*.sock | grep -v "$plant_sock")
check "two groups, two sockets" test -S "$other_sock" -a -S "$plant_sock"

# plant's socket leads to other's server
rm "$plant_sock"
ln -s "$other_sock" "$plant_sock"
drive J -k plant -D fake0 -t 3
j=$!
lines 1 > "$tmpdir/J.line"
wait $j
rc=$?
check "the joiner of plant is not served by other (rc $rc)" test $rc -eq 1
check "it failed, leaking nothing" \
      grep -q "^failed pid=$j founder=0 status=.* fdleak=0" "$tmpdir/J.line"
check "it names the socket, the other group and its own" \
      grep -q "socket $plant_sock is served by job hash [0-9a-f]*, device fake1, .*(another job: the server refused us); we are job 'plant' (hash [0-9a-f]*), device fake0" \
      "$tmpdir/J.err"
check "and tells what to do" \
      grep -q "Remove the socket (is it a symlink" "$tmpdir/J.err"
check "with no warning about the state" \
      sh -c "! grep -q 'state' '$tmpdir/J.err'"
check "the other server logged the refusal" \
      grep -q "refused pid $j: it wants job hash .*device fake0.*we serve job hash .*device fake1.*(another job)" \
      "$tmpdir/O.err"

# plant on fake1 is the same job on another device
drive Q -k plant -D fake1 -t 3 -H "$tmpdir/hold"
q=$!
lines 1 > /dev/null
q_sock=$(ls "$groupdir"/*.sock | grep -v -e "$plant_sock" -e "$other_sock")
rm "$plant_sock"
ln -s "$q_sock" "$plant_sock"
drive K -k plant -D fake0 -t 3
k=$!
lines 1 > "$tmpdir/K.line"
wait $k
check "same job, other device: refused (rc $?)" grep -q "^failed" \
      "$tmpdir/K.line"
check "naming the device" \
      grep -q "served by job hash [0-9a-f]*, device fake1, .*(another device name: " \
      "$tmpdir/K.err"

# Same job and device, another port GUID: the group's own socket
drive G -k other -D fake1 -t 3 -G 1111
g=$!
lines 1 > "$tmpdir/G.line"
wait $g
check "another port GUID: refused (rc $?)" grep -q "^failed" \
      "$tmpdir/G.line"
check "naming both GUIDs" \
      grep -q "port GUID $guid (another port GUID: .*); we are.*port GUID 0000000000001111" \
      "$tmpdir/G.err"

# A server at plant's path that lies: it answers whatever JOIN with a
# descriptor of other's; the joiner checks the descriptor itself
rm "$plant_sock"
"$driver" serve "$plant_sock" other fake1 $guid > "$tmpdir/liar.out" \
    2> "$tmpdir/liar.err" 3>&- 4>&- 5>&- 6>&- &
liar=$!
i=0
while [ ! -S "$plant_sock" ] && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
done
drive L -k plant -D fake0 -t 3
l=$!
lines 1 > "$tmpdir/L.line"
wait $l
check "a lying server's descriptor is refused (rc $?)" \
      grep -q "^failed pid=$l founder=0 .*fdleak=0" "$tmpdir/L.line"
wait $liar
check "after the liar served it" grep -q "^served $liar" "$tmpdir/liar.out"
check "naming the descriptor's group and ours" \
      grep -q "socket $plant_sock is served by job hash [0-9a-f]*, device fake1, .*(another job: its descriptor says so); we are job 'plant'" \
      "$tmpdir/L.err"

# Raw JOINs to other's server
for case in "job:4:another job" "device:5:another device name" \
            "guid:6:another port GUID"; do
    kind=${case%%:*}
    cause=${case##*:}
    reply="${case#*:}"
    reply="${reply%%:*} ($cause)"
    "$driver" raw "$other_sock" $kind 5 other fake1 $guid \
        > "$tmpdir/raw.$kind" 2>&1 3>&- 4>&- 5>&- 6>&- &
    raw=$!
    wait $raw
    check "raw $kind: REFUSE $reply" \
          grep -q "^reply refuse $reply job=[0-9a-f]* dev=fake1 guid=$guid$" \
          "$tmpdir/raw.$kind"
    check "raw $kind: the server logged pid $raw" \
          grep -q "refused pid $raw: .*($cause)$" \
          "$tmpdir/O.err"
done
"$driver" raw "$other_sock" join 5 other fake1 $guid > "$tmpdir/raw.join" \
    2>&1 3>&- 4>&- 5>&- 6>&-
check "a raw JOIN of the right group is served" \
      grep -q "^reply desc slice=[0-9]* fds=1$" "$tmpdir/raw.join"

check "the other server is alive" kill -0 $o
drive M -k other -D fake1 -t 3
m=$!
lines 2 > "$tmpdir/M.out"
wait $m
check "and serves its own members (rc $?)" \
      grep -q "^joined .* server=$o .*fds=ok" "$tmpdir/M.out"

rm -f "$plant_sock"
exec 5>&-
lines 3 > "$tmpdir/left"
wait_all $p $o $q
check "the founders left cleanly" test $? -eq 0
check "each the last of its group" \
      test "$(count ' last=1 .*fdleak=0' "$tmpdir/left")" -eq 3
check "no file left" no_files

finish
