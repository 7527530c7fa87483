#!/bin/sh
# contrib/hwcheck on rxe0:1, where import is unsupported: UCX_IBSHARE_MODE=shared
# must fail with an error naming the cause, and the fallback must pass
# (4 members, one registration each, RDMA writes verified).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest --timeout 300 "$IBSHARE_SRCDIR/contrib/hwcheck" --members 4 \
    --build "$IBSHARE_BUILDDIR" rxe0:1 > "$tmpdir/out" 2>&1
rc=$?
cat "$tmpdir/out"
check "hwcheck exits 0" test "$rc" -eq 0
check "shared mode is refused with the reason" \
      grep -q "UCX_IBSHARE_MODE=shared, but the provider cannot import" "$tmpdir/out"
check "hwcheck reports import unsupported on rxe" \
      grep -q "import is unsupported on rxe0:1" "$tmpdir/out"
check "hwcheck passes the fallback" \
      grep -q "PASS: fallback mode works on rxe0:1" "$tmpdir/out"
finish
