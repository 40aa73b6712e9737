"""An audit of a catalog's model (a run, an external checkpoint, or a model from the user's Python file), from the
config's ``audit:`` block: the model and its test examples loaded as an evaluation loads them (fp32, eval mode), the
attacks resolved for its dataset and scale as the tables' are (at its L-inf budget and, where the dataset has one,
its L2 budget), a surrogate of its dataset for the transfer check, the PGD-family attacks of the authors' protocols
of the tables that show it, and the columns those tables report for it (their metrics and per-example predictions,
where measured): each column is audited against the best known robust accuracy."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch

from tradeoff.audit.auditor import Auditor
from tradeoff.audit.jobs import protocol_pairs, surrogate_for
from tradeoff.audit.page import write_page
from tradeoff.audit.verdicts import group_verdicts, overall_line
from tradeoff.config import Catalog, ConfigError
from tradeoff.core.errors import UserError
from tradeoff.core.spec import AttackSpec, Norm
from tradeoff.evaluation.evaluate import Evaluation, Loaded
from tradeoff.evaluation.load import source_for
from tradeoff.report.records import ReportError, predictions, read_json

log = logging.getLogger("tradeoff.audit")

FORMAT = "tradeoff-audit/3"
NOT_COLUMNS = ("clean", "corruptions")


def _load(catalog: Catalog, model_id: str, device: str, examples: int | None):
    source = source_for(*catalog.model_location(model_id))
    if not source.path.exists():
        raise UserError(f"{source.path}: no such model file (train {source.model_id!r} first: `tradeoff train --run "
                        f"{source.model_id}`)")
    return Loaded(Evaluation(source, catalog.data_root, device=device, test_examples=examples))


def _order(n: int | None, size: int) -> torch.Tensor:
    """The test set's indices of the first n examples of the fixed permutation (tradeoff.data.subset)."""
    if n is None or n >= size:
        return torch.arange(size)
    return torch.randperm(size, generator=torch.Generator().manual_seed(0))[:n]


def reported_columns(catalog: Catalog, model_id: str, y: torch.Tensor, examples: int | None, size: int,
                     sha: str | None = None) -> tuple[dict[str, dict], list[str]]:
    """The evaluations that the tables showing the model report (columns and their protocol's attacks; for a model no
    table shows, every evaluation written for it), whose metrics and predictions are written and vouched for
    (tradeoff.report.records), as the auditor takes them: ``{name:
    {"spec", "flags"}}`` with the flags in the audit's order of examples; and a note per column left out. ``sha``: an
    external model's file digest, which a column's record must name."""
    wanted: dict[str, None] = {}
    for name, target in catalog.targets.items():
        if target.kind != "table":
            continue
        if any(model_id in (catalog.train_id.get(r, r) for r in catalog.row_runs(row.run))
               for row in target.rows):
            wanted.update(dict.fromkeys(catalog.target_attacks(name, model_id)))
    train_id = catalog.train_id.get(model_id, model_id)
    if not wanted:  # a model no table shows (a checkpoint or a Python file evaluated under --name): what it measured
        wanted = dict.fromkeys(a for a in catalog.attack_jobs() if catalog.metrics_file(train_id, a).exists()
                               or catalog.layout.metrics(train_id, a).exists())
    audit_idx = _order(examples, size).tolist()
    columns, notes = {}, []
    for attack in wanted:
        spec = catalog.attack_for(attack, model_id)
        if spec.type in NOT_COLUMNS:
            continue
        try:
            own = catalog.layout.metrics(train_id, attack)  # `evaluate --checkpoint/--model`: a file per attack
            if catalog.unit_of(attack) != attack and own.exists():
                record = read_json(own)
                if record.get("spec") != json.loads(json.dumps(spec.as_dict())) or (
                        sha and (record.get("external") or {}).get("sha256") != sha):
                    notes.append(f"{attack}: {own} measured another file or setting")
                    continue
                found = read_json(catalog.layout.predictions(train_id, attack))
            else:
                found = predictions(catalog, model_id, attack)
        except ReportError as exc:
            notes.append(f"{attack}: {exc}")
            continue
        if found is None:
            notes.append(f"{attack}: not measured")
            continue
        flags, labels = found["robust_correct"], found["labels"]
        labels = labels if isinstance(labels, list) else json.loads(labels)
        position = {int(i): p for p, i in enumerate(_order(len(flags), size).tolist())}
        if not all(i in position for i in audit_idx):
            notes.append(f"{attack}: its {len(flags)} examples do not hold the audit's")
            continue
        picked = [position[i] for i in audit_idx]
        if [int(labels[p]) for p in picked] != y.cpu().tolist():
            notes.append(f"{attack}: its labels are not the audit's examples'")
            continue
        columns[attack] = {"spec": spec, "flags": "".join(flags[p] for p in picked)}
    return columns, notes


def audit(catalog: Catalog, model_id: str, *, device: str = "cpu", seed: int = 0, surrogate: str | None = None,
          batch_size: int | None = None) -> tuple[dict, dict[str, Path]]:
    """Audit a run or an external model of the catalog; (its record, the files written: Layout.audit)."""
    block = catalog.audit
    t0 = time.perf_counter()
    model_id = catalog.train_id.get(model_id, model_id)  # runs trained by one job are one model: one audit
    spec = catalog.model_spec(model_id)
    examples = block.examples
    if spec.test_examples is not None:
        examples = spec.test_examples if examples is None else min(examples, spec.test_examples)
    loaded = _load(catalog, model_id, device, examples)
    model, meta, x, y = loaded.model, loaded.meta, loaded.x, loaded.y
    attack = catalog.attack_for(block.attack, model_id)
    black_box = catalog.attack_for(block.black_box, model_id) if block.black_box else None
    if surrogate is not None and surrogate not in catalog.runs and not catalog.is_external(surrogate):
        raise ConfigError(f"--surrogate: {surrogate!r} is neither a run nor an external model of the catalog")
    surrogate_id = catalog.train_id.get(surrogate, surrogate) if surrogate else surrogate_for(catalog, model_id)
    surrogate_model, missing = None, None
    if surrogate_id is not None and not catalog.model_file(surrogate_id).exists():
        missing = (f"the surrogate {surrogate_id} is not trained ({catalog.model_file(surrogate_id)}: no such file; "
                   f"`tradeoff train --run {surrogate_id}`)")
    elif surrogate_id is not None:
        surrogate_model = _load(catalog, surrogate_id, device, examples).model
    pairs = [(strong, catalog.attack_for(strong, model_id), code, catalog.attack_for(code, model_id))
             for strong, code in protocol_pairs(catalog, model_id)]
    columns, notes = reported_columns(catalog, model_id, y, examples, loaded.test_size,
                                      (meta.get("external") or {}).get("sha256"))
    autoattack = catalog.attack_for(block.autoattack, model_id) if block.autoattack else None
    auditor = Auditor(model, x, y, attack=attack, black_box=black_box, settings=block,
                      seed=seed, batch_size=batch_size or catalog.runtime_settings.eval_batch_size,
                      surrogate=surrogate_model, no_surrogate=missing, protocol=pairs, reported=columns,
                      l2=catalog.attack_in_norm(block.attack, model_id, Norm.L2), autoattack=autoattack,
                      log=lambda text: log.info("%s: %s", model_id, text))
    checks = auditor.run()
    extra = {"model": model_id, "scale": catalog.scale, "arch": spec.arch, "dataset": spec.dataset,
             "external": meta.get("external"), "surrogate": surrogate_id, "settings": block.as_dict(),
             "columns_left_out": notes}
    record = make_record(auditor, checks, extra, seconds=time.perf_counter() - t0, device=str(loaded.device))
    return record, write_page(record, catalog.layout.audit(model_id))


def make_record(auditor: Auditor, checks: list[dict], extra: dict, *, seconds: float, device: str) -> dict:
    """The record an audit's page is made from (tradeoff.audit.page.write_page), from an auditor that has run.
    ``best_known`` is the per-example worst case over every attack measured at each budget: always an upper bound
    on the robust accuracy, and the figure to quote only where ``trustworthy`` is true (the masking group does not
    fail); ``per_example`` (every measurement's flags) is written beside the record, not in it."""
    groups = group_verdicts(checks)
    best = auditor.headline()
    trusted = groups["masking"] != "fail"
    masking_failed = [c["name"] for c in checks if c.get("group") == "masking" and c["verdict"] == "fail"]
    return {"format": FORMAT, "model": extra.get("model", "model"), "scale": extra.get("scale", "-"),
            "arch": extra.get("arch", "-"), "dataset": extra.get("dataset", "-"), "examples": len(auditor.y),
            "clean_accuracy": auditor.curves()["clean"], "attack": auditor.attack.as_dict(),
            "l2": auditor.l2.as_dict() if auditor.l2 else None,
            "black_box": auditor.black_box.as_dict() if auditor.black_box else None,
            "autoattack": auditor.autoattack.as_dict() if auditor.autoattack else None,
            "seed": auditor.seed, "device": device, **extra,
            "checks": checks, "groups": groups, "overall": overall_line(groups),
            "verdict": overall_line(groups).split(" ")[0].replace("n/a", "pass"),
            "trustworthy": trusted, "no_trustworthy_figure": None if trusted else "masking",
            "masking_failed": masking_failed, "best_known": best,
            "randomized": auditor.randomized,
            "reported": {n: AttackSpec.from_dict(c["spec"]).as_dict() for n, c in auditor.reported.items()},
            "loss_trace": auditor.loss_trace, "measurements": auditor.curves(),
            "attack_warnings": dict(auditor.warnings), "invalid": dict(auditor.invalid),
            "errors": dict(auditor.errors), "seconds": seconds, "per_example": dict(auditor.flags)}
