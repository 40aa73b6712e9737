"""``tradeoff export robustbench --run R``: a run's or an external model's results in another project's format:
RobustBench's model-info JSON, from its metrics files alone (tradeoff.report.robustbench; no checkpoint is read,
PyTorch is not imported)."""

from __future__ import annotations

import argparse

from tradeoff import config as cfg
from tradeoff.cli.common import absolute
from tradeoff.pipeline.evaluation_jobs import known_model
from tradeoff.report.robustbench import export_robustbench

FIELDS = ("name", "link", "authors", "venue", "footnote")  # the JSON's fields that the paper gives


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="a run's or an external model's results in another project's format: "
                       "RobustBench's model-info JSON (from metrics files only)")
    p.add_argument("format", choices=["robustbench"])
    p.add_argument("--run", required=True, help="a run, or an external model (`external:`)")
    p.add_argument("--threat-model", default="Linf", choices=["Linf", "L2", "corruptions"],
                   help="RobustBench's threat model (default Linf): AutoAttack at the standard budget of the norm")
    p.add_argument("--clean", metavar="ATTACK", help="the clean accuracy's evaluation (default: the attack of type "
                   "clean)")
    p.add_argument("--autoattack", metavar="ATTACK", help="the robust accuracy's evaluation (default: the autoattack "
                   "at the dataset's standard budget of the threat model's norm)")
    p.add_argument("--out", type=absolute, metavar="FILE",
                   help="default: results/<scale>/robustbench/<dataset>/<threat model>/<run>.json")
    for option in FIELDS:
        p.add_argument(f"--{option}", help=f"the JSON's `{option}` (the paper's)")
    p.add_argument("--reported", help="the robust accuracy the paper reports, in %% (default: AutoAttack's here)")
    p.add_argument("--additional-data", action=argparse.BooleanOptionalAction, default=None,
                   help="whether training used data beyond the training set (default: no)")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    catalog, model_id = known_model(catalog, args.run)
    fields = {key: getattr(args, key) for key in (*FIELDS, "reported") if getattr(args, key) is not None}
    if args.additional_data is not None:
        fields["additional_data"] = args.additional_data
    path, info = export_robustbench(catalog, model_id, threat_model=args.threat_model, clean=args.clean,
                                    autoattack=args.autoattack, fields=fields, out=args.out)
    print(f"{model_id}: {path} ({info['dataset']} {args.threat_model} eps {info['eps']}: clean {info['clean_acc']}%, "
          f"AutoAttack {info['autoattack_acc']}% on {info['provenance']['test_examples']} test images)")
    return 0
