#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The QEMU test bed in a session (contrib/vm/run --serve; contrib/check runs
# the guest tests in sessions): the guest command's status comes back, the
# guest has rxe0, a command ends by its timeout, leaves no process and no
# file in /tmp behind, and boots nothing.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

# The session lives in a directory under the host's /tmp, which the guest's
# own /tmp covers: emptying its /tmp between jobs must leave the host's files
# alone (it did not once, and removed a CI clone's build). Its own guest,
# without a session, is checked on deb_package.sh's boot (each boot costs CI
# time: issues 19 and 22).
hosttmp=$(mktemp -d /tmp/ibshare-vm_harness.XXXXXX)
echo keep > "$hosttmp/marker"
session=$hosttmp/session
opt=
[ "$IBSHARE_TEST_MODE" = shared ] && opt=--import
# shellcheck disable=SC2086  # (an option or none)
(cd "$hosttmp" && exec "$IBSHARE_SRCDIR/contrib/vm/run" \
    --serve "$session" --timeout 900 $opt) > "$tmpdir/session.log" 2>&1 &
session_pid=$!
i=0
while [ ! -f "$session/conf" ] && [ $i -lt 600 ] &&
      kill -0 "$session_pid" 2>/dev/null; do
    sleep 0.25
    i=$((i + 1))
done
check "run --serve starts a session" test -f "$session/conf"
IBSHARE_VM_SESSIONS=$session
export IBSHARE_VM_SESSIONS
boots=$tmpdir/boots
IBSHARE_VM_BOOT_LOG=$boots
export IBSHARE_VM_BOOT_LOG

# guest CMD...: CMD as a job of the session, in $hosttmp
# shellcheck disable=SC2086  # (an option or none)
guest() {
    (cd "$hosttmp" && "$IBSHARE_SRCDIR/contrib/vm/run" $opt \
        --env "IBSHARE_MODULE=$IBSHARE_MODULE" "$@")
}

guest ibv_devices > "$tmpdir/out" 2>&1
rc=$?
cat "$tmpdir/out"
check "ibv_devices exits 0 in the guest" test "$rc" -eq 0
check "ibv_devices lists rxe0" grep -q "rxe0" "$tmpdir/out"

guest false
check "false exits 1" test $? -eq 1

guest sh -c 'echo "$IBSHARE_MODULE" > module; exit 7'
rc=$?
check "exit status 7 comes back" test "$rc" -eq 7
check "the guest wrote into the host's shared directory, the environment\
 passed on" grep -qx "$IBSHARE_MODULE" "$hosttmp/module"

guest sh -c 'echo out; echo err >&2; echo err2 > /dev/stderr' \
    > "$tmpdir/o" 2> "$tmpdir/e"
check "stdout and stderr apart (re-opening /dev/stderr too)" \
    sh -c "test \"\$(cat '$tmpdir/o')\" = out &&
           grep -qx err '$tmpdir/e' && grep -qx err2 '$tmpdir/e'"

start=$(date +%s)
guest --timeout 5 sh -c 'sleep 1000 & touch /tmp/left; sleep 1000'
rc=$?
took=$(($(date +%s) - start))
check "the timeout kills the command: status 124 ($rc), long before its\
 sleep ends ($took s)" test "$rc" -eq 124 -a "$took" -lt 500
guest sh -c '! grep -q -x sleep /proc/[0-9]*/comm && test ! -e /tmp/left &&
    cat marker'
check "the next command finds no process and no /tmp file of the last, and\
 the host's file under /tmp" test $? -eq 0
# Jobs back to back: the host removes each job while the guest looks for
# the next (a job seen half removed once ended the session's init)
ok=0
for i in $(seq 30); do
    guest sh -c 'cat marker > /dev/null && touch /tmp/x' && ok=$((ok + 1))
done
check "30 commands back to back all exit 0 ($ok)" test "$ok" -eq 30
check "the host's files under /tmp outlive the session's jobs" \
    test "$(cat "$hosttmp/marker" 2>/dev/null)" = keep
n=$(grep -c ' boot' "$boots" 2>/dev/null)
check "its commands booted no guest (${n:-0} boots)" test "${n:-0}" -eq 0

: > "$session/stop"
wait "$session_pid"
rc=$?
check "the session ends when told (status $rc), its directory gone" \
    test "$rc" -eq 0 -a ! -e "$session"
[ "$rc" -eq 0 ] || cat "$tmpdir/session.log"
rm -rf "$hosttmp"

finish
