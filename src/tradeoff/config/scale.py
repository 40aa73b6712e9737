"""The scale mapping, in one place: how a run and an attack of the paper-scale catalog look at a smaller scale
(``scale_map`` of an overlay: config/demo.yaml, config/smoke.yaml). Datasets and architectures are replaced, budgets
keep their ratio to the dataset's standard budget (all by one rule, so that a label such as 8/255 means one
budget in a table), epoch-valued settings are
rescaled with the run's length, the learning-rate schedule may be the scale's own, and attacks may be capped."""

from __future__ import annotations

from typing import Any

from tradeoff.config.budgets import _RELATIVE, MAX_EPS, parse_budget, parse_step, rel_step
from tradeoff.config.checks import _check_eps
from tradeoff.config.load import AUTOATTACK_FAMILY, CORRUPTIONS_TYPE
from tradeoff.core.errors import ConfigError
from tradeoff.core.params import Params
from tradeoff.core.spec import AttackSpec
from tradeoff.models.declared import PRETRAINED
from tradeoff.storage.layout import Layout


def scaled_arch(mapping: str | dict | None, arch: str) -> str:
    """A run's architecture at a scale: ``scale_map.arch`` is null (keep it), one architecture for every run, or a
    mapping {paper architecture: architecture, default: architecture} (an unlisted one takes ``default``, else
    is kept)."""
    if not mapping:
        return arch
    if isinstance(mapping, str):
        return mapping
    return mapping.get(arch, mapping.get("default", arch))


def _pretrained_file(config: dict, arch: str) -> str | None:
    """``pretrained.<arch>`` with ``{results}`` replaced by this scale's results folder (a checkpoint that a run of
    the pipeline writes, as at the demo scale), or None when it is not set."""
    value = (config.get("pretrained") or {}).get(arch)
    if value is None or str(value) == "":
        return None
    return str(value).replace("{results}", str(Layout.of(config["paths"]["results"], config["scale"]).root))


def _standard_budget(config: dict, dataset: str, norm: str, key: str) -> float:
    budgets = config["datasets"].get(dataset)
    if budgets is None or norm not in budgets:
        raise ConfigError(f"{key}: no standard {norm} budget for dataset {dataset!r}; add datasets.{dataset}.{norm}")
    return parse_budget(budgets[norm], f"datasets.{dataset}.{norm}")


def corruption_set(spec: AttackSpec | dict, config: dict) -> str:
    """The corruption dataset that an entry of type `corruptions` reads at this scale (``corruption_map``)."""
    named = AttackSpec.from_dict(spec).dataset
    return (config.get("corruption_map") or {}).get(named, named)


def _datasets(model: Any) -> tuple[str, str]:
    """A model's (dataset, paper dataset): of its resolved settings (tradeoff.core.spec), or of a run's being resolved (a
    dict)."""
    if isinstance(model, dict):
        return model["dataset"], model["paper_dataset"]
    return model.dataset, model.paper_dataset


def resolve_attack(spec: dict, run: Any, config: dict, key: str, *, training: bool = False) -> dict:
    """Fill in a run's (or an external model's) budget: eps defaults to the dataset's standard budget for the norm; at a smaller scale
    every budget (and absolute step size) keeps its ratio to the standard budget of the run's own dataset.
    ``training``: the attack is a method's inner maximiser (``scale_map.train_attack_steps`` applies)."""
    if spec["type"] == CORRUPTIONS_TYPE:
        return {"type": CORRUPTIONS_TYPE, "dataset": corruption_set(spec, config)}
    out = {k: v for k, v in spec.items() if k not in ("eps", "step_size", "shards")}
    norm = out.setdefault("norm", "linf")
    if spec["type"] == "clean":
        out["eps"] = 0.0
        return out
    dataset, paper_dataset = _datasets(run)
    paper_std = _standard_budget(config, paper_dataset, norm, key)
    raw = spec.get("eps")
    # one rule for every budget of a run, trained or attacked, swept or not: its ratio to the standard budget
    factor = _standard_budget(config, dataset, norm, key) / paper_std
    eps_list = raw if isinstance(raw, list) else [raw]
    resolved = [paper_std if e is None else parse_budget(e, f"{key}.eps") for e in eps_list]
    eps_scaled = [e * factor for e in resolved]
    # scale_map.eps_cap: a smaller scale whose dataset has a larger standard budget can scale a large budget past
    # the image range (CA-AT's 32/255 is 4 standard budgets: 1.2 on digits); the cap keeps it at the range's end (the
    # column then says the budget that ran)
    eps_cap = (config["scale_map"].get("eps_cap") or {}).get(norm)
    if eps_cap is not None:
        eps_scaled = [min(e, float(eps_cap)) for e in eps_scaled]
    for e, paper in zip(eps_scaled, resolved):
        if factor != 1 and e > MAX_EPS[norm]:
            raise ConfigError(f"{key}.eps: {paper:g} scales to {e:g} on {dataset} ({factor:g} x), absurd for the "
                              f"{norm} norm on [0, 1] images (allowed: 0 <= eps <= {MAX_EPS[norm]:g}); cap it at "
                              f"this scale with scale_map.eps_cap: {{{norm}: {MAX_EPS[norm]:g}}}")
        _check_eps(e, norm, f"{key}.eps")
    out["eps"] = eps_scaled if isinstance(raw, list) else eps_scaled[0]
    if "step_size" in spec:
        step = spec["step_size"]
        if isinstance(step, str) and _RELATIVE.match(step):
            out["step_size"] = step  # relative: resolved per eps by rel_step below
        else:
            out["step_size"] = parse_budget(step, f"{key}.step_size") * factor
    smap = config["scale_map"]
    cap = smap.get("max_attack_steps")
    if cap and "queries" in out:  # Square's queries are its steps
        out["queries"] = min(int(out["queries"]), int(cap))
    _cut_steps(out, cap)
    # scale_map.autoattack_caps: AutoAttack's attacks (APGD, FAB, Square, the ensemble) with fewer iterations or
    # queries at a small scale, where their standard 100 iterations and 5000 queries dominate the demo's time
    if spec["type"] in AUTOATTACK_FAMILY:
        for count, limit in (smap.get("autoattack_caps") or {}).items():
            if count in out and limit is not None:
                out[count] = min(int(out[count]), int(limit))
    if not isinstance(out["eps"], list) and "step_size" in out:
        out["step_size"] = rel_step(out["step_size"], out["eps"], key)
    # scale_map.train_attack_steps: a method's inner maximiser runs at most N steps; a fixed-step attack cut from K
    # to N steps takes steps K/N times longer, so its path still spans the same distance (PGD-10 of eps/4 becomes
    # PGD-5 of eps/2); APGD sets its own step sizes
    if training:
        _cut_steps(out, smap.get("train_attack_steps"))
    return out


def _cut_steps(out: dict, cap: int | None) -> None:
    """At most ``cap`` steps (scale_map.max_attack_steps, train_attack_steps): a fixed-step attack cut from K to N
    steps takes steps K/N times longer, so that its path still spans the same distance (PGD-10 of eps/4 becomes PGD-5
    of eps/2) and a strong attack still reaches its whole budget; APGD and FAB set their own step sizes."""
    if not cap or "steps" not in out or int(out["steps"]) <= int(cap):
        return
    step = out.get("step_size")
    if isinstance(step, (int, float)):
        out["step_size"] = step * int(out["steps"]) / int(cap)
    elif isinstance(step, str):  # relative to a sweep's budgets: the same factor on the ratio
        out["step_size"] = f"eps*{parse_step(step, 1.0, 'step_size') * int(out['steps']) / int(cap)!r}"
    out["steps"] = int(cap)


def _scale_lr(value: Any, factor: float) -> Any:
    """Learning-rate parameters of a method: a number or a schedule dict whose `values` are scaled."""
    if isinstance(value, dict) and "values" in value:
        return {**value, "values": [v * factor for v in value["values"]]}
    return value * factor if isinstance(value, (int, float)) and value is not None else value


def _scaled_epoch(epoch: float, factor: float) -> float:
    """An epoch-valued setting at another run length. Rounded to 1e-3 epoch (far below one step: the demo's is 0.04
    epoch), so that the same breakpoint written two ways (CIFAR-100's 83.333 of 200 epochs, CIFAR-10's 50 of 120)
    is one number at a smaller scale and runs that differ only by such rounding share one training job (at 1e-4,
    4.1666 and 4.1667 at 10 epochs did not)."""
    return round(epoch * factor, 3)


def _rescale_epochs(value: Any, factor: float) -> Any:
    """Epoch-valued parameters: a number, or a schedule dict whose `epochs` are rescaled."""
    if isinstance(value, dict) and "epochs" in value:
        return {**value, "epochs": [_scaled_epoch(e, factor) for e in value["epochs"]]}
    if isinstance(value, list):
        return [_rescale_epochs(v, factor) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _scaled_epoch(value, factor)
    return value


def scale_run(spec: dict, method: dict, raw: dict, config: dict, declared: Params) -> None:
    """A run's settings at this scale, in place: ``spec`` (preset and run merged), ``method`` (its method's
    parameters, ``declared`` by its class), ``raw`` (the run as written). The paper's dataset and architecture are kept as
    ``paper_dataset`` and ``paper_arch``; every epoch-valued setting follows the scale's run length."""
    preset_name = raw.get("preset")
    smap = config["scale_map"]
    spec["paper_dataset"] = spec["dataset"]
    spec["paper_arch"] = spec["arch"]
    if smap.get("dataset"):
        spec["dataset"] = smap["dataset"]
    spec["arch"] = scaled_arch(smap.get("arch"), spec["arch"])
    if spec["arch"] in PRETRAINED:
        # the backbone file is part of what the run computes (a new file retrains it); None = not configured, which
        # only the jobs that train the run refuse (Catalog.pretrained_checkpoint), not the whole catalog
        spec["pretrained"] = _pretrained_file(config, spec["arch"])
    if smap.get("batch_size"):
        spec["batch_size"] = smap["batch_size"]
    if smap.get("epochs"):
        factor = smap["epochs"] / spec["epochs"]
        spec["epochs"] = smap["epochs"]
        spec["lr"]["epochs"] = [_scaled_epoch(e, factor) for e in spec["lr"]["epochs"]]
        if spec["selection"].get("every") is not None:  # best_robust's measurement period (tradeoff.training.train)
            spec["selection"]["every"] = _scaled_epoch(spec["selection"]["every"], factor)
        for pname in declared.named(epochs=True):
            if pname in method:  # an optional parameter the run does not set is absent
                method[pname] = _rescale_epochs(method[pname], factor)
    scale_lr = (smap.get("preset_lr") or {}).get(preset_name or "") or smap.get("lr")
    if scale_lr:
        # the scale's schedule (scale_map.preset_lr.<preset>, else scale_map.lr) replaces the preset's; a run that
        # sets its own learning rate (Table 5's variants, Figure 4b's Adam) keeps its peak's ratio to its preset's
        ratio = 1.0
        preset_lr = config.get("train_presets", {}).get(preset_name or "", {}).get("lr")
        if "lr" in raw and preset_lr and max(preset_lr["values"]) > 0:
            ratio = max(raw["lr"]["values"]) / max(preset_lr["values"])
        spec["lr"] = {"epochs": list(scale_lr["epochs"]), "values": [v * ratio for v in scale_lr["values"]]}
    lr_factor = float(smap.get("lr_factor", 1.0))
    spec["lr"]["values"] = [v * lr_factor for v in spec["lr"]["values"]]
    for pname in declared.named(lr=True):
        method[pname] = _scale_lr(method[pname], lr_factor)
    if smap.get("weight_decay") is not None:
        spec["optimizer"]["weight_decay"] = smap["weight_decay"]
    spec["train_examples"] = smap.get("train_examples")
    if smap.get("steps_per_epoch"):
        # a cap on steps, not on examples: a run keeps its own batch (CA-AT's 1024, the others' 128), so every
        # run trains the same number of steps of its paper shape
        cap = int(smap["steps_per_epoch"]) * int(spec["batch_size"])
        spec["train_examples"] = min(cap, spec["train_examples"] or cap)
    if smap.get("eps_warmup"):
        spec["eps_warmup"] = float(smap["eps_warmup"])
    spec["test_examples"] = smap.get("test_examples")
    if smap.get("dataset"):
        # spatial augmentation sized for 32x32 natural images is wrong for 8x8 digits: no crop, no flip
        spec["augment"] = {"crop_padding": 0, "flip": False}
