"""Logit pairing (Kannan et al., 2018) in the form CA-AT trains with ("CLP"):

    loss = CE(f(x), y) + CE(f(x'), y) + lam * mean_i || softmax(f(x'_i)) - softmax(f(x_i)) ||_2,

x' from the run's training attack (any registry attack). The pairing term is the CA-AT code's CLP loss: the
mean over the batch of the L2 distance between the adversarial and the clean softmax, with gradients through
both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tradeoff.methods.base import register
from tradeoff.methods.common import AdversarialLearner
from tradeoff.methods.declared import clp as declared


def softmax_distance(logits_adv: torch.Tensor, logits_clean: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of ||softmax(adv) - softmax(clean)||_2."""
    diff = F.softmax(logits_adv.float(), dim=1) - F.softmax(logits_clean.float(), dim=1)
    return diff.norm(p=2, dim=1).mean()


@register
class CLP(declared.CLP, AdversarialLearner):
    def loss(self, x, y):
        x_adv = self.adversarial(x, y)
        with self.runtime.autocast():  # two passes: each batch normalised with its own statistics
            logits_clean, logits_adv = self.model(x), self.model(x_adv)
        loss = (F.cross_entropy(logits_clean.float(), y) + F.cross_entropy(logits_adv.float(), y)
                + float(self.p.lam) * softmax_distance(logits_adv, logits_clean))
        return loss, logits_adv
