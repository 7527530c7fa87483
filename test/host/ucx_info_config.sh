#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# ucx_info -c -f documents every UCX_IBSHARE_* and UCX_RC_SHARE_* variable.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

with_module ucx_info -c -f > "$tmpdir/config" 2> "$tmpdir/stderr"
check "ucx_info -c -f exits 0" test $? -eq 0
check "no message on stderr" test ! -s "$tmpdir/stderr"
cat "$tmpdir/stderr" >&2

for var in UCX_IBSHARE_RCACHE UCX_IBSHARE_RCACHE_MAX_SIZE \
           UCX_RC_SHARE_GID_INDEX UCX_RC_SHARE_FAILURE UCX_RC_SHARE_ALLOC
do
    check "$var is listed" grep -q "^$var=" "$tmpdir/config"
done

# Every variable of ours is preceded by a help block with at least one line of
# prose (not just the "syntax:" line UCX adds by itself).
awk '
    /^#/ { if ($0 !~ /^# *(syntax|inherits):/ && $0 !~ /^# *$/) prose = 1; next }
    /^UCX_(IBSHARE|RC_SHARE)_/ {
        n++
        if (!prose) { print "undocumented: " $0; bad = 1 }
    }
    { prose = 0 }
    END { if (n < 5) { print "only " n " variables"; bad = 1 }; exit bad }
' "$tmpdir/config" >&2
check "every variable has help text" test $? -eq 0

# Without the module the variables do not exist: the check above means something
ucx_info -c -f > "$tmpdir/plain" 2>&1
check "variables come from the module" \
      sh -c "! grep -q '^UCX_RC_SHARE_' '$tmpdir/plain'"

finish
