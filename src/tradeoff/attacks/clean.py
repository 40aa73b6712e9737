"""The identity 'attack': natural accuracy (NAT) is evaluated through the same path as every attack."""

from __future__ import annotations

import torch

from tradeoff.attacks.base import Attack, register
from tradeoff.attacks.declared import clean as declared


@register
class Clean(declared.Clean, Attack):
    """No perturbation (eps is ignored)."""

    def perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.detach().clone()
