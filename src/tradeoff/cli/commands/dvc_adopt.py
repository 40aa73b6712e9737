"""``tradeoff dvc-adopt`` (``make dvc-adopt``): record a complete Snakemake build as the DVC pipeline's outputs, file
times unchanged, so that `dvc status` is up to date and `snakemake -n` still has nothing to do
(tradeoff.pipeline.dvc_adopt; docs/dvc.md)."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.pipeline.dvc_adopt import adopt


def add_parser(sub) -> None:
    sub.add_parser("dvc-adopt", help="after a Snakemake build (make demo): record its outputs in dvc.lock (dvc commit, "
                   "file times unchanged) so that dvc status is up to date").set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    done = adopt(".")
    restored = f"; {done['restored']} file times put back" if done["restored"] else ""
    what = f"targets {' '.join(done['targets'])}" if done["targets"] else "every target"
    print(f"dvc-adopt: the {done['scale']} scale's Snakemake build ({what}) recorded in dvc.lock, file times "
          f"unchanged ({done['files']} files watched{restored}); dvc status: {done['status']}")
    return 0
