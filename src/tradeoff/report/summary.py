"""The summary page, the answer where a reader looks: first what this scale can and cannot say about the papers
(dataset and model, seeds, test images, which split chose each epoch); then the papers' claims
(:mod:`tradeoff.report.claims`) on one screen: a verdict table, one line per claim (paper and section, the claim in a
few words, verdict, difference with its 95% interval, the test images 80% power needs, a link to its details),
grouped by verdict, a repeated test shown once; and the forest plot of their effects (figures/claims.png, embedded in
the HTML). Then each claim in detail (its quote, its test, every measured pair; behind a ``<details>`` in the HTML);
then every target, whether it is built, which runs and measurements it still misses (a target that repeats another at
this scale says so once, instead of repeating its numbers; a column empty on every row is left out), the cells where
the paper's number lies outside our 95% interval (only where ours ran the paper's dataset and architecture:
elsewhere the comparison is noise), where the authors' own evaluation overstates robustness (each training job and
evaluation once, the cell as every table that shows it labels it), and every failed check of the audits written
(tradeoff.audit). The same job writes the tidy file of every cell (:mod:`tradeoff.report.cells`). It reads whatever
metrics and audits exist, so it can be made at any time; a target whose files cannot be vouched for is listed as
refused, with the reason."""

from __future__ import annotations

import base64
import html
import os
import re
from pathlib import Path

from tradeoff.config import Catalog
from tradeoff.report import cells, claims, table_model, table_render, tables
from tradeoff.report import what_ran as ran
from tradeoff.report.build import target_outputs
from tradeoff.report.labels import claim_title, claim_words
from tradeoff.report.records import ReportError, failed_checks, measurement
from tradeoff.storage.atomic import atomic_write_text

SHOWN = 3  # cells listed per target and list


def _paper_setting(catalog: Catalog, row: table_model.Row) -> bool:
    """Whether a row's model ran the paper's dataset and architecture (else its number is not the paper's to meet)."""
    spec = catalog.model_spec(row.runs[0])
    return spec.paper_dataset == spec.dataset and spec.paper_arch == spec.arch


def _outside(catalog: Catalog, table: table_model.Table) -> tuple[list[tuple[float, str]], int]:
    """Cells whose paper number lies outside our interval, (distance, text) farthest first, and how many paper
    numbers had an interval of ours to fall in; only rows that ran the paper's setting."""
    found, compared = [], 0
    for row in (r for r in table.rows if _paper_setting(catalog, r)):
        for member in table.paper_rows(row):
            for c in table.columns:
                for proto, _ in table.protocols:
                    o = table.ours[(proto, row.key, c.key)]
                    paper = table.paper.get((member.key, c.key))
                    if paper is None or o.lo is None or o.same_as_strong:
                        continue
                    compared += 1
                    if o.lo <= paper[0] <= o.hi:
                        continue
                    gap = paper[0] - o.hi if paper[0] > o.hi else o.lo - paper[0]
                    where = "" if proto == table_model.STRONG else f", {proto}"
                    found.append((gap, f"{member.label} {c.label}{where}: paper {paper[0]:.2f} outside "
                                       f"[{o.lo:.1f}, {o.hi:.1f}]"))
    return sorted(found, key=lambda f: -f[0]), compared


def _overstated(catalog: Catalog, table: table_model.Table) -> list[tuple[float, tuple, str, str]]:
    """Cells where ours under the authors' protocol is above ours under the strong attacks: (points, the finding's
    key: the model and the two evaluations, the numbers, the cell as this table names it), largest first. The cell
    is named as its table labels it (row label with ‡, the paper's dataset and architecture, column): a model of one
    setting may be another setting's row in another table ("MNIST / FAT" is `cifar10-resnet18-fat` at the demo)."""
    found = []
    for proto, _ in table.protocols[1:]:
        for row in table.rows:
            spec = catalog.model_spec(row.members[0].run)  # the setting the row stands for, not its job's
            label = row.label + (f" {table_model.EARLY}" if table_model.before_mechanism(table, row) else "")
            setting = (f"{ran.DATASET_NAMES.get(spec.paper_dataset, spec.paper_dataset)}, "
                       f"{ran.ARCH_NAMES.get(spec.paper_arch, spec.paper_arch)}")
            for c in table.columns:
                code, strong = table.ours[(proto, row.key, c.key)], table.ours[(table_model.STRONG, row.key, c.key)]
                if code.same_as_strong or code.value is None or strong.value is None or code.value <= strong.value:
                    continue
                key = (tuple(row.runs), c.attack, catalog.protocol_attack(table.name, c.attack, row.members[0].run))
                found.append((code.value - strong.value, key,
                              f"{code.value:.1f} under {proto} vs {strong.value:.1f} strong "
                              f"(+{code.value - strong.value:.1f})",
                              f"{table.name}: {label} ({setting}), {c.label}"))
    return sorted(found, key=lambda f: -f[0])


def overstated_findings(statuses: dict[str, dict]) -> list[tuple[str, list[str]]]:
    """Each model/evaluation pair once, largest first (the pairs among the SHOWN largest of some table): its text
    names the training job and every table that shows it, the cell as each of them labels it; and those tables."""
    listed: dict[tuple, tuple[float, str, dict[str, str]]] = {}
    for name, st in statuses.items():
        for gap, key, numbers, _ in st["overstated"][:SHOWN]:
            listed.setdefault(key, (gap, numbers, {}))
    for name, st in statuses.items():
        for _, key, _, mention in st["overstated"]:
            if key in listed:
                listed[key][2].setdefault(name, mention)
    return [(f"`{', '.join(key[0])}` {numbers}: " + "; ".join(mentions.values()), list(mentions))
            for key, (gap, numbers, mentions) in sorted(listed.items(), key=lambda kv: -kv[1][0])]


def target_status(catalog: Catalog, name: str, keep: bool = False, table: table_model.Table | None = None):
    """A target's status on the summary: built, measured, missing runs, refused (why), its paper numbers outside
    our intervals and its overstated cells; with ``keep``, (status, its table or None). ``table``: the target's
    table, already read (else read here)."""
    pairs = catalog.evaluations(name)
    missing_metrics = [(r, a) for r, a in pairs if not catalog.metrics_file(r, a).exists()]
    runs = sorted({r for r, _ in pairs} | set(catalog.curve_train_ids(name)) | set(catalog.analysis_train_ids(name)))
    missing_runs = [r for r in runs if not catalog.layout.model(r).exists()]
    missing_analyses = [t for t in catalog.analysis_targets(name) if not catalog.layout.analysis(t).exists()]
    built = all(p.exists() for p in target_outputs(catalog, name)) and not missing_metrics and not missing_analyses
    outside, overstated, refused, compared = [], [], None, 0
    if table is None and catalog.targets[name].kind == "table" and len(missing_metrics) < len(pairs):
        try:
            table = tables.build(catalog, name)
        except ReportError as exc:
            refused = str(exc)
    if table is not None:
        (outside, compared), overstated = _outside(catalog, table), _overstated(catalog, table)
    status = {"built": built and refused is None, "measured": len(pairs) - len(missing_metrics),
              "measurements": len(pairs), "missing_runs": missing_runs, "refused": refused, "outside": outside,
              "with_interval": compared, "overstated": overstated}
    return (status, table) if keep else status


SCALE_CHANGES = ("At the {scale} scale every run trains on another dataset and model than the paper's ({what}), "
                 "with fewer epochs and a recipe of its own (docs/demo-scale.md says what each setting keeps of the "
                 "papers' mechanisms, and what it changes): a verdict here says what the methods do at this scale, "
                 "which may differ from the paper's setting, and no paper number is expected inside our intervals.")
SAME_SETTING = ("At the {scale} scale every run trains the paper's own dataset and model; the recipe is the config's "
                "(docs/differences.md lists where it departs from the papers).")


def selection(catalog: Catalog) -> str:
    """Which split chose each model's epoch, as the measured runs record it (``selection_split``: validation, test,
    or none where the last epoch is kept); a record without the field was selected on the test split."""
    chose: dict[str, list] = {}
    for run in sorted(set(catalog.train_id.values())):
        attacks = [a for a in catalog.model_attacks(run) if catalog.metrics_file(run, a).exists()][:1] \
            if run in catalog.runs else []
        for attack in attacks:
            try:
                m = measurement(catalog, run, attack)
            except ReportError:
                continue
            if m is not None:
                split = m.record.get("selection_split", "test")
                chose.setdefault(str(split) if split else "none", []).append(m.record.get("selection_images"))
    if not chose:
        return "Selection: no run is measured yet, so no record says which split chose its epoch."
    said = {"test": "chosen on the test split itself, the same images that the intervals, tests and verdicts below "
                    "then use (which leans every number toward the epoch that did best on them)",
            "validation": "chosen on a validation split held out of the training data, the test split measured "
                          "once, at the end",
            "none": "not chosen: the model is the last epoch's"}
    parts = []
    for split, images in sorted(chose.items(), key=lambda kv: -len(kv[1])):
        counts = sorted({int(i) for i in images if isinstance(i, (int, float)) or str(i).isdigit()})
        size = f" ({', '.join(f'{c:,}' for c in counts)} images)" if counts else ""
        parts.append(f"{len(images)} {'model' if len(images) == 1 else 'models'}, {said.get(split, f'chosen on the {split} split')}{size}")
    total = sum(len(i) for i in chose.values())
    return f"Selection: the epoch of the {total} measured training jobs: " + "; ".join(parts) + "."


def caveats(catalog: Catalog, found: list[claims.Verdict]) -> list[str]:
    """What this scale can and cannot say about the papers: dataset and model, seeds, test images, selection."""
    mapped = sorted({f"{ran.DATASET_NAMES.get(s.dataset, s.dataset)}, "
                     f"{ran.ARCH_NAMES.get(s.arch, s.arch)}" for s in catalog.runs.values()
                     if (s.paper_dataset, s.paper_arch) != (s.dataset, s.arch)})
    text = (SCALE_CHANGES.format(scale=catalog.scale, what="; ".join(mapped)) if mapped else
            SAME_SETTING.format(scale=catalog.scale))
    seeds = sorted({len(catalog.row_runs(row.run)) for t in catalog.targets.values() for row in t.rows})
    most = seeds[-1] if seeds else 1
    text += (f" Seeds: each row is {'one training run (one seed)' if most == 1 else f'up to {most} seeds'}, so a "
             f"verdict speaks for {'that run' if most == 1 else 'those runs'}"
             f"{', not for the spread of the method over seeds' if most == 1 else ', seeds resampled in its test'}.")
    images = sorted({v.test.images for v in found if v.test})
    splits = sorted({v.split for v in found if v.split})
    if images:
        text += (f" Test images: {', '.join(f'{n:,}' for n in images)} per measurement"
                 + (f" (this scale's test split holds {', '.join(f'{n:,}' for n in splits)})" if splits else "")
                 + "; the test image is the unit of every test below, and each verdict says the smallest difference "
                   "it would detect with 80% power.")
    else:
        sizes = sorted({s.test_examples for s in catalog.runs.values()}, key=str)
        text += (" Test images: " + ", ".join("the whole test split" if n is None else f"{n:,}" for n in sizes)
                 + " per measurement (no claim is measured yet); the test image is the unit of every test below.")
    return [f"## What the {catalog.scale} scale can and cannot say", "", text + " " + selection(catalog), ""]


# ----------------------------------------------------------------------------------------- the claims' verdicts


def _difference(v) -> str:
    """A verdict's difference with its 95% interval ("+5.2 [+2.1, +8.3]"), "= <claim>" for a repeated test."""
    same = getattr(v, "same_as", None)
    if same:
        return f"= [{same}](#{same})"
    if v.test is None:
        return "—"
    unit = " (area)" if v.claim["test"]["kind"] == "front" else ""
    return f"{v.test.diff:+.1f} [{v.test.lo:+.1f}, {v.test.hi:+.1f}]{unit}"


def _needed(v) -> str:
    if getattr(v, "same_as", None) or v.test is None or v.test.needed is None:
        return "—"
    return f"{v.test.needed:,}"


def ordered(found: list[claims.Verdict]) -> list[claims.Verdict]:
    """The verdicts grouped by verdict (holds, fails, inconclusive, untestable here), the file's order within."""
    return sorted(found, key=lambda v: claims.VERDICTS.index(v.verdict) if v.verdict in claims.VERDICTS else 99)


def verdict_table(found: list[claims.Verdict]) -> list[str]:
    """One line per claim, grouped by verdict: paper and section, the claim in a few words, the verdict, the
    difference in points with its 95% interval, the test images that 80% power needs, a link to its details."""
    out = ["| Paper, where | Claim | Verdict | Difference, points [95% interval] | Images needed | |",
           "|---|---|---|---|---|---|"]
    for v in ordered(found):
        c = v.claim
        paper = c["paper"].split(" (")[0]
        out.append(f"| {paper}, {c['where']} | {claim_words(c)} | **{v.verdict}** | {_difference(v)} | "
                   f"{_needed(v)} | [details](#{c['id']}) |")
    return out


def claims_section(catalog: Catalog, found: list[claims.Verdict]) -> list[str]:
    """The verdicts at a glance: the tally, the verdict table and the forest plot."""
    figure = catalog.layout.claims_figure()["png"]
    shown = os.path.relpath(figure, catalog.layout.summary()["md"].parent)
    return [f"## The papers' claims at the {catalog.scale} scale", "", claims.tally(found), ""] + \
        verdict_table(found) + ["", f"![Each tested claim's difference with its 95% interval, by verdict]({shown})",
                                "", "Images needed: the test images that would detect the estimated difference with "
                                "80% power (where it favours the claim). Each claim's quote, test and measurements "
                                "are under [The claims in detail](#the-claims-in-detail).", ""]


def details_section(found: list[claims.Verdict]) -> list[str]:
    """Per claim, after the verdict table: its verdict and why, the paper's words, the test, the difference and
    p-values, and every measured pair on a line of its own."""
    out = ["## The claims in detail", ""]
    for v in ordered(found):
        c = v.claim
        out += [f"### {c['id']}", "", f"**{v.verdict}** — {claim_title(c)}", ""]
        same = getattr(v, "same_as", None)
        text = claims.line(v)
        head, _, measured = text.partition(" Measured: ")
        out += [head + (f" The same test as [{same}](#{same}) at this scale." if same else ""), ""]
        if measured:
            out += ["Measured:", ""] + [f"- {m.strip().rstrip('.')}" for m in measured.split("; ") if m.strip()] + [""]
    return out


# ---------------------------------------------------------------------------------------------- the page


def _inline(text: str) -> str:
    """Markdown's inline marks of this page (`code`, **bold**, [text](#anchor)) as HTML, the rest escaped."""
    out = table_render.inline_html(text)
    return re.sub(r"\[([^\]]+)\]\((#[\w.-]+)\)", r"<a href='\2'>\1</a>", out)


def _image(path: Path) -> str:
    """A PNG as a data URL: the page carries its figure (the Snakemake report shows the page on its own)."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _html(lines: list[str], folder: Path) -> str:
    """The Markdown lines of this page as HTML, every sentence carried: headings, paragraphs, bullet lists, pipe
    tables, an image (embedded) and, under "The claims in detail", each claim behind a ``<details>`` of its own."""
    out, bullets, table, opened = [], [], [], [False]

    def flush():
        if bullets:
            out.append("<ul>" + "".join(f"<li>{_inline(b)}</li>" for b in bullets) + "</ul>")
            bullets.clear()
        if table:
            head, *body = table
            out.append("<table class='tradeoff'><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head)
                       + "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r)
                                                          + "</tr>" for r in body) + "</tbody></table>")
            table.clear()

    def close():
        if opened[0]:
            out.append("</details>")
            opened[0] = False

    for i, ln in enumerate(lines):
        if ln.startswith("|"):
            if not set(ln) <= set("|-"):
                table.append([c.strip() for c in ln.strip().removeprefix("|").removesuffix("|").split(" | ")])
            continue
        if ln.startswith("- "):
            bullets.append(ln[2:])
            continue
        flush()
        image = re.fullmatch(r"!\[([^\]]*)\]\(([^)]+)\)", ln)
        if image:
            path = folder / image.group(2)
            if path.is_file():
                out.append(f"<p><img class='claims' src='{_image(path)}' alt='{html.escape(image.group(1))}'></p>")
            else:
                out.append(f"<p>{html.escape(image.group(1))}: not drawn yet ({html.escape(image.group(2))})</p>")
        elif ln.startswith("### "):  # a claim's details, titled by its id and the line under it (its verdict)
            close()
            name = ln[4:]
            said = next((x for x in lines[i + 1:] if x.strip()), "")
            out.append(f"<details id='{html.escape(name)}'><summary>{html.escape(name)}: {_inline(said)}</summary>")
            opened[0] = True
        elif ln.startswith("## "):
            close()
            slug = re.sub(r"[^a-z0-9]+", "-", ln[3:].lower()).strip("-")
            out.append(f"<h2 id='{slug}'>{_inline(ln[3:])}</h2>")
        elif ln.startswith("# "):
            out.append(f"<h1>{_inline(ln[2:])}</h1>")
        elif ln.strip():
            out.append(f"<p>{_inline(ln)}</p>")
    flush()
    close()
    return "".join(out)


def _drop_empty_columns(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> tuple[list[str], list[list[str]]]:
    """A table without the columns that are "—" on every row (they say nothing)."""
    keep = [i for i in range(len(header)) if any(r[i] != "—" for r in rows)] if rows else list(range(len(header)))
    return [header[i] for i in keep], [[r[i] for i in keep] for r in rows]


def targets_section(catalog: Catalog, statuses: dict[str, dict]) -> tuple[list[str], dict[str, dict]]:
    """Every target: built, missing or refused, what it misses, where the paper lies outside our interval; and the
    statuses of those that are no other target's twin (the lists below count each finding once)."""
    header = ("target", "kind", "status", "measured", "missing runs",
              "paper outside our 95% interval (farthest first)")
    rows, shown = [], {}
    for name, target in catalog.targets.items():
        same = ran.twin(catalog, name)
        st = statuses[name]
        status = "refused: " + st["refused"] if st["refused"] else ("built" if st["built"] else "missing")
        if same and not st["refused"]:
            status += f"; = {same} at this scale (the same jobs and evaluations)"
        outside = "—" if same else (f"{len(st['outside'])} of {st['with_interval']}: " +
                                    "; ".join(text for _, text in st["outside"][:SHOWN])) if st["outside"] else "—"
        missing = ", ".join(st["missing_runs"]) or "—"
        measured = f"{st['measured']}/{st['measurements']}" if st["measurements"] else "— (no evaluation)"
        rows.append((name, target.kind, status, measured, missing, outside))
        if not same:
            shown[name] = st
    head, body = _drop_empty_columns(header, rows)
    md = ["## Targets", "",
          "Scale: results/" + catalog.scale + "/. A cell's interval is its 95% Wilson interval over the test "
          "examples; a paper number outside it differs from ours by more than the test set's sampling explains "
          "(counted only for rows that ran the paper's dataset and architecture). Every cell of every table is also "
          f"a line of `results/{catalog.scale}/cells.csv` (`tradeoff.results.load(\"{catalog.scale}\")`).", "",
          "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in body]
    return md, shown


def statuses_and_cells(catalog: Catalog) -> tuple[dict[str, dict], list[dict]]:
    """Every target's status and the tidy file's lines of every table, each table read once."""
    statuses, lines = {}, []
    for name in catalog.targets:
        statuses[name], table = target_status(catalog, name, keep=True)
        if table is not None:
            lines += cells.table_cells(catalog, table)
    return statuses, lines


def build_summary(catalog: Catalog, *, statuses: dict[str, dict] | None = None, lines: list[dict] | None = None,
                  found: list[claims.Verdict] | None = None) -> dict[str, Path]:
    """Write summary.md, summary.html and the tidy file of every cell (cells.csv), from the targets' statuses, the
    tables' cells and the claims' verdicts (computed here unless given: ``report --all`` computes them in parallel).
    The page embeds the claims' forest plot (figures/claims.png) where it has been drawn."""
    if statuses is None or lines is None:
        statuses, lines = statuses_and_cells(catalog)
    found = claims.verdicts(catalog) if found is None else found
    md = [f"# Summary ({catalog.scale} scale)", ""] + caveats(catalog, found) + \
        (claims_section(catalog, found) if found else [])
    targets, shown = targets_section(catalog, statuses)
    md += details_section(found) if found else []
    md += targets
    overstated = [] if ran.generated(catalog) else overstated_findings(shown)  # generated data: nothing to find
    if overstated:
        md += ["", "## Where the authors' evaluation overstates robustness", "",
               "Ours under the authors' own evaluation protocol against ours under the strong attacks, same model "
               f"(the {SHOWN} largest per table; each training job and evaluation once, with every table that shows "
               "it, the cell as that table labels it):", ""]
        md += [f"- {text}" for text, _ in overstated]
    failed = failed_checks(catalog)
    if failed:
        md += ["", "## Failed audit checks", "", "Every failed check of the audits written for this scale's models "
               "(`tradeoff audit`, docs/audit.md; their pages are in audit/):", ""]
        md += [f"- {model} / {name}: {text}" for model, name, text in failed]
    paths = catalog.layout.summary()
    atomic_write_text(paths["md"], "\n".join(md) + "\n")
    atomic_write_text(paths["html"], table_render.html_page("tradeoff summary", _html(md, paths["md"].parent)))
    cells.write_cells(catalog, lines)
    return paths
