"""`tradeoff gpu-check`: is the GPU path right, and how fast is it, in one process on one device.

1. Every method: one training step on the GPU against the same step on the CPU (the same initial weights, batch and
   random numbers: the step's random draws are taken on the host from one seeded generator, see ``host_random``),
   in fp32 with TF32 off; then the GPU step in bf16 autocast and channels_last (the `runtime.precision: bf16`
   opt-in) against the GPU step in fp32; Generalist's stream-parallel mode against its serial mode (and their
   speed); and, under CUDA's sync debug mode, how many host-device synchronisations one step makes.
2. `bench-train` of PGD-AT, TRADES and Generalist on ResNet-18 (batch 128 and 512) and PGD-AT on WRN-34-10, in the
   config's runtime settings (precision, channels_last: what the plan prices; tradeoff.pipeline.bench.train.bench_train;
   each result is also written as a bench file, which calibrates `tradeoff plan`).
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
into the scale's bench folder (tradeoff.storage.layout) or ``--out``, after every section, and exits 1 if a
comparison is out of its tolerance, a needed package is missing or a section failed. Without CUDA it refuses in one
line, unless ``--cpu-only``: then the same machinery compares the CPU with itself (every difference must be zero),
and the benches run briefly on the CPU.

This module owns the sections' order, their budget and their signals; each section's work is a module beside it:
``check_imports`` and ``check_steps`` (a), ``check_benches`` (b, c and the targets), ``check_precision`` (d),
``check_rehearsal`` (e); ``check_report`` judges the report and writes it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from tradeoff.pipeline.bench.check_benches import BENCH_TRAIN, recalibrated, run_bench_eval, run_bench_train, targets
from tradeoff.pipeline.bench.check_imports import imports
from tradeoff.pipeline.bench.check_precision import bf16_against_fp32
from tradeoff.pipeline.bench.check_rehearsal import REHEARSAL_TARGET, rehearse, snakemake_missing
from tradeoff.pipeline.bench.check_report import passed
from tradeoff.pipeline.bench.check_steps import TOLERANCES, check_methods
from tradeoff.storage.provenance import provenance


class NoCuda(RuntimeError):
    pass


#: the check's sections, by value: (key, title, share of the budget); the last takes whatever time remains
SECTIONS = (("a", "imports, CUDA, one training step of every method against the CPU", 0.25),
            ("b", "seconds per epoch at paper shape against the plan", 0.35),
            ("c", "PGD-20 and AutoAttack timed", 0.2),
            ("d", "bf16 against fp32 (a demo run trained in both)", 0.2),
            ("e", f"the {REHEARSAL_TARGET} rehearsal through Snakemake", None))
#: seconds of a budget kept back to write the report
WRITE_RESERVE = 3.0


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

    def progress():
        _progress(report, time.perf_counter() - t0)
        if on_progress is not None:
            on_progress(report)

    # each section's work, by key (a: written once its imports are probed, before its steps)
    bodies = {"a": lambda: _imports_and_steps(report, catalog, device, batch, progress),
              "b": lambda: run_bench_train(catalog, device, steps=bench_steps, warmup=bench_warmup,
                                           out_dir=catalog.layout.bench, jobs=jobs, rows=report["bench_train"]),
              "c": lambda: run_bench_eval(catalog, device, images=images, out=report["bench_eval"],
                                          ladder=budget is not None),
              "d": lambda: report.update(bf16_against_fp32=bf16_against_fp32(demo, device)),
              "e": lambda: report.update(rehearsal=rehearse(root, name, images=images))}
    _run_sections(report, bodies, _skipped(cpu_only, demo, root), budget, t0, progress)
    return report


def _imports_and_steps(report: dict, catalog, device: torch.device, batch: int, progress: Callable[[], None]) -> None:
    """Section a: the imports and versions (written at once), then one training step of every method."""
    report["imports"] = imports()
    progress()
    check_methods(catalog, device, batch=batch, out=report["methods"])


def _skipped(cpu_only: bool, demo, root: Path | None) -> dict[str, str | None]:
    """Why sections d and e do not run (None: they do)."""
    skip = {"d": "on CUDA only (--cpu-only)" if cpu_only else
            "not asked for (--no-precision-check), or no config/demo.yaml" if demo is None else None,
            "e": "on CUDA only (--cpu-only)" if cpu_only else
            "not asked for (--no-rehearsal), or no workflow folder" if root is None else None}
    if not skip["e"] and snakemake_missing():
        skip["e"] = ("Snakemake is not installed here: section e needs it (the node's wheelhouse carries it, "
                     "config/node-wheels.txt)")
    return skip


def _progress(report: dict, seconds: float) -> None:
    """What follows from the sections so far: the seconds taken, the plan's constant recalibrated, the targets, the
    sections not done, whether the check passed."""
    report["seconds"] = seconds
    report["recalibrated"] = recalibrated(report["bench_train"])
    report["targets"] = targets(report["bench_train"], report["bench_eval"], report["device"])
    report["skipped"] = [f"{k}: {v['status']}" + (f" ({v['note']})" if v.get("note") else "")
                         for k, v in report["sections"].items() if v["status"] != "done"]
    report["ok"] = passed(report)


def _terminate(signum, frame):
    raise Terminated()


def _run_sections(report: dict, bodies: dict[str, Callable[[], Any]], skip: dict, budget: float | None, t0: float,
                  progress: Callable[[], None]) -> None:
    """Every section (``_each_section``), SIGTERM raising Terminated meanwhile (signals reach the main thread only);
    then the report's last progress, SIGTERM ignored while it is written, and SIGTERM's handler put back."""
    previous = signal.getsignal(signal.SIGTERM)
    main = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    if main:
        signal.signal(signal.SIGTERM, _terminate)
    elif budget is not None:
        raise RuntimeError("gpu_check with a budget runs in the main thread (its alarms are signals)")
    try:
        _each_section(report, bodies, skip, budget, t0, progress)
    except Terminated:
        _mark_terminated(report)
    if main:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the last write is not interrupted
    try:
        progress()
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _each_section(report: dict, bodies: dict[str, Callable[[], Any]], skip: dict, budget: float | None, t0: float,
                  progress: Callable[[], None]) -> None:
    """The sections in SECTIONS' order, each into its row of ``report["sections"]`` and followed by ``progress``:
    skipped (``skip``, or no time left), or run under its allowance: its share of the budget (less WRITE_RESERVE)
    and what earlier ones left, the last section all that is left."""
    usable = None if budget is None else max(budget - WRITE_RESERVE, 0.0)
    deadline = None if usable is None else t0 + usable
    carried = 0.0
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
        _run_section(row, bodies[key], allowance)
        if share is not None and usable is not None:
            carried = max(0.0, share * usable + carried - row["seconds"])
        progress()


def _run_section(row: dict, body: Callable[[], Any], allowance: float | None) -> None:
    """One section's ``body`` under ``allowance`` seconds (None: no limit): done, stopped out of time (keeping what
    it finished) or failed, and its seconds."""
    start = time.perf_counter()
    try:
        with time_limit(allowance):
            body()
        row["status"] = "done"
    except OutOfTime:
        row.update(status="stopped", note=f"out of its {allowance:.0f} s share of the budget: kept what "
                                         "it finished")
    except Exception as exc:  # noqa: BLE001 - one section's failure is a finding; the others still run
        row.update(status="error", note=f"{type(exc).__name__}: {exc}")
        row["traceback"] = traceback.format_exc()[-3000:]
    row["seconds"] = round(time.perf_counter() - start, 1)


def _mark_terminated(report: dict) -> None:
    """The report of a check stopped by SIGTERM: the running section stopped, those not reached skipped."""
    for row in report["sections"].values():
        if row["status"] == "running":
            row.update(status="stopped", note="the process was terminated (SIGTERM): kept what it finished")
    for key, title, _ in SECTIONS:
        report["sections"].setdefault(key, {"title": title, "status": "skipped",
                                            "note": "not reached: the process was terminated (SIGTERM)"})
    report["terminated"] = True
