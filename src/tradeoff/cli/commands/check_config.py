"""``tradeoff check-config``: validate the configuration and summarise it."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.report.claims import load_claims


def add_parser(sub) -> None:
    sub.add_parser("check-config", help="validate the configuration and summarise it").set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    runs = catalog.training_runs()
    claims = load_claims(catalog)
    print(f"configuration OK: scale {catalog.scale}, {len(catalog.runs)} runs ({len(runs)} training jobs), "
          + (f"{len(catalog.externals)} external models, " if catalog.externals else "")
          + f"{len(catalog.attacks)} attacks, {len(catalog.targets)} targets"
          + (f", {len(claims)} claims" if claims else ""))
    return 0
