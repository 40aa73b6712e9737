"""``tradeoff show NAME``: the resolved settings of a run, an attack or a target (YAML), and where each value that
is not a default came from."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.config.show import show


def add_parser(sub) -> None:
    p = sub.add_parser("show", help="print the resolved settings of a run, an attack or a target (YAML) and where "
                       "each value that is not a default came from")
    p.add_argument("name", help="a run id, an attack (<attack>@<budget> for a budget of a sweep) or a target")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    print(show(catalog, args.config, args.name), end="")
    return 0
