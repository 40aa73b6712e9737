"""The ``tsne`` figure kind: t-SNE of the adversarial images made from a Generalist run's NT and AT learners,
one panel per snapshot epoch (Zipper Figure 6).

Reads only its analysis JSON (``results/analysis/<target>.json``, written by the ``learner_tsne`` analysis; see
:mod:`tradeoff.analysis.learner_tsne`), never a checkpoint. One row of panels per figure row (run), one panel
per epoch; points coloured by the learner the adversarial image was made from; each panel's title gives the
epoch and the share of points whose nearest neighbour comes from the same learner (0.5 mixed, 1 separated).
t-SNE axes carry no meaning, so they have no ticks.
"""

from __future__ import annotations

import numpy as np

from tradeoff.config import Catalog
from tradeoff.core.targets import TargetSpec
from tradeoff.report import what_ran as ran
from tradeoff.report.kinds import figure_kind
from tradeoff.report.style import FOOTNOTE, figure_legend, plt
from tradeoff.storage.layout import read_analysis

SOURCES = {"nt": ("made against the NT learner", "tab:orange"), "at": ("made against the AT learner", "tab:blue")}


@figure_kind("tsne", own=True)
def make_tsne(catalog: Catalog, name: str, target: TargetSpec):
    """The figure (not yet saved, laid out by figures._finish): rows x epochs panels, one legend right of them,
    or a note when the analysis has not run."""

    data = read_analysis(catalog, name)
    panels = (data or {}).get("panels") or []
    if not panels:
        fig, ax = plt.subplots(figsize=(6, 2.5), layout="constrained")
        ax.axis("off")
        note = (f"no analysis yet: run `tradeoff analyze {name}`" if data is None
                else "the analysis has no snapshot epochs")
        ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes)
        return fig
    keys = list(dict.fromkeys(p["key"] for p in panels))
    epochs = sorted({p["epoch"] for p in panels})
    labels = {r.key: r.key if r.label is None else r.label for r in target.rows}
    fig, axes = plt.subplots(len(keys), len(epochs), figsize=(max(2.9 * len(epochs), 6.0), 2.9 * len(keys) + 0.4),
                             squeeze=False, layout="constrained")
    for ax in axes.flat:
        ax.axis("off")
    for p in panels:
        ax = axes[keys.index(p["key"])][epochs.index(p["epoch"])]
        ax.axis("on")
        # opaque points, both sources in one seeded random order: every point is one of the legend's colours (no
        # blend of two translucent points reads as a third kind), and neither source always covers the other
        xs, ys, colours = [], [], []
        for i, (source, pts) in enumerate(p["sources"].items()):
            label, color = SOURCES.get(source, (source, f"C{i + 2}"))
            ax.scatter([], [], s=5, color=color, label=label, linewidths=0)
            xs += list(pts["x"])
            ys += list(pts["y"])
            colours += [color] * len(pts["x"])
        order = np.random.default_rng(0).permutation(len(xs))
        ax.scatter(np.asarray(xs)[order], np.asarray(ys)[order], s=5, c=[colours[k] for k in order], linewidths=0)
        title = f"epoch {p['epoch']}"
        if len(keys) > 1:
            title = f"{labels.get(p['key'], p['key'])}, {title}"
        ax.set_title(f"{title}\nsame-learner nearest neighbour: {p['same_source_nn']:.2f}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    figure_legend(fig, markerscale=3)
    runs = [r.run for r in target.rows]
    fig.text(0, 0, f"{ran.attack_phrase(catalog, data.get('attack', ''), runs)} adversarial "
             f"{data.get('embed', 'images')} of {data.get('examples', '?')} test images per learner; same-learner "
             "nearest neighbour: the share of points whose nearest neighbour in the embedding was made against the "
             "same learner (0.5: mixed, 1: separated); t-SNE axes have no units", gid=FOOTNOTE)
    return fig
