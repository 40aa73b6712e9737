"""Tables a researcher can trust: every number vouched for against the config of its cell, with its uncertainty,
compared row against row, degenerate comparisons merged and said, in every format (LaTeX compiled)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess

import pytest
import yaml
from helpers import ROOT, workflow_copy
from report_fixtures import outcomes, write_measurement

from tradeoff import cli
from tradeoff import config as cfg
from tradeoff.report import stats, table_model, table_notes, table_render, tables
from tradeoff.report.build import build_target
from tradeoff.report.summary import build_summary
from tradeoff.storage.layout import METRICS_FORMAT

FILES = [ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"]
NT, AT, HALF = "cifar10-resnet18-nt", "cifar10-resnet18-at-beta1", "cifar10-resnet18-at-beta0_5"
N = 64  # the smoke scale's test examples
TRUST = {"kind": "table", "title": "Trust: β, λ, γ, δ, ε, ∞, ½ & 100% _sure_", "reference": "table1a",
         "compare": "at_beta1",
         "rows": [{"key": "nt", "run": NT}, {"key": "at_beta1", "run": AT}, {"key": "at_beta0.5", "run": HALF}],
         "columns": {"nat": "clean", "pgd20": "pgd20"}}


def _catalog(tmp_path, targets=None, **overlay):
    """The smoke scale with one file per (run, attack), as at paper scale (see the suite test below for the other)."""
    path = tmp_path / "overlay.yaml"
    overlay = {"runtime": {"eval_unit": "attack"}, **overlay}
    path.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": str(tmp_path / "data")},
                                    "targets": targets or {"trust": TRUST}, **overlay}, allow_unicode=True,
                                   sort_keys=False))
    return cfg.load_catalog(FILES + [path])


def _fill(catalog, values=None):
    """Clean and PGD-20 outcomes per run: {run: (clean correct, robust correct)} of 64 examples."""
    values = values or {NT: (60, 0), AT: (50, 30), HALF: (55, 28)}
    for i, (run, (clean, robust)) in enumerate(values.items()):
        write_measurement(catalog, run, "clean", outcomes(clean, N, offset=i))
        write_measurement(catalog, run, "pgd20", outcomes(robust, N, offset=i), clean=outcomes(clean, N, offset=i))


# ----------------------------------------------------------------------------------------------- statistics


def test_wilson_interval_is_the_closed_form():
    for k, n in ((0, 64), (30, 64), (64, 64), (7, 360)):
        p, z = k / n, 1.959963984540054
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        lo, hi = stats.wilson(k, n)
        assert lo == pytest.approx(max(0.0, centre - half), abs=1e-9) and hi == pytest.approx(min(1.0, centre + half))


def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs():
    a, b = "1" * 7 + "0" + "11", "0" * 7 + "1" + "11"  # a alone right 7 times, b alone once, 2 ties
    assert stats.mcnemar([(a, b)]) == pytest.approx(2 * (1 + 8) / 2**8)
    assert stats.mcnemar([(a, a)]) == 1.0
    # seeds are not more examples: two seeds of 7 vs 1 on the same 10 images are a sign-flip test over those images
    # of the seeds' mean outcomes (here the same 7 vs 1), never 14 vs 2 pooled
    assert stats.mcnemar([(a, b), (a, b)]) == pytest.approx(2 * (1 + 8) / 2**8)
    with pytest.raises(ValueError, match="different lengths"):
        stats.mcnemar([("1", "10")])


# ------------------------------------------------------------------------------------------------ the table


def test_every_cell_has_its_interval_and_the_paper_its_own_line(tmp_path):
    catalog = _catalog(tmp_path)
    _fill(catalog)
    table = tables.build(catalog, "trust")
    at = table.ours[(table_model.STRONG, "at_beta1", "pgd20")]
    lo, hi = stats.wilson(30, N)
    assert (at.value, at.lo, at.hi, at.examples) == (pytest.approx(100 * 30 / N), pytest.approx(100 * lo),
                                                     pytest.approx(100 * hi), N)
    md = table_render.render_markdown(table)
    assert f"| AT (β=1) | ours | 78.1 [{100 * stats.wilson(50, N)[0]:.1f}, {100 * stats.wilson(50, N)[1]:.1f}] |" in md
    assert "|  | paper | 84.32 | 48.29 |" in md
    assert "95% Wilson interval" in md and "exact McNemar" in md and f"on {N} test examples" in md
    rows = list(__import__("csv").DictReader(table_render.render_csv(table, catalog).splitlines()))
    cell = next(r for r in rows if r["row"] == "at_beta1" and r["column"] == "pgd20")
    assert cell["metrics"].endswith(f"smoke/metrics/{AT}/pgd20.json") and cell["jobs"] == AT
    assert cell["examples"] == str(N) and float(cell["ci_low"]) == pytest.approx(100 * lo, abs=1e-3)


def test_bold_is_the_best_and_every_row_not_significantly_worse_never_a_zero(tmp_path):
    catalog = _catalog(tmp_path)
    # clean: 60 vs 50 vs 55 of 64 (NT best; AT differs from it on 10 examples, all in NT's favour: p < 0.05;
    # AT(1/2) on 5: p = 0.0625); PGD-20: every row at 0 (nothing bold)
    _fill(catalog, {NT: (60, 0), AT: (50, 0), HALF: (55, 0)})
    table = tables.build(catalog, "trust")
    assert {(r, c) for p, r, c in table.bold} == {("nt", "nat"), ("at_beta0.5", "nat")}
    md = table_render.render_markdown(table)
    assert "| NT | ours | **93.8**" in md and "**0.0**" not in md
    assert any("PGD-20, ε = 8/255 (here 0.3): every row at 0%" in note for note in table.notes)


def test_ties_are_all_bold(tmp_path):
    catalog = _catalog(tmp_path)
    _fill(catalog, {NT: (40, 0), AT: (40, 20), HALF: (40, 20)})
    table = tables.build(catalog, "trust")
    assert {r for p, r, c in table.bold if c == "nat"} == {"nt", "at_beta1", "at_beta0.5"}
    assert {r for p, r, c in table.bold if c == "pgd20"} == {"at_beta1", "at_beta0.5"}


def test_a_dagger_marks_a_significant_difference_from_the_papers_method(tmp_path):
    catalog = _catalog(tmp_path)
    _fill(catalog, {NT: (60, 0), AT: (50, 30), HALF: (49, 29)})
    table = tables.build(catalog, "trust")
    assert table.pvalues[(table_model.STRONG, "nt", "pgd20")] < 0.05           # 0 vs 30: significant
    assert table.pvalues[(table_model.STRONG, "at_beta0.5", "pgd20")] >= 0.05  # 29 vs 30: not
    md = table_render.render_markdown(table)
    assert "| NT | ours | **93.8**† [" in md and "0.0† [0.0, 5.7]" in md
    assert "**45.3** [" in md and "45.3**†" not in md  # not worse than the best either: bold
    assert "†: differs from AT (β=1) (the paper's method)" in md


def test_rows_of_one_training_job_are_one_row_and_said(tmp_path):
    same = {**TRUST, "rows": [{"key": "at_beta1", "run": AT}, {"key": "rst", "run": AT, "label": "RST (here AT)"},
                              {"key": "nt", "run": NT}]}
    catalog = _catalog(tmp_path, {"trust": same})
    _fill(catalog, {NT: (60, 0), AT: (50, 30)})
    table = tables.build(catalog, "trust")
    assert [r.label for r in table.rows] == ["AT (β=1) = RST (here AT)", "NT"]
    md = table_render.render_markdown(table)
    assert "| AT (β=1) = RST (here AT) | ours |" in md
    assert "|  | paper (AT (β=1)) | 84.32 |" in md and "|  | paper (RST (here AT)) | 84.71 |" in md
    assert any("are one training job at this scale" in n and AT in n for n in table.notes)


def test_a_rows_label_wins_and_a_table_needs_no_reference(tmp_path):
    own = {"kind": "table", "title": "Mine", "rows": [{"key": "a", "run": AT, "label": "my AT"},
                                                      {"key": "b", "run": NT}],
           "columns": {"nat": "clean"}}
    catalog = _catalog(tmp_path, {"mine": own})
    _fill(catalog, {NT: (60, 0), AT: (50, 30)})
    md = table_render.render_markdown(tables.build(catalog, "mine"))
    assert "| my AT | ours |" in md and "| b | ours |" in md and "paper" not in md.split("Scale:")[0]


def test_compare_must_name_a_row(tmp_path):
    with pytest.raises(cfg.ConfigError, match=r"targets.trust.compare: 'nope' is not a row key"):
        _catalog(tmp_path, {"trust": {**TRUST, "compare": "nope"}})
    with pytest.raises(cfg.ConfigError, match=r"targets.trust.reference: no file .*nope.csv"):
        _catalog(tmp_path, {"trust": {**TRUST, "reference": "nope"}})


def test_tables_compare_rows_only_on_the_same_test_set(tmp_path):
    """Table 2's MNIST and SVHN rows: bold and McNemar within each half, against that half's Generalist."""
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml"])
    runs = {r.key: r.run for r in catalog.targets["table2"].rows}
    groups = {key: catalog.runs[run].paper_dataset for key, run in runs.items()}
    assert set(groups.values()) == {"mnist", "svhn"}
    assert catalog.targets["table2"].compared == ["mnist/generalist", "svhn/generalist"]


# --------------------------------------------------------------------------------------------- refusals


def _cli(tmp_path, *args):
    overlay = tmp_path / "overlay.yaml"
    return cli.main([a for f in FILES + [overlay] for a in ("--config", str(f))] + list(args))


BAD = {
    "accuracy above 1": ({"accuracy": 1.7}, r"field 'accuracy' is 1.7, outside \[0, 1\]"),
    "negative accuracy": ({"accuracy": -0.2}, r"field 'accuracy' is -0.2, outside \[0, 1\]"),
    "NaN": ({"accuracy": float("nan")}, r"field 'accuracy' is nan, not a finite number"),
    "count disagrees": ({"accuracy": 0.9, "robust_examples": 8}, r"field 'robust_examples' \(8 of 64\) disagrees"),
    "another run's file": ({"run": NT}, rf"field 'run' is '{NT}' but the config gives '{AT}'"),
    "another scale": ({"scale": "demo"}, r"field 'scale' is 'demo' but the config gives 'smoke'"),
    "another dataset": ({"dataset": "cifar10"}, r"field 'dataset' is 'cifar10' but the config gives 'digits'"),
    "other attack settings": ({"spec": "CHANGED"}, r"field 'spec' \(the attack's settings\) disagrees"),
    "other test examples": ({"test_examples": 80}, r"field 'test_examples' is 80 but the config gives 64"),
    "other run settings": ({"spec_digest": "0" * 16}, r"field 'spec_digest'"),
    "older format": ({"format": "tradeoff-metrics/1"}, r"field 'format'"),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_metrics_file_is_refused_naming_file_and_field(tmp_path, capsys, case):
    catalog = _catalog(tmp_path)
    _fill(catalog)
    overrides, message = BAD[case]
    if overrides.get("spec") == "CHANGED":
        overrides = {"spec": {**catalog.attack_for("pgd20", AT).as_dict(), "steps": 99}}
        message = r"field 'spec' \(the attack's settings\) disagrees with the config: steps 99 in the file, 3 in"
    path = write_measurement(catalog, AT, "pgd20", outcomes(30, N, offset=1), clean=outcomes(50, N, offset=1),
                             **overrides)
    assert _cli(tmp_path, "report", "trust") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    assert __import__("re").search(message, err), err
    assert not any(p.exists() for p in catalog.layout.tables("trust").values())


@pytest.mark.parametrize("content, message", [
    ("", "is empty"), ('{"accuracy": 0.5, "run"', "is not valid JSON"), ("[1, 2]", "is not a JSON object"),
    ('{"accuracy": 0.5}', r"missing field\(s\)"),
])
def test_a_truncated_or_keyless_file_is_refused_naming_it(tmp_path, capsys, content, message):
    catalog = _catalog(tmp_path)
    _fill(catalog)
    path = catalog.layout.metrics(AT, "pgd20")
    path.write_text(content)
    assert _cli(tmp_path, "report", "trust") == 1
    err = capsys.readouterr().err
    assert str(path) in err and message.replace("\\", "") .split("(")[0] in err.replace("\\", "")


def test_predictions_that_do_not_match_their_metrics_are_refused(tmp_path, capsys):
    catalog = _catalog(tmp_path)
    _fill(catalog)
    path = catalog.layout.predictions(AT, "pgd20")
    data = json.loads(path.read_text())
    data["robust_correct"] = outcomes(31, N)
    path.write_text(json.dumps(data))
    assert _cli(tmp_path, "report", "trust") == 1
    assert f"{path}: does not belong to" in capsys.readouterr().err


def test_nothing_measured_is_refused_not_an_empty_table(tmp_path, capsys):
    catalog = _catalog(tmp_path)
    assert _cli(tmp_path, "report", "trust") == 1
    assert "trust: nothing measured yet under" in capsys.readouterr().err
    assert not catalog.layout.tables("trust")["md"].exists()


def test_report_from_another_folder_reads_and_writes_the_workflows_results(tmp_path, monkeypatch):
    work = workflow_copy(tmp_path / "wf")
    overlay = work / "config" / "trust.yaml"
    overlay.write_text(yaml.safe_dump({"targets": {"trust": TRUST}}, allow_unicode=True))
    catalog = cfg.load_catalog([work / "config" / f for f in ("config.yaml", "smoke.yaml", "trust.yaml")])
    monkeypatch.chdir(work)  # relative paths of the config mean the workflow's folders
    _fill(catalog)
    elsewhere = work / "results" / "smoke" / "metrics"
    monkeypatch.chdir(elsewhere)
    assert cli.main(["--config", "../../../config/config.yaml", "--config", "../../../config/smoke.yaml",
                     "--config", "../../../config/trust.yaml", "report", "trust"]) == 0
    assert (work / "results" / "smoke" / "tables" / "trust.md").exists()
    assert not (elsewhere / "results").exists()


# ------------------------------------------------------------------------------------ LaTeX and the summary


def test_tex_escapes_everything_or_says_what_it_cannot():
    assert table_render.tex("a_b & 50% #1 {x} β≥½ ~^\\ †‡") == \
        r"a\_b \& 50\% \#1 \{x\} $\beta$$\geq$1/2 \textasciitilde{}\textasciicircum{}\textbackslash{} \dag{}\ddag{}"
    with pytest.raises(ValueError, match="no LaTeX for '☃'"):
        table_render.tex("☃")


PRINTED = 7.0  # pt: the smallest type a printed table may be set in


def printed_sizes(pdf) -> list[float]:
    """The size in pt at which every run of text of a PDF is set, as printed: each font size (``Tf``) times the
    scale of the transformation matrices in force (a ``\\resizebox`` or ``\\scalebox`` is a ``cm``), read from its
    uncompressed content streams (``\\pdfcompresslevel=0``)."""
    token = re.compile(rb"\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f\s]*>|/[^\s/\[\]()<>]+|[-+]?\d*\.?\d+|[A-Za-z'\"*]+|\[|\]")
    out = []
    for match in re.finditer(rb"stream\r?\n(.*?)endstream", pdf.read_bytes(), re.S):
        if b"BT" not in match.group(1) or b"Tf" not in match.group(1) or b"eexec" in match.group(1):
            continue  # not a page's content (a font's program, an image)
        stack, ctm, tm, size, args = [], (1.0, 0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 1.0), None, []
        for tok in token.findall(match.group(1)):
            if tok == b"q":
                stack.append(ctm)
            elif tok == b"Q":
                ctm = stack.pop() if stack else (1.0, 0.0, 0.0, 1.0)
            elif tok in (b"cm", b"Tm") and len(args) >= 6:
                a, b, c, d = (float(x) for x in args[-6:-2])
                if tok == b"Tm":
                    tm = (a, b, c, d)
                else:
                    A, B, C, D = ctm
                    ctm = (a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D)
            elif tok == b"BT":
                tm = (1.0, 0.0, 0.0, 1.0)
            elif tok == b"Tf":
                size = float(args[-1])
            elif tok in (b"Tj", b"TJ", b"'", b'"') and size is not None:
                (A, B, C, D), (a, b, c, d) = ctm, tm
                m = (a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D)
                out.append(size * math.sqrt(abs(m[0] * m[3] - m[1] * m[2])))
            args = [] if tok[:1].isalpha() else args + [tok]
    return out


def compile_latex(tex_files, folder, packages=None):
    """pdflatex on a document that inputs each table (with the packages its files name), then the table as printed:
    no text set below PRINTED pt (a scaled-down table is refused), and nothing wider than the page (an overfull box
    of more than a point). Returns the PDFs' smallest sizes."""
    if not shutil.which("pdflatex"):
        if os.environ.get("TRADEOFF_REQUIRE_LATEX") == "1":
            pytest.fail("TRADEOFF_REQUIRE_LATEX=1 but pdflatex is missing (apt-get install texlive-latex-base "
                        "texlive-latex-recommended)")
        pytest.skip("pdflatex is not installed (Debian: texlive-latex-base texlive-latex-recommended; .ci/run "
                    "installs them)")
    smallest = []
    for tex_file in tex_files:
        doc = folder / f"doc-{tex_file.stem}.tex"
        doc.write_text("\\pdfcompresslevel=0\\pdfobjcompresslevel=0\n\\documentclass{article}\n"
                       f"\\usepackage{{{packages or table_render.TEX_PACKAGES}}}\n"
                       f"\\begin{{document}}\n\\input{{{tex_file}}}\n\\end{{document}}\n")
        out = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=folder,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"{tex_file} does not compile:\n{out.stdout[-3000:]}"
        pdf = folder / f"doc-{tex_file.stem}.pdf"
        assert pdf.stat().st_size > 1000
        log = (folder / f"doc-{tex_file.stem}.log").read_text(errors="replace")
        wide = [float(w) for w in re.findall(r"^Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\)", log, re.M)]
        assert not [w for w in wide if w > 1.0], f"{tex_file}: wider than its page by {max(wide)} pt"
        sizes = printed_sizes(pdf)
        assert sizes and min(sizes) >= PRINTED, f"{tex_file}: text printed at {min(sizes):.2f} pt"
        smallest.append(min(sizes))
    return smallest


def test_the_printed_size_is_measured_as_printed(tmp_path):
    """The measure itself: a wide table scaled to the page (the former \\resizebox) prints at about 2 pt and is
    refused; the same in \\footnotesize prints at 8 pt."""
    wide = tmp_path / "wide.tex"
    wide.write_text("\\noindent\\resizebox{\\linewidth}{!}{\\begin{tabular}{" + "c" * 27 + "}"
                    + " & ".join(["31.4 [26.8, 36.4]"] * 27) + "\\\\\\end{tabular}}%\n")
    with pytest.raises(AssertionError, match="printed at"):
        compile_latex([wide], tmp_path, packages="graphicx")
    small = tmp_path / "small.tex"
    small.write_text("{\\footnotesize\\begin{tabular}{cc}31.4 & 26.8\\\\\\end{tabular}}\n")
    assert compile_latex([small], tmp_path, packages="graphicx") == [pytest.approx(7.97, abs=0.01)]


def test_a_table_with_greek_symbols_and_specials_compiles(tmp_path):
    catalog = _catalog(tmp_path)
    _fill(catalog)
    build_target(catalog, "trust")
    compile_latex([catalog.layout.tables("trust")["tex"]], tmp_path)


def test_summary_lists_paper_numbers_outside_our_interval(tmp_path):
    catalog = _catalog(tmp_path, scale_map={"dataset": None, "arch": None},  # the paper's setting, for the comparison
                       corruption_map={"tinyimagenet-c": "tinyimagenet-c"})
    _fill(catalog)  # AT: clean 50/64 = 78.1% [66.6, 86.5]: the paper's 84.32 inside; PGD-20 30/64 = 46.9%
    # [35.2, 58.9]: 48.29 inside; NT clean 60/64 = 93.8 [85.0, 97.5]: 93.04 inside; HALF PGD-20 28/64 = 43.8%
    # [32.3, 55.9]: 44.51 inside. Make NT's clean 40/64 = 62.5% [50.3, 73.3]: the paper's 93.04 is outside.
    write_measurement(catalog, NT, "clean", outcomes(40, N))
    md = build_summary(catalog)["md"].read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| trust |"))
    assert "1 of 6: NT Natural: paper 93.04 outside [50.3, 73.3]" in line
    # on digits (the smoke scale's own setting) the paper's number is not ours to meet: nothing listed
    catalog = _catalog(tmp_path)
    write_measurement(catalog, NT, "clean", outcomes(40, N))
    md = build_summary(catalog)["md"].read_text()
    assert "outside [" not in next(ln for ln in md.splitlines() if ln.startswith("| trust |"))
    assert "paper outside our 95% interval" not in md  # a column that is "—" on every row is left out


def test_a_figure_says_what_its_points_cannot_show(tmp_path):
    """Points of one training job are said to be one model; a column under which the highest and the lowest point
    do not differ significantly (exact McNemar) is said to separate nothing."""
    front = {"kind": "figure", "plot": "front", "title": "front",
             "rows": [{"key": "a", "run": AT, "series": "s", "label": "λ=1"},
                      {"key": "b", "run": AT, "series": "t", "label": "γ=1"},
                      {"key": "c", "run": NT, "series": "s", "label": "λ=0"}],
             "columns": {"SA": "clean", "AA": "pgd20"}}
    catalog = _catalog(tmp_path, {"front": front})
    _fill(catalog, {NT: (60, 29), AT: (50, 30)})  # 29 vs 30 robust of 64: not significantly apart
    notes = table_notes.degenerate_notes(catalog, "front")
    assert "λ=1 = γ=1: one training job at this scale" in notes
    assert any(n.startswith("under AA no two points differ significantly") for n in notes)
    _fill(catalog, {NT: (60, 0), AT: (50, 30)})
    assert not any("differ significantly" in n for n in table_notes.degenerate_notes(catalog, "front"))
    from tradeoff.report.figures import make_figure, plt

    fig = make_figure(catalog, "front")
    try:
        assert "λ=1 = γ=1: one training job at this scale" in " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    finally:
        plt.close(fig)


def test_a_targets_note_is_said_under_its_table_and_its_figure(tmp_path):
    """A smaller scale that thins a target says so (`note:`): under the table and in the figure's footer; the demo
    says it for every target it thins."""
    note = "the two rows that diverge here are left out"
    front = {"kind": "figure", "plot": "front", "title": "front", "note": note,
             "rows": [{"key": "a", "run": AT, "series": "s"}, {"key": "c", "run": NT, "series": "s"}],
             "columns": {"SA": "clean", "AA": "pgd20"}}
    catalog = _catalog(tmp_path, {"trust": {**TRUST, "note": note}, "front": front})
    _fill(catalog)
    assert f"At this scale: {note}" in table_render.render_markdown(tables.build(catalog, "trust"))
    from tradeoff.report.figures import make_figure, plt

    fig = make_figure(catalog, "front")
    try:
        assert f"at this scale: {note}" in " ".join(t.get_text() for t in fig.texts)
    finally:
        plt.close(fig)
    paper = cfg.load_catalog([ROOT / "config" / "config.yaml"], write_cache=False)
    for scale in ("demo", "smoke"):
        small = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / f"{scale}.yaml"],
                                 write_cache=False)
        thinned = [t for t, spec in small.targets.items() if spec.rows and paper.targets[t].rows
                   and len(spec.rows) < len(paper.targets[t].rows)]
        assert thinned and [t for t in thinned if not small.targets[t].note] == [], scale


def test_a_runs_suite_file_is_read_and_vouched_for_like_its_own_files(tmp_path, capsys):
    """runtime.eval_unit: run: a run's evaluations in one file; a missing entry or a file in another format is
    refused naming the file."""
    catalog = _catalog(tmp_path, runtime={"eval_unit": "run"})
    _fill(catalog)
    suite = catalog.metrics_file(AT, "pgd20")
    assert suite == catalog.layout.metrics(AT, "all") and catalog.metrics_file(AT, "clean") == suite
    table = tables.build(catalog, "trust")
    assert table.ours[(table_model.STRONG, "at_beta1", "pgd20")].value == pytest.approx(100 * 30 / N)
    data = json.loads(suite.read_text())
    del data["evaluations"]["pgd20"]
    suite.write_text(json.dumps(data))
    assert _cli(tmp_path, "report", "trust") == 1
    assert f"{suite}: holds no evaluation 'pgd20'" in capsys.readouterr().err
    suite.write_text(json.dumps(data["evaluations"]["clean"]))  # one attack's record where the suite should be
    assert _cli(tmp_path, "report", "trust") == 1
    assert f"{suite}: field 'format' is '{METRICS_FORMAT}', not 'tradeoff-evaluations/1'" in capsys.readouterr().err
