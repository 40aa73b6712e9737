"""Figures as PNG and PDF, from metrics, predictions and curves files only (never checkpoints), one style.

A figure target of the catalog names its ``plot`` kind, its rows (runs, with labels and, for swept
parameters, an x value) and its columns (measurement -> attack). Every figure says the scale it was made at.
Kinds: scatter (clean vs robust, ours against the paper's points), bars (grouped per row), lines (a metric
over a swept parameter; over attack budgets, a panel per budget-sweep column), per_class (accuracy per class,
clean and under an attack), curves (per-epoch columns of the training curves), front (SA against robust
accuracy, a line per series; fig_front.py), grid (test images that some models get wrong and another gets
right, from its analysis JSON; fig_grid.py), tsne (t-SNE of adversarial images from a Generalist run's two
learners per epoch, from its analysis; fig_tsne.py), caat_synthetic (CA-AT Figure 2; fig_caat_synthetic.py).

Layout, the same for every kind (:func:`make_figure`): panels on a grid of at most three columns under
matplotlib's constrained layout; the title wrapped to the figure's width and panel titles to their panel's;
legends outside the plotting area, to the right (one legend for the figure when its panels share their series,
else one to the right of each panel), the figure widened by their width; point labels (fronts) placed where
they overlap neither each other nor a point; a footer with the notes of the figure and its scale. The layout is
then frozen, so that what :func:`make_figure` returns is what :func:`save_figure` writes, byte for byte the same
each time (no creation date in the PDF, no software version in the PNG). Accuracies are drawn in %, series in
distinct colours (:func:`palette`), measurements under their human names (:mod:`tradeoff.report.labels`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.path import Path as Segment
from matplotlib.text import Annotation, Text

from tradeoff.config import Catalog
from tradeoff.core.targets import TargetSpec
from tradeoff.report import fig_basic, fig_caat_synthetic, fig_front, fig_grid, fig_tsne  # noqa: F401  (they register the kinds)
from tradeoff.report import what_ran as ran
from tradeoff.report.kinds import drawing, drawn
from tradeoff.report.style import (
    FOOTNOTE,
    MAX_COLUMNS,
    PANEL,
    POINT_LABEL,
    SAVE_METADATA,
    SINGLE,
    STYLE,
    plt,
    tick_spacing_px,
    wrap_text,
)
from tradeoff.report.table_notes import degenerate_notes, figure_notes
from tradeoff.report.table_render import plain_text
from tradeoff.storage.atomic import atomic_path


def _grid_shape(n: int) -> tuple[int, int]:
    """(rows, columns) of ``n`` panels: one row up to three, two by two for four, else rows of three."""
    if n <= MAX_COLUMNS:
        return 1, max(n, 1)
    if n == 4:
        return 2, 2
    return math.ceil(n / MAX_COLUMNS), MAX_COLUMNS


def panel_figure(n: int, panel: tuple[float, float] = PANEL):
    """A constrained-layout figure with ``n`` panels on a grid (unused cells removed); (figure, list of axes)."""
    rows, cols = _grid_shape(n)
    size = SINGLE if n == 1 and panel == PANEL else (panel[0] * cols, panel[1] * rows)
    fig = plt.figure(figsize=size, layout="constrained")
    grid = fig.subplots(rows, cols, squeeze=False)
    axes = list(grid.flat)
    for ax in axes[n:]:
        fig.delaxes(ax)
    return fig, axes[:n]


def _fit_tick_labels(ax, renderer) -> None:
    """Category names under an x axis (bars) that would run into each other: wrapped at spaces to the distance
    between the ticks, and slanted if a single word is still too wide."""
    ticks = list(ax.get_xticks())
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    if len(labels) < 2 or len(labels) != len(ticks):
        return
    boxes = [t.get_window_extent(renderer) for t in labels]
    if not any(a.x1 > b.x0 - 2 for a, b in zip(boxes, boxes[1:])):
        return
    spacing = 0.92 * tick_spacing_px(ax, ticks)
    original = [t.get_text() for t in labels]
    chosen = None
    for size in (labels[0].get_fontsize(), 9.0, 8.0, 7.0):  # the first size at which they fit in two lines
        for t, text in zip(labels, original):
            t.set_text(text)
            t.set_fontsize(size)
            wrap_text(t, spacing, renderer)
        fits = max(t.get_window_extent(renderer).width for t in labels) <= spacing
        lines = max(t.get_text().count("\n") + 1 for t in labels)
        if fits and (chosen is None or lines < chosen[2]):
            chosen = (size, [t.get_text() for t in labels], lines)
        if fits and lines <= 2:
            break
    size, texts, _ = chosen or (size, [t.get_text() for t in labels], 0)
    ax.set_xticks(ticks, texts, fontsize=size)


def _legend_widths(fig, renderer) -> float:
    """Inches the legends outside the panels take: the figure's legends, plus per column of panels the widest
    panel legend."""
    width = sum(legend.get_window_extent(renderer).width for legend in fig.legends)
    per_column: dict[int, float] = {}
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None and ax.get_subplotspec() is not None:
            col = ax.get_subplotspec().colspan.start
            per_column[col] = max(per_column.get(col, 0.0), legend.get_window_extent(renderer).width)
    return (width + sum(per_column.values())) / fig.dpi


def _footer(fig, scale: str) -> None:
    """One footer line (wrapped) at the bottom: the figure's notes (texts with gid FOOTNOTE) and its scale."""
    notes = [t for t in fig.texts if t.get_gid() == FOOTNOTE]
    text = "; ".join(t.get_text() for t in notes)
    for t in notes:
        t.remove()
    fig.text(0.005, 0.004, text, ha="left", va="bottom", fontsize=7, color="0.35", gid=FOOTNOTE)
    fig.text(0.995, 0.004, f"scale: {scale}", ha="right", va="bottom", fontsize=7, color="0.35", gid="scale")


def _finish(fig, catalog: Catalog, name: str, target: TargetSpec) -> None:
    """The common layout of every figure: title, footer, legend room, wrapped titles, placed point labels; then
    frozen (layout engine off), so that saving draws exactly this."""
    renderer = fig.canvas.get_renderer()
    title = fig.suptitle(ran.title(catalog, name))
    for text in fig.findobj(Text):  # a note's Markdown marks (`code`, **bold**) are plain text in a figure
        if "`" in text.get_text() or "**" in text.get_text():
            text.set_text(plain_text(text.get_text()))
    _footer(fig, catalog.scale)
    fig.canvas.draw()
    extra = _legend_widths(fig, renderer)
    if extra:
        fig.set_figwidth(fig.get_figwidth() + extra + 0.1)
    renderer = fig.canvas.get_renderer()
    # the footer: its note wrapped beside the scale, and room kept for it under the panels
    note, scale = [t for t in fig.texts if t.get_gid() in (FOOTNOTE, "scale")]
    wrap_text(note, fig.bbox.width - scale.get_window_extent(renderer).width - 0.08 * fig.dpi, renderer)
    footer = max(note.get_window_extent(renderer).height, scale.get_window_extent(renderer).height) / fig.dpi
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):  # the figure grows by the footer: its panels keep their room
        room = footer + 0.06
        fig.set_figheight(fig.get_figheight() + room)
        bottom = room / fig.get_figheight()
        engine.set(rect=(0.0, bottom, 1.0, 1.0 - bottom))
    wrap_text(title, 0.97 * fig.bbox.width, renderer)
    fig.canvas.draw()
    for ax in fig.axes:  # panel titles no wider than their panel (a long one would run into its neighbour)
        if ax.title.get_text():
            wrap_text(ax.title, max(ax.bbox.width * 1.04, 60), renderer)
        _fit_tick_labels(ax, renderer)
    fig.canvas.draw()
    _place_point_labels(fig, renderer)
    fig.set_layout_engine("none")


def make_figure(catalog: Catalog, name: str):
    """The figure of a target, laid out and ready to save (not saved): for tests and for build_figure."""
    target = catalog.targets[name]
    kind = drawing(target.plot)
    with plt.rc_context(STYLE):
        if kind.panels is None:  # a kind that lays out its own figure
            fig = kind.draw(catalog, name, target)
        else:
            fig, axes = panel_figure(kind.panels(catalog, name, target))
            kind.draw(catalog, name, target, axes)
        if target.note:
            fig.text(0, 0, f"at this scale: {target.note}", gid=FOOTNOTE)
        for note in filter(None, [ran.twin_note(catalog, name), *ran.shared_job_notes(catalog, name)]):
            fig.text(0, 0, note, gid=FOOTNOTE)  # (a point of another paper setting's job: its label says which run)
        if target.analysis is None:
            for note in figure_notes(catalog, name) + degenerate_notes(catalog, name):
                fig.text(0, 0, note, gid=FOOTNOTE)
        _finish(fig, catalog, name, target)
    return fig


def save_figure(fig, paths: dict[str, Path]) -> dict[str, Path]:
    """Write the figure to each path (``{"png": ..., "pdf": ...}``) atomically: the one place figures are saved.
    Deterministic: the same figure gives the same bytes (no dates or versions in the files)."""
    with plt.rc_context(STYLE):
        for kind, path in paths.items():
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=kind, dpi=STYLE["savefig.dpi"], metadata=SAVE_METADATA.get(kind))
    return paths


def build_figure(catalog: Catalog, name: str) -> dict[str, Path]:
    fig = make_figure(catalog, name)
    try:
        return save_figure(fig, catalog.layout.figures(name))
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------------------ point labels


def _overlaps(a, b, pad: float = 0.0) -> bool:
    return a.x0 - pad < b.x1 and b.x0 - pad < a.x1 and a.y0 - pad < b.y1 and b.y0 - pad < a.y1


def _candidates():
    """Offsets (points) of a label from its point, nearest first, each with its alignment."""
    for radius in (5, 9, 14, 20, 27, 35, 44):
        for dx, dy in ((1, 0.4), (-1, 0.4), (1, -0.6), (-1, -0.6), (0, 1), (0, -1.2), (1, 1), (-1, 1),
                       (1, -1), (-1, -1)):
            ha = "left" if dx > 0 else "right" if dx < 0 else "center"
            va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
            yield radius * dx, radius * dy, ha, va


def _text_box(text, renderer):
    """A text's own box (an Annotation's get_window_extent includes its leader line)."""
    return Text.get_window_extent(text, renderer)


def _place_point_labels(fig, renderer) -> None:
    """Move each point label (an Annotation with gid POINT_LABEL) to the nearest spot around its point where it
    overlaps no other label and no point, inside its panel (the first spot that does, else the least bad one);
    a label away from its point gets a thin leader line to it."""
    for ax in fig.axes:
        labels = [t for t in ax.texts if isinstance(t, Annotation) and t.get_gid() == POINT_LABEL]
        if not labels:
            continue
        frame = ax.bbox.frozen()
        points, segments = [], []
        for line in ax.get_lines():
            xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))
            if line.get_linestyle() not in ("None", "", " "):
                segments += [Segment(xy[k:k + 2]) for k in range(len(xy) - 1)]
            if line.get_marker() in (None, "None", "", " "):
                continue
            half = line.get_markersize() * fig.dpi / 72 / 2 + 1
            points += [(x - half, y - half, x + half, y + half) for x, y in xy]
        placed = []
        for label in labels:
            best, best_cost = None, None
            for dx, dy, ha, va in _candidates():
                label.xyann = (dx, dy)
                label.set_ha(ha)
                label.set_va(va)
                box = _text_box(label, renderer)
                cost = 20 * sum(_overlaps(box, other, 1.5) for other in placed)
                cost += 5 * sum(box.x0 < p[2] and p[0] < box.x1 and box.y0 < p[3] and p[1] < box.y1 for p in points)
                cost += sum(segment.intersects_bbox(box, filled=False) for segment in segments)
                cost += 1000 * (box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1)
                if best_cost is None or cost < best_cost:
                    best, best_cost = (dx, dy, ha, va), cost
                if cost == 0:
                    break
            label.xyann = best[:2]
            label.set_ha(best[2])
            label.set_va(best[3])
            if label.arrow_patch is not None:
                label.arrow_patch.set_visible(math.hypot(*best[:2]) > 10)
            placed.append(_text_box(label, renderer))


FIGURE_KINDS = drawn()
