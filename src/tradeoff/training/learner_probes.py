"""Measuring a method's learners during training (Zipper Figure 5): the per-epoch columns of a method's
``tracking()``, each learner's clean accuracy and its accuracy under attacks made against itself and against the
other learners (transfer).

Everything here is evaluation, through the attack loop (:mod:`tradeoff.attacks.loop`): fp32, eval mode, weight
gradients off, every model back in the mode it was in, batch b seeded with ``batch_seed(seed, b)`` as an evaluation
seeds it, so a measurement repeats exactly (and a resumed run measures what an uninterrupted one does). The global RNG
streams (CPU and CUDA) are saved and restored around a measurement, so training draws the same numbers with or without
it.
"""

from __future__ import annotations

import torch
from torch import nn

from tradeoff.attacks.loop import accuracy_under, transfer_accuracy
from tradeoff.core.spec import CLEAN, AttackSpec


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
