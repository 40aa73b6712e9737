"""The declaration of Interpolated Adversarial Training (IAT): :mod:`tradeoff.methods.iat`."""

from __future__ import annotations

from tradeoff.core.params import NUMBER, Param
from tradeoff.core.ranges import positive
from tradeoff.methods.declared.base import Adversarial, declare


@declare
class IAT(Adversarial):
    name = "iat"
    parameters = Adversarial.parameters.extend(
        Param("alpha", NUMBER, 1.0, range=positive(), meaning="mixup's Beta(alpha, alpha)"))
