"""DVC adopts a Snakemake build (``tradeoff dvc-adopt``, ``make dvc-adopt``; docs/dvc.md).

The same jobs write the same files whichever pipeline runs them (tradeoff.pipeline.dvc_export), so after `make demo`
(Snakemake) DVC needs only to record what is there: ``dvc commit --force`` of every stage. Two things make that a
command of its own:

- **Only a complete, current build is adopted.** The DVC pipeline must be the one the catalog gives (``tradeoff
  export-dvc --check`` for the config files dvc.yaml names) and the build must be one Snakemake has nothing left to do
  for (``snakemake -n`` at the same config files and targets); an empty ``params.yaml``, which Snakemake never reads.
  Otherwise DVC would record a partial or stale build as the pipeline's outputs. Snakemake does not remake a deleted
  intermediate file (a metrics file, say) whose consumers are up to date, so every output of DVC's stages must be
  there as well: a missing one is named, with the command that makes it.
- **No file time changes.** ``dvc commit`` re-links every output from its cache by default (a copy: a new file time),
  after which Snakemake sees inputs newer than outputs and retrains. ``--no-relink`` leaves the workspace alone; the
  file times are compared before and after all the same, and put back should anything have changed them.

Each problem is one line (:class:`AdoptError`) naming what to do. Runs ``dvc`` and ``snakemake`` as modules of the
Python that runs this (``python -m dvc``), so nothing needs to be on PATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from tradeoff.config import load_catalog, load_yaml
from tradeoff.core.errors import UserError
from tradeoff.pipeline.dvc_export import JOBS, PARAMS, Stale, export


class AdoptError(UserError):
    """Why a build cannot be adopted, and what to do."""


@dataclass(frozen=True)
class Pipeline:
    """What a dvc.yaml was written for: its config files (params.yaml last) and targets (none: every target)."""
    files: list[str]
    targets: list[str]


def read_pipeline(root: Path) -> Pipeline:
    """The config files and targets of ``root``'s dvc.yaml, as `tradeoff export-dvc` wrote them (its ``vars``' config,
    and its resolve stage's ``--targets``)."""
    path = root / "dvc.yaml"
    if not path.is_file():
        raise AdoptError(f"{path}: no DVC pipeline here (`tradeoff export-dvc` writes it)")
    data = yaml.safe_load(path.read_text()) or {}
    config = next((v["config"] for v in data.get("vars") or [] if isinstance(v, dict) and "config" in v), None)
    resolve = ((data.get("stages") or {}).get("resolve") or {}).get("cmd", "")
    if config is None or "export-dvc" not in resolve:
        raise AdoptError(f"{path} was not written by `tradeoff export-dvc` (no config in its vars, or no resolve "
                         "stage): write it with `tradeoff export-dvc`")
    words = config.split()
    files = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--config"]
    rest = resolve.split()
    targets = rest[rest.index("--targets") + 1:] if "--targets" in rest else []
    return Pipeline(files, targets)


def _times(root: Path, folders: list[Path]) -> dict[Path, tuple[int, int]]:
    """(access, modification) times in ns of every file and folder under ``folders``."""
    paths = []
    for top in folders:
        if top.is_dir():
            for folder, dirs, files in os.walk(top):
                paths += [Path(folder)] + [Path(folder, name) for name in files]
        elif top.exists():
            paths.append(top)
    out = {}
    for path in paths:
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        out[path] = (st.st_atime_ns, st.st_mtime_ns)
    return out


#: prints every output of dvc.yaml's stages that is not there (DVC's own reading of the pipeline, foreach resolved)
MISSING = """
from dvc.repo import Repo
with Repo(".") as repo:
    print("\\n".join(sorted({str(o) for s in repo.index.stages for o in s.outs if not o.exists})))
"""


def _run(command: list[str], root: Path, runner: Callable[..., subprocess.CompletedProcess]):
    return runner(command, cwd=root, capture_output=True, text=True)


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"


def adopt(root: Path | str = ".", *, runner: Callable[..., subprocess.CompletedProcess] = subprocess.run,
          python: str = sys.executable) -> dict:
    """Record ``root``'s Snakemake build as the DVC pipeline's outputs, file times unchanged; returns what it did
    (``files``: how many files and folders it watched, ``restored``: how many times it put back, ``status``: the last
    line of ``dvc status``). AdoptError (one line) when the build cannot be adopted."""
    root = Path(root).resolve()
    pipeline = read_pipeline(root)
    files = [f for f in pipeline.files if f != PARAMS]
    params = root / PARAMS
    if params.is_file() and load_yaml(params):
        raise AdoptError(f"{params} is not empty: an experiment's settings, which a Snakemake build never reads; "
                         "adopt the build with an empty params.yaml (`{}`), or run the experiment with `dvc exp run`")
    cwd = os.getcwd()
    os.chdir(root)  # dvc.yaml's paths are relative to its folder
    try:
        catalog = load_catalog(files)
        try:
            export(catalog, pipeline.files, pipeline.targets or None, check=True)
        except Stale as exc:
            raise AdoptError(f"the DVC pipeline is not the catalog's: {exc}") from None
    finally:
        os.chdir(cwd)
    overlays = [a for f in files[1:] for a in ("--configfile", f)]
    dry = _run([python, "-m", "snakemake", "-n", *pipeline.targets, "--cores", "1", *overlays], root, runner)
    said = dry.stdout + dry.stderr
    if dry.returncode != 0 or "Nothing to be done" not in said:
        where = " ".join(["snakemake", *pipeline.targets, "--cores", "2", *overlays])
        why = _last_line(dry) if dry.returncode else "`snakemake -n` has jobs to run"
        raise AdoptError(f"the Snakemake build is not complete ({why}): build it first (`{where}`; the demo: "
                         "`make demo`), then adopt it")
    missing = _run([python, "-c", MISSING], root, runner)
    if missing.returncode != 0:
        raise AdoptError(f"could not list the DVC stages' outputs: {_last_line(missing)}")
    absent = missing.stdout.split()
    if absent:  # Snakemake makes nothing for a deleted intermediate file whose consumers are up to date; DVC needs it
        where = " ".join(["snakemake", *absent[:3], "--cores", "2", *overlays])
        raise AdoptError(f"the Snakemake build is not complete ({len(absent)} output(s) of DVC's stages missing: "
                         f"{', '.join(absent[:3])}{', …' if len(absent) > 3 else ''}): make them first (`{where}`), "
                         "then adopt it")
    layout = catalog.layout
    watched = [root / layout.root, root / catalog.data_root / ".ready", root / JOBS]
    before = _times(root, watched)
    commit = _run([python, "-m", "dvc", "commit", "--force", "--no-relink", "--quiet"], root, runner)
    after = _times(root, watched)
    restored = 0
    for path, times in before.items():
        if after.get(path, times) != times:
            os.utime(path, ns=times, follow_symlinks=False)
            restored += 1
    if commit.returncode != 0:
        raise AdoptError(f"dvc commit failed: {_last_line(commit)}")
    status = _run([python, "-m", "dvc", "status", "--quiet"], root, runner)
    if status.returncode != 0:
        shown = _run([python, "-m", "dvc", "status"], root, runner)
        raise AdoptError(f"after dvc commit, dvc status is not up to date: {_last_line(shown)}")
    return {"files": len(before), "restored": restored, "status": "Data and pipelines are up to date.",
            "scale": catalog.scale, "targets": pipeline.targets}
