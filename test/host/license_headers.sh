#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Every source file, script and test of the project names its license and
# copyright in its first five lines: "SPDX-License-Identifier: BSD-3-Clause"
# (LICENSE) and "Copyright (c) <year>, the ucx-ibshare developers", as
# UCX's and rdma-core's files do (issue 24). The files: git's list of the
# tree (in a release tarball, its MANIFEST: test/lib.sh's source_files),
# less what is not code of ours: documentation (*.md, doc/), LICENSE,
# debian/'s packaging data (debian/rules is checked), upstream sources and
# patches to them (contrib/vendor, *.patch), data (test/gtest's lists,
# .gitignore), and the test bed's files whose whole text is a cache key
# (the guest's kernel image, the import provider: a header
# would rebuild them on every machine; they take theirs with their next
# change), and what make dist adds (autotools' output, MANIFEST). A header
# that a later edit pushes down or breaks fails here.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

spdx='SPDX-License-Identifier: BSD-3-Clause'
copyright='Copyright (c) [0-9]\{4\}\(-[0-9]\{4\}\)\{0,1\}, the ucx-ibshare developers'

# The test bed's cache keys (contrib/vm/run and contrib/vm/build-rxe-import
# hash these whole)
cache_keyed='contrib/vm/build-rxe-import contrib/vm/init contrib/vm/mkinitramfs
contrib/vm/extract-vmlinux contrib/vm/rexec.c'

# checked FILE: whether FILE is code of ours (the head comment)
checked() {
    case $1 in
    debian/rules) return 0 ;;
    *.md|doc/*|LICENSE|debian/*|contrib/vendor/*|*.patch|.gitignore|\
    test/gtest/*.pass|m4/.keep) return 1 ;;
    # make dist's own (the tarball's, not git's: .gitignore lists them)
    MANIFEST|configure|Makefile.in|aclocal.m4|config.h.in|config/*|\
    m4/libtool.m4|m4/lt*.m4) return 1 ;;
    esac
    for keyed in $cache_keyed; do
        [ "$1" != "$keyed" ] || return 1
    done
    return 0
}

source_files > "$tmpdir/list"
check "the tree lists its files (git's list or the tarball's MANIFEST)" \
      test $? -eq 0
sort -u "$tmpdir/list" > "$tmpdir/all"
: > "$tmpdir/checked"
: > "$tmpdir/missing"
while read -r f; do
    checked "$f" || continue
    echo "$f" >> "$tmpdir/checked"
    head -n 5 "$IBSHARE_SRCDIR/$f" > "$tmpdir/head"
    if ! grep -q "$spdx" "$tmpdir/head" ||
       ! grep -q "$copyright" "$tmpdir/head"; then
        echo "$f" >> "$tmpdir/missing"
    fi
done < "$tmpdir/all"

n=$(grep -c . "$tmpdir/checked")
echo "$n files checked of $(grep -c . "$tmpdir/all") in the tree"
sed 's/^/    no header: /' "$tmpdir/missing"
# (the list itself is what the test rests on: it must hold the code)
check "the files checked include the module's, the tests' and the scripts'\
 ($n)" sh -c "grep -qx src/md/ibshare_md.c '$tmpdir/checked' &&
              grep -qx src/rc/rc_share_ep.c '$tmpdir/checked' &&
              grep -qx test/host/license_headers.sh '$tmpdir/checked' &&
              grep -qx contrib/check '$tmpdir/checked' && test $n -ge 100"
check "every one names its license (SPDX) and copyright in its first five\
 lines ($(grep -c . "$tmpdir/missing") do not)" test ! -s "$tmpdir/missing"

# The check itself fails on a file without them
printf '#!/bin/sh\n# a script of ours\necho hello\n' > "$tmpdir/bare.sh"
head -n 5 "$tmpdir/bare.sh" > "$tmpdir/head"
! grep -q "$spdx" "$tmpdir/head"
check "(and a script without them would fail it)" test $? -eq 0
finish
