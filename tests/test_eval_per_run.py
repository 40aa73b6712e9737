"""runtime.eval_per_run: all attacks of one trained run evaluated in one process (one Snakemake job, one DVC
stage), with the same files and the same numbers as one process per (run, attack)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from helpers import ROOT, results_of, run, workflow_copy
from tradeoff import cli as tcli
from tradeoff import config as tcfg
from tradeoff.dvc import stages

PAPER = [ROOT / "config" / "config.yaml"]
SMOKE = PAPER + [ROOT / "config" / "smoke.yaml"]
NT = "cifar10-resnet18-nt"


# ------------------------------------------------------------------------------------------------ config


def test_shipped_scales_set_it_and_run_attacks_lists_every_needed_job():
    assert not tcfg.load_catalog(PAPER).eval_per_run
    assert tcfg.load_catalog(PAPER + [ROOT / "config" / "demo.yaml"]).eval_per_run
    catalog = tcfg.load_catalog(SMOKE)
    assert catalog.eval_per_run
    needed = {pair for name in catalog.targets for pair in catalog.evaluations(name)}
    for train_id in catalog.training_runs():
        attacks = catalog.run_attacks(train_id)
        assert attacks == sorted(a for r, a in needed if r == train_id)
    assert "clean" in catalog.run_attacks(NT) and "aa" in catalog.run_attacks(NT)
    # a run trained as another one has that run's evaluations
    shared = next(r for r in catalog.runs if catalog.train_id[r] != r)
    assert catalog.run_attacks(shared) == catalog.run_attacks(catalog.train_id[shared])


def test_sweep_jobs_are_listed_per_budget(tmp_path):
    overlay = tmp_path / "sweep.yaml"
    overlay.write_text("attacks:\n  sweep: {type: pgd, steps: 3, step_size: eps/4, eps: [8/255, 16/255]}\n"
                       "targets:\n  table1a:\n    columns: {nat: clean, s16: sweep@16_255}\n")
    catalog = tcfg.load_catalog(SMOKE + [overlay])
    assert "sweep@16_255" in catalog.run_attacks(NT) and "sweep@8_255" not in catalog.run_attacks(NT)


@pytest.mark.parametrize("overlay, named", [
    ("runtime: {eval_shards: 2}\n", "runtime.eval_shards = 2"),
    ("attacks:\n  aa: {shards: 4}\n", "attacks.aa.shards = 4"),
])
def test_sharding_with_eval_per_run_is_refused_naming_the_key(tmp_path, overlay, named):
    path = tmp_path / "shards.yaml"
    path.write_text(overlay)
    with pytest.raises(tcfg.ConfigError, match=r"^runtime\.eval_per_run: .*sharding") as err:
        tcfg.load_catalog(SMOKE + [path])
    assert named in str(err.value)
    catalog = tcfg.load_catalog(PAPER + [path])  # without eval_per_run, sharding stays allowed
    assert catalog.shards_for("aa") > 1


def test_sharding_with_eval_per_run_stops_snakemake(tmp_path):
    work = workflow_copy(tmp_path)
    (work / "config" / "shards.yaml").write_text("runtime: {eval_shards: 2}\n")
    out = run(["snakemake", "-n", "--configfile", "config/smoke.yaml", "config/shards.yaml"], work, check=False)
    assert out.returncode != 0
    assert "runtime.eval_per_run: true cannot be combined with sharding" in out.stdout + out.stderr


# ---------------------------------------------------------------------------------------- one process


def test_one_call_for_several_attacks_gives_the_files_of_separate_calls(tmp_path, monkeypatch):
    """A tiny NT run (smoke scale, 3 evaluation batches); `evaluate --attack A --attack B ...` in one process
    against one call per attack: the same accuracies and per-example predictions, byte for byte."""
    work = workflow_copy(tmp_path / "w")
    (work / "config" / "tiny.yaml").write_text("runtime: {device: cpu, eval_batch_size: 24}\n")
    configs = [a for f in ("config/config.yaml", "config/smoke.yaml", "config/tiny.yaml") for a in ("--config", f)]
    monkeypatch.chdir(work)
    assert tcli.main(configs + ["train", "--run", NT]) == 0
    results = results_of(work)
    attacks = ["square", "pgd20", "clean"]  # a seeded library attack first, then one on torch generators

    separate = {}
    for attack in attacks:
        assert tcli.main(configs + ["evaluate", "--run", NT, "--attack", attack]) == 0
        separate[attack] = (json.loads(results.metrics(NT, attack).read_text()),
                            results.predictions(NT, attack).read_bytes())
        results.metrics(NT, attack).unlink()
        results.predictions(NT, attack).unlink()

    # the real command, in its own process, as the Snakemake rule and the DVC stage run it
    out = run(["tradeoff", *configs, "evaluate", "--run", NT, *[a for x in attacks for a in ("--attack", x)]], work)
    assert [line.split(":")[0] for line in out.stdout.splitlines()] == [f"{NT} / {a}" for a in attacks]
    for attack in attacks:
        metrics = json.loads(results.metrics(NT, attack).read_text())
        expected, predictions = separate[attack]
        assert results.predictions(NT, attack).read_bytes() == predictions, attack
        timing = ("seconds", "images_per_s")
        assert {k: v for k, v in metrics.items() if k not in timing} == \
               {k: v for k, v in expected.items() if k not in timing}, attack
        assert metrics["examples"] == 64 and metrics["batch_size"] == 24
    assert not list((results.root / "work" / "eval" / NT).glob("*.state"))  # every state file removed
    assert json.loads(results.predictions(NT, "pgd20").read_text())["robust_correct"].count("1") <= \
           json.loads(results.predictions(NT, "clean").read_text())["robust_correct"].count("1")

    # a shard is one attack's: several --attack with --shard is refused
    assert tcli.main(configs + ["evaluate", "--run", NT, "--attack", "clean", "--attack", "pgd20",
                                "--shard", "0", "--shards", "2"]) == 2


# ------------------------------------------------------------------------------------ Snakemake and DVC


def _job_counts(text: str) -> dict[str, int]:
    counts = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def test_smoke_dry_run_has_one_evaluation_job_per_run(tmp_path):
    work = workflow_copy(tmp_path)
    (work / "config" / "apart.yaml").write_text("runtime: {evaluate_with_training: false}\n")
    out = run(["snakemake", "-n", "-p", "--configfile", "config/smoke.yaml", "config/apart.yaml"], work)
    text = out.stdout + out.stderr
    counts = _job_counts(text)
    catalog = tcfg.load_catalog([work / "config" / f for f in ("config.yaml", "smoke.yaml", "apart.yaml")])
    runs = [r for r in catalog.training_runs() if catalog.run_attacks(r)]
    evaluations = {rule: n for rule, n in counts.items() if rule.startswith("evaluate")}
    assert "evaluate" not in evaluations and "evaluate_shard" not in evaluations
    # every evaluated run is trained (some trained runs are only plotted as curves or analysed: no evaluation)
    assert len(evaluations) == len(runs) <= counts["train"] and set(evaluations.values()) == {1}
    assert set(evaluations) == {"evaluate_run_" + r.replace("-", "_") for r in runs}
    for r in runs:  # one command evaluates every attack of the run
        command = next(line for line in text.splitlines() if f"evaluate --run {r} " in line)
        assert re.findall(r"--attack (\S+)", command) == catalog.run_attacks(r)
        assert f"results/smoke/logs/evaluate/{r}.log" in command
    jobs = re.findall(r"rule evaluate_run_\w+:.*?(?=\n\n|\Z)", text, flags=re.S)
    assert len(jobs) == len(runs) and all("gpu=1" in job and "runtime=240" in job for job in jobs)


def test_smoke_dry_run_trains_and_evaluates_each_run_in_one_job(tmp_path):
    """runtime.evaluate_with_training (the smoke and demo scales): one job per evaluated run, `train --evaluate`,
    whose outputs are the model, the curves and every metrics and predictions file of the run."""
    work = workflow_copy(tmp_path)
    out = run(["snakemake", "-n", "-p", "--configfile", "config/smoke.yaml"], work)
    text = out.stdout + out.stderr
    counts = _job_counts(text)
    catalog = tcfg.load_catalog([work / "config" / "config.yaml", work / "config" / "smoke.yaml"])
    assert catalog.evaluate_with_training
    runs = [r for r in catalog.training_runs() if catalog.run_attacks(r)]
    assert not [rule for rule in counts if rule.startswith("evaluate")]
    assert {rule for rule in counts if rule.startswith("train_evaluate_")} == \
        {"train_evaluate_" + r.replace("-", "_") for r in runs}
    # the plain train rule is left for runs that are only plotted or analysed
    trained = re.findall(r"rule train:.*?wildcards: run=(\S+)", text, flags=re.S)
    assert len(trained) == counts["train"] > 0 and not [r for r in trained if catalog.run_attacks(r)]
    for r in runs:
        command = next(line for line in text.splitlines() if f"train --run {r} --evaluate" in line)
        assert f"results/smoke/logs/train/{r}.log" in command
    job = re.search(rf"rule train_evaluate_{NT.replace('-', '_')}:.*?(?=\n\n|\Z)", text, flags=re.S).group(0)
    for attack in catalog.run_attacks(NT):
        assert str(catalog.layout.metrics(NT, attack)) in job
        assert str(catalog.layout.predictions(NT, attack)) in job
    assert "gpu=1" in job and "runtime=1440" in job  # the training job's resources


def test_evaluate_with_training_refines_eval_per_run(tmp_path):
    """An overlay that asks for one job per (run, attack) (the SLURM test's) turns it off with eval_per_run."""
    path = tmp_path / "o.yaml"
    path.write_text("runtime: {eval_per_run: false}\n")
    assert tcfg.load_catalog(SMOKE).evaluate_with_training
    assert not tcfg.load_catalog(SMOKE + [path]).evaluate_with_training
    assert not stages(tcfg.load_catalog(SMOKE + [path]), [])[f"train-{NT}"]["cmd"].endswith("--evaluate")


def test_train_evaluate_writes_the_files_of_train_then_evaluate(tmp_path, monkeypatch):
    """`train --run R --evaluate` (one process) against `train` then `evaluate --attack ...` (two): the same model
    and the same metrics and predictions, byte for byte but for the timings."""
    outputs = {}
    for how in ("apart", "together"):
        work = workflow_copy(tmp_path / how)
        (work / "config" / "tiny.yaml").write_text("runtime: {device: cpu, eval_batch_size: 24}\n")
        configs = [a for f in ("config/config.yaml", "config/smoke.yaml", "config/tiny.yaml") for a in ("--config", f)]
        monkeypatch.chdir(work)
        catalog = tcfg.load_catalog([work / "config" / f for f in ("config.yaml", "smoke.yaml", "tiny.yaml")])
        attacks = catalog.run_attacks(NT)
        assert tcli.main(configs + ["download", "digits-c"]) == 0  # Zipper Table 4's NROB at this scale
        if how == "apart":
            assert tcli.main(configs + ["train", "--run", NT]) == 0
            assert tcli.main(configs + ["evaluate", "--run", NT, *[a for x in attacks for a in ("--attack", x)]]) == 0
        else:
            assert tcli.main(configs + ["train", "--run", NT, "--evaluate"]) == 0
        results = results_of(work)
        outputs[how] = {
            **{f"w/{k}": v for k, v in torch.load(results.model(NT),
                                                   weights_only=True)["model"].items()},
            **{f"p/{a}": results.predictions(NT, a).read_bytes() for a in attacks},
            **{f"m/{a}": {k: v for k, v in json.loads(results.metrics(NT, a).read_text()).items()
                          if k not in ("seconds", "images_per_s")} for a in attacks},
        }
    assert outputs["apart"].keys() == outputs["together"].keys() and len(outputs["apart"]) > 3
    for key, expected in outputs["apart"].items():
        got = outputs["together"][key]
        assert torch.equal(got, expected) if key.startswith("w/") else got == expected, key


def test_dvc_stages_one_per_run_with_eval_per_run(tmp_path):
    apart = tmp_path / "apart.yaml"
    apart.write_text("runtime: {evaluate_with_training: false}\n")
    files = [str(ROOT / "config" / "config.yaml"), str(ROOT / "config" / "smoke.yaml"), str(apart)]
    catalog = tcfg.load_catalog(files)
    out = stages(catalog, files)
    evaluate = {name: stage for name, stage in out.items() if name.startswith("evaluate-")}
    assert set(evaluate) == {f"evaluate-{r}" for r in catalog.training_runs() if catalog.run_attacks(r)}
    stage = evaluate[f"evaluate-{NT}"]
    attacks = catalog.run_attacks(NT)
    assert stage["cmd"].endswith("evaluate --run " + NT + "".join(f" --attack {a}" for a in attacks))
    assert [next(iter(m)) for m in stage["metrics"]] == [str(catalog.layout.metrics(NT, a)) for a in attacks]
    assert [next(iter(o)) for o in stage["outs"]] == [str(catalog.layout.predictions(NT, a)) for a in attacks]
    assert stage["params"] == [f"evaluations.{NT}"]
    paper = stages(tcfg.load_catalog(PAPER), ["config/config.yaml"])  # paper scale: one stage per pair
    assert f"evaluate-{NT}-pgd20" in paper and f"evaluate-{NT}" not in paper


def test_dvc_train_stage_evaluates_with_evaluate_with_training():
    files = ["config/config.yaml", "config/smoke.yaml"]
    catalog = tcfg.load_catalog([ROOT / f for f in files])
    out = stages(catalog, files)
    assert not [name for name in out if name.startswith("evaluate-")]
    stage, attacks = out[f"train-{NT}"], catalog.run_attacks(NT)
    assert stage["cmd"].endswith(f"train --run {NT} --evaluate")
    assert [next(iter(m)) for m in stage["metrics"]] == [str(catalog.layout.metrics(NT, a)) for a in attacks]
    assert stage["outs"][0] == str(catalog.results / "checkpoints" / NT / "model.pt")
    assert stage["params"] == [f"runs.{NT}", f"evaluations.{NT}"]
