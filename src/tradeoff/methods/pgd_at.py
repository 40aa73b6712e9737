"""PGD adversarial training with the Generalist paper's Eq. 1 weighting:

    loss = (1 - beta) * CE(f(x), y) + beta * CE(f(x'), y),   x' = PGD(x)

beta = 1 is Madry et al.; beta = 1/2 is Goodfellow et al.'s half-half loss; beta = 0 is natural training.
The attack runs on the learner itself, with its weights frozen (input gradients only), in train mode by
default (BatchNorm sees the adversarial batch, as in Madry's and Rice et al.'s code); ``attack_mode: eval``
runs it in eval mode as TRADES does.
"""

from __future__ import annotations

from tradeoff.attacks.declared.base import attack_passes
from tradeoff.core.params import NUMBER, Param, Params
from tradeoff.core.passes import TRAIN1, TRAIN2
from tradeoff.core.ranges import PROBABILITY
from tradeoff.methods.base import cross_entropy, register
from tradeoff.methods.common import ATTACK_MODE, TRAINING_ATTACK, Adversarial


@register
class PGDAT(Adversarial):
    name = "pgd_at"
    parameters = Params(Param("beta", NUMBER, 1.0, range=PROBABILITY, meaning="the adversarial loss's weight"),
                        TRAINING_ATTACK, ATTACK_MODE)

    @classmethod
    def passes(cls, p, classes):
        """The attack, then the adversarial pass (and the clean one unless beta = 1)."""
        return attack_passes(p.attack, classes) + (TRAIN1 if float(p.beta) == 1.0 else TRAIN2)

    def loss(self, x, y):
        beta = float(self.p.beta)
        x_adv = self.adversarial(x, y)
        adv_loss, adv_logits = cross_entropy(self.model, x_adv, y, self.runtime)
        if beta == 1.0:
            return adv_loss, adv_logits
        clean_loss, _ = cross_entropy(self.model, x, y, self.runtime)
        return (1 - beta) * clean_loss + beta * adv_loss, adv_logits
