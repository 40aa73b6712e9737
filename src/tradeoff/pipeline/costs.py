"""What every job of the pipeline costs, without PyTorch: the one owner of job costs, for `tradeoff plan` and for the
time each Snakemake job asks the cluster for (workflow/rules/common.smk reads it at start-up, which must stay cheap).

A job's FLOPs are pass counts times pass costs:

- pass counts per example (tradeoff.core.passes): how many forward passes (F), input-only backward passes (Bi: an
  attack's gradient, the weights frozen) and training backward passes (Bw: the weights' gradients) one training step
  of a method, or one attack, makes, from its resolved settings (attack steps, restarts, target classes, queries, the
  losses a method combines), as each method and attack declares beside its parameters (its ``passes``): nothing here
  knows a method or an attack by name. tests/test_costs.py counts a real step of every method and attack of the
  shipped catalogs with PyTorch's FLOP counter and checks the declared counts against it;
- pass costs per example of each architecture and dataset, counted once with PyTorch's FLOP counter by
  `tradeoff bench-flops` (tradeoff.pipeline.bench.flops.pass_flops) into ``flops.json`` beside this module, with each
  dataset's sizes and classes and each corruption dataset's images per test image. A test keeps the file current.

Attacks are priced as upper bounds: every example is attacked by every component (AutoAttack's later components only
see the examples still robust; FAT's early stop only shortens its attack). Time = FLOPs / (bf16 peak x achieved
fraction), the fraction calibrated by bench files of the device (`tradeoff bench-train`) when there are any, else
assumed; fp32 FLOPs count FP32_COST times: evaluation's always, training's unless ``runtime.precision`` is bf16.

What a cluster job asks for (`resources.plan` in the config): its planned minutes x ``safety`` plus ``start_minutes``,
at least ``floor_minutes`` (a group of evaluations shares one floor), at most ``max_minutes``; a run's evaluations
planned under ``group_minutes`` each go to the cluster as one job (a Snakemake group). Without ``resources.plan``, or
for a job whose cost is unknown (an architecture missing from flops.json, a method or attack that declares no passes),
the stage's fixed ``runtime``.
"""

from __future__ import annotations

import functools
import heapq
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tradeoff.attacks.declared.base import (
    attack_passes as declared_attack_passes,
)
from tradeoff.attacks.declared.base import (
    evaluation_passes as declared_evaluation_passes,
)
from tradeoff.attacks.declared.base import (
    priced_settings,
)
from tradeoff.audit.jobs import audit_targets, audited_models, protocol_pairs, surrogate_for
from tradeoff.core.errors import ConfigError
from tradeoff.core.passes import F, G, Passes, UnknownCost
from tradeoff.core.spec import AttackSpec, AuditSpec, ExternalSpec, MethodSpec, RunSpec
from tradeoff.methods import METHODS

FLOPS_FILE = Path(__file__).with_name("flops.json")

# Dense bf16 tensor throughput, TFLOP/s. H100/H200: the matmul rate measured on this workplace's machines (the spec
# sheet says 989); the others are vendors' dense figures.
PEAK_TFLOPS = {"h100": 790.0, "h200": 790.0, "a100": 312.0, "rtx3090": 71.0, "v100": 125.0}
# When no bench file calibrates a device, plans assume this fraction of peak (the project's target).
ASSUMED_FRACTION = 0.30
# fp32 (evaluation always; training unless runtime.precision is bf16): cuDNN's convolutions then use TF32 tensor
# cores (PyTorch's default), whose dense rate is half bf16's on A100/H100; fp32 FLOPs count twice.
FP32_COST = 2.0


# ------------------------------------------------------------------------------------------------ pass counts


def attack_passes(spec: AttackSpec | dict, classes: int) -> Passes:
    """What ``perturb`` of a resolved attack costs per attacked example (no final classification), as its type
    declares (tradeoff.attacks.declared: ``passes``)."""
    return declared_attack_passes(spec, classes)


def evaluation_passes(spec: AttackSpec | dict, classes: int, corruption_images: dict[str, int] | None = None) -> Passes:
    """One evaluation of one test example (tradeoff.attacks.loop.run_attack): as its attack's type declares
    (``evaluation_passes``: the clean pass, the attack, the classification of its result); an entry of corrupted
    images (NROB, no attack) a forward pass of the clean image and of each of its corrupted copies."""
    spec = AttackSpec.from_dict(spec)
    if spec.corruptions:
        images = (corruption_images or {}).get(spec.dataset)
        if images is None:
            raise UnknownCost(f"no image count for corruption dataset {spec.dataset!r} in flops.json")
        return (1 + images) * F
    return declared_evaluation_passes(spec, classes)


def method_passes(method: MethodSpec, classes: int) -> Passes:
    """One training step of a resolved method, per example (its training attack included), as the method declares
    (tradeoff.methods: ``passes``)."""
    cls = METHODS.get(method.name)
    if cls is None:
        raise UnknownCost(f"no method is named {method.name!r} (tradeoff.methods)")
    return cls.passes(cls.parameters.settings(method.params, f"method {method.name!r}"), classes)


# ------------------------------------------------------------------------------------------------ the table


@functools.cache
def _read_table(path: str) -> dict:
    return json.loads(Path(path).read_text())


def load_table(path: str | Path = FLOPS_FILE) -> dict:
    """flops.json: ``passes`` {"<arch> <dataset>": {forward, input_backward, train_backward}}, ``datasets`` {name:
    {train, test, classes}}, ``corruption_images`` {corruption dataset: images per test image}."""
    try:
        return _read_table(str(path))
    except (OSError, ValueError):
        return {"passes": {}, "datasets": {}, "corruption_images": {}}


def pass_key(arch: str, dataset: str) -> str:
    return f"{arch} {dataset}"


def _unit(table: dict, arch: str, dataset: str) -> dict:
    unit = table["passes"].get(pass_key(arch, dataset))
    if unit is None:
        raise UnknownCost(f"no FLOP count for {arch} on {dataset} in {FLOPS_FILE.name}; run `tradeoff bench-flops`")
    return unit


def _dataset(table: dict, name: str) -> dict:
    found = table["datasets"].get(name)
    if found is None:
        raise UnknownCost(f"no sizes for dataset {name!r} in {FLOPS_FILE.name}; run `tradeoff bench-flops`")
    return found


def training_flops(spec: RunSpec, table: dict, precision: str = "fp32") -> float:
    """A training job: every epoch's steps (in ``precision``, runtime.precision), its per-epoch selection measurement
    and its learner tracking (fp32), in bf16-equivalent FLOPs."""
    steps, measuring = training_parts(spec, table, precision)
    return steps + measuring


def training_parts(spec: RunSpec, table: dict, precision: str = "fp32") -> tuple[float, float]:
    """A training job's bf16-equivalent FLOPs in two parts: its training steps (every epoch's, in ``precision``), and
    its per-epoch measurements (the selection's and the learner tracking's, in fp32)."""
    unit, data = _unit(table, spec.arch, spec.dataset), _dataset(table, spec.dataset)
    classes, epochs = data["classes"], int(spec.epochs)
    n = spec.trained_images(data["train"])  # the training split less its validation split
    step = method_passes(spec.method, classes).flops(unit)
    selection = spec.selection
    examples = selection.measured(min(data["test"], spec.test_examples or data["test"]))
    attack = selection.attack if isinstance(selection.attack, dict) else None
    measured = epochs
    if selection.mode == "best_robust":
        every = selection.period
        measured = epochs // every + (epochs % every != 0)
    measuring = examples * F.flops(unit) * epochs  # the per-epoch measurements, in fp32 (FP32_COST)
    if attack is not None:
        measuring += examples * evaluation_passes(attack, classes).flops(unit) * measured
    track = spec.method.get("track_learners")
    if isinstance(track, dict) and isinstance(track.get("attack"), dict):  # its JSON form: resolved, a mapping
        learners, attacked = 2, len(track.get("attacked", ["nt"]))
        each = evaluation_passes(track["attack"], classes) + attack_passes(track["attack"], classes) + 2 * F
        measuring += int(track["examples"]) * (learners * F + attacked * each).flops(unit) * epochs
    return epochs * n * step * precision_cost(precision), FP32_COST * measuring


def step_passes(spec: RunSpec, table: dict | None = None) -> list[float]:
    """A run's training step's pass counts per example [F, Bi, Bw] (method_passes): what a measured step is matched
    on (two runs whose steps make the same passes on the same shape take the same time)."""
    table = load_table() if table is None else table
    p = method_passes(spec.method, _dataset(table, spec.dataset)["classes"])
    return [p.f, p.bi, p.bw]


def planned_epoch_seconds(spec: RunSpec, device: str, precision: str, fraction: float = ASSUMED_FRACTION,
                          table: dict | None = None) -> float | None:
    """The formula's seconds of one epoch of a run's training steps (its whole training set, no measurement) on
    ``device`` (a device_key) at ``fraction`` of its peak; None for a device without a price or a run without a
    FLOP count."""
    table = load_table() if table is None else table
    if device not in PEAK_TFLOPS:
        return None
    try:
        unit, data = _unit(table, spec.arch, spec.dataset), _dataset(table, spec.dataset)
        step = method_passes(spec.method, data["classes"]).flops(unit)
    except UnknownCost:
        return None
    return data["train"] * step * precision_cost(precision) / (PEAK_TFLOPS[device] * fraction * 1e12)


def precision_cost(precision: str) -> float:
    """What a FLOP in ``precision`` costs in bf16 FLOPs (the unit PEAK_TFLOPS is in)."""
    return 1.0 if precision == "bf16" else FP32_COST


def peak_tflops(device: str, precision: str) -> float | None:
    """A device's (device_key) dense tensor rate in ``precision``: bf16's, or TF32's for fp32; None if unknown."""
    peak = PEAK_TFLOPS.get(device)
    return None if peak is None else peak / precision_cost(precision)


def evaluation_flops(run: RunSpec | ExternalSpec, attack: AttackSpec, table: dict) -> float:
    """An evaluation job of one attack on a run's whole test set (``test_examples`` at a smaller scale), in
    bf16-equivalent FLOPs (x FP32_COST)."""
    unit, data = _unit(table, run.arch, run.dataset), _dataset(table, run.dataset)
    m = min(data["test"], run.test_examples or data["test"])
    return FP32_COST * m * evaluation_passes(attack, data["classes"], table.get("corruption_images")).flops(unit)


def audit_passes(block: AuditSpec, attack: AttackSpec, black_box: AttackSpec | None,
                 pairs: list[tuple[AttackSpec, AttackSpec]], classes: int, transfer: bool,
                 autoattack: AttackSpec | None = None) -> Passes:
    """One test example's share of an audit (its checks: tradeoff.audit.registry), for a deterministic model where no masking is
    suspected (a randomized one adds EOT's draws, a suspected one the adaptive attacks): in each norm the attack,
    APGD-CE at each step multiple, the two other losses, the multi-targeted attack, each other budget, the mid-grey
    and the whole-range one, the black-box attack, the transfer attack (on a surrogate of the same cost), AutoAttack
    and the random samples; the restart curve (at most ``restarts`` runs), the best-iterate run, FGSM and the
    decision-based attack (L-inf); each protocol pair, the input gradients and the repeated forward passes; the few
    traced examples are left out."""
    steps = int(priced_settings(attack).steps)
    apgd = [AttackSpec.from_dict({"type": "apgd-ce", "norm": attack.norm, "eps": attack.eps, "steps": steps * int(m)})
            for m in block.step_multipliers]
    targeted = attack.replace(type="t-pgd", target_classes=max(1, min(9, classes - 1)))
    budgets = [attack] * (len([m for m in block.eps_multipliers if m != 1]) + 2)
    per_norm = [attack] + apgd + budgets + [attack, attack, targeted] + ([black_box] if black_box else []) + (
        [attack] if transfer else []) + ([autoattack] if autoattack else [])
    fgsm = AttackSpec.from_dict({"type": "fgsm", "norm": attack.norm, "eps": attack.eps})
    rays = AttackSpec.from_dict({"type": "rays", "norm": "linf", "eps": attack.eps,
                                 "queries": int(block.decision_queries)})
    runs = per_norm * 2 + [attack] * (int(block.restarts) - 1 + 1) + [fgsm, rays] + [s for pair in pairs
                                                                                    for s in pair]
    total = F + 4 * G + 2 * F + int(block.eot_draws) * F + 8 * G  # clean, gradients, consistency, randomness
    total = total + 2 * int(block.random_samples) * F     # the random samples, in each norm
    for spec in runs:
        total = total + evaluation_passes(spec, classes)
    return total


def audit_flops(run: RunSpec | ExternalSpec, passes: Passes, table: dict, examples: int | None) -> float:
    """An audit job on a model's first ``examples`` test examples, in bf16-equivalent FLOPs (x FP32_COST)."""
    unit, data = _unit(table, run.arch, run.dataset), _dataset(table, run.dataset)
    m = min(data["test"], run.test_examples or data["test"], examples or data["test"])
    return FP32_COST * m * passes.flops(unit)


# ------------------------------------------------------------------------------------------------ devices


def device_key(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100'."""
    lowered = name.lower().replace(" ", "")
    for key in PEAK_TFLOPS:
        if key in lowered:
            return key
    return lowered


def calibrated_fraction(device: str, folder: str | Path = "results/bench",
                        benches: list[dict] = ()) -> tuple[float, str]:
    """The median achieved fraction of peak in bench files of this device and in ``benches`` (a committed node
    report's, node_benches), else the assumed target."""
    fractions = [row["fraction_of_peak"] for row in benches if row.get("fraction_of_peak")]
    sources = sorted({row["source"] for row in benches if row.get("fraction_of_peak")})
    for path in sorted(Path(folder).glob("train-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if device_key(data.get("device", "")) == device and data.get("fraction_of_peak"):
            fractions.append(data["fraction_of_peak"])
    if fractions:
        fractions.sort()
        files = len(fractions) - sum(bool(row.get("fraction_of_peak")) for row in benches)
        where = [f"{files} bench file(s)"] if files else []
        where += [f"docs/bench/{name}" for name in sources]
        return fractions[len(fractions) // 2], f"calibrated by {len(fractions)} bench(es): {', '.join(where)}"
    return ASSUMED_FRACTION, f"assumed {ASSUMED_FRACTION:.0%} of peak (no bench file for {device})"


# ------------------------------------------------------------------------------------------------ node reports


#: committed reports of `tradeoff gpu-check` on a GPU node (scripts/gpu-node.sh): relative to the workflow folder
NODE_REPORTS = Path("docs/bench")


def node_benches(device: str, folder: str | Path | None = NODE_REPORTS) -> list[dict]:
    """The bench-train rows of the gpu-check reports (``gpu-check-*.json``) in ``folder`` measured on ``device`` (a
    device_key) on a GPU, each with ``source`` (its report's file name): measured seconds per epoch per method
    (its step's pass counts), architecture, dataset, batch size and precision."""
    rows = []
    for path in sorted(Path(folder).glob("gpu-check-*.json")) if folder is not None else []:
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if report.get("cpu_only") or device_key(report.get("device", "")) != device:
            continue
        for row in report.get("bench_train") or []:
            if row.get("passes") and row.get("seconds_per_epoch"):
                rows.append({**row, "source": path.name})
    return rows


def measured_steps(spec: RunSpec, precision: str, benches: list[dict], table: dict) -> dict | None:
    """The bench of ``benches`` that measured a step like this run's: the same method, pass counts per example,
    architecture, dataset, batch size and precision (a run at another batch size stays a formula; so does another
    method of the same pass counts: FAT's early stop makes its steps shorter than its count)."""
    try:
        passes = step_passes(spec, table)
    except UnknownCost:
        return None
    for row in benches:
        if (row.get("method"), row["arch"], row["dataset"], int(row["batch_size"]), row["precision"]) == (
                spec.method.name, spec.arch, spec.dataset, int(spec.batch_size), precision) and \
                all(math.isclose(a, b) for a, b in zip(row["passes"], passes)):
            return row
    return None


# ------------------------------------------------------------------------------------------------ job sizes


PLAN_DEFAULTS = {"device": "h100", "safety": 3.0, "start_minutes": 2, "floor_minutes": 15, "max_minutes": None,
                 "group_minutes": 30}
FIXED_RUNTIME = {"train": 1440, "evaluate": 240}  # minutes, when the config gives neither a plan nor a runtime


@dataclass
class JobSizes:
    """Planned minutes and the minutes each cluster job asks for, from a catalog and its ``resources`` config. The
    Snakefile asks it per job (train_minutes, eval_minutes, shard_minutes, eval_group); `tradeoff plan` lays out a
    target's cluster jobs with it."""

    catalog: Any
    bench_folder: str | Path = "results/bench"
    device: str | None = None  # default: resources.plan.device
    table: dict = field(default_factory=load_table)
    node_reports: str | Path | None = NODE_REPORTS  # committed gpu-check reports (None: none read)
    _train: dict = field(default_factory=dict, init=False, repr=False)
    measured: dict = field(default_factory=dict, init=False, repr=False)  # run -> the bench its steps are priced by
    _eval: dict = field(default_factory=dict, init=False, repr=False)
    #: why a job is not priced (UnknownCost's message), by ("train", run), ("evaluate", run, unit) or ("audit", run)
    unpriced: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        resources = self.catalog.resources
        given = resources.get("plan")
        self.planned = given is not None  # without resources.plan: the stages' fixed runtimes, no groups
        self.settings = {**PLAN_DEFAULTS, **(given or {})}
        self.device = self.device or self.settings["device"]
        if self.device not in PEAK_TFLOPS:
            raise ConfigError(f"resources.plan.device: unknown device {self.device!r}; allowed: {sorted(PEAK_TFLOPS)}")
        self.benches = node_benches(self.device, self.node_reports)
        self.fraction, self.basis = calibrated_fraction(self.device, self.bench_folder, self.benches)
        self.rate = PEAK_TFLOPS[self.device] * self.fraction * 1e12 * 60  # FLOP per GPU-minute
        self.precision = self.catalog.runtime_settings.precision
        self.fixed = {stage: int((resources.get(stage) or {}).get("runtime", default))
                      for stage, default in FIXED_RUNTIME.items()}

    # planned GPU-minutes (None: unknown)

    def planned_train(self, run: str) -> float | None:
        """A training job's GPU-minutes: its steps as a node report measured them where one measured a step like its
        own (``measured[run]``), else by the formula; its per-epoch measurements always by the formula."""
        if run not in self._train:
            spec = self.catalog.runs[run]
            try:
                steps, measuring = training_parts(spec, self.table, self.precision)
            except UnknownCost as exc:
                self._train[run] = None
                self.unpriced[("train", run)] = str(exc)
                return None
            bench = measured_steps(spec, self.precision, self.benches, self.table)
            if bench is not None:
                self.measured[run] = bench
                n = min(_dataset(self.table, spec.dataset)["train"], spec.train_examples or math.inf)
                share = n / _dataset(self.table, bench["dataset"])["train"]  # bench: seconds of a whole epoch
                self._train[run] = int(spec.epochs) * share * bench["seconds_per_epoch"] / 60 + measuring / self.rate
            else:
                self._train[run] = (steps + measuring) / self.rate
        return self._train[run]

    def planned_eval(self, run: str, unit: str) -> float | None:
        """One evaluation job (a unit: an attack, or all of the run's attacks with runtime.eval_unit: run)."""
        key = (run, unit)
        if key not in self._eval:
            try:
                self._eval[key] = sum(evaluation_flops(self.catalog.model_spec(run), self.catalog.attack_for(a, run),
                                                       self.table)
                                      for a in self.catalog.unit_attacks(run, unit)) / self.rate
            except UnknownCost as exc:
                self._eval[key] = None
                self.unpriced[("evaluate", *key)] = str(exc)
        return self._eval[key]

    def planned_audit(self, run: str) -> float | None:
        """An audit job of a model (tradeoff.audit: `tradeoff audit --run`)."""
        block, catalog = self.catalog.audit, self.catalog
        try:
            attack = catalog.attack_for(block.attack, run)
            black_box = catalog.attack_for(block.black_box, run) if block.black_box else None
            pairs = [(catalog.attack_for(s, run), catalog.attack_for(p, run)) for s, p in protocol_pairs(catalog, run)]
            classes = _dataset(self.table, catalog.model_spec(run).dataset)["classes"]
            autoattack = catalog.attack_for(block.autoattack, run) if block.autoattack else None
            passes = audit_passes(block, attack, black_box, pairs, classes, surrogate_for(catalog, run) is not None,
                                  autoattack)
            return audit_flops(catalog.model_spec(run), passes, self.table, block.examples) / self.rate
        except UnknownCost as exc:
            self.unpriced[("audit", run)] = str(exc)
            return None

    # what a job asks for (minutes, first attempt)

    def _asked(self, planned: float | None, stage: str, floor: float | None = None) -> int:
        if not self.planned or planned is None:
            return self.fixed[stage]
        s = self.settings
        minutes = planned * float(s["safety"]) + float(s["start_minutes"])
        minutes = max(minutes, float(s["floor_minutes"]) if floor is None else floor)
        if s["max_minutes"]:
            minutes = min(minutes, float(s["max_minutes"]))
        return max(1, math.ceil(minutes))

    def train_minutes(self, run: str) -> int:
        return self._asked(self.planned_train(run), "train")

    def eval_group(self, run: str, unit: str) -> str | None:
        """The cluster job (a Snakemake group) that evaluates ``unit`` of ``run`` with the run's other cheap units:
        ``evaluate-<run>`` when it is planned under ``group_minutes`` and is not sharded; None: a job of its own (and
        always with runtime.eval_unit: run, one job per run already)."""
        if not self.planned or self.catalog.eval_unit == "run" or self.catalog.shards_for(unit) > 1:
            return None
        planned = self.planned_eval(run, unit)
        if planned is None or planned >= float(self.settings["group_minutes"]):
            return None
        return f"evaluate-{run}"

    def group_members(self, run: str) -> list[str]:
        return [u for u in self.catalog.eval_units(run) if self.eval_group(run, u) is not None]

    def eval_minutes(self, run: str, unit: str) -> int:
        """A grouped evaluation asks for its share of the group's floor (a group asks for the sum of its members)."""
        floor = None
        if self.eval_group(run, unit) is not None:
            floor = float(self.settings["floor_minutes"]) / len(self.group_members(run))
        return self._asked(self.planned_eval(run, unit), "evaluate", floor)

    def audit_minutes(self, run: str) -> int:
        return self._asked(self.planned_audit(run), "evaluate")

    def shard_minutes(self, run: str, unit: str, shards: int) -> int:
        planned = self.planned_eval(run, unit)
        return self._asked(None if planned is None else planned / shards, "evaluate")


# ------------------------------------------------------------------------------------------------ plan


@dataclass
class Job:
    name: str
    kind: str                  # train | evaluate | analyze | audit
    hours: float | None        # planned GPU-hours (None: unknown)
    after: str | None          # the training job an evaluation waits for
    cluster_job: str = ""      # the sbatch job it runs in: itself, or its run's group of cheap evaluations
    asked_minutes: int = 0     # what its rule asks for at the first attempt (a sharded one: all shards together)
    shards: int = 1
    measured: str | None = None  # a training job whose steps a node report measured: that report's file name
    why: str | None = None     # a job without a price (hours None): why


def plan(catalog, target: str, gpus: int, device: str | None = None, bench_folder: str | Path = "results/bench",
         table: dict | None = None, node_reports: str | Path | None = NODE_REPORTS) -> dict:
    """Every GPU job that a target needs, planned, and how the pipeline submits them to a cluster."""
    sizes = JobSizes(catalog, bench_folder, device, table if table is not None else load_table(), node_reports)
    jobs: list[Job] = []
    def model(run):  # the training job of a row's run, or an external model (`external:`): evaluated, not trained
        return run if catalog.is_external(run) else catalog.train_id[run]

    audit = target not in catalog.targets
    if audit:  # an audit target (tradeoff.audit.jobs): the audit jobs of its rows' models
        for run in audited_models(catalog, audit_targets(catalog)[target]):
            planned = sizes.planned_audit(run)
            jobs.append(Job(f"audit {run}", "audit", None if planned is None else planned / 60, None, f"audit {run}",
                            sizes.audit_minutes(run), why=sizes.unpriced.get(("audit", run))))
    runs = dict.fromkeys(model(run) for run, _ in catalog.evaluations(target)) if not audit else {}
    for leaf in catalog.leaf_targets(target) if not audit else []:  # training-only rows (a table of training times)
        for row in catalog.targets[leaf].rows:
            for run in catalog.row_runs(row.run):
                runs.setdefault(catalog.train_id[run])
    needed = {}
    for run, attack in catalog.evaluations(target) if not audit else []:
        needed.setdefault(run, set()).add(catalog.unit_of(attack))
    for run in runs:
        name = None
        if not catalog.is_external(run):
            planned = sizes.planned_train(run)
            name = f"train {run}"
            bench = sizes.measured.get(run)
            jobs.append(Job(name, "train", None if planned is None else planned / 60, None, name,
                            sizes.train_minutes(run), measured=bench["source"] if bench else None,
                            why=sizes.unpriced.get(("train", run))))
        for unit in [u for u in catalog.eval_units(run) if u in needed.get(run, ())]:
            planned = sizes.planned_eval(run, unit)
            shards = catalog.shards_for(unit)
            group = sizes.eval_group(run, unit)
            asked = sizes.shard_minutes(run, unit, shards) * shards if shards > 1 else sizes.eval_minutes(run, unit)
            jobs.append(Job(f"evaluate {run} {unit}", "evaluate", None if planned is None else planned / 60, name,
                            group or f"evaluate {run} {unit}", asked, shards,
                            why=sizes.unpriced.get(("evaluate", run, unit))))
    # a figure's analysis job: not priced, its stage's fixed runtime
    for name in catalog.analysis_targets(target) if not audit else []:
        jobs.append(Job(f"analyze {name}", "analyze", None, None, f"analyze {name}", sizes.fixed["evaluate"],
                        why="analyses are not priced"))
    known = [j.hours for j in jobs if j.hours is not None]
    trains = [j for j in jobs if j.kind == "train"]
    groups = {j.cluster_job for j in jobs if j.cluster_job != j.name}
    alone = [j for j in jobs if j.kind == "evaluate" and j.cluster_job == j.name]
    return {"target": target, "device": sizes.device, "gpus": gpus, "peak_tflops": PEAK_TFLOPS[sizes.device],
            "fraction": sizes.fraction, "basis": sizes.basis, "precision": sizes.precision, "jobs": jobs, "total_hours": sum(known),
            "unknown": [j.name for j in jobs if j.hours is None],
            "makespan_hours": makespan([j for j in jobs if j.hours is not None], gpus),
            "planned_resources": sizes.planned, "settings": sizes.settings,
            "cluster_jobs": len(trains) + len(groups) + sum(j.shards for j in alone)
            + sum(j.kind in ("analyze", "audit") for j in jobs),
            "train_jobs": len(trains), "groups": len(groups),
            "asked_hours": sum(j.asked_minutes for j in jobs) / 60,
            "measured_reports": sorted({row["source"] for row in sizes.benches})}


def makespan(jobs: list[Job], gpus: int) -> float:
    """Greedy list scheduling (longest job first among those ready) of jobs with train -> evaluate edges."""
    done_at: dict[str, float] = {}
    free = [0.0] * gpus
    heapq.heapify(free)
    pending = sorted(jobs, key=lambda j: (j.kind != "train", -j.hours))
    for job in pending:  # every training job precedes its evaluations in this order
        start = max(heapq.heappop(free), done_at.get(job.after, 0.0) if job.after else 0.0)
        done_at[job.name] = start + job.hours
        heapq.heappush(free, start + job.hours)
    return max(done_at.values(), default=0.0)


def _minutes(hours: float | None) -> str:
    return "unknown" if hours is None else f"{60 * hours:.1f}"


def format_plan(result: dict) -> str:
    lines = [f"{result['target']} on {result['gpus']} x {result['device']} ({result['peak_tflops']:.0f} TFLOP/s bf16 peak, "
             f"{result['fraction']:.0%} achieved: {result['basis']}; training in {result['precision']}, "
             "evaluation in fp32)", "",
             "| job | GPU-minutes | basis | asks (min) | cluster job |", "|---|---:|---|---:|---|"]
    for j in result["jobs"]:
        where = "own" if j.cluster_job == j.name else j.cluster_job
        if j.shards > 1:
            where = f"{j.shards} shards"
        basis = "unknown" if j.hours is None else ("measured steps + formula" if j.measured else "formula")
        lines.append(f"| {j.name} | {_minutes(j.hours)} | {basis} | {j.asked_minutes} | {where} |")
    measured = [j for j in result["jobs"] if j.measured]
    formula = [j for j in result["jobs"] if j.hours is not None and not j.measured]
    reports = result.get("measured_reports") or []
    lines += ["", f"measured: {len(measured)} training job(s)' steps, from a node report's seconds per epoch of a step "
                  f"of the same method, passes, shape, batch and precision ({', '.join(f'docs/bench/{r}' for r in reports)}); "
                  f"their per-epoch measurements and the {len(formula) - len(measured)} other priced jobs: formulas" if measured else
              "measured: nothing, every number is a formula (FLOPs at the fraction of peak above"
              + (f"; node reports of {result['device']}: {', '.join(f'docs/bench/{r}' for r in reports)}, "
                 "no step like these runs'" if reports else f"; no node report of {result['device']} in docs/bench/")
              + f"); formulas: {len(formula)} job(s)"]
    lines += ["", f"total: {result['total_hours']:.1f} GPU-hours planned; makespan on {result['gpus']} GPU(s): "
                  f"{result['makespan_hours']:.1f} h"]
    if result["unknown"]:
        why = {j.name: j.why for j in result["jobs"] if j.hours is None}
        reasons: dict[str, list[str]] = {}
        for name in result["unknown"]:
            reasons.setdefault(why.get(name) or "no price", []).append(name)
        lines.append("not priced (asks its stage's fixed runtime): "
                     + "; ".join(f"{', '.join(names)}: {reason}" for reason, names in reasons.items()))
    how = (f"planned x {result['settings']['safety']:g} + {result['settings']['start_minutes']} min, at least "
           f"{result['settings']['floor_minutes']} min" if result["planned_resources"]
           else "the stages' fixed runtimes (no resources.plan in the config)")
    analyses = sum(j.kind == "analyze" for j in result["jobs"])
    audits = sum(j.kind == "audit" for j in result["jobs"])
    evals = result["cluster_jobs"] - result["train_jobs"] - analyses - audits
    more = (f", {analyses} analysis" if analyses else "") + (f", {audits} audit" if audits else "")
    lines.append(f"on a cluster (snakemake --profile slurm): {result['cluster_jobs']} GPU jobs ({result['train_jobs']} "
                 f"training{more}, {evals} evaluation, {result['groups']} of them a run's evaluations under "
                 f"{result['settings']['group_minutes']} min grouped), asking {result['asked_hours']:.1f} GPU-hours "
                 f"for {result['total_hours']:.1f} planned ({how})")
    return "\n".join(lines)
