"""``tradeoff download DATASET``: download and verify a dataset, then write its download marker."""

from __future__ import annotations

import json

from tradeoff import config as cfg
from tradeoff import data
from tradeoff.storage.atomic import atomic_write_text
from tradeoff.storage.layout import ready_marker

#: a job of the pipeline: it keeps the resolved catalog for the next job (tradeoff.config.load_catalog)
JOB = True


def add_parser(sub) -> None:
    p = sub.add_parser("download", help="download and verify a dataset")
    p.add_argument("dataset")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    folder = data.download(args.dataset, catalog.data_root)
    # the same bytes at every download (no time): DVC versions it, and a re-download must not re-run what reads it
    atomic_write_text(ready_marker(catalog.data_root, args.dataset),
                      json.dumps({"dataset": args.dataset, "folder": str(folder)}) + "\n")
    print(f"{args.dataset}: ready in {folder}")
    return 0
