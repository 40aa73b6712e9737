"""Training throughput against the hardware's limit, and cost planning for the cluster.

FLOPs are counted, not estimated: ``torch.utils.flop_counter.FlopCounterMode`` records the matmul and
convolution FLOPs that one real training step executes (forward, attack, backward; an attack's input-only
backward costs what it really costs). ``bench_train`` times steps on the current device after warm-up (CUDA
events on a GPU) and reports images/s, seconds per epoch, achieved TFLOP/s and the fraction of the device's
peak. ``plan`` turns the catalog and these counts (calibrated by bench files when they exist) into GPU-hours
per job and a makespan on N GPUs.
"""

from __future__ import annotations

import copy
import heapq
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from . import models
from .checkpoint import atomic_write_text
from .data import DATASETS, SPLIT_SIZES
from .config import CORRUPTIONS_TYPE, Catalog
from .methods import METHODS
from .provenance import provenance
from .runtime import Runtime

# Dense bf16 tensor throughput, TFLOP/s. H100/H200: the matmul rate measured on this workplace's machines
# (the spec sheet says 989); the others are vendors' dense figures.
PEAK_TFLOPS = {"h100": 790.0, "h200": 790.0, "a100": 312.0, "rtx3090": 71.0, "v100": 125.0}
# When no bench file calibrates a device, plans assume this fraction of peak (the project's target).
ASSUMED_FRACTION = 0.30
TRAIN_SIZES = {name: sizes[0] for name, sizes in SPLIT_SIZES.items()}
TEST_SIZES = {name: sizes[1] for name, sizes in SPLIT_SIZES.items()}
SHAPES = {name: (*spec.image_shape, spec.num_classes) for name, spec in DATASETS.items()}  # (c, h, w, classes)


class _GlobalOnly:
    """FlopCounterMode's module tracker hooks every module's inputs for a per-module breakdown, which fails
    under autograd.grad when a module's input is a leaf (TRADES' KL attack). Totals need no breakdown."""

    parents = {"Global"}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def count_flops() -> FlopCounterMode:
    counter = FlopCounterMode(display=False)
    counter.mod_tracker = _GlobalOnly()
    return counter


def device_key(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100'."""
    lowered = name.lower().replace(" ", "")
    for key in PEAK_TFLOPS:
        if key in lowered:
            return key
    return lowered


def synthetic_batch(dataset: str, batch: int, device: torch.device, seed: int = 0):
    c, h, w, k = SHAPES[dataset]
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(batch, c, h, w, generator=gen).to(device), torch.randint(0, k, (batch,), generator=gen).to(device)


def _method(spec: dict, runtime: Runtime):
    c, h, _, k = SHAPES[spec["dataset"]]

    def build():
        # FLOPs and step times do not depend on the weights: an adapter model needs no pretrained file here
        return models.build_architecture(spec["arch"], k, in_channels=c, image_size=h,
                                         bn_running_stats=spec["bn_running_stats"])

    return METHODS[spec["method"]["name"]](spec, build, runtime)


def step_flops_per_example(spec: dict, batch: int = 2) -> float:
    """FLOPs of one training step per example, counted on the CPU for a small batch."""
    torch.manual_seed(0)
    method = _method(spec, Runtime(torch.device("cpu")))
    method.set_epoch(0.0)
    x, y = synthetic_batch(spec["dataset"], batch, torch.device("cpu"))
    with count_flops() as counter:
        method.train_step(x, y)
    return counter.get_total_flops() / batch


def forward_flops_per_example(arch: str, dataset: str) -> float:
    c, h, _, k = SHAPES[dataset]
    model = models.build_architecture(arch, k, in_channels=c, image_size=h).eval()
    with count_flops() as counter, torch.no_grad():
        model(torch.rand(1, c, h, h))
    return float(counter.get_total_flops())


def bench_train(run_id: str, spec: dict, *, runtime: Runtime, batch_size: int | None = None, steps: int = 20,
                warmup: int = 3, compile_model: bool = False) -> dict:
    """Time ``steps`` training steps of a run's method and model on synthetic data of its dataset's shape."""
    spec = copy.deepcopy(spec)
    batch = batch_size or spec["batch_size"]
    flops = step_flops_per_example(spec)
    torch.manual_seed(spec["seed"])
    method = _method(spec, runtime)
    if compile_model:
        for module in [method.eval_model(), *method.learners().values()]:
            module.compile()
    x, y = synthetic_batch(spec["dataset"], batch, runtime.device)
    x = runtime.place_batch(x)
    method.set_epoch(0.0)
    for _ in range(warmup):
        method.train_step(x, y)
    cuda = runtime.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.perf_counter()
    for _ in range(steps):
        method.train_step(x, y)
    if cuda:
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1000
    else:
        seconds = time.perf_counter() - t0
    images_per_s = steps * batch / seconds
    achieved = flops * images_per_s / 1e12
    dev = provenance(runtime.device)["device"]
    peak = PEAK_TFLOPS.get(device_key(dev)) if cuda else None
    return {
        "run": run_id, "method": spec["method"]["name"], "arch": spec["arch"], "dataset": spec["dataset"],
        "batch_size": batch, "steps": steps, "warmup": warmup, "seconds": seconds, "images_per_s": images_per_s,
        "seconds_per_epoch": TRAIN_SIZES[spec["dataset"]] / images_per_s,
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


# ------------------------------------------------------------------------------------------------ plan


@dataclass
class Job:
    name: str
    kind: str          # train | evaluate
    hours: float       # GPU-hours
    after: str | None  # the training job an evaluation waits for


def calibrated_fraction(device: str, folder: str | Path = "results/bench") -> tuple[float, str]:
    """The median achieved fraction of peak in bench files of this device, else the assumed target."""
    fractions = []
    for path in Path(folder).glob("train-*.json"):
        data = json.loads(path.read_text())
        if device_key(data.get("device", "")) == device and data.get("fraction_of_peak"):
            fractions.append(data["fraction_of_peak"])
    if fractions:
        fractions.sort()
        return fractions[len(fractions) // 2], f"calibrated by {len(fractions)} bench file(s)"
    return ASSUMED_FRACTION, f"assumed {ASSUMED_FRACTION:.0%} of peak (no bench file for {device})"


def attack_forward_equivalents(spec: dict) -> float:
    """Forward-pass equivalents per attacked example: a gradient step costs 2 forwards (input gradients only)."""
    kind = spec["type"]
    steps, restarts = spec.get("steps", 1), spec.get("restarts", 1)
    if kind == "clean":
        return 1.0
    if kind == CORRUPTIONS_TYPE:  # NROB: one forward per corrupted copy, and the clean one
        from .data import SEVERITIES, corruption_dataset

        return 1.0 + len(corruption_dataset(spec["dataset"]).corruptions) * len(SEVERITIES)
    if kind in ("autoattack", "aa"):
        return 2 * 100 * 10 + 5000  # APGD-CE + 9 APGD-T runs of 100 steps, then Square's queries (upper bound)
    return 1.0 + 2.0 * steps * restarts


def plan(catalog: Catalog, target: str, gpus: int, device: str, bench_folder: str | Path = "results/bench") -> dict:
    peak = PEAK_TFLOPS[device]
    fraction, basis = calibrated_fraction(device, bench_folder)
    rate = peak * fraction * 1e12 * 3600  # FLOP per GPU-hour
    jobs: list[Job] = []
    step_cache: dict[str, float] = {}
    for train_id in dict.fromkeys(catalog.train_id[r["run"]] for t in catalog.leaf_targets(target)
                                  for r in catalog.targets[t]["rows"]):
        spec = catalog.runs[train_id]
        key = json.dumps([spec["method"], spec["arch"], spec["dataset"]], sort_keys=True, default=str)
        if key not in step_cache:
            step_cache[key] = step_flops_per_example(spec)
        n = spec.get("train_examples") or TRAIN_SIZES[spec["dataset"]]
        fwd = forward_flops_per_example(spec["arch"], spec["dataset"])
        sel = spec["selection"]
        eval_per_epoch = sel["examples"] * fwd * (1 + attack_forward_equivalents(sel["attack"]))
        flops = spec["epochs"] * (n * step_cache[key] + eval_per_epoch)
        jobs.append(Job(f"train {train_id}", "train", flops / rate, None))
        for run, attack in catalog.evaluations(target):
            if run != train_id:
                continue
            spec_a = catalog.attack_for(attack, run)
            m = spec.get("test_examples") or TEST_SIZES[spec["dataset"]]
            jobs.append(Job(f"evaluate {run} {attack}", "evaluate",
                            m * fwd * attack_forward_equivalents(spec_a) / rate, f"train {train_id}"))
    return {"target": target, "device": device, "gpus": gpus, "peak_tflops": peak, "fraction": fraction,
            "basis": basis, "jobs": jobs, "total_hours": sum(j.hours for j in jobs),
            "makespan_hours": makespan(jobs, gpus)}


def makespan(jobs: list[Job], gpus: int) -> float:
    """Greedy list scheduling (longest job first among those ready) of jobs with train -> evaluate edges."""
    done_at: dict[str, float] = {}
    free = [0.0] * gpus
    heapq.heapify(free)
    pending = sorted(jobs, key=lambda j: (j.kind != "train", -j.hours))
    for job in pending:  # every training job precedes its evaluations in this order
        start = max(heapq.heappop(free), done_at.get(job.after, 0.0) if job.after else 0.0)
        done_at[job.name] = start + job.hours
        heapq.heappush(free, start + job.hours)
    return max(done_at.values(), default=0.0)


def format_plan(result: dict) -> str:
    lines = [f"{result['target']} on {result['gpus']} x {result['device']} ({result['peak_tflops']:.0f} TFLOP/s peak, "
             f"{result['fraction']:.0%} achieved: {result['basis']})", "",
             "| job | GPU-minutes |", "|---|---:|"]
    lines += [f"| {j.name} | {60 * j.hours:.1f} |" for j in result["jobs"]]
    lines += ["", f"total: {result['total_hours']:.1f} GPU-hours; makespan on {result['gpus']} GPU(s): "
                  f"{result['makespan_hours']:.1f} h"]
    return "\n".join(lines)


def plan_as_json(result: dict) -> dict[str, Any]:
    return {**result, "jobs": [j.__dict__ for j in result["jobs"]]}


# ---------------------------------------------------------------------------------------------- ratios


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
    from .attacks import frozen

    c, h, _, k = SHAPES[dataset]
    torch.manual_seed(0)
    model = models.build_architecture(arch, k, in_channels=c, image_size=h).eval()
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
        torch.manual_seed(spec["seed"])
        method = _method(spec, runtime)
        method.set_epoch(0.0)
        x, y = synthetic_batch(spec["dataset"], spec["batch_size"], runtime.device)
        method.train_step(x, y)  # warm-up
        runs[run_id] = (lambda m=method, x=x, y=y: [m.train_step(x, y) for _ in range(steps)])
    t = _median_interleaved(runs, repeats)
    return {"numerator": numerator, "denominator": denominator, "numerator_s": t[numerator],
            "denominator_s": t[denominator], "ratio": t[numerator] / t[denominator], "steps": steps}
