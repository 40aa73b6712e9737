"""What several subcommands share: checking a --run, making a file named on the command line absolute."""

from __future__ import annotations

from pathlib import Path

from tradeoff.config import Catalog, ConfigError, unknown

LIST_TARGETS = "`tradeoff list targets` lists them"


def known_run(catalog: Catalog, run_id: str) -> str:
    """``run_id`` if it is a run of the catalog, else the configuration error naming --run."""
    if run_id not in catalog.runs:
        raise ConfigError("--run: " + unknown("run", run_id, catalog.runs, "`tradeoff list runs` lists them"))
    return run_id


def absolute(path: str) -> str:
    """A file named on the command line, absolute: the commands work from the workflow's folder
    (tradeoff.cli.enter_workflow)."""
    return str(Path(path).absolute())
