"""runtime.eval_unit: what one evaluation job evaluates. `attack` (paper scale): one job per (run, attack), each its
own files; `run` (the small scales): one job per trained run for every attack the targets need of it, into one file,
with the same numbers. Snakemake and DVC have the same rule family and the same jobs at every scale."""

from __future__ import annotations

import json

import pytest
from helpers import ROOT, job_counts, results_of, run, workflow_copy

from tradeoff import cli as tcli
from tradeoff import config as tcfg
from tradeoff.pipeline.dvc_export import stages, unit_key
from tradeoff.storage.provenance import read_sidecar

PAPER = [ROOT / "config" / "config.yaml"]
SMOKE = PAPER + [ROOT / "config" / "smoke.yaml"]
NT = "cifar10-resnet18-nt"


# ------------------------------------------------------------------------------------------------ config


def test_shipped_scales_and_the_jobs_of_a_run():
    paper = tcfg.load_catalog(PAPER)
    assert paper.eval_unit == "attack" and paper.eval_units(NT) == paper.model_attacks(NT)
    assert paper.metrics_file(NT, "pgd20") == paper.layout.metrics(NT, "pgd20")
    assert tcfg.load_catalog(PAPER + [ROOT / "config" / "demo.yaml"]).eval_unit == "run"
    catalog = tcfg.load_catalog(SMOKE)
    assert catalog.eval_units(NT) == [tcfg.ALL_ATTACKS]
    assert catalog.unit_attacks(NT, tcfg.ALL_ATTACKS) == catalog.model_attacks(NT)
    assert catalog.metrics_file(NT, "pgd20") == catalog.layout.metrics(NT, "all")
    needed = {pair for name in catalog.targets for pair in catalog.evaluations(name)}
    for train_id in catalog.training_runs():
        assert catalog.model_attacks(train_id) == sorted(a for r, a in needed if r == train_id)
    assert "clean" in catalog.model_attacks(NT) and "aa" in catalog.model_attacks(NT)
    shared = next(r for r in catalog.runs if catalog.train_id[r] != r)  # trained as another run: its evaluations
    with pytest.raises(ValueError, match=f"{shared!r} is a run id, not a model id: its training job .* is "
                                         f"{catalog.train_id[shared]!r}"):  # are its train id's, asked of that
        catalog.model_attacks(shared)


def test_sweep_jobs_are_listed_per_budget(tmp_path):
    overlay = tmp_path / "sweep.yaml"
    overlay.write_text("attacks:\n  sweep: {type: pgd, steps: 3, step_size: eps*0.7, eps: [8/255, 16/255]}\n"
                       "targets:\n  table1a:\n    columns: {nat: clean, s16: sweep@16_255}\n")
    catalog = tcfg.load_catalog(SMOKE + [overlay])
    assert "sweep@16_255" in catalog.model_attacks(NT) and "sweep@8_255" not in catalog.model_attacks(NT)


@pytest.mark.parametrize("overlay, named", [
    ("runtime: {eval_shards: 2}\n", "runtime.eval_shards = 2"),
    ("attacks:\n  aa: {shards: 4}\n", "attacks.aa.shards = 4"),
])
def test_sharding_needs_one_job_per_attack(tmp_path, overlay, named):
    path = tmp_path / "shards.yaml"
    path.write_text(overlay)
    with pytest.raises(tcfg.ConfigError, match=r"^runtime\.eval_unit: run cannot be combined with sharding") as err:
        tcfg.load_catalog(SMOKE + [path])
    assert named in str(err.value)
    catalog = tcfg.load_catalog(PAPER + [path])  # one job per attack: sharding stays allowed
    assert catalog.shards_for("aa") > 1


def test_no_attack_may_take_the_suites_name(tmp_path):
    path = tmp_path / "all.yaml"
    path.write_text("attacks:\n  all: {type: clean}\n")
    with pytest.raises(tcfg.ConfigError, match=r"^attacks\.all: the name is taken"):
        tcfg.load_catalog(PAPER + [path])


# ---------------------------------------------------------------------------------------- one process


def test_a_runs_suite_holds_exactly_what_its_attacks_own_jobs_write(tmp_path, monkeypatch):
    """A tiny NT run (smoke scale, 3 evaluation batches); `evaluate --unit all` (every attack of the run in one
    process, one file) against one call per attack: the same records and per-example predictions; a suite job killed
    after some attacks keeps them (work/eval/<run>/<attack>.done.json) and redoes none of them."""
    work = workflow_copy(tmp_path / "w")
    (work / "config" / "tiny.yaml").write_text(
        "runtime: {device: cpu, eval_batch_size: 24}\ntargets:\n  table1a:\n    columns: {nat: clean, pgd20: pgd20, "
        "square: square}\n")
    files = ("config/config.yaml", "config/smoke.yaml", "config/tiny.yaml")
    configs = [a for f in files for a in ("--config", f)]
    monkeypatch.chdir(work)
    assert tcli.main(configs + ["train", "--run", NT]) == 0
    assert tcli.main(configs + ["download", "digits-c"]) == 0  # the run is also Zipper Table 4's, with NROB
    catalog = tcfg.load_catalog([work / f for f in files])
    attacks = catalog.model_attacks(NT)
    assert {"clean", "pgd20", "square"} <= set(attacks)
    results = results_of(work)

    separate = {}
    for attack in ("square", "pgd20", "clean"):  # a seeded library attack, one on torch generators, none
        assert tcli.main(configs + ["evaluate", "--run", NT, "--attack", attack]) == 0
        separate[attack] = (json.loads(results.metrics(NT, attack).read_text()),
                            json.loads(results.predictions(NT, attack).read_text()))

    # the real command, in its own process, as the Snakemake rule and the DVC stage run it
    out = run(["tradeoff", *configs, "evaluate", "--run", NT, "--unit", "all"], work)
    assert [line.split(":")[0] for line in out.stdout.splitlines() if " / " in line] == [f"{NT} / {a}" for a in attacks]
    suite = json.loads(results.metrics(NT, "all").read_text())
    predictions = json.loads(results.predictions(NT, "all").read_text())
    assert suite["format"] == "tradeoff-evaluations/1" and list(suite["evaluations"]) == attacks
    for attack, (expected, expected_predictions) in separate.items():
        # the same record byte for byte: what the clock measured is in the files' sidecars, not in the files
        assert suite["evaluations"][attack] == expected, attack
        assert predictions["evaluations"][attack] == expected_predictions, attack
    assert not list((results.root / "work" / "eval" / NT).iterdir())  # states and kept results removed

    # killed after two attacks: what they found is kept, and the rerun evaluates only the rest
    ran = read_sidecar(results.metrics(NT, "all"))["evaluations"]  # a kept attack's whole record: its seconds too
    assert set(ran) == set(attacks) and all(ran[a]["seconds"] >= 0 for a in attacks)
    kept = {a: {**suite["evaluations"][a], **ran[a]} for a in attacks[:2]}
    results.metrics(NT, "all").unlink()
    for attack in attacks[:2]:
        done = results.eval_work(NT, attack, suffix=".done.json")
        done.write_text(json.dumps({"key": _key(catalog, results, attack), "metrics": {**kept[attack], "kept": True},
                                    "predictions": predictions["evaluations"][attack]}))
    out = run(["tradeoff", *configs, "evaluate", "--run", NT, "--unit", "all"], work)
    again = json.loads(results.metrics(NT, "all").read_text())["evaluations"]
    assert [a for a in attacks if again[a].get("kept")] == attacks[:2]
    assert "already evaluated" in out.stderr

    # the unit is the scale's: another one is refused, naming what is allowed
    assert tcli.main(configs + ["evaluate", "--run", NT, "--unit", "pgd20"]) == 2
    assert tcli.main(configs + ["evaluate", "--run", NT]) == 2  # neither --unit nor --attack


def _key(catalog, results, attack):
    from tradeoff.evaluation.state import state_key
    from tradeoff.storage.atomic import sha256_file

    spec = catalog.attack_for(attack, NT)
    return state_key(sha256_file(results.model(NT))[:16], spec, 0, 24, 64, 0)


# ------------------------------------------------------------------------------------ Snakemake and DVC


@pytest.mark.parametrize("unit", ["run", "attack"])
def test_the_same_rules_at_every_unit_one_job_per_unit(tmp_path, unit):
    """The smoke scale's dry run with either unit: the same rule family (train, evaluate, ...), one evaluation job
    per evaluated run or per (run, attack), and DVC plans the same evaluation jobs."""
    work = workflow_copy(tmp_path)
    (work / "config" / "unit.yaml").write_text(f"runtime: {{eval_unit: {unit}}}\n")
    files = ("config/config.yaml", "config/smoke.yaml", "config/unit.yaml")
    out = run(["snakemake", "-n", "table1a", "--configfile", *files[1:]], work)
    counts = job_counts(out.stdout + out.stderr)
    catalog = tcfg.load_catalog([work / f for f in files])
    jobs = {(r, catalog.unit_of(a)) for r, a in catalog.evaluations("table1a")}
    assert counts["evaluate"] == len(jobs)
    assert set(counts) == {"download", "train", "evaluate", "table", "table1a"}
    if unit == "run":
        assert len(jobs) == 9  # the table's rows
        assert f"{results_of(work).metrics(NT, 'all').relative_to(work)}" in out.stdout
    dvc = stages(catalog, list(files))
    assert {name for name in dvc if name.startswith("evaluate@")} == {
        f"evaluate@{unit_key(r, u)}" for r in catalog.training_runs() for u in catalog.eval_units(r)}
