"""The house's hygiene, enforced (issue 39): the linter configured in pyproject.toml (pyflakes: unused, undefined and
repeated names; isort's order: one ``from X import`` per module), no private name imported from another package, and
no function of the package over 80 lines (a function that long does several things: split it by what it does)."""

from __future__ import annotations

import ast
import subprocess
import sys

from helpers import ROOT

SRC = ROOT / "src"
LONGEST = 80  # lines of a function, its def line to its last


def _modules():
    for path in sorted((SRC / "tradeoff").rglob("*.py")):
        yield ".".join(path.relative_to(SRC).with_suffix("").parts), ast.parse(path.read_text(), str(path))


def _package(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_no_private_name_is_imported_from_another_package():
    crossing = [f"{module} imports {node.module}.{alias.name}"
                for module, tree in _modules() for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tradeoff.")
                and _package(node.module) != _package(module)
                for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not crossing, "a private name used by another package is public there: rename it\n" + "\n".join(crossing)


def test_no_function_is_longer_than_80_lines():
    long = [f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
            for module, tree in _modules() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > LONGEST]
    assert not long, "\n".join(long)


def test_ruff_fails_on_what_it_forbids(tmp_path):
    """The linter the suite runs does find an unused import (so that its clean bill above means something)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F", str(bad)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "F401" in done.stdout
