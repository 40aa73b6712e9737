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
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.path import Path as Segment  # noqa: E402
from matplotlib.text import Annotation, Text  # noqa: E402

from ..config import Catalog  # noqa: E402
from .labels import (column_label, curve_axis_label, curve_label, curve_scale, curve_title, curve_unit,  # noqa: E402
                     row_label)
from . import records  # noqa: E402
from .tables import degenerate_notes, load_reference, read_metric  # noqa: E402

STYLE = {
    "figure.dpi": 110, "savefig.dpi": 150, "font.size": 10, "axes.titlesize": 10.5, "axes.labelsize": 10,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "legend.fontsize": 8.5, "legend.frameon": False, "legend.title_fontsize": 8.5, "figure.titlesize": 11.5,
}
PANEL = (4.0, 3.1)         # inches per panel (before the legend's width is added)
SINGLE = (5.6, 3.9)        # inches of a one-panel figure
MAX_COLUMNS = 3            # panels per row
POINT_LABEL = "point-label"  # gid of a point's text label, placed by _place_point_labels once the layout is done
FOOTNOTE = "footnote"        # gid of a figure note, moved into the footer by _finish
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = "osD^v<>pXh*"
SAVE_METADATA = {"pdf": {"CreationDate": None, "Creator": None, "Producer": None},
                 "png": {"Software": None}}


def palette(n: int) -> list[tuple]:
    """``n`` distinct colours: tab10's, tab20's beyond 10, evenly spaced hues beyond 20."""
    if n <= 10:
        return list(plt.get_cmap("tab10").colors[:max(n, 0)])
    if n <= 20:
        return list(plt.get_cmap("tab20").colors[:n])
    return [plt.get_cmap("hsv")(i / n) for i in range(n)]


# --------------------------------------------------------------------------------------------- reading


def read_predictions(catalog: Catalog, run: str, attack: str) -> dict | None:
    """A run's per-example predictions under an attack (labels, robust_correct bits), or None if not yet made;
    read only after its metrics are vouched for (tradeoff.report.records)."""
    return records.predictions(catalog, run, attack)


def _label(row: dict, reference: dict) -> str:
    return row_label(row, next((lab for (r, _), (_, _, lab) in reference.items() if r == row["key"]), None))


# ---------------------------------------------------------------------------------------------- helpers


def figure_legend(fig, handles: list | None = None, labels: list | None = None, **kwargs) -> None:
    """One legend for the whole figure (series shared by every panel), to the right of its top-right panel: part of
    that panel's layout box, so the title stays above it. By default every labelled artist of the figure's axes,
    each label once."""
    if handles is None:
        found: dict[str, object] = {}
        for ax in fig.axes:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                found.setdefault(label, handle)
        labels, handles = list(found), list(found.values())
    panels = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    if handles and panels:
        corner = max(panels, key=lambda ax: (-ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.stop))
        corner.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)


def axes_legend(ax, **kwargs) -> None:
    """A panel's own legend, to the right of its plotting area (panels whose series differ)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)


def percent_limits(ax, values, axis: str = "y", margin: float = 0.08, room: float = 0.04) -> None:
    """Limits of an accuracy axis around ``values`` (%): ``margin`` (a share of the range) either side, reaching
    below 0 or above 100 by ``room`` (a share) at most, and a readable range when every value is the same (an
    axis of all-zero accuracies is 0 to 10, not -0.05 to 0.05). Ticks only from 0 to 100 %."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 100.0)  # nothing measured yet: the whole range
    if hi - lo < 5.0:
        lo, hi = max(0.0, lo - 5.0), min(100.0, max(hi + 5.0, lo + 10.0))
    span = hi - lo
    lo, hi = max(lo - margin * span, -room * span), min(hi + margin * span, 100.0 + room * span)
    axis_ = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)
    ticks = [t for t in axis_.get_major_locator().tick_values(lo, hi) if -1e-9 <= t <= 100 + 1e-9 and lo <= t <= hi]
    axis_.set_ticks(ticks)


def _tick_spacing_px(ax, ticks) -> float:
    if len(ticks) < 2:
        return ax.bbox.width
    xs = ax.transData.transform([(t, 0) for t in ticks])[:, 0]
    return float(np.min(np.diff(np.sort(xs))))


def _wrap(text_artist, width_px: float, renderer) -> None:
    """Wrap a text artist at spaces (and after a "+") so that no line is wider than ``width_px`` where a break
    allows (measured with the renderer)."""
    text = text_artist.get_text()
    if not text or text_artist.get_window_extent(renderer).width <= width_px:
        return
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in re.split(r"(?<=[ +])", paragraph):
            candidate = line + word
            text_artist.set_text(candidate.rstrip())
            if line.strip() and text_artist.get_window_extent(renderer).width > width_px:
                lines.append(line.rstrip())
                line = word
            else:
                line = candidate
        lines.append(line.rstrip())
    text_artist.set_text("\n".join(lines))


# ------------------------------------------------------------------------------------------ the kinds


def plot_scatter(catalog: Catalog, name: str, target: dict, axes) -> None:
    ax = axes[0]
    (xcol, xattack), (ycol, yattack) = list(target["columns"].items())[:2]
    reference = load_reference(catalog, target["reference"]) if target.get("reference") else {}
    colours = palette(len(target["rows"]))
    xs, ys = [], []
    for row, color in zip(target["rows"], colours):
        ours = read_metric(catalog, row["run"], xattack), read_metric(catalog, row["run"], yattack)
        paper = reference.get((row["key"], xcol)), reference.get((row["key"], ycol))
        paper = (paper[0][0], paper[1][0]) if None not in paper else (None, None)
        if None not in ours:
            ax.scatter(*ours, color=color, s=42, label=_label(row, reference), zorder=3)
            xs.append(ours[0]), ys.append(ours[1])
        else:
            ax.scatter([], [], color=color, s=42, label=f"{_label(row, reference)} (no metrics)")
        if None not in paper:
            ax.scatter(*paper, facecolors="none", edgecolors=color, s=42, linewidths=1.3, zorder=2)
            xs.append(paper[0]), ys.append(paper[1])
    ax.set_xlabel(f"{column_label(target, xcol)} accuracy (%)")
    ax.set_ylabel(f"{column_label(target, ycol)} accuracy (%)")
    percent_limits(ax, xs, "x")
    percent_limits(ax, ys, "y")
    handles, labels = ax.get_legend_handles_labels()
    if reference:
        handles += [plt.Line2D([], [], marker="o", linestyle="", color="0.25", markersize=6),
                    plt.Line2D([], [], marker="o", linestyle="", markerfacecolor="none", markeredgecolor="0.25",
                               markersize=6)]
        labels += ["ours (filled)", "paper (hollow)"]
    figure_legend(ax.figure, handles, labels)


def plot_bars(catalog: Catalog, name: str, target: dict, axes) -> None:
    ax = axes[0]
    reference = load_reference(catalog, target["reference"]) if target.get("reference") else {}
    rows, columns = target["rows"], list(target["columns"].items())
    width = 0.8 / max(len(columns), 1)
    xs = np.arange(len(rows))
    for j, ((column, attack), color) in enumerate(zip(columns, palette(len(columns)))):
        values = [read_metric(catalog, r["run"], attack) for r in rows]
        ax.bar(xs + j * width, [np.nan if v is None else v for v in values], width, label=column_label(target, column),
               color=color)
        for x, v in zip(xs + j * width, values):  # a bar too low to see says what it is: 0, or not measured
            if v is None or v < 0.5:
                ax.text(x, 1.0, "n/a" if v is None else f"{v:.0f}", rotation=90 if v is None else 0, ha="center",
                        va="bottom", fontsize=7, color="0.35")
    ax.set_xticks(xs + width * (len(columns) - 1) / 2, [_label(r, reference) for r in rows])
    ax.tick_params(axis="x", length=0)
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    figure_legend(ax.figure)


def _budget_sweeps(catalog: Catalog, target: dict) -> list[str]:
    """The columns of a `lines` figure that name a budget sweep without a budget (x = the sweep's budgets)."""
    return [a for a in target["columns"].values()
            if "@" not in a and isinstance(catalog.attacks.get(a, {}).get("eps"), list)]


def lines_panels(catalog: Catalog, name: str, target: dict) -> int:
    """One panel, or one per budget-sweep column of a `lines` figure over attack budgets."""
    return max(len(_budget_sweeps(catalog, target)), 1)


def plot_lines(catalog: Catalog, name: str, target: dict, axes) -> None:
    if _budget_sweeps(catalog, target):
        return plot_budget_lines(catalog, name, target, axes)
    ax = axes[0]
    groups: dict[str, list[dict]] = {}
    for row in target["rows"]:
        groups.setdefault(row.get("series", ""), []).append(row)
    pairs = [(c, s) for c in target["columns"].items() for s in groups]
    ys = []
    for ((column, attack), series), color in zip(pairs, palette(len(pairs))):
        pts = [(r["x"], read_metric(catalog, r["run"], attack)) for r in groups[series]]
        pts = [(x, y) for x, y in pts if y is not None]
        label = f"{column_label(target, column)}, {series}" if series else column_label(target, column)
        style = LINESTYLES[list(groups).index(series) % len(LINESTYLES)]
        ax.plot(*(zip(*pts) if pts else ([], [])), marker="o", markersize=5, color=color, linestyle=style,
                label=label if pts else f"{label} (no metrics)")
        ys += [y for _, y in pts]
    ax.set_xlabel(target.get("x_label", "parameter"))
    ax.set_ylabel("accuracy (%)")
    percent_limits(ax, ys)
    figure_legend(ax.figure)


def plot_budget_lines(catalog: Catalog, name: str, target: dict, axes) -> None:
    """Accuracy over attack budgets (CA-AT Figure 8): a panel per sweep column, a line per row (colour per row,
    the same in every panel), x = the sweep's budgets as the paper-scale catalog writes them (the tick labels; a
    smaller scale rescales the budgets it runs). A clean column is each line's point at budget 0."""
    sweeps = _budget_sweeps(catalog, target)
    clean = [a for a in target["columns"].values() if a not in sweeps]
    colours = palette(len(target["rows"]))
    values = []
    for ax, (column, attack) in zip(axes, [(c, a) for c, a in target["columns"].items() if a in sweeps]):
        points = catalog.budget_sweep_points(attack)
        ticks = {0.0: "0"} if clean else {}
        ticks.update({x: text for x, text, _ in points})
        for i, (row, color) in enumerate(zip(target["rows"], colours)):
            pts = [(0.0, read_metric(catalog, row["run"], clean[0]))] if clean else []
            pts += [(x, read_metric(catalog, row["run"], job)) for x, _, job in points]
            pts = [(x, y) for x, y in pts if y is not None]
            label = row.get("series") or _label(row, {})
            ax.plot(*(zip(*pts) if pts else ([], [])), marker=MARKERS[i % len(MARKERS)], markersize=4.5,
                    color=color, label=label if pts else f"{label} (no metrics)")
            values += [y for _, y in pts]
        ax.set_xticks(list(ticks), list(ticks.values()), rotation=30 if len(ticks) > 5 else 0)
        ax.set_xlabel(target.get("x_label", "attack budget"))
        ax.set_ylabel("accuracy (%)")
        ax.set_title(column_label(target, column))
    for ax in axes:
        percent_limits(ax, values)
    figure_legend(axes[0].figure)


def plot_per_class(catalog: Catalog, name: str, target: dict, axes) -> None:
    rows = target["rows"]
    colours = palette(len(rows))
    for ax, (column, attack) in zip(axes, target["columns"].items()):
        width = 0.8 / max(len(rows), 1)
        num_classes = None
        for i, (row, color) in enumerate(zip(rows, colours)):
            preds = read_predictions(catalog, row["run"], attack)
            if preds is None:
                ax.bar([], [], width, label=f"{_label(row, {})} (no predictions)", color=color)
                continue
            labels = np.array(preds["labels"])
            correct = np.array([c == "1" for c in preds["robust_correct"]])
            num_classes = int(labels.max()) + 1
            per_class = [100 * correct[labels == k].mean() if (labels == k).any() else np.nan
                         for k in range(num_classes)]
            ax.bar(np.arange(num_classes) + i * width, per_class, width, label=_label(row, {}), color=color)
        if num_classes:
            ax.set_xticks(np.arange(num_classes) + width * (len(rows) - 1) / 2, [str(k) for k in range(num_classes)])
        ax.tick_params(axis="x", length=0)
        ax.grid(axis="x", visible=False)
        ax.set_ylim(0, 100)
        ax.set_title(column_label(target, column))
        ax.set_xlabel("class")
        ax.set_ylabel("correct predictions (%)")
    figure_legend(axes[0].figure)


def _curve_series(target: dict) -> list[str]:
    """The rows' series in order of appearance ([""] when no row has one)."""
    return list(dict.fromkeys(row.get("series", "") for row in target["rows"])) or [""]


def curve_panels(target: dict) -> int:
    """One panel per curve column, times one per series when the rows carry `series` (CA-AT Figure 3: a panel
    per dataset and architecture, a line per λ/γ)."""
    return len(target["curve_columns"]) * len(_curve_series(target))


def read_curves(catalog: Catalog, run: str) -> list[dict] | None:
    """A run's training curves (one dict of strings per epoch), or None if it has not trained yet."""
    import csv

    path = catalog.layout.curves(catalog.train_id[run])
    if not path.exists():
        return None
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def plot_curves(catalog: Catalog, name: str, target: dict, axes) -> None:
    """A line per row and panel; accuracies (stored as fractions) drawn in %, each curve under its human name
    (labels.curve_label), a row's colour the same in every panel."""
    series = _curve_series(target)
    panels = [(column, s) for column in target["curve_columns"] for s in series]
    row_labels = list(dict.fromkeys(_label(row, {}) for row in target["rows"]))
    colours = dict(zip(row_labels, palette(len(row_labels))))
    percent_values: list[float] = []
    for ax, (column, panel_series) in zip(axes, panels):
        scale = curve_scale(column)
        for row in (r for r in target["rows"] if r.get("series", "") == panel_series):
            data = read_curves(catalog, row["run"])
            label = _label(row, {})
            if data and column in data[0]:
                pts = [(float(d["epoch"]), scale * float(d[column])) for d in data if d[column] not in ("", "nan")]
                ax.plot(*(zip(*pts) if pts else ([], [])), label=label, color=colours[label])
                if curve_unit(column) == "%":
                    percent_values += [y for _, y in pts]
            else:
                ax.plot([], [], label=f"{label} (no curves)", color=colours[label])
        title = curve_title(column)
        if panel_series:
            title = panel_series if len(target["curve_columns"]) == 1 else f"{title}\n{panel_series}"
        ax.set_title(title)
        ax.set_xlabel("epoch")
        # a panel per series of one curve: the curve's name on the axis; else the panel title names it
        ax.set_ylabel(curve_label(column) if panel_series and len(target["curve_columns"]) == 1
                      else curve_axis_label(column))
    for ax, (column, _) in zip(axes, panels):
        if curve_unit(column) == "%":  # accuracy panels on one scale
            percent_limits(ax, percent_values)
    figure_legend(axes[0].figure)


# ------------------------------------------------------------------------------------------ the layout


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
    spacing = 0.92 * _tick_spacing_px(ax, ticks)
    original = [t.get_text() for t in labels]
    chosen = None
    for size in (labels[0].get_fontsize(), 9.0, 8.0, 7.0):  # the first size at which they fit in two lines
        for t, text in zip(labels, original):
            t.set_text(text)
            t.set_fontsize(size)
            _wrap(t, spacing, renderer)
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


def _finish(fig, catalog: Catalog, name: str, target: dict) -> None:
    """The common layout of every figure: title, footer, legend room, wrapped titles, placed point labels; then
    frozen (layout engine off), so that saving draws exactly this."""
    renderer = fig.canvas.get_renderer()
    title = fig.suptitle(target.get("title", name))
    _footer(fig, catalog.scale)
    fig.canvas.draw()
    extra = _legend_widths(fig, renderer)
    if extra:
        fig.set_figwidth(fig.get_figwidth() + extra + 0.1)
    renderer = fig.canvas.get_renderer()
    # the footer: its note wrapped beside the scale, and room kept for it under the panels
    note, scale = [t for t in fig.texts if t.get_gid() in (FOOTNOTE, "scale")]
    _wrap(note, fig.bbox.width - scale.get_window_extent(renderer).width - 0.08 * fig.dpi, renderer)
    footer = max(note.get_window_extent(renderer).height, scale.get_window_extent(renderer).height) / fig.dpi
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):
        bottom = (footer + 0.06) / fig.get_figheight()
        engine.set(rect=(0.0, bottom, 1.0, 1.0 - bottom))
    _wrap(title, 0.97 * fig.bbox.width, renderer)
    fig.canvas.draw()
    for ax in fig.axes:  # panel titles no wider than their panel (a long one would run into its neighbour)
        if ax.title.get_text():
            _wrap(ax.title, max(ax.bbox.width * 1.04, 60), renderer)
        _fit_tick_labels(ax, renderer)
    fig.canvas.draw()
    _place_point_labels(fig, renderer)
    fig.set_layout_engine("none")


def make_figure(catalog: Catalog, name: str):
    """The figure of a target, laid out and ready to save (not saved): for tests and for build_figure."""
    target = catalog.targets[name]
    with plt.rc_context(STYLE):
        kind = target["plot"]
        if kind in OWN:
            fig = OWN[kind](catalog, name, target)
        else:
            plot, panels = KINDS[kind]
            fig, axes = panel_figure(panels(catalog, name, target))
            plot(catalog, name, target, axes)
        if "rows" in target and "analysis" not in target:
            for note in degenerate_notes(catalog, name):
                fig.text(0, 0, note, gid=FOOTNOTE)
        _finish(fig, catalog, name, target)
    return fig


def save_figure(fig, paths: dict[str, Path]) -> dict[str, Path]:
    """Write the figure to each path (``{"png": ..., "pdf": ...}``) atomically: the one place figures are saved.
    Deterministic: the same figure gives the same bytes (no dates or versions in the files)."""
    paths["png"].parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(STYLE):
        for kind, path in paths.items():
            tmp = path.with_name(f".{path.name}.tmp")
            fig.savefig(tmp, format=kind, dpi=STYLE["savefig.dpi"], metadata=SAVE_METADATA.get(kind))
            tmp.replace(path)
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


from .fig_front import front_panels, plot_front  # noqa: E402  (kinds in their own modules)
from .fig_grid import make_grid  # noqa: E402
from .fig_tsne import make_tsne  # noqa: E402
from .fig_caat_synthetic import caat_panels, plot_caat_synthetic  # noqa: E402

# kind -> (plot(catalog, name, target, axes), panels(catalog, name, target) -> how many)
KINDS = {"scatter": (plot_scatter, lambda c, n, t: 1),
         "bars": (plot_bars, lambda c, n, t: 1),
         "lines": (plot_lines, lines_panels),
         "per_class": (plot_per_class, lambda c, n, t: len(t["columns"])),
         "curves": (plot_curves, lambda c, n, t: curve_panels(t)),
         "front": (plot_front, lambda c, n, t: front_panels(t)),
         "caat_synthetic": (plot_caat_synthetic, caat_panels)}
OWN = {"grid": make_grid, "tsne": make_tsne}  # kinds that lay out their own figure: fn(catalog, name, target) -> figure

FIGURE_KINDS = sorted([*KINDS, *OWN])
