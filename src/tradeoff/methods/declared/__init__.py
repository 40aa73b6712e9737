"""What every training method is, without running it: its name and its parameters (each declared once,
:mod:`tradeoff.core.params`), with what the declarations alone cannot check (``check_params``: several parameters
together, the run's length, the training attack) and the form training uses them in (``canonical``). One module per
method module of :mod:`tradeoff.methods`, named alike; ``base`` holds the interface, the registry ``DECLARED`` and
what the adversarial methods share.

The configuration checks and resolves runs with these, before any job and without PyTorch; a method's
implementation is a subclass of its declaration (``class TRADES(declared.TRADES, KLInner)``), so that what the
configuration checked is what trains (tests/test_declarations.py). A training job's code is its method's two
modules (tradeoff.pipeline.dvc_export).

May import: core, attacks.
"""

from tradeoff.methods.declared import (  # noqa: F401  (registers)
    caat,
    clp,
    fat,
    generalist,
    iat,
    natural,
    pgd_at,
    rst,
    trades,
    vanilla,
)
from tradeoff.methods.declared.base import DECLARED, MethodDeclaration, method_names

__all__ = ["DECLARED", "MethodDeclaration", "method_names"]
