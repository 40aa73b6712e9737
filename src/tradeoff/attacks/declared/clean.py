"""The declaration of the identity 'attack' (natural accuracy): :mod:`tradeoff.attacks.clean`."""

from __future__ import annotations

from tradeoff.core.params import Params
from tradeoff.attacks.declared.base import SEED, AttackDeclaration, declare


@declare
class Clean(AttackDeclaration):
    name = "clean"
    parameters = Params(SEED)
