"""Sections b and c of the GPU node check (:mod:`tradeoff.pipeline.bench.gpucheck`), and the performance targets:
`bench-train` of the jobs ``BENCH_TRAIN`` in the config's runtime settings, each beside what the plan predicts for it
on this device (``run_bench_train``), the plan's constant recalibrated from them (``recalibrated``); `bench-eval` of
PGD-20 and AutoAttack on the run's trained model, or on random weights in the worst case (``run_bench_eval``); and
docs/gpu.md's targets against these measurements (``targets``).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from tradeoff import models
from tradeoff.attacks.loop import run_attack
from tradeoff.core.spec import Norm
from tradeoff.evaluation.load import load_model, source_for
from tradeoff.pipeline.bench.check_steps import configured
from tradeoff.pipeline.bench.synthetic import SHAPES, synthetic_batch
from tradeoff.pipeline.bench.train import bench_train, write_bench
from tradeoff.pipeline.costs import ASSUMED_FRACTION, UnknownCost, device_key, planned_epoch_seconds, step_passes

#: (run, batch size, label) timed by bench-train, by value: the paper's shape (batch 128, and WRN-34-10, the catalog's
#: wrn-32-10: the same network) first, then batch 512
BENCH_TRAIN = [("cifar10-resnet18-at-beta1", 128, "AT ResNet-18"),
               ("cifar10-resnet18-trades-lambda6", 128, "TRADES ResNet-18"),
               ("cifar10-resnet18-generalist", 128, "Generalist ResNet-18"),
               ("cifar10-wrn32-at-beta1", 128, "AT WRN-34-10"),
               ("cifar10-resnet18-at-beta1", 512, "AT ResNet-18"),
               ("cifar10-resnet18-trades-lambda6", 512, "TRADES ResNet-18"),
               ("cifar10-resnet18-generalist", 512, "Generalist ResNet-18")]
BENCH_EVAL_RUN, BENCH_EVAL_ATTACKS = "cifar10-resnet18-at-beta1", ("pgd20", "aa")
#: docs/gpu.md's targets on an H100
TARGETS = {"at_epoch_seconds": 8.0, "generalist_over_at": 1.15, "aa_10k_minutes": 10.0}


def run_bench_train(catalog, device: torch.device, *, steps: int, warmup: int, out_dir: Path,
                    jobs=BENCH_TRAIN, rows: list | None = None) -> list[dict]:
    """bench-train of ``jobs``, into ``rows`` as each is done: each with the step's pass counts (what the plan
    matches a run's steps to, tradeoff.pipeline.costs.measured_steps) and what the plan predicts for it on this device."""
    rows = [] if rows is None else rows
    for run, batch, label in jobs:
        if run not in catalog.runs:
            continue
        spec = catalog.runs[run]
        runtime = configured(catalog, device)
        result = bench_train(run, spec, runtime=runtime, batch_size=batch, steps=steps, warmup=warmup)
        result["path"] = str(write_bench(result, out_dir))
        predicted = planned_epoch_seconds(spec, device_key(result["device"]), runtime.precision)
        try:
            passes = step_passes(spec)
        except UnknownCost:  # no FLOP count for its architecture: measured, but no plan can match it
            passes = None
        rows.append({"label": label, "run": run, "method": spec.method.name, "arch": spec.arch,
                     "dataset": spec.dataset, "passes": passes, "precision": runtime.precision,
                     "channels_last": runtime.channels_last, **{k: result[k] for k in (
                         "batch_size", "steps", "halves_differ", "images_per_s", "seconds_per_epoch", "achieved_tflops",
                         "fraction_of_peak", "path")},
                     "planned_s_per_epoch": predicted,
                     "measured_over_planned": result["seconds_per_epoch"] / predicted if predicted else None})
    return rows


def recalibrated(rows: list[dict]) -> dict:
    """The plan's constant (the achieved fraction of peak, tradeoff.pipeline.costs.ASSUMED_FRACTION) from these benches: the
    median of their measured fractions (None off a GPU whose peak the plan knows)."""
    fractions = sorted(r["fraction_of_peak"] for r in rows if r.get("fraction_of_peak"))
    median = fractions[len(fractions) // 2] if fractions else None
    return {"assumed_fraction": ASSUMED_FRACTION, "measured_fraction": median, "benches": len(fractions),
            "how": "median fraction of peak of the benches (counted FLOPs x images/s over the precision's peak); "
                   "`tradeoff plan` reads it from this report once it is committed under docs/bench/"}


def run_bench_eval(catalog, device: torch.device, *, images: int, run: str = BENCH_EVAL_RUN,
                   attacks=BENCH_EVAL_ATTACKS, out: dict | None = None, ladder: bool = False) -> dict:
    """bench-eval of ``attacks`` on ``images`` images, into ``out`` as each is timed. ``ladder``: each attack first
    on a tenth of the images, then on all of them, so that a section stopped by its budget keeps a measurement (of
    the images it timed: ``images`` in each row)."""
    spec = catalog.runs[run]
    c, h, _, k = SHAPES[spec.dataset]
    source = source_for(*catalog.model_location(run))
    checkpoint = source.path
    torch.manual_seed(0)
    if checkpoint.exists():
        model, _ = load_model(source, device.type)
        kind = f"trained model {checkpoint}"
    else:
        model = models.create_model(spec.arch, k, in_channels=c, image_size=h).to(device)
        kind = "random weights (worst case: nothing is broken, every attack runs on every image)"
    model.eval()
    x, _ = synthetic_batch(spec.dataset, images, device, seed=7)
    with torch.no_grad():
        y = torch.cat([model(x[i:i + 500]).argmax(1) for i in range(0, len(x), 500)])
    out = {} if out is None else out
    rows = out.setdefault("attacks", {})
    out.update({"run": run, "arch": spec.arch, "images": images, "model": kind, "attacks": rows})
    counts = sorted({max(1, images // 10), images}) if ladder else [images]
    for name in attacks:
        attack = catalog.attack_for(name, run)
        if not checkpoint.exists() and not attack.clean:
            attack = attack.replace(eps=1e-4 if attack.norm == Norm.LINF else 1e-3, step_size=None)
        for n in counts:
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            result = run_attack(model, x[:n], y[:n], attack, seed=0,
                                batch_size=catalog.runtime_settings.eval_batch_size)
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
            rows[name] = {"type": attack.type, "images": n, "seconds": seconds, "images_per_s": n / seconds,
                          "accuracy": result.accuracy, "minutes_per_10k": seconds * 10000 / n / 60}
    return out


def targets(bench: list[dict], evaluation: dict, device: str = "") -> dict:
    """docs/gpu.md's targets against the measurements (None where not measured; judged on an H100 only)."""
    def epoch(label: str, batch: int = 128) -> float | None:
        return next((r["seconds_per_epoch"] for r in bench if r["label"] == label and r["batch_size"] == batch), None)

    at, gen = epoch("AT ResNet-18"), epoch("Generalist ResNet-18")
    aa = evaluation.get("attacks", {}).get("aa", {}).get("minutes_per_10k")
    out = {"at_epoch_seconds": {"target": TARGETS["at_epoch_seconds"], "measured": at,
                                "how": "bench-train cifar10-resnet18-at-beta1, batch 128, in the config's training "
                                       "precision: seconds per epoch of 50,000 images"},
           "generalist_over_at": {"target": TARGETS["generalist_over_at"],
                                  "measured": gen / at if gen and at else None,
                                  "how": "bench-train's seconds per epoch, Generalist over AT, batch 128"},
           "aa_10k_minutes": {"target": TARGETS["aa_10k_minutes"], "measured": aa,
                              "how": f"bench-eval of AutoAttack on "
                                     f"{evaluation.get('attacks', {}).get('aa', {}).get('images', '-')} images "
                                     f"({evaluation.get('model')}), x 10,000 / images"}}
    judged = device_key(device) == "h100"  # the targets are an H100's
    for row in out.values():
        row["met"] = None if row["measured"] is None or not judged else row["measured"] <= row["target"]
    return out

