"""``tradeoff bench-ratios``: CPU cost ratios, measured interleaved (a PGD step with input gradients only over one
with weight gradients; the training-step time of one run over another's)."""

from __future__ import annotations

import json

from tradeoff import config as cfg
from tradeoff.cli.common import known_run
from tradeoff.pipeline.bench.ratios import epoch_time_ratio, pgd_step_ratio
from tradeoff.storage.atomic import atomic_write_text


def add_parser(sub) -> None:
    p = sub.add_parser("bench-ratios", help="CPU cost ratios, measured interleaved: a PGD step with input "
                       "gradients only over one with weight gradients, and training-step time of RUN_A over RUN_B")
    p.add_argument("--arch", default="resnet18")
    p.add_argument("--dataset", default="cifar10")
    p.add_argument("--compare", nargs="*", default=[], metavar="RUN_A/RUN_B")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    results = {"pgd_step_input_only_vs_weights": pgd_step_ratio(args.arch, args.dataset)}
    for a, b in (pair.split("/") for pair in args.compare):
        results[f"{a} / {b}"] = epoch_time_ratio(catalog, known_run(catalog, a), known_run(catalog, b))
    for key, r in results.items():
        print(f"{key}: {r['ratio']:.3f}")
    path = catalog.layout.bench / "ratios-cpu.json"
    atomic_write_text(path, json.dumps(results, indent=1) + "\n")
    print(f"-> {path}")
    return 0
