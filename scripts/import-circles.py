#!/usr/bin/env python3
"""Report import circles between the files of each Rust crate (exit 1 if any).

An edge A -> B means file A names an item through `crate::`, `super::` or `self::` that
lives in file B (a `use` or an inline path). `mod x;` declarations are not edges: a parent
declaring its children is structure, not a dependency. A path is resolved to the deepest
module file it reaches, so `use crate::locks::table::LockTable` is an edge to
`locks/table.rs`, while `use crate::locks::LockTable` (a re-export) is an edge to
`locks/mod.rs`. Circles are the strongly connected components with more than one file.

Usage: scripts/import-circles.py [CRATE_SRC_DIR ...]   (default: every crate's src/ in the workspace)
"""
import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def module_of(src, path):
    """Module path (list of names) of a file under src/."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def file_of(src, module):
    """The file that defines `module`, or None."""
    if not module:
        for root in ("lib.rs", "main.rs"):
            if os.path.exists(os.path.join(src, root)):
                return os.path.join(src, root)
        return None
    base = os.path.join(src, *module)
    for candidate in (base + ".rs", os.path.join(base, "mod.rs")):
        if os.path.exists(candidate):
            return candidate
    return None


def resolve(src, here, anchor, segments):
    """The deepest existing module file named by anchor::segments, seen from module `here`."""
    if anchor == "crate":
        base = []
    elif anchor == "self":
        base = list(here)
    else:  # super (possibly repeated: super::super::x)
        base = list(here[:-1])
        while segments and segments[0] == "super":
            base = base[:-1]
            segments = segments[1:]
    best = file_of(src, base)
    module = list(base)
    for seg in segments:
        module.append(seg)
        found = file_of(src, module)
        if found is None:
            break
        best = found
    return best


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def edges_of(src, path):
    here = module_of(src, path)
    # A file `foo.rs` holding `mod tests { use super::*; }` refers to itself: ignore self-edges.
    text = strip_comments(open(path, encoding="utf-8").read())
    targets = set()
    for anchor, prefix, group in USE_GROUP.findall(text):
        prefix_segs = [s for s in prefix.split("::") if s]
        for item in re.split(r",", group):
            item = item.strip()
            if not item:
                continue
            segs = [s for s in re.split(r"::", re.sub(r"\s+as\s+\w+$", "", item)) if s and s not in ("{", "}", "*", "self")]
            segs = [re.sub(r"[{}\s*]", "", s) for s in segs]
            segs = [s for s in segs if s]
            targets.add(resolve(src, here, anchor, prefix_segs + segs))
    for anchor, rest in PATH.findall(text):
        segs = [s for s in rest.split("::") if s and s != "{"]
        targets.add(resolve(src, here, anchor, segs))
    targets.discard(None)
    targets.discard(path)
    return targets


def circles(src):
    files = []
    for root, _, names in os.walk(src):
        files += [os.path.join(root, n) for n in names if n.endswith(".rs")]
    graph = {f: edges_of(src, f) for f in files}
    # Tarjan's strongly connected components.
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

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

    sys.setrecursionlimit(10000)
    for f in sorted(files):
        if f not in index:
            visit(f)
    return out, graph


def workspace_srcs(top):
    srcs = []
    for root, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ("target", "node_modules", ".git", "sdks")]
        if "Cargo.toml" in names and os.path.isdir(os.path.join(root, "src")):
            srcs.append(os.path.join(root, "src"))
    return sorted(srcs)


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    srcs = sys.argv[1:] or workspace_srcs(top)
    total = 0
    for src in srcs:
        found, graph = circles(src)
        for comp in found:
            total += 1
            members = set(comp)
            print(f"circle in {os.path.relpath(src, top)}:")
            for f in comp:
                back = sorted(os.path.relpath(t, src) for t in graph[f] if t in members)
                print(f"  {os.path.relpath(f, src)} -> {', '.join(back)}")
    print(f"{total} import circle(s) in {len(srcs)} crate(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
