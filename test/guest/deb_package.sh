#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The Debian package as its users get it: built with dpkg-buildpackage from
# the release tarball (make dist) against the system's UCX, then installed
# with dpkg in a clean guest (whose writes are thrown away). It holds the
# module in UCX's module directory, ibshare_info, ibshare-run and the man
# page, depends on exactly the libucx0 it was built against, and
# `ibshare-run ucx_info -d` lists rc_share on rxe0:1 (UCX 1.13 loads only
# its built-in modules: the wrapper preloads the installed module).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

# The package builds against the system's UCX, as this build must
if [ -n "$IBSHARE_UCX_RUN_LIBDIR" ]; then
    fail "the package builds against the system's UCX; this build uses" \
         "$IBSHARE_UCX_RUN_LIBDIR: run the test in a build against the system's"
    finish
fi
ucx_version=$(dpkg-query -W -f='${Version}' libucx0)
moduledir=$(pkg-config --variable=libdir ucx-uct)/ucx

# The package's own build would run make check-unit (nocheck, below): not
# with this make's TESTS in any case
unset MAKEFLAGS MFLAGS MAKELEVEL
name=ibshare-test-dist.$$
make -C "$IBSHARE_BUILDDIR" dist-gzip distdir="$name" > "$tmpdir/dist.log" 2>&1
check "make dist" test $? -eq 0
mv "$IBSHARE_BUILDDIR/$name.tar.gz" "$tmpdir/" &&
    tar -C "$tmpdir" -xzf "$tmpdir/$name.tar.gz"
# parallel: as a user with more than one core builds (dh's default is one
# job); nocheck: the package's make check-unit runs the unit tests that
# this make check ran already, on the same sources (issue 19: CI's time)
(cd "$tmpdir/$name" && IBSHARE_UCX_SRC=$IBSHARE_UCX_SRC \
    DEB_BUILD_OPTIONS="parallel=$(nproc) nocheck ${DEB_BUILD_OPTIONS:-}" \
    dpkg-buildpackage -b -us -uc) \
    > "$tmpdir/deb.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || tail -40 "$tmpdir/deb.log"
check "dpkg-buildpackage -b builds from the tarball (status $rc)" test "$rc" -eq 0
deb=$(ls "$tmpdir"/ucx-ibshare_*.deb 2>/dev/null | head -n 1)
check "it made ucx-ibshare_*.deb" test -n "$deb"
[ -n "$deb" ] || finish

# Each line: mode, owner, size, date, time, then the name (and "-> target"
# for a link, whose last field is the target)
dpkg-deb -c "$deb" | sed -E 's/^([^ ]+ +){5}//' > "$tmpdir/files"
sed 's/^/    /' "$tmpdir/files"
for f in ".$moduledir/libuct_ibshare.so.0" ./usr/bin/ibshare_info \
         ./usr/bin/ibshare-run ./usr/share/man/man1/ibshare_info.1.gz; do
    check "the package holds $f" grep -qx -e "$f" -e "$f -> .*" "$tmpdir/files"
done
check "and no libtool archive or development link" \
      sh -c "! grep -qE '\\.la\$|libuct_ibshare\\.so\$' '$tmpdir/files'"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
check "it depends on exactly libucx0 (= $ucx_version)" \
      sh -c "echo '$depends' | tr ',' '\\n' | grep -qx ' *libucx0 (= $ucx_version)'"

# In a guest of its own (--no-session: dpkg changes its root file system)
# with nothing of this build in its environment: install, list,
# read the man page, remove. The test bed's own guest, without a session,
# is checked on this boot too (vm_harness.sh checks a session): the
# command's exit status (7) comes back, and its stdout and stderr apart
(cd "$IBSHARE_BUILDDIR" && "$IBSHARE_SRCDIR/contrib/vm/run" --no-session --no-pass-env sh -c '
    run() { name=$1; shift; "$@" > "$dir/$name" 2> "$dir/$name.err"; echo $? > "$dir/$name.rc"; }
    dir=$1 deb=$2 module=$3
    # man-db re-indexes every page on each dpkg run: minutes under TCG, and
    # man -w finds the page without the index (the guest overlay only)
    rm -f /var/lib/man-db/auto-update
    run install dpkg -i "$deb"
    run status dpkg-query -W -f "\${Status}" ucx-ibshare
    run devices ibshare-run ucx_info -d
    run info ibshare_info
    run man man -w ibshare_info
    run remove dpkg -r ucx-ibshare
    run removed test ! -e "$module"
    echo out; echo err >&2; echo err2 > /dev/stderr
    exit 7
' sh "$tmpdir" "$deb" "$moduledir/libuct_ibshare.so.0") \
    > "$tmpdir/own.out" 2> "$tmpdir/own.err"
rc=$?
cat "$tmpdir/own.out" "$tmpdir/own.err"
check "its own guest: the command's exit status 7 comes back ($rc)" \
    test "$rc" -eq 7
check "its own guest: stdout and stderr apart (re-opening /dev/stderr too)" \
    sh -c "grep -qx out '$tmpdir/own.out' && ! grep -q err '$tmpdir/own.out' &&
           grep -qx err '$tmpdir/own.err' && grep -qx err2 '$tmpdir/own.err'"

rc() { cat "$tmpdir/$1.rc"; }
check "dpkg -i installs it" test "$(rc install)" -eq 0
[ "$(rc install)" -eq 0 ] || cat "$tmpdir/install" "$tmpdir/install.err"
check "and dpkg says so" test "$(cat "$tmpdir/status")" = "install ok installed"
check "ibshare-run ucx_info -d lists rc_share on rxe0:1 once" \
      test "$(rc devices)" -eq 0 -a "$(rc_share_devices "$tmpdir/devices")" -eq 1
check "ibshare_info runs" test "$(rc info)" -eq 0
check "man finds the ibshare_info page" test "$(rc man)" -eq 0
check "dpkg -r removes it, the module included" \
      test "$(rc remove)" -eq 0 -a "$(rc removed)" -eq 0
finish
