"""Building a target of the catalog: a table, a figure, or a group of them. What each writes is decided here
once, for Snakemake (outputs), DVC (outs) and the CLI."""

from __future__ import annotations

import html
import os
from pathlib import Path

from tradeoff.storage.atomic import atomic_write_text
from tradeoff.config import Catalog
from tradeoff.report import what_ran as ran, tables


def target_inputs(catalog: Catalog, name: str) -> list[Path]:
    """Every file a target reads (Snakemake's inputs and DVC's deps of its report job): the metrics files of its
    evaluations (and their predictions, for a table's intervals and tests and a per-class figure), the curves and
    analyses it draws, its paper numbers, a table's rows' audits that the build writes, or a group's members'
    outputs."""
    target = catalog.targets[name]
    if target.kind == "group":
        return [p for member in target.targets for p in target_outputs(catalog, member)]
    pairs = catalog.evaluations(name)
    files = [catalog.metrics_file(run, attack) for run, attack in pairs]
    if target.kind == "table" or target.plot == "per_class":
        files += [catalog.predictions_file(run, attack) for run, attack in pairs]
    files += [catalog.layout.curves(run) for run in catalog.curve_train_ids(name)]
    files += [catalog.layout.analysis(t) for t in catalog.analysis_targets(name)]
    if target.reference:
        files.append(Path(catalog.reference_dir) / f"{target.reference}.csv")
    if target.kind == "table":  # the audits the build writes of its rows' models (`audit.build`): its marks read them
        built = set(catalog.built_audits())
        files += [catalog.layout.audit(m)["json"] for m in catalog.table_models(name) if m in built]
    return list(dict.fromkeys(files))


def target_caption(catalog: Catalog, name: str) -> str:
    """The caption of a target in the Snakemake report: its title (with what ran at this scale), what it shows and
    how to read it."""
    target = catalog.targets[name]
    title = ran.title(catalog, name)
    if target.kind == "figure":
        return (f"{title}. Built from the metrics, curves or analysis files of its runs at the {catalog.scale} scale; "
                "the footer says what its points cannot show at this scale (points of one training job, columns "
                "under which no two points differ significantly) and every point marked ‡ (selected before its "
                "method's mechanism acts).")
    if ran.generated(catalog):
        return (f"{title}. Ours with its 95% Wilson interval over the test examples ({catalog.scale} scale: generated "
                "data, no bold and no dagger), the paper's number on its own line. The notes under the table name "
                "every attack's settings and every row's training job.")
    return (f"{title}. Ours with its 95% Wilson interval over the test examples ({catalog.scale} scale), the "
            "paper's number on its own line; bold: the best and every row not significantly worse (exact McNemar "
            "test on the per-example predictions); dagger: differs significantly from the paper's method after "
            "Holm's correction over the column's comparisons; ‡: the row's model was selected before its method's "
            "mechanism acts. The notes under the table name every attack's settings and every row's training job "
            "and selected epoch.")


def target_outputs(catalog: Catalog, name: str) -> list[Path]:
    kind = catalog.targets[name].kind
    if kind == "figure":
        return list(catalog.layout.figures(name).values())
    paths = catalog.layout.tables(name)
    if kind == "group" and not catalog.table_targets(name):
        return [paths["md"], paths["html"]]
    return list(paths.values())


def build_target(catalog: Catalog, name: str) -> list[Path]:
    """Write a target's files. A group's files hold its member tables one after the other, and list its figures.
    Every table is read and checked before any file is written (tradeoff.report.records.ReportError otherwise)."""
    target = catalog.targets[name]
    if target.kind == "figure":
        from tradeoff.report.figures import build_figure

        return list(build_figure(catalog, name).values())
    rendered = [tables.render(catalog, member) for member in catalog.table_targets(name)]
    figures = [t for t in catalog.leaf_targets(name) if catalog.targets[t].kind == "figure"]
    paths = catalog.layout.tables(name)
    for kind in ("md", "csv", "tex", "html"):
        if kind not in ("md", "html") and not rendered:
            continue
        parts = [texts[kind] for texts in rendered]
        if kind == "csv":  # one header for the whole group
            parts = parts[:1] + [p.split("\n", 1)[1] for p in parts[1:]]
        if kind == "md" and figures:
            parts.append("## Figures\n\n" + "\n".join(
                f"- {ran.title(catalog, f)}: `{catalog.layout.figures(f)['png']}`" for f in figures) + "\n")
        if kind == "html" and figures:
            here = paths["html"].parent
            parts.append("".join(f"<h2>{html.escape(ran.title(catalog, f))}</h2><img src='"
                                 f"{os.path.relpath(catalog.layout.figures(f)['png'], here)}' alt='{f}' "
                                 "style='max-width: 100%'>" for f in figures))
        text = ("" if kind == "csv" else "\n").join(parts)
        if kind == "html":
            text = tables.html_page(ran.title(catalog, name), text)
        atomic_write_text(paths[kind], text)
    return target_outputs(catalog, name)
