"""The registry of figure kinds: a target's ``plot`` names one, declared (with what it needs of a target, and its
check) in :mod:`tradeoff.core.targets`. A kind draws into the panels the layout made for it (``panels(catalog, name,
target)`` says how many), or lays out a figure of its own (``panels`` None). The ``fig_*`` modules register their
kinds with :func:`figure_kind`; :mod:`tradeoff.report.figures` imports them all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tradeoff.core.registry import Registry
from tradeoff.core.targets import PLOTS


@dataclass(frozen=True)
class Kind:
    draw: Callable                  # draw(catalog, name, target, axes) -> None, or (own layout) -> Figure
    panels: Callable | None = None  # panels(catalog, name, target) -> int; None: the kind makes its own figure


KINDS = Registry("figure kind")


def figure_kind(name: str, panels: Callable | None = None, *, own: bool = False) -> Callable:
    """Register ``draw`` as the figure kind ``name`` (which tradeoff.core.targets must declare): drawn into
    ``panels(...)`` panels (1 by default), or, with ``own``, a function that makes and returns its whole figure."""
    if name not in PLOTS:
        raise ValueError(f"figure kind {name!r} is not declared in tradeoff.core.targets; declared: {sorted(PLOTS)}")

    def register(draw: Callable) -> Callable:
        KINDS.register(Kind(draw, None if own else (panels or (lambda catalog, target_name, target: 1))), name=name)
        return draw
    return register
