"""The summary page: first what this scale can and cannot say about the papers (dataset and model, seeds, test
images, which split chose each epoch), then the papers' claims and their verdicts (:mod:`tradeoff.report.claims`);
then every target, whether it is built, which runs and measurements it still misses (a
target that repeats another at this scale says so once, instead of repeating its numbers), the cells where the
paper's number lies outside our 95% interval (only where ours ran the paper's dataset and architecture: elsewhere
the comparison is noise), where the authors' own evaluation overstates robustness, and every failed check of the
audits written (tradeoff.audit). It reads whatever metrics and audits exist, so it can be made at any time; a
target whose files cannot be vouched for is listed as refused, with the reason."""

from __future__ import annotations

import html
from pathlib import Path

from tradeoff.storage.atomic import atomic_write_text
from tradeoff.config import Catalog
from tradeoff.report import claims, what_ran as ran, tables
from tradeoff.report.build import target_outputs
from tradeoff.report.records import ReportError, failed_checks
from tradeoff.report.records import measurement

SHOWN = 3  # cells listed per target and list


def _paper_setting(catalog: Catalog, row: tables.Row) -> bool:
    """Whether a row's model ran the paper's dataset and architecture (else its number is not the paper's to meet)."""
    spec = catalog.model_spec(row.runs[0])
    return spec.paper_dataset == spec.dataset and spec.paper_arch == spec.arch


def _outside(catalog: Catalog, table: tables.Table) -> tuple[list[tuple[float, str]], int]:
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
                    where = "" if proto == tables.STRONG else f", {proto}"
                    found.append((gap, f"{member.label} {c.label}{where}: paper {paper[0]:.2f} outside "
                                       f"[{o.lo:.1f}, {o.hi:.1f}]"))
    return sorted(found, key=lambda f: -f[0]), compared


def _overstated(catalog: Catalog, table: tables.Table) -> list[tuple[float, tuple, str]]:
    """Cells where ours under the authors' protocol is above ours under the strong attacks: (points, the finding's
    key: the model and the two evaluations, text), largest first. The text names the row's training job: a row of
    one setting may be another's job at this scale ("MNIST / FAT" is `cifar10-resnet18-fat` at the demo)."""
    found = []
    for proto, _ in table.protocols[1:]:
        for row in table.rows:
            for c in table.columns:
                code, strong = table.ours[(proto, row.key, c.key)], table.ours[(tables.STRONG, row.key, c.key)]
                if code.same_as_strong or code.value is None or strong.value is None or code.value <= strong.value:
                    continue
                key = (tuple(row.runs), c.attack, catalog.protocol_attack(table.name, c.attack, row.members[0].run))
                found.append((code.value - strong.value, key,
                              f"{row.label} (`{', '.join(row.runs)}`) {c.label}: {code.value:.1f} under {proto} vs "
                              f"{strong.value:.1f} strong (+{code.value - strong.value:.1f})"))
    return sorted(found, key=lambda f: -f[0])


def overstated_findings(statuses: dict[str, dict]) -> list[tuple[str, list[str]]]:
    """Each model/evaluation pair once, with every table that shows it (text, tables), largest first: the pairs
    among the SHOWN largest of some table."""
    listed: dict[tuple, tuple[float, str, list[str]]] = {}
    for name, st in statuses.items():
        for gap, key, text in st["overstated"][:SHOWN]:
            listed.setdefault(key, (gap, text, []))
    for name, st in statuses.items():
        for _, key, _ in st["overstated"]:
            if key in listed and name not in listed[key][2]:
                listed[key][2].append(name)
    return [(text, names) for gap, text, names in sorted(listed.values(), key=lambda f: -f[0])]


def target_status(catalog: Catalog, name: str) -> dict:
    pairs = catalog.evaluations(name)
    missing_metrics = [(r, a) for r, a in pairs if not catalog.metrics_file(r, a).exists()]
    runs = sorted({r for r, _ in pairs} | set(catalog.curve_train_ids(name)) | set(catalog.analysis_train_ids(name)))
    missing_runs = [r for r in runs if not catalog.layout.model(r).exists()]
    missing_analyses = [t for t in catalog.analysis_targets(name) if not catalog.layout.analysis(t).exists()]
    built = all(p.exists() for p in target_outputs(catalog, name)) and not missing_metrics and not missing_analyses
    outside, overstated, refused, cells = [], [], None, 0
    if catalog.targets[name].kind == "table" and len(missing_metrics) < len(pairs):
        try:
            table = tables.build(catalog, name)
        except ReportError as exc:
            refused = str(exc)
        else:
            (outside, cells), overstated = _outside(catalog, table), _overstated(catalog, table)
    return {"built": built and refused is None, "measured": len(pairs) - len(missing_metrics),
            "measurements": len(pairs), "missing_runs": missing_runs, "refused": refused, "outside": outside,
            "with_interval": cells, "overstated": overstated}


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


def _html(lines: list[str]) -> str:
    """Markdown lines of the kinds this page writes (headings, paragraphs, bullet lists, one pipe table) as HTML,
    every sentence carried."""
    out, bullets, table = [], [], []

    def flush():
        if bullets:
            out.append("<ul>" + "".join(f"<li>{html.escape(b)}</li>" for b in bullets) + "</ul>")
            bullets.clear()
        if table:
            head, *body = table
            out.append("<table class='tradeoff'><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head)
                       + "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r)
                                                          + "</tr>" for r in body) + "</tbody></table>")
            table.clear()

    for ln in lines:
        if ln.startswith("|"):
            if not set(ln) <= set("|-"):
                table.append([c.strip() for c in ln.strip("|").split(" | ")])
            continue
        if ln.startswith("- "):
            bullets.append(ln[2:])
            continue
        flush()
        if ln.startswith("## "):
            out.append(f"<h2>{html.escape(ln[3:])}</h2>")
        elif ln.startswith("# "):
            out.append(f"<h1>{html.escape(ln[2:])}</h1>")
        elif ln.strip():
            out.append(f"<p>{html.escape(ln)}</p>")
    flush()
    return "".join(out)


def build_summary(catalog: Catalog) -> dict[str, Path]:
    header = ("target", "kind", "status", "measured", "missing runs",
              "paper outside our 95% interval (farthest first)")
    found = claims.verdicts(catalog)
    md = [f"# Summary ({catalog.scale} scale)", ""] + caveats(catalog, found) + \
        (claims.markdown(found, catalog.scale) + [""] if found else [])
    md += ["## Targets", "",
           "Scale: results/" + catalog.scale + "/. A cell's interval is its 95% Wilson interval over the test "
           "examples; a paper number outside it differs from ours by more than the test set's sampling explains "
           "(counted only for rows that ran the paper's dataset and architecture).", "",
           "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown = {}
    for name, target in catalog.targets.items():
        same = ran.twin(catalog, name)
        st = target_status(catalog, name)
        status = "refused: " + st["refused"] if st["refused"] else ("built" if st["built"] else "missing")
        if same and not st["refused"]:
            status += f"; = {same} at this scale (the same jobs and evaluations)"
        outside = "—" if same else (f"{len(st['outside'])} of {st['with_interval']}: " +
                                    "; ".join(text for _, text in st["outside"][:SHOWN])) if st["outside"] else "—"
        missing = ", ".join(st["missing_runs"]) or "—"
        measured = f"{st['measured']}/{st['measurements']}" if st["measurements"] else "— (no evaluation)"
        values = (name, target.kind, status, measured, missing, outside)
        md.append("| " + " | ".join(values) + " |")
        if not same:
            shown[name] = st
    overstated = [] if ran.generated(catalog) else overstated_findings(shown)  # generated data: nothing to find
    if overstated:
        md += ["", "## Where the authors' evaluation overstates robustness", "",
               "Ours under the authors' own evaluation protocol against ours under the strong attacks, same model "
               f"(the {SHOWN} largest per table; each model and evaluation once, with every table that shows it):",
               ""]
        md += [f"- {text} — {', '.join(names)}" for text, names in overstated]
    failed = failed_checks(catalog)
    if failed:
        md += ["", "## Failed audit checks", "", "Every failed check of the audits written for this scale's models "
               "(`tradeoff audit`, docs/audit.md; their pages are in audit/):", ""]
        md += [f"- {model} / {name}: {text}" for model, name, text in failed]
    paths = catalog.layout.summary()
    atomic_write_text(paths["md"], "\n".join(md) + "\n")
    atomic_write_text(paths["html"], tables.html_page("tradeoff summary", _html(md)))
    return paths
