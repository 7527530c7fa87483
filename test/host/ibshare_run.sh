#!/bin/sh
# The ibshare-run wrapper loads the module and prints the mpirun option.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

wrapper=$IBSHARE_BUILDDIR/contrib/ibshare-run

out=$("$wrapper" sh -c 'echo "$LD_PRELOAD"')
check "LD_PRELOAD set to the module" test "$out" = "$IBSHARE_MODULE"

out=$(LD_PRELOAD=/lib/x86_64-linux-gnu/libc.so.6 "$wrapper" sh -c 'echo "$LD_PRELOAD"')
check "an existing LD_PRELOAD is kept" \
      test "$out" = "$IBSHARE_MODULE /lib/x86_64-linux-gnu/libc.so.6"

out=$("$wrapper" --mpirun-args)
check "--mpirun-args prints the -x option" \
      test "$out" = "-x LD_PRELOAD=$IBSHARE_MODULE"

"$wrapper" ucx_info -c -f | grep -q '^UCX_RC_SHARE_GID_INDEX='
check "ucx_info run through the wrapper sees the component" test $? -eq 0

IBSHARE_MODULE=$tmpdir/missing.so "$wrapper" true 2> "$tmpdir/err"
rc=$?
check "a missing module exits 127" test "$rc" -eq 127
check "and names the missing file" grep -q "missing.so" "$tmpdir/err"

finish
