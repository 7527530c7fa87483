#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Issue 21, item 5: ibshare_info prints what the group's state file holds
# (job key, device name), which a member or anyone who can write the file
# controls. A job key with terminal escape sequences, and a state file
# crafted behind a live group's back (its device name overwritten with
# control bytes), reach the terminal as \xNN escapes, never as raw bytes,
# and the output stays bounded.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

esc=$(printf '\033')
bel=$(printf '\007')
key="evil${esc}]0;owned${bel}${esc}[2Jkey"
drive F -k "$key" -m shared -n 4 -H "$tmpdir/hold"
f=$!
lines 1 > /dev/null

"$info" -d "$rundir" > "$tmpdir/key"
cat "$tmpdir/key"
check "the job key's control bytes are escaped" \
      grep -q -F "group of job 'evil\\x1b]0;owned\\x07\\x1b[2Jkey' on fake0" \
      "$tmpdir/key"
check "no escape or bell byte reaches the output" \
      sh -c "! grep -q '[$esc$bel]' '$tmpdir/key'"

# The device name as it sits in the state file, overwritten in place: a
# clear-screen sequence and a backspace
lock=$(ls "$groupdir"/*.lock)
check "the group has one lock file" test -f "$lock"
off=$(grep -obUa 'fake0' "$lock" | head -n 1 | cut -d: -f1)
printf '\033[2J\010\000' |
    dd of="$lock" bs=1 seek="$off" conv=notrunc 2> /dev/null
check "the state file was rewritten" test $? -eq 0
"$info" -d "$rundir" > "$tmpdir/crafted"
cat "$tmpdir/crafted"
check "a crafted device name is escaped" \
      grep -q -F "on \\x1b[2J\\x08" "$tmpdir/crafted"
check "and no control byte is printed" \
      sh -c "! LC_ALL=C grep -q '[[:cntrl:]]' '$tmpdir/crafted'"

# A key as long as the state's field holds (127 bytes), every byte a control
# byte: 4 bytes printed for each
# shellcheck disable=SC2046  # (seq: words)
long=$(printf '\001%.0s' $(seq 1 127))
drive L -k "$long" -m shared -n 4 -H "$tmpdir/hold"
l=$!
lines 1 > /dev/null
"$info" -d "$rundir" > "$tmpdir/long"
n=$(sed -n "s/^group of job '\(\(\\\\x01\)*\)' on fake0$/\1/p" "$tmpdir/long" |
    awk '{ print length($0) / 4 }')
check "a key of 127 control bytes prints as 127 escapes ($n)" \
      test "$n" = 127

exec 5>&-
wait_all $f $l
check "the members leave cleanly" test $? -eq 0
finish
