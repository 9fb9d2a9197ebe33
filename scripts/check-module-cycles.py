#!/usr/bin/env python3
"""Fails when the server's modules import each other in a cycle, or a layer imports one
above it.

Each source file of a crate is a module. A file depends on another when it names a path
into it (`crate::a::b`, `super::x`, `self::y`, `child::z`, or a `use` of those); a path through a
`mod.rs` that re-exports an item (`pub use child::Item`) counts as a dependency on the
child that defines it. Declaring a child module (`mod x;`) is not a dependency, and test
modules (`#[cfg(test)] mod ... { }`) are left out. Cycles are found with Tarjan's
algorithm and printed file by file. For the `skiff` crate, every top-level module also has
a layer (LAYERS, as ARCHITECTURE.md draws them): a module may use its own layer and those
below, never one above.

Usage: check-module-cycles.py [CRATE_SRC_DIR ...]   (default: the server's crates)
"""
import os
import re
import sys

DEFAULT_SRC = ["server/src", "server/http/src", "server/codec/src", "server/config/src"]

# The skiff crate's layers, top to bottom (ARCHITECTURE.md).
LAYERS = {
    "server/src": [
        ["cli"],
        ["lifecycle"],
        ["admin", "reload"],
        ["listener"],
        ["conn"],
        ["exchange"],
        ["state"],
        ["app"],
        ["static_files", "upstream"],
        ["http", "shaping", "metrics", "access_log", "settings", "shutdown", "error", "cache",
         "fs", "copy_tree", "tls", "allocator", "startup_pages", "copy_tuning", "coarse_clock", "idle_reclaim"],
    ],
}
PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP_RE = re.compile(r"\buse\s+((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)
REEXPORT_RE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+(?:self::)?([a-z_][a-z0-9_]*)::([^;]+);", re.S)


def strip_tests_and_comments(text):
    """Source without comments, string literals and #[cfg(test)] modules."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def module_files(src):
    """Maps module paths (tuples) to files, for one crate."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]):
                rel = []
            mods[tuple(rel)] = os.path.join(root, f)
    return mods


def reexports(mods, texts):
    """(module, item) -> child module that defines it, from `pub use child::...` lines."""
    table = {}
    for mod, path in mods.items():
        for m in REEXPORT_RE.finditer(texts[path]):
            child = mod + (m.group(1),)
            if child not in mods:
                continue
            body = m.group(2).strip()
            names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", body.strip("{}")) if body.startswith("{") else [body.split("::")[-1]]
            for name in names:
                if name not in ("self", "as"):
                    table[(mod, name)] = child
    return table


def resolve(mods, table, segments):
    """The file module a path points into: the longest module prefix, then re-exports."""
    best = ()
    for k in range(len(segments), -1, -1):
        if tuple(segments[:k]) in mods:
            best = tuple(segments[:k])
            break
    rest = segments[len(best):]
    while rest and (best, rest[0]) in table:
        best = table[(best, rest[0])]
        rest = rest[1:]
        while rest and best + (rest[0],) in mods:
            best, rest = best + (rest[0],), rest[1:]
    return best


def edges_of(mods, table, texts):
    edges = {m: set() for m in mods}
    for mod, path in mods.items():
        text = texts[path]
        # mod.rs-style module paths: `self` is the module itself, `super` its parent
        here = list(mod)
        uses = []
        for m in USE_GROUP_RE.finditer(text):
            base = m.group(1)
            for item in re.split(r",(?![^{]*\})", m.group(2)):
                item = item.strip().split(" as ")[0].strip()
                first = re.match(r"[A-Za-z_][A-Za-z0-9_]*", item)
                if first:
                    uses.append(base + "::" + first.group(0))
        uses += [m.group(1) + m.group(2) for m in PATH_RE.finditer(text)]
        # Paths relative to this module: `child::item` names a child module directly.
        for child in (m[-1] for m in mods if len(m) == len(mod) + 1 and m[: len(mod)] == mod):
            for m in re.finditer(r"(?<![:\w])" + child + r"((?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
                uses.append("self::" + child + m.group(1))
        for p in uses:
            parts = p.split("::")
            if parts[0] == "crate":
                segs = parts[1:]
            else:
                base = here[:]
                while parts and parts[0] in ("self", "super"):
                    if parts[0] == "super":
                        base = base[:-1]
                    parts = parts[1:]
                segs = base + parts
            target = resolve(mods, table, segs)
            if target != mod and not (len(target) < len(mod) and mod[: len(target)] == target and target_is_declaration_only(texts[mods[target]])):
                edges[mod].add(target)
    return edges


def target_is_declaration_only(text):
    """A mod.rs/lib.rs of only `mod` declarations and re-exports is not a dependency."""
    body = re.sub(r"\s+", " ", text)
    body = re.sub(r"#!?\[[^\]]*\]", "", body)
    body = re.sub(r"(pub(\([^)]*\))? )?(mod \w+;|use [^;]+;)", "", body)
    return body.strip() == ""


def cycles(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
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
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            strong(v)
    return out


def layer_violations(src, mods, edges):
    """Edges from a top-level module to one in a higher layer (or in no layer)."""
    layers = LAYERS.get(src)
    if not layers:
        return []
    rank = {m: len(layers) - i for i, names in enumerate(layers) for m in names}
    out = []
    for mod, deps in edges.items():
        if not mod:
            continue
        if mod[0] not in rank:
            out.append(f"{src}: module {mod[0]} is in no layer: add it to LAYERS")
            continue
        for dep in deps:
            if dep and dep[0] != mod[0] and rank.get(dep[0], 0) > rank[mod[0]]:
                out.append(f"{src}: {'::'.join(mod)} (layer of {mod[0]}) uses "
                           f"{'::'.join(dep)}, a layer above it")
    return sorted(set(out))


def main():
    srcs = sys.argv[1:] or DEFAULT_SRC
    failed = False
    for src in srcs:
        mods = module_files(src)
        texts = {p: strip_tests_and_comments(open(p).read()) for p in mods.values()}
        table = reexports(mods, texts)
        edges = edges_of(mods, table, texts)
        for v in layer_violations(src, mods, edges):
            failed = True
            print(v)
        found = cycles(edges)
        for comp in found:
            failed = True
            names = sorted("::".join(m) or "(crate root)" for m in comp)
            print(f"{src}: module cycle among: {', '.join(names)}")
            comp_set = set(comp)
            for m in sorted(comp):
                deps = sorted("::".join(d) for d in edges_of(mods, table, texts)[m] if d in comp_set)
                print(f"  {'::'.join(m) or '(crate root)'} -> {', '.join(deps)}")
        if not found:
            print(f"{src}: {len(mods)} modules, no import cycle"
                  + (", layers respected" if src in LAYERS and not failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
