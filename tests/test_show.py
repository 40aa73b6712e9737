"""`tradeoff show RUN|ATTACK|TARGET`: the resolved settings as YAML, with where each value that is not a default came
from; an unknown name is one line with the closest names and exit status 2."""

from __future__ import annotations

import yaml

from tradeoff import cli
from tradeoff import config as cfg

PAPER = str(cfg.ROOT / "config" / "config.yaml")
DEMO = str(cfg.ROOT / "config" / "demo.yaml")


def _show(capsys, *files: str, name: str) -> tuple[int, dict | None, str]:
    status = cli.main([a for f in files for a in ("--config", f)] + ["show", name])
    out, err = capsys.readouterr()
    return status, (yaml.safe_load(out) if status == 0 else None), err


def test_a_run_shows_its_resolved_settings_and_where_each_came_from(capsys, tmp_path, monkeypatch):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text("runs:\n  cifar10-resnet18-fat:\n    method: {omega: 0.002}\n")
    status, shown, _ = _show(capsys, PAPER, DEMO, str(overlay), name="cifar10-resnet18-fat")
    assert status == 0
    catalog = cfg.load_catalog([PAPER, DEMO, overlay])
    assert shown["settings"] == catalog.runs["cifar10-resnet18-fat"].as_dict() and shown["scale"] == "demo"
    sources = shown["sources"]
    assert sources["method.omega"].startswith("runs.cifar10-resnet18-fat (") and str(overlay) in sources["method.omega"]
    assert sources["method.name"].startswith("design.generalist-table1.variants.fat (")         # a design block
    assert sources["optimizer.momentum"].startswith("train_presets.generalist-resnet18 (")      # the preset
    assert sources["dataset"] == "scale_map.dataset (config/demo.yaml)"  # (the files as the workflow folder names them)                                  # the scale map
    assert sources["method.tau_epochs"].startswith("scale_map.epochs (epoch-valued); written by design.")
    assert sources["method.attack"].startswith("train_attacks.pgd10, resolved for the run at scale demo")
    assert "method.random_start" not in sources and "seed" not in sources  # defaults: no source


def test_an_attack_shows_every_parameter_with_its_default_and_its_resolution(capsys):
    status, shown, _ = _show(capsys, PAPER, DEMO, name="pgd20")
    assert status == 0 and shown["section"] == "attacks"
    assert shown["settings"]["steps"] == 20 and shown["settings"]["loss"] == "ce"  # written, and a declared default
    assert shown["sources"]["steps"] == "attacks.pgd20 (config/config.yaml)" and "loss" not in shown["sources"]
    assert shown["resolved"]["cifar10 -> digits"]["eps"] == 0.3  # 8/255 at its ratio to digits' standard budget
    status, shown, _ = _show(capsys, PAPER, name="pgd10")
    assert status == 0 and shown["section"] == "train_attacks"


def test_a_target_shows_its_rows_columns_and_evaluations(capsys):
    status, shown, _ = _show(capsys, PAPER, name="table1a")
    catalog = cfg.load_catalog([PAPER])
    assert status == 0 and shown["settings"] == catalog.targets["table1a"].as_dict()
    assert shown["sources"]["columns"] == "targets.table1a (config/config.yaml)"
    assert shown["training_jobs"]["cifar10-resnet18-nt"] == {"cifar10-resnet18-nt": "cifar10-resnet18-nt"}
    assert len(shown["evaluations"]) == len(catalog.evaluations("table1a"))


def test_an_unknown_name_is_one_line_with_the_closest_names(capsys):
    status, _, err = _show(capsys, PAPER, name="cifar10-resnet18-generalst")
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1, err
    assert lines[0].startswith("tradeoff: configuration error: unknown name 'cifar10-resnet18-generalst'; did you "
                               "mean 'cifar10-resnet18-generalist'"), err
