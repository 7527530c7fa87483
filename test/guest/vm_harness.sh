#!/bin/sh
# The QEMU test bed reports the guest command's status and has rxe0.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest ibv_devices > "$tmpdir/out" 2>&1
rc=$?
cat "$tmpdir/out"
check "ibv_devices exits 0 in the guest" test "$rc" -eq 0
check "ibv_devices lists rxe0" grep -q "rxe0" "$tmpdir/out"

in_guest false
check "false exits 1" test $? -eq 1

in_guest sh -c 'echo "$IBSHARE_MODULE" > "$1/module"; exit 7' sh "$tmpdir"
rc=$?
check "exit status 7 comes back" test "$rc" -eq 7
check "the guest wrote into the host's shared directory" \
      grep -qx "$IBSHARE_MODULE" "$tmpdir/module"

finish
