"""Evaluation: accuracy of a model under one attack, per example, always in fp32 and eval mode.

Examples are split into fixed batches of the global index space; batch b's attack randomness is seeded with
(seed, b), so a result does not depend on which process evaluates which batch (sharding merges exactly).
Untargeted attacks only attack examples the model classifies correctly: the others count as not robust.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn

from . import attacks
from .config import rel_step


@dataclass
class Outcome:
    labels: torch.Tensor          # int64, per example
    clean_correct: torch.Tensor   # bool, per example
    robust_correct: torch.Tensor  # bool, per example
    seconds: float

    @property
    def accuracy(self) -> float:
        return self.robust_correct.float().mean().item() if len(self.labels) else float("nan")

    @property
    def clean_accuracy(self) -> float:
        return self.clean_correct.float().mean().item() if len(self.labels) else float("nan")


def batch_seed(seed: int, batch_index: int) -> int:
    return (int(seed) * 1_000_003 + int(batch_index)) % (2**63 - 1)


def build_attack(model: nn.Module, spec: dict, eps: float, seed: int) -> attacks.Attack:
    params = {k: v for k, v in spec.items() if k not in ("type", "eps", "norm", "name", "step_size")}
    if "step_size" in spec:
        params["step_size"] = rel_step(spec["step_size"], eps, "step_size")
    if "seed" in attacks.ATTACKS[spec["type"]].defaults:
        params["seed"] = seed
    return attacks.build(spec["type"], model, eps=eps, norm=spec.get("norm", "linf"), **params)


def run_attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: dict, *, seed: int, batch_size: int,
               first_batch: int = 0, eps: float | None = None) -> Outcome:
    """Evaluate ``model`` on (x, y) under a resolved attack spec. ``first_batch`` is the global index of the
    first batch (for shards)."""
    was_training = model.training
    model.eval()
    eps = float(spec["eps"] if eps is None else eps)
    t0 = time.perf_counter()
    clean_parts, robust_parts = [], []
    try:
        for b, start in enumerate(range(0, len(x), batch_size)):
            xb, yb = x[start:start + batch_size], y[start:start + batch_size]
            with torch.no_grad():
                clean = model(xb).argmax(1) == yb
            attack = build_attack(model, spec, eps, batch_seed(seed, first_batch + b))
            robust = clean.clone()
            todo = clean if attack.skips_misclassified else torch.ones_like(clean)
            if spec["type"] != "clean" and todo.any():
                x_adv = attack.perturb(xb[todo], yb[todo])
                with torch.no_grad():
                    robust[todo] = model(x_adv).argmax(1) == yb[todo]
            clean_parts.append(clean)
            robust_parts.append(robust & clean if attack.skips_misclassified else robust)
    finally:
        model.train(was_training)
    cat = lambda parts: torch.cat(parts).cpu() if parts else torch.zeros(0, dtype=torch.bool)  # noqa: E731
    return Outcome(y.cpu(), cat(clean_parts), cat(robust_parts), time.perf_counter() - t0)


def accuracy_under(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: dict, *, seed: int,
                   batch_size: int) -> float:
    return run_attack(model, x, y, spec, seed=seed, batch_size=batch_size).accuracy


def evaluate_run(checkpoint_path, spec: dict, *, attack_name: str, data_root, device: str = "auto",
                 batch_size: int = 500, seed: int = 0, metrics_out=None, predictions_out=None,
                 test_examples: int | None = None) -> dict:
    """Evaluate a trained run's selected model on its test set; write the metrics JSON (scalars) and the
    predictions JSON (per-example correctness), atomically. Returns the metrics."""
    import json

    from .checkpoint import atomic_write_text
    from .provenance import provenance
    from .train import load_model, load_run_data

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model, meta = load_model(checkpoint_path, device)
    ds = load_run_data({**meta["spec"], "test_examples": test_examples}, data_root)
    x, y = ds.x_test.to(device), ds.y_test.to(device)
    out = run_attack(model, x, y, spec, seed=seed, batch_size=batch_size)
    metrics = {
        "run": meta["run"], "attack": attack_name, "type": spec["type"], "norm": spec.get("norm", "linf"),
        "eps": float(spec["eps"]), "params": {k: v for k, v in spec.items() if k not in ("type", "norm", "eps")},
        "accuracy": out.accuracy, "clean_accuracy": out.clean_accuracy, "examples": len(out.labels),
        "robust_examples": int(out.robust_correct.sum()), "seed": seed, "batch_size": batch_size,
        "seconds": out.seconds, "images_per_s": len(out.labels) / out.seconds if out.seconds else None,
        "dataset": meta["spec"]["dataset"], "selected_epoch": meta["selected_epoch"],
        "provenance": provenance(device),
    }
    bits = lambda t: "".join("1" if v else "0" for v in t.tolist())  # noqa: E731
    predictions = {"run": meta["run"], "attack": attack_name, "labels": out.labels.tolist(),
                   "clean_correct": bits(out.clean_correct), "robust_correct": bits(out.robust_correct)}
    if metrics_out is not None:
        atomic_write_text(metrics_out, json.dumps(metrics, indent=1, default=float) + "\n")
    if predictions_out is not None:
        atomic_write_text(predictions_out, json.dumps(predictions) + "\n")
    return metrics
