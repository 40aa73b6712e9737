"""The summary page: every target, whether it is built or which runs and measurements it still misses, and
its largest differences from the paper. It reads whatever metrics exist, so it can be made at any time."""

from __future__ import annotations

import html
from pathlib import Path

from ..checkpoint import atomic_write_text
from ..config import Catalog
from .build import target_outputs
from .tables import collect, html_page


def target_status(catalog: Catalog, name: str) -> dict:
    pairs = catalog.evaluations(name)
    missing_metrics = [(r, a) for r, a in pairs if not catalog.layout.metrics(r, a).exists()]
    runs = sorted({r for r, _ in pairs} | set(catalog.curve_runs(name)) | set(catalog.analysis_runs(name)))
    missing_runs = [r for r in runs if not catalog.layout.model(r).exists()]
    missing_analyses = [t for t in catalog.analysis_targets(name) if not catalog.layout.analysis(t).exists()]
    built = all(p.exists() for p in target_outputs(catalog, name)) and not missing_metrics and not missing_analyses
    diffs = []
    for table in catalog.table_targets(name) if catalog.targets[name]["kind"] == "table" else []:
        rows, columns, cells, labels = collect(catalog, table)
        diffs += [(abs(c.diff), labels[r], col, c) for (r, col), c in cells.items() if c.diff is not None]
    diffs.sort(key=lambda d: -d[0])
    return {"built": built, "measured": len(pairs) - len(missing_metrics), "measurements": len(pairs),
            "missing_runs": missing_runs, "largest": diffs[:3]}


def build_summary(catalog: Catalog) -> dict[str, Path]:
    md = [f"# Summary ({catalog.scale} scale)", "",
          "| target | kind | status | measured | missing runs | largest differences (ours − paper) |",
          "|---|---|---|---|---|---|"]
    rows_html = []
    for name, target in catalog.targets.items():
        st = target_status(catalog, name)
        status = "built" if st["built"] else "missing"
        largest = "; ".join(f"{label} {col.upper()}: {c.ours:.1f} vs {c.paper:.1f} ({c.diff:+.1f})"
                            for _, label, col, c in st["largest"]) or "—"
        missing = ", ".join(st["missing_runs"]) or "—"
        md.append(f"| {name} | {target['kind']} | {status} | {st['measured']}/{st['measurements']} | {missing} | {largest} |")
        rows_html.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in
                                          (name, target["kind"], status, f"{st['measured']}/{st['measurements']}",
                                           missing, largest)) + "</tr>")
    paths = catalog.layout.summary()
    atomic_write_text(paths["md"], "\n".join(md) + "\n")
    body = (f"<h1>Summary ({html.escape(catalog.scale)} scale)</h1><table class='tradeoff'><thead><tr>"
            + "".join(f"<th>{h}</th>" for h in ("target", "kind", "status", "measured", "missing runs",
                                                  "largest differences (ours − paper)"))
            + "</tr></thead><tbody>" + "".join(rows_html) + "</tbody></table>")
    atomic_write_text(paths["html"], html_page("tradeoff summary", body))
    return paths
