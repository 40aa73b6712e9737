"""Attacks: a registry of classes with ``perturb(x, y) -> x_adv``; see :mod:`tradeoff.attacks.base`."""

from . import autoattack, clean, pgd  # noqa: F401  (registers)
from .base import ATTACKS, Attack, AttackError, attack_names, build, frozen, project

__all__ = ["ATTACKS", "Attack", "AttackError", "attack_names", "build", "frozen", "project"]
