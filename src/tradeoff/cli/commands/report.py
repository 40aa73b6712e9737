"""``tradeoff report``: build targets (tables, figures, groups) straight from the metrics files (no checkpoint, no
Snakemake): seconds."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.report.build import build_target
from tradeoff.report.summary import build_summary

JOB = True  # keeps the resolved catalog for the next job


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="build targets (tables, figures, groups) from metrics files only")
    p.add_argument("targets", nargs="*")
    p.add_argument("--all", action="store_true", help="every target, and the summary page")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    # --all: members before the groups that list them (a group's page read after its members were rewritten would
    # be older than they are, and Snakemake would make it again)
    names = sorted(catalog.targets, key=lambda t: _depth(catalog, t)) if args.all else args.targets
    if not names:
        raise cfg.ConfigError("report: name one or more targets, or --all")
    for name in names:
        if name not in catalog.targets:
            raise cfg.ConfigError(f"unknown target {name!r}; allowed: {sorted(catalog.targets)}")
        paths = build_target(catalog, name)
        print(f"{name}: " + ", ".join(str(p) for p in paths))
    if args.all:
        print(f"summary: {build_summary(catalog)['md']}")
    return 0


def _depth(catalog: cfg.Catalog, name: str) -> int:
    """0 for a table or figure, 1 + its deepest member's for a group."""
    members = catalog.targets[name].targets if catalog.targets[name].kind == "group" else ()
    return 1 + max((_depth(catalog, m) for m in members), default=0) if members else 0
