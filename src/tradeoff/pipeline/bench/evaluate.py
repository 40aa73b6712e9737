"""``tradeoff bench-eval``: time the evaluation suite on one checkpoint, images/s per attack.

Each attack is evaluated exactly as an evaluation job evaluates it (``run_attack``: fp32, eval mode, the
seeded batch grid, clean-correct examples only), on the run's test set, and timed. With ``workers`` > 1 the
attacks run in that many processes at once (longest first), as Snakemake runs evaluation jobs side by side;
the report gives each attack's own seconds and images/s, their sum (one worker's total) and the wall time
of the whole suite. The JSON goes to results/bench/eval-<device>-<run>.json.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch

from tradeoff import config as cfg
from tradeoff.attacks.loop import run_attack
from tradeoff.evaluation.evaluate import channels_last
from tradeoff.evaluation.load import RunModel, load_model, model_settings
from tradeoff.storage.provenance import provenance

# rough cost order of attack types, so that the longest jobs start first
COST_ORDER = ["autoattack", "square", "fab-t", "fab", "apgd-t", "t-pgd", "apgd-dlr", "apgd-ce", "pgd", "cw",
              "pgd-dlr", "mim", "fgsm", "clean"]

_CACHE: dict[str, Any] = {}


def _time_attack(job: dict) -> dict:
    """Run in a worker: load (once per process) the model and test set, evaluate one attack, time it."""
    from tradeoff.data import load_run_data

    torch.set_num_threads(job["threads"])
    key = json.dumps([job["checkpoint"], job["device"], job["test_examples"]])
    if _CACHE.get("key") != key:
        model, meta = load_model(RunModel(Path(job["checkpoint"])), job["device"])
        settings = model_settings(meta).replace(test_examples=job["test_examples"])
        ds = load_run_data(settings, job["data_root"])
        model, x = channels_last(model, ds.x_test.to(job["device"]))
        _CACHE.update(key=key, model=model, x=x, y=ds.y_test.to(job["device"]))
    model, x, y = _CACHE["model"], _CACHE["x"], _CACHE["y"]
    if job["device"] == "cuda":
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    out = run_attack(model, x, y, job["spec"], seed=0, batch_size=job["batch_size"])
    if job["device"] == "cuda":
        torch.cuda.synchronize()
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    return {"attack": job["attack"], "type": job["spec"].type, "seconds": seconds, "cpu_seconds": cpu_seconds,
            "images_per_s": len(x) / seconds, "examples": len(x), "accuracy": out.accuracy,
            "clean_accuracy": out.clean_accuracy, "attacked": int(out.clean_correct.sum())}


def bench_eval(catalog: cfg.Catalog, run_id: str, *, checkpoint: str | Path | None = None, target: str = "table1a",
               attacks: list[str] | None = None, workers: int = 1, threads: int = 1, device: str = "auto",
               out_dir: str | Path | None = None) -> dict:
    train_id = catalog.train_id[run_id]
    checkpoint = Path(checkpoint or catalog.layout.model(train_id))
    if not checkpoint.exists():
        raise cfg.ConfigError(f"bench-eval: no checkpoint {checkpoint}; train the run first or pass --checkpoint")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    names = attacks or list(dict.fromkeys(catalog.targets[target].columns.values()))
    # only attacks are timed here; NROB (an evaluation on corrupted images) is not one
    names = [name for name in names
             if not (cfg.split_budget(name)[0] in catalog.attacks and catalog.attacks[cfg.split_budget(name)[0]].corruptions)]
    if not names:
        raise cfg.ConfigError(f"bench-eval: target {target!r} has no columns; name --attacks")
    specs = {name: catalog.attack_for(name, run_id) for name in names}
    base = {"checkpoint": str(checkpoint), "device": device, "threads": threads,
            "test_examples": catalog.runs[run_id].test_examples, "data_root": str(catalog.data_root),
            "batch_size": catalog.runtime_settings.eval_batch_size}
    rank = {kind: i for i, kind in enumerate(COST_ORDER)}
    jobs = sorted(({**base, "attack": n, "spec": specs[n]} for n in names),
                  key=lambda j: rank.get(j["spec"].type, 0))
    t0 = time.perf_counter()
    if workers <= 1:
        rows = [_time_attack(job) for job in jobs]
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            rows = list(pool.map(_time_attack, jobs))
    wall = time.perf_counter() - t0
    by_name = {row["attack"]: row for row in rows}
    result = {"run": run_id, "checkpoint": str(checkpoint), "device": device, "workers": workers,
              "threads_per_worker": threads, "examples": rows[0]["examples"] if rows else 0,
              "batch_size": base["batch_size"], "attacks": {n: by_name[n] for n in names},
              "sum_seconds": sum(r["seconds"] for r in rows), "wall_seconds": wall,
              "sum_cpu_seconds": sum(r["cpu_seconds"] for r in rows),
              # on an idle machine: the CPU seconds of the attacks, longest first, on `workers` cores
              "idle_wall_estimate": lpt_makespan([r["cpu_seconds"] for r in rows], workers)
              if device == "cpu" and threads == 1 else None,
              "load_average": _load_average(),
              "provenance": provenance(device)}
    if out_dir is not None:
        slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
        path = Path(out_dir) / f"eval-{slug}-{train_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1) + "\n")
        result["path"] = str(path)
    return result


def lpt_makespan(durations: list[float], workers: int) -> float:
    """Longest-processing-time-first makespan of independent jobs on ``workers`` identical machines."""
    loads = [0.0] * max(1, workers)
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += d
    return max(loads)


def _load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def format_bench_eval(result: dict) -> str:
    lines = [f"{result['run']} on {result['device']} ({result['workers']} worker(s) x "
             f"{result['threads_per_worker']} thread(s)), {result['examples']} test images", "",
             "| attack | type | seconds | CPU seconds | images/s | accuracy |", "|---|---|---:|---:|---:|---:|"]
    for name, row in result["attacks"].items():
        lines.append(f"| {name} | {row['type']} | {row['seconds']:.1f} | {row['cpu_seconds']:.1f} | "
                     f"{row['images_per_s']:.1f} | {100 * row['accuracy']:.2f} |")
    lines += ["", f"sum of attack times: {result['sum_seconds']:.1f} s ({result['sum_cpu_seconds']:.1f} CPU s); "
                  f"wall time of the suite: {result['wall_seconds']:.1f} s (load average {result['load_average']})"]
    if result.get("idle_wall_estimate") is not None:
        lines.append(f"on {result['workers']} idle core(s) (CPU seconds, longest first): "
                     f"{result['idle_wall_estimate']:.1f} s")
    if "path" in result:
        lines.append(f"-> {result['path']}")
    return "\n".join(lines)
