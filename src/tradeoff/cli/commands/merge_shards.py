"""``tradeoff merge-shards``: merge the shards of one evaluation into its metrics and predictions."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.pipeline.evaluation_jobs import merge_shards

JOB = True  # keeps the resolved catalog for the next job


def add_parser(sub) -> None:
    p = sub.add_parser("merge-shards", help="merge the shards of one evaluation into its metrics and predictions")
    p.add_argument("--run", required=True, help="a run, or an external model")
    p.add_argument("--attack", required=True)
    p.add_argument("--shards", type=int, help="default: the configured number (attack `shards` or runtime.eval_shards)")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    shards, result = merge_shards(catalog, args.run, args.attack, args.shards)
    print(f"{catalog.train_id[args.run]} / {args.attack}: accuracy {result['accuracy']:.4f} merged from {shards} "
          f"shards (clean {result['clean_accuracy']:.4f}, {result['examples']} examples, {result['seconds']:.1f} s)")
    return 0
