"""The resolved catalog and its queries: which jobs a target needs, which files hold them, at this scale.

The ids, one vocabulary (README "Ids"); every method takes the id its parameter names:

- a **run id** names a run of the catalog (``runs:``, after the design is expanded): what a table row or a figure
  point names, and what its settings (``runs[run_id]``) belong to;
- a **train id** is the run id of the training job a run shares with every run of identical resolved settings
  (``train_id[run_id]``; a run that trains itself is its own train id): what is trained once, and the folder its
  files (checkpoints, curves, metrics) are filed under;
- a **model id** is what an evaluation evaluates: a train id, or an external model's id (``external:``), which
  ``train_id`` maps to itself;
- an **evaluation job** is a model id and a unit, the unit one evaluation name (an attack, ``pgd20``, or a budget
  of a sweep, ``caat_pgd@16_255``) or ``all`` (``runtime.eval_unit: run``: every evaluation of the model at once).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tradeoff.config.budgets import parse_budget, rel_step, split_budget, sweep_labels
from tradeoff.config.design import merge
from tradeoff.config.load import ALL_ATTACKS, PSEUDO_COLUMNS, REFERENCE_DIR
from tradeoff.config.scale import corruption_set, resolve_attack
from tradeoff.core.errors import ConfigError, unknown
from tradeoff.core.settings import runtime_settings
from tradeoff.core.spec import AttackSpec, AuditSpec, ExternalSpec, FrozenDict, RunSpec, freeze
from tradeoff.core.targets import TargetSpec
from tradeoff.data.roots import GeneratedDataRoot
from tradeoff.models.declared import PretrainedError, pretrained_checkpoint_path, pretrained_setting
from tradeoff.storage.atomic import sha256_file
from tradeoff.storage.layout import Layout, ready_marker


@dataclass
class Catalog:
    config: dict
    runs: dict[str, RunSpec]                    # run id -> its resolved settings (tradeoff.core.spec)
    attacks: dict[str, AttackSpec]              # attack name -> its settings as written (budgets still per dataset)
    targets: dict[str, TargetSpec]              # target name -> its resolved settings (tradeoff.core.targets)
    train_id: dict[str, str] = field(default_factory=dict)  # run id (or external id) -> its train id
    seed_runs: dict[str, list[str]] = field(default_factory=dict)  # run with `seeds` -> its run per seed
    # external model id -> its resolved settings (`external:`): a model this pipeline did not train, evaluated (and
    # shown in tables) like a training job; train_id maps it to itself
    externals: dict[str, ExternalSpec] = field(default_factory=dict)
    # the papers' numbers (a table's `reference:` is <reference_dir>/<reference>.csv): the folder `reference/` beside
    # the first config file
    reference_dir: str = str(REFERENCE_DIR)

    def __post_init__(self) -> None:
        # settings given in their JSON form (the catalog's cache, a test's hand-written catalog) are typed here
        self.runs = {rid: spec if isinstance(spec, RunSpec) else RunSpec.from_dict(spec)
                     for rid, spec in self.runs.items()}
        self.externals = {eid: spec if isinstance(spec, ExternalSpec) else ExternalSpec.from_dict(spec)
                          for eid, spec in self.externals.items()}
        self.attacks = {name: AttackSpec.from_dict(spec) for name, spec in self.attacks.items()}
        self.targets = {name: target if isinstance(target, TargetSpec) else TargetSpec.from_dict(target)
                        for name, target in self.targets.items()}

    def row_runs(self, run_id: str) -> list[str]:
        """The runs a table row or figure point averages: one per seed of a run with `seeds`, else the run."""
        return self.seed_runs.get(run_id, [run_id])

    @property
    def runtime_settings(self) -> Any:
        """The ``runtime:`` settings as a frozen object, every one at its declared default unless set
        (tradeoff.core.settings.RUNTIME); read from the config at each call (not cached: a copy of a catalog given another
        config must not answer with the original's). The device they name is tradeoff.core.runtime.Runtime's."""
        return runtime_settings(self.config["runtime"])

    def with_runtime(self, **changes: Any) -> "Catalog":
        """A copy of the catalog whose ``runtime:`` settings have these changed (e.g. ``eval_unit="attack"``)."""
        return dataclasses.replace(self, config={**self.config, "runtime": {**self.config["runtime"], **changes}})

    @property
    def generated_data(self) -> bool:
        """``scale_map.generated_data``: this scale's data are generated files (the rehearsal scale), whose numbers
        measure nothing about the methods."""
        return bool(self.config["scale_map"].get("generated_data"))

    @property
    def test_examples(self) -> int | None:
        """``scale_map.test_examples``: the test images an evaluation reads at this scale (None: all)."""
        return self.config["scale_map"].get("test_examples")

    def scaled_dataset(self, dataset: str) -> str:
        """The dataset that stands for a paper dataset at this scale (``scale_map.dataset``, else itself)."""
        return self.config["scale_map"].get("dataset") or dataset

    def standard_budget(self, dataset: str, norm: str) -> Any:
        """A dataset's standard budget for a norm as written (``datasets.<dataset>.<norm>``: '8/255', 0.3), or None."""
        return (self.config["datasets"].get(dataset) or {}).get(norm)

    @property
    def standard_budgets(self) -> FrozenDict:
        """``datasets:``, every dataset's standard budget per norm as written, frozen."""
        return freeze(self.config["datasets"])

    def written_attack(self, name: str) -> FrozenDict:
        """An attack (``attacks.<name>``, or ``train_attacks.<name>``) as written, before any run resolves it; empty
        for a name that is neither."""
        return freeze({**self.config.get("attacks", {}), **self.config.get("train_attacks", {})}.get(name, {}))

    def written_run(self, run_id: str) -> dict | None:
        """A run's settings as the catalog writes them (its preset under its own), before any scale maps them; None
        for a run that is not written under ``runs:`` (an external model, a seed's copy)."""
        raw = (self.config.get("runs") or {}).get(run_id)
        if raw is None:
            return None
        preset = (self.config.get("train_presets") or {}).get(raw.get("preset") or "", {})
        return merge(preset, {k: v for k, v in raw.items() if k != "preset"})

    def pretrained_file(self, arch: str) -> str | None:
        """``pretrained.<arch>`` as written: the backbone file an architecture starts from, None when unset."""
        return (self.config.get("pretrained") or {}).get(arch)

    def protocol_title(self, name: str) -> str:
        """What an evaluation protocol (``protocols.<name>``) is, in its title's words."""
        return self.config["protocols"][name]["title"]

    @property
    def resources(self) -> FrozenDict:
        """``resources:``, what the cost plan asks a scheduler for (empty when unset), frozen."""
        return freeze(self.config.get("resources") or {})

    @property
    def audit(self) -> AuditSpec | None:
        """The ``audit:`` block (every key the schema requires) as an :class:`AuditSpec`; None without one."""
        block = self.config.get("audit")
        return None if block is None else AuditSpec.from_dict(block)

    @property
    def scale(self) -> str:
        return self.config["scale"]

    @property
    def layout(self) -> Layout:
        """This scale's files (tradeoff.storage.layout): ``<paths.results>/<scale>/...``."""
        return Layout.of(self.config["paths"]["results"], self.scale)

    @property
    def results(self) -> Path:
        """This scale's results folder, ``<paths.results>/<scale>``."""
        return self.layout.root

    @property
    def data_root(self) -> Path:
        """``paths.data``; a GeneratedDataRoot (whose generated datasets are read) only where the scale says
        ``scale_map.generated_data`` (the rehearsal scale: tradeoff.data.generated)."""
        if self.generated_data:
            return GeneratedDataRoot(self.config["paths"]["data"])
        return Path(self.config["paths"]["data"])

    def training_runs(self) -> dict[str, RunSpec]:
        """Distinct training jobs: runs whose resolved settings are identical train once."""
        return {rid: spec for rid, spec in self.runs.items() if self.train_id[rid] == rid}

    def is_external(self, model_id: str) -> bool:
        """Whether a model id (a row's, an evaluation's) names an external model rather than a training job."""
        return model_id in self.externals

    def model_spec(self, run_id: str) -> RunSpec | ExternalSpec:
        """A run's resolved settings, or an external model's (``checkpoint``, ``arch``, ``dataset``, ...): ``run_id``
        a run id or an external id (every model id is one or the other)."""
        return self.externals[run_id] if run_id in self.externals else self.runs[run_id]

    def model_location(self, model_id: str) -> tuple[str, Path, ExternalSpec | None]:
        """Where a run's or external model's model is: (its train id: a run that builds on another's training is that
        job's model; its file; an external model's settings, None for a run), what
        tradeoff.evaluation.load.source_for takes."""
        train_id = self.train_id.get(model_id, model_id)
        return train_id, self.model_file(train_id), self.externals.get(train_id)

    def model_file(self, model_id: str) -> Path:
        """The file an evaluation of a training job or an external model reads: the run's model.pt, or the external
        model's checkpoint."""
        if model_id in self.externals:
            return Path(self.externals[model_id].checkpoint)
        return self.layout.model(model_id)

    def evaluation_inputs(self, model_id: str) -> list[str]:
        """What an evaluation job of a model (a training job's or an external one) reads besides attack-specific data: the
        model's file and, for an external model (which no training job of this pipeline precedes), its dataset's
        download marker."""
        if model_id in self.externals:
            spec = self.externals[model_id]
            return [spec.checkpoint, str(ready_marker(self.data_root, spec.dataset))]
        return [str(self.layout.model(model_id))]

    def evaluated_models(self) -> list[str]:
        """Every model that evaluation jobs evaluate: the training jobs, then the external models."""
        return sorted(self.training_runs()) + sorted(self.externals)

    def external_sha256(self, model_id: str) -> str | None:
        """The SHA-256 that an external model's metrics must have measured: the one its settings pin (``sha256``),
        else its checkpoint file's now; None when neither is known (no pin, no file)."""
        spec = self.externals[model_id]
        if spec.sha256:
            return spec.sha256
        path = Path(spec.checkpoint)
        try:
            stat = path.stat()
        except OSError:
            return None
        return _file_sha256(str(path.absolute()), stat.st_mtime_ns, stat.st_size)

    def pretrained_checkpoint(self, run_id: str, *, must_exist: bool = False) -> Path | None:
        """The backbone checkpoint that a run's training starts from (``pretrained.<arch>`` of its architecture), or
        None for an architecture trained from scratch. ConfigError naming the key and the file expected when the
        architecture needs one and none is set (or, ``must_exist``, when it is not a file): raised by the jobs
        that train such a run (Snakemake's DAG, ``tradeoff train``), so the rest of the catalog works without it."""
        spec = self.runs[run_id]
        if spec.pretrained is None:
            return None
        try:
            check = pretrained_checkpoint_path if must_exist else pretrained_setting
            return check(spec.arch, spec.pretrained.file)
        except PretrainedError as exc:
            raise ConfigError(f"runs.{run_id}: {exc}") from None

    def attack_for(self, name: str, run_id: str) -> AttackSpec:
        """The evaluation attack ``name`` resolved for a run's (or external model's) dataset and the scale: its
        ``type``, ``norm``, ``eps``, ``step_size`` and the parameters its type declares (tradeoff.core.params; the attack
        reads them as fields when it is built), frozen like a run's settings (tradeoff.core.spec: ``spec.replace(...)``
        for a changed copy). An attack whose eps is a list (a budget sweep) is one evaluation per budget, named
        ``<attack>@<label>`` (see attack_jobs)."""
        base, label = split_budget(name)
        if base not in self.attacks:
            raise ConfigError(unknown("attack", name, self.attack_jobs(), "`tradeoff list attacks` lists them"))
        key = f"attacks.{base}"
        spec = resolve_attack(self.attacks[base].as_dict(), self.model_spec(run_id), self.config, key)
        labels = sweep_labels(self.attacks[base], key)
        if labels is None and label is None:
            return AttackSpec.from_dict(spec)
        if labels is None or label not in labels:
            raise ConfigError(unknown("attack", name, self.attack_jobs(base)))
        eps = spec["eps"][labels.index(label)]
        return AttackSpec.from_dict({**spec, "eps": eps, "step_size": rel_step(spec.get("step_size"), eps, key)})

    def attack_in_norm(self, name: str, model_id: str, norm: str) -> AttackSpec | None:
        """Attack ``name`` resolved for a model at its dataset's standard budget in another norm (``datasets.<d>.<norm>``,
        rescaled for the scale as every budget is), its step keeping the ratio to the budget that it has in the
        attack's own norm (eps / 4 where it sets none): the audit's L2 checks. None where the dataset has no such
        budget."""
        raw = {k: v for k, v in self.attacks[name].as_dict().items() if k not in ("eps", "step_size")}
        try:
            spec = resolve_attack({**raw, "norm": str(norm)}, self.model_spec(model_id), self.config, f"attacks.{name}")
        except (ConfigError, KeyError, TypeError, ValueError):
            return None
        if not spec.get("eps"):
            return None
        own = self.attack_for(name, model_id)
        spec["step_size"] = spec["eps"] / 4 if own.step_size is None else own.step_size * spec["eps"] / own.eps
        return AttackSpec.from_dict(spec)

    def attack_jobs(self, name: str | None = None) -> list[str]:
        """Evaluation names: every attack, a sweep as one ``<attack>@<label>`` per budget (8/255 -> 8_255)."""
        names = [name] if name is not None else list(self.attacks)
        out = []
        for base in names:
            labels = sweep_labels(self.attacks[base], f"attacks.{base}")
            out += [base] if labels is None else [f"{base}@{label}" for label in labels]
        return out

    @property
    def eval_unit(self) -> str:
        """runtime.eval_unit: what one evaluation job evaluates, one attack of a run or all of them (ALL_ATTACKS)."""
        return self.runtime_settings.eval_unit

    def eval_units(self, model_id: str) -> list[str]:
        """The units of a model's evaluation jobs: its evaluation names, or ALL_ATTACKS (runtime.eval_unit: run)."""
        attacks = self.model_attacks(model_id)
        return ([ALL_ATTACKS] if attacks else []) if self.eval_unit == "run" else attacks

    def unit_of(self, attack: str) -> str:
        """The evaluation job (the file) that holds an evaluation: itself, or ALL_ATTACKS of its run."""
        return ALL_ATTACKS if self.eval_unit == "run" else attack

    def unit_attacks(self, model_id: str, unit: str) -> list[str]:
        """The evaluations that one evaluation job (model id, unit) makes."""
        return self.model_attacks(model_id) if unit == ALL_ATTACKS else [unit]

    def metrics_file(self, model_id: str, attack: str) -> Path:
        """The file that holds a model's metrics under an evaluation: its own, or the model's suite file."""
        return self.layout.metrics(model_id, self.unit_of(attack))

    def predictions_file(self, model_id: str, attack: str) -> Path:
        return self.layout.predictions(model_id, self.unit_of(attack))

    def model_attacks(self, model_id: str) -> list[str]:
        """Every evaluation (``name@label`` for a sweep) that some target needs of a model, sorted. A run id that is
        not a model id (a run that shares another's training job) is refused: its evaluations are its train id's."""
        if self.train_id.get(model_id, model_id) != model_id:
            raise ValueError(f"{model_id!r} is a run id, not a model id: its training job (and its evaluations) is "
                             f"{self.train_id[model_id]!r}")
        return self._attacks_by_training.get(model_id, [])

    @functools.cached_property
    def _attacks_by_training(self) -> dict[str, list[str]]:
        # computed once: the Snakefile asks it of every run (a scan of every target per run took seconds)
        found: dict[str, set[str]] = {}
        for name in self.targets:
            for rid, attack in self.evaluations(name):
                found.setdefault(rid, set()).add(attack)
        return {rid: sorted(a) for rid, a in found.items()}

    def shards_for(self, name: str) -> int:
        """How many shards (jobs) evaluate ``name``: the attack's ``shards``, else runtime.eval_shards, else 1 (and
        always 1 for an evaluation on corrupted images, a quick job that is never split, and for a run's suite)."""
        if name == ALL_ATTACKS:
            return 1
        spec = self.attacks[split_budget(name)[0]]
        if spec.corruptions:
            return 1
        return int(spec.shards or self.runtime_settings.eval_shards or 1)

    def leaf_targets(self, name: str) -> list[str]:
        """The tables and figures that a target builds (itself, or a group's members, recursively)."""
        target = self.targets[name]
        if target.kind != "group":
            return [name]
        return list(dict.fromkeys(t for member in target.targets for t in self.leaf_targets(member)))

    def _signature(self, name: str) -> str | None:
        """What a target computes at this scale: its kind, its rows' training jobs and its columns' evaluations (and
        any analysis or curves it draws); None for a group or a target without rows."""
        target = self.targets[name]
        if target.kind == "group" or not target.rows:
            return None
        rows = [[self.train_id[r] for r in self.row_runs(row.run)] for row in target.rows]
        columns = {k: self.column_jobs(a) if a not in PSEUDO_COLUMNS else [a] for k, a in target.columns.items()}
        protocol = target.protocol
        protocol_jobs = sorted({str(self.protocol_attack(name, j, r[0])) for js in columns.values() for j in js
                                for r in rows if j not in PSEUDO_COLUMNS}) if protocol else []
        what = {"kind": target.kind, "plot": target.plot, "rows": sorted(rows),
                "columns": sorted(columns.values()), "protocol": protocol_jobs,
                "curves": list(target.curve_columns) or None,
                "analysis": target.analysis.as_dict() if target.analysis else None}
        return json.dumps(what, sort_keys=True, default=str)

    @functools.cached_property
    def _twins(self) -> dict[str, str]:
        first: dict[str, str] = {}
        out: dict[str, str] = {}
        for name in self.targets:
            sig = self._signature(name)
            if sig is None:
                continue
            if sig in first:
                out[name] = first[sig]
            else:
                first[sig] = name
        return out

    def twin(self, name: str) -> str | None:
        """The first target of the catalog whose every cell this one repeats at this scale (the same training jobs
        under the same evaluations), or None."""
        return self._twins.get(name)

    def report_settings(self, name: str) -> dict:
        """What a target's report job reads of the catalog besides its input files (Snakemake's params and DVC's
        settings digest, the same): its settings (a group's with its members'), and the target each of them repeats
        at this scale, which its title names ("= table5 at this scale") and which another target's rows can change."""
        names = list(dict.fromkeys([name, *self.leaf_targets(name)]))
        return {**{t: self.targets[t].as_dict() for t in names}, "twins": {t: self.twin(t) for t in names}}

    def table_targets(self, name: str) -> list[str]:
        return [t for t in self.leaf_targets(name) if self.targets[t].kind == "table"]

    def table_models(self, name: str) -> list[str]:
        """The models (training jobs and external models) of every row of a table or a group's tables, in row order."""
        found: dict[str, None] = {}
        for leaf in self.table_targets(name):
            for row in self.targets[leaf].rows:
                for run in self.row_runs(row.run):
                    found[self.train_id.get(run, run)] = None
        return list(found)

    def built_audits(self) -> list[str]:
        """The models every build audits (``audit.build``: the tables whose rows' models, docs/audit.md): the default
        target and ``dvc repro`` write their audit pages before the tables that show them, which mark the columns an
        audit finds overstated; empty without an ``audit:`` block or ``audit.build``."""
        names = (self.audit.build if self.audit is not None else None) or ()
        return list(dict.fromkeys(m for name in names for m in self.table_models(name)))

    def reported_evaluations(self, model_id: str) -> list[tuple[str, str]]:
        """(model id, evaluation) of every column that the tables showing a model report for it (their protocols'
        too): what an audit of the model audits, so its job runs after them."""
        pairs: dict[tuple[str, str], None] = {}
        for name, target in self.targets.items():
            if target.kind != "table" or model_id not in self.table_models(name):
                continue
            for attack in self.target_attacks(name, model_id):
                pairs[(model_id, attack)] = None
        return list(pairs)

    def reported_files(self, model_id: str) -> list[str]:
        """The metrics and predictions files of :meth:`reported_evaluations` (an audit job's inputs besides its
        models)."""
        return list(dict.fromkeys(str(p) for model, attack in self.reported_evaluations(model_id)
                                  for p in (self.metrics_file(model, attack), self.predictions_file(model, attack))))

    def evaluations(self, target: str) -> list[tuple[str, str]]:
        """(model id, evaluation name) pairs that a target needs, without repeats."""
        pairs: dict[tuple[str, str], None] = {}
        for leaf in self.leaf_targets(target):
            for row in self.targets[leaf].rows:
                for run in self.row_runs(row.run):
                    for attack in self.target_attacks(leaf, run):
                        pairs[(self.train_id[run], attack)] = None
        return list(pairs)

    def target_attacks(self, target: str, run_id: str) -> list[str]:
        """The evaluations that a row of ``run_id`` needs in a target (its columns' jobs, and what its table's
        protocol runs in their place), in the columns' order: a table's suite."""
        jobs: dict[str, None] = {}
        for leaf in self.leaf_targets(target):
            for column in self.targets[leaf].columns.values():
                if column in PSEUDO_COLUMNS:
                    continue
                own = self.column_jobs(column)
                for attack in own + [p for p in (self.protocol_attack(leaf, j, run_id) for j in own) if p is not None]:
                    jobs[attack] = None
        return list(jobs)

    def protocol_attack(self, target: str, attack: str, run_id: str) -> str | None:
        """The evaluation that the authors' protocol of a table (its ``protocol:``) runs in place of ``attack`` for a
        run (a budget sweep's budget kept: ``caat_pgd@16_255`` -> ``caatcode_pgd@16_255``), or None when the table
        has no protocol or the protocol runs the column's own attack (mapped to the same resolved settings)."""
        name = self.targets[target].protocol
        if name is None:
            return None
        base, label = split_budget(attack)
        mapped = self.config["protocols"][name]["attacks"].get(base)
        if mapped is None:
            return None
        mapped = mapped if label is None else f"{mapped}@{label}"
        same = _same_settings(self.attack_for(mapped, run_id).as_dict(), self.attack_for(attack, run_id).as_dict())
        return None if same else mapped

    def column_jobs(self, column: str) -> list[str]:
        """The evaluation jobs of a target column: the attack job itself, or every budget of a budget sweep named
        without a budget (a `lines` figure over attack budgets, see budget_sweep_points)."""
        base, label = split_budget(column)
        if label is None and base in self.attacks and sweep_labels(self.attacks[base], f"attacks.{base}"):
            return self.attack_jobs(base)
        return [column]

    def budget_sweep_points(self, column: str) -> list[tuple[float, str, str]]:
        """(budget as written, its text, evaluation job) of each budget of a sweep attack, in the written order:
        the x axis of a `lines` figure whose columns name budget sweeps (CA-AT Figure 8)."""
        raw = self.attacks[column].eps
        return [(parse_budget(e, f"attacks.{column}.eps"), str(e), job)
                for e, job in zip(raw, self.attack_jobs(column))]

    def analysis_train_ids(self, target: str) -> list[str]:
        """Train ids whose checkpoints a target's analysis jobs read."""
        runs = [self.train_id[r.run] for leaf in self.leaf_targets(target)
                if self.targets[leaf].analysis for r in self.targets[leaf].rows]
        return list(dict.fromkeys(runs))

    def analysis_datasets(self, target: str) -> list[str]:
        """Datasets an analysis reads: its runs' and its own ``dataset`` (remapped like a run's at smaller
        scales)."""
        params = self.targets[target].analysis.params
        own = [self.config["scale_map"].get("dataset") or params["dataset"]] if "dataset" in params else []
        return sorted({*(self.runs[r].dataset for r in self.analysis_train_ids(target)), *own})

    def evaluation_datasets(self, model_id: str, attack: str) -> list[str]:
        """Datasets that an evaluation job reads besides its run's test set: the corruption dataset of an entry of
        type `corruptions` (its download marker is an input of the job), else none."""
        spec = self.attacks[split_budget(attack)[0]]
        # the mapped name only: resolve() checked every evaluation (attack_for), and checking it again here would
        # import the dataset registry (PyTorch) in the Snakefile
        return [corruption_set(spec, self.config)] if spec.corruptions else []

    def evaluation_markers(self, model_id: str, attacks: list[str]) -> list[str]:
        """The download markers of the datasets that evaluating ``attacks`` of a model reads besides its test set (the
        corruption dataset of an NROB entry): inputs of its evaluation job."""
        return sorted({str(ready_marker(self.data_root, dataset))
                       for attack in attacks for dataset in self.evaluation_datasets(model_id, attack)})

    def datasets(self) -> list[str]:
        """Every dataset that some job of the catalog reads."""
        return sorted({s.dataset for s in [*self.runs.values(), *self.externals.values()]}
                      | {d for t in self.analysis_targets() for d in self.analysis_datasets(t)}
                      | {d for t in self.targets for run, attack in self.evaluations(t)
                         for d in self.evaluation_datasets(run, attack)})

    def analysis_targets(self, target: str | None = None) -> list[str]:
        """Figure targets with an analysis job (of one target, or of the whole catalog)."""
        leaves = self.targets if target is None else self.leaf_targets(target)
        return [t for t in leaves if self.targets[t].analysis]

    def curve_train_ids(self, target: str) -> list[str]:
        """Train ids whose per-epoch curves a target plots (an external model has none: its training time is
        not known)."""
        runs = [self.train_id[r.run] for leaf in self.leaf_targets(target)
                if self.targets[leaf].plot == "curves" for r in self.targets[leaf].rows]
        runs += [self.train_id[run] for leaf in self.leaf_targets(target)
                 if "train:minutes" in self.targets[leaf].columns.values()
                 for r in self.targets[leaf].rows for run in self.row_runs(r.run)]
        return [run for run in dict.fromkeys(runs) if run not in self.externals]


#: an external model's settings that say where its file is, not what it computes: its metrics record the file's
#: SHA-256, which a report checks on its own (tradeoff.report.records)
@functools.lru_cache(maxsize=64)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    return sha256_file(path)


def _same_settings(a: Any, b: Any) -> bool:
    """Resolved settings equal up to float rounding: a step written as ``eps*0.223125`` and one written as 0.007 are
    one attack at 8/255 (6.999999999999999e-3 against 7e-3), so the protocol runs the column's own job."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_settings(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_settings(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
                and not isinstance(b, bool) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12))
    return a == b and type(a) is type(b)
