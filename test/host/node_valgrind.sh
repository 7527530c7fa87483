#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Join and leave under valgrind, in shared mode (two fds passed) and as
# founder and joiner: no memory error, no leak, no fd left open.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

if ! command -v valgrind > /dev/null; then
    echo "valgrind is not installed"
    exit 77
fi

vg="valgrind -q --error-exitcode=99 --leak-check=full
    --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect"

$vg "$driver" join -d "$rundir" -R "$tmpdir/ready" -k valgrind -m shared \
    -H "$tmpdir/hold" > "$tmpdir/F.out" 2> "$tmpdir/F.err" 3>&- 4>&- 5>&- 6>&- &
f=$!
lines 1 60 > /dev/null
$vg "$driver" join -d "$rundir" -R "$tmpdir/ready" -k valgrind -m shared \
    > "$tmpdir/J.out" 2> "$tmpdir/J.err" 3>&- 4>&- 5>&- 6>&- &
j=$!
lines 2 60 > /dev/null
wait $j
check "the joiner is clean under valgrind (rc $?)" \
      grep -q "^left .* last=0 .*fdleak=0" "$tmpdir/J.out"
exec 5>&-
lines 1 60 > /dev/null
wait $f
check "the founder is clean under valgrind (rc $?)" \
      grep -q "^left .* last=1 .*fdleak=0" "$tmpdir/F.out"
cat "$tmpdir/F.err" "$tmpdir/J.err" >&2
check "valgrind reported nothing" \
      sh -c "! cat '$tmpdir/F.err' '$tmpdir/J.err' | grep -q ."
check "no file left" no_files

finish
