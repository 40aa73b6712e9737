"""The answer where a reader looks (issue 40): the summary opens with a verdict table and the claims' forest plot
(one screen, grouped by verdict, a repeated test once, the details after it and behind <details> in the HTML); every
cell of every table is a line of results/<scale>/cells.csv, read back by tradeoff.results.load; and `tradeoff report`
does no work for what has not changed, on every core."""

from __future__ import annotations

import csv
import dataclasses
import re

import pytest
import yaml
from helpers import ROOT
from report_fixtures import outcomes, write_measurement

import tradeoff.results
from tradeoff import cli
from tradeoff import config as cfg
from tradeoff.core.errors import UserError
from tradeoff.report import build, cells, claims, forest, stats, summary, table_model, tables
from tradeoff.report.regenerate import regenerate
from tradeoff.report.style import plt

SMOKE = [ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"]
NT, AT, HALF = "cifar10-resnet18-nt", "cifar10-resnet18-at-beta1", "cifar10-resnet18-at-beta0_5"
N = 64
TABLE = {"kind": "table", "title": "Table 1(a): CIFAR-10, ResNet-18, eps = 8/255", "reference": "table1a",
         "compare": "at_beta1",
         "rows": [{"key": "nt", "run": NT}, {"key": "at_beta1", "run": AT}, {"key": "at_beta0.5", "run": HALF}],
         "columns": {"nat": "clean", "pgd20": "pgd20"}}
BARS = {"kind": "figure", "plot": "bars", "title": "Bars", "rows": TABLE["rows"], "columns": TABLE["columns"]}


def _catalog(tmp_path, only: bool = True):
    """The smoke scale with a table ``t`` and a figure ``f`` measured (``only``: the catalog's other targets
    dropped, so that --all builds these two)."""
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump({"paths": {"results": str(tmp_path / "results"), "data": str(tmp_path / "data")},
                                    "runtime": {"eval_unit": "attack"}, "targets": {"t": TABLE, "f": BARS}},
                                   allow_unicode=True, sort_keys=False))
    catalog = cfg.load_catalog(SMOKE + [path])
    for i, (run, (clean, robust)) in enumerate({NT: (60, 0), AT: (50, 30), HALF: (55, 28)}.items()):
        write_measurement(catalog, run, "clean", outcomes(clean, N, offset=i))
        write_measurement(catalog, run, "pgd20", outcomes(robust, N, offset=i), clean=outcomes(clean, N, offset=i))
    if only:
        catalog = dataclasses.replace(catalog, targets={n: catalog.targets[n] for n in ("t", "f")})
    return catalog


def _verdicts(catalog) -> list[claims.Verdict]:
    """Every claim of config/claims.yaml with a made-up verdict and test (the page's layout, not the statistics):
    verdicts in a mixed order, a not_worse claim with its margin, and one claim whose test repeats another's."""
    out = []
    for i, claim in enumerate(claims.load_claims(catalog)):
        verdict = claims.VERDICTS[(i * 7) % len(claims.VERDICTS)]
        if verdict == "untestable here" or claim.get("untestable"):
            out.append(claims.Verdict(claim, "untestable here", "no test applies here"))
            continue
        diff = {"holds": 6.0, "fails": -5.0, "inconclusive": 0.5}[verdict]
        test = stats.Test(0.01, 0.9, diff, diff - 2.5, diff + 2.5, 360, 4.0, 900 if diff > 0 else None, "exact")
        kind = claim["test"]["kind"]
        out.append(claims.Verdict(claim, verdict, "because", test, "a 60.0 vs b 55.0 under clean; a 30.0 vs b 28.0",
                                  (0.01, 0.9), 360, 3, 2.0 if kind == "not_worse" else None, level=0.025))
    out[-1].same_as = out[-2].claim["id"] if out[-2].test else None  # the verdicts helper's field, where it exists
    out[-1].verdict, out[-1].test, out[-1].adjusted = out[-2].verdict, out[-2].test, out[-2].adjusted
    return out


def test_the_summary_opens_with_one_screen_a_verdict_table_and_the_forest_plot(tmp_path):
    catalog = _catalog(tmp_path)
    found = _verdicts(catalog)
    forest.build_claims_figure(catalog, found)
    paths = summary.build_summary(catalog, found=found)
    md, page = paths["md"].read_text(), paths["html"].read_text()
    lines = md.splitlines()
    # the scale's caveat, then the claims: the tally, the table, the plot; the details after them
    heads = [ln for ln in lines if ln.startswith("## ")]
    assert heads[:3] == ["## What the smoke scale can and cannot say", "## The papers' claims at the smoke scale",
                         "## The claims in detail"]
    table = [ln for ln in lines[lines.index(heads[1]):lines.index(heads[2])] if ln.startswith("| ")]
    assert table[0] == "| Paper, where | Claim | Verdict | Difference, points [95% interval] | Images needed | |"
    rows = table[1:]
    assert len(rows) == len(found)  # one line per claim, each once
    order = [re.search(r"\*\*(.+?)\*\*", r).group(1) for r in rows]
    assert order == sorted(order, key=claims.VERDICTS.index)  # grouped by verdict: holds, fails, inconclusive, ...
    tested = next(v for v in found if v.test is not None and not getattr(v, "same_as", None))
    line = next(r for r in rows if f"(#{tested.claim['id']})" in r)
    assert f"| {tested.test.diff:+.1f} [{tested.test.lo:+.1f}, {tested.test.hi:+.1f}]" in line
    assert f"| {summary.claim_words(tested.claim)} |" in line
    # a test repeated at this scale: shown once, the other line says whose it is
    same = found[-1].same_as
    if same:
        assert next(r for r in rows if f"(#{found[-1].claim['id']})" in r).count(f"= [{same}](#{same})") == 1
    # the forest plot under the table, embedded in the page
    image = next(ln for ln in lines if ln.startswith("!["))
    assert lines.index(image) < lines.index(heads[2]) and "(figures/claims.png)" in image
    assert catalog.layout.claims_figure()["png"].stat().st_size > 10_000
    assert re.search(r"<img class='claims' src='data:image/png;base64,[A-Za-z0-9+/=]{1000,}'", page)
    # at most about 1,200 words before the details
    assert len("\n".join(lines[:lines.index(heads[2])]).split()) <= 1200
    # the details: each claim behind a <details> of its own, its id the table's link; inline marks as HTML
    assert page.count("<details id=") == len(found)
    for v in found:
        assert f"<details id='{v.claim['id']}'>" in page and f"href='#{v.claim['id']}'" in page
    assert "`" not in re.sub(r"<[^>]+>", "", page) and "<code>" in page


def test_the_forest_plot_draws_each_tested_claim_once_with_its_interval_zero_and_margin(tmp_path):
    catalog = _catalog(tmp_path)
    found = _verdicts(catalog)
    drawn = forest.drawn(found)
    assert len(drawn) == sum(1 for v in found if v.test is not None and not getattr(v, "same_as", None))
    fig = forest.make_claims_figure(catalog, found)
    try:
        ticks = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
        assert sorted(ticks) == sorted(forest.claim_title(v.claim) for v in drawn)
        lines = [ln for ax in fig.axes for ln in ax.get_lines()]
        for v in drawn:  # its interval, in its verdict's colour
            assert any(list(ln.get_xdata()) == [v.test.lo, v.test.hi] and ln.get_color() == forest.COLOURS[
                v.verdict] for ln in lines), v.claim["id"]
        margins = [v for v in drawn if v.margin is not None]
        assert margins and all(any(list(ln.get_xdata()) == [-v.margin, -v.margin] for ln in lines) for v in margins)
        assert all(any(list(ln.get_xdata()) == [0.0, 0.0] for ln in ax.get_lines()) for ax in fig.axes)  # zero
    finally:
        plt.close(fig)


def test_every_cell_is_a_line_of_the_tidy_file_and_results_load_reads_it(tmp_path):
    catalog = _catalog(tmp_path)
    summary.build_summary(catalog, found=[])
    path = catalog.layout.cells()["csv"]
    assert path == tradeoff.results.path("smoke", tmp_path / "results")
    rows = list(csv.DictReader(path.read_text().splitlines()))
    table = tables.build(catalog, "t")
    assert len(rows) == len(table.rows) * len(table.columns)  # one seed, no protocol
    frame = tradeoff.results.load("smoke", tmp_path / "results")
    assert len(frame) == len(rows) and list(frame.columns) == list(cells.FIELDS)
    at = frame[(frame.row == "at_beta1") & (frame.column == "pgd20")].iloc[0]
    assert at.accuracy == pytest.approx(100 * 30 / 64) and at.examples == 64 and at.correct == 30
    assert at.ci_low == pytest.approx(100 * stats.wilson(30, 64)[0]) and at.paper == pytest.approx(48.29)
    assert (at.run, at.train_job, at.method, at.attack, at.attack_type, at.norm) == (
        AT, AT, "pgd_at", "pgd20", "pgd", "linf")
    assert at.eps == pytest.approx(0.3) and at.eps_paper == pytest.approx(8 / 255) and at.eps_paper_text == "8/255"
    assert at.seed == 0 and at.scale == "smoke" and at.dataset == "digits" and at.paper_dataset == "cifar10"
    assert frame.bold.dtype == bool and frame.dagger.dtype == bool and frame.early.dtype == bool
    for (row, column), ours in ((("nt", "nat"), table.ours[(table_model.STRONG, "nt", "nat")]),):
        cell = frame[(frame.row == row) & (frame.column == column)].iloc[0]
        assert cell["mean"] == pytest.approx(ours.value) and bool(cell.bold) == (
            (table_model.STRONG, "nt", "nat") in table.bold)
    with pytest.raises(UserError, match="does not exist"):
        tradeoff.results.load("paper", tmp_path / "results")


def test_a_new_flag_of_a_cell_is_one_more_column(tmp_path, monkeypatch):
    catalog = _catalog(tmp_path)
    monkeypatch.setitem(cells.FLAGS, "invalid", lambda t, row, c, proto: row.key == "nt")
    monkeypatch.setattr(cells, "FIELDS", cells.FIELDS[:-1] + ("invalid", "metrics"))
    lines = cells.table_cells(catalog, tables.build(catalog, "t"))
    assert {line["row"]: line["invalid"] for line in lines} == {"nt": True, "at_beta1": False, "at_beta0.5": False}
    assert "invalid" in cells.render_csv(lines).splitlines()[0].split(",")


def test_a_second_report_does_no_work_and_a_changed_input_rebuilds_its_target_only(tmp_path, capsys):
    catalog = _catalog(tmp_path)
    first = regenerate(catalog, ["t", "f"], everything=True, jobs=2)
    assert [d.skipped for d in first] == [False, False, False, False]  # t, f, the claims' plot, the summary
    stamps = {p: p.stat().st_mtime_ns for d in first for p in d.paths}
    again = regenerate(catalog, ["t", "f"], everything=True, jobs=2)
    assert all(d.skipped for d in again) and {p: p.stat().st_mtime_ns for p in stamps} == stamps
    # a measurement of the figure's and the table's rows changes: both, and the summary; the claims' plot reads
    # neither target here
    write_measurement(catalog, AT, "pgd20", outcomes(31, N, offset=1), clean=outcomes(50, N, offset=1))
    third = {d.name: d.skipped for d in regenerate(catalog, ["t", "f"], everything=True, jobs=1)}
    assert third == {"t": False, "f": False, build.CLAIMS: True, build.SUMMARY: False}
    # an output edited or removed by hand is written again; the others are left alone
    catalog.layout.tables("t")["md"].write_text("edited")
    assert {d.name: d.skipped for d in regenerate(catalog, ["t", "f"])} == {"t": False, "f": True}
    assert catalog.layout.tables("t")["md"].read_text().startswith("# Table 1(a)")
    # a target's settings change: that target again
    retitled = dataclasses.replace(catalog, targets={**catalog.targets, "f": dataclasses.replace(
        catalog.targets["f"], title="Another title")})
    assert {d.name: d.skipped for d in regenerate(retitled, ["t", "f"])} == {"t": True, "f": False}


def test_report_says_what_it_skipped(tmp_path, capsys):
    catalog = _catalog(tmp_path, only=False)
    configs = [a for f in SMOKE + [tmp_path / "overlay.yaml"] for a in ("--config", str(f))]
    assert cli.main(configs + ["report", "t", "--jobs", "1"]) == 0
    assert "t: " + str(catalog.layout.tables("t")["md"]) in capsys.readouterr().out
    assert cli.main(configs + ["report", "t"]) == 0
    assert capsys.readouterr().out.strip() == "t: unchanged, skipped"
    assert cli.main(configs + ["report", "t", "--force"]) == 0
    assert "skipped" not in capsys.readouterr().out
