#!/usr/bin/env python3
"""Packs the Python SDK's abi3 manylinux2014 wheel around an extension built elsewhere.

    scripts/build-wheel.py --extension libcaerus_native.so --out bindings/python/dist
        [--platform macosx_11_0_arm64 ...]   (scripts/release-all.sh: one wheel per platform)

`make wheel` builds the extension with cargo-zigbuild into the same release tree as the
server, the Node addon and the JVM library (`make release-portable`), so the four share
every compiled dependency; maturin would link it with zig wrappers of its own and compile
that whole tree a second time. This script then writes what `maturin build` would: the
package files from bindings/python/python, the extension as caerus/_native.abi3.so, and the
.dist-info (METADATA from pyproject.toml and the README, WHEEL with the abi3/manylinux tags,
RECORD with hashes), with fixed timestamps so the same inputs give the same bytes. The sdist
stays maturin's (`maturin sdist` compiles nothing). scripts/test-packages/python/check_wheel.py
checks the result; `make test-wheel` installs and runs it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / "bindings" / "python"
# One wheel for CPython >= 3.9 (abi3) per platform; by default glibc >= 2.17 on x86_64 (the
# extension is linked against glibc 2.17 symbols; check_wheel.py verifies it).
PYTHON_TAG, ABI_TAG = "cp39", "abi3"
DEFAULT_PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_17_x86_64"]
EPOCH = (1980, 1, 1, 0, 0, 0)


def workspace_version() -> str:
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    return cargo["workspace"]["package"]["version"]


def metadata(project: dict, version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"License: {project['license']['text']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {r} ; extra == '{extra}'" for r in requirements]
    lines.append("Description-Content-Type: text/markdown; charset=UTF-8; variant=GFM")
    return "\n".join(lines) + "\n\n" + (PY / project["readme"]).read_text()


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extension", required=True, type=Path, help="the built cdylib (stripped or not)")
    parser.add_argument("--out", required=True, type=Path, help="directory for the wheel")
    parser.add_argument(
        "--platform", action="append", help=f"platform tag, repeatable (default: {' '.join(DEFAULT_PLATFORMS)})"
    )
    args = parser.parse_args()
    platforms = args.platform or DEFAULT_PLATFORMS
    if not args.extension.is_file():
        sys.exit(f"build-wheel: {args.extension} is not a file (run `make wheel` at the top level)")

    pyproject = tomllib.loads((PY / "pyproject.toml").read_text())
    project, maturin = pyproject["project"], pyproject["tool"]["maturin"]
    version = workspace_version()
    dist_name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    package_dir = PY / maturin["python-source"]
    # CPython on Windows imports an abi3 extension as _native.pyd, elsewhere as _native.abi3.so.
    suffix = ".pyd" if platforms[0].startswith("win") else ".abi3.so"
    module = maturin["module-name"].replace(".", "/") + suffix  # caerus/_native.abi3.so

    files: list[tuple[str, bytes]] = []
    for path in sorted(package_dir.rglob("*")):
        rel = path.relative_to(package_dir).as_posix()
        # Leftovers of `maturin develop` and of running the package in place.
        if path.is_dir() or "__pycache__" in rel or rel.endswith((".so", ".pyd", ".pyc")):
            continue
        files.append((rel, path.read_bytes()))
    files.append((module, args.extension.read_bytes()))

    info = f"{dist_name}-{version}.dist-info"
    tags = "".join(f"Tag: {PYTHON_TAG}-{ABI_TAG}-{p}\n" for p in platforms)
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: caerus-dls scripts/build-wheel.py\nRoot-Is-Purelib: false\n{tags}"
    files.append((f"{info}/METADATA", metadata(project, version).encode()))
    files.append((f"{info}/WHEEL", wheel_meta.encode()))
    record = "\n".join(record_line(n, d) for n, d in files) + f"\n{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode()))

    args.out.mkdir(parents=True, exist_ok=True)
    wheel = args.out / f"{dist_name}-{version}-{PYTHON_TAG}-{ABI_TAG}-{'.'.join(platforms)}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            entry = zipfile.ZipInfo(name, EPOCH)
            entry.external_attr = (0o755 if name.endswith((".so", ".pyd")) else 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
    print(f"build-wheel: {wheel.relative_to(ROOT) if wheel.is_relative_to(ROOT) else wheel} ({len(files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
