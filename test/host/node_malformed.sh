#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Malformed messages sent raw to a server (garbage, short, wrong magic,
# wrong version, wrong type, too long, fds attached) are refused with
# REFUSE(BAD_MSG) and logged with their cause; peers that connect and say
# nothing, more of them than the server keeps, neither block a joiner nor
# outlive the server's timeout. The server survives it all.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

drive F -k malformed -t 3 -H "$tmpdir/hold"
f=$!
lines 1 > /dev/null
sock=$(ls "$groupdir"/*.sock)
fds_before=$(ls /proc/$f/fd | wc -l)

for case in "garbage:not an ibshare message" \
            "short:shorter than its 12-byte header" \
            "magic:not an ibshare message" \
            "version:version 99 differs" \
            "type:sent a message of type 2 instead of join" \
            "long:sent a message longer than 256 bytes" \
            "fds:sent file descriptors with its join message"; do
    kind=${case%%:*}
    cause=${case#*:}
    "$driver" raw "$sock" $kind 5 > "$tmpdir/raw.$kind" 2>&1 \
        3>&- 4>&- 5>&- 6>&- &
    raw=$!
    wait $raw
    check "$kind: refused as a bad message" \
          grep -q "^reply refuse 2$" "$tmpdir/raw.$kind"
    check "$kind: the server logged pid $raw and the cause" \
          grep -q "pid $raw.*$cause" "$tmpdir/F.err"
done

# 20 silent peers, more than the 16 the server keeps waiting
stallers=
i=0
while [ $i -lt 20 ]; do
    "$driver" raw "$sock" stall 10 > "$tmpdir/stall.$i" 2>&1 \
        3>&- 4>&- 5>&- 6>&- &
    stallers="$stallers $!"
    i=$((i + 1))
done

start=$(date +%s)
drive J -k malformed -t 3
j=$!
lines 2 > "$tmpdir/J.out"
wait $j
check "a joiner is served while silent peers wait (rc $?)" \
      grep -q "^joined .* server=$f .*fds=ok" "$tmpdir/J.out"

wait_all $stallers
took=$(($(date +%s) - start))
check "every silent peer was dropped, none waited for its own timeout" \
      test "$(cat "$tmpdir"/stall.* | grep -c '^reply closed$')" -eq 20
check "before their own 10 s timeout ($took s)" test $took -lt 10
check "the server logged the silent ones" \
      grep -q "sent no join message within 3.0 s" "$tmpdir/F.err"
check "and made room for new ones" \
      grep -q "connections wait for their join message; dropping the oldest" \
      "$tmpdir/F.err"
check "the server is alive" kill -0 $f
fds_after=$(ls /proc/$f/fd | wc -l)
check "and holds no fd more than before ($fds_before, $fds_after)" \
      test "$fds_after" -eq "$fds_before"

drive K -k malformed -t 3
k=$!
lines 2 > "$tmpdir/K.out"
wait $k
check "and serves the next joiner (rc $?)" \
      grep -q "^joined .* server=$f .*fds=ok" "$tmpdir/K.out"

exec 5>&-
lines 1 > /dev/null
wait $f
check "the server left cleanly (rc $?)" \
      grep -q "^left .* last=1 .*fdleak=0" "$tmpdir/F.out"
check "no file left" no_files

finish
