"""``tradeoff show NAME``: the fully resolved settings of a run, an attack or a target, as YAML, with where each value
that is not a default came from: a training preset, a design block (its settings, family, base, variant or run
change), a plain run entry, the scale's mapping, and which config file (the base file or an overlay) wrote it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterable

import yaml

from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.config.catalog import Catalog
from tradeoff.config.design import _method, _sweep, _table
from tradeoff.config.load import CORRUPTIONS_TYPE, load_yaml, merge
from tradeoff.config.resolve import RUN_DEFAULTS
from tradeoff.config.scale import resolve_attack
from tradeoff.core.errors import ConfigError, unknown
from tradeoff.core.spec import thaw
from tradeoff.methods import METHODS

#: where a resolved run setting that differs from what its files wrote comes from: the scale's mapping
#: (the scale_map key whose file is named, the label)
SCALED = {"dataset": ("dataset", "scale_map.dataset"), "arch": ("arch", "scale_map.arch"),
          "epochs": ("epochs", "scale_map.epochs"), "batch_size": ("batch_size", "scale_map.batch_size"),
          "lr": ("lr", "scale_map.lr, preset_lr, lr_factor or epochs"),
          "optimizer.weight_decay": ("weight_decay", "scale_map.weight_decay"),
          "augment": ("dataset", "scale_map.dataset (no augmentation)"),
          "train_examples": ("train_examples", "scale_map.train_examples or steps_per_epoch"),
          "test_examples": ("test_examples", "scale_map.test_examples"),
          "eps_warmup": ("eps_warmup", "scale_map.eps_warmup"), "selection.every": ("epochs", "scale_map.epochs")}


def show(catalog: Catalog, paths: Iterable[str | Path], name: str) -> str:
    """The YAML text that ``tradeoff show NAME`` prints: NAME is a run (a seed's run too), an attack (of
    ``attacks`` or ``train_attacks``, or a budget of a sweep, ``name@label``) or a target; ConfigError with the
    closest names otherwise."""
    files = [(str(p), load_yaml(p)) for p in paths]
    if name in catalog.runs:
        out = _run(catalog, files, name)
    elif name.partition("@")[0] in catalog.attacks or name in catalog.config.get("train_attacks", {}):
        out = _attack(catalog, files, name)
    elif name in catalog.targets:
        out = _target(catalog, files, name)
    else:
        names = [*catalog.runs, *catalog.attack_jobs(), *catalog.config.get("train_attacks", {}), *catalog.targets]
        raise ConfigError(unknown("name", name, names, "`tradeoff list runs`, `list attacks`, `list targets` "
                                                       "list them"))
    return yaml.safe_dump(thaw(out), sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def _file(files: list[tuple[str, dict]], *path: Any) -> str:
    """The last config file that writes ``path`` (or the part of it that it writes), for a source's label."""
    for length in range(len(path), 0, -1):
        for name, raw in reversed(files):
            node: Any = raw
            for part in path[:length]:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                return name
    return files[0][0]


def _leaves(value: Any, prefix: str = "", depth: int | None = None) -> dict[str, Any]:
    """A nested mapping as dotted keys -> values (lists and a method's parameter values are leaves)."""
    if not isinstance(value, dict) or depth == 0 or not value or {"type", "eps"} <= set(value):  # (an attack)
        return {prefix: value} if prefix else {}
    out: dict[str, Any] = {}
    for key, inner in value.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        # a method's parameters are leaves (a mapping parameter is set whole)
        out.update(_leaves(inner, path, 1 if path == "method" else None if depth is None else depth - 1))
    return out


def _design_layers(merged: dict, files: list[tuple[str, dict]], rid: str) -> list[tuple[str, dict]]:
    """The parts of the run design that make run ``rid``, in the order they merge: (source, run settings)."""
    for block_name, block in (merged.get("design") or {}).items():
        key = f"design.{block_name}"
        file = _file(files, "design", block_name)
        families = _table(block["families"], f"{key}.families", "families")
        base = block.get("base")
        for vname, where, given in _table(block["variants"], f"{key}.variants", "variants"):
            for vid, method in _sweep(vname, where, _method(given, base, where)):
                for family, fam_where, fam in families:
                    if f"{family}-{vid}" != rid:
                        continue
                    layers = [(f"{key}.settings ({file})", block.get("settings") or {}),
                              (f"{fam_where} ({file})", fam)]
                    if base is not None and method.get("name") == base.get("name"):
                        layers.append((f"{key}.base ({file})", {"method": base}))
                    layers.append((f"{where} ({file})", {"method": {k: v for k, v in method.items()
                                                                    if base is None or k not in base
                                                                    or base[k] != v or k in given}}))
                    change = (block.get("runs") or {}).get(rid)
                    if change:
                        layers.append((f"{key}.runs.{rid} ({file})", change))
                    return layers
    return []


def _run(catalog: Catalog, files: list[tuple[str, dict]], rid: str) -> dict:
    merged: dict = {}
    for _, raw in files:
        merged = merge(merged, raw)
    written = next((base for base, ids in catalog.seed_runs.items() if rid in ids), rid)
    plain = (merged.get("runs") or {}).get(written) or {}
    layers = _design_layers(merged, files, written)
    expanded = catalog.config["runs"][written]
    preset = expanded.get("preset")
    if preset is not None:
        layers.insert(0, (f"train_presets.{preset} ({_file(files, 'train_presets', preset)})",
                          catalog.config["train_presets"][preset]))
    if plain:
        layers.append((f"runs.{written} ({_file(files, 'runs', written)})", plain))
    if "seeds" in expanded:
        layers.append((f"runs.{written}.seeds", {"seed": catalog.runs[rid].seed}))

    run = catalog.runs[rid]
    spec = run.as_dict()  # the settings as YAML shows them, a path per leaf

    method_name = run.method.name
    before: dict[str, Any] = _leaves({**copy.deepcopy(RUN_DEFAULTS),
                                      "method": {"name": method_name,
                                                 **METHODS[method_name].parameters.defaults()}})
    sources: dict[str, str] = {}
    for label, settings in layers:
        for path, value in _leaves({k: v for k, v in settings.items() if k != "preset"}).items():
            before = {k: v for k, v in before.items() if not (k.startswith(path + ".") or path.startswith(k + "."))}
            before[path], sources[path] = value, label
    out_sources: dict[str, str] = {}
    for path, value in _leaves(spec).items():
        if path.startswith("paper_"):
            continue
        head = path.split(".")[0]
        if path.startswith("method.") and isinstance(value, dict) and "type" in value and "eps" in value:
            named = before.get(path)
            pool = "train_attacks" if named in catalog.config.get("train_attacks", {}) else "attacks"
            what = f"{pool}.{named}" if isinstance(named, str) else "an attack written in place"
            out_sources[path] = (f"{what}, resolved for the run at scale {catalog.scale}"
                                 + (f" (named by {sources[path]})" if path in sources else
                                    f" (method {method_name}'s default)"))
        elif path == "selection.attack":
            out_sources[path] = f"attacks.{before.get(path)}, resolved for the run at scale {catalog.scale}" + (
                f" (named by {sources[path]})" if path in sources else " (the default selection attack)")
        elif path in before and _same(before[path], value):
            if path in sources:
                out_sources[path] = sources[path]
        elif path == "pretrained":
            out_sources[path] = f"pretrained.{run.arch} ({_file(files, 'pretrained', run.arch)})"
        elif path == "selection.validation":
            out_sources[path] = (f"validation.{run.dataset} ({_file(files, 'validation', run.dataset)})"
                                 if run.selection.split == "validation" else "selection.split: test (none held out)")
        else:
            key = next((k for k in (path, head, ".".join(path.split(".")[:2])) if k in SCALED), None)
            if key is not None:
                written_by, text = SCALED[key]
                out_sources[path] = f"{text} ({_file(files, 'scale_map', written_by)})"
            elif path.startswith("method."):
                declared = _declared(method_name, path.split(".")[1])
                why = ("scale_map.epochs (epoch-valued)" if declared and declared.epochs else
                       "scale_map.lr_factor (a learning rate)" if declared and declared.lr else
                       f"method {method_name}'s canonical form")
                out_sources[path] = why + (f"; written by {sources[path]}" if path in sources else "")
            else:
                out_sources[path] = f"resolved at scale {catalog.scale}"
    return {"run": rid, "training_job": catalog.train_id[rid], "scale": catalog.scale, "settings": spec,
            "sources": out_sources}


def _declared(method: str, name: str):

    params = METHODS[method].parameters
    return params[name] if name in params else None


def _same(a: Any, b: Any) -> bool:
    return a == b and type(a) is type(b) or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                              and not isinstance(a, bool) and a == b)


def _attack(catalog: Catalog, files: list[tuple[str, dict]], name: str) -> dict:
    base, _, label = name.partition("@")
    section = "attacks" if base in catalog.attacks else "train_attacks"
    written = catalog.config[section][base]
    out: dict[str, Any] = {"attack": name, "section": section, "scale": catalog.scale}
    if written["type"] == CORRUPTIONS_TYPE:
        settings = dict(written)
    else:

        settings = {"type": written["type"], "norm": "linf", "eps": None,
                    **ATTACK_DECLARATIONS[written["type"]].parameters.defaults(), **written}
    out["settings"] = settings
    out["sources"] = {key: f"{section}.{base} ({_file(files, section, base, key)})" for key in written}
    # as each dataset's runs evaluate (or train with) it at this scale: the budget's ratio to the dataset's standard
    # one, the scale's caps on steps and queries
    resolved: dict[str, Any] = {}
    for rid, spec in catalog.runs.items():
        where = f"{spec.paper_dataset} -> {spec.dataset}" if spec.paper_dataset != spec.dataset else spec.dataset
        if where in resolved:
            continue
        try:
            resolved[where] = (catalog.attack_for(name, rid) if section == "attacks" else
                               resolve_attack(written, spec, catalog.config, f"{section}.{base}", training=True))
        except ConfigError as exc:
            resolved[where] = f"not resolvable: {exc}"
    out["resolved"] = resolved
    return out


def _target(catalog: Catalog, files: list[tuple[str, dict]], name: str) -> dict:
    target = catalog.targets[name].as_dict()
    sources = {key: f"targets.{name} ({_file(files, 'targets', name, key)})" for key in target}
    raw = next((r for _, r in reversed(files) if name in (r.get("targets") or {})), {})
    family = ((raw.get("targets") or {}).get(name) or {}).get("family")
    if family is not None and "rows" in sources:  # the rows' {family} is the target's family (design.expand_targets)
        sources["rows"] += f", {{family}} = {family}"
    runs = {row["run"]: {r: catalog.train_id[r] for r in catalog.row_runs(row["run"])} for row in target.get("rows", [])}
    return {"target": name, "scale": catalog.scale, "settings": target, "sources": sources,
            "training_jobs": runs, "evaluations": [f"{run} {attack}" for run, attack in catalog.evaluations(name)]}
