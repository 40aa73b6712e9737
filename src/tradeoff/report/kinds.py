"""How a figure kind is drawn: a target's ``plot`` names a kind declared once, with what it needs of a target and its
check, in :data:`tradeoff.core.targets.PLOTS`; :func:`figure_kind` attaches a drawing to that declaration (no second
registry). A kind draws into the panels the layout made for it (``panels(catalog, name, target)`` says how many), or
lays out a figure of its own (``panels`` None). The ``fig_*`` modules attach their kinds' drawings with
:func:`figure_kind`; :mod:`tradeoff.report.figures` imports them all and reads a kind's drawing with :func:`drawing`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tradeoff.core.targets import PLOTS


@dataclass(frozen=True)
class Kind:
    draw: Callable                  # draw(catalog, name, target, axes) -> None, or (own layout) -> Figure
    panels: Callable | None = None  # panels(catalog, name, target) -> int; None: the kind makes its own figure


def figure_kind(name: str, panels: Callable | None = None, *, own: bool = False) -> Callable:
    """Attach ``draw`` to the figure kind ``name`` (which tradeoff.core.targets must declare): drawn into
    ``panels(...)`` panels (1 by default), or, with ``own``, a function that makes and returns its whole figure."""
    if name not in PLOTS:
        raise ValueError(f"figure kind {name!r} is not declared in tradeoff.core.targets; declared: {sorted(PLOTS)}")

    def register(draw: Callable) -> Callable:
        PLOTS[name].draw_with(Kind(draw, None if own else (panels or (lambda catalog, target_name, target: 1))))
        return draw
    return register


def drawing(name: str) -> Kind:
    """How the figure kind ``name`` is drawn (its module imported: tradeoff.report.figures imports them all)."""
    kind = PLOTS[name].drawing
    if kind is None:
        raise LookupError(f"figure kind {name!r} is declared but no module of tradeoff.report draws it")
    return kind


def drawn() -> list[str]:
    """The figure kinds that a loaded module draws."""
    return sorted(name for name, kind in PLOTS.items() if kind.drawing is not None)
