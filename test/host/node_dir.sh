#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The per-user directory: created 0700 whatever the umask; one that another
# user could enter or control (mode 0755, another owner, a symlink, not a
# directory, a symlinked lock file) or a missing runtime directory is a clear
# error, never a crash, and nothing is created where it should not be. A
# runtime directory longer than a socket path can be works (the socket is
# bound through the directory's /proc/self/fd link).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

uid=$(id -u)
sub=ucx-ibshare-$uid

# try NAME RUNDIR [ARGS...]: one join and leave; rc in $rc
try() {
    name=$1 dir=$2
    shift 2
    "$driver" join -d "$dir" -k dir-test -t 2 "$@" \
        > "$tmpdir/$name.out" 2> "$tmpdir/$name.err" 3>&- 4>&- 5>&- 6>&-
    rc=$?
}

# refused NAME MESSAGE: failed cleanly (exit 1, not a signal), saying MESSAGE
refused() {
    check "$1: refused cleanly (rc $rc)" test $rc -eq 1
    check "$1: says '$2'" grep -q -- "$2" "$tmpdir/$1.err"
    head -2 "$tmpdir/$1.err"
}

mkdir "$tmpdir/fresh"
(umask 000 && try fresh "$tmpdir/fresh" && exit $rc)
check "a fresh directory works under umask 000" test $? -eq 0
check "and is created 0700" \
      test "$(stat -c %a "$tmpdir/fresh/$sub")" = 700

mkdir -p "$tmpdir/open/$sub"
chmod 0755 "$tmpdir/open/$sub"
try open "$tmpdir/open"
refused open "has mode 0755: group or others have access"
check "open: nothing created in it" test -z "$(ls -A "$tmpdir/open/$sub")"

mkdir -p "$tmpdir/target/$sub" "$tmpdir/link"
chmod 0700 "$tmpdir/target/$sub"
ln -s "$tmpdir/target/$sub" "$tmpdir/link/$sub"
try link "$tmpdir/link"
refused link "is a symbolic link"
check "link: nothing created behind it" \
      test -z "$(ls -A "$tmpdir/target/$sub")"

mkdir "$tmpdir/file"
: > "$tmpdir/file/$sub"
try file "$tmpdir/file"
refused file "is not a directory"

try missing "$tmpdir/missing"
refused missing "does the runtime directory exist"

long=$tmpdir/$(printf '%0100d' 0)
mkdir -p "$long"
try long "$long"
check "long: a runtime directory of ${#long} bytes works (rc $rc)" test $rc -eq 0
check "long: and its group's files are gone after" \
      test -z "$(ls -A "$long/$sub" 2>/dev/null)"

if [ "$uid" -eq 0 ] && id nobody > /dev/null 2>&1; then
    mkdir -p "$tmpdir/other/$sub"
    chmod 0700 "$tmpdir/other/$sub"
    chown nobody "$tmpdir/other/$sub"
    try other "$tmpdir/other"
    refused other "is owned by uid $(id -u nobody), not by us"
    check "other: says what to set" \
          grep -q "set UCX_IBSHARE_RUNTIME_DIR=" "$tmpdir/other.err"
    check "other: nothing created in it" \
          test -z "$(ls -A "$tmpdir/other/$sub")"
fi

# A lock file replaced by a symlink: learn the group's file name, then
# plant a link under that name
"$driver" join -d "$tmpdir/fresh" -k dir-test -R "$tmpdir/ready" \
    -H "$tmpdir/hold" > /dev/null 2>&1 3>&- 4>&- 5>&- 6>&- &
holder=$!
lines 1 > /dev/null
lock=$(ls "$tmpdir/fresh/$sub"/*.lock)
exec 5>&-
wait $holder
check "the group's lock file was named and removed" test ! -e "$lock"
ln -s "$tmpdir/victim" "$lock"
try lock "$tmpdir/fresh"
refused lock "cannot open the node group lock file"
check "lock: the link's target was not created" test ! -e "$tmpdir/victim"

finish
