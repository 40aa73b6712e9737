"""Every attack, implemented: importing this module fills ``ATTACKS`` (it imports every attack module) and gives the
package's names (tradeoff.attacks reads them here)."""

from tradeoff.attacks import autoattack, clean, pgd, rays  # noqa: F401  (registers)
from tradeoff.attacks.base import ATTACKS, Attack, AttackError, attack_names, build, from_spec, frozen, project

__all__ = ["ATTACKS", "Attack", "AttackError", "attack_names", "build", "from_spec", "frozen", "project"]
