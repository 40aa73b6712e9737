"""What every attack is, without running it: its name, the norms it supports, its parameters (each declared once,
:mod:`tradeoff.core.params`) and the settings it holds fixed, what follows from them alone (its default step, how far
its steps reach) and what it costs (``passes``: forward and backward passes per example, a function of its settings,
:mod:`tradeoff.core.passes`). One module per attack module of :mod:`tradeoff.attacks`: ``base`` (the declaration's
interface, the registry ``DECLARED``, and the pricing of a spec), ``pgd``, ``autoattack``, ``clean``. ``DECLARED``
is filled, when first read, with every module of this package and the installed plug-ins (the entry points of the
group ``tradeoff.attacks``, :func:`tradeoff.core.plugins.discover`): a new file here is found, no list names it.

The configuration checks and resolves attacks with these, before any job and without PyTorch; an attack's
implementation is a subclass of its declaration (``class PGD(declared.PGD, Attack)``), so that what the
configuration checked is what runs (tests/test_declarations.py).

May import: core.
"""

from tradeoff.attacks.declared.base import DECLARED, NORMS, AttackDeclaration

__all__ = ["DECLARED", "NORMS", "AttackDeclaration"]
