"""``tradeoff summary``: every target, built or missing, and its largest differences from the paper."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.report.summary import build_summary

JOB = True  # keeps the resolved catalog for the next job


def add_parser(sub) -> None:
    sub.add_parser("summary", help="every target: built or missing, and its largest differences from the paper"
                   ).set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    paths = build_summary(catalog)
    print(paths["md"].read_text())
    return 0
