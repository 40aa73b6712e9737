"""Resolving a merged configuration into its catalog: every run's settings (preset, defaults, the scale's mapping,
its method's parameters checked and made canonical), shared training jobs, every evaluation a target needs, and the
cache of resolutions that the pipeline's jobs keep (one resolution per set of config files and source)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Iterable

from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.config.budgets import _RELATIVE, parse_budget, split_budget
from tradeoff.config.catalog import Catalog
from tradeoff.config.checks import (
    _check_arch_map,
    _check_attack,
    _check_choice,
    _check_comparison,
    _check_corruptions_entry,
    _check_eps,
    _check_eval_unit,
    _check_schedule,
    _check_target,
    _lookup,
)
from tradeoff.config.load import (
    CORRUPTIONS_TYPE,
    DEFAULT_CONFIG,
    PSEUDO_COLUMNS,
    REFERENCE_DIR,
    SCHEMA,
    load_config,
    merge,
    validate_schema,
)
from tradeoff.config.scale import corruption_set, resolve_attack, scale_run
from tradeoff.core import ranges
from tradeoff.core.errors import ConfigError, unknown
from tradeoff.core.params import ATTACK
from tradeoff.core.spec import AttackSpec, ExternalSpec, RunSpec, spec_digest
from tradeoff.core.targets import TargetSpec
from tradeoff.data.declared import DECLARED as DATASET_DECLARATIONS
from tradeoff.data.declared import SPLIT_SIZES, corruption_dataset_names, dataset_names
from tradeoff.methods import METHODS
from tradeoff.models.declared import PRETRAINED, model_names
from tradeoff.models.zoo_names import FORMATS, canonical_arch, layouts, parse_normalize
from tradeoff.storage.atomic import WriteError, atomic_write_text
from tradeoff.storage.layout import Layout


def load_catalog(paths: Iterable[str | Path] | None = None, *, write_cache: bool = False) -> Catalog:
    """The resolved catalog of these config files, from the cache of an earlier resolution when there is one.

    Resolving validates every run against the declarations of methods, attacks, models and datasets (no PyTorch:
    tradeoff.methods and the declarations of the others), a few tenths of a second of CPU in each of the pipeline's hundreds of
    small jobs. A resolution is kept in ``<results>/<scale>/work/catalog/<key>.json``, where the key hashes the files'
    bytes and the source of this package (schema included), so any change to either resolves (and validates)
    afresh. Only the pipeline's jobs write it (``write_cache=True``: the CLI); a library call reads it at most, so
    that loading a checkout's config (a test, a notebook) never writes into its results folder."""
    paths = [Path(p) for p in (paths or [DEFAULT_CONFIG])]
    config = load_config(paths)
    cache = _catalog_cache(paths, config)
    if cache is not None:
        try:
            kept = json.loads(cache.read_text())
        except (OSError, ValueError):
            kept = None  # none yet, or damaged: resolved below
        if isinstance(kept, dict) and kept.get("config") == config:
            return Catalog(**kept, reference_dir=str(reference_dir(paths)))
    catalog = resolve(config, reference_dir(paths))
    if write_cache:
        _save_catalog_cache(paths, catalog)
    return catalog


CATALOG_CACHE_KEEP = 8


def _save_catalog_cache(paths: list[Path], catalog: Catalog) -> None:
    """Keep a resolved catalog for the jobs that read the same files (see load_catalog). Kept only if it comes
    back from JSON unchanged; a cache that cannot be written is skipped (every job then resolves for itself)."""
    cache = _catalog_cache(paths, catalog.config)
    fields = {name: getattr(catalog, name) for name in ("config", "train_id", "seed_runs")}
    fields["attacks"] = {name: spec.as_dict() for name, spec in catalog.attacks.items()}
    fields["targets"] = {name: target.as_dict() for name, target in catalog.targets.items()}
    fields["runs"] = {rid: spec.as_dict() for rid, spec in catalog.runs.items()}
    fields["externals"] = {eid: spec.as_dict() for eid, spec in catalog.externals.items()}
    text = json.dumps(fields)  # key order kept: it is the order of a table's columns and rows
    if cache is None or json.loads(text) != fields:
        return
    try:
        atomic_write_text(cache, text)
    except WriteError:
        return
    # every edit of the config or the code makes a new key: keep the newest few, not one file per edit ever made
    def age(path: Path) -> float:
        try:
            return -path.stat().st_mtime
        except FileNotFoundError:  # pruned by a job beside this one
            return 0.0

    for old in sorted(cache.parent.glob("*.json"), key=age)[CATALOG_CACHE_KEEP:]:
        old.unlink(missing_ok=True)


def _catalog_cache(paths: list[Path], config: dict) -> Path | None:
    results, scale = (config.get("paths") or {}).get("results"), config.get("scale")
    if not isinstance(results, str) or not isinstance(scale, str):
        return None
    digest = hashlib.sha256(_source_digest())
    for path in paths:
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return Layout.of(results, scale).catalog_cache / f"{digest.hexdigest()[:32]}.json"


@functools.cache
def _source_digest() -> bytes:
    """A hash of this package's source and the config schema: what resolution depends on besides the files."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]  # all of tradeoff
    for path in sorted(package.rglob("*.py")) + [SCHEMA]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.digest()


def reference_dir(paths: list[Path]) -> Path:
    """Where the papers' numbers of these config files are: ``reference/`` beside the first of them."""
    return paths[0].absolute().parent / "reference"


def resolve(config: dict, references: Path = REFERENCE_DIR) -> Catalog:
    """Validate a merged config and resolve it. Raises ConfigError naming the first bad key."""
    bad = ranges.nonfinite(config)  # before the schema, whose minimum and maximum let NaN through
    if bad:
        raise ConfigError(f"{bad}: must be a finite number, got {_lookup(config, bad)!r} (leave a parameter out to "
                          "take its default)")
    validate_schema(config)
    datasets, archs = dataset_names(), model_names()
    smap = config["scale_map"]
    _check_choice(smap.get("dataset"), datasets, "scale_map.dataset", nullable=True)
    _check_arch_map(smap.get("arch"), archs)
    if smap.get("generated_data") and config["scale"] == "paper":
        raise ConfigError("scale_map.generated_data: the paper scale reads the real datasets only; generated data "
                          "are for a scale of their own (config/rehearsal.yaml sets scale: rehearsal)")
    if smap.get("lr"):
        _check_schedule(smap["lr"], "scale_map.lr")
    for preset, schedule in (smap.get("preset_lr") or {}).items():
        _check_choice(preset, sorted(config.get("train_presets", {})), f"scale_map.preset_lr.{preset}")
        _check_schedule(schedule, f"scale_map.preset_lr.{preset}")
    for arch in config.get("pretrained") or {}:
        if arch not in PRETRAINED:
            raise ConfigError(f"pretrained.{arch}: {arch!r} is not an architecture that starts from a pretrained "
                              f"checkpoint; allowed: {list(PRETRAINED)}")
    for name, budgets in config["datasets"].items():
        _check_choice(name, datasets, f"datasets.{name}")
        for norm, value in budgets.items():
            _check_eps(parse_budget(value, f"datasets.{name}.{norm}"), norm, f"datasets.{name}.{norm}")

    corruption_sets = corruption_dataset_names()
    for name, mapped in (config.get("corruption_map") or {}).items():
        _check_choice(name, corruption_sets, f"corruption_map (key {name!r})")
        _check_choice(mapped, corruption_sets, f"corruption_map.{name}")
    for name, spec in {**config.get("train_attacks", {}), **config["attacks"]}.items():
        section = "train_attacks" if name in config.get("train_attacks", {}) else "attacks"
        if spec.get("type") == CORRUPTIONS_TYPE and section == "attacks":
            _check_corruptions_entry(spec, f"{section}.{name}", corruption_sets)
            continue
        _check_attack(spec, f"{section}.{name}", ATTACK_DECLARATIONS)

    _check_validation_sizes(config, [d for d in datasets if d not in corruption_sets])
    raw_runs, seed_runs = expand_seeds(config)
    runs = {rid: resolve_run(rid, raw, config, METHODS, datasets, archs) for rid, raw in raw_runs.items()}
    train_id = _training_jobs(runs, METHODS)
    externals = {}
    for ext_id, raw in (config.get("external") or {}).items():
        if ext_id in runs:
            raise ConfigError(f"external.{ext_id}: the id is a run's too; a row names one model, so give the external "
                              "model another id")
        externals[ext_id] = resolve_external(raw, config, lambda name, e=ext_id: f"external.{e}.{name}")
        train_id[ext_id] = ext_id  # evaluated as its own job, like a training job's model

    for rid, spec in runs.items():
        # the selection attack also measures the per-epoch robust curve, so it is resolved for every run
        sel = spec["selection"]
        sel["attack"] = resolve_attack(_attack_ref(config, sel["attack"], f"runs.{rid}.selection.attack"),
                                       spec, config, f"runs.{rid}.selection.attack")

    targets = config["targets"]
    specs = {name: target_spec(name, target) for name, target in targets.items()}
    for name, target in targets.items():
        _check_target(name, target, targets, runs, config["attacks"], externals)
        _check_comparison(name, target, config, references)
    _check_eval_unit(config)
    _check_audit(config)
    catalog = Catalog(config=config, runs={rid: RunSpec.from_dict(spec) for rid, spec in runs.items()},
                      attacks=config["attacks"], targets=specs, train_id=train_id, seed_runs=seed_runs,
                      reference_dir=str(references), externals=externals)
    # every evaluation the targets need, resolved for its run now: a budget that a scale maps out of range (a
    # sweep's largest on a dataset with a larger standard budget) stops the config, not an evaluation job
    for run_id, attack in {pair for name in targets for pair in catalog.evaluations(name)}:
        check_evaluation(catalog, run_id, attack)
    _check_strong_columns(catalog, ATTACK_DECLARATIONS)
    return catalog


def target_spec(name: str, target: dict) -> TargetSpec:
    """A target's settings, checked, as its frozen spec (tradeoff.core.targets.TargetSpec); ConfigError naming a key
    that a target does not have."""
    try:
        return TargetSpec.from_dict(target)
    except ValueError as exc:
        extra = sorted(set(target) - set(TargetSpec.KEYS))
        if not extra:
            raise ConfigError(f"targets.{name}: {exc}") from None
        raise ConfigError(f"targets.{name}.{extra[0]}: unknown setting; allowed: {list(TargetSpec.KEYS)}") from None


def _check_strong_columns(catalog: Catalog, registry: dict) -> None:
    """Every attack that a table or figure shows as its own column (not a protocol's, which runs the authors' weak
    settings on purpose) must be able to reach its whole budget at this scale: a fixed-step attack's steps x step
    at least eps from a start at x and 2 eps from a random start in the ball, and no absolute step under a budget
    sweep (a step right for one budget is wrong for the others)."""
    for name, target in catalog.targets.items():
        for column, attack in target.columns.items():
            base = split_budget(attack)[0]
            written = catalog.attacks.get(base)
            if written is None or attack in PSEUDO_COLUMNS or registry.get(written.type) is None:
                continue
            key = f"targets.{name}.columns.{column}"
            step = written.step_size
            if written.sweep and step is not None and not (isinstance(step, str) and _RELATIVE.match(step)):
                raise ConfigError(f"{key}: attacks.{base} sweeps eps {list(written.eps)} with the fixed step_size "
                                  f"{step!r}: write the step relative to the budget (e.g. 'eps/4') so that every "
                                  "budget of the sweep gets its own")
            for job in catalog.column_jobs(attack):
                for run in dict.fromkeys(catalog.train_id[r] for row in target.rows
                                         for r in catalog.row_runs(row.run)):
                    spec = catalog.attack_for(job, run)
                    reach = registry[spec.type].reach(spec)
                    if reach is not None and reach[0] < reach[1] * (1 - 1e-9):
                        raise ConfigError(
                            f"{key}: {job} cannot reach its budget at scale {catalog.scale} (run {run}): "
                            f"{spec.params.get('steps', 1)} steps travel {reach[0]:.4g} in {spec.norm}, less than "
                            f"{reach[1]:.4g} ({'2 eps from a random start' if reach[1] > spec.eps else 'eps'}, eps "
                            f"{spec.eps:.4g}); give it more steps or a step relative to eps ('eps/4')")


def _check_audit(config: dict) -> None:
    """The audit's attacks name attacks of their type (`tradeoff audit`). Its surrogates may name runs that a catalog
    lacks (a config that keeps other runs): the audit takes the first that is one, and its page says when none is."""
    audit = config.get("audit")
    if audit is None:
        return
    for name in audit.get("build") or []:
        target = config["targets"].get(name)
        if target is None:
            raise ConfigError("audit.build: " + unknown("target", name, config["targets"]))
        leaves, tables = [name], []
        while leaves:  # a group's members, down to its tables
            spec = config["targets"].get(leaves.pop(), {})
            leaves += spec.get("targets") or [] if spec.get("kind") == "group" else []
            tables += [spec] if spec.get("kind") == "table" else []
        if not tables:
            raise ConfigError(f"audit.build: {name!r} is a {target.get('kind')} with no table; the build audits the "
                              "rows of tables (or groups of tables)")
    for key, wanted in (("attack", "pgd"), ("black_box", "square"), ("autoattack", "autoattack")):
        name = audit.get(key)
        if name is None:
            continue
        if name not in config["attacks"]:
            raise ConfigError(f"audit.{key}: " + unknown("attack", name, config["attacks"]))
        if config["attacks"][name]["type"] != wanted:
            raise ConfigError(f"audit.{key}: {name!r} is an attack of type {config['attacks'][name]['type']!r}; the "
                              f"audit's {key.replace('_', '-')} check needs one of type {wanted!r}: "
                              f"{sorted(n for n, a in config['attacks'].items() if a['type'] == wanted)}")


def check_evaluation(catalog: Catalog, model_id: str, attack: str) -> AttackSpec:
    """An evaluation of a run or an external model, resolved (its attack spec returned), or ConfigError: a budget out
    of range at this scale, a corruption dataset of another dataset than the model's."""
    spec = catalog.attack_for(attack, model_id)
    base = split_budget(attack)[0]
    if catalog.attacks[base].corruptions:
        _check_corruptions(catalog.attacks[base], catalog.model_spec(model_id), catalog.config, f"attacks.{base}")
    return spec


#: the settings of an external model (`external.<id>`, or `tradeoff evaluate --checkpoint`): see resolve_external
EXTERNAL_KEYS = ("checkpoint", "arch", "dataset", "normalize", "format", "paper_dataset", "sha256")


def resolve_external(raw: dict, config: dict, key: Callable[[str], str]) -> ExternalSpec:
    """An external model's settings, checked and made canonical: its checkpoint file (``{results}``: this scale's
    results folder; not checked to exist, a workflow may write it), its architecture (a registered one, or
    RobustBench's name for it) and dataset, the input normalisation applied inside the model, the file's layout
    (tradeoff.models.zoo_names.FORMATS), the dataset its attacks' budgets are written for (``paper_dataset``, default its own: at
    a smaller scale, a row standing in for a paper dataset's model keeps that dataset's budgets rescaled like the
    runs'), an optional pinned SHA-256, and the scale's test examples. ``key(name)`` names a setting in errors
    (``external.<id>.arch``, or a command-line option)."""
    unknown_keys = sorted(set(raw) - set(EXTERNAL_KEYS))
    if unknown_keys:
        raise ConfigError(f"{key(unknown_keys[0])}: unknown setting; allowed: {list(EXTERNAL_KEYS)}")
    for needed in ("checkpoint", "arch", "dataset"):
        if not raw.get(needed):
            raise ConfigError(f"{key(needed)}: required (an external model needs checkpoint, arch and dataset)")
    python = raw.get("format") == "python"  # a model from the user's own Python file (tradeoff.evaluation.user_model)
    arch = str(raw["arch"]) if python else canonical_arch(raw["arch"], model_names(), key("arch"))
    datasets = [d for d in dataset_names() if d not in corruption_dataset_names()]
    if raw["dataset"] not in datasets:
        raise ConfigError(f"{key('dataset')}: " + unknown("dataset", raw["dataset"], datasets))
    paper_dataset = raw.get("paper_dataset") or raw["dataset"]
    if paper_dataset not in config["datasets"]:
        raise ConfigError(f"{key('paper_dataset')}: " + unknown("dataset with a standard budget (datasets:)",
                                                                paper_dataset, config["datasets"]))
    if raw["dataset"] not in config["datasets"]:
        raise ConfigError(f"{key('dataset')}: {raw['dataset']!r} has no standard budget; add datasets."
                          f"{raw['dataset']}.linf (its attacks' default eps)")
    fmt = raw.get("format") or "auto"
    if python and not arch.startswith("python:"):
        raise ConfigError(f"{key('arch')}: a model from a Python file has arch python:FUNCTION, not {arch!r}")
    if not python and fmt not in FORMATS:
        raise ConfigError(f"{key('format')}: " + unknown("format", fmt, FORMATS))
    if fmt not in ("auto", "python") and fmt not in layouts(arch):
        raise ConfigError(f"{key('format')}: architecture {arch!r} is not read in the {fmt} layout; it accepts "
                          f"{', '.join(layouts(arch))} (or auto)")
    sha = raw.get("sha256")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64 and set(sha.lower()) <= set("0123456789abcdef")):
        raise ConfigError(f"{key('sha256')}: expected the file's SHA-256 as 64 hexadecimal digits, got {sha!r}")
    channels = DATASET_DECLARATIONS[raw["dataset"]].image_shape[0]
    results = str(Layout.of(config["paths"]["results"], config["scale"]).root)
    return ExternalSpec.from_dict({
        "checkpoint": str(raw["checkpoint"]).replace("{results}", results), "sha256": sha.lower() if sha else None,
        "arch": arch, "dataset": raw["dataset"], "paper_dataset": paper_dataset, "paper_arch": arch,
        "normalize": parse_normalize(raw.get("normalize"), channels, key("normalize")), "format": fmt,
        "test_examples": config["scale_map"].get("test_examples")})


def with_external(catalog: Catalog, model_id: str, raw: dict, key: Callable[[str], str]) -> Catalog:
    """The catalog with one more external model (``tradeoff evaluate --checkpoint``), to resolve its evaluations."""
    spec = resolve_external(raw, catalog.config, key)
    return dataclasses.replace(catalog, externals={**catalog.externals, model_id: spec},
                               train_id={**catalog.train_id, model_id: model_id})


def _training_jobs(runs: dict[str, dict], methods: dict) -> dict[str, str]:
    """run id -> the run whose job trains it. Runs with identical settings share one job; so do runs that differ only
    in what their method's observer parameters (``Param(observer=True)``) observe (Generalist's per-epoch learner measurements and snapshots:
    the same weights either way), provided they do not ask for different observations: the job is the first run
    that asks for them, and it observes for all."""
    def observers(spec: dict) -> dict:
        method = spec["method"]
        return {k: method[k] for k in methods[method["name"]].parameters.named(observer=True)
                if method.get(k) is not None}

    groups: dict[str, list[str]] = {}
    for rid, spec in runs.items():
        without = {**spec, "method": {k: v for k, v in spec["method"].items() if k not in observers(spec)}}
        groups.setdefault(spec_digest(without), []).append(rid)
    train_id: dict[str, str] = {}
    for members in groups.values():
        asked = {json.dumps(observers(runs[r]), sort_keys=True) for r in members} - {"{}"}
        if len(asked) > 1:  # different observations of one training: a job per setting
            by_digest: dict[str, str] = {}
            for r in members:
                train_id[r] = by_digest.setdefault(spec_digest(runs[r]), r)
            continue
        lead = next((r for r in members if observers(runs[r])), members[0])
        for r in members:
            train_id[r] = lead
    return train_id


def expand_seeds(config: dict) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """A run with ``seeds: [s0, s1, ...]`` is one run per seed: ``<id>`` trains with s0 and ``<id>-seed<s>``
    with each other seed; tables report their mean and standard deviation. ``scale_map.seeds`` keeps the first
    N seeds (smaller scales)."""
    cap = config["scale_map"].get("seeds")
    raw_runs: dict[str, dict] = {}
    seed_runs: dict[str, list[str]] = {}
    for rid, raw in config["runs"].items():
        if "seeds" not in raw:
            raw_runs[rid] = raw
            continue
        seeds = list(raw["seeds"])[: cap or None]
        if "seed" in raw:
            raise ConfigError(f"runs.{rid}: give either `seed` or `seeds`, not both")
        if not seeds or len(set(seeds)) != len(seeds):
            raise ConfigError(f"runs.{rid}.seeds: a non-empty list of distinct seeds, got {raw['seeds']}")
        ids = [rid] + [f"{rid}-seed{s}" for s in seeds[1:]]
        for run_id, seed in zip(ids, seeds):
            if run_id in raw_runs or (run_id != rid and run_id in config["runs"]):
                raise ConfigError(f"runs.{rid}.seeds: the run id {run_id!r} of seed {seed} is taken")
            raw_runs[run_id] = {**{k: v for k, v in raw.items() if k != "seeds"}, "seed": seed}
        seed_runs[rid] = ids
    return raw_runs, seed_runs


def _attack_ref(config: dict, name: Any, key: str) -> dict:
    """A training or evaluation attack named by a run."""
    pool = {**config["attacks"], **config.get("train_attacks", {})}
    if isinstance(name, dict):
        return name
    if name not in pool:
        raise ConfigError(f"{key}: " + unknown("attack", name, sorted(pool)))
    if pool[name]["type"] == CORRUPTIONS_TYPE:
        raise ConfigError(f"{key}: {name!r} measures accuracy on corrupted images, it is not an attack; allowed: "
                          f"{sorted(n for n, a in pool.items() if a['type'] != CORRUPTIONS_TYPE)}")
    return pool[name]


def _check_corruptions(spec: AttackSpec, run: RunSpec | ExternalSpec, config: dict, key: str) -> None:
    """An evaluation on corrupted images for a run: its dataset, mapped by ``corruption_map`` (smaller scales),
    must hold corrupted test images of the run's own dataset. (resolve() checks every such evaluation; resolving
    one again needs no dataset registry, so the Snakefile does not import PyTorch.)"""
    named, dataset = spec.dataset, corruption_set(spec, config)
    clean = DATASET_DECLARATIONS[dataset].clean_dataset
    if clean != run.dataset:
        hint = (f"map it to a corruption dataset of {run.dataset!r} with corruption_map: {{{named}: ...}}"
                if dataset == named else f"corruption_map.{named} maps it to {dataset!r}")
        known = ", ".join(f"{name} of {DATASET_DECLARATIONS[name].clean_dataset}"
                          for name in corruption_dataset_names())
        raise ConfigError(f"{key}.dataset: {dataset!r} holds corrupted {clean!r} test images, but a run evaluated "
                          f"on it is on {run.dataset!r}; {hint} (corruption datasets: {known})")


def _resolve_selection_split(selection: dict, dataset: str, config: dict, key: str) -> None:
    """A run's selection split, in place: under ``split: validation`` the images held out of its (scaled) dataset's
    training split (``validation.<dataset>``), under ``split: test`` none."""
    if selection["split"] == "test":
        selection["validation"] = 0
        return
    sizes = config.get("validation") or {}
    if dataset not in sizes:
        raise ConfigError(f"validation.{dataset}: no validation split for dataset {dataset!r}, on which {key} trains "
                          f"and selects its epoch ({key}.selection.split: validation); add validation.{dataset}: N "
                          "(images held out of its training split) or set the run's selection.split: test")
    held = int(sizes[dataset])
    if held == 0 and selection["mode"] != "last":
        raise ConfigError(f"validation.{dataset}: 0 images, but {key}.selection.mode {selection['mode']} chooses its "
                          f"epoch on the validation split; hold out at least 1 image (validation.{dataset}) or set "
                          "the run's selection.split: test")
    selection["validation"] = held


def _check_validation_sizes(config: dict, datasets: list[str]) -> None:
    """``validation``: a known dataset each, holding out fewer images than its training split has."""
    for name, held in (config.get("validation") or {}).items():
        _check_choice(name, datasets, f"validation.{name}")
        train = SPLIT_SIZES.get(name, (None,))[0]
        if train is not None and int(held) >= train:
            raise ConfigError(f"validation.{name}: {held} images would leave none of {name}'s {train} training "
                              f"images to train on; hold out at most {train - 1} (the common choice: 1000 of "
                              "CIFAR-10's 50000, Rice et al. 2020)")


RUN_DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "lr_update": "epoch",
    "augment": {"crop_padding": 0, "flip": False},
    "selection": {"mode": "last", "min_clean": 0.0, "examples": 1000, "attack": "pgd20", "split": "validation"},
    "bn_running_stats": True,
    "nonfinite": "stop",
    "eps_warmup": None,
}


REQUIRED_RUN_KEYS = ("dataset", "arch", "epochs", "batch_size", "optimizer", "lr", "method")


def resolve_run(rid: str, raw: dict, config: dict, methods: dict, datasets: list[str], archs: list[str]) -> dict:
    key = f"runs.{rid}"
    spec = copy.deepcopy(RUN_DEFAULTS)
    preset_name = raw.get("preset")
    if preset_name is not None:
        presets = config.get("train_presets", {})
        if preset_name not in presets:
            raise ConfigError(f"{key}.preset: unknown preset {preset_name!r}; allowed: {sorted(presets)}")
        spec = merge(spec, presets[preset_name])
    spec = merge(spec, {k: v for k, v in raw.items() if k != "preset"})
    missing = [k for k in REQUIRED_RUN_KEYS if k not in spec]
    if missing:
        raise ConfigError(f"{key}: missing key(s) {missing} (set them on the run or in its preset)")
    _check_choice(spec["dataset"], datasets, f"{key}.dataset")
    _check_choice(spec["arch"], archs, f"{key}.arch")
    _check_schedule(spec["lr"], f"{key}.lr")
    if spec["lr"]["epochs"][0] != 0:
        raise ConfigError(f"{key}.lr.epochs: the first breakpoint must be epoch 0, got {spec['lr']['epochs'][0]}")

    method = spec["method"]
    name = method["name"]
    if name not in methods:
        raise ConfigError(f"{key}.method.name: unknown method {name!r}; allowed: {sorted(methods)}")
    cls = methods[name]
    declared = cls.parameters  # one declaration per parameter (tradeoff.core.params): kinds, ranges, choices, defaults
    given = {k: v for k, v in method.items() if k != "name"}
    declared.check(given, f"{key}.method", what=f"parameter of method {name!r}")
    method = {"name": name, **declared.defaults(), **given}

    scale_run(spec, method, raw, config, declared)
    _resolve_selection_split(spec["selection"], spec["dataset"], config, key)

    for pname in declared.named(type=ATTACK):
        method[pname] = resolve_attack(_attack_ref(config, method[pname], f"{key}.method.{pname}"),
                                       spec, config, f"{key}.method.{pname}", training=True)
    for path in declared.nested(ATTACK):  # "param.key": an attack named inside a mapping
        pname, inner = path.split(".")
        block = method.get(pname)
        if isinstance(block, dict) and inner in block:
            method[pname] = {**block, inner: resolve_attack(_attack_ref(config, block[inner], f"{key}.method.{path}"),
                                                            spec, config, f"{key}.method.{path}")}
    spec["method"] = method
    try:
        cls.check_params(spec)
    except ValueError as exc:
        raise ConfigError(f"{key}.method: {exc}") from None
    spec["method"] = cls.canonical(method)
    return spec
