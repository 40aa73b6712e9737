"""Interpolated Adversarial Training (IAT, Lamb et al., 2019): mixup on the clean batch and, separately, on
its adversarial batch (the training attack on the unmixed inputs),

    loss = 1/2 (mixupCE(x) + mixupCE(x')),   mixupCE(x) = l CE(f(l x + (1-l) x[p]), y) + (1-l) CE(..., y[p]),

each mixup with its own weight l ~ Beta(alpha, alpha) (alpha = 1: uniform) and permutation p, both drawn from
the global RNG (checkpointed by the trainer, so a resumed run draws the same ones).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tradeoff.methods.base import register
from tradeoff.methods.common import AdversarialLearner
from tradeoff.methods.declared import iat as declared


def mixup(x: torch.Tensor, y: torch.Tensor, alpha: float):
    """(l x + (1 - l) x[p], y, y[p], l) with l ~ Beta(alpha, alpha) and a random permutation p."""
    lam = float(torch.distributions.Beta(float(alpha), float(alpha)).sample())
    index = torch.randperm(len(x), device=x.device)
    return lam * x + (1 - lam) * x[index], y, y[index], lam


@register
class IAT(declared.IAT, AdversarialLearner):
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
