"""The one owner of the results layout: every file that a job reads or writes, and nothing else.

Each scale has its own folder, ``<paths.results>/<scale>/`` (``results/paper``, ``results/demo``, ``results/smoke``), so
a model or a metrics file of one scale can never stand in another scale's table:

    checkpoints/<run>/model.pt        a trained run's selected model
    curves/<run>/                     its per-epoch curves, dvclive's folder (tradeoff.storage.curves): metrics.json (the latest
                                      values and the selection's), plots/metrics/<column>.tsv
    work/<run>/                       its epoch states (resume)
    work/eval/<run>/<attack>...       an evaluation's resume state, a shard's partial result
    work/catalog/<key>.json           resolved catalogs (tradeoff.config's cache)
    metrics/<run>/<unit>.json         an evaluation job's numbers and how they were made: one attack's (<attack>.json),
                                      or all of a run's (all.json, runtime.eval_unit: run); <run> may also be an
                                      external model (the config's `external:`, or `evaluate --checkpoint --name`)
    predictions/<run>/<unit>.json     its per-example correctness
    analysis/<target>.json            a figure's analysis
    tables/<target>.{md,csv,tex,html} figures/<target>.{png,pdf} summary.{md,html}
    figures/claims.{png,pdf}          the papers' claims: each effect with its interval (the summary's forest plot)
    cells.csv (cells.parquet)         every cell of every table, one line per (target, row, column, seed)
    work/report/<target>.json         what a report job last built from (it skips a target whose inputs are unchanged)
    logs/<step>/...                   every job's log (<name>.log: its last start; <name>.history.log: all of them)
    bench/                            timings
    robustbench/<dataset>/<threat>/<run>.json   a run's or an external model's RobustBench model-info file
    audit/<model>.{json,md,html,png,pdf}        `tradeoff audit`'s record, page and figure of a run or external model
    <output>.provenance.json          beside a model.pt, a metrics file, an analysis or an audit record: how that
                                      output was made (:meth:`Layout.sidecar`)

An output's bytes depend only on what was computed (weights, settings, measured values), so that a faithful rebuild
has the same hashes and DVC sees it unchanged; what varies by commit, host or clock (the git commit, the package
versions, the device's name, seconds, images/s) goes into the output's sidecar, ``<output>.provenance.json``
(tradeoff.storage.provenance writes and reads it). A sidecar is neither a DVC nor a Snakemake output, and
``.dvcignore`` keeps it out of the folders that the report stages depend on.

Python code, the Snakemake rules and the DVC stages all build paths here; the arguments may be Snakemake wildcard
patterns (``"{run}"``), since a path is only joined, never inspected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SIDECAR_SUFFIX = ".provenance.json"  # an output's sidecar: <output>.provenance.json (Layout.sidecar)
RAN_ON = "ran_on.json"  # what each epoch of a training job ran on, in its curves folder (tradeoff.storage.curves)

TABLE_FORMATS = ("md", "csv", "tex", "html")
# The version of a metrics file's record (tradeoff.evaluation.records writes it, tradeoff.report.records checks it);
# 3: an attack's record counts its invalid examples (``invalid``) and holds the bound it was checked against (``bound``)
METRICS_FORMAT = "tradeoff-metrics/3"
# A run's evaluations in one file (runtime.eval_unit: run): {"format", "run", "evaluations": {attack: record}}
SUITE_FORMAT = "tradeoff-evaluations/1"
FIGURE_FORMATS = ("png", "pdf")
AUDIT_FORMATS = ("json", "md", "html", "png", "pdf", "flags")
#: an audit's files by kind: the record, the page, its figure, and every measurement's per-example flags (compressed)
AUDIT_SUFFIXES = {"json": "json", "md": "md", "html": "html", "png": "png", "pdf": "pdf",
                  "flags": "flags.json.gz"}


@dataclass(frozen=True)
class RunPaths:
    """Where a trained run's files live."""

    model: Path     # the selected model (the run's output)
    curves: Path    # per-epoch metrics, dvclive's folder
    state: Path     # folder of epoch states (resume)


@dataclass(frozen=True)
class Layout:
    """The files of one scale, under ``root`` = ``<paths.results>/<scale>``."""

    root: Path

    @classmethod
    def of(cls, results: str | Path, scale: str) -> "Layout":
        return cls(Path(results) / scale)

    @staticmethod
    def sidecar(output: str | Path) -> Path:
        """Where an output's provenance and timings live (``<output>.provenance.json``, beside it): not hashed by DVC
        with the output, so that a rebuild at another commit, on another host or at another speed leaves the
        output's bytes unchanged. Any output path: a file of this layout, or one a user named."""
        output = Path(output)
        return output.with_name(output.name + SIDECAR_SUFFIX)

    @staticmethod
    def is_sidecar(path: str | Path) -> bool:
        """Whether a file is an output's sidecar (what a reader listing a folder's ``*.json`` skips)."""
        return Path(path).name.endswith(SIDECAR_SUFFIX)

    def run(self, run_id: str) -> RunPaths:
        return RunPaths(self.model(run_id), self.curves(run_id), self.states(run_id))

    def model(self, run_id: str) -> Path:
        return self.root / "checkpoints" / run_id / "model.pt"

    def curves(self, run_id: str) -> Path:
        return self.root / "curves" / run_id

    def curve_files(self, run_id: str) -> tuple[Path, Path, Path]:
        """What a training job writes in its curves folder: dvclive's metrics file and folder of plots (dvc.yaml's
        ``metrics`` and ``plots`` of a training stage), and what each epoch ran on (an out: the reports read it)."""
        folder = self.curves(run_id)
        return folder / "metrics.json", folder / "plots" / "metrics", folder / RAN_ON

    def states(self, run_id: str) -> Path:
        return self.root / "work" / run_id

    def metrics(self, run_id: str, attack: str) -> Path:
        return self.root / "metrics" / run_id / f"{attack}.json"

    def predictions(self, run_id: str, attack: str) -> Path:
        return self.root / "predictions" / run_id / f"{attack}.json"

    def eval_work(self, run_id: str, attack: str, shard: tuple | None = None, suffix: str = ".state") -> Path:
        """An evaluation job's resume state (``.state``) or a shard's partial result (``.json``):
        ``<attack>.state``, ``<attack>.shard-K-of-N.state``, ``<attack>.shard-K-of-N.json``."""
        name = attack if shard is None else f"{attack}.shard-{shard[0]}-of-{shard[1]}"
        return self.root / "work" / "eval" / run_id / f"{name}{suffix}"

    def analysis(self, target: str) -> Path:
        return self.root / "analysis" / f"{target}.json"

    def tables(self, target: str) -> dict[str, Path]:
        return {ext: self.root / "tables" / f"{target}.{ext}" for ext in TABLE_FORMATS}

    def figures(self, target: str) -> dict[str, Path]:
        return {ext: self.root / "figures" / f"{target}.{ext}" for ext in FIGURE_FORMATS}

    def summary(self) -> dict[str, Path]:
        """The summary job's files: its page (md, html) and every cell of every table in one tidy file (csv)."""
        return {"md": self.root / "summary.md", "html": self.root / "summary.html", "csv": self.cells()["csv"]}

    def cells(self) -> dict[str, Path]:
        """Every cell of every table, a line per (target, row, column, seed): ``cells.csv``, and ``cells.parquet``
        where pandas has a Parquet engine (tradeoff.report.cells writes them, ``tradeoff.results.load`` reads them)."""
        return {"csv": self.root / "cells.csv", "parquet": self.root / "cells.parquet"}

    def claims_figure(self) -> dict[str, Path]:
        """The claims' forest plot (each claim's effect with its interval, coloured by verdict), beside the figures."""
        return {ext: self.root / "figures" / f"claims.{ext}" for ext in FIGURE_FORMATS}

    def report_stamp(self, name: str) -> Path:
        """What a report job last built from (its inputs' and code's digest, its outputs' hashes): a job whose inputs
        and code are unchanged and whose outputs are intact does no work (tradeoff.report.build)."""
        return self.root / "work" / "report" / f"{name}.json"

    def log(self, step: str, *names: str) -> Path:
        """``logs/<step>/<name>/.../<last>.log``: training, evaluation, report and analysis jobs' logs."""
        *folders, last = names
        return self.root.joinpath("logs", step, *folders, f"{last}.log")

    def robustbench(self, dataset: str, threat_model: str, run_id: str) -> Path:
        """A model-info file for RobustBench's leaderboard (``tradeoff export robustbench``), in the folders of
        RobustBench's own ``model_info/<dataset>/<threat model>/<model>.json``."""
        return self.root / "robustbench" / dataset / threat_model / f"{run_id}.json"

    def audit(self, model_id: str) -> dict[str, Path]:
        """An audit of a model's evaluation (``tradeoff audit``): record (json), page (md, html), figure (png, pdf),
        per-example flags (flags: compressed)."""
        return {kind: self.folder("audit") / f"{model_id}.{AUDIT_SUFFIXES[kind]}" for kind in AUDIT_FORMATS}

    FOLDERS = ("checkpoints", "curves", "metrics", "predictions", "analysis", "tables", "figures", "audit")

    def folder(self, kind: str) -> Path:
        """The folder holding every file of one kind (``checkpoints``, ``metrics``, ...): what a job that reads all
        of them depends on (DVC's report stages)."""
        if kind not in self.FOLDERS:
            raise ValueError(f"no results folder {kind!r}; allowed: {', '.join(self.FOLDERS)}")
        return self.root / kind

    @property
    def bench(self) -> Path:
        return self.root / "bench"

    def gpu_check(self, device: str) -> tuple[Path, Path]:
        """`tradeoff gpu-check`'s report on a device (a slug of its name): JSON and markdown, in bench/."""
        stem = self.bench / f"gpu-check-{device}"
        return stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".md")

    @property
    def gpu_check_work(self) -> Path:
        """`tradeoff gpu-check`'s own files: the overlay of its rehearsal, the runs of its bf16-against-fp32 check."""
        return self.bench / "gpu-check-work"

    @property
    def catalog_cache(self) -> Path:
        return self.root / "work" / "catalog"


def log_history(log: str | Path) -> Path:
    """Where every start of a job appends its log (``<name>.history.log`` beside ``<name>.log``): Snakemake deletes a
    job's log file each time it starts the job, so the lines of a killed or preempted try live on here."""
    log = Path(log)
    return log.with_name(f"{log.name.removesuffix('.log')}.history.log")


def bits(flags) -> str:
    """Per-example outcomes (a tensor or any sequence of booleans) as the files store them: a string of '0'/'1'."""
    return "".join("1" if v else "0" for v in (flags.tolist() if hasattr(flags, "tolist") else flags))


def ready_marker(data_root: str | Path, dataset: str) -> Path:
    """The file a finished download writes (and every job that reads the dataset waits for)."""
    return Path(data_root) / ".ready" / dataset


def read_analysis(catalog, target: str) -> dict | None:
    """A figure's analysis result (``tradeoff analyze``'s JSON), None before the analysis has run."""
    path = catalog.layout.analysis(target)
    return json.loads(path.read_text()) if path.exists() else None
