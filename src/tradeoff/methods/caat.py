"""Conflict-Aware Adversarial Training (CA-AT, its Eq. 4 and Algorithm 1).

Each step computes the clean gradient g_c = grad CE(f(x), y) and the adversarial gradient g_a of the chosen
adversarial loss (``adv_loss``: ce | trades | clp, as in :mod:`tradeoff.methods.vanilla`), flattened over all
trainable parameters (``per_tensor: true`` projects each parameter tensor on its own, the code's per-layer
variant), and updates along

    g* = g_a + k g_c,  k = ||g_a|| (gamma sqrt(1 - phi^2) - phi sqrt(1 - gamma^2)) / (||g_c|| sqrt(1 - gamma^2))
                                                                                     if phi = cos(g_a, g_c) < gamma,
    g* = g_c                                                                         otherwise,

so that cos(g*, g_c) = gamma exactly after a projection. NaN entries (a zero gradient makes phi 0/0) become 0,
as in the authors' code. gamma = 1 asks for the cone of angle 0 around g_c; the formula divides by
sqrt(1 - gamma^2) = 0 (the authors' code then steps along inf/NaN), and its limit is a step of unbounded length
along g_c, so here g* = g_c: CA-AT with gamma = 1 is natural training. The step reports CA-AT's conflict
mu = ||g_c|| ||g_a|| (1 - cos), the cosine and both norms (curve columns train_mu, train_cos, train_norm_gc,
train_norm_ga); its loss is the adversarial one, the clean one is train_clean_loss.
"""

from __future__ import annotations

import math

from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import FLAG, NUMBER, Param
from tradeoff.core.ranges import between
from tradeoff.methods.base import register
from tradeoff.methods.vanilla import TwoLosses

torch = LazyModule("torch")


def project_gradient(g_adv: torch.Tensor, g_clean: torch.Tensor, gamma: float) -> torch.Tensor:
    """CA-AT's update direction g* for flat gradients (module docstring)."""
    if abs(gamma) >= 1:  # gamma = -1: every cosine is >= gamma; gamma = 1: the degenerate cone, see above
        return g_clean.clone()
    norm_a, norm_c = g_adv.norm(), g_clean.norm()
    phi = torch.dot(g_adv, g_clean) / (norm_a * norm_c)
    root = math.sqrt(1 - gamma**2)
    k = norm_a * (gamma * (1 - phi**2).clamp_min(0).sqrt() - phi * root) / (norm_c * root)
    projected = torch.nan_to_num(g_adv + k * g_clean, nan=0.0)
    return torch.where(phi >= gamma, g_clean, projected)


@register
class CAAT(TwoLosses):
    name = "caat"
    parameters = TwoLosses.parameters.extend(
        Param("gamma", NUMBER, 0.8, range=between(-1, 1), meaning="the cosine threshold between the two gradients"),
        Param("per_tensor", FLAG, False, meaning="project each parameter tensor on its own"))

    @classmethod
    def passes(cls, p, classes):
        """Both gradients, always (the clean and the adversarial loss weigh equally in its count)."""
        return cls.step_passes(p, classes, lam=0.5, combined=True)

    def __init__(self, spec, build_model, runtime):
        super().__init__(spec, build_model, runtime)
        self.sizes = [p.numel() for p in self.model.parameters() if p.requires_grad]

    def direction(self, g_adv: torch.Tensor, g_clean: torch.Tensor) -> torch.Tensor:
        gamma = float(self.p.gamma)
        if not self.p.per_tensor:
            return project_gradient(g_adv, g_clean, gamma)
        return torch.cat([project_gradient(a, c, gamma)
                          for a, c in zip(g_adv.split(self.sizes), g_clean.split(self.sizes))])

    def train_step(self, x, y):
        out = self.combined_step(x, y, self.direction)
        return {"loss": out.pop("adv_loss"), **out}
