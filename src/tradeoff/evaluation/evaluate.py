"""Evaluation jobs: accuracy of a model under its attacks, per example, always in fp32 and eval mode (through the
attack loop, tradeoff.attacks.loop), into its metrics and predictions files (tradeoff.evaluation.records).

One entry point, :func:`evaluate`, takes an :class:`Evaluation` (the model, the attacks and their files, the
settings): several attacks of one model are evaluated in one process, the model and test set loaded once
(:class:`Loaded`), each attack with its own resume state (tradeoff.evaluation.state) and its own files, or one shard
of one attack (its partial result, merged by tradeoff.evaluation.shards), or every attack into one file (a suite).
Untargeted attacks only attack examples the model classifies correctly: the others count as not robust; each
attack's record holds its bound (tradeoff.evaluation.bound).
An entry of type ``corruptions`` is not an attack: it measures NROB on its corruption dataset (Tiny-ImageNet-C, or
digits-c at the smaller scales) with :func:`tradeoff.data.corruptions.nrob`, and writes the same two files.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tradeoff import attacks, data
from tradeoff.attacks.loop import run_attack
from tradeoff.core.spec import AttackSpec, spec_digest
from tradeoff.evaluation.bound import bound_record, constant_probes, whole_range
from tradeoff.evaluation.load import ModelSource, load_model, model_settings
from tradeoff.evaluation.records import (
    metrics_record,
    predictions_record,
    record,
    write_json,
    write_metrics,
    write_suite,
)
from tradeoff.evaluation.shards import SHARD_FORMAT, shard_range
from tradeoff.evaluation.state import EvalState, state_key
from tradeoff.storage.atomic import sha256_file
from tradeoff.storage.layout import SUITE_FORMAT, bits
from tradeoff.storage.provenance import provenance

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttackJob:
    """One attack of an evaluation: its name, resolved spec and files (None: not written)."""
    attack_name: str
    spec: AttackSpec
    metrics_out: Any = None
    predictions_out: Any = None
    state_path: Any = None  # the resume state (tradeoff.evaluation.state)
    done_path: Any = None  # in a suite: the finished attack, kept until the suite's files are written


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (0-based) of ``count``: whole batches of the global grid, its partial result written to ``out``
    for :func:`tradeoff.evaluation.shards.merge_shards`."""
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
            write_json(job.done_path, {"key": key, **kept})
        else:
            log.info("%s / %s: already evaluated (%s)", ev.model.model_id, job.attack_name, job.done_path)
        metrics[job.attack_name], predictions[job.attack_name] = kept["metrics"], kept["predictions"]
    write_suite(ev.suite.metrics_out, ev.model.model_id, metrics)
    write_json(ev.suite.predictions_out, {"format": SUITE_FORMAT, "run": ev.model.model_id, "evaluations": predictions})
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
            write_metrics(job.metrics_out, metrics)
        if job.predictions_out is not None:
            write_json(job.predictions_out, predictions)
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
                       **predictions_record(meta["run"], attack_name, out), **checked}
            if shard.out is not None:
                write_json(shard.out, partial)
            result = partial
        else:
            bound = {} if spec.clean else {"bound": bound_record(probes, ruled.cpu(), whole, out.labels,
                                                                 out.clean_correct, out.robust_correct)}
            result = (metrics_record(meta, attack_name, spec, out, seed=seed, batch_size=batch_size,
                                     provenance=provenance(device), context=self.context,
                                     extra={"resumed_batches": state.resumed_batches if state is not None else 0,
                                            **checked, **bound}),
                      predictions_record(meta["run"], attack_name, out))
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
