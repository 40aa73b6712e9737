"""Attacks: a registry of classes with ``perturb(x, y) -> x_adv``; see :mod:`tradeoff.attacks.base`.

May import: core.
"""

from tradeoff.attacks import autoattack, clean, pgd  # noqa: F401  (registers)
from tradeoff.attacks.base import ATTACKS, Attack, AttackError, attack_names, build, from_spec, frozen, project

__all__ = ["ATTACKS", "Attack", "AttackError", "attack_names", "build", "frozen", "project"]
