#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The documentation holds together (issue 24 moved the README's depth into
# doc/): every relative link of every Markdown page of ours names a file
# or directory of the tree, and every "#anchor" a heading of its page (as
# GitHub makes anchors of headings); the README stays a five-minute read,
# at most 250 lines. Web links are not followed (no network here).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

# links DIR PAGE...: "PAGE: LINK: what is wrong" for each broken link
links() {
    /usr/bin/python3 - "$@" <<'EOF'
import functools, os, re, sys

top, pages = sys.argv[1], sys.argv[2:]
link = re.compile(r"\]\(([^)\s]*)\)")
fence = re.compile(r"^\s*(```|~~~)")


@functools.lru_cache(maxsize=None)
def anchors(path):
    """The anchors GitHub gives the headings of the page at path"""
    found, seen, code = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if fence.match(line):
                code = not code
            m = None if code else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower())
            slug = slug.replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else "%s-%d" % (slug, n))
    return found


for page in pages:
    code = False
    with open(os.path.join(top, page), encoding="utf-8") as f:
        text = []
        for line in f:
            if fence.match(line):
                code = not code
            elif not code:
                text.append(re.sub(r"`[^`]*`", "", line))
    for target in link.findall("".join(text)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        where = os.path.normpath(os.path.join(top, os.path.dirname(page),
                                              path)) if path else \
            os.path.join(top, page)
        if not os.path.exists(where):
            print("%s: %s: no such file" % (page, target))
        elif anchor and os.path.isfile(where) and where.endswith(".md") \
                and anchor not in anchors(where):
            print("%s: %s: no such heading" % (page, target))
EOF
}

# The pages: the tree's (git's list, or in a release tarball its MANIFEST:
# test/lib.sh's source_files)
source_files > "$tmpdir/list"
check "the tree lists its files (git's list or the tarball's MANIFEST)" \
      test $? -eq 0
grep '\.md$' "$tmpdir/list" | grep -v '^contrib/vendor/' | sort > "$tmpdir/pages"
# shellcheck disable=SC2046  # (the pages' names have no blanks)
links "$IBSHARE_SRCDIR" $(cat "$tmpdir/pages") > "$tmpdir/broken"
n=$(grep -c . "$tmpdir/pages")
sed 's/^/    /' "$tmpdir/broken"
check "the pages include the README and doc/'s ($n)" \
      sh -c "grep -qx README.md '$tmpdir/pages' &&
             grep -qx doc/bench.md '$tmpdir/pages' && test $n -ge 20"
check "every relative link and anchor of the $n pages resolves\
 ($(grep -c . "$tmpdir/broken") do not)" test ! -s "$tmpdir/broken"
lines=$(wc -l < "$IBSHARE_SRCDIR/README.md")
check "the README is at most 250 lines ($lines)" test "$lines" -le 250

# The check itself finds a missing file, a missing heading and a heading's
# second anchor, and passes links in code and web links by
mkdir "$tmpdir/t"
cat > "$tmpdir/t/a.md" <<'EOF'
# Top
## Part (one)
## Part (one)
[ok](a.md#top) [ok](#part-one) [ok](#part-one-1) [web](https://example.org/x)
`[in code](nowhere.md)`
```
[in a block](nowhere.md)
```
[bad](nowhere.md) [bad](a.md#no-such-part)
EOF
links "$tmpdir/t" a.md > "$tmpdir/t/out"
cat "$tmpdir/t/out"
check "(and it finds a missing page and a missing heading, nothing else)" \
      sh -c "test \$(grep -c . '$tmpdir/t/out') -eq 2 &&
             grep -q 'nowhere.md: no such file' '$tmpdir/t/out' &&
             grep -q 'a.md#no-such-part: no such heading' '$tmpdir/t/out'"
finish
