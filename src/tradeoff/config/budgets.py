"""Budgets as the catalog writes them: numbers or fractions ("8/255"), steps relative to the budget ("eps/4"),
budget sweeps (an attack whose eps is a list, one evaluation per budget named <attack>@<label>)."""

from __future__ import annotations

import re
from typing import Any

from tradeoff.core.errors import ConfigError
from tradeoff.core.spec import AttackSpec

# Sanity bounds for budgets: beyond them an attack is meaningless on [0, 1] images (L-inf eps >= 1 allows
# any image; an L2 ball of radius 64 covers a 3x32x32 cube's diagonal).
MAX_EPS = {"linf": 1.0, "l2": 64.0}


_FRACTION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:/\s*([0-9]+(?:\.[0-9]+)?)\s*)?$")


_RELATIVE = re.compile(r"^\s*eps\s*(?:([*/])\s*([0-9]+(?:\.[0-9]+)?))?\s*$")


def parse_budget(value: Any, key: str) -> float:
    """A number or a fraction string ("8/255") as a float."""
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a number or a fraction such as '8/255', got {value!r}")
    if isinstance(value, (int, float)):
        out = float(value)
    else:
        m = _FRACTION.match(str(value))
        if not m:
            raise ConfigError(f"{key}: expected a number or a fraction such as '8/255', got {value!r}")
        out = float(m.group(1)) / (float(m.group(2)) if m.group(2) else 1.0)
        if m.group(2) and float(m.group(2)) == 0:
            raise ConfigError(f"{key}: division by zero in {value!r}")
    if out < 0:
        raise ConfigError(f"{key}: must be >= 0, got {value!r}")
    return out


def parse_step(value: Any, eps: float, key: str) -> float:
    """A step size: absolute, or relative to eps ("eps/4", "eps*0.25")."""
    if isinstance(value, str):
        m = _RELATIVE.match(value)
        if m:
            op, num = m.group(1), m.group(2)
            if op is None:
                return eps
            return eps * float(num) if op == "*" else eps / float(num)
    return parse_budget(value, key)


def rel_step(step: Any, eps: float, key: str) -> float | None:
    if step is None or isinstance(step, (int, float)):
        return step
    return parse_step(step, eps, f"{key}.step_size")


def eps_label(eps: float) -> str:
    """A short, file-name-safe label of a budget: 8/255 -> '8_255', 0.3 -> '0.3', 1 -> '1'."""
    if abs(eps - round(eps)) < 1e-9:
        return f"{int(round(eps))}"
    for den in (255,):
        num = eps * den
        if abs(num - round(num)) < 1e-6:
            return f"{int(round(num))}_{den}"
    return f"{eps:g}"


def split_budget(name: str) -> tuple[str, str | None]:
    """'pgd@16_255' -> ('pgd', '16_255'); 'pgd' -> ('pgd', None)."""
    base, sep, label = name.partition("@")
    return base, (label if sep else None)


def sweep_labels(spec: "AttackSpec | dict", key: str) -> list[str] | None:
    """The budget labels of an attack whose eps is a list (as written, before any rescaling), else None."""
    raw = AttackSpec.from_dict(spec).eps
    if not isinstance(raw, tuple):
        return None
    labels = [eps_label(parse_budget(e, f"{key}.eps")) for e in raw]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"{key}.eps: budgets repeat: {list(raw)}")
    return labels
