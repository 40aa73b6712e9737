"""``tradeoff check-config``: validate the configuration and summarise it.

Its checks are the configuration's one validator: :func:`checked_catalog` is what every subcommand runs first (the
command line's ``load_catalog``) with the claims, and what the Snakefile runs before any job (workflow/rules/
common.smk), which prints the same one line and exits with the same status, 2."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from tradeoff import config as cfg
from tradeoff.pipeline.costs import JobSizes
from tradeoff.report.claims import load_claims


def add_parser(sub) -> None:
    sub.add_parser("check-config", help="validate the configuration and summarise it").set_defaults(func=run)


def checked_catalog(files: Iterable[str | Path], *, write_cache: bool = False) -> cfg.Catalog:
    """The catalog of these config files, checked as `tradeoff check-config` checks it: the schema (on the config as
    expanded run by run), every name, range and file, the claims (config/claims.yaml) against the catalog, and the
    cost plan's settings (``resources.plan``, which sizes every cluster job). ConfigError (one line naming the key)
    for the first problem."""
    catalog = cfg.load_catalog(list(files), write_cache=write_cache)
    load_claims(catalog)
    JobSizes(catalog, bench_folder=catalog.layout.bench)
    return catalog


def run(args, catalog: cfg.Catalog) -> int:
    runs = catalog.training_runs()
    claims = load_claims(catalog)
    print(f"configuration OK: scale {catalog.scale}, {len(catalog.runs)} runs ({len(runs)} training jobs), "
          + (f"{len(catalog.externals)} external models, " if catalog.externals else "")
          + f"{len(catalog.attacks)} attacks, {len(catalog.targets)} targets"
          + (f", {len(claims)} claims" if claims else ""))
    return 0
