"""The declaration of logit pairing in the form CA-AT trains with (CLP): :mod:`tradeoff.methods.clp`."""

from __future__ import annotations

from tradeoff.core.params import NUMBER, Param
from tradeoff.core.ranges import at_least
from tradeoff.methods.declared.base import Adversarial, declare


@declare
class CLP(Adversarial):
    name = "clp"
    parameters = Adversarial.parameters.extend(
        Param("lam", NUMBER, 1.0, range=at_least(0), meaning="the weight of the logit-pairing term"))
