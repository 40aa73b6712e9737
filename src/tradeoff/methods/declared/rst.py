"""The declaration of RST as the Generalist paper compares it: :mod:`tradeoff.methods.rst`."""

from __future__ import annotations

from tradeoff.core.params import TEXT, Param
from tradeoff.methods.declared.base import declare
from tradeoff.methods.declared.pgd_at import PGDAT


@declare
class RST(PGDAT):
    name = "rst"
    parameters = PGDAT.parameters.extend(
        Param("unlabeled", TEXT, None, nullable=True, meaning="a .pt file of pseudo-labelled images you provide"),
        beta=0.5, attack="pgd10-rst", attack_mode="eval")
