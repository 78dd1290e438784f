#!/usr/bin/env python3
"""The module import graph of a crate, and its circles.

Usage: .ci/imports.py CRATE_SRC_DIR [--depth N] [--edges] [--allow FILE]...

With --depth N, files are merged into their modules N levels down (1: the top-level folders).

Each source file is a node. A file imports another when it names an item that the other file
defines: through a `use` path, a `crate::`/`super::`/`self::` path in code, or a glob import whose
names it then uses. Paths through a module's `pub use` re-exports resolve to the file that defines
the item, so a `mod.rs` that only declares and re-exports its children (a map) is not on the way.
A parent's `mod child;` is not an import. Test-only files (`loom_*.rs`, `*tests.rs`) and
`#[cfg(...test...)] mod name { .. }` blocks at the end of a file are left out: tests may reach anywhere.

Prints the strongly connected components with more than one file (the circles) and exits 1 if
there is one, unless every file of it is listed with --allow (a circle argued in a comment).
"""

import os
import re
import sys
from collections import defaultdict

ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(?:async\s+)?(?:const\s+)?"
    r"(?:struct|enum|fn|trait|type|const|static|union|mod)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
MACRO = re.compile(r"^\s*macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)", re.M)
USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
PATH = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def strip(text):
    """Drops comments, string literals and a trailing `#[cfg(test)] mod ...` block."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    cut = re.search(r"#\[cfg\([^\]]*\btest\b[^\]]*\)\]\s*mod\s+\w+\s*\{", text)
    if cut:
        text = text[: cut.start()]
    return text


def expand(tree):
    """`a::{b, c::{d as e}}` -> [(['a','b'], 'b'), (['a','c','d'], 'e')]; globs end in '*'."""
    tree = re.sub(r"\s+as\s+", "@", tree)  # `x as y`, kept apart before spaces go
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for part in parts:
            if not part:
                continue
            if "{" in part:
                head, inner = part.split("{", 1)
                head = [p for p in head.split("::") if p]
                walk(prefix + head, inner[:-1])
            else:
                alias = None
                if "@" in part:
                    part, alias = part.split("@", 1)
                segs = prefix + [p for p in part.split("::") if p]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                if segs:
                    out.append((segs, alias or segs[-1]))

    walk([], tree)
    return out


class Crate:
    def __init__(self, root):
        self.root = root
        self.files = {}  # module path tuple -> file path
        for dirpath, _, names in os.walk(root):
            for name in names:
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)[:-3].split(os.sep)
                if rel[-1] in ("lib", "main", "mod"):
                    rel = rel[:-1]
                self.files[tuple(rel)] = path
        self.text = {m: strip(open(p).read()) for m, p in self.files.items()}
        self.items = {m: set(ITEM.findall(t)) | set(MACRO.findall(t)) for m, t in self.text.items()}
        self.uses = {m: [(bool(pub), expand(tree)) for pub, tree in USE.findall(t)] for m, t in self.text.items()}

    def module_of(self, mod, segs):
        """Resolves a path's leading `crate`/`super`/`self` segments; returns (module, rest)."""
        if segs[0] == "crate":
            base, segs = (), segs[1:]
        elif segs[0] in ("super", "self"):
            base = mod
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
        elif mod + (segs[0],) in self.files:
            base = mod  # `use child::Item` names a child module, as `self::child` would
        else:
            return None, segs  # an external crate
        # Descend while the next segment is a module with its own file.
        while segs and base + (segs[0],) in self.files:
            base, segs = base + (segs[0],), segs[1:]
        return base, segs

    def define(self, mod, name, seen=None):
        """The file that defines `name` as seen from module `mod` (following its re-exports)."""
        seen = seen or set()
        if (mod, name) in seen or mod not in self.files:
            return None
        seen.add((mod, name))
        if mod + (name,) in self.files:
            return mod + (name,)
        for pub, entries in self.uses[mod]:
            for segs, alias in entries:
                if alias == name and segs[-1] != "*":
                    target = self.resolve(mod, segs, seen)
                    if target:
                        return target
        if name in self.items[mod]:
            return mod
        for pub, entries in self.uses[mod]:
            for segs, alias in entries:
                if segs[-1] == "*":
                    base, rest = self.module_of(mod, segs[:-1])
                    if base is not None and not rest:
                        target = self.define(base, name, seen)
                        if target:
                            return target
        return None

    def resolve(self, mod, segs, seen=None):
        base, rest = self.module_of(mod, segs)
        if base is None:
            return None
        if not rest:
            return base
        return self.define(base, rest[0], seen) or base

    def edges(self):
        graph = defaultdict(set)
        for mod, text in self.text.items():
            targets = set()
            code = USE.sub("", text)
            # A name a glob brings in: an item used anywhere, or a module used as a path's head
            # (a method call `.publish(` does not name the module `publish`).
            heads = set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*::", code))
            modules = {m[-1] for m in self.files if m}
            names = {n for n in IDENT.findall(code) if n not in modules or n in heads}
            for pub, entries in self.uses[mod]:
                for segs, alias in entries:
                    if segs[-1] == "*":
                        base, rest = self.module_of(mod, segs[:-1])
                        if base is None or rest:
                            continue
                        for name in names:
                            target = self.define(base, name)
                            if target and target != mod:
                                targets.add(target)
                    else:
                        base, _ = self.module_of(mod, segs)
                        if base is None:
                            continue
                        if pub and base[: len(mod)] == mod and base != mod:
                            continue  # a map re-exporting its own child's item
                        target = self.resolve(mod, segs)
                        if target is not None:
                            targets.add(target)
            for path in PATH.findall(USE.sub("", text)):
                target = self.resolve(mod, path.split("::"))
                if target is not None:
                    targets.add(target)
            for target in targets:
                # A module naming its own child through `self::child` is declaring it.
                if target != mod and target != ():
                    graph[mod].add(target)
        return graph


def tests_only(mod):
    return mod and (mod[-1].startswith("loom") or mod[-1].endswith("tests"))


def circles(graph, nodes):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def name(mod):
    return "::".join(mod) or "lib"


def main():
    args = sys.argv[1:]
    allow = set()
    while "--allow" in args:
        i = args.index("--allow")
        allow.add(args[i + 1])
        del args[i : i + 2]
    depth = None
    if "--depth" in args:
        i = args.index("--depth")
        depth = int(args[i + 1])
        del args[i : i + 2]
    show = "--edges" in args
    args = [a for a in args if a != "--edges"]
    crate = Crate(args[0])
    graph = crate.edges()
    nodes = [m for m in crate.files if not tests_only(m)]
    graph = {m: {t for t in ts if not tests_only(t)} for m, ts in graph.items() if not tests_only(m)}
    if depth is not None:
        collapsed = defaultdict(set)
        for m, ts in graph.items():
            for t in ts:
                if m[:depth] != t[:depth]:
                    collapsed[m[:depth]].add(t[:depth])
        graph = collapsed
        nodes = sorted({m[:depth] for m in nodes})
    if show:
        for mod in sorted(graph):
            print(f"{name(mod)} -> {', '.join(sorted(name(t) for t in graph[mod]))}")
    bad = argued_count = 0
    for comp in circles(graph, nodes):
        names = [name(m) for m in comp]
        argued = all(n in allow for n in names)
        print(("argued circle: " if argued else "circle: ") + " <-> ".join(names))
        if argued:
            argued_count += 1
        else:
            bad += 1
            for m in comp:
                inside = sorted(name(t) for t in graph.get(m, ()) if t in comp)
                print(f"    {name(m)} -> {', '.join(inside)}")
    if not bad:
        beyond = f" beyond the {argued_count} allowed" if argued_count else ""
        print(f"{args[0]}: no import circles{beyond} ({len(nodes)} files)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
