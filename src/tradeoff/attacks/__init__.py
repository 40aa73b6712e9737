"""Attacks: a registry of classes with ``perturb(x, y) -> x_adv``; see :mod:`tradeoff.attacks.base`.

Each attack type is declared apart from its code: ``declared`` (its name, norms, parameters, fixed settings and
cost, torch-free: what the configuration and the cost plan read) and the modules that run it (``pgd``,
``autoattack``, ``clean``), each class a subclass of its declaration. ``ATTACKS`` (``base``) is filled, when first
read, with every module of this package and the installed plug-ins (the entry points of the group
``tradeoff.attacks``): a new attack's modules are found, no list names them (docs/extending.md). ``loop`` runs an
attack over a set of examples, batch by seeded batch, in fp32 and eval mode: the one path of evaluation, training's
measurements, the benches and the audit.

Importing the package imports no PyTorch: its names below are reached in ``base`` on first use, through the one
table ``_NAMES``.

May import: core.
"""

from __future__ import annotations

from tradeoff.core.lazy_imports import lazy_package

#: the package's names -> the module that owns each, imported when the name is first read (spelled out in full:
#: a DVC stage's code is the modules whose names it reads, tradeoff.pipeline.dvc_export)
_NAMES = dict.fromkeys(["ATTACKS", "Attack", "AttackError", "attack_names", "from_spec", "frozen", "project"],
                       "tradeoff.attacks.base")

__getattr__, __dir__ = lazy_package(__name__, _NAMES)
