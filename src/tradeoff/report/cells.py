"""Every cell of every table in one tidy file: ``results/<scale>/cells.csv`` (and ``cells.parquet`` where pandas has
a Parquet engine), one line per (target, row, column, protocol, seed), for a researcher's own plot or test
(``tradeoff.results.load(scale)`` reads it as a pandas DataFrame).

Each line says where its number comes from and what it is: the run of that seed and its training job, the method and
its parameters, the dataset and architecture that ran and the paper's, the evaluation job with its attack's type,
norm, budget at this scale and as the paper writes it, and its other settings; the seed's accuracy (minutes for a
training time) with its 95% Wilson interval, its test examples and how many were right, and its selected epoch; the
row's mean and standard deviation over seeds (what the table prints), the paper's number, the exact McNemar p-value
against the table's compare row, raw and Holm-adjusted; and every flag of the cell (:data:`FLAGS`: bold, †, ‡, ...).
A new flag of a cell is one more entry of :data:`FLAGS`, so one more column. The numbers are the tables' own
(:func:`tradeoff.report.tables.build`): the file and the tables can never disagree.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
from collections.abc import Callable
from pathlib import Path

from tradeoff.config import PSEUDO_COLUMNS, Catalog, parse_budget
from tradeoff.report import records, stats, table_model
from tradeoff.report import what_ran as ran
from tradeoff.storage.atomic import atomic_path, atomic_write_text

# A flag of a cell: (table, row, column, protocol) -> bool. One entry here is one column of the file (True/False,
# which pandas reads as booleans).
FLAGS: dict[str, Callable[[table_model.Table, table_model.Row, table_model.Column, str], bool]] = {
    "bold": lambda t, row, c, proto: (proto, row.key, c.key) in t.bold,
    "dagger": lambda t, row, c, proto: (t.adjusted.get((proto, row.key, c.key)) or 1.0) < stats.ALPHA,
    "early": lambda t, row, c, proto: table_model.before_mechanism(t, row) is not None,  # ‡
}

FIELDS = ("scale", "target", "title", "row", "label", "column", "column_label", "protocol", "seed", "seeds", "run",
          "train_job", "method", "method_params", "dataset", "arch", "paper_dataset", "paper_arch", "attack",
          "attack_type", "norm", "eps", "eps_paper", "eps_paper_text", "attack_params", "kind", "accuracy",
          "ci_low", "ci_high", "examples", "correct", "selected_epoch", "mean", "std", "paper", "paper_std",
          "p_vs_compare", "p_holm", *FLAGS, "metrics")


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str) if value else ""


def _attack_fields(catalog: Catalog, attack: str | None, run: str) -> dict:
    """The evaluation's settings: its type, norm, budget here and as the paper writes it, the rest as JSON."""
    if attack is None or attack in PSEUDO_COLUMNS:
        return {"attack": attack or ""}
    spec = catalog.attack_for(attack, run)
    written = ran._written_budget(catalog, attack, run) if not (spec.clean or spec.corruptions) else None
    rest = {k: v for k, v in spec.as_dict().items() if k not in ("type", "norm", "eps")}
    return {"attack": attack, "attack_type": spec.type, "norm": "" if spec.norm is None else str(spec.norm),
            "eps": spec.eps if isinstance(spec.eps, (int, float)) else "",
            "eps_paper_text": written or "", "eps_paper": parse_budget(written, "eps") if written else "",
            "attack_params": _json(rest)}


def _seed_value(catalog: Catalog, o: table_model.Ours, run: str, attack: str | None, i: int) -> dict:
    """One seed's own number: its accuracy with its Wilson interval (from its per-example outcomes), its NROB, or
    its training minutes."""
    if o.kind == "accuracy" and i < len(o.bits):
        bits = o.bits[i]
        correct, n = bits.count("1"), len(bits)
        lo, hi = stats.wilson(correct, n)
        return {"accuracy": 100.0 * correct / n, "ci_low": 100.0 * lo, "ci_high": 100.0 * hi, "examples": n,
                "correct": correct}
    if o.kind == "nrob" and attack is not None and o.value is not None:
        found = records.measurement(catalog, run, attack)
        return {"accuracy": 100.0 * found.accuracy, "examples": found.examples} if found else {}
    if o.kind == "minutes" and o.value is not None:
        return {"accuracy": records.training_minutes(catalog, run)}
    return {}


def table_cells(catalog: Catalog, table: table_model.Table) -> list[dict]:
    """The lines of one table: per cell of ours (a protocol that runs the column's own attack adds none), per member
    row (rows that are one training job are one line each) and per seed (a mean column: one line, no seed)."""
    out = []
    for row in table.rows:
        spec = catalog.model_spec(row.runs[0])
        for c in table.columns:
            for proto, _ in table.protocols:
                o = table.ours[(proto, row.key, c.key)]
                if o.same_as_strong:
                    continue
                attack = (c.attack if proto == table_model.STRONG or c.attack in PSEUDO_COLUMNS
                          else catalog.protocol_attack(table.name, c.attack, row.members[0].run))
                seeds = catalog.row_runs(row.members[0].run)
                flags = {name: bool(flag(table, row, c, proto)) for name, flag in FLAGS.items()}
                p, adjusted = table.pvalues.get((proto, row.key, c.key)), table.adjusted.get((proto, row.key, c.key))
                for member in row.members:
                    paper = table.paper.get((member.key, c.key), (None, None))
                    common = {"scale": table.scale, "target": table.name, "title": table.title, "row": member.key,
                              "label": member.label, "column": c.key, "column_label": c.label, "protocol": proto,
                              "seeds": len(seeds), "dataset": spec.dataset, "arch": spec.arch,
                              "paper_dataset": spec.paper_dataset, "paper_arch": spec.paper_arch, "kind": o.kind,
                              "mean": o.value, "std": o.std, "paper": paper[0], "paper_std": paper[1],
                              "p_vs_compare": p, "p_holm": adjusted, **flags}
                    for i, run in enumerate(seeds if o.kind != "mean" else [None]):
                        line = dict(common)
                        if run is not None:
                            job = catalog.train_id[run]
                            method = getattr(catalog.model_spec(run), "method", None)
                            params = method.as_dict() if method is not None else {}
                            line.update({"seed": i, "run": run, "train_job": job,
                                         "method": params.pop("name", "") or "external", "method_params": _json(params),
                                         **_attack_fields(catalog, attack, run),
                                         **_seed_value(catalog, o, run, attack, i),
                                         "selected_epoch": o.selected[i] if i < len(o.selected) else None,
                                         "metrics": o.files[i] if i < len(o.files) else ""})
                        else:
                            line["attack"] = attack
                        out.append(line)
    return out


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def render_csv(lines: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FIELDS)
    for line in lines:
        writer.writerow([_text(line.get(f)) for f in FIELDS])
    return buffer.getvalue()


def parquet_engine() -> str | None:
    """pandas' Parquet engine where one is installed (pyarrow, fastparquet), else None: the CSV alone is written."""
    return next((e for e in ("pyarrow", "fastparquet") if importlib.util.find_spec(e) is not None), None)


def write_cells(catalog: Catalog, lines: list[dict]) -> list[Path]:
    """Write the tidy file (and its Parquet copy where an engine is installed; a stale copy is removed where none
    is, so the two never disagree). Returns what was written."""
    paths = catalog.layout.cells()
    atomic_write_text(paths["csv"], render_csv(lines))
    engine = parquet_engine()
    if engine is None:
        paths["parquet"].unlink(missing_ok=True)
        return [paths["csv"]]
    import pandas as pd

    frame = pd.read_csv(paths["csv"], keep_default_na=True)
    with atomic_path(paths["parquet"]) as tmp:
        frame.to_parquet(tmp, engine=engine, index=False)
    return [paths["csv"], paths["parquet"]]
