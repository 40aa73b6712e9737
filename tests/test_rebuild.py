"""A faithful rebuild is seen as one: a small pipeline built by `dvc repro` at one commit, then rebuilt from nothing
by Snakemake at a commit that differs from it only in a comment, gives byte-identical outputs (models, curves,
metrics, predictions, an analysis, a table, a figure), and `dvc status` finds no output modified: only the edited
code is a changed dependency. What differs between the two builds (the commit, the seconds) is in the outputs'
sidecars (tradeoff.storage.provenance), which are no outputs."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from helpers import ROOT, results_of, run, workflow_copy

from tradeoff.storage.layout import Layout

SMOKE = ["config/config.yaml", "config/smoke.yaml"]
# a table, a figure and a figure of an analysis: 3 training runs, 3 evaluations, the CA-AT synthetic analysis
TARGETS = ["caat_table1", "figure3b", "caat_figure2"]
EDITED = Path("src/tradeoff/methods/base.py")  # a file every training stage depends on


def _outputs(work: Path) -> dict[str, str]:
    """MD5 of every file the jobs wrote under results/smoke/, but their logs, resume states and the sidecars."""
    root = results_of(work).root
    return {str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] not in ("logs", "work") and not Layout.is_sidecar(p)
            and p.name not in (".gitignore", ".snakemake_timestamp")}  # DVC's and Snakemake's, ignored by DVC


def _commit(work: Path, message: str) -> str:
    run(["git", "add", "-A"], work)
    run(["git", "commit", "-qm", message], work)
    return run(["git", "rev-parse", "HEAD"], work).stdout.strip()


@pytest.mark.slow
def test_a_rebuild_at_a_commit_that_differs_in_a_comment_gives_the_same_bytes_and_dvc_sees_no_change(
        tmp_path, monkeypatch):
    work = workflow_copy(tmp_path / "repo")
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (work / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    monkeypatch.setenv("PYTHONPATH", str(work / "src"))  # the jobs run the repository's own code, at its commit
    run(["git", "init", "-q"], work)
    run(["dvc", "init", "-q"], work)
    run(["tradeoff", *[a for f in SMOKE for a in ("--config", f)], "export-dvc", "--targets", *TARGETS], work)
    first_commit = _commit(work, "the smoke pipeline")
    run(["dvc", "repro"], work, timeout=1200)
    first = _outputs(work)
    layout = results_of(work)
    models = sorted(layout.root.glob("checkpoints/*/model.pt"))
    assert len(models) == 3 and any(k.startswith("analysis/") for k in first)
    assert any(k.startswith("metrics/") for k in first) and any(k.startswith("tables/") for k in first)
    assert all(json.loads(Layout.sidecar(m).read_text())["provenance"]["git_commit"] == first_commit
               for m in models)
    _commit(work, "dvc.lock of the first build")

    (work / EDITED).write_text((work / EDITED).read_text() + "# a comment: nothing computed changes\n")
    second_commit = _commit(work, "a comment")
    run(["snakemake", *TARGETS, "--cores", "1", "--forceall", "--configfile", "config/smoke.yaml"], work,
        timeout=1200)
    # every output was made again, at the second commit: its sidecar says so
    assert all(json.loads(Layout.sidecar(m).read_text())["provenance"]["git_commit"] == second_commit
               for m in models)
    assert _outputs(work) == first
    status = json.loads(run(["dvc", "status", "--json"], work).stdout)
    assert not [stage for stage, changes in status.items() for change in changes
                if isinstance(change, dict) and "changed outs" in change]
    changed_deps = {dep for changes in status.values() for change in changes if isinstance(change, dict)
                    for dep in change.get("changed deps", {})}
    # the edited file (or the folder of it that a stage lists), and nothing the jobs wrote
    assert changed_deps and all((work / EDITED).is_relative_to(work / dep) for dep in changed_deps), changed_deps
