"""``tradeoff bench-eval``: time the evaluation suite on a checkpoint (images/s per attack)."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.cli.common import known_run
from tradeoff.pipeline.bench.evaluate import bench_eval, format_bench_eval

GPU = True  # computes on a GPU: on a machine with several, takes one of its own (tradeoff.core.gpus)


def add_parser(sub) -> None:
    p = sub.add_parser("bench-eval", help="time the evaluation suite on a checkpoint: images/s per attack")
    p.add_argument("--run", required=True, help="the run whose model and test set are used")
    p.add_argument("--checkpoint", help="default: the run's results/<scale>/checkpoints/<run>/model.pt")
    p.add_argument("--target", default="table1a", help="time the attacks of this table's columns (default table1a)")
    p.add_argument("--attacks", help="comma-separated attack names instead of --target's")
    p.add_argument("--workers", type=int, default=1, help="attacks timed in parallel processes (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker (default 1)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    run_id = known_run(catalog, args.run)
    result = bench_eval(catalog, run_id, checkpoint=args.checkpoint, target=args.target,
                        attacks=args.attacks.split(",") if args.attacks else None, workers=args.workers,
                        threads=args.threads, device=args.device, out_dir=catalog.layout.bench)
    print(format_bench_eval(result))
    return 0
