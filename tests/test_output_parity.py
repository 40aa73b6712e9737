"""Every output of a target says the same: the demo catalog's every table and figure, built from fixture files (no
training), is read in each format it writes, and each format must carry what the table (tradeoff.report.tables.build)
or the figure's rows say once: the title with its scale clause, every column's budget, every row's label (what ran
where it differs, ‡ where its model was selected before its method's mechanism), the legend of every symbol it uses,
and every note. LaTeX is compiled with pdflatex (all the tables in one document)."""

from __future__ import annotations

import csv
import gc
import html
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from report_fixtures import (  # noqa: E402
    caat_synthetic_analysis,
    fill_target,
    fraction,
    grid_analysis,
    tsne_analysis,
    write_analysis,
    write_metrics,
)
from test_report_trust import compile_latex  # noqa: E402

from tradeoff import config as cfg  # noqa: E402
from tradeoff.report import figures, table_model, table_notes, table_render, tables  # noqa: E402
from tradeoff.report import what_ran as ran
from tradeoff.report.build import build_target  # noqa: E402

ROOT = cfg.ROOT
EARLY = {"selected_epoch": 6, "mechanism": {"epoch": 7, "what": "γ < 1 from epoch 7, first communication in epoch 7"}}
# a Generalist selected before it mixes (Table 1(a), Table 5, Figure 4(a)'s NT+AT) and Figure 4(a)'s NT-only
RECORDS = {"cifar10-resnet18-generalist": EARLY, "cifar10-resnet18-generalist-wa-nt-only": EARLY}
WALKED: dict[str, set] = {}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parity")
    overlay = tmp / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"paths": {"results": str(tmp / "results"), "data": "data"}}))
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "demo.yaml", overlay])
    for name, target in catalog.targets.items():
        if target.kind == "group":
            continue
        fill_target(catalog, name, records=RECORDS)
        for row in target.rows if target.protocol else []:  # the authors' protocol's evaluations
            for attack in target.columns.values():
                for job in catalog.column_jobs(attack) if attack not in cfg.PSEUDO_COLUMNS else []:
                    for run in catalog.row_runs(row.run):
                        own = catalog.protocol_attack(name, job, run)
                        if own is not None:
                            write_metrics(catalog, run, own, fraction(run, own, high=0.6, examples=200),
                                          examples=200, **RECORDS.get(run, {}))
        if target.analysis is not None:
            kind = target.plot
            write_analysis(catalog, name, grid_analysis(catalog, name) if kind == "grid" else
                           tsne_analysis(catalog, name) if kind == "tsne" else caat_synthetic_analysis())
    # statsmodels' multipletests (Holm) runs gc.collect() on every call: with what this process holds (every
    # module of the suite) that is half a second per column; keep the objects made so far out of its way
    gc.freeze()
    yield catalog
    gc.unfreeze()


def _flat(text: str) -> str:
    """Text with its line breaks and runs of spaces as one space (a figure wraps its titles and footers)."""
    return re.sub(r"\s+", " ", text).strip()


def _tables(catalog) -> list[str]:
    return [n for n, t in catalog.targets.items() if t.kind == "table"]


def _figures(catalog) -> list[str]:
    return [n for n, t in catalog.targets.items() if t.kind == "figure"]


def _caption(tex: str) -> str:
    start = tex.index(r"\caption{") + len(r"\caption{")
    depth, i = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(tex[i], 0) if tex[i - 1] != "\\" else 0
        i += 1
    return tex[start:i - 1]


def _html_note(note: str) -> str:
    return table_render.inline_html(note.strip().removeprefix("- "))


def test_every_table_of_the_demo_says_the_same_in_every_format(demo, tmp_path):
    problems, tex_files, notes = [], [], []
    for name in _tables(demo):
        table = tables.build(demo, name)
        notes += table.notes
        paths = dict(zip(("md", "csv", "tex", "html"), build_target(demo, name)))
        md, tex, page = (paths[k].read_text() for k in ("md", "tex", "html"))
        rows = list(csv.DictReader(paths["csv"].read_text().splitlines()))
        tex_files.append(paths["tex"])
        caption = _caption(tex)
        early = {row.key for row in table.rows if table_model.before_mechanism(table, row)}
        labels = [row.label + (f" {table_model.EARLY}" if row.key in early else "") for row in table.rows]
        # the title, with its scale clause
        assert " — demo scale ran: " in table.title, name
        wanted = {"md": [f"# {table.title}"], "html": [html.escape(table.title)],
                  "tex": [table_render.tex(table.title)]}
        wanted["md"] += [c.label for c in table.columns] + labels + table.notes
        wanted["html"] += ([html.escape(c.label) for c in table.columns] + [html.escape(lab) for lab in labels]
                           + [_html_note(n) for n in table.notes])
        wanted["tex"] += ([table_render.tex(c.label) for c in table.columns] + [table_render.tex(lab) for lab in labels]
                          + [table_render.tex_note(n) for n in table.notes])
        for fmt, text in (("md", md), ("html", page), ("tex", tex)):
            problems += [f"{name}.{fmt}: missing {w!r}" for w in wanted[fmt] if w not in text]
            WALKED.setdefault(name, set()).add(fmt)
        # a .tex's caption: the title and one sentence; under the table, every symbol its cells use, defined, and
        # the legend first
        body = tex[tex.index(r"\endlastfoot"):tex.rindex(r"\end{longtable}")]
        under = tex[tex.rindex(r"\end{longtable}"):]
        defined = {r"\textbf{": r"\textbf{Bold}: the best", r"\dag{}": r"\dag{}: differs from",
                   "& = ": "= : that protocol runs", r"\ddag{}": r"\ddag{} "}
        problems += [f"{name}.tex: no note defines {symbol!r}" for symbol, definition in defined.items()
                     if symbol in body and definition not in under]
        problems += [f"{name}.tex: legend misses {n!r}" for n in table.legend if table_render.tex_note(n) not in under]
        if not caption.startswith(table_render.tex(f"{table.title} (scale: demo).")):
            problems.append(f"{name}.tex: caption misses the title")
        if len(re.findall(r"[.!?](?:\s|$)", caption[len(table_render.tex(table.title)):])) > 2:
            problems.append(f"{name}.tex: a caption of more than two sentences")
        if re.search(r"\\(resizebox|scalebox|tiny|scriptsize)\b", tex):
            problems.append(f"{name}.tex: shrinks its type")
        # the CSV: the title, every column's budget, every row's label and flags
        WALKED[name].add("csv")
        if {r["title"] for r in rows} != {table.title}:
            problems.append(f"{name}.csv: title column")
        if {r["column_label"] for r in rows} != {c.label for c in table.columns if any(
                not table.ours[(p, row.key, c.key)].same_as_strong for p, _ in table.protocols for row in table.rows)}:
            problems.append(f"{name}.csv: column labels")
        if {r["label"] for r in rows} != {m.label for row in table.rows for m in row.members}:
            problems.append(f"{name}.csv: row labels")
        flagged = {r["row"] for r in rows if r["before_mechanism"] == "1"}
        if flagged != {m.key for row in table.rows if row.key in early for m in row.members}:
            problems.append(f"{name}.csv: ‡ rows {sorted(flagged)}")
    assert not problems, "\n".join(problems)
    # what this test walks must include each kind of flag and label it checks
    notes = "\n".join(notes)
    assert table_model.EARLY in notes and " — here NT 0.1, AT 0.1" in notes and "does not keep" in notes
    # every table compiled, as printed: nothing below 7 pt, nothing wider than its page (compile_latex)
    doc = tmp_path / "all.tex"
    doc.write_text("".join(f"\\input{{{p}}}\n\\clearpage\n" for p in tex_files))
    compile_latex([doc], tmp_path)
    assert {"table1a", "caat_table1", "zipper_table4"} <= {p.stem for p in tex_files}


def _texts(fig) -> str:
    out = [t.get_text() for t in fig.texts]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.texts + ax.get_xticklabels() + ax.get_yticklabels()]
        legend = ax.get_legend()
        out += [t.get_text() for t in legend.get_texts()] if legend else []
    out += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    return _flat("\n".join(out))


def test_every_figure_of_the_demo_says_what_its_table_would(demo):
    problems = []
    for name in _figures(demo):
        target = demo.targets[name]
        fig = figures.make_figure(demo, name)
        try:
            text = _texts(fig)
            title = _flat(fig._suptitle.get_text())
        finally:
            plt.close(fig)
        WALKED.setdefault(name, set()).add("figure")
        if title != _flat(ran.title(demo, name)) or " — demo scale ran: " not in title:
            problems.append(f"{name}: title {title!r}")
        runs = [row.run for row in target.rows]
        budgets = [ran.budget_phrase(demo, attack, runs) for attack in target.columns.values()]
        analysis = target.analysis.as_dict() if target.analysis else {}
        if analysis.get("attack"):
            budgets.append(ran.budget_phrase(demo, analysis["attack"], runs))
        if target.plot == "curves" and ran.tracking_attack(demo, runs):
            budgets.append(ran.budget_phrase(demo, ran.tracking_attack(demo, runs), runs))
        problems += [f"{name}: budget {b!r} not shown" for b in budgets if b and _flat(b) not in text]
        if target.analysis is None and target.rows:
            labels = table_notes.figure_labels(demo, name)
            for key in table_notes.early_rows(demo, name):
                label = labels[key].removesuffix(f" {table_model.EARLY}")
                if _flat(table_notes.early_text(label, [6], EARLY["mechanism"])) not in text:
                    problems.append(f"{name}: no ‡ note for {key}")
            if target.plot in ("bars", "scatter", "per_class", "curves"):
                problems += [f"{name}: label {lab!r} not shown" for lab in labels.values() if _flat(lab) not in text]
            if any(re.search(" — .*here ", lab) for lab in labels.values()) \
                    and _flat(table_notes.HERE_NOTE) not in text:
                problems.append(f"{name}: '— here' not explained")
    assert not problems, "\n".join(problems)
    assert any("‡" in lab for name in _figures(demo) if demo.targets[name].analysis is None
               for lab in table_notes.figure_labels(demo, name).values())


def test_every_accuracy_a_figure_draws_carries_its_interval_and_every_mark_its_tick(demo):
    """A bar or point of an accuracy has its 95% interval drawn (error bars); ‡ sits on the tick or legend entry of
    the point it qualifies (Figure 3(b)'s c = 5, a Generalist selected before it mixes), not only in the footer;
    a note's Markdown marks (backticks) are plain text in a figure."""
    from matplotlib.collections import LineCollection

    problems, drawn = [], 0
    for name in _figures(demo):
        target = demo.targets[name]
        fig = figures.make_figure(demo, name)
        try:
            texts = _texts(fig)
            if "`" in texts:
                problems.append(f"{name}: a backtick in its text")
            if target.plot not in ("bars", "scatter", "lines", "per_class", "front"):
                continue
            bars = [c for ax in fig.axes for c in ax.collections if isinstance(c, LineCollection)]
            if not bars or not any(len(c.get_segments()) for c in bars):
                problems.append(f"{name}: no error bars")
            drawn += 1
            early = table_notes.early_rows(demo, name)
            if target.plot == "lines" and early:
                ticks = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
                for row in target.rows:
                    if row.key in early and not any(t.startswith(f"{row.x:g} {table_model.EARLY}") for t in ticks):
                        problems.append(f"{name}: no ‡ on the tick of {row.key} ({ticks})")
        finally:
            plt.close(fig)
    assert not problems, "\n".join(problems)
    assert drawn >= 20 and table_notes.early_rows(demo, "figure3b")


def test_the_walk_covers_every_target(demo):
    """Runs last: every table and figure target of the demo catalog was walked, in every format it writes."""
    if not WALKED:
        pytest.skip("run with the tests above")
    assert {n for n in WALKED} == set(_tables(demo)) | set(_figures(demo))
    assert all(WALKED[n] == {"md", "csv", "tex", "html"} for n in _tables(demo))
    print(f"walked {len(_tables(demo))} tables x 4 formats + {len(_figures(demo))} figures x 1 (png and pdf of "
          f"one Figure) = {4 * len(_tables(demo)) + len(_figures(demo))}")
