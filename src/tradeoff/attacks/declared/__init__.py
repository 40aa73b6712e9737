"""What every attack is, without running it: its name, the norms it supports, its parameters (each declared once,
:mod:`tradeoff.core.params`) and the settings it holds fixed, and what follows from them alone (its default step, how
far its steps reach). One module per attack module of :mod:`tradeoff.attacks`: ``base`` (the declaration's
interface and the registry ``DECLARED``), ``pgd``, ``autoattack``, ``clean``.

The configuration checks and resolves attacks with these, before any job and without PyTorch; an attack's
implementation is a subclass of its declaration (``class PGD(declared.PGD, Attack)``), so that what the
configuration checked is what runs (tests/test_declarations.py).

May import: core.
"""

from tradeoff.attacks.declared import autoattack, clean, pgd, rays  # noqa: F401  (registers)
from tradeoff.attacks.declared.base import DECLARED, NORMS, AttackDeclaration

__all__ = ["DECLARED", "NORMS", "AttackDeclaration"]
