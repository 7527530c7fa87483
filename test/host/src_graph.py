#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
"""The include and call graph of src/, and the two rules it must keep.

Layers, bottom up (src/README.md): compat, node, md, rc, and the component
at the top of src/. A file includes only its own layer and the ones below,
and an object file calls only into its own layer and the ones below. No
two files depend on each other, through any chain of includes and calls.

The include graph is the compiler's (-MM over every .c and .h of src/, with
the module's own flags); the call graph pairs the symbols each object file
leaves undefined with the ones another defines (nm). The nodes are files:
a header is not its source file (everyone includes the interface of a file
whose code calls back into theirs, which is no loop).

  src_graph.py --src DIR --cc CC [--cppflags FLAGS] [--objs DIR]
      [--files LIST] [--layers a,b,c] [--print]

--files: the files of the graph, a path relative to DIR a line (the
tree's list: a build in the source tree adds configure's headers to DIR,
which are no file of the tree, as in a build directory); default: every
.c and .h under DIR.

Exits 0 if both rules hold, 1 (naming each breach) if not, 2 on bad input.
"""
import argparse
import os
import shlex
import subprocess
import sys

DEFAULT_LAYERS = ['compat', 'node', 'md', 'rc', '']


def fail_input(msg):
    print('src_graph: ' + msg, file=sys.stderr)
    sys.exit(2)


def layer_of(unit, layers):
    head = unit.split('/')[0] if '/' in unit else ''
    if head not in layers:
        return None
    return head


def sources(src):
    found = []
    for root, _, files in os.walk(src):
        for name in files:
            if name.endswith(('.c', '.h')):
                found.append(os.path.relpath(os.path.join(root, name), src))
    return sorted(found)


def include_edges(src, cc, cppflags, files):
    """(from unit, to unit) for every header of files -MM names"""
    edges = set()
    src_abs = os.path.realpath(src)
    known = set(files)
    for rel in files:
        cmd = [*shlex.split(cc), *shlex.split(cppflags), '-MM', '-MG']
        if rel.endswith('.h'):
            cmd += ['-x', 'c']
        cmd.append(os.path.join(src, rel))
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            fail_input('%s -MM %s failed:\n%s' % (cc, rel, run.stderr))
        deps = run.stdout.replace('\\\n', ' ').split(':', 1)[1].split()
        for dep in deps:
            dep_abs = os.path.realpath(dep if os.path.isabs(dep)
                                       else os.path.join(os.getcwd(), dep))
            if not dep_abs.startswith(src_abs + os.sep):
                continue    # UCX's, the system's, or generated in builddir
            to = os.path.relpath(dep_abs, src_abs)
            if to not in known:
                continue    # generated in the source tree (--files)
            frm = rel
            if to != frm:
                edges.add((frm, to, 'includes'))
    return edges


def objects(objdir):
    """unit -> object file; libtool's PIC objects where both exist"""
    found = {}
    for root, _, files in os.walk(objdir):
        for name in files:
            if not name.endswith('.o'):
                continue
            # automake names an object TARGET-STEM.o
            stem = name[:-2].split('-', 1)[-1] + '.c'
            rel = os.path.relpath(root, objdir)
            rel = os.path.dirname(rel) if rel.endswith('.libs') else rel
            unit = stem if rel in ('.', '') else rel + '/' + stem
            if unit not in found or '.libs' in root:
                found[unit] = os.path.join(root, name)
    return found


def call_edges(objs):
    defined = {}
    undefined = {}
    for unit, path in objs.items():
        run = subprocess.run(['nm', path], capture_output=True, text=True)
        if run.returncode != 0:
            fail_input('nm %s failed: %s' % (path, run.stderr))
        undefined[unit] = set()
        for line in run.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in 'TDBRV':
                defined.setdefault(parts[2], unit)
            elif len(parts) == 2 and parts[0] == 'U':
                undefined[unit].add(parts[1])
    edges = set()
    for unit, syms in undefined.items():
        for sym in syms:
            owner = defined.get(sym)
            if owner is not None and owner != unit:
                edges.add((unit, owner, 'calls ' + sym))
    return edges


def find_cycle(edges):
    graph = {}
    for frm, to, _ in edges:
        graph.setdefault(frm, set()).add(to)
    state = {}
    stack = []

    def visit(node):
        state[node] = 'open'
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 'open':
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 'done'
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--src', required=True)
    parser.add_argument('--cc', required=True)
    parser.add_argument('--cppflags', default='')
    parser.add_argument('--objs')
    parser.add_argument('--files')
    parser.add_argument('--layers', default=','.join(DEFAULT_LAYERS))
    parser.add_argument('--print', action='store_true')
    args = parser.parse_args()
    layers = args.layers.split(',')
    if not os.path.isdir(args.src):
        fail_input('no source directory ' + args.src)

    if args.files:
        with open(args.files, encoding='utf-8') as f:
            files = sorted({line.strip() for line in f if line.strip()})
        missing = [rel for rel in files
                   if not os.path.isfile(os.path.join(args.src, rel))]
        if not files or missing:
            fail_input('--files %s: %s' % (args.files, 'no files' if not files
                       else 'not in %s: %s' % (args.src, ' '.join(missing))))
    else:
        files = sources(args.src)
    known = set(files)
    edges = include_edges(args.src, args.cc, args.cppflags, files)
    if args.objs:
        # (a build directory can hold the objects of files since moved)
        objs = {unit: path for unit, path in objects(args.objs).items()
                if unit in known}
        if not objs:
            fail_input('no object files under ' + args.objs)
        edges |= call_edges(objs)

    breaches = 0
    for unit in sorted({u for e in edges for u in e[:2]} | known):
        if layer_of(unit, layers) is None:
            print('outside the layers: %s (layers: %s)' %
                  (unit, ', '.join(l or 'top' for l in layers)))
            breaches += 1
    for frm, to, why in sorted(edges):
        lf, lt = layer_of(frm, layers), layer_of(to, layers)
        if args.print:
            print('%s -> %s (%s)' % (frm, to, why))
        if lf is None or lt is None:
            continue
        if layers.index(lt) > layers.index(lf):
            print('against the layers: %s (%s) %s %s (%s)' %
                  (frm, lf or 'top', why, to, lt or 'top'))
            breaches += 1
    cycle = find_cycle(edges)
    if cycle:
        print('cycle: ' + ' -> '.join(cycle))
        breaches += 1
    units = {u for e in edges for u in e[:2]}
    print('%d files, %d units, %d edges, %d breaches' %
          (len(files), len(units), len(edges), breaches))
    return 1 if breaches else 0


if __name__ == '__main__':
    sys.exit(main())
