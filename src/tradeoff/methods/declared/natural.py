"""The declaration of NT, natural training: :mod:`tradeoff.methods.natural`."""

from __future__ import annotations

from tradeoff.methods.declared.base import MethodDeclaration, declare


@declare
class Natural(MethodDeclaration):
    name = "nt"
