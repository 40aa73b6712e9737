"""Figures: every kind builds from metrics/predictions/curves files alone into a valid PNG and PDF, drawing
accuracies in % under the measurements' human names (tradeoff.report.labels)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from PIL import Image
from report_fixtures import write_curves, write_metrics, write_predictions

from tradeoff import config as cfg
from tradeoff.core.targets import Row, TargetSpec
from tradeoff.report import figures, labels
from tradeoff.report.build import build_target, target_outputs

ROOT = cfg.ROOT
RUNS = ["cifar10-resnet18-nt", "cifar10-resnet18-at-beta1", "cifar10-resnet18-at-beta0_5"]
FIGURES = {
    "fig_scatter": {"kind": "figure", "plot": "scatter", "title": "scatter", "reference": "table1a",
                    "rows": [{"key": k, "run": r} for k, r in zip(["nt", "at_beta1", "at_beta0.5"], RUNS)],
                    "columns": {"nat": "clean", "pgd20": "pgd20"}},
    "fig_bars": {"kind": "figure", "plot": "bars", "rows": [{"key": "a", "run": r, "label": r} for r in RUNS],
                 "columns": {"nat": "clean", "pgd20": "pgd20"}},
    "fig_lines": {"kind": "figure", "plot": "lines", "x_label": "beta",
                  "rows": [{"key": str(i), "run": r, "x": float(i)} for i, r in enumerate(RUNS)],
                  "columns": {"nat": "clean", "pgd20": "pgd20"}},
    "fig_classes": {"kind": "figure", "plot": "per_class", "rows": [{"key": "a", "run": r} for r in RUNS],
                    "columns": {"natural": "clean", "pgd20": "pgd20"}},
    "fig_bars_labelled": {"kind": "figure", "plot": "bars", "rows": [{"key": "a", "run": RUNS[0], "label": "Mine"}],
                          "columns": {"nat": "clean", "pgd20": "pgd20"}, "column_labels": {"nat": "SA"}},
    "fig_curves": {"kind": "figure", "plot": "curves", "rows": [{"key": r, "run": r} for r in RUNS],
                   "curve_columns": ["eval_clean", "eval_robust"]},
    "figs": {"kind": "group", "targets": ["fig_scatter", "fig_bars", "table1a"]},
    "table1a": {"kind": "table", "title": "Table 1(a)", "reference": "table1a", "compare": "at_beta1",
                "rows": [{"key": k, "run": r} for k, r in zip(["nt", "at_beta1", "at_beta0.5"], RUNS)],
                "columns": {"nat": "clean", "pgd20": "pgd20"}},
}


@pytest.fixture()
def catalog(tmp_path):
    overlay = tmp_path / "figures.yaml"
    overlay.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": "data"},
                                       "runtime": {"eval_unit": "attack"},  # files written per attack
                                       "targets": FIGURES}))
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", overlay])
    for i, run in enumerate(RUNS):
        for attack, acc in (("clean", 0.9 - 0.05 * i), ("pgd20", 0.1 + 0.2 * i)):
            write_metrics(catalog, run, attack, acc)
            write_predictions(catalog, run, attack, [k % 10 for k in range(64)], [(k + i) % 3 != 0 for k in range(64)])
        write_curves(catalog, run, [{"epoch": 1, "eval_clean": 0.5, "eval_robust": 0.1},
                                    {"epoch": 2, "eval_clean": 0.7, "eval_robust": 0.2},
                                    {"epoch": 3, "eval_clean": 0.8, "eval_robust": 0.25}])
    return catalog


@pytest.mark.parametrize("name", [n for n, t in FIGURES.items() if t["kind"] == "figure"])
def test_every_figure_kind_is_a_valid_image(catalog, name):
    paths = build_target(catalog, name)
    assert paths == target_outputs(catalog, name)
    png = next(p for p in paths if p.suffix == ".png")
    with Image.open(png) as img:
        img.verify()
    with Image.open(png) as img:
        assert img.size[0] > 300 and img.size[1] > 200
        assert len(img.convert("L").getcolors(maxcolors=1 << 16) or []) > 10  # something was drawn
    pdf = next(p for p in paths if p.suffix == ".pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000


def test_group_lists_tables_and_figures(catalog):
    build_target(catalog, "figs")
    md = (catalog.results / "tables" / "figs.md").read_text()
    assert "Table 1(a)" in md and "fig_scatter.png" in md


def test_curves_are_drawn_in_percent_under_human_names(catalog):
    """The curves files hold fractions: the figure draws 50, 70, 80 % and names the columns."""
    fig = figures.make_figure(catalog, "fig_curves")
    try:
        clean, robust = fig.axes
        assert clean.get_title() == "clean accuracy" and robust.get_title() == "robust accuracy"
        assert clean.get_ylabel() == "accuracy (%)"
        assert list(clean.get_lines()[0].get_ydata()) == pytest.approx([50, 70, 80])
        assert [t.get_text() for t in fig.axes[-1].get_legend().get_texts()] == RUNS
    finally:
        figures.plt.close(fig)


def test_bars_and_lines_name_their_columns(catalog):
    for name in ("fig_bars", "fig_lines"):
        fig = figures.make_figure(catalog, name)
        try:
            legend = fig.axes[0].get_legend()
            assert [t.get_text() for t in legend.get_texts()] == ["Natural", "PGD-20, ε = 8/255 (here 0.3)"]
            assert fig.axes[0].get_ylabel() == "accuracy (%)"
        finally:
            figures.plt.close(fig)


def test_a_targets_own_labels_win_in_the_figure(catalog):
    fig = figures.make_figure(catalog, "fig_bars_labelled")
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["SA", "PGD-20, ε = 8/255 (here 0.3)"]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["Mine"]
    finally:
        figures.plt.close(fig)


@pytest.mark.parametrize("column, label", [
    ("nat", "Natural"), ("natural", "Natural"), ("clean", "Clean"), ("pgd20", "PGD-20"), ("pgd100", "PGD-100"),
    ("apgd_ce", "APGD-CE"), ("apgd_t", "APGD-T"), ("fab_t", "FAB-T"), ("t_fab", "T-FAB"), ("aa", "AutoAttack"),
    ("cw", "CW"), ("mim", "MIM"), ("square", "Square"), ("nrob", "NROB"), ("train_minutes", "Training time (min)"),
    ("pgd@16/255", "PGD, ε = 16/255"), ("pgd_l2@0.5", "PGD-L2, ε = 0.5"), ("t_apgd_l2@1.5", "T-APGD-L2, ε = 1.5"),
    ("caat_fgsm@8_255", "FGSM, ε = 8/255"), ("pgd20_l2", "PGD-20 (L2)"),
    ("SA", "SA"), ("AA", "AA"), ("T-FAB", "T-FAB"), ("AutoAttack", "AutoAttack"),  # the catalog's own labels
])
def test_column_labels(column, label):
    assert labels.column_label(None, column) == label


def test_a_targets_column_labels_win():
    assert labels.column_label(TargetSpec.from_dict({"kind": "figure", "column_labels": {"nat": "SA"}}), "nat") == "SA"
    assert labels.row_label(Row(key="k", run="r", label="Mine"), "Reference's") == "Mine"
    assert labels.row_label(Row(key="k", run="r"), "Reference's") == "Reference's"
    assert labels.row_label(Row(key="k", run="r")) == "k"


@pytest.mark.parametrize("column, label, unit", [
    ("train_mu", "μ (gradient conflict)", ""), ("eval_clean", "clean accuracy (%)", "%"),
    ("eval_robust", "robust accuracy (%)", "%"), ("train_acc", "training accuracy (%)", "%"),
    ("learner_at_clean", "AT learner, clean accuracy (%)", "%"),
    ("learner_nt_pgd_self", "NT learner, PGD accuracy, attack made against itself (%)", "%"),
    ("learner_nt_pgd_from_at", "NT learner, PGD accuracy, attack made against the AT learner (%)", "%"),
    ("seconds", "epoch time (s)", "s"), ("track_seconds", "learner tracking time (s)", "s"),
    ("images_per_s", "throughput (images/s)", "images/s"), ("train_gamma", "γ (mixing weight of the AT learner)", ""),
    ("train_nt_acc", "NT learner, training accuracy (%)", "%"), ("train_cos", "cos(g_c, g_a)", ""),
    ("train_tau", "τ (FAT early-stopping threshold)", ""), ("train_pgd_steps", "PGD steps per example", ""),
])
def test_curve_labels_and_units(column, label, unit):
    assert labels.curve_label(column) == label
    assert labels.curve_unit(column) == unit
    assert labels.curve_scale(column) == (100.0 if unit == "%" else 1.0)
    assert "accuracy" not in labels.curve_axis_label(column) or unit == "%"  # time is never an accuracy


def test_every_curve_column_training_writes_has_a_label():
    """The columns of tradeoff.training.train and of every method's per-step report have their own name here."""
    from tradeoff.training.train import CURVE_FIELDS

    for column in CURVE_FIELDS:
        assert column in labels.CURVES
    for key in ("mu", "cos", "norm_gc", "norm_ga", "clean_loss", "adv_loss", "gamma", "nt_acc", "nt_loss", "tau",
                "pgd_steps"):
        assert f"train_{key}" in labels.CURVES


def test_labels_import_without_matplotlib():
    code = "import sys; import tradeoff.report.labels; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
