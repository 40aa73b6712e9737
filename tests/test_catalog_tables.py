"""Every table of the paper-scale catalog maps the paper's reference cells: each reference row and column has a
row and a column in its target (and no target row or column invents one), and the runs carry the settings the
papers state."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tradeoff import config as cfg
from tradeoff.config import REFERENCE_DIR

CATALOG = cfg.load_catalog([cfg.ROOT / "config" / "config.yaml"])
TABLES = [n for n, t in CATALOG.targets.items() if t.kind == "table"]
# reference columns with no measurement yet (named in docs/differences.md)
UNMEASURED: set[tuple[str, str]] = set()
# reference rows whose target row is missing on purpose
UNMAPPED_ROWS: set[tuple[str, str]] = set()


def reference(name: str) -> tuple[set[str], set[str]]:
    with open(REFERENCE_DIR / f"{name}.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {r["row"] for r in rows}, {r["column"] for r in rows}


@pytest.mark.parametrize("name", TABLES)
def test_table_maps_every_reference_cell(name):
    target = CATALOG.targets[name]
    ref_rows, ref_cols = reference(target.reference)
    keys, cols = {r.key for r in target.rows}, set(target.columns)
    assert ref_rows - keys <= {r for t, r in UNMAPPED_ROWS if t == name}, f"{name}: reference rows without a row"
    assert ref_cols - cols <= {c for t, c in UNMEASURED if t == name}, f"{name}: reference columns without a column"
    # a target row may be extra only where the paper's row is lost (zipper_table8's Zipper rows)
    extra_rows = keys - ref_rows
    assert not extra_rows or name == "zipper_table8", f"{name}: rows not in the reference: {extra_rows}"


def test_every_generalist_and_zipper_target_of_the_catalog_exists():
    expected = {"table1", "table1a", "table1b", "table2", "table3", "table4", "table5", "figure1", "figure3",
                "figure4a", "figure4b", "figure5a", "figure5b", "zipper_table4", "zipper_table5", "zipper_table8",
                "zipper_table9", "zipper_figure5", "zipper_figure6", "zipper_figure7", "zipper_table1", "zipper_table1a",
                "zipper_table1b", "zipper_table3", "zipper_table7"}
    assert expected <= set(CATALOG.targets)


def test_seeded_tables_have_five_seeds_at_paper_scale_and_one_at_demo():
    for rid in ("mnist-resnet18-generalist", "svhn-resnet18-fat", "cifar10-resnet18-generalist-parallel"):
        assert [CATALOG.runs[r].seed for r in CATALOG.row_runs(rid)] == [0, 1, 2, 3, 4]
    demo = cfg.load_catalog([cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "demo.yaml"])
    assert demo.row_runs("mnist-resnet18-generalist") == ["mnist-resnet18-generalist"]


def test_seeds_paper_overlay_averages_tables_1_and_3_over_the_papers_five_seeds():
    """Tables 1(a), 1(b) and 3 average runs whose number the paper does not state: their notes say so and how many
    seeds ours used; one line of config/seeds-paper.yaml gives them the five of the paper's Tables 2 and 4, seed 0
    being the job the catalog trains already (nothing trains twice); a smaller scale still keeps its one seed."""
    overlay = cfg.ROOT / "config" / "seeds-paper.yaml"
    seeded = cfg.load_catalog([cfg.ROOT / "config" / "config.yaml", overlay])
    demo = cfg.load_catalog([cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "demo.yaml", overlay])
    for name in ("table1a", "table1b", "table3"):
        assert "--config config/seeds-paper.yaml" in " ".join(CATALOG.targets[name].paper_note)
        for row in CATALOG.targets[name].rows:
            assert CATALOG.row_runs(row.run) == [row.run] and demo.row_runs(row.run) == [row.run]
            runs = seeded.row_runs(row.run)
            assert [seeded.runs[r].seed for r in runs] == [0, 1, 2, 3, 4], row
            assert cfg.spec_digest(seeded.runs[runs[0]]) == cfg.spec_digest(CATALOG.runs[row.run])
    assert overlay.read_text().count("[0, 1, 2, 3, 4]") == 1


def test_zipper_table9_baseline_is_declared_beside_table1a():
    """Zipper Table 9's baseline, printed "γ = (1, 1, 1, 0.5)", has Zipper Table 1(a)'s Zipper numbers; table1a
    compares the (1, 1, 1, 0) run with them and zipper_table9 a (1, 1, 1, 0.5) run: both notes say it."""
    def cells(name, row):
        with open(REFERENCE_DIR / f"{name}.csv", newline="") as f:
            return {r["column"]: r["value"] for r in csv.DictReader(f) if r["row"] == row}

    baseline = cells("zipper_table9", "generalist_gamma_1_1_1_0.5")
    table1a = cells("table1a", "generalist")
    assert {c for c in baseline if baseline[c] != table1a[c]} == {"apgd_t"}  # Generalist's 46.37, Zipper's 45.37
    run = CATALOG.runs["cifar10-resnet18-generalist"].method.get("gamma")["values"]
    base = CATALOG.runs["cifar10-resnet18-generalist-gamma-1_1_1_0_5"].method.get("gamma")["values"]
    assert (run, base) == ((1, 1, 1, 0), (1, 1, 1, 0.5))  # frozen settings: tuples
    for name in ("table1a", "zipper_table9"):
        assert "(1, 1, 1, 0.5)" in " ".join(CATALOG.targets[name].paper_note)


ZIPPER_PAPER = Path("/work/shared/papers/zipper_iclr_submission.md")
# Zipper's own tables: (target, the Generalist table with the same rows and columns, cells, Zipper's caption)
ZIPPER_TABLES = [("zipper_table1a", "table1a", 99, "Table 1(a)"), ("zipper_table1b", "table1b", 99, "Table 1(b)"),
                 ("zipper_table3", "table3", 99, "Table 3"), ("zipper_table7", "table5", 10, "Table 7")]


@pytest.mark.parametrize("name, generalist, cells, caption", ZIPPER_TABLES)
def test_zippers_tables_share_generalists_runs_under_zippers_numbers(name, generalist, cells, caption):
    """Zipper's Tables 1, 3 and 7 print Generalist's Tables 1, 3 and 5 with other numbers: the same rows and
    columns, so the same training and evaluation jobs (nothing trains twice); their reference files parse in the
    format of config/reference/README.md, one line per printed cell, sourced to Zipper's table."""
    target, twin = CATALOG.targets[name], CATALOG.targets[generalist]
    assert (target.rows, target.columns) == (twin.rows, twin.columns)
    assert sorted(CATALOG.evaluations(name)) == sorted(CATALOG.evaluations(generalist))
    with open(REFERENCE_DIR / f"{name}.csv", newline="") as f:
        assert f.readline() == "target,row,label,column,value,std,source\n"
        f.seek(0)
        rows = list(csv.DictReader(f))
    assert len(rows) == cells and len({(r["row"], r["column"]) for r in rows}) == cells
    assert {r["target"] for r in rows} == {name} and {r["source"] for r in rows} == {
        f"zipper_iclr_submission.md {caption}"}
    assert all(float(r["value"]) >= 0 and r["std"] == "" for r in rows)
    assert "Zipper" in {r["label"] for r in rows} or name == "zipper_table7"


def test_zippers_tables_build_at_the_smoke_scale_with_zippers_numbers(tmp_path):
    """zipper_table1 (its two halves), zipper_table3 and zipper_table7 build at the smoke scale from the metrics of
    the Generalist tables' jobs, with Zipper's numbers on the paper's lines."""
    from report_fixtures import fraction, write_metrics

    from tradeoff.report.build import build_target

    overlay = tmp_path / "results.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}, data: data}}\n")
    smoke = cfg.load_catalog([cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "smoke.yaml", overlay])
    for name in ("zipper_table1", "zipper_table3", "zipper_table7"):
        for job, attack in smoke.evaluations(name):
            write_metrics(smoke, job, attack, fraction(job, attack, low=0.1, high=0.9))
        paths = build_target(smoke, name)
        text = next(p for p in paths if p.suffix == ".md").read_text()
        assert "| paper" in text and "Scale: **smoke**" in text
    assert "45.37" in (tmp_path / "results" / "smoke" / "tables" / "zipper_table1.md").read_text()
    assert "46.07" in (tmp_path / "results" / "smoke" / "tables" / "zipper_table7.md").read_text()


def test_zippers_numbers_are_the_papers():
    """A few cells where Zipper's tables differ from Generalist's (config/reference/README.md lists all 25), pinned;
    and, where the paper's text is at hand, every row of Zipper's Tables 1, 3 and 7 as it prints them."""
    def cell(name, row, column):
        with open(REFERENCE_DIR / f"{name}.csv", newline="") as f:
            return next(r["value"] for r in csv.DictReader(f) if (r["row"], r["column"]) == (row, column))

    pinned = {("zipper_table1a", "generalist", "apgd_t"): ("45.37", "table1a", "46.37"),
              ("zipper_table1b", "at_beta1", "aa"): ("48.17", "table1b", "46.11"),
              ("zipper_table1b", "trades_lambda6", "apgd_dlr"): ("55.5", "table1b", "55.50"),
              ("zipper_table3", "trades_lambda6", "aa"): ("24.72", "table3", "23.72"),
              ("zipper_table7", "generalist_lr_nt0.1_at0.01", "aa"): ("46.07", "table5", "46.37")}
    for (name, row, column), (zipper, generalist, theirs) in pinned.items():
        assert (cell(name, row, column), cell(generalist, row, column)) == (zipper, theirs)
    assert cell("zipper_table1a", "generalist", "aa") == cell("table1a", "generalist", "aa") == "46.07"
    if not ZIPPER_PAPER.exists():
        return
    text = ZIPPER_PAPER.read_text()
    for name, _, _, _ in ZIPPER_TABLES:
        with open(REFERENCE_DIR / f"{name}.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for key in dict.fromkeys(r["row"] for r in rows):
            values = "\t".join(r["value"] for r in rows if r["row"] == key)
            assert f"\t{values}\n" in text, f"{name} {key}: {values} is not a row of Zipper's text"


def test_runs_carry_the_stated_hyperparameters():
    runs = CATALOG.runs
    assert runs["cifar100-resnet18-generalist"].epochs == 200
    assert runs["mnist-resnet18-trades"].method.get("attack")["eps"] == pytest.approx(0.3)
    assert runs["svhn-resnet18-trades"].method.get("attack")["eps"] == pytest.approx(8 / 255)
    assert runs["cifar10-resnet18-generalist-parallel"].method.get("parallel") is True
    assert runs["cifar10-resnet18-generalist-no-ema"].method.get("ema") is False
    assert runs["cifar10-resnet18-generalist-lr-nt0_01-at0_1"].method.get("nt_lr") == 0.01
    assert runs["cifar10-resnet18-generalist-lr-nt0_01-at0_1"].lr.values[0] == 0.1
    assert runs["cifar10-resnet18-at-beta1-adam"].optimizer.name == "adam"
    assert runs["cifar10-resnet18-at-beta1-adam"].lr.values[0] == 1e-4
    assert runs["cifar10-resnet18-generalist-l2"].method.get("attack")["norm"] == "l2"
    assert runs["cifar10-resnet18-generalist-l2"].method.get("attack")["eps"] == pytest.approx(128 / 255)
    assert [runs[f"cifar10-resnet18-generalist-c{c}"].method.get("c") for c in (1, 15)] == [1, 15]
    # the demo keeps the Adam baseline's learning rate 100x below the SGD one (ratio to its preset's peak)
    demo = cfg.load_catalog([cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "demo.yaml"])
    assert demo.runs["cifar10-resnet18-at-beta1-adam"].lr.values[0] == pytest.approx(
        demo.runs["cifar10-resnet18-at-beta1"].lr.values[0] / 100)


def test_export_dvc_for_some_targets_keeps_exactly_their_stages():
    from tradeoff.pipeline.dvc_export import stage_kind, stages

    files = [str(cfg.ROOT / "config" / "config.yaml"), str(cfg.ROOT / "config" / "smoke.yaml")]
    catalog = cfg.load_catalog(files)
    full = stages(catalog, files)
    some = stages(catalog, files, ["table5"])
    runs = {catalog.train_id[r.run] for r in catalog.targets["table5"].rows}
    assert {"table@table5", "download@digits"} <= set(some)
    assert {n.partition("@")[2] for n in some if stage_kind(n) == "train"} == runs
    assert not any(stage_kind(n) in ("table", "figure", "figure_list") and n != "table@table5" for n in some)
    assert "summary" in full and "summary" not in some
    assert all(full[n] == some[n] for n in some if n != "resolve")  # resolve's command names the targets
