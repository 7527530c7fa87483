#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The release tarball holds the tree, and the tests that go over the tree
# pass from it, as a packager runs them (issue 41): make dist's tarball
# holds every file of the tree's list (git's, but for what Makefile.am
# leaves out: .gitignore, .ci/, m4/.keep; in a tarball, make distcheck's,
# its MANIFEST) and nothing else but what make dist adds (autotools'
# output, the man page, MANIFEST, which lists exactly the tarball's files).
# Unpacked and read-only, license_headers.sh and doc_links.sh pass there,
# outside any git work tree and inside another one: where make distcheck
# unpacks it, in the build directory of a clone, git's list was the other
# tree's, empty there ("0 files checked of 0 in the tree"). Without
# MANIFEST both fail: an empty list is no pass.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
# (the unpacked trees are read-only)
[ "${IBSHARE_TEST_KEEP:-0}" = 1 ] ||
    trap 'chmod -R u+w "$tmpdir"; rm -rf "$tmpdir"' EXIT

# What make dist leaves out of git's list, and adds to it
left_out='^(\.gitignore|\.ci/.*|m4/\.keep)$'
added='^(MANIFEST|configure|Makefile\.in|aclocal\.m4|config\.h\.in|config/.*|m4/libtool\.m4|m4/lt.*\.m4|doc/man/ibshare_info\.1)$'

# The tarball, made as deb_package.sh makes it (not with this make's TESTS)
unset MAKEFLAGS MFLAGS MAKELEVEL
name=ibshare-test-tree.$$
make -C "$IBSHARE_BUILDDIR" dist-gzip distdir="$name" > "$tmpdir/dist.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || tail -n 20 "$tmpdir/dist.log"
check "make dist (status $rc)" test "$rc" -eq 0
mv "$IBSHARE_BUILDDIR/$name.tar.gz" "$tmpdir/" || finish

# unpack DIR: the tarball in DIR, read-only, as make distcheck leaves it;
# sets tree
unpack() {
    mkdir -p "$1" && tar -C "$1" -xzf "$tmpdir/$name.tar.gz" &&
        chmod -R a-w "$1/$name"
    tree=$1/$name
}
unpack "$tmpdir/plain"
check "the tarball unpacks" test -d "$tree"

# Its files against the list of this tree
(cd "$tree" && find . \( -type f -o -type l \) | sed 's|^\./||' |
    LC_ALL=C sort) > "$tmpdir/files"
grep -vx MANIFEST "$tmpdir/files" > "$tmpdir/files.listed"
LC_ALL=C sort "$tree/MANIFEST" > "$tmpdir/manifest"
check "its MANIFEST lists exactly its files ($(grep -c . "$tmpdir/manifest"))" \
      cmp -s "$tmpdir/manifest" "$tmpdir/files.listed"
source_files > "$tmpdir/list"
check "this tree lists its files (git's list or the tarball's MANIFEST)" \
      test $? -eq 0
grep -Evx "$left_out" "$tmpdir/list" | LC_ALL=C sort -u > "$tmpdir/expected"
LC_ALL=C comm -23 "$tmpdir/expected" "$tmpdir/files" > "$tmpdir/missing"
LC_ALL=C comm -13 "$tmpdir/expected" "$tmpdir/files" |
    grep -Evx "$added" > "$tmpdir/extra"
sed 's/^/    not in the tarball: /' "$tmpdir/missing"
sed 's/^/    in the tarball, not in the tree: /' "$tmpdir/extra"
check "the tarball holds every file of the tree's list\
 ($(grep -c . "$tmpdir/expected"); $(grep -c . "$tmpdir/missing") not)" \
      test ! -s "$tmpdir/missing"
check "and nothing else but make dist's own ($(grep -c . "$tmpdir/extra") more)" \
      test ! -s "$tmpdir/extra"

# run_tree TREE LABEL TEST...: each TEST of TREE (its own copy, as a
# packager runs it) with TREE as the source tree; output in $tmpdir/LABEL.TEST
run_tree() {
    rt_tree=$1 rt_label=$2
    shift 2
    for t; do
        IBSHARE_SRCDIR=$rt_tree sh "$rt_tree/test/host/$t.sh" \
            > "$tmpdir/$rt_label.$t" 2>&1
        echo $? > "$tmpdir/$rt_label.$t.rc"
    done
}
# passes_in LABEL TEST WHERE: TEST passed, and said how many files it saw
passes_in() {
    pi_rc=$(cat "$tmpdir/$1.$2.rc")
    [ "$pi_rc" -eq 0 ] || sed 's/^/    /' "$tmpdir/$1.$2"
    case $2 in
    license_headers) pi_n=$(sed -n 's/^\([0-9]*\) files checked of.*/\1/p' "$tmpdir/$1.$2") ;;
    doc_links) pi_n=$(sed -n 's/.*every relative link and anchor of the \([0-9]*\) pages.*/\1/p' "$tmpdir/$1.$2") ;;
    esac
    check "$2.sh passes in the tarball $3 (status $pi_rc; ${pi_n:-no} files)" \
          test "$pi_rc" -eq 0 -a "${pi_n:-0}" -gt 0
}

if git -C "$tmpdir" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    where="in $tmpdir, inside a git work tree"
else
    where="outside any git work tree"
fi
run_tree "$tree" plain license_headers doc_links
passes_in plain license_headers "$where"
passes_in plain doc_links "$where"

# Inside another git work tree, as make distcheck unpacks it in a clone's
# build directory (ignored there, as build*/ is in ours)
if command -v git > /dev/null; then
    git init -q "$tmpdir/repo" && echo "/$name/" > "$tmpdir/repo/.gitignore" &&
        git -C "$tmpdir/repo" add .gitignore &&
        git -C "$tmpdir/repo" -c user.name=test -c user.email=test@localhost \
            commit -q -m ignore
    check "(a git work tree to unpack it in)" test $? -eq 0
    unpack "$tmpdir/repo"
    run_tree "$tree" repo license_headers doc_links
    passes_in repo license_headers "inside another git work tree"
    passes_in repo doc_links "inside another git work tree"
else
    fail "no git: the tarball inside a git work tree is not checked" \
         "(contrib/install-deps installs git)"
fi

# Without its MANIFEST, neither a checkout nor a tarball: both fail
tree=$tmpdir/plain/$name
chmod u+w "$tree" && rm -f "$tree/MANIFEST"
run_tree "$tree" bare license_headers doc_links
for t in license_headers doc_links; do
    check "(and without MANIFEST $t.sh fails, saying why)" \
          sh -c "test \$(cat '$tmpdir/bare.$t.rc') -ne 0 &&
                 grep -q 'no list of its files' '$tmpdir/bare.$t'"
done

chmod -R u+w "$tmpdir"
finish
