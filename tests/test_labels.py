"""Every label true: strong attacks that reach their budget, one budget rule per scale, titles and columns that say
what ran, targets and rows that repeat another said so, the selected epoch of every row (flagged before its method's
mechanism), Holm-corrected daggers, bold only behind a test."""

from __future__ import annotations

import csv

import pytest
import yaml
from helpers import ROOT
from report_fixtures import outcomes, write_measurement

from tradeoff import config as cfg
from tradeoff.core.targets import TargetSpec
from tradeoff.report import table_model, table_render, tables
from tradeoff.report import what_ran as ran

PAPER = [ROOT / "config" / "config.yaml"]
DEMO = PAPER + [ROOT / "config" / "demo.yaml"]
SMOKE = PAPER + [ROOT / "config" / "smoke.yaml"]
NT, AT, HALF = "cifar10-resnet18-nt", "cifar10-resnet18-at-beta1", "cifar10-resnet18-at-beta0_5"
GEN = "cifar10-resnet18-generalist"
N = 64
TABLE = {"kind": "table", "title": "Table 1(a): CIFAR-10, ResNet-18, eps = 8/255", "reference": "table1a",
         "compare": "at_beta1",
         "rows": [{"key": "nt", "run": NT}, {"key": "at_beta1", "run": AT}, {"key": "at_beta0.5", "run": HALF}],
         "columns": {"nat": "clean", "pgd20": "pgd20"}}


def _overlay(tmp_path, files, body: dict):
    path = tmp_path / f"overlay{len(list(tmp_path.glob('overlay*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(body, allow_unicode=True, sort_keys=False))
    return files + [path]


def _catalog(tmp_path, targets=None, **extra):
    body = {"paths": {"results": str(tmp_path / "results"), "data": str(tmp_path / "data")},
            "runtime": {"eval_unit": "attack"}, "targets": targets or {"t": TABLE}, **extra}
    return cfg.load_catalog(_overlay(tmp_path, SMOKE, body))


# ------------------------------------------------------------------------------------------ strong is strong


def test_a_strong_column_that_cannot_reach_its_budget_is_refused(tmp_path):
    """CA-AT's torchattacks PGD, 10 steps of 2/255, as a strong column over the 8-32/255 sweep: a fixed step under
    a sweep is refused, and so is a path shorter than 2 eps from a random start (10 x 2/255 at 32/255)."""
    files = _overlay(tmp_path, PAPER, {"attacks": {"caat_pgd": {"step_size": "2/255"}}})
    with pytest.raises(cfg.ConfigError, match=r"columns\.\S+: attacks\.caat_pgd sweeps eps .* "
                                              r"fixed step_size '2/255'"):
        cfg.load_catalog(files)
    weak = {"kind": "table", "title": "weak", "rows": [{"key": "nt", "run": NT}], "columns": {"pgd": "weak32"}}
    files = _overlay(tmp_path, PAPER, {
        "attacks": {"weak32": {"type": "pgd", "norm": "linf", "eps": "32/255", "steps": 10, "step_size": "2/255"}},
        "targets": {"weak": weak}})
    with pytest.raises(cfg.ConfigError, match=r"targets\.weak\.columns\.pgd: weak32 cannot reach its budget at scale "
                                              r"paper .*10 steps travel 0\.07843 in linf, less than 0\.251 \(2 eps "
                                              r"from a random start"):
        cfg.load_catalog(files)
    # the authors' weak settings stay as their protocol: caatcode_pgd keeps its fixed 2/225
    paper = cfg.load_catalog(PAPER)
    assert paper.attacks["caatcode_pgd"].step_size == "2/225"


@pytest.mark.parametrize("files", [PAPER, DEMO, SMOKE], ids=["paper", "demo", "smoke"])
def test_every_strong_column_of_the_catalog_reaches_its_budget(files):
    """Every scale resolves (check-config runs the reach check); CA-AT's strong PGD at 32/255 steps 8/255, Zipper's
    L2 MIM eps/4; the smoke scale's 3-step cap lengthens the step so the path still spans its budget."""
    from tradeoff.attacks import ATTACKS

    catalog = cfg.load_catalog(files)
    for name, target in catalog.targets.items():
        for attack in target.columns.values():
            if attack in cfg.PSEUDO_COLUMNS:
                continue
            for job in catalog.column_jobs(attack):
                run = catalog.train_id[target.rows[0].run]
                spec = catalog.attack_for(job, run)
                reach = ATTACKS[spec.type].reach(spec) if spec.type in ATTACKS else None
                assert reach is None or reach[0] >= reach[1] * (1 - 1e-9), (name, job, spec)
    run = "cifar10-resnet18-caat-ce-gamma0_8"
    if catalog.scale == "paper":
        assert catalog.attack_for("caat_pgd@32_255", run).step_size == pytest.approx(8 / 255)
    if catalog.scale == "smoke":
        pgd20 = catalog.attack_for("pgd20", NT)
        assert pgd20.params["steps"] == 3 and pgd20.step_size == pytest.approx(0.3 / 4 * 20 / 3)


def test_every_budget_of_a_target_is_mapped_by_one_rule():
    """At the demo one CA-AT "8/255" is one budget: the sweep's, AutoAttack's and training's (0.3 on digits); the
    larger training budget 12/255 is 0.45, and 32/255 (1.2) is capped at the image range."""
    demo = cfg.load_catalog(DEMO)
    run = "cifar10-resnet18-caat-ce-gamma0_8"
    assert demo.attack_for("caat_pgd@8_255", run).eps == pytest.approx(0.3)
    assert demo.attack_for("aa", run).eps == pytest.approx(0.3)
    assert demo.attack_for("caat_t_apgd_dlr", run).eps == pytest.approx(0.3)
    assert demo.runs[run].method.get("attack")["eps"] == pytest.approx(0.3)
    assert demo.runs["cifar10-resnet18-caat-ce-gamma0_8-train_eps12"].method.get("attack")["eps"] == pytest.approx(0.45)
    assert demo.attack_for("caat_pgd@32_255", run).eps == pytest.approx(1.0)
    assert demo.attack_for("caat_t_pgd_l2", run).eps == demo.attack_for("caat_pgd_l2@0.5", run).eps
    assert "sweep_unit" not in demo.config["scale_map"]


# --------------------------------------------------------------------------------- titles, columns, twins


def test_titles_and_columns_say_what_ran(tmp_path):
    catalog = _catalog(tmp_path)
    assert ran.title(catalog, "t") == ("Table 1(a): CIFAR-10, ResNet-18, eps = 8/255 — smoke scale ran: 8×8 digits, "
                                       "small CNN, ε = 0.3")
    assert ran.column_title(catalog, TargetSpec.from_dict(TABLE), "pgd20", "pgd20") == "PGD-20, ε = 8/255 (here 0.3)"
    assert ran.column_title(catalog, TargetSpec.from_dict(TABLE), "nat", "clean") == "Natural"
    paper = cfg.load_catalog(PAPER)
    assert ran.title(paper, "table1a") == "Table 1(a): CIFAR-10, ResNet-18, eps = 8/255"
    assert ran.column_title(paper, paper.targets["table1a"], "pgd20", "pgd20") == "PGD-20, ε = 8/255"
    assert ran.column_title(paper, paper.targets["caat_table1"], "pgd@16/255", "caat_pgd@16_255") == "PGD, ε = 16/255"


def test_a_target_that_repeats_another_at_this_scale_says_so(tmp_path):
    """At the demo Table 1(b)'s WRN-32-10 rows are Table 1(a)'s jobs; the adapter figures collapse onto one miniature;
    Table 2's and Table 3's baselines are CIFAR-10's jobs. At the paper scale only Zipper's own tables
    repeat Generalist's, by design (the same runs beside Zipper's numbers)."""
    demo = cfg.load_catalog(DEMO)
    assert ran.twin(demo, "table1b") == "table1a"
    assert ran.twin(demo, "table3") is None  # its Generalist keeps CIFAR-100's EMA window: one row of its own
    assert {ran.twin(demo, f) for f in ("caat_figure4b", "caat_figure4c", "caat_figure4d", "caat_figure5")} == \
        {"caat_figure4a"}
    assert ran.title(demo, "table1b").endswith("(= table1a at this scale)")
    assert "not a second measurement" in ran.twin_note(demo, "table1b")
    assert ran.twin(demo, "table1a") is None
    paper = cfg.load_catalog(PAPER)
    assert all(ran.twin(paper, name) is None for name in paper.targets if not name.startswith("zipper_table"))
    # a row that is another paper setting's training job says so (Table 2's MNIST TRADES is CIFAR-10's at the demo)
    [note] = ran.shared_job_notes(demo, "table2")
    assert note.startswith("at this scale these rows are also the training jobs of other paper datasets") \
        and "mnist/trades (`cifar10-resnet18-trades-lambda6`)" in note
    assert "fat (`cifar10-resnet18-fat`)" in ran.shared_job_notes(demo, "table3")[0]
    assert ran.shared_job_notes(demo, "table1b") == []  # its twin note says it all


# ------------------------------------------------------------------------------ rows: epochs, mechanisms


def _fill(catalog, values, **overrides):
    for i, (run, (clean, robust)) in enumerate(values.items()):
        extra = overrides.get(run, {})
        write_measurement(catalog, run, "clean", outcomes(clean, N, offset=i), **extra)
        write_measurement(catalog, run, "pgd20", outcomes(robust, N, offset=i), clean=outcomes(clean, N, offset=i),
                          **extra)


def test_every_row_gives_its_selected_epoch_and_one_selected_before_its_mechanism_is_flagged(tmp_path):
    target = {**TABLE, "compare": "generalist",
              "rows": [{"key": "at_beta1", "run": AT}, {"key": "generalist", "run": GEN}]}
    catalog = _catalog(tmp_path, {"t": target})
    early = {"selected_epoch": 6, "mechanism": {"epoch": 7, "what": "γ < 1 from epoch 7, first communication in "
                                                                    "epoch 7"}}
    _fill(catalog, {AT: (50, 30), GEN: (55, 25)}, **{AT: {"selected_epoch": 2}, GEN: early})
    table = tables.build(catalog, "t")
    md = table_render.render_markdown(table)
    assert "| Generalist ‡ | ours |" in md
    assert "Selected epoch (of 2; per seed): AT (β=1) 2; Generalist 6." in md
    assert any(n.startswith("‡ Generalist: its model is the one of epoch 6, selected before its method's mechanism "
                            "acts (from epoch 7: γ < 1") for n in table.notes)
    rows = list(csv.DictReader(table_render.render_csv(table, catalog).splitlines()))
    gen = next(r for r in rows if r["row"] == "generalist")
    assert (gen["selected_epoch"], gen["mechanism_epoch"], gen["before_mechanism"]) == ("6", "7", "1")
    assert next(r for r in rows if r["row"] == "at_beta1")["before_mechanism"] == ""
    # selected at (or after) the mechanism's first epoch: no flag
    write_measurement(catalog, GEN, "clean", outcomes(55, N, offset=1), selected_epoch=7, mechanism=early["mechanism"])
    write_measurement(catalog, GEN, "pgd20", outcomes(25, N, offset=1), clean=outcomes(55, N, offset=1),
                      selected_epoch=7, mechanism=early["mechanism"])
    assert "‡" not in table_render.render_markdown(tables.build(catalog, "t"))


def test_distinct_jobs_with_identical_predictions_are_said_to_be_indistinguishable(tmp_path):
    catalog = _catalog(tmp_path)
    for run in (AT, HALF):
        write_measurement(catalog, run, "clean", outcomes(50, N))
        write_measurement(catalog, run, "pgd20", outcomes(30, N), clean=outcomes(50, N))
    write_measurement(catalog, NT, "clean", outcomes(60, N))
    write_measurement(catalog, NT, "pgd20", outcomes(0, N), clean=outcomes(60, N))
    notes = tables.build(catalog, "t").notes
    assert any(n.startswith("AT (β=1) and AT (β=1/2) are distinct training jobs whose models give the same "
                            "prediction on every test example") for n in notes)


# ------------------------------------------------------------------------------ statistics: Holm and bold


def test_daggers_are_holm_corrected_and_the_csv_keeps_both_p_values(tmp_path):
    """Two rows each right on 6 examples where the compare row is wrong: each raw exact McNemar p = 2/64 = 0.031
    (a dagger uncorrected), Holm over the column's two comparisons 0.0625 (none)."""
    catalog = _catalog(tmp_path)
    _fill(catalog, {NT: (60, 36), AT: (50, 30), HALF: (55, 36)})
    for run, robust in ((NT, 36), (AT, 30), (HALF, 36)):  # the same examples, rotated alike: only counts differ
        write_measurement(catalog, run, "pgd20", outcomes(robust, N), clean=outcomes(50, N))
    table = tables.build(catalog, "t")
    for row in ("nt", "at_beta0.5"):
        cell = (table_model.STRONG, row, "pgd20")
        assert table.pvalues[cell] == pytest.approx(2 / 64) and table.adjusted[cell] == pytest.approx(4 / 64)
    md = table_render.render_markdown(table)
    assert "| **56.2** [44.1, 67.7] |" in md and "56.2**†" not in md
    assert "after Holm's correction over the column's comparisons" in md
    rows = list(csv.DictReader(table_render.render_csv(table, catalog).splitlines()))
    nt = next(r for r in rows if r["row"] == "nt" and r["column"] == "pgd20")
    assert (float(nt["p_vs_compare"]), float(nt["p_holm"]), nt["significant"]) == \
        (pytest.approx(0.03125), pytest.approx(0.0625), "0")


def test_no_bold_without_a_test_behind_it(tmp_path):
    """A mean of robust columns has no paired test: never bold, not even its best."""
    target = {**TABLE, "columns": {"nat": "clean", "pgd20": "pgd20", "mean": "mean"}}
    catalog = _catalog(tmp_path, {"t": target})
    _fill(catalog, {NT: (60, 0), AT: (50, 30), HALF: (55, 28)})
    table = tables.build(catalog, "t")
    assert not any(c == "mean" for _, _, c in table.bold) and any(c == "pgd20" for _, _, c in table.bold)


def test_small_times_keep_their_digits_and_a_protocol_line_shows_no_time():
    row = table_model.Row("r", "R", ["r"], [{"key": "r", "label": "R"}], "g")
    column = table_model.Column("train_minutes", "train:minutes", "Training time (min)")
    table = table_model.Table("t", "t", "demo", [row], [column], [(table_model.STRONG, ""), ("code", "")],
                         {(table_model.STRONG, "r", "train_minutes"): table_model.Ours(0.137, "minutes"),
                          ("code", "r", "train_minutes"): table_model.Ours(None, "minutes", same_as_strong=True)},
                         {}, {}, {}, set(), [])
    assert table_render.ours_text(table, table_model.STRONG, row, column) == "0.137"
    assert table_render.ours_text(table, "code", row, column) == ""


# ------------------------------------------------------------------------------------------ the claims
# (tests/test_claims.py and tests/test_claims_null.py)


def test_the_papers_own_inconsistencies_are_flagged_under_their_tables(tmp_path):
    """config/reference/flags.yaml names reference files that exist, and a table of that reference says each flag."""
    flags = yaml.safe_load((ROOT / "config" / "reference" / "flags.yaml").read_text())
    assert set(flags) <= {p.stem for p in (ROOT / "config" / "reference").glob("*.csv")}
    assert {"caat_table1", "caat_table3", "caat_table4"} <= set(flags)
    square = {"kind": "table", "title": "Square", "reference": "caat_table4", "rows": [{"key": "resnet18/nt", "run": NT}],
              "columns": {"nat": "clean", "square": "pgd20"}}
    catalog = _catalog(tmp_path, {"t": square})
    _fill(catalog, {NT: (60, 0)})
    notes = tables.build(catalog, "t").notes
    assert any(n.startswith("The paper's own numbers: its standard-training models (λ=0) keep 70.3%") for n in notes)


def test_the_readmes_table_excerpt_is_generated_and_says_what_the_code_labels_now():
    """README's excerpt is `make readme`'s output (tradeoff.report.readme_excerpt) of the demo's Table 1(a): its title and
    column headers are what the report code writes today (a label change without `make readme` fails here)."""
    from tradeoff.report import readme_excerpt as excerpt

    text = (ROOT / "README.md").read_text()
    block = text.split(excerpt.BEGIN, 1)[1].split(excerpt.END, 1)[0].strip().splitlines()
    demo = cfg.load_catalog(DEMO)
    target = demo.targets["table1a"]
    assert block[0] == ran.title(demo, "table1a")
    header = [c.strip() for c in block[3].strip("|").split("|")]
    wanted = [ran.column_title(demo, target, k, target.columns[k]) for k in ("nat", "pgd20", "aa")]
    assert header == ["Method", ""] + wanted
    rows = {line.strip().strip("|").split("|")[0].strip() for line in block[4:-1]} - {""}
    assert rows <= {"FAT", "Generalist", "Generalist ‡"} and rows
    md = ("# T\n\n| Method | | Natural | PGD-20, ε = 1 | X |\n|---|---|---|---|---|\n| FAT | ours | 1 | 2 | 3 |\n"
          "|  | paper | 4 | 5 | 6 |\n| NT | ours | 7 | 8 | 9 |\n\nnotes\n")
    assert excerpt.excerpt(md).splitlines()[3:6] == ["| Method |       | Natural | PGD-20, ε = 1 |",
                                                     "| FAT    | ours  | 1       | 2             |",
                                                     "|        | paper | 4       | 5             |"]
