"""``tradeoff list runs|externals|targets|attacks``: one line per run, external model, target or evaluation job."""

from __future__ import annotations

from tradeoff import config as cfg


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="list runs, external models, targets or attacks (evaluation jobs)")
    p.add_argument("what", choices=["runs", "externals", "targets", "attacks"])
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    if args.what == "runs":
        for rid, spec in catalog.runs.items():
            shared = "" if catalog.train_id[rid] == rid else f"  (trained as {catalog.train_id[rid]})"
            print(f"{rid}: {spec.method.name} {spec.dataset} {spec.arch} seed {spec.seed}{shared}")
    elif args.what == "targets":
        for name, target in catalog.targets.items():
            print(f"{name} ({target.kind}): {target.title if target.title is not None else ', '.join(target.targets)}")
    elif args.what == "externals":
        for eid, spec in catalog.externals.items():
            print(f"{eid}: external {spec.arch} {spec.dataset} {spec.checkpoint} ({spec.format} layout)")
    elif args.what == "attacks":
        for name in catalog.attack_jobs():
            spec = catalog.attacks[cfg.split_budget(name)[0]]
            print(f"{name}: {spec.type} {spec.dataset if spec.corruptions else spec.norm.value}".rstrip())
    return 0
