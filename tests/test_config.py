"""The configuration: every bad input is refused before any job, with a message naming the key."""

from __future__ import annotations

import copy

import pytest

from tradeoff import config as cfg

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
    attack = catalog.runs["cifar10-resnet18-at-beta1"]["method"]["attack"]
    assert attack["eps"] == pytest.approx(8 / 255)
    assert attack["step_size"] == pytest.approx(2 / 255)
    assert attack["steps"] == 10
    pgd20 = catalog.attack_for("pgd20", "cifar10-resnet18-nt")
    assert (pgd20["steps"], pgd20["eps"], pgd20["step_size"]) == (20, pytest.approx(8 / 255), pytest.approx(2 / 255))


def test_demo_scale_keeps_budget_ratio_and_rescales_epochs():
    catalog = cfg.load_catalog(DEMO)
    spec = catalog.runs["cifar10-resnet18-at-beta1"]
    assert spec["dataset"] == "digits" and spec["paper_dataset"] == "cifar10"
    assert spec["method"]["attack"]["eps"] == pytest.approx(0.3)
    assert spec["method"]["attack"]["step_size"] == pytest.approx(0.075)
    assert spec["epochs"] == 20
    assert spec["lr"] == {"epochs": [0, 15, 20], "values": [0.1, 0.1, 0.01]}
    assert spec["optimizer"]["weight_decay"] == 5e-4


def test_epoch_breakpoints_rescale_with_length(tmp_path):
    overlay = tmp_path / "o.yaml"
    overlay.write_text("scale_map: {epochs: 12}\n")
    spec = cfg.load_catalog(PAPER + [overlay]).runs["cifar10-resnet18-nt"]
    assert spec["lr"]["epochs"] == [0, 4, 6, 12]
    assert spec["lr"]["values"] == [0.01, 0.01, 0.001, 0.0001]


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


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (["runs", "cifar10-resnet18-nt", "method", "name"], "madry", r"runs\.cifar10-resnet18-nt\.method\.name: unknown method 'madry'; allowed: \["),
        (["runs", "cifar10-resnet18-nt", "dataset"], "imagenet", r"runs\.cifar10-resnet18-nt\.dataset: unknown value 'imagenet'; allowed: \["),
        (["runs", "cifar10-resnet18-nt", "arch"], "vgg16", r"runs\.cifar10-resnet18-nt\.arch: unknown value 'vgg16'; allowed"),
        (["runs", "cifar10-resnet18-nt", "epoch"], 3, r"runs\.cifar10-resnet18-nt: unknown key\(s\) \['epoch'\]; allowed: .*'epochs'"),
        (["runs", "cifar10-resnet18-nt", "seed"], 1.5, r"runs\.cifar10-resnet18-nt\.seed: 1\.5 is not of type 'integer'"),
        (["runs", "cifar10-resnet18-nt", "seed"], "one", r"runs\.cifar10-resnet18-nt\.seed"),
        (["attacks", "pgd20", "eps"], -0.1, r"attacks\.pgd20\.eps"),
        (["attacks", "pgd20", "eps"], 3.0, r"attacks\.pgd20\.eps: eps 3 is absurd for the linf norm"),
        (["attacks", "pgd20", "type"], "deepfool", r"attacks\.pgd20\.type: unknown attack 'deepfool'; allowed: \["),
        (["attacks", "pgd20", "stepz"], 3, r"attacks\.pgd20: unknown key\(s\) \['stepz'\]"),
        (["runs", "cifar10-resnet18-nt", "lr"], {"epochs": [0, 40, 60], "values": [0.1, 0.01]},
         r"runs\.cifar10-resnet18-nt\.lr: 3 breakpoints \(epochs\) but 2 values"),
        (["runs", "cifar10-resnet18-nt", "lr"], {"epochs": [0, 60, 40], "values": [0.1, 0.01, 0.001]},
         r"runs\.cifar10-resnet18-nt\.lr\.epochs: breakpoints must be strictly increasing"),
        (["targets", "table1a", "rows", 0, "run"], "no-such-run", r"targets\.table1a\.rows\[0\]\.run: unknown run 'no-such-run'"),
        (["targets", "table1a", "columns", "nat"], "no-such-attack", r"targets\.table1a\.columns\.nat: unknown attack"),
        (["scale"], "huge", r"scale: 'huge' is not allowed; allowed: \['paper', 'demo', 'smoke'\]"),
        (["runs", "cifar10-resnet18-nt", "preset"], "nope", r"runs\.cifar10-resnet18-nt\.preset: unknown preset 'nope'"),
        (["runs", "cifar10-resnet18-at-beta1", "method", "bets"], 1.0, r"unknown parameter\(s\) \['bets'\] for method 'pgd_at'; allowed: \["),
    ],
)
def test_bad_config_names_the_key(paper_config, path, value, expected):
    with pytest.raises(cfg.ConfigError, match=expected):
        cfg.resolve(_mutated(paper_config, path, value))


def test_duplicate_run_id_is_refused(tmp_path):
    text = (ROOT / "config" / "config.yaml").read_text()
    dup = text.replace("runs:\n", "runs:\n  cifar10-resnet18-nt:\n    preset: generalist-resnet18\n"
                                  "    dataset: cifar10\n    arch: resnet18\n    seed: 1\n    method: {name: nt}\n", 1)
    path = tmp_path / "dup.yaml"
    path.write_text(dup)
    with pytest.raises(cfg.ConfigError, match="duplicate key 'cifar10-resnet18-nt' at line"):
        cfg.load_config([path])


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
    spec = cfg.resolve(config).runs["cifar10-resnet18-at-beta1"]["method"]["attack"]
    assert "step_size" not in spec and spec["eps"] == pytest.approx(8 / 255)
