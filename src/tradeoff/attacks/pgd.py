"""Projected gradient attacks (Madry et al.), L-inf and L2.

Threat model: ||x_adv - x|| <= eps in the attack's norm, x_adv in [0, 1]. ``steps`` is exactly the number of
gradient steps taken per restart. With ``restarts`` > 1 an example counts as broken if any restart breaks it
(the first successful perturbation is kept; for unbroken examples the last restart's is returned).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Attack, project, random_start, register, steepest_step


def margin_loss(logits: torch.Tensor, y: torch.Tensor, kappa: float = float("inf")) -> torch.Tensor:
    """The CW margin loss per example, max_{j != y} z_j - z_y, clipped at kappa (TRADES/FAT form: -kappa floor
    on the negated objective, i.e. the attack stops pushing once the margin exceeds kappa)."""
    true = logits.gather(1, y[:, None]).squeeze(1)
    other = logits.masked_fill(F.one_hot(y, logits.shape[1]).bool(), float("-inf")).amax(1)
    return (other - true).clamp(max=kappa)


def dlr_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Croce & Hein's difference-of-logits-ratio loss per example (untargeted)."""
    sorted_logits, _ = logits.sort(dim=1)
    true = logits.gather(1, y[:, None]).squeeze(1)
    top_is_true = sorted_logits[:, -1] == true
    other = torch.where(top_is_true, sorted_logits[:, -2], sorted_logits[:, -1])
    return -(true - other) / (sorted_logits[:, -1] - sorted_logits[:, -3] + 1e-12)


LOSSES = {
    "ce": lambda logits, y, kappa: F.cross_entropy(logits, y, reduction="none"),
    "cw": lambda logits, y, kappa: margin_loss(logits, y, kappa),
    "dlr": lambda logits, y, kappa: dlr_loss(logits, y),
}


@register
class PGD(Attack):
    """PGD-k: k steps of size ``step_size`` along the steepest ascent direction of ``loss`` (ce, cw, dlr),
    projected onto the eps-ball and [0, 1], from a uniform random start (``random_start``). ``momentum`` > 0
    gives MI-FGSM's accumulated, L1-normalised gradient (momentum 1.0 is MIM)."""

    name = "pgd"
    defaults = {
        "steps": 10,
        "step_size": None,  # None: eps / 4
        "random_start": True,
        "restarts": 1,
        "loss": "ce",
        "kappa": float("inf"),
        "momentum": 0.0,
        "seed": None,
    }

    def _perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.loss not in LOSSES:
            raise ValueError(f"pgd: unknown loss {self.loss!r}; allowed: {sorted(LOSSES)}")
        gen = self.generator(x.device)
        if int(self.restarts) == 1:  # nothing to choose between: skip the forward that checks success
            return self._one_run(x, y, gen)
        best = x.clone()
        broken = torch.zeros(len(x), dtype=torch.bool, device=x.device)
        for _ in range(int(self.restarts)):
            x_adv = self._one_run(x, y, gen)
            with torch.no_grad():
                fooled = self.model(x_adv).argmax(1) != y
            # an example keeps the first perturbation that broke it; the others take the newest one
            best[~broken] = x_adv[~broken]
            broken |= fooled
        return best

    def _one_run(self, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
        step = self.eps / 4 if self.step_size is None else float(self.step_size)
        loss_fn = LOSSES[self.loss]
        delta = random_start(x, self.eps, self.norm, gen) if self.random_start else torch.zeros_like(x)
        delta = (x + delta).clamp(0, 1) - x
        velocity = torch.zeros_like(x)
        for _ in range(int(self.steps)):
            delta.requires_grad_(True)
            loss = loss_fn(self.model(x + delta), y, self.kappa).float().sum()
            (grad,) = torch.autograd.grad(loss, delta)
            if self.momentum:
                grad = grad / grad.abs().flatten(1).mean(1).clamp_min(1e-12).view(-1, *([1] * (x.dim() - 1)))
                velocity = self.momentum * velocity + grad
                grad = velocity
            with torch.no_grad():
                delta = project(delta + step * steepest_step(grad, self.norm), self.eps, self.norm)
                delta = (x + delta).clamp(0, 1) - x
        return (x + delta).detach()
