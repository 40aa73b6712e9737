"""CPU cost ratios, measured interleaved (`tradeoff bench-ratios`): a PGD step with input gradients only over one
with weight gradients, and the training-step time of one run over another's.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from tradeoff import models
from tradeoff.attacks import frozen
from tradeoff.config import Catalog
from tradeoff.core.runtime import Runtime
from tradeoff.pipeline.bench.synthetic import SHAPES, synthetic_batch, synthetic_method


def _median_interleaved(fns: dict[str, Any], repeats: int) -> dict[str, float]:
    """Median seconds of each function, measured in alternation so that machine noise hits all alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def pgd_step_ratio(arch: str, dataset: str, batch: int = 128, repeats: int = 15) -> dict:
    """Seconds of one PGD step computing input gradients only, over one that also computes weight gradients."""
    c, h, _, k = SHAPES[dataset]
    torch.manual_seed(0)
    model = models.create_model(arch, k, in_channels=c, image_size=h).eval()
    x, y = synthetic_batch(dataset, batch, torch.device("cpu"))

    def step(weights: bool):
        delta = torch.zeros_like(x, requires_grad=True)
        loss = torch.nn.functional.cross_entropy(model(x + delta), y)
        inputs = [delta, *model.parameters()] if weights else [delta]
        torch.autograd.grad(loss, inputs)

    def input_only():
        with frozen(model):
            step(False)

    step(True), input_only()  # warm-up
    t = _median_interleaved({"input_only": input_only, "with_weights": lambda: step(True)}, repeats)
    return {"input_only_s": t["input_only"], "with_weights_s": t["with_weights"],
            "ratio": t["input_only"] / t["with_weights"], "arch": arch, "dataset": dataset, "batch": batch}


def epoch_time_ratio(catalog: Catalog, numerator: str, denominator: str, steps: int = 8, repeats: int = 5) -> dict:
    """Training-step time of one run over another's (same batch size), measured interleaved on the CPU."""
    runtime = Runtime(torch.device("cpu"))
    runs = {}
    for run_id in (numerator, denominator):
        spec = catalog.runs[run_id]
        torch.manual_seed(spec.seed)
        method = synthetic_method(spec, runtime)
        method.set_epoch(0.0)
        x, y = synthetic_batch(spec.dataset, spec.batch_size, runtime.device)
        method.train_step(x, y)  # warm-up
        runs[run_id] = (lambda m=method, x=x, y=y: [m.train_step(x, y) for _ in range(steps)])
    t = _median_interleaved(runs, repeats)
    return {"numerator": numerator, "denominator": denominator, "numerator_s": t[numerator],
            "denominator_s": t[denominator], "ratio": t[numerator] / t[denominator], "steps": steps}
