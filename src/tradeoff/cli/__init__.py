"""The `tradeoff` command line: every pipeline step is a subcommand over a library function.

Snakemake rules and DVC stages call these; so can a user. Every subcommand validates the whole configuration
first and exits with status 2 and a message naming the key when it is wrong.

May import: every package (it is the top).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from tradeoff import config as cfg
from tradeoff.core.errors import UserError
from tradeoff.storage.layout import ready_marker
from tradeoff.core.spec import thaw

log = logging.getLogger("tradeoff")


# ------------------------------------------------------------------------------------------- commands


def cmd_check_config(args, catalog: cfg.Catalog) -> int:
    from tradeoff.report.claims import load_claims

    runs = catalog.training_runs()
    claims = load_claims(catalog)
    print(f"configuration OK: scale {catalog.scale}, {len(catalog.runs)} runs ({len(runs)} training jobs), "
          + (f"{len(catalog.externals)} external models, " if catalog.externals else "")
          + f"{len(catalog.attacks)} attacks, {len(catalog.targets)} targets"
          + (f", {len(claims)} claims" if claims else ""))
    return 0


def cmd_download(args, catalog: cfg.Catalog) -> int:
    from tradeoff import data
    from tradeoff.storage.atomic import atomic_write_text

    folder = data.download(args.dataset, catalog.data_root)
    # the same bytes at every download (no time): DVC versions it, and a re-download must not re-run what reads it
    atomic_write_text(ready_marker(catalog.data_root, args.dataset),
                      json.dumps({"dataset": args.dataset, "folder": str(folder)}) + "\n")
    print(f"{args.dataset}: ready in {folder}")
    return 0


def cmd_generate_backbone(args, catalog: cfg.Catalog) -> int:
    from tradeoff.models import adapters

    if not catalog.config["scale_map"].get("generated_data"):
        raise cfg.ConfigError(f"generate-backbone: scale {catalog.scale!r} reads real backbones only; generated "
                              "ones are for a scale with scale_map.generated_data (config/rehearsal.yaml)")
    target = (catalog.config.get("pretrained") or {}).get(args.arch)
    if not target:
        raise cfg.ConfigError(f"pretrained.{args.arch}: not set, so there is nowhere to write its generated backbone")
    print(f"{args.arch}: generated backbone (random weights) in {adapters.write_backbone(args.arch, target)}")
    return 0


def cmd_train(args, catalog: cfg.Catalog) -> int:
    from tradeoff.training.train import train_run

    run_id = _run(catalog, args.run)
    paths = train_run(catalog, run_id)
    print(f"{run_id}: model {paths.model}, curves {paths.curves}")
    return 0


def cmd_evaluate(args, catalog: cfg.Catalog) -> int:
    from tradeoff.evaluation.plan import plan_run

    if args.checkpoint is not None or args.model is not None:
        return _evaluate_checkpoint(args, catalog)
    given = [f"--{o.replace('_', '-')}" for o in CHECKPOINT_OPTIONS if getattr(args, o) is not None]
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
    """One line per evaluation of a plan (tradeoff.evaluation.plan.Plan): its accuracy, or a shard's robust examples."""
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


#: the options of `evaluate --checkpoint` that describe the file (CHECKPOINT_KEYS: the external-model setting each sets)
CHECKPOINT_OPTIONS = ("arch", "dataset", "normalize", "format", "paper_dataset", "sha256", "name")
CHECKPOINT_KEYS = {"checkpoint": "--checkpoint", "arch": "--arch", "dataset": "--dataset", "normalize": "--normalize",
                   "format": "--format", "paper_dataset": "--paper-dataset", "sha256": "--sha256"}


def _option(key: str) -> str:
    """The command-line option of an external-model setting, as an error message names it."""
    return CHECKPOINT_KEYS.get(key, f"--{key}")


def _checkpoint_file(args):
    """--checkpoint FILE and the options that describe it."""
    from tradeoff.evaluation.plan import CheckpointFile

    if args.arch is None or args.dataset is None:
        raise cfg.ConfigError(f"{args.command} --checkpoint FILE needs --arch NAME and --dataset NAME (the "
                              "architecture and the dataset the model was trained for)")
    return CheckpointFile(args.checkpoint, **{o: getattr(args, o) for o in CHECKPOINT_OPTIONS})


def _model_file(args):
    """--model FILE.py:FUNCTION and --dataset (a model from the user's own Python file: tradeoff.evaluation.user_model)."""
    from tradeoff.evaluation.plan import CheckpointFile
    from tradeoff.evaluation.external import name_of
    from tradeoff.evaluation.user_model import PYTHON_FORMAT, arch_of, parse

    if args.dataset is None:
        raise cfg.ConfigError(f"{args.command} --model FILE.py:FUNCTION needs --dataset NAME (the dataset the model "
                              "classifies)")
    given = [f"--{o.replace('_', '-')}" for o in ("arch", "format") if getattr(args, o) is not None]
    if given:
        raise cfg.ConfigError(f"{args.command} --model: {', '.join(given)} go with --checkpoint (the function builds "
                              "the model)")
    path, function = parse(args.model)
    return CheckpointFile(str(path), arch=arch_of(function), dataset=args.dataset, normalize=args.normalize,
                          format=PYTHON_FORMAT, paper_dataset=args.paper_dataset, sha256=args.sha256,
                          name=args.name or name_of(path))


def _evaluate_checkpoint(args, catalog: cfg.Catalog) -> int:
    """`evaluate --checkpoint FILE --arch A --dataset D`: a model this pipeline did not train, evaluated as an
    external model of the catalog would be (tradeoff.evaluation.plan.plan_checkpoint), one metrics and predictions file per
    attack, in results/<scale>/metrics/<name>/ (--name, default the file's stem)."""
    from tradeoff.evaluation.plan import plan_checkpoint

    if args.run is not None or args.unit is not None or args.shard is not None or args.shards is not None:
        raise cfg.ConfigError("evaluate --checkpoint: not with --run, --unit or --shard (the file is evaluated in this "
                              "process, one file per attack; a model of the catalog's `external:` is --run's)")
    if args.checkpoint is not None and args.model is not None:
        raise cfg.ConfigError("evaluate: give --checkpoint FILE or --model FILE.py:FUNCTION, not both")
    file = _model_file(args) if args.model is not None else _checkpoint_file(args)
    if sum((bool(args.attack), args.suite is not None)) > 1:
        raise cfg.ConfigError("evaluate --checkpoint: give --suite TARGET or --attack A (repeatable), not both")
    plan = plan_checkpoint(catalog, file, suite=args.suite, attacks=args.attack, seed=args.seed, named=_option)
    name, spec = plan.model_id, plan.catalog.externals[plan.model_id]
    normalize = thaw(spec.normalize)  # its mean and std as lists, as given
    print(f"{name}: {args.checkpoint} as {spec.arch} on {spec.dataset} ({spec.format} layout"
          + (f", normalised by mean {normalize['mean']} std {normalize['std']}" if normalize
             else "") + (f", budgets of {spec.paper_dataset}" if spec.paper_dataset != spec.dataset else "")
          + f"), {len(plan.names)} evaluation(s): {', '.join(plan.names)}")
    _print_evaluations(plan, plan.run())
    print(f"{name}: metrics in {plan.catalog.layout.metrics(name, '<attack>')}, per-example predictions in "
          f"{plan.catalog.layout.predictions(name, '<attack>')}")
    return 0


def cmd_audit(args, catalog: cfg.Catalog) -> int:
    """`audit --run R` or `audit --checkpoint FILE --arch A --dataset D`: the audit's checks of a model (tradeoff.audit)
    and its page, results/<scale>/audit/<model>.{md,html,json,png,pdf}."""
    from tradeoff.audit.run import audit
    from tradeoff.evaluation.plan import model_of, with_checkpoint
    from tradeoff.core.runtime import Runtime

    if catalog.config.get("audit") is None:
        raise cfg.ConfigError("audit: the configuration has no `audit:` section (config/config.yaml's sets it)")
    if sum(v is not None for v in (args.run, args.checkpoint, args.model)) != 1:
        raise cfg.ConfigError("audit: give --run R (a run or an external model of the catalog), --checkpoint FILE "
                              "--arch A --dataset D, or --model FILE.py:FUNCTION --dataset D")
    if args.model is not None:
        catalog, model_id = with_checkpoint(catalog, _model_file(args), named=_option)
    elif args.checkpoint is not None:
        catalog, model_id = with_checkpoint(catalog, _checkpoint_file(args), named=_option)
    else:
        given = [f"--{o.replace('_', '-')}" for o in CHECKPOINT_OPTIONS if getattr(args, o) is not None]
        if given:
            raise cfg.ConfigError(f"audit --run: {', '.join(given)} go with --checkpoint")
        model_id = model_of(catalog, args.run)
    runtime = Runtime.from_config(catalog.config["runtime"], catalog.scale)
    record, paths = audit(catalog, model_id, device=runtime.device.type, seed=args.seed, surrogate=args.surrogate)
    from tradeoff.audit.page import headline, verdict_lines

    for check in record["checks"]:
        print(f"{model_id} / {check['name']}: {check['verdict']}: {check['summary']}"
              + (f" -> next: {check['next']}" if check.get("next") else ""))
    print(f"{model_id}: {headline(record)}")
    for line in verdict_lines(record):
        print(f"{model_id}: {line}")
    print(f"{model_id}: {record['seconds']:.1f} s; page {paths['md']} (and .html, .png, .pdf)")
    return 0


def cmd_merge_shards(args, catalog: cfg.Catalog) -> int:
    from tradeoff.evaluation.plan import merge_shards

    shards, result = merge_shards(catalog, args.run, args.attack, args.shards)
    print(f"{catalog.train_id[args.run]} / {args.attack}: accuracy {result['accuracy']:.4f} merged from {shards} "
          f"shards (clean {result['clean_accuracy']:.4f}, {result['examples']} examples, {result['seconds']:.1f} s)")
    return 0


def cmd_bench_eval(args, catalog: cfg.Catalog) -> int:
    from tradeoff.pipeline.bench_eval import bench_eval, format_bench_eval

    run_id = _run(catalog, args.run)
    result = bench_eval(catalog, run_id, checkpoint=args.checkpoint, target=args.target,
                        attacks=args.attacks.split(",") if args.attacks else None, workers=args.workers,
                        threads=args.threads, device=args.device, out_dir=catalog.layout.bench)
    print(format_bench_eval(result))
    return 0


def cmd_report(args, catalog: cfg.Catalog) -> int:
    """Build targets straight from the metrics files (no checkpoint, no Snakemake): seconds."""
    from tradeoff.report.build import build_target
    from tradeoff.report.summary import build_summary

    names = list(catalog.targets) if args.all else args.targets
    if not names:
        raise cfg.ConfigError("report: name one or more targets, or --all")
    for name in names:
        if name not in catalog.targets:
            raise cfg.ConfigError(f"unknown target {name!r}; allowed: {sorted(catalog.targets)}")
        paths = build_target(catalog, name)
        print(f"{name}: " + ", ".join(str(p) for p in paths))
    if args.all:
        print(f"summary: {build_summary(catalog)['md']}")
    return 0


def cmd_analyze(args, catalog: cfg.Catalog) -> int:
    """Run a figure's analysis job: read its runs' checkpoints, write results/analysis/<target>.json."""
    from tradeoff.analysis import run_analysis

    if args.target not in catalog.analysis_targets():
        raise cfg.ConfigError(f"analyze: {args.target!r} is not a figure with an analysis; allowed: "
                              f"{catalog.analysis_targets()}")
    print(f"{args.target}: {run_analysis(catalog, args.target)}")
    return 0


def cmd_summary(args, catalog: cfg.Catalog) -> int:
    from tradeoff.report.summary import build_summary

    paths = build_summary(catalog)
    print(paths["md"].read_text())
    return 0


def cmd_export_dvc(args, catalog: cfg.Catalog) -> int:
    from tradeoff.pipeline.dvc_export import PARAMS, Stale, config_files, default_files, export

    files = config_files(args.config if args.config_given else default_files())  # the stages' files: + params.yaml
    read = [f for f in files if f != PARAMS or Path(f).exists()]  # none yet: an empty overlay (export writes it)
    chosen = catalog if read == args.config else cfg.load_catalog(read)
    for name in args.targets:
        if name not in chosen.targets and name not in _audit_targets(chosen):
            raise cfg.ConfigError("export-dvc: " + cfg.unknown("target", name, chosen.targets, LIST_TARGETS))
    try:
        written = export(chosen, files, args.targets, check=args.check, jobs_only=args.jobs)
    except Stale as exc:
        print(f"tradeoff export-dvc: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_export(args, catalog: cfg.Catalog) -> int:
    """`export robustbench --run R`: RobustBench's model-info JSON of a run or an external model, from its metrics
    files alone (tradeoff.report.robustbench; no checkpoint is read, PyTorch is not imported)."""
    from tradeoff.evaluation.plan import known_model
    from tradeoff.report.robustbench import export_robustbench

    catalog, model_id = known_model(catalog, args.run)
    fields = {key: getattr(args, key) for key in ("name", "link", "authors", "venue", "footnote", "reported")
              if getattr(args, key) is not None}
    if args.additional_data is not None:
        fields["additional_data"] = args.additional_data
    path, info = export_robustbench(catalog, model_id, threat_model=args.threat_model, clean=args.clean,
                                    autoattack=args.autoattack, fields=fields, out=args.out)
    print(f"{model_id}: {path} ({info['dataset']} {args.threat_model} eps {info['eps']}: clean {info['clean_acc']}%, "
          f"AutoAttack {info['autoattack_acc']}% on {info['provenance']['test_examples']} test images)")
    return 0


def cmd_list(args, catalog: cfg.Catalog) -> int:
    if args.what == "runs":
        for rid, spec in catalog.runs.items():
            shared = "" if catalog.train_id[rid] == rid else f"  (trained as {catalog.train_id[rid]})"
            print(f"{rid}: {spec.method.name} {spec.dataset} {spec.arch} seed {spec.seed}{shared}")
    elif args.what == "targets":
        for name, target in catalog.targets.items():
            print(f"{name} ({target['kind']}): {target.get('title', ', '.join(target.get('targets', [])))}")
    elif args.what == "externals":
        for eid, spec in catalog.externals.items():
            print(f"{eid}: external {spec.arch} {spec.dataset} {spec.checkpoint} ({spec.format} layout)")
    elif args.what == "attacks":
        for name in catalog.attack_jobs():
            spec = catalog.attacks[cfg.split_budget(name)[0]]
            print(f"{name}: {spec['type']} {spec.get('norm', '') if spec['type'] != cfg.CORRUPTIONS_TYPE else spec['dataset']}"
                  .rstrip())
    return 0


def cmd_show(args, catalog: cfg.Catalog) -> int:
    from tradeoff.config.show import show

    print(show(catalog, args.config, args.name), end="")
    return 0


def cmd_bench_train(args, catalog: cfg.Catalog) -> int:
    from tradeoff.pipeline.bench import bench_train, write_bench
    from tradeoff.core.runtime import Runtime

    run_id = _run(catalog, args.run)
    settings = {**catalog.config["runtime"], "channels_last": args.channels_last}
    if args.precision:
        settings["precision"] = args.precision
    if args.device:
        settings["device"] = args.device
    result = bench_train(run_id, catalog.runs[run_id], runtime=Runtime.from_config(settings),
                         batch_size=args.batch_size, steps=args.steps, warmup=args.warmup, compile_model=args.compile)
    path = write_bench(result, catalog.layout.bench)
    peak = f", {result['fraction_of_peak']:.1%} of peak" if result["fraction_of_peak"] else ""
    print(f"{run_id} on {result['device']}: {result['images_per_s']:.1f} images/s, "
          f"{result['seconds_per_epoch']:.1f} s/epoch, {result['achieved_tflops']:.3f} TFLOP/s{peak} -> {path}")
    return 0


def cmd_bench_ratios(args, catalog: cfg.Catalog) -> int:
    from tradeoff.pipeline.bench import epoch_time_ratio, pgd_step_ratio
    from tradeoff.storage.atomic import atomic_write_text

    results = {"pgd_step_input_only_vs_weights": pgd_step_ratio(args.arch, args.dataset)}
    for a, b in (pair.split("/") for pair in args.compare):
        results[f"{a} / {b}"] = epoch_time_ratio(catalog, _run(catalog, a), _run(catalog, b))
    for key, r in results.items():
        print(f"{key}: {r['ratio']:.3f}")
    path = catalog.layout.bench / "ratios-cpu.json"
    atomic_write_text(path, json.dumps(results, indent=1) + "\n")
    print(f"-> {path}")
    return 0


def cmd_plan(args, catalog: cfg.Catalog) -> int:
    """Instant: FLOPs from tradeoff.pipeline.costs' formulas and table (no PyTorch), the cluster layout as Snakemake asks."""
    from tradeoff.pipeline.costs import format_plan, plan

    print(format_plan(plan(catalog, args.target, args.gpus, args.device, catalog.layout.bench)))
    return 0


def cmd_bench_flops(args, catalog: cfg.Catalog) -> int:
    """Count the pass FLOPs of every (architecture, dataset) of the shipped scales and of the given config into
    tradeoff/pipeline/flops.json, the table that `plan` and the Snakefile size jobs with."""
    from tradeoff.pipeline.bench import SHIPPED_SCALES, flops_table, format_flops_table
    from tradeoff.storage.atomic import atomic_write_text
    from tradeoff.pipeline.costs import FLOPS_FILE, load_table

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


def cmd_gpu_check(args, catalog: cfg.Catalog) -> int:
    from tradeoff.pipeline.gpucheck import NoCuda, device_slug, gpu_check, process_seconds, write_report

    root = Path.cwd() if (Path.cwd() / "Snakefile").is_file() else None  # the workflow folder (_enter_workflow)
    demo = root / "config" / "demo.yaml" if root else None
    def where(report: dict) -> tuple[Path, Path]:
        slug = device_slug(report["device"])
        if args.out is None:
            return catalog.layout.gpu_check(slug)
        return Path(args.out) / f"gpu-check-{slug}.json", Path(args.out) / f"gpu-check-{slug}.md"

    try:
        report = gpu_check(catalog, cpu_only=args.cpu_only, batch=args.batch, images=args.images,
                           bench_steps=args.steps, bench_warmup=args.warmup, root=root if args.rehearsal else None,
                           demo=cfg.load_catalog([root / "config" / "config.yaml", demo])
                           if args.precision_check and demo and demo.is_file() and not args.cpu_only else None,
                           budget=None if args.budget is None else args.budget - process_seconds(),
                           on_progress=lambda r: write_report(r, where(r)))
    except NoCuda as exc:
        print(f"tradeoff: gpu-check: {exc}", file=sys.stderr)
        return 1
    paths = write_report(report, where(report))
    verdict = "every comparison within its tolerance" if report["ok"] else "A COMPARISON IS OUT OF ITS TOLERANCE"
    print(f"gpu-check on {report['device']}: {verdict}; report: {paths[1]} (and {paths[0].name})")
    return 0 if report["ok"] else 1


def _enter_workflow(config_files: list[str]) -> list[str]:
    """Work from the workflow's folder (the one with the Snakefile above the first config file), as Snakemake and
    DVC do, whatever folder the command was started in: the config's relative paths (``results``, ``data``) then
    mean the same folders for every job and every user. Returns the config files relative to it. Without such a
    folder (a config file outside any workflow), the current folder stays."""
    for given in config_files:
        if "=" in given and not Path(given).exists():  # `--config runtime='{threads: 2}'`, as for Snakemake
            key, _, value = given.partition("=")
            raise cfg.ConfigError(f"--config takes a YAML file, not a key=value override ({given!r}): put "
                                  f"`{key}: {value}` in an overlay file (e.g. config/mine.yaml) and pass "
                                  "--config config/config.yaml --config config/mine.yaml")
    files = [Path(f).absolute() for f in config_files]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise cfg.ConfigError(f"--config: no such file: {', '.join(missing)}")
    root = next((d for d in files[0].parents if (d / "Snakefile").is_file()), None)
    if root is None:
        return [str(f) for f in files]
    os.chdir(root)
    return [os.path.relpath(f, root) if f.is_relative_to(root) else str(f) for f in files]


LIST_TARGETS = "`tradeoff list targets` lists them"


def _audit_targets(catalog: cfg.Catalog) -> dict[str, str]:
    """The audit targets (`audit_<table>`), which `plan` prices beside the catalog's targets."""
    from tradeoff.audit.jobs import audit_targets

    return audit_targets(catalog)


def _run(catalog: cfg.Catalog, run_id: str) -> str:
    if run_id not in catalog.runs:
        raise cfg.ConfigError("--run: " + cfg.unknown("run", run_id, catalog.runs, "`tradeoff list runs` lists them"))
    return run_id


def _absolute(path: str) -> str:
    """A file named on the command line, absolute: the commands work from the workflow's folder (_enter_workflow)."""
    return str(Path(path).absolute())


# ---------------------------------------------------------------------------------------------- parser


CONFIG_ENV = "TRADEOFF_CONFIG"  # the config files of a job that names none (Snakemake's common.smk sets it)


def _checkpoint_options(p: argparse.ArgumentParser) -> None:
    """The options that describe a --checkpoint file (evaluate, audit): CHECKPOINT_OPTIONS."""
    p.add_argument("--arch", help="with --checkpoint: its architecture (a registered one, or RobustBench's name for it)")
    p.add_argument("--dataset", help="with --checkpoint: the dataset it classifies (its test set is evaluated)")
    p.add_argument("--normalize", metavar="MEAN,STD", help="with --checkpoint: the per-channel input normalisation, "
                   "applied inside the model (attacks perturb [0, 1] images): MEAN,STD, M1,...,Mc,S1,...,Sc, or "
                   "imagenet, cifar10, cifar100")
    p.add_argument("--format", choices=["auto", "plain", "robustbench", "torchvision", "timm"],
                   help="with --checkpoint: the file's layout (default auto: the first that fits)")
    p.add_argument("--paper-dataset", help="with --checkpoint: the dataset its attacks' budgets are written for, as "
                   "a run's at a smaller scale (default: with --suite, the paper dataset of the target's rows of the "
                   "same dataset; else its own)")
    p.add_argument("--sha256", help="with --checkpoint: refuse the file unless it has this SHA-256")
    p.add_argument("--name", help="with --checkpoint: its id, the folder of its metrics (default: the file's stem)")


def _model_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="FILE.py:FUNCTION", help="a model from your own Python file: FUNCTION() returns "
                   "a torch.nn.Module taking images in [0, 1] (preprocessing, randomness, a detector inside); with "
                   "--dataset. The file is your code and runs as such (docs/external-models.md)")


def _check_config_parser(sub) -> None:
    sub.add_parser("check-config", help="validate the configuration and summarise it").set_defaults(func=cmd_check_config)


def _download_parser(sub) -> None:
    p = sub.add_parser("download", help="download and verify a dataset")
    p.add_argument("dataset")
    p.set_defaults(func=cmd_download)


def _generate_backbone_parser(sub) -> None:
    p = sub.add_parser("generate-backbone", help="write a generated backbone checkpoint for an adapter architecture "
                       "at its pretrained.<arch> path (only at a scale with scale_map.generated_data: the rehearsal)")
    p.add_argument("arch")
    p.set_defaults(func=cmd_generate_backbone)


def _train_parser(sub) -> None:
    p = sub.add_parser("train", help="train (or resume) one run")
    p.add_argument("--run", required=True)
    p.set_defaults(func=cmd_train)


def _evaluate_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate one run (or external model) under one attack, or several in one "
                       "process; or any checkpoint file (--checkpoint)")
    p.add_argument("--run", help="a run of the catalog, or an external model (the config's `external:`)")
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
    p.add_argument("--checkpoint", type=_absolute, metavar="FILE",
                   help="evaluate a model this pipeline did not train: a state dict of a registered architecture, in "
                        "this pipeline's, torchvision's, timm's or RobustBench's layout (docs/external-models.md); with "
                        "--arch and --dataset; without --suite or --attack: the clean accuracy and AutoAttack at the "
                        "dataset's standard L-inf budget")
    _checkpoint_options(p)
    _model_option(p)
    p.set_defaults(func=cmd_evaluate)


def _audit_parser(sub) -> None:
    p = sub.add_parser("audit", help="check whether a model's robustness evaluation can be trusted: a battery of "
                       "sanity checks, one page with the verdicts in results/<scale>/audit/ (docs/audit.md)")
    p.add_argument("--run", help="a run of the catalog, or an external model (the config's `external:`)")
    p.add_argument("--checkpoint", type=_absolute, metavar="FILE", help="audit a model this pipeline did not train "
                   "(as `evaluate --checkpoint`), with --arch and --dataset")
    _checkpoint_options(p)
    _model_option(p)
    p.add_argument("--surrogate", metavar="RUN", help="the model whose adversarial examples the transfer check uses "
                   "(default: the first of audit.surrogates of the model's dataset)")
    p.add_argument("--seed", type=int, default=0, help="attack seed (default 0)")
    p.set_defaults(func=cmd_audit)


def _merge_shards_parser(sub) -> None:
    p = sub.add_parser("merge-shards", help="merge the shards of one evaluation into its metrics and predictions")
    p.add_argument("--run", required=True, help="a run, or an external model")
    p.add_argument("--attack", required=True)
    p.add_argument("--shards", type=int, help="default: the configured number (attack `shards` or runtime.eval_shards)")
    p.set_defaults(func=cmd_merge_shards)


def _bench_eval_parser(sub) -> None:
    p = sub.add_parser("bench-eval", help="time the evaluation suite on a checkpoint: images/s per attack")
    p.add_argument("--run", required=True, help="the run whose model and test set are used")
    p.add_argument("--checkpoint", help="default: the run's results/<scale>/checkpoints/<run>/model.pt")
    p.add_argument("--target", default="table1a", help="time the attacks of this table's columns (default table1a)")
    p.add_argument("--attacks", help="comma-separated attack names instead of --target's")
    p.add_argument("--workers", type=int, default=1, help="attacks timed in parallel processes (default 1)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker (default 1)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.set_defaults(func=cmd_bench_eval)


def _report_parser(sub) -> None:
    p = sub.add_parser("report", help="build targets (tables, figures, groups) from metrics files only")
    p.add_argument("targets", nargs="*")
    p.add_argument("--all", action="store_true", help="every target, and the summary page")
    p.set_defaults(func=cmd_report)


def _analyze_parser(sub) -> None:
    p = sub.add_parser("analyze", help="run a figure's analysis job (t-SNE, image grid, synthetic experiment)")
    p.add_argument("target")
    p.set_defaults(func=cmd_analyze)


def _summary_parser(sub) -> None:
    sub.add_parser("summary", help="every target: built or missing, and its largest differences from the paper"
                   ).set_defaults(func=cmd_summary)


def _export_dvc_parser(sub) -> None:
    p = sub.add_parser("export-dvc", help="write dvc.yaml and jobs.json (the DVC pipeline) from the catalog")
    p.add_argument("--check", action="store_true", help="exit 1 if the files on disk are stale")
    p.add_argument("--jobs", action="store_true",
                   help="write jobs.json only, and exit 1 if dvc.yaml is stale (the pipeline's resolve stage)")
    p.add_argument("--targets", nargs="+", default=[], metavar="TARGET",
                   help="only the stages these targets need (default: every target)")
    p.set_defaults(func=cmd_export_dvc)


def _bench_train_parser(sub) -> None:
    p = sub.add_parser("bench-train", help="time training steps of a run's method and model (synthetic data)")
    p.add_argument("--run", required=True)
    p.add_argument("--batch-size", type=int, help="default: the run's")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", choices=["fp32", "bf16"],
                   help="training precision (bf16: autocast, CUDA only); default: the config's runtime.precision")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True, help="(CUDA)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False, help="torch.compile")
    p.set_defaults(func=cmd_bench_train)


def _bench_ratios_parser(sub) -> None:
    p = sub.add_parser("bench-ratios", help="CPU cost ratios, measured interleaved: a PGD step with input "
                       "gradients only over one with weight gradients, and training-step time of RUN_A over RUN_B")
    p.add_argument("--arch", default="resnet18")
    p.add_argument("--dataset", default="cifar10")
    p.add_argument("--compare", nargs="*", default=[], metavar="RUN_A/RUN_B")
    p.set_defaults(func=cmd_bench_ratios)


def _plan_parser(sub) -> None:
    p = sub.add_parser("plan", help="GPU-hours of every job of a target, the makespan on N GPUs, and the cluster "
                                    "jobs Snakemake submits for it with what they ask for")
    p.add_argument("target")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--device", choices=["h100", "h200", "a100", "rtx3090", "v100"],
                   help="default: the config's resources.plan.device (what cluster jobs are sized for)")
    p.set_defaults(func=cmd_plan)


def _export_parser(sub) -> None:
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
    p.add_argument("--out", type=_absolute, metavar="FILE",
                   help="default: results/<scale>/robustbench/<dataset>/<threat model>/<run>.json")
    for option in ("name", "link", "authors", "venue", "footnote"):
        p.add_argument(f"--{option}", help=f"the JSON's `{option}` (the paper's)")
    p.add_argument("--reported", help="the robust accuracy the paper reports, in %% (default: AutoAttack's here)")
    p.add_argument("--additional-data", action=argparse.BooleanOptionalAction, default=None,
                   help="whether training used data beyond the training set (default: no)")
    p.set_defaults(func=cmd_export)


def _bench_flops_parser(sub) -> None:
    p = sub.add_parser("bench-flops", help="count the FLOPs of one pass of every architecture of the shipped scales "
                                           "(and of --config's) into tradeoff/pipeline/flops.json, which plan and Snakemake "
                                           "size jobs with")
    p.add_argument("--recount", action="store_true", help="count every entry again (default: the missing ones)")
    p.add_argument("--check", action="store_true", help="count everything, write nothing, exit 1 if the file differs")
    p.set_defaults(func=cmd_bench_flops)


def _gpu_check_parser(sub) -> None:
    p = sub.add_parser("gpu-check", help="on a GPU: every method's step against the CPU's, bf16 against fp32, "
                                         "Generalist's parallel mode against serial, bench-train and bench-eval, "
                                         "the table1a rehearsal at paper shape against the plan, a demo run trained "
                                         "in fp32 and bf16; one JSON and markdown report in the bench folder")
    p.add_argument("--cpu-only", action="store_true", help="without CUDA: the same checks, the CPU against itself")
    p.add_argument("--batch", type=int, default=16, help="batch of the compared steps (default 16)")
    p.add_argument("--images", type=int, default=1000, help="images of bench-eval (default 1000)")
    p.add_argument("--steps", type=int, default=20, help="timed steps of bench-train (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps of bench-train (default 3)")
    p.add_argument("--rehearsal", action=argparse.BooleanOptionalAction, default=True,
                   help="the table1a rehearsal through Snakemake at paper shape (config/rehearsal.yaml), measured "
                        "seconds per epoch beside the plan's")
    p.add_argument("--precision-check", action=argparse.BooleanOptionalAction, default=True,
                   help="a demo-scale run trained in fp32 and in bf16 from one seed: clean and PGD accuracy, McNemar")
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help="wall-clock seconds for the whole check: each section gets its share, a section out of time "
                        "stops and says so, and the report is written after every section (scripts/gpu-node.sh)")
    p.add_argument("--out", metavar="DIR", help="write the report here (default: the scale's bench folder)")
    p.set_defaults(func=cmd_gpu_check)



def _show_parser(sub) -> None:
    p = sub.add_parser("show", help="print the resolved settings of a run, an attack or a target (YAML) and where "
                       "each value that is not a default came from")
    p.add_argument("name", help="a run id, an attack (<attack>@<budget> for a budget of a sweep) or a target")
    p.set_defaults(func=cmd_show)


def _list_parser(sub) -> None:
    p = sub.add_parser("list", help="list runs, external models, targets or attacks (evaluation jobs)")
    p.add_argument("what", choices=["runs", "externals", "targets", "attacks"])
    p.set_defaults(func=cmd_list)


#: the subcommands, in the order `tradeoff --help` lists them: each adds its parser, options and cmd_ function
SUBCOMMANDS = (
    _check_config_parser, _download_parser, _generate_backbone_parser, _train_parser, _evaluate_parser,
    _audit_parser, _merge_shards_parser, _bench_eval_parser, _report_parser, _analyze_parser, _summary_parser,
    _export_dvc_parser, _bench_train_parser, _bench_ratios_parser, _plan_parser, _export_parser,
    _bench_flops_parser, _gpu_check_parser, _show_parser, _list_parser,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tradeoff", description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", metavar="FILE",
                        help="configuration file; repeat to overlay (default: the files in $TRADEOFF_CONFIG, "
                             "separated by ':', as Snakemake's jobs get them; else config/config.yaml)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--log", metavar="FILE",
                        help="the job's log file (Snakemake's `log:`, deleted whenever Snakemake starts the job): "
                             "also append everything written to stderr to its history, <name>.history.log, after a "
                             "header line per start, so a restarted job keeps the lines of its earlier tries")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return parser


#: the subcommands that the pipeline's jobs run: they keep the resolved catalog for the next job
#: (tradeoff.config.load_catalog); the others (check-config, list, export-dvc, plan, ...) only read it
JOB_COMMANDS = frozenset({"download", "train", "evaluate", "merge-shards", "report", "analyze", "summary", "audit"})


#: the subcommands that compute on a GPU: on a machine with several, each takes one of its own (tradeoff.core.gpus)
GPU_COMMANDS = frozenset({"train", "evaluate", "analyze", "bench-train", "bench-eval", "gpu-check", "audit"})


def _device_wanted(args, catalog: cfg.Catalog) -> str:
    """The device a GPU command asked for: its --device, else the config's runtime.device."""
    if getattr(args, "cpu_only", False):
        return "cpu"
    return getattr(args, "device", None) or catalog.runtime.device


class _Tee:
    """stderr that also appends to a file (the job's log history): Python-level, so no extra process stands between
    the job and the signals SLURM sends it."""

    def __init__(self, stream, copy):
        self.stream, self.copy = stream, copy

    def write(self, text: str) -> int:
        try:
            self.copy.write(text)
        except (OSError, ValueError):  # the history is a convenience: a full disk must not stop the job here
            pass
        return self.stream.write(text)

    def flush(self) -> None:
        for stream in (self.copy, self.stream):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass

    def isatty(self) -> bool:
        """Never: what goes to a terminal is also written to the history file, where a progress bar's carriage
        returns do not belong (tradeoff.core.progress writes plain lines instead)."""
        return False

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _open_history(log: str, argv: list[str]):
    """Append a header line for this start to the log's history and return the open file (None if it cannot be)."""
    import datetime
    import socket

    from tradeoff.storage.layout import log_history

    path = log_history(Path(log).absolute())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        history = open(path, "a", buffering=1)
    except OSError as exc:
        print(f"tradeoff: cannot append to the log history {path}: {exc.strerror or exc}", file=sys.stderr)
        return None
    slurm = f", SLURM job {os.environ['SLURM_JOB_ID']}" if os.environ.get("SLURM_JOB_ID") else ""
    history.write(f"=== {datetime.datetime.now():%Y-%m-%d %H:%M:%S} start: tradeoff {' '.join(argv)} "
                  f"(pid {os.getpid()} on {socket.gethostname()}{slurm}) ===\n")
    return history


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    history, stderr = (_open_history(args.log, argv) if args.log else None), sys.stderr
    if history is not None:
        sys.stderr = _Tee(stderr, history)
    try:
        return _main(args)
    finally:
        if history is not None:
            sys.stderr = stderr
            history.close()


def _main(args) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    if args.config is None and os.environ.get(CONFIG_ENV):  # a Snakemake job: the workflow's config files
        args.config = [f for f in os.environ[CONFIG_ENV].split(os.pathsep) if f]
    args.config_given = args.config is not None
    cwd = os.getcwd()
    try:
        args.config = _enter_workflow(args.config or [str(cfg.DEFAULT_CONFIG)])
        catalog = cfg.load_catalog(args.config, write_cache=args.command in JOB_COMMANDS)
        if args.command in GPU_COMMANDS and _device_wanted(args, catalog) != "cpu":
            from tradeoff.core.gpus import claim_gpu

            claim_gpu()  # several GPUs on this machine: one of its own (before CUDA starts), see tradeoff.core.gpus
        named = [args.target] if getattr(args, "target", None) is not None else list(getattr(args, "targets", []))
        for name in named if args.command not in ("check-config", "export-dvc") else []:
            if name not in catalog.targets and not (args.command == "plan" and name in _audit_targets(catalog)):
                raise cfg.ConfigError(cfg.unknown("target", name, catalog.targets, LIST_TARGETS))
        status = args.func(args, catalog)
        sys.stdout.flush()  # here, so that a reader that went away (`| head`) is seen now, not at exit
        return status
    except cfg.ConfigError as exc:
        print(f"tradeoff: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line in the log, the shell's status for SIGINT
        print("tradeoff: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tradeoff list runs | head`: the reader has what it wanted
        _discard_stdout()
        return 141
    except UserError as exc:  # problems of the input or the machine: one clear line, no traceback
        signum = getattr(exc, "signum", None)
        if signum is not None:  # stopped by SIGTERM / SIGUSR1 after saving its state (tradeoff.training.train.Stopped)
            print(f"tradeoff: {exc}", file=sys.stderr)
            return 128 + signum
        print(f"tradeoff: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        os.chdir(cwd)  # a caller in the same process (a test, a notebook) keeps its folder


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a caller's in-memory stdout)
        pass


if __name__ == "__main__":
    sys.exit(main())
