"""Section a of the GPU node check (:mod:`tradeoff.pipeline.bench.gpucheck`): one training step of every method on
the device against the same step on the CPU (the same initial weights, batch and random numbers: the step's random
draws are taken on the host from one seeded generator, ``host_random``), in fp32 with TF32 off (``strict_fp32``);
the device's step in bf16 autocast and channels_last against its step in fp32; Generalist's stream-parallel mode
against its serial mode (and their speed); and, under CUDA's sync debug mode, how many host-device synchronisations
one step makes. ``compare`` judges two steps against a tolerance (``TOLERANCES``).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from typing import Callable, Iterator

import torch

from tradeoff import models
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import RunSpec, freeze
from tradeoff.methods import METHODS
from tradeoff.pipeline.bench.synthetic import SHAPES, synthetic_batch

#: |loss difference| <= rel x |loss| + abs; the weight updates' cosine >= cosine, their norms within norm_rel
TOLERANCES = {
    # fp32 both, TF32 off: only the order of floating-point sums differs (and an attack's sign of a gradient
    # component near 0 may flip, moving one pixel by one step)
    "gpu_vs_cpu": {"rel": 1e-3, "abs": 1e-5, "cosine": 0.999, "norm_rel": 1e-2},
    # bf16 autocast rounds every activation to 8 bits of mantissa; the attack sees other gradients
    "bf16_vs_fp32": {"rel": 5e-2, "abs": 1e-3, "cosine": 0.9, "norm_rel": 0.2},
    # the same kernels on two streams: the same numbers
    "parallel_vs_serial": {"rel": 1e-5, "abs": 1e-6, "cosine": 0.99999, "norm_rel": 1e-5},
}


@contextlib.contextmanager
def host_random(seed: int) -> Iterator[None]:
    """Every random draw of torch's factory functions (rand, randn, randint, randperm and their _like forms) without
    an explicit generator is taken on the CPU from one generator seeded with ``seed`` and moved to its device: a step
    draws the same numbers on any device. (A draw with its own generator is left alone.)"""
    gen = torch.Generator().manual_seed(seed)
    names = ("rand", "randn", "randint", "randperm", "rand_like", "randn_like")
    originals = {name: getattr(torch, name) for name in names}

    def factory(name: str) -> Callable:
        fn = originals[name]

        def draw(*args, generator=None, device=None, **kwargs):
            if generator is not None:
                return fn(*args, generator=generator, device=device, **kwargs)
            return fn(*args, generator=gen, **kwargs).to(device or "cpu")
        return draw

    def like(name: str) -> Callable:
        fn = originals[name.removesuffix("_like")]

        def draw(x, *, dtype=None, device=None, **kwargs):
            kwargs.pop("memory_format", None)
            return fn(x.shape, generator=gen, dtype=dtype or x.dtype).to(device or x.device)
        return draw

    try:
        for name in names:
            setattr(torch, name, like(name) if name.endswith("_like") else factory(name))
        yield
    finally:
        for name, fn in originals.items():
            setattr(torch, name, fn)


@contextlib.contextmanager
def strict_fp32() -> Iterator[None]:
    """No TF32 in matmuls and cuDNN convolutions (PyTorch allows it in cuDNN by default)."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _trainable(method) -> list[torch.Tensor]:
    seen, out = set(), []
    for model in [method.eval_model(), *method.learners().values()]:
        for p in model.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


def one_step(spec: RunSpec, runtime: Runtime, *, batch: int = 16, seed: int = 0, build=None) -> dict:
    """One training step of a run's method from seeded weights on a seeded synthetic batch: its loss and the change
    of every weight (flat, float64, on the CPU)."""
    c, h, _, k = SHAPES[spec.dataset]
    build = build or (lambda: models.create_model(spec.arch, k, in_channels=c, image_size=h,
                                                  bn_running_stats=spec.bn_running_stats))
    torch.manual_seed(seed)
    method = METHODS[spec.method.name](spec, build, runtime)
    method.set_epoch(1.0)
    x, y = synthetic_batch(spec.dataset, batch, torch.device("cpu"), seed=seed + 1)
    x, y = runtime.place_batch(x), y.to(runtime.device)
    before = [p.detach().double().cpu().clone() for p in _trainable(method)]
    torch.manual_seed(seed + 2)  # the CPU draws a method makes itself (IAT's Beta weight)
    with host_random(seed + 3):
        out = method.train_step(x, y)
    after = [p.detach().double().cpu() for p in _trainable(method)]
    update = torch.cat([(a - b).flatten() for a, b in zip(after, before)])
    return {"loss": float(out["loss"]), "update": update, "method": method, "x": x, "y": y}


def compare(a: dict, b: dict, tolerance: dict) -> dict:
    """How far step ``b`` is from step ``a`` (loss, and the weight update's direction and size) and whether that is
    within ``tolerance``."""
    loss_diff = abs(a["loss"] - b["loss"])
    ua, ub = a["update"], b["update"]
    na, nb = float(ua.norm()), float(ub.norm())
    cosine = float(torch.dot(ua, ub) / (na * nb)) if na > 0 and nb > 0 else (1.0 if na == nb else 0.0)
    norm_rel = abs(na - nb) / max(na, 1e-30)
    finite = all(math.isfinite(v) for v in (a["loss"], b["loss"], cosine, norm_rel))
    ok = (finite and loss_diff <= tolerance["rel"] * abs(a["loss"]) + tolerance["abs"]
          and cosine >= tolerance["cosine"] and norm_rel <= tolerance["norm_rel"])
    return {"loss": a["loss"], "other_loss": b["loss"], "loss_diff": loss_diff, "cosine": cosine,
            "norm_rel": norm_rel, "ok": bool(ok)}


def count_syncs(method, x: torch.Tensor, y: torch.Tensor) -> int | None:
    """Host-device synchronisations of one training step, from CUDA's sync debug mode (None off CUDA)."""
    if x.device.type != "cuda":
        return None
    method.train_step(x, y)  # warm-up: lazy state, cuDNN's choices
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            method.train_step(x, y)
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum("synchroniz" in str(w.message) for w in caught)


def _time_steps(method, x, y, steps: int) -> float:
    cuda = x.device.type == "cuda"
    method.train_step(x, y)
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        method.train_step(x, y)
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def representative_runs(catalog) -> dict[str, str]:
    """A run of every method in the catalog (CIFAR-10 ResNet-18 where there is one), method name -> run id."""
    found: dict[str, str] = {}
    runs = catalog.training_runs()
    ordered = sorted(runs, key=lambda r: (runs[r].arch != "resnet18" or runs[r].dataset != "cifar10",
                                          runs[r].pretrained is not None, r))
    for run in ordered:
        found.setdefault(runs[run].method.name, run)
    return dict(sorted(found.items()))


def configured(catalog, device: torch.device) -> Runtime:
    """The config's training runtime (precision, channels_last) on ``device``: what its training jobs run."""
    runtime = catalog.runtime_settings
    return Runtime(device, bf16=runtime.precision == "bf16" and device.type == "cuda",
                   channels_last=runtime.channels_last)


def check_methods(catalog, device: torch.device, *, batch: int = 16, reference: torch.device | None = None,
                  step: Callable[..., dict] = one_step, out: dict | None = None) -> dict:
    """Section 1 for every method of the catalog (``step`` is replaceable for tests), into ``out`` as each method is
    done (what a section stopped by its budget keeps)."""
    reference = reference or torch.device("cpu")
    out = {} if out is None else out
    for name, run in representative_runs(catalog).items():
        spec = catalog.runs[run].replace(pretrained=None)  # one_step builds the bare architecture
        with strict_fp32():
            ref = step(spec, Runtime(reference), batch=batch)
            dev = step(spec, Runtime(device), batch=batch)
        fast = step(spec, Runtime(device, bf16=True, channels_last=True), batch=batch)
        row = {"run": run, "gpu_vs_cpu": compare(ref, dev, TOLERANCES["gpu_vs_cpu"]),
               "bf16_vs_fp32": compare(dev, fast, TOLERANCES["bf16_vs_fp32"]),
               "syncs_per_step": count_syncs(fast["method"], fast["x"], fast["y"])}
        if name == "generalist":
            method = spec.method
            parallel = spec.replace(method=method.replace(params=freeze({**method.params, "parallel": True})))
            serial = spec.replace(method=method.replace(params=freeze({**method.params, "parallel": False})))
            a = step(serial, configured(catalog, device), batch=batch)
            b = step(parallel, configured(catalog, device), batch=batch)
            row["parallel_vs_serial"] = compare(a, b, TOLERANCES["parallel_vs_serial"])
            row["parallel_vs_serial"]["streams"] = b["method"].streams is not None
            row["parallel_vs_serial"]["serial_step_s"] = _time_steps(a["method"], a["x"], a["y"], 5)
            row["parallel_vs_serial"]["parallel_step_s"] = _time_steps(b["method"], b["x"], b["y"], 5)
        out[name] = row
    return out

