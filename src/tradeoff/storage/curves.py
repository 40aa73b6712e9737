"""A run's training curves, logged with dvclive (DVC's own logger) and read back as rows.

The trainer logs each epoch's row as it ends (``plots/metrics/<column>.tsv``, step = the 1-based epoch, and
``metrics.json`` with the latest values), so ``dvc exp show`` shows a running experiment's metrics and ``dvc plots
diff`` overlays its curves; at the end, the selection's measurements go into ``metrics.json`` under ``selected``. The
reports read the same files (:func:`read_curves`).

The curves are DVC outputs, so they hold only what the epochs computed: what the clock and the machine give (each
epoch's seconds and images/s, the device's name) is logged by the trainer into the model's sidecar
(tradeoff.storage.provenance), not here, and a faithful rebuild logs the same bytes.

A value that was not measured (the robust accuracy between two ``best_robust`` measurements, the learning rate of a
method without an optimizer) is not logged: its curve has no point at that epoch, and :func:`read_curves` gives None.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from tradeoff.storage.atomic import atomic_write_text
from tradeoff.storage.layout import RAN_ON

#: the fields of an epoch's row that the clock and the machine give, not the computation: never logged here (the
#: curves are DVC outputs); the trainer keeps them in its state (a resumed run keeps its epochs' times) and writes
#: them to the model's sidecar (:func:`clocked`), whence the reports read the training time and the device
CLOCKED = ("seconds", "images_per_s", "track_seconds", "device")


def clocked(rows: list[dict]) -> list[dict]:
    """Each epoch's CLOCKED fields (with its ``epoch``): what a model's sidecar records of its training."""
    return [{"epoch": row["epoch"], **{k: row[k] for k in CLOCKED if k in row}} for row in rows]


def _live_class():
    from dvclive import Live  # imported by training jobs only (0.3 s)

    class CurveLive(Live):
        """dvclive without its repository hook, which opens the DVC repository at every start (0.35 s) to name an
        experiment and save it, and runs `dvc init` in a git repository that has none: this logger never saves an
        experiment nor edits dvc.yaml (the stages declare its files; ``dvc exp run`` records them)."""

        def _init_dvc(self):
            pass

    return CurveLive


class CurveLog:
    """The curves of one training job, in ``folder``. ``rows``: the epochs already trained (a resumed run's, from its
    state): the folder is rewritten from them, so that a run stopped at any point and resumed logs exactly what an
    uninterrupted run logs (dvclive's own resume would keep an epoch logged after the state it resumes from)."""

    def __init__(self, folder: Path, rows: list[dict]):
        self.live = _live_class()(str(folder), resume=False, report=None, dvcyaml=False, save_dvc_exp=False)
        self.folder, self.ran_on = Path(folder), {}
        for row in rows:
            self.epoch(row)

    def epoch(self, row: dict) -> None:
        """Log one epoch's row (``epoch`` and its measurements; its CLOCKED fields are left out). Text values (what
        the epoch ran in: ``precision``) are no curve, nor a metric for ``dvc exp show`` to list: they go into
        ``ran_on.json`` beside, per epoch (a resumed run may span machines)."""
        row = {k: v for k, v in row.items() if k not in CLOCKED}
        self.live.step = int(row["epoch"])
        text = {k: v for k, v in row.items() if isinstance(v, str)}
        if text:
            self.ran_on[str(int(row["epoch"]))] = text
            atomic_write_text(self.folder / RAN_ON, json.dumps(self.ran_on, indent=1) + "\n")
        for key, value in row.items():
            if key != "epoch" and key not in text and value is not None and math.isfinite(value):
                self.live.log_metric(key, value)
        self.live.make_summary()

    def finish(self, selected: dict | None = None) -> None:
        """Close the log; ``selected``: the selection's result (its epoch and that epoch's measurements), in
        metrics.json."""
        if selected is not None:
            self.live.summary["selected"] = selected
        self.live.end()


def read_curves(folder: Path) -> list[dict] | None:
    """The rows a run logged, one per epoch: ``{"epoch": e, column: float or None, ...}`` with every column that any
    epoch logged (None where that epoch did not measure it); None when the run has no curves."""
    files = sorted(Path(folder).glob("plots/metrics/**/*.tsv"))
    if not files:
        return None
    columns: dict[str, dict[int, float]] = {}
    for path in files:
        with open(path, newline="") as f:
            reader = csv.reader(f, delimiter="\t")
            _, name = next(reader)
            columns[name] = {int(step): float(value) for step, value in reader}
    epochs = sorted({e for values in columns.values() for e in values})
    return [{"epoch": e, **{name: values.get(e) for name, values in columns.items()}} for e in epochs]


def read_ran_on(folder: Path) -> dict:
    """``ran_on.json``: epoch -> what it ran in (``precision``; a file written before the sidecars also has the
    ``device``); empty when none was logged."""
    path = Path(folder) / RAN_ON
    return json.loads(path.read_text()) if path.exists() else {}


def read_summary(folder: Path) -> dict:
    """metrics.json: each column's last value, ``step`` and ``selected``."""
    return json.loads((Path(folder) / "metrics.json").read_text())
