#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The founder dies inside create() (UCX_IBSHARE_FAULT=create_exit): it leaves
# a lock file with no member behind, and the next process of the job founds
# the group cleanly and serves the ones after it.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

creates=$tmpdir/creates
drive A -k create-exit -c "$creates" -f create_exit
a=$!
wait $a
rc=$?
check "the founder exited inside create() (status $rc)" test $rc -eq 86
check "create() had started" test "$(count . "$creates")" -eq 1
check "its lock file is left" sh -c "ls '$groupdir'/*.lock > /dev/null"

drive B -k create-exit -c "$creates" -H "$tmpdir/hold" -t 3
b=$!
lines 1 > "$tmpdir/B.joined"
check "the next process founded the group" \
      grep -q "^joined pid=$b founder=1 .*fds=ok" "$tmpdir/B.joined"
check "create() ran again, once" test "$(count . "$creates")" -eq 2

drive C -k create-exit -c "$creates" -t 3
c=$!
lines 2 > "$tmpdir/C.out"
wait $c
check "the one after was served by the new founder" \
      grep -q "^joined pid=$c founder=0 .* server=$b .*pattern=$b .*fds=ok" \
      "$tmpdir/C.out"
check "and left, not the last" grep -q "^left .* last=0 .*fdleak=0" \
      "$tmpdir/C.out"

exec 5>&-
lines 1 > "$tmpdir/B.left"
wait $b
check "the new founder left last (rc $?)" \
      grep -q "^left .* last=1 .*fdleak=0" "$tmpdir/B.left"
check "no file left" no_files
check "B and C logged nothing" \
      sh -c "! cat '$tmpdir/B.err' '$tmpdir/C.err' | grep -q ."

finish
