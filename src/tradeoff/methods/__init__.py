"""Training methods: a registry of classes that update their learner(s) given a batch.

Each method is declared apart from its code: ``declared`` (its name, parameters and their checks, torch-free: what
the configuration reads) and one module per method that trains (``trades``, ``caat``, ...), each class a subclass of
its declaration; ``base`` (the interface), ``common`` and ``optim`` are what they share. ``registry`` imports every
method module.

Importing the package imports no PyTorch: its names below are reached in ``registry`` on first use, through the one
table ``_NAMES``.

May import: core, storage, data, attacks.
"""

from __future__ import annotations

from tradeoff.core.lazy_imports import lazy_package

#: the package's names -> the module that owns each, imported when the name is first read (spelled out in full:
#: a DVC stage's code is the modules whose names it reads, tradeoff.pipeline.dvc_export)
_NAMES = dict.fromkeys(["METHODS", "Method", "SingleLearner", "register"], "tradeoff.methods.registry")

__getattr__, __dir__ = lazy_package(__name__, _NAMES)
