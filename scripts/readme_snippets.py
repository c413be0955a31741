#!/usr/bin/env python3
"""The README's code blocks as the tests run them: a fenced block is a snippet when the line
before its fence is a marker

    <!-- snippet: NAME [file=FILE] -->

which moves with the block when text around it is rewritten. The package tests
(scripts/test-packages/*.sh) extract each snippet by name and run it as printed.

    readme_snippets.py list                   # NAME FILE SOURCE:LINE, one a line
    readme_snippets.py show NAME              # the block's text on stdout
    readme_snippets.py extract DIR NAME...    # each block into DIR/FILE (FILE defaults to NAME)
    readme_snippets.py lint                   # every block of the quick-start sections is marked,
                                              # names are unique, and a test names each one;
                                              # docs/es keeps one word per concept

--root DIR (or $SNIPPETS_ROOT) reads the Markdown files of another checkout, e.g. an old one,
to show that a test fails on what it printed."""

import argparse
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Files with snippets, and for each the level-2 headings (prefixes) of its quick-start
# sections, where every code block must be marked (not the set-up ones: `make run`, `make test`).
SOURCES = {
    "README.md": ("## Quick start", "## Python", "## Node", "## Kotlin", "## `dls lock`"),
    "docs/es/inicio-rapido.md": ("## 2.", "## 3."),
}
# Where the tests that run snippets live: lint wants each snippet's name in one of them.
TESTS = ("scripts/test-packages",)

# The Spanish text says one word per concept, as the Playground does: a raft term is a
# "mandato", a lease a "concesión". The words a translation drifts to are refused.
SPANISH_DRIFT = {"término de raft": "mandato", "arrendamiento": "concesión"}

MARKER = re.compile(r"^<!-- snippet: ([a-z0-9][a-z0-9-]*)(?: file=(\S+))? -->$")
FENCE = re.compile(r"^```(\S*)\s*$")


class Snippet:
    def __init__(self, name, file, lang, text, source, line):
        self.name, self.file, self.lang, self.text, self.source, self.line = name, file, lang, text, source, line


def parse(root, rel):
    """Yields (snippet or None, lang, line, in_quick_start) for every fenced block of root/rel."""
    lines = (root / rel).read_text(encoding="utf-8").splitlines()
    sections = SOURCES[rel]
    quick = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            quick = line.startswith(sections)
        fence = FENCE.match(line)
        if not fence:
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i] != "```":
            i += 1
        if i == len(lines):
            raise SystemExit(f"{rel}:{start + 1}: code block never closed")
        body = "\n".join(lines[start + 1 : i]) + "\n"
        marker = MARKER.match(lines[start - 1]) if start else None
        snippet = None
        if marker:
            name, file = marker.group(1), marker.group(2) or marker.group(1)
            snippet = Snippet(name, file, fence.group(1), body, rel, start + 1)
        elif start and lines[start - 1].startswith("<!-- snippet"):
            raise SystemExit(f"{rel}:{start}: malformed marker: {lines[start - 1]}")
        yield snippet, fence.group(1), start + 1, quick
        i += 1


def snippets(root):
    found = {}
    for rel in SOURCES:
        if not (root / rel).exists():
            continue
        for snippet, _, _, _ in parse(root, rel):
            if snippet is None:
                continue
            if snippet.name in found:
                first = found[snippet.name]
                raise SystemExit(f"{rel}:{snippet.line}: snippet {snippet.name} already at {first.source}:{first.line}")
            found[snippet.name] = snippet
    return found


def get(root, name):
    found = snippets(root)
    if name not in found:
        raise SystemExit(f"no snippet named {name} in {', '.join(SOURCES)} under {root}")
    return found[name]


def lint(root):
    errors = []
    for rel in SOURCES:
        for snippet, lang, line, quick in parse(root, rel):
            if quick and snippet is None:
                errors.append(f"{rel}:{line}: ```{lang} block in a quick-start section has no <!-- snippet: NAME --> marker")
    tests = "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for d in TESTS
        for p in sorted((REPO / d).rglob("*"))
        if p.is_file() and p.suffix in (".sh", ".py")
    )
    for name, snippet in snippets(root).items():
        if not re.search(rf"(?<![a-z0-9-]){re.escape(name)}(?![a-z0-9-])", tests):
            errors.append(f"{snippet.source}:{snippet.line}: snippet {name} is run by no test in {', '.join(TESTS)}")
    for path in sorted((root / "docs/es").glob("*.md")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for word, use in SPANISH_DRIFT.items():
                if re.search(rf"\b{word}", line, re.IGNORECASE):
                    errors.append(f"{path.relative_to(root)}:{n}: '{word}': docs/es says '{use}'")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        return 1
    print(f"readme-snippets: {len(snippets(root))} snippets marked, each run by a test")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(os.environ.get("SNIPPETS_ROOT") or REPO))
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    sub.add_parser("lint")
    show = sub.add_parser("show")
    show.add_argument("name")
    ext = sub.add_parser("extract")
    ext.add_argument("dir", type=Path)
    ext.add_argument("names", nargs="+")
    args = ap.parse_args()
    root = args.root.resolve()
    if args.cmd == "list":
        for s in snippets(root).values():
            print(f"{s.name} {s.file} {s.source}:{s.line}")
    elif args.cmd == "show":
        sys.stdout.write(get(root, args.name).text)
    elif args.cmd == "extract":
        args.dir.mkdir(parents=True, exist_ok=True)
        for name in args.names:
            s = get(root, name)
            (args.dir / s.file).write_text(s.text, encoding="utf-8")
    elif args.cmd == "lint":
        return lint(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
