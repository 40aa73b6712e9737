"""Building a target of the catalog: a table, a figure, or a group of them. What each writes is decided here
once, for Snakemake (outputs), DVC (outs) and the CLI.

A report job is content-addressed: its stamp (``results/<scale>/work/report/<name>.json``) records the digest of
what it was built from (every file it reads, by content, absent ones as absent; the target's settings; the resolved
configuration; this package's source and the drawing libraries' versions) and the hashes of the files it wrote. A
job whose digest is unchanged and whose outputs are intact is :func:`fresh`: ``tradeoff report`` skips it."""

from __future__ import annotations

import functools
import hashlib
import html
import importlib.metadata
import json
import os
from pathlib import Path

from tradeoff.config import Catalog
from tradeoff.report import claims, table_model, table_render, tables
from tradeoff.report import what_ran as ran
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.storage.layout import Layout


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


def claims_inputs(catalog: Catalog) -> list[Path]:
    """Every file the claims' forest plot reads: the claims, and the inputs of every table or figure a claim's test
    (or premise) names in this configuration."""
    names = [n for c in claims.load_claims(catalog) for part in (c.get("test"), c.get("premise")) if part
             for n in (part["target"] if isinstance(part["target"], list) else [part["target"]])]
    files = [p for n in dict.fromkeys(names) if n in catalog.targets for p in target_inputs(catalog, n)]
    path = claims.claims_file(catalog)
    return list(dict.fromkeys(files + ([path] if path.exists() else [])))


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


def build_target(catalog: Catalog, name: str, built: dict[str, table_model.Table] | None = None) -> list[Path]:
    """Write a target's files. A group's files hold its member tables one after the other, and list its figures.
    Every table is read and checked before any file is written (tradeoff.report.records.ReportError otherwise).
    ``built``: where to keep the tables read (by name), for a caller that reads them again (the summary)."""
    target = catalog.targets[name]
    if target.kind == "figure":
        from tradeoff.report.figures import build_figure

        return list(build_figure(catalog, name).values())
    read = [tables.build(catalog, member) for member in catalog.table_targets(name)]
    if built is not None:
        built.update((t.name, t) for t in read)
    rendered = [table_render.render_all(table, catalog) for table in read]
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
            text = table_render.html_page(ran.title(catalog, name), text)
        atomic_write_text(paths[kind], text)
    return target_outputs(catalog, name)


# ------------------------------------------------------------------------------------------ fresh or not

STAMP_FORMAT = "tradeoff-report-stamp/1"
LIBRARIES = ("matplotlib", "numpy", "scipy", "statsmodels", "pandas")  # what draws and computes a report's bytes


@functools.cache
def code_digest() -> str:
    """This package's source (every module, so a change anywhere rebuilds: the conservative side) and the versions
    of the libraries that compute and draw a report."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for library in LIBRARIES:
        try:
            digest.update(f"{library}={importlib.metadata.version(library)}\0".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{library}=none\0".encode())
    return digest.hexdigest()


def _config_digest(catalog: Catalog) -> str:
    return hashlib.sha256(json.dumps(catalog.config, sort_keys=True, default=str).encode()).hexdigest()


def _file_digests(path: Path) -> list[tuple[str, str]]:
    """(path, content hash) of a file, of every file under a folder, or (path, "absent")."""
    if path.is_dir():
        return [entry for sub in sorted(path.rglob("*")) if sub.is_file() for entry in _file_digests(sub)]
    try:
        return [(str(path), hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest())]
    except FileNotFoundError:
        return [(str(path), "absent")]


SUMMARY, CLAIMS = "@summary", "@claims"  # the stamps of the summary job and of the claims' forest plot


def read_files(catalog: Catalog, name: str) -> list[Path]:
    """Every file a report job may read. A target's: its inputs (target_inputs; a group's, its members'), and of
    each training job it shows its model's sidecar (training minutes, devices), its curves folder (precision) and
    its audit (overstated columns), an external model's checkpoint (its digest vouches for the row), and the papers'
    flags. The claims' plot (CLAIMS): claims_inputs; the
    summary (SUMMARY): every results folder a report reads, each model, the papers' numbers and the claims."""
    layout, reference = catalog.layout, Path(catalog.reference_dir)
    if name == CLAIMS:
        return claims_inputs(catalog)
    if name == SUMMARY:
        jobs = sorted(set(catalog.train_id.values()))
        return ([layout.folder(kind) for kind in ("metrics", "predictions", "curves", "analysis", "audit")]
                + [layout.model(j) for j in jobs] + [Layout.sidecar(layout.model(j)) for j in jobs]
                + _checkpoints(catalog, sorted(catalog.externals)) + [reference, reference.parent / "claims.yaml"])
    if catalog.targets[name].kind == "group":  # it renders its members from their inputs, not from their files
        return list(dict.fromkeys(p for leaf in catalog.leaf_targets(name) for p in read_files(catalog, leaf)))
    runs = {r for row in catalog.targets[name].rows for r in catalog.row_runs(row.run)}
    jobs = sorted({catalog.train_id.get(r, r) for r in runs} | set(catalog.curve_train_ids(name)))
    extra = [p for j in jobs for p in (Layout.sidecar(layout.model(j)), layout.curves(j), layout.audit(j)["json"])]
    return list(dict.fromkeys([*target_inputs(catalog, name), *extra, *_checkpoints(catalog, jobs),
                               reference / "flags.yaml"]))


def _checkpoints(catalog: Catalog, models) -> list[Path]:
    """The checkpoint files of the external models among ``models``: the report vouches for an external row by its
    file's digest, so a replaced file must make the report run again (and refuse the metrics it measured)."""
    return [catalog.model_file(m) for m in models if catalog.is_external(m)]


def digest(catalog: Catalog, name: str) -> str:
    """What a report job is built from (a target's name, SUMMARY or CLAIMS): the digest that decides whether it is
    fresh."""
    h = hashlib.sha256(f"{STAMP_FORMAT}\0{code_digest()}\0{_config_digest(catalog)}\0".encode())
    if name in catalog.targets:
        h.update(json.dumps(catalog.report_settings(name), sort_keys=True, default=str).encode())
    for path, content in (e for p in read_files(catalog, name) for e in _file_digests(p)):
        h.update(f"{path}\0{content}\0".encode())
    return h.hexdigest()


def fresh(catalog: Catalog, name: str, outputs: list[Path], found: str) -> bool:
    """Whether a job whose inputs digest to ``found`` need not run: its stamp records that digest, and every one of
    its outputs still has the content it wrote."""
    try:
        stamp = json.loads(catalog.layout.report_stamp(name).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(stamp, dict) or stamp.get("format") != STAMP_FORMAT or stamp.get("digest") != found:
        return False
    wrote = stamp.get("outputs")
    return isinstance(wrote, dict) and set(wrote) == {str(p) for p in outputs} and all(
        dict(_file_digests(p)).get(str(p)) == wrote[str(p)] for p in outputs)


def record(catalog: Catalog, name: str, outputs: list[Path], found: str) -> None:
    """Stamp a job that has just written ``outputs`` from inputs that digest to ``found``."""
    wrote = {str(p): dict(_file_digests(p))[str(p)] for p in outputs}
    atomic_write_text(catalog.layout.report_stamp(name), json.dumps({"format": STAMP_FORMAT, "digest": found,
                                                              "outputs": wrote}, indent=1) + "\n")
