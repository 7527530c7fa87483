# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Shared helpers of the shell tests; sourced, not run.
# The test harness (make check) exports IBSHARE_MODULE, IBSHARE_SRCDIR and
# IBSHARE_BUILDDIR, and the UCX the build is configured with:
# IBSHARE_UCX_BINDIR, IBSHARE_UCX_RUN_LIBDIR (empty for the system's) and
# IBSHARE_UCX_LOADS_PLUGINS.

: "${IBSHARE_MODULE:?run through make check}"
: "${IBSHARE_SRCDIR:?run through make check}"
: "${IBSHARE_BUILDDIR:?run through make check}"

test_name=$(basename "$0" .sh)
failures=0
test_started=$(date +%s)

# The node-group tests run in both modes of the group: NAME.sh in a guest
# with Debian's rxe provider, which cannot import (fallback mode), and
# NAME-shared.sh (made by make, it sources NAME.sh) in a guest with the test
# bed's import provider (contrib/vm/run --import: shared mode, as on mlx5).
# IBSHARE_TEST_MODE=shared runs a NAME.sh by hand the second way.
case $0 in
*-shared.sh) IBSHARE_TEST_MODE=shared ;;
*) IBSHARE_TEST_MODE=${IBSHARE_TEST_MODE:-fallback} ;;
esac
case $IBSHARE_TEST_MODE in
shared | fallback) ;;
*) echo "$test_name: IBSHARE_TEST_MODE=$IBSHARE_TEST_MODE: want shared or fallback" >&2
   exit 99 ;;
esac

fail() {
    echo "FAIL: $test_name: $*" >&2
    failures=$((failures + 1))
}

pass() {
    echo "ok: $test_name: $*"
}

# check DESCRIPTION COMMAND...: passes when COMMAND succeeds
check() {
    desc=$1
    shift
    if "$@"; then pass "$desc"; else fail "$desc"; fi
}

finish() {
    # contrib/check lists the slowest tests from these lines
    echo "$test_name: took $(($(date +%s) - test_started)) s"
    if [ "$failures" -ne 0 ]; then
        # The kernel's side of a failure: the consoles that a test kept
        # (in_guest --log "$tmpdir/console"; quiet boots print warnings,
        # oopses and hung tasks only)
        for f in "$tmpdir"/console "$tmpdir"/console.node*; do
            [ -s "$f" ] || continue
            echo "--- guest console $(basename "$f") (last 60 lines)" >&2
            tail -n 60 "$f" >&2
        done
        echo "$test_name: $failures check(s) failed" >&2
        exit 1
    fi
    exit 0
}

# The tests run with the UCX of the build: its commands first in PATH, its
# libraries (same sonames as the system's) first in LD_LIBRARY_PATH.
if [ -n "${IBSHARE_UCX_RUN_LIBDIR:-}" ]; then
    PATH=$IBSHARE_UCX_BINDIR:$PATH
    LD_LIBRARY_PATH=$IBSHARE_UCX_RUN_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH LD_LIBRARY_PATH
fi

# How a command gets the module: UCX 1.13 loads only its built-in modules,
# so the module is preloaded (LD_PRELOAD=$IBSHARE_PRELOAD); 1.22 loads it
# from UCX_PLUGIN_PATH, the module's build directory, and IBSHARE_PRELOAD is
# empty. A test that wants UCX without the module unsets both.
if [ "${IBSHARE_UCX_LOADS_PLUGINS:-no}" = yes ]; then
    IBSHARE_PRELOAD=
    UCX_PLUGIN_PATH=$(dirname "$IBSHARE_MODULE")
    export UCX_PLUGIN_PATH
else
    IBSHARE_PRELOAD=$IBSHARE_MODULE
fi
export IBSHARE_PRELOAD

# with_module CMD...: runs CMD with the component loaded into UCX
with_module() {
    LD_PRELOAD="$IBSHARE_PRELOAD" "$@"
}

# UCP's endpoint configuration lines (UCX_LOG_LEVEL=info), as UCX 1.13
# ("ep_cfg[0]: tag(...)") and 1.22 ("<name> intra-node cfg#0 tag(...)")
# print them, for grep -E
ucp_ep_cfg_re='ep_cfg\[[0-9]+\]: |cfg#[0-9]+ '

# rc_share_devices FILE: how many times `ucx_info -d` output in FILE lists
# transport rc_share on rxe0:1 under memory domain rxe0, component ibshare
rc_share_devices() {
    awk '
        /# Memory domain:/    { md = ($NF == "rxe0"); comp = 0; tl = 0 }
        /#     Component:/    { comp = md && ($NF == "ibshare") }
        /# *Transport:/       { tl = comp && ($NF == "rc_share") }
        /# *Device:/          { if (tl && $NF == "rxe0:1") found++ }
        END { print found + 0 }
    ' "$1"
}

# in_guest [vm options] CMD...: runs CMD in the soft-RoCE QEMU guest, with
# the import provider in shared mode (IBSHARE_TEST_MODE is passed on)
# The guest shares only the working directory read-write with the host, so it
# runs in the build tree and the tests keep their files there.
in_guest() {
    set -- --env "IBSHARE_PRELOAD=$IBSHARE_PRELOAD" \
        --env "IBSHARE_TEST_MODE=$IBSHARE_TEST_MODE" "$@"
    if [ "$IBSHARE_TEST_MODE" = shared ]; then
        set -- --import "$@"
    fi
    if [ -n "${UCX_PLUGIN_PATH:-}" ]; then
        set -- --env "UCX_PLUGIN_PATH=$UCX_PLUGIN_PATH" "$@"
    fi
    if [ -n "${IBSHARE_UCX_RUN_LIBDIR:-}" ]; then
        set -- --env "PATH=$PATH" --env "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" "$@"
    fi
    (cd "$IBSHARE_BUILDDIR" && "$IBSHARE_SRCDIR/contrib/vm/run" \
        --env "IBSHARE_MODULE=$IBSHARE_MODULE" \
        --env "IBSHARE_SRCDIR=$IBSHARE_SRCDIR" \
        --env "IBSHARE_BUILDDIR=$IBSHARE_BUILDDIR" "$@")
}

# figures_ok SIZE ITERS ROW...: a ucx_perftest "Final:" row (ITERS, then
# the 50th percentile, average and overall latency, average and overall
# bandwidth, average and overall message rate) is a complete run's: all
# iterations done; the percentile and the overall figures finite
# non-negative numbers, the overall latency and message rate nonzero, and the
# overall bandwidth too from 1 KiB on (printed in MB/s with 2 decimals, it
# may round to 0.00 for 8 B messages on a slow run). The averages are those
# of the last report interval, whatever ucx_perftest makes of an interval in
# which no iteration ended or no time passed (0/0 or x/0: nan, -nan, inf,
# seen in CI across two nodes): a number, or one of those.
figures_ok() {
    echo "$@" | awk '
        function number(v) { return v ~ /^[0-9]+(\.[0-9]+)?$/ }
        NF != 10 { exit 1 }
        {
            if ($3 != $2) exit 1
            for (i = 4; i <= 10; i++) {
                if (number($i)) continue
                if ((i == 5 || i == 7 || i == 9) && tolower($i) ~ /^[-+]?(nan|inf)$/)
                    continue
                exit 1
            }
            if ($6 + 0 <= 0 || $10 + 0 <= 0) exit 1
            if ($1 >= 1024 && $8 + 0 <= 0) exit 1
        }'
}

# mpi_prog NAME [MPICC SUFFIX]: builds test/guest/NAME.c with mpicc (Open
# MPI's), or with MPICC into NAME.SUFFIX (mpicc.mpich: MPICH's), in the build
# tree (which the guests share) unless it is newer than its source; sets
# prog and checks that it is built
mpi_prog() {
    mp_cc=${2:-mpicc}
    mp_src=$IBSHARE_SRCDIR/test/guest/$1.c
    prog=$IBSHARE_BUILDDIR/test/guest/$1${3:+.$3}
    mkdir -p "$IBSHARE_BUILDDIR/test/guest"
    # MPICH's MPI_STATUSES_IGNORE is (MPI_Status *)1, which GCC 12 takes
    # for an array of size 0 passed to MPI_Waitall (a false warning)
    mp_flags="-O2 -g -Wall -Wextra"
    case $mp_cc in *mpich*) mp_flags="$mp_flags -Wno-stringop-overflow" ;; esac
    if [ ! -x "$prog" ] || [ -n "$(find "$mp_src" -newer "$prog")" ]; then
        echo "$mp_cc $mp_flags -o $prog $mp_src"
        # shellcheck disable=SC2086  # (word splitting intended)
        "$mp_cc" $mp_flags -o "$prog" "$mp_src"
    fi
    [ -x "$prog" ] && [ -z "$(find "$mp_src" -newer "$prog")" ]
    check "${prog##*/} is built ($mp_cc), newer than its source" test $? -eq 0
}

# source_files: the files of the source tree, a path relative to
# IBSHARE_SRCDIR a line: git's list where IBSHARE_SRCDIR is the top of a git
# work tree, else the release tarball's own list (MANIFEST, written by make
# dist; Makefile.am). A tarball unpacked inside another work tree (make
# distcheck's, in the build directory) is no checkout of its own: git's
# list there is the other tree's. Fails, saying why, in a tree that is
# neither and where the list names a file the tree does not hold: a test
# that goes over the tree must not pass on an empty list.
source_files() {
    sf_top=$(cd "$IBSHARE_SRCDIR" && pwd -P) || return 1
    sf_git=$(git -C "$sf_top" rev-parse --show-toplevel 2>/dev/null) || sf_git=
    if [ -n "$sf_git" ] && [ "$(cd "$sf_git" && pwd -P)" = "$sf_top" ]; then
        git -C "$sf_top" ls-files
        return
    fi
    if [ ! -f "$sf_top/MANIFEST" ]; then
        echo "$test_name: $IBSHARE_SRCDIR is neither the top of a git work" \
             "tree (git${sf_git:+: inside $sf_git}) nor a release tarball" \
             "(no MANIFEST): no list of its files" >&2
        return 1
    fi
    sf_missing=0
    while read -r sf_f; do
        [ -e "$sf_top/$sf_f" ] || [ -L "$sf_top/$sf_f" ] || {
            echo "$test_name: MANIFEST lists $sf_f, not in the tree" >&2
            sf_missing=1
        }
    done < "$sf_top/MANIFEST"
    cat "$sf_top/MANIFEST"
    return $sf_missing
}

# A private directory for the test's files. Host tests take a short one in
# $TMPDIR: the node group's unix socket lives below it, and a sun_path holds
# 107 bytes, which a deep build tree (make distcheck's <package>/_build/sub)
# outgrows. Guest tests keep theirs in the build tree, the directory the
# guest shares read-write (its /tmp is its own).
case $0 in
*/guest/*) tmpbase=$IBSHARE_BUILDDIR ;;
*) tmpbase=${TMPDIR:-/tmp} ;;
esac
tmpdir=$(mktemp -d "$tmpbase/ibshare-test.$test_name.XXXXXX")
# IBSHARE_TEST_KEEP=1: the files stay, for a look after a failure
if [ "${IBSHARE_TEST_KEEP:-0}" = 1 ]; then
    echo "$test_name: files in $tmpdir"
else
    trap 'rm -rf "$tmpdir"' EXIT
fi
