#!/usr/bin/env python3
"""Checks a macOS binary cross-built here the way a Mac's loader would read it.

    scripts/test-packages/check-macho.py FILE ARCH MIN_MACOS     (ARCH x86_64 or aarch64)

No Mac runs here, so its load commands are what can be checked (llvm-objdump, from Debian's
llvm): the CPU type, the minimum macOS in LC_BUILD_VERSION (or LC_VERSION_MIN_MACOSX) no later
than MIN_MACOS, and only libraries every macOS has (libSystem, libiconv and its libcharset,
CoreFoundation):
a path from this machine or a Homebrew library would fail to load there. Exits 1 naming
what is wrong.
"""

from __future__ import annotations

import re
import subprocess
import sys

CPU = {"x86_64": "X86_64", "aarch64": "ARM64"}
SYSTEM_LIBS = re.compile(
    r"^(/usr/lib/libSystem\.B\.dylib|/usr/lib/libiconv\.2\.dylib|/usr/lib/libcharset\.1\.dylib|/usr/lib/libresolv\.9\.dylib"
    r"|/usr/lib/libc\+\+\.1\.dylib|/System/Library/Frameworks/CoreFoundation\.framework/Versions/A/CoreFoundation)$"
)


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def main() -> int:
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    path, arch, min_macos = sys.argv[1:]
    out = subprocess.run(
        ["llvm-objdump", "--macho", "--private-headers", path],
        check=True, capture_output=True, text=True,
    ).stdout
    problems = []
    header = re.search(r"^\s*MH_MAGIC\S*\s+(\S+)\s", out, re.M)
    cpu = header.group(1) if header else "?"
    if cpu != CPU[arch]:
        problems.append(f"CPU type {cpu}, expected {CPU[arch]}")
    # One dict per load command: its "key value" lines.
    commands = []
    for block in re.split(r"^Load command \d+$", out, flags=re.M)[1:]:
        fields = {}
        for line in block.splitlines():
            key, _, value = line.strip().partition(" ")
            fields.setdefault(key, value.strip())
        commands.append(fields)
    minos = []
    for c in commands:
        if c.get("cmd") == "LC_BUILD_VERSION":
            if c.get("platform") not in ("macos", "1"):
                problems.append(f"platform {c.get('platform')} is not macOS")
            minos.append(c.get("minos", "?"))
        elif c.get("cmd") == "LC_VERSION_MIN_MACOSX":
            minos.append(c.get("version", "?"))
    if not minos:
        problems.append("no LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX")
    for v in minos:
        if not re.fullmatch(r"\d+(\.\d+)*", v) or version(v) > version(min_macos):
            problems.append(f"needs macOS {v}, later than {min_macos}")
    dylibs = [
        c["name"].split(" (offset")[0]
        for c in commands
        if c.get("cmd") in ("LC_LOAD_DYLIB", "LC_LOAD_WEAK_DYLIB", "LC_REEXPORT_DYLIB")
    ]
    for lib in dylibs:
        if not SYSTEM_LIBS.match(lib):
            problems.append(f"links {lib}, which a Mac does not have")
    if not any(lib.startswith("/usr/lib/libSystem") for lib in dylibs):
        problems.append("does not link libSystem")
    name = path.rsplit("/", 1)[-1]
    if problems:
        print(f"check-macho: {name}: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"check-macho: {name}: {cpu}, macOS >= {', '.join(minos)}, links {', '.join(dylibs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
