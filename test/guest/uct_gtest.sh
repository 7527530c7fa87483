#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# UCX's own UCT unit tests (test/gtest of the UCX source, built and cached by
# test/gtest/build) for rc_share in the soft-RoCE guest: every generic
# instance that passes for rc_verbs (test/gtest/rc_verbs.pass) passes for
# rc_share, none crashes or hangs, and every rc_share skip is on
# test/gtest/rc_share.skip with its reason. test/gtest/run does the
# work and the comparison; this checks its verdict and shows the failures.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

"$IBSHARE_SRCDIR/test/gtest/run" --module "$IBSHARE_MODULE" \
    --out "$tmpdir/gtest" > "$tmpdir/run.log" 2>&1
rc=$?
grep -E '^(GATE|info|gtest|PASS)' "$tmpdir/run.log"
check "UCX's UCT gtest: rc_share passes every instance rc_verbs passes, no\
 crash, no hang, every skip listed (status $rc)" test "$rc" -eq 0
if [ "$rc" -ne 0 ]; then
    tail -n 30 "$tmpdir/run.log" >&2
    for f in "$tmpdir"/gtest/rc_share.*.log; do
        [ -f "$f" ] || continue
        grep -E -B2 -A12 '^\[  FAILED  \]|Assertion|Segmentation' "$f" |
            head -n 120 >&2
    done
fi
finish
