"""The statistics of a table: an interval for every accuracy, and paired tests between two models' accuracies.

Both come from SciPy: a binomial proportion's Wilson score interval (``binomtest(...).proportion_ci``), and the
exact McNemar test, which is the exact binomial test of the discordant pairs: of the test examples that exactly one
of two models gets right, how many does each get (under the null, each is right on half of them).
"""

from __future__ import annotations

from collections.abc import Sequence

LEVEL = 0.95   # confidence level of every interval
ALPHA = 0.05   # significance level of every test


def wilson(correct: int, examples: int, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval of ``correct`` successes in ``examples`` trials, as fractions."""
    from scipy.stats import binomtest

    if examples <= 0:
        raise ValueError("an interval needs at least one example")
    ci = binomtest(int(correct), int(examples)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def discordant(a: str, b: str) -> tuple[int, int]:
    """(examples only ``a`` gets right, examples only ``b`` gets right) of two per-example correctness strings of
    '0' and '1' over the same test examples."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes of different lengths ({len(a)} and {len(b)})")
    only_a = sum(1 for x, y in zip(a, b) if x == "1" and y == "0")
    only_b = sum(1 for x, y in zip(a, b) if x == "0" and y == "1")
    return only_a, only_b


def mcnemar(pairs: Sequence[tuple[str, str]]) -> float:
    """The two-sided p-value of the exact McNemar test of two models over paired outcomes: one (a, b) pair of
    correctness strings per seed (the same test examples, a's and b's models trained with that seed), pooled. 1.0
    when no example separates them."""
    from scipy.stats import binomtest

    only_a, only_b = pooled(pairs)
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def pooled(pairs: Sequence[tuple[str, str]]) -> tuple[int, int]:
    """The discordant counts of paired outcomes (one pair per seed), summed over the pairs."""
    only_a = only_b = 0
    for a, b in pairs:
        x, y = discordant(a, b)
        only_a, only_b = only_a + x, only_b + y
    return only_a, only_b


def mcnemar_one_sided(pairs: Sequence[tuple[str, str]]) -> float:
    """The one-sided p-value of the exact McNemar test that model a is more accurate than model b (paired outcomes as
    :func:`mcnemar`): of the discordant examples, a gets more right than half. 1.0 when none separates them."""
    from scipy.stats import binomtest

    only_a, only_b = pooled(pairs)
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5, alternative="greater").pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (statsmodels' ``multipletests``), in their order: reject
    where an adjusted p-value is below ALPHA and the family's error rate stays at most ALPHA."""
    if not pvalues:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(pvalues), alpha=ALPHA, method="holm")[1]]
