"""A table as data: its rows, columns and cells (:class:`Table`, :class:`Ours`), the marks a cell may carry, our number
of a cell measured from the metrics files (:func:`measure`, vouched for by :mod:`tradeoff.report.records`, with its
interval or its seeds' spread), the paper's numbers (:func:`load_reference`), the rows that are one training job
merged into one, and the comparisons that mark the cells (bold and the dagger: exact McNemar, Holm over a column).
:func:`read` reads one table, all but its notes (:mod:`tradeoff.report.table_notes`); the formats are
:mod:`tradeoff.report.table_render`'s and :func:`tradeoff.report.tables.build` puts the three together."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from tradeoff.config import PSEUDO_COLUMNS, Catalog, load_yaml, split_budget
from tradeoff.core.targets import Row as TargetRow
from tradeoff.report import stats
from tradeoff.report import what_ran as ran
from tradeoff.report.records import (
    AuditFindings,
    Measurement,
    ReportError,
    attack_failure,
    audit_findings,
    measurement,
    training_minutes,
)

STRONG = "strong"
MARK = "†"  # differs significantly from the table's compare row
EARLY = "‡"  # selected before its method's mechanism acts
FAILED = "⊘"  # the attack failed: a number that a known bound rules out, or survivors crowded into one class
OVERSTATES = "↑"  # a written audit finds the column above the model's best known robust accuracy


@dataclass
class Ours:
    """Our number in one cell (percent; minutes for a training time)."""

    value: float | None
    kind: str                          # accuracy | nrob | minutes | mean
    std: float | None = None           # over seeds (ddof 0), with more than one seed
    lo: float | None = None            # 95% Wilson interval, one seed
    hi: float | None = None
    examples: int | None = None
    bits: list[str] = field(default_factory=list)   # per seed: per-example correctness (accuracies only)
    files: list[str] = field(default_factory=list)
    same_as_strong: bool = False       # the protocol runs the column's own attack: nothing new to show
    selected: list[int | None] = field(default_factory=list)   # per seed: the epoch its model was selected at
    mechanism: dict | None = None      # when its method's mechanism first shaped the model (tradeoff.methods)
    #: why the attack failed here (records.attack_failure, of some seed's measurement), or None: the cell is marked
    #: (FAILED), never bold nor compared, and a claim that would use it is untestable
    failed: str | None = None
    #: points above the best known robust accuracy of its model that a written audit found (OVERSTATES), or None
    overstates: float | None = None
    best_known: float | None = None    # that best known robust accuracy, percent


@dataclass
class Row:
    key: str
    label: str
    runs: list[str]                    # training job per seed
    members: list[TargetRow]           # the catalog rows merged into this one (one unless degenerate), as labelled
    group: str                         # the paper's dataset and architecture: rows are compared within a group


@dataclass
class Column:
    key: str
    attack: str
    label: str


@dataclass
class Table:
    name: str
    title: str
    scale: str
    rows: list[Row]
    columns: list[Column]
    protocols: list[tuple[str, str]]   # (name, what it is): the strong attacks first, then the table's protocol
    ours: dict[tuple[str, str, str], Ours]          # (protocol, row key, column key)
    paper: dict[tuple[str, str], tuple[float, float | None]]   # (member row key, column key) -> value, std in %
    compare: dict[str, str]            # group -> row key of the paper's method in it (after merging)
    pvalues: dict[tuple[str, str, str], float]      # against the compare row
    bold: set[tuple[str, str, str]]
    notes: list[str]
    adjusted: dict[tuple[str, str, str], float] = field(default_factory=dict)  # pvalues, Holm over the column
    generated: bool = False            # generated data (the rehearsal scale): no bold, no dagger (ran.generated)
    legend: list[str] = field(default_factory=list)  # the notes that define what it shows (a LaTeX caption)

    def paper_rows(self, row: Row) -> list[TargetRow]:
        """The members of a row that have paper numbers (each gets its own paper line)."""
        return [m for m in row.members if any((m.key, c.key) in self.paper for c in self.columns)]


# ------------------------------------------------------------------------------------------------- reading


def load_reference(catalog: Catalog, name: str) -> dict[tuple[str, str], tuple[float, float | None, str]]:
    """(row, column) -> (value in percent, std in percent, label). CA-AT prints accuracies as fractions; a file whose
    values are all at most 1 is read as fractions and scaled to percent."""
    path = Path(catalog.reference_dir) / f"{name}.csv"
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    scale = 100.0 if rows and all(float(r["value"]) <= 1.0 for r in rows) else 1.0
    return {(r["row"], r["column"]): (float(r["value"]) * scale,
                                      float(r["std"]) * scale if r["std"] else None, r["label"]) for r in rows}


def paper_flags(catalog: Catalog, name: str) -> list[str]:
    """What the paper's own numbers of a reference file contradict (``reference/flags.yaml``), said under its table."""
    path = Path(catalog.reference_dir) / "flags.yaml"
    return [" ".join(str(text).split()) for text in ((load_yaml(path) or {}).get(name) or [])] if path.exists() else []


def cell_kind(catalog: Catalog, attack: str) -> str:
    """What a cell under a column's attack holds: accuracy, nrob (a corruption set's), minutes or mean."""
    if attack == "train:minutes":
        return "minutes"
    if attack == "mean":
        return "mean"
    base = split_budget(attack)[0]
    return "nrob" if base in catalog.attacks and catalog.attacks[base].corruptions else "accuracy"


def measure(catalog: Catalog, run_id: str, attack: str) -> Ours:
    """Our number of a row (a run, averaged over its seeds) under one evaluation; value None until every seed is
    measured. ReportError for a file that cannot be vouched for."""
    kind = cell_kind(catalog, attack)
    runs = catalog.row_runs(run_id)
    if kind == "minutes":
        values = [training_minutes(catalog, r) for r in runs]
        found: list[Measurement] = []
    else:
        found = [m for m in (measurement(catalog, r, attack) for r in runs) if m is not None]
        values = [100.0 * m.accuracy for m in found] if len(found) == len(runs) else [None]
    if not values or any(v is None for v in values):
        return Ours(None, kind)
    mean = sum(values) / len(values)
    failures = [f for f in map(attack_failure, found) if f]
    out = Ours(mean, kind, files=[str(m.metrics_path) for m in found],
               selected=[m.record.get("selected_epoch") for m in found],
               mechanism=found[0].record.get("mechanism") if found else None,
               failed=(failures[0] if len(runs) == 1 else f"{len(failures)} of {len(runs)} seeds: {failures[0]}")
               if failures else None)
    if len(values) > 1:
        out.std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    if kind == "accuracy":
        out.examples = found[0].examples
        out.bits = [m.robust_bits for m in found]
        if len(found) == 1:
            lo, hi = stats.wilson(found[0].correct, found[0].examples)
            out.lo, out.hi = 100.0 * lo, 100.0 * hi
    elif kind == "nrob":
        out.examples = found[0].examples
    if kind == "accuracy":
        found_over = [a.overstated[attack] for a in row_audits(catalog, run_id)
                      if a.trustworthy and attack in a.overstated]
        if found_over:  # the largest gap among the seeds' audits
            out.overstates, out.best_known = max(found_over)
    return out


def row_audits(catalog: Catalog, run_id: str) -> list[AuditFindings]:
    """The readable audits of a row's models (one per seed) that the build writes (``audit.build``: the tables read
    only those, their inputs); an audit written by hand of another model is not read."""
    built = set(catalog.built_audits())
    models = [catalog.train_id.get(r, r) for r in catalog.row_runs(run_id)]
    return [a for a in (audit_findings(catalog, m) for m in models if m in built) if a is not None]


def read_metric(catalog: Catalog, run_id: str, attack: str) -> float | None:
    """A measurement of a run in percent (its mean over the run's seeds), or None if not measured yet; ReportError
    for a file that cannot be vouched for."""
    return measure(catalog, run_id, attack).value


# ------------------------------------------------------------------------------------------------ building


def row_labels(catalog: Catalog, name: str, reference: dict | None = None) -> dict[str, str]:
    """Row key -> the label a reader sees in every format: the row's own label, else the paper's (its reference
    file), else its key; and, where this scale runs the setting it studies otherwise, what ran (" — here NT 0.1,
    AT 0.1", tradeoff.report.what_ran.here_clause)."""
    target = catalog.targets[name]
    if reference is None:
        reference = load_reference(catalog, target.reference) if target.reference else {}
    out = {}
    for row in target.rows:
        label = row.label or next((lab for (r, _), (_, _, lab) in reference.items() if r == row.key),
                                         row.key)
        out[row.key] = label + ran.here_clause(catalog, name, row, label)
    return out


def _merged_rows(catalog: Catalog, name: str, reference: dict) -> list[Row]:
    """The table's rows, those that are one training job at this scale merged into one."""
    target = catalog.targets[name]
    labels = row_labels(catalog, name, reference)
    rows: dict[tuple[str, ...], Row] = {}
    for row in target.rows:
        label = labels[row.key]
        jobs = tuple(catalog.train_id[r] for r in catalog.row_runs(row.run))
        if jobs in rows:
            rows[jobs].members.append(row.replace(label=label))
            rows[jobs].label += f" = {label}"
        else:
            spec = catalog.model_spec(row.run)
            rows[jobs] = Row(row.key, label, list(jobs), [row.replace(label=label)],
                             f"{spec.paper_dataset}/{spec.paper_arch}")
    return list(rows.values())


def is_clean(catalog: Catalog, attack: str) -> bool:
    """Whether a column's attack is the clean evaluation (no attack)."""
    base = split_budget(attack)[0]
    return base in catalog.attacks and catalog.attacks[base].clean


def _mean_cell(ours: dict, proto: str, row: Row, columns: list[Column], catalog: Catalog) -> Ours:
    """The mean of a row's robust columns (all but the clean ones, times and other means); a column the protocol
    does not change counts with its strong value."""
    values, failed = [], []
    for c in columns:
        if c.attack in PSEUDO_COLUMNS or is_clean(catalog, c.attack):
            continue
        cell = ours[(proto, row.key, c.key)]
        cell = ours[(STRONG, row.key, c.key)] if cell.same_as_strong else cell
        values.append(cell.value)
        failed += [c.label] if cell.failed else []
    if not values or None in values:
        return Ours(None, "mean")
    return Ours(sum(values) / len(values), "mean",
                failed=f"it averages columns where the attack failed ({', '.join(failed)})" if failed else None)


def read(catalog: Catalog, name: str) -> Table:
    """Read, check and compare every cell of a table (its notes not yet written). ReportError (naming the file) for a
    file that cannot be vouched for, or when nothing of the table is measured yet."""
    target = catalog.targets[name]
    reference = load_reference(catalog, target.reference) if target.reference else {}
    rows = _merged_rows(catalog, name, reference)
    columns = [Column(key, attack, ran.column_title(catalog, target, key, attack)) for key, attack in
               target.columns.items()]
    protocols = [(STRONG, "the strong attacks named by the columns")]
    if target.protocol:
        protocols.append((target.protocol, catalog.protocol_title(target.protocol)))
    ours: dict[tuple[str, str, str], Ours] = {}
    for proto, _ in protocols:
        for row in rows:
            run = row.members[0].run
            for c in columns:
                if c.attack == "mean":
                    continue
                attack = c.attack if proto == STRONG else catalog.protocol_attack(name, c.attack, run)
                if attack is None:  # the protocol runs the column's own attack (or a time: no attack at all)
                    ours[(proto, row.key, c.key)] = Ours(None, cell_kind(catalog, c.attack), same_as_strong=True)
                else:
                    ours[(proto, row.key, c.key)] = measure(catalog, run, attack)
            for c in columns:
                if c.attack == "mean":
                    ours[(proto, row.key, c.key)] = _mean_cell(ours, proto, row, columns, catalog)
    if all(o.value is None for o in ours.values()):
        raise ReportError(f"{name}: nothing measured yet under {catalog.layout.root} (scale "
                          f"{catalog.scale}); build it first: snakemake {name} (with this scale's --configfile)")
    paper = {(r, c): (v, s) for (r, c), (v, s, _) in reference.items()}
    wanted = target.compared
    compare = {row.group: row.key for row in rows if any(m.key in wanted for m in row.members)}
    table = Table(name, ran.title(catalog, name), catalog.scale, rows, columns, protocols, ours, paper, compare,
                  {}, set(), [], generated=ran.generated(catalog))
    _compare(table)
    return table


# ----------------------------------------------------------------------------------------------- comparing


def _pairs(a: Ours, b: Ours) -> list[tuple[str, str]]:
    return list(zip(a.bits, b.bits))


def _compare(table: Table) -> None:
    """McNemar against the compare row, and the bold cells, per protocol and column, among the rows of one paper
    dataset and architecture (Table 2's MNIST rows are never compared with its SVHN rows, nor CA-AT Table 1's
    ResNet-34 rows with its ResNet-18 ones)."""
    for group in dict.fromkeys(row.group for row in table.rows):
        _compare_group(table, group, [row for row in table.rows if row.group == group])


def _compare_group(table: Table, group: str, rows: list[Row]) -> None:
    compare = table.compare.get(group)
    for proto, _ in table.protocols:
        for c in table.columns:
            cells = {row.key: table.ours[(proto, row.key, c.key)] for row in rows}
            # a failed attack's number is not robustness: never bold, never compared
            measured = {k: o for k, o in cells.items() if o.value is not None and not o.failed}
            if not measured or next(iter(measured.values())).kind == "minutes":
                continue
            if table.generated:
                continue  # generated data: a best or a difference would mean nothing
            best_key = max(measured, key=lambda k: measured[k].value)
            best = measured[best_key]
            if best.value <= 0.0 or best.kind != "accuracy" or not best.bits:
                continue  # never a bold zero, nor a bold without a paired test behind it (NROB, a mean)
            for key, o in measured.items():
                if o.value == best.value:
                    table.bold.add((proto, key, c.key))
                elif o.kind == "accuracy" and o.bits and best.bits and o.value > 0.0 \
                        and stats.mcnemar(_pairs(o, best)) >= stats.ALPHA:
                    table.bold.add((proto, key, c.key))
            ref = measured.get(compare) if compare else None
            if ref is None or ref.kind != "accuracy" or not ref.bits:
                continue
            family = [(proto, key, c.key) for key, o in measured.items() if key != compare and o.bits]
            raw = [stats.mcnemar(_pairs(measured[k], ref)) for _, k, _ in family]
            for cell, p, adjusted in zip(family, raw, stats.holm(raw)):
                table.pvalues[cell] = p
                table.adjusted[cell] = adjusted


# ---------------------------------------------------------------------------------- a row's selected model


def row_cell(table: Table, row: Row) -> Ours | None:
    """A measured cell of the row under the strong attacks (its records name the selected epoch), or None."""
    return next((o for (proto, key, _), o in table.ours.items()
                 if proto == STRONG and key == row.key and o.value is not None and o.selected), None)


def selected_epochs(table: Table, row: Row) -> list[int | None]:
    cell = row_cell(table, row)
    return cell.selected if cell else []


def before_mechanism(table: Table, row: Row) -> dict | None:
    """The mechanism (its first epoch and what it is) of a row whose model was selected before it, else None."""
    cell = row_cell(table, row)
    return early(cell) if cell else None


def early(cell: Ours) -> dict | None:
    """The mechanism of a measured cell whose model (some seed's) was selected before it acts, else None."""
    mech = cell.mechanism
    if not mech:
        return None
    start = mech.get("epoch")
    if start is None or any(e is not None and e < start for e in cell.selected):
        return mech
    return None
