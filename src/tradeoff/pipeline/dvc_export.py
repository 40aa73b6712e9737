"""The DVC pipeline, written by ``tradeoff export-dvc`` from the catalog: dvc.yaml and jobs.json (params.yaml is yours).

- **dvc.yaml** holds templates (``foreach``) per kind of job, the kinds of the Snakemake rules (download, train,
  evaluate, analyze, table, figure, figure_list, summary; ``finetune`` is a ``train`` job that reads a pretrained
  backbone), over the jobs listed in jobs.json, plus ``resolve``, which writes jobs.json. A stage depends on the code
  its job runs (:func:`code_files`, from the import graph of the package): its subcommand's module, what that imports,
  and of the plug-ins (the modules that register a method, a figure kind, an analysis or an attack's code,
  :func:`plugins`) only those whose names the job uses, so editing TRADES re-runs the runs that train with its code,
  a figure kind's module the figures it draws, and adding a method's module no job but the resolve stage. A kind's jobs that run the same code share a template (:func:`templates`: ``train-trades``,
  ``figure-front``, ``evaluate``).
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
import importlib
import json
import os
import re
from functools import cache
from pathlib import Path

import yaml

from tradeoff.audit import jobs as audit_jobs
from tradeoff.config import Catalog
from tradeoff.core.spec import json_digest
from tradeoff.storage.layout import ready_marker

PACKAGE = Path(__file__).resolve().parents[1]  # src/tradeoff
SOURCES = PACKAGE.parent                   # src
ROOT = SOURCES.parent                      # the repository (or workflow copy) root
JOBS = "jobs.json"
PARAMS = "params.yaml"
HEADER = ("# Written by `tradeoff export-dvc` (src/tradeoff/pipeline/dvc_export.py) from the catalog; do not edit: change config/\n"
          "# (or params.yaml) and run it again. tests/test_pipeline.py::test_shipped_dvc_yaml_is_current fails when\n"
          "# stale.\n")
#: how a stage runs the CLI: the checkout's .venv (`make install`) first, else the `tradeoff` on PATH (an activated
#: environment), so that `.venv/bin/dvc repro` works without activating anything ($DVC_ROOT: DVC sets it to the
#: repository's folder for every stage's command)
TRADEOFF = 'PATH="$DVC_ROOT/.venv/bin:$PATH" tradeoff'
PARAMS_TEXT = ("# A config overlay that every DVC stage reads last (after config/config.yaml and config/demo.yaml):\n"
               "# the parameters of an experiment, e.g. `dvc exp run -S '+scale_map.epochs=12'`. Empty: the demo as\n"
               "# shipped.\n"
               "{}\n")

# the tradeoff subcommand each kind of stage runs (its code dependencies are what that subcommand imports)
COMMAND = {"resolve": "export-dvc", "download": "download", "train": "train", "finetune": "train",
           "evaluate": "evaluate", "analyze": "analyze", "table": "report", "figure": "report",
           "figure_list": "report", "claims": "report", "summary": "summary", "audit": "audit"}

#: the registries whose entries are plug-ins, by the module that holds the function registering them: a job depends
#: on a plug-in module only if it uses a name the module registers (a run's method, a figure's plot, a figure's
#: analysis, an attack), or if a module it depends on imports it to use it
PLUGIN_REGISTRIES = {"tradeoff.methods.base": "method", "tradeoff.report.kinds": "figure",
                     "tradeoff.analysis.base": "analysis", "tradeoff.attacks.base": "attack"}
#: the plug-ins that name a template (``train-trades``, ``figure-front``); not the attacks, which every job that builds
#: one may run
NAMING = ("method", "figure", "analysis")
#: the kinds of job that build attacks (a training attack, an evaluation's, the selection's, an analysis's, the
#: audit's): they may run every attack's code; the others (reports, downloads) resolve the catalog only, which reads
#: the attacks' declarations (tradeoff.attacks.declared), not their code
RUN_ATTACKS = ("train", "finetune", "evaluate", "analyze", "audit")
#: the function that imports every module of a package (tradeoff.core.plugins): a module that calls it imports them
DISCOVER = ("tradeoff.core.plugins", "discover")
#: the plug-in modules of every registry: what the resolve stage, which reads every method's declarations, uses
EVERY_PLUGIN = None


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


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """The module an ``from ... import`` of ``path`` names, relative imports resolved."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if not node.level:
        return node.module or ""
    base = package.split(".")[:len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


@cache
def _imports(path: Path) -> tuple[tuple[str, bool], ...]:
    """The modules of this package that ``path`` imports, each with whether it only registers: import statements
    (a function's lazy ones too, relative ones resolved), strings naming a module (a call's argument:
    ``importlib.import_module("tradeoff.x")``; ``"tradeoff.x:function"`` anywhere), the parent packages that
    importing them runs, of a lazy package it imports (:func:`_lazy_names`), the modules that own the names it
    reads there (``from tradeoff.methods import METHODS``, ``attacks.from_spec``): importing a lazy package runs none
    of them, and of a package it discovers (``discover("tradeoff.methods")``, :data:`DISCOVER`), every module. An
    import only registers when it binds a plug-in module (:func:`plugins`) by a name the module never uses, or
    discovers it: it fills the registry, and a job that does not use the plug-in's name does not run its code."""
    tree = _tree(path)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    used |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}  # __all__
    read = used | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # names a module may read
    table = _lazy_names(_module_name(path)) if path.name == "__init__.py" else {}
    plugin_modules = plugins()
    found: dict[str, bool] = {}

    def add(module: str, only_registers: bool = False) -> None:
        parts = module.split(".")
        for name in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
            if _module_file(name):
                found[name] = found.get(name, True) and (only_registers if name == module else False)

    origin = {alias.asname or alias.name: (_absolute(path, node), alias.name) for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) for alias in node.names}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):  # discover("tradeoff.methods", ...)
        if not (isinstance(call.func, ast.Name) and origin.get(call.func.id) == DISCOVER and call.args):
            continue
        arg = call.args[0]
        package = arg.value if isinstance(arg, ast.Constant) else \
            _module_name(path) if isinstance(arg, ast.Name) and arg.id == "__name__" else None
        for module in _package_modules(str(package)) if package else []:
            add(module, module in plugin_modules)  # a plug-in it imports only fills its registry
    named = {id(arg) for call in ast.walk(tree) if isinstance(call, ast.Call) for arg in call.args}
    named |= {id(value) for table in ast.walk(tree) if isinstance(table, ast.Dict) for value in table.values}
    def add_lazy(package: str, names) -> None:  # the owners of the names read from a lazy package
        for module in sorted({owner for name, owner in _lazy_names(package).items() if name in names}):
            add(module)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
                add_lazy(alias.name, read)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(path, node)
            add(module)
            add_lazy(module, {alias.name for alias in node.names})
            for alias in node.names:  # `from . import data`: a submodule
                sub = f"{module}.{alias.name}"
                add(sub, sub in plugin_modules and (alias.asname or alias.name) not in used)
                add_lazy(sub, read)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value) \
                and (id(node) in named or ":" in node.value) \
                and node.value not in table.values():  # a call's argument, or a "module:function"
            add(node.value.partition(":")[0])
    return tuple(sorted(found.items()))


def _package_modules(package: str) -> list[str]:
    """The modules of a package of this one (not its subpackages'), as :func:`tradeoff.core.plugins.package_modules`
    finds them (read from the folder: no import)."""
    path = _module_file(package)
    if path is None or path.name != "__init__.py":
        return []
    found = [p.stem for p in path.parent.glob("*.py") if p.name != "__init__.py"]
    found += [d.name for d in path.parent.iterdir() if (d / "__init__.py").is_file()]  # a subpackage
    return sorted(f"{package}.{name}" for name in found)


@cache
def _lazy_names(module: str) -> dict[str, str]:
    """The name -> owning module table of a lazy package of this one (``_NAMES``, served by
    :func:`tradeoff.core.lazy_imports.lazy_package`; its modules are imported only when one of their names is read),
    empty for any other module. Read by importing the package, which imports none of them."""
    path = _module_file(module)
    if path is None or path.name != "__init__.py" or "lazy_package" not in path.read_text():
        return {}
    return dict(importlib.import_module(module)._NAMES)


def _registered(path: Path) -> list[tuple[str, str]]:
    """(registry, name) of every plug-in that a module registers at its top level: a class or function decorated with
    the register function of a registry of PLUGIN_REGISTRIES, by the decorator's first argument or the class's
    ``name``."""
    tree = _tree(path)
    origin = {alias.asname or alias.name: _absolute(path, node) for node in tree.body
              if isinstance(node, ast.ImportFrom) for alias in node.names}
    out = []
    for node in tree.body:
        for decorator in getattr(node, "decorator_list", []):
            call = decorator if isinstance(decorator, ast.Call) else None
            function = call.func if call else decorator
            registry = PLUGIN_REGISTRIES.get(origin.get(function.id)) if isinstance(function, ast.Name) else None
            if registry is None:
                continue
            if call and call.args and isinstance(call.args[0], ast.Constant):
                out.append((registry, call.args[0].value))
            elif isinstance(node, ast.ClassDef):
                name = _class_name(path, node)
                out += [(registry, name)] if name is not None else []
    return out


def _class_name(path: Path, node: ast.ClassDef) -> str | None:
    """The ``name`` a class of module ``path`` sets in its body, or else the one its first base that sets one does
    (an implementation takes its name from its declaration: ``class TRADES(declared.TRADES, KLInner)``)."""
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["name"] \
                and isinstance(stmt.value, ast.Constant):
            return stmt.value.value
    tree = _tree(path)
    bound = {}  # local name -> the module, or (module, name) of a class, it is bound to by a from-import
    for imp in (n for n in tree.body if isinstance(n, ast.ImportFrom)):
        module = _absolute(path, imp)
        for alias in imp.names:
            sub = f"{module}.{alias.name}"
            bound[alias.asname or alias.name] = sub if _module_file(sub) else (module, alias.name)
    for base in node.bases:
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) \
                and isinstance(bound.get(base.value.id), str):
            module, cls = bound[base.value.id], base.attr
        elif isinstance(base, ast.Name) and isinstance(bound.get(base.id), tuple):
            module, cls = bound[base.id]
        elif isinstance(base, ast.Name):
            module, cls = _module_name(path), base.id
        else:
            continue
        source = _module_file(module)
        found = [n for n in _tree(source).body if isinstance(n, ast.ClassDef) and n.name == cls] if source else []
        name = _class_name(source, found[0]) if found else None
        if name is not None:
            return name
    return None


@cache
def plugins() -> dict[str, tuple[tuple[str, str], ...]]:
    """Every plug-in module of the package (``tradeoff.methods.trades``) with the (registry, name) pairs it registers
    (``(("method", "trades"),)``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        registered = _registered(path)
        if registered:
            out[_module_name(path)] = tuple(registered)
    return out


def plugin_modules(uses) -> set[str]:
    """The plug-in modules that register the (registry, name) pairs ``uses``; EVERY_PLUGIN: all of them."""
    return {module for module, registered in plugins().items() if uses is EVERY_PLUGIN or set(registered) & set(uses)}


def command_module(command: str) -> Path:
    """The module of a ``tradeoff`` subcommand (tradeoff.cli.commands, one per subcommand, named after it)."""
    path = PACKAGE / "cli" / "commands" / f"{command.replace('-', '_')}.py"
    if not path.is_file():
        raise KeyError(f"tradeoff.cli has no subcommand {command!r} (no {os.path.relpath(path, ROOT)})")
    return path


@cache
def code_files(command: str, uses=EVERY_PLUGIN) -> tuple[Path, ...]:
    """Every source file that ``tradeoff <command>`` runs for a job that uses the plug-ins ``uses`` ((registry, name)
    pairs; EVERY_PLUGIN: every plug-in its modules import): the import graph of this package from the command line's
    module and the subcommand's, every import of a reached module counted (a function's lazy imports too), but an
    import that only fills a registry (:func:`_imports`) only for the plug-ins in ``uses``, which are reached
    besides."""
    cli = PACKAGE / "cli" / "__init__.py"
    roots = [cli, command_module(command)] + [_module_file(m) for m in sorted(plugin_modules(uses or ()))
                                                if uses is not EVERY_PLUGIN]
    files: set[Path] = set()
    todo = list(roots)
    while todo:
        path = todo.pop()
        if path in files:
            continue
        files.add(path)
        todo += [_module_file(m) for m, only_registers in _imports(path) if uses is EVERY_PLUGIN or not only_registers]
    return tuple(sorted(files))


def code_deps(command: str, uses=EVERY_PLUGIN) -> list[str]:
    """:func:`code_files` as dvc.yaml deps, relative to the repository: a folder where all of its sources are
    needed, else the files."""
    files = set(code_files(command, uses))
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
    layout, data = catalog.layout, catalog.data_root
    audit_targets = audit_jobs.audit_targets(catalog)
    # audit targets (`audit_<table>`: only when named, as in Snakemake) need their rows' models, not their reports
    audits = [audit_targets[t] for t in targets or [] if t in audit_targets]
    named = [t for t in targets or [] if t not in audit_targets]
    reports = report_targets(catalog, named) if named or not audits else []
    audited = list(dict.fromkeys(m for t in audits for m in audit_jobs.audited_models(catalog, t)))
    if not targets:  # every build audits `audit.build`'s rows, before the tables that read them (as Snakemake's)
        audited = list(dict.fromkeys(audited + catalog.built_audits()))
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
            "attacks": attacks, "settings": digest({a: catalog.attack_for(a, run).as_dict() for a in attacks} | (
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


def uses(catalog: Catalog, kind: str, key: str) -> frozenset:
    """The plug-ins (registry, name) that a job of ``kind`` runs: a training run's method, a figure's plot, a figure's
    analysis, and every attack for a job that builds attacks (RUN_ATTACKS); none for the other jobs."""
    out = set(_every("attack")) if kind in RUN_ATTACKS else set()
    if kind in ("train", "finetune"):
        out.add(("method", catalog.runs[key].method.name))
    if kind == "figure":
        out.add(("figure", catalog.targets[key].plot))
    if kind == "analyze":
        out.add(("analysis", catalog.targets[key].analysis.name))
    return frozenset(out)


def _every(registry: str) -> frozenset[tuple[str, str]]:
    """Every plug-in (registry, name) of one registry ("method", "attack")."""
    return frozenset(pair for registered in plugins().values() for pair in registered if pair[0] == registry)


def wall_clock(catalog: Catalog, kind: str, key: str) -> bool:
    """Whether a job's outputs carry the clock's measurements: a table (or a group's table) with a training-time
    column (``train:minutes``, Table 4), whose minutes come from the runs' sidecars. Its template declares them
    uncached (``cache: false``): they differ at every rebuild, so they are not results to cache, push and pull, and a
    faithful rebuild hashes the same in every cached output. They are ``persist: true`` too, which keeps their stage
    out of DVC's run cache: that cache commits a stage's uncached outputs into ``.dvc/cache`` (at ``dvc repro`` and at
    ``dvc commit``) and would restore an earlier build's minutes, which no dependency of the stage records."""
    if kind != "table":
        return False
    leaves = catalog.leaf_targets(key)
    return any("train:minutes" in catalog.targets[leaf].columns.values() for leaf in leaves
               if catalog.targets[leaf].kind == "table")


def _short(module: str) -> str:
    """A plug-in module's name in a template's name: its own, less the prefix its package's plug-ins share
    (``tradeoff.report.fig_front``: ``front``)."""
    package, _, stem = module.rpartition(".")
    siblings = [m.rpartition(".")[2] for m in plugins() if m.rpartition(".")[0] == package]
    prefix = os.path.commonprefix(siblings).rpartition("_")[0] if len(siblings) > 1 else ""
    return stem[len(prefix) + 1:] if prefix else stem


def templates(catalog: Catalog, items: dict) -> dict[str, dict]:
    """dvc.yaml's templates over the jobs ``items``: the jobs of a kind whose code dependencies are equal share one
    (DVC's ``foreach`` cannot vary a stage's list of deps by item, treeverse/dvc#8171), named after the kind and the
    plug-in modules its jobs run (``train-trades``, ``figure-front``; ``evaluate`` when they run none), and apart,
    ``-clock``, the jobs whose outputs carry the clock's measurements (:func:`wall_clock`). Each is ``{"kind", "uses",
    "clock", "jobs"}``, its jobs as in ``items`` (a dict, or download's list)."""
    out: dict[str, dict] = {}
    for kind, entries in items.items():
        groups: dict[tuple, dict] = {}
        for key in entries:
            use, clock = uses(catalog, kind, key), wall_clock(catalog, kind, key)
            group = groups.setdefault((code_files(COMMAND[kind], use), clock),
                                      {"kind": kind, "uses": set(), "clock": clock, "jobs": []})
            group["uses"] |= use
            group["jobs"].append(key)
        for group in groups.values():
            modules = sorted({_short(m) for m in plugin_modules({u for u in group["uses"] if u[0] in NAMING})})
            name = "-".join([kind, "_".join(modules)] if modules else [kind]) + ("-clock" if group["clock"] else "")
            jobs_of = group["jobs"] if isinstance(entries, list) else {k: entries[k] for k in group["jobs"]}
            out[name] = {"kind": kind, "uses": frozenset(group["uses"]), "clock": group["clock"], "jobs": jobs_of}
    return out


# ------------------------------------------------------------------------------------------------ dvc.yaml


def config_files(files: list[str]) -> list[str]:
    """The config files every stage passes: the given ones, then params.yaml (the experiment's overlay)."""
    return [*files, PARAMS] if PARAMS not in files else list(files)


def pipeline(catalog: Catalog, files: list[str], items: dict, targets: list[str] | None = None) -> dict:
    """dvc.yaml: the templates (:func:`templates`) over the jobs ``items`` (by kind, as :func:`jobs` returns them)."""
    layout, groups = catalog.layout, templates(catalog, items)
    cmd = "${tradeoff} ${config} "

    def folders(*names: str) -> list[str]:
        return [str(layout.folder(n)) for n in names]

    has = {kind: kind in items for kind in ("train", "finetune", "evaluate", "analyze", "figure")}
    reads = (["metrics", "predictions"] if has["evaluate"] else []) + (
        ["curves"] if has["train"] or has["finetune"] else [])
    # the papers' numbers: reference/ beside the first config file (tradeoff.config.reference_dir), as the stages see it
    first = Path(files[0])
    reference = [str(first.parent / "reference") if not first.is_absolute()
                 else os.path.relpath(catalog.reference_dir)]
    stages: dict = {"resolve": _resolve_stage(cmd, files, targets)}

    def each(kind: str, stage: dict) -> None:
        """A template per group of ``kind``'s jobs: ``stage`` with the code its jobs run first among its deps, and
        with params (``"params": True``), their entries in jobs.json."""
        for name, group in groups.items():
            if group["kind"] == kind:
                do = {**stage, "deps": code_deps(COMMAND[kind], group["uses"]) + stage["deps"]}
                if group["clock"]:  # the clock's minutes: uncached, and no run cache (wall_clock)
                    do["outs"] = [{out: {"cache": False, "persist": True}} for out in stage["outs"]]
                if "params" in stage:
                    do["params"] = [{JOBS: [f"{name}.${{key}}"]}]
                stages[name] = {"foreach": f"${{{name}}}", "do": do}

    each("download", {"cmd": cmd + "download ${item}", "deps": [],
                      "outs": [str(ready_marker(catalog.data_root, "${item}"))]})
    model = str(layout.model("${key}"))
    # dvclive's files (tradeoff.storage.curves): `dvc exp show` reads the metrics file, `dvc plots diff` overlays the curves,
    # a TSV per column with the epoch as dvclive's step
    curve_metrics, curve_plots, ran_on = map(str, layout.curve_files("${key}"))
    for kind, backbone in (("train", []), ("finetune", ["${item.pretrained}"])):
        each(kind, {"cmd": cmd + "train --run ${key}",
                    "deps": [str(ready_marker(catalog.data_root, "${item.dataset}"))] + backbone,
                    "params": True, "outs": [model, ran_on], "metrics": [curve_metrics],
                    "plots": [{curve_plots: {"x": "step"}}]})
    each("evaluate", {"cmd": cmd + "evaluate --run ${item.run} --unit ${item.unit}",
                      "deps": ["${item.model}", "${item.data}"],
                      "params": True,
                      "metrics": [str(layout.metrics("${item.run}", "${item.unit}"))],
                      "outs": [str(layout.predictions("${item.run}", "${item.unit}"))]})
    each("analyze", {"cmd": cmd + "analyze ${key}", "deps": ["${item.models}", "${item.data}"],
                     "params": True, "outs": [str(layout.analysis("${key}"))]})
    audits = ["audit"] if "audit" in items else []  # a table marks the columns its rows' audits find overstated
    each("table", {"cmd": cmd + "report ${key}", "deps": folders(*reads, *audits) + reference,
                   "params": True, "outs": list(map(str, layout.tables("${key}").values()))})
    each("figure", {"cmd": cmd + "report ${key}",
                    "deps": folders(*reads, *(["analysis"] if has["analyze"] else [])) + reference,
                    "params": True, "outs": list(map(str, layout.figures("${key}").values()))})
    tables = layout.tables("${key}")
    each("figure_list", {"cmd": cmd + "report ${key}", "deps": folders("figures"),
                         "params": True, "outs": [str(tables["md"]), str(tables["html"])]})
    # an audit reads the columns the tables report for its model (their metrics and predictions): after them
    each("audit", {"cmd": cmd + "audit --run ${key}",
                   "deps": ["${item.model}", "${item.surrogate}", "${item.data}"]
                   + folders(*(["metrics", "predictions"] if has["evaluate"] else [])),
                   "params": True, "outs": list(map(str, layout.audit("${key}").values()))})
    if not targets:
        built = reads + (["analysis"] if has["analyze"] else []) + audits + ["tables"] + (
            ["figures"] if has["figure"] else [])
        stages.update(_closing_stages(catalog, cmd, folders(*reads), folders(*built), reference))
    return {"vars": [JOBS, {"tradeoff": TRADEOFF, "config": " ".join(f"--config {f}" for f in config_files(files))}],
            "stages": stages}


def _resolve_stage(cmd: str, files: list[str], targets: list[str] | None) -> dict:
    """The stage that resolves the catalog into jobs.json (`export-dvc --jobs`): on the configuration and every
    method's code."""
    config_deps = sorted({"config", "workflow/schemas/config.schema.yaml",
                          *(f for f in files if f != PARAMS and not f.startswith("config/"))})
    return {"cmd": cmd + "export-dvc --jobs" + (" --targets " + " ".join(targets) if targets else ""),
            "deps": code_deps(COMMAND["resolve"], _every("method")) + config_deps,  # it reads every method
            "params": [{PARAMS: None}],
            "outs": [{JOBS: {"cache": False, "persist": True}}]}


def _closing_stages(catalog: Catalog, cmd: str, reads: list[str], built: list[str], reference: list[str]) -> dict:
    """The whole build's last stages (no --targets): the papers' claims on the result folders ``reads``, then the
    summary on every folder ``built``."""
    layout = catalog.layout
    # the papers' claims beside reference/ (tradeoff.report.claims), as the stages see the path
    claims = [str(Path(reference[0]).parent / "claims.yaml")] if (
        Path(catalog.reference_dir).parent / "claims.yaml").exists() else []
    # the claims' forest plot, in figures/ (a folder the summary depends on: so it runs first)
    return {"claims": {"cmd": cmd + "report --claims",
                       "deps": code_deps(COMMAND["claims"], frozenset()) + reads + reference + claims,
                       "outs": list(map(str, layout.claims_figure().values()))},
            "summary": {"cmd": cmd + "summary",  # it draws no figure: no plug-in
                        "deps": code_deps(COMMAND["summary"], frozenset()) + built + reference + claims,
                        "outs": list(map(str, layout.summary().values()))}}


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
        "train": "# one per run that a target needs (runs whose settings are identical share one), a template per\n"
                 "# method: train-<method> depends on the code that trains with it",
        "finetune": "# a run that fine-tunes a pretrained backbone (pretrained.<arch>: at the demo scale, the\n"
                    "# model.pt of a run)",
        "evaluate": "# one per evaluation job of a run (runtime.eval_unit: every attack of a run, or one attack)",
        "analyze": "# a figure's analysis (t-SNE, image grid, synthetic experiment): the checkpoints of its runs",
        "table": "# reports read the folders of metrics, predictions, curves, analyses (a varying number of files per\n"
                 "# target, which DVC's templating cannot list per item); table-clock: the tables with a training\n"
                 "# time (the clock's minutes, from the sidecars), uncached and kept out of DVC's run cache (persist)",
        "figure": "# figure-<kind>: the figures drawn by one drawing module (report/fig_<kind>.py)",
        "figure_list": "# a group of figures: the list of its members",
        "claims": "# the claims' forest plot (the summary embeds it), then the summary page and cells.csv",
        "summary": None}
    lines = [HEADER.rstrip("\n"),
             "# Templates per kind of job (Snakemake's rules), over the jobs in jobs.json; the code a stage depends",
             "# on is what its `tradeoff` subcommand runs for it: a method, a figure kind or an analysis counts",
             "# for the jobs that use it only (docs/dvc.md). Your experiment's settings go in params.yaml.",
             "# ${tradeoff}: the checkout's .venv/bin/tradeoff, else the one on PATH.",
             _dump({"vars": data["vars"]}).rstrip("\n"), "stages:"]
    said = set()
    for name, stage in data["stages"].items():
        kind = stage_kind(name)
        if comments.get(kind) and kind not in said:  # once, before the first template of its kind
            said.add(kind)
            lines += ["  " + c for c in comments[kind].splitlines()]
        lines.append("  " + _dump({name: stage}).rstrip("\n").replace("\n", "\n  "))
    return "\n".join(lines) + "\n"


def render_dvc(catalog: Catalog, files: list[str], targets: list[str] | None = None) -> dict[str, str]:
    """The text of dvc.yaml and jobs.json for these config files (only what ``targets`` need, if given)."""
    items = jobs(catalog, targets)
    return {"dvc.yaml": _pipeline_text(pipeline(catalog, files, items, targets)),
            JOBS: _jobs_text(template_jobs(catalog, items))}


def template_jobs(catalog: Catalog, items: dict) -> dict:
    """The contents of jobs.json: the jobs ``items`` by template (what each template's ``foreach`` runs over)."""
    return {name: group["jobs"] for name, group in templates(catalog, items).items()}


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
    grouped = template_jobs(catalog, items)
    context = {**data["vars"][1], **grouped}
    out = {}
    for name, stage in data["stages"].items():
        if "foreach" not in stage:
            out[name] = _expand(stage, context)
            continue
        group = grouped[name]
        for key, item in (group.items() if isinstance(group, dict) else ((v, v) for v in group)):
            out[f"{name}@{key}"] = _expand(stage["do"], {**context, "key": key, "item": item})
    return out


def stage_kind(name: str) -> str:
    """The kind of job of a DVC stage: ``train`` for ``train-trades@<run>``."""
    return name.partition("@")[0].partition("-")[0]


def stage_job(name: str, items: dict) -> tuple:
    """The Snakemake job of a DVC stage: (rule, wildcards...), e.g. ("evaluate", run, unit), ("train", run); ``items``
    is jobs.json."""
    kind, key = stage_kind(name), name.partition("@")[2]
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
            raise Stale("dvc.yaml is stale (the code's imports, a run's method or the targets changed): run `tradeoff export-dvc`, "
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
