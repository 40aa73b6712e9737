"""The bound: what no attack can fail to find, and so no robust accuracy may exceed: an image of another class within
the budget. The evaluation looks at a few such images that need no search (constant images, each a forward pass; at a
budget that reaches the whole image range, every test image the model classifies correctly) and records, per attack,
which were reachable, the bound they give and the examples the attack left robust although one of them was within
their budget: there the attack failed, and the report marks the cell (tradeoff.report.tables).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tradeoff.core.spec import AttackSpec

#: the grey levels of the constant images probed (0.5 is the mid-grey image, within L-inf 0.5 of every image in
#: [0, 1]^d and within L2 eps of x where ||x - 0.5||_2 <= eps)
PROBE_LEVELS = tuple(k / 10 for k in range(11))
L2_SLACK = 1e-6  # an L2 distance within this relative rounding of eps does not count as reachable


def whole_range(spec: AttackSpec, x: torch.Tensor) -> bool:
    """Does the budget reach the whole image range (L-inf 1, L2 sqrt(d)): every image of [0, 1]^d from every image?"""
    reach = 1.0 if str(spec.norm) == "linf" else math.sqrt(x[0].numel())
    return float(spec.eps) >= reach


def constant_probes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: AttackSpec) -> tuple[list[dict],
                                                                                                  torch.Tensor]:
    """The constant images (PROBE_LEVELS) the model classifies, one forward pass: ([{level, class (None for
    non-finite logits), reachable (the examples within the budget of it)}], per example: is one of another class
    than its label within its budget)."""
    eps, norm = float(spec.eps), str(spec.norm)
    levels = torch.tensor(PROBE_LEVELS, dtype=x.dtype, device=x.device)
    images = levels.view(-1, *([1] * (x.dim() - 1))) * torch.ones_like(x[:1])
    with torch.no_grad(), torch.autocast(device_type=x.device.type, enabled=False):
        logits = model(images)
    finite = torch.isfinite(logits).all(1)
    classes = logits.argmax(1)
    flat = x.flatten(1)
    if norm == "linf":  # max_j |x_j - c|: exact in floating point at the levels that matter (0, 0.5, 1)
        reach = torch.maximum(levels[None] - flat.amin(1)[:, None], flat.amax(1)[:, None] - levels[None]) <= eps
    else:
        reach = torch.stack([(flat - c).norm(p=2, dim=1) for c in levels], 1) <= eps * (1 - L2_SLACK)
    other = reach & finite[None] & (classes[None] != y[:, None])
    counts, found, named = reach.sum(0).tolist(), finite.tolist(), classes.tolist()
    probes = [{"level": level, "class": int(c) if ok else None, "reachable": int(k)}
              for level, c, ok, k in zip(PROBE_LEVELS, named, found, counts)]
    return probes, other.any(1)


def bound_record(probes: list[dict], ruled: torch.Tensor, whole: bool, labels: torch.Tensor, clean: torch.Tensor,
                 robust: torch.Tensor) -> dict:
    """An evaluation's ``bound``: the constant images within the budget of some example (``probes``: level, class,
    how many examples reach it), whether the budget reaches the whole range (then every test image the model
    classifies correctly is reachable from every example), how many examples an image of another class within their
    budget rules out, the highest robust accuracy left possible, and the examples robust despite it (their indices
    among the evaluated examples): each one an attack failure."""
    ruled = ruled.clone()
    if whole:  # any image is reachable: a correctly classified test image of another class breaks the example
        named = torch.unique(labels[clean])
        ruled |= (named[None] != labels[:, None]).any(1) if len(named) else torch.zeros_like(ruled)
    n = len(labels)
    despite = (robust & ruled).nonzero().flatten().tolist()
    return {"probes": [p for p in probes if p["reachable"]], "whole_range": bool(whole),
            "ruled_out": int(ruled.sum()), "accuracy_bound": (n - int(ruled.sum())) / n if n else float("nan"),
            "robust_despite": despite}

