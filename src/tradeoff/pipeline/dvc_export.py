"""The DVC pipeline, written by ``tradeoff export-dvc`` from the catalog: dvc.yaml and jobs.json (params.yaml is yours).

- **dvc.yaml** holds one template (``foreach``) per kind of job, the kinds of the Snakemake rules (download, train,
  evaluate, analyze, table, figure, figure_list, summary; ``finetune`` is a ``train`` job that reads a pretrained
  backbone), over the jobs listed in jobs.json, plus ``resolve``, which writes jobs.json. Each template's code
  dependencies are the source files that its ``tradeoff`` subcommand imports (:func:`code_deps`, from the import graph
  of the package), so editing the report code re-runs reports only.
- **jobs.json** (``vars`` of dvc.yaml) lists the jobs the targets need, exactly those of Snakemake's DAG at the same
  scale, each with the digest of its resolved settings: a stage's ``params`` are its entry there, so DVC re-runs
  exactly the stages whose settings changed. The ``resolve`` stage writes it from config/ and params.yaml before the other stages are
  checked, which is what makes ``dvc exp run -S`` work.
- **params.yaml** is a config overlay (empty as shipped) that every stage passes last to the CLI: what
  ``dvc exp run -S '+scale_map.epochs=12'`` edits.

DVC's templating cannot give a stage a list of inputs whose length varies from item to item (treeverse/dvc#8171), so
a report, which reads the files of a varying number of runs, depends on the folders it reads from (metrics,
predictions, curves, ...), and an analysis on the checkpoints folder unless it reads one model: the same jobs, a coarser
trigger. A test compares the whole plan with Snakemake's.
"""

from __future__ import annotations

import ast
import json
import os
import re
from functools import cache
from pathlib import Path

import yaml

from tradeoff.storage.atomic import json_digest
from tradeoff.config import Catalog
from tradeoff.storage.layout import ready_marker

PACKAGE = Path(__file__).resolve().parents[1]  # src/tradeoff
SOURCES = PACKAGE.parent                   # src
ROOT = SOURCES.parent                      # the repository (or workflow copy) root
JOBS = "jobs.json"
PARAMS = "params.yaml"
HEADER = ("# Written by `tradeoff export-dvc` (src/tradeoff/pipeline/dvc_export.py) from the catalog; do not edit: change config/\n"
          "# (or params.yaml) and run it again. tests/test_pipeline.py::test_shipped_dvc_yaml_is_current fails when\n"
          "# stale.\n")
PARAMS_TEXT = ("# A config overlay that every DVC stage reads last (after config/config.yaml and config/demo.yaml):\n"
               "# the parameters of an experiment, e.g. `dvc exp run -S '+scale_map.epochs=12'`. Empty: the demo as\n"
               "# shipped.\n"
               "{}\n")

# the tradeoff subcommand each kind of stage runs (its code dependencies are what that subcommand imports)
COMMAND = {"resolve": "export-dvc", "download": "download", "train": "train", "finetune": "train",
           "evaluate": "evaluate", "analyze": "analyze", "table": "report", "figure": "report",
           "figure_list": "report", "summary": "summary", "audit": "audit"}


# ------------------------------------------------------------------------------------------ code dependencies


def _module_file(name: str) -> Path | None:
    """The source file of module ``tradeoff.x.y`` (a module or a package's __init__), None if there is none."""
    parts = name.split(".")
    if parts[0] != PACKAGE.name or not all(p.isidentifier() for p in parts):
        return None
    base = SOURCES.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCES).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULE_STRING = re.compile(rf"^{PACKAGE.name}(\.\w+)+(:\w+)?$")


def _imported(path: Path, nodes) -> set[str]:
    """The modules of this package that these AST nodes of ``path`` import: import statements (relative ones
    resolved), and strings naming a module (``importlib.import_module("tradeoff.x")``, ``"tradeoff.x:function"``
    registries), with the parent packages that importing them runs."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)  # `from . import data`: a submodule
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
            found.add(node.value.partition(":")[0])
    out = set()
    for module in found:
        parts = module.split(".")
        out.update(m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if _module_file(m))
    return out


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _cli_nodes(command: str) -> list:
    """What of cli.py runs for a subcommand: its module-level statements and the functions that ``main`` and the
    subcommand's ``cmd_<name>`` call (other subcommands' functions left out)."""
    tree = _tree(PACKAGE / "cli" / "__init__.py")
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    entry = "cmd_" + command.replace("-", "_")
    if entry not in functions:
        raise KeyError(f"tradeoff.cli has no {entry}() for the subcommand {command!r}")
    todo, seen = ["main", entry], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        todo += [n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name) and n.id in functions
                 and not (n.id.startswith("cmd_") and n.id != entry)]
    module_level = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return module_level + [functions[n] for n in sorted(seen)]


@cache
def code_files(command: str) -> tuple[Path, ...]:
    """Every source file that ``tradeoff <command>`` can import: the import graph of this package from what cli.py
    runs for it, every import of a reached module counted (a function's lazy imports too)."""
    cli = PACKAGE / "cli" / "__init__.py"
    files = {cli}
    todo = [_module_file(m) for m in _imported(cli, _cli_nodes(command))]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        files.add(path)
        todo += [_module_file(m) for m in _imported(path, [_tree(path)])]
    return tuple(sorted(files))


def code_deps(command: str) -> list[str]:
    """:func:`code_files` as dvc.yaml deps, relative to the repository: a folder where all of its sources are
    needed, else the files."""
    files = set(code_files(command))
    folders = {d for d in PACKAGE.rglob("*") if d.is_dir() and d.name != "__pycache__"} | {PACKAGE}

    def full(folder: Path) -> bool:
        return all(p in files for p in folder.rglob("*.py"))

    out: list[Path] = []
    for folder in sorted(f for f in folders if full(f)):
        if not any(parent in folders and full(parent) for parent in folder.parents):
            out.append(folder)
    out += [f for f in files if not any(f.is_relative_to(d) for d in out)]
    return sorted(os.path.relpath(p, ROOT) for p in out)


# ----------------------------------------------------------------------------------------------------- the jobs


def report_targets(catalog: Catalog, targets: list[str] | None = None) -> list[str]:
    """The targets whose report jobs building ``targets`` runs (a group's members too), in catalog order."""
    if not targets:
        return list(catalog.targets)
    want, todo = set(), list(targets)
    while todo:
        name = todo.pop()
        if name not in want:
            want.add(name)
            todo += list(catalog.targets[name].targets)
    return [t for t in catalog.targets if t in want]


def report_kind(catalog: Catalog, name: str) -> str:
    """The Snakemake rule that builds a target: table (tables, and groups that hold one), figure, figure_list."""
    kind = catalog.targets[name].kind
    if kind == "group":
        return "table" if catalog.table_targets(name) else "figure_list"
    return kind


def unit_key(run_id: str, unit: str) -> str:
    """An evaluation job's name in dvc.yaml (``evaluate@<run>~<unit>``): DVC splits stage names at '@' and params keys
    at '.', so a budget's ``caat_pgd_l2@0.5`` becomes ``caat_pgd_l2~0p5``."""
    return f"{run_id}~{unit.replace('@', '~').replace('.', 'p')}"


def digest(settings) -> str:
    """A job's resolved settings as a stage's params: the same digest iff the same settings (the values Snakemake's
    rules take as ``params``). Digests, not the settings themselves, because DVC reads a stage's params file once per
    stage, and walks all of it for each key: with the settings spelled out, that alone took longer than 15 s."""
    return json_digest(settings)


def jobs(catalog: Catalog, targets: list[str] | None = None) -> dict:
    """The jobs of building ``targets`` (default: every target and the summary), as Snakemake's DAG has them, each
    with what its template needs and the digest of its resolved settings: the contents of jobs.json."""
    from tradeoff.audit import jobs as audit_jobs

    layout, data = catalog.layout, catalog.data_root
    audit_targets = audit_jobs.audit_targets(catalog)
    # audit targets (`audit_<table>`: only when named, as in Snakemake) need their rows' models, not their reports
    audits = [audit_targets[t] for t in targets or [] if t in audit_targets]
    named = [t for t in targets or [] if t not in audit_targets]
    reports = report_targets(catalog, named) if named or not audits else []
    audited = list(dict.fromkeys(m for t in audits for m in audit_jobs.audited_models(catalog, t)))
    pairs = list(dict.fromkeys(p for t in reports for p in catalog.evaluations(t)))
    units = list(dict.fromkeys((run, catalog.unit_of(attack)) for run, attack in pairs))
    order = list(catalog.training_runs())
    # an external model (the catalog's `external:`) is evaluated but trained by no job here
    needed = {run for run, _ in units if not catalog.is_external(run)} \
        | {r for t in reports for r in catalog.curve_train_ids(t)} | {r for t in reports for r in catalog.analysis_train_ids(t)} \
        | {r for m in audited for r in (m, audit_jobs.surrogate_for(catalog, m)) if r and not catalog.is_external(r)}
    writer = {str(layout.model(r)): r for r in order}
    todo = list(needed)
    while todo:  # a fine-tuning run needs the run whose model.pt is its backbone (the demo's pretraining)
        backbone = writer.get(str(catalog.runs[todo.pop()].backbone_file))
        if backbone is not None and backbone not in needed:
            needed.add(backbone)
            todo.append(backbone)
    runs = [r for r in order if r in needed]
    models = order + sorted(catalog.externals)
    units.sort(key=lambda u: (models.index(u[0]), catalog.eval_units(u[0]).index(u[1])))
    analyses = [t for t in reports if catalog.targets[t].analysis]

    datasets = {catalog.runs[r].dataset for r in runs} | {d for t in analyses for d in catalog.analysis_datasets(t)}
    out: dict = {"download": [], "train": {}, "finetune": {}, "evaluate": {}, "analyze": {},
                 "table": {}, "figure": {}, "figure_list": {}, "audit": {}}
    for run in runs:
        spec = catalog.runs[run]
        backbone = spec.backbone_file
        out["finetune" if backbone else "train"][run] = {
            "dataset": spec.dataset, **({"pretrained": backbone} if backbone else {}), "settings": spec.as_dict()}
    for run, unit in units:
        attacks = catalog.unit_attacks(run, unit)
        markers = catalog.evaluation_markers(run, attacks)
        datasets |= {Path(m).name for m in markers}
        key = unit_key(run, unit)
        if key in out["evaluate"]:
            raise ValueError(f"two evaluation jobs of {run} are both named {key!r} in dvc.yaml")
        if catalog.is_external(run):
            datasets.add(catalog.model_spec(run).dataset)
        out["evaluate"][key] = {
            "run": run, "unit": unit, "model": str(catalog.model_file(run)),  # a run's model.pt or a checkpoint file
            # what it reads besides the model: the corruption set of an NROB evaluation, else the model's test set
            "data": (markers[0] if len(markers) == 1 else str(Path(data) / ".ready") if markers
                     else str(ready_marker(data, catalog.model_spec(run).dataset))),
            "attacks": attacks, "settings": digest({a: catalog.attack_for(a, run) for a in attacks} | (
                {"external": catalog.model_spec(run).as_dict()} if catalog.is_external(run) else {}))}
    for name in analyses:
        models, sets = catalog.analysis_train_ids(name), catalog.analysis_datasets(name)
        # the models it reads: one run's model.pt, or the checkpoints folder for several (dvc.yaml's templates cannot
        # list a varying number); none (the synthetic experiment): its data again, a dependency DVC counts once
        marker = str(ready_marker(data, sets[0])) if len(sets) == 1 else str(Path(data) / ".ready")
        out["analyze"][name] = {
            "models": (str(layout.model(models[0])) if len(models) == 1 else str(layout.folder("checkpoints"))
                       if models else marker),
            "data": marker, "settings": digest(catalog.targets[name].analysis.as_dict())}
    for name in reports:
        # a target's settings as its report sees them (a group's with its members'): Snakemake's report_settings
        out[report_kind(catalog, name)][name] = {"settings": digest(catalog.report_settings(name))}
    for model in audited:
        marker = str(ready_marker(data, catalog.model_spec(model).dataset))
        datasets.add(catalog.model_spec(model).dataset)
        surrogate = audit_jobs.surrogate_for(catalog, model)
        # no surrogate: its data again, a dependency DVC counts once (a template's deps have a fixed length)
        out["audit"][model] = {"model": str(catalog.model_file(model)), "data": marker,
                               "surrogate": marker if surrogate is None else str(catalog.model_file(surrogate)),
                               "settings": digest(json.loads(audit_jobs.job_settings(catalog, model)))}
    out["download"] = sorted(datasets)
    return {kind: items for kind, items in out.items() if items}


# ------------------------------------------------------------------------------------------------ dvc.yaml


def config_files(files: list[str]) -> list[str]:
    """The config files every stage passes: the given ones, then params.yaml (the experiment's overlay)."""
    return [*files, PARAMS] if PARAMS not in files else list(files)


def pipeline(catalog: Catalog, files: list[str], items: dict, targets: list[str] | None = None) -> dict:
    """dvc.yaml: one stage template per kind of job that ``items`` (jobs.json) holds."""
    layout = catalog.layout
    cmd = "tradeoff ${config} "

    def params(kind: str) -> list:
        return [{JOBS: [f"{kind}.${{key}}"]}]

    def code(kind: str) -> list[str]:
        return code_deps(COMMAND[kind])

    def folders(*names: str) -> list[str]:
        return [str(layout.folder(n)) for n in names]

    has = {kind: kind in items for kind in ("train", "finetune", "evaluate", "analyze", "figure")}
    reads = (["metrics", "predictions"] if has["evaluate"] else []) + (
        ["curves"] if has["train"] or has["finetune"] else [])
    # the papers' numbers: reference/ beside the first config file (tradeoff.config.reference_dir), as the stages see it
    first = Path(files[0])
    reference = [str(first.parent / "reference") if not first.is_absolute()
                 else os.path.relpath(catalog.reference_dir)]
    config_deps = sorted({"config", "workflow/schemas/config.schema.yaml",
                          *(f for f in files if f != PARAMS and not f.startswith("config/"))})
    stages: dict = {"resolve": {
        "cmd": cmd + "export-dvc --jobs" + (" --targets " + " ".join(targets) if targets else ""),
        "deps": code("resolve") + config_deps,
        "params": [{PARAMS: None}],
        "outs": [{JOBS: {"cache": False, "persist": True}}]}}

    def each(kind: str, stage: dict) -> None:
        if kind in items:
            stages[kind] = {"foreach": f"${{{kind}}}", "do": stage}

    each("download", {"cmd": cmd + "download ${item}", "deps": code("download"),
                      "outs": [str(ready_marker(catalog.data_root, "${item}"))]})
    model = str(layout.model("${key}"))
    # dvclive's files (tradeoff.storage.curves): `dvc exp show` reads the metrics file, `dvc plots diff` overlays the curves,
    # a TSV per column with the epoch as dvclive's step
    curve_metrics, curve_plots, ran_on = map(str, layout.curve_files("${key}"))
    for kind, backbone in (("train", []), ("finetune", ["${item.pretrained}"])):
        each(kind, {"cmd": cmd + "train --run ${key}",
                    "deps": code(kind) + [str(ready_marker(catalog.data_root, "${item.dataset}"))] + backbone,
                    "params": params(kind), "outs": [model, ran_on], "metrics": [curve_metrics],
                    "plots": [{curve_plots: {"x": "step"}}]})
    each("evaluate", {"cmd": cmd + "evaluate --run ${item.run} --unit ${item.unit}",
                      "deps": code("evaluate") + ["${item.model}", "${item.data}"],
                      "params": params("evaluate"),
                      "metrics": [str(layout.metrics("${item.run}", "${item.unit}"))],
                      "outs": [str(layout.predictions("${item.run}", "${item.unit}"))]})
    each("analyze", {"cmd": cmd + "analyze ${key}", "deps": code("analyze") + ["${item.models}", "${item.data}"],
                     "params": params("analyze"), "outs": [str(layout.analysis("${key}"))]})
    each("table", {"cmd": cmd + "report ${key}", "deps": code("table") + folders(*reads) + reference,
                   "params": params("table"), "outs": list(map(str, layout.tables("${key}").values()))})
    each("figure", {"cmd": cmd + "report ${key}",
                    "deps": code("figure") + folders(*reads, *(["analysis"] if has["analyze"] else [])) + reference,
                    "params": params("figure"), "outs": list(map(str, layout.figures("${key}").values()))})
    tables = layout.tables("${key}")
    each("figure_list", {"cmd": cmd + "report ${key}", "deps": code("figure_list") + folders("figures"),
                         "params": params("figure_list"), "outs": [str(tables["md"]), str(tables["html"])]})
    each("audit", {"cmd": cmd + "audit --run ${key}",
                   "deps": code("audit") + ["${item.model}", "${item.surrogate}", "${item.data}"],
                   "params": params("audit"), "outs": list(map(str, layout.audit("${key}").values()))})
    if not targets:
        built = reads + (["analysis"] if has["analyze"] else []) + ["tables"] + (["figures"] if has["figure"] else [])
        # the papers' claims beside reference/ (tradeoff.report.claims), as the stages see the path
        claims = [str(Path(reference[0]).parent / "claims.yaml")] if (
            Path(catalog.reference_dir).parent / "claims.yaml").exists() else []
        stages["summary"] = {"cmd": cmd + "summary", "deps": code("summary") + folders(*built) + reference + claims,
                             "outs": list(map(str, layout.summary().values()))}
    return {"vars": [JOBS, {"config": " ".join(f"--config {f}" for f in config_files(files))}], "stages": stages}


# ---------------------------------------------------------------------------------------------- YAML output


def _dump(data) -> str:
    """YAML, block style above, flow style for lists and mappings of scalars."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)


GENERATED = ("Written by `tradeoff export-dvc` (src/tradeoff/pipeline/dvc_export.py) and by the pipeline's resolve stage from the catalog; "
             "do not edit. A job per line: dvc.yaml's stages are templates over these, and a stage's params are its "
             "entry, whose `settings` are the resolved settings its output depends on (a training run's and an "
             "evaluation's attacks' spelled out, a report's or an analysis's as a digest). JSON, which DVC "
             "reads in milliseconds (it reads the params file once per stage).")


def _jobs_text(items: dict) -> str:
    """jobs.json: a line per job."""
    def line(value) -> str:
        return json.dumps(value, ensure_ascii=False)

    parts = [f'  "_generated": {line(GENERATED)}']
    for kind, entries in items.items():
        if isinstance(entries, list):
            parts.append(f"  {line(kind)}: {line(entries)}")
        else:
            parts.append(f"  {line(kind)}: {{\n" + ",\n".join(f"    {line(job)}: {line(entry)}"
                                                               for job, entry in entries.items()) + "\n  }")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _pipeline_text(data: dict) -> str:
    comments = {
        "resolve": "# jobs.json from config/ and params.yaml, before any other stage is checked (so that\n"
                   "# `dvc exp run -S` works); it stops if dvc.yaml is stale or the list of jobs changed (then\n"
                   "# run `dvc repro` again)",
        "download": "# the datasets' download markers",
        "train": "# one per run that a target needs (runs whose settings are identical share one)",
        "finetune": "# a run that fine-tunes a pretrained backbone (pretrained.<arch>: at the demo scale, the\n"
                    "# model.pt of a run)",
        "evaluate": "# one per evaluation job of a run (runtime.eval_unit: every attack of a run, or one attack)",
        "analyze": "# a figure's analysis (t-SNE, image grid, synthetic experiment): the checkpoints of its runs",
        "table": "# reports read the folders of metrics, predictions, curves, analyses (a varying number of files per\n"
                 "# target, which DVC's templating cannot list per item)",
        "figure": None, "figure_list": "# a group of figures: the list of its members", "summary": None}
    lines = [HEADER.rstrip("\n"),
             "# One template per kind of job (Snakemake's rules), over the jobs in jobs.json; the code a stage",
             "# depends on is what its `tradeoff` subcommand imports. Your experiment's settings go in params.yaml.",
             _dump({"vars": data["vars"]}).rstrip("\n"), "stages:"]
    for name, stage in data["stages"].items():
        if comments.get(name):
            lines += ["  " + c for c in comments[name].splitlines()]
        lines.append("  " + _dump({name: stage}).rstrip("\n").replace("\n", "\n  "))
    return "\n".join(lines) + "\n"


def render_dvc(catalog: Catalog, files: list[str], targets: list[str] | None = None) -> dict[str, str]:
    """The text of dvc.yaml and jobs.json for these config files (only what ``targets`` need, if given)."""
    items = jobs(catalog, targets)
    return {"dvc.yaml": _pipeline_text(pipeline(catalog, files, items, targets)), JOBS: _jobs_text(items)}


# ---------------------------------------------------------------------------- the stages as DVC expands them


_VAR = re.compile(r"\$\{([^}]*)\}")


def _expand(value, context: dict):
    """DVC's interpolation of one template value (``${key}``, ``${item.x}``, ``${config}``)."""
    if isinstance(value, str):
        def get(match):
            node = context
            for part in match.group(1).strip().split("."):
                node = node[part]
            return str(node)
        return _VAR.sub(get, value)
    if isinstance(value, list):
        return [_expand(v, context) for v in value]
    if isinstance(value, dict):
        return {_expand(k, context): _expand(v, context) for k, v in value.items()}
    return value


def stages(catalog: Catalog, files: list[str], targets: list[str] | None = None) -> dict[str, dict]:
    """The stages of dvc.yaml as DVC expands its templates: ``{"train@<run>": {"cmd": ..., "deps": [...]}, ...}``
    (a test checks that DVC expands them the same)."""
    items = jobs(catalog, targets)
    data = pipeline(catalog, files, items, targets)
    context = {"config": data["vars"][1]["config"], **items}
    out = {}
    for name, stage in data["stages"].items():
        if "foreach" not in stage:
            out[name] = _expand(stage, context)
            continue
        group = items[name]
        for key, item in (group.items() if isinstance(group, dict) else ((v, v) for v in group)):
            out[f"{name}@{key}"] = _expand(stage["do"], {**context, "key": key, "item": item})
    return out


def stage_job(name: str, items: dict) -> tuple:
    """The Snakemake job of a DVC stage: (rule, wildcards...), e.g. ("evaluate", run, unit), ("train", run)."""
    kind, _, key = name.partition("@")
    if kind == "evaluate":
        return ("evaluate", items["evaluate"][key]["run"], items["evaluate"][key]["unit"])
    if kind == "finetune":
        return ("train", key)
    return (kind, key) if key else (kind,)


# ---------------------------------------------------------------------------------------------------- export


def default_files() -> list[str]:
    return ["config/config.yaml", "config/demo.yaml"]


class Stale(Exception):
    """What the resolve stage found: dvc.yaml no longer matches the catalog and code, or the jobs changed."""


def export(catalog: Catalog, files: list[str], targets: list[str] | None = None, *, check: bool = False,
           jobs_only: bool = False) -> list[str]:
    """Write dvc.yaml and jobs.json (and an empty params.yaml if there is none); returns what was written. ``check``:
    write nothing, raise Stale naming the stale files. ``jobs_only`` (the resolve stage): write jobs.json, and raise
    Stale if dvc.yaml is stale or the list of jobs changed (DVC has already expanded the templates over the old one)."""
    texts = render_dvc(catalog, files, targets)
    stale = [path for path, text in texts.items() if not Path(path).is_file() or Path(path).read_text() != text]
    if check:
        if stale:
            raise Stale(f"stale: {', '.join(stale)}; run `tradeoff export-dvc` (see README)")
        return []
    if jobs_only:
        old = json.loads(Path(JOBS).read_text()) if Path(JOBS).is_file() else None
        new = json.loads(texts[JOBS])
        if JOBS in stale:
            Path(JOBS).write_text(texts[JOBS])
        if "dvc.yaml" in stale:
            raise Stale("dvc.yaml is stale (the code's imports or the targets changed): run `tradeoff export-dvc`, "
                        "then `dvc repro`")
        if old is not None and _keys(old) != _keys(new):
            raise Stale(f"the pipeline's jobs changed ({JOBS} rewritten): run `dvc repro` again")
        return [JOBS] if JOBS in stale else []
    for path in stale:
        Path(path).write_text(texts[path])
    if not Path(PARAMS).exists():
        Path(PARAMS).write_text(PARAMS_TEXT)
        stale.append(PARAMS)
    return stale


def _keys(items: dict) -> dict:
    return {kind: sorted(v) if isinstance(v, (dict, list)) else v for kind, v in items.items()}
