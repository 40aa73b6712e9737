"""Every method learns on digits through the trainer, and every run of the paper-scale catalog takes a step."""

from __future__ import annotations

import pytest
import torch
from methods_support import CPU, SMOKE, build, digits

from tradeoff import config as cfg
from tradeoff.core.spec import MethodSpec
from tradeoff.data import load_run_data
from tradeoff.methods import METHODS
from tradeoff.storage.curves import read_curves
from tradeoff.training.train import model_factory, train

# The catalog's Table 1 runs, and the CA-AT family (not in a table yet) as extra runs of the same preset.
EXTRA_RUNS = {
    "x-vanilla": {"name": "vanilla", "lam": 0.5, "adv_loss": "trades", "track_conflict": True},
    "x-caat": {"name": "caat", "gamma": 0.8},
    "x-caat-per-tensor": {"name": "caat", "gamma": 0.9, "per_tensor": True},
    "x-clp": {"name": "clp", "lam": 1.0},
    "x-generalist-l2": {"name": "generalist", "attack": "pgd10-l2", "parallel": True, "communication": "iteration",
                        "ema_warmup": True, "average_buffers": True, "nt_lr_schedule": "at"},
}
TABLE1 = ["trades-lambda6", "trades-lambda1", "fat", "iat", "rst", "generalist"]


def _smoke_catalog(**scale_map):
    config = cfg.load_config(SMOKE)
    config["scale_map"].update(scale_map)
    config["datasets"]["digits"]["linf"] = 0.1  # at 0.1 the adversarial methods learn digits in a few epochs
    config["datasets"]["digits"]["l2"] = 0.5
    for rid, method in EXTRA_RUNS.items():
        config["runs"][rid] = {"preset": "generalist-resnet18", "dataset": "cifar10", "arch": "resnet18",
                               "method": {"attack": "pgd10", **method}}
    return cfg.resolve(config)


@pytest.mark.parametrize("run_id", [f"cifar10-resnet18-{r}" for r in TABLE1] + list(EXTRA_RUNS))
def test_method_learns_digits(run_id, tmp_path):
    catalog = _smoke_catalog(epochs=5, train_examples=512, test_examples=200)
    spec = catalog.runs[run_id]
    spec = spec.replace(selection=spec.selection.replace(mode="last"))
    paths = train(run_id, spec, results=tmp_path, data_root=catalog.data_root, runtime=CPU, progress=False)
    rows = read_curves(paths.curves)
    assert len(rows) == 5
    assert all(float(r["train_loss"]) == float(r["train_loss"]) for r in rows)  # no NaN
    # chance is 0.1; 40 steps of the small CNN reach 0.45-0.9 clean depending on the method (0.1 budget)
    assert float(rows[-1]["eval_clean"]) > 0.3, rows[-1]
    if spec.method.name in ("caat", "vanilla"):
        assert {"train_mu", "train_cos", "train_norm_gc", "train_norm_ga"} <= set(rows[0])


OWN_MAXIMISER = {"fat": {}, "trades": {"inner": "kl"}, "vanilla": {"adv_loss": "trades"}}


@pytest.mark.parametrize("attack", [
    {"type": "pgd", "norm": "l2", "eps": 1.0, "step_size": 0.25},
    {"type": "pgd-dlr", "eps": 0.1},
    {"type": "apgd-ce", "eps": 0.1},
    {"type": "apgd-t", "eps": 0.1, "target_classes": 2},
])
def test_methods_train_with_any_registry_attack(attack):
    x, y = digits(16)
    apgd = attack["type"].startswith("apgd")
    names = ("vanilla", "caat", "generalist", "trades") if apgd else sorted(set(METHODS) - {"nt"})
    for name in (n for n in names if n != "fat" or attack["type"] == "pgd"):
        params = {"inner": "attack"} if name == "trades" else {}
        method = build(name, attack={**attack, "steps": 2}, **params)
        method.set_epoch(0)
        assert torch.isfinite(method.train_step(x, y)["loss"]), name
    # methods with their own maximiser take a plain PGD spec's budget, and refuse what they would ignore
    for name, params in OWN_MAXIMISER.items():
        if attack["type"] != "pgd":
            with pytest.raises(ValueError, match="plain `pgd` training attack"):
                build(name, attack={**attack, "steps": 2}, **params)


def test_every_catalog_run_takes_a_step():
    config = cfg.load_config([cfg.ROOT / "config" / "config.yaml"])
    config["scale_map"].update(dataset="digits", arch="small_cnn", batch_size=16, max_attack_steps=2,
                               eps_cap={"linf": 1.0})  # CA-AT's 32/255 sweep scales past 1 on digits
    config["corruption_map"] = {"tinyimagenet-c": "digits-c"}  # Zipper Table 4's NROB on digits, as the demo
    catalog = cfg.resolve(config)
    x, y = digits(16)
    for run_id, spec in catalog.runs.items():
        ds = load_run_data(spec.replace(train_examples=16, test_examples=16), catalog.data_root)
        torch.manual_seed(0)
        method = METHODS[spec.method.name](spec, model_factory(spec, ds), CPU)
        method.set_epoch(0)
        out = method.train_step(x, y)
        method.end_epoch(0)
        assert torch.isfinite(out["loss"]), run_id
        state = method.state_dict()
        method.load_state_dict(state)


def test_demo_scale_builds_table1_and_rescales_generalist():
    catalog = cfg.load_catalog([cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "demo.yaml"])
    for table in ("table1a", "table1b"):
        keys = {row.key for row in catalog.targets[table].rows}
        reference = {line.split(",")[1] for line in (cfg.ROOT / "config" / "reference" / f"{table}.csv")
                     .read_text().splitlines()[1:]}
        assert keys == reference, table
    method = catalog.runs["cifar10-resnet18-generalist"].method
    assert method.get("t_prime") == pytest.approx(6.25) and method.get("c") == pytest.approx(0.417)  # 10 iterations
    assert method.get("gamma")["epochs"] == pytest.approx((0, 3.333, 6.667, 10))
    assert method.get("ema_horizon") == pytest.approx(0.218)  # rescaled epochs are kept to 1e-3 epoch
    assert catalog.runs["cifar10-resnet18-fat"].method.get("tau_epochs") == pytest.approx((4.167, 7.5))
    # the two architectures' runs are the same job at the demo scale
    assert catalog.train_id["cifar10-wrn32-nt"] == catalog.train_id["cifar10-resnet18-nt"]
    # except Generalist's: the Table 1a run also records its learners (Zipper Figures 5 and 6), a setting of its own
    tracked = catalog.runs["cifar10-resnet18-generalist"]
    untracked = MethodSpec.from_dict({k: v for k, v in tracked.method.as_dict().items()
                                      if k not in ("track_learners", "snapshot_epochs")})
    assert cfg.spec_digest(catalog.runs["cifar10-wrn32-generalist"]) == cfg.spec_digest(tracked.replace(method=untracked))
