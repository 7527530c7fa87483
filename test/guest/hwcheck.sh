#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# contrib/hwcheck on rxe0:1 (4 members, RDMA writes and reads verified).
#   fallback mode (Debian's provider, no import): UCX_IBSHARE_MODE=shared
#     must fail with an error naming the cause, and the fallback must pass
#     with one registration per member.
#   shared mode (the test bed's import provider): hwcheck must require and
#     pass shared mode, as it does on mlx5: one registration on the node,
#     and the group's server destroys what a killed member left on the
#     shared uverbs file.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest --timeout 300 "$IBSHARE_SRCDIR/contrib/hwcheck" --members 4 \
    --build "$IBSHARE_BUILDDIR" rxe0:1 > "$tmpdir/out" 2>&1
rc=$?
cat "$tmpdir/out"
check "hwcheck exits 0" test "$rc" -eq 0
if [ "$IBSHARE_TEST_MODE" = shared ]; then
    check "hwcheck knows it runs on the import provider" \
          grep -q "the test bed's import provider" "$tmpdir/out"
    check "hwcheck passes shared mode, one registration on the node" \
          grep -q "PASS: import mode works on rxe0:1: 4 processes shared one context, PD and MR (1 registration on the node)" \
          "$tmpdir/out"
    check "hwcheck: the QPs and CQs of a killed member destroyed by the\
 group's server, the device's QPs back where they were" \
          grep -q "hwcheck: a killed member: .*member pid [0-9]* died; destroyed what it left .*[0-9] QP.* QPs \([0-9]*\) before, \1 after" \
          "$tmpdir/out"
    check "and checks no fallback" \
          sh -c "! grep -q 'checking the fallback' '$tmpdir/out'"
else
    check "shared mode is refused with the reason" \
          grep -q "UCX_IBSHARE_MODE=shared, but the provider cannot import" "$tmpdir/out"
    check "hwcheck reports import unsupported on rxe" \
          grep -q "import is unsupported on rxe0:1" "$tmpdir/out"
    check "hwcheck passes the fallback" \
          grep -q "PASS: fallback mode works on rxe0:1" "$tmpdir/out"
fi
finish
