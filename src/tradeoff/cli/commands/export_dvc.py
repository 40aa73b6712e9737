"""``tradeoff export-dvc``: write dvc.yaml and jobs.json, the DVC pipeline, from the catalog
(tradeoff.pipeline.dvc_export); the pipeline's ``resolve`` stage runs it with ``--jobs``."""

from __future__ import annotations

import sys
from pathlib import Path

from tradeoff import config as cfg
from tradeoff.audit.jobs import audit_targets
from tradeoff.cli.common import LIST_TARGETS
from tradeoff.pipeline.dvc_export import PARAMS, Stale, config_files, default_files, export


def add_parser(sub) -> None:
    p = sub.add_parser("export-dvc", help="write dvc.yaml and jobs.json (the DVC pipeline) from the catalog")
    p.add_argument("--check", action="store_true", help="exit 1 if the files on disk are stale")
    p.add_argument("--jobs", action="store_true",
                   help="write jobs.json only, and exit 1 if dvc.yaml is stale (the pipeline's resolve stage)")
    p.add_argument("--targets", nargs="+", default=[], metavar="TARGET",
                   help="only the stages these targets need (default: every target)")
    # the targets are checked here, against the catalog the stages read (with params.yaml), not by tradeoff.cli
    p.set_defaults(func=run, own_targets=True)


def run(args, catalog: cfg.Catalog) -> int:
    files = config_files(args.config if args.config_given else default_files())  # the stages' files: + params.yaml
    read = [f for f in files if f != PARAMS or Path(f).exists()]  # none yet: an empty overlay (export writes it)
    chosen = catalog if read == args.config else cfg.load_catalog(read)
    for name in args.targets:
        if name not in chosen.targets and name not in audit_targets(chosen):
            raise cfg.ConfigError("export-dvc: " + cfg.unknown("target", name, chosen.targets, LIST_TARGETS))
    try:
        written = export(chosen, files, args.targets, check=args.check, jobs_only=args.jobs)
    except Stale as exc:
        print(f"tradeoff export-dvc: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0
