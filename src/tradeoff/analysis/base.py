"""The registry of analyses (one :class:`~tradeoff.registry.Registry`, as methods, attacks, models and figure
kinds): an analysis module decorates its job function with :func:`register`, naming the analysis and, optionally,
the check of its parameters that runs when the config is resolved. tradeoff.analysis imports every analysis module;
each keeps its top-level imports light (PyTorch, scikit-learn: inside the functions, or through tradeoff.lazy), so
that the report jobs, which only read an analysis's JSON, start without them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..registry import Registry


@dataclass(frozen=True)
class Analysis:
    name: str
    run: Callable        # run(catalog, target_name, params) -> dict (JSON-serialisable), deterministic
    check: Callable | None = None  # check(target, key, attacks): raises ConfigError naming the key


ANALYSES = Registry("analysis")


def register(name: str, check: Callable | None = None) -> Callable:
    """Register the decorated function as the analysis ``name``, its parameters checked by ``check``."""
    def add(run: Callable) -> Callable:
        ANALYSES.register(Analysis(name, run, check))
        return run
    return add
