"""The one registry style: every kind of named thing (methods, attacks, architectures, datasets, figure kinds) is a
:class:`Registry`, a dict from name to thing that things join with ``register`` (a decorator on a class or function
with a ``name``, or a call with an explicit name). Adding a method, an attack, a model, a dataset or a figure kind is
writing it and registering it; nothing else lists them."""

from __future__ import annotations

from typing import Any


class Registry(dict):
    """name -> registered thing, for one kind of thing (``what``: "method", "attack", ...)."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def register(self, thing: Any = None, *, name: str | None = None) -> Any:
        """Add ``thing`` under ``name`` (default: its ``name`` attribute) and return it; without ``thing``, a
        decorator that does so. A name registered twice is an error (two modules would silently shadow each
        other)."""
        def add(obj: Any) -> Any:
            key = name if name is not None else getattr(obj, "name")
            if key in self:
                raise ValueError(f"{self.what} {key!r} registered twice")
            self[key] = obj
            return obj

        return add if thing is None else add(thing)

