"""``tradeoff train --run R``: train (or resume) one run."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.cli.common import known_run
from tradeoff.training.train import train_run

JOB = True  # keeps the resolved catalog for the next job
GPU = True  # computes on a GPU: on a machine with several, takes one of its own (tradeoff.core.gpus)


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train (or resume) one run")
    p.add_argument("--run", required=True)
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    run_id = known_run(catalog, args.run)
    paths = train_run(catalog, run_id)
    print(f"{run_id}: model {paths.model}, curves {paths.curves}")
    return 0
