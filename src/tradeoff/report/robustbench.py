"""RobustBench's formats: the model-info JSON that its leaderboards read, written from metrics files alone.

RobustBench keeps one JSON file per model and leaderboard, ``model_info/<dataset>/<threat model>/<model>.json`` in
its repository (e.g. ``model_info/cifar10/Linf/Zhang2019Theoretically.json``, ``model_info/cifar10/Linf/
Addepalli2022Efficient_RN18.json``, ``model_info/cifar10/L2/Rade2021Helper_R18_ddpm.json``). Its fields are those of
``ModelInfo`` in ``robustbench/utils.py`` and of the example in ``robustbench/leaderboard/template.py``: ``link``,
``name``, ``authors``, ``additional_data`` (bool), ``number_forward_passes`` (int), ``dataset`` (``cifar10``,
``cifar100``, ``imagenet``), ``venue``, ``architecture`` (e.g. ``WideResNet-34-10``), ``eps`` (a string such as
``"8/255"`` or ``"0.5"``; null for corruptions), ``clean_acc``, ``reported`` and ``autoattack_acc`` (or
``corruptions_acc``): accuracies in percent as strings, ``str(round(accuracy * 100, 2))`` as its ``update_json``
writes them, and optionally ``footnote`` and ``unreliable``. Its leaderboard code reads the files it knows the keys
of and keeps any other: this export adds ``provenance``, this project's record of where the numbers come from (the
commit and AutoAttack's version from the metrics files' sidecars, "unknown" and null where they have none).

:func:`export_robustbench` reads a run's (or an external model's) clean and AutoAttack metrics through
tradeoff.report.records, which vouches for them against the configuration as for any table; a missing or refused
file stops it in one line. No checkpoint is read and PyTorch is not imported.
"""

from __future__ import annotations

import json
from pathlib import Path

from tradeoff.config import ALL_ATTACKS, Catalog
from tradeoff.core.errors import UserError, unknown
from tradeoff.models import zoo_names as zoo
from tradeoff.report import records
from tradeoff.storage.atomic import atomic_write_text


class ExportError(UserError, ValueError):
    """What an export needs is missing or cannot be vouched for; the message names it and what to run."""


def _threat(threat_model: str) -> tuple[str, str | None]:
    """(RobustBench's name, this catalog's norm) of a threat model named either way."""
    by_name = {v.lower(): (v, norm) for norm, v in zoo.THREAT_MODELS.items()}
    by_name[zoo.CORRUPTIONS_THREAT] = (zoo.CORRUPTIONS_THREAT, None)
    found = by_name.get(threat_model.lower())
    if found is None:
        raise ExportError(f"unknown threat model {threat_model!r}; RobustBench's: "
                          f"{[*zoo.THREAT_MODELS.values(), zoo.CORRUPTIONS_THREAT]}")
    return found


def _attack_of(catalog: Catalog, given: str | None, kind: str, norm: str | None, option: str) -> str:
    """The evaluation to read: the one named, else the catalog's attack of type ``kind`` (for AutoAttack: in
    ``norm`` at the dataset's standard budget, i.e. without an ``eps`` of its own)."""
    if given is not None:
        if given not in catalog.attack_jobs():
            raise ExportError(f"{option}: " + unknown("attack", given, catalog.attack_jobs(),
                                                      "`tradeoff list attacks` lists them"))
        return given
    for name, spec in catalog.attacks.items():
        if spec.type == kind and (norm is None or (spec.norm == norm and spec.standard_budget)):
            return name
    what = kind if norm is None else f"{kind} in the {norm} norm at the standard budget"
    raise ExportError(f"the catalog has no attack of type {what}; name it with {option}")


def _per_attack(catalog: Catalog) -> Catalog:
    """The catalog whose evaluation jobs are one attack each: where `tradeoff evaluate --run R --attack A` writes an
    evaluation that no target asks of the run (runtime.eval_unit: run keeps the targets' in one file per run)."""
    return catalog.with_runtime(eval_unit="attack")


def measured(catalog: Catalog, model_id: str, attack: str) -> records.Measurement:
    """A run's or an external model's vouched-for measurement under an evaluation, from the file that holds it (its
    suite's, or its own), or ExportError naming the file and the command that makes it."""
    train_id = catalog.train_id[model_id]
    in_suite = catalog.eval_unit == "run" and attack in catalog.model_attacks(train_id)
    where = catalog if catalog.eval_unit != "run" or in_suite else _per_attack(catalog)
    try:
        found = records.measurement(where, model_id, attack)
    except records.ReportError as exc:
        raise ExportError(f"cannot be vouched for: {exc}") from None
    if found is None:
        unit = ALL_ATTACKS if where.eval_unit == "run" else attack
        command = (f"tradeoff evaluate --run {model_id} --unit {unit}" if where is catalog and in_suite
                   else f"tradeoff evaluate --run {model_id} --attack {attack}")
        raise ExportError(f"{where.metrics_file(train_id, attack)}: no {attack} measurement of {model_id!r} yet; run "
                          f"`{command}` (with the same --config files), or build a target that evaluates it")
    return found


def _percent(fraction: float) -> str:
    """An accuracy as RobustBench's update_json writes it: percent, rounded to 2 decimals, as a string."""
    return str(round(fraction * 100, 2))


def _eps_text(eps: float) -> str:
    """A budget as RobustBench's files write it: "8/255" where it is a whole number of 255ths, else the number."""
    if eps > 0 and abs(eps * 255 - round(eps * 255)) < 1e-6 and abs(eps - round(eps)) > 1e-9:
        return f"{int(round(eps * 255))}/255"
    return f"{eps:g}"


def model_info(catalog: Catalog, model_id: str, *, threat_model: str = "Linf", clean: str | None = None,
               autoattack: str | None = None, fields: dict | None = None) -> dict:
    """RobustBench's model-info dict of a run or an external model (see the module docstring); ``fields`` sets the
    paper's own fields (``name``, ``link``, ``authors``, ``venue``, ``footnote``, ``reported``,
    ``additional_data``)."""
    threat, norm = _threat(threat_model)
    if norm is None:
        sets = sorted({a.dataset for a in catalog.attacks.values() if a.corruptions})
        raise ExportError(f"threat model {zoo.CORRUPTIONS_THREAT!r}: RobustBench's corruption leaderboards are on "
                          f"CIFAR-10-C, CIFAR-100-C and ImageNet-C; this catalog measures accuracy on corrupted images "
                          f"of {sets or 'no corruption dataset'}, none of them: nothing to export")
    spec = catalog.model_spec(model_id)
    clean_name = _attack_of(catalog, clean, "clean", None, "--clean")
    robust_name = _attack_of(catalog, autoattack, "autoattack", norm, "--autoattack")
    robust_spec = catalog.attack_for(robust_name, model_id)
    if robust_spec.type != "autoattack" or robust_spec.norm != norm:
        raise ExportError(f"--autoattack: {robust_name!r} is {robust_spec.type} in the "
                          f"{robust_spec.norm} norm, not AutoAttack in the {norm} norm ({threat})")
    if not catalog.attack_for(clean_name, model_id).clean:
        raise ExportError(f"--clean: {clean_name!r} is not an evaluation of type clean")
    ours = {"clean": measured(catalog, model_id, clean_name), "autoattack": measured(catalog, model_id, robust_name)}
    robust = ours["autoattack"]
    fields = dict(fields or {})
    dataset = spec.dataset
    notes = []
    if dataset not in zoo.ROBUSTBENCH_DATASETS:
        notes.append(f"Dataset {dataset} is not one of RobustBench's ({', '.join(zoo.ROBUSTBENCH_DATASETS)}).")
    size, examples = int(robust.record["test_size"]), robust.examples
    if examples < size:
        notes.append(f"Evaluated on {examples} of the {size} test images (the {catalog.scale} scale of tradeoff).")
    if catalog.scale != "paper":
        notes.append(f"At tradeoff's {catalog.scale} scale, not the paper's: a smaller setting, not a result.")
    ran = {name: records.how_it_ran(m) or {} for name, m in ours.items()}  # the metrics' sidecars
    commits = sorted({(r.get("provenance") or {}).get("git_commit", "unknown") for r in ran.values()})
    aa = _percent(robust.accuracy)
    info = {
        "link": fields.pop("link", ""),
        "name": fields.pop("name", model_id),
        "authors": fields.pop("authors", ""),
        "additional_data": bool(fields.pop("additional_data", False)),
        "number_forward_passes": 1,
        "dataset": dataset,
        "venue": fields.pop("venue", ""),
        "architecture": zoo.ROBUSTBENCH_ARCHS.get(spec.arch, spec.arch),
        "eps": _eps_text(float(robust_spec.eps)),
        "clean_acc": _percent(ours["clean"].accuracy),
        "reported": str(fields.pop("reported", aa)),
        "autoattack_acc": aa,
    }
    given = [str(fields.pop("footnote"))] if "footnote" in fields else []
    footnote = " ".join(given + notes)
    if footnote:
        info["footnote"] = footnote
    info["provenance"] = {
        "tool": "tradeoff", "model": model_id, "external": catalog.is_external(model_id),
        "training_job": None if catalog.is_external(model_id) else catalog.train_id[model_id],
        "scale": catalog.scale, "threat_model": threat, "norm": norm, "eps": float(robust_spec.eps),
        "test_examples": examples, "test_size": size, "git_commit": commits[0] if len(commits) == 1 else commits,
        "evaluations": {"clean": clean_name, "autoattack": robust_name},
        "metrics": list(dict.fromkeys(str(m.metrics_path) for m in ours.values())),
        "autoattack": {"version": (ran["autoattack"].get("libraries") or {}).get("pyautoattack"),
                       "breakdown": robust.record.get("breakdown"), "checks": robust.record.get("checks", [])},
        **({"checkpoint": robust.record["external"]["checkpoint"], "sha256": robust.record["external"]["sha256"]}
           if catalog.is_external(model_id) else {"spec_digest": robust.record["spec_digest"]}),
    }
    return info


def export_robustbench(catalog: Catalog, model_id: str, *, threat_model: str = "Linf", clean: str | None = None,
                       autoattack: str | None = None, fields: dict | None = None,
                       out: str | Path | None = None) -> tuple[Path, dict]:
    """Write :func:`model_info` to ``out`` (default: results/<scale>/robustbench/<dataset>/<threat>/<model>.json);
    returns the path and the dict."""
    info = model_info(catalog, model_id, threat_model=threat_model, clean=clean, autoattack=autoattack,
                      fields=fields)
    path = Path(out) if out is not None else catalog.layout.robustbench(info["dataset"], _threat(threat_model)[0],
                                                                       model_id)
    atomic_write_text(path, json.dumps(info, indent=2) + "\n")
    return path, info
