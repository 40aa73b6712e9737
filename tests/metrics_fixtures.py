"""Metrics and predictions files as an evaluation writes them, for report tests that need no training: the record
is made by the evaluation's own code (tradeoff.evaluate.record) from the catalog's resolved settings, so a report
vouches for it exactly as for a real one."""

from __future__ import annotations

import json
from pathlib import Path

from tradeoff.config import Catalog
from tradeoff.evaluate import record


def outcomes(correct: int, examples: int, *, offset: int = 0) -> str:
    """A per-example correctness string with ``correct`` ones, rotated by ``offset`` (two rows with the same count
    and different offsets disagree on some examples)."""
    bits = ["1"] * correct + ["0"] * (examples - correct)
    offset %= max(examples, 1)
    return "".join(bits[-offset:] + bits[:-offset]) if offset else "".join(bits)


def write_measurement(catalog: Catalog, run_id: str, attack: str, robust: str, *, clean: str | None = None,
                      test_size: int | None = None, **overrides) -> Path:
    """Write the metrics and predictions files of ``run_id`` (its training job) under ``attack`` with the given
    per-example outcomes ('0'/'1' strings; ``clean`` defaults to all correct). ``overrides`` replace fields of the
    metrics record (to make a bad file). Returns the metrics file."""
    train_id = catalog.train_id[run_id]
    spec = catalog.attack_for(attack, run_id)
    n = len(robust)
    clean = clean if clean is not None else "1" * n
    setting = catalog.runs[train_id].get("test_examples")
    meta = {"run": train_id, "spec": catalog.runs[train_id], "selected_epoch": 1}
    context = {"scale": catalog.scale, "model": "0" * 16, "test_examples": setting,
               "test_size": test_size if test_size is not None else (n if setting is None else max(n, 360))}
    metrics = {**record(meta, attack, json.loads(json.dumps(spec)), context), "type": spec["type"],
               "norm": spec.get("norm", "linf"), "eps": spec.get("eps", 0.0),
               "accuracy": robust.count("1") / n, "clean_accuracy": clean.count("1") / n, "examples": n,
               "robust_examples": robust.count("1"), "clean_examples": clean.count("1"), "seed": 0, **overrides}
    path = catalog.layout.metrics(train_id, attack)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(metrics, indent=1))
    predictions = catalog.layout.predictions(train_id, attack)
    predictions.parent.mkdir(parents=True, exist_ok=True)
    predictions.write_text(json.dumps({"run": train_id, "attack": attack, "labels": [i % 10 for i in range(n)],
                                       "clean_correct": clean, "robust_correct": robust}))
    return path


def write_curves(catalog: Catalog, run_id: str, rows: list[dict]) -> Path:
    """A training job's per-epoch curves (CSV), e.g. ``[{"epoch": 1, "seconds": 30.0, "eval_clean": 0.5}]``."""
    path = catalog.layout.curves(catalog.train_id[run_id])
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    path.write_text("\n".join([",".join(fields)] + [",".join(str(r.get(f, "")) for f in fields) for r in rows]) + "\n")
    return path
