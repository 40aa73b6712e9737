"""Figures: every kind builds from metrics/predictions/curves files alone into a valid PNG and PDF."""

from __future__ import annotations

import json

import pytest
import yaml
from PIL import Image

from tradeoff import config as cfg
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
    "fig_curves": {"kind": "figure", "plot": "curves", "rows": [{"key": "a", "run": r} for r in RUNS],
                   "curve_columns": ["eval_clean", "eval_robust"]},
    "figs": {"kind": "group", "targets": ["fig_scatter", "fig_bars", "table1a"]},
    "table1a": {"kind": "table", "title": "Table 1(a)", "reference": "table1a",
                "rows": [{"key": k, "run": r} for k, r in zip(["nt", "at_beta1", "at_beta0.5"], RUNS)],
                "columns": {"nat": "clean", "pgd20": "pgd20"}},
}


@pytest.fixture()
def catalog(tmp_path):
    overlay = tmp_path / "figures.yaml"
    overlay.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": "data"},
                                       "targets": FIGURES}))
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml", overlay])
    results = tmp_path / "results"
    for i, run in enumerate(RUNS):
        for attack, acc in (("clean", 0.9 - 0.05 * i), ("pgd20", 0.1 + 0.2 * i)):
            path = results / "metrics" / run / f"{attack}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"accuracy": acc}))
            pred = results / "predictions" / run / f"{attack}.json"
            pred.parent.mkdir(parents=True, exist_ok=True)
            labels = [k % 10 for k in range(50)]
            pred.write_text(json.dumps({"labels": labels, "robust_correct": "".join("1" if (k + i) % 3 else "0" for k in range(50))}))
        curve = results / "curves" / f"{run}.csv"
        curve.parent.mkdir(parents=True, exist_ok=True)
        curve.write_text("epoch,eval_clean,eval_robust\n1,0.5,0.1\n2,0.7,0.2\n3,0.8,0.25\n")
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
