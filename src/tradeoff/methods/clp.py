"""Logit pairing (Kannan et al., 2018) in the form CA-AT trains with ("CLP"):

    loss = CE(f(x), y) + CE(f(x'), y) + lam * mean_i || softmax(f(x'_i)) - softmax(f(x_i)) ||_2,

x' from the run's training attack (any registry attack). The pairing term is the CA-AT code's CLP loss: the
mean over the batch of the L2 distance between the adversarial and the clean softmax, with gradients through
both.
"""

from __future__ import annotations

from tradeoff.attacks.declared.base import attack_passes
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import NUMBER, Param
from tradeoff.core.passes import TRAIN2
from tradeoff.core.ranges import at_least
from tradeoff.methods.base import register
from tradeoff.methods.common import Adversarial

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")


def softmax_distance(logits_adv: torch.Tensor, logits_clean: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of ||softmax(adv) - softmax(clean)||_2."""
    diff = F.softmax(logits_adv.float(), dim=1) - F.softmax(logits_clean.float(), dim=1)
    return diff.norm(p=2, dim=1).mean()


@register
class CLP(Adversarial):
    name = "clp"
    parameters = Adversarial.parameters.extend(
        Param("lam", NUMBER, 1.0, range=at_least(0), meaning="the weight of the logit-pairing term"))

    @classmethod
    def passes(cls, p, classes):
        """The attack, then the clean and the adversarial pass."""
        return attack_passes(p.attack, classes) + TRAIN2

    def loss(self, x, y):
        x_adv = self.adversarial(x, y)
        with self.runtime.autocast():  # two passes: each batch normalised with its own statistics
            logits_clean, logits_adv = self.model(x), self.model(x_adv)
        loss = (F.cross_entropy(logits_clean.float(), y) + F.cross_entropy(logits_adv.float(), y)
                + float(self.p.lam) * softmax_distance(logits_adv, logits_clean))
        return loss, logits_adv
