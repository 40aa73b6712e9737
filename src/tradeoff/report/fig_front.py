"""The ``front`` figure kind: SA–AA fronts (CA-AT Figures 4–7, 9–11), from metrics files only.

Each row is one trained model, drawn as the point (clean accuracy, robust accuracy). Rows carry a ``series``
("vanilla", "CA-AT", "vanilla CE", ...) and may carry a ``label`` (λ=0.5, γ=0.8) written next to the point, in
its series' colour, where it overlaps no other label and no point (placed once the layout is done, see
figures._place_point_labels); the points of a series are connected in the order of the rows. The target's
first column is the clean one (the x axis of every panel); each further column is one panel, with that
column's robust accuracy as y. Each point carries its 95% intervals, clean and robust. One legend (the series) right
of the panels.
"""

from __future__ import annotations

from tradeoff.config import Catalog
from tradeoff.core.targets import TargetSpec
from tradeoff.report import what_ran as ran
from tradeoff.report.kinds import figure_kind
from tradeoff.report.style import (
    POINT_LABEL,
    error_bars,
    errors,
    figure_legend,
    interval_note,
    measured,
    palette,
    percent_limits,
)
from tradeoff.report.table_model import read_metric

MARKERS = "osD^v<>pXh*"


def front_panels(target: TargetSpec) -> int:
    """One panel per robust column (every column after the first, clean, one)."""
    return max(len(target.columns) - 1, 1)


def front_points(catalog: Catalog, target: TargetSpec,
                 robust_attack: str) -> dict[str, list[tuple[float, float, str | None]]]:
    """series -> [(SA %, robust %, point label)] in the order of the rows; rows whose metrics are missing are
    left out (the rest of the series stays connected)."""
    clean_attack = next(iter(target.columns.values()))
    series: dict[str, list[tuple[float, float, str | None]]] = {}
    for row in target.rows:
        points = series.setdefault((row.series or ""), [])
        x, y = read_metric(catalog, row.run, clean_attack), read_metric(catalog, row.run, robust_attack)
        if x is not None and y is not None:
            points.append((x, y, row.label))
    return series


def _title(catalog: Catalog, target: TargetSpec, column: str) -> str:
    """A column as its axis, panel or legend names it: its measurement and the budget that ran (report.ran)."""
    return ran.column_title(catalog, target, column, target.columns[column])


@figure_kind("front", lambda catalog, name, target: front_panels(target))
def plot_front(catalog: Catalog, name: str, target: TargetSpec, axes) -> None:

    clean_column = next(iter(target.columns))
    robust = list(target.columns.items())[1:]
    names = list(dict.fromkeys((row.series or "") for row in target.rows))
    colours = dict(zip(names, palette(len(names))))
    clean_attack = next(iter(target.columns.values()))
    for ax, (column, attack) in zip(axes, robust):
        xs, ys = [], []
        for row in target.rows:  # each point's 95% intervals, clean (x) and robust (y)
            found = measured(catalog, row.run, clean_attack), measured(catalog, row.run, attack)
            if None not in found:
                error_bars(ax, [found[0][0]], [found[1][0]], xerr=errors([found[0]]), yerr=errors([found[1]]),
                           ecolor=colours[row.series or ""], elinewidth=0.8, capsize=1.8, alpha=0.55)
                xs += [found[0][1], found[0][2]]
                ys += [found[1][1], found[1][2]]
                interval_note(ax.figure)
        for i, (series, points) in enumerate(front_points(catalog, target, attack).items()):
            color, marker = colours[series], MARKERS[i % len(MARKERS)]
            if points:
                px, py, labels = zip(*points)
                ax.plot(px, py, marker=marker, color=color, markersize=5, linewidth=1.4, label=series or None)
                xs += px
                ys += py
                for x, y, label in points:
                    if label:
                        ax.annotate(label, (x, y), xytext=(5, 2), textcoords="offset points", fontsize=7,
                                    color=color, gid=POINT_LABEL, annotation_clip=False,
                                    arrowprops={"arrowstyle": "-", "color": color, "lw": 0.6, "alpha": 0.7,
                                                "shrinkA": 1, "shrinkB": 3})
            else:  # keep the series in the legend, saying it has no measurement yet
                ax.plot([], [], marker=marker, color=color,
                        label=f"{series} (no metrics)" if series else "(no metrics)")
        ax.set_xlabel(f"{_title(catalog, target, clean_column)} (%)")
        ax.set_ylabel(f"{_title(catalog, target, column)} (%)")
        if len(robust) > 1:
            ax.set_title(f"{_title(catalog, target, clean_column)}–{_title(catalog, target, column)}")
        percent_limits(ax, xs, "x", margin=0.14, room=0.14)  # room for the labels of the points at the edges
        percent_limits(ax, ys, "y", margin=0.14, room=0.14)
    figure_legend(axes[0].figure)
