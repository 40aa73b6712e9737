"""`tradeoff gpu-check`: is the GPU path right, and how fast is it, in one process on one device.

1. Every method: one training step on the GPU against the same step on the CPU (the same initial weights, batch and
   random numbers: the step's random draws are taken on the host from one seeded generator, see ``host_random``),
   in fp32 with TF32 off; then the GPU step in bf16 autocast and channels_last (the `runtime.precision: bf16`
   opt-in) against the GPU step in fp32; Generalist's stream-parallel mode against its serial mode (and their
   speed); and, under CUDA's sync debug mode, how many host-device synchronisations one step makes.
2. `bench-train` of PGD-AT, TRADES and Generalist on ResNet-18 (batch 128 and 512) and PGD-AT on WRN-34-10, in the
   config's runtime settings (precision, channels_last: what the plan prices; tradeoff.pipeline.bench.bench_train; each result
   is also written as a bench file, which calibrates `tradeoff plan`).
3. `bench-eval` of PGD-20 and AutoAttack (standard) on 1,000 images of ResNet-18: the run's trained model if it
   exists, else random weights on synthetic images labelled with the model's own predictions and a budget so small
   that no example is broken, so every attack (each of AutoAttack's components) runs on every image: AutoAttack's
   worst case, an upper bound of its time on a robust model.
4. The performance targets (docs/gpu.md) against these measurements.
5. At paper shape (``rehearse``): the `table1a` rehearsal through Snakemake (``--configfile config/rehearsal.yaml``
   and an overlay of its own: CUDA, the paper's batch sizes, attacks uncapped, at least 1,000 test images), and per
   method the measured seconds per epoch beside what `tradeoff plan` predicts for the same runs; skipped, saying so,
   while config/rehearsal.yaml does not exist.
6. ``bf16_against_fp32``: one run of the demo scale trained twice from the same seed, in fp32 and under the
   `runtime.precision: bf16` opt-in, and both models' clean and PGD accuracy with the exact McNemar test.

``gpu_check`` runs these as five sections by value (SECTIONS: a = 1 with the imports and versions, b = 2 against
the plan, c = 3, d = 6, e = 5) under an optional wall-clock budget, each with its share: a section out of time stops
and says so (scripts/gpu-node.sh on an offline node; docs/gpu.md). It writes ``gpu-check-<device>.json`` and ``.md``
into the scale's bench folder (tradeoff.storage.layout) or ``--out``, after every section, and exits 1 if a comparison is
out of its tolerance, a needed package is missing or a section failed. Without CUDA it refuses in one line, unless ``--cpu-only``: then the same
machinery compares the CPU with itself (every difference must be zero), and the benches run briefly on the CPU.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from tradeoff import models
from tradeoff.pipeline.bench import SHAPES, bench_train, synthetic_batch, write_bench
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.pipeline.costs import (
    ASSUMED_FRACTION,
    PEAK_TFLOPS,
    JobSizes,
    UnknownCost,
    device_key,
    planned_epoch_seconds,
    step_passes,
)
from tradeoff.methods import METHODS
from tradeoff.storage.provenance import provenance, training_epochs
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import Norm, RunSpec, freeze
from tradeoff.attacks.loop import run_attack
from tradeoff.evaluation.load import load_model, source_for
from tradeoff.config import load_catalog
from tradeoff.data import load_run_data
from tradeoff.report.stats import mcnemar
from tradeoff.storage.layout import bits
from tradeoff.training.train import train
from tradeoff.evaluation.load import RunModel, load_model
import importlib.util
import platform
from importlib import metadata

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
#: the rehearsal scale (issue 23: every paper-scale setting, amounts capped), its target here, and what this check
#: undoes of its caps: the paper's batch sizes and its attacks at full strength (null: each run's own setting)
REHEARSAL, REHEARSAL_TARGET = "config/rehearsal.yaml", "table1a"
REHEARSAL_UNCAPPED = {"batch_size": None, "max_attack_steps": None, "train_attack_steps": None,
                      "autoattack_caps": None}
#: the demo run trained in both precisions, and the attacks its two models are compared under
PRECISION_RUN, PRECISION_ATTACKS = "cifar10-resnet18-at-beta1", ("clean", "pgd20")


class NoCuda(RuntimeError):
    pass


# ------------------------------------------------------------------------------------------------ one step


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


# ------------------------------------------------------------------------------------------------ benches


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


# ------------------------------------------------------------------------------------------------ paper shape


def _snakemake() -> list[str]:
    """Snakemake as a module of this Python (`python -m snakemake`): this environment's, as the Makefile's .venv, or
    the node's wheelhouse on PYTHONPATH (scripts/gpu-node.sh), whose scripts are on no PATH."""
    return [sys.executable, "-m", "snakemake"]


def snakemake_missing() -> bool:
    """Whether this Python lacks Snakemake (section e needs it; the node's wheelhouse carries it)."""
    return importlib.util.find_spec("snakemake") is None


def epoch_seconds(model: Path) -> float | None:
    """A training job's mean seconds per epoch from its model's sidecar (tradeoff.storage.provenance), the first
    epoch left out when there are more (cuDNN's autotuning, the allocator's warm-up); None without one."""
    epochs = training_epochs(model)
    if epochs is None:
        return None
    seconds = [float(e["seconds"]) for e in epochs if e.get("seconds") is not None]
    seconds = seconds[1:] if len(seconds) > 1 else seconds
    return sum(seconds) / len(seconds) if seconds else None


def rehearse(root: Path, device: str, *, images: int = 1000, target: str = REHEARSAL_TARGET, cores: int = 1,
             runner: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> dict:
    """Section 5: build ``target`` through Snakemake at the rehearsal scale with the paper's batch sizes and
    uncapped attacks on ``images`` test images, on CUDA, then per method the measured seconds per epoch (its
    model's sidecar) beside the plan's for the same resolved runs (tradeoff.pipeline.costs.JobSizes on ``device``, a device name;
    the plan's default device where it has no price for it). ``root``: the workflow folder. ``runner`` runs the
    Snakemake command (replaceable for tests)."""
    rehearsal = root / REHEARSAL
    if not rehearsal.is_file():
        return {"skipped": f"{REHEARSAL} does not exist (the rehearsal scale, issue 23): the {target} rehearsal at "
                           "paper shape did not run"}
    base = load_catalog([root / "config" / "config.yaml", rehearsal], write_cache=False)
    overlay = base.layout.gpu_check_work / "rehearsal-uncapped.yaml"
    overlay.parent.mkdir(parents=True, exist_ok=True)
    test_examples = max(images, int(base.test_examples or images))
    overlay.write_text(json.dumps({"runtime": {"device": "cuda"},  # JSON is YAML: Snakemake reads it as a config
                                   "scale_map": {**REHEARSAL_UNCAPPED, "test_examples": test_examples}}) + "\n")
    catalog = load_catalog([root / "config" / "config.yaml", rehearsal, overlay], write_cache=False)
    command = [*_snakemake(), target, "--cores", str(cores), "--configfile", str(rehearsal), str(overlay),
               "--scheduler", "greedy"]  # the ILP scheduler's PuLP is not in the node's wheelhouse
    t0 = time.perf_counter()
    done = runner(command, cwd=root, capture_output=True, text=True)
    out = {"target": target, "command": " ".join(command), "returncode": done.returncode,
           "seconds": time.perf_counter() - t0, "test_examples": test_examples, "scale": catalog.scale}
    if done.returncode != 0:
        return {**out, "error": (done.stderr or done.stdout or "")[-2000:]}
    key = device_key(device)
    sizes = JobSizes(catalog, bench_folder=catalog.layout.bench, device=key if key in PEAK_TFLOPS else None)
    rows = []
    for row in catalog.targets[target].rows:
        run = row.run
        spec, planned = catalog.runs[run], sizes.planned_train(run)
        measured = epoch_seconds(catalog.layout.model(catalog.train_id[run]))
        per_epoch = None if planned is None else planned * 60 / int(spec.epochs)
        rows.append({"method": spec.method.name, "run": run, "epochs": int(spec.epochs),
                     "batch_size": spec.batch_size, "measured_s_per_epoch": measured,
                     "planned_s_per_epoch": per_epoch,
                     "measured_over_planned": measured / per_epoch if measured and per_epoch else None})
    return {**out, "plan_device": sizes.device, "plan_basis": sizes.basis, "plan_precision": sizes.precision,
            "methods": rows}


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


# ------------------------------------------------------------------------------------------------ the check


#: the check's sections, by value: (key, title, share of the budget); the last takes whatever time remains
SECTIONS = (("a", "imports, CUDA, one training step of every method against the CPU", 0.25),
            ("b", "seconds per epoch at paper shape against the plan", 0.35),
            ("c", "PGD-20 and AutoAttack timed", 0.2),
            ("d", "bf16 against fp32 (a demo run trained in both)", 0.2),
            ("e", f"the {REHEARSAL_TARGET} rehearsal through Snakemake", None))
#: seconds of a budget kept back to write the report
WRITE_RESERVE = 3.0
#: the oldest PyTorch the check (and the pipeline's code on its paths) runs on: the first node's (docs/gpu.md)
MIN_TORCH = (2, 11)
#: what the node-side commands import beyond the standard library: (module, distribution, needed by); the
#: wheelhouse (config/node-wheels.txt) carries those the node (config/node-packages.txt) lacks, but Snakemake
NEEDED = (("torch", "torch", "everything"), ("numpy", "numpy", "everything"), ("yaml", "PyYAML", "the config"),
          ("jsonschema", "jsonschema", "the config"), ("PIL", "pillow", "the datasets"),
          ("scipy", "scipy", "statistics"), ("statsmodels", "statsmodels", "statistics (McNemar)"),
          ("pyautoattack", "pyautoattack", "AutoAttack"), ("dvclive", "dvclive", "training curves"),
          ("sklearn", "scikit-learn", "the demo's digits"))
OPTIONAL = (("snakemake", "snakemake", "section e (the rehearsal) only; in the wheelhouse"),)


class OutOfTime(BaseException):
    """A section's share of the budget is spent (SIGALRM). A BaseException: no ``except Exception`` swallows it."""


class Terminated(BaseException):
    """The process was asked to stop (SIGTERM: the script's outer timeout, or the batch system)."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise OutOfTime in this (the main) thread after ``seconds`` (None: no limit)."""
    if seconds is None:
        yield
        return

    def alarm(signum, frame):
        raise OutOfTime()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def process_seconds() -> float:
    """Wall-clock seconds since this process started (Linux's /proc; 0 where it cannot be read): the start-up (Python,
    PyTorch, the config) that a budget given on the command line has already spent."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def torch_version_ok(version: str = torch.__version__) -> bool:
    found = tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:2])
    return found >= MIN_TORCH


def imports() -> dict:
    """Section a's first part: the versions of Python, PyTorch, CUDA and cuDNN, the devices CUDA sees, and every
    package the check needs (its version, or why it failed to import)."""
    def probe(rows) -> dict:
        out = {}
        for module, dist, why in rows:
            try:
                importlib.import_module(module)
                try:
                    out[module] = {"version": metadata.version(dist), "for": why}
                except metadata.PackageNotFoundError:
                    out[module] = {"version": "?", "for": why}
            except Exception as exc:  # noqa: BLE001 - what failed is the finding
                out[module] = {"missing": f"{type(exc).__name__}: {exc}", "for": why}
        return out

    cuda = torch.cuda.is_available()
    return {"python": platform.python_version(), "torch": torch.__version__,
            "torch_ok": torch_version_ok(), "min_torch": ".".join(map(str, MIN_TORCH)),
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if cuda else None,
            "cuda_available": cuda, "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if cuda else [], "modules": probe(NEEDED), "optional": probe(OPTIONAL)}


def missing(found: dict) -> list[str]:
    return [m for m, row in (found.get("modules") or {}).items() if "missing" in row]


def gpu_check(catalog, *, cpu_only: bool = False, batch: int = 16, bench_steps: int = 20, bench_warmup: int = 3,
              images: int = 1000, jobs=BENCH_TRAIN, root: Path | None = None, demo=None, budget: float | None = None,
              on_progress: Callable[[dict], Any] | None = None) -> dict:
    """The check's sections (SECTIONS) in order, on CUDA (``cpu_only``: a-c on the CPU, d and e skipped).
    ``root``: the workflow folder of section e's rehearsal (None: skipped); ``demo``: the demo-scale catalog of
    section d (None: skipped). ``budget``: wall-clock seconds for all of it: each section gets its share, and what
    an earlier one left; a section out of time stops (OutOfTime) and says so, keeping what it finished; SIGTERM stops
    the whole check the same way. ``on_progress`` gets the report after every section (to write it)."""
    if not cpu_only and not torch.cuda.is_available():
        raise NoCuda("no CUDA device is visible: run it on a GPU node (`tradeoff gpu-check`), or pass --cpu-only to "
                     "run the parts that work on the CPU")
    device = torch.device("cpu" if cpu_only else "cuda")
    t0 = time.perf_counter()
    name = provenance(device)["device"]
    report: dict[str, Any] = {
        "device": name, "cpu_only": cpu_only, "scale": catalog.scale, "ok": False, "budget_s": budget,
        "tolerances": TOLERANCES, "sections": {}, "imports": {}, "methods": {}, "bench_train": [],
        "recalibrated": {}, "bench_eval": {}, "targets": {}, "rehearsal": {}, "bf16_against_fp32": {},
        "seconds": 0.0, "provenance": provenance(device)}

    def a():
        report["imports"] = imports()
        progress()
        check_methods(catalog, device, batch=batch, out=report["methods"])

    def b():
        run_bench_train(catalog, device, steps=bench_steps, warmup=bench_warmup, out_dir=catalog.layout.bench,
                        jobs=jobs, rows=report["bench_train"])

    def c():
        run_bench_eval(catalog, device, images=images, out=report["bench_eval"], ladder=budget is not None)

    def d():
        report["bf16_against_fp32"] = bf16_against_fp32(demo, device)

    def e():
        report["rehearsal"] = rehearse(root, name, images=images)

    skip = {"d": "on CUDA only (--cpu-only)" if cpu_only else
            "not asked for (--no-precision-check), or no config/demo.yaml" if demo is None else None,
            "e": "on CUDA only (--cpu-only)" if cpu_only else
            "not asked for (--no-rehearsal), or no workflow folder" if root is None else None}
    if not skip["e"] and snakemake_missing():
        skip["e"] = ("Snakemake is not installed here: section e needs it (the node's wheelhouse carries it, "
                     "config/node-wheels.txt)")
    bodies = {"a": a, "b": b, "c": c, "d": d, "e": e}

    def progress():
        report["seconds"] = time.perf_counter() - t0
        report["recalibrated"] = recalibrated(report["bench_train"])
        report["targets"] = targets(report["bench_train"], report["bench_eval"], name)
        report["skipped"] = [f"{k}: {v['status']}" + (f" ({v['note']})" if v.get("note") else "")
                             for k, v in report["sections"].items() if v["status"] != "done"]
        report["ok"] = _ok(report)
        if on_progress is not None:
            on_progress(report)

    usable = None if budget is None else max(budget - WRITE_RESERVE, 0.0)
    deadline = None if usable is None else t0 + usable
    carried = 0.0
    previous = signal.getsignal(signal.SIGTERM)

    def terminate(signum, frame):
        raise Terminated()

    main = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    if main:
        signal.signal(signal.SIGTERM, terminate)
    elif budget is not None:
        raise RuntimeError("gpu_check with a budget runs in the main thread (its alarms are signals)")
    try:
        for key, title, share in SECTIONS:
            row = report["sections"][key] = {"title": title, "status": "running"}
            if skip.get(key):
                row.update(status="skipped", note=skip[key])
                continue
            allowance = None
            if deadline is not None:
                left = deadline - time.perf_counter()
                allowance = left if share is None else min(left, share * usable + carried)
                row["allowance_s"] = round(allowance, 1)
                if allowance < 1:
                    row.update(status="skipped", note="no time left in the budget")
                    continue
            start = time.perf_counter()
            try:
                with time_limit(allowance):
                    bodies[key]()
                row["status"] = "done"
            except OutOfTime:
                row.update(status="stopped", note=f"out of its {allowance:.0f} s share of the budget: kept what "
                                                 "it finished")
            except Exception as exc:  # noqa: BLE001 - one section's failure is a finding; the others still run
                row.update(status="error", note=f"{type(exc).__name__}: {exc}")
                row["traceback"] = traceback.format_exc()[-3000:]
            row["seconds"] = round(time.perf_counter() - start, 1)
            if share is not None and usable is not None:
                carried = max(0.0, share * usable + carried - row["seconds"])
            progress()
    except Terminated:
        for row in report["sections"].values():
            if row["status"] == "running":
                row.update(status="stopped", note="the process was terminated (SIGTERM): kept what it finished")
        for key, title, _ in SECTIONS:
            report["sections"].setdefault(key, {"title": title, "status": "skipped",
                                                "note": "not reached: the process was terminated (SIGTERM)"})
        report["terminated"] = True
    if main:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the last write is not interrupted
    try:
        progress()
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    return report


def measured(report: dict) -> bool:
    """Whether any section measured something: a step compared, a bench timed, an attack timed, a run trained in
    both precisions, a rehearsal's epochs. A check whose every section ran out of time, was skipped or failed
    measured nothing, and is no pass."""
    return bool(report["methods"] or report["bench_train"] or (report["bench_eval"] or {}).get("attacks")
                or (report["bf16_against_fp32"] or {}).get("attacks") or (report["rehearsal"] or {}).get("methods"))


def verdict(report: dict) -> str:
    """The check's verdict in words: the report's first line and the console's say the same."""
    if not measured(report):
        said = "NOTHING MEASURED: every section ran out of time, was skipped or failed"
    elif report["ok"]:
        said = "no step comparison finished" if not report["methods"] else "every comparison within its tolerance"
    else:
        said = "NOT OK: a comparison out of its tolerance, a package missing, a section failed or the check stopped"
    short = [k for k, row in (report.get("sections") or {}).items() if row["status"] != "done"]
    return said + (f"; sections not done: {', '.join(short)} (see Sections)" if short else "")


def _ok(report: dict) -> bool:
    """Something measured, every comparison within its tolerance, nothing missing, no section failed, the rehearsal
    passed."""
    if not measured(report):
        return False
    methods = report["methods"]
    ok = all(row[key]["ok"] for row in methods.values()
             for key in ("gpu_vs_cpu", "bf16_vs_fp32", "parallel_vs_serial") if key in row)
    imported = report.get("imports") or {}
    ok = ok and not missing(imported) and imported.get("torch_ok", True)
    ok = ok and "error" not in report["rehearsal"] and not report.get("terminated")
    return ok and not any(row["status"] == "error" for row in report["sections"].values())


def device_slug(device: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")[:60]


def _f(value: Any, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)


def format_report(report: dict) -> str:
    budget = f", budget {report['budget_s']:.0f} s" if report.get("budget_s") else ""
    lines = [f"# gpu-check on {report['device']}", "",
             f"Scale {report['scale']}{' (--cpu-only: the CPU against itself)' if report['cpu_only'] else ''}; "
             f"{verdict(report)}; {report['seconds']:.0f} s{budget}.", ""]
    lines += _section_lines(report.get("sections") or {}) + _import_lines(report.get("imports") or {})
    lines += ["", "## a. One training step per method", "",
              "Tolerances: " + "; ".join(f"{k}: |loss diff| <= {t['rel']:g} x loss + {t['abs']:g}, update cosine >= "
                                         f"{t['cosine']:g}, norms within {t['norm_rel']:g}"
                                         for k, t in report["tolerances"].items()), "",
              "| method | run | GPU vs CPU (loss diff, cosine) | bf16 vs fp32 (loss diff, cosine) | syncs/step | ok |",
              "|---|---|---|---|---:|---|"]
    for name, row in report["methods"].items():
        a, b = row["gpu_vs_cpu"], row["bf16_vs_fp32"]
        ok = a["ok"] and b["ok"] and row.get("parallel_vs_serial", {"ok": True})["ok"]
        lines.append(f"| {name} | {row['run']} | {_f(a['loss_diff'])}, {_f(a['cosine'], '.6f')} | "
                     f"{_f(b['loss_diff'])}, {_f(b['cosine'], '.4f')} | {_f(row['syncs_per_step'], 'd')} | "
                     f"{'yes' if ok else 'NO'} |")
    gen = report["methods"].get("generalist", {}).get("parallel_vs_serial")
    if gen:
        lines += ["", f"Generalist parallel (CUDA streams: {gen['streams']}) vs serial: loss diff {_f(gen['loss_diff'])}, "
                      f"cosine {_f(gen['cosine'], '.7f')}; a step {_f(gen['parallel_step_s'] * 1e3, '.1f')} ms vs "
                      f"{_f(gen['serial_step_s'] * 1e3, '.1f')} ms serial"]
    lines += ["", "## b. bench-train against the plan (the config's runtime settings; of peak: of the precision's "
                  "own peak; planned: `tradeoff plan`'s formula at its assumed fraction of peak)", "",
              "| job | precision | batch | steps (halves differ) | images/s | s/epoch | planned s/epoch | "
              "measured / planned | TFLOP/s | of peak |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["bench_train"]:
        layout = ", channels_last" if r["channels_last"] else ""
        lines.append(f"| {r['label']} ({r['run']}) | {r['precision']}{layout} | {r['batch_size']} | "
                     f"{r.get('steps', '-')} ({_f(r.get('halves_differ'), '.1%')}) | {r['images_per_s']:.0f} | {r['seconds_per_epoch']:.1f} | "
                     f"{_f(r.get('planned_s_per_epoch'), '.1f')} | {_f(r.get('measured_over_planned'), '.2f')} | "
                     f"{r['achieved_tflops']:.1f} | {_f(r['fraction_of_peak'], '.1%')} |")
    cal = report.get("recalibrated") or {}
    if cal:
        lines += ["", f"The plan's constant recalibrated: achieved fraction of peak {_f(cal['measured_fraction'], '.1%')} "
                      f"measured ({cal['benches']} bench(es)) against {cal['assumed_fraction']:.0%} assumed; "
                      f"{cal['how']}."]
    ev = report["bench_eval"]
    lines += ["", f"## c. bench-eval: {ev.get('run', '-')} on up to {ev.get('images', '-')} images, "
                  f"{ev.get('model', '-')}", "",
              "| attack | images | seconds | images/s | minutes per 10,000 |", "|---|---:|---:|---:|---:|"]
    for name, r in (ev.get("attacks") or {}).items():
        lines.append(f"| {name} ({r['type']}) | {r.get('images', ev.get('images'))} | {r['seconds']:.1f} | "
                     f"{r['images_per_s']:.0f} | {r['minutes_per_10k']:.1f} |")
    lines += ["", "## Targets (docs/gpu.md; judged on an H100 only)", "", "| target | goal | measured | met | how |",
              "|---|---:|---:|---|---|"]
    for name, t in report["targets"].items():
        met = "-" if t["met"] is None else ("yes" if t["met"] else "no")
        lines.append(f"| {name} | <= {t['target']:g} | {_f(t['measured'], '.3g')} | {met} | {t['how']} |")
    lines += _precision_lines(report["bf16_against_fp32"]) + _rehearsal_lines(report["rehearsal"])
    return "\n".join(lines) + "\n"


def _section_lines(sections: dict) -> list[str]:
    if not sections:
        return []
    lines = ["## Sections (by value; each with its share of the budget and what earlier ones left)", "",
             "| section | status | seconds | allowed (s) | note |", "|---|---|---:|---:|---|"]
    for key, row in sections.items():
        note = str(row.get("note", "")).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {key}. {row['title']} | {row['status']} | {_f(row.get('seconds'), '.1f')} | "
                     f"{_f(row.get('allowance_s'), '.0f')} | {note} |")
    return lines + [""]


def _import_lines(found: dict) -> list[str]:
    if not found:
        return []
    lines = [f"Python {found['python']}, PyTorch {found['torch']} (at least {found['min_torch']}: "
             f"{'yes' if found['torch_ok'] else 'NO'}), CUDA {found['cuda'] or '-'}, cuDNN {found['cudnn'] or '-'}; "
             f"CUDA devices: {', '.join(found['devices']) or 'none'}.", "",
             "| package | for | version |", "|---|---|---|"]
    for module, row in {**found["modules"], **found["optional"]}.items():
        lines.append(f"| {module} | {row['for']} | {row.get('version') or 'MISSING: ' + row['missing']} |")
    return lines


def _rehearsal_lines(r: dict) -> list[str]:
    lines = ["", f"## e. {REHEARSAL_TARGET} rehearsal at paper shape (Snakemake, {REHEARSAL})", ""]
    if not r:
        return lines + ["Not run (see Sections)."]
    if "skipped" in r:
        return lines + [f"Skipped: {r['skipped']}."]
    lines.append(f"`{r['command']}`: exit {r['returncode']} after {r['seconds']:.0f} s, {r['test_examples']} test "
                 "images, the paper's batch sizes, attacks uncapped.")
    if "error" in r:
        return lines + ["", "```", r["error"], "```"]
    lines += ["", f"Planned on {r['plan_device']} in {r['plan_precision']} ({r['plan_basis']}).", "",
              "| method | run | epochs | batch | measured s/epoch | planned s/epoch | measured / planned |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for m in r["methods"]:
        lines.append(f"| {m['method']} | {m['run']} | {m['epochs']} | {m['batch_size']} | "
                     f"{_f(m['measured_s_per_epoch'], '.2f')} | {_f(m['planned_s_per_epoch'], '.2f')} | "
                     f"{_f(m['measured_over_planned'], '.2f')} |")
    return lines


def _precision_lines(p: dict) -> list[str]:
    lines = ["", "## d. bf16 against fp32 (the same run and seed, trained twice)", ""]
    if not p:
        return lines + ["Not run (see Sections)."]
    if "skipped" in p:
        return lines + [f"Skipped: {p['skipped']}."]
    lines += [f"`{p['run']}` at the {p['scale']} scale, seed {p['seed']}, on {p['examples']} test images; exact "
              "McNemar test of the two models' per-example outcomes.",
              "", "| attack | fp32 | bf16 | p (exact McNemar) |", "|---|---:|---:|---:|"]
    for name in p["attacks"]:
        lines.append(f"| {name} | {100 * p['fp32'][name]:.1f}% | {100 * p['bf16'][name]:.1f}% | "
                     f"{p['p_value'][name]:.3g} |")
    return lines


def write_report(report: dict, paths: tuple[Path, Path]) -> tuple[Path, Path]:
    """The report as JSON and Markdown, each written atomically (a kill mid-write leaves the previous one)."""
    json_path, md_path = paths
    json_path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(json.dumps(report, default=lambda o: None))  # drops the steps' tensors and methods
    atomic_write_text(json_path, json.dumps(data, indent=1) + "\n")
    atomic_write_text(md_path, format_report(report))
    return json_path, md_path
