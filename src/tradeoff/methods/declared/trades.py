"""The declaration of TRADES (and of the choice of inner maximiser it shares): :mod:`tradeoff.methods.trades`."""

from __future__ import annotations

from tradeoff.core.params import NUMBER, TEXT, Param
from tradeoff.core.ranges import at_least
from tradeoff.methods.declared.base import Adversarial, declare

INNER = ("kl", "attack")


class KLInner(Adversarial):
    """An adversarial method whose ``inner`` parameter picks TRADES' KL maximiser or the registry attack."""

    parameters = Adversarial.parameters.extend(
        Param("inner", TEXT, "kl", choices=INNER, meaning="TRADES' KL maximiser, or the training attack"),
        attack_mode="eval")
    own_maximiser = ("inner", "kl")


@declare
class TRADES(KLInner):
    name = "trades"
    parameters = KLInner.parameters.extend(
        Param("lam", NUMBER, 6.0, range=at_least(0), meaning="the weight of the KL term, TRADES' beta = 1/lambda"))
