"""The declaration of RayS, a decision-based (hard-label) attack: :mod:`tradeoff.attacks.rays`."""

from __future__ import annotations

from tradeoff.attacks.declared.base import SEED, AttackDeclaration, declare
from tradeoff.core.params import INTEGER, NUMBER, Param, Params
from tradeoff.core.passes import F, Passes
from tradeoff.core.ranges import between, count


@declare
class RayS(AttackDeclaration):
    name = "rays"
    norms = ("linf",)  # a search over sign directions: the L-inf geometry (Chen & Gu 2020)
    parameters = Params(Param("queries", INTEGER, 1000, range=count(), meaning="the model's decisions asked per "
                              "example, at most"),
                        Param("tolerance", NUMBER, 1e-3, range=between(0, 1, low_open=True),
                              meaning="the binary search's resolution of the radius (L-inf)"), SEED)

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """One decision (a forward pass) per query, at most."""
        return int(p.queries) * F
