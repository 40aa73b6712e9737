"""The DVC pipeline (dvc.yaml, jobs.json, params.yaml; tradeoff.pipeline.dvc_export): the jobs Snakemake plans, each stage on what its
output depends on, `dvc exp run -S` doing what it says, and results that travel through a remote.

The first tests read files only; the others run the real `dvc`, `git` and `snakemake` (marked slow): the shipped demo
pipeline as a plan, and a small smoke-scale pipeline in a scratch git repository, built once for the module."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, results_of, run, workflow_copy

from tradeoff import config as cfg
from tradeoff.pipeline import dvc_export as tdvc

SMOKE = ["config/config.yaml", "config/smoke.yaml"]
DEMO = ["config/config.yaml", "config/demo.yaml"]
REPORTS = ("table", "figure", "figure_list", "summary")


# ------------------------------------------------------------------------------------------------- no DVC run


def test_code_deps_come_from_the_import_graph():
    """A stage depends on the sources its subcommand runs: the command line's module and the subcommand's (not the
    other subcommands'), and what they import, lazily or by name; training never on the report code, reports never on
    the training code."""
    package = tdvc.PACKAGE
    trades = tdvc.code_files("train", frozenset({("method", "trades")}))
    table = tdvc.code_files("report", frozenset())
    assert {package / "cli" / "__init__.py", package / "cli" / "commands" / "train.py",
            package / "training" / "train.py", package / "methods" / "trades.py"} <= set(trades)
    assert package / "data" / "datasets.py" in trades  # importlib.import_module("tradeoff.data.datasets")
    assert not any(p.is_relative_to(package / "report") for p in trades)
    assert not any(p.is_relative_to(package / "cli" / "commands") and p.stem not in ("__init__", "train")
                   for p in trades)  # not the other subcommands
    assert package / "pipeline" / "dvc_export.py" not in trades
    assert not any(p.is_relative_to(package / "pipeline" / "bench") for p in trades)
    assert package / "report" / "tables.py" in table and package / "report" / "summary.py" in table
    assert not any(p.is_relative_to(package / "training") for p in table)
    assert not any(p.is_relative_to(package / "report") for p in tdvc.code_files("export-dvc"))
    for command in ("download", "train", "evaluate", "analyze", "report", "summary", "export-dvc"):
        deps = tdvc.code_deps(command)
        assert deps == sorted(set(deps)) and all((tdvc.ROOT / d).exists() for d in deps), command
    resolve = tdvc.code_deps("export-dvc")
    assert "src/tradeoff/methods" in resolve  # a folder all of whose sources are needed: every method's module
    with pytest.raises(KeyError, match="no_such"):
        tdvc.code_files("no-such")


def test_the_plugins_are_what_the_registries_hold():
    """The modules that register a method, a figure kind, an analysis or an attack's code, read from the source (no
    import), are the modules the registries hold at run time, with the same names."""
    from tradeoff.analysis import ANALYSES
    from tradeoff.attacks import ATTACKS
    from tradeoff.methods import METHODS
    from tradeoff.report import figures  # noqa: F401  (attaches the kinds' drawings)
    from tradeoff.report.kinds import drawing, drawn

    found: dict = {}
    for module, names in tdvc.plugins().items():
        for pair in names:
            found.setdefault(pair, set()).add(module)
    running = {("method", name): {cls.__module__} for name, cls in METHODS.items()} \
        | {("attack", name): {cls.__module__} for name, cls in ATTACKS.items()} \
        | {("figure", name): {drawing(name).draw.__module__} for name in drawn()} \
        | {("analysis", name): {analysis.run.__module__} for name, analysis in ANALYSES.items()}
    assert found == running


def test_a_plugin_counts_for_the_jobs_that_use_it():
    """methods/base.py discovers every module of the package to fill the registry (no list names them); a run depends
    on its own method's module and what it imports (vanilla imports trades and clp, Generalist natural and pgd_at),
    and on the modules the methods share, not on the other methods' modules; a figure on its kind's drawing module
    only; the resolve stage, which reads every method, on all of them."""
    package = tdvc.PACKAGE
    methods = package / "methods"
    registering = dict(tdvc._imports(methods / "base.py"))  # METHODS: discover("tradeoff.methods")
    assert registering["tradeoff.methods.trades"] and not registering["tradeoff.methods.common"]
    assert not dict(tdvc._imports(methods / "vanilla.py"))["tradeoff.methods.trades"]  # used: kl_divergence

    def method_files(name: str) -> set[str]:
        return {p.stem for p in tdvc.code_files("train", frozenset({("method", name)})) if p.parent == methods}

    shared = {"__init__", "base", "common", "optim"}
    assert method_files("nt") == shared | {"natural"}
    assert method_files("trades") == shared | {"trades"}  # no other method's module, no list of them
    assert method_files("vanilla") == shared | {"vanilla", "trades", "clp"}
    assert method_files("caat") == method_files("vanilla") | {"caat"}
    assert method_files("generalist") == shared | {"generalist", "natural", "pgd_at"}
    resolve = tdvc.code_files("export-dvc")
    assert {p.stem for p in resolve if p.parent == methods} == {p.stem for p in methods.glob("*.py")}
    figures = {kind: {p.stem for p in tdvc.code_files("report", frozenset({("figure", kind)}))
                      if p.stem.startswith("fig_")} for kind in ("front", "bars", "lines", "tsne")}
    assert figures == {"front": {"fig_front"}, "bars": {"fig_basic"}, "lines": {"fig_basic"}, "tsne": {"fig_tsne"}}
    assert not any(p.stem.startswith("fig_") for p in tdvc.code_files("report", frozenset()))
    assert not any(p.parent == methods and p.stem not in shared for p in tdvc.code_files("evaluate", frozenset()))


def test_editing_trades_marks_only_the_stages_that_run_it_at_the_demo_scale():
    """The shipped pipeline: the stages whose code deps hold methods/trades.py are the resolve stage (it reads every
    method) and the training jobs of runs whose method's module imports it (TRADES, vanilla AT and CA-AT, whose TRADES
    loss is vanilla's); a
    figure's drawing module is a dependency of the figures it draws only; a CLI subcommand that no stage runs, the
    README and docs/ are no stage's."""
    files = [*DEMO, "params.yaml"]
    catalog = cfg.load_catalog([ROOT / f for f in files])
    expanded = tdvc.stages(catalog, files)

    def marked(path: str) -> set[str]:
        return {name for name, stage in expanded.items()
                if any(d.startswith("src/") and (path == d or path.startswith(d + "/")) for d in stage["deps"])}

    trades = marked("src/tradeoff/methods/trades.py") - {"resolve"}
    train = {name for name in expanded if tdvc.stage_kind(name) in ("train", "finetune")}
    assert trades == {n for n in train if catalog.runs[n.partition("@")[2]].method.name in (
        "trades", "vanilla", "caat")} and "resolve" in marked("src/tradeoff/methods/trades.py")
    assert 10 < len(trades) < len(train) < len(expanded) / 2
    assert {n for n in trades if "@" in n} == {n for n in trades if n.split("@")[0] in (
        "train-trades", "train-vanilla", "train-caat", "finetune-vanilla", "finetune-caat")}
    front = marked("src/tradeoff/report/fig_front.py")
    assert front == {n for n in expanded if tdvc.stage_kind(n) == "figure"
                     and catalog.targets[n.partition("@")[2]].plot == "front"} and front
    for path in ("src/tradeoff/cli/commands/bench_train.py", "src/tradeoff/cli/commands/gpu_check.py",
                 "src/tradeoff/cli/commands/plan.py", "README.md", "docs/dvc.md"):
        assert marked(path) == set(), path
    assert tdvc.render_dvc(catalog, files)["dvc.yaml"] == (ROOT / "dvc.yaml").read_text()


def test_shipped_pipeline_is_short_and_templated():
    """dvc.yaml is a template per kind of job and code it runs (train-<method>, figure-<kind>), not a stage per job;
    jobs.json holds the jobs."""
    text = (ROOT / "dvc.yaml").read_text()
    pipeline = yaml.safe_load(text)
    # a template per kind of job and code, however many jobs: far fewer stages than jobs (no cap on either)
    jobs = json.loads((ROOT / "jobs.json").read_text())
    count = sum(len(items) for items in jobs.values() if isinstance(items, (dict, list)))
    assert len(pipeline["stages"]) * 3 < count
    templated = {name for name, stage in pipeline["stages"].items() if "foreach" in stage}
    assert {"train", "finetune", "evaluate", "analyze", "table", "figure", "figure_list", "download", "audit"} <= {
        tdvc.stage_kind(name) for name in templated}
    assert {"train-trades", "train-generalist", "figure-front", "figure-basic", "evaluate", "table"} <= templated
    assert set(pipeline["stages"]) - templated == {"resolve", "claims", "summary"}
    assert pipeline["vars"][0] == "jobs.json" and "--config params.yaml" in pipeline["vars"][1]["config"]
    assert cfg.load_yaml(ROOT / "params.yaml") == {}  # the experiment's overlay: empty as shipped


def test_the_clock_minutes_are_neither_cached_nor_run_cached():
    """Table 4's training minutes (table-clock, read from sidecars no stage depends on): ``cache: false``, and
    ``persist: true``, which keeps the stage out of DVC's run cache (dvc.stage.cache._can_hash): without it the run
    cache copies them into .dvc/cache at `dvc commit` and `dvc repro` and could restore an earlier build's minutes.
    tests/test_readme_commands.py checks DVC's cache after `make dvc-adopt`; every other table is cached."""
    declared = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    clock = declared["table-clock"]["do"]["outs"]
    assert clock and all(how == {"cache": False, "persist": True} for out in clock for how in out.values())
    assert all(isinstance(out, str) for out in declared["table"]["do"]["outs"])


def test_jobs_json_holds_the_resolved_settings():
    """A job per line; a stage's params are its entry, whose `settings` are the resolved settings that Snakemake's
    rule takes as params: a run's resolved spec spelled out (what `dvc params diff` and `dvc exp show` show), the
    resolved settings of an evaluation's attacks and a target's with its members' as a digest (a group re-runs when a
    member's title changes)."""
    files = [str(ROOT / f) for f in SMOKE]
    catalog = cfg.load_catalog(files)
    items = tdvc.jobs(catalog)
    text = tdvc.render_dvc(catalog, files)["jobs.json"]
    written = json.loads(text)
    grouped = tdvc.template_jobs(catalog, items)  # by template: a kind's jobs split by the code they run
    assert written.pop("_generated").startswith("Written by `tradeoff export-dvc`")
    assert written == json.loads(json.dumps(grouped))
    assert len(text.splitlines()) == 3 + len(grouped) + sum(len(v) + 1 for v in grouped.values() if isinstance(v, dict))
    for kind in ("train", "evaluate", "figure"):
        assert {k: v for name, group in grouped.items() if tdvc.stage_kind(name) == kind
                for k, v in group.items()} == items[kind]
    run_id = catalog.train_id["cifar10-resnet18-at-beta1"]
    assert items["train"][run_id] == {"dataset": "digits", "settings": catalog.runs[run_id].as_dict()}
    assert {"method", "lr", "epochs", "batch_size", "seed"} <= set(written["train-pgd_at"][run_id]["settings"])
    unit = items["evaluate"][tdvc.unit_key(run_id, "all")]
    assert unit["settings"] == tdvc.digest({a: catalog.attack_for(a, run_id).as_dict() for a in unit["attacks"]})
    assert unit["attacks"] == catalog.unit_attacks(run_id, "all") and "pgd20" in unit["attacks"]
    assert items["table"]["table1"]["settings"] == tdvc.digest(
        {**{t: catalog.targets[t].as_dict() for t in ("table1", "table1a", "table1b")},
         "twins": {t: catalog.twin(t) for t in ("table1", "table1a", "table1b")}})
    retitled = cfg.resolve(cfg.merge(catalog.config, {"targets": {"table1a": {"title": "Another"}}}),
                           Path(catalog.reference_dir))
    changed = {kind: [k for k, v in tdvc.jobs(retitled)[kind].items() if v != items[kind][k]]
               for kind in items if isinstance(items[kind], dict)}
    assert {k: v for k, v in changed.items() if v} == {"table": ["table1", "table1a"]}


def test_budget_units_get_names_dvc_can_address():
    """DVC splits stage names at '@' and params keys at '.': a budget's unit is renamed, never two alike."""
    assert tdvc.unit_key("r", "caat_pgd_l2@0.5") == "r~caat_pgd_l2~0p5"
    paper = cfg.load_catalog([ROOT / "config" / "config.yaml"])
    keys = list(tdvc.jobs(paper)["evaluate"])
    assert len(keys) == len(set(keys)) and not any("." in k or "@" in k for k in keys)


# ------------------------------------------------------------------------------------------ the shipped pipeline


def _dvc_repo(work: Path) -> None:
    for name in ("dvc.yaml", "jobs.json", "params.yaml"):
        shutil.copy2(ROOT / name, work / name)
    (work / "src").symlink_to(ROOT / "src")  # the stages' code deps
    run(["git", "init", "-q"], work)
    run(["dvc", "init", "-q"], work)


def _snakemake_jobs(text: str) -> set[tuple]:
    """(rule, wildcards...) of every job of a Snakemake dry run: a `rule X:` line, then its indented lines."""
    jobs, rule, wildcards = set(), None, {}
    for line in text.splitlines() + ["end"]:
        if rule and not line.startswith(" "):
            jobs.add((rule, *(wildcards[k] for k in ("run", "unit", "target", "dataset") if k in wildcards)))
            rule = None
        if m := re.match(r"^(?:local)?rule (\w+):$", line):
            rule, wildcards = m.group(1), {}
        elif rule and (m := re.match(r"^\s+wildcards: (.*)$", line)):
            wildcards = dict(kv.split("=", 1) for kv in m.group(1).split(", "))
    return jobs


@pytest.mark.slow
def test_dvc_plans_exactly_the_snakemake_jobs_at_the_demo_scale(tmp_path):
    """Every target at the demo scale: `dvc repro` (dry, from nothing: --force) runs the jobs that `snakemake -n` plans,
    no more (no run that no target needs), no fewer; DVC expands the templates as tradeoff.pipeline.dvc_export.stages says."""
    work = workflow_copy(tmp_path)
    _dvc_repo(work)
    start = time.monotonic()
    dry = run(["dvc", "repro", "--dry", "--force"], work)
    seconds = time.monotonic() - start
    print(f"dvc repro --dry --force: {seconds:.1f} s")
    assert seconds < 60
    planned = re.findall(r"^Running stage '([^']+)':$", dry.stdout, flags=re.M)
    items = json.loads((work / "jobs.json").read_text())
    dvc_jobs = [tdvc.stage_job(name, items) for name in planned if name != "resolve"]
    snakemake = _snakemake_jobs(run(["snakemake", "-n", "--cores", "1", "--configfile", "config/demo.yaml"],
                                    work).stdout) - {("all",)}
    assert len(dvc_jobs) == len(set(dvc_jobs)) == len(snakemake) > 140
    assert set(dvc_jobs) == snakemake
    assert "resolve" in planned

    from dvc.repo import Repo

    expected = tdvc.stages(cfg.load_catalog([work / f for f in [*DEMO, "params.yaml"]]), [*DEMO, "params.yaml"])
    with Repo(str(work)) as repo:
        expanded = {s.name: s for s in repo.index.stages}
        assert set(expanded) == set(expected)
        for name, stage in expanded.items():
            want = expected[name]
            assert stage.cmd == want["cmd"], name
            assert [d.def_path for d in stage.deps if type(d).__name__ != "ParamsDependency"] == want["deps"], name
            outs = [o if isinstance(o, str) else next(iter(o)) for k in ("outs", "metrics", "plots")
                    for o in want.get(k, [])]
            assert sorted(o.def_path for o in stage.outs) == sorted(outs), name


# ------------------------------------------------------------------------------ a small pipeline, run for real

TARGETS = ["caat_table1", "figure3b"]  # a table and a figure: 3 training runs, 3 evaluations at the smoke scale


def _ran(out) -> list[str]:
    return re.findall(r"^Running stage '([^']+)':$", out.stdout, flags=re.M)


def _snakemake(work: Path, *args: str):
    return run(["snakemake", *TARGETS, "--cores", "1", *args, "--configfile", "config/smoke.yaml"], work)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A git repository with the smoke scale's pipeline of TARGETS, built by `dvc repro` and committed. Its src/,
    README.md and docs/ are copies (tests edit them); the jobs run this checkout's code."""
    work = workflow_copy(tmp_path_factory.mktemp("dvc") / "repo")
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(ROOT / "docs", work / "docs")  # a test edits them: no stage depends on them
    shutil.copy2(ROOT / "README.md", work / "README.md")
    (work / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    run(["git", "init", "-q"], work)
    run(["dvc", "init", "-q"], work)
    shutil.copy2(ROOT / ".dvc" / "config", work / ".dvc" / "config")  # the shipped remote, `localremote`
    run(["tradeoff", *[a for f in SMOKE for a in ("--config", f)], "export-dvc", "--targets", *TARGETS], work)
    first = run(["dvc", "repro"], work, timeout=900)
    run(["git", "add", "-A"], work)
    run(["git", "commit", "-qm", "the smoke pipeline"], work)
    return {"work": work, "first": first}


@pytest.mark.slow
def test_dvc_repro_twice_then_metrics_plots_and_checkout(built):
    work = built["work"]
    ran = _ran(built["first"])
    assert ran[0] == "resolve" and "table@caat_table1" in ran and "figure-basic@figure3b" in ran
    assert sum(tdvc.stage_kind(name) == "train" for name in ran) == 3 and not any(n.startswith("summary") for n in ran)
    assert _ran(run(["dvc", "repro"], work)) == []
    assert "up to date" in run(["dvc", "status"], work).stdout
    shown = json.dumps(json.loads(run(["dvc", "metrics", "show", "--json"], work).stdout))
    assert "results/smoke/metrics/" in shown and "all.json" in shown and "accuracy" in shown
    plots = run(["dvc", "plots", "show", "--json"], work).stdout
    assert "results/smoke/curves/" in plots and "eval_robust" in plots
    # checkpoints, metrics and curves are cached outputs: deleted, they come back from the cache
    lock = yaml.safe_load((work / "dvc.lock").read_text())["stages"]
    cached = [o["path"] for s in lock.values() for o in s.get("outs", []) if "md5" in o]
    assert any(p.endswith("model.pt") for p in cached) and any("/metrics/" in p for p in cached) \
        and any("/curves/" in p for p in cached)
    files = [work / p for p in cached if "/metrics/" in p or p.endswith("model.pt")][:2]
    original = [f.read_bytes() for f in files]
    for f in files:
        f.unlink()
    run(["dvc", "checkout"], work)
    assert [f.read_bytes() for f in files] == original
    # after a checkout Snakemake retrains nothing: `snakemake --touch` restores a consistent order of times
    _snakemake(work, "--touch")
    dry = _snakemake(work, "-n")
    assert "rule train" not in dry.stdout and "Nothing to be done" in dry.stdout + dry.stderr


@pytest.mark.slow
def test_editing_report_code_changes_report_stages_only(built):
    work = built["work"]
    tables = work / "src" / "tradeoff" / "report" / "tables.py"
    text = tables.read_text()
    try:
        tables.write_text(text + "# a comment\n")
        changed = set(json.loads(run(["dvc", "status", "--json"], work).stdout))
    finally:
        tables.write_text(text)
    assert changed == {"table@caat_table1", "figure-basic@figure3b"}
    assert "up to date" in run(["dvc", "status"], work).stdout


def _changed_by(work: Path, *edits: tuple[str, str]) -> set[str]:
    """The stages `dvc status` lists after these edits (file, text appended: a new file if there is none), undone
    after."""
    before = {path: (work / path).read_text() if (work / path).exists() else None for path, _ in edits}
    try:
        for path, text in edits:
            (work / path).write_text((before[path] or "") + text)
        return set(json.loads(run(["dvc", "status", "--json"], work).stdout))
    finally:
        for path, text in before.items():
            (work / path).write_text(text) if text is not None else (work / path).unlink()


@pytest.mark.slow
def test_a_change_reruns_only_what_it_touches(built):
    """Issue 30: after `dvc repro`, editing methods/trades.py marks the training stages of the runs whose method runs
    TRADES's code (vanilla AT and CA-AT import its loss; Generalist does not) and the resolve stage, which reads every
    method (seconds; it rewrites jobs.json only if a run's settings changed); a new method's module marks the resolve
    stage only (issue 39: no list of the methods to edit); editing a figure kind's module marks the figures drawn with
    it; the README, docs and a CLI subcommand that no stage runs (or a new one) mark nothing."""
    work = built["work"]
    grouped = json.loads((work / "jobs.json").read_text())
    methods = {name: set(grouped[name]) for name in grouped if tdvc.stage_kind(name) == "train"}
    assert set(methods) == {"train-generalist", "train-vanilla", "train-caat"}
    trades = _changed_by(work, ("src/tradeoff/methods/trades.py", "# a comment\n"))
    assert trades == {f"{name}@{run_id}" for name in ("train-vanilla", "train-caat") for run_id in methods[name]} \
        | {"resolve"}
    assert _changed_by(work, ("src/tradeoff/methods/another.py", '"""Another method."""\n')) == {"resolve"}
    assert _changed_by(work, ("src/tradeoff/methods/generalist.py", "# a comment\n")) == {
        f"train-generalist@{run_id}" for run_id in methods["train-generalist"]} | {"resolve"}
    assert _changed_by(work, ("src/tradeoff/report/fig_basic.py", "# a comment\n")) == {"figure-basic@figure3b"}
    assert _changed_by(work, ("src/tradeoff/report/fig_front.py", "# a comment\n")) == set()  # no front here
    assert _changed_by(work, ("README.md", "\nMore.\n"), ("docs/dvc.md", "\nMore.\n"),
                       ("src/tradeoff/cli/commands/bench_train.py", "# a comment\n"),
                       ("src/tradeoff/cli/commands/hello.py", "def add_parser(sub):\n    pass\n")) == set()
    assert "up to date" in run(["dvc", "status"], work).stdout


@pytest.mark.slow
def test_exp_run_set_param_reruns_exactly_what_it_changes(built):
    """`dvc exp run -S` edits params.yaml, the overlay every stage reads: the resolve stage rewrites the jobs'
    settings, and exactly the stages whose settings changed run again (and their downstream)."""
    work = built["work"]
    catalog = cfg.load_catalog([work / f for f in SMOKE])
    # the training job of the table's last row, and every run of the config that it trains (identical settings)
    run_id = catalog.train_id[catalog.targets["caat_table1"].rows[-1].run]
    sharing = [r for r in catalog.config["runs"] if catalog.train_id.get(r) == run_id]
    try:
        title = run(["dvc", "exp", "run", "-S", "+targets.caat_table1.title=Our experiment"], work)
        assert _ran(title) == ["resolve", "table@caat_table1"]
        assert (work / "results" / "smoke" / "tables" / "caat_table1.md").read_text().startswith(
            "# Our experiment")
        seed = run(["dvc", "exp", "run", *[a for r in sharing for a in ("-S", f"+runs.{r}.seed=7")]], work,
                   timeout=600)
        ran = _ran(seed)
        template = next(name for name, jobs in json.loads((work / "jobs.json").read_text()).items()
                        if tdvc.stage_kind(name) == "train" and run_id in jobs)  # train-<its method>
        assert ran[:3] == ["resolve", f"{template}@{run_id}", f"evaluate@{tdvc.unit_key(run_id, 'all')}"]
        assert "table@caat_table1" in ran[3:] and set(ran[3:]) <= {"table@caat_table1", "figure-basic@figure3b"}
        resolved = cfg.load_catalog([work / f for f in [*SMOKE, "params.yaml"]]).runs[run_id]
        assert resolved.seed == 7
        assert json.loads((work / "jobs.json").read_text())[template][run_id]["settings"] == resolved.as_dict()
        # DVC names the hyperparameter that changed, and shows every run's with its metrics (dvclive's files)
        diff = json.loads(run(["dvc", "params", "diff", "--json"], work).stdout)["jobs.json"]
        assert diff[f"{template}.{run_id}.settings.seed"]["new"] == 7 and not any(k.startswith("evaluate.") for k in diff)
        shown = json.loads(run(["dvc", "exp", "show", "--json"], work).stdout)
        workspace, baseline = (entry["data"] for entry in shown[:2])  # the last experiment's results, the commit
        settings = [row["params"]["jobs.json"]["data"][template][run_id]["settings"] for row in (workspace, baseline)]
        assert settings[0]["seed"] == 7 != settings[1]["seed"]
        assert {"method", "lr", "epochs", "batch_size"} <= set(settings[0]) and settings[0]["method"]["name"]
        curves = workspace["metrics"][str(results_of(Path("")).curve_files(run_id)[0])]["data"]
        assert 0 <= curves["eval_clean"] <= 1 and curves["selected"]["epoch"] >= 1
    finally:
        run(["git", "checkout", "--", "params.yaml", "jobs.json", "dvc.lock"], work)
        run(["dvc", "checkout", "--force"], work)
    assert "up to date" in run(["dvc", "status"], work).stdout


@pytest.mark.slow
def test_push_clone_pull_then_snakemake_has_nothing_to_do(built, tmp_path):
    """The shipped remote (`localremote`, pointed elsewhere with --local) carries checkpoints, metrics and curves: a
    fresh clone pulls them, DVC finds everything up to date, and after `snakemake --touch` Snakemake too; neither
    writes into a tracked file."""
    work, store = built["work"], tmp_path / "store"
    run(["dvc", "remote", "modify", "--local", "localremote", "url", str(store)], work)
    pushed = run(["dvc", "push"], work)
    assert "files pushed" in pushed.stdout + pushed.stderr
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(work), str(clone)], tmp_path)
    run(["dvc", "remote", "modify", "--local", "localremote", "url", str(store)], clone)
    metrics = run(["dvc", "pull", "evaluate"], clone)  # metrics (and predictions) only: reports need no checkpoint
    assert "fetched" in metrics.stdout + metrics.stderr and not list(clone.glob("results/smoke/checkpoints/*/*.pt"))
    run(["dvc", "pull"], clone)
    assert "up to date" in run(["dvc", "status"], clone).stdout
    models = sorted(p.relative_to(work) for p in work.glob("results/smoke/checkpoints/*/model.pt"))
    assert len(models) == 3 and all((clone / m).read_bytes() == (work / m).read_bytes() for m in models)
    _snakemake(clone, "--touch")
    dry = _snakemake(clone, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    assert run(["git", "status", "--porcelain"], clone).stdout == ""


def test_a_name_read_from_a_lazy_package_counts_as_an_import_of_its_module():
    """tradeoff.data, models, methods and attacks reach their names through a name -> module table (no PyTorch on
    import): a module that reads a name there depends on the module that owns it (declared.py too: a dict value, not
    a call's argument), by any form of import; the package itself, and a module that reads none of them, on none."""
    package = tdvc.PACKAGE
    assert tdvc._lazy_names("tradeoff.data")["SPLIT_SIZES"] == "tradeoff.data.declared"
    assert not {"tradeoff.data.datasets", "tradeoff.data.splits", "tradeoff.data.declared"} & set(
        dict(tdvc._imports(package / "data" / "__init__.py")))
    generalist = set(dict(tdvc._imports(package / "methods" / "generalist.py")))  # `from tradeoff.data import SPLIT_SIZES`
    assert "tradeoff.data.declared" in generalist and not {"tradeoff.data.datasets", "tradeoff.data.splits"} & generalist
    splits = set(dict(tdvc._imports(package / "training" / "train.py")))  # `data.load_run_data(...)`
    assert "tradeoff.data.splits" in splits
    evaluate = set(dict(tdvc._imports(package / "evaluation" / "evaluate.py")))  # `attacks.ATTACKS`
    assert "tradeoff.attacks.base" in evaluate
    train = set(dict(tdvc._imports(package / "training" / "train.py")))  # `from tradeoff.methods import METHODS`
    assert "tradeoff.methods.base" in train
    assert "tradeoff.methods.base" not in set(dict(tdvc._imports(package / "config" / "design.py")))
    assert tdvc._lazy_names("tradeoff.attacks.declared") == {} and tdvc._lazy_names("tradeoff.no_such") == {}
