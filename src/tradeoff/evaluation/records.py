"""The record format of an evaluation: what its metrics file says (:func:`record`, how the measurement was made, then
:func:`metrics_record`, what it measured), its predictions file (per example: label, clean and robust, as bits) and
how both are written: the fields of how the evaluation went (``RAN``) into the metrics file's sidecar, a suite's
records into one file of each.
"""

from __future__ import annotations

import json
from importlib import metadata

import torch

from tradeoff import attacks
from tradeoff.attacks.loop import COUNTS, Outcome
from tradeoff.core.spec import AttackSpec, spec_digest
from tradeoff.evaluation.load import model_settings
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.storage.layout import METRICS_FORMAT, SUITE_FORMAT, bits
from tradeoff.storage.provenance import write_sidecar


def unbits(s: str) -> torch.Tensor:
    """Per-example outcomes as the files store them (tradeoff.storage.layout.bits) as a bool tensor."""
    return torch.tensor([c == "1" for c in s], dtype=torch.bool)


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


def metrics_record(meta: dict, attack_name: str, spec: AttackSpec, out: Outcome, *, seed: int, batch_size: int,
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


def predictions_record(run: str, attack_name: str, out: Outcome) -> dict:
    return {"run": run, "attack": attack_name, "labels": out.labels.tolist(),
            "clean_correct": bits(out.clean_correct), "robust_correct": bits(out.robust_correct)}


# what a metrics record holds of how its evaluation went rather than of what it measured: the clock's (seconds,
# images/s), the job's history (batches resumed, each shard's seconds) and the machine's (library versions,
# provenance). The metrics file (a DVC output) holds the rest, the same bytes at every faithful rebuild; these go into
# its sidecar (tradeoff.storage.provenance), and tradeoff.evaluation.evaluate.evaluate() returns the whole record
RAN = ("seconds", "images_per_s", "resumed_batches", "shard_seconds", "libraries", "provenance")


def _split(metrics: dict) -> tuple[dict, dict]:
    """(what a metrics file holds, what its sidecar holds) of a whole record."""
    return {k: v for k, v in metrics.items() if k not in RAN}, {k: metrics[k] for k in RAN if k in metrics}


def write_metrics(path, metrics: dict) -> None:
    """An attack's metrics file and its sidecar."""
    measured, ran = _split(metrics)
    write_json(path, measured, indent=1)
    write_sidecar(path, ran)


def write_suite(path, model_id: str | None, metrics: dict[str, dict]) -> None:
    """A suite's metrics file (every attack's record) and its sidecar (every attack's RAN fields)."""
    split = {name: _split(record) for name, record in metrics.items()}
    write_json(path, {"format": SUITE_FORMAT, "run": model_id,
                      "evaluations": {name: measured for name, (measured, _) in split.items()}}, indent=1)
    write_sidecar(path, {"evaluations": {name: ran for name, (_, ran) in split.items()}})


def write_json(path, obj: dict, indent: int | None = None) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent, default=float) + "\n")
