#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# test/timed-driver, make check's log driver: a shell test that exits 0
# without finish's "NAME: took N s" line is an error (it stopped early: the
# guest side's exit, a sourced file read past its end), one that ends
# through finish passes, and both get their time.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

printf '#!/bin/sh\necho started\nexit 0\n' > "$tmpdir/early.sh"
printf '#!/bin/sh\necho "whole: took 0 s"\nexit 0\n' > "$tmpdir/whole.sh"
chmod +x "$tmpdir/early.sh" "$tmpdir/whole.sh"
for t in early whole; do
    (cd "$tmpdir" && sh "$IBSHARE_SRCDIR/test/timed-driver" \
        "$IBSHARE_SRCDIR/config/test-driver" --test-name "$t.sh" \
        --log-file "$t.log" --trs-file "$t.trs" --color-tests no \
        --enable-hard-errors yes --expect-failure no -- "./$t.sh") \
        > "$tmpdir/$t.out" 2>&1
    sed 's/^/    /' "$tmpdir/$t.out" "$tmpdir/$t.trs"
done
check "a test that exits 0 without its finish line is an error" \
    grep -qx ':test-result: ERROR' "$tmpdir/early.trs"
check "and says why in its log" grep -q 'without finish' "$tmpdir/early.log"
check "a test that ends through finish passes" \
    grep -qx ':test-result: PASS' "$tmpdir/whole.trs"
check "both get their time" sh -c "grep -q '^:test-seconds: [0-9]' \
    '$tmpdir/early.trs' && grep -q '^:test-seconds: [0-9]' '$tmpdir/whole.trs'"
finish
