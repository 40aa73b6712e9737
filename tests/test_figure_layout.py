"""What a reader sees: every figure kind, built from fixture files (no training) for real targets of the
paper-scale catalog (their long titles, their many points), is checked with matplotlib's renderer: every title,
label and legend lies inside the figure; no legend covers an axes' plotting area or another text; point labels
do not overlap each other; tick labels do not overlap; accuracies are drawn in %, series in distinct colours;
and building a figure twice writes byte-identical PNG and PDF files."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from report_fixtures import caat_synthetic_analysis, fill_target, grid_analysis, tsne_analysis, write_analysis  # noqa: E402

from tradeoff import config as cfg  # noqa: E402
from tradeoff.report import figures  # noqa: E402

ROOT = cfg.ROOT
TOLERANCE = 1.0  # pixels two boxes may share (touching is not overlapping)

# (case, target, how its files are faked). Each figure kind at least once; the cases that broke in the demo build
# (cut titles, legends over bars, coinciding front points) on purpose.
CASES = {
    "scatter": ("figure1", {}),
    "bars": ("figure3a", {"missing": {("cifar10-resnet18-generalist-gamma-0_5", a) for a in ("pgd20", "cw", "aa")}}),
    "bars-tall": ("figure4b", {}),
    "lines": ("figure3b", {}),
    "lines-budget-sweep": ("caat_figure8", {}),
    "per_class": ("figure5a", {}),
    "curves": ("zipper_figure5", {}),
    "curves-series": ("caat_figure3a", {}),
    "front": ("caat_figure6a", {}),
    "front-coinciding": ("caat_figure6b", {"same": 0.0}),
    "front-panels": ("caat_figure7a", {}),
    "grid": ("figure5b", {}),
    "tsne": ("zipper_figure6", {}),
    "caat_synthetic": ("caat_figure2", {}),
}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layout")
    overlay = tmp / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"paths": {"results": str(tmp / "results"), "data": "data"}}))
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", overlay])
    for name, kwargs in CASES.values():
        fill_target(catalog, name, **kwargs)
    write_analysis(catalog, "figure5b", grid_analysis(catalog, "figure5b", channels=3, size=32))
    write_analysis(catalog, "zipper_figure6", tsne_analysis(catalog, "zipper_figure6"))
    write_analysis(catalog, "caat_figure2", caat_synthetic_analysis())
    return catalog


# ------------------------------------------------------------------------------------------------ checks


def _overlap(a, b) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE) and (min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE)


def _inside(box, outer) -> bool:
    return (box.x0 >= outer.x0 - TOLERANCE and box.y0 >= outer.y0 - TOLERANCE and box.x1 <= outer.x1 + TOLERANCE
            and box.y1 <= outer.y1 + TOLERANCE)


def _shown(artist) -> bool:
    return artist is not None and artist.get_visible() and (not hasattr(artist, "get_text") or artist.get_text())


def _legends(fig) -> list[Legend]:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


def _plot_axes(fig) -> list:
    """Axes that draw data (not switched off)."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison]


def _titles(ax) -> list:
    return [t for t in (ax.title, ax._left_title, ax._right_title) if _shown(t)]


def layout_problems(fig) -> list[str]:
    """Everything a reader would trip on in the figure's layout, as sentences (empty: none)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = lambda artist: artist.get_window_extent(renderer)  # noqa: E731
    problems = []
    texts = {"suptitle": fig._suptitle} if _shown(fig._suptitle) else {}
    texts.update({f"figure text {t.get_text()[:30]!r}": t for t in fig.texts if _shown(t) and t is not fig._suptitle})
    for i, ax in enumerate(fig.axes):
        for t in _titles(ax):
            texts[f"axes {i} title {t.get_text()[:30]!r}"] = t
        for label in (ax.xaxis.label, ax.yaxis.label):
            if _shown(label) and ax.axison:
                texts[f"axes {i} axis label {label.get_text()[:30]!r}"] = label
    for name, text in texts.items():
        if not _inside(box(text), fig.bbox):
            problems.append(f"{name} is cut: {box(text)} outside the figure {fig.bbox}")
    for i, legend in enumerate(_legends(fig)):
        if not _inside(box(legend), fig.bbox):
            problems.append(f"legend {i} is cut: {box(legend)} outside the figure {fig.bbox}")
        for j, ax in enumerate(_plot_axes(fig)):
            if _overlap(box(legend), ax.bbox):
                problems.append(f"legend {i} covers the plotting area of axes {j}")
        for name, text in texts.items():
            if _overlap(box(legend), box(text)):
                problems.append(f"legend {i} covers the {name}")
    # titles against other axes and against each other (a title in the row above, the suptitle on a panel)
    for (name_a, a), (name_b, b) in itertools.combinations(
            [(n, t) for n, t in texts.items() if "axis label" not in n], 2):
        if _overlap(box(a), box(b)):
            problems.append(f"{name_a} overlaps {name_b}")
    for name, text in texts.items():
        if "title" in name or name == "suptitle":
            for j, ax in enumerate(_plot_axes(fig)):
                if text not in _titles(ax) and _overlap(box(text), ax.bbox):
                    problems.append(f"{name} overlaps the plotting area of axes {j}")
    text_box = lambda t: Text.get_window_extent(t, renderer)  # noqa: E731  (without an annotation's leader line)
    for i, ax in enumerate(fig.axes):
        notes = [t for t in ax.texts if _shown(t)]
        for a, b in itertools.combinations(notes, 2):
            if _overlap(text_box(a), text_box(b)):
                problems.append(f"axes {i}: labels {a.get_text()!r} and {b.get_text()!r} overlap")
        for t in notes:
            if not _inside(box(t), fig.bbox):
                problems.append(f"axes {i}: label {t.get_text()!r} is cut")
        if not ax.axison:
            continue
        for axis in (ax.xaxis, ax.yaxis):
            ticks = [t for t in axis.get_ticklabels() if _shown(t) and _inside(box(t), fig.bbox)
                     and t.get_window_extent(renderer).width > 0]
            for a, b in itertools.combinations(ticks, 2):
                if _overlap(box(a), box(b)):
                    problems.append(f"axes {i}: tick labels {a.get_text()!r} and {b.get_text()!r} overlap")
    return problems


def _series_colours(ax) -> list[tuple]:
    """The colour of every labelled line and bar group of an axes (one per series)."""
    lines = [to_rgba(line.get_color()) for line in ax.get_lines() if not line.get_label().startswith("_")]
    bars = [to_rgba(c.patches[0].get_facecolor()) for c in ax.containers if c.patches and
            not c.get_label().startswith("_")]
    return lines + bars


# ------------------------------------------------------------------------------------------------- tests


def test_every_figure_kind_has_a_case():
    assert set(figures.FIGURE_KINDS) == {case.split("-")[0] for case in CASES}
    assert "lines-budget-sweep" in CASES


@pytest.mark.parametrize("case", list(CASES))
def test_layout_has_nothing_cut_covered_or_overlapping_and_distinct_colours(catalog, case):
    name, _ = CASES[case]
    assert catalog.targets[name].plot == case.split("-")[0]
    fig = figures.make_figure(catalog, name)
    try:
        problems = layout_problems(fig)
        for i, ax in enumerate(fig.axes):
            colours = _series_colours(ax)
            if len(colours) != len(set(colours)):
                problems.append(f"axes {i}: a colour is used by two series")
    finally:
        plt.close(fig)
    assert not problems, f"{name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("case", ["curves", "curves-series", "lines-budget-sweep", "bars", "front"])
def test_accuracies_are_drawn_in_percent(catalog, case):
    """Curves files store fractions: an accuracy panel's data and its axis are in %, time is not an accuracy."""
    name, _ = CASES[case]
    fig = figures.make_figure(catalog, name)
    try:
        checked = 0
        for ax in fig.axes:
            if "%" not in ax.get_ylabel():
                continue
            ys = [y for line in ax.get_lines() for y in line.get_ydata()] + \
                 [p.get_height() for c in ax.containers for p in c.patches]
            assert ys and max(ys) > 1.0 and max(ys) <= 100.0, (name, ax.get_ylabel(), ys)
            assert "time" not in ax.get_ylabel() and "second" not in ax.get_ylabel()
            checked += 1
        # every panel of an accuracy figure says % (CA-AT Figure 3 draws μ, not an accuracy)
        assert checked == (0 if case == "curves-series" else len(fig.axes)), [ax.get_ylabel() for ax in fig.axes]
    finally:
        plt.close(fig)


def test_the_check_finds_cut_titles_covering_legends_and_overlapping_labels():
    """The old layout's faults, made on purpose: a title wider than its figure, a legend inside the axes over the
    bars, two point labels on top of each other, tick labels running into each other."""
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar([0, 1], [90, 95], label="bars")
    ax.legend(loc="upper right")
    ax.annotate("λ=0", (0, 50), xytext=(4, 3), textcoords="offset points")
    ax.annotate("γ=1", (0, 50), xytext=(4, 3), textcoords="offset points")
    ax.set_xticks([0, 1], ["a long category name", "another long category name"])
    fig.suptitle("A title much wider than the figure that carries it, cut at both of its edges")
    try:
        problems = layout_problems(fig)
    finally:
        plt.close(fig)
    assert any(p.startswith("suptitle is cut") for p in problems)
    assert "legend 0 covers the plotting area of axes 0" in problems
    assert "axes 0: labels 'λ=0' and 'γ=1' overlap" in problems
    assert any("tick labels" in p for p in problems)


@pytest.mark.parametrize("case", [case for case in CASES if "-" not in case or case == "lines-budget-sweep"])
def test_building_twice_writes_identical_files(catalog, case):
    name, _ = CASES[case]
    first = {kind: path.read_bytes() for kind, path in figures.build_figure(catalog, name).items()}
    second = {kind: path.read_bytes() for kind, path in figures.build_figure(catalog, name).items()}
    assert first.keys() == {"png", "pdf"}
    assert first == second
    assert b"CreationDate" not in first["pdf"]


def _analysis_for(catalog, name):
    kind = catalog.targets[name].plot
    if kind == "grid":
        return grid_analysis(catalog, name)
    if kind == "tsne":
        return tsne_analysis(catalog, name)
    return caat_synthetic_analysis()


@pytest.mark.parametrize("state", ["measured", "nothing yet"])
def test_every_figure_of_the_catalog_is_laid_out_cleanly(tmp_path, state):
    """Every figure target of the paper-scale catalog (their titles, rows and columns), with its files faked, and
    before any of them exists (legends say "no metrics", figures say the analysis has not run)."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": "data"}}))
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", overlay])
    names = [n for n, t in catalog.targets.items() if t.kind == "figure"]
    assert {catalog.targets[n].plot for n in names} == set(figures.FIGURE_KINDS)
    if state == "measured":  # the cases above are measured already
        names = [n for n in names if n not in {name for name, _ in CASES.values()}]
    found = {}
    for name in names:
        if state == "measured":
            fill_target(catalog, name)
            if catalog.targets[name].analysis is not None:
                write_analysis(catalog, name, _analysis_for(catalog, name))
        fig = figures.make_figure(catalog, name)
        try:
            problems = layout_problems(fig)
        finally:
            plt.close(fig)
        if problems:
            found[name] = problems
    assert not found
