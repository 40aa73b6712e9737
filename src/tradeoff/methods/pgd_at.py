"""PGD adversarial training with the Generalist paper's Eq. 1 weighting:

    loss = (1 - beta) * CE(f(x), y) + beta * CE(f(x'), y),   x' = PGD(x)

beta = 1 is Madry et al.; beta = 1/2 is Goodfellow et al.'s half-half loss; beta = 0 is natural training.
The attack runs on the learner itself, with its weights frozen (input gradients only), in train mode by
default (BatchNorm sees the adversarial batch, as in Madry's and Rice et al.'s code); ``attack_mode: eval``
runs it in eval mode as TRADES does.
"""

from __future__ import annotations

import torch

from tradeoff.attacks import from_spec
from tradeoff.methods.base import SingleLearner, cross_entropy, register
from tradeoff.methods.declared import pgd_at as declared


def adversarial_examples(method: SingleLearner, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model = method.model
    model.train(method.p.attack_mode == "train")
    with method.runtime.autocast():
        x_adv = method.attack.perturb(x, y)
    model.train()
    return x_adv


@register
class PGDAT(declared.PGDAT, SingleLearner):
    def __init__(self, spec, build_model, runtime):
        super().__init__(spec, build_model, runtime)
        self.attack = from_spec(self.p.attack, self.model)

    def loss(self, x, y):
        beta = float(self.p.beta)
        x_adv = adversarial_examples(self, x, y)
        adv_loss, adv_logits = cross_entropy(self.model, x_adv, y, self.runtime)
        if beta == 1.0:
            return adv_loss, adv_logits
        clean_loss, _ = cross_entropy(self.model, x, y, self.runtime)
        return (1 - beta) * clean_loss + beta * adv_loss, adv_logits
