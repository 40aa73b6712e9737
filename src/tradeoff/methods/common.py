"""What the single-learner adversarial methods share: a training attack from the catalog and the mode the
model is in while it runs (see :mod:`tradeoff.methods.pgd_at`)."""

from __future__ import annotations

import torch

from tradeoff.attacks import from_spec
from tradeoff.attacks.declared.pgd import PGD
from tradeoff.core.spec import AttackSpec
from tradeoff.methods.base import SingleLearner
from tradeoff.methods.declared.base import Adversarial
from tradeoff.methods.pgd_at import adversarial_examples


def attack_budget(spec: AttackSpec, scale: float = 1.0) -> tuple[float, str, int, float]:
    """(eps, norm, steps, step size) of a resolved training-attack spec (a plain `pgd`: check_pgd_budget), for the
    methods' own maximisers; the step size defaults to PGD's (``PGD.step_for``: eps / 4). ``scale`` (the method's
    budget_scale, < 1 during an eps warm-up) multiplies eps and the step size."""
    eps, step, steps = float(spec.eps) * scale, spec.step_size, int(PGD.settings(spec).steps)
    return eps, str(spec.norm), steps, PGD.step_for(eps, steps) if step is None else float(step) * scale


class AdversarialLearner(Adversarial, SingleLearner):
    """A SingleLearner with ``self.attack`` built from its ``attack`` parameter, run in ``attack_mode``."""

    def __init__(self, spec, build_model, runtime):
        super().__init__(spec, build_model, runtime)
        self.attack = from_spec(self.p.attack, self.model)

    def adversarial(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return adversarial_examples(self, x, y)
