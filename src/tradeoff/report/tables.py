"""Tables as Markdown, CSV, LaTeX and HTML, from metrics and predictions files only, with the paper's numbers.

A table is built once (:func:`build`) into a :class:`Table` and rendered into each format from it. Every number of
ours has been vouched for first (:mod:`tradeoff.report.records`: its files agree with the config of the cell it
fills, or the report stops naming the file), and carries its uncertainty:

- an accuracy measured on n test examples: its 95% Wilson interval; a run with seeds: mean ± standard deviation;
- each row against the paper's own method (the table's ``compare`` row): the exact McNemar test on the per-example
  predictions, Holm-corrected over the column's comparisons, a dagger where they differ at 5% after correction;
- bold: the best of ours in a column and every row not significantly worse than it (exact McNemar, p ≥ 0.05), ties
  included; only where such a test exists (an accuracy on paired examples: not NROB, a mean or a time); never a zero.

What ran is said where it is read (:mod:`tradeoff.report.what_ran`): the title says what a smaller scale ran, every
column its budget, each row its selected epoch, and a row selected before its method's mechanism acts (a Generalist
before it mixes) is flagged.

Degenerate comparisons are merged and said, not shown as results: rows that are one training job at this scale
(identical resolved settings) are one row, labelled with every member; a column where every row is at 0% (or
100%) is named in the notes. A table whose paper numbers came from the authors' own evaluation (``protocol``) shows
ours under that protocol as a second line of every row, beside ours under the strong attacks of its columns.
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from tradeoff.config import PSEUDO_COLUMNS, Catalog, split_budget
from tradeoff.core.spec import thaw
from tradeoff.core.targets import Row as TargetRow
from tradeoff.report import what_ran as ran, stats
from tradeoff.report.labels import column_label
from tradeoff.report.records import (
    Measurement,
    ReportError,
    AuditFindings,
    attack_failure,
    audit_findings,
    measurement,
    training_machines,
    training_minutes,
)
from tradeoff.config import load_yaml

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


def _kind(catalog: Catalog, attack: str) -> str:
    if attack == "train:minutes":
        return "minutes"
    if attack == "mean":
        return "mean"
    base = split_budget(attack)[0]
    return "nrob" if base in catalog.attacks and catalog.attacks[base].corruptions else "accuracy"


def measure(catalog: Catalog, run_id: str, attack: str) -> Ours:
    """Our number of a row (a run, averaged over its seeds) under one evaluation; value None until every seed is
    measured. ReportError for a file that cannot be vouched for."""
    kind = _kind(catalog, attack)
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


def _is_clean(catalog: Catalog, attack: str) -> bool:
    base = split_budget(attack)[0]
    return base in catalog.attacks and catalog.attacks[base].clean


def _mean_cell(ours: dict, proto: str, row: Row, columns: list[Column], catalog: Catalog) -> Ours:
    """The mean of a row's robust columns (all but the clean ones, times and other means); a column the protocol
    does not change counts with its strong value."""
    values, failed = [], []
    for c in columns:
        if c.attack in PSEUDO_COLUMNS or _is_clean(catalog, c.attack):
            continue
        cell = ours[(proto, row.key, c.key)]
        cell = ours[(STRONG, row.key, c.key)] if cell.same_as_strong else cell
        values.append(cell.value)
        failed += [c.label] if cell.failed else []
    if not values or None in values:
        return Ours(None, "mean")
    return Ours(sum(values) / len(values), "mean",
                failed=f"it averages columns where the attack failed ({', '.join(failed)})" if failed else None)


def build(catalog: Catalog, name: str) -> Table:
    """Read, check and compare everything a table shows. ReportError (naming the file) for a file that cannot be
    vouched for, or when nothing of the table is measured yet."""
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
                    ours[(proto, row.key, c.key)] = Ours(None, _kind(catalog, c.attack), same_as_strong=True)
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
    table.notes, table.legend = _notes(catalog, table)
    return table


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


def _compare_label(table: Table) -> str:
    keys = set(table.compare.values())
    return " / ".join(row.label for row in table.rows if row.key in keys)


def row_cell(table: Table, row: Row) -> Ours | None:
    """A measured cell of the row under the strong attacks (its records name the selected epoch), or None."""
    return next((o for (proto, key, _), o in table.ours.items()
                 if proto == STRONG and key == row.key and o.value is not None and o.selected), None)


def selected_epochs(table: Table, row: Row) -> list[int | None]:
    cell = row_cell(table, row)
    return cell.selected if cell else []


def _selection_split_note(catalog: Catalog, rows: list[Row]) -> str:
    """Which split chose each row's epoch (its run's resolved ``selection``), one clause per kind of choice."""
    kinds: dict[str, list[str]] = {}
    for row in rows:
        sel = catalog.runs[row.runs[0]].selection
        if not sel.chooses:
            kind = "none (the last epoch is the model)"
        elif sel.split == "validation":
            probed = ((catalog.runs[row.runs[0]].method.params.get("track_learners") or {}).get("split")
                      == "test")   # its learners measured every epoch on the test split (Zipper Figure 5's option)
            kind = (f"the validation split ({min(sel.examples, sel.validation)} images held out of the training "
                    "split, never trained on; the test images are measured once, at the end"
                    + (", but for the learners' per-epoch curves (track_learners.split: test))" if probed else ")"))
        else:
            kind = ("the test split (`selection.split: test`, the papers' practice: the test images of these cells "
                    "also chose the epoch)")
        kinds.setdefault(kind, []).append(row.label)
    if len(kinds) == 1:
        return f"Split that chose the epoch: {next(iter(kinds))}."
    return "Split that chose the epoch: " + "; ".join(f"{kind} for {', '.join(labels)}"
                                                       for kind, labels in kinds.items()) + "."


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


def _same_predictions(table: Table) -> list[list[Row]]:
    """Groups of rows (distinct training jobs) whose models give the same prediction on every test example under
    every measured column of the strong attacks: at this scale they are one model as far as the table can tell."""
    groups: dict[tuple, list[Row]] = {}
    for row in table.rows:
        bits = tuple(tuple(table.ours[(STRONG, row.key, c.key)].bits) for c in table.columns)
        if any(bits):
            groups.setdefault(bits, []).append(row)
    return [rows for rows in groups.values() if len(rows) > 1]


# ----------------------------------------------------------------------------------------------------- notes
# Every note under a table is made by one small function here, (catalog, table) -> its lines, listed in NOTES in the
# order a reader meets them; a function of LEGEND defines what the table's cells and labels show (a symbol, a flag,
# what ran), and every format carries those where the table is named (a LaTeX caption), the others under it. A new
# kind of note is one function and its place in NOTES.


def _scale_note(catalog: Catalog, table: Table) -> list[str]:
    examples = sorted({o.examples for o in table.ours.values() if o.examples})
    out = [f"Scale: **{table.scale}** (results/{table.scale}/); accuracies in %, on "
           f"{'/'.join(map(str, examples)) or 'no'} test examples."]
    if table.generated:
        out.append(f"The {table.scale} scale's data are generated files in the paper's formats and its runs take a "
                   "few steps: its numbers test the pipeline, not the methods (no bold, no dagger, no verdict).")
    return out


def _target_note(catalog: Catalog, table: Table) -> list[str]:
    target = catalog.targets[table.name]
    out = [f"At this scale: {target.note}"] if target.note else []
    return out + [f"The paper's own numbers: {flag}." for flag in paper_flags(catalog, target.reference or "")]


def _twin_note(catalog: Catalog, table: Table) -> list[str]:
    twin = ran.twin_note(catalog, table.name)
    return [twin[0].upper() + twin[1:] + "."] if twin else []


def _seeds_note(catalog: Catalog, table: Table) -> list[str]:
    target = catalog.targets[table.name]
    counts = sorted({len(row.runs) for row in table.rows if not catalog.is_external(row.runs[0])})
    if target.paper_note:
        ours = ("one seed per row" if counts == [1] else
                f"the mean of {'/'.join(map(str, counts))} seeds per row")
        return [f"The paper's numbers: {' '.join(target.paper_note)} Ours: {ours}."]
    if counts:
        return [f"Seeds per row: {'/'.join(map(str, counts))} (each a training job of its own"
                + ("; a cell is their mean ± standard deviation" if counts[-1] > 1 else "") + ")."]
    return []


def _how_to_read(catalog: Catalog, table: Table) -> list[str]:
    seeds = sorted({len(row.runs) for row in table.rows} - {1})
    how = ("How to read a cell: ours [95% Wilson interval] for one seed" +
           (f"; ours ± standard deviation over {'/'.join(map(str, seeds))} seeds (ddof 0)" if seeds else "") +
           ". The paper's number is on its own line below ours.")
    if not table.generated:
        how += (" **Bold**: the best of ours in the column and every row not significantly worse than it (exact "
                "McNemar test on the per-example predictions, p ≥ 0.05); never a 0, and only where such a test "
                "exists (not on NROB, a mean or a time).")
        if table.compare:
            how += (f" {MARK}: differs from {_compare_label(table)} (the paper's method) at p < 0.05 after Holm's "
                    "correction over the column's comparisons with it (exact McNemar tests; the CSV keeps the raw and "
                    "the adjusted p-values).")
    return [how + " —: not measured (yet), or not in the paper."]


def _protocol_note(catalog: Catalog, table: Table) -> list[str]:
    if len(table.protocols) < 2:
        return []
    proto, title = table.protocols[1]
    return [f"Each row shows ours twice: under the strong attacks of the columns, and under **{proto}**, "
            f"{title} (the like-for-like comparison with the paper's numbers); = : that protocol runs the "
            "column's own attack."]


def _merged_note(catalog: Catalog, table: Table) -> list[str]:
    out = []
    for row in table.rows:
        if len(row.members) > 1:
            labels = " and ".join(m.label for m in row.members)
            out.append(f"{labels} are one training job at this scale (identical resolved settings, job "
                       f"`{row.runs[0]}`): one model, one row, not a comparison.")
    for rows in _same_predictions(table):
        out.append(f"{' and '.join(r.label for r in rows)} are distinct training jobs whose models give the same "
                   "prediction on every test example under every column: at this scale the table cannot tell them "
                   "apart.")
    return out


def _labels(table: Table) -> dict[str, str]:
    return {m.key: m.label for row in table.rows for m in row.members}


def _shared_note(catalog: Catalog, table: Table) -> list[str]:
    return [note[0].upper() + note[1:] + "." for note in ran.shared_job_notes(catalog, table.name, _labels(table))]


def _marked(table: Table, flag: str) -> list[tuple[str, Row, Column, Ours]]:
    """The measured cells with ``flag`` (``failed``, ``overstates``) set: (protocol, row, column, cell), in order."""
    return [(proto, row, c, o) for proto, _ in table.protocols for row in table.rows for c in table.columns
            if (o := table.ours[(proto, row.key, c.key)]).value is not None and getattr(o, flag) is not None]


def _cell_name(table: Table, proto: str, row: Row, c: Column) -> str:
    return f"{row.label} under {c.label}" + ("" if proto == STRONG else f" ({proto})")


def _validity_legend(catalog: Catalog, table: Table) -> list[str]:
    """What the marks of a cell checked before it is judged mean (docs/reports.md, "Checked before it is judged")."""
    out = []
    if _marked(table, "failed"):
        out.append(f"{FAILED}: the attack failed at this cell: a known bound rules its number out (an image of "
                   "another class lies within the budget of an image it leaves robust), or the images it leaves robust "
                   "crowd into one class; not robustness: never bold, not compared, and no claim is judged on it.")
    if _marked(table, "overstates"):
        out.append(f"{OVERSTATES}: a written audit of the row's model finds this column more than its tolerance above "
                   "the model's best known robust accuracy at the budget (the per-example worst case over every attack "
                   "it measured there), significantly: the attack's number, not the model's robustness.")
    return out


def _failed_note(catalog: Catalog, table: Table) -> list[str]:
    return [f"{FAILED} {_cell_name(table, proto, row, c)}: the attack failed: {o.failed}."
            for proto, row, c, o in _marked(table, "failed")]


def _audit_note(catalog: Catalog, table: Table) -> list[str]:
    """The cells that a written audit found overstated (docs/audit.md), and the audits that judge nothing."""
    out = [f"{OVERSTATES} {_cell_name(table, proto, row, c)}: overstates by {o.overstates:.1f} points: "
           f"{_attack_name(c)}'s number, not the model's robustness (best known {o.best_known:.1f}%, "
           f"audit/{row.runs[0]}.md)." for proto, row, c, o in _marked(table, "overstates")]
    for row in table.rows:
        found = [a for a in row_audits(catalog, row.members[0].run) if not a.trustworthy]
        if found:
            out.append(f"The audit of {row.label} ({found[0].path.name}) has no trustworthy figure ({found[0].why}): "
                       "no column of the row is judged against it.")
    return out


def _attack_name(c: Column) -> str:
    """A column's attack without its budget ("PGD-20" of "PGD-20, ε = 8/255 (here 0.3)")."""
    return re.split(r",| \(", c.label)[0]


HERE_NOTE = ("— here …: the setting a row studies as this scale ran it, where it differs from its label (the "
             "paper's setting, given after the label where the label does not say it; from the runs' resolved "
             "settings)")


def settings_notes(catalog: Catalog, name: str, labels: dict[str, str]) -> list[str]:
    """What a row's "— here ..." says, and a studied ratio the scale does not keep (a table's and a figure's)."""
    out = [HERE_NOTE] if any(re.search(" — .*here ", label) for label in labels.values()) else []
    ratio = ran.ratio_note(catalog, name, labels)
    return out + ([ratio[0].upper() + ratio[1:]] if ratio else [])


def _settings_note(catalog: Catalog, table: Table) -> list[str]:
    return [note + "." for note in settings_notes(catalog, table.name, _labels(table))]


def _epochs_note(catalog: Catalog, table: Table) -> list[str]:
    epochs = [(row, selected_epochs(table, row)) for row in table.rows if not catalog.is_external(row.runs[0])]
    if not any(sel for _, sel in epochs):
        return []
    length = {catalog.runs[row.runs[0]].epochs for row, _ in epochs}
    return [f"Selected epoch (of {'/'.join(map(str, sorted(length)))}; per seed): "
            + "; ".join(f"{row.label} {', '.join('—' if e is None else str(e) for e in sel) or '—'}"
                        for row, sel in epochs) + ".", _selection_split_note(catalog, [row for row, _ in epochs])]


def early_text(label: str, selected: list[int | None], mech: dict) -> str:
    """The ‡ note of a row (a table's or a figure's point) selected before its method's mechanism acts."""
    start = mech.get("epoch")
    return (f"{EARLY} {label}: its model is the one of epoch {', '.join(str(e) for e in selected)}, selected before "
            f"its method's mechanism acts ({'from epoch ' + str(start) if start else 'never'}: {mech.get('what')}): "
            "this row measures another model than its label says")


def _early_note(catalog: Catalog, table: Table) -> list[str]:
    return [early_text(row.label, selected_epochs(table, row), mech) + "." for row in table.rows
            if (mech := before_mechanism(table, row)) is not None]


def early_rows(catalog: Catalog, name: str) -> dict[str, tuple[list[int | None], dict]]:
    """Row key -> (selected epochs, mechanism) of a figure's rows whose model was selected before its method's
    mechanism acts (read from the records of the first measured evaluation the target draws of each row)."""
    out = {}
    target = catalog.targets[name]
    jobs = [job for attack in target.columns.values() if attack not in PSEUDO_COLUMNS
            for job in catalog.column_jobs(attack)]
    for row in target.rows:
        if catalog.is_external(row.run):
            continue
        cell = next((o for o in (measure(catalog, row.run, job) for job in jobs) if o.value is not None), None)
        mech = cell.mechanism if cell else None
        if mech and mech.get("epoch") is not None and any(e is not None and e < mech["epoch"] for e in cell.selected):
            out[row.key] = (cell.selected, mech)
    return out


def _flat_note(catalog: Catalog, table: Table) -> list[str]:
    out = []
    for proto, _ in table.protocols:
        for c in table.columns:
            values = [table.ours[(proto, row.key, c.key)].value for row in table.rows]
            if len(table.rows) > 1 and None not in values and table.ours[(proto, table.rows[0].key, c.key)].kind in (
                    "accuracy", "mean"):
                for level in (0.0, 100.0):
                    if all(v == level for v in values):
                        out.append(f"{c.label}{'' if proto == STRONG else f' ({proto})'}: every row at "
                                   f"{level:.0f}% at this scale; the column does not separate the methods.")
    return out


def _jobs_note(catalog: Catalog, table: Table) -> list[str]:
    out = []
    trained = [f"{row.label}: `{', '.join(row.runs)}`" for row in table.rows if not catalog.is_external(row.runs[0])]
    if trained:
        out.append("Training jobs: " + "; ".join(trained) +
                   f" (metrics in {catalog.layout.metrics('<job>', '<evaluation job>')}).")
    for row in table.rows:
        if catalog.is_external(row.runs[0]):
            spec = catalog.externals[row.runs[0]]
            normalize = thaw(spec.normalize)  # its mean and std as lists, as given
            out.append(f"{row.label}: external model `{row.runs[0]}`, not trained here: {spec.arch} from "
                       f"`{spec.checkpoint}` ({spec.format} layout"
                       + (f", normalised by mean {normalize['mean']} std {normalize['std']}"
                          if normalize else "") + "); its metrics record the file's SHA-256.")
    return out


def figure_labels(catalog: Catalog, name: str, early: dict | None = None) -> dict[str, str]:
    """Row key -> the row as a figure names it (a legend entry, a tick, a footer note): its label as its table
    gives it (row_labels), else its series (a line of a budget sweep), else its x value; what ran where it differs
    (ran.here_clause) and ‡ where its model was selected before its method's mechanism acts (early_rows)."""
    early = early_rows(catalog, name) if early is None else early
    rows = row_labels(catalog, name)
    out = {}
    for row in catalog.targets[name].rows:
        if row.series and not row.label:  # a line of a budget sweep, named by its series
            label = row.series + ran.here_clause(catalog, name, row, row.series)
        elif not row.label and row.x is not None and rows[row.key].startswith(row.key):
            studied = list(ran.studied_settings(catalog, name).get(row.key) or {})
            what = ran.setting_name(catalog, row.run, studied[0]) if len(studied) == 1 else "x"
            label = f"{what} = {row.x:g}"
            label += ran.here_clause(catalog, name, row, label)
        else:
            label = rows[row.key]
        out[row.key] = label + (f" {EARLY}" if row.key in early else "")
    return out


def figure_notes(catalog: Catalog, name: str) -> list[str]:
    """The notes of a figure's rows that its table would carry: what ran where a label says otherwise, a ratio the
    scale does not keep, and every row selected before its method's mechanism (‡)."""
    early = early_rows(catalog, name)
    labels = {k: v.removesuffix(f" {EARLY}") for k, v in figure_labels(catalog, name, early).items()}
    return settings_notes(catalog, name, labels) + [early_text(labels[key], selected, mech) for key, (selected, mech)
                                                    in early.items()]


def _columns_note(catalog: Catalog, table: Table) -> list[str]:
    out = []
    first_run = catalog.targets[table.name].rows[0].run
    for c in table.columns:
        out.append(f"- {c.label}: {_describe(catalog, c.attack, first_run)}")
        if c.attack == "train:minutes":
            machines = sorted({m for row in table.rows for r in row.runs for m in training_machines(catalog, r)})
            out.append(f"  - ours measured on: {'; '.join(f'{d} in {p}' for d, p in machines) or 'not trained yet'}")
        for proto, _ in table.protocols[1:]:
            attack = catalog.protocol_attack(table.name, c.attack, first_run)
            if attack is not None:
                out.append(f"  - {proto}: {_describe(catalog, attack, first_run)}")
    return out


NOTES = (_scale_note, _target_note, _twin_note, _seeds_note, _how_to_read, _validity_legend, _protocol_note,
         _merged_note, _shared_note, _failed_note, _audit_note, _settings_note, _epochs_note, _early_note, _flat_note,
         _jobs_note, _columns_note)
LEGEND = {_scale_note, _twin_note, _how_to_read, _validity_legend, _protocol_note, _merged_note, _settings_note,
          _epochs_note, _early_note}


def _notes(catalog: Catalog, table: Table) -> tuple[list[str], list[str]]:
    """(every note, those of them that define what the table shows), in NOTES' order."""
    notes, legend = [], []
    for make in NOTES:
        lines = make(catalog, table)
        notes += lines
        if make in LEGEND:
            legend += lines
    return notes, legend


def _describe(catalog: Catalog, attack: str, run_id: str) -> str:
    if attack == "train:minutes":
        return ("training time in minutes (the sum of the epochs' wall-clock seconds on the machine that trained it, "
                "the per-epoch selection evaluation included and Generalist's learner tracking not; not a percentage)")
    if attack == "mean":
        return "mean of the row's robust columns"
    spec = catalog.attack_for(attack, run_id)
    if spec.clean:
        return f"`{attack}`: clean test accuracy"
    if spec.corruptions:
        return (f"`{attack}`: NROB on {spec.dataset}: the mean over its corruptions of the mean accuracy over 5 "
                "severities (Hendrycks & Dietterich); no binomial interval (a mean over many corrupted sets)")
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in spec.as_dict().items() if k not in ("type", "norm", "eps") and v is not None)
    return f"`{attack}`: {spec.type} {spec.norm} eps={spec.eps:.4g}" + (f" ({params})" if params else "")


def degenerate_notes(catalog: Catalog, name: str) -> list[str]:
    """What a figure's points cannot show at this scale, said under it: rows that are one training job (one model
    drawn as several points), and columns under which no two rows differ significantly (exact McNemar between the
    highest and the lowest point; every row at 0% included)."""
    target = catalog.targets[name]
    notes, jobs = [], {}
    for row in target.rows:
        label = row.label or row.key
        jobs.setdefault(tuple(catalog.train_id[r] for r in catalog.row_runs(row.run)), []).append(label)
    notes += [f"{' = '.join(labels)}: one training job at this scale" for labels in jobs.values() if len(labels) > 1]
    for column, attack in target.columns.items():
        if attack in PSEUDO_COLUMNS or _is_clean(catalog, attack) or _kind(catalog, attack) != "accuracy":
            continue
        for job in catalog.column_jobs(attack):
            cells = [measure(catalog, rows[0], job) for rows in
                     ([row.run for row in target.rows if (row.label or row.key) == labels[0]]
                      for labels in jobs.values())]
            cells = [c for c in cells if c.value is not None and c.bits]
            if len(cells) < 2:
                continue
            low, high = min(cells, key=lambda c: c.value), max(cells, key=lambda c: c.value)
            if high.value == low.value or stats.mcnemar(list(zip(high.bits, low.bits))) >= stats.ALPHA:
                # a sweep's point: its budget as the paper writes it and as it ran, not the job's name
                what = column_label(target, column) if job == attack else ran.column_title(catalog, target, column, job)
                notes.append(f"under {what} no two points differ significantly at this scale "
                             f"({low.value:.1f}–{high.value:.1f}%)")
    return notes


# ----------------------------------------------------------------------------------------------- rendering


def _num(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def ours_text(table: Table, proto: str, row: Row, c: Column, *, bold: str = "**{}**", mark: str = MARK,
              pm: str = "±") -> str:
    o = table.ours[(proto, row.key, c.key)]
    if o.same_as_strong:
        return "" if c.attack in PSEUDO_COLUMNS else "="
    if o.value is None:
        return "—"
    digits = 3 if o.kind == "minutes" and o.value < 10 else 1  # minutes of a small scale: 0.137, not 0.1
    text = _num(o.value, digits) + (f"{pm}{_num(o.std, digits)}" if o.std is not None else "")
    if (proto, row.key, c.key) in table.bold:
        text = bold.format(text)
    p = table.adjusted.get((proto, row.key, c.key))
    if p is not None and p < stats.ALPHA:
        text += mark
    text += (FAILED if o.failed else "") + (OVERSTATES if o.overstates is not None else "")
    if o.lo is not None:
        text += f" [{_num(o.lo)}, {_num(o.hi)}]"
    return text


def paper_text(table: Table, member: TargetRow, c: Column, pm: str = "±") -> str:
    value = table.paper.get((member.key, c.key))
    if value is None:
        return "—"
    return _num(value[0], 2) + (f"{pm}{_num(value[1], 2)}" if value[1] is not None else "")


def _lines(table: Table, row: Row) -> list[tuple[str, str, list[str] | None, TargetRow | None]]:
    """The lines of a row: (row label or '', line label, protocol, member): ours per protocol, then the paper's."""
    lines = []
    label = row.label + (f" {EARLY}" if before_mechanism(table, row) else "")
    for i, (proto, _) in enumerate(table.protocols):
        what = "ours" if len(table.protocols) == 1 else ("ours, strong" if proto == STRONG else f"ours, {proto}")
        lines.append((label if i == 0 else "", what, proto, None))
    for member in table.paper_rows(row):
        what = "paper" if len(row.members) == 1 else f"paper ({member.label})"
        lines.append(("", what, None, member))
    return lines


def render_markdown(table: Table) -> str:
    out = [f"# {table.title}", "", "| Method | | " + " | ".join(c.label for c in table.columns) + " |",
           "|---|---|" + "---|" * len(table.columns)]
    for row in table.rows:
        for label, what, proto, member in _lines(table, row):
            cells = [ours_text(table, proto, row, c) if member is None else paper_text(table, member, c)
                     for c in table.columns]
            out.append(f"| {label} | {what} | " + " | ".join(cells) + " |")
    return "\n".join(out + [""] + table.notes) + "\n"


CSV_FIELDS = ("target", "row", "label", "column", "column_label", "protocol", "attack", "ours", "ci_low", "ci_high",
              "ours_std", "seeds", "examples", "paper", "paper_std", "diff", "p_vs_compare", "p_holm", "significant",
              "bold", "selected_epoch", "mechanism_epoch", "before_mechanism", "jobs", "metrics", "scale", "title",
              "attack_failed", "overstates", "best_known")


def render_csv(table: Table, catalog: Catalog) -> str:
    """One line per (row, column, protocol): every number with where it comes from."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    fmt = lambda v: "" if v is None else f"{v:.4f}"  # noqa: E731
    for row in table.rows:
        for c in table.columns:
            for proto, _ in table.protocols:
                o = table.ours[(proto, row.key, c.key)]
                if o.same_as_strong:
                    continue
                attack = (c.attack if proto == STRONG
                          else catalog.protocol_attack(table.name, c.attack, row.members[0].run))
                cell = row_cell(table, row)
                mech = (cell.mechanism or {}) if cell else {}
                early = before_mechanism(table, row)
                for member in row.members:
                    paper = table.paper.get((member.key, c.key), (None, None))
                    p = table.pvalues.get((proto, row.key, c.key))
                    adjusted = table.adjusted.get((proto, row.key, c.key))
                    diff = None if o.value is None or paper[0] is None else o.value - paper[0]
                    writer.writerow([table.name, member.key, member.label, c.key, c.label, proto, attack,
                                     fmt(o.value), fmt(o.lo), fmt(o.hi), fmt(o.std), len(row.runs),
                                     o.examples or "", fmt(paper[0]), fmt(paper[1]), fmt(diff),
                                     "" if p is None else f"{p:.4g}",
                                     "" if adjusted is None else f"{adjusted:.4g}",
                                     "" if adjusted is None else int(adjusted < stats.ALPHA),
                                     int((proto, row.key, c.key) in table.bold),
                                     " ".join("" if e is None else str(e) for e in selected_epochs(table, row)),
                                     "" if mech.get("epoch") is None else mech["epoch"],
                                     "" if not mech else int(early is not None), " ".join(row.runs),
                                     " ".join(o.files), table.scale, table.title, o.failed or "",
                                     fmt(o.overstates), fmt(o.best_known)])
    return buffer.getvalue()


# LaTeX: every character outside ASCII that a label or note may hold, as text-mode LaTeX (pdflatex, no packages).
# Symbols stay at the text's size (a superscript of \footnotesize would be set at 6 pt: below what prints legibly).
TEX_CHARS = {"β": r"$\beta$", "λ": r"$\lambda$", "γ": r"$\gamma$", "δ": r"$\delta$", "ε": r"$\varepsilon$",
             "μ": r"$\mu$", "τ": r"$\tau$", "ω": r"$\omega$", "α": r"$\alpha$", "∞": r"$\infty$", "—": "---",
             "–": "--", "−": "$-$", "±": r"$\pm$", "×": r"$\times$", "½": "1/2", "†": r"\dag{}",
             "‡": r"\ddag{}", "…": r"\ldots{}", "⊘": r"$\oslash$", "↑": r"$\uparrow$",
             "‖": r"$\|$", "≥": r"$\geq$", "≤": r"$\leq$", "→": r"$\rightarrow$", "·": r"$\cdot$", "’": "'",
             "é": r"\'e", "ü": r"\"u"}
TEX_SPECIAL = {"<": r"\textless{}", ">": r"\textgreater{}",
               "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex(text: str) -> str:
    """Text as LaTeX source for pdflatex: special characters escaped, Greek and symbols as math. A character it does
    not know is an error (a table must compile), not a silent '?'."""
    out = []
    for ch in text:
        if ch in TEX_SPECIAL:
            out.append(TEX_SPECIAL[ch])
        elif ch in TEX_CHARS:
            out.append(TEX_CHARS[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            raise ValueError(f"no LaTeX for {ch!r} in {text!r}: add it to tradeoff.report.tables.TEX_CHARS")
    return "".join(out)


def tex_note(note: str) -> str:
    """A note of the Markdown (``**bold**``, ```code```, a leading "- ") as LaTeX: bold as \\textbf, code as
    \\texttt, every character through tex()."""
    note = note.strip()
    note = note[2:] if note.startswith("- ") else note
    out = []
    for i, part in enumerate(note.split("`")):
        pieces = [tex(p) if j % 2 == 0 else r"\textbf{" + tex(p) + "}" for j, p in enumerate(part.split("**"))]
        out.append(r"\texttt{" + "".join(pieces) + "}" if i % 2 else "".join(pieces))
    return "".join(out)


# The page a table is set for: LaTeX's article class (10 pt, A4 or letter) has a 345 pt text width, and 550 pt of text
# height, the width of a landscape page. Cells are set in \footnotesize (8 pt), never scaled: a table wider than the
# portrait page turns to a landscape page, and one wider than that is split into panels of columns, each repeating
# the row labels. Widths are estimated from the characters at 8 pt (Computer Modern: digits 4.25 pt, bold 4.9 pt).
TEX_PORTRAIT = 345.0
TEX_LANDSCAPE = 550.0
TEX_SEP = 4.0                       # \tabcolsep, pt
TEX_LABEL = 78.0                    # the row label's column (its text wraps), pt
TEX_PACKAGES = "booktabs, array, longtable, pdflscape"
_TEX_NARROW = set(".,;:!|[]()'`") | {" "}
_TEX_WIDE = set("MW@%") | set("—")


def tex_width(text: str, bold: bool = False) -> float:
    """The width of plain text set in \\footnotesize, estimated in pt (generously: a column sized by it never
    overflows)."""
    width = 0.0
    for ch in text:
        if ch in _TEX_NARROW:
            width += 2.6
        elif ch.isdigit() or ch in "±×+-=/<>≥≤":
            width += 4.3
        elif ch in _TEX_WIDE:
            width += 8.0
        elif ch.isupper():
            width += 6.3
        else:
            width += 4.4
    return width * (1.14 if bold else 1.0) + 1.0


def _words_width(text: str) -> float:
    """The widest word of a text (a wrapped column must be at least that wide)."""
    return max((tex_width(w) for w in text.split()), default=0.0)


@dataclass
class _TexCell:
    lines: list[str]                # LaTeX of each line of the cell (a value, then its interval)
    width: float                    # pt


def _tex_cell(table: Table, proto: str | None, row: Row, c: Column, member: TargetRow | None) -> _TexCell:
    """A cell as LaTeX lines: ours' number with its marks on one line and its interval below it; the paper's."""
    if member is not None:
        text = paper_text(table, member, c)
        return _TexCell([tex(text)], tex_width(text))
    text = ours_text(table, proto, row, c, bold="\x00{}\x01", mark="\x02")
    value, sep, interval = text.rpartition(" [")
    if not sep:
        value, interval = text, ""
    else:
        interval = "[" + interval
    plain = value.replace("\x00", "").replace("\x01", "").replace("\x02", "†")
    bold = "\x00" in value
    lines = [tex(value).replace("\x00", r"\textbf{").replace("\x01", "}").replace("\x02", r"\dag{}")]
    widths = [tex_width(plain, bold)]
    if interval:
        lines.append(tex(interval))
        widths.append(tex_width(interval))
    return _TexCell(lines, max(widths))


def _tex_panels(widths: list[float], fixed: float) -> tuple[list[list[int]], bool]:
    """The columns (indices) of each panel and whether the page turns: one panel on the portrait page if the table
    fits it, else on a landscape page, else as few landscape panels as hold every column, of even widths."""
    total = fixed + sum(w + 2 * TEX_SEP for w in widths)
    if total <= TEX_PORTRAIT:
        return [list(range(len(widths)))], False
    if total <= TEX_LANDSCAPE:
        return [list(range(len(widths)))], True
    room = TEX_LANDSCAPE - fixed
    for count in range(2, len(widths) + 1):
        size = math.ceil(len(widths) / count)
        panels = [list(range(i, min(i + size, len(widths)))) for i in range(0, len(widths), size)]
        if all(sum(widths[j] + 2 * TEX_SEP for j in p) <= room for p in panels):
            return panels, True
    return [[j] for j in range(len(widths))], True


def render_latex(table: Table) -> str:
    """The table as LaTeX that prints: a longtable (it breaks across pages, its header repeated) in \\footnotesize,
    never scaled; on a landscape page where it is wider than the portrait page, and in panels of columns where it is
    wider than that. The caption is the title and one sentence; the legend and every note follow under the table.
    Needs ``\\usepackage{booktabs, array, longtable, pdflscape}`` (TeX Live's latex-base and latex-recommended)."""
    lines = [(row, label, what, proto, member) for row in table.rows
             for label, what, proto, member in _lines(table, row)]
    cells = {(i, c.key): _tex_cell(table, proto, row, c, member)
             for i, (row, _, _, proto, member) in enumerate(lines) for c in table.columns}
    what_width = max([_words_width(what) for _, _, what, _, _ in lines] + [tex_width("Method")])
    label_width = min(max([_words_width(label) for _, label, _, _, _ in lines] + [40.0]), TEX_LABEL)
    label_width = max(label_width, TEX_LABEL if any(tex_width(label) > TEX_LABEL for _, label, _, _, _ in lines)
                      else label_width)
    widths = [max([cells[(i, c.key)].width for i in range(len(lines))] + [_words_width(c.label), 22.0])
              for c in table.columns]
    panels, landscape = _tex_panels(widths, label_width + what_width + 4 * TEX_SEP)
    caption = (tex(f"{table.title} (scale: {table.scale}).") + " " +
               tex("Ours with its 95% interval (with seeds: mean ± standard deviation) above the paper's number; "
                   "the legend and the notes are under the table."))
    anchor = re.sub(r"[^A-Za-z0-9_.-]", "-", table.name)
    out = [f"% {tex(table.name)}: needs \\usepackage{{{TEX_PACKAGES}}}",
           *([r"\begin{landscape}"] if landscape else []), r"\begingroup\footnotesize",
           rf"\setlength{{\tabcolsep}}{{{TEX_SEP:g}pt}}\setlength{{\LTcapwidth}}{{\linewidth}}"]
    for k, panel in enumerate(panels):
        spec = (rf"@{{}}>{{\raggedright\arraybackslash}}p{{{label_width:.0f}pt}}"
                rf">{{\raggedright\arraybackslash}}p{{{what_width:.0f}pt}}"
                + "".join(rf">{{\centering\arraybackslash}}p{{{widths[j]:.0f}pt}}" for j in panel) + "@{}")
        name = f" ({chr(ord('a') + k)})" if len(panels) > 1 else ""
        head = ("Method & & " + " & ".join(tex(table.columns[j].label) for j in panel) + r" \\")
        if k == 0:
            out += [rf"\begin{{longtable}}{{{spec}}}", rf"\caption{{{caption}}}\label{{tab:{anchor}}}\\"]
        else:  # longtable steps the table counter: the panels are one table
            out += [r"\addtocounter{table}{-1}", rf"\begin{{longtable}}{{{spec}}}",
                    rf"\caption*{{Table \thetable{{}} (continued), panel{name}.}}\\"]
        if len(panels) > 1:
            out.append(rf"\multicolumn{{{len(panel) + 2}}}{{@{{}}l}}{{Panel{name}}} \\")
        out += [r"\toprule", head, r"\midrule", r"\endfirsthead",
                rf"\multicolumn{{{len(panel) + 2}}}{{@{{}}l}}{{Table \thetable{{}}{name}, continued}} \\",
                r"\toprule", head, r"\midrule", r"\endhead", r"\bottomrule", r"\endlastfoot"]
        for i, (row, label, what, proto, member) in enumerate(lines):
            if i and label:
                out.append(r"\midrule")
            values = [r"\newline ".join(cells[(i, table.columns[j].key)].lines) for j in panel]
            out.append(f"{tex(label)} & {tex(what)} & " + " & ".join(values) + r" \\")
        out.append(r"\end{longtable}")
    notes = table.legend + [n for n in table.notes if n not in table.legend]
    out += [r"\par\smallskip{\raggedright\setlength{\parindent}{0pt}\setlength{\parskip}{2pt}"]
    for n in notes:
        nested = n.startswith("  - ")
        out.append((r"\hangindent=2em\hangafter=0 " if nested else r"\hangindent=1em\hangafter=1 ")
                   + tex_note(n) + r"\par")
    out += ["}", r"\endgroup", *([r"\end{landscape}"] if landscape else [])]
    return "\n".join(out) + "\n"


def render_html(table: Table) -> str:
    """An HTML fragment (for the Snakemake report and the summary page)."""
    out = [f"<h2>{html.escape(table.title)}</h2>", "<table class='tradeoff'>",
           "<thead><tr><th>Method</th><th></th>" + "".join(f"<th>{html.escape(c.label)}</th>" for c in table.columns)
           + "</tr></thead><tbody>"]
    for row in table.rows:
        for label, what, proto, member in _lines(table, row):
            cells = [html.escape(paper_text(table, member, c)) if member is not None else
                     html.escape(ours_text(table, proto, row, c, bold="\x00{}\x01")).replace(
                         "\x00", "<b>").replace("\x01", "</b>") for c in table.columns]
            cls = " class='paper'" if member is not None else ""
            out.append(f"<tr{cls}><th>{html.escape(label)}</th><td>{html.escape(what)}</td>"
                       + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    notes_html = "".join(f"<li>{inline_html(n.strip().removeprefix('- '))}</li>" for n in table.notes)
    out += ["</tbody></table>", f"<ul class='notes'>{notes_html}</ul>"]
    return "\n".join(out) + "\n"


def inline_html(text: str) -> str:
    """A note's inline Markdown (```code```, ``**bold**``) as HTML, everything else escaped."""
    out = []
    for i, part in enumerate(text.split("`")):
        pieces = [html.escape(p) if j % 2 == 0 else f"<b>{html.escape(p)}</b>" for j, p in enumerate(part.split("**"))]
        out.append(f"<code>{''.join(pieces)}</code>" if i % 2 else "".join(pieces))
    return "".join(out)


def plain_text(text: str) -> str:
    """A note's inline Markdown without its marks (a figure's text: no backticks, no asterisks)."""
    return text.replace("`", "").replace("**", "")


HTML_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table.tradeoff {{ border-collapse: collapse; font-size: 0.9em; }}
table.tradeoff th, table.tradeoff td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: center; }}
table.tradeoff tr.paper td {{ color: #666; font-style: italic; }}
ul.notes {{ color: #444; font-size: 0.85em; }}
code {{ font-size: 0.95em; background: #f3f3f3; padding: 0 0.2em; }}
img.claims {{ max-width: 100%; }}
details {{ margin: 0.4em 0; }} details > summary {{ cursor: pointer; font-weight: bold; }}
</style></head><body>
{body}
</body></html>
"""


def html_page(title: str, body: str) -> str:
    return HTML_PAGE.format(title=html.escape(title), body=body)


def render_all(table: Table, catalog: Catalog) -> dict[str, str]:
    """Every format of one table as built."""
    return {"md": render_markdown(table), "csv": render_csv(table, catalog), "tex": render_latex(table),
            "html": render_html(table)}


def render(catalog: Catalog, name: str) -> dict[str, str]:
    """Every format of one table, from one reading of its files."""
    return render_all(build(catalog, name), catalog)

