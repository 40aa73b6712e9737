"""The registry of analyses (one :class:`~tradeoff.core.registry.Registry`, as methods, attacks, models and figure
kinds): an analysis module decorates its job function with :func:`register`, naming an analysis declared in
:mod:`tradeoff.core.targets` (which also holds the check of its parameters that runs when the config is resolved).
tradeoff.analysis imports every analysis module; each keeps its top-level imports light (PyTorch, scikit-learn:
inside the functions, or through tradeoff.core.lazy_imports), so that the report jobs, which only read an analysis's JSON, start
without them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tradeoff.core.registry import Registry
from tradeoff.core.targets import ANALYSIS_KINDS


@dataclass(frozen=True)
class Analysis:
    name: str
    run: Callable        # run(catalog, target_name, params) -> dict (JSON-serialisable), deterministic


ANALYSES = Registry("analysis")


def register(name: str) -> Callable:
    """Register the decorated function as the analysis ``name``, which tradeoff.core.targets must declare."""
    if name not in ANALYSIS_KINDS:
        raise ValueError(f"analysis {name!r} is not declared in tradeoff.core.targets; declared: {sorted(ANALYSIS_KINDS)}")

    def add(run: Callable) -> Callable:
        ANALYSES.register(Analysis(name, run))
        return run
    return add
