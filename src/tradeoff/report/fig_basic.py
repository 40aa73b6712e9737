"""The basic figure kinds: scatter (clean against robust accuracy, ours against the paper's points), bars (grouped
per row), lines (a metric over a swept parameter, or over attack budgets: a panel per budget-sweep column), per_class
(accuracy per class, clean and under an attack) and curves (per-epoch columns of the training curves)."""

from __future__ import annotations

import numpy as np

from tradeoff.config import Catalog
from tradeoff.core.targets import TargetSpec
from tradeoff.report import records, stats, table_model, table_notes
from tradeoff.report import what_ran as ran
from tradeoff.report.kinds import figure_kind
from tradeoff.report.labels import (
    _LEARNER as LEARNER_CURVE,
)
from tradeoff.report.labels import (
    curve_axis_label,
    curve_label,
    curve_scale,
    curve_title,
    curve_unit,
)
from tradeoff.report.style import (
    FOOTNOTE,
    LINESTYLES,
    MARKERS,
    error_bars,
    errors,
    figure_legend,
    interval,
    interval_note,
    measured,
    palette,
    percent_limits,
    plt,
)
from tradeoff.report.table_model import load_reference
from tradeoff.storage import curves as live


def read_predictions(catalog: Catalog, run: str, attack: str) -> dict | None:
    """A run's per-example predictions under an attack (labels, robust_correct bits), or None if not yet made;
    read only after its metrics are vouched for (tradeoff.report.records)."""
    return records.predictions(catalog, run, attack)


def _labels(catalog: Catalog, name: str) -> dict[str, str]:
    """Row key -> the row as a legend or tick names it (table_notes.figure_labels: as its table does, what ran, ‡)."""
    return table_notes.figure_labels(catalog, name)


def _title(catalog: Catalog, target: TargetSpec, column: str) -> str:
    """A column as its axis, panel or legend names it: its measurement and the budget that ran (report.ran)."""
    return ran.column_title(catalog, target, column, target.columns[column])


@figure_kind("scatter")
def plot_scatter(catalog: Catalog, name: str, target: TargetSpec, axes) -> None:
    names = _labels(catalog, name)
    ax = axes[0]
    (xcol, xattack), (ycol, yattack) = list(target.columns.items())[:2]
    reference = load_reference(catalog, target.reference) if target.reference else {}
    if reference and ran.ran_phrase(catalog, name):  # another dataset and model: not points of one plane
        ax.figure.text(0, 0, "the paper's points are not drawn: at this scale ours are of another dataset and model",
                       gid=FOOTNOTE)
        labels = {r: lab for (r, _), (_, _, lab) in reference.items()}
        reference = {(r, "_label"): (0.0, None, lab) for r, lab in labels.items()}  # the paper's row labels only
    colours = palette(len(target.rows))
    xs, ys = [], []
    for row, color in zip(target.rows, colours):
        found = measured(catalog, row.run, xattack), measured(catalog, row.run, yattack)
        ours = tuple(None if m is None else m[0] for m in found)
        paper = reference.get((row.key, xcol)), reference.get((row.key, ycol))
        paper = (paper[0][0], paper[1][0]) if None not in paper else (None, None)
        if None not in ours:
            error_bars(ax, [ours[0]], [ours[1]], xerr=errors([found[0]]), yerr=errors([found[1]]), ecolor=color,
                       elinewidth=1.0, capsize=2.5, alpha=0.8, zorder=2.5)
            ax.scatter(*ours, color=color, s=42, label=names[row.key], zorder=3)
            xs += [found[0][1], found[0][2]]
            ys += [found[1][1], found[1][2]]
            interval_note(ax.figure)
        else:
            ax.scatter([], [], color=color, s=42, label=f"{names[row.key]} (no metrics)")
        if None not in paper:
            ax.scatter(*paper, facecolors="none", edgecolors=color, s=42, linewidths=1.3, zorder=2)
            xs.append(paper[0]), ys.append(paper[1])
    ax.set_xlabel(f"{_title(catalog, target, xcol)}: accuracy (%)")
    ax.set_ylabel(f"{_title(catalog, target, ycol)}: accuracy (%)")
    percent_limits(ax, xs, "x")
    percent_limits(ax, ys, "y")
    handles, labels = ax.get_legend_handles_labels()
    if any(c != "_label" for _, c in reference):
        handles += [plt.Line2D([], [], marker="o", linestyle="", color="0.25", markersize=6),
                    plt.Line2D([], [], marker="o", linestyle="", markerfacecolor="none", markeredgecolor="0.25",
                               markersize=6)]
        labels += ["ours (filled)", "paper (hollow)"]
    figure_legend(ax.figure, handles, labels)


@figure_kind("bars")
def plot_bars(catalog: Catalog, name: str, target: TargetSpec, axes) -> None:
    names = _labels(catalog, name)
    ax = axes[0]
    rows, columns = target.rows, list(target.columns.items())
    width = 0.8 / max(len(columns), 1)
    xs = np.arange(len(rows))
    for j, ((column, attack), color) in enumerate(zip(columns, palette(len(columns)))):
        found = [measured(catalog, r.run, attack) for r in rows]
        values = [None if m is None else m[0] for m in found]
        bars = [m or (np.nan, np.nan, np.nan) for m in found]
        ax.bar(xs + j * width, [m[0] for m in bars], width, label=_title(catalog, target, column), color=color)
        if any(m is not None for m in found):
            error_bars(ax, xs + j * width, [m[0] for m in bars], yerr=errors(bars), ecolor="0.2", elinewidth=0.9,
                       capsize=2.0)
            interval_note(ax.figure)
        for x, v in zip(xs + j * width, values):  # a bar too low to see says what it is: 0, or not measured
            if v is None or v < 0.5:
                ax.text(x, 1.0, "n/a" if v is None else f"{v:.0f}", rotation=90 if v is None else 0, ha="center",
                        va="bottom", fontsize=7, color="0.35")
    ax.set_xticks(xs + width * (len(columns) - 1) / 2, [names[r.key] for r in rows])
    ax.tick_params(axis="x", length=0)
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    figure_legend(ax.figure)


def _budget_sweeps(catalog: Catalog, target: TargetSpec) -> list[str]:
    """The columns of a `lines` figure that name a budget sweep without a budget (x = the sweep's budgets)."""
    return [a for a in target.columns.values()
            if "@" not in a and a in catalog.attacks and catalog.attacks[a].sweep]


def lines_panels(catalog: Catalog, name: str, target: TargetSpec) -> int:
    """One panel, or one per budget-sweep column of a `lines` figure over attack budgets."""
    return max(len(_budget_sweeps(catalog, target)), 1)


@figure_kind("lines", lambda catalog, name, target: lines_panels(catalog, name, target))
def plot_lines(catalog: Catalog, name: str, target: TargetSpec, axes) -> None:
    if _budget_sweeps(catalog, target):
        return plot_budget_lines(catalog, name, target, axes)
    ax = axes[0]
    groups: dict[str, list[dict]] = {}
    for row in target.rows:
        groups.setdefault((row.series or ""), []).append(row)
    pairs = [(c, s) for c in target.columns.items() for s in groups]
    ys = []
    for ((column, attack), series), color in zip(pairs, palette(len(pairs))):
        pts = [(r.x, measured(catalog, r.run, attack)) for r in groups[series]]
        pts = [(x, m) for x, m in pts if m is not None]
        label = f"{_title(catalog, target, column)}, {series}" if series else _title(catalog, target, column)
        style = LINESTYLES[list(groups).index(series) % len(LINESTYLES)]
        ax.plot(*(zip(*[(x, m[0]) for x, m in pts]) if pts else ([], [])), marker="o", markersize=5, color=color,
                linestyle=style, label=label if pts else f"{label} (no metrics)")
        if pts:
            error_bars(ax, [x for x, _ in pts], [m[0] for _, m in pts], yerr=errors([m for _, m in pts]),
                       ecolor=color, elinewidth=0.9, capsize=2.0, alpha=0.7)
            interval_note(ax.figure)
        ys += [v for _, m in pts for v in (m[1], m[2])]
    ax.set_xlabel((target.x_label or "parameter") + _ran_ticks(catalog, name, ax))
    ax.set_ylabel("accuracy (%)")
    percent_limits(ax, ys)
    figure_legend(ax.figure)


def _ran_ticks(catalog: Catalog, name: str, ax) -> str:
    """Where this scale runs the swept setting otherwise than its x value says (Figure 3(b)'s c of the paper's 120
    epochs, run in epochs of the demo's 10): a tick per row with the value that ran below it in brackets, and the
    axis' second line saying so; "" where every value ran as written. A row whose model was selected before its
    method's mechanism acts has ‡ on its tick."""
    studied = ran.studied_settings(catalog, name)
    early = table_notes.early_rows(catalog, name)
    rows = [r for r in catalog.targets[name].rows if r.x is not None and len(studied.get(r.key) or {}) == 1]
    ticks = {}
    for row in rows:
        (key, (written, here)), = studied[row.key].items()
        ticks[float(row.x)] = (f"{row.x:g}" + (f" {table_model.EARLY}" if row.key in early else "")
                               + (f"\n({here:.3g})" if abs(written - here) > 1e-9 else ""))
    marked = {float(r.x): f"{r.x:g} {table_model.EARLY}" for r in catalog.targets[name].rows
              if r.x is not None and r.key in early and float(r.x) not in ticks}
    if marked:  # a point selected before its method's mechanism: ‡ on its tick, beside the axis' own ticks
        ax.figure.canvas.draw()
        ticks = {**{float(t): f"{t:g}" for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]},
                 **ticks, **marked}
    if not ticks or not any("\n" in t or table_model.EARLY in t for t in ticks.values()):
        return ""
    ax.set_xticks(sorted(ticks), [ticks[x] for x in sorted(ticks)])
    if not rows or not any("\n" in t for t in ticks.values()):
        return ""
    return f"\n(in brackets: {ran.setting_name(catalog, rows[0].run, key)} as run at this scale)"


def plot_budget_lines(catalog: Catalog, name: str, target: TargetSpec, axes) -> None:
    """Accuracy over attack budgets (CA-AT Figure 8): a panel per sweep column, a line per row (colour per row,
    the same in every panel), x = the sweep's budgets as the paper-scale catalog writes them (the tick labels; a
    smaller scale rescales the budgets it runs). A clean column is each line's point at budget 0."""
    names = _labels(catalog, name)
    sweeps = _budget_sweeps(catalog, target)
    clean = [a for a in target.columns.values() if a not in sweeps]
    colours = palette(len(target.rows))
    values, failed = [], []
    for ax, (column, attack) in zip(axes, [(c, a) for c, a in target.columns.items() if a in sweeps]):
        points = catalog.budget_sweep_points(attack)
        ticks = {0.0: "0"} if clean else {}
        # as the paper writes the budget, and below it the budget that ran where this scale maps it to another
        ran = {job: catalog.attack_for(job, target.rows[0].run).eps for _, _, job in points}
        ticks.update({x: text if abs(ran[job] - x) < 1e-9 else f"{text}\n({ran[job]:.3g})" for x, text, job in points})
        for i, (row, color) in enumerate(zip(target.rows, colours)):
            pts = [(0.0, measured(catalog, row.run, clean[0]))] if clean else []
            cells = [(x, text, table_model.measure(catalog, row.run, job)) for x, text, job in points]
            pts += [(x, interval(cell)) for x, _, cell in cells]
            pts = [(x, m) for x, m in pts if m is not None]
            label = names[row.key]
            ax.plot(*(zip(*[(x, m[0]) for x, m in pts]) if pts else ([], [])), marker=MARKERS[i % len(MARKERS)],
                    markersize=4.5, color=color, label=label if pts else f"{label} (no metrics)")
            if pts:
                error_bars(ax, [x for x, _ in pts], [m[0] for _, m in pts], yerr=errors([m for _, m in pts]),
                           ecolor=color, elinewidth=0.9, capsize=2.0, alpha=0.7)
                interval_note(ax.figure)
            values += [v for _, m in pts for v in (m[1], m[2])]
            # a point where the attack failed (records.attack_failure) is no robustness: crossed out, said below
            bad = [(x, text, cell) for x, text, cell in cells if cell.value is not None and cell.failed]
            if bad:
                ax.plot([x for x, _, _ in bad], [c.value for _, _, c in bad], linestyle="", marker="X", markersize=9,
                        markerfacecolor="none", markeredgecolor="#c00000", markeredgewidth=1.3, zorder=4)
            failed += [(label, _title(catalog, target, column), text, cell) for _, text, cell in bad]
        ax.set_xticks(list(ticks), list(ticks.values()), rotation=30 if len(ticks) > 5 else 0)
        rescaled = any(abs(ran[job] - x) > 1e-9 for x, _, job in points)
        ax.set_xlabel((target.x_label or "attack budget")
                      + ("\n(in brackets: the budget run at this scale)" if rescaled else ""))
        ax.set_ylabel("accuracy (%)")
        ax.set_title(_title(catalog, target, column))
    for ax in axes:
        percent_limits(ax, values)
    if failed:  # the cross in the legend, what each one is in the footer
        axes[0].plot([], [], linestyle="", marker="X", markersize=8, markerfacecolor="none", markeredgecolor="#c00000",
                     markeredgewidth=1.3, label=f"{table_model.FAILED} the attack failed: not robustness")
        for label, column, budget, cell in failed:
            axes[0].figure.text(0, 0, f"{table_model.FAILED} {label}, {column} at {budget}: the attack failed: "
                                      f"{cell.failed}", gid=FOOTNOTE)
    figure_legend(axes[0].figure)


@figure_kind("per_class", lambda catalog, name, target: len(target.columns))
def plot_per_class(catalog: Catalog, name: str, target: TargetSpec, axes) -> None:
    names = _labels(catalog, name)
    rows = target.rows
    colours = palette(len(rows))
    for ax, (column, attack) in zip(axes, target.columns.items()):
        width = 0.8 / max(len(rows), 1)
        num_classes = None
        for i, (row, color) in enumerate(zip(rows, colours)):
            preds = read_predictions(catalog, row.run, attack)
            if preds is None:
                ax.bar([], [], width, label=f"{names[row.key]} (no predictions)", color=color)
                continue
            labels = np.array(preds["labels"])
            correct = np.array([c == "1" for c in preds["robust_correct"]])
            num_classes = int(labels.max()) + 1
            per_class = [(100 * correct[labels == k].mean(), *(100 * b for b in stats.wilson(
                int(correct[labels == k].sum()), int((labels == k).sum()))))
                if (labels == k).any() else (np.nan, np.nan, np.nan) for k in range(num_classes)]
            ax.bar(np.arange(num_classes) + i * width, [p[0] for p in per_class], width, label=names[row.key],
                   color=color)
            error_bars(ax, np.arange(num_classes) + i * width, [p[0] for p in per_class], yerr=errors(per_class),
                       ecolor="0.2", elinewidth=0.8, capsize=1.5)
            interval_note(ax.figure)
        if num_classes:
            ax.set_xticks(np.arange(num_classes) + width * (len(rows) - 1) / 2, [str(k) for k in range(num_classes)])
        ax.tick_params(axis="x", length=0)
        ax.grid(axis="x", visible=False)
        ax.set_ylim(0, 100)
        ax.set_title(_title(catalog, target, column))
        ax.set_xlabel("class")
        ax.set_ylabel("correct predictions (%)")
    figure_legend(axes[0].figure)


def _curve_series(target: TargetSpec) -> list[str]:
    """The rows' series in order of appearance ([""] when no row has one)."""
    return list(dict.fromkeys((row.series or "") for row in target.rows)) or [""]


def curve_panels(target: TargetSpec) -> int:
    """One panel per curve column, times one per series when the rows carry `series` (CA-AT Figure 3: a panel
    per dataset and architecture, a line per λ/γ)."""
    return len(target.curve_columns) * len(_curve_series(target))


def read_curves(catalog: Catalog, run: str) -> list[dict] | None:
    """A run's training curves (tradeoff.storage.curves.read_curves: a dict per epoch), or None if it has not trained
    yet; with what the clock measured of each epoch (``seconds``, ``images_per_s``), which its model's sidecar holds
    (records.training_clock), where it has one."""
    rows = live.read_curves(catalog.layout.curves(catalog.train_id[run]))
    clock = {e["epoch"]: e for e in records.training_clock(catalog, run)[1] or []}
    timed = sorted({k for e in clock.values() for k, v in e.items()
                    if k != "epoch" and isinstance(v, (int, float)) and not isinstance(v, bool)})
    return None if rows is None else [{**row, **{k: clock.get(row["epoch"], {}).get(k) for k in timed}}
                                      for row in rows]


@figure_kind("curves", lambda catalog, name, target: curve_panels(target))
def plot_curves(catalog: Catalog, name: str, target: TargetSpec, axes) -> None:
    """A line per row and panel; accuracies (stored as fractions) drawn in %, each curve under its human name
    (labels.curve_label), a row's colour the same in every panel."""
    names = _labels(catalog, name)
    series = _curve_series(target)
    panels = [(column, s) for column in target.curve_columns for s in series]
    row_labels = list(dict.fromkeys(names[row.key] for row in target.rows))
    colours = dict(zip(row_labels, palette(len(row_labels))))
    percent_values: list[float] = []
    for ax, (column, panel_series) in zip(axes, panels):
        scale = curve_scale(column)
        for row in (r for r in target.rows if (r.series or "") == panel_series):
            data = read_curves(catalog, row.run)
            label = names[row.key]
            if data and column in data[0]:
                pts = [(d["epoch"], scale * d[column]) for d in data if d[column] is not None]
                ax.plot(*(zip(*pts) if pts else ([], [])), label=label, color=colours[label])
                if curve_unit(column) == "%":
                    percent_values += [y for _, y in pts]
            else:
                ax.plot([], [], label=f"{label} (no curves)", color=colours[label])
        title = curve_title(column)
        if panel_series:
            title = panel_series if len(target.curve_columns) == 1 else f"{title}\n{panel_series}"
        ax.set_title(title)
        ax.set_xlabel("epoch")
        # a panel per series of one curve: the curve's name on the axis; else the panel title names it
        ax.set_ylabel(curve_label(column) if panel_series and len(target.curve_columns) == 1
                      else curve_axis_label(column))
    for ax, (column, _) in zip(axes, panels):
        if curve_unit(column) == "%":  # accuracy panels on one scale
            percent_limits(ax, percent_values)
    runs = [row.run for row in target.rows]
    attack = ran.tracking_attack(catalog, runs)
    images = ran.tracking_images(catalog, runs)
    said = []
    if attack and any(LEARNER_CURVE.match(c) and not c.endswith("_clean") for c in target.curve_columns):
        said.append(f"the learners' robust curves: {ran.attack_phrase(catalog, attack, runs)}")
    if images and any(LEARNER_CURVE.match(c) for c in target.curve_columns):
        said.append(f"the learners measured after every epoch on {images}")
    if said:
        axes[0].figure.text(0, 0, "; ".join(said), gid=FOOTNOTE)
    figure_legend(axes[0].figure)


# ------------------------------------------------------------------------------------------ the layout
