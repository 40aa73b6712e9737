"""Typed parameters: one declaration per parameter of a method, an attack or the runtime, from which its default, its
type, range and choice checks, its scaling (epoch-valued, a learning rate) and its documentation all derive.

A method or an attack declares ``parameters = Params(Param(...), ...)``; :mod:`tradeoff.config` checks every value a
configuration gives against it before any job starts (one line naming the key, and the closest allowed values when a
name is misspelt), the classes read their values as fields of a frozen object (:meth:`Params.settings`), and
``tradeoff show`` and the documentation list them. No PyTorch here: the configuration is checked without it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import numbers
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from tradeoff.core.errors import ConfigError, did_you_mean
from tradeoff.core.ranges import Range
from tradeoff.core.ranges import check as check_range
from tradeoff.core.spec import AttackSpec, FrozenDict, attack_spec, freeze

# The kinds of value a parameter takes.
NUMBER = "number"      # int or float (not a boolean)
INTEGER = "integer"    # a whole number (its range says integer=True)
FLAG = "flag"          # true or false
TEXT = "text"          # a string; with ``choices``, one of them
SCHEDULE = "schedule"  # {epochs: [...], values: [...]}, piecewise-linear (epochs strictly increasing)
LIST = "list"          # a list of ``item`` values
MAPPING = "mapping"    # a mapping with the keys ``fields`` declares
ATTACK = "attack"      # an attack: the name of one in the catalog (resolved to its spec), or a spec
STEP = "step"          # an attack's step size: a number, a fraction ("2/255"), relative ("eps/4"), or null
KINDS = (NUMBER, INTEGER, FLAG, TEXT, SCHEDULE, LIST, MAPPING, ATTACK, STEP)

_WORDS = {NUMBER: "a number", INTEGER: "an integer", FLAG: "true or false", TEXT: "a string", SCHEDULE:
          "a schedule {epochs: [...], values: [...]}", LIST: "a list", MAPPING: "a mapping", ATTACK:
          "an attack's name (or spec)", STEP: "a step size (a number, a fraction such as '2/255', or 'eps/4')"}

#: a list of allowed names longer than this is not printed whole in a message (the closest few are)
LISTED = 24


def closest(value: Any, allowed: Iterable[Any]) -> str:
    """``did you mean 'x'? allowed: [...]`` (the closest of ``allowed``, difflib), the list cut when it is long."""
    names = [str(a) for a in dict.fromkeys(allowed)]
    guess = did_you_mean(value, names)
    guess = guess + " " if guess else ""
    listed = f"allowed: {names}" if len(names) <= LISTED else f"{len(names)} allowed"
    return guess + listed


def _number(value: Any) -> bool:
    """An int or a float (a NumPy one too), not a boolean."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"


@dataclass(frozen=True)
class Param:
    """One parameter: its name, kind (``NUMBER``, ``INTEGER``, ``FLAG``, ``TEXT``, ``SCHEDULE``, ``LIST``,
    ``MAPPING``, ``ATTACK``, ``STEP``), default, and what it may be."""

    name: str
    type: str
    default: Any = None
    meaning: str = ""
    range: Range | None = None          # a number's (every entry's of a list, every value's of a schedule)
    choices: tuple = ()                 # a TEXT's (each entry's of a LIST of TEXT) allowed values
    nullable: bool = False              # null allowed (off, or "not set")
    optional: bool = False              # off by default: enters a run's settings only when the run sets it, so
    #                                     declaring one changes no other run's settings (nor retrains it)
    epochs: bool = False                # measured in epochs: a smaller scale rescales it with the run's length
    lr: bool = False                    # a learning rate: scaled with the run's (scale_map.lr_factor)
    observer: bool = False              # observes training without changing it (runs that differ only in it
    #                                     share one training job)
    item: str | None = None             # a LIST's entries' kind
    nonempty: bool = False              # a LIST: at least one entry
    distinct: bool = False              # a LIST: no entry twice
    fields: tuple["Param", ...] = ()    # a MAPPING's keys
    required: bool = False              # a field of a MAPPING that must be given

    def __post_init__(self) -> None:
        if self.type not in KINDS:
            raise ValueError(f"parameter {self.name!r}: unknown kind {self.type!r}; allowed: {list(KINDS)}")
        if (self.type == INTEGER or self.item == INTEGER) and (self.range is None or not self.range.integer):
            object.__setattr__(self, "range", dataclasses.replace(self.range or Range(), integer=True))
        if self.optional:
            object.__setattr__(self, "nullable", True)

    def typed(self, value: Any) -> Any:
        """A (frozen) value as its settings hold it: a resolved attack as an AttackSpec (tradeoff.core.spec), inside a
        mapping too."""
        if self.type == ATTACK:
            return attack_spec(value)
        if self.type == MAPPING and isinstance(value, Mapping) and any(f.type == ATTACK for f in self.fields):
            kinds = {f.name: f for f in self.fields}
            return FrozenDict((k, kinds[k].typed(v) if k in kinds else v) for k, v in value.items())
        return value

    def but(self, **changes: Any) -> "Param":
        """The same parameter with other settings (a subclass's other default)."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """What the parameter may be, in words (messages, documentation)."""
        if self.type == LIST:
            what = f"a {'non-empty ' if self.nonempty else ''}list of " + (
                f"values from {list(self.choices)}" if self.choices else
                {NUMBER: "numbers", INTEGER: "integers", TEXT: "strings"}.get(self.item or "", "values"))
            if self.range is not None and not self.choices:
                what += f" (each {self.range.describe()})"
        elif self.choices:
            what = f"one of {list(self.choices)}"
        elif self.range is not None and self.type in (NUMBER, INTEGER):
            what = self.range.describe().removesuffix(" or null")
        elif self.type == MAPPING:
            what = "{" + ", ".join(f"{f.name}: ..." for f in self.fields) + "}"
        else:
            what = _WORDS[self.type]
        return ("null or " if self.nullable else "") + what

    def check(self, value: Any, key: str) -> None:
        """Raise ConfigError ``"<key>: must be ..., got ..."`` (one line) when ``value`` is not one of this
        parameter's."""
        if value is None:
            if self.nullable:
                return
            raise ConfigError(f"{key}: must be {self.describe()}, got null")
        wrong = ConfigError(f"{key}: must be {self.describe()}, got {value!r}" +
                            (f" ({self.meaning})" if self.meaning else ""))
        kind = self.type
        if kind in (NUMBER, INTEGER):
            if not _number(value):
                raise wrong
            self._range(value if isinstance(value, (int, float)) else float(value), key)
        elif kind == FLAG:
            if not isinstance(value, bool):
                raise wrong
        elif kind == TEXT:
            if not isinstance(value, str):
                raise wrong
            self._choice(value, key)
        elif kind == STEP:
            if not (_number(value) or isinstance(value, str)):
                raise wrong
        elif kind == ATTACK:
            if not isinstance(value, (str, dict, AttackSpec)):
                raise wrong
        elif kind == SCHEDULE:
            if not (isinstance(value, dict) and set(value) == {"epochs", "values"}
                    and all(isinstance(value[k], (list, tuple)) and value[k] for k in ("epochs", "values"))):
                raise wrong
            for part in ("epochs", "values"):
                for i, v in enumerate(value[part]):
                    if not _number(v):
                        raise ConfigError(f"{key}.{part}[{i}]: must be a number, got {v!r}")
            epochs = value["epochs"]
            if len(epochs) != len(value["values"]):
                raise ConfigError(f"{key}: {len(epochs)} breakpoints (epochs) but {len(value['values'])} values; "
                                  "they must have the same length")
            if any(b <= a for a, b in zip(epochs, epochs[1:])):
                raise ConfigError(f"{key}.epochs: breakpoints must be strictly increasing, got {epochs}")
            self._range(value, key)
        elif kind == LIST:
            if not isinstance(value, (list, tuple)) or (self.nonempty and not value):
                raise wrong
            if self.distinct and len({repr(v) for v in value}) != len(value):
                raise ConfigError(f"{key}: must be {self.describe()} without repeats, got {value!r}")
            entry = Param(self.name, self.item or NUMBER, range=self.range, choices=self.choices,
                          meaning=self.meaning)
            for i, v in enumerate(value):
                entry.check(v, f"{key}[{i}]")
        elif kind == MAPPING:
            if not isinstance(value, dict):
                raise wrong
            Params(*self.fields).check(value, key, what=f"key of {self.name}")

    def _range(self, value: Any, key: str) -> None:
        if self.range is not None:
            rng = self.range if not self.meaning or self.range.meaning else \
                dataclasses.replace(self.range, meaning=self.meaning)
            try:
                check_range(value, rng, key)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None

    def _choice(self, value: str, key: str) -> None:
        if self.choices and value not in self.choices:
            guess = did_you_mean(value, self.choices, n=1, cutoff=0.5)
            raise ConfigError(f"{key}: must be one of {list(self.choices)}, got {value!r}"
                              + (f"; {guess}" if guess else ""))


@dataclass(frozen=True)
class Params:
    """The parameters of one thing (a method, an attack, the runtime), in declaration order."""

    items: tuple[Param, ...] = ()

    def __init__(self, *params: Param):
        names = [p.name for p in params]
        if len(set(names)) != len(names):
            raise ValueError(f"parameters declared twice: {sorted({n for n in names if names.count(n) > 1})}")
        object.__setattr__(self, "items", tuple(params))

    def __iter__(self):
        return iter(self.items)

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.items)

    def __getitem__(self, name: str) -> Param:
        for p in self.items:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.items]

    def extend(self, *params: Param, **defaults: Any) -> "Params":
        """These parameters with ``params`` added (one of the same name replaces it, in its place) and the given
        ``defaults`` changed: a subclass's parameters."""
        new = {p.name: p for p in params}
        unknown = set(defaults) - set(self.names) - set(new)
        if unknown:
            raise ValueError(f"defaults for undeclared parameters {sorted(unknown)}")
        out = [new.pop(p.name, p) for p in self.items] + list(new.values())
        return Params(*(p.but(default=defaults[p.name]) if p.name in defaults else p for p in out))

    def without(self, *names: str) -> "Params":
        return Params(*(p for p in self.items if p.name not in names))

    def defaults(self) -> dict[str, Any]:
        """Every parameter that is not optional with its default (copies), in declaration order."""
        return {p.name: copy.deepcopy(p.default) for p in self.items if not p.optional}

    def named(self, **flag: bool) -> tuple[str, ...]:
        """The names of the parameters with these settings, e.g. ``named(epochs=True)``, ``named(type=ATTACK)``."""
        return tuple(p.name for p in self.items if all(getattr(p, k) == v for k, v in flag.items()))

    def nested(self, kind: str) -> tuple[str, ...]:
        """``"param.field"`` of every field of this kind inside a mapping parameter (an attack named in it)."""
        return tuple(f"{p.name}.{f.name}" for p in self.items for f in p.fields if f.type == kind)

    def check(self, values: dict, key: str, *, what: str = "parameter") -> None:
        """Check a mapping of values (ConfigError naming ``<key>.<name>`` on the first problem): every key is
        declared (else the closest names), every required one given, every value of its parameter's kind, range
        and choices."""
        for name in values:
            if name not in self:
                raise ConfigError(f"{key}.{name}: unknown {what}; {closest(name, self.names)}")
        for p in self.items:
            if p.name in values:
                p.check(values[p.name], f"{key}.{p.name}")
            elif p.required:
                raise ConfigError(f"{key}.{p.name}: required ({key.rpartition('.')[2]} is "
                                  f"{Param(p.name, MAPPING, fields=self.items).describe()})")

    def settings(self, values: dict, key: str) -> Any:
        """The values, checked, as a frozen object whose fields are the parameters (a missing one takes its
        default; ``name`` is ignored: a method's spec holds it), every value deep-frozen (tuples, FrozenDicts:
        tradeoff.core.spec.freeze)."""
        given = {k: v for k, v in values.items() if k != "name"}
        self.check(given, key)
        return self._frozen(**{p.name: p.typed(freeze(given[p.name] if p.name in given else p.default))
                               for p in self.items})

    @functools.cached_property
    def _frozen(self) -> type:
        return dataclasses.make_dataclass("Settings", [(p.name, Any, field(default=None)) for p in self.items],
                                          frozen=True)

    def document(self) -> list[str]:
        """One line per parameter: name, default, what it may be, and what it means."""
        out = []
        for p in self.items:
            flags = [w for w, on in (("optional", p.optional), ("epoch-valued", p.epochs),
                                     ("learning rate", p.lr), ("observer", p.observer)) if on]
            default = "off" if p.optional else repr(p.default)
            out.append(f"{p.name} = {default}: {p.describe()}" + (f" [{', '.join(flags)}]" if flags else "")
                       + (f"; {p.meaning}" if p.meaning else ""))
        return out
