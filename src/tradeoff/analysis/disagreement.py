"""The ``disagreement_grid`` analysis: test images on which some models are right and others wrong.

Generalist Figure 5(b): images that TRADES and FAT get wrong and Generalist gets right; Zipper Figure 7:
failure cases, images that Zipper gets wrong and TRADES or FAT get right. Both natural and adversarial.

Parameters (``analysis:`` of a ``grid`` figure, checked when the config is resolved: tradeoff.core.targets; row keys name
the target's rows):

- ``right``: a row key, or a list of them, whose models must classify the image correctly (all of them, or
  at least one with ``any_right: true``);
- ``wrong``: a row key, or a list, whose models must get it wrong (all of them, or at least one with
  ``any_wrong: true``);
- ``attack``: an attack of the catalog's ``attacks`` for the adversarial panel. White box: every model is
  attacked on its own (its own adversarial example, resolved with ``catalog.attack_for(attack, run)``, built
  and seeded as evaluation does it: batches of ``runtime.eval_batch_size``, batch b seeded with
  ``batch_seed(seed, b)``; examples the model misclassifies clean are not attacked and count as wrong);
- ``count``: images shown per panel (default 8); ``seed``: the attacks' seed and the draw of the shown images
  among those that satisfy the condition (default 0);
- ``show``: the row key whose adversarial example is stored and drawn (default: the first ``right`` key).

The JSON has, per panel (``natural``, ``adversarial``): how many test images satisfy the condition
(``matches``) and at most ``count`` of them (``shown``, by ascending test index), each with its test index (the
position in the run's test set, as in the predictions files), label, class name, every model's prediction,
the image (nested lists, H x W for one channel, else H x W x C, values in [0, 1] to 4 decimals) and, in the
adversarial panel, ``adversarial_image``: the adversarial example against the ``show`` model.
Deterministic: fixed seeds, fp32, eval mode.
"""

from __future__ import annotations

from typing import Any, Callable

from tradeoff.analysis.base import register
from tradeoff.attacks import from_spec
from tradeoff.core.errors import ConfigError
from tradeoff.core.targets import row_keys
from tradeoff.evaluation.load import load_model, source_for

PANELS = ("natural", "adversarial")


def condition(params: dict) -> dict:
    """The normalised condition: lists of right and wrong keys and whether any (not all) suffices."""
    right, wrong = row_keys(params.get("right")), row_keys(params.get("wrong"))
    return {"right": right, "wrong": wrong, "any_right": bool(params.get("any_right", False)),
            "any_wrong": bool(params.get("any_wrong", False)),
            "show": params.get("show") or (right[0] if right else None)}


def satisfied(correct: dict, cond: dict):
    """Per example: does the condition hold, given each model's per-example correctness (bool tensors)?"""
    import torch

    reduce = lambda flags, any_: (torch.stack(flags).any(0) if any_ else torch.stack(flags).all(0))  # noqa: E731
    right = reduce([correct[k] for k in cond["right"]], cond["any_right"])
    wrong = reduce([~correct[k] for k in cond["wrong"]], cond["any_wrong"])
    return right & wrong


def pick(mask, count: int, seed: int) -> list[int]:
    """At most ``count`` indices where ``mask`` holds, drawn with ``seed``, in ascending order."""
    import torch

    idx = torch.nonzero(mask, as_tuple=False).flatten()
    order = torch.randperm(len(idx), generator=torch.Generator().manual_seed(int(seed)))
    return sorted(int(i) for i in idx[order[:count]])


def image_list(img) -> list:
    """A CHW image as nested lists: H x W for one channel, H x W x C otherwise, 4 decimals."""
    img = img.detach().float().cpu()
    arr = img[0] if img.shape[0] == 1 else img.permute(1, 2, 0)
    return [[round(v, 4) if isinstance(v, float) else [round(c, 4) for c in v] for v in row]
            for row in arr.tolist()]


def predict(model, x, batch_size: int):
    import torch

    with torch.no_grad():
        return torch.cat([model(x[i:i + batch_size]).argmax(1) for i in range(0, len(x), batch_size)]) \
            if len(x) else torch.zeros(0, dtype=torch.long, device=x.device)


def adversarial(model, x, y, make_attack: Callable, *, seed: int, batch_size: int):
    """Each example's adversarial example against ``model`` and the model's prediction on it, batch b's attack
    seeded with batch_seed(seed, b) as in evaluation. Examples misclassified clean are not attacked (x_adv = x)
    when the attack skips them."""
    import torch

    from tradeoff.attacks.loop import batch_seed

    x_adv = x.clone()
    for b, start in enumerate(range(0, len(x), batch_size)):
        xb, yb = x[start:start + batch_size], y[start:start + batch_size]
        with torch.no_grad():
            clean = model(xb).argmax(1) == yb
        attack = make_attack(model, batch_seed(seed, b))
        todo = clean if attack.skips_misclassified else torch.ones_like(clean)
        if todo.any():
            adv = x_adv[start:start + batch_size]
            adv[todo] = attack.perturb(xb[todo], yb[todo])
    return x_adv, predict(model, x_adv, batch_size)


def grid(models: dict, x, y, classes, params: dict, make_attack: Callable | None, *,
         batch_size: int = 500) -> dict:
    """The grid for models (row key -> nn.Module in eval mode) on test data (x, y): both panels, or only the
    natural one when ``make_attack`` is None. ``make_attack(key, model, seed)`` builds that model's attack."""
    import torch

    cond = condition(params)
    count, seed = int(params.get("count", 8)), int(params.get("seed", 0))
    panels: dict[str, Any] = {}
    with torch.autocast(device_type=x.device.type, enabled=False):
        preds = {k: predict(m, x, batch_size) for k, m in models.items()}
        panels["natural"] = _panel(preds, x, y, classes, cond, count, seed)
        if make_attack is not None:
            shown_adv, adv_preds = None, {}
            for k, m in models.items():
                adv, adv_preds[k] = adversarial(m, x, y, lambda model, s, k=k: make_attack(k, model, s),
                                                seed=seed, batch_size=batch_size)
                shown_adv = adv if k == cond["show"] else shown_adv
            panels["adversarial"] = _panel(adv_preds, x, y, classes, cond, count, seed, adversarial=shown_adv)
    return {"condition": cond, "examples": len(y), "panels": panels}


def _panel(preds: dict, x, y, classes, cond: dict, count: int, seed: int, adversarial=None) -> dict:
    correct = {k: p == y for k, p in preds.items()}
    mask = satisfied(correct, cond)
    shown = []
    for i in pick(mask.cpu(), count, seed):
        label = int(y[i])
        item = {"index": i, "label": label, "class": str(classes[label]),
                "predictions": {k: int(p[i]) for k, p in preds.items()}, "image": image_list(x[i])}
        if adversarial is not None:
            item["adversarial_image"] = image_list(adversarial[i])
        shown.append(item)
    return {"matches": int(mask.sum()), "shown": shown}


@register("disagreement_grid")
def disagreement_grid(catalog, target: str, params: dict) -> dict:
    """The analysis job: load the rows' checkpoints and the test set, compute both panels."""
    from tradeoff.core.runtime import Runtime
    from tradeoff.data import load_run_data

    rows = catalog.targets[target].rows
    runtime = Runtime.from_config(catalog.runtime_settings, catalog.scale)
    device = runtime.device
    specs = {r.key: catalog.runs[r.run] for r in rows}
    tests = {(s.dataset, s.test_examples) for s in specs.values()}
    if len(tests) != 1:
        raise ConfigError(f"targets.{target}.rows: a disagreement grid compares models on one test set; "
                          f"the rows' runs use {sorted(tests, key=str)}")
    ds = load_run_data(next(iter(specs.values())), catalog.data_root)
    x, y = ds.x_test.to(device), ds.y_test.to(device)
    models = {}
    for r in rows:
        model, _ = load_model(source_for(*catalog.model_location(r.run)), device)
        models[r.key] = model.float().eval()
    attack_specs = {r.key: catalog.attack_for(params["attack"], r.run) for r in rows}

    def make_attack(key, model, seed):
        return from_spec(attack_specs[key], model, seed=seed)

    out = grid(models, x, y, ds.classes, params, make_attack,
               batch_size=catalog.runtime_settings.eval_batch_size)
    show = out["condition"]["show"]
    return {"dataset": ds.name, "classes": list(ds.classes), "image_shape": list(ds.x_test.shape[1:]),
            "models": [{"key": r.key, "label": r.key if r.label is None else r.label, "run": r.run} for r in rows],
            "attack": params["attack"], "attack_spec": attack_specs[show].as_dict(), **out}
