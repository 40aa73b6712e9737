"""Section e of the GPU node check (:mod:`tradeoff.pipeline.bench.gpucheck`): the ``REHEARSAL_TARGET`` rehearsal at
paper shape through Snakemake (``--configfile config/rehearsal.yaml`` and an overlay of its own: CUDA, the paper's
batch sizes, attacks uncapped, at least 1,000 test images), and per method the measured seconds per epoch beside what
`tradeoff plan` predicts for the same runs (``rehearse``); skipped, saying so, while config/rehearsal.yaml does not
exist.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from tradeoff.config import load_catalog
from tradeoff.pipeline.costs import PEAK_TFLOPS, JobSizes, device_key
from tradeoff.storage.provenance import training_epochs

#: the rehearsal scale (issue 23: every paper-scale setting, amounts capped), its target here, and what this check
#: undoes of its caps: the paper's batch sizes and its attacks at full strength (null: each run's own setting)
REHEARSAL, REHEARSAL_TARGET = "config/rehearsal.yaml", "table1a"
REHEARSAL_UNCAPPED = {"batch_size": None, "max_attack_steps": None, "train_attack_steps": None,
                      "autoattack_caps": None}


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

