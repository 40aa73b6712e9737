"""The configuration: every bad input is refused before any job, with a message naming the key."""

from __future__ import annotations

import copy
import json

import pytest
from report_fixtures import outcomes, write_measurement

from tradeoff import config as cfg
from tradeoff.config.scale import _scaled_epoch

ROOT = cfg.ROOT
PAPER = [ROOT / "config" / "config.yaml"]
DEMO = PAPER + [ROOT / "config" / "demo.yaml"]


@pytest.fixture(scope="module")
def paper_config() -> dict:
    return cfg.load_config(PAPER)


def test_shipped_scales_resolve():
    for files in (PAPER, DEMO, PAPER + [ROOT / "config" / "smoke.yaml"]):
        catalog = cfg.load_catalog(files)
        assert catalog.runs and catalog.targets


def test_budgets_and_steps_parse():
    assert cfg.parse_budget("8/255", "k") == pytest.approx(8 / 255)
    assert cfg.parse_budget(0.3, "k") == 0.3
    assert cfg.parse_step("eps/4", 0.3, "k") == pytest.approx(0.075)
    assert cfg.parse_step("eps*0.5", 0.3, "k") == pytest.approx(0.15)
    assert cfg.parse_step("2/255", 0.3, "k") == pytest.approx(2 / 255)
    with pytest.raises(cfg.ConfigError, match="k: must be >= 0"):
        cfg.parse_budget(-0.1, "k")


def test_paper_scale_budget_is_the_papers(paper_config):
    catalog = cfg.resolve(paper_config)
    attack = catalog.runs["cifar10-resnet18-at-beta1"].method.params["attack"]
    assert attack["eps"] == pytest.approx(8 / 255)
    assert attack["step_size"] == pytest.approx(2 / 255)
    assert attack["steps"] == 10
    pgd20 = catalog.attack_for("pgd20", "cifar10-resnet18-nt")
    assert (pgd20.params["steps"], pgd20.eps, pgd20.step_size) == (20, pytest.approx(8 / 255), pytest.approx(2 / 255))


def test_demo_scale_keeps_budget_ratio_and_rescales_epochs():
    catalog = cfg.load_catalog(DEMO)
    spec = catalog.runs["cifar10-resnet18-at-beta1"]
    assert spec.dataset == "digits" and spec.paper_dataset == "cifar10"
    assert spec.method.params["attack"]["eps"] == pytest.approx(0.3)
    # scale_map.train_attack_steps: PGD-10 of eps/4 becomes PGD-3 of 5/6 eps in training, the same path length ...
    assert (spec.method.params["attack"]["steps"], spec.method.params["attack"]["step_size"]) == (3, pytest.approx(0.25))
    # ... while the attacks that measure (the selection's PGD-20, the evaluation's) keep their steps
    assert (spec.selection.attack.params["steps"], spec.selection.attack.step_size) == (20, pytest.approx(0.075))
    assert spec.epochs == 10
    assert spec.lr.as_dict() == {"epochs": [0, 7.5, 10], "values": [0.1, 0.1, 0.01]}
    assert spec.optimizer.weight_decay == 5e-4
    # scale_map.preset_lr: the CA-AT preset's runs take their own schedule at this scale
    assert catalog.runs["cifar10-resnet18-caat-ce-gamma0_8"].lr.values == (0.05, 0.05, 0.005)
    # scale_map.autoattack_caps: AutoAttack's family is capped, PGD-100 is not
    aa = catalog.attack_for("aa", "cifar10-resnet18-at-beta1")
    square = catalog.attack_for("square", "cifar10-resnet18-at-beta1")
    assert (aa.params["steps"], aa.params["queries"], square.params["queries"]) == (50, 500, 500)
    assert catalog.attack_for("pgd100", "cifar10-resnet18-at-beta1").params["steps"] == 100


def test_train_attack_steps_leave_apgd_step_sizes_alone(tmp_path):
    overlay = tmp_path / "o.yaml"
    overlay.write_text("scale_map: {train_attack_steps: 4}\n")
    catalog = cfg.load_catalog(PAPER + [overlay])
    apgd = catalog.runs["cifar10-resnet18-caat-ce-gamma0_8-train_apgd"].method.params["attack"]
    assert apgd["steps"] == 4 and apgd.get("step_size") is None
    pgd = catalog.runs["cifar10-resnet18-at-beta1"].method.params["attack"]
    assert (pgd["steps"], pgd["step_size"]) == (4, pytest.approx(2 / 255 * 10 / 4))


def test_rescaled_epochs_written_two_ways_share_one_job():
    """CIFAR-100's tau epochs (83.333 and 150 of 200) and CIFAR-10's (50 and 90 of 120) are one setting at 10 epochs
    (and at 12)."""
    catalog = cfg.load_catalog(DEMO)
    assert catalog.runs["cifar100-resnet18-fat"].method.params["tau_epochs"] == (4.167, 7.5)
    assert catalog.train_id["cifar100-resnet18-fat"] == catalog.train_id["cifar10-resnet18-fat"]
    assert _scaled_epoch(83.333, 12 / 200) == _scaled_epoch(50, 12 / 120) == 5.0


def test_resolved_catalog_is_kept_for_the_next_job_and_renewed_when_a_file_changes(tmp_path):
    results = tmp_path / "results"
    overlay = tmp_path / "o.yaml"
    overlay.write_text(f"paths: {{results: {results}}}\nscale_map: {{epochs: 12}}\n")
    assert not cfg.load_catalog(PAPER + [overlay]).layout.catalog_cache.exists()  # a library call only reads it
    fresh = cfg.load_catalog(PAPER + [overlay], write_cache=True)  # as a job of the pipeline does
    kept = list((results / "paper" / "work" / "catalog").glob("*.json"))
    assert len(kept) == 1
    again = cfg.load_catalog(PAPER + [overlay], write_cache=True)  # from the file: the same catalog, field by field, in the same order
    fields = ("config", "train_id", "seed_runs")
    assert json.dumps([getattr(again, f) for f in fields]) == json.dumps([getattr(fresh, f) for f in fields])
    assert list(again.attacks.items()) == list(fresh.attacks.items())  # typed attacks, equal field by field
    assert again.targets == fresh.targets and list(again.targets) == list(fresh.targets)
    assert [t.as_dict() for t in again.targets.values()] == [t.as_dict() for t in fresh.targets.values()]
    assert list(again.runs.items()) == list(fresh.runs.items())  # typed settings, equal field by field
    overlay.write_text(f"paths: {{results: {results}}}\nscale_map: {{epochs: 6}}\n")
    changed = cfg.load_catalog(PAPER + [overlay], write_cache=True)
    assert changed.runs["cifar10-resnet18-nt"].epochs == 6
    assert len(list((results / "paper" / "work" / "catalog").glob("*.json"))) == 2
    # a bad file is refused even when an earlier resolution of other bytes is kept
    overlay.write_text(f"paths: {{results: {results}}}\nscale_map: {{epochs: 0}}\n")
    with pytest.raises(cfg.ConfigError, match="scale_map.epochs"):
        cfg.load_catalog(PAPER + [overlay])


def test_epoch_breakpoints_rescale_with_length(tmp_path):
    overlay = tmp_path / "o.yaml"
    overlay.write_text("scale_map: {epochs: 12}\n")
    spec = cfg.load_catalog(PAPER + [overlay]).runs["cifar10-resnet18-nt"]
    assert spec.lr.epochs == (0, 4, 6, 12)
    assert spec.lr.values == (0.01, 0.01, 0.001, 0.0001)


def test_identical_runs_train_once(paper_config):
    config = copy.deepcopy(paper_config)
    config["runs"]["copy-of-nt"] = copy.deepcopy(config["runs"]["cifar10-resnet18-nt"])
    catalog = cfg.resolve(config)
    assert catalog.train_id["copy-of-nt"] == "cifar10-resnet18-nt"
    assert "copy-of-nt" not in catalog.training_runs()


def _mutated(config: dict, path: list, value) -> dict:
    out = copy.deepcopy(config)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


_DELETE = object()


#: bad inputs (a key path of the paper-scale config, its bad value) and what the one line must match: here the
#: library's error; tests/test_front_doors.py runs them as overlays through `tradeoff check-config` and Snakemake
BAD_CONFIGS = [
        (["runs", "cifar10-resnet18-nt", "method", "name"], "madry", r"runs\.cifar10-resnet18-nt\.method\.name: unknown method 'madry'; allowed: \["),
        (["runs", "cifar10-resnet18-nt", "dataset"], "imagenet", r"runs\.cifar10-resnet18-nt\.dataset: unknown value 'imagenet'; allowed: \["),
        (["runs", "cifar10-resnet18-nt", "arch"], "vgg16", r"runs\.cifar10-resnet18-nt\.arch: unknown value 'vgg16'; allowed"),
        (["runs", "cifar10-resnet18-nt", "epoch"], 3, r"runs\.cifar10-resnet18-nt\.epoch: unknown key\(s\) \['epoch'\]; allowed: .*'epochs'.*; did you mean 'epochs'\?"),
        (["runs", "cifar10-resnet18-nt", "seed"], 1.5, r"runs\.cifar10-resnet18-nt\.seed: 1\.5 is not of type 'integer'"),
        (["runs", "cifar10-resnet18-nt", "seed"], "one", r"runs\.cifar10-resnet18-nt\.seed"),
        (["attacks", "pgd20", "eps"], -0.1, r"attacks\.pgd20\.eps"),
        (["attacks", "pgd20", "eps"], 3.0, r"attacks\.pgd20\.eps: eps 3 is absurd for the linf norm"),
        (["attacks", "pgd20", "type"], "deepfool", r"attacks\.pgd20\.type: unknown attack 'deepfool'; allowed: \["),
        (["attacks", "pgd20", "stepz"], 3, r"attacks\.pgd20\.stepz: unknown parameter of attack type 'pgd'; did you mean 'steps'"),
        (["runs", "cifar10-resnet18-nt", "lr"], {"epochs": [0, 40, 60], "values": [0.1, 0.01]},
         r"runs\.cifar10-resnet18-nt\.lr: 3 breakpoints \(epochs\) but 2 values"),
        (["runs", "cifar10-resnet18-nt", "lr"], {"epochs": [0, 60, 40], "values": [0.1, 0.01, 0.001]},
         r"runs\.cifar10-resnet18-nt\.lr\.epochs: breakpoints must be strictly increasing"),
        (["targets", "table1a", "rows", 0, "run"], "no-such-run", r"targets\.table1a\.rows\[0\]\.run: unknown run 'no-such-run'"),
        (["targets", "table1a", "columns", "nat"], "no-such-attack", r"targets\.table1a\.columns\.nat: unknown attack"),
        (["scale"], "huge", r"scale: 'huge' is not allowed; allowed: \['paper', 'demo', 'smoke', 'rehearsal'\]"),
        (["runs", "cifar10-resnet18-nt", "preset"], "nope", r"runs\.cifar10-resnet18-nt\.preset: unknown preset 'nope'"),
        (["runs", "cifar10-resnet18-at-beta1", "method", "bets"], 1.0, r"runs\.cifar10-resnet18-at-beta1\.method\.bets: unknown parameter of method 'pgd_at'; did you mean 'beta'\? allowed: \["),
    ]


@pytest.mark.parametrize("path, value, expected", BAD_CONFIGS)
def test_bad_config_names_the_key(paper_config, path, value, expected):
    with pytest.raises(cfg.ConfigError, match=expected):
        cfg.resolve(_mutated(paper_config, path, value))


def test_duplicate_run_id_is_refused(tmp_path):
    """A key written twice in one mapping (a variant of a design block, a plain run) is refused, not the last one
    silently kept; a run id that the design makes twice is refused too (tests/test_catalog_design.py)."""
    text = (ROOT / "config" / "config.yaml").read_text()
    dup = text.replace("      nt: &nt {name: nt}\n", "      nt: &nt {name: nt}\n      nt: {name: nt}\n", 1)
    assert dup != text
    path = tmp_path / "dup.yaml"
    path.write_text(dup)
    with pytest.raises(cfg.ConfigError, match="duplicate key 'nt' at line"):
        cfg.load_config([path])
    overlay = tmp_path / "runs.yaml"
    overlay.write_text("runs:\n  mine: {dataset: digits, method: {name: nt}}\n  mine: {dataset: digits, method: {name: nt}}\n")
    with pytest.raises(cfg.ConfigError, match="duplicate key 'mine' at line 3"):
        cfg.load_config(PAPER + [overlay])


def test_overlay_merges_recursively(tmp_path):
    overlay = tmp_path / "o.yaml"
    overlay.write_text("scale_map: {epochs: 3}\n")
    merged = cfg.load_config(PAPER + [overlay])
    assert merged["scale_map"]["epochs"] == 3
    assert merged["scale_map"]["lr_factor"] == 1.0


def test_attack_without_step_size_resolves_without_one(paper_config):
    """APGD-type attacks choose their own step: a resolved spec must not carry step_size: None."""
    config = copy.deepcopy(paper_config)
    config["train_attacks"]["apgd"] = {"type": "apgd-ce", "norm": "linf"}
    config["runs"]["cifar10-resnet18-at-beta1"]["method"]["attack"] = "apgd"
    spec = cfg.resolve(config).runs["cifar10-resnet18-at-beta1"].method.params["attack"]
    assert "step_size" not in spec and spec["eps"] == pytest.approx(8 / 255)


def test_autoattack_family_names_the_attacks_that_run_autoattack_code():
    from tradeoff.attacks import ATTACKS
    from tradeoff.attacks.autoattack import _AutoAttackBase

    assert set(cfg.AUTOATTACK_FAMILY) == {name for name, cls in ATTACKS.items() if issubclass(cls, _AutoAttackBase)}


def test_a_report_job_never_imports_torch(tmp_path):
    """Reports read metrics files only; with the resolved catalog kept, their process never loads PyTorch (seconds of
    start-up in every one of the pipeline's report jobs)."""
    import subprocess
    import sys

    files = [str(cfg.ROOT / "config" / "config.yaml"), str(cfg.ROOT / "config" / "smoke.yaml")]
    overlay = tmp_path / "o.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}}}\nruntime: {{eval_unit: attack}}\n")
    catalog = cfg.load_catalog([*files, overlay], write_cache=True)  # resolved and kept, as the first job does
    code = ("import sys; from tradeoff import cli; status = cli.main(sys.argv[1:]); "
            "assert 'torch' not in sys.modules, 'torch was imported'; sys.exit(status)")
    args = [a for f in [*files, str(overlay)] for a in ("--config", f)]
    out = subprocess.run([sys.executable, "-c", code, *args, "report", "table1a"], capture_output=True, text=True)
    assert out.returncode == 1 and "nothing measured yet" in out.stderr, out.stderr  # a refusal loads nothing either
    write_measurement(catalog, "cifar10-resnet18-nt", "clean", outcomes(50, 64))
    out = subprocess.run([sys.executable, "-c", code, *args, "report", "table1a"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_the_snakefile_reads_a_kept_catalog_without_torch_or_matplotlib(tmp_path):
    """What the Snakefile asks of the catalog when it starts (the runs' attacks, the datasets every job reads, every
    target's files) comes from the kept resolution without loading PyTorch or matplotlib, and reading it with
    write_cache=False (as the Snakefile does, so that a dry run writes nothing) writes no file."""
    import subprocess
    import sys

    files = [str(cfg.ROOT / "config" / "config.yaml"), str(cfg.ROOT / "config" / "demo.yaml")]
    overlay = tmp_path / "o.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}}}\n")
    cfg.load_catalog([*files, overlay], write_cache=False)
    assert not (tmp_path / "results").exists()
    kept = cfg.load_catalog([*files, overlay], write_cache=True)
    assert "digits-c" in kept.datasets()
    code = ("import sys; from tradeoff import config as c; from tradeoff.report.build import target_outputs\n"
            "k = c.load_catalog(sys.argv[1:], write_cache=False)\n"
            "assert {r: k.model_attacks(r) for r in k.training_runs()} and 'digits-c' in k.datasets()\n"
            "[target_outputs(k, t) for t in k.targets]\n"
            "[k.attack_for(a, r) for r in k.training_runs() for a in k.model_attacks(r)]\n"
            "loaded = {'torch', 'matplotlib'} & set(sys.modules); assert not loaded, loaded")
    out = subprocess.run([sys.executable, "-c", code, *files, str(overlay)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_runs_that_differ_only_in_what_they_observe_share_a_job(paper_config):
    """Generalist's learner tracking and snapshots do not change its weights (tests/test_zipper_figures.py), so a run
    without them is trained by the job of the run that asks for them; two different observations stay two jobs."""
    config = copy.deepcopy(paper_config)
    tracked = config["runs"]["cifar10-resnet18-generalist"]
    plain = copy.deepcopy(tracked)
    for key in ("track_learners", "snapshot_epochs"):
        plain["method"].pop(key)
    config["runs"] = {"plain": plain, "tracked": tracked, "other": copy.deepcopy(tracked)}
    config["runs"]["other"]["method"]["track_learners"] = {"examples": 10, "attack": "pgd20"}
    config["targets"] = {}
    config["audit"]["build"] = []  # the audited tables are gone with the targets
    catalog = cfg.resolve(config)
    assert catalog.train_id["tracked"] == "tracked" and catalog.train_id["other"] == "other"
    assert catalog.train_id["plain"] == "plain"  # two observations asked for: no single job serves them all
    del config["runs"]["other"]
    catalog = cfg.resolve(config)
    assert catalog.train_id == {"plain": "tracked", "tracked": "tracked"}
