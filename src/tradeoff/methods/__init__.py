"""Training methods (AT, TRADES, Generalist, CA-AT, ...): one module each, one class each, what the configuration
reads of it and the code that trains in one place.

A method's module (``trades``, ``caat``, ...) holds its class, decorated ``@register`` (``base``): its name, its
parameters and their checks, its cost per step (``passes``) and its training step. Nothing at a module's top imports
PyTorch (the code reads it through ``LazyModule``, imported when it first runs), so that the configuration checks
and resolves runs against the classes themselves without it (tests/test_declarations.py). ``base`` (the interface and
the registry ``METHODS``), ``common`` (the training attack and what the adversarial methods share) and ``optim`` are
what they share. ``METHODS`` is filled, when first read, with every module of the package and the installed plug-ins
(the entry points of the group ``tradeoff.methods``): adding a method is adding its module (docs/extending.md).

Importing the package imports none of them: its names below are reached in ``base`` on first use, through the one
table ``_NAMES``.

May import: core, storage, data, attacks.
"""

from __future__ import annotations

from tradeoff.core.lazy_imports import lazy_package

#: the package's names -> the module that owns each, imported when the name is first read (spelled out in full:
#: a DVC stage's code is the modules whose names it reads, tradeoff.pipeline.dvc_export)
_NAMES = dict.fromkeys(["METHODS", "Method", "SingleLearner", "method_names", "register"], "tradeoff.methods.base")

__getattr__, __dir__ = lazy_package(__name__, _NAMES)
