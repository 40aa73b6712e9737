"""``tradeoff train --run R``: train (or resume) one run."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.cli.common import known_run
from tradeoff.core.runtime import Runtime
from tradeoff.storage.layout import RunPaths
from tradeoff.training.train import train

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


def train_run(catalog: cfg.Catalog, run_id: str) -> RunPaths:
    """A run of the catalog that is its own training job, trained with the catalog's runtime, data and results
    folders (training itself takes the run's spec and these paths, never the catalog); an adapter model's backbone is
    looked for before any work."""
    if catalog.train_id[run_id] != run_id:
        raise cfg.ConfigError(f"run {run_id!r} has the same settings as {catalog.train_id[run_id]!r} and is "
                              f"trained as that run; train {catalog.train_id[run_id]!r}")
    catalog.pretrained_checkpoint(run_id, must_exist=True)
    runtime = Runtime.from_config(catalog.runtime_settings, catalog.scale)
    return train(run_id, catalog.runs[run_id], results=catalog.results, data_root=catalog.data_root,
                 runtime=runtime, eval_batch_size=catalog.runtime_settings.eval_batch_size)
