"""``tradeoff bench-train --run R``: time training steps of a run's method and model (synthetic data)."""

from __future__ import annotations

import argparse

from tradeoff import config as cfg
from tradeoff.cli.common import known_run
from tradeoff.core.runtime import Runtime
from tradeoff.pipeline.bench.train import bench_train, write_bench

GPU = True  # computes on a GPU: on a machine with several, takes one of its own (tradeoff.core.gpus)


def add_parser(sub) -> None:
    p = sub.add_parser("bench-train", help="time training steps of a run's method and model (synthetic data)")
    p.add_argument("--run", required=True)
    p.add_argument("--batch-size", type=int, help="default: the run's")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", choices=["fp32", "bf16"],
                   help="training precision (bf16: autocast, CUDA only); default: the config's runtime.precision")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True, help="(CUDA)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False, help="torch.compile")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    run_id = known_run(catalog, args.run)
    changes = {"channels_last": args.channels_last}
    if args.precision:
        changes["precision"] = args.precision
    if args.device:
        changes["device"] = args.device
    runtime = Runtime.from_config(catalog.with_runtime(**changes).runtime_settings)
    result = bench_train(run_id, catalog.runs[run_id], runtime=runtime,
                         batch_size=args.batch_size, steps=args.steps, warmup=args.warmup, compile_model=args.compile)
    path = write_bench(result, catalog.layout.bench)
    peak = f", {result['fraction_of_peak']:.1%} of peak" if result["fraction_of_peak"] else ""
    print(f"{run_id} on {result['device']}: {result['images_per_s']:.1f} images/s, "
          f"{result['seconds_per_epoch']:.1f} s/epoch, {result['achieved_tflops']:.3f} TFLOP/s{peak} -> {path}")
    return 0
