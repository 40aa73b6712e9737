"""``tradeoff report``: build targets (tables, figures, groups) straight from the metrics files (no checkpoint, no
Snakemake): seconds. A target whose inputs and code are unchanged since it was built, and whose files are intact, is
skipped; ``--all`` adds the claims' forest plot and the summary page with its tidy file of every cell."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.report.regenerate import default_jobs, regenerate

JOB = True  # keeps the resolved catalog for the next job


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="build targets (tables, figures, groups) from metrics files only; unchanged "
                                      "ones are skipped")
    p.add_argument("targets", nargs="*")
    p.add_argument("--all", action="store_true", help="every target, the claims' forest plot (figures/claims.png) "
                                                      "and the summary page with the tidy file of every cell "
                                                      "(cells.csv)")
    p.add_argument("--claims", action="store_true", help="the claims' forest plot (figures/claims.png, .pdf): each "
                                                        "claim's effect with its 95%% interval, by verdict")
    p.add_argument("--force", action="store_true", help="build even what is unchanged since it was built")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="processes to build on (default: every processor this process may use)")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    names = list(catalog.targets) if args.all else args.targets  # (groups after their members: regenerate)
    if not names and not args.claims:
        raise cfg.ConfigError("report: name one or more targets, or --claims, or --all")
    for name in names:
        if name not in catalog.targets:
            raise cfg.ConfigError(f"unknown target {name!r}; allowed: {sorted(catalog.targets)}")
    if args.jobs is not None and args.jobs < 1:
        raise cfg.ConfigError(f"report: --jobs {args.jobs}: at least 1")
    done = regenerate(catalog, names, everything=args.all, claims_figure=args.claims, force=args.force,
                      jobs=args.jobs or default_jobs())
    labels = {"@claims": "claims (forest plot)", "@summary": "summary"}
    for d in done:
        print(f"{labels.get(d.name, d.name)}: " + ("unchanged, skipped" if d.skipped
                                                    else ", ".join(str(p) for p in d.paths)))
    return 0

