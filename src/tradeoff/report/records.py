"""Reading a measurement for a report, and vouching for it: a table or figure shows a number only after its
metrics file (and, for an accuracy, its predictions file) has been checked against the resolved configuration of
the cell it fills. Anything else stops the report with one line naming the file and what is wrong.

A metrics file records how it was made (``tradeoff.evaluation.records``): the run (the training job) and the scale, the
dataset and architecture, the digest of the run's resolved settings, the attack's resolved settings, the test
examples, the counts. An external model's (the config's ``external:``) records its settings' digest and the SHA-256
of the checkpoint file it measured, which must be the file the config names (or the digest it pins). Each must agree with what the catalog resolves for the cell now: a file of another scale,
another run, other attack settings or another test set is refused, never shown.

Also the failed checks of the audits written (:func:`failed_checks`, the summary's list; tradeoff.audit writes them).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from tradeoff.config import CORRUPTIONS_TYPE, Catalog, spec_digest
from tradeoff.core.errors import UserError
from tradeoff.storage import curves as live
from tradeoff.storage.layout import METRICS_FORMAT, SUITE_FORMAT, Layout
from tradeoff.storage.provenance import SidecarError, read_sidecar, training_epochs

# every metrics file has these; an accuracy's file also the counts
REQUIRED = ("format", "run", "attack", "scale", "dataset", "arch", "spec_digest", "spec", "test_examples",
            "test_size", "examples", "accuracy")
COUNTED = ("robust_examples", "clean_accuracy", "clean_examples", "invalid")
#: an attack's record (not a clean one's) also holds the bound it is checked against (tradeoff.evaluation.bound)
BOUND = ("probes", "whole_range", "ruled_out", "accuracy_bound", "robust_despite")


class ReportError(UserError, ValueError):
    """A file a report would read cannot be vouched for; the message names the file and the problem."""


@dataclass(frozen=True)
class Measurement:
    """One verified measurement of one training job under one evaluation."""

    metrics_path: Path
    accuracy: float              # fraction (NROB: the mean over corruptions)
    examples: int
    correct: int | None          # examples robust (correct under the attack); None for NROB
    robust_bits: str | None      # per-example correctness ('0'/'1'), from the predictions file; None for NROB
    record: dict
    labels: tuple[int, ...] | None = None   # per example, its class (the predictions file's); None for NROB


def _fail(path: Path, what: str) -> ReportError:
    return ReportError(f"{path}: {what}")


@functools.lru_cache(maxsize=4096)
def _read_json(path: Path, mtime_ns: int) -> dict:
    try:
        text = path.read_text()
    except OSError as exc:
        raise _fail(path, f"cannot be read ({exc.strerror or exc})") from None
    if not text.strip():
        raise _fail(path, "is empty (a truncated write?); re-run its evaluation")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _fail(path, f"is not valid JSON ({exc}); re-run its evaluation") from None
    if not isinstance(data, dict):
        raise _fail(path, "is not a JSON object")
    return data


def read_json(path: Path) -> dict:
    """A JSON object from a file, or ReportError naming the file (missing, empty, truncated, not JSON)."""
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise _fail(path, "does not exist") from None
    return _read_json(path, mtime)


def _number(path: Path, record: dict, key: str, *, integer: bool = False) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(path, f"field {key!r} is {value!r}, not a finite number")
    if integer and value != int(value):
        raise _fail(path, f"field {key!r} is {value!r}, not a whole count")
    return value


def _fraction(path: Path, record: dict, key: str) -> float:
    value = _number(path, record, key)
    if not 0.0 <= value <= 1.0:
        raise _fail(path, f"field {key!r} is {value!r}, outside [0, 1] (an accuracy is a fraction)")
    return value


def _agree(path: Path, field_name: str, found, expected, what: str) -> None:
    if found != expected:
        raise _fail(path, f"field {field_name!r} is {found!r} but the config gives {expected!r} ({what}); the file "
                          "was made by another run, scale or setting: re-run its evaluation")


def _spec_difference(found, expected) -> str:
    if not isinstance(found, dict):
        return f"{found!r} instead of {expected!r}"
    keys = sorted(set(found) | set(expected))
    diffs = [f"{k} {found.get(k)!r} in the file, {expected.get(k)!r} in the config"
             for k in keys if found.get(k) != expected.get(k)]
    return "; ".join(diffs)


def expected_examples(record_size: int, setting: int | None) -> int:
    return record_size if setting is None else min(int(setting), record_size)


def verify(catalog: Catalog, run_id: str, attack: str, path: Path, record: dict) -> Measurement:
    """Check a metrics record against the resolved config of the cell (run ``run_id``, evaluation ``attack``)."""
    train_id = catalog.train_id[run_id]
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        hint = ("written by an older tradeoff: re-run its evaluation" if record.get("format") != METRICS_FORMAT
                else "re-run its evaluation")
        raise _fail(path, f"missing field(s) {missing} ({hint})")
    _agree(path, "format", record["format"], METRICS_FORMAT, "the metrics format this report reads")
    run = catalog.model_spec(train_id)
    _agree(path, "scale", record["scale"], catalog.scale, "the scale this report is made at")
    _agree(path, "run", record["run"], train_id, "the training job (or external model) of this cell")
    _agree(path, "attack", record["attack"], attack, "the evaluation of this column")
    _agree(path, "dataset", record["dataset"], run.dataset, "the model's dataset at this scale")
    _agree(path, "arch", record["arch"], run.arch, "the model's architecture at this scale")
    if catalog.is_external(train_id):
        _verify_external(catalog, train_id, path, record)
        _agree(path, "spec_digest", record["spec_digest"], spec_digest(run),
               "the digest of the external model's settings: layout, normalisation, test examples")
    else:
        if record.get("external") is not None:
            raise _fail(path, "is the record of an external model's evaluation, not of a trained run's; re-run its "
                              "evaluation")
        _agree(path, "spec_digest", record["spec_digest"], spec_digest(run),
               "the digest of the run's resolved settings")
    expected_spec = json.loads(json.dumps(catalog.attack_for(attack, run_id).as_dict()))
    if record["spec"] != expected_spec:
        raise _fail(path, f"field 'spec' (the attack's settings) disagrees with the config: "
                          f"{_spec_difference(record['spec'], expected_spec)}; re-run its evaluation")
    _agree(path, "test_examples", record["test_examples"], run.test_examples, "the test examples setting")
    size = int(_number(path, record, "test_size", integer=True))
    examples = int(_number(path, record, "examples", integer=True))
    if examples <= 0:
        raise _fail(path, f"field 'examples' is {examples}: no test example was evaluated")
    _agree(path, "examples", examples, expected_examples(size, run.test_examples),
           "the number of test examples of this scale")
    accuracy = _fraction(path, record, "accuracy")
    if expected_spec.get("type") == CORRUPTIONS_TYPE:
        return _verify_corruptions(path, record, accuracy, examples)
    missing = [k for k in COUNTED if k not in record]
    if missing:
        raise _fail(path, f"missing field(s) {missing}")
    robust = int(_number(path, record, "robust_examples", integer=True))
    clean = int(_number(path, record, "clean_examples", integer=True))
    clean_accuracy = _fraction(path, record, "clean_accuracy")
    for name, count, fraction in (("robust_examples", robust, accuracy), ("clean_examples", clean, clean_accuracy)):
        if not 0 <= count <= examples:
            raise _fail(path, f"field {name!r} is {count}, outside 0..{examples}")
        if abs(fraction * examples - count) > 1e-6 * examples:
            raise _fail(path, f"field {name!r} ({count} of {examples}) disagrees with the accuracy {fraction!r}")
    if robust > clean:
        raise _fail(path, f"{robust} examples robust but only {clean} correct without attack")
    predictions_path = catalog.predictions_file(train_id, attack)
    predictions = _entry(catalog, predictions_path, read_json(predictions_path), attack)
    bits = predictions.get("robust_correct")
    if not isinstance(bits, str) or set(bits) - {"0", "1"} or len(bits) != examples:
        raise _fail(predictions_path, f"field 'robust_correct' is not a string of {examples} '0'/'1' per-example "
                                      "outcomes")
    if bits.count("1") != robust or predictions.get("run") != train_id or predictions.get("attack") != attack:
        raise _fail(predictions_path, f"does not belong to {path} (its run, attack or robust count differ); re-run "
                                      "the evaluation")
    labels = predictions.get("labels")
    if not isinstance(labels, list) or len(labels) != examples or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in labels):
        raise _fail(predictions_path, f"field 'labels' is not a list of {examples} classes")
    _verify_checks(path, record, expected_spec, bits)
    return Measurement(path, accuracy, examples, robust, bits, record, tuple(labels))


def _verify_checks(path: Path, record: dict, spec: dict, bits: str) -> None:
    """The record's counts of invalid examples, and an attack's bound (tradeoff.evaluation.bound): present, well
    formed, and its examples robust despite the bound robust in the predictions."""
    invalid = record["invalid"]
    if not isinstance(invalid, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                for v in invalid.values()):
        raise _fail(path, f"field 'invalid' is {invalid!r}, not counts of invalid examples")
    if spec.get("type") == "clean":
        return
    bound = record.get("bound")
    if not isinstance(bound, dict) or set(BOUND) - set(bound):
        raise _fail(path, f"field 'bound' is {bound!r}, not the bound the evaluation checks (keys {list(BOUND)}); "
                          "re-run its evaluation")
    despite = bound["robust_despite"]
    if not isinstance(despite, list) or not all(isinstance(i, int) and 0 <= i < len(bits) and bits[i] == "1"
                                                for i in despite):
        raise _fail(path, "field 'bound.robust_despite' does not name robust examples of its predictions; re-run "
                          "its evaluation")


#: the rule that names survivors concentrated in one class an attack failure (docs/reports.md, "Checked before it is judged"): more than half of
#: the examples left robust are of one class, at least CONCENTRATION times its share of the evaluated examples, and
#: an exact one-sided binomial test (that class's survivors among all survivors, at its share of the split) rejects
#: at CONCENTRATION_LEVEL after Bonferroni's correction over the classes
CONCENTRATION = 3.0
CONCENTRATION_LEVEL = 1e-3


def concentrated(labels: tuple[int, ...], bits: str) -> dict | None:
    """The class the survivors of an attack crowd into (see CONCENTRATION): {class, survivors (of it), of (all
    survivors), share (of the split), p (exact binomial, one-sided)}, or None."""
    from scipy.stats import binomtest

    survivors = [label for label, bit in zip(labels, bits) if bit == "1"]
    if not survivors:
        return None
    classes = sorted(set(labels))
    top = max(classes, key=survivors.count)
    k, n = survivors.count(top), len(survivors)
    share = labels.count(top) / len(labels)
    if k / n <= 0.5 or k / n < CONCENTRATION * share or share >= 1.0:
        return None
    p = binomtest(k, n, share, alternative="greater").pvalue
    if p >= CONCENTRATION_LEVEL / len(classes):
        return None
    return {"class": top, "survivors": k, "of": n, "share": share, "p": p}


def attack_failure(found: Measurement) -> str | None:
    """Why a measurement of robust accuracy cannot be robustness (an attack failure, checked before it is judged),
    in one clause saying what was expected, or None: examples left robust although an image of another class lies
    within their budget (the evaluation's ``bound``), or survivors crowded into one class (:func:`concentrated`)."""
    record = found.record
    if found.robust_bits is None or record.get("spec", {}).get("type") == "clean":
        return None
    bound, n = record.get("bound") or {}, found.examples
    despite = bound.get("robust_despite") or []
    if despite:
        return (f"{len(despite)} of {n} test images left robust although {_reachable(bound)} lies within their "
                f"budget: at most {100 * bound['accuracy_bound']:.1f}% can be robust, not "
                f"{100 * found.accuracy:.1f}%")
    crowd = concentrated(found.labels or (), found.robust_bits) if found.labels else None
    if crowd:
        return (f"{crowd['survivors']} of the {crowd['of']} images left robust are of class {crowd['class']} "
                f"({100 * crowd['share']:.1f}% of the test images; exact binomial p = {crowd['p']:.2g}): "
                "expected survivors spread over the classes")
    return None


def _reachable(bound: dict) -> str:
    """What the bound found within the budget, as a reader says it."""
    if bound.get("whole_range"):
        return "every image (the budget spans the whole image range; correctly classified test images of other " \
               "classes among them)"
    probes = sorted((p for p in bound.get("probes") or [] if p.get("class") is not None),
                    key=lambda p: abs(p["level"] - 0.5))  # the mid-grey image first
    named = "; ".join(f"{p['level']:g}: class {p['class']}" for p in probes[:4]) + ("; …" if len(probes) > 4 else "")
    return f"a constant image of another class (grey level {named})"


def _verify_external(catalog: Catalog, model_id: str, path: Path, record: dict) -> None:
    """An external model's record names the checkpoint it measured by its SHA-256: it must be the one the config's
    ``external.<id>`` pins (``sha256``), else that of the file at ``external.<id>.checkpoint`` now. Without either
    (no pin, no file), nothing vouches for the number: refused, saying how to pin it."""
    found = record.get("external")
    sha = found.get("sha256") if isinstance(found, dict) else None
    if not isinstance(sha, str) or len(sha) != 64:
        raise _fail(path, f"is not the record of an external model's evaluation (no field 'external' with the "
                          f"checkpoint's sha256), but {model_id!r} is one; re-run its evaluation")
    spec = catalog.externals[model_id]
    expected = catalog.external_sha256(model_id)
    if expected is None:
        raise _fail(path, f"cannot be vouched for: external.{model_id}.checkpoint ({spec.checkpoint}) is not there "
                          f"and external.{model_id}.sha256 is not set; if the file it measured ({found.get('checkpoint')}) "
                          f"is the model, set external.{model_id}.sha256: {sha}")
    if sha != expected:
        where = (f"external.{model_id}.sha256 pins {expected}" if spec.sha256 else
                 f"external.{model_id}.checkpoint ({spec.checkpoint}) has SHA-256 {expected} now")
        raise _fail(path, f"field 'external.sha256' is {sha} (the file it measured), but {where}: another or a changed "
                          "file; re-run its evaluation")


def _verify_corruptions(path: Path, record: dict, accuracy: float, examples: int) -> Measurement:
    per = record.get("corruptions")
    if not isinstance(per, dict) or not per:
        raise _fail(path, "field 'corruptions' (accuracy per corruption) is missing or empty")
    values = [_fraction(path, per, name) for name in per]
    if abs(sum(values) / len(values) - accuracy) > 1e-9:
        raise _fail(path, "field 'accuracy' is not the mean of field 'corruptions'")
    return Measurement(path, accuracy, examples, None, None, record)


def _entry(catalog: Catalog, path: Path, data: dict, attack: str) -> dict:
    """An evaluation's record in the file of its job: the file itself (one attack's job), or its entry in the
    suite file of its run (runtime.eval_unit: run)."""
    if catalog.unit_of(attack) == attack:
        return data
    if data.get("format") != SUITE_FORMAT or not isinstance(data.get("evaluations"), dict):
        raise _fail(path, f"field 'format' is {data.get('format')!r}, not {SUITE_FORMAT!r} (the evaluations of a run "
                          "in one file); re-run its evaluation")
    if attack not in data["evaluations"]:
        raise _fail(path, f"holds no evaluation {attack!r}; re-run its evaluation")
    return data["evaluations"][attack]


def measurement(catalog: Catalog, run_id: str, attack: str) -> Measurement | None:
    """The verified measurement of a run (its training job) under an evaluation, or None while its metrics file
    does not exist. ReportError for a file that exists but cannot be vouched for."""
    path = catalog.metrics_file(catalog.train_id[run_id], attack)
    if not path.exists():
        return None
    return verify(catalog, run_id, attack, path, _entry(catalog, path, read_json(path), attack))


def predictions(catalog: Catalog, run_id: str, attack: str) -> dict | None:
    """A run's per-example outcomes under an evaluation (``labels``, ``robust_correct``, ...), after its metrics are
    vouched for, or None while it is not measured."""
    found = measurement(catalog, run_id, attack)
    if found is None:
        return None
    path = catalog.predictions_file(catalog.train_id[run_id], attack)
    return _entry(catalog, path, read_json(path), attack)


def how_it_ran(found: Measurement) -> dict | None:
    """How a measurement's evaluation went, from its metrics file's sidecar (tradeoff.storage.provenance): its
    ``provenance`` (commit, versions, device, host) and the fields tradeoff.evaluation.records.RAN names (seconds,
    images/s, library versions, ...); None when the file has no sidecar (pulled or copied without it: not recorded
    here). ReportError for a sidecar that cannot be read."""
    try:
        body = read_sidecar(found.metrics_path)
    except SidecarError as exc:
        raise ReportError(str(exc)) from None
    if body is None or "evaluations" not in body:  # one attack's file, or none
        return body
    entry = body["evaluations"].get(found.record.get("attack"))  # a suite's file: one entry per attack
    return None if not isinstance(entry, dict) else {"provenance": body.get("provenance"), **entry}


def training_clock(catalog: Catalog, run_id: str) -> tuple[Path, list[dict] | None]:
    """(a training job's model file, each epoch's clock and device from the model's sidecar, None without one).
    ReportError for a sidecar that cannot be read."""
    model = catalog.layout.model(catalog.train_id[run_id])
    try:
        return model, training_epochs(model)
    except SidecarError as exc:
        raise ReportError(str(exc)) from None


def training_machines(catalog: Catalog, run_id: str) -> set[tuple[str, str]]:
    """The (device, training precision) pairs that a training job's epochs ran on (a resumed job may span machines):
    the precision from its curves, the device from its model's sidecar (tradeoff.storage.provenance); a device
    "not recorded" (naming the sidecar) where the model has none (pulled or copied without it). Empty before the job
    has curves, or for curves written before they recorded the precision."""
    ran_on = live.read_ran_on(catalog.layout.curves(catalog.train_id[run_id]))
    model, epochs = training_clock(catalog, run_id)
    devices = {str(e["epoch"]): e.get("device") for e in epochs or []}
    missing = f"device not recorded (no {Layout.sidecar(model)})"
    # curves written before the sidecars hold the device too
    return {(devices.get(epoch) or r.get("device") or missing, r["precision"]) for epoch, r in ran_on.items()
            if r.get("precision")}


def training_minutes(catalog: Catalog, run_id: str) -> float | None:
    """A training job's wall-clock minutes: the sum of its epochs' seconds in its model's sidecar, or None before it
    has trained or when the model has no sidecar (pulled or copied without it: its time was not recorded here; the
    cell shows "—"). ReportError for an unreadable sidecar."""
    model, epochs = training_clock(catalog, run_id)
    if epochs is None:
        return None
    path = Layout.sidecar(model)
    try:
        seconds = [float(e["seconds"]) for e in epochs]
    except (KeyError, ValueError, TypeError) as exc:
        raise _fail(path, f"an epoch without its seconds ({exc}); re-run its training") from None
    if not seconds or not all(math.isfinite(s) and s >= 0 for s in seconds):
        raise _fail(path, "field 'seconds' must be finite and non-negative on every epoch")
    return sum(seconds) / 60.0


def failed_checks(catalog: Catalog) -> list[tuple[str, str, str]]:
    """(model, check, its numbers) of every failed check in the audits written at this scale (the catalog's models and
    any checkpoint audited), by model. An audit whose record cannot be read is listed as such (a check ``record``)."""
    found = []
    folder = catalog.layout.folder("audit")
    for path in sorted(p for p in folder.glob("*.json") if not Layout.is_sidecar(p)) if folder.is_dir() else []:
        model = path.stem
        try:
            checks = json.loads(path.read_text())["checks"]
            found += [(model, c["name"], c["summary"]) for c in checks if c["verdict"] == "fail"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            found.append((model, "record", f"{path} cannot be read ({type(exc).__name__}: {exc})"))
    return found


@dataclass(frozen=True)
class AuditFindings:
    """What a written audit of a model says of the columns reported for it (tradeoff.audit writes it)."""

    path: Path                                   # its JSON record
    trustworthy: bool                            # False: no trustworthy figure (masking): nothing is judged on it
    overstated: dict[str, tuple[float, float]]   # column -> (points above the best known, the best known), percent
    why: str = ""                                # why not trustworthy, where the record says


def audit_findings(catalog: Catalog, model_id: str) -> AuditFindings | None:
    """The columns a written audit of a model (its training job) found overstated: a ``column <name>`` check that
    fails (more than the audit's tolerance above the best known robust accuracy at its budget, significantly), or
    None without a readable audit. An audit that says its figures are not trustworthy (``trustworthy: false``, as
    when masking fails) overstates nothing: no column is judged against an untrustworthy figure."""
    path = catalog.layout.audit(catalog.train_id.get(model_id, model_id))["json"]
    try:
        record = json.loads(path.read_text())
        checks = [c for c in record["checks"] if c["name"].startswith("column ") and c["verdict"] == "fail"]
        found = {c["numbers"]["column"]: (100 * float(c["numbers"]["gap"]), 100 * float(c["numbers"]["best_known"]))
                 for c in checks if c["numbers"].get("trustworthy", True) is not False}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if record.get("trustworthy", True) is False:
        why = record.get("untrustworthy") or record.get("headline") or "its masking check fails"
        return AuditFindings(path, False, {}, why if isinstance(why, str) else "its masking check fails")
    return AuditFindings(path, True, found)


def overstated_columns(catalog: Catalog, model_id: str) -> tuple[float, list[tuple[str, float]]] | None:
    """What a written audit of a model (its training job) finds of the columns reported for it: (the best known
    robust accuracy at the audit's budget, [(column, points above it)] of the columns its ``column`` checks fail), or
    None without a readable audit."""
    path = catalog.layout.audit(catalog.train_id.get(model_id, model_id))["json"]
    try:
        record = json.loads(path.read_text())
        best = next(iter(record["best_known"].values()))["accuracy"]
        found = [(c["numbers"]["column"], c["numbers"]["gap"]) for c in record["checks"]
                 if c["name"].startswith("column ") and c["verdict"] == "fail"]
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None
    if not isinstance(best, (int, float)):  # nothing measured at the audit's budget (tradeoff-audit/3: null)
        return None
    return best, found


def audit_notes(catalog: Catalog, rows: dict[str, str]) -> list[str]:
    """A table's notes on its rows' audits (``rows``: label -> model): the columns each audit found overstated."""
    out = []
    for label, model_id in rows.items():
        found = overstated_columns(catalog, model_id)
        if found and found[1]:
            best, columns = found
            out.append(f"The audit of {label} (audit/{catalog.train_id.get(model_id, model_id)}.md) finds "
                       + ", ".join(f"{name} (+{100 * gap:.1f} points)" for name, gap in columns)
                       + f" above its best known robust accuracy, {100 * best:.1f}% (the per-example worst case over "
                       "every attack measured at the budget).")
    return out

