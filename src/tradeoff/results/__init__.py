"""The results of a build as data, for a researcher's own analysis: :func:`load` returns every cell of every table
of a scale (``results/<scale>/cells.csv``, written by the summary job: tradeoff.report.cells) as a pandas DataFrame,
one line per (target, row, column, protocol, seed)::

    import tradeoff.results
    cells = tradeoff.results.load("demo")
    cells.query("target == 'table1a' and protocol == 'strong'")

May import: core, storage.
"""

from __future__ import annotations

from pathlib import Path

from tradeoff.core.errors import UserError
from tradeoff.storage.layout import Layout

_COUNTS = ("seed", "seeds", "examples", "correct", "selected_epoch")  # whole numbers, some cells without one


def path(scale: str, results: str | Path = "results") -> Path:
    """Where a scale's tidy file is: ``<results>/<scale>/cells.csv`` (``results``: the config's ``paths.results``)."""
    return Layout.of(results, scale).cells()["csv"]


def load(scale: str, results: str | Path = "results"):
    """Every cell of every table built at ``scale`` as a pandas DataFrame, its columns those of the file
    (tradeoff.report.cells.FIELDS: accuracies in % with their 95% Wilson interval per seed, the flags of a cell as
    booleans, an empty field as missing). UserError naming the file where it has not been built."""
    import pandas as pd

    file = path(scale, results)
    if not file.is_file():
        raise UserError(f"{file} does not exist: build the summary first (`tradeoff --config config/config.yaml "
                        f"--config config/{scale}.yaml report --all`, or `snakemake`)")
    frame = pd.read_csv(file, keep_default_na=False, na_values=[""])
    for column in _COUNTS:
        if column in frame:
            frame[column] = frame[column].astype("Int64")
    return frame
