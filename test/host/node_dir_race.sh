#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The group directory after its check: swapped for a symlink to another
# directory while members hold it open, a member that takes over serving
# binds its socket in the directory it checked, never behind the link, and a
# newcomer is refused. The default runtime directory (auto) is
# $XDG_RUNTIME_DIR when usable, else /tmp; a /tmp/ucx-ibshare-<uid> squatted
# by another user is refused with a message saying what to set.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

uid=$(id -u)
sub=ucx-ibshare-$uid

# The swap: F founds, M joins, the directory is renamed and a symlink to
# the attacker's directory takes its name, F is killed and M takes over
drive F -k race -c "$tmpdir/creates" -H "$tmpdir/hold"
f=$!
lines 1 > /dev/null
drive M -k race -c "$tmpdir/creates" -H "$tmpdir/hold"
m=$!
lines 1 > "$tmpdir/M.joined"
check "M joined F's group" grep -q "founder=0 .*server=$f " "$tmpdir/M.joined"

mkdir "$tmpdir/attacker"
chmod 0700 "$tmpdir/attacker"
mv "$groupdir" "$rundir/moved"
ln -s "$tmpdir/attacker" "$groupdir"
kill -KILL $f
wait $f
check "F was killed (status $?)" test $? -eq 137

# M unlinks F's stale socket and binds its own: wait until it answers
sock=$rundir/moved/$(cd "$rundir/moved" && ls *.lock | sed 's/\.lock$/.sock/')
served=0
for i in $(seq 50); do
    if [ -S "$sock" ] && "$driver" request "$sock" 2 > "$tmpdir/req.out" 2>&1
    then
        served=1
        break
    fi
    sleep 0.1
done
check "M serves in the directory it checked" test $served -eq 1
check "nothing appeared in the attacker's directory" \
      test -z "$(ls -A "$tmpdir/attacker")"

"$driver" join -d "$rundir" -k race -t 2 > "$tmpdir/N.out" \
    2> "$tmpdir/N.err" 3>&- 4>&- 5>&- 6>&-
rc=$?
check "a newcomer is refused cleanly (rc $rc)" test $rc -eq 1
check "because the directory is a symbolic link" \
      grep -q "is a symbolic link" "$tmpdir/N.err"
check "still nothing in the attacker's directory" \
      test -z "$(ls -A "$tmpdir/attacker")"

exec 5>&-
lines 1 > "$tmpdir/M.left"
wait $m
check "M left cleanly (rc $?)" test $? -eq 0
check "as the last member" grep -q " last=1 " "$tmpdir/M.left"
check "and removed the files where they were" \
      test -z "$(ls -A "$rundir/moved")"
check "create() ran once" test "$(count . "$tmpdir/creates")" -eq 1
rm "$groupdir"

# auto is $XDG_RUNTIME_DIR: two ranks with the same environment meet there
fifo hold 5
xdg=$tmpdir/xdg
mkdir "$xdg"
chmod 0700 "$xdg"
XDG_RUNTIME_DIR=$xdg "$driver" join -d auto -k xdg -R "$tmpdir/ready" \
    -H "$tmpdir/hold" > "$tmpdir/X1.out" 2> "$tmpdir/X1.err" \
    3>&- 4>&- 5>&- 6>&- &
x1=$!
lines 1 > /dev/null
XDG_RUNTIME_DIR=$xdg "$driver" join -d auto -k xdg -R "$tmpdir/ready" \
    -H "$tmpdir/hold" > "$tmpdir/X2.out" 2> "$tmpdir/X2.err" \
    3>&- 4>&- 5>&- 6>&- &
x2=$!
lines 1 > "$tmpdir/X2.joined"
check "auto: the group lives in \$XDG_RUNTIME_DIR" \
      test -S "$(ls "$xdg/$sub"/*.sock)"
check "auto: the second rank joined the first's group" \
      grep -q "founder=0 .*server=$x1 " "$tmpdir/X2.joined"
env -u UCX_IBSHARE_RUNTIME_DIR XDG_RUNTIME_DIR="$xdg" "$info" \
    > "$tmpdir/info.xdg" 2>&1
check "ibshare_info's default finds it" \
      grep -q "group of job 'xdg'" "$tmpdir/info.xdg"
exec 5>&-
lines 2 > /dev/null
wait_all $x1 $x2
check "auto: both left cleanly" test $? -eq 0
check "auto: no file left" test -z "$(ls -A "$xdg/$sub")"

# The rest needs /tmp of our own: a private mount namespace
if ! unshare -m true 2> /dev/null; then
    echo "skipped the /tmp checks: unshare -m is not permitted here"
    finish
fi

# in_tmp DIR CMD...: CMD with DIR mounted on /tmp, in a namespace of its own.
# The build tree may be under /tmp and hidden there, so CMD runs the driver
# as $tmp_driver, a copy in DIR (it needs no library of the build tree).
tmp_driver=/tmp/node_driver.copy
in_tmp() {
    cp "$driver" "$1/${tmp_driver#/tmp/}" || exit 1
    unshare -m sh -c 'mount --bind "$0" /tmp && exec "$@"' "$@"
}

# An $XDG_RUNTIME_DIR that is not a directory: /tmp, without an error
ftmp=$tmpdir/faketmp
mkdir "$ftmp"
chmod 1777 "$ftmp"
: > "$ftmp/xdgfile"
in_tmp "$ftmp" env XDG_RUNTIME_DIR=/tmp/xdgfile "$tmp_driver" join \
    -d auto -k fallback > "$tmpdir/T.out" 2> "$tmpdir/T.err" 3>&- 4>&- 5>&- 6>&-
check "auto: an unusable \$XDG_RUNTIME_DIR falls back to /tmp (rc $?)" \
      grep -q "^left .* last=1 " "$tmpdir/T.out"
check "auto: the group was in /tmp" test -d "$ftmp/$sub"
check "auto: quietly" test ! -s "$tmpdir/T.err"

if [ "$uid" -eq 0 ] && id nobody > /dev/null 2>&1 &&
   command -v setpriv > /dev/null; then
    nuid=$(id -u nobody)
    as_nobody="setpriv --reuid=$nuid --regid=$(id -g nobody) --clear-groups"
    chmod 0711 "$tmpdir"

    # root squats nobody's directory in /tmp
    stmp=$tmpdir/squatted
    mkdir "$stmp" "$stmp/ucx-ibshare-$nuid"
    chmod 1777 "$stmp"
    chmod 0700 "$stmp/ucx-ibshare-$nuid"
    in_tmp "$stmp" env -u XDG_RUNTIME_DIR $as_nobody "$tmp_driver" join \
        -d auto -k squat -t 2 > "$tmpdir/S.out" 2> "$tmpdir/S.err" \
        3>&- 4>&- 5>&- 6>&-
    rc=$?
    head -2 "$tmpdir/S.err"
    check "squatted /tmp: refused cleanly (rc $rc)" test $rc -eq 1
    check "squatted /tmp: names the owner" \
          grep -q "owned by uid 0, not by us (uid $nuid)" "$tmpdir/S.err"
    check "squatted /tmp: says what to set" \
          grep -q "set UCX_IBSHARE_RUNTIME_DIR=<a directory of yours>" \
          "$tmpdir/S.err"
    check "squatted /tmp: does not tell the victim to remove it" \
          sh -c "! grep -q 'remove it\$' '$tmpdir/S.err'"
    check "squatted /tmp: nothing created in it" \
          test -z "$(ls -A "$stmp/ucx-ibshare-$nuid")"

    # What it says works: a directory of its own
    mkdir "$tmpdir/own"
    chown "$nuid" "$tmpdir/own"
    $as_nobody "$driver" join -d "$tmpdir/own" -k squat -t 2 \
        > "$tmpdir/O.out" 2> "$tmpdir/O.err" 3>&- 4>&- 5>&- 6>&-
    check "squatted /tmp: a directory of its own works (rc $?)" \
          grep -q "^left .* last=1 " "$tmpdir/O.out"
fi

finish
