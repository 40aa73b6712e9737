"""Evaluation jobs of the catalog: what is evaluated, resolved from a run id, an external model's id or a checkpoint
file, into one :class:`tradeoff.evaluation.evaluate.Evaluation`, every attack checked before any work.

A run is evaluated as its training job's model (its train id: the files are that job's); an external model (the
config's ``external:``) or a checkpoint file given on the command line (:class:`CheckpointFile`) as the catalog's
external model of that id. A model that ``tradeoff evaluate --checkpoint`` measured is found again from its own metrics
records (:func:`evaluated_checkpoint`), so that its results can be exported by id.

Importing this module does not import PyTorch (``tradeoff export`` reads metrics files only); running a plan does.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Callable

from tradeoff import config as cfg
from tradeoff.core.spec import Norm
from tradeoff.evaluation.load import source_for

LIST_MODELS = "`tradeoff list runs` and `tradeoff list externals` list them"


def model_of(catalog: cfg.Catalog, model_id: str) -> str:
    """A run or an external model (`external:`) of the catalog: what is evaluated, audited and exported."""
    if model_id in catalog.runs or catalog.is_external(model_id):
        return model_id
    raise cfg.ConfigError("--run: " + cfg.unknown("run or external model", model_id,
                                                  [*catalog.runs, *catalog.externals], LIST_MODELS))


def suite_attacks(catalog: cfg.Catalog, target: str, model_id: str) -> list[str]:
    """The evaluations that a row of ``model_id`` needs in a target (its columns, its protocol's)."""
    if target not in catalog.targets:
        raise cfg.ConfigError("--suite: " + cfg.unknown("target", target, catalog.targets,
                                                        "`tradeoff list targets` lists them"))
    names = catalog.target_attacks(target, model_id)
    if not names:
        raise cfg.ConfigError(f"--suite: target {target!r} evaluates nothing (no attack columns)")
    return names


def default_attacks(catalog: cfg.Catalog) -> list[str]:
    """The evaluations of a checkpoint file without a suite or attacks: the clean accuracy and AutoAttack (the
    standard ensemble) at the dataset's standard L-inf budget (the catalog's attacks of those types)."""
    clean = next((n for n, a in catalog.attacks.items() if a.clean), None)
    autoattack = next((n for n, a in catalog.attacks.items() if a.type == "autoattack"
                       and a.norm == Norm.LINF and a.standard_budget), None)
    if clean is None or autoattack is None:
        raise cfg.ConfigError("evaluate --checkpoint: the catalog has no attack of type clean and no autoattack at the "
                              "standard L-inf budget for the default suite; name --attack or --suite")
    return [clean, autoattack]


# ------------------------------------------------------------------------------------------- checkpoint files


@dataclass(frozen=True)
class CheckpointFile:
    """A model this pipeline did not train, as the command line names it: the file and its external-model settings
    (tradeoff.evaluation.external; None: the default), and ``name``, its id (default: the file's stem)."""
    checkpoint: str
    arch: str
    dataset: str
    normalize: str | None = None
    format: str | None = None
    paper_dataset: str | None = None
    sha256: str | None = None
    name: str | None = None

    def settings(self) -> dict:
        """The external-model settings given (tradeoff.config.with_external)."""
        return {k: v for k, v in asdict(self).items() if k != "name" and v is not None}


def checkpoint_name(catalog: cfg.Catalog, file: CheckpointFile) -> str:
    """The model id of a checkpoint file: its ``name``, or the file's stem; never a run's or a model's of the catalog."""
    from tradeoff.evaluation.external import name_of

    name = file.name or name_of(file.checkpoint)
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise cfg.ConfigError(f"--name: {name!r} is not a model id (lower case letters, digits, '-' and '_')")
    if name in catalog.runs or catalog.is_external(name):
        raise cfg.ConfigError(f"--name: {name!r} is a {'run' if name in catalog.runs else 'model'} of the catalog, "
                              f"whose files are its own: give another --name"
                              + ("" if name in catalog.runs else f" (or give --run {name})"))
    return name


def with_checkpoint(catalog: cfg.Catalog, file: CheckpointFile, *, suite: str | None = None,
                    named: Callable[[str], str] = str) -> tuple[cfg.Catalog, str]:
    """The catalog with a checkpoint file as an external model, and its id. Evaluated under a table's ``suite``
    without a paper dataset, a model stands for one of the paper dataset of the table's rows of its dataset (as
    those rows run the suite). ``named``: how an error message names a setting (the command line's option)."""
    name = checkpoint_name(catalog, file)
    raw = file.settings()
    if suite in catalog.targets and file.paper_dataset is None:
        row = next((r.run for t in catalog.leaf_targets(suite) for r in catalog.targets[t].rows
                    if catalog.model_spec(r.run).dataset == file.dataset), None)
        if row is not None:
            raw["paper_dataset"] = catalog.model_spec(row).paper_dataset or file.dataset
    return cfg.with_external(catalog, name, raw, named), name


def evaluated_checkpoint(catalog: cfg.Catalog, model_id: str) -> cfg.Catalog | None:
    """The catalog with a model that `evaluate --checkpoint ... --name <model_id>` measured, as that command had it:
    its settings rebuilt from its own metrics records, kept only when they resolve to the settings' digest that a
    record names (so its files are then vouched for as an `external:` model's). None if no record fits."""
    folder = catalog.layout.metrics(model_id, "clean").parent
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text())
            found = record["external"]
            base = {"checkpoint": found["checkpoint"], "arch": record["arch"], "dataset": record["dataset"],
                    "paper_dataset": record.get("paper_dataset"), "normalize": found.get("normalize")}
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for fmt in dict.fromkeys(("auto", found.get("layout"))):
            for sha in dict.fromkeys((None, found.get("sha256"))):
                raw = {**base, "format": fmt, **({"sha256": sha} if sha else {})}
                try:
                    candidate = cfg.with_external(catalog, model_id, raw, lambda key: f"{path}: {key}")
                except cfg.ConfigError:
                    continue
                if cfg.spec_digest(candidate.externals[model_id]) == record.get("spec_digest"):
                    return candidate
    return None


def known_model(catalog: cfg.Catalog, model_id: str) -> tuple[cfg.Catalog, str]:
    """A run, an external model, or a checkpoint file that `evaluate --checkpoint` measured under this id: the catalog
    that knows it (:func:`evaluated_checkpoint`), and the id."""
    if model_id not in catalog.runs and not catalog.is_external(model_id):
        catalog = evaluated_checkpoint(catalog, model_id) or catalog
    return catalog, model_of(catalog, model_id)


# ---------------------------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Plan:
    """An evaluation of a catalog's model, checked whole: ``kind`` is ``attacks`` (each its own files), ``suite`` (one
    file for all, runtime.eval_unit: run) or ``shard`` (one shard of one attack); ``model_id`` the id its files are
    under (a run's train id); ``names`` the attacks, in order; ``catalog`` the catalog that knows the model."""
    catalog: cfg.Catalog
    model_id: str
    kind: str
    names: tuple[str, ...]
    evaluation: Any  # tradeoff.evaluation.evaluate.Evaluation

    def run(self) -> list[dict]:
        """Evaluate: each attack's metrics in the order of ``names`` (a shard's partial result)."""
        from tradeoff.evaluation.evaluate import evaluate

        return evaluate(self.evaluation)


def evaluation(catalog: cfg.Catalog, model_id: str, jobs=(), *, seed: int = 0, **mode):
    """The :class:`tradeoff.evaluation.evaluate.Evaluation` of a catalog's model under ``jobs``: its model
    (Catalog.model_location, tradeoff.evaluation.load.source_for), test examples, device (runtime.device; always fp32), batch size
    (runtime.eval_batch_size) and scale. ``mode``: ``shard`` or ``suite``."""
    from tradeoff.core.runtime import Runtime
    from tradeoff.evaluation.evaluate import Evaluation

    runtime = Runtime.from_config(catalog.runtime_settings, catalog.scale)  # device, CPU threads
    return Evaluation(source_for(*catalog.model_location(model_id)), catalog.data_root, tuple(jobs), device=runtime.device.type,
                      batch_size=catalog.runtime_settings.eval_batch_size, seed=seed,
                      test_examples=catalog.model_spec(model_id).test_examples, scale=catalog.scale, **mode)


def plan_run(catalog: cfg.Catalog, model_id: str, *, unit: str | None = None, attacks: list[str] = (),
             suite: str | None = None, shard: tuple[int, int] | None = None, seed: int = 0) -> Plan:
    """A run's or an external model's evaluation: its evaluation job ``unit`` (an attack, or ALL_ATTACKS: every attack
    the targets need of it, into one file), the ``attacks`` named (each its own files, in turn), or a target's
    ``suite``; with ``shard`` (k, n), shard k of n of one attack."""
    from tradeoff.evaluation.evaluate import AttackJob, Shard, Suite

    model_id = model_of(catalog, model_id)
    if unit is not None and unit not in catalog.eval_units(model_id):
        raise cfg.ConfigError(f"--unit: {unit!r} is not an evaluation job of run {model_id!r} at this scale "
                              f"(runtime.eval_unit: {catalog.eval_unit}); allowed: {catalog.eval_units(model_id)}")
    names = (catalog.unit_attacks(model_id, unit) if unit is not None
             else suite_attacks(catalog, suite, model_id) if suite is not None
             else list(dict.fromkeys(attacks)))  # an attack named twice: evaluated once, in the order first named
    specs = {name: cfg.check_evaluation(catalog, model_id, name) for name in names}  # all checked before any work
    train_id, layout = catalog.train_id[model_id], catalog.layout
    if shard is not None:
        if len(names) > 1:
            raise cfg.ConfigError("--shard evaluates one attack: give a single --attack")
        attack = names[0]
        if specs[attack].corruptions:
            raise cfg.ConfigError(f"--shard: {attack!r} (accuracy on corrupted images) is one job, never sharded")
        job = AttackJob(attack, specs[attack], state_path=layout.eval_work(train_id, attack, shard))
        mode, kind = {"shard": Shard(*shard, out=layout.eval_work(train_id, attack, shard, ".json"))}, "shard"
        jobs = [job]
    elif unit == cfg.ALL_ATTACKS:
        jobs = [AttackJob(name, spec, state_path=layout.eval_work(train_id, name, suffix=".state"),
                          done_path=layout.eval_work(train_id, name, suffix=".done.json"))
                for name, spec in specs.items()]
        mode, kind = {"suite": Suite(layout.metrics(train_id, cfg.ALL_ATTACKS),
                                     layout.predictions(train_id, cfg.ALL_ATTACKS))}, "suite"
    else:
        jobs = [AttackJob(name, spec, metrics_out=layout.metrics(train_id, name),
                          predictions_out=layout.predictions(train_id, name),
                          state_path=layout.eval_work(train_id, name)) for name, spec in specs.items()]
        mode, kind = {}, "attacks"
    return Plan(catalog, train_id, kind, tuple(names), evaluation(catalog, model_id, jobs, seed=seed, **mode))


def plan_checkpoint(catalog: cfg.Catalog, file: CheckpointFile, *, suite: str | None = None,
                    attacks: list[str] = (), seed: int = 0, named: Callable[[str], str] = str) -> Plan:
    """A checkpoint file's evaluation, as an external model of the catalog would be evaluated: under a target's
    ``suite``, the ``attacks`` named, or by default the clean accuracy and AutoAttack at the dataset's standard L-inf
    budget; one metrics and one predictions file per attack, under the model's id."""
    catalog, name = with_checkpoint(catalog, file, suite=suite, named=named)
    names = (suite_attacks(catalog, suite, name) if suite is not None
             else list(dict.fromkeys(attacks)) if attacks else default_attacks(catalog))
    return plan_run(catalog, name, attacks=names, seed=seed)


def merge_shards(catalog: cfg.Catalog, model_id: str, attack: str, shards: int | None = None) -> tuple[int, dict]:
    """Merge the shards of one evaluation (``shards``: default the configured number) into its metrics and predictions
    files: (the number of shards, the metrics)."""
    from tradeoff.evaluation.shards import merge_shards as merge

    model_id = model_of(catalog, model_id)
    catalog.attack_for(attack, model_id)  # validates the name
    train_id = catalog.train_id[model_id]
    shards = shards or catalog.shards_for(attack)
    parts = [catalog.layout.eval_work(train_id, attack, (k, shards), ".json") for k in range(shards)]
    missing = [str(p) for p in parts if not p.exists()]
    if missing:
        raise cfg.ConfigError(f"merge-shards: missing shard result(s) {missing}; run `tradeoff evaluate --run "
                              f"{model_id} --attack {attack} --shard K --shards {shards}` for each")
    return shards, merge(parts, metrics_out=catalog.layout.metrics(train_id, attack),
                         predictions_out=catalog.layout.predictions(train_id, attack))
