"""``tradeoff audit``: whether a model's robustness evaluation can be trusted (tradeoff.audit): a run, an external
model, a checkpoint file or a model from the user's Python file; its page in results/<scale>/audit/."""

from __future__ import annotations

from tradeoff import config as cfg
from tradeoff.audit.page import plain_headline, verdict_lines
from tradeoff.audit.run import audit
from tradeoff.cli import model_options
from tradeoff.cli.common import absolute
from tradeoff.core.runtime import Runtime
from tradeoff.pipeline.evaluation_jobs import model_of, with_checkpoint

JOB = True  # keeps the resolved catalog for the next job
GPU = True  # computes on a GPU: on a machine with several, takes one of its own (tradeoff.core.gpus)


def add_parser(sub) -> None:
    p = sub.add_parser("audit", help="check whether a model's robustness evaluation can be trusted: a battery of "
                       "sanity checks, one page with the verdicts in results/<scale>/audit/ (docs/audit.md)")
    model_options.add_run(p)
    p.add_argument("--checkpoint", type=absolute, metavar="FILE", help="audit a model this pipeline did not train "
                   "(as `evaluate --checkpoint`), with --arch and --dataset")
    model_options.add_options(p)
    p.add_argument("--surrogate", metavar="RUN", help="the model whose adversarial examples the transfer check uses "
                   "(default: the first of audit.surrogates of the model's dataset)")
    p.add_argument("--seed", type=int, default=0, help="attack seed (default 0)")
    p.set_defaults(func=run)


def run(args, catalog: cfg.Catalog) -> int:
    """`audit --run R` or `audit --checkpoint FILE --arch A --dataset D`: the audit's checks of a model (tradeoff.audit)
    and its page, results/<scale>/audit/<model>.{md,html,json,png,pdf}."""
    if catalog.audit is None:
        raise cfg.ConfigError("audit: the configuration has no `audit:` section (config/config.yaml's sets it)")
    if sum(v is not None for v in (args.run, args.checkpoint, args.model)) != 1:
        raise cfg.ConfigError("audit: give --run R (a run or an external model of the catalog), --checkpoint FILE "
                              "--arch A --dataset D, or --model FILE.py:FUNCTION --dataset D")
    if args.model is not None:
        catalog, model_id = with_checkpoint(catalog, model_options.model_file(args), named=model_options.flag)
    elif args.checkpoint is not None:
        catalog, model_id = with_checkpoint(catalog, model_options.checkpoint_file(args), named=model_options.flag)
    else:
        given = model_options.given(args)
        if given:
            raise cfg.ConfigError(f"audit --run: {', '.join(given)} go with --checkpoint")
        model_id = model_of(catalog, args.run)
    runtime = Runtime.from_config(catalog.runtime_settings, catalog.scale)
    record, paths = audit(catalog, model_id, device=runtime.device.type, seed=args.seed, surrogate=args.surrogate)
    for check in record["checks"]:
        print(f"{model_id} / {check['name']}: {check['verdict']}: {check['summary']}"
              + (f" -> next: {check['next']}" if check.get("next") else ""))
    print(f"{model_id}: {plain_headline(record)}")
    for line in verdict_lines(record):
        print(f"{model_id}: {line}")
    print(f"{model_id}: {record['seconds']:.1f} s; page {paths['md']} (and .html, .png, .pdf)")
    return 0
