"""Checks of the configuration beyond its schema: names against the registries, budgets, schedules, numeric ranges
(one declaration per parameter, tradeoff.core.params), targets and their tables' comparisons. Each raises ConfigError
naming the key and what is allowed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tradeoff.config.budgets import MAX_EPS, parse_budget, split_budget, sweep_labels
from tradeoff.config.load import ALL_ATTACKS, CORRUPTIONS_TYPE, PSEUDO_COLUMNS
from tradeoff.core.errors import ConfigError, unknown
from tradeoff.core.params import TEXT, Param
from tradeoff.core.settings import runtime_settings
from tradeoff.core.spec import AttackSpec
from tradeoff.core.targets import PLOTS, Attacks, TargetSpec, check_analysis

#: what every entry of attacks: and train_attacks: has besides its type's parameters (its budget is resolved per run)
ENTRY_KEYS = ("type", "eps", "norm", "shards")


def _check_choice(value: Any, allowed: list[str], key: str, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    if value not in allowed:
        raise ConfigError(f"{key}: unknown value {value!r}; allowed: {allowed}")


def _check_arch_map(mapping: str | dict | None, archs: list[str]) -> None:
    if not isinstance(mapping, dict):
        _check_choice(mapping, archs, "scale_map.arch", nullable=True)
        return
    for paper, arch in mapping.items():
        if paper != "default" and paper not in archs:
            raise ConfigError(f"scale_map.arch.{paper}: unknown architecture {paper!r} to map; allowed: {archs} "
                              "or `default`")
        _check_choice(arch, archs, f"scale_map.arch.{paper}")


def _check_eps(eps: float, norm: str, key: str) -> None:
    if eps > MAX_EPS[norm]:
        raise ConfigError(f"{key}: eps {eps:g} is absurd for the {norm} norm on [0, 1] images "
                          f"(allowed: 0 <= eps <= {MAX_EPS[norm]:g})")


def _check_schedule(schedule: dict, key: str, length: int | None = None) -> None:
    epochs, values = schedule["epochs"], schedule["values"]
    if len(epochs) != len(values):
        raise ConfigError(f"{key}: {len(epochs)} breakpoints (epochs) but {len(values)} values; "
                          "they must have the same length")
    if length is not None and len(epochs) != length:
        raise ConfigError(f"{key}: expected {length} breakpoints, got {len(epochs)}")
    if any(b <= a for a, b in zip(epochs, epochs[1:])):
        raise ConfigError(f"{key}.epochs: breakpoints must be strictly increasing, got {epochs}")


def _check_corruptions_entry(spec: dict, key: str, corruption_sets: list[str]) -> None:
    unknown = set(spec) - {"type", "dataset"}
    if unknown:
        raise ConfigError(f"{key}: unknown key(s) {sorted(unknown)} for type {CORRUPTIONS_TYPE!r}; allowed: "
                          "['dataset', 'type']")
    if "dataset" not in spec:
        raise ConfigError(f"{key}: type {CORRUPTIONS_TYPE!r} needs `dataset`, the corruption dataset; allowed: "
                          f"{corruption_sets}")
    _check_choice(spec["dataset"], corruption_sets, f"{key}.dataset")


def _check_attack(spec: dict, key: str, registry: dict) -> None:
    kind = spec["type"]
    if kind not in registry:
        allowed = sorted(registry) + ([CORRUPTIONS_TYPE] if key.startswith("attacks.") else [])
        raise ConfigError(f"{key}.type: unknown attack {kind!r}; allowed: {allowed}")
    cls = registry[kind]
    # its own parameters (one declaration each, tradeoff.core.params), and what every attack entry has
    cls.parameters.check({k: v for k, v in spec.items() if k not in ENTRY_KEYS}, key,
                         what=f"parameter of attack type {kind!r}")
    norm = spec.get("norm", "linf")
    Param("norm", TEXT, choices=cls.norms).check(norm, f"{key}.norm")
    eps_values = spec.get("eps")
    for i, value in enumerate(eps_values if isinstance(eps_values, list) else [eps_values]):
        if value is not None:
            _check_eps(parse_budget(value, f"{key}.eps"), norm, f"{key}.eps" + (f"[{i}]" if isinstance(eps_values, list) else ""))


def _lookup(config: Any, dotted: str) -> Any:
    """The value at a key written as ranges.nonfinite writes it (``a.b[2].c``)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        config = config[int(part[1:-1])] if part.startswith("[") else config[part]
    return config


def _check_eval_unit(config: dict) -> None:
    """runtime.eval_unit: run evaluates every attack of a run in one job: there is no job per shard to split; and
    ALL_ATTACKS names that job, so no attack may take the name."""
    runtime = runtime_settings(config["runtime"])
    if ALL_ATTACKS in config["attacks"]:
        raise ConfigError(f"attacks.{ALL_ATTACKS}: the name is taken (the job that evaluates every attack of a run); "
                          "rename the attack")
    if runtime.eval_unit != "run":
        return
    sharded = [f"runtime.eval_shards = {runtime.eval_shards}"] if runtime.eval_shards > 1 else []
    sharded += [f"attacks.{name}.shards = {spec['shards']}" for name, spec in config["attacks"].items()
                if (spec.get("shards") or 1) > 1]
    if sharded:
        raise ConfigError(f"runtime.eval_unit: run cannot be combined with sharding ({', '.join(sharded)}); set "
                          "runtime.eval_unit: attack to shard, or remove the shards")


def _check_comparison(name: str, target: dict, config: dict, references: Path) -> None:
    """A table's ``reference`` file, ``compare`` row and ``protocol``, and every attack a protocol names."""
    key = f"targets.{name}"
    if target["kind"] != "table":
        for field_name in ("compare", "protocol"):
            if field_name in target:
                raise ConfigError(f"{key}.{field_name}: only a table has `{field_name}`")
        return
    reference = target.get("reference")
    if reference is not None and not (references / f"{reference}.csv").is_file():
        known = sorted(p.stem for p in references.glob("*.csv"))
        raise ConfigError(f"{key}.reference: no file {references / reference}.csv; allowed: {known}")
    keys = [row["key"] for row in target["rows"]]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{key}.rows: row keys repeat: {sorted({k for k in keys if keys.count(k) > 1})}")
    compare = target.get("compare", [])
    for row_key in [compare] if isinstance(compare, str) else compare:
        if row_key not in keys:
            raise ConfigError(f"{key}.compare: {row_key!r} is not a row key of the table; allowed: {keys}")
    protocols = config.get("protocols") or {}
    if "protocol" in target and target["protocol"] not in protocols:
        raise ConfigError(f"{key}.protocol: unknown protocol {target['protocol']!r}; allowed: {sorted(protocols)}")
    if "protocol" in target:
        mapping = protocols[target["protocol"]]["attacks"]
        for column, attack in target["columns"].items():
            base, _ = split_budget(attack)
            mapped = mapping.get(base)
            if mapped is None:
                continue
            where = f"protocols.{target['protocol']}.attacks.{base}"
            if mapped not in config["attacks"]:
                raise ConfigError(f"{where}: unknown attack {mapped!r}; allowed: {sorted(config['attacks'])}")
            if sweep_labels(config["attacks"][mapped], f"attacks.{mapped}") != \
                    sweep_labels(config["attacks"][base], f"attacks.{base}"):
                raise ConfigError(f"{where}: {mapped!r} must run the budgets of {base!r} (the same eps list)")


def _check_target(name: str, target: dict, targets: dict, runs: dict, attacks: dict,
                  externals: dict | None = None) -> None:
    """What every target needs (its rows: runs or external models; its columns: attacks; a group's members); what
    a figure kind or an analysis needs besides is its declaration's check (tradeoff.core.targets)."""
    key = f"targets.{name}"
    externals = externals or {}
    if target["kind"] == "group":
        for member in target.get("targets", []):
            if member not in targets:
                raise ConfigError(f"{key}.targets: " + unknown("target", member, targets))
        return
    spec = TargetSpec.from_dict(target)  # what the kinds' checks read (tradeoff.core.targets)
    plot = None
    if target["kind"] == "figure" and "plot" in target:
        if target["plot"] not in PLOTS:  # the schema's enum refuses it first
            raise ConfigError(f"{key}.plot: " + unknown("figure kind", target["plot"], PLOTS))
        plot = PLOTS[target["plot"]]
    needed = {"table": ("rows", "columns"),
              "figure": ("rows", "plot") + (plot.fields(spec, key) if plot is not None else ())}
    for field_name in needed[target["kind"]]:
        if field_name not in target:
            raise ConfigError(f"{key}: a {target['kind']} needs `{field_name}`")
    view = Attacks({n: AttackSpec.from_dict(a) for n, a in attacks.items()}, split_budget, lambda a: sweep_labels(attacks[a], f"attacks.{a}"), CORRUPTIONS_TYPE)
    if "analysis" in target:
        check_analysis(spec, key, view)
    if plot is not None and plot.check is not None:
        plot.check(name, spec, key, view)
    # a column may name a budget sweep whole where the kind draws over its budgets
    sweeps = [a for a in target.get("columns", {}).values()
              if plot is not None and plot.sweeps and a in attacks and view.sweep(a) is not None]
    for i, row in enumerate(target["rows"]):
        if "external" in row:  # design.expand_targets: `run` repeats the external model's id
            if row["external"] not in externals:
                raise ConfigError(f"{key}.rows[{i}].external: " + unknown("external model", row["external"], externals)
                                  + " (the config's `external:` section)")
            trained = "reads an analysis of" if "analysis" in target else plot.trained if plot is not None else None
            if trained:
                raise ConfigError(f"{key}.rows[{i}].external: {row['external']!r} is an external model: a figure "
                                  f"that {trained} its rows needs trained runs")
        elif row["run"] in externals:
            raise ConfigError(f"{key}.rows[{i}].run: {row['run']!r} is an external model (`external:`), not a run: "
                              f"write `external: {row['run']}`")
        elif row["run"] not in runs:
            raise ConfigError(f"{key}.rows[{i}].run: " + unknown("run", row["run"], runs))
    for column, attack in target.get("columns", {}).items():
        if attack in PSEUDO_COLUMNS:
            if target["kind"] != "table":
                raise ConfigError(f"{key}.columns.{column}: {attack!r} is a table-only column")
            continue
        base, label = split_budget(attack)
        labels = sweep_labels(attacks[base], f"attacks.{base}") if base in attacks else None
        if attack in sweeps:
            continue
        if base not in attacks or (label is None) != (labels is None) or (label is not None and label not in labels):
            allowed = [n for a in attacks for n in ([a] if sweep_labels(attacks[a], a) is None
                                                    else [f"{a}@{lab}" for lab in sweep_labels(attacks[a], a)])]
            raise ConfigError(f"{key}.columns.{column}: " + unknown("attack", attack, allowed)
                              + " (a budget sweep is named <attack>@<budget label>)")
