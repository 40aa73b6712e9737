"""``tradeoff plan TARGET``: GPU-hours of every job of a target, the makespan on N GPUs, and the cluster jobs
Snakemake submits for it. Instant: FLOPs from tradeoff.pipeline.costs' formulas and table (no PyTorch)."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.audit.jobs import audit_targets
from tradeoff.pipeline.costs import format_plan, plan


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help="GPU-hours of every job of a target, the makespan on N GPUs, and the cluster "
                                    "jobs Snakemake submits for it with what they ask for")
    p.add_argument("target")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--device", choices=["h100", "h200", "a100", "rtx3090", "v100"],
                   help="default: the config's resources.plan.device (what cluster jobs are sized for)")
    # the audit targets (`audit_<table>`) are priced beside the catalog's targets
    p.set_defaults(func=run, more_targets=audit_targets)


def run(args, catalog: cfg.Catalog) -> int:
    print(format_plan(plan(catalog, args.target, args.gpus, args.device, catalog.layout.bench)))
    return 0
