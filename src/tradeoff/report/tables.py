"""Tables as Markdown, CSV and LaTeX, from metrics files only, with the paper's number beside ours.

Layout follows the papers: one row per method, one column per measurement, the top two of our numbers per
column in bold. Every cell shows ours, the paper's, and the difference (ours - paper), in percent.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..checkpoint import atomic_write_text
from ..config import CORRUPTIONS_TYPE, ROOT, Catalog

REFERENCE_DIR = ROOT / "config" / "reference"


@dataclass
class Cell:
    ours: float | None    # percent (minutes for train:minutes); the mean over seeds for a run with `seeds`
    paper: float | None   # percent
    paper_std: float | None
    ours_std: float | None = None  # standard deviation over seeds (ddof 0, as numpy's default), if any

    @property
    def diff(self) -> float | None:
        return None if self.ours is None or self.paper is None else self.ours - self.paper


def load_reference(name: str, directory: Path = REFERENCE_DIR) -> dict[tuple[str, str], tuple[float, float | None, str]]:
    """(row, column) -> (value in percent, std in percent, label). CA-AT prints accuracies as fractions; a
    file whose values are all at most 1 is read as fractions and scaled to percent."""
    path = directory / f"{name}.csv"
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    scale = 100.0 if rows and all(float(r["value"]) <= 1.0 for r in rows) else 1.0
    return {(r["row"], r["column"]): (float(r["value"]) * scale,
                                      float(r["std"]) * scale if r["std"] else None, r["label"]) for r in rows}


def _one_metric(catalog: Catalog, run_id: str, attack: str) -> float | None:
    if attack == "train:minutes":
        path = catalog.layout.curves(catalog.train_id[run_id])
        if not path.exists():
            return None
        with open(path, newline="") as f:
            return sum(float(r["seconds"]) for r in csv.DictReader(f)) / 60.0
    path = catalog.layout.metrics(catalog.train_id[run_id], attack)
    if not path.exists():
        return None
    return 100.0 * json.loads(path.read_text())["accuracy"]


def metric_stats(catalog: Catalog, run_id: str, attack: str) -> tuple[float | None, float | None]:
    """Mean and standard deviation (None for one seed) of a measurement over a run's seeds; (None, None)
    until every seed is measured."""
    values = [_one_metric(catalog, r, attack) for r in catalog.row_runs(run_id)]
    if not values or any(v is None for v in values):
        return None, None
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if len(values) > 1 else None
    return mean, std


def read_metric(catalog: Catalog, run_id: str, attack: str) -> float | None:
    """A measurement of a run in percent (its mean over the run's seeds), or None if not measured yet."""
    return metric_stats(catalog, run_id, attack)[0]


def collect(catalog: Catalog, name: str) -> tuple[list[str], list[str], dict[tuple[str, str], Cell], dict[str, str]]:
    target = catalog.targets[name]
    reference = load_reference(target["reference"])
    rows = [r["key"] for r in target["rows"]]
    columns = list(target["columns"])
    labels = {}
    cells: dict[tuple[str, str], Cell] = {}
    for row in target["rows"]:
        key = row["key"]
        labels[key] = next((lab for (r, _), (_, _, lab) in reference.items() if r == key), key)
        for column, attack in target["columns"].items():
            value, std, _ = reference.get((key, column), (None, None, None))
            if attack == "mean":
                continue
            cells[(key, column)] = Cell(*metric_stats(catalog, row["run"], attack)[:1], value, std,
                                        metric_stats(catalog, row["run"], attack)[1])
        for column, attack in target["columns"].items():
            if attack == "mean":  # the mean of the row's robust columns (all but the clean and time ones)
                value, std, _ = reference.get((key, column), (None, None, None))
                others = [cells[(key, c)].ours for c, a in target["columns"].items()
                          if a not in ("mean", "train:minutes") and catalog.attacks.get(a, {}).get("type") != "clean"]
                ours = None if not others or None in others else sum(others) / len(others)
                cells[(key, column)] = Cell(ours, value, std)
    return rows, columns, cells, labels


def _top_two(rows: list[str], column: str, cells: dict, columns: dict | None = None) -> set[str]:
    if columns is not None and columns.get(column) == "train:minutes":
        return set()  # a time, not an accuracy: nothing to mark
    values = sorted({cells[(r, column)].ours for r in rows if cells[(r, column)].ours is not None}, reverse=True)
    keep = set(values[:2])
    return {r for r in rows if cells[(r, column)].ours in keep}


def _ours(cell: Cell, is_top: bool, bold: str) -> str:
    """Our number, wrapped in the format's bold markup (``bold`` has one ``{}``) when it is a top-two."""
    text = _fmt(cell.ours) + (f"±{cell.ours_std:.2f}" if cell.ours_std is not None else "")
    return bold.format(text) if is_top and cell.ours is not None else text


def _fmt(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def notes(catalog: Catalog, name: str) -> list[str]:
    target = catalog.targets[name]
    first_run = target["rows"][0]["run"]
    out = [f"Scale: **{catalog.scale}**. Cells: ours / paper (ours − paper), accuracy in %. "
           "Top two of ours per column in bold. — : not measured (yet) or not in the paper."]
    seeds = {len(catalog.row_runs(r["run"])) for r in target["rows"]} - {1}
    if seeds:
        out.append(f"Ours: mean ± standard deviation over {'/'.join(map(str, sorted(seeds)))} seeds (ddof 0).")
    for column, attack in target["columns"].items():
        if attack in ("train:minutes", "mean"):
            out.append(f"- {column}: " + ("training time in minutes (sum of the epochs' wall-clock seconds on "
                                          "the machine that trained it, the per-epoch selection evaluation "
                                          "included and Generalist's learner tracking not; not a percentage)"
                                          if attack != "mean"
                                          else "mean of the row's robust columns"))
            continue
        spec = catalog.attack_for(attack, first_run)
        if spec["type"] == "clean":
            desc = "clean test accuracy"
        elif spec["type"] == CORRUPTIONS_TYPE:
            from ..data import corruption_dataset

            count = len(corruption_dataset(spec["dataset"]).corruptions)
            desc = (f"NROB on {spec['dataset']}: the mean over its {count} corruptions of the mean accuracy over 5 "
                    "severities (Hendrycks & Dietterich)")
        else:
            params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in spec.items() if k not in ("type", "norm", "eps"))
            desc = f"{spec['type']} {spec['norm']} eps={spec['eps']:.4g}" + (f" ({params})" if params else "")
        out.append(f"- {column}: {desc}")
    return out


def render_markdown(catalog: Catalog, name: str) -> str:
    rows, columns, cells, labels = collect(catalog, name)
    bold = {c: _top_two(rows, c, cells, catalog.targets[name]['columns']) for c in columns}
    lines = [f"# {catalog.targets[name].get('title', name)}", "",
             "| Method | " + " | ".join(c.upper() for c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for r in rows:
        parts = []
        for c in columns:
            cell = cells[(r, c)]
            ours = _ours(cell, r in bold[c], "**{}**")
            paper = _fmt(cell.paper) + (f"±{cell.paper_std:.2f}" if cell.paper_std is not None else "")
            parts.append(f"{ours} / {paper} ({_fmt(cell.diff, signed=True)})")
        lines.append(f"| {labels[r]} | " + " | ".join(parts) + " |")
    return "\n".join(lines + [""] + notes(catalog, name)) + "\n"


def render_csv(catalog: Catalog, name: str) -> str:
    rows, columns, cells, labels = collect(catalog, name)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["target", "row", "label", "column", "ours", "paper", "paper_std", "diff", "scale", "ours_std"])
    for r in rows:
        for c in columns:
            cell = cells[(r, c)]
            writer.writerow([name, r, labels[r], c, *("" if v is None else f"{v:.4f}"
                                                      for v in (cell.ours, cell.paper, cell.paper_std, cell.diff)),
                             catalog.scale, "" if cell.ours_std is None else f"{cell.ours_std:.4f}"])
    return buffer.getvalue()


def _tex_escape(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"),
                 ("β", r"$\beta$"), ("λ", r"$\lambda$"), ("γ", r"$\gamma$")):
        text = text.replace(a, b)
    return text


def render_latex(catalog: Catalog, name: str) -> str:
    rows, columns, cells, labels = collect(catalog, name)
    bold = {c: _top_two(rows, c, cells, catalog.targets[name]['columns']) for c in columns}
    title = _tex_escape(catalog.targets[name].get("title", name))
    out = [r"\begin{table}[t]", r"\centering", rf"\caption{{{title} (scale: {catalog.scale}). "
           r"Ours (paper); top two of ours in bold.}}", r"\begin{tabular}{l" + "c" * len(columns) + "}",
           r"\toprule", "Method & " + " & ".join(_tex_escape(c.upper()) for c in columns) + r" \\", r"\midrule"]
    for r in rows:
        parts = []
        for c in columns:
            cell = cells[(r, c)]
            ours = _ours(cell, r in bold[c], r"\textbf{{{}}}").replace("—", "--")
            parts.append(f"{ours} ({_fmt(cell.paper).replace('—', '--')})")
        out.append(_tex_escape(labels[r]) + " & " + " & ".join(parts) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out) + "\n"


def render_html(catalog: Catalog, name: str) -> str:
    """An HTML fragment (for the Snakemake report and the summary page)."""
    import html

    rows, columns, cells, labels = collect(catalog, name)
    bold = {c: _top_two(rows, c, cells, catalog.targets[name]['columns']) for c in columns}
    out = [f"<h2>{html.escape(catalog.targets[name].get('title', name))}</h2>", "<table class='tradeoff'>",
           "<thead><tr><th>Method</th>" + "".join(f"<th>{html.escape(c.upper())}</th>" for c in columns) + "</tr></thead><tbody>"]
    for r in rows:
        tds = []
        for c in columns:
            cell = cells[(r, c)]
            ours = _ours(cell, r in bold[c], "<b>{}</b>")
            tds.append(f"<td>{ours}<br><small>paper {_fmt(cell.paper)} ({_fmt(cell.diff, signed=True)})</small></td>")
        out.append(f"<tr><th>{html.escape(labels[r])}</th>{''.join(tds)}</tr>")
    notes_html = "".join(f"<li>{html.escape(n.lstrip('- ').replace('**', ''))}</li>" for n in notes(catalog, name))
    out += ["</tbody></table>", f"<ul class='notes'>{notes_html}</ul>"]
    return "\n".join(out) + "\n"


HTML_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table.tradeoff {{ border-collapse: collapse; font-size: 0.9em; }}
table.tradeoff th, table.tradeoff td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: center; }}
table.tradeoff small {{ color: #666; }}
ul.notes {{ color: #444; font-size: 0.85em; }}
</style></head><body>
{body}
</body></html>
"""


def html_page(title: str, body: str) -> str:
    import html

    return HTML_PAGE.format(title=html.escape(title), body=body)


RENDERERS = {"md": render_markdown, "csv": render_csv, "tex": render_latex, "html": render_html}
