"""The ``grid`` figure kind: test images on which models disagree (Generalist Figure 5(b), Zipper Figure 7).

Reads only its analysis JSON (``results/analysis/<target>.json``, written by the ``disagreement_grid``
analysis; see :mod:`tradeoff.analysis.disagreement`), never a checkpoint. One row of images per panel:
natural images, then adversarial examples (against the analysis's ``show`` model); each image is titled
with its true class and every model's prediction (on its own adversarial example in the adversarial row).
Grayscale for one-channel data. A panel with no image satisfying the condition says so.
"""

from __future__ import annotations

import numpy as np

from tradeoff.config import Catalog
from tradeoff.core.targets import TargetSpec
from tradeoff.report import what_ran as ran
from tradeoff.report.kinds import figure_kind
from tradeoff.report.style import FOOTNOTE, plt
from tradeoff.storage.layout import read_analysis


def _rule(data: dict, labels: dict[str, str]) -> str:
    cond = data["condition"]
    name = lambda keys: ", ".join(labels.get(k, k) for k in keys)  # noqa: E731
    right = f"{'any of' if cond['any_right'] and len(cond['right']) > 1 else ''} {name(cond['right'])} right"
    wrong = f"{'any of' if cond['any_wrong'] and len(cond['wrong']) > 1 else ''} {name(cond['wrong'])} wrong"
    return f"{right.strip()}; {wrong.strip()}"


def _show(ax, image: list) -> None:
    arr = np.clip(np.asarray(image, dtype=float), 0.0, 1.0)
    if arr.ndim == 2:
        ax.imshow(arr, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
    else:
        ax.imshow(arr, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)


@figure_kind("grid", own=True)
def make_grid(catalog: Catalog, name: str, target: TargetSpec):
    """The figure (not yet saved, laid out by figures._finish): one row per panel of the analysis, or a note when
    there is nothing."""

    data = read_analysis(catalog, name)
    if data is None:
        fig, ax = plt.subplots(figsize=(6, 2.5), layout="constrained")
        ax.axis("off")
        ax.text(0.5, 0.5, f"no analysis yet: run `tradeoff analyze {name}`", ha="center", va="center",
                transform=ax.transAxes)
        return fig
    labels = {m["key"]: m["label"] for m in data.get("models", [])}
    labels.update({r.key: r.label for r in target.rows if r.label is not None})
    classes = data.get("classes") or []
    panels = [(p, data["panels"][p]) for p in ("natural", "adversarial") if p in data["panels"]]
    ncols = max([len(panel["shown"]) for _, panel in panels] + [1])
    lines = 1 + len(labels)
    width = max(1.55 * ncols, 8.0)
    # a row: an image a little narrower than its column, its title's lines above it
    row_height = min(0.8 * width / ncols, 1.6) + 0.14 * lines + 0.3
    # a row without images holds only its note: a third of the height
    ratios = [1.0 if panel["shown"] else 0.35 for _, panel in panels]
    fig, axes = plt.subplots(len(panels), ncols, figsize=(width, row_height * sum(ratios)), squeeze=False,
                             layout="constrained", gridspec_kw={"height_ratios": ratios})
    for r, (panel_name, panel) in enumerate(panels):
        row = axes[r]
        for ax in row:
            ax.axis("off")
        if not panel["shown"]:
            row[0].text(0.0, 0.5, f"{panel_name}: no test image satisfies the condition\n({_rule(data, labels)}; "
                        f"{data['examples']} test images)", ha="left", va="center", fontsize=9,
                        transform=row[0].transAxes, clip_on=False, in_layout=False)  # across the row, not one cell
            continue
        for ax, item in zip(row, panel["shown"]):
            ax.axis("on")
            _show(ax, item["adversarial_image"] if panel_name == "adversarial" else item["image"])
            preds = [f"{labels.get(k, k)}: {classes[p] if p < len(classes) else p}"
                     for k, p in item["predictions"].items()]
            ax.set_title("\n".join([f"#{item['index']} true: {item['class']}", *preds]), fontsize=6.5)
        row[0].set_ylabel(f"{panel_name}: {panel['matches']} of {data['examples']}\n({len(panel['shown'])} shown)",
                          fontsize=9)
    note = f"shown: {_rule(data, labels)}"
    if "adversarial" in data["panels"]:
        runs = [r.run for r in target.rows]
        attack = data.get("attack", "?")
        note += (f"; adversarial: {ran.attack_phrase(catalog, attack, runs)} against each model, image against "
                 f"{labels.get(data['condition']['show'], data['condition']['show'])}")
    fig.text(0, 0, note, gid=FOOTNOTE)
    return fig
