"""Evaluation mechanics on small models: who is attacked, seeding by the global batch grid, shards, resume
state, budget sweeps in the catalog."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from tradeoff import attacks
from tradeoff import config as cfg
from tradeoff.attacks.loop import batch_seed, run_attack
from tradeoff.core.spec import AttackSpec
from tradeoff.evaluation.shards import SHARD_FORMAT, MergeError, merge_shards, shard_range
from tradeoff.evaluation.state import EvalState

ROOT = cfg.ROOT


def _cnn(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 64, 10)).eval()


@pytest.fixture(scope="module")
def data():
    model = _cnn()
    torch.manual_seed(1)
    x = torch.rand(47, 1, 8, 8)
    with torch.no_grad():
        y = model(x).argmax(1)
    y[::5] = (y[::5] + 1) % 10  # every fifth example misclassified
    return model, x, y


PGD = AttackSpec.from_dict({"type": "pgd", "eps": 0.05, "steps": 3, "step_size": 0.02, "random_start": True})


def test_only_clean_correct_examples_are_attacked(data, monkeypatch):
    model, x, y = data
    seen = []
    original = attacks.ATTACKS["pgd"].perturb

    def spy(self, xb, yb):
        seen.append(len(xb))
        return original(self, xb, yb)

    monkeypatch.setattr(attacks.ATTACKS["pgd"], "perturb", spy)
    out = run_attack(model, x, y, PGD, seed=0, batch_size=20)
    clean = (model(x).argmax(1) == y)
    assert sum(seen) == int(clean.sum())
    assert torch.equal(out.clean_correct, clean)
    assert not (out.robust_correct & ~out.clean_correct).any()
    assert out.accuracy <= out.clean_accuracy


def test_evaluation_is_fp32_and_leaves_the_model_as_it_was(data):
    model, x, y = data
    reference = run_attack(model, x, y, PGD, seed=0, batch_size=16)
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        again = run_attack(model, x, y, PGD, seed=0, batch_size=16)
    assert model.training
    model.eval()
    assert torch.equal(reference.robust_correct, again.robust_correct)
    assert all(p.grad is None and p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("spec", [PGD, AttackSpec.from_dict({"type": "t-pgd", "eps": 0.05, "steps": 2,
                                                               "target_classes": 3}),
                                  AttackSpec.from_dict({"type": "apgd-ce", "eps": 0.05, "steps": 5})])
def test_shards_on_the_batch_grid_give_exactly_the_unsharded_result(data, spec):
    model, x, y = data
    full = run_attack(model, x, y, spec, seed=7, batch_size=10)
    parts = []
    for k in range(3):
        first, start, stop = shard_range(len(x), 10, k, 3)
        parts.append(run_attack(model, x[start:stop], y[start:stop], spec, seed=7, batch_size=10, first_batch=first))
    assert torch.equal(torch.cat([p.robust_correct for p in parts]), full.robust_correct)
    assert torch.equal(torch.cat([p.clean_correct for p in parts]), full.clean_correct)


def test_shard_ranges_tile_whole_batches():
    for n, bs, shards in [(47, 10, 3), (360, 360, 4), (10000, 500, 7), (5, 10, 2)]:
        position, batches = 0, 0
        for k in range(shards):
            first, start, stop = shard_range(n, bs, k, shards)
            assert start == position and first == batches and start == min(first * bs, n)
            batches += -(-(stop - start) // bs)
            position = stop
        assert position == n
    with pytest.raises(ValueError):
        shard_range(10, 5, 2, 2)
    assert batch_seed(0, 1) != batch_seed(0, 2) != batch_seed(1, 1)


def test_interrupted_evaluation_resumes_from_its_state(data, tmp_path, monkeypatch):
    model, x, y = data
    full = run_attack(model, x, y, PGD, seed=3, batch_size=10)
    path = tmp_path / "pgd.state"
    calls = {"n": 0}
    original = attacks.ATTACKS["pgd"].perturb

    def dies_on_third_batch(self, xb, yb):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed")
        return original(self, xb, yb)

    monkeypatch.setattr(attacks.ATTACKS["pgd"], "perturb", dies_on_third_batch)
    with pytest.raises(KeyboardInterrupt):
        run_attack(model, x, y, PGD, seed=3, batch_size=10, state=EvalState(path, "k1"))
    assert sorted(json.loads(path.read_text())["batches"]) == ["0", "1"]
    calls["n"] = -100
    resumed = run_attack(model, x, y, PGD, seed=3, batch_size=10, state=EvalState(path, "k1"))
    assert calls["n"] == -100 + 3  # only the three batches left were attacked
    assert torch.equal(resumed.robust_correct, full.robust_correct)
    # a state of another setting (key) or an unreadable one is ignored
    assert EvalState(path, "other").resumed_batches == 0
    path.write_text("{truncated")
    assert EvalState(path, "k1").resumed_batches == 0


def test_merge_refuses_gaps_and_mismatches(tmp_path):
    # a run's settings as a model.pt holds them (their JSON form), on digits with the small CNN
    settings = cfg.load_catalog([ROOT / "config" / "config.yaml"]).runs["cifar10-resnet18-nt"].replace(
        dataset="digits", arch="small_cnn").as_dict()

    def part(k, start, stop, seed=0):
        return {"format": SHARD_FORMAT, "run": "r", "attack": "a", "spec": {"type": "pgd", "eps": 0.1},
                "seed": seed, "batch_size": 2, "examples_total": 4, "shard": k, "shards": 2, "first_batch": start // 2,
                "start": start, "stop": stop, "seconds": 1.0, "breakdown": {},
                "meta": {"run": "r", "spec": settings, "selected_epoch": 1},
                "context": {"scale": "smoke", "model": "0" * 16, "test_examples": None, "test_size": 4}, "provenance": {},
                "labels": [0] * (stop - start), "clean_correct": "1" * (stop - start),
                "robust_correct": "10"[: stop - start] * 1 + "0" * max(0, stop - start - 2),
                "invalid": {"invalid_examples": 1, "non_finite": 1}, "whole_range": False, "ruled_out": "0" * (stop - start),
                "probes": [{"level": 0.5, "class": 3, "reachable": 0}]}

    def write(*parts):
        paths = []
        for i, p in enumerate(parts):
            paths.append(tmp_path / f"{i}.json")
            paths[-1].write_text(json.dumps(p))
        return paths

    merged = merge_shards(write(part(0, 0, 2), part(1, 2, 4)))
    assert merged["examples"] == 4 and merged["accuracy"] == 0.5 and merged["shards"] == 2
    assert merged["invalid"]["invalid_examples"] == 2 and merged["invalid"]["non_finite"] == 2  # summed over shards
    assert merged["bound"] == {"probes": [], "whole_range": False, "ruled_out": 0, "accuracy_bound": 1.0,
                               "robust_despite": []}
    with pytest.raises(MergeError, match="older tradeoff"):
        merge_shards(write({**part(0, 0, 2), "format": "tradeoff-eval-shard/2"}, part(1, 2, 4)))
    with pytest.raises(MergeError, match="starts at example 3"):
        merge_shards(write(part(0, 0, 2), part(1, 3, 4)))
    with pytest.raises(MergeError, match="'seed'"):
        merge_shards(write(part(0, 0, 2), part(1, 2, 4, seed=1)))
    with pytest.raises(MergeError, match="expected shards 0..1"):
        merge_shards(write(part(1, 2, 4)))


SWEEPS = """
runtime: {eval_shards: 2, eval_unit: attack}  # sharding needs one job per (run, attack)
attacks:
  pgd_sweep: {type: pgd, steps: 10, step_size: eps/4, eps: [8/255, 16/255, 24/255], shards: 3}
  l2_sweep: {type: pgd, norm: l2, steps: 10, step_size: eps*0.4, eps: [0.5, 1, 1.5, 2]}
targets:
  table1a:
    columns: {nat: clean, "pgd@16/255": "pgd_sweep@16_255", "pgd_l2@1": "l2_sweep@1"}
"""


def test_budget_sweeps_are_one_evaluation_per_budget(tmp_path):
    overlay = tmp_path / "sweeps.yaml"
    overlay.write_text(SWEEPS)
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", overlay])
    jobs = catalog.attack_jobs()
    assert "pgd_sweep" not in jobs
    assert {"pgd_sweep@8_255", "pgd_sweep@16_255", "pgd_sweep@24_255", "l2_sweep@0.5", "l2_sweep@1",
            "l2_sweep@1.5", "l2_sweep@2", "pgd20"} <= set(jobs)
    run = "cifar10-resnet18-nt"
    spec = catalog.attack_for("pgd_sweep@16_255", run)
    assert spec.eps == pytest.approx(16 / 255) and spec.step_size == pytest.approx(4 / 255)
    assert catalog.attack_for("l2_sweep@1.5", run).eps == pytest.approx(1.5)
    assert catalog.attack_for("l2_sweep@1.5", run).step_size == pytest.approx(0.6)
    assert (run, "pgd_sweep@16_255") in catalog.evaluations("table1a")
    with pytest.raises(cfg.ConfigError, match="pgd_sweep@8_255"):
        catalog.attack_for("pgd_sweep", run)
    with pytest.raises(cfg.ConfigError, match="unknown attack 'pgd_sweep@9_255'"):
        catalog.attack_for("pgd_sweep@9_255", run)
    assert catalog.shards_for("pgd_sweep@8_255") == 3 and catalog.shards_for("pgd20") == 2
    assert spec.shards is None and "shards" not in spec.as_dict()  # not a setting of the maths: changing it re-runs nothing
    # at the demo scale a sweep keeps its budgets' ratios to the standard one as every budget does (digits: 8/255 is
    # 0.3, 16/255 0.6, its step 4/255 0.15)
    demo = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "demo.yaml", overlay])
    assert demo.attack_for("pgd_sweep@16_255", run).eps == pytest.approx(0.6)
    assert demo.attack_for("pgd_sweep@16_255", run).step_size == pytest.approx(0.15)
    assert demo.attack_for("l2_sweep@1.5", run).eps == pytest.approx(1.5 * 1.5 / (128 / 255))
    assert demo.attack_for("pgd20", run).eps == pytest.approx(0.3)


def test_a_sweep_column_must_name_a_budget(tmp_path):
    overlay = tmp_path / "bad.yaml"
    overlay.write_text(SWEEPS.replace('"pgd_sweep@16_255"', "pgd_sweep"))
    with pytest.raises(cfg.ConfigError, match=r"table1a.columns.pgd@16/255: unknown attack 'pgd_sweep'"):
        cfg.load_catalog([ROOT / "config" / "config.yaml", overlay])


def test_eps_labels():
    assert cfg.eps_label(8 / 255) == "8_255" and cfg.eps_label(0.5) == "0.5"
    assert cfg.eps_label(1.0) == "1" and cfg.eps_label(2.0) == "2" and cfg.eps_label(0.3) == "0.3"


def test_shipped_table1_has_every_column_of_the_paper():
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml"])
    keys = ["nat", "pgd20", "pgd100", "mim", "cw", "apgd_ce", "apgd_dlr", "apgd_t", "fab_t", "square", "aa"]
    for name in ("table1a", "table1b"):
        assert list(catalog.targets[name].columns) == keys
    run = "cifar10-resnet18-nt"
    assert catalog.attack_for("aa", run).type == "autoattack"
    cw = catalog.attack_for("cw", run)
    assert cw.params["kappa"] == 50 and cw.params["steps"] == 10 and cw.step_size == pytest.approx(0.007)
    mim = catalog.attack_for("mim", run)
    assert mim.params["momentum"] == 1.0 and mim.params["random_start"] is True  # the Generalist code's MIM starts in the ball
    for job in catalog.attack_jobs():  # every shipped attack resolves at the paper scale
        if catalog.attacks[cfg.split_budget(job)[0]].corruptions:
            continue  # NROB's Tiny-ImageNet-C resolves for Tiny ImageNet runs only (tests/test_nrob.py)
        catalog.attack_for(job, run)
