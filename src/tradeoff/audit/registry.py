"""The audit's checks as a registry: each check one function of the module of its verdict group, registered with
``@check(name, group=...)`` (:class:`Check`: what it counts towards, and how unusable gradients change it), and the
order the audit runs them in (:data:`ORDER`; ``columns``, the check of each reported column, after them).
:data:`CHECKS` fills itself when first read, by importing the module of each group (``tradeoff.audit.masking``,
``.convergence``, ``.protocol``: :data:`GROUPS`), so that importing the registry imports no check (nor PyTorch).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from tradeoff.core.registry import Registry

#: the verdict groups, in the order the page shows them, and the module of each group's checks
GROUPS = {"masking": "tradeoff.audit.masking", "convergence": "tradeoff.audit.convergence",
          "protocol": "tradeoff.audit.protocol"}
#: the checks in the order the audit runs them (those that compare with the white-box worst case after it is measured)
ORDER = ("graph", "outputs", "gradients", "consistency", "surface", "steps", "restarts", "losses", "targeted", "silent",
         "fgsm", "eps", "steps-l2", "losses-l2", "targeted-l2", "eps-l2", "autoattack", "black-box", "black-box-l2",
         "transfer", "transfer-l2", "random", "random-l2", "decision", "bpda", "bpda-l2", "randomness", "finite",
         "protocol")


@dataclass(frozen=True)
class Check:
    """A registered check: its ``name`` (the record's), the verdict ``group`` it counts towards, the function that
    runs it on an auditor (``run(auditor) -> finding``; ``columns``: a list, one finding per column), whether it varies the audit's gradient attack itself
    (``needs_gradients``: n/a when the gradients are unusable, its premise) and whether it only finds something when
    an attack is stronger (``finds_only``: a pass is n/a when the gradients are unusable)."""

    name: str
    group: str
    run: Callable[[Any], dict]
    needs_gradients: bool = False
    finds_only: bool = False


def _discover() -> None:
    for module in GROUPS.values():
        importlib.import_module(module)


#: check name -> :class:`Check`
CHECKS = Registry("audit check", discover=_discover)


def check(name: str, *, group: str, needs_gradients: bool = False, finds_only: bool = False):
    """Register the decorated function (``fn(auditor) -> finding``) as the check ``name`` of verdict ``group``."""
    if group not in GROUPS:
        raise ValueError(f"audit check {name!r}: group {group!r} is not one of {list(GROUPS)}")

    def add(fn: Callable[[Any], dict]) -> Callable[[Any], dict]:
        CHECKS.register(Check(name, group, fn, needs_gradients, finds_only))
        return fn

    return add
