"""Evaluation: accuracy of a model under one attack, per example, always in fp32 and eval mode.

Examples are split into fixed batches of the global index space; batch b's attack randomness is seeded with
(seed, b), so a result does not depend on which process evaluates which batch: a shard is a contiguous run of
whole batches, and merging the shards gives exactly the unsharded result.
Untargeted attacks only attack examples the model classifies correctly: the others count as not robust.

A job keeps its partial results in a state file (``results/work/eval/<run>/<attack>[.shard-K-of-N].state``),
written atomically after every batch and, for AutoAttack, after every component of the ensemble. A job that
is killed resumes from it and gives the same answer as an uninterrupted one; the file is removed when the
job's outputs are written, and ignored (recomputed) if it belongs to another model, attack or setting.
An entry of type ``corruptions`` is not an attack: it measures NROB on its corruption dataset (Tiny-ImageNet-C, or
digits-c at the smaller scales) with :func:`tradeoff.data.corruptions.nrob`, and writes the same two files.
One entry point, :func:`evaluate`, takes an :class:`Evaluation` (the model, the attacks and their files, the
settings): several attacks of one model are evaluated in one process, the model and test set loaded once, each attack
with its own state file and its own files, or one shard of one attack, or every attack into one file (a suite).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tradeoff import attacks
from tradeoff.attacks.base import INVALID, add_counts, classified
from tradeoff.storage.atomic import sha256_file
from tradeoff.core.progress import Bar
from tradeoff.core.errors import UserError
from tradeoff.storage.layout import METRICS_FORMAT, SUITE_FORMAT, bits
from tradeoff.storage.provenance import provenance, write_sidecar
from tradeoff.core.spec import AttackSpec, ExternalSpec, RunSpec, json_digest, model_spec, spec_digest
from tradeoff.evaluation.load import ModelSource, load_model
from tradeoff import data
from importlib import metadata
from tradeoff.storage.atomic import atomic_write_text

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    labels: torch.Tensor          # int64, per example
    clean_correct: torch.Tensor   # bool, per example
    robust_correct: torch.Tensor  # bool, per example
    seconds: float
    #: for ensembles: examples still robust after each component (AutoAttack's trace), summed over batches
    breakdown: dict[str, int] = field(default_factory=dict)
    #: for an attack with sanity checks of its own (Attack.sanity_checked): their warnings
    checks: list[str] = field(default_factory=list)
    #: the judge's counts (COUNTS): invalid adversarial examples (counted as not broken) and non-finite logits
    invalid: dict[str, int] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return int(self.robust_correct.sum()) / len(self.labels) if len(self.labels) else float("nan")

    @property
    def clean_accuracy(self) -> float:
        return int(self.clean_correct.sum()) / len(self.labels) if len(self.labels) else float("nan")


#: what an evaluation counts of its examples' validity, summed over batches and shards into the metrics file's
#: ``invalid``: the attack's (tradeoff.attacks.base.INVALID: adversarial examples that break the threat model, counted
#: as not broken, and valid ones with non-finite logits, counted as broken) and the clean pass's non-finite logits
#: (``non_finite_logits_clean``: those examples count as misclassified)
COUNTS = (*INVALID, "non_finite_logits_clean")


def batch_seed(seed: int, batch_index: int) -> int:
    return (int(seed) * 1_000_003 + int(batch_index)) % (2**63 - 1)


def unbits(s: str) -> torch.Tensor:
    return torch.tensor([c == "1" for c in s], dtype=torch.bool)


# ------------------------------------------------------------------------------------------ resume state


class EvalState:
    """Partial results of one evaluation job: finished batches (clean and robust bits, seconds) and the saved
    progress of the batch in hand. ``key`` identifies what is computed (model, attack, seed, batches); a file
    with another key, or one that cannot be read, is ignored and overwritten."""

    def __init__(self, path: str | Path, key: str):
        self.path, self.key = Path(path), key
        self.data: dict[str, Any] = {"key": key, "batches": {}, "partial": None}
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable evaluation state %s: %s", self.path, exc)
            else:
                if data.get("key") == key:
                    self.data = data
                    log.info("resuming from %s: %d batch(es) done%s", self.path, len(data["batches"]),
                             ", one in progress" if data.get("partial") else "")
                else:
                    log.warning("ignoring evaluation state %s: it belongs to another model or setting", self.path)
        self._loaded = len(self.data["batches"])

    @property
    def resumed_batches(self) -> int:
        """Batches that were already done when this state was loaded."""
        return self._loaded

    def done(self, batch: int) -> dict | None:
        return self.data["batches"].get(str(batch))

    def finish(self, batch: int, clean: torch.Tensor, robust: torch.Tensor, seconds: float,
               breakdown: dict[str, int], checks: list[str] | None = None,
               invalid: dict[str, int] | None = None) -> None:
        self.data["batches"][str(batch)] = {"clean": bits(clean), "robust": bits(robust), "seconds": seconds,
                                            "breakdown": breakdown, **({"checks": checks} if checks else {}),
                                            "invalid": dict(invalid or {})}
        self.data["partial"] = None
        self._write()

    def progress(self, batch: int) -> "_BatchProgress":
        return _BatchProgress(self, batch)

    def _write(self) -> None:
        atomic_write_text(self.path, json.dumps(self.data) + "\n")

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass
class _BatchProgress:
    state: EvalState
    batch: int

    def load(self) -> dict | None:
        partial = self.state.data.get("partial")
        return partial["data"] if partial and partial["batch"] == self.batch else None

    def save(self, data: dict) -> None:
        self.state.data["partial"] = {"batch": self.batch, "data": data}
        self.state._write()


# ------------------------------------------------------------------------------------------- evaluation


def run_attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec, *, seed: int, batch_size: int,
               first_batch: int = 0, state: EvalState | None = None, progress: str | None = None,
               whole: bool = True) -> Outcome:
    """Evaluate ``model`` on (x, y) under a resolved attack spec. ``first_batch`` is the global index of the
    first batch (for shards); ``state`` keeps partial results so that an interrupted call can resume.
    ``progress``: a name (the attack job's) to show the progress under (tradeoff.core.progress: batches done, robust so
    far, images/s, ETA) and the attack's stages'; None shows nothing. An attack with sanity checks of its own
    (``Attack.sanity_checked``: AutoAttack and its components) reports their warnings per batch (Outcome.checks),
    and when (x, y) is the ``whole`` evaluation (not a shard), those of its checks of the whole evaluation."""
    was_training = model.training
    model.eval()
    kind = attacks.ATTACKS[spec.type]
    t0 = time.perf_counter()
    tally = _Tally(state, kind.sanity_checked)
    n_batches, timed = math.ceil(len(x) / batch_size), {"images": 0, "seconds": 0.0}
    bar = None
    if progress is not None:
        resumed = sum(state.done(first_batch + b) is not None for b in range(n_batches)) if state is not None else 0
        bar = Bar(n_batches, progress, unit="batch", initial=resumed)
    try:
        with torch.autocast(device_type=x.device.type, enabled=False):  # fp32, whatever the caller's context
            for b, start in enumerate(range(0, len(x), batch_size)):
                gb = first_batch + b
                if tally.restore(gb, x.device):
                    continue
                tb = time.perf_counter()
                xb, yb = x[start:start + batch_size], y[start:start + batch_size]
                with torch.no_grad():
                    clean, finite = classified(model(xb), yb)  # non-finite logits name no class: misclassified
                attack = attacks.from_spec(spec, model, seed=batch_seed(seed, gb))
                attack.prepare(xb, yb, first=gb == 0, show_progress=progress is not None)
                robust = clean.clone()
                todo = clean if attack.skips_misclassified else torch.ones_like(clean)
                judged = {}
                if not spec.clean and todo.any():
                    saving = state.progress(gb) if state is not None else None
                    robust[todo] = attack.robust(xb[todo], yb[todo], saving)
                    judged = attack.invalid()
                if attack.skips_misclassified:
                    robust &= clean
                counts = add_counts(judged, {"non_finite_logits_clean": int((~finite).sum())})
                _say_invalid(progress or spec.type, gb, counts)
                tally.finish(gb, clean, robust, time.perf_counter() - tb, attack.trace(), attack.warnings(), counts)
                if progress is not None:
                    timed["images"] += len(xb)
                    timed["seconds"] += time.perf_counter() - tb
                    bar.update(postfix=_robust_so_far(tally.robust, timed))
        if whole:
            tally.add_warnings(kind.whole_warnings(int(sum(int(c.sum()) for c in tally.clean)), tally.breakdown,
                                                   len(x)))
    finally:
        model.train(was_training)
        if bar is not None:
            bar.close()
    cat = lambda parts: torch.cat(parts).cpu() if parts else torch.zeros(0, dtype=torch.bool)  # noqa: E731
    return Outcome(y.cpu(), cat(tally.clean), cat(tally.robust), time.perf_counter() - t0 + tally.resumed_seconds,
                   tally.breakdown, tally.warnings if tally.checked else [], tally.invalid)


def _say_invalid(name: str, batch: int, counts: dict[str, int]) -> None:
    """Log a batch's invalid adversarial examples and non-finite logits (the metrics file counts them)."""
    if not any(counts.get(k) for k in COUNTS):
        return
    log.warning("%s, batch %d: %d invalid adversarial example(s) counted as not broken (non-finite %d, outside the "
                "budget %d, outside [0, 1] %d); non-finite logits on %d valid adversarial and %d clean example(s), "
                "counted as misclassified", name, batch, counts.get("invalid_examples", 0), counts.get("non_finite", 0),
                counts.get("outside_budget", 0), counts.get("outside_range", 0), counts.get("non_finite_logits", 0),
                counts.get("non_finite_logits_clean", 0))


class _Tally:
    """What the batches of one run_attack call add up to, restored from the resume state or computed (``finish``,
    which also writes the batch into the state): per-example bits, seconds, the attack's trace and its warnings."""

    def __init__(self, state: EvalState | None, checked: bool):
        self.state, self.checked = state, checked
        self.clean: list[torch.Tensor] = []
        self.robust: list[torch.Tensor] = []
        self.breakdown: dict[str, int] = {}
        self.warnings: list[str] = []
        self.invalid: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self.resumed_seconds = 0.0

    def restore(self, batch: int, device: torch.device) -> bool:
        """Take a batch that the resume state holds; False if it holds none."""
        saved = self.state.done(batch) if self.state is not None else None
        if saved is None:
            return False
        self.clean.append(unbits(saved["clean"]).to(device))
        self.robust.append(unbits(saved["robust"]).to(device))
        self.resumed_seconds += saved["seconds"]
        self._add_trace(saved["breakdown"])
        self.add_warnings(saved.get("checks", []) if self.checked else [], log_them=True)
        self.invalid = add_counts(self.invalid, saved.get("invalid"))
        return True

    def finish(self, batch: int, clean: torch.Tensor, robust: torch.Tensor, seconds: float, trace: dict[str, int],
               warnings: list[str], invalid: dict[str, int] | None = None) -> None:
        self._add_trace(trace)
        self.clean.append(clean)
        self.robust.append(robust)
        self.add_warnings(warnings)
        self.invalid = add_counts(self.invalid, invalid)
        if self.state is not None:
            self.state.finish(batch, clean, robust, seconds, trace, warnings if self.checked else None, invalid)

    def add_warnings(self, texts: list[str], log_them: bool = False) -> None:
        for text in texts:
            if text not in self.warnings:
                self.warnings.append(text)
                if log_them:  # a resumed batch's warnings, said again in this job's log
                    log.warning("sanity check of a resumed batch: %s", text)

    def _add_trace(self, trace: dict[str, int]) -> None:
        for k, v in trace.items():
            self.breakdown[k] = self.breakdown.get(k, 0) + v


def _robust_so_far(robust_parts: list, timed: dict) -> str:
    """An evaluation's progress besides its batches: robust so far, images/s of this process."""
    seen = sum(len(p) for p in robust_parts)
    robust = int(sum(int(p.sum()) for p in robust_parts))
    rate = timed["images"] / timed["seconds"] if timed["seconds"] > 0 else 0.0
    return f"{robust} of {seen} images robust so far ({100.0 * robust / max(seen, 1):.1f}%), {rate:.1f} images/s"


def accuracy_under(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec, *, seed: int,
                   batch_size: int) -> float:
    return run_attack(model, x, y, spec, seed=seed, batch_size=batch_size).accuracy


# ------------------------------------------------------------------------------------------------ the bound
# What no attack can fail to find, and so no robust accuracy may exceed: an image of another class within the budget.
# The evaluation looks at a few such images that need no search (constant images, each a forward pass; at a budget
# that reaches the whole image range, every test image the model classifies correctly) and records, per attack,
# which were reachable, the bound they give and the examples the attack left robust although one of them was within
# their budget: there the attack failed, and the report marks the cell (tradeoff.report.tables).

#: the grey levels of the constant images probed (0.5 is the mid-grey image, within L-inf 0.5 of every image in
#: [0, 1]^d and within L2 eps of x where ||x - 0.5||_2 <= eps)
PROBE_LEVELS = tuple(k / 10 for k in range(11))
L2_SLACK = 1e-6  # an L2 distance within this relative rounding of eps does not count as reachable


def whole_range(spec: AttackSpec, x: torch.Tensor) -> bool:
    """Does the budget reach the whole image range (L-inf 1, L2 sqrt(d)): every image of [0, 1]^d from every image?"""
    reach = 1.0 if str(spec.norm) == "linf" else math.sqrt(x[0].numel())
    return float(spec.eps) >= reach


def constant_probes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec) -> tuple[list[dict],
                                                                                                  torch.Tensor]:
    """The constant images (PROBE_LEVELS) the model classifies, one forward pass: ([{level, class (None for
    non-finite logits), reachable (the examples within the budget of it)}], per example: is one of another class
    than its label within its budget)."""
    eps, norm = float(spec.eps), str(spec.norm)
    levels = torch.tensor(PROBE_LEVELS, dtype=x.dtype, device=x.device)
    images = levels.view(-1, *([1] * (x.dim() - 1))) * torch.ones_like(x[:1])
    with torch.no_grad(), torch.autocast(device_type=x.device.type, enabled=False):
        logits = model(images)
    finite = torch.isfinite(logits).all(1)
    classes = logits.argmax(1)
    flat = x.flatten(1)
    if norm == "linf":  # max_j |x_j - c|: exact in floating point at the levels that matter (0, 0.5, 1)
        reach = torch.maximum(levels[None] - flat.amin(1)[:, None], flat.amax(1)[:, None] - levels[None]) <= eps
    else:
        reach = torch.stack([(flat - c).norm(p=2, dim=1) for c in levels], 1) <= eps * (1 - L2_SLACK)
    other = reach & finite[None] & (classes[None] != y[:, None])
    counts, found, named = reach.sum(0).tolist(), finite.tolist(), classes.tolist()
    probes = [{"level": level, "class": int(c) if ok else None, "reachable": int(k)}
              for level, c, ok, k in zip(PROBE_LEVELS, named, found, counts)]
    return probes, other.any(1)


def bound_record(probes: list[dict], ruled: torch.Tensor, whole: bool, labels: torch.Tensor, clean: torch.Tensor,
                 robust: torch.Tensor) -> dict:
    """An evaluation's ``bound``: the constant images within the budget of some example (``probes``: level, class,
    how many examples reach it), whether the budget reaches the whole range (then every test image the model
    classifies correctly is reachable from every example), how many examples an image of another class within their
    budget rules out, the highest robust accuracy left possible, and the examples robust despite it (their indices
    among the evaluated examples): each one an attack failure."""
    ruled = ruled.clone()
    if whole:  # any image is reachable: a correctly classified test image of another class breaks the example
        named = torch.unique(labels[clean])
        ruled |= (named[None] != labels[:, None]).any(1) if len(named) else torch.zeros_like(ruled)
    n = len(labels)
    despite = (robust & ruled).nonzero().flatten().tolist()
    return {"probes": [p for p in probes if p["reachable"]], "whole_range": bool(whole),
            "ruled_out": int(ruled.sum()), "accuracy_bound": (n - int(ruled.sum())) / n if n else float("nan"),
            "robust_despite": despite}


# ---------------------------------------------------------------------------------------------- shards


def shard_range(n: int, batch_size: int, shard: int, shards: int) -> tuple[int, int, int]:
    """(first global batch, first example, end example) of shard ``shard`` (0-based) of ``shards``: shards are
    contiguous runs of whole batches of the global grid, as even as possible (some are empty when there are
    fewer batches than shards)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} out of range for {shards} shards")
    n_batches = math.ceil(n / batch_size)
    lo, hi = shard * n_batches // shards, (shard + 1) * n_batches // shards
    return lo, min(lo * batch_size, n), min(hi * batch_size, n)


def state_key(digest: str, spec: AttackSpec, seed: int, batch_size: int, n: int, first_batch: int) -> str:
    payload = {"model": digest, "spec": spec.as_dict(), "seed": seed, "batch_size": batch_size, "n": n,
               "first_batch": first_batch}
    return json_digest(payload, default=str)


def model_settings(meta: dict) -> RunSpec | ExternalSpec:
    """The settings of a loaded model, typed: its metadata's ``spec`` (the JSON form that a model.pt, or an external
    model's load, records) as a run's or an external model's."""
    return model_spec(meta["spec"])


def _load(source: ModelSource, data_root, device: str, test_examples: int | None):
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model, meta = load_model(source, device)
    ds = data.load(model_settings(meta).dataset, data_root)
    x, y = data.subset(ds.x_test, ds.y_test, test_examples)
    model, x = channels_last(model, x.to(device))
    return model, meta, x, y.to(device), device, len(ds.y_test)


def channels_last(model: nn.Module, x: torch.Tensor) -> tuple[nn.Module, torch.Tensor]:
    """Images and conv weights in the channels_last memory format: the same fp32 maths, about twice as fast
    for the conv nets here on the CPU (oneDNN) and the usual layout on the GPU."""
    if x.dim() != 4:
        return model, x
    return model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)


def _library_versions(spec: AttackSpec) -> dict:
    if spec.type in ("autoattack", *attacks.autoattack.COMPONENTS):
        return {"pyautoattack": metadata.version("pyautoattack")}
    return {}


def record(meta: dict, attack_name: str, spec: AttackSpec, context: dict) -> dict:
    """How a measurement was made, first in its metrics file: what a report checks against the config of the cell
    it fills (tradeoff.report.records) before it shows the number. ``context``: the scale, the model file's
    digest, the test examples setting and the test set's size."""
    settings = model_settings(meta)
    out = {"format": METRICS_FORMAT, "run": meta["run"], "attack": attack_name, "scale": context["scale"],
           "dataset": settings.dataset, "arch": settings.arch, "paper_dataset": settings.paper_dataset,
           "paper_arch": settings.paper_arch, "spec_digest": spec_digest(settings), "model": context["model"],
           "spec": spec.as_dict(), "test_examples": context["test_examples"], "test_size": context["test_size"],
           "selected_epoch": meta["selected_epoch"], "mechanism": meta.get("mechanism"),
           # which split chose that epoch, on how many images, and how many were held out of training
           # (tradeoff.core.spec.Selection.record); None in a model file written before they were recorded, or external
           **{key: meta.get(key) for key in ("selection_split", "selection_images", "validation_images")}}
    if meta.get("external") is not None:
        # an external model (tradeoff.evaluation.external): which file it measured (its SHA-256) and how it was read
        out["external"] = meta["external"]
    return out


def _metrics(meta: dict, attack_name: str, spec: AttackSpec, out: Outcome, *, seed: int, batch_size: int,
             provenance: dict, context: dict, extra: dict | None = None) -> dict:
    n = len(out.labels)
    metrics = {
        **record(meta, attack_name, spec, context),
        "type": spec.type, "norm": str(spec.norm), "eps": float(spec.eps),
        "params": {k: v for k, v in spec.as_dict().items() if k not in ("type", "norm", "eps")},
        "accuracy": out.accuracy, "clean_accuracy": out.clean_accuracy, "examples": n,
        "robust_examples": int(out.robust_correct.sum()), "clean_examples": int(out.clean_correct.sum()),
        "seed": seed, "batch_size": batch_size,
        "seconds": out.seconds, "images_per_s": n / out.seconds if out.seconds else None,
        "precision": "fp32", "invalid": {k: int(out.invalid.get(k, 0)) for k in COUNTS},
    }
    if out.breakdown:
        # AutoAttack's trace: accuracy after each component of the ensemble (the last one is the AA accuracy)
        metrics["breakdown"] = {k: v / n for k, v in out.breakdown.items()}
    metrics.update(extra or {})
    metrics["libraries"] = _library_versions(spec)
    metrics["provenance"] = provenance
    return metrics


def _predictions(run: str, attack_name: str, out: Outcome) -> dict:
    return {"run": run, "attack": attack_name, "labels": out.labels.tolist(),
            "clean_correct": bits(out.clean_correct), "robust_correct": bits(out.robust_correct)}


# what a metrics record holds of how its evaluation went rather than of what it measured: the clock's (seconds,
# images/s), the job's history (batches resumed, each shard's seconds) and the machine's (library versions,
# provenance). The metrics file (a DVC output) holds the rest, the same bytes at every faithful rebuild; these go into
# its sidecar (tradeoff.storage.provenance), and evaluate() returns the whole record
RAN = ("seconds", "images_per_s", "resumed_batches", "shard_seconds", "libraries", "provenance")


def _split(metrics: dict) -> tuple[dict, dict]:
    """(what a metrics file holds, what its sidecar holds) of a whole record."""
    return {k: v for k, v in metrics.items() if k not in RAN}, {k: metrics[k] for k in RAN if k in metrics}


def _write_metrics(path, metrics: dict) -> None:
    """An attack's metrics file and its sidecar."""
    measured, ran = _split(metrics)
    _write_json(path, measured, indent=1)
    write_sidecar(path, ran)


def _write_suite(path, model_id: str | None, metrics: dict[str, dict]) -> None:
    """A suite's metrics file (every attack's record) and its sidecar (every attack's RAN fields)."""
    split = {name: _split(record) for name, record in metrics.items()}
    _write_json(path, {"format": SUITE_FORMAT, "run": model_id,
                       "evaluations": {name: measured for name, (measured, _) in split.items()}}, indent=1)
    write_sidecar(path, {"evaluations": {name: ran for name, (_, ran) in split.items()}})


def _write_json(path, obj: dict, indent: int | None = None) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent, default=float) + "\n")


@dataclass(frozen=True)
class AttackJob:
    """One attack of an evaluation: its name, resolved spec and files (None: not written)."""
    attack_name: str
    spec: AttackSpec
    metrics_out: Any = None
    predictions_out: Any = None
    state_path: Any = None  # the resume state (see the module docstring)
    done_path: Any = None  # in a suite: the finished attack, kept until the suite's files are written


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (0-based) of ``count``: whole batches of the global grid, its partial result written to ``out``
    for :func:`merge_shards`."""
    index: int
    count: int
    out: Any = None


@dataclass(frozen=True)
class Suite:
    """Every attack of an evaluation into ONE metrics and ONE predictions file (runtime.eval_unit: run)."""
    metrics_out: Any
    predictions_out: Any


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation process computes: a model's (``model``: a run's model.pt, an external checkpoint or a
    user's model file, tradeoff.evaluation.load) on its test set under each attack of ``jobs``, in turn, model and
    test set loaded once; the model's id (``model.model_id``) is a suite file's ``run`` and an external model's id in
    its records. ``scale``: the scale the metrics record. Every attack writes the same files, with the same numbers,
    whatever else the process evaluates: batches are seeded by (seed, global batch index). ``shard`` (one job): only
    that shard, its partial result; ``suite``: every job's records into one file of each."""
    model: ModelSource
    data_root: Any
    jobs: tuple[AttackJob, ...] = ()
    device: str = "auto"
    batch_size: int = 500
    seed: int = 0
    test_examples: int | None = None
    scale: str | None = None
    shard: Shard | None = None
    suite: Suite | None = None


def evaluate(ev: Evaluation) -> list[dict]:
    """Evaluate, and return in the order of ``ev.jobs`` each attack's metrics (written to its ``metrics_out`` and its
    predictions to its ``predictions_out`` where given), or with ``ev.shard`` the shard's partial result (written to
    ``ev.shard.out``), or with ``ev.suite`` each attack's record of the suite's file."""
    if ev.shard is not None and (len(ev.jobs) != 1 or ev.suite is not None):
        raise ValueError("a shard is of one attack's evaluation, in its own files")
    loaded = Loaded(ev)
    if ev.suite is not None:
        return _suite(loaded, ev)
    return [loaded.evaluate(job) for job in ev.jobs]


def _suite(loaded: "Loaded", ev: Evaluation) -> list[dict]:
    """Every attack of ``ev`` into one metrics and one predictions file: ``{"format", "run", "evaluations": {attack:
    record}}``, each record exactly what the attack's own evaluation writes. Each attack resumes from its state file,
    and a finished one is kept in its ``done_path`` until the files are written, so a job killed after some attacks
    redoes none of them."""
    metrics, predictions = {}, {}
    for job in ev.jobs:
        key = state_key(loaded.state_digest, job.spec, ev.seed, ev.batch_size, len(loaded.x), 0)
        kept = _read_done(Path(job.done_path), key)
        if kept is None:
            kept = dict(zip(("metrics", "predictions"), loaded.compute(job)))
            _write_json(job.done_path, {"key": key, **kept})
        else:
            log.info("%s / %s: already evaluated (%s)", ev.model.model_id, job.attack_name, job.done_path)
        metrics[job.attack_name], predictions[job.attack_name] = kept["metrics"], kept["predictions"]
    _write_suite(ev.suite.metrics_out, ev.model.model_id, metrics)
    _write_json(ev.suite.predictions_out, {"format": SUITE_FORMAT, "run": ev.model.model_id, "evaluations": predictions})
    for job in ev.jobs:
        Path(job.done_path).unlink(missing_ok=True)
    return [metrics[job.attack_name] for job in ev.jobs]


def _read_done(path: Path, key: str) -> dict | None:
    """A finished attack of a suite kept in ``path`` (see _suite), if it is of this model and setting."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


class Loaded:
    """An evaluation's model and its test set, on the device, ready for any number of attacks (``model``, ``meta``,
    ``x``, ``y``, ``device``: what the audit reads too)."""

    def __init__(self, ev: Evaluation):
        self.ev = ev
        self.model, self.meta, self.x, self.y, self.device, self.test_size = _load(
            ev.model, ev.data_root, ev.device, ev.test_examples)
        self._digest: str | None = None

    @property
    def context(self) -> dict:
        """What a metrics record says of where its numbers come from besides the model's own metadata."""
        return {"scale": self.ev.scale, "model": self.digest, "test_examples": self.ev.test_examples,
                "test_size": self.test_size}

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = sha256_file(self.ev.model.path)[:16]
        return self._digest

    @property
    def state_digest(self) -> str:
        """What the model is, for a resume state: its file's digest, and an external model's settings (another
        normalisation of one file is another model)."""
        if self.meta.get("external") is None:
            return self.digest
        return f"{self.digest}-{spec_digest(model_settings(self.meta))}"

    def evaluate(self, job: AttackJob) -> dict:
        """One attack's metrics (written to ``job.metrics_out`` and its predictions to ``job.predictions_out``
        when given), or with the evaluation's shard the shard's partial result (written to its ``out``)."""
        if self.ev.shard is not None:
            return self._shard(job, self.ev.shard)
        metrics, predictions = self.compute(job)
        if job.metrics_out is not None:
            _write_metrics(job.metrics_out, metrics)
        if job.predictions_out is not None:
            _write_json(job.predictions_out, predictions)
        return metrics

    def compute(self, job: AttackJob) -> tuple[dict, dict]:
        """One attack's (or one NROB's) metrics record and per-example predictions, resuming from and then removing
        ``job.state_path``."""
        if job.spec.corruptions:
            return self._corruptions(job)
        return self._shard(job, None)

    def _shard(self, job: AttackJob, shard: Shard | None) -> dict | tuple[dict, dict]:
        model, meta, x, y, device = self.model, self.meta, self.x, self.y, self.device
        spec, attack_name, seed, batch_size = job.spec, job.attack_name, self.ev.seed, self.ev.batch_size
        if spec.corruptions:
            raise ValueError(f"{attack_name}: an evaluation on corrupted images is not sharded")
        n = len(x)
        first_batch, start, stop = (0, 0, n) if shard is None else shard_range(n, batch_size, shard.index,
                                                                               shard.count)
        state = None
        if job.state_path is not None:
            key = state_key(self.state_digest, spec, seed, batch_size, n, first_batch)
            state = EvalState(job.state_path, key)
        out = run_attack(model, x[start:stop], y[start:stop], spec, seed=seed, batch_size=batch_size,
                         first_batch=first_batch, state=state, progress=attack_name, whole=shard is None)
        checked = {"checks": out.checks} if attacks.ATTACKS[spec.type].sanity_checked else {}  # their warnings
        probes, ruled = ([], None) if spec.clean else constant_probes(model, x[start:stop], y[start:stop], spec)
        whole = not spec.clean and whole_range(spec, x)
        if shard is not None:
            partial = {"format": SHARD_FORMAT, "run": meta["run"], "attack": attack_name,
                       "spec": spec.as_dict(),
                       "seed": seed, "batch_size": batch_size, "examples_total": n, "shard": shard.index,
                       "shards": shard.count, "first_batch": first_batch, "start": start, "stop": stop,
                       "seconds": out.seconds, "breakdown": out.breakdown, "meta": meta,
                       "context": self.context, "provenance": provenance(device), "invalid": out.invalid,
                       **({} if spec.clean else {"probes": probes, "ruled_out": bits(ruled), "whole_range": whole}),
                       **_predictions(meta["run"], attack_name, out), **checked}
            if shard.out is not None:
                _write_json(shard.out, partial)
            result = partial
        else:
            bound = {} if spec.clean else {"bound": bound_record(probes, ruled.cpu(), whole, out.labels,
                                                                 out.clean_correct, out.robust_correct)}
            result = (_metrics(meta, attack_name, spec, out, seed=seed, batch_size=batch_size,
                               provenance=provenance(device), context=self.context,
                               extra={"resumed_batches": state.resumed_batches if state is not None else 0,
                                      **checked, **bound}),
                      _predictions(meta["run"], attack_name, out))
        if state is not None:
            state.remove()
        return result

    def _corruptions(self, job: AttackJob) -> tuple[dict, dict]:
        """NROB on the entry's corruption dataset (``tradeoff.data.corruptions``): the metrics file's accuracy is the mean
        over corruptions of the mean over severities, and it records both; the predictions file has, per set,
        whether each corrupted image is classified correctly, and the images' labels. Deterministic (no attack, no
        seed), and quick enough to need no resume state."""
        from tradeoff.data import corruptions

        meta, spec, model, batch_size = self.meta, job.spec, self.model, self.ev.batch_size
        t0 = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            clean = corruptions.correct(model, self.x, self.y, batch_size=batch_size, device=self.device)
            result = corruptions.nrob(model, self.ev.data_root, dataset=spec.dataset, batch_size=batch_size,
                                      device=self.device, examples=self.ev.test_examples)
        finally:
            model.train(was_training)
        seconds = time.perf_counter() - t0
        n = len(result["labels"])
        images = n * sum(len(accs) for accs in result["severities"].values())
        metrics = {
            **record(meta, job.attack_name, spec, self.context), "type": spec.type,
            "params": {k: v for k, v in spec.as_dict().items() if k != "type"},
            "accuracy": result["nrob"], "clean_accuracy": int(clean.sum()) / len(clean), "examples": n,
            "corrupted_images": images, "corruptions": result["corruptions"], "severities": result["severities"],
            "batch_size": batch_size, "seconds": seconds, "images_per_s": images / seconds if seconds else None,
            "corruption_dataset": spec.dataset, "precision": "fp32", "libraries": {},
            "provenance": provenance(self.device),
        }
        return metrics, {"run": meta["run"], "attack": job.attack_name, "labels": result["labels"],
                         "corrupted_correct": result["correct"]}


class MergeError(UserError, ValueError):
    pass


SHARD_FORMAT = "tradeoff-eval-shard/3"


def merge_shards(paths: list[str | Path], *, metrics_out=None, predictions_out=None) -> dict:
    """Merge the partial results of all shards of one (run, attack) into the metrics and predictions files an
    unsharded job writes; refuses shards that do not tile the example space exactly or disagree on settings."""
    parts = sorted((json.loads(Path(p).read_text()) for p in paths), key=lambda d: d["shard"])
    if not parts:
        raise MergeError("no shard files to merge")
    first = parts[0]
    old = [p["shard"] for p in parts if p.get("format") != SHARD_FORMAT]
    if old:
        raise MergeError(f"shard(s) {old} are not in the format {SHARD_FORMAT!r} (written by an older tradeoff, "
                         "without the counts of invalid examples or the bound): re-run them")
    same = ("run", "attack", "spec", "seed", "batch_size", "examples_total", "shards", "context")
    for part in parts[1:]:
        for k in same:
            if json.dumps(part[k], sort_keys=True) != json.dumps(first[k], sort_keys=True):
                raise MergeError(f"shard {part['shard']} differs from shard {first['shard']} in {k!r}")
    if [p["shard"] for p in parts] != list(range(first["shards"])):
        raise MergeError(f"expected shards 0..{first['shards'] - 1}, got {[p['shard'] for p in parts]}")
    position = 0
    for part in parts:
        if part["start"] != position:
            raise MergeError(f"shard {part['shard']} starts at example {part['start']}, expected {position}")
        position = part["stop"]
    if position != first["examples_total"]:
        raise MergeError(f"shards cover {position} of {first['examples_total']} examples")
    labels = torch.tensor([v for p in parts for v in p["labels"]], dtype=torch.long)
    breakdown: dict[str, int] = {}
    for p in parts:
        for k, v in p["breakdown"].items():
            breakdown[k] = breakdown.get(k, 0) + v
    invalid: dict[str, int] = dict.fromkeys(COUNTS, 0)
    for p in parts:
        invalid = add_counts(invalid, p["invalid"])
    out = Outcome(labels, unbits("".join(p["clean_correct"] for p in parts)),
                  unbits("".join(p["robust_correct"] for p in parts)), sum(p["seconds"] for p in parts), breakdown,
                  invalid=invalid)
    checked = {}
    spec = AttackSpec.from_dict(first["spec"])
    if not spec.clean:  # the constant images each shard probed, over all the examples
        probes = [{**p, "reachable": sum(q["probes"][i]["reachable"] for q in parts)}
                  for i, p in enumerate(first["probes"])]
        checked["bound"] = bound_record(probes, unbits("".join(p["ruled_out"] for p in parts)),
                                        first["whole_range"], labels, out.clean_correct, out.robust_correct)
    kind = attacks.ATTACKS[spec.type]
    if kind.sanity_checked:  # the shards' warnings, then the checks of the whole evaluation
        warnings = list(dict.fromkeys(text for p in parts for text in p.get("checks", [])))
        whole = kind.whole_warnings(int(out.clean_correct.sum()), breakdown, len(labels))
        checked["checks"] = warnings + [text for text in whole if text not in warnings]
    metrics = _metrics(first["meta"], first["attack"], spec, out, seed=first["seed"],
                       batch_size=first["batch_size"], provenance=first["provenance"], context=first["context"],
                       extra={"shards": first["shards"], "shard_seconds": [p["seconds"] for p in parts], **checked})
    if metrics_out is not None:
        _write_metrics(metrics_out, metrics)
    if predictions_out is not None:
        _write_json(predictions_out, _predictions(first["run"], first["attack"], out))
    return metrics
