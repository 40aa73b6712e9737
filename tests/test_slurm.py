"""SLURM for real: `snakemake --profile slurm table1` through sbatch on a single-node cluster (tests/slurm/).

One cluster run (the module fixture `cluster_run`) serves three tests:
- table1 is built, every training job and every run's group of evaluations went through sbatch with the profile's
  resources (one GPU, the runtime of the cost plan's floor, memory, account, partition: checked with sacct);
- a training job is requeued by SLURM (`scontrol requeue`, as after a preemption), then signalled mid-epoch
  (`scancel --signal=TERM`: the job's steps get SIGTERM, as the profile's `--signal=TERM@300` sends it ahead of a
  time limit; the trainer writes the state of the step it reached and the job FAILS, so `retries` resubmit it
  with twice the runtime) and, resubmitted, killed (`scancel --batch --signal=KILL`: FAILED again, resubmitted
  with three times the runtime): it resumes from its newest state each time (mid-epoch after the signal), and its
  final model equals, tensor for tensor, an uninterrupted local run. (A plain `scancel` is not used: with
  snakemake-executor-plugin-slurm 2.8.0 sacct reports it as "CANCELLED by <uid>", which the plugin does not
  recognise, and Snakemake waits forever; see docs/slurm.md.)
- afterwards `dvc commit` records the cluster's checkpoints and metrics without re-running anything,
  `dvc push` / `dvc pull` round-trip them to another clone, and there `snakemake --touch` (DVC does not keep
  file times) leaves Snakemake nothing to do.

The test's scratch copy of the workflow (tests/helpers.workflow_copy) differs from the repository in data only:
its profile is the repository's workflow/profiles/slurm/config.yaml with the harness's account and partition,
`configfile: [config/smoke.yaml, config/ci-cluster.yaml]` (the smoke scale, small job resources, every training
digit in batches of 8 for 40 epochs, so a job can be stopped mid-epoch) and status checks from 2 s; its catalog keeps table1's NT and AT(beta=1) rows and
its NAT and PGD20 columns (the full table is ~100 jobs at smoke scale, which two CPU cores cannot run through
SLURM in minutes; tests/test_pipeline.py builds all of it locally).

Needs root: tests/slurm/up.sh installs the Debian packages if missing and starts the daemons. Without root or
apt-get the module is skipped with the reason; TRADEOFF_REQUIRE_SLURM=1 (set by .ci/run) makes that a failure.
TRADEOFF_SLURM_KEEP=1 leaves the cluster up afterwards (tests/slurm/down.sh stops it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from helpers import ROOT, env, results_of, run, workflow_copy

from tradeoff import config as tcfg
from tradeoff.config.design import expand
from tradeoff.storage import checkpoint
from tradeoff.storage.curves import read_curves
from tradeoff.storage.layout import log_history

pytestmark = pytest.mark.slow
HARNESS = ROOT / "tests" / "slurm"
CONFIGS = ["config/config.yaml", "config/smoke.yaml", "config/ci-cluster.yaml"]
EPOCHS = 40  # 180 steps of ~4 ms each for AT: room to requeue, signal mid-epoch and kill mid-run
ROWS = ("nt", "at_beta1")                    # table rows kept in the cluster run
COLUMNS = {"nat": "clean", "pgd20": "pgd20"}  # table columns kept
OVERLAY = f"""\
# tests/test_slurm.py: the test cluster's jobs are small; training is long enough to be killed mid-run.
# One evaluation job per (run, attack), as at paper scale (the smoke scale's eval_unit: run batches them).
runtime: {{device: cpu, eval_unit: attack}}
# Every job priced by the cost plan asks for its floor, 10 minutes (a run's evaluations, all cheap here, go as one group
# job sharing it).
resources:
  train: {{gpu: 1, runtime: 10, mem_mb: 1000, cpus_per_task: 1}}
  evaluate: {{gpu: 1, runtime: 10, mem_mb: 1000, cpus_per_task: 1}}
  plan: {{floor_minutes: 10, max_minutes: 10}}
scale_map:
  epochs: {EPOCHS}
  train_examples: null
  batch_size: 8
  lr: {{epochs: [0, {EPOCHS}], values: [0.1, 0.1]}}
"""


# ------------------------------------------------------------------------------------------------ cluster


def _cluster_settings() -> dict[str, str]:
    out = {}
    for line in (HARNESS / "cluster.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def _unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return "the SLURM harness needs Linux (Debian 12)"
    if os.geteuid() != 0:
        return "needs root: tests/slurm/up.sh installs SLURM (apt-get) and starts munge, MariaDB and the SLURM daemons"
    if shutil.which("slurmctld", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None \
            and shutil.which("apt-get") is None:
        return "SLURM is not installed and there is no apt-get to install it"
    return None


def _skip(reason: str):
    if os.environ.get("TRADEOFF_REQUIRE_SLURM") == "1":
        pytest.fail(f"TRADEOFF_REQUIRE_SLURM=1 but the SLURM test cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def cluster():
    reason = _unavailable()
    if reason:
        _skip(reason)
    settings = _cluster_settings()
    started = Path(settings["TRADEOFF_SLURM_RUN"]) / "started"
    reused = started.exists() and started.read_text().strip() != ""
    t0 = time.monotonic()
    up = subprocess.run(["bash", str(HARNESS / "up.sh")], capture_output=True, text=True, timeout=900)
    if up.returncode != 0:
        text = up.stdout[-3000:] + up.stderr[-5000:]
        if "apt-get failed" in text or "no apt-get" in text or "not touching it" in text:
            _skip(f"tests/slurm/up.sh could not bring the cluster up: {text.strip().splitlines()[-1]}")
        pytest.fail(f"tests/slurm/up.sh failed ({up.returncode}):\n{text}")
    settings["up_seconds"] = f"{time.monotonic() - t0:.1f}"
    saved = {key: os.environ.get(key) for key in ("SLURM_CONF", "PATH")}
    os.environ["SLURM_CONF"] = settings["SLURM_CONF"]
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    try:
        yield settings
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if not reused and os.environ.get("TRADEOFF_SLURM_KEEP") != "1":
            subprocess.run(["bash", str(HARNESS / "down.sh")], capture_output=True, timeout=120)


def _sh(*cmd: str, check: bool = True) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def _jobs_of(comment: str) -> list[tuple[str, str]]:
    """(job id, state) of the queued or running jobs whose comment (the plugin's rule and wildcards) is this."""
    out = _sh("squeue", "-h", "-o", "%i|%T|%k")
    return [(i, s) for i, s, k in (line.split("|", 2) for line in out.splitlines()) if k.strip() == comment]


def _sacct(name: str) -> list[dict]:
    """Every record (requeues included) of the jobs of one Snakemake run (the plugin names jobs by its run id)."""
    keys = ["JobID", "JobName", "State", "Account", "Partition", "Timelimit", "ReqMem", "AllocTRES", "Comment"]
    out = _sh("sacct", "-D", "-X", "-P", "-n", "--name", name, "-S", "now-3hours", "-o", ",".join(keys))
    return [dict(zip(keys, line.split("|"))) for line in out.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------ workflow


def cluster_workflow(dest: Path, settings: dict) -> Path:
    """A scratch copy whose `slurm` profile charges the test account and selects the smoke scale."""
    work = workflow_copy(dest)
    base = expand(tcfg.load_yaml(work / "config" / "config.yaml"))  # run by run: the runs kept are written out
    group = base["targets"]["table1"]
    targets = {"table1": group}
    for member in group["targets"]:
        table = dict(base["targets"][member])
        table["rows"] = [row for row in table["rows"] if row["key"] in ROWS]
        table["columns"] = {k: v for k, v in table["columns"].items() if k in COLUMNS}
        assert [r["key"] for r in table["rows"]] == list(ROWS) and table["columns"] == COLUMNS, table
        table["compare"] = ROWS[-1]  # the paper's method's row is cut: compare with one that stays
        table.pop("protocol", None)  # the strong attacks only: one evaluation job per kept (row, column)
        targets[member] = table
    used = {row["run"] for name, t in targets.items() if t["kind"] == "table" for row in t["rows"]}
    base["targets"] = targets
    base["runs"] = {rid: spec for rid, spec in base["runs"].items() if rid in used}
    (work / "config" / "config.yaml").write_text(
        "# tests/test_slurm.py: config/config.yaml with table1 cut to two rows and two columns\n"
        + yaml.safe_dump(base, sort_keys=False, width=120))
    # the smoke overlay thins some other targets' rows: drop what refers to targets this copy no longer has
    smoke = tcfg.load_yaml(work / "config" / "smoke.yaml")
    smoke["targets"] = {k: v for k, v in smoke.get("targets", {}).items() if k in targets}
    smoke["runs"] = {k: v for k, v in smoke.get("runs", {}).items() if k in used}  # its own runs (pretraining)
    for key in ("targets", "runs"):
        if not smoke[key]:
            del smoke[key]
    (work / "config" / "smoke.yaml").write_text(yaml.safe_dump(smoke, sort_keys=False, width=120))
    (work / "config" / "ci-cluster.yaml").write_text(OVERLAY)

    profile_path = work / "workflow" / "profiles" / "slurm" / "config.yaml"  # what the `slurm` link points to
    profile = yaml.safe_load(profile_path.read_text())
    profile["default-resources"].update(slurm_account=settings["TRADEOFF_SLURM_ACCOUNT"],
                                        slurm_partition=settings["TRADEOFF_SLURM_PARTITION"])
    profile["configfile"] = CONFIGS[1:]
    profile["slurm-init-seconds-before-status-checks"] = 2
    profile_path.write_text("# tests/test_slurm.py: the repository's profile, for the test cluster\n"
                            + yaml.safe_dump(profile, sort_keys=False))
    assert (work / "slurm" / "config.yaml").read_text() == profile_path.read_text()
    return work


def _wait(what: str, predicate, timeout: float, proc: subprocess.Popen, log: Path, poll: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"snakemake ended ({proc.returncode}) while waiting for {what}:\n"
                                 f"{log.read_text()[-6000:]}")
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}:\n{log.read_text()[-6000:]}")


def _newest_epoch(state_dir: Path) -> int:
    states = checkpoint.list_states(state_dir)
    return int(checkpoint.STATE_PATTERN.match(states[-1].name).group(1)) if states else 0


def _trainer_pid(state_dir: Path) -> int | None:
    """The pid of the process that trains the run now (its lock file names it)."""
    try:
        found = re.match(r"pid (\d+) on ", (state_dir / ".lock").read_text())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _pending(pid: int, sig: int) -> bool:
    """Whether ``sig`` is pending for the (stopped) process ``pid``."""
    status = Path(f"/proc/{pid}/status").read_text()
    masks = [int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd:", "ShdPnd:"))]
    return any(mask & (1 << (sig - 1)) for mask in masks)


@pytest.fixture(scope="module")
def cluster_run(cluster, tmp_path_factory):
    """Run `snakemake --profile slurm table1`; requeue the AT training job, signal it mid-epoch, kill it."""
    t0 = time.monotonic()
    base = tmp_path_factory.mktemp("slurm")
    work = cluster_workflow(base / "cluster", cluster)
    catalog = tcfg.load_catalog([work / f for f in CONFIGS])
    killed = catalog.train_id[next(r.run for r in catalog.targets["table1a"].rows if r.key == "at_beta1")]
    comment = f"rule_train_wildcards_{killed}"
    state_dir = results_of(work).states(killed)
    train_log = results_of(work).log("train", killed)

    # the uninterrupted reference: the same run, the same config files, locally, meanwhile
    reference = workflow_copy(base / "reference")
    for name in CONFIGS:
        shutil.copy2(work / name, reference / name)
    ref_cmd = ["tradeoff", *[a for f in CONFIGS for a in ("--config", f)], "train", "--run", killed]
    ref_proc = subprocess.Popen(ref_cmd, cwd=reference, env=env(), stdout=subprocess.DEVNULL,
                                stderr=open(base / "reference.log", "w"))

    log = base / "snakemake.log"
    events: dict = {"run": killed}
    # the jobs inherit the environment: training logs a line after every step (the test waits for these events)
    with open(log, "w") as out:
        proc = subprocess.Popen(["snakemake", "--profile", "slurm", "table1"], cwd=work,
                                env={**env(), "TRADEOFF_PROGRESS_SECONDS": "0"},
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    running = lambda: next((i for i, s in _jobs_of(comment) if s == "RUNNING"), None)  # noqa: E731
    try:
        # 1. SLURM requeues the running job (as after a preemption or a node failure)
        job = _wait("the training job to run", running, 300, proc, log, poll=0.5)
        _wait("its first epoch state", lambda: _newest_epoch(state_dir) >= 1, 300, proc, log)
        _sh("scontrol", "requeue", job)
        _wait("the requeued job to be pending", lambda: ("PENDING" in dict(_jobs_of(comment)).values()), 60, proc,
              log)
        events["requeued_after"] = _newest_epoch(state_dir)
        # a requeued job waits 2 minutes before it may start again; the test does not
        _sh("scontrol", "update", f"jobid={job}", "StartTime=now")
        # 2. it starts again and resumes; early in one of its epochs it gets SIGTERM (what the profile's --signal
        #    sends ahead of the time limit): paused at a logged step, so that the signal is pending mid-epoch when
        #    it goes on; it writes the step's state and stops, the job FAILS, and `retries` resubmit it
        _wait("the requeued job to train again", lambda: _newest_epoch(state_dir) > events["requeued_after"], 300,
              proc, log)
        events["log_after_requeue"] = train_log.read_text()
        early = re.compile(rf"{killed} epoch (\d+)/{EPOCHS}: step ([1-9]|1\d)/(\d+) done")
        seen = len(train_log.read_text())
        _wait("an early step of an epoch", lambda: early.search(train_log.read_text(), seen), 300, proc, log, poll=0.01)
        pid = _trainer_pid(state_dir)
        os.kill(pid, signal.SIGSTOP)
        mark = len(log_history(train_log).read_text())  # what the tries so far wrote (the requeue's SIGTERM, too)
        try:
            _sh("scancel", "--signal=TERM", job)  # the job's steps, not its batch shell: as --signal=TERM@300
            _wait("SIGTERM to reach the trainer", lambda: _pending(pid, signal.SIGTERM), 60, proc, log, poll=0.05)
        finally:
            os.kill(pid, signal.SIGCONT)
        _wait("the signalled job to end", lambda: job not in dict(_jobs_of(comment)), 120, proc, log)
        history = log_history(train_log).read_text()[mark:]
        stopped = re.search(r"stopped by SIGTERM in epoch (\d+) after step (\d+) of \d+; its state is saved in", history)
        assert stopped, history[-4000:]
        mark += len(history)
        events["signalled_at"] = (int(stopped.group(1)) - 1, int(stopped.group(2)))  # (epochs done, steps)
        # 3. resubmitted, it resumes mid-epoch; then SLURM kills it (SIGKILL to the batch step): FAILED, resubmitted
        #    (as after a time limit's SIGKILL, or a node failure)
        job = _wait("the resubmitted job to run", running, 300, proc, log, poll=0.5)
        resumed = "resuming after epoch {}, step {}".format(*events["signalled_at"])
        _wait("it to resume mid-epoch", lambda: resumed in log_history(train_log).read_text()[mark:], 300, proc, log)
        _wait("it to train on", lambda: _newest_epoch(state_dir) > events["signalled_at"][0], 300, proc, log)
        _sh("scancel", "--batch", "--signal=KILL", job)
        _wait("the killed job to end", lambda: job not in dict(_jobs_of(comment)), 60, proc, log)
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:  # cancel what this run submitted, through Snakemake
            os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
        if ref_proc.poll() is None and proc.returncode not in (0, None):
            ref_proc.kill()
    text = log.read_text()
    run_id = re.search(r"SLURM run ID: (\S+)", text)
    if run_id and proc.returncode != 0:
        _sh("scancel", "--name", run_id.group(1), check=False)
    assert proc.returncode == 0, f"snakemake --profile slurm table1 failed ({proc.returncode}):\n{text[-8000:]}"
    assert ref_proc.wait(timeout=600) == 0, (base / "reference.log").read_text()[-4000:]
    history = log_history(train_log).read_text()  # every try's log (Snakemake deletes train_log at each start)
    resumed = re.findall(r"resuming after epoch (\d+)", history)
    events["killed_after"] = int(resumed[-1]) if resumed else 0  # where the last resubmitted job started from
    events["history"] = history
    events["seconds"] = time.monotonic() - t0
    print(f"\ncluster up in {cluster['up_seconds']} s; snakemake --profile slurm table1 with a requeue, a signal and "
          f"a kill: {events['seconds']:.0f} s")
    return {"work": work, "reference": reference, "log": text, "uuid": run_id.group(1), "events": events,
            "catalog": catalog, "train_log": train_log}


# ------------------------------------------------------------------------------------------------ tests


def test_table1_through_sbatch_with_profile_resources(cluster, cluster_run):
    work = cluster_run["work"]
    for name in ("table1", "table1a", "table1b"):
        for suffix in (".md", ".csv", ".tex"):
            assert (work / "results" / "smoke" / "tables" / f"{name}{suffix}").stat().st_size > 0
    assert "Scale: **smoke**" in (work / "results" / "smoke" / "tables" / "table1.md").read_text()

    records = _sacct(cluster_run["uuid"])
    rules = {}
    for rec in records:
        rules.setdefault(rec["Comment"].split("_wildcards_")[0], []).append(rec)
    catalog = cluster_run["catalog"]
    trained = {catalog.train_id[r.run] for t in ("table1a", "table1b") for r in catalog.targets[t].rows}
    assert {rec["Comment"] for rec in rules["rule_train"]} == {f"rule_train_wildcards_{r}" for r in trained}
    # a run's evaluations (all cheap) went as one group job (Snakemake names it <group>_<rules>) on one GPU, asking
    # for the sum of its members' runtimes
    groups = {f"rule_evaluate-{r}_evaluate" for r in trained}
    evaluations = [rec for rule, recs in rules.items() if rule in groups for rec in recs]
    assert {rec["Comment"] for rec in evaluations} == groups
    assert set(rules) == {"rule_train"} | groups, "only train/evaluate go to SLURM"
    for run_id in trained:
        for column in COLUMNS.values():
            assert results_of(work).metrics(run_id, column).exists()
    for rec in records:
        assert rec["Account"] == cluster["TRADEOFF_SLURM_ACCOUNT"], rec
        assert rec["Partition"] == cluster["TRADEOFF_SLURM_PARTITION"], rec
        assert rec["ReqMem"] in ("1000M", "1000Mn"), rec
        assert "gres/gpu=1" in rec["AllocTRES"], rec
        assert rec["Timelimit"] in ("00:10:00", "00:20:00", "00:30:00"), rec  # attempt x the runtime
    assert all(rec["State"] == "COMPLETED" for rec in evaluations), evaluations


def test_requeued_signalled_and_killed_training_resumes_bit_identically(cluster, cluster_run):
    ev = cluster_run["events"]
    run_id = ev["run"]
    signalled = ev["signalled_at"]
    assert 1 <= ev["requeued_after"] <= signalled[0] < ev["killed_after"] < EPOCHS, ev  # all struck mid-training
    assert signalled[1] >= 1, ev  # mid-epoch: the state of the step it reached, not of the last epoch
    assert f"resuming after epoch {ev['requeued_after']}" in ev["log_after_requeue"]
    assert "resuming after epoch {}, step {}".format(*signalled) in ev["history"]
    starts = re.findall(r"^=== .* start: tradeoff --log .* train --run .*SLURM job \d+\) ===$", ev["history"], re.M)
    assert len(starts) == 4, starts  # the history keeps the lines of every try

    jobs = [rec for rec in _sacct(cluster_run["uuid"]) if rec["Comment"] == f"rule_train_wildcards_{run_id}"]
    states = [rec["State"].split()[0] for rec in jobs]
    assert states == ["REQUEUED", "FAILED", "FAILED", "COMPLETED"], jobs
    assert jobs[0]["JobID"] == jobs[1]["JobID"] != jobs[2]["JobID"] != jobs[3]["JobID"]  # requeued, resubmitted
    assert [rec["Timelimit"] for rec in jobs] == ["00:10:00", "00:10:00", "00:20:00", "00:30:00"]  # attempt x time

    work, reference = cluster_run["work"], cluster_run["reference"]
    a, b = checkpoint.load(results_of(work).model(run_id)), checkpoint.load(results_of(reference).model(run_id))
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert [row["epoch"] for row in read_curves(results_of(work).curves(run_id))] == list(range(1, EPOCHS + 1))


def test_dvc_records_pushes_and_pulls_the_cluster_run(cluster, cluster_run, tmp_path):
    work = cluster_run["work"]
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    layout = results_of(Path("."))  # paths relative to a clone's root
    (work / ".gitignore").write_text(f".snakemake/\n{layout.root / 'work'}/\n{layout.root / 'logs'}/\n")
    run(["git", "init", "-q"], work)
    run(["dvc", "init", "-q"], work)
    # the stages of what the cluster built (table1), as a user who built one target records it
    run(["tradeoff", *[a for f in CONFIGS for a in ("--config", f)], "export-dvc", "--targets", "table1"], work)
    models = sorted(work.glob(str(layout.model("*"))))
    assert models, "no model.pt of the cluster run"
    before = {p: p.read_bytes() for p in models}
    commit = run(["dvc", "commit", "-f"], work)
    assert "Running stage" not in commit.stdout + commit.stderr
    lock = yaml.safe_load((work / "dvc.lock").read_text())["stages"]
    listed = run(["dvc", "stage", "list", "--name-only"], work).stdout.split()  # dvc.yaml's templates, expanded
    trained = {name.partition("@")[2]: name for name in listed if name.startswith("train-")}  # train-<method>@<run>
    assert set(lock) == set(listed) and models[0].parent.name in trained
    for model in models:
        stage = lock[trained[model.parent.name]]
        assert stage["outs"][0]["path"] == str(model.relative_to(work))
        assert stage["outs"][0]["md5"] == hashlib.md5(model.read_bytes()).hexdigest()
    metrics = [m for name, s in lock.items() if name.startswith("evaluate@") for m in s["outs"]]
    assert any(m["path"].startswith(f"{layout.root / 'metrics'}/") and m.get("md5") for m in metrics)
    assert {p: p.read_bytes() for p in models} == before
    assert "up to date" in run(["dvc", "status"], work).stdout
    assert "Running stage" not in run(["dvc", "repro", "--dry"], work).stdout
    # `dvc commit` rewrote the checkpoints (new times, same bytes); the profile's max-checksum-file-size lets
    # Snakemake compare their checksums with its records here, so it still has nothing to do
    dry = run(["snakemake", "--profile", "slurm", "-n", "table1"], work)
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]

    run(["git", "add", "-A"], work)
    run(["git", "commit", "-qm", "cluster run"], work)
    remote = tmp_path / "remote"
    run(["dvc", "remote", "add", "-d", "store", str(remote)], work)
    run(["git", "commit", "-qam", "remote"], work)
    pushed = run(["dvc", "push"], work)
    # every output the lock records (checkpoints, metrics, predictions, curves, tables) goes to the remote, once
    # per content (DVC's cache is content-addressed: two equal files are one object)
    declared = yaml.safe_load((work / "dvc.yaml").read_text())["stages"].values()
    uncached = {path for stage in declared for out in stage.get("outs", []) if isinstance(out, dict)
                for path, how in out.items() if how.get("cache") is False}  # jobs.json: git keeps it
    outs = [o for s in lock.values() for o in s.get("outs", []) if o["path"] not in uncached]
    # a folder out (a run's dvclive curves) is the manifest DVC keeps of it (<md5>.dir) and its files, each file once
    # by content across folders (two runs' equal learning-rate curves are one object)
    cache = work / ".dvc" / "cache" / "files" / "md5"
    objects = set()
    for md5 in {o["md5"] for o in outs}:
        objects.add(md5)
        if md5.endswith(".dir"):
            objects |= {entry["md5"] for entry in json.loads((cache / md5[:2] / md5[2:]).read_text())}
    assert f"{len(objects)} files pushed" in pushed.stdout + pushed.stderr, pushed.stdout

    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(work), str(clone)], tmp_path)
    assert not list(clone.glob(str(layout.model("*"))))
    run(["dvc", "pull"], clone)
    for model in models:
        assert (clone / model.relative_to(work)).read_bytes() == model.read_bytes()
    for out in (o["path"] for o in outs if o["path"].endswith(".json")):  # the metrics came back too
        assert (clone / out).read_bytes() == (work / out).read_bytes()
    assert "up to date" in run(["dvc", "status"], clone).stdout

    # DVC wrote the checkpoints after git wrote the metrics: Snakemake would re-evaluate. `--touch` fixes times.
    run(["snakemake", "--profile", "slurm", "--touch", "table1"], clone)
    dry = run(["snakemake", "--profile", "slurm", "-n", "table1"], clone)
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    assert not [line for line in (dry.stdout + dry.stderr).splitlines() if line.startswith("rule train")]
