"""The one registry style: every kind of named thing (methods, attacks, architectures, datasets, figure kinds) is a
:class:`Registry`, a dict from name to thing that things join with ``register`` (a decorator on a class or function
with a ``name``, or a call with an explicit name). Adding a method, an attack, a model, a dataset or a figure kind is
writing it and registering it; nothing else lists them.

Methods and attacks are declared apart from their code (what the configuration reads without PyTorch:
tradeoff.methods.declared, tradeoff.attacks.declared), as are datasets and architectures (tradeoff.data.declared,
tradeoff.models.declared); the registry of the implementations then takes only a declared name, and for a class a
subclass of the declaration of that name (datasets: their decorator, tradeoff.data.registry.dataset)."""

from __future__ import annotations

from typing import Any


class Registry(dict):
    """name -> registered thing, for one kind of thing (``what``: "method", "attack", ...)."""

    def __init__(self, what: str, declarations: dict[str, Any] | None = None):
        super().__init__()
        self.what = what
        #: for a registry of implementations: name -> its declaration (a class: one the implementation must
        #: subclass); nothing registers under a name not declared
        self.declarations = declarations

    def register(self, thing: Any = None, *, name: str | None = None) -> Any:
        """Add ``thing`` under ``name`` (default: its ``name`` attribute) and return it; without ``thing``, a
        decorator that does so. A name registered twice is an error (two modules would silently shadow each
        other)."""
        def add(obj: Any) -> Any:
            key = name if name is not None else getattr(obj, "name")
            if key in self:
                raise ValueError(f"{self.what} {key!r} registered twice")
            if self.declarations is not None:
                what = f"{self.what} {key!r} ({getattr(obj, '__name__', type(obj).__name__)})"
                if key not in self.declarations:
                    raise TypeError(f"{what}: no declaration has the name; declare it first")
                declared = self.declarations[key]
                if isinstance(declared, type) and not (isinstance(obj, type) and issubclass(obj, declared)):
                    raise TypeError(f"{what}: not a subclass of its declaration {declared.__module__}."
                                    f"{declared.__qualname__}")
            self[key] = obj
            return obj

        return add if thing is None else add(thing)

