"""The declaration of PGD adversarial training with the Generalist paper's Eq. 1 weighting:
:mod:`tradeoff.methods.pgd_at`."""

from __future__ import annotations

from tradeoff.core.params import NUMBER, Param, Params
from tradeoff.core.ranges import PROBABILITY
from tradeoff.methods.declared.base import ATTACK_MODE, TRAINING_ATTACK, MethodDeclaration, declare


@declare
class PGDAT(MethodDeclaration):
    name = "pgd_at"
    parameters = Params(Param("beta", NUMBER, 1.0, range=PROBABILITY, meaning="the adversarial loss's weight"),
                        TRAINING_ATTACK, ATTACK_MODE)
