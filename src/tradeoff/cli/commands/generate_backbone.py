"""``tradeoff generate-backbone ARCH``: a generated backbone checkpoint (random weights) for the rehearsal scale."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.models import adapters


def add_parser(sub) -> None:
    p = sub.add_parser("generate-backbone", help="write a generated backbone checkpoint for an adapter architecture "
                       "at its pretrained.<arch> path (only at a scale with scale_map.generated_data: the rehearsal)")
    p.add_argument("arch")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    if not catalog.generated_data:
        raise cfg.ConfigError(f"generate-backbone: scale {catalog.scale!r} reads real backbones only; generated "
                              "ones are for a scale with scale_map.generated_data (config/rehearsal.yaml)")
    target = catalog.pretrained_file(args.arch)
    if not target:
        raise cfg.ConfigError(f"pretrained.{args.arch}: not set, so there is nowhere to write its generated backbone")
    print(f"{args.arch}: generated backbone (random weights) in {adapters.write_backbone(args.arch, target)}")
    return 0
