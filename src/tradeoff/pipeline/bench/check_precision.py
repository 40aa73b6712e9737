"""Section d of the GPU node check (:mod:`tradeoff.pipeline.bench.gpucheck`): one run of the demo scale trained
twice from the same seed, in fp32 and under the `runtime.precision: bf16` opt-in, and both models' clean and PGD
accuracy with the exact McNemar test of their per-example outcomes (``bf16_against_fp32``).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from tradeoff.attacks.loop import run_attack
from tradeoff.core.runtime import Runtime
from tradeoff.data import load_run_data
from tradeoff.evaluation.load import RunModel, load_model
from tradeoff.report.stats import mcnemar
from tradeoff.storage.layout import bits
from tradeoff.training.train import train

#: the demo run trained in both precisions, and the attacks its two models are compared under
PRECISION_RUN, PRECISION_ATTACKS = "cifar10-resnet18-at-beta1", ("clean", "pgd20")


def bf16_against_fp32(catalog, device: torch.device, *, run: str = PRECISION_RUN,
                      attacks=PRECISION_ATTACKS) -> dict:
    """Section 6: ``run`` of ``catalog`` (the demo scale) trained twice from its seed, in fp32 and in bf16 autocast
    (channels_last as the config says), and both models under ``attacks`` on the run's test set (seed 0): each
    accuracy, and the exact McNemar test of the two models' per-example outcomes."""
    spec = catalog.runs[run]
    channels_last = catalog.runtime_settings.channels_last
    batch = catalog.runtime_settings.eval_batch_size
    ds = load_run_data(spec, catalog.data_root)
    x, y = ds.x_test.to(device), ds.y_test.to(device)
    outcomes: dict[str, dict[str, str]] = {}
    out: dict[str, Any] = {"run": run, "scale": catalog.scale, "seed": spec.seed, "examples": len(y),
                           "attacks": list(attacks)}
    for precision in ("fp32", "bf16"):
        t0 = time.perf_counter()
        paths = train(f"{run}-{precision}", spec, results=catalog.layout.gpu_check_work / precision,
                      data_root=catalog.data_root, progress=False, eval_batch_size=batch,
                      runtime=Runtime(device, bf16=precision == "bf16", channels_last=channels_last))
        model, _ = load_model(RunModel(paths.model), device.type)
        out[f"{precision}_train_seconds"] = time.perf_counter() - t0
        outcomes[precision] = {}
        for name in attacks:
            result = run_attack(model, x, y, catalog.attack_for(name, run), seed=0, batch_size=batch)
            outcomes[precision][name] = bits(result.robust_correct)
            out.setdefault(precision, {})[name] = result.accuracy
    out["p_value"] = {name: mcnemar([(outcomes["fp32"][name], outcomes["bf16"][name])]) for name in attacks}
    return out

