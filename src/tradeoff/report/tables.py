"""Tables as Markdown, CSV, LaTeX and HTML, from metrics and predictions files only, with the paper's numbers.

A table is built once (:func:`build`) into a :class:`~tradeoff.report.table_model.Table`: its cells read and compared
(:mod:`tradeoff.report.table_model`), its notes written (:mod:`tradeoff.report.table_notes`), and rendered into each
format from it (:mod:`tradeoff.report.table_render`). Every number of
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

from tradeoff.config import Catalog
from tradeoff.report import table_model, table_notes
from tradeoff.report.table_model import Table
from tradeoff.report.table_render import render_all


def build(catalog: Catalog, name: str) -> Table:
    """Read, check and compare everything a table shows, and write its notes. ReportError (naming the file) for a
    file that cannot be vouched for, or when nothing of the table is measured yet."""
    table = table_model.read(catalog, name)
    table.notes, table.legend = table_notes.notes(catalog, table)
    return table


def render(catalog: Catalog, name: str) -> dict[str, str]:
    """Every format of one table, from one reading of its files."""
    return render_all(build(catalog, name), catalog)
