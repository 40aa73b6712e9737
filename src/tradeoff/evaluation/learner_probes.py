"""Measuring a method's learners during training (Zipper Figure 5) and crafting adversarial examples from
one model to classify with another (transfer; also Zipper Figure 6's t-SNE, :mod:`tradeoff.analysis.learner_tsne`).

Everything here is evaluation: fp32 (autocast off), eval mode (BatchNorm statistics neither used from the
batch nor updated), weight gradients off, and every model goes back to the mode it was in. Attacks are built
from their resolved settings (:func:`tradeoff.attacks.from_spec`) and batch b is seeded with
``batch_seed(seed, b)`` exactly as :func:`tradeoff.evaluation.evaluate.run_attack` seeds it, so a measurement repeats
exactly (and a resumed run measures what an uninterrupted one does). The global RNG streams (CPU and CUDA) are
saved and restored around a measurement, so training draws the same numbers with or without it.
"""

from __future__ import annotations

import torch
from torch import nn

from tradeoff import attacks
from tradeoff.core.spec import CLEAN, AttackSpec
from tradeoff.evaluation.evaluate import accuracy_under, batch_seed


def adversarial(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec, *, seed: int,
                batch_size: int) -> torch.Tensor:
    """Adversarial examples of every (x, y) against ``model`` under a resolved attack spec (all examples, also
    those the model gets wrong), batch b of ``batch_size`` seeded with (seed, b)."""
    was_training = model.training
    model.eval()
    parts = []
    try:
        with torch.autocast(device_type=x.device.type, enabled=False):
            for b, start in enumerate(range(0, len(x), batch_size)):
                attack = attacks.from_spec(spec, model, seed=batch_seed(seed, b))
                parts.append(attack.perturb(x[start:start + batch_size], y[start:start + batch_size]))
    finally:
        model.train(was_training)
    return torch.cat(parts) if parts else x.detach().clone()


@torch.no_grad()
def correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Per example: does ``model`` (eval mode, fp32) classify x correctly?"""
    was_training = model.training
    model.eval()
    try:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return torch.cat([model(x[s:s + batch_size]).argmax(1) == y[s:s + batch_size]
                              for s in range(0, len(x), batch_size)])
    finally:
        model.train(was_training)


def transfer_accuracy(target: nn.Module, source: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec, *,
                      seed: int, batch_size: int) -> float:
    """Accuracy of ``target`` on adversarial examples made against ``source``; as for a white-box attack, an
    example counts as robust only if ``target`` also classifies it correctly clean."""
    x_adv = adversarial(source, x, y, spec, seed=seed, batch_size=batch_size)
    robust = correct(target, x, y, batch_size) & correct(target, x_adv, y, batch_size)
    return int(robust.sum()) / len(y) if len(y) else float("nan")


def measure(learners: dict[str, nn.Module], x: torch.Tensor, y: torch.Tensor, track: dict, *, seed: int = 0,
            batch_size: int = 500) -> dict[str, float]:
    """The per-epoch columns of a method's ``tracking()``: for every learner L ``learner_L_clean``; for every
    attacked learner T, with the attack's type K (pgd, cw, ...), ``learner_T_K_self`` (the attack made against T,
    the same number as ``accuracy_under(T, x, y, attack, seed=seed)``) and, for every other learner S,
    ``learner_T_K_from_S`` (the attack made against S, transferred to T)."""
    spec = AttackSpec.from_dict(track["attack"])  # a method's parameters hold it typed; its JSON form is read too
    kind = spec.type
    devices = [x.device] if x.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):  # whatever an attack draws, training's streams stay put
        out = {f"learner_{name}_clean": accuracy_under(model, x, y, CLEAN, seed=seed, batch_size=batch_size)
               for name, model in learners.items()}
        for target in track["attacked"]:
            out[f"learner_{target}_{kind}_self"] = accuracy_under(learners[target], x, y, spec, seed=seed,
                                                                  batch_size=batch_size)
            for source, model in learners.items():
                if source != target:
                    out[f"learner_{target}_{kind}_from_{source}"] = transfer_accuracy(
                        learners[target], model, x, y, spec, seed=seed, batch_size=batch_size)
    return out
