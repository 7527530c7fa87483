#!/bin/sh
# The QEMU test bed reports the guest command's status and has rxe0, in a
# guest of its own and in a session (contrib/vm/run --serve; contrib/check
# runs the guest tests in sessions), where a command also ends by its
# timeout, leaves no process and no file in /tmp behind, and boots nothing.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

# harness LABEL [run options]: the checks, through in_guest with the options
harness() {
    label=$1
    shift
    in_guest "$@" ibv_devices > "$tmpdir/out" 2>&1
    rc=$?
    cat "$tmpdir/out"
    check "$label: ibv_devices exits 0 in the guest" test "$rc" -eq 0
    check "$label: ibv_devices lists rxe0" grep -q "rxe0" "$tmpdir/out"

    in_guest "$@" false
    check "$label: false exits 1" test $? -eq 1

    rm -f "$tmpdir/module"
    in_guest "$@" sh -c 'echo "$IBSHARE_MODULE" > "$1/module"; exit 7' sh \
        "$tmpdir"
    rc=$?
    check "$label: exit status 7 comes back" test "$rc" -eq 7
    check "$label: the guest wrote into the host's shared directory" \
          grep -qx "$IBSHARE_MODULE" "$tmpdir/module"

    in_guest "$@" sh -c 'echo out; echo err >&2; echo err2 > /dev/stderr' \
        > "$tmpdir/o" 2> "$tmpdir/e"
    check "$label: stdout and stderr apart (re-opening /dev/stderr too)" \
        sh -c "test \"\$(cat '$tmpdir/o')\" = out &&
               grep -qx err '$tmpdir/e' && grep -qx err2 '$tmpdir/e'"
}

# A guest of its own: the same checks in one command, as each boot costs
# CI time (issue 19)
in_guest --no-session sh -c 'ibv_devices; echo "$IBSHARE_MODULE" > "$1/module"
    echo out; echo err >&2; echo err2 > /dev/stderr; exit 7' sh "$tmpdir" \
    > "$tmpdir/o" 2> "$tmpdir/e"
rc=$?
cat "$tmpdir/o" "$tmpdir/e"
check "own guest: exit status 7 comes back ($rc)" test "$rc" -eq 7
check "own guest: ibv_devices lists rxe0" grep -q rxe0 "$tmpdir/o"
check "own guest: the guest wrote into the host's shared directory" \
      grep -qx "$IBSHARE_MODULE" "$tmpdir/module"
check "own guest: stdout and stderr apart (re-opening /dev/stderr too)" \
    sh -c "grep -qx out '$tmpdir/o' && ! grep -q err '$tmpdir/o' &&
           grep -qx err '$tmpdir/e' && grep -qx err2 '$tmpdir/e'"

# A session of the test's own (the provider of the test's mode)
session=$tmpdir/session
opt=
[ "$IBSHARE_TEST_MODE" = shared ] && opt=--import
# shellcheck disable=SC2086  # (an option or none)
(cd "$IBSHARE_BUILDDIR" && exec "$IBSHARE_SRCDIR/contrib/vm/run" \
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

harness "session"
start=$(date +%s)
in_guest --timeout 5 sh -c 'sleep 1000 & touch /tmp/left; sleep 1000'
rc=$?
took=$(($(date +%s) - start))
check "session: the timeout kills the command: status 124 ($rc), long\
 before its sleep ends ($took s)" test "$rc" -eq 124 -a "$took" -lt 500
in_guest sh -c '! grep -q -x sleep /proc/[0-9]*/comm && test ! -e /tmp/left'
check "session: the next command finds no process and no /tmp file of\
 the last" test $? -eq 0
# Jobs back to back: the host removes each job while the guest looks for
# the next (a job seen half removed once ended the session's init)
ok=0
for i in $(seq 30); do
    in_guest true && ok=$((ok + 1))
done
check "session: 30 commands back to back all exit 0 ($ok)" test "$ok" -eq 30
n=$(grep -c ' boot' "$boots" 2>/dev/null)
check "session: its commands booted no guest (${n:-0} boots)" \
    test "${n:-0}" -eq 0

: > "$session/stop"
wait "$session_pid"
rc=$?
check "the session ends when told (status $rc), its directory gone" \
    test "$rc" -eq 0 -a ! -e "$session"
unset IBSHARE_VM_SESSIONS

# A session whose shared directory lies under the host's /tmp, which the
# guest's own /tmp covers: emptying its /tmp between jobs must leave the
# host's files alone (it did not once, and removed a CI clone's build)
hosttmp=$(mktemp -d /tmp/ibshare-vm_harness.XXXXXX)
echo keep > "$hosttmp/marker"
(cd "$hosttmp" && exec "$IBSHARE_SRCDIR/contrib/vm/run" --serve \
    "$hosttmp/session" --timeout 300) > "$tmpdir/session2.log" 2>&1 &
session_pid=$!
i=0
while [ ! -f "$hosttmp/session/conf" ] && [ $i -lt 600 ] &&
      kill -0 "$session_pid" 2>/dev/null; do
    sleep 0.25
    i=$((i + 1))
done
for n in 1 2; do
    (cd "$hosttmp" && IBSHARE_VM_SESSIONS=$hosttmp/session \
        "$IBSHARE_SRCDIR/contrib/vm/run" sh -c 'cat marker && touch /tmp/x')
    check "session in the host's /tmp, job $n: the host's file is there" \
        test $? -eq 0
done
check "the host's files under /tmp outlive the session's jobs" \
    test "$(cat "$hosttmp/marker" 2>/dev/null)" = keep
: > "$hosttmp/session/stop"
wait "$session_pid"
rm -rf "$hosttmp"

finish
