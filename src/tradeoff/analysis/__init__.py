"""Analyses: measurements that a figure needs beyond one attack's accuracy (t-SNE embeddings, image grids, the
CA-AT synthetic experiment). A figure target names one with ``analysis: {name: ..., <params>}``; the job
``tradeoff analyze TARGET`` reads the checkpoints of the target's rows (and the test data) and writes
``results/analysis/<target>.json``. The figure then reads only that file, so regenerating figures needs no
checkpoint.

An analysis is registered here by name as ``"module:function"`` (imported lazily, so the CLI starts fast);
the function is ``fn(catalog, target_name, params) -> dict`` (JSON-serialisable) and must be deterministic
(seeded from ``params`` or the catalog).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

# name -> "module:function"; add a line here for a new analysis (README "Extending").
ANALYSES: dict[str, str] = {
    "disagreement_grid": "tradeoff.analysis.disagreement:disagreement_grid",
    "caat_synthetic": "tradeoff.analysis.caat_synthetic:caat_synthetic",
    "learner_tsne": "tradeoff.analysis.learner_tsne:learner_tsne",
}
# name -> "module:function" checking an analysis's parameters when the config is resolved (optional):
# ``fn(target, key, attacks)`` raises ConfigError naming the key. Keep the module's top-level imports light.
CHECKS: dict[str, str] = {
    "disagreement_grid": "tradeoff.analysis.disagreement:check_params",
    "learner_tsne": "tradeoff.analysis.learner_tsne:check_params",
}


def register(name: str, where: str) -> None:
    """Register ``name`` as the analysis ``where`` = "tradeoff.analysis.module:function"."""
    ANALYSES[name] = where


def resolve(name: str):
    if name not in ANALYSES:
        raise KeyError(name)
    module, _, function = ANALYSES[name].partition(":")
    return getattr(importlib.import_module(module), function)


def check(target: dict, key: str, attacks: dict) -> None:
    """Run the registered parameter check of a target's analysis, if it has one."""
    where = CHECKS.get(target["analysis"]["name"])
    if where is not None:
        module, _, function = where.partition(":")
        getattr(importlib.import_module(module), function)(target, key, attacks)


def run_analysis(catalog, target: str) -> Path:
    """Compute the analysis of a figure target and write its JSON atomically."""
    from ..atomic import atomic_write_text
    from ..provenance import provenance

    spec = dict(catalog.targets[target]["analysis"])
    name = spec.pop("name")
    result: dict[str, Any] = resolve(name)(catalog, target, spec)
    result = {"analysis": name, "target": target, "scale": catalog.scale, "params": spec, **result,
              "provenance": provenance()}
    path = catalog.layout.analysis(target)
    atomic_write_text(path, json.dumps(result, indent=1, sort_keys=False) + "\n")
    return path


def read_analysis(catalog, target: str) -> dict | None:
    path = catalog.layout.analysis(target)
    return json.loads(path.read_text()) if path.exists() else None
