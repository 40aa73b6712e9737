"""Training throughput against the hardware's limit (`tradeoff bench-train`).

``bench_train`` times steps of a run's method on the current device after warm-up (CUDA events on a GPU) and reports
images/s, seconds per epoch, achieved TFLOP/s (the step's FLOPs counted by :mod:`tradeoff.pipeline.bench.flops`) and
the fraction of the device's peak; ``write_bench`` writes the result as a bench file, which calibrates the plan
(:mod:`tradeoff.pipeline.costs`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import RunSpec
from tradeoff.pipeline.bench.flops import step_flops_per_example
from tradeoff.pipeline.bench.synthetic import TRAIN_SIZES, synthetic_batch, synthetic_method
from tradeoff.pipeline.costs import device_key, peak_tflops
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.storage.provenance import provenance


def bench_train(run_id: str, spec: RunSpec, *, runtime: Runtime, batch_size: int | None = None, steps: int = 20,
                warmup: int = 3, compile_model: bool = False) -> dict:
    """Time ``steps`` training steps of a run's method and model on synthetic data of its dataset's shape."""
    batch = batch_size or spec.batch_size
    flops = step_flops_per_example(spec)
    torch.manual_seed(spec.seed)
    method = synthetic_method(spec, runtime)
    if compile_model:
        for module in [method.eval_model(), *method.learners().values()]:
            module.compile()
    x, y = synthetic_batch(spec.dataset, batch, runtime.device)
    x = runtime.place_batch(x)
    method.set_epoch(0.0)
    for _ in range(warmup):
        method.train_step(x, y)
    cuda = runtime.device.type == "cuda"
    half = steps // 2
    if cuda:
        torch.cuda.synchronize()
        start, middle, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
    t0 = time.perf_counter()
    for i in range(steps):
        if i == half:
            if cuda:
                middle.record()
            t_half = time.perf_counter()
        method.train_step(x, y)
    if cuda:
        end.record()
        torch.cuda.synchronize()
        seconds, first = start.elapsed_time(end) / 1000, start.elapsed_time(middle) / 1000
    else:
        seconds, first = time.perf_counter() - t0, t_half - t0
    # how stable the timing is: the two halves' seconds per step, as a relative difference (None under 2 steps)
    second = seconds - first
    halves = (abs(first / half - second / (steps - half)) / (seconds / steps)) if half >= 1 else None
    images_per_s = steps * batch / seconds
    achieved = flops * images_per_s / 1e12
    dev = provenance(runtime.device)["device"]
    peak = peak_tflops(device_key(dev), runtime.precision) if cuda else None  # fp32: TF32's rate
    return {
        "run": run_id, "method": spec.method.name, "arch": spec.arch, "dataset": spec.dataset,
        "batch_size": batch, "steps": steps, "warmup": warmup, "seconds": seconds, "halves_differ": halves,
        "images_per_s": images_per_s,
        "seconds_per_epoch": TRAIN_SIZES[spec.dataset] / images_per_s,
        "flops_per_example": flops, "achieved_tflops": achieved, "peak_tflops": peak,
        "fraction_of_peak": achieved / peak if peak else None,
        "settings": {"bf16": runtime.bf16, "channels_last": runtime.channels_last, "compile": compile_model},
        "device": dev, "provenance": provenance(runtime.device),
    }


def write_bench(result: dict, folder: str | Path = "results/bench") -> Path:
    s = result["settings"]
    flags = "-".join(f"{k}{int(v)}" for k, v in sorted(s.items()))
    name = f"train-{device_key(result['device']).split('(')[0]}-{result['run']}-b{result['batch_size']}-{flags}.json"
    path = Path(folder) / name
    atomic_write_text(path, json.dumps(result, indent=1) + "\n")
    return path

