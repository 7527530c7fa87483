#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A group of user nobody refuses connections from another user (root) by
# SO_PEERCRED: a raw connection gets REFUSE(UID), root's joiner side refuses
# a server of another uid at once, without hanging; nobody's own members
# are still served.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

if [ "$(id -u)" -ne 0 ] || ! id nobody > /dev/null 2>&1 ||
   ! command -v setpriv > /dev/null; then
    echo "needs root, user nobody and setpriv"
    exit 77
fi
nobody_uid=$(id -u nobody)
nobody_gid=$(id -g nobody)

# A command prefix, not a function: a background function call runs in a
# subshell that keeps copies of our fifo ends, and its $! is not the driver's
as_nobody="setpriv --reuid=$nobody_uid --regid=$nobody_gid --clear-groups"

# nobody's runtime directory, and a way in to it and the fifos
chmod 0711 "$tmpdir"
chmod 0666 "$tmpdir/ready"
nrun=$tmpdir/nobody
mkdir "$nrun"
chown $nobody_uid:$nobody_gid "$nrun"
chmod 0700 "$nrun"
check "nobody can run the driver" $as_nobody "$driver" lines 0 1

$as_nobody "$driver" join -d "$nrun" -k uid-test -R "$tmpdir/ready" \
    -H "$tmpdir/hold" > "$tmpdir/F.out" 2> "$tmpdir/F.err" \
    3>&- 4>&- 5>&- 6>&- &
f=$!
lines 1 > "$tmpdir/F.joined"
check "nobody founded its group" grep -q "founder=1" "$tmpdir/F.joined"
sock=$(ls "$nrun/ucx-ibshare-$nobody_uid"/*.sock)
check "its socket is in its own directory" test -S "$sock"

"$driver" raw "$sock" join 5 > "$tmpdir/raw.out" 2>&1 &
raw=$!
wait $raw
cat "$tmpdir/raw.out"
check "root's raw join gets REFUSE(UID)" \
      grep -q "^reply refuse 1$" "$tmpdir/raw.out"
check "the server logged the refusal by pid and uid" \
      grep -q "refused a connection from pid $raw: it runs as uid 0" \
      "$tmpdir/F.err"

start=$(date +%s)
"$driver" request "$sock" 5 > "$tmpdir/req.out" 2>&1
rc=$?
took=$(($(date +%s) - start))
cat "$tmpdir/req.out"
check "root's joiner refuses nobody's server (rc $rc)" test $rc -eq 1
check "at once, not after its 5 s timeout ($took s)" test $took -lt 5
check "naming the server's uid" \
      grep -q "runs as uid $nobody_uid, not as our uid 0" "$tmpdir/req.out"

$as_nobody "$driver" join -d "$nrun" -k uid-test -R "$tmpdir/ready" \
    > "$tmpdir/M.out" 2> "$tmpdir/M.err" 3>&- 4>&- 5>&- 6>&- &
m=$!
lines 2 > /dev/null
wait $m
check "nobody's next member is served (rc $?)" \
      grep -q "^joined .* server=$f .*fds=ok" "$tmpdir/M.out"

exec 5>&-
lines 1 > /dev/null
wait $f
check "the group left cleanly (rc $?)" grep -q "^left .* last=1 .*fdleak=0" \
      "$tmpdir/F.out"
check "nothing of it is left" \
      test -z "$(ls -A "$nrun/ucx-ibshare-$nobody_uid")"

finish
