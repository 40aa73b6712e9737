"""The summary page: first the papers' claims and their verdicts at this scale (:mod:`tradeoff.report.claims`) and
what the scale changes; then every target, whether it is built, which runs and measurements it still misses (a
target that repeats another at this scale says so once, instead of repeating its numbers), the cells where the
paper's number lies outside our 95% interval (only where ours ran the paper's dataset and architecture: elsewhere
the comparison is noise), where the authors' own evaluation overstates robustness, and every failed check of the
audits written (tradeoff.audit). It reads whatever metrics and audits exist, so it can be made at any time; a
target whose files cannot be vouched for is listed as refused, with the reason."""

from __future__ import annotations

import html
from pathlib import Path

from ..atomic import atomic_write_text
from ..config import Catalog
from . import claims, ran, tables
from .build import target_outputs
from .records import ReportError, failed_checks

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
                    paper = table.paper.get((member["key"], c.key))
                    if paper is None or o.lo is None or o.same_as_strong:
                        continue
                    compared += 1
                    if o.lo <= paper[0] <= o.hi:
                        continue
                    gap = paper[0] - o.hi if paper[0] > o.hi else o.lo - paper[0]
                    where = "" if proto == tables.STRONG else f", {proto}"
                    found.append((gap, f"{member['label']} {c.label}{where}: paper {paper[0]:.2f} outside "
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
                key = (tuple(row.runs), c.attack, catalog.protocol_attack(table.name, c.attack, row.members[0]["run"]))
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
    if catalog.targets[name]["kind"] == "table" and len(missing_metrics) < len(pairs):
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


def build_summary(catalog: Catalog) -> dict[str, Path]:
    header = ("target", "kind", "status", "measured", "missing runs",
              "paper outside our 95% interval (farthest first)")
    found = claims.verdicts(catalog)
    mapped = sorted({f"{ran.DATASET_NAMES.get(s.dataset, s.dataset)}, "
                     f"{ran.ARCH_NAMES.get(s.arch, s.arch)}" for s in catalog.runs.values()
                     if (s.paper_dataset, s.paper_arch) != (s.dataset, s.arch)})
    md = [f"# Summary ({catalog.scale} scale)", ""] + (claims.markdown(found, catalog.scale) + [""] if found else [])
    if mapped:
        md += [SCALE_CHANGES.format(scale=catalog.scale, what="; ".join(mapped)), ""]
    md += ["## Targets", "",
           "Scale: results/" + catalog.scale + "/. A cell's interval is its 95% Wilson interval over the test "
           "examples; a paper number outside it differs from ours by more than the test set's sampling explains "
           "(counted only for rows that ran the paper's dataset and architecture).", "",
           "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows_html, shown = [], {}
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
        values = (name, target["kind"], status, measured, missing, outside)
        md.append("| " + " | ".join(values) + " |")
        rows_html.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in values) + "</tr>")
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
    verdicts_html = "".join(f"<li><b>{html.escape(f.verdict)}</b> — {html.escape(f.claim['paper'])}, "
                            f"{html.escape(f.claim['where'])}: “{html.escape(f.claim['says'])}” — "
                            f"{html.escape(f.because)}</li>" for f in found)
    body = (f"<h1>Summary ({html.escape(catalog.scale)} scale)</h1>"
            + (f"<h2>The papers' claims</h2><ul>{verdicts_html}</ul>" if found else "")
            + "<h2>Targets</h2><table class='tradeoff'><thead><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>" + "".join(rows_html)
            + "</tbody></table>"
            + ("<h2>Where the authors' evaluation overstates robustness</h2><ul>"
               + "".join(f"<li>{html.escape(text)} — {html.escape(', '.join(names))}</li>"
                         for text, names in overstated)
               + "</ul>" if overstated else "")
            + ("<h2>Failed audit checks</h2><ul>"
               + "".join(f"<li>{html.escape(f'{model} / {name}: {text}')}</li>" for model, name, text in failed)
               + "</ul>" if failed else ""))
    atomic_write_text(paths["html"], tables.html_page("tradeoff summary", body))
    return paths
