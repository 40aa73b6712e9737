"""The cost model (tradeoff.pipeline.costs) against what PyTorch's FLOP counter counts, its table against the code that makes
it, and the cluster jobs it sizes: what `tradeoff plan` says and what Snakemake asks a cluster for."""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys

import pytest
import torch
from helpers import ROOT, env, workflow_copy

from tradeoff import config as cfg
from tradeoff import models
from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.core.params import ATTACK
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import AttackSpec, MethodSpec, RunSpec
from tradeoff.methods import METHODS
from tradeoff.pipeline import costs
from tradeoff.pipeline.bench.flops import SHIPPED_SCALES, count_flops, flops_table, pass_flops, shipped_pairs
from tradeoff.pipeline.bench.synthetic import synthetic_batch
from tradeoff.pipeline.costs import JobSizes, attack_passes, evaluation_passes, load_table, method_passes

CPU = torch.device("cpu")
SMALL = {"default": "small_cnn", "adapter": "vit_tiny_adapter"}  # where a step is counted: digits, 10 classes


@pytest.fixture(scope="module")
def catalogs():
    return [cfg.load_catalog([ROOT / f for f in files]) for files in SHIPPED_SCALES]


@pytest.fixture(scope="module")
def units():
    return {arch: pass_flops(arch, "digits") for arch in SMALL.values()}


def _shrunk(spec: dict, cap: int | None) -> dict:
    """An attack spec with a budget so small that no example flips (every step of every attack runs, AutoAttack's
    components see every example, FAT never stops early), its steps and queries at most ``cap``."""
    out = dict(spec)
    if "eps" in out and out["type"] != "clean":
        out["eps"] = 1e-4 if out.get("norm", "linf") == "linf" else 1e-3
        if out.get("step_size"):
            out["step_size"] = out["eps"] / 4
    for key in ("steps", "queries"):
        default = ATTACK_DECLARATIONS[out["type"]].defaults.get(key)
        if cap is not None and (key in out or default is not None):
            out[key] = min(int(out.get(key) or default), cap)
    return out


def _method_signature(method: MethodSpec) -> str:
    """What a step's cost depends on (tradeoff.pipeline.costs.method_passes reads these): one counted step per signature."""
    attack = method.get("attack") if isinstance(method.get("attack"), dict) else {}
    keys = ("beta", "lam", "inner", "adv_loss", "track_conflict", "unlabeled")
    return json.dumps([{"name": method.name, **{k: method.get(k) for k in keys}},
                       {k: attack.get(k) for k in ("type", "restarts", "target_classes", "components")}],
                      sort_keys=True, default=str)


def _method_cases(catalogs, cap):
    seen = {}
    for catalog in catalogs:
        for rid, spec in catalog.training_runs().items():
            seen.setdefault(_method_signature(spec.method), (rid, spec))
    for rid, spec in seen.values():
        params = {k: (_shrunk(v, cap) if isinstance(v, dict) and "type" in v else v)
                  for k, v in spec.method.params.items()}
        yield rid, spec.replace(method=MethodSpec.from_dict({"name": spec.method.name, **params}),
                                arch=SMALL["adapter" if "adapter" in spec.arch else "default"], dataset="digits",
                                pretrained=None)


def _counted_step(spec: RunSpec) -> float:
    def build():
        return models.create_model(spec.arch, 10, in_channels=1, image_size=8)

    torch.manual_seed(0)
    method = METHODS[spec.method.name](spec, build, Runtime(CPU))
    method.set_epoch(1.0)
    x, _ = synthetic_batch("digits", 4, CPU)
    model = method.eval_model()
    training = model.training
    model.eval()
    with torch.no_grad():
        y = model(x).argmax(1)  # every example classified correctly: no attack stops early
    model.train(training)
    with count_flops() as counter:
        method.train_step(x, y)
    return counter.get_total_flops() / 4


def _check_methods(catalogs, units, cap):
    wrong = []
    for rid, spec in _method_cases(catalogs, cap):
        counted = _counted_step(spec)
        planned = method_passes(spec.method, 10).flops(units[spec.arch])
        if not math.isclose(counted, planned, rel_tol=0.005):  # APGD-T's one-image class count: 0.1%
            wrong.append(f"{rid} ({spec.method.name}): counted {counted:.4g}, formula {planned:.4g}")
    assert not wrong, "tradeoff.pipeline.costs.method_passes disagrees with a counted step:\n" + "\n".join(wrong)


def test_method_formulas_match_counted_steps(catalogs, units):
    """Every kind of training step of the shipped catalogs (method, losses, training attack), its attacks capped
    at 3 steps (and at SECOND_LENGTH below: two lengths pin an affine formula)."""
    _check_methods(catalogs, units, cap=3)


#: a second length: the formulas are affine in steps and queries (a cost per step, per query, plus a fixed one), so
#: counts at two lengths pin them whole; counting the shipped lengths (AutoAttack's 100 iterations per restart and
#: target, Square's 5000 queries) took minutes of the suite and tested nothing more
SECOND_LENGTH = 10


def test_method_formulas_match_counted_steps_at_a_second_length(catalogs, units):
    _check_methods(catalogs, units, cap=SECOND_LENGTH)


def _check_attacks(catalogs, units, cap):
    from tradeoff import attacks

    seen = {}
    for catalog in catalogs:
        for run in catalog.training_runs():
            for name in catalog.model_attacks(run):
                spec = catalog.attack_for(name, run).as_dict()  # its JSON form, shrunk below
                if spec["type"] != cfg.CORRUPTIONS_TYPE:
                    key = {k: v for k, v in spec.items() if k not in ("eps", "step_size", "seed")}
                    seen.setdefault(json.dumps(key, sort_keys=True, default=str), (name, spec))
    torch.manual_seed(0)
    model = models.create_model("small_cnn", 10, in_channels=1, image_size=8).eval()
    x, _ = synthetic_batch("digits", 4, CPU)
    with torch.no_grad():
        y = model(x).argmax(1)
    wrong = []
    for name, spec in seen.values():
        spec = AttackSpec.from_dict(_shrunk(spec, cap))
        attack = attacks.from_spec(spec, model, seed=0)
        with count_flops() as counter:
            if not spec.clean:
                attack.robust(x, y)
        counted = counter.get_total_flops() / 4 + units["small_cnn"]["forward"]  # and evaluation's clean pass
        planned = evaluation_passes(spec, 10).flops(units["small_cnn"])
        if not math.isclose(counted, planned, rel_tol=0.005):
            wrong.append(f"{name} ({spec.type}): counted {counted:.4g}, formula {planned:.4g}")
    assert len(seen) >= 10
    assert not wrong, "tradeoff.pipeline.costs.evaluation_passes disagrees with a counted evaluation:\n" + "\n".join(wrong)


def test_attack_formulas_match_counted_evaluations(catalogs, units):
    """Every evaluation attack of the shipped catalogs (AutoAttack and its components included) on examples it
    cannot break, steps and queries capped at 3."""
    _check_attacks(catalogs, units, cap=3)


def test_attack_formulas_match_counted_evaluations_at_a_second_length(catalogs, units):
    _check_attacks(catalogs, units, cap=SECOND_LENGTH)


def test_every_attack_and_method_declares_its_passes_and_costs_knows_none_by_name():
    """Issue 39: each attack's and method's pass count is declared beside its parameters (its ``passes``, torch-free),
    and every one prices at its declared defaults through tradeoff.pipeline.costs, which compares no setting with, and
    keys nothing by, a method's or an attack's name (no formula there)."""
    import ast

    from tradeoff.attacks.declared import AttackDeclaration
    from tradeoff.methods import Method

    for kind, cls in ATTACK_DECLARATIONS.items():
        assert cls.passes.__func__ is not AttackDeclaration.passes.__func__, kind
        assert attack_passes({"type": kind}, 10).f >= 0  # its declared defaults priced
    pgd = {"type": "pgd", "steps": 10}
    for name, cls in METHODS.items():
        assert cls.passes.__func__ is not Method.passes.__func__, name
        method = MethodSpec.from_dict({"name": name, **cls.parameters.defaults(),
                                       **{k: pgd for k in cls.parameters.named(type=ATTACK)}})
        assert method_passes(method, 10).f > 0, name
    names = set(ATTACK_DECLARATIONS) | set(METHODS)
    tree = ast.parse((ROOT / "src" / "tradeoff" / "pipeline" / "costs.py").read_text())

    def named(node) -> set:
        inside = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return {n.value for n in inside if isinstance(n, ast.Constant)} & names

    switches = [f"costs.py:{n.lineno}" for n in ast.walk(tree)
                if isinstance(n, ast.Compare) and any(named(x) for x in [n.left, *n.comparators])
                or isinstance(n, ast.Dict) and any(named(k) for k in n.keys if k is not None)]
    assert not switches, switches


def test_a_method_that_declares_no_passes_is_unpriced_and_the_plan_says_so(paper, monkeypatch):
    """A method without its pass count plans its training job at the stage's fixed runtime, and the plan names the
    method as the reason (not an architecture missing from flops.json)."""
    from tradeoff.methods import Method

    monkeypatch.setattr(METHODS["nt"], "passes", classmethod(Method.passes.__func__))
    run = "cifar10-resnet18-nt"
    sizes = JobSizes(paper, bench_folder="/nonexistent")
    assert sizes.planned_train(run) is None and sizes.train_minutes(run) == 1440
    assert "method 'nt' declares no passes" in sizes.unpriced[("train", run)]
    line = next(x for x in costs.format_plan(costs.plan(paper, "table1a", 8, bench_folder="/nonexistent")).splitlines()
                if x.startswith("not priced"))
    assert f"train {run}: method 'nt' declares no passes" in line and "flops.json" not in line, line


PASSES = ROOT / "tests" / "data" / "passes.json"


def priced(catalogs) -> dict[str, list[float]]:
    """The pass counts [F, Bi, Bw] of every training step and every evaluation of these catalogs, keyed by a digest
    of what they are priced from (a method's settings, or an attack's, with the number of classes)."""
    from tradeoff.core.spec import json_digest

    table, out = load_table(), {}
    for catalog in catalogs:
        for rid, spec in catalog.training_runs().items():
            classes = table["datasets"][spec.dataset]["classes"]
            p = method_passes(spec.method, classes)
            out[f"method {json_digest([spec.method.as_dict(), classes])}"] = [p.f, p.bi, p.bw]
            for name in catalog.model_attacks(rid):
                attack = catalog.attack_for(name, rid)
                p = evaluation_passes(attack, classes, table.get("corruption_images"))
                out[f"attack {json_digest([attack.as_dict(), classes])}"] = [p.f, p.bi, p.bw]
    return dict(sorted(out.items()))


def test_the_plan_prices_the_shipped_catalogs_as_before_the_passes_were_declared(catalogs):
    """tests/data/passes.json holds the pass counts of the shipped catalogs as tradeoff.pipeline.costs' own formulas
    counted them (recorded from the commit before issue 39 moved them beside the declarations): every step and
    evaluation priced then is priced the same now (so is `tradeoff plan`'s every job). What the catalog adds later
    is new keys, not compared."""
    before, now = json.loads(PASSES.read_text()), priced(catalogs)
    common = set(before) & set(now)
    assert len(common) > 0.9 * len(before) > 100
    assert {k: now[k] for k in common} == {k: before[k] for k in common}


def test_flops_table_covers_the_shipped_scales_and_matches_a_recount(catalogs):
    """Every architecture and dataset of the shipped scales is priced; the cheap entries are recounted here (the
    slow test recounts all: `tradeoff bench-flops --check`), the datasets' sizes and corruption counts checked."""
    table = load_table()
    missing = [costs.pass_key(a, d) for a, d in shipped_pairs(catalogs) if costs.pass_key(a, d) not in table["passes"]]
    assert not missing, f"not in {costs.FLOPS_FILE.name}: {missing}; run `tradeoff bench-flops`"
    for arch, dataset in (("small_cnn", "digits"), ("vit_tiny_adapter", "digits"), ("resnet18", "cifar10")):
        assert table["passes"][costs.pass_key(arch, dataset)] == pass_flops(arch, dataset)
    fresh = flops_table(catalogs, known=table, recount=False)
    assert fresh == table, f"{costs.FLOPS_FILE.name} is stale; run `tradeoff bench-flops`"


@pytest.mark.slow
def test_flops_table_is_current():
    out = subprocess.run([sys.executable, "-m", "tradeoff.cli", "bench-flops", "--check"], cwd=ROOT, env=env(),
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr


def test_the_resnet18_counts_are_the_known_ones():
    unit = load_table()["passes"]["resnet18 cifar10"]
    assert unit["forward"] == pytest.approx(2 * 0.5554e9, rel=0.01)  # 0.56 GMAC
    assert unit["input_backward"] == pytest.approx(unit["forward"], rel=0.01)
    assert unit["train_backward"] == pytest.approx(2 * unit["forward"], rel=0.01)


# ------------------------------------------------------------------------------------------------ job sizes


@pytest.fixture(scope="module")
def paper():
    return cfg.load_catalog([ROOT / "config" / "config.yaml"])


def test_job_sizes_follow_resources_plan(paper):
    sizes = JobSizes(paper, bench_folder="/nonexistent")
    s = sizes.settings
    assert s == {"device": "h100", "safety": 3, "start_minutes": 2, "floor_minutes": 15, "max_minutes": None,
                 "group_minutes": 30}
    run = "cifar10-resnet18-at-beta1"
    planned = sizes.planned_train(run)
    assert 20 < planned < 40  # PGD-10 AT, 120 epochs in fp32, at 30% of an H100's 395 TFLOP/s TF32
    assert sizes.train_minutes(run) == math.ceil(planned * 3 + 2)
    assert sizes.train_minutes("cifar10-resnet18-nt") == math.ceil(max(15, sizes.planned_train("cifar10-resnet18-nt")
                                                                       * 3 + 2))
    # a ResNet-18's AutoAttack is cheap: grouped with the run's others; a WRN's is not
    assert sizes.eval_group(run, "aa") == f"evaluate-{run}"
    assert sizes.eval_group("cifar10-wrn32-at-beta1", "aa") is None
    assert sizes.planned_eval("cifar10-wrn32-at-beta1", "aa") > 30
    members = sizes.group_members(run)
    clean = sizes.planned_eval(run, "clean")
    assert "pgd20" in members and sizes.eval_minutes(run, "clean") == math.ceil(max(clean * 3 + 2, 15 / len(members)))
    assert sum(sizes.eval_minutes(run, u) for u in members) >= 15


def test_job_sizes_without_a_plan_or_a_price_ask_for_the_fixed_runtime(paper):
    plain = copy.copy(paper)
    plain.config = {**paper.config, "resources": {**paper.config["resources"], "plan": None}}
    sizes = JobSizes(plain, bench_folder="/nonexistent")
    assert sizes.train_minutes("cifar10-resnet18-nt") == 1440 and sizes.eval_minutes("cifar10-resnet18-nt", "aa") == 240
    assert sizes.eval_group("cifar10-resnet18-nt", "aa") is None
    capped = copy.copy(paper)
    capped.config = {**paper.config, "resources": {**paper.config["resources"],
                                                   "plan": {"max_minutes": 120, "safety": 10}}}
    assert JobSizes(capped, bench_folder="/nonexistent").train_minutes("cifar10-wrn32-at-beta1") == 120
    unknown = JobSizes(paper, bench_folder="/nonexistent", table={"passes": {}, "datasets": {}})
    assert unknown.train_minutes("cifar10-resnet18-nt") == 1440 and unknown.planned_train("cifar10-resnet18-nt") is None
    assert unknown.eval_group("cifar10-resnet18-nt", "aa") is None


def test_one_job_per_run_is_never_grouped(catalogs):
    smoke = catalogs[2]
    assert smoke.eval_unit == "run"
    sizes = JobSizes(smoke, bench_folder="/nonexistent")
    run = "cifar10-resnet18-at-beta1"
    assert sizes.eval_group(run, cfg.ALL_ATTACKS) is None
    assert sizes.eval_minutes(run, cfg.ALL_ATTACKS) == 15  # tiny: the floor


def test_the_plan_prices_training_in_the_configs_precision(paper):
    """fp32 training (the paper scale's default) runs at TF32's rate, half bf16's: its steps cost twice; the per-epoch
    selection measurement is fp32 either way."""
    run = "cifar10-resnet18-at-beta1"
    fp32 = JobSizes(paper, bench_folder="/nonexistent")
    assert fp32.precision == "fp32"
    bf16_catalog = copy.copy(paper)
    bf16_catalog.config = {**paper.config, "runtime": {**paper.config["runtime"], "precision": "bf16"}}
    bf16 = JobSizes(bf16_catalog, bench_folder="/nonexistent")
    table, spec = load_table(), paper.runs[run]
    unit, data = table["passes"][costs.pass_key(spec.arch, spec.dataset)], table["datasets"][spec.dataset]
    # the images it trains on: the training split less its validation split (1,000 of CIFAR-10's 50,000)
    trained = data["train"] - spec.selection.validation
    assert trained == 49000
    steps = spec.epochs * trained * method_passes(spec.method, data["classes"]).flops(unit)
    selection = costs.training_flops(spec, table, "bf16") - steps
    assert selection > 0 and steps > 0
    assert costs.training_flops(spec, table, "fp32") == pytest.approx(2 * steps + selection)
    assert fp32.planned_train(run) / bf16.planned_train(run) == pytest.approx((2 * steps + selection)
                                                                            / (steps + selection))
    assert costs.peak_tflops("h100", "fp32") == costs.PEAK_TFLOPS["h100"] / 2 and costs.peak_tflops("x", "fp32") is None
    assert "training in fp32, evaluation in fp32" in costs.format_plan(costs.plan(paper, "table1a", gpus=1,
                                                                                  bench_folder="/nonexistent"))


def test_bench_files_calibrate_the_plan(paper, tmp_path):
    (tmp_path / "train-h100-x.json").write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3",
                                                            "fraction_of_peak": 0.15}))
    slow = JobSizes(paper, bench_folder=tmp_path)
    assert slow.fraction == 0.15 and "calibrated by 1" in slow.basis
    assumed = JobSizes(paper, bench_folder="/nonexistent")
    run = "cifar10-resnet18-at-beta1"
    assert slow.planned_train(run) == pytest.approx(2 * assumed.planned_train(run))


def test_plan_of_table1_states_cluster_jobs_and_hours(paper, capsys):
    from tradeoff import cli

    result = costs.plan(paper, "table1", gpus=8, bench_folder="/nonexistent")
    runs = {j.name for j in result["jobs"] if j.kind == "train"}
    assert result["train_jobs"] == len(runs) == 18 and result["groups"] == 18
    alone = [j.name for j in result["jobs"] if j.kind == "evaluate" and j.cluster_job == j.name]
    assert alone and all("wrn32" in name for name in alone)  # AutoAttack and Square on the WRNs
    assert result["cluster_jobs"] == 18 + 18 + len(alone)
    assert result["asked_hours"] > result["total_hours"] > 40
    assert cli.main(["plan", "table1"]) == 0
    out = capsys.readouterr().out
    found = re.search(r"on a cluster \(snakemake --profile slurm\): (\d+) GPU jobs \(18 training, (\d+) evaluation, 18 "
                      r"of them .*\), asking ([\d.]+) GPU-hours for ([\d.]+) planned", out)
    assert found and int(found.group(1)) == result["cluster_jobs"], out[-800:]


def test_costs_and_the_snakefiles_sizes_need_no_torch(tmp_path):
    """What the Snakefile asks of tradeoff.pipeline.costs at start-up (every job's minutes and group) and `tradeoff plan` load
    neither PyTorch nor matplotlib, with the catalog kept (as the Snakefile reads it)."""
    overlay = tmp_path / "o.yaml"
    overlay.write_text(f"paths: {{results: {tmp_path / 'results'}}}\n")
    files = [str(ROOT / "config" / "config.yaml"), str(overlay)]
    cfg.load_catalog(files, write_cache=True)
    code = ("import sys; from tradeoff import config as c; from tradeoff.pipeline.costs import JobSizes, plan\n"
            "k = c.load_catalog(sys.argv[1:]); s = JobSizes(k)\n"
            "assert all(s.train_minutes(r) > 0 for r in k.training_runs())\n"
            "[(s.eval_minutes(r, u), s.eval_group(r, u)) for r in k.training_runs() for u in k.eval_units(r)]\n"
            "plan(k, 'table1', 8)\n"
            "loaded = {'torch', 'matplotlib'} & set(sys.modules); assert not loaded, loaded")
    out = subprocess.run([sys.executable, "-c", code, *files], capture_output=True, text=True, env=env(),
                         timeout=300)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------------------------------------ Snakemake


def _dry_run(work, *args):
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], cwd=work, env=env(), capture_output=True,
                          text=True, timeout=300)


def test_slurm_dry_run_groups_cheap_evaluations_and_warns_about_the_account(tmp_path):
    """`snakemake -n --profile slurm table1` at paper scale: a group per run (its cheap evaluations), the expensive
    ones alone, each job's runtime from the plan; and a warning while slurm_account is the placeholder."""
    work = workflow_copy(tmp_path / "w")
    out = _dry_run(work, "--profile", "slurm", "table1")
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    assert "WARNING: slurm_account is still the placeholder 'CHANGE-ME'" in text
    groups = re.findall(r"Group job (evaluate-\S+) \(jobs in lexicogr. order\)", text)
    assert len(groups) == len(set(groups)) == 18, groups
    catalog = cfg.load_catalog([work / "config" / "config.yaml"])
    sizes = JobSizes(catalog, bench_folder=work / "results" / "paper" / "bench")
    for run, minutes in re.findall(r"rule train:.*?wildcards: run=(\S+)\n.*?runtime=(\d+)", text, re.S):
        assert int(minutes) == sizes.train_minutes(run)
    set_account = _dry_run(work, "--profile", "slurm", "table1", "--default-resources", "slurm_account=abc",
                           "slurm_partition=gpu")
    assert set_account.returncode == 0 and "placeholder" not in set_account.stdout + set_account.stderr


def test_group_jobs_run_on_one_gpu_for_the_sum_of_their_runtimes(tmp_path):
    """What Snakemake asks for a group (it prints no group's resources in a dry run: read here from the group jobs it
    builds): one GPU (the profile's local `gpu=1`), the sum of the members' runtimes."""
    work = workflow_copy(tmp_path / "w")
    code = ("import sys\nfrom snakemake import jobs\nfound = []\norig = jobs.GroupJob.log_info\n"
            "def log_info(self, *a, **k):\n"
            "    r = self.resources\n"
            "    print('GROUP', self.groupid, len(self.jobs), r['gpu'], r['runtime'],"
            " sum(j.resources['runtime'] for j in self.jobs), file=sys.stderr)\n"
            "    return orig(self, *a, **k)\n"
            "jobs.GroupJob.log_info = log_info\n"
            "from snakemake.cli import main\nsys.argv = ['snakemake', '-n', '--profile', 'slurm', 'table1a']\nmain()\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, env=env(), capture_output=True, text=True,
                         timeout=300)
    rows = re.findall(r"^GROUP (\S+) (\d+) (\d+) (\d+) (\d+)$", out.stderr, re.M)
    assert len(rows) == 9, out.stderr[-3000:]
    for group, n, gpu, runtime, total in rows:
        assert int(n) > 1 and int(gpu) == 1 and int(runtime) == int(total), (group, n, gpu, runtime, total)


def test_plan_of_a_table_with_an_external_row_evaluates_it_without_training_it(paper, tmp_path):
    """An external model (`external:`) is evaluated, never trained: `tradeoff plan` prices its evaluations (its
    architecture and dataset are the run's) and lists no training job for it."""
    overlay = tmp_path / "ext.yaml"
    overlay.write_text(f"external:\n  mine: {{checkpoint: {tmp_path / 'mine.pt'}, arch: resnet18, dataset: cifar10}}\n"
                       "targets:\n  exttable:\n    kind: table\n    title: Mine beside NT\n"
                       "    columns: {nat: clean, pgd20: pgd20}\n    rows:\n"
                       "      - {key: nt, run: cifar10-resnet18-nt}\n      - {key: mine, external: mine}\n")
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", overlay])
    result = costs.plan(catalog, "exttable", gpus=1, bench_folder="/nonexistent")
    assert [j.name for j in result["jobs"] if j.kind == "train"] == ["train cifar10-resnet18-nt"]
    mine = {j.name: j for j in result["jobs"] if j.name.startswith("evaluate mine ")}
    assert set(mine) == {"evaluate mine clean", "evaluate mine pgd20"}
    assert all(j.after is None and j.hours is not None and j.hours > 0 for j in mine.values())
    nt = next(j for j in result["jobs"] if j.name == "evaluate cifar10-resnet18-nt pgd20")
    assert mine["evaluate mine pgd20"].hours == pytest.approx(nt.hours)  # the same architecture, data and attack
    assert result["unknown"] == []


def _node_report(folder, paper, *, device="NVIDIA H100 80GB HBM3", cpu_only=False):
    """A committed gpu-check report (docs/bench/) with one bench: AT ResNet-18 at the paper's batch, in fp32."""
    spec = paper.runs["cifar10-resnet18-at-beta1"]
    row = {"label": "AT ResNet-18", "run": "cifar10-resnet18-at-beta1", "method": "pgd_at", "arch": spec.arch,
           "dataset": spec.dataset, "passes": costs.step_passes(spec), "precision": "fp32", "channels_last": True,
           "batch_size": spec.batch_size, "seconds_per_epoch": 12.0, "fraction_of_peak": 0.2}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gpu-check-nvidia-h100-80gb-hbm3.json"
    path.write_text(json.dumps({"device": device, "cpu_only": cpu_only, "bench_train": [row]}))
    return path


def test_the_plan_prices_measured_steps_from_a_committed_node_report(paper, tmp_path, capsys):

    _node_report(tmp_path / "docs" / "bench", paper)
    result = costs.plan(paper, "table1a", gpus=1, bench_folder="/nonexistent", node_reports=tmp_path / "docs" / "bench")
    formula = costs.plan(paper, "table1a", gpus=1, bench_folder="/nonexistent", node_reports=None)
    jobs, before = {j.name: j for j in result["jobs"]}, {j.name: j for j in formula["jobs"]}
    measured = {name for name, j in jobs.items() if j.measured}
    assert measured == {"train cifar10-resnet18-at-beta1"}  # only the run whose step was measured
    spec = paper.runs["cifar10-resnet18-at-beta1"]
    _, measuring = costs.training_parts(spec, costs.load_table(), paper.runtime_settings.precision)
    sizes = JobSizes(paper, bench_folder="/nonexistent", node_reports=tmp_path / "docs" / "bench")
    assert sizes.fraction == 0.2 and "docs/bench/gpu-check-nvidia-h100-80gb-hbm3.json" in sizes.basis
    expected = spec.epochs * 12.0 / 3600 + measuring / sizes.rate / 60
    assert jobs["train cifar10-resnet18-at-beta1"].hours == pytest.approx(expected)
    # every other job: the formula, recalibrated by the report's fraction of peak (0.2 against 0.3 assumed)
    other = "train cifar10-resnet18-trades-lambda6"
    assert jobs[other].hours == pytest.approx(before[other].hours * costs.ASSUMED_FRACTION / 0.2)
    text = costs.format_plan(result)
    assert "| train cifar10-resnet18-at-beta1 | " in text and "| measured steps + formula |" in text
    assert "measured: 1 training job(s)' steps" in text and "docs/bench/gpu-check-nvidia-h100-80gb-hbm3.json" in text
    assert "measured: nothing, every number is a formula" in costs.format_plan(formula)


def test_a_node_report_of_another_device_or_the_cpu_is_not_read(paper, tmp_path):
    _node_report(tmp_path / "a", paper, device="NVIDIA A100-SXM4-80GB")
    _node_report(tmp_path / "c", paper, cpu_only=True)
    for folder in ("a", "c"):
        sizes = JobSizes(paper, bench_folder="/nonexistent", node_reports=tmp_path / folder)
        assert not sizes.benches and sizes.fraction == costs.ASSUMED_FRACTION
        sizes.planned_train("cifar10-resnet18-at-beta1")
        assert not sizes.measured


if __name__ == "__main__" and sys.argv[1:] == ["--write-passes"]:  # records tests/data/passes.json
    recorded = priced([cfg.load_catalog([ROOT / f for f in files]) for files in SHIPPED_SCALES])
    PASSES.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in recorded.items()) + "\n}\n")
