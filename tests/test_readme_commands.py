"""The README is a contract (issue 41): every command of a shell block of README.md and docs/*.md runs as written, in a
fresh clone of the working tree, with nothing activated (tests/readme_clone.py: `env -i HOME=... PATH=/usr/bin:/bin`),
after a smoke build, or it is listed in SKIP with the reason it cannot run here (a GPU, a cluster, a download, your
own file, or minutes of work another test does).

The harvest is generic: a shell block (```bash, sh, shell or console) added to any of those files later is run too; a
command that cannot run here gets a line in SKIP, keyed by its text as written (its trailing comment left out), and a
line of SKIP that names no command any more fails, so the list stays the README's. One rewrite, said here: the
README's commands are written for the demo scale, after `make demo` (about half an hour on a slow 2-core machine,
docs/performance.md); they run after a smoke build (the README's own first command of "Running", at the smoke scale),
reading `config/demo.yaml` and `results/demo` as `config/smoke.yaml` and `results/smoke`. Commands that run DVC run
after the smoke build was adopted by DVC (its pipeline written by `tradeoff export-dvc` at the smoke scale, committed,
then `make dvc-adopt`: the sequence a test below checks); the others before. After each command the clone's tracked
files are put back (git), and after a DVC command that changed them, the outputs too (`dvc checkout`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from readme_clone import ROOT, SMOKE_BUILD, installed_stamp, run_bare

pytestmark = pytest.mark.slow

DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
REWRITE = {"config/demo.yaml": "config/smoke.yaml", "results/demo": "results/smoke"}

GPU, CLUSTER = "needs a GPU", "submits to a SLURM cluster (tests/test_slurm.py runs it on a real one)"
SKIP = {  # a command as written (without its comment) -> why it does not run here
    "make demo": "installs .venv from the package registries and builds the demo (about half an hour on a slow "
                 "2-core machine): the smoke build stands for it, by the README's own command (" + SMOKE_BUILD + ")",
    "make test": "the test suite itself",
    ".venv/bin/snakemake --profile workflow/profiles/local table1": "trains the paper scale on a GPU machine (days)",
    ".venv/bin/snakemake --profile slurm table1": CLUSTER,
    ".venv/bin/tradeoff evaluate --checkpoint model.pt --arch resnet18 --dataset cifar10 --suite table1a --name mine":
        "needs your model.pt, and downloads CIFAR-10 (tests/test_external.py evaluates checkpoints)",
    ".venv/bin/tradeoff export robustbench --run mine": "exports the metrics of `mine`, the line above's",
    ".venv/bin/tradeoff audit --model defence.py:build --dataset cifar10":
        "needs your defence.py, and downloads CIFAR-10 (tests/test_audit.py audits a model from a Python file)",
    ".venv/bin/tradeoff audit --checkpoint model.pt --arch resnet18 --dataset cifar10 [--normalize cifar10] "
    "[--name mine]": "a synopsis ([...] optional); needs your model.pt, and downloads CIFAR-10",
    ".venv/bin/tradeoff audit --model defence.py:build --dataset cifar10 [--name mine]":
        "a synopsis ([...] optional); needs your defence.py, and downloads CIFAR-10",
    ".venv/bin/snakemake audit_table1a --cores 2 --configfile config/demo.yaml":
        "audits every row's model of Table 1(a) (9 audits, many minutes); the line above audits one, and "
        "tests/test_audit.py plans the target's jobs",
    ".venv/bin/tradeoff gpu-check": GPU,
    "make wheelhouse PYTHON_VERSION=3.12": "downloads wheels from PyPI (tests/test_gpu_node.py makes a wheelhouse)",
    "make wheelhouse PYTHON_VERSION=3.11": "downloads wheels from PyPI (tests/test_gpu_node.py makes a wheelhouse)",
    "scripts/gpu-node.sh OUT 480": "on an offline GPU node",
    "scripts/gpu-node.sh results/node 480": "on an offline GPU node",
    "PYTHON=.venv/bin/python scripts/gpu-node.sh results/node-cpu 60 --cpu-only --steps 1 --warmup 0 --images 32":
        "needs the wheelhouse the line above downloads; tests/test_gpu_node.py runs exactly this",
    ".venv/bin/tradeoff --config config/config.yaml --config config/smoke.yaml gpu-check --cpu-only --images 32 "
    "--steps 1 --warmup 0": "a minute of CPU; tests/test_gpucheck.py::"
                            "test_cpu_only_runs_every_part_and_writes_one_report runs this command",
    ".venv/bin/tradeoff bench-train --run cifar10-resnet18-at-beta1 --batch-size 512": GPU,
    ".venv/bin/tradeoff bench-ratios --compare cifar10-resnet18-generalist/cifar10-resnet18-at-beta1":
        "a CPU timing benchmark of ResNet-18 steps at paper shape (minutes)",
    "farm-bench -n 5 -- .venv/bin/python -c \"import torch; torch.set_num_threads(1); torch.manual_seed(0); "
    "x=torch.randn(64,16,32,32); w=torch.randn(32,16,3,3); [torch.nn.functional.conv2d(x,w).sum() for _ in "
    "range(300)]\"": "this workplace's benchmark tool, not the project's (the measurement it names is a machine's)",
    ".venv/bin/snakemake table1a --cores 2 --configfile config/rehearsal.yaml":
        "table1a at paper shape on generated data, 9 runs and 126 evaluations (an hour on 2 cores); "
        "tests/test_rehearsal.py runs one run of each family through the same rules",
    ".venv/bin/dvc exp run -S '+scale_map.epochs=12'": "retrains every run for 12 epochs (longer than the smoke "
                                                       "build); the experiment below runs `dvc exp run -S`",
    ".venv/bin/dvc exp run -S '+targets.table1a.title=Ours'":
        "an experiment through DVC's git machinery (3 minutes of DVC here); tests/test_dvc.py::"
        "test_exp_run_set_param_reruns_exactly_what_it_changes runs this experiment on another table's title, and "
        "checks that only its stages ran",
    "make dvc-adopt": "the fixture `adopted` below runs it after the smoke build, and "
                      "test_dvc_adopts_the_snakemake_build_without_changing_a_file_time checks what it did",
    ".venv/bin/dvc exp run -S '+runs.cifar10-resnet18-at-beta1.seed=7'":
        "retrains a run and re-runs what reads it; tests/test_dvc.py::"
        "test_exp_run_set_param_reruns_exactly_what_it_changes runs this experiment",
}
MART = ("needs the worked example's module and config rows in place (docs/extending.md); "
        "tests/test_extending.py::test_a_method_added_as_docs_extending_says runs this sequence")
SKIP.update({command: MART for command in (".venv/bin/tradeoff plan mart", ".venv/bin/dvc repro table@mart")})


@dataclass(frozen=True)
class Command:
    document: str
    line: int
    text: str  # as written: continuation lines joined, its comment kept

    @property
    def key(self) -> str:
        """The command as SKIP names it: without its trailing comment, spaces collapsed."""
        return " ".join(_without_comment(self.text).split())

    @property
    def runs_dvc(self) -> bool:
        return bool(re.search(r"(^|[\s;/])dvc(\s|$)|\bmake dvc-", self.key))

    @property
    def here(self) -> str:
        """The command as it runs here: the demo read as the smoke scale (the module's one rewrite)."""
        text = self.text
        for old, new in REWRITE.items():
            text = text.replace(old, new)
        return text


def _without_comment(text: str) -> str:
    quote = None
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip()
    return text.rstrip()


def harvest(documents=DOCUMENTS) -> list[Command]:
    """Every command of every shell block of ``documents``, in order."""
    out = []
    for name in documents:
        lines = (ROOT / name).read_text().splitlines()
        block, pending, start = None, "", 0
        for number, line in enumerate(lines, 1):
            fence = re.match(r"^\s*```(\S*)", line)
            if fence:
                block = None if block is not None else fence.group(1).lower()
                continue
            if block not in SHELLS:
                continue
            if not pending and (not line.strip() or line.strip().startswith("#")):
                continue
            start = start if pending else number
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            out.append(Command(name, start, (pending + line).strip()))
            pending = ""
    return out


def test_every_shell_command_of_the_readme_and_docs_runs_here_or_says_why_not():
    commands = harvest()
    keys = {c.key for c in commands}
    assert len(commands) >= 40 and "make demo" in keys and ".venv/bin/tradeoff check-config" in keys
    stale = sorted(set(SKIP) - keys)
    assert not stale, f"SKIP names commands no document has any more: {stale}"
    assert all(reason.strip() for reason in SKIP.values())
    # written as a user types them: the tools of this checkout, from its root, nothing activated
    bare = [c for c in commands if c.key.split()[0] in ("tradeoff", "snakemake", "dvc", "python", "pip")]
    assert not bare, [f"{c.document}:{c.line}: {c.key}" for c in bare]


def _restore(clone: Path, home: Path, dvc: bool = False) -> None:
    """Put the clone's tracked files back (and with ``dvc``, the outputs they name: `dvc checkout`)."""
    changed = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=clone, check=True)
    subprocess.run(["git", "clean", "-fdq"], cwd=clone, check=True)
    if dvc and changed.strip():
        done = run_bare(".venv/bin/dvc checkout --force --quiet", clone, home)
        assert done.returncode == 0, done.stderr[-2000:]


def _checkout_state() -> dict[str, int]:
    """The file times of this checkout's tracked files: a command run in the clone must never write here (the
    environment it runs under was installed from this checkout)."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return {f: (ROOT / f).lstat().st_mtime_ns for f in tracked.decode().split("\0") if f and os.path.lexists(ROOT / f)}


def _run_all(commands: list[Command], clone: Path, home: Path, dvc: bool) -> list[str]:
    """Run each command once (as rewritten), in order; returns the failures, each with its output's end."""
    failures, seen, times, checkout = [], set(), [], _checkout_state()
    for command in commands:
        if command.key in SKIP or command.here in seen:
            continue
        seen.add(command.here)
        t0 = time.monotonic()
        done = run_bare(command.here, clone, home, timeout=900)
        times.append(f"{time.monotonic() - t0:6.1f} s  {command.document}:{command.line}  {command.key}")
        said = done.stdout + done.stderr
        if done.returncode != 0 or "Traceback (most recent call last)" in said:
            failures.append(f"{command.document}:{command.line}: {command.here}\n  exit {done.returncode}:\n  "
                            + "\n  ".join(said.strip().splitlines()[-15:]))
        _restore(clone, home, dvc=dvc)
        now = _checkout_state()
        if now != checkout:
            failures.append(f"{command.here} wrote into the checkout {ROOT}, not the clone: "
                            f"{sorted(f for f in now if now[f] != checkout.get(f))}")
            checkout = now
    print("\n".join(times))
    return failures


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("home")


def test_the_readme_and_docs_commands_run_as_written_in_a_fresh_clone(smoke_clone, home):
    """Everything but DVC's commands: listings, show, check-config, plan, the Snakemake commands (nothing to do after
    the smoke build), the SLURM dry run, `report --all`, the audit of one run, the exports of DVC's pipeline, the
    CPU node check, the HTML report."""
    failures = _run_all([c for c in harvest() if not c.runs_dvc], smoke_clone, home, dvc=False)
    assert not failures, "\n\n".join(failures)


@pytest.fixture(scope="module")
def adopted(smoke_clone, home) -> dict:
    """The smoke build adopted by DVC: its pipeline exported (`tradeoff export-dvc` at the smoke scale) and committed,
    then `make dvc-adopt`; what the file times were before and after."""
    if not installed_stamp().exists():
        pytest.skip(f"this environment was not installed by `make install` ({installed_stamp()} is missing): `make` "
                    "in the clone would install into it")
    clone = smoke_clone
    # the build is complete after the commands above too (`report --all` rewrites every report: members first)
    dry = run_bare(".venv/bin/snakemake -n --cores 2 --configfile config/smoke.yaml", clone, home, timeout=600)
    assert "Nothing to be done" in dry.stdout + dry.stderr, "Snakemake has jobs to do after the README's commands:\n" \
        + dry.stdout[-3000:]
    export = run_bare(".venv/bin/tradeoff --config config/config.yaml --config config/smoke.yaml export-dvc", clone,
                      home)
    assert export.returncode == 0, export.stderr[-3000:]
    subprocess.run(["git", "commit", "-qam", "the smoke scale's DVC pipeline"], cwd=clone, check=True)
    before = _times(clone)
    status = run_bare(".venv/bin/dvc status --json", clone, home, timeout=600)
    adopt = run_bare("make dvc-adopt", clone, home, timeout=900)
    after = _times(clone)
    subprocess.run(["git", "commit", "-qam", "dvc.lock: the smoke build, adopted"], cwd=clone, check=True)
    return {"before": before, "after": after, "status": status, "adopt": adopt}


def _times(clone: Path) -> dict[str, int]:
    out = {}
    for top in (clone / "results" / "smoke", clone / "data"):
        for folder, _, files in os.walk(top):
            for name in files:
                path = Path(folder, name)
                out[str(path.relative_to(clone))] = path.stat().st_mtime_ns
    return out


def test_dvc_adopts_the_snakemake_build_without_changing_a_file_time(adopted, smoke_clone, home):
    """Issue 41: after `make demo`, `dvc status` listed every output; `dvc commit -f` re-stamped the files, after which
    Snakemake wanted to retrain every Table 1(a) run. `make dvc-adopt`: DVC up to date, Snakemake has nothing to do,
    no file time changed, and Table 4's clock minutes are an uncached output (not in DVC's cache: not even through
    DVC's run cache, which `dvc commit` fills with the uncached outputs of every stage it may cache)."""
    clone = smoke_clone
    assert json.loads(adopted["status"].stdout)  # before: the stages of the build are not DVC's
    assert adopted["adopt"].returncode == 0, adopted["adopt"].stdout[-2000:] + adopted["adopt"].stderr[-3000:]
    assert "recorded in dvc.lock, file times unchanged" in adopted["adopt"].stdout
    assert adopted["after"] == adopted["before"] and len(adopted["before"]) > 300
    status = run_bare(".venv/bin/dvc status", clone, home, timeout=600)
    assert status.returncode == 0 and "Data and pipelines are up to date." in status.stdout, status.stdout[-2000:]
    dry = run_bare(".venv/bin/snakemake -n --cores 2 --configfile config/smoke.yaml", clone, home, timeout=600)
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    lock = (clone / "dvc.lock").read_text()
    assert "table-clock@table4:" in lock and "table@table4:" not in lock
    import yaml

    stage = yaml.safe_load(lock)["stages"]["table-clock@table4"]
    md5 = {o["path"]: o["md5"] for o in stage["outs"]}
    cached = {p.parent.name + p.name for p in (clone / ".dvc" / "cache").rglob("*") if p.is_file()}
    assert md5 and not any(h in cached for h in md5.values())  # the clock's minutes: declared uncached
    table1a = yaml.safe_load(lock)["stages"]["table@table1a"]["outs"]
    assert all(o["md5"] in cached for o in table1a)  # a result: cached


def test_a_second_adoption_of_a_build_that_is_not_complete_is_refused_in_one_line(adopted, smoke_clone, home):
    clone = smoke_clone
    metrics = next((clone / "results" / "smoke" / "metrics").rglob("all.json"))
    kept = metrics.read_bytes(), metrics.stat().st_mtime_ns
    metrics.unlink()
    try:
        done = run_bare(".venv/bin/tradeoff dvc-adopt", clone, home, timeout=600)
    finally:
        metrics.write_bytes(kept[0])
        os.utime(metrics, ns=(kept[1], kept[1]))
    said = [line for line in done.stderr.splitlines() if line.strip()]
    # Snakemake would make nothing (the tables that read the file are up to date); DVC's stage needs it: named
    assert done.returncode == 1 and said[-1].startswith("tradeoff: AdoptError: the Snakemake build is not complete "
                                                        "(1 output(s) of DVC's stages missing: "), said
    assert str(metrics.relative_to(clone)) in said[-1] and f"`snakemake {metrics.relative_to(clone)} " in said[-1]
    assert run_bare(".venv/bin/dvc status --quiet", clone, home, timeout=600).returncode == 0


def test_the_readme_and_docs_dvc_commands_run_as_written_after_adoption(adopted, smoke_clone, home):
    """`dvc repro` (nothing to do), metrics and plots, push and a partial pull, an experiment, `dvc status`, `make
    dvc-adopt` again."""
    failures = _run_all([c for c in harvest() if c.runs_dvc], smoke_clone, home, dvc=True)
    assert not failures, "\n\n".join(failures)
