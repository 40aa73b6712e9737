#!/usr/bin/env python3
"""Download the wheels an offline GPU node lacks (config/node-wheels.txt) for its Python and manylinux x86_64, into
one folder, and print the folder's size and list (`make wheelhouse PYTHON_VERSION=3.12`; docs/gpu.md).

Each line of the list is fetched without its declared dependencies (pip download --no-deps --only-binary): the
list names every wheel itself. ``drop=<prefix>`` after a requirement repacks its wheel without the files under that
prefix (the wheel's RECORD rewritten to match); nothing else of a wheel changes. Exits 1 when the folder is larger
than --max-mib. Standard library only: it runs with any Python that has pip.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "config" / "node-wheels.txt"
#: pip's platform tags for a manylinux x86_64 node (glibc >= 2.28: any current cluster's)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_12_x86_64", "manylinux2010_x86_64", "any")


def canonical(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503), for a requirement or a wheel's file name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_list(path: Path = LIST) -> list[tuple[str, list[str]]]:
    """(requirement, prefixes to drop) per line of the list."""
    out = []
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            out.append((words[0], [w.removeprefix("drop=") for w in words[1:] if w.startswith("drop=")]))
    return out


def download_command(requirements: list[str], folder: Path, python_version: str) -> list[str]:
    abi = "cp" + python_version.replace(".", "")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
               "--abi", abi, "--abi", "abi3", "--abi", "none", "--dest", str(folder)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    return command + requirements


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def drop_files(wheel: Path, prefixes: list[str]) -> int:
    """Rewrite ``wheel`` without the files under ``prefixes``; returns the bytes the wheel lost."""
    before = wheel.stat().st_size
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        record = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        kept = [i for i in src.infolist() if not i.filename.startswith(tuple(prefixes)) and i.filename != record]
        lines = []
        for info in kept:
            data = src.read(info)
            dst.writestr(info, data)
            lines.append(f"{info.filename},{_hash(data)},{len(data)}")
        dst.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")
    os.replace(tmp, wheel)
    return before - wheel.stat().st_size


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-version", default="3.12", help="the node's Python, e.g. 3.12 (default)")
    parser.add_argument("--dest", type=Path, default=None, help="the folder (default: .wheelhouse/py<version>)")
    parser.add_argument("--list", type=Path, default=LIST, help="the wheels (default: config/node-wheels.txt)")
    parser.add_argument("--max-mib", type=float, default=48.0, help="the largest the folder may be (default 48)")
    args = parser.parse_args(argv)
    dest = args.dest or ROOT / ".wheelhouse" / f"py{args.python_version}"
    dest.mkdir(parents=True, exist_ok=True)
    for stale in dest.glob("*.whl"):  # the folder is the list's, nothing else (pip's cache keeps a rerun quick)
        stale.unlink()
    wanted = read_list(args.list)
    subprocess.run(download_command([r for r, _ in wanted], dest, args.python_version), check=True)
    for requirement, prefixes in wanted:
        if prefixes:
            name = canonical(requirement.split("==")[0])
            for wheel in dest.glob("*.whl"):
                if canonical(wheel.name.split("-")[0]) == name:
                    print(f"{wheel.name}: {mib(drop_files(wheel, prefixes))} dropped ({', '.join(prefixes)})")
    wheels = sorted(dest.glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels)
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 1024:9.0f} KiB  {wheel.name}")
    print(f"{dest}: {len(wheels)} wheels, {mib(total)} (limit {args.max_mib:g} MiB) for Python {args.python_version}")
    if total > args.max_mib * 2**20:
        print(f"wheelhouse: larger than {args.max_mib:g} MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
