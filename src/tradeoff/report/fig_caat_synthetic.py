"""The ``caat_synthetic`` figure kind: CA-AT Figure 2, vanilla AT (λ = 0.5) of a logistic regression with the
exact inner maximum, against the attack budget δ.

Reads only its analysis JSON (``results/analysis/<target>.json``, written by the ``caat_synthetic`` analysis; see
:mod:`tradeoff.analysis.caat_synthetic` for every formula), never a checkpoint. Four panels: (a) t-SNE of the
per-example clean and adversarial gradients g_c, g_a at one δ (the paper: one such panel per δ); (b) clean and
adversarial test accuracy per δ; (c) the gradient conflict μ and Theorem 1's bound ½·λ_max·d²·δ² (the paper's
red line; dashed: ½·λ_max·‖ε*‖², the same bound with the actual perturbation), log scale; (d) ‖g_c‖, ‖g_a‖ and
1 − cos(g_c, g_a), the factors of μ.
"""

from __future__ import annotations

import numpy as np

from tradeoff.config import Catalog
from tradeoff.core.targets import TargetSpec
from tradeoff.report import stats
from tradeoff.report.kinds import figure_kind
from tradeoff.report.style import FOOTNOTE, axes_legend
from tradeoff.storage.layout import read_analysis

CLEAN, ADV, BOUND, BOUND_EPS, COS = "tab:blue", "tab:orange", "tab:red", "tab:purple", "tab:green"
PANELS = 4


def caat_panels(catalog: Catalog, name: str, target: TargetSpec) -> int:
    """Four panels, or one for the note that the analysis has not run."""
    data = read_analysis(catalog, name)
    return PANELS if data and data.get("per_delta") else 1


@figure_kind("caat_synthetic", caat_panels)
def plot_caat_synthetic(catalog: Catalog, name: str, target: TargetSpec, axes) -> None:
    """Draw the four panels into ``axes`` (two by two, each with its legend on its right; or a note when the
    analysis has not run)."""

    data = read_analysis(catalog, name)
    if not data or not data.get("per_delta"):
        axes[0].axis("off")
        axes[0].text(0.5, 0.5, f"no analysis yet: run `tradeoff analyze {name}`", ha="center", va="center",
                     transform=axes[0].transAxes)
        return
    rows = data["per_delta"]
    deltas = [r["delta"] for r in rows]
    ticks = [f"{d:g}" for d in deltas]
    ax_tsne, ax_acc, ax_mu, ax_parts = axes

    tsne = data["tsne"]
    points = np.asarray(tsne["points"], dtype=float)
    kinds = np.asarray(tsne["kind"])
    for kind, color, label in (("clean", CLEAN, "$g_c$ (clean)"), ("adversarial", ADV, "$g_a$ (adversarial)")):
        pts = points[kinds == kind]
        ax_tsne.scatter(pts[:, 0], pts[:, 1], s=7, alpha=0.6, color=color, label=label, linewidths=0)
    ax_tsne.set_xticks([])
    ax_tsne.set_yticks([])
    ax_tsne.set_title(f"(a) t-SNE of per-example gradients, δ = {tsne['delta']:g}", fontsize=9)
    axes_legend(ax_tsne, markerscale=2.5)

    xs = np.arange(len(rows))
    width = 0.38
    n = int(data.get("test_examples") or 0)
    for offset, key, color, label in ((-width / 2, "clean_acc", CLEAN, "clean"),
                                      (width / 2, "adv_acc", ADV, "adversarial (exact)")):
        values = [100 * r[key] for r in rows]
        bounds = [[100 * b for b in stats.wilson(round(r[key] * n), n)] for r in rows] if n else None
        ax_acc.bar(xs + offset, values, width, color=color, label=label)
        if bounds is not None:  # (kept out of ax.containers, as the other kinds' error bars)
            bars = ax_acc.errorbar(xs + offset, values, fmt="none", ecolor="0.2", elinewidth=0.9, capsize=2.0,
                                   yerr=np.array([[v - lo for v, (lo, _) in zip(values, bounds)],
                                                  [hi - v for v, (_, hi) in zip(values, bounds)]]))
            ax_acc.containers.remove(bars)
    ax_acc.set_xticks(xs, ticks)
    ax_acc.set_xlabel("δ (L∞ budget)")
    ax_acc.set_ylabel("test accuracy (%)")
    ax_acc.set_ylim(0, 100)
    ax_acc.grid(axis="x", visible=False)
    ax_acc.set_title("(b) accuracy", fontsize=9)
    axes_legend(ax_acc)

    ax_mu.plot(deltas, [r["mu"] for r in rows], marker="o", color="0.15", label="μ (measured)")
    ax_mu.plot(deltas, [r["bound"] for r in rows], color=BOUND, label="Theorem 1: ½λ$_{max}$d²δ²")
    ax_mu.plot(deltas, [r["bound_eps"] for r in rows], color=BOUND_EPS, linestyle="--", label="½λ$_{max}$‖ε*‖²")
    ax_mu.set_yscale("log")
    ax_mu.set_xlabel("δ (L∞ budget)")
    ax_mu.set_ylabel("μ")
    ax_mu.set_title(f"(c) gradient conflict μ (d = {data['input_dim']})", fontsize=9)
    axes_legend(ax_mu)

    for key, color, marker, label in (("norm_gc", CLEAN, "o", "‖$g_c$‖"), ("norm_ga", ADV, "s", "‖$g_a$‖"),
                                      ("one_minus_cos", COS, "^", "1 − cos($g_c$, $g_a$)")):
        ax_parts.plot(deltas, [r[key] for r in rows], marker=marker, color=color, label=label)
    ax_parts.set_xlabel("δ (L∞ budget)")
    ax_parts.set_ylabel("value")
    ax_parts.set_title("(d) factors of μ (full-batch gradients)", fontsize=9)
    axes_legend(ax_parts)
    ax_parts.figure.text(
        0, 0, f"{data.get('dataset')} {data.get('classes')} ({data.get('train_examples')} train, "
        f"{data.get('test_examples')} test, d = {data['input_dim']}), logistic regression, vanilla AT "
        f"λ = {data.get('lam')}, {data.get('epochs')} epochs, exact inner maximum"
        + ("; (b): each accuracy with its 95% Wilson interval over the test examples" if n else ""), gid=FOOTNOTE)
