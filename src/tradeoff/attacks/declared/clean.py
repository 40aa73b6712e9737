"""The declaration of the identity 'attack' (natural accuracy): :mod:`tradeoff.attacks.clean`."""

from __future__ import annotations

from tradeoff.attacks.declared.base import SEED, AttackDeclaration, declare
from tradeoff.core.params import Params
from tradeoff.core.passes import NONE, F, Passes


@declare
class Clean(AttackDeclaration):
    name = "clean"
    parameters = Params(SEED)

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        return NONE

    @classmethod
    def evaluation_passes(cls, p, classes: int) -> Passes:
        """The clean pass is the evaluation."""
        return F
