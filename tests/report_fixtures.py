"""The files that tables and figures read, written for tests without training or evaluating: metrics records,
per-example predictions, training curves and analysis JSON. Every test that fakes such a file writes it here, so
that what a complete record holds is decided in one place.

A metrics record is what ``tradeoff.evaluation.records`` writes (run, attack, its spec, accuracy, clean accuracy, the
examples and how many of them stayed robust, seed, dataset, ...), plus the run's architecture and the scale;
``accuracy`` is ``robust_examples / examples`` exactly, so an accuracy must be a whole number of examples.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tradeoff.storage import curves as live
from tradeoff.storage.layout import SUITE_FORMAT
from tradeoff.storage.provenance import write_sidecar

PROVENANCE = {"git_commit": "0" * 40, "versions": {"python": "3", "torch": "2"}, "device": "cpu", "host": "test"}


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def metrics_path(catalog, run: str, attack: str) -> Path:
    """The file that holds ``run``'s metrics under ``attack``: its own, or its run's suite (eval_unit: run)."""
    return catalog.metrics_file(catalog.train_id[run], attack)


def outcomes(correct: int, examples: int, *, offset: int = 0) -> str:
    """A per-example correctness string with ``correct`` ones, rotated by ``offset`` (two rows with the same count
    and different offsets disagree on some examples)."""
    bits = ["1"] * correct + ["0"] * (examples - correct)
    offset %= max(examples, 1)
    return "".join(bits[-offset:] + bits[:-offset]) if offset else "".join(bits)


def _bits(values) -> str:
    return values if isinstance(values, str) else "".join("1" if v else "0" for v in values)


def write_measurement(catalog, run_id: str, attack_name: str, robust, /, *, clean=None, labels: list[int] | None = None,
                      test_size: int | None = None, **overrides) -> Path:
    """Write the metrics and predictions files of ``run`` (its training job) under ``attack`` from per-example
    outcomes (a '0'/'1' string or booleans; ``clean`` defaults to all correct), the record made by the evaluation's
    own code (tradeoff.evaluation.records.record) from the catalog's resolved settings, so that a report vouches for it as for
    a real one. ``overrides`` replace fields of the metrics record (to make a bad file). Returns the metrics file."""
    from tradeoff.attacks.loop import COUNTS
    from tradeoff.evaluation.records import record

    run, attack = run_id, attack_name  # positional only: `run` and `attack` may be overridden record fields
    train_id = catalog.train_id[run]
    resolved = catalog.attack_for(attack, run)
    spec = json.loads(json.dumps(resolved.as_dict()))  # its JSON form, as a metrics file holds it
    robust = _bits(robust)
    n = len(robust)
    clean = _bits(clean) if clean is not None else "1" * n
    setting = catalog.runs[train_id].test_examples
    meta = {"run": train_id, "spec": catalog.runs[train_id].as_dict(), "selected_epoch": 1}  # as a model.pt has it
    context = {"scale": catalog.scale, "model": "0" * 16, "test_examples": setting,
               "test_size": test_size if test_size is not None else (n if setting is None else max(n, 360))}
    metrics = {**record(meta, attack, resolved, context), "type": spec["type"], "norm": spec.get("norm", "linf"),
               "eps": float(spec.get("eps", 0.0)), "params": {k: v for k, v in spec.items()
                                                               if k not in ("type", "norm", "eps")},
               "accuracy": robust.count("1") / n, "clean_accuracy": clean.count("1") / n, "examples": n,
               "robust_examples": robust.count("1"), "clean_examples": clean.count("1"), "seed": 0,
               "batch_size": 500, "seconds": 1.0, "images_per_s": float(n), "precision": "fp32",
               "invalid": dict.fromkeys(COUNTS, 0),
               **({} if spec["type"] == "clean" else {"bound": {"probes": [], "whole_range": False, "ruled_out": 0,
                                                                "accuracy_bound": 1.0, "robust_despite": []}}),
               "resumed_batches": 0, "libraries": {}, "provenance": PROVENANCE, **overrides}
    labels = list(labels) if labels is not None else [k % 10 for k in range(n)]
    assert len(labels) == n
    predictions = {"run": train_id, "attack": attack, "labels": labels, "clean_correct": clean,
                   "robust_correct": robust}
    if catalog.unit_of(attack) != attack:  # runtime.eval_unit: run: the attack's entry in its run's suite files
        metrics = _suite_with(catalog.metrics_file(train_id, attack), train_id, attack, metrics)
        predictions = _suite_with(catalog.predictions_file(train_id, attack), train_id, attack, predictions)
    _write(catalog.predictions_file(train_id, attack), json.dumps(predictions) + "\n")
    return _write(metrics_path(catalog, run, attack), json.dumps(metrics, indent=1) + "\n")


def _suite_with(path: Path, run: str, attack: str, entry: dict) -> dict:
    """The suite file of a run (SUITE_FORMAT, as evaluate.evaluate writes a Suite) with one evaluation set."""
    suite = json.loads(path.read_text()) if path.exists() else {"format": SUITE_FORMAT, "run": run,
                                                                "evaluations": {}}
    suite["evaluations"][attack] = entry
    return suite


def scale_examples(catalog, run: str, examples: int | None = None) -> int:
    """How many test examples an evaluation of ``run`` has at this scale (the scale's test_examples, else
    ``examples``, else 1000)."""
    return catalog.runs[catalog.train_id[run]].test_examples or examples or 1000


def write_metrics(catalog, run: str, attack: str, accuracy: float, *, examples: int | None = None,
                  clean_accuracy: float | None = None, **overrides) -> Path:
    """Write ``run``'s metrics (and predictions) for ``attack`` at about ``accuracy`` (a fraction in [0, 1]), on the
    scale's number of test examples: the nearest whole number of them; rows disagree on which examples."""
    n = scale_examples(catalog, run, examples)
    offset = int(hashlib.sha256(f"{run}/{attack}".encode()).hexdigest()[:6], 16)
    clean = None if clean_accuracy is None else outcomes(round(clean_accuracy * n), n, offset=offset)
    return write_measurement(catalog, run, attack, outcomes(round(accuracy * n), n, offset=offset), clean=clean,
                             **overrides)


def write_predictions(catalog, run: str, attack: str, labels: list[int], robust_correct,
                      clean_correct=None, **overrides) -> Path:
    """Write ``run``'s per-example outcomes under ``attack`` (true labels, and per example whether it was classified
    correctly under the attack and clean, default: wherever it was under the attack), with the metrics they give."""
    robust = _bits(robust_correct)
    clean = robust if clean_correct is None else _bits(clean_correct)
    return write_measurement(catalog, run, attack, robust, clean=clean, labels=labels, **overrides)


def write_curves(catalog, run: str, rows: list[dict]) -> Path:
    """Write ``run``'s training curves: one dict per epoch (``epoch`` and any curve columns; accuracies as
    fractions), with the trainer's logger; what the clock and the machine give (``seconds``, ``device``, ...) into
    the sidecar of its model, as the trainer writes it."""
    folder = catalog.layout.curves(catalog.train_id[run])
    live.CurveLog(folder, rows).finish()
    if any(set(row) & set(live.CLOCKED) for row in rows):
        write_sidecar(catalog.layout.model(catalog.train_id[run]), {"run": run, "epochs": live.clocked(rows)})
    return folder


def write_analysis(catalog, name: str, data: dict) -> Path:
    """Write a figure target's analysis JSON (what its `analysis` job writes)."""
    return _write(catalog.layout.analysis(name), json.dumps(data) + "\n")


# ------------------------------------------------------------------------- whole targets, plausible numbers


def fraction(*parts, low: float = 0.0, high: float = 1.0, examples: int = 1000) -> float:
    """A deterministic pseudo-random accuracy in [low, high] for a (run, attack, ...) key, a whole number of
    ``examples``."""
    h = int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return round((low + (high - low) * h) * examples) / examples


def fill_target(catalog, name: str, *, missing: set[tuple[str, str]] = frozenset(), same: float | None = None,
                epochs: int = 6, num_classes: int = 10, examples: int = 200, records: dict | None = None) -> None:
    """Metrics (and, for per_class, predictions; for curves, curves) for every (row, column) of a figure or table
    target: clean accuracies high, robust ones lower. ``missing``: (run, attack) pairs left out; ``same``: every
    robust accuracy this value (points that coincide, as at small scales); ``records``: {run: fields of its metrics
    records} (a selected epoch and a mechanism, say)."""
    target = catalog.targets[name]
    for row in target.rows:
        for run in catalog.row_runs(row.run):
            for column, attack in target.columns.items():
                for job in catalog.column_jobs(attack) if attack not in ("mean", "train:minutes") else []:
                    if (run, job) in missing:
                        continue
                    clean = catalog.attack_for(job, run).type == "clean"
                    acc = fraction(run, job, low=0.5 if clean else 0.0, high=0.98 if clean else 0.6,
                                   examples=examples)
                    if same is not None and not clean:
                        acc = same
                    own = dict((records or {}).get(run, {}))
                    if catalog.attack_for(job, run).type == "corruptions":  # NROB: the mean over its corruptions
                        n = scale_examples(catalog, run, examples)
                        own["corruptions"] = {"fog": round(acc * n) / n}
                    write_metrics(catalog, run, job, acc, examples=examples, **own)
                    if target.plot == "per_class":
                        labels = [k % num_classes for k in range(examples)]
                        write_predictions(catalog, run, job, labels,
                                          [fraction(run, job, k) < acc for k in range(examples)], **own)
            if target.plot == "curves":
                rows = []
                for epoch in range(1, epochs + 1):
                    values = {c: fraction(run, c, epoch, low=0.1, high=0.95) for c in target.curve_columns}
                    rows.append({"epoch": epoch, "seconds": 10.0 + epoch, **values})
                write_curves(catalog, run, rows)


def grid_analysis(catalog, name: str, *, shown: int = 8, size: int = 8, channels: int = 1) -> dict:
    """A disagreement_grid analysis of a `grid` target (tradeoff.analysis.disagreement): ``shown`` images per panel."""
    from tradeoff.analysis import disagreement

    target = catalog.targets[name]
    keys = [r.key for r in target.rows]
    shape = (size, size) if channels == 1 else (size, size, channels)

    def image(seed: int) -> list:
        values = [fraction(seed, k) for k in range(size * size * channels)]
        if channels == 1:
            return [values[i * size:(i + 1) * size] for i in range(size)]
        return [[values[(i * size + j) * channels:(i * size + j + 1) * channels] for j in range(size)]
                for i in range(size)]

    items = [{"index": i, "label": i % 10, "class": str(i % 10), "predictions": {k: (i + j) % 10 for j, k in
                                                                                 enumerate(keys)},
              "image": image(i), "adversarial_image": image(i + 100)} for i in range(shown)]
    assert len(shape) in (2, 3)
    return {"analysis": "disagreement_grid", "classes": [str(k) for k in range(10)], "examples": 500,
            "models": [{"key": r.key, "label": r.key if r.label is None else r.label, "run": r.run} for r in target.rows],
            "attack": target.analysis.get("attack", "pgd20"),
            "condition": disagreement.condition(target.analysis),
            "panels": {"natural": {"matches": shown, "shown": [{k: v for k, v in it.items() if k != "adversarial_image"}
                                                              for it in items]},
                       "adversarial": {"matches": shown, "shown": items}}}


def tsne_analysis(catalog, name: str, *, epochs=(75, 90, 100), points: int = 60) -> dict:
    """A learner_tsne analysis of a `tsne` target: a panel per epoch per row, two sources of ``points`` points."""
    target = catalog.targets[name]
    panels = []
    for row in target.rows:
        for epoch in epochs:
            sources = {s: {"x": [fraction(s, epoch, "x", i, low=-30, high=30) for i in range(points)],
                           "y": [fraction(s, epoch, "y", i, low=-30, high=30) for i in range(points)],
                           "labels": [i % 10 for i in range(points)], "fooled": "01" * (points // 2)}
                       for s in ("nt", "at")}
            panels.append({"key": row.key, "run": row.run, "epoch": epoch, "same_source_nn": 0.5,
                           "sources": sources})
    return {"analysis": "learner_tsne", "attack": target.analysis.get("attack", "pgd20"), "examples": points,
            "embed": "images", "panels": panels}


def caat_synthetic_analysis(*, deltas=(0.05, 0.1, 0.15, 0.2, 0.25, 0.3), points: int = 40) -> dict:
    """A caat_synthetic analysis (tradeoff.analysis.caat_synthetic) with plausible numbers."""
    per_delta = [{"delta": d, "clean_acc": 0.95 - 0.1 * d, "adv_acc": 0.9 - 2.5 * d, "mu": 0.5 * d * d,
                  "bound": 1000 * d * d, "bound_eps": 15 * d * d, "norm_gc": 0.35 + 0.1 * d, "norm_ga": 0.3 + 2.5 * d,
                  "one_minus_cos": 4 * d} for d in deltas]
    kinds = ["clean"] * points + ["adversarial"] * points
    tsne = {"delta": deltas[-1], "points": [[fraction("x", i, low=-20, high=20), fraction("y", i, low=-20, high=20)]
                                            for i in range(2 * points)], "kind": kinds}
    return {"analysis": "caat_synthetic", "dataset": "digits", "classes": [1, 2], "train_examples": 288,
            "test_examples": 71, "input_dim": 64, "lam": 0.5, "epochs": 20, "per_delta": per_delta, "tsne": tsne}
