# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Shared helpers of the node group tests (test/host/node_*.sh), sourced
# after test/lib.sh. The driver is test/host/node_driver.c.

driver=$IBSHARE_BUILDDIR/test/host/node_driver
info=$IBSHARE_BUILDDIR/ibshare_info
rundir=$tmpdir/run
groupdir=$rundir/ucx-ibshare-$(id -u)
mkdir -p "$rundir"

# UCX logs to stdout by default; the drivers' stdout is their report
UCX_LOG_FILE=stderr
export UCX_LOG_FILE

# Barriers are fifos the script holds open read-write: the drivers' opens
# never block, and closing the script's end gives every reader EOF at once.
# fifo NAME FD: a fresh fifo $tmpdir/NAME on fd FD (3: start, 4: ready,
# 5: hold, 6: arm, by convention)
fifo() {
    rm -f "$tmpdir/$1"
    mkfifo "$tmpdir/$1" || exit 1
    eval "exec $2<>\"\$tmpdir/\$1\""
}
fifo start 3
fifo ready 4
fifo hold 5
fifo arm 6

# drive NAME ARGS...: one member in the background ($! is its pid), which
# reports on the ready fifo; its output goes to $tmpdir/NAME.out and .err.
# Started from this shell, not a subshell: no process may keep our ends of
# the fifos, or closing ours would release nobody.
drive() {
    name=$1
    shift
    "$driver" join -d "$rundir" -R "$tmpdir/ready" "$@" \
        > "$tmpdir/$name.out" 2> "$tmpdir/$name.err" 3>&- 4>&- 5>&- 6>&- &
}

# lines N [SECONDS]: the next N lines the drivers report (fails on timeout)
lines() {
    "$driver" lines "$1" "${2:-30}" <&4
}

# count PATTERN FILE: lines of FILE matching PATTERN
count() {
    grep -c -- "$1" "$2"
}

# field NAME FILE: the values of NAME=... in FILE, one a line
field() {
    sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"
}

# wait_all PIDS...: 0 if every one exited 0
wait_all() {
    rc=0
    for p in "$@"; do
        wait "$p" || rc=1
    done
    return $rc
}

# no_files: the group directory holds no lock or socket file
no_files() {
    test -z "$(ls -A "$groupdir" 2>/dev/null)"
}
