"""Issue 32: a label says what ran (a row studying a setting that this scale runs otherwise, a ratio the scale does not
keep, the rehearsal scale's generated data), figures say what they show (the value that ran under a swept tick, a
grid's shown count, a reference value explained, every attack's budget), the summary counts each finding once, and
the docs quote no build's number."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from report_fixtures import fill_target, grid_analysis, outcomes, tsne_analysis, write_analysis, write_measurement  # noqa: E402

from tradeoff import config as cfg  # noqa: E402
from tradeoff.report import figures, table_model, table_notes, table_render, tables  # noqa: E402
from tradeoff.report import what_ran as ran
from tradeoff.report.summary import overstated_findings, target_status  # noqa: E402

ROOT = cfg.ROOT
PAPER = [ROOT / "config" / "config.yaml"]


def _catalog(tmp_path, files, **body):
    path = tmp_path / f"overlay{len(list(tmp_path.glob('overlay*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": "data"}, **body},
                                   allow_unicode=True, sort_keys=False))
    return cfg.load_catalog(files + [path])


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return _catalog(tmp_path_factory.mktemp("demo"), PAPER + [ROOT / "config" / "demo.yaml"])


# ------------------------------------------------------------------------------------ 1. a label says what ran


def test_a_row_studying_a_setting_says_what_this_scale_ran(demo):
    """Table 5's rows are the paper's learning rates; at the demo the AT learner takes the scale's schedule (its
    ratio to the preset's kept), so "NT=0.1, AT=0.01" ran 0.1 and 0.1: every format's label says both, read from the
    resolved runs."""
    labels = table_model.row_labels(demo, "table5")
    assert labels["generalist_lr_nt0.1_at0.01"] == "NT=0.1, AT=0.01 — here NT 0.1, AT 0.1"
    assert labels["generalist_lr_nt0.1_at0.001"] == "NT=0.1, AT=0.001 — here NT 0.1, AT 0.01"
    assert labels["generalist_lr_nt0.01_at0.01"] == "NT=0.01, AT=0.01 — here NT 0.01, AT 0.1"
    assert table_model.row_labels(demo, "zipper_table7") == labels  # Zipper's Table 7: the same rows
    note = ran.ratio_note(demo, "table5", labels)
    assert note == ("the rows study the ratio of the NT to the AT learning rate, which the demo scale does not keep: "
                    "NT=0.1, AT=0.01: 10:1 → 1:1; NT=0.1, AT=0.001: 100:1 → 10:1; NT=0.01, AT=0.01: 1:1 → 1:10")
    # a training budget studied by a sweep (CA-AT Figure 8) and Generalist's c (Figure 3(b)), rescaled
    sweep = demo.targets["caat_figure8"].rows[1]
    assert ran.here_clause(demo, "caat_figure8", sweep, sweep.series) == " — here δ 0.45"
    assert (table_notes.figure_labels(demo, "caat_figure8", early={})[sweep.key]
            == "vanilla λ=0.5, δ=12/255 — here δ 0.45")
    assert table_notes.figure_labels(demo, "figure3b", early={})["c5"] == "c = 5 — here c 0.417"
    # a label that does not give the paper's value (Figure 4(b)'s optimizers) gets both
    assert table_model.row_labels(demo, "figure4b")["baseline_sgd"] == "Baseline (SGD) — lr 0.01; here lr 0.1"
    # rows whose settings are the same at every scale, or a table that studies none: nothing added
    assert table_model.row_labels(demo, "table1a")["generalist"] == "Generalist"


def test_at_the_paper_scale_a_label_is_what_ran(tmp_path):
    paper = _catalog(tmp_path, PAPER)
    assert table_model.row_labels(paper, "table5")["generalist_lr_nt0.1_at0.01"] == "NT=0.1, AT=0.01"
    assert ran.ratio_note(paper, "table5") is None
    assert not any(ran.here_clause(paper, n, row) for n, t in paper.targets.items() for row in t.rows)


def test_the_rehearsal_scale_says_its_data_are_generated_and_shows_no_bold_or_dagger(tmp_path, monkeypatch):
    rehearsal = _catalog(tmp_path, PAPER + [ROOT / "config" / "rehearsal.yaml"])
    assert ran.title(rehearsal, "table1a") == (
        "Table 1(a): CIFAR-10, ResNet-18, eps = 8/255 — rehearsal scale: generated data in the paper's formats, a "
        "few steps per run; its numbers carry no meaning")
    fill_target(rehearsal, "table1a")
    table = tables.build(rehearsal, "table1a")
    assert table.generated and not table.bold and not table.adjusted
    md = table_render.render_markdown(table)
    assert "**" not in md.split("\n\n")[1] and "†" not in md
    assert any("its numbers test the pipeline, not the methods (no bold, no dagger, no verdict)" in n
               for n in table.notes)
    assert "**Bold**" not in md
    from tradeoff.report.build import target_caption

    assert "generated data, no bold and no dagger" in target_caption(rehearsal, "table1a")
    from tradeoff.report import claims

    found = claims.verdicts(rehearsal)  # no verdict: every claim untestable, saying why
    assert found and {v.verdict for v in found} == {"untestable here"}
    assert all("generated files" in v.because for v in found)
    # the same files read as if the data were real: bold and daggers (the rule above is what removes them)
    monkeypatch.setattr(ran, "generated", lambda catalog: False)
    table = tables.build(rehearsal, "table1a")
    assert table.bold and table.adjusted


# ------------------------------------------------------------------------------- 3. figures say what they show


def _texts(fig) -> str:
    out = [t.get_text() for t in fig.texts] + [fig._suptitle.get_text()]
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.texts + ax.get_xticklabels()]
        out += [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []
    out += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    return re.sub(r"\s+", " ", "\n".join(out))


def _figure(catalog, name):
    fig = figures.make_figure(catalog, name)
    try:
        return fig, _texts(fig)
    finally:
        plt.close(fig)


def test_figures_say_what_ran_and_what_they_show(demo):
    early = {"selected_epoch": 6, "mechanism": {"epoch": 7, "what": "γ < 1 from epoch 7"}}
    fill_target(demo, "figure4a", records={"cifar10-resnet18-generalist-wa-nt-only": early})
    fig, text = _figure(demo, "figure4a")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["NT only ‡", "AT only", "NT+AT"]  # the paper's names, the early row flagged
    assert "‡ NT only: its model is the one of epoch 6, selected before its method's mechanism acts" in text
    assert "PGD-20, ε = 8/255 (here 0.3)" in text
    # Figure 3(b): the swept c of the paper's epochs, and below each tick the c that ran (in the demo's epochs)
    fill_target(demo, "figure3b")
    fig, text = _figure(demo, "figure3b")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1\n(0.083)", "5\n(0.417)", "10\n(0.833)",
                                                                     "15\n(1.25)"]
    assert "(in brackets: c as run at this scale)" in text
    # CA-AT Figure 8: the training budget that ran, in the legend
    fill_target(demo, "caat_figure8", same=0.0)
    _, text = _figure(demo, "caat_figure8")
    assert "vanilla λ=0.5, δ=12/255 — here δ 0.45" in text
    assert "caat_pgd@" not in text  # a sweep's point in a footer note by its budget, not its job's name
    assert "under PGD, ε = 32/255 (here 1) no two points differ significantly" in text
    # a grid: how many match and how many are shown; the attack with its budget
    fill_target(demo, "zipper_figure7")
    write_analysis(demo, "zipper_figure7", grid_analysis(demo, "zipper_figure7", shown=8))
    fig, text = _figure(demo, "zipper_figure7")
    assert "(8 shown)" in fig.axes[0].get_ylabel()
    assert "adversarial: PGD-20, ε = 8/255 (here 0.3) against each model" in text
    # t-SNE: its per-panel number explained, its attack's budget
    write_analysis(demo, "zipper_figure6", tsne_analysis(demo, "zipper_figure6"))
    _, text = _figure(demo, "zipper_figure6")
    assert "same-learner nearest neighbour: the share of points whose nearest neighbour" in text
    assert "PGD-20, ε = 8/255 (here 0.3) adversarial images" in text
    # the learners' robust curves: the tracking attack and its budget
    fill_target(demo, "zipper_figure5")
    _, text = _figure(demo, "zipper_figure5")
    assert "the learners' robust curves: PGD-20, ε = 8/255 (here 0.3)" in text
    # ... and which images they measured every epoch: the validation split's, never the test split's (issue 38)
    assert "the learners measured after every epoch on 300 validation images, held out of training" in text
    # an analysis of its own dataset: its title says what it read
    assert ran.title(demo, "caat_figure2").endswith("— demo scale ran: 8×8 digits (at its own image size)")


def test_figure_index_pages_say_what_ran(demo):
    from tradeoff.report.build import build_target

    build_target(demo, "caat_figure4")  # a group of figures only: its page lists them
    page = demo.layout.tables("caat_figure4")["md"].read_text()
    assert "— demo scale ran: " in page
    for member in demo.leaf_targets("caat_figure4"):
        assert ran.title(demo, member) in page
    from tradeoff.report.build import target_caption  # the Snakemake report's captions

    assert target_caption(demo, "table5").startswith(ran.title(demo, "table5") + ".")
    assert "Holm's correction" in target_caption(demo, "table5")
    assert target_caption(demo, "figure4a").startswith(ran.title(demo, "figure4a") + ".")


# ---------------------------------------------------------------------------------- 5. each finding once


def test_the_summary_lists_each_overstated_model_and_evaluation_once_naming_its_job(tmp_path):
    at, fat = "cifar10-resnet18-at-beta1", "cifar10-resnet18-fat"
    rows = [{"key": "at", "run": at, "label": "AT"}, {"key": "fat", "run": fat, "label": "FAT"}]
    one = {"kind": "table", "title": "one", "protocol": "generalist-code", "rows": rows,
           "columns": {"pgd20": "pgd20"}}
    # the same models and evaluations under another label (a row of another setting that is this job here)
    two = {**one, "title": "two", "rows": [{"key": "at", "run": at, "label": "MNIST / AT"}]}
    catalog = _catalog(tmp_path, PAPER + [ROOT / "config" / "smoke.yaml"], runtime={"eval_unit": "attack"},
                       targets={"one": one, "two": two})
    n = 64
    for run, strong, code in ((at, 20, 30), (fat, 25, 27)):
        write_measurement(catalog, run, "pgd20", outcomes(strong, n))
        write_measurement(catalog, run, catalog.protocol_attack("one", "pgd20", run), outcomes(code, n))
    found = overstated_findings({name: target_status(catalog, name) for name in ("one", "two")})
    assert [(text.split(" ")[0], names) for text, names in found] == [
        ("`cifar10-resnet18-at-beta1`", ["one", "two"]), ("`cifar10-resnet18-fat`", ["one"])]
    # the numbers once, then the cell as each table labels it (its row's label, the setting it stands for, its
    # column): never one table's label for another's row
    column = "PGD-20, ε = 8/255 (here 0.3)"
    assert found[0][0] == ("`cifar10-resnet18-at-beta1` 46.9 under generalist-code vs 31.2 strong (+15.6): "
                           f"one: AT (CIFAR-10, ResNet-18), {column}; two: MNIST / AT (CIFAR-10, ResNet-18), {column}")
    assert found[1][0].endswith(f": one: FAT (CIFAR-10, ResNet-18), {column}")


# --------------------------------------------------------------------------- 4. docs quote no build's number

DOCS = ["README.md", "docs/reports.md", "docs/demo-scale.md", "docs/evaluation.md", "docs/audit.md"]
EXCERPT = re.compile(r"<!-- excerpt: make readme -->.*?<!-- end of excerpt -->", re.S)
# a sentence naming a target of the demo's build with a percentage or a clean/robust pair: a build's number
BUILD_NUMBER = re.compile(r"demo's (?:CA-AT |Zipper )?(?:Table|Figure) [^.]*?(?:\d%|\d+(?:\.\d+)?/\d+\.\d)")
# a training job named with a percentage in the same sentence or table row: a model's measured number (an audit's)
JOB_NUMBER = re.compile(r"`(?:cifar10|cifar100|mnist|svhn|tinyimagenet|digits)-[\w.-]+`[^.]*?\d+(?:\.\d+)?%")
# a model's clean/robust accuracies as a table prints them ("Generalist 91.3/35.8"), or an accuracy before and after
# ("25.00 → 25.83"): a number of some build, which no build of the checkout may give
ACCURACY_PAIR = re.compile(r"(?<![\d.])\d{1,3}\.\d/\d{1,3}\.\d(?![\d.])|\b\d{1,3}\.\d\d → \d{1,3}\.\d\d\b")


@pytest.mark.parametrize("doc", DOCS)
def test_docs_quote_no_number_of_a_build_outside_the_generated_excerpt(doc):
    """A build's numbers reach the README only through `make readme`'s excerpt (test_labels checks it against the
    code); elsewhere a sentence says where to read them, not what they were in some build."""
    text = re.sub(r"\s+", " ", EXCERPT.sub("", (ROOT / doc).read_text()))
    assert not BUILD_NUMBER.findall(text)
    assert not JOB_NUMBER.findall(text)
    assert not ACCURACY_PAIR.findall(text), ACCURACY_PAIR.findall(text)
    assert "does not leave its initialisation" not in text


# ------------------------------------------------------------------------ 6. a note never contradicts its rows


def test_a_note_that_leaves_rows_out_names_them_as_the_paper_does_and_none_is_shown():
    """Table 5's demo note said "the two rows whose AT learner starts at 0.1 are left out" above rows labelled
    "— here NT 0.1, AT 0.1": a note says which of the paper's rows it leaves out, by the paper's own labels, and
    none of them is a row the table shows."""
    demo = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "demo.yaml"])
    checked = []
    for name, target in demo.targets.items():
        if target.kind != "table" or not target.reference or "left out" not in (target.note or ""):
            continue
        reference = table_model.load_reference(demo, target.reference)
        shown = {row.key for row in target.rows}
        left = {label for (row, _), (_, _, label) in reference.items() if row not in shown}
        assert left and all(label in target.note for label in left), (name, left, target.note)
        labels = table_model.row_labels(demo, name, reference)
        assert not [lab for lab in labels.values() if lab.split(" — ")[0] in left], name
        checked.append(name)
    assert {"table5", "zipper_table7", "zipper_table5"} <= set(checked)
