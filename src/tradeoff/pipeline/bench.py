"""Training throughput against the hardware's limit, and the FLOP counts that cost planning uses.

FLOPs are counted, not estimated: ``torch.utils.flop_counter.FlopCounterMode`` records the matmul and
convolution FLOPs that one real training step executes (forward, attack, backward; an attack's input-only
backward costs what it really costs). ``bench_train`` times steps on the current device after warm-up (CUDA
events on a GPU) and reports images/s, seconds per epoch, achieved TFLOP/s and the fraction of the device's
peak. ``pass_flops`` counts what one forward and backward pass of an architecture costs; ``tradeoff bench-flops``
writes them for every architecture of the shipped scales into the table that :mod:`tradeoff.pipeline.costs` plans every
job with, without PyTorch (so that Snakemake sizes its jobs at start-up).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop, sdpa_flop

from tradeoff import models
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.data.declared import DECLARED as DATASET_DECLARATIONS
from tradeoff.data.declared import SPLIT_SIZES
from tradeoff.config import Catalog
from tradeoff.attacks import frozen
from tradeoff.pipeline.costs import device_key, pass_key, peak_tflops
from tradeoff.methods import METHODS
from tradeoff.storage.provenance import provenance
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import RunSpec
from tradeoff.data import corruption_dataset, corruption_dataset_names
from tradeoff.data.hendrycks import SEVERITIES

TRAIN_SIZES = {name: sizes[0] for name, sizes in SPLIT_SIZES.items()}
TEST_SIZES = {name: sizes[1] for name, sizes in SPLIT_SIZES.items()}
SHAPES = {name: (*d.image_shape, d.num_classes) for name, d in DATASET_DECLARATIONS.items()}  # (c, h, w, classes)


class _GlobalOnly:
    """FlopCounterMode's module tracker hooks every module's inputs for a per-module breakdown, which fails
    under autograd.grad when a module's input is a leaf (TRADES' KL attack). Totals need no breakdown."""

    parents = {"Global"}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _cpu_attention_formulas() -> dict:
    """PyTorch's FLOP counter prices scaled dot-product attention's CUDA kernels but not the CPU's (flash attention
    for the CPU): a ViT's attention counted on the CPU would be free. Its CPU kernels take the same leading arguments
    as the CUDA flash kernels, so they are priced by the same formulas."""
    aten = torch.ops.aten
    pairs = (("_scaled_dot_product_flash_attention_for_cpu", sdpa_flop),
             ("_scaled_dot_product_flash_attention_for_cpu_backward", sdpa_backward_flop))
    # the module's formulas come shape-wrapped (FlopCounterMode wraps a custom mapping's again): the plain ones
    return {getattr(aten, op): formula.__wrapped__ for op, formula in pairs if hasattr(aten, op)}


def count_flops() -> FlopCounterMode:
    counter = FlopCounterMode(display=False, custom_mapping=_cpu_attention_formulas())
    counter.mod_tracker = _GlobalOnly()
    return counter


def synthetic_batch(dataset: str, batch: int, device: torch.device, seed: int = 0):
    c, h, w, k = SHAPES[dataset]
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(batch, c, h, w, generator=gen).to(device), torch.randint(0, k, (batch,), generator=gen).to(device)


def _method(spec: RunSpec, runtime: Runtime):
    c, h, _, k = SHAPES[spec.dataset]

    def build():
        # FLOPs and step times do not depend on the weights: an adapter model needs no pretrained file here
        return models.create_model(spec.arch, k, in_channels=c, image_size=h,
                                   bn_running_stats=spec.bn_running_stats)

    return METHODS[spec.method.name](spec, build, runtime)


def step_flops_per_example(spec: RunSpec, batch: int = 2) -> float:
    """FLOPs of one training step per example, counted on the CPU for a small batch."""
    torch.manual_seed(0)
    method = _method(spec, Runtime(torch.device("cpu")))
    method.set_epoch(0.0)
    x, y = synthetic_batch(spec.dataset, batch, torch.device("cpu"))
    with count_flops() as counter:
        method.train_step(x, y)
    return counter.get_total_flops() / batch


def forward_flops_per_example(arch: str, dataset: str) -> float:
    c, h, _, k = SHAPES[dataset]
    model = models.create_model(arch, k, in_channels=c, image_size=h).eval()
    with count_flops() as counter, torch.no_grad():
        model(torch.rand(1, c, h, h))
    return float(counter.get_total_flops())


def bench_train(run_id: str, spec: RunSpec, *, runtime: Runtime, batch_size: int | None = None, steps: int = 20,
                warmup: int = 3, compile_model: bool = False) -> dict:
    """Time ``steps`` training steps of a run's method and model on synthetic data of its dataset's shape."""
    batch = batch_size or spec.batch_size
    flops = step_flops_per_example(spec)
    torch.manual_seed(spec.seed)
    method = _method(spec, runtime)
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


# ------------------------------------------------------------------------------------------------ FLOP table


def pass_flops(arch: str, dataset: str, batch: int = 2) -> dict[str, float]:
    """FLOPs per example of one forward pass of an architecture on a dataset's images, of one input-only backward
    pass (an attack's gradient: the weights frozen) and of one training backward pass (the gradients of the weights
    that train: an adapter model's backbone is frozen), counted on the CPU: the pass costs of tradeoff.pipeline.costs."""
    c, h, _, k = SHAPES[dataset]
    torch.manual_seed(0)
    model = models.create_model(arch, k, in_channels=c, image_size=h).train()
    x, _ = synthetic_batch(dataset, batch, torch.device("cpu"))
    with count_flops() as counter:
        model(x)
    forward = counter.get_total_flops() / batch
    trainable = [p for p in model.parameters() if p.requires_grad]
    with frozen(model):
        xi = x.clone().requires_grad_(True)
        out = model(xi).float().sum()
        with count_flops() as counter:
            torch.autograd.grad(out, xi)
    input_backward = counter.get_total_flops() / batch
    out = model(x).float().sum()
    with count_flops() as counter:
        torch.autograd.grad(out, trainable)
    return {"forward": forward, "input_backward": input_backward, "train_backward": counter.get_total_flops() / batch}


#: the configurations whose runs the FLOP table covers: the paper scale and each shipped scale
SHIPPED_SCALES = (("config/config.yaml",), ("config/config.yaml", "config/demo.yaml"),
                  ("config/config.yaml", "config/smoke.yaml"))


def shipped_pairs(catalogs: list[Catalog]) -> list[tuple[str, str]]:
    """The (architecture, dataset) of every run of these catalogs."""
    return sorted({(s.arch, s.dataset) for c in catalogs for s in c.runs.values()})


def flops_table(catalogs: list[Catalog], *, known: dict | None = None, recount: bool = True) -> dict:
    """tradeoff.pipeline.costs' table (flops.json) for the runs of these catalogs: each (architecture, dataset)'s pass costs
    (``recount=False`` keeps those already in ``known``), each dataset's sizes and classes, each corruption
    dataset's images per test image."""
    passes = {}
    for arch, dataset in shipped_pairs(catalogs):
        key = pass_key(arch, dataset)
        kept = (known or {}).get("passes", {}).get(key)
        passes[key] = kept if kept is not None and not recount else pass_flops(arch, dataset)
    datasets = {name: {"train": TRAIN_SIZES[name], "test": TEST_SIZES[name], "classes": SHAPES[name][3]}
                for name in sorted(TRAIN_SIZES) if name in SHAPES}
    corruptions = {name: len(corruption_dataset(name).corruptions) * len(SEVERITIES)
                   for name in sorted(corruption_dataset_names())}
    return {"about": "FLOPs per example of one pass (forward, input-only backward, training backward) of each "
                     "architecture on each dataset, counted by `tradeoff bench-flops` (tradeoff.pipeline.bench.pass_flops); "
                     "read by tradeoff.pipeline.costs, kept current by tests/test_costs.py",
            "passes": passes, "datasets": datasets, "corruption_images": corruptions}


def format_flops_table(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


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
        method = _method(spec, runtime)
        method.set_epoch(0.0)
        x, y = synthetic_batch(spec.dataset, spec.batch_size, runtime.device)
        method.train_step(x, y)  # warm-up
        runs[run_id] = (lambda m=method, x=x, y=y: [m.train_step(x, y) for _ in range(steps)])
    t = _median_interleaved(runs, repeats)
    return {"numerator": numerator, "denominator": denominator, "numerator_s": t[numerator],
            "denominator_s": t[denominator], "ratio": t[numerator] / t[denominator], "steps": steps}
