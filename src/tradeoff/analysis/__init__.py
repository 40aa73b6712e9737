"""Analyses: measurements that a figure needs beyond one attack's accuracy (t-SNE embeddings, image grids, the
CA-AT synthetic experiment). A figure target names one with ``analysis: {name: ..., <params>}``; the job
``tradeoff analyze TARGET`` reads the checkpoints of the target's rows (and the test data) and writes
``results/analysis/<target>.json`` (what it computed; the commit, versions and seconds in its sidecar,
``<target>.json.provenance.json``). The figure then reads only that file, so regenerating figures needs no
checkpoint.

An analysis is declared, with the check of its parameters, in tradeoff.core.targets; its module registers its job with
``@register(name)`` (tradeoff.analysis.base) and is imported here; the job is ``fn(catalog, target_name, params) ->
dict`` (JSON-serialisable) and must be deterministic (seeded from ``params`` or the catalog).

May import: core, storage, data, models, attacks, config, evaluation.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tradeoff.analysis import caat_synthetic, disagreement, learner_tsne  # noqa: F401  (they register the analyses)
from tradeoff.analysis.base import ANALYSES, Analysis, register  # noqa: F401
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.storage.provenance import write_sidecar


def run_analysis(catalog, target: str) -> Path:
    """Compute the analysis of a figure target and write its JSON atomically."""
    spec = catalog.targets[target].analysis.as_dict()
    name = spec.pop("name")
    t0 = time.perf_counter()
    result: dict[str, Any] = ANALYSES[name].run(catalog, target, spec)
    seconds = time.perf_counter() - t0
    result = {"analysis": name, "target": target, "scale": catalog.scale, "params": spec, **result}
    path = catalog.layout.analysis(target)
    atomic_write_text(path, json.dumps(result, indent=1, sort_keys=False) + "\n")
    write_sidecar(path, {"seconds": seconds})  # how it ran: beside the analysis, whose bytes are what it computed
    return path
