"""What the single-learner adversarial methods share: a training attack from the catalog and the mode the
model is in while it runs (see :mod:`tradeoff.methods.pgd_at`)."""

from __future__ import annotations

import torch

from tradeoff.attacks.pgd import PGD
from tradeoff import attacks
from tradeoff.core.params import Params
from tradeoff.core.spec import AttackSpec
from tradeoff.methods.base import ATTACK_MODE, TRAINING_ATTACK, SingleLearner
from tradeoff.methods.pgd_at import adversarial_examples


def attack_budget(spec: AttackSpec, scale: float = 1.0) -> tuple[float, str, int, float]:
    """(eps, norm, steps, step size) of a resolved training-attack spec (a plain `pgd`: check_pgd_budget), for the
    methods' own maximisers; the step size defaults to PGD's (``PGD.step_for``: eps / 4). ``scale`` (the method's
    budget_scale, < 1 during an eps warm-up) multiplies eps and the step size."""
    eps, step, steps = float(spec.eps) * scale, spec.step_size, int(PGD.settings(spec).steps)
    return eps, str(spec.norm), steps, PGD.step_for(eps, steps) if step is None else float(step) * scale


def check_pgd_budget(method_name: str, spec: AttackSpec | dict) -> None:
    """A method's own maximiser (TRADES' KL ascent, FAT's early-stopped PGD) reads only the budget, steps and
    step size of a plain `pgd` training attack; refuse a spec whose other settings it would silently ignore. (The
    resolver checks the spec in its JSON form, a built method its AttackSpec.)"""
    spec = AttackSpec.from_dict(spec)
    plain = spec.type == PGD.name and PGD.settings(spec).loss == "ce" and not PGD.settings(spec).momentum
    if not plain:
        raise ValueError(f"{method_name}: its own inner maximiser takes eps, norm, steps and step_size from a "
                         f"plain `pgd` training attack (CE loss, no momentum), got {spec.as_dict()}")


class AdversarialLearner(SingleLearner):
    """A SingleLearner with ``self.attack`` built from its ``attack`` parameter, run in ``attack_mode``."""

    parameters = Params(TRAINING_ATTACK, ATTACK_MODE)

    def __init__(self, spec, build_model, runtime):
        super().__init__(spec, build_model, runtime)
        self.attack = attacks.from_spec(self.p.attack, self.model)

    def adversarial(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return adversarial_examples(self, x, y)
