"""Shared helpers of the integration tests: a scratch copy of the workflow, and the CLI tools on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tradeoff.storage.layout import Layout

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "slurm", "profiles", ".dvcignore")


def data_root() -> Path:
    """The session's data folder (tests/conftest.py: in a temporary folder, shared by every test, never the
    checkout's ``data/``): the digits split is made there once."""
    return Path(os.environ.get("TRADEOFF_TEST_DATA") or Path("data").resolve())


def env() -> dict:
    out = dict(os.environ)
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    out.setdefault("GIT_AUTHOR_NAME", "tradeoff tests")
    out.setdefault("GIT_AUTHOR_EMAIL", "tests@tradeoff.invalid")
    out.setdefault("GIT_COMMITTER_NAME", "tradeoff tests")
    out.setdefault("GIT_COMMITTER_EMAIL", "tests@tradeoff.invalid")
    out["DVC_NO_ANALYTICS"] = "1"
    out.pop("TRADEOFF_CONFIG", None)  # a job's config files (set by the Snakefile): never the test's
    return out


def workflow_copy(dest: Path) -> Path:
    """The workflow files in a fresh folder (results and data land there, not in the repository)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        src = ROOT / name
        if src.is_symlink():
            os.symlink(os.readlink(src), dest / name)
        elif src.is_dir():
            shutil.copytree(src, dest / name)
        else:
            shutil.copy2(src, dest / name)
    return dest


def run(cmd: list[str], cwd: Path, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def results_of(work: Path, scale: str = "smoke") -> Layout:
    """The results of one scale in a workflow copy (``<work>/results/<scale>/...``)."""
    return Layout.of(work / "results", scale)


def evaluation(work: Path, run_id: str, attack: str, overlays=("config/smoke.yaml",)) -> tuple[dict, dict]:
    """A run's evaluation in a workflow copy, read as a report reads it: its vouched-for record and its per-example
    predictions, whichever job wrote them (one per attack, or the run's suite file: runtime.eval_unit)."""
    from tradeoff.config import load_catalog
    from tradeoff.report import records

    cwd = os.getcwd()
    os.chdir(work)  # the catalog's paths are relative to the workflow's folder
    try:
        catalog = load_catalog(["config/config.yaml", *overlays])
        found = records.measurement(catalog, run_id, attack)
        assert found is not None, f"{run_id} has no metrics under {attack}"
        return found.record, records.predictions(catalog, run_id, attack)
    finally:
        os.chdir(cwd)


def job_counts(text: str) -> dict[str, int]:
    """The 'Job stats' table that Snakemake prints for a (dry) run."""
    counts, inside = {}, False
    for line in text.splitlines():
        inside = inside or line.startswith("Job stats")
        m = re.match(r"^(\S+)\s+(\d+)$", line.strip()) if inside else None
        if m and m.group(1) == "total":
            break
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def build_attack(name: str, model, *, eps: float, norm: str = "linf", **params):
    """An attack by its registered name, its parameters as keywords: the tests' shorthand (the pipeline builds every
    attack from its resolved AttackSpec, ``tradeoff.attacks.from_spec``)."""
    from tradeoff import attacks

    try:
        cls = attacks.ATTACKS[name]
    except KeyError:
        raise attacks.AttackError(f"unknown attack {name!r}; allowed: {attacks.attack_names()}") from None
    return cls(model, eps=eps, norm=norm, **params)
