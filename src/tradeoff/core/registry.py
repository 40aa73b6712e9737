"""The one registry style: every kind of named thing (methods, attacks, architectures, datasets, figure kinds) is a
:class:`Registry`, a dict from name to thing that things join with ``register`` (a decorator on a class or function
with a ``name``, or a call with an explicit name). Adding a method, an attack, a model, a dataset or a figure kind is
writing it and registering it; nothing else lists them.

What the configuration reads is read without PyTorch: a method's class itself (one module of tradeoff.methods, its
code importing PyTorch when it runs), the declarations of attacks (tradeoff.attacks.declared), datasets and
architectures (tradeoff.data.declared, tradeoff.models.declared), each apart from its code; the registry of the
implementations then takes only a declared name, and for a class a subclass of the declaration of that name
(datasets: their decorator, tradeoff.data.registry.dataset). The registries of methods and attacks fill themselves
when first read (tradeoff.core.plugins: every module of their package, and installed plug-ins)."""

from __future__ import annotations

from typing import Any, Callable


class Registry(dict):
    """name -> registered thing, for one kind of thing (``what``: "method", "attack", ...).

    ``discover``: what fills it (tradeoff.core.plugins.discover: every module of a package, and the installed
    plug-ins), called once, when it is first read (a name looked up, the names listed), not when it is imported: a
    plug-in that fails to load is then a user's error inside the command that reads it (one line), and a module that
    only imports the registry imports none of them."""

    def __init__(self, what: str, declarations: dict[str, Any] | None = None,
                 discover: Callable[[], None] | None = None):
        super().__init__()
        self.what = what
        #: for a registry of implementations: name -> its declaration (a class: one the implementation must
        #: subclass); nothing registers under a name not declared
        self.declarations = declarations
        self._discover = discover
        self._discovering = False

    def _filled(self) -> "Registry":
        """Itself, filled by its ``discover`` first if it has not been (a read during the discovery sees what has
        registered so far; a discovery that failed runs again at the next read)."""
        if self._discover is not None and not self._discovering:
            self._discovering = True
            try:
                self._discover()
                self._discover = None
            finally:
                self._discovering = False
        return self

    def __getitem__(self, key: str) -> Any:
        return dict.__getitem__(self._filled(), key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self._filled(), key)

    def __iter__(self):
        return dict.__iter__(self._filled())

    def __len__(self) -> int:
        return dict.__len__(self._filled())

    def get(self, key: str, default: Any = None) -> Any:
        return dict.get(self._filled(), key, default)

    def keys(self):
        return dict.keys(self._filled())

    def values(self):
        return dict.values(self._filled())

    def items(self):
        return dict.items(self._filled())

    def register(self, thing: Any = None, *, name: str | None = None) -> Any:
        """Add ``thing`` under ``name`` (default: its ``name`` attribute) and return it; without ``thing``, a
        decorator that does so. A name registered twice is an error (two modules would silently shadow each
        other)."""
        def add(obj: Any) -> Any:
            key = name if name is not None else getattr(obj, "name")
            if dict.__contains__(self, key):  # (registering runs no discovery: a module it imports registers too)
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

