"""Start-up time, said once: what is imported late, and why.

Most of the pipeline's jobs are short (a report, a table, DVC's resolve stage, Snakemake's DAG) and must not pay
for what they never use: PyTorch alone takes seconds to import, torchvision (which pulls in torch._dynamo),
scikit-learn, SciPy, statsmodels and matplotlib seconds more. So an import sits at the top of its module, except
one that loads a module of :data:`HEAVY` that the module's own top-level imports do not: that one is imported
inside the function that needs it, or through :class:`LazyModule`. tests/test_structure.py holds every import
inside a function to this rule (a late import of anything else belongs at the top).
"""

from __future__ import annotations

import importlib
import sys

#: the third-party packages whose import costs start-up time (a late import must load one of them)
HEAVY = frozenset({"torch", "torchvision", "scipy", "sklearn", "matplotlib", "statsmodels", "autoattack",
                   "pyautoattack", "dvclive", "pandas", "PIL", "numpy", "jsonschema", "tqdm", "threadpoolctl",
                   "snakemake", "dvc", "selenium"})


def lazy_package(package: str, names: dict[str, str]):
    """``__getattr__`` and ``__dir__`` for a package whose names live in its modules, each imported when one of its
    names is first read (``names``: name -> the module that owns it; tradeoff.data, tradeoff.models)."""

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(names[name]), name)

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[package]), *names])

    return __getattr__, __dir__


class LazyModule:
    """A module imported when one of its attributes is first read (``torch = LazyModule("torch")`` at the top of a
    method's module: its class is read by the configuration without PyTorch, its code runs with it)."""

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attr: str):
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)
