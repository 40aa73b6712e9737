"""A stand-in for an offline GPU node's Python on this machine (tests/test_gpu_node.py): a virtual environment that
sees only the node list's packages (config/node-packages.txt) and what they depend on, taken from the running
environment without copying: a folder of symlinks to exactly those distributions' files.

A real node has Python, pip and the node list's packages installed (each with its own dependencies); nothing else.
The folder below is that: for every distribution in the closure of the node list's requirements (plus pip, which
every Python install has), a symlink to each of its top-level files and folders, read from the distribution's own
RECORD (importlib.metadata). A folder that other distributions share (a namespace package such as ``nvidia``) is
made real and linked one level further down, so that no distribution outside the closure leaks in.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
NODE_LIST = ROOT / "config" / "node-packages.txt"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def node_requirements(path: Path = NODE_LIST) -> list[Requirement]:
    """The node list's requirements (one a line, ``#`` comments)."""
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return [Requirement(line) for line in lines if line]


def closure(names: list[str]) -> dict[str, md.Distribution]:
    """The installed distributions of ``names`` and, transitively, of their requirements (extras and requirements
    whose markers do not hold left out; a requirement not installed here is skipped: the node would lack it too)."""
    installed = {canonical(d.metadata["Name"]): d for d in md.distributions()}
    found: dict[str, md.Distribution] = {}
    todo = [canonical(n) for n in names]
    while todo:
        name = todo.pop()
        if name in found or name not in installed:
            continue
        dist = found[name] = installed[name]
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonical(req.name))
    return found


def _owned() -> tuple[dict[tuple[str, ...], set[str]], Path]:
    """Every installed file's path parts (relative to site-packages) -> the distributions owning it."""
    owners: dict[tuple[str, ...], set[str]] = {}
    site = Path(sysconfig.get_paths()["purelib"])
    for dist in md.distributions():
        name = canonical(dist.metadata["Name"])
        base = Path(dist.locate_file(""))
        for f in dist.files or []:
            parts = f.parts
            if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(".pth") or base != site:
                continue
            owners.setdefault(parts, set()).add(name)
    return owners, site


def build_node_site(folder: Path, names: list[str]) -> list[str]:
    """Link the closure of ``names`` into ``folder``; returns the distributions linked."""
    dists = closure(names)
    keep = set(dists)
    owners, site = _owned()
    folder.mkdir(parents=True, exist_ok=True)

    def link(prefix: tuple[str, ...]) -> None:
        depth = len(prefix)
        below: dict[str, set[str]] = {}
        for parts, who in owners.items():
            if parts[:depth] == prefix and len(parts) > depth:
                below.setdefault(parts[depth], set()).update(who)
        for entry, who in below.items():
            if not who & keep:
                continue
            path = (*prefix, entry)
            target, here = site.joinpath(*path), folder.joinpath(*path)
            if who <= keep or not target.is_dir():
                if target.exists() and not here.exists():
                    here.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(target, here)
            else:  # shared with a distribution outside the closure: one level further down
                here.mkdir(parents=True, exist_ok=True)
                link(path)

    link(())
    return sorted(keep)


def make_node_venv(folder: Path, names: list[str]) -> tuple[Path, list[str]]:
    """A virtual environment (no pip of its own, no system site-packages) that sees only ``names``' closure and pip;
    returns its python and the distributions it sees."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    linked = build_node_site(folder / "node-site", [*names, "pip"])
    python = folder / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # addsitedir (not a bare path line): the node site's own .pth files are not linked, but its folders are a site
    Path(purelib, "node-site.pth").write_text(f"import site; site.addsitedir({str(folder / 'node-site')!r})\n")
    return python, linked
