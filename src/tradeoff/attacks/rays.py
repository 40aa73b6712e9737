"""RayS (Chen & Gu 2020, "RayS: A Ray Searching Method for Hard-label Adversarial Attack", KDD; the authors' code:
github.com/uclaml/RayS): a decision-based attack, which asks the model only for its predicted class (no logits, no
gradient), so that a model whose gradients or scores are masked is attacked as any other.

It searches the rays x + r s over sign directions s in {-1, 1}^d for the one whose decision boundary is nearest in
L-inf: from s = (1, ..., 1), it flips the sign of one block of coordinates at a time (the whole image, then halves,
quarters, ... down to single coordinates, and again), keeps a flip when the flipped ray is adversarial at the best
radius found so far (one decision), and then finds that ray's boundary radius by binary search (to ``tolerance``).
An example is done once its best radius is within the budget, or after ``queries`` decisions; since only the budget
matters here, a kept ray is first asked at eps (one decision), and the search below eps is skipped.

Threat model: ||x_adv - x||_inf <= eps, x_adv in [0, 1] (the ray's points are clipped to [0, 1], which only brings
them nearer x); black box, the model's decisions only. Every point returned is within the budget: x itself where no
adversarial point within eps was found.
"""

from __future__ import annotations

import math

import torch

from tradeoff.attacks.base import Attack, register
from tradeoff.attacks.declared import rays as declared


@register
class RayS(declared.RayS, Attack):
    """RayS, L-inf, untargeted, hard-label (see the module's docstring). ``queries``: the decisions asked per example
    at most (the authors use 10,000 on CIFAR-10); ``tolerance``: the binary search's resolution of the radius."""

    def _decide(self, points: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per example: is the point adversarial (the model's decision only)? Non-finite logits decide nothing."""
        with torch.no_grad():
            logits = self.model(points)
        return torch.isfinite(logits).all(1) & (logits.argmax(1) != y)

    def _perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n, shape = len(x), x.shape
        dim = x[0].numel()
        flat = x.flatten(1)
        ray = lambda i, s, r: (flat[i] + r.view(-1, 1) * s).clamp(0, 1)  # noqa: E731  (the rays' points at radii r)
        sign = torch.ones_like(flat)
        best = torch.full((n,), math.inf, device=x.device)  # the nearest boundary radius found (L-inf)
        queries = torch.zeros(n, dtype=torch.long, device=x.device)
        limit, tol = int(self.queries), float(self.tolerance)
        level, block = 0, 0
        while True:
            todo = ((best > self.eps) & (queries < limit)).nonzero().squeeze(1)
            if todo.numel() == 0:
                break
            blocks = 2 ** level
            size = math.ceil(dim / blocks)
            start, end = block * size, min(dim, (block + 1) * size)
            trial = sign[todo].clone()
            trial[:, start:end] *= -1
            # one decision: is the flipped ray adversarial at the best radius so far (the whole range at first)?
            radius = best[todo].clamp(max=1.0)
            hit = self._decide(ray(todo, trial, radius).view(-1, *shape[1:]), y[todo])
            queries[todo] += 1
            if hit.any():
                idx, s = todo[hit], trial[hit]
                high = radius[hit]
                # within the budget already? (one decision; the boundary below eps is not needed)
                at_eps = torch.full_like(high, float(self.eps))
                inside = (high > at_eps) & (queries[idx] < limit)
                if inside.any():
                    adv = self._decide(ray(idx[inside], s[inside], at_eps[inside]).view(-1, *shape[1:]),
                                       y[idx[inside]])
                    queries[idx[inside]] += 1
                    high[inside] = torch.where(adv, at_eps[inside], high[inside])
                low = torch.where(high <= at_eps, high, at_eps)
                while True:  # binary search of the boundary along the new ray
                    open_ = ((high - low) > tol) & (queries[idx] < limit)
                    if not open_.any():
                        break
                    mid = (low + high) / 2
                    adv = self._decide(ray(idx[open_], s[open_], mid[open_]).view(-1, *shape[1:]), y[idx[open_]])
                    queries[idx[open_]] += 1
                    high[open_] = torch.where(adv, mid[open_], high[open_])
                    low[open_] = torch.where(adv, low[open_], mid[open_])
                better = high < best[idx]
                best[idx[better]] = high[better]
                sign[idx[better]] = s[better]
            block += 1
            if block == blocks or end == dim:
                level, block = level + 1, 0
        found = best <= self.eps
        radius = torch.where(found, best, torch.zeros_like(best))
        x_adv = ray(slice(None), sign, radius).view_as(x)
        self.best_radius = best
        return torch.where(found.view(-1, *([1] * (x.dim() - 1))), x_adv, x)
