"""The declaration of Conflict-Aware Adversarial Training (CA-AT): :mod:`tradeoff.methods.caat`."""

from __future__ import annotations

from tradeoff.core.params import FLAG, NUMBER, Param
from tradeoff.core.ranges import between
from tradeoff.methods.declared.base import declare
from tradeoff.methods.declared.vanilla import TwoLosses


@declare
class CAAT(TwoLosses):
    name = "caat"
    parameters = TwoLosses.parameters.extend(
        Param("gamma", NUMBER, 0.8, range=between(-1, 1), meaning="the cosine threshold between the two gradients"),
        Param("per_tensor", FLAG, False, meaning="project each parameter tensor on its own"))
