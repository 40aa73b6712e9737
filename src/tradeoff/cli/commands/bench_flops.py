"""``tradeoff bench-flops``: count the pass FLOPs of every (architecture, dataset) of the shipped scales and of the
given config into tradeoff/pipeline/flops.json, the table that ``plan`` and the Snakefile size jobs with."""

from __future__ import annotations

import sys

from tradeoff import config as cfg
from tradeoff.pipeline.bench.flops import SHIPPED_SCALES, flops_table, format_flops_table
from tradeoff.pipeline.costs import FLOPS_FILE, load_table
from tradeoff.storage.atomic import atomic_write_text


def add_parser(sub) -> None:
    p = sub.add_parser("bench-flops", help="count the FLOPs of one pass of every architecture of the shipped scales "
                                           "(and of --config's) into tradeoff/pipeline/flops.json, which plan and "
                                           "Snakemake size jobs with")
    p.add_argument("--recount", action="store_true", help="count every entry again (default: the missing ones)")
    p.add_argument("--check", action="store_true", help="count everything, write nothing, exit 1 if the file differs")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    catalogs = [cfg.load_catalog([cfg.ROOT / f for f in files]) for files in SHIPPED_SCALES] + [catalog]
    known = load_table()
    table = flops_table(catalogs, known=known, recount=args.recount or args.check)
    text = format_flops_table(table)
    if args.check:
        if not FLOPS_FILE.exists() or FLOPS_FILE.read_text() != text:
            print(f"stale: {FLOPS_FILE}; run `tradeoff bench-flops --recount`", file=sys.stderr)
            return 1
        print(f"{FLOPS_FILE}: current ({len(table['passes'])} architectures x datasets)")
        return 0
    atomic_write_text(FLOPS_FILE, text)
    print(f"wrote {FLOPS_FILE} ({len(table['passes'])} architectures x datasets)")
    return 0
