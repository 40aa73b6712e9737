"""The audit as jobs of the pipeline, without PyTorch: which models a table's audit target audits, what an audit job
reads, the settings whose change re-runs it, and the surrogate and protocol pairs it uses. Snakemake's rules
(workflow/rules/audit.smk) and DVC's stages (tradeoff.pipeline.dvc_export) both ask here, so the two pipelines have the same jobs."""

from __future__ import annotations

import json

from tradeoff.config import AUTOATTACK_FAMILY, CORRUPTIONS_TYPE, Catalog

#: the audit target of a table (or a group of tables): `snakemake audit_table1a`, `dvc repro audit_table1a`
PREFIX = "audit_"
NOT_PROTOCOL_TYPES = (*AUTOATTACK_FAMILY, CORRUPTIONS_TYPE, "clean")  # AutoAttack's pairs: the tables show them


def audit_targets(catalog: Catalog) -> dict[str, str]:
    """Audit target name -> the table or group of tables whose rows' models it audits (a catalog with an `audit:`)."""
    if catalog.audit is None:
        return {}
    return {f"{PREFIX}{name}": name for name in catalog.targets if catalog.table_targets(name)}


def audited_models(catalog: Catalog, target: str) -> list[str]:
    """The models (training jobs and external models) of every row of a table or group's tables, in row order."""
    found: dict[str, None] = {}
    for leaf in catalog.table_targets(target):
        for row in catalog.targets[leaf].rows:
            for run in catalog.row_runs(row.run):
                found[catalog.train_id.get(run, run)] = None
    return list(found)


def surrogate_for(catalog: Catalog, model_id: str) -> str | None:
    """The model whose adversarial examples the transfer check uses: the first of the dataset's `audit.surrogates`
    that is a model of this catalog trained by another job; None when there is none."""
    own = catalog.train_id.get(model_id, model_id)
    named = catalog.audit.surrogates.get(catalog.model_spec(model_id).dataset) or []
    return next((catalog.train_id.get(r, r) for r in named if (r in catalog.runs or catalog.is_external(r))
                 and catalog.train_id.get(r, r) != own), None)


def protocol_pairs(catalog: Catalog, model_id: str) -> list[tuple[str, str]]:
    """(strong attack, the authors' attack in its place) of every table that shows the model and names a protocol,
    for the PGD-family attacks (AutoAttack's pairs are in the tables themselves)."""
    pairs: dict[tuple[str, str], None] = {}
    for name, target in catalog.targets.items():
        if target.kind != "table" or not target.protocol:
            continue
        if not any(model_id in (catalog.train_id.get(r, r) for r in catalog.row_runs(row.run))
                   for row in target.rows):
            continue
        for attack in catalog.target_attacks(name, model_id):
            mapped = catalog.protocol_attack(name, attack, model_id)
            if mapped is not None and catalog.attack_for(attack, model_id).type not in NOT_PROTOCOL_TYPES:
                pairs[(attack, mapped)] = None
    return list(pairs)


def job_inputs(catalog: Catalog, model_id: str) -> list[str]:
    """What an audit job reads: the model's file (an external model's dataset marker too) and its surrogate's."""
    surrogate = surrogate_for(catalog, model_id)
    return catalog.evaluation_inputs(model_id) + ([] if surrogate is None else catalog.evaluation_inputs(surrogate))


def job_settings(catalog: Catalog, model_id: str) -> str:
    """Everything an audit job computes from besides its files, resolved: a change re-runs it."""
    block = catalog.audit
    resolved = lambda name: catalog.attack_for(name, model_id).as_dict()  # noqa: E731
    return json.dumps({"audit": block.as_dict(), "attack": resolved(block.attack),
                       "black_box": resolved(block.black_box) if block.black_box else None,
                       "surrogate": surrogate_for(catalog, model_id),
                       "protocol": [[s, resolved(s), p, resolved(p)]
                                    for s, p in protocol_pairs(catalog, model_id)],
                       "external": catalog.externals[model_id].as_dict() if catalog.is_external(model_id) else None},
                      sort_keys=True)
