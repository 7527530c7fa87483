#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The layers of src/ (src/README.md) and no loop between its files: the
# include graph from the compiler (-MM, the module's own flags) and the call
# graph from the objects (nm) of this build, by test/host/src_graph.py. Then
# the check itself: an include against the layers and a loop of calls, made
# on purpose, must each fail it (the node <-> node_serve pair of calls that
# issue 24 found was such a loop).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

: "${IBSHARE_CC:?run through make check}"
graph="$IBSHARE_SRCDIR/test/host/src_graph.py"
cd "$IBSHARE_BUILDDIR" || exit 99

# (-I./src first: a copy of the tree below must find its own headers)
src_graph() {
    "$graph" --cc "$IBSHARE_CC" \
        --cppflags "-I$1 $IBSHARE_CPPFLAGS" --src "$@"
}

# The tree's files of src/ (test/lib.sh's source_files: git's list or the
# tarball's MANIFEST), not what a build in the source tree adds there
source_files > "$tmpdir/list"
check "the tree lists its files (git's list or the tarball's MANIFEST)" \
      test $? -eq 0
sed -n 's|^src/\(.*\.[ch]\)$|\1|p' "$tmpdir/list" > "$tmpdir/src_files"
src_graph "$IBSHARE_SRCDIR/src" --files "$tmpdir/src_files" \
    --objs "$IBSHARE_BUILDDIR/src" --print > "$tmpdir/tree" 2>&1
status=$?
grep -v ' -> ' "$tmpdir/tree"
check "src/ keeps its layers and has no loop" test $status -eq 0
check "the graph holds the calls between objects" grep -qx \
    'node/ibshare_node.c -> node/ibshare_node_serve.c (calls uct_ibshare_node_take_over)' \
    "$tmpdir/tree"
check "... and the includes" grep -qx \
    'rc/rc_share_ep.c -> md/ibshare_md.h (includes)' "$tmpdir/tree"
edges=$(sed -n 's/.* units, \([0-9]*\) edges.*/\1/p' "$tmpdir/tree")
files=$(grep -c . "$tmpdir/src_files")
check "every file of src/ is in the graph ($files files, $edges edges)" \
    grep -q "^$files files, $files units" "$tmpdir/tree"

# A node file that includes the md: against the layers
cp -R "$IBSHARE_SRCDIR/src" "$tmpdir/up"
sed -i 's|^#include "ibshare_node_int.h"$|&\n#include "md/ibshare_md.h"|' \
    "$tmpdir/up/node/ibshare_node_fault.c"
src_graph "$tmpdir/up" --files "$tmpdir/src_files" > "$tmpdir/up.out" 2>&1
status=$?
cat "$tmpdir/up.out"
check "an include upward fails the check" test $status -eq 1
check "... naming the file and the layer" grep -q \
    '^against the layers: node/ibshare_node_fault.c (node) includes md/ibshare_md.h (md)$' \
    "$tmpdir/up.out"

# Two files of one layer that call each other: a loop
mkdir -p "$tmpdir/loop/src/node" "$tmpdir/loop/obj/node"
printf 'void b(void);\nvoid a(void) { b(); }\n' > "$tmpdir/loop/src/node/a.c"
printf 'void a(void);\nvoid b(void) { a(); }\n' > "$tmpdir/loop/src/node/b.c"
for f in a b; do
    $IBSHARE_CC -c "$tmpdir/loop/src/node/$f.c" \
        -o "$tmpdir/loop/obj/node/libibshare_la-$f.o" || exit 99
done
src_graph "$tmpdir/loop/src" --objs "$tmpdir/loop/obj" > "$tmpdir/loop.out" 2>&1
status=$?
cat "$tmpdir/loop.out"
check "a loop of calls fails the check" test $status -eq 1
check "... naming it" grep -q '^cycle: node/a.c -> node/b.c -> node/a.c$' \
    "$tmpdir/loop.out"

finish
