#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# UCX's own UCP unit tests (gtest-ucp, built and cached by test/gtest/build
# beside the UCT gtest) for the variant rcs (UCX_TLS=rc_share) in the
# soft-RoCE guest, on a part of the suites that fits CI's budget: every
# instance of it that passes for UCX's rc (rc_v; test/gtest/ucp_rc_v.pass)
# passes for rcs, and none crashes or hangs. test/gtest/run --ucp does the
# work and the comparison; this checks its verdict and shows the failures.
# The part: the RMA suite, whose get with UCX_PROTO_ENABLE once completed
# its flush before the reads (issue 45), the fences and 64-bit atomics, and
# the disconnect after sends that left requests pending behind a flush,
# the tag transfers that hung, and the wakeup suites (a send to a new peer
# that sleeps on its event fd: the backlog is posted from the async
# context).
# In make check as ucp_gtest-shared.sh (the import provider, where issue 45
# was found); ucp_gtest.sh, fallback mode, in the long run.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

filter='test_ucp_rma.*:test_ucp_fence32.*:test_ucp_fence64.*'
filter="$filter:test_ucp_atomic64.*:test_ucp_wireup_1sided.disconnect_nb_onesided/*"
filter="$filter:test_ucp_tag_xfer.generic_err_unexp/0"
filter="$filter:test_ucp_tag_xfer.iov_exp_sync/3:test_ucp_tag_xfer.iov_unexp_sync/0"
filter="$filter:test_ucp_wakeup.*:test_ucp_wakeup_external_epollfd.*"
import=
[ "$IBSHARE_TEST_MODE" != shared ] || import=--import

# (the empty $import must not become an argument)
# shellcheck disable=SC2086
"$IBSHARE_SRCDIR/test/gtest/run" --ucp $import --filter "$filter" \
    --watchdog 240 --module "$IBSHARE_MODULE" --out "$tmpdir/gtest" \
    > "$tmpdir/run.log" 2>&1
rc=$?
grep -E '^(GATE|info|gtest|PASS)' "$tmpdir/run.log"
check "UCX's UCP gtest ($IBSHARE_TEST_MODE mode): rcs passes every instance\
 rc passes, no crash, no hang (status $rc)" test "$rc" -eq 0
if [ "$rc" -ne 0 ]; then
    tail -n 30 "$tmpdir/run.log" >&2
    for f in "$tmpdir"/gtest/rcs.*.log; do
        [ -f "$f" ] || continue
        grep -E -B2 -A12 '^\[  FAILED  \]|Assertion|Segmentation|Bug' "$f" |
            head -n 120 >&2
    done
fi
finish
