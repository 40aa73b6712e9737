"""Runs with several seeds (mean ± std in tables), the pseudo-columns train:minutes and mean, learning rates
kept relative at smaller scales, and the training-budget warm-up of the demo scale."""

from __future__ import annotations

import copy

import pytest
import torch
from report_fixtures import outcomes, write_curves, write_measurement

from tradeoff import config as cfg
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import MethodSpec
from tradeoff.methods import METHODS
from tradeoff.report.table_model import STRONG
from tradeoff.report.table_render import render_markdown
from tradeoff.report.tables import build

FILES = [cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "smoke.yaml"]


def _config(tmp_path) -> dict:
    config = copy.deepcopy(cfg.load_config(FILES))
    config["paths"]["results"] = str(tmp_path / "results")
    return config


def test_seeds_expand_into_one_run_per_seed_and_cap(tmp_path):
    config = _config(tmp_path)
    config["scale_map"]["seeds"] = None  # the smoke scale keeps one seed
    config["runs"]["multi"] = {**config["runs"]["cifar10-resnet18-nt"], "seeds": [3, 4, 5]}
    del config["runs"]["multi"]["seed"]
    catalog = cfg.resolve(config)
    assert catalog.row_runs("multi") == ["multi", "multi-seed4", "multi-seed5"]
    assert [catalog.runs[r].seed for r in catalog.row_runs("multi")] == [3, 4, 5]
    config["scale_map"]["seeds"] = 2
    assert cfg.resolve(config).row_runs("multi") == ["multi", "multi-seed4"]
    config["runs"]["multi"]["seed"] = 0
    with pytest.raises(cfg.ConfigError, match=r"runs\.multi.*either `seed` or `seeds`"):
        cfg.resolve(config)


def test_table_reports_mean_and_std_over_seeds_and_pseudo_columns(tmp_path):
    config = _config(tmp_path)
    config["scale_map"]["seeds"] = None
    config["runs"]["multi"] = {k: v for k, v in config["runs"]["cifar10-resnet18-nt"].items() if k != "seed"}
    config["runs"]["multi"]["seeds"] = [0, 1]
    config["runs"]["multi"]["method"] = {"name": "pgd_at", "beta": 0.5, "attack": "pgd10"}
    config["targets"]["tab"] = {"kind": "table", "title": "t", "rows": [{"key": "m", "run": "multi"}],
                                "columns": {"nat": "clean", "pgd20": "pgd20", "mim": "mim", "mean": "mean",
                                            "minutes": "train:minutes"}}
    catalog = cfg.resolve(config)
    assert ("multi-seed1", "pgd20") in {(r, a) for r, a in catalog.evaluations("tab")}
    assert catalog.curve_train_ids("tab") == [catalog.train_id["multi"], catalog.train_id["multi-seed1"]]
    n = 64  # the smoke scale's test examples
    for run, (clean, pgd, mim, secs) in {"multi": (0.9, 0.4, 0.5, [30, 30]),
                                         "multi-seed1": (0.8, 0.6, 0.7, [60, 120])}.items():
        for attack, acc in (("clean", clean), ("pgd20", pgd), ("mim", mim)):
            write_measurement(catalog, run, attack, outcomes(round(acc * n), n))
        write_curves(catalog, run, [{"epoch": i, "seconds": s} for i, s in enumerate(secs)])
    table = build(catalog, "tab")
    cell = lambda column: table.ours[(STRONG, "m", column)]  # noqa: E731
    assert cell("nat").value == pytest.approx(100 * (58 + 51) / 2 / n)
    assert cell("nat").std == pytest.approx(100 * (58 - 51) / 2 / n)  # ddof 0
    assert cell("nat").lo is None  # several seeds: mean and std, no single-seed interval
    assert cell("pgd20").value == pytest.approx(100 * (26 + 38) / 2 / n)
    assert cell("mean").value == pytest.approx((cell("pgd20").value + cell("mim").value) / 2)  # robust only, not nat
    assert cell("minutes").value == pytest.approx((1.0 + 3.0) / 2)
    assert ("proto", "m", "minutes") not in table.bold and not any(c == "minutes" for _, _, c in table.bold)
    text = render_markdown(table)
    assert "85.2±5.5" in text and "2 seeds" in text and "training time in minutes" in text


def test_notes_say_what_the_paper_averaged_how_many_seeds_ours_used_and_where_minutes_ran(tmp_path):
    """A table's `paper_note` is printed with the number of seeds behind our rows; a training-time column names
    the devices and the precision its runs trained on (from their curves; the paper's Table 4: an RTX 3090)."""
    config = _config(tmp_path)
    config["scale_map"]["seeds"] = None
    config["runs"]["multi"] = {k: v for k, v in config["runs"]["cifar10-resnet18-nt"].items() if k != "seed"}
    config["runs"]["multi"]["seeds"] = [0, 1]
    config["targets"]["tab"] = {"kind": "table", "title": "t", "rows": [{"key": "m", "run": "multi"}],
                                "columns": {"minutes": "train:minutes"}, "paper_note": ["five runs", "(a test)."]}
    catalog = cfg.resolve(config)
    devices = {"multi": "NVIDIA H100 80GB HBM3", "multi-seed1": "cpu (x86_64; 2 threads)"}
    for run, device in devices.items():
        write_curves(catalog, run, [{"epoch": 1, "seconds": 60, "precision": "fp32", "device": device}])
    text = render_markdown(build(catalog, "tab"))
    assert "The paper's numbers: five runs (a test). Ours: the mean of 2 seeds per row." in text
    assert "ours measured on: NVIDIA H100 80GB HBM3 in fp32; cpu (x86_64; 2 threads) in fp32" in text
    config["runs"]["multi"]["seeds"] = [0]
    assert "Ours: one seed per row." in render_markdown(build(cfg.resolve(config), "tab"))


def test_smaller_scale_keeps_a_runs_learning_rate_ratio_to_its_preset(tmp_path):
    config = copy.deepcopy(cfg.load_config([cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "demo.yaml"]))
    base = config["runs"]["cifar10-resnet18-at-beta1"]
    config["runs"]["lr10x"] = {**base, "lr": {"epochs": [0, 40, 60, 120], "values": [0.1, 0.1, 0.01, 0.001]}}
    catalog = cfg.resolve(config)
    demo = config["scale_map"]["lr"]["values"]
    assert catalog.runs["cifar10-resnet18-at-beta1"].lr.values == pytest.approx(tuple(demo))
    assert catalog.runs["lr10x"].lr.values == pytest.approx(tuple(10 * v for v in demo))


@pytest.mark.parametrize("method", [{"name": "pgd_at", "beta": 1.0, "attack": "pgd10"},
                                    {"name": "trades", "lam": 6.0, "attack": "pgd10"},
                                    {"name": "fat", "attack": "pgd10"}])
def test_budget_scale_shrinks_every_training_maximiser(method, monkeypatch):
    """With budget_scale s the training perturbation stays inside s * eps (and is 0 at s = 0)."""
    catalog = cfg.load_catalog(FILES)
    base = catalog.runs["cifar10-resnet18-at-beta1"]
    spec = base.replace(method=MethodSpec.from_dict({**METHODS[method["name"]].parameters.defaults(), **method,
                                                     "attack": base.method.get("attack")}))
    eps = spec.method.get("attack")["eps"]
    torch.manual_seed(0)
    from tradeoff import models

    m = METHODS[method["name"]](spec, lambda: models.create_model("small_cnn", 10, in_channels=1, image_size=8),
                                Runtime(torch.device("cpu")))
    x, y = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))
    seen = []
    from tradeoff.methods import common, fat, trades

    original = common.adversarial_examples
    monkeypatch.setattr(common, "adversarial_examples", lambda *a, **k: seen.append(original(*a, **k)) or seen[-1])
    original_kl = trades.kl_adversarial
    monkeypatch.setattr(trades, "kl_adversarial", lambda *a, **k: seen.append(original_kl(*a, **k)) or seen[-1])
    original_fat = fat.early_stopped_pgd
    monkeypatch.setattr(fat, "early_stopped_pgd", lambda *a, **k: (lambda r: seen.append(r[0]) or r)(original_fat(*a, **k)))
    for scale in (0.0, 0.25, 1.0):
        seen.clear()
        m.set_budget_scale(scale)
        m.train_step(x, y)
        assert seen, "the method's maximiser was not observed"
        delta = (seen[-1] - x).abs().max().item()
        # TRADES and FAT start from x + 0.001 N(0, 1), not projected until their first step (as their code)
        noise = 0.0 if method["name"] == "pgd_at" else 0.006
        assert delta <= scale * eps + noise + 1e-6
        if scale == 1.0:
            assert delta > 0.5 * eps  # the full budget is used again
        m.set_budget_scale(1.0)
