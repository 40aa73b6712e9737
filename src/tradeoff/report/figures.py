"""Figures as PNG and PDF, from metrics, predictions and curves files only (never checkpoints), one style.

A figure target of the catalog names its ``plot`` kind, its rows (runs, with labels and, for swept
parameters, an x value) and its columns (measurement -> attack). Every figure says the scale it was made at.
Kinds: scatter (clean vs robust, ours against the paper's points), bars (grouped per row), lines (a metric
over a swept parameter), per_class (accuracy per class, clean and under an attack), curves (per-epoch
columns of the training curves), front (SA against robust accuracy, a line per series; fig_front.py), grid
(test images that some models get wrong and another gets right, from its analysis JSON; fig_grid.py), tsne
(t-SNE of adversarial images from a Generalist run's two learners per epoch, from its analysis; fig_tsne.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..config import Catalog  # noqa: E402
from .tables import load_reference, read_metric  # noqa: E402

STYLE = {
    "figure.dpi": 110, "savefig.dpi": 150, "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "legend.fontsize": 8, "legend.frameon": False,
}
COLORS = plt.get_cmap("tab10").colors


def _label(row: dict, reference: dict) -> str:
    if "label" in row:
        return row["label"]
    return next((lab for (r, _), (_, _, lab) in reference.items() if r == row["key"]), row["key"])


def _predictions(catalog: Catalog, run: str, attack: str) -> dict | None:
    path = catalog.layout.predictions(catalog.train_id[run], attack)
    return json.loads(path.read_text()) if path.exists() else None


def _finish(fig, catalog: Catalog, name: str, target: dict) -> dict[str, Path]:
    fig.suptitle(target.get("title", name), fontsize=11)
    fig.text(0.99, 0.005, f"scale: {catalog.scale}", ha="right", va="bottom", fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    paths = catalog.layout.figures(name)
    paths["png"].parent.mkdir(parents=True, exist_ok=True)
    for kind, path in paths.items():
        tmp = path.with_name(f".{path.name}.tmp")
        fig.savefig(tmp, format=kind)
        tmp.replace(path)
    plt.close(fig)
    return paths


def plot_scatter(catalog: Catalog, name: str, target: dict, ax) -> None:
    (xcol, xattack), (ycol, yattack) = list(target["columns"].items())[:2]
    reference = load_reference(catalog, target["reference"]) if target.get("reference") else {}
    for i, row in enumerate(target["rows"]):
        color = COLORS[i % len(COLORS)]
        ours = read_metric(catalog, row["run"], xattack), read_metric(catalog, row["run"], yattack)
        paper = reference.get((row["key"], xcol)), reference.get((row["key"], ycol))
        label = _label(row, reference)
        if None not in ours:
            ax.scatter(*ours, color=color, s=40, label=label, zorder=3)
        if None not in paper:
            ax.scatter(paper[0][0], paper[1][0], facecolors="none", edgecolors=color, s=40, zorder=2)
    ax.set_xlabel(f"{xcol.upper()} accuracy (%)")
    ax.set_ylabel(f"{ycol.upper()} accuracy (%)")
    ax.legend(title="filled: ours, hollow: paper", loc="best")


def plot_bars(catalog: Catalog, name: str, target: dict, ax) -> None:
    reference = load_reference(catalog, target["reference"]) if target.get("reference") else {}
    rows, columns = target["rows"], list(target["columns"].items())
    width = 0.8 / max(len(columns), 1)
    xs = np.arange(len(rows))
    for j, (column, attack) in enumerate(columns):
        values = [read_metric(catalog, r["run"], attack) for r in rows]
        ax.bar(xs + j * width, [np.nan if v is None else v for v in values], width, label=column.upper(),
               color=COLORS[j % len(COLORS)])
    ax.set_xticks(xs + width * (len(columns) - 1) / 2, [_label(r, reference) for r in rows], rotation=20, ha="right")
    ax.set_ylabel("accuracy (%)")
    ax.legend()


def plot_lines(catalog: Catalog, name: str, target: dict, ax) -> None:
    if _budget_sweeps(catalog, target):
        return plot_budget_lines(catalog, name, target, ax)
    groups: dict[str, list[dict]] = {}
    for row in target["rows"]:
        groups.setdefault(row.get("series", ""), []).append(row)
    for j, (column, attack) in enumerate(target["columns"].items()):
        for series, rows in groups.items():
            pts = [(r["x"], read_metric(catalog, r["run"], attack)) for r in rows]
            pts = [(x, y) for x, y in pts if y is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", color=COLORS[j % len(COLORS)],
                        linestyle=["-", "--", ":", "-."][list(groups).index(series) % 4],
                        label=f"{column.upper()} {series}".strip())
    ax.set_xlabel(target.get("x_label", "parameter"))
    ax.set_ylabel("accuracy (%)")
    ax.legend()


def _budget_sweeps(catalog: Catalog, target: dict) -> list[str]:
    """The columns of a `lines` figure that name a budget sweep without a budget (x = the sweep's budgets)."""
    return [a for a in target["columns"].values()
            if "@" not in a and isinstance(catalog.attacks.get(a, {}).get("eps"), list)]


def plot_budget_lines(catalog: Catalog, name: str, target: dict, ax) -> None:
    """Accuracy over attack budgets (CA-AT Figure 8): a line per (row, sweep column), x = the sweep's budgets as
    the paper-scale catalog writes them (the tick labels; a smaller scale rescales the budgets it runs), colour
    per row, line style per column. A clean column is each line's point at budget 0."""
    sweeps = _budget_sweeps(catalog, target)
    clean = [a for a in target["columns"].values() if a not in sweeps]
    ticks: dict[float, str] = {0.0: "0"} if clean else {}
    for j, (column, attack) in enumerate((c, a) for c, a in target["columns"].items() if a in sweeps):
        points = catalog.budget_sweep_points(attack)
        ticks.update({x: text for x, text, _ in points})
        for i, row in enumerate(target["rows"]):
            pts = [(0.0, read_metric(catalog, row["run"], clean[0]))] if clean else []
            pts += [(x, read_metric(catalog, row["run"], job)) for x, _, job in points]
            pts = [(x, y) for x, y in pts if y is not None]
            label = f"{row.get('series') or _label(row, {})}, {column}"
            if pts:
                ax.plot(*zip(*pts), marker="o", markersize=4, color=COLORS[i % len(COLORS)],
                        linestyle=["-", "--", ":", "-."][j % 4], label=label)
            else:
                ax.plot([], [], color=COLORS[i % len(COLORS)], linestyle=["-", "--", ":", "-."][j % 4],
                        label=f"{label} (no metrics)")
    ax.set_xticks(list(ticks), list(ticks.values()), rotation=30 if len(ticks) > 5 else 0)
    ax.set_xlabel(target.get("x_label", "attack budget"))
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=7)


def plot_per_class(catalog: Catalog, name: str, target: dict, axes) -> None:
    rows = target["rows"]
    columns = list(target["columns"].items())
    for ax, (column, attack) in zip(axes, columns):
        width = 0.8 / max(len(rows), 1)
        num_classes = None
        for i, row in enumerate(rows):
            preds = _predictions(catalog, row["run"], attack)
            if preds is None:
                continue
            labels = np.array(preds["labels"])
            correct = np.array([c == "1" for c in preds["robust_correct"]])
            num_classes = int(labels.max()) + 1
            per_class = [100 * correct[labels == k].mean() for k in range(num_classes)]
            ax.bar(np.arange(num_classes) + i * width, per_class, width, label=_label(row, {}),
                   color=COLORS[i % len(COLORS)])
        if num_classes:
            ax.set_xticks(np.arange(num_classes) + width * (len(rows) - 1) / 2, [str(k) for k in range(num_classes)])
        ax.set_title(column.upper())
        ax.set_xlabel("class")
        ax.set_ylabel("correct (%)")
    axes[0].legend()


def _curve_series(target: dict) -> list[str]:
    """The rows' series in order of appearance ([""] when no row has one)."""
    return list(dict.fromkeys(row.get("series", "") for row in target["rows"])) or [""]


def curve_panels(target: dict) -> int:
    """One panel per curve column, times one per series when the rows carry `series` (CA-AT Figure 3: a panel
    per dataset and architecture, a line per λ/γ)."""
    return len(target["curve_columns"]) * len(_curve_series(target))


def plot_curves(catalog: Catalog, name: str, target: dict, axes) -> None:
    import csv

    series = _curve_series(target)
    panels = [(column, s) for column in target["curve_columns"] for s in series]
    for ax, (column, panel_series) in zip(axes, panels):
        rows = [row for row in target["rows"] if row.get("series", "") == panel_series]
        for i, row in enumerate(rows):
            path = catalog.layout.curves(catalog.train_id[row["run"]])
            if not path.exists():
                continue
            with open(path) as f:
                data = list(csv.DictReader(f))
            if data and column in data[0]:
                ax.plot([float(d["epoch"]) for d in data], [float(d[column]) for d in data],
                        label=_label(row, {}), color=COLORS[i % len(COLORS)])
        ax.set_title(f"{column} — {panel_series}" if panel_series else column)
        ax.set_xlabel("epoch")
        if panel_series and ax.get_lines():
            ax.legend()
    if series == [""]:
        axes[0].legend()


from .fig_front import front_panels, plot_front  # noqa: E402  (kinds in their own modules)
from .fig_grid import make_grid  # noqa: E402
from .fig_tsne import make_tsne  # noqa: E402
from .fig_caat_synthetic import PANELS as CAAT_PANELS, plot_caat_synthetic  # noqa: E402

PLOTS = {"scatter": plot_scatter, "bars": plot_bars, "lines": plot_lines}
MULTI = {"per_class": (plot_per_class, lambda t: len(t["columns"])),
         "curves": (plot_curves, curve_panels),
         "front": (plot_front, front_panels),
         "caat_synthetic": (plot_caat_synthetic, lambda t: CAAT_PANELS)}
OWN = {"grid": make_grid, "tsne": make_tsne}  # kinds that lay out their own figure: fn(catalog, name, target) -> figure


def build_figure(catalog: Catalog, name: str) -> dict[str, Path]:
    target = catalog.targets[name]
    with plt.rc_context(STYLE):
        if target["plot"] in OWN:
            fig = OWN[target["plot"]](catalog, name, target)
        elif target["plot"] in MULTI:
            plot, panels = MULTI[target["plot"]]
            n = panels(target)
            fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.6), squeeze=False)
            plot(catalog, name, target, list(axes[0]))
        else:
            fig, ax = plt.subplots(figsize=(5.5, 4.2))
            PLOTS[target["plot"]](catalog, name, target, ax)
        return _finish(fig, catalog, name, target)


FIGURE_KINDS = sorted([*PLOTS, *MULTI, *OWN])
