#!/usr/bin/env python3
"""scripts/check-module-cycles.py — owns: the check that no module of any workspace crate uses
another that uses it back, directly or through others (what `make test` runs as `modules`).

For every target root of every workspace crate (src/lib.rs, src/main.rs, src/bin/*.rs, the
[[test]] paths of its manifest) it follows the `mod` declarations (test-only modules left out) and draws an edge from a module to
each module its non-test code names: `use crate::a::b`, `use super::x`, `self::y`, a child's
`child::item`, or a path spelt out in code (`crate::a::f()`). An item re-exported by a parent
counts as the parent's, so a child that reaches a sibling's item through `super::Item` depends on
its parent. Comments do not count. Every strongly connected set of two or more modules is a
circle: printed with the edges that make it, and the check fails.

Why not `cargo modules dependencies --acyclic`: it loads every crate through rust-analyzer
(k8s-openapi included) on each run, minutes on two cores, where this takes a second; the rule
checked is the same (uses between modules of one crate).

Usage: scripts/check-module-cycles.py [crate-dir ...]   (default: every workspace member)
"""

import os
import re
import sys
import tomllib
from collections import defaultdict

TEST_MOD = re.compile(r'#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;')
MOD_DECL = re.compile(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', re.M)
PATH = re.compile(r'(?<![\w:])(crate|super|self)((?:::\w+)+)')
GROUP = re.compile(r'\buse\s+((?:crate|super|self)(?:::\w+)*)::\{')


def blank(src):
    """`src` with comments removed and string and character literals emptied, read as Rust's
    lexer reads them (raw strings, escapes, lifetimes that look like characters)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            i = src.find('\n', i)
            i = n if i < 0 else i
        elif src.startswith('/*', i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith('/*', i):
                    depth, i = depth + 1, i + 2
                elif src.startswith('*/', i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (m := re.match(r'b?r(#*)"', src[i:])) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == '_')):
            end = src.find('"' + m.group(1), i + m.end())
            out.append('""')
            i = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == '\\' else 1
            out.append('""')
            i += 1
        elif c == "'" and (m := re.match(r"'(?:\\.[^']*|[^\\'])'", src[i:])):
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def strip(src):
    """Non-test code without comments or string contents."""
    src = blank(src)
    # An inline test module runs to the end of the file in this codebase's layout.
    m = re.search(r'#\[cfg\(test\)\]\s*mod\s+\w+\s*\{', src)
    return src[: m.start()] if m else src


def group_items(src, start):
    """The items of a `use prefix::{...};` group starting at `start` (after the brace)."""
    depth, i = 1, start
    while depth and i < len(src):
        depth += {'{': 1, '}': -1}.get(src[i], 0)
        i += 1
    body = src[start : i - 1]
    items, depth, cur = [], 0, ''
    for ch in body:
        if ch == ',' and depth == 0:
            items.append(cur)
            cur = ''
            continue
        depth += {'{': 1, '}': -1}.get(ch, 0)
        cur += ch
    items.append(cur)
    out = []
    for item in items:
        item = item.strip().split(' as ')[0].strip()
        if not item:
            continue
        out.append(item.split('::{')[0].rstrip(':'))
    return out


class Crate:
    def __init__(self, root_file):
        self.files = {}  # module path (tuple) -> file
        self.walk((), root_file, os.path.dirname(root_file), True)

    def walk(self, path, file, dir_, is_root):
        self.files[path] = file
        src = open(file, encoding='utf-8').read()
        tests = set(TEST_MOD.findall(src))
        # A module file `a.rs` keeps its children in `a/`; `mod.rs`, `lib.rs` and `main.rs`
        # keep them beside themselves.
        base = os.path.basename(file)
        child_dir = dir_ if is_root or base == 'mod.rs' else os.path.join(dir_, base[:-3])
        for name in MOD_DECL.findall(strip(src)):
            if name in tests:
                continue
            for candidate in (os.path.join(child_dir, name + '.rs'),
                              os.path.join(child_dir, name, 'mod.rs')):
                if os.path.exists(candidate):
                    self.walk(path + (name,), candidate, os.path.dirname(candidate), False)
                    break

    def resolve(self, cur, segs):
        if segs[0] == 'crate':
            base, rest = [], segs[1:]
        else:
            base, rest = list(cur), segs
            while rest and rest[0] in ('super', 'self'):
                if rest[0] == 'super':
                    base = base[:-1]
                rest = rest[1:]
        for n in range(len(rest), -1, -1):
            cand = tuple(base + rest[:n])
            if cand in self.files:
                return cand
        return None

    def edges(self):
        out = defaultdict(set)
        for mod, file in self.files.items():
            src = strip(open(file, encoding='utf-8').read())
            targets = []
            for m in GROUP.finditer(src):
                prefix = m.group(1).split('::')
                for item in group_items(src, m.end()):
                    targets.append(prefix + [s for s in item.split('::') if s and s != 'self'])
            for m in PATH.finditer(src):
                targets.append([m.group(1)] + m.group(2).split('::')[1:])
            for child in (c for c in self.files if len(c) == len(mod) + 1 and c[: len(mod)] == mod):
                if re.search(r'(?<![\w:])' + re.escape(child[-1]) + r'::', src):
                    out[mod].add(child)
            for segs in targets:
                t = self.resolve(mod, segs)
                if t is not None and t != mod:
                    out[mod].add(t)
        return out


def circles(edges, nodes):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(100000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


def name(path):
    return '::'.join(path) or 'crate'


def roots(crate_dir):
    src = os.path.join(crate_dir, 'src')
    out = [os.path.join(src, f) for f in ('lib.rs', 'main.rs') if os.path.exists(os.path.join(src, f))]
    bins = os.path.join(src, 'bin')
    if os.path.isdir(bins):
        out += sorted(os.path.join(bins, f) for f in os.listdir(bins) if f.endswith('.rs'))
    # Test targets named in the manifest (the end-to-end binaries; some have modules).
    with open(os.path.join(crate_dir, 'Cargo.toml'), 'rb') as f:
        manifest = tomllib.load(f)
    out += [os.path.join(crate_dir, t['path']) for t in manifest.get('test', []) if 'path' in t]
    return out


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = sys.argv[1:]
    if not dirs:
        with open(os.path.join(top, 'Cargo.toml'), 'rb') as f:
            dirs = [os.path.join(top, m) for m in tomllib.load(f)['workspace']['members']]
    failed = False
    checked = 0
    for d in dirs:
        for root in roots(d):
            crate = Crate(root)
            edges = crate.edges()
            checked += len(crate.files)
            for comp in circles(edges, crate.files):
                failed = True
                members = set(comp)
                print(f'{os.path.relpath(root, top)}: modules in a circle: {", ".join(name(m) for m in comp)}')
                for m in comp:
                    uses = sorted(name(t) for t in edges[m] if t in members)
                    print(f'  {name(m)} uses {", ".join(uses)}')
    if failed:
        print('module circles found: move what both sides need into a module of its own')
        return 1
    print(f'no module circles ({checked} modules)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
