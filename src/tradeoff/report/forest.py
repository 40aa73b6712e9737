"""The claims' forest plot (``results/<scale>/figures/claims.png``, ``.pdf``): each tested claim's effect, in points,
with its 95% interval, against zero (no difference) and, for a claim that one method is not worse than another, its
margin; coloured by its verdict. The summary shows it under its verdict table (:mod:`tradeoff.report.summary`).

A claim whose test repeats another's at this scale (``same_as``) is drawn once, on the other's line; a claim that this
scale cannot test has no effect to draw, and the footer counts them. A ``front`` claim's effect is an area of the
clean-robust plane, not points of accuracy: it is drawn in a panel of its own.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.lines import Line2D

from tradeoff.config import Catalog
from tradeoff.report import claims
from tradeoff.report.figures import save_figure
from tradeoff.report.labels import claim_title
from tradeoff.report.style import STYLE, plt, wrap_text

COLOURS = {"holds": "#1a9850", "fails": "#d73027", "inconclusive": "#6f6f6f"}
MARKERS = {"holds": "o", "fails": "s", "inconclusive": "D"}
ROW = 0.27       # inches per claim
WIDTH = 10.0     # inches


def drawn(found: list) -> list:
    """The verdicts the plot draws, in the summary's order (by verdict, then the file's): tested, each test once."""
    return sorted((v for v in found if v.test is not None and not getattr(v, "same_as", None)),
                  key=lambda v: claims.VERDICTS.index(v.verdict))


def _panel(ax, shown: list, unit: str) -> None:
    ys = list(range(len(shown)))[::-1]
    for y, v in zip(ys, shown):
        t, colour = v.test, COLOURS.get(v.verdict, "0.4")
        ax.plot([t.lo, t.hi], [y, y], color=colour, linewidth=1.8, solid_capstyle="butt")
        ax.plot([t.diff], [y], marker=MARKERS.get(v.verdict, "o"), color=colour, markersize=5.5, linestyle="")
        if v.margin is not None:
            ax.plot([-v.margin, -v.margin], [y - 0.38, y + 0.38], color="#4575b4", linewidth=1.6)
    ax.axvline(0.0, color="0.15", linewidth=0.9, zorder=0)
    ax.set_yticks(ys, [claim_title(v.claim) for v in shown])
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(f"difference in {unit} (the claimed side minus the other)")
    low = min([v.test.lo for v in shown] + [-(v.margin or 0.0) for v in shown] + [0.0])
    high = max([v.test.hi for v in shown] + [0.0])
    pad = 0.06 * max(high - low, 1.0)
    ax.set_xlim(low - pad, high + pad)


def make_claims_figure(catalog: Catalog, found: list):
    """The forest plot of ``found`` (claims.verdicts' verdicts), laid out and ready to save."""
    shown = drawn(found)
    fronts = [v for v in shown if v.claim["test"]["kind"] == "front"]
    points = [v for v in shown if v not in fronts]
    panels = [(p, unit) for p, unit in ((points, "points"), (fronts, "points of area")) if p]
    with plt.rc_context(STYLE):
        heights = [max(len(p), 1) for p, _ in panels] or [1]
        # laid out at the resolution it is saved at (text measured at another one may not fit the margins left)
        fig = plt.figure(figsize=(WIDTH, 1.5 + ROW * sum(heights) + 0.7 * len(heights)), layout="constrained",
                         dpi=STYLE["savefig.dpi"])
        axes = fig.subplots(len(heights), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for ax, (p, unit) in zip(axes, panels):
            _panel(ax, p, unit)
        if not panels:
            axes[0].axis("off")
            axes[0].text(0.5, 0.5, "no claim is tested at this scale", ha="center", va="center",
                         transform=axes[0].transAxes)
        handles = [Line2D([], [], color=COLOURS[k], marker=MARKERS[k], linewidth=1.8, label=k)
                   for k in COLOURS if any(v.verdict == k for v in shown)]
        if any(v.margin is not None for v in shown):
            handles.append(Line2D([], [], color="#4575b4", linewidth=1.6, label="−margin (not worse by more)"))
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        untested = [v for v in found if v.test is None]
        repeated = [v for v in found if v.test is not None and getattr(v, "same_as", None)]
        title = fig.suptitle(f"The papers' claims at the {catalog.scale} scale: each effect with its 95% interval")
        note = (f"{len(untested)} of {len(found)} claims untestable here (not drawn)"
                + (f"; {len(repeated)} repeat another's test here (drawn once)" if repeated else "")
                + f"; scale: {catalog.scale}")
        footer = fig.text(0.005, 0.004, note, ha="left", va="bottom", fontsize=7, color="0.35")
        fig.canvas.draw()
        wrap_text(title, 0.97 * fig.bbox.width, fig.canvas.get_renderer())
        wrap_text(footer, 0.97 * fig.bbox.width, fig.canvas.get_renderer())
        engine = fig.get_layout_engine()
        bottom = (footer.get_window_extent().height / fig.dpi + 0.05) / fig.get_figheight()
        engine.set(rect=(0.0, bottom, 1.0, 1.0 - bottom))
        fig.canvas.draw()
        fig.set_layout_engine("none")
    return fig


def build_claims_figure(catalog: Catalog, found: list | None = None) -> dict[str, Path]:
    """Draw and save the forest plot (the verdicts computed here unless given)."""
    fig = make_claims_figure(catalog, claims.verdicts(catalog) if found is None else found)
    try:
        return save_figure(fig, catalog.layout.claims_figure())
    finally:
        plt.close(fig)
