"""The attack suite on trained digits models (NT and PGD-AT at eps 0.3, trained once for this module):
the orderings every sound evaluation shows, exact shards, and an AutoAttack job killed with SIGKILL that
resumes from its state file to the same answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import warnings

import pytest
from helpers import ROOT, env

from tradeoff import config as cfg
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import AttackSpec
from tradeoff.evaluation.evaluate import AttackJob, Evaluation, Shard, evaluate
from tradeoff.evaluation.load import RunModel
from tradeoff.evaluation.shards import merge_shards
from tradeoff.storage.provenance import read_sidecar
from tradeoff.training.train import train

FILES = [ROOT / "config" / "config.yaml", ROOT / "config" / "demo.yaml"]
NT, AT = "cifar10-resnet18-nt", "cifar10-resnet18-at-beta1"
SUBSET, BATCH = 80, 40  # AutoAttack checks run on the first 80 test images, in two batches


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """NT (5 epochs) and PGD-AT at eps 0.3 (the demo recipe, 20 epochs) on digits, selection on 100 images."""
    catalog = cfg.load_catalog(FILES)
    results = tmp_path_factory.mktemp("results") / catalog.scale  # where a config naming the parent reads it
    for run, epochs in ((NT, 5), (AT, 20)):
        spec = catalog.runs[run]
        factor = epochs / spec.epochs
        spec = spec.replace(epochs=epochs, lr=spec.lr.replace(epochs=tuple(e * factor for e in spec.lr.epochs)),
                            selection=spec.selection.replace(examples=100))
        train(run, spec, results=results, data_root=catalog.data_root, runtime=Runtime.from_config({"device": "cpu"}),
              eval_batch_size=360, progress=False)
    return catalog, results


def _evaluate(models, run, attack, *, spec=None, batch_size=360, examples=None, **kwargs):
    catalog, results = models
    spec = spec or catalog.attack_for(attack, run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        files = {k: kwargs.pop(k) for k in ("metrics_out", "predictions_out", "state_path") if k in kwargs}
        shard = Shard(*kwargs.pop("shard"), out=kwargs.pop("shard_out", None)) if "shard" in kwargs else None
        [result] = evaluate(Evaluation(RunModel(results / "checkpoints" / run / "model.pt"), catalog.data_root,
                                       (AttackJob(attack, spec, **files),), device="cpu", batch_size=batch_size,
                                       seed=0, test_examples=examples, shard=shard, **kwargs))
        return result


def test_trained_models_are_what_the_checks_need(models):
    nt = _evaluate(models, NT, "clean")
    at = _evaluate(models, AT, "clean")
    assert nt["accuracy"] > 0.9 and at["accuracy"] > 0.75 and nt["examples"] == 360


def test_nt_model_falls_to_about_zero_under_pgd_at_the_papers_budget(models):
    assert _evaluate(models, NT, "pgd20")["accuracy"] <= 0.02


def test_pgd100_is_no_weaker_than_pgd20_and_both_below_clean(models):
    clean = _evaluate(models, AT, "clean")["accuracy"]
    pgd20 = _evaluate(models, AT, "pgd20")["accuracy"]
    pgd100 = _evaluate(models, AT, "pgd100")["accuracy"]
    assert pgd100 <= pgd20 + 0.01
    assert pgd20 < clean and 0.2 < pgd20


def test_accuracy_is_non_increasing_in_the_budget(models, tmp_path):
    overlay = tmp_path / "sweep.yaml"
    # at the demo scale 8/255 is digits' 0.3: these are 0.0375 ... 0.45
    overlay.write_text("attacks:\n  sweep: {type: pgd, steps: 20, step_size: eps/4, eps: [1/255, 2/255, 4/255, "
                       "6/255, 8/255, 12/255]}\nscale_map: {eps_cap: {linf: 1.0}}\n")  # in digits' budget
    catalog = cfg.load_catalog(FILES + [overlay])
    previous = _evaluate(models, AT, "clean")["accuracy"]
    jobs = catalog.attack_jobs("sweep")
    assert jobs == ["sweep@1_255", "sweep@2_255", "sweep@4_255", "sweep@6_255", "sweep@8_255", "sweep@12_255"]
    for job in jobs:
        accuracy = _evaluate(models, AT, job, spec=catalog.attack_for(job, AT))["accuracy"]
        assert accuracy <= previous, job
        previous = accuracy
    assert previous < 0.1


@pytest.fixture(scope="module")
def aa_reference(models, tmp_path_factory):
    """AutoAttack on the AT model, uninterrupted, on the subset: metrics and predictions."""
    out = tmp_path_factory.mktemp("aa")
    metrics = _evaluate(models, AT, "aa", batch_size=BATCH, examples=SUBSET, metrics_out=out / "m.json",
                        predictions_out=out / "p.json")
    return metrics, json.loads((out / "p.json").read_text())


def test_autoattack_runs_its_components_in_turn_on_what_is_still_robust(models, aa_reference):
    """The ensemble's trace only falls, its first stage is exactly APGD-CE alone (same examples, batches, seeds), and
    its last is the AA accuracy. A later component alone (APGD-T on every example) draws other random starts than
    inside the ensemble (on the remaining ones), so AA is not always below it: official AutoAttack, as published."""
    aa, _ = aa_reference
    assert list(aa["breakdown"]) == ["apgd-ce", "apgd-t", "fab-t", "square"]
    trace = list(aa["breakdown"].values())
    assert trace == sorted(trace, reverse=True) and trace[-1] == aa["accuracy"]
    assert 0 < aa["accuracy"] < aa["clean_accuracy"]
    alone = _evaluate(models, AT, "apgd_ce", batch_size=BATCH, examples=SUBSET)
    assert aa["breakdown"]["apgd-ce"] == alone["accuracy"]


@pytest.mark.parametrize("attack,eps", [("pgd20", None), ("apgd_ce", None), ("pgd20", 1.0)])
def test_sharded_evaluation_merges_to_exactly_the_unsharded_one(models, tmp_path, attack, eps):
    """Also the record's counts of invalid examples and its bound (at eps 1, the whole image range: every correctly
    classified test image of another class is within the budget of every example)."""
    catalog = models[0]
    spec = catalog.attack_for(attack, AT)
    spec = spec if eps is None else AttackSpec.from_dict({**spec.as_dict(), "eps": eps, "step_size": eps / 4})
    full = _evaluate(models, AT, attack, spec=spec, batch_size=50, predictions_out=tmp_path / "full.json")
    parts = []
    for k in range(3):
        parts.append(tmp_path / f"shard{k}.json")
        part = _evaluate(models, AT, attack, spec=spec, batch_size=50, shard=(k, 3), shard_out=parts[-1],
                         state_path=tmp_path / f"shard{k}.state")
        assert part["first_batch"] * 50 == part["start"]
        assert not (tmp_path / f"shard{k}.state").exists()  # removed once the shard's result is written
    merged = merge_shards(parts, predictions_out=tmp_path / "merged.json")
    assert merged["accuracy"] == full["accuracy"] and merged["examples"] == full["examples"] == 360
    assert (tmp_path / "merged.json").read_text() == (tmp_path / "full.json").read_text()
    assert merged["bound"] == full["bound"] and merged["invalid"] == full["invalid"]
    assert full["bound"]["whole_range"] == (eps == 1.0)
    if eps == 1.0:  # any image is reachable: nothing can be robust, and what PGD leaves robust is named
        assert full["bound"]["accuracy_bound"] == 0.0
        assert len(full["bound"]["robust_despite"]) == full["robust_examples"]


def test_autoattack_killed_midway_resumes_from_its_state_file(models, aa_reference, tmp_path):
    """`tradeoff evaluate` on AA in a subprocess, SIGKILLed once its state file holds the first components of a
    batch; run again, it continues from there and writes the uninterrupted run's predictions."""
    catalog, results = models
    _, reference = aa_reference
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(f"paths: {{results: {results.parent}, data: {catalog.data_root.resolve()}}}\n"
                       f"runtime: {{eval_batch_size: {BATCH}, threads: 1}}\n"
                       f"scale_map: {{test_examples: {SUBSET}}}\n")
    cmd = [str(ROOT / ".venv" / "bin" / "tradeoff"), *sum((["--config", str(f)] for f in FILES + [overlay]), []),
           "evaluate", "--run", AT, "--attack", "aa"]
    state = results / "work" / "eval" / AT / "aa.state"
    metrics = results / "metrics" / AT / "aa.json"
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.time() + 300
    progress = None
    while time.time() < deadline and proc.poll() is None:
        try:
            progress = json.loads(state.read_text())
        except (OSError, ValueError):
            progress = None
        if progress and progress.get("partial") and len(progress["partial"]["data"]["done"]) >= 1:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stdout.read().decode()[-3000:]
    assert not metrics.exists()
    saved = json.loads(state.read_text())
    assert saved["partial"] is not None and len(saved["batches"]) < SUBSET // BATCH

    again = subprocess.run(cmd, cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-4000:]
    assert "resuming from" in again.stderr and "resuming a batch after apgd-ce" in again.stderr
    predictions = json.loads((results / "predictions" / AT / "aa.json").read_text())
    assert predictions["robust_correct"] == reference["robust_correct"]
    assert predictions["clean_correct"] == reference["clean_correct"]
    assert read_sidecar(metrics)["resumed_batches"] == len(saved["batches"])  # how the job went: beside the file
    assert not state.exists()
