"""``tradeoff analyze TARGET``: a figure's analysis job (t-SNE, image grid, synthetic experiment): read its runs'
checkpoints, write results/<scale>/analysis/<target>.json."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.analysis import run_analysis

JOB = True  # keeps the resolved catalog for the next job
GPU = True  # computes on a GPU: on a machine with several, takes one of its own (tradeoff.core.gpus)


def add_parser(sub) -> None:
    p = sub.add_parser("analyze", help="run a figure's analysis job (t-SNE, image grid, synthetic experiment)")
    p.add_argument("target")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    if args.target not in catalog.analysis_targets():
        raise cfg.ConfigError(f"analyze: {args.target!r} is not a figure with an analysis; allowed: "
                              f"{catalog.analysis_targets()}")
    print(f"{args.target}: {run_analysis(catalog, args.target)}")
    return 0
