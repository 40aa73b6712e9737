"""``tradeoff evaluate``: one run (or external model) under one attack, or several in one process; or any checkpoint
file (``--checkpoint``) or a model from the user's Python file (``--model``)."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.cli import model_options
from tradeoff.cli.common import absolute
from tradeoff.core.spec import thaw
from tradeoff.pipeline.evaluation_jobs import plan_checkpoint, plan_run

JOB = True  # keeps the resolved catalog for the next job
GPU = True  # computes on a GPU: on a machine with several, takes one of its own (tradeoff.core.gpus)


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate one run (or external model) under one attack, or several in one "
                       "process; or any checkpoint file (--checkpoint)")
    model_options.add_run(p)
    p.add_argument("--unit", help="an evaluation job of the pipeline: an attack (name, or name@budget of a sweep), "
                                  f"or {cfg.ALL_ATTACKS!r}: every attack the targets need of the run, into one file "
                                  "(runtime.eval_unit: run)")
    p.add_argument("--attack", action="append", default=[],
                   help="attack job (name, or name@budget for a sweep), its own files; repeat to evaluate several in "
                        "turn, loading the model and test set once")
    p.add_argument("--seed", type=int, default=0, help="attack seed (default 0)")
    p.add_argument("--shard", type=int, help="evaluate only shard K (0-based) of --shards N; merge with merge-shards")
    p.add_argument("--shards", type=int, help="number of shards (with --shard)")
    p.add_argument("--suite", metavar="TARGET", help="every evaluation that a row of the run needs in this table or "
                   "figure (its columns, and its protocol's attacks)")
    p.add_argument("--checkpoint", type=absolute, metavar="FILE",
                   help="evaluate a model this pipeline did not train: a state dict of a registered architecture, in "
                        "this pipeline's, torchvision's, timm's or RobustBench's layout (docs/external-models.md); with "
                        "--arch and --dataset; without --suite or --attack: the clean accuracy and AutoAttack at the "
                        "dataset's standard L-inf budget")
    model_options.add_options(p)
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    if args.checkpoint is not None or args.model is not None:
        return _evaluate_checkpoint(args, catalog)
    given = model_options.given(args)
    if args.run is None or given:
        raise cfg.ConfigError("evaluate: give --run R (a run or an external model of the catalog), or --checkpoint "
                              "FILE --arch A --dataset D" + (f" ({', '.join(given)} go with --checkpoint)" if given
                                                             else ""))
    if sum((args.unit is not None, bool(args.attack), args.suite is not None)) != 1:
        raise cfg.ConfigError("evaluate: give --unit U (an evaluation job of the pipeline: an attack, or "
                              f"{cfg.ALL_ATTACKS!r} for all of the run's), --attack A (repeatable) or --suite TARGET, "
                              "one of them")
    shard = None
    if args.shard is not None or args.shards is not None:
        if args.shard is None or args.shards is None or not 0 <= args.shard < args.shards:
            raise cfg.ConfigError("--shard K and --shards N go together, with 0 <= K < N")
        shard = (args.shard, args.shards)
    plan = plan_run(catalog, args.run, unit=args.unit, attacks=args.attack, suite=args.suite, shard=shard,
                    seed=args.seed)
    _print_evaluations(plan, plan.run())
    return 0


def _print_evaluations(plan, results: list[dict]) -> None:
    """One line per evaluation of a plan (tradeoff.pipeline.evaluation_jobs.Plan): its accuracy, or a shard's robust examples."""
    for name, result in zip(plan.names, results):
        where = f"{plan.model_id} / {name}"
        if plan.kind == "shard":
            print(f"{where} shard {result['shard']} of {result['shards']}: {result['robust_correct'].count('1')} of "
                  f"{result['stop'] - result['start']} robust ({result['seconds']:.1f} s)")
        elif plan.kind == "suite":
            print(f"{where}: accuracy {result['accuracy']:.4f} ({result['examples']} examples, "
                  f"{result['seconds']:.1f} s)")
        else:
            print(f"{where}: accuracy {result['accuracy']:.4f} (clean {result['clean_accuracy']:.4f}, "
                  f"{result['examples']} examples, {result['seconds']:.1f} s)")


def _evaluate_checkpoint(args, catalog: cfg.Catalog) -> int:
    """`evaluate --checkpoint FILE --arch A --dataset D`: a model this pipeline did not train, evaluated as an
    external model of the catalog would be (tradeoff.pipeline.evaluation_jobs.plan_checkpoint), one metrics and predictions file
    per attack, in results/<scale>/metrics/<name>/ (--name, default the file's stem)."""
    if args.run is not None or args.unit is not None or args.shard is not None or args.shards is not None:
        raise cfg.ConfigError("evaluate --checkpoint: not with --run, --unit or --shard (the file is evaluated in this "
                              "process, one file per attack; a model of the catalog's `external:` is --run's)")
    if args.checkpoint is not None and args.model is not None:
        raise cfg.ConfigError("evaluate: give --checkpoint FILE or --model FILE.py:FUNCTION, not both")
    file = model_options.model_file(args) if args.model is not None else model_options.checkpoint_file(args)
    if sum((bool(args.attack), args.suite is not None)) > 1:
        raise cfg.ConfigError("evaluate --checkpoint: give --suite TARGET or --attack A (repeatable), not both")
    plan = plan_checkpoint(catalog, file, suite=args.suite, attacks=args.attack, seed=args.seed,
                           named=model_options.flag)
    name, spec = plan.model_id, plan.catalog.externals[plan.model_id]
    normalize = thaw(spec.normalize)  # its mean and std as lists, as given
    print(f"{name}: {file.checkpoint} as {spec.arch} on {spec.dataset} ({spec.format} layout"
          + (f", normalised by mean {normalize['mean']} std {normalize['std']}" if normalize
             else "") + (f", budgets of {spec.paper_dataset}" if spec.paper_dataset != spec.dataset else "")
          + f"), {len(plan.names)} evaluation(s): {', '.join(plan.names)}")
    _print_evaluations(plan, plan.run())
    print(f"{name}: metrics in {plan.catalog.layout.metrics(name, '<attack>')}, per-example predictions in "
          f"{plan.catalog.layout.predictions(name, '<attack>')}")
    return 0
