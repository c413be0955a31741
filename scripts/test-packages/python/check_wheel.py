"""Checks the wheel and sdist in DIST the way auditwheel and a user's pip would see them.

    python check_wheel.py bindings/python/dist

The wheel must be tagged abi3 (one wheel for CPython >= 3.9) and manylinux2014 (glibc
2.17), carry the typing files, and its extension may only use glibc symbol versions up to
2.17 and link only libraries every manylinux system has. Exits 1 naming what is wrong.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

MAX_GLIBC = "2.17"
CHECK_GLIBC = Path(__file__).resolve().parent.parent / "check-glibc.sh"
# The manylinux2014 policy's allowed libraries (PEP 599), as the .so names them.
ALLOWED_LIBS = {
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libgcc_s.so.1",
    "libutil.so.1", "ld-linux-x86-64.so.2", "libstdc++.so.6", "libcrypt.so.1", "libnsl.so.1",
}
WHEEL_FILES = ["caerus/__init__.py", "caerus/sync.py", "caerus/py.typed", "caerus/_native.pyi", "caerus/errors.pyi"]
SDIST_FILES = ["pyproject.toml", "python/caerus/py.typed", "python/caerus/_native.pyi", "python/caerus/errors.pyi"]

problems: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        problems.append(what)


def only(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    if len(found) != 1:
        sys.exit(f"check_wheel: expected one {pattern} in {dist}, found {[p.name for p in found]}; run make wheel")
    return found[0]


def needed_libs(so: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(so)], check=True, capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def main() -> None:
    dist = Path(sys.argv[1] if len(sys.argv) > 1 else "dist")
    wheel = only(dist, "*.whl")
    sdist = only(dist, "*.tar.gz")
    print(f"{wheel.name}")

    _name, _version, python_tag, abi_tag, platform_tag = wheel.name[: -len(".whl")].split("-")
    check(python_tag == "cp39" and abi_tag == "abi3", f"tagged cp39-abi3 (got {python_tag}-{abi_tag})")
    platforms = platform_tag.split(".")
    check(
        any(p in ("manylinux2014_x86_64", "manylinux_2_17_x86_64") for p in platforms),
        f"tagged manylinux2014 / manylinux_2_17 (got {platform_tag})",
    )

    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for f in WHEEL_FILES:
            check(f in names, f"wheel holds {f}")
        sos = [n for n in names if n.startswith("caerus/_native") and n.endswith(".so")]
        check(sos == ["caerus/_native.abi3.so"], f"one abi3 extension module (got {sos})")
        wheel_meta = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        tags = re.findall(r"^Tag: (.+)$", zf.read(wheel_meta).decode(), re.M)
        check(all("abi3" in t and "manylinux" in t for t in tags) and tags, f"WHEEL metadata tags {tags}")
        if sos:
            with tempfile.TemporaryDirectory() as tmp:
                so = Path(zf.extract(sos[0], tmp))
                glibc = subprocess.run([str(CHECK_GLIBC), str(so), MAX_GLIBC], capture_output=True, text=True)
                print(glibc.stdout + glibc.stderr, end="")
                check(glibc.returncode == 0, f"glibc symbol versions <= {MAX_GLIBC}")
                libs = needed_libs(so)
                check(set(libs) <= ALLOWED_LIBS, f"links only manylinux libraries (NEEDED: {', '.join(libs)})")

    print(f"{sdist.name}")
    with tarfile.open(sdist) as tf:
        top = sdist.name[: -len(".tar.gz")]
        members = set(tf.getnames())
        for f in SDIST_FILES:
            check(f"{top}/{f}" in members, f"sdist holds {f}")

    if problems:
        sys.exit(f"check_wheel: {len(problems)} problem(s): " + "; ".join(problems))


if __name__ == "__main__":
    main()
