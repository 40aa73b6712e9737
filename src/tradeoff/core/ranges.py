"""What a numeric parameter may be: the ``range`` of a parameter's one declaration (tradeoff.core.params.Param), checked when
the configuration is resolved, before any job starts. A range applies to a number, to every entry of a list, and to
every value of a schedule (``{epochs: [...], values: [...]}``). Every number must be finite (no ``.nan``, no
``.inf``). No PyTorch here: the configuration is checked without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False      # low itself excluded
    high_open: bool = False     # high itself excluded
    integer: bool = False
    nullable: bool = False      # None (off, or "not set") allowed
    meaning: str = ""           # what the parameter is, for the message

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        lo, hi = _fmt(self.low), _fmt(self.high)
        if self.low == -math.inf and self.high == math.inf:
            text = f"a finite {'integer' if self.integer else 'number'}"
        elif self.high == math.inf:
            text = f"{kind} {'>' if self.low_open else '>='} {lo}"
        elif self.low == -math.inf:
            text = f"{kind} {'<' if self.high_open else '<='} {hi}"
        else:
            text = f"{kind} in {'(' if self.low_open else '['}{lo}, {hi}{')' if self.high_open else ']'}"
        return text + (" or null" if self.nullable else "")

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is out of range, or None when it is fine."""
        if value is None:
            return None if self.nullable else f"must be {self.describe()}, got null"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be {self.describe()}, got {value!r}"
        if not math.isfinite(value):
            return f"must be a finite number ({self.describe()}), got {value!r}"
        if self.integer and int(value) != value:
            return f"must be {self.describe()}, got {value!r}"
        below = value <= self.low if self.low_open else value < self.low
        above = value >= self.high if self.high_open else value > self.high
        if below or above:
            return f"must be {self.describe()}, got {value!r}"
        return None


def _fmt(x: float) -> str:
    return f"{x:g}"


def at_least(low: float, **kw) -> Range:
    return Range(low=low, **kw)


def positive(**kw) -> Range:
    return Range(low=0.0, low_open=True, **kw)


def between(low: float, high: float, **kw) -> Range:
    return Range(low=low, high=high, **kw)


def count(low: int = 1, **kw) -> Range:
    """A number of steps, restarts, queries, classes: an integer >= low."""
    return Range(low=low, integer=True, **kw)


PROBABILITY = Range(low=0.0, high=1.0)


def check(value: Any, rng: Range, key: str) -> None:
    """Raise ValueError ``"<key>: must be ..., got ..."`` when ``value`` (a number, a list of numbers or a schedule) is
    out of ``rng``."""
    if isinstance(value, dict) and "values" in value:  # a schedule: its values (its epochs are checked as epochs)
        for i, v in enumerate(value["values"]):
            check(v, rng, f"{key}.values[{i}]")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            check(v, rng, f"{key}[{i}]")
        return
    problem = rng.problem(value)
    if problem:
        raise ValueError(f"{key}: {problem}" + (f" ({rng.meaning})" if rng.meaning else ""))


def nonfinite(value: Any, key: str = "") -> str | None:
    """The key of the first number that is not finite (NaN, infinity) anywhere in a configuration tree, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return key or "(top level)"
    if isinstance(value, dict):
        for k, v in value.items():
            found = nonfinite(v, f"{key}.{k}" if key else str(k))
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = nonfinite(v, f"{key}[{i}]")
            if found:
                return found
    return None
