#!/usr/bin/env python3
"""Checks a Windows x64 DLL or .exe cross-built here the way Windows' loader would find its imports.

    scripts/test-packages/check-pe.py FILE [DLL...]     (DLL: also allowed, e.g. python3.dll)

No Windows Python runs here, so the import table is what can be checked (llvm-objdump -p, from
Debian's llvm): the machine is x86-64 and every imported DLL is one each Windows has (kernel32,
ntdll, the api-ms-win-* sets, ws2_32, ...) or one named on the command line. A MinGW runtime
(libgcc_s_seh-1.dll, libwinpthread-1.dll) or a versioned python3NN.dll would fail to load
there, or tie an abi3 extension to one CPython. Exits 1 naming what is wrong.
"""

from __future__ import annotations

import re
import subprocess
import sys

SYSTEM_DLLS = re.compile(
    r"^(kernel32|kernelbase|ntdll|advapi32|bcrypt|bcryptprimitives|crypt32|ncrypt|secur32|ws2_32"
    r"|mswsock|iphlpapi|userenv|user32|shell32|ole32|oleaut32|msvcrt|ucrtbase|synchronization"
    r"|api-ms-win-[a-z0-9-]+)\.dll$",
    re.I,
)


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit(__doc__.split("\n\n")[1])
    path, extra = sys.argv[1], {d.lower() for d in sys.argv[2:]}
    out = subprocess.run(
        ["llvm-objdump", "-p", path], check=True, capture_output=True, text=True
    ).stdout
    problems = []
    fmt = re.search(r"file format (\S+)", out)
    if not fmt or fmt.group(1) not in ("coff-x86-64", "pe-x86-64"):
        problems.append(f"format {fmt.group(1) if fmt else '?'}, expected coff-x86-64")
    dlls = re.findall(r"^\s*DLL Name:\s*(\S+)", out, re.M)
    if not dlls:
        problems.append("no import table")
    for dll in dlls:
        if not SYSTEM_DLLS.match(dll) and dll.lower() not in extra:
            problems.append(f"imports {dll}, which Windows does not have")
    for dll in extra:
        if dll not in (d.lower() for d in dlls):
            problems.append(f"does not import {dll}")
    name = path.rsplit("/", 1)[-1]
    if problems:
        print(f"check-pe: {name}: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"check-pe: {name}: x86-64, imports {', '.join(dict.fromkeys(dlls))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
