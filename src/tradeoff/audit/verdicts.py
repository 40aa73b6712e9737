"""The audit's verdicts and its rule for comparing two attacks: a check's finding (:func:`finding`), the worst of
several verdicts, each group's verdict and the overall line, and :func:`compare` (attack B is *stronger* than attack A
when B's robust accuracy is lower by more than ``tolerance`` and the examples that only A leaves robust outnumber
those that only B leaves robust significantly: exact one-sided McNemar test at ``significance``; a material gap that is
not significant is a warning). Per-example robust flags are strings of ``0`` and ``1``. No PyTorch here.
"""

from __future__ import annotations

from typing import Any, Callable

from tradeoff.audit.registry import CHECKS, GROUPS, check

SEVERITY = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}
WORD = {"skip": "n/a", "pass": "pass", "warn": "warn", "fail": "fail"}


def group_of(name: str) -> str:
    """The verdict group a check counts towards: its registered group (a reported column's check, ``column <name>``,
    is convergence's)."""
    if name.startswith("column "):
        return "convergence"
    return CHECKS[name].group if name in CHECKS else "masking"


def finding(name: str, title: str, rule: str, source: str, verdict: str, summary: str, next_step: str = "",
            **numbers: Any) -> dict:
    """A check's finding as the record holds it; its next step only where it does not pass."""
    return {"name": name, "group": group_of(name), "title": title, "rule": rule, "source": source,
            "verdict": verdict, "summary": summary, "next": next_step if verdict in ("warn", "fail") else "",
            "numbers": numbers}


def check_both_norms(name: str, l2_title: str, *, group: str, **flags: bool):
    """Register the decorated ``fn(auditor, name, spec) -> finding`` twice: as the check ``name`` at the audit's
    attack, and as ``<name>-l2`` at its L2 budget (skipped, titled ``l2_title``, where the dataset has none)."""
    def add(fn: Callable[[Any, str, Any], dict]) -> Callable[[Any, str, Any], dict]:
        def at_attack(audit) -> dict:
            return fn(audit, name, audit.attack)

        def at_l2(audit) -> dict:
            if audit.l2 is None:
                return finding(f"{name}-l2", l2_title, "", "", "skip", "no L2 budget for the dataset")
            return fn(audit, f"{name}-l2", audit.l2)

        for run in (at_attack, at_l2):  # a check belongs to the module of its code
            run.__module__ = fn.__module__
        check(name, group=group, **flags)(at_attack)
        check(f"{name}-l2", group=group, **flags)(at_l2)
        return fn

    return add


def worst(verdicts) -> str:
    return max(verdicts, key=SEVERITY.__getitem__, default="skip")


def group_verdicts(checks: list[dict]) -> dict[str, str]:
    """The verdict of each group (:data:`GROUPS`): the worst of its checks'; n/a when none applies."""
    return {g: worst(c["verdict"] for c in checks if c.get("group", group_of(c["name"])) == g) for g in GROUPS}


def overall_line(groups: dict[str, str]) -> str:
    """``fail (convergence, protocol)``: the worst group verdict and the groups that give it."""
    top = worst(groups.values())
    named = [g for g, v in groups.items() if v == top and v in ("warn", "fail")]
    return WORD[top] + (f" ({', '.join(named)})" if named else "")


def accuracy(flags: str) -> float:
    return flags.count("1") / len(flags) if flags else float("nan")


def both(a: str, b: str) -> str:
    """Per example, robust under both."""
    return "".join("1" if p == "1" and q == "1" else "0" for p, q in zip(a, b))


def compare(base: str, other: str, tolerance: float, significance: float) -> tuple[str, dict]:
    """Is attack ``other`` stronger than attack ``base`` (their per-example robust flags over the same examples)?
    ``fail``: its accuracy is lower by more than ``tolerance`` and significantly so; ``warn``: lower by more than
    ``tolerance``, not significantly; else ``pass``."""
    from scipy.stats import binomtest

    only_base = sum(1 for a, b in zip(base, other) if a == "1" and b == "0")  # robust under base, broken by other
    only_other = sum(1 for a, b in zip(base, other) if a == "0" and b == "1")
    p = (float(binomtest(only_base, only_base + only_other, 0.5, alternative="greater").pvalue)
         if only_base + only_other else 1.0)
    gap = accuracy(base) - accuracy(other)
    verdict = "pass" if gap <= tolerance else ("fail" if p < significance else "warn")
    return verdict, {"gap": gap, "p": p, "only_base_robust": only_base, "only_other_robust": only_other}


def pct(v: float) -> str:
    return f"{100 * v:.1f}%"
