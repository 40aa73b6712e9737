"""The identity 'attack': natural accuracy (NAT) is evaluated through the same path as every attack."""

from __future__ import annotations

import torch

from tradeoff.core.params import Params
from tradeoff.attacks.base import SEED, Attack, register


@register
class Clean(Attack):
    """No perturbation (eps is ignored)."""

    name = "clean"
    parameters = Params(SEED)

    def perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.detach().clone()
