#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The import's ownership of the cmd_fd it is given (test/unit/test_import),
# in the guest, on a uverbs fd that has no context: with Debian's provider
# (no import_context) libibverbs refuses it and leaves it open; with the
# import provider its import_context fails and closes it. Either way the
# import closes it exactly once: nothing left open, nothing else closed.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest --timeout 120 "$IBSHARE_BUILDDIR/test/unit/test_import" \
    > "$tmpdir/out" 2>&1
rc=$?
cat "$tmpdir/out"
check "test_import passes in the guest ($IBSHARE_TEST_MODE mode)" test "$rc" -eq 0
check "and ran the uverbs case, not skipped" \
      grep -q "uverbs fd without a context: refused, closed once" "$tmpdir/out"
finish
