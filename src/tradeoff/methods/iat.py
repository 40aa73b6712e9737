"""Interpolated Adversarial Training (IAT, Lamb et al., 2019): mixup on the clean batch and, separately, on
its adversarial batch (the training attack on the unmixed inputs),

    loss = 1/2 (mixupCE(x) + mixupCE(x')),   mixupCE(x) = l CE(f(l x + (1-l) x[p]), y) + (1-l) CE(..., y[p]),

each mixup with its own weight l ~ Beta(alpha, alpha) (alpha = 1: uniform) and permutation p, both drawn from
the global RNG (checkpointed by the trainer, so a resumed run draws the same ones).
"""

from __future__ import annotations

from tradeoff.attacks.declared.base import attack_passes
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import NUMBER, Param
from tradeoff.core.passes import TRAIN2
from tradeoff.core.ranges import positive
from tradeoff.methods.base import register
from tradeoff.methods.common import Adversarial

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")


def mixup(x: torch.Tensor, y: torch.Tensor, alpha: float):
    """(l x + (1 - l) x[p], y, y[p], l) with l ~ Beta(alpha, alpha) and a random permutation p."""
    lam = float(torch.distributions.Beta(float(alpha), float(alpha)).sample())
    index = torch.randperm(len(x), device=x.device)
    return lam * x + (1 - lam) * x[index], y, y[index], lam


@register
class IAT(Adversarial):
    name = "iat"
    parameters = Adversarial.parameters.extend(
        Param("alpha", NUMBER, 1.0, range=positive(), meaning="mixup's Beta(alpha, alpha)"))

    @classmethod
    def passes(cls, p, classes):
        """The attack, then the mixed clean and the mixed adversarial pass."""
        return attack_passes(p.attack, classes) + TRAIN2

    def mixup_loss(self, x, y):
        x_mix, y_a, y_b, lam = mixup(x, y, self.p.alpha)
        with self.runtime.autocast():
            logits = self.model(x_mix).float()
        return lam * F.cross_entropy(logits, y_a) + (1 - lam) * F.cross_entropy(logits, y_b), logits

    def loss(self, x, y):
        """The loss, and the logits of the mixed adversarial batch (accuracy against each mix's first label)."""
        x_adv = self.adversarial(x, y)
        clean_loss, _ = self.mixup_loss(x, y)
        adv_loss, logits = self.mixup_loss(x_adv, y)
        return 0.5 * (clean_loss + adv_loss), logits
