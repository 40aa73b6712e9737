"""``tradeoff gpu-check``: on a GPU, every method's step against the CPU's, bf16 against fp32, bench-train and
bench-eval, the rehearsal at paper shape, a demo run in fp32 and bf16; one report in the bench folder
(tradeoff.pipeline.bench.gpucheck; its report: tradeoff.pipeline.bench.check_report)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tradeoff import config as cfg
from tradeoff.pipeline.bench import check_report, gpucheck

GPU = True  # computes on a GPU: on a machine with several, takes one of its own (tradeoff.core.gpus)


def add_parser(sub) -> None:
    p = sub.add_parser("gpu-check", help="on a GPU: every method's step against the CPU's, bf16 against fp32, "
                                         "Generalist's parallel mode against serial, bench-train and bench-eval, "
                                         "the table1a rehearsal at paper shape against the plan, a demo run trained "
                                         "in fp32 and bf16; one JSON and markdown report in the bench folder")
    p.add_argument("--cpu-only", action="store_true", help="without CUDA: the same checks, the CPU against itself")
    p.add_argument("--batch", type=int, default=16, help="batch of the compared steps (default 16)")
    p.add_argument("--images", type=int, default=1000, help="images of bench-eval (default 1000)")
    p.add_argument("--steps", type=int, default=20, help="timed steps of bench-train (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps of bench-train (default 3)")
    p.add_argument("--rehearsal", action=argparse.BooleanOptionalAction, default=True,
                   help="the table1a rehearsal through Snakemake at paper shape (config/rehearsal.yaml), measured "
                        "seconds per epoch beside the plan's")
    p.add_argument("--precision-check", action=argparse.BooleanOptionalAction, default=True,
                   help="a demo-scale run trained in fp32 and in bf16 from one seed: clean and PGD accuracy, McNemar")
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help="wall-clock seconds for the whole check: each section gets its share, a section out of time "
                        "stops and says so, and the report is written after every section (scripts/gpu-node.sh)")
    p.add_argument("--out", metavar="DIR", help="write the report here (default: the scale's bench folder)")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    root = Path.cwd() if (Path.cwd() / "Snakefile").is_file() else None  # the workflow folder (cli.enter_workflow)
    demo = root / "config" / "demo.yaml" if root else None

    def where(report: dict) -> tuple[Path, Path]:
        slug = check_report.device_slug(report["device"])
        if args.out is None:
            return catalog.layout.gpu_check(slug)
        return Path(args.out) / f"gpu-check-{slug}.json", Path(args.out) / f"gpu-check-{slug}.md"

    try:
        report = gpucheck.gpu_check(catalog, cpu_only=args.cpu_only, batch=args.batch, images=args.images,
                           bench_steps=args.steps, bench_warmup=args.warmup, root=root if args.rehearsal else None,
                           demo=cfg.load_catalog([root / "config" / "config.yaml", demo])
                           if args.precision_check and demo and demo.is_file() and not args.cpu_only else None,
                           budget=None if args.budget is None else args.budget - gpucheck.process_seconds(),
                           on_progress=lambda r: check_report.write_report(r, where(r)))
    except gpucheck.NoCuda as exc:
        print(f"tradeoff: gpu-check: {exc}", file=sys.stderr)
        return 1
    paths = check_report.write_report(report, where(report))
    # the report's own verdict (its first line says the same); nothing measured is no pass
    print(f"gpu-check on {report['device']}: {check_report.verdict(report)}; report: {paths[1]} (and {paths[0].name})")
    return 0 if report["ok"] else 1
