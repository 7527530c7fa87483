# Shared helpers of the shell tests; sourced, not run.
# The test harness (make check) exports IBSHARE_MODULE, IBSHARE_SRCDIR and
# IBSHARE_BUILDDIR.

: "${IBSHARE_MODULE:?run through make check}"
: "${IBSHARE_SRCDIR:?run through make check}"
: "${IBSHARE_BUILDDIR:?run through make check}"

test_name=$(basename "$0" .sh)
failures=0

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
    if [ "$failures" -ne 0 ]; then
        echo "$test_name: $failures check(s) failed" >&2
        exit 1
    fi
    exit 0
}

# with_module CMD...: runs CMD with the component preloaded into UCX
with_module() {
    LD_PRELOAD="$IBSHARE_MODULE" "$@"
}

# in_guest [vm options] CMD...: runs CMD in the soft-RoCE QEMU guest
# The guest shares only the working directory read-write with the host, so it
# runs in the build tree and the tests keep their files there.
in_guest() {
    (cd "$IBSHARE_BUILDDIR" && "$IBSHARE_SRCDIR/contrib/vm/run" \
        --env "IBSHARE_MODULE=$IBSHARE_MODULE" \
        --env "IBSHARE_SRCDIR=$IBSHARE_SRCDIR" \
        --env "IBSHARE_BUILDDIR=$IBSHARE_BUILDDIR" "$@")
}

tmpdir=$(mktemp -d "$IBSHARE_BUILDDIR/test-tmp.$test_name.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT
