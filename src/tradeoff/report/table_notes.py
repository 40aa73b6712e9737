"""The notes under a table, and those a figure of the same rows carries: every note is made by one small function,
(catalog, table) -> its lines, listed in ``NOTES`` in the order a reader meets them (:func:`notes`); those of
``LEGEND`` define what the table's cells and labels show (a symbol, a flag, what ran), and every format carries them
where the table is named (a LaTeX caption), the others under it. A new kind of note is one function and its place in
``NOTES``. Also a figure's labels and notes of its rows (:func:`figure_labels`, :func:`figure_notes`,
:func:`degenerate_notes`), said as its table says them."""

from __future__ import annotations

import re

from tradeoff.config import PSEUDO_COLUMNS, Catalog
from tradeoff.core.spec import thaw
from tradeoff.report import stats
from tradeoff.report import what_ran as ran
from tradeoff.report.labels import column_label
from tradeoff.report.records import training_machines
from tradeoff.report.table_model import (
    EARLY,
    FAILED,
    MARK,
    OVERSTATES,
    STRONG,
    Column,
    Ours,
    Row,
    Table,
    before_mechanism,
    cell_kind,
    is_clean,
    measure,
    paper_flags,
    row_audits,
    row_labels,
    selected_epochs,
)


def _compare_label(table: Table) -> str:
    keys = set(table.compare.values())
    return " / ".join(row.label for row in table.rows if row.key in keys)


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


def _same_predictions(table: Table) -> list[list[Row]]:
    """Groups of rows (distinct training jobs) whose models give the same prediction on every test example under
    every measured column of the strong attacks: at this scale they are one model as far as the table can tell."""
    groups: dict[tuple, list[Row]] = {}
    for row in table.rows:
        bits = tuple(tuple(table.ours[(STRONG, row.key, c.key)].bits) for c in table.columns)
        if any(bits):
            groups.setdefault(bits, []).append(row)
    return [rows for rows in groups.values() if len(rows) > 1]


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


def notes(catalog: Catalog, table: Table) -> tuple[list[str], list[str]]:
    """(every note, those of them that define what the table shows), in NOTES' order."""
    every, legend = [], []
    for make in NOTES:
        lines = make(catalog, table)
        every += lines
        if make in LEGEND:
            legend += lines
    return every, legend


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
        if attack in PSEUDO_COLUMNS or is_clean(catalog, attack) or cell_kind(catalog, attack) != "accuracy":
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
