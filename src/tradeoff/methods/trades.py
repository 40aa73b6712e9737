"""TRADES (Zhang et al., 2019): clean cross-entropy plus a KL robustness regulariser,

    loss = CE(f(x), y) + lam * KL(f(x) || f(x')) / batch,    x' = argmax_{x' in B(x, eps)} KL(f(x) || f(x')),

with the KL summed over the batch and divided by its size (batchmean); the clean softmax is not detached, so
the regulariser's gradient flows through both forward passes, as in the authors' code (lam is their beta, the
paper's 1/lambda). The inner maximiser is TRADES' own: the model in eval mode, start at x + 0.001 N(0, 1),
``steps`` steps of ``step_size`` along the steepest ascent direction of the summed KL (sign for L-inf, the
normalised gradient for L2), each projected onto the eps-ball and [0, 1]. Budget, norm, steps and step size
come from the run's training-attack spec; ``inner: attack`` runs that registry attack (a CE attack such as
PGD or APGD, in ``attack_mode``) instead of the KL maximiser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tradeoff.attacks.base import frozen, project, steepest_step
from tradeoff.attacks.declared.base import attack_passes
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import NUMBER, TEXT, Param
from tradeoff.core.passes import TRAIN1, TRAIN2, G, Passes
from tradeoff.core.passes import F as FORWARD
from tradeoff.core.ranges import at_least
from tradeoff.core.spec import AttackSpec
from tradeoff.methods.base import register
from tradeoff.methods.common import Adversarial, attack_budget, own_steps

if TYPE_CHECKING:
    from tradeoff.core.runtime import Runtime

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")

INNER = ("kl", "attack")


def kl_divergence(logits_adv: torch.Tensor, logits_clean: torch.Tensor) -> torch.Tensor:
    """KL(softmax(clean) || softmax(adv)) summed over the batch (TRADES' nn.KLDivLoss(reduction='sum'))."""
    return F.kl_div(F.log_softmax(logits_adv.float(), dim=1), F.softmax(logits_clean.float(), dim=1),
                    reduction="sum")


def kl_adversarial(model: torch.nn.Module, x: torch.Tensor, *, eps: float, norm: str, steps: int, step_size: float,
                   runtime: Runtime) -> torch.Tensor:
    """TRADES' inner maximiser (module docstring). Leaves the model in train mode."""
    model.eval()
    with frozen(model), runtime.autocast():
        with torch.no_grad():
            logits_clean = model(x)
        x_adv = x + 0.001 * torch.randn_like(x)
        for _ in range(int(steps)):
            x_adv.requires_grad_(True)
            (grad,) = torch.autograd.grad(kl_divergence(model(x_adv), logits_clean), x_adv)
            with torch.no_grad():
                x_adv = (x + project(x_adv + step_size * steepest_step(grad, norm) - x, eps, norm)).clamp(0, 1)
    model.train()
    return x_adv.clamp(0, 1).detach()


def kl_adversarial_from_spec(model: torch.nn.Module, x: torch.Tensor, spec: AttackSpec, runtime: Runtime,
                             scale: float = 1.0) -> torch.Tensor:
    """The KL maximiser with the budget, norm, steps and step size of a resolved training-attack spec (times
    ``scale`` during an eps warm-up)."""
    eps, norm, steps, step_size = attack_budget(spec, scale)
    return kl_adversarial(model, x, eps=eps, norm=norm, steps=steps, step_size=step_size, runtime=runtime)


def kl_passes(spec: AttackSpec) -> Passes:
    """What the KL maximiser costs per example: the clean logits, then its steps (its training attack's)."""
    return FORWARD + own_steps(spec) * G


class KLInner(Adversarial):
    """An adversarial learner whose ``inner`` parameter picks TRADES' KL maximiser or the registry attack."""

    parameters = Adversarial.parameters.extend(
        Param("inner", TEXT, "kl", choices=INNER, meaning="TRADES' KL maximiser, or the training attack"),
        attack_mode="eval")
    own_maximiser = ("inner", "kl")

    @classmethod
    def inner_passes(cls, p, classes):
        """What its adversarial examples cost: the KL maximiser's or the training attack's."""
        return kl_passes(p.attack) if p.inner == "kl" else attack_passes(p.attack, classes)

    def adversarial(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.p.inner == "attack":
            return super().adversarial(x, y)
        return kl_adversarial_from_spec(self.model, x, self.p.attack, self.runtime, self.budget_scale)


@register
class TRADES(KLInner):
    name = "trades"
    parameters = KLInner.parameters.extend(
        Param("lam", NUMBER, 6.0, range=at_least(0), meaning="the weight of the KL term, TRADES' beta = 1/lambda"))

    @classmethod
    def passes(cls, p, classes):
        """Its adversarial examples, then the clean and the adversarial pass (lam = 0: the clean pass alone)."""
        if float(p.lam) == 0:
            return TRAIN1
        return cls.inner_passes(p, classes) + TRAIN2

    def loss(self, x, y):
        lam = float(self.p.lam)
        if lam == 0:  # the regulariser vanishes: natural training, without the wasted attack
            with self.runtime.autocast():
                logits = self.model(x)
            return F.cross_entropy(logits.float(), y), logits
        x_adv = self.adversarial(x, y)
        with self.runtime.autocast():  # two passes: each batch normalised with its own statistics
            logits_clean, logits_adv = self.model(x), self.model(x_adv)
        natural = F.cross_entropy(logits_clean.float(), y)
        return natural + lam * kl_divergence(logits_adv, logits_clean) / len(x), logits_clean
