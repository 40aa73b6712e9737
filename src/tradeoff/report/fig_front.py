"""The ``front`` figure kind: SA–AA fronts (CA-AT Figures 4–7, 9–11), from metrics files only.

Each row is one trained model, drawn as the point (clean accuracy, robust accuracy). Rows carry a ``series``
("vanilla", "CA-AT", "vanilla CE", ...) and may carry a ``label`` (λ=0.5, γ=0.8) written next to the point;
the points of a series are connected in the order of the rows. The target's first column is the clean one
(the x axis of every panel); each further column is one panel, with that column's robust accuracy as y.
"""

from __future__ import annotations

from ..config import Catalog
from .tables import read_metric

MARKERS = "osD^v<>px*"


def front_panels(target: dict) -> int:
    """One panel per robust column (every column after the first, clean, one)."""
    return max(len(target["columns"]) - 1, 1)


def front_points(catalog: Catalog, target: dict, robust_attack: str) -> dict[str, list[tuple[float, float, str | None]]]:
    """series -> [(SA %, robust %, point label)] in the order of the rows; rows whose metrics are missing are
    left out (the rest of the series stays connected)."""
    clean_attack = next(iter(target["columns"].values()))
    series: dict[str, list[tuple[float, float, str | None]]] = {}
    for row in target["rows"]:
        points = series.setdefault(row.get("series", ""), [])
        x, y = read_metric(catalog, row["run"], clean_attack), read_metric(catalog, row["run"], robust_attack)
        if x is not None and y is not None:
            points.append((x, y, row.get("label")))
    return series


def plot_front(catalog: Catalog, name: str, target: dict, axes) -> None:
    from .figures import COLORS

    robust = list(target["columns"].items())[1:]
    for ax, (column, attack) in zip(axes, robust):
        for i, (series, points) in enumerate(front_points(catalog, target, attack).items()):
            color = COLORS[i % len(COLORS)]
            if points:
                xs, ys, labels = zip(*points)
                ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], color=color, markersize=5, linewidth=1.4,
                        label=series or None)
                for x, y, label in points:
                    if label:
                        ax.annotate(label, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7,
                                    color=color)
            else:  # keep the series in the legend, saying it has no measurement yet
                ax.plot([], [], marker=MARKERS[i % len(MARKERS)], color=color,
                        label=f"{series} (no metrics)" if series else "(no metrics)")
        ax.set_xlabel("SA (%)")
        ax.set_ylabel(f"{column} (%)")
        if len(robust) > 1:
            ax.set_title(f"SA–{column}")
        if any(line.get_label() and not line.get_label().startswith("_") for line in ax.get_lines()):
            ax.legend(loc="best")
