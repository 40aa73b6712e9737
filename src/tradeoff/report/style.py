"""The one style of every figure: matplotlib settings, sizes, colours, and the helpers that every figure kind
shares (legends outside the plotting area, accuracy axes in %, wrapped text, an accuracy's 95% interval as error
bars). No figure kind and no layout here:
:mod:`tradeoff.report.figures` lays figures out, the ``fig_*`` modules draw the kinds."""

from __future__ import annotations

import math
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)
import numpy as np  # noqa: E402

from tradeoff.config import Catalog  # noqa: E402
from tradeoff.report import table_model  # noqa: E402

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
    """Limits of an accuracy axis around ``values`` (%): ``margin`` (a share of the range) either side, never past
    0 or 100 % by more than ``room`` of the range and one point (room for a marker, not for a scale beyond 100 %),
    and a readable range when the values are close (all-zero accuracies: 0 to 4, not -0.05 to 0.05; values up to 4:
    0 to 5, not 0 to 10). Ticks only from 0 to 100 %."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 100.0)  # nothing measured yet: the whole range
    if hi - lo < 4.0:
        lo = max(0.0, lo - 1.0)
        hi = min(100.0, max(hi + 1.0, lo + 4.0))
        lo = min(lo, hi - 4.0)
    span = hi - lo
    edge = min(room * span, 1.0)
    lo, hi = max(lo - margin * span, -edge), min(hi + margin * span, 100.0 + edge)
    axis_ = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)
    ticks = [t for t in axis_.get_major_locator().tick_values(lo, hi) if -1e-9 <= t <= 100 + 1e-9 and lo <= t <= hi]
    axis_.set_ticks(ticks)


def tick_spacing_px(ax, ticks) -> float:
    if len(ticks) < 2:
        return ax.bbox.width
    xs = ax.transData.transform([(t, 0) for t in ticks])[:, 0]
    return float(np.min(np.diff(np.sort(xs))))


def wrap_text(text_artist, width_px: float, renderer) -> None:
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


# ------------------------------------------------------------------------------- an accuracy's interval

INTERVALS = "error bars: each accuracy's 95% interval (Wilson over the test images; with seeds, Student's t over them)"


def measured(catalog: Catalog, run: str, attack: str) -> tuple[float, float, float] | None:
    """(accuracy, low, high) in % of a row under an evaluation: its 95% Wilson interval over the test images (one
    seed), or Student's t interval over its seeds' accuracies; low = high = the value where there is no binomial
    interval (NROB, a time). None until measured."""
    return interval(table_model.measure(catalog, run, attack))


def interval(o) -> tuple[float, float, float] | None:
    """:func:`measured` of a cell already measured (a :func:`table_model.measure` outcome)."""
    if o.value is None:
        return None
    if o.lo is not None:
        return o.value, o.lo, o.hi
    seeds = len(o.bits) or len(o.files)
    if o.std is not None and seeds > 1:
        from scipy.stats import t

        half = float(t.ppf(0.975, seeds - 1)) * o.std * math.sqrt(seeds / (seeds - 1)) / math.sqrt(seeds)
        return o.value, max(o.value - half, 0.0), min(o.value + half, 100.0)
    return o.value, o.value, o.value


def errors(points: list[tuple[float, float, float]]) -> np.ndarray:
    """matplotlib's asymmetric error bars, (2, n), from (value, low, high) triples."""
    return np.array([[v - lo for v, lo, _ in points], [hi - v for v, _, hi in points]]).reshape(2, len(points))


def error_bars(ax, x, y, **kwargs) -> None:
    """Error bars (``ax.errorbar``'s ``xerr``/``yerr``, no markers) that stay out of ``ax.containers``: a panel's
    containers are its bars."""
    container = ax.errorbar(x, y, fmt="none", **kwargs)
    ax.containers.remove(container)


def interval_note(fig) -> None:
    """Say under a figure what its error bars are (once)."""
    if not any(t.get_text() == INTERVALS for t in fig.texts):
        fig.text(0, 0, INTERVALS, gid=FOOTNOTE)
