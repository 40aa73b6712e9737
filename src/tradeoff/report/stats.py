"""The statistics of the reports: an interval for every accuracy, paired tests between two models' accuracies, and
the tests that decide the papers' claims (:mod:`tradeoff.report.claims`).

A table's come from SciPy: a binomial proportion's Wilson score interval (``binomtest(...).proportion_ci``), and the
exact McNemar test, which is the exact binomial test of the discordant pairs: of the test examples that exactly one
of two models gets right, how many does each get (under the null, each is right on half of them); Holm's correction
is statsmodels'. A claim's tests keep the test image the unit (its outcomes under every column and seed together):
the exact McNemar test for one column, intersection-union or Holm over columns, SciPy's paired sign-flip permutation
test of per-image summed differences, a bootstrap over seeds and images, Newcombe's paired interval for a margin,
and statsmodels' normal power solver for the power figures.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
    """The two-sided p-value that two models differ in accuracy over paired outcomes: one (a, b) pair of correctness
    strings per seed (the same test examples, a's and b's models trained with that seed). One seed: the exact McNemar
    test (1.0 when no example separates them); several: the paired sign-flip test over the test examples of the seeds'
    mean outcomes (the example the unit: never each (seed, example) pair counted as an example)."""
    from scipy.stats import binomtest

    if len(pairs) > 1:
        d = outcomes([a for a, _ in pairs]) - outcomes([b for _, b in pairs])
        return float(min(1.0, 2 * min(_sign_flip_p(d.mean(axis=0)))))
    only_a, only_b = discordant(*pairs[0])
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (statsmodels' ``multipletests``), in their order: reject
    where an adjusted p-value is below ALPHA and the family's error rate stays at most ALPHA."""
    if not pvalues:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(pvalues), alpha=ALPHA, method="holm")[1]]


# ------------------------------------------------------------------------------------------ the claims' tests
#
# Outcomes are 0/1 arrays shaped (seeds, examples): one row's per-example correctness under one column, one line per
# seed (the same test examples under every seed and column). A test image is the unit: each test below keeps every
# image's outcomes together (across the columns of a claim, and across seeds), never counting an (image, column) or
# an (image, seed) pair as a sample of its own.

POWER = 0.8         # the power at which the smallest detectable difference and the images needed are stated
RESAMPLES = 2000    # bootstrap and Monte-Carlo resamples
SEED = 0            # their generator's seed: a verdict is reproducible
COMBINE = ("all", "any", "mean")


@dataclass
class Test:
    """One claim's test on paired outcomes: one-sided p-values for the claim and against it (before the Holm
    correction across claims), the estimated difference with its 95% interval, in points, and the power figures."""

    p_for: float
    p_against: float
    diff: float                 # points: row minus than (a trend: first minus last)
    lo: float
    hi: float
    images: int                 # test images
    detectable: float | None    # points: the smallest difference detected with POWER at this n (one-sided ALPHA)
    needed: int | None          # test images that the observed difference needs for POWER, where it favours the claim
    how: str                    # what was tested, one clause
    differing: int | None = None  # test images whose outcomes differ between the two sides (None: not counted)


def outcomes(bits: Sequence[str]) -> np.ndarray:
    """Per-seed correctness strings ('0'/'1') as a (seeds, examples) array."""
    lengths = {len(b) for b in bits}
    if len(lengths) != 1:
        raise ValueError(f"paired outcomes of different lengths ({sorted(lengths)})")
    return np.array([[c == "1" for c in b] for b in bits], dtype=float)


def _generator() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _weights(n: int, resamples: int = RESAMPLES) -> np.ndarray:
    """Bootstrap weights over n test examples: (resamples, n) counts, each line a resample with replacement."""
    picks = _generator().integers(0, n, size=(resamples, n)) + n * np.arange(resamples)[:, None]
    return np.bincount(picks.ravel(), minlength=resamples * n).reshape(resamples, n).astype(float)


def _boot_means(d: np.ndarray, resamples: int = RESAMPLES) -> np.ndarray:
    """Bootstrap distribution of the mean of per-example differences d (seeds, examples): test examples resampled,
    and with several seeds the seeds too (two levels: a seed is a sample of training, an example of the test set)."""
    seeds, n = d.shape
    per_seed = _weights(n, resamples) @ d.T / n            # (resamples, seeds)
    if seeds == 1:
        return per_seed[:, 0]
    pick = _generator().integers(0, seeds, size=(resamples, seeds))
    return np.take_along_axis(per_seed, pick, axis=1).mean(axis=1)


def _boot_p(samples: np.ndarray, at: float = 0.0) -> tuple[float, float]:
    """One-sided bootstrap p-values (above ``at``, below ``at``) of a bootstrap distribution."""
    k = len(samples)
    return float((np.sum(samples <= at) + 1) / (k + 1)), float((np.sum(samples >= at) + 1) / (k + 1))


def newcombe(a: np.ndarray, b: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """The difference of two paired proportions (a's accuracy minus b's, fractions) with Newcombe's (1998) hybrid
    score interval (his method 10: the Wilson intervals of both accuracies, from SciPy, joined with the correlation of
    the paired outcomes). No library offers a paired interval (statsmodels has the paired McNemar test only)."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    n = len(a)
    both, only_a, only_b = int(np.sum(a & b)), int(np.sum(a & ~b)), int(np.sum(~a & b))
    neither = n - both - only_a - only_b
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson(both + only_a, n, level)
    l2, u2 = wilson(both + only_b, n, level)
    denominator = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(denominator) if denominator else 0.0
    diff = p1 - p2
    lo = diff - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    hi = diff + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return diff, max(lo, -1.0), min(hi, 1.0)


def _newcombe_p(a: np.ndarray, b: np.ndarray, margin: float) -> tuple[float, float]:
    """One-sided p-values of a's accuracy minus b's above -margin and below -margin (fractions), by inverting
    Newcombe's interval: the one-sided level at which its bound reaches -margin."""
    from scipy.optimize import brentq

    diff = newcombe(a, b)[0]

    def p(bound: int, sign: float) -> float:
        if sign * (diff + margin) <= 0:
            return 1.0
        def gap(alpha: float) -> float:
            return sign * (newcombe(a, b, 1 - 2 * alpha)[bound] + margin)
        if gap(1e-12) > 0:
            return 1e-12
        return float(brentq(gap, 1e-12, 0.5 - 1e-12, xtol=1e-10))
    return p(1, 1.0), p(2, -1.0)


def _mcnemar_p(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """One-sided exact McNemar p-values (a more accurate, b more accurate) of one seed's paired outcomes."""
    from scipy.stats import binomtest

    only_a, only_b = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    if only_a + only_b == 0:
        return 1.0, 1.0
    return (float(binomtest(only_a, only_a + only_b, 0.5, alternative="greater").pvalue),
            float(binomtest(only_a, only_a + only_b, 0.5, alternative="less").pvalue))


def _sign_flip_p(d: np.ndarray) -> tuple[float, float]:
    """One-sided p-values (mean above 0, below 0) of the paired sign-flip permutation test over examples of
    per-example differences d (SciPy's permutation_test, flipping each image's sign: exact up to 2^10 examples that
    differ, Monte-Carlo beyond; both tails from one null distribution)."""
    from scipy.stats import permutation_test

    d = d[d != 0]
    if not len(d):
        return 1.0, 1.0
    exact = 2 ** min(len(d), 62) <= RESAMPLES
    res = permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                           vectorized=True, n_resamples=RESAMPLES, alternative="greater", rng=_generator())
    below = int(np.sum(res.null_distribution <= res.statistic + 1e-12))
    p_less = below / len(res.null_distribution) if exact else (below + 1) / (len(res.null_distribution) + 1)
    return float(res.pvalue), float(min(p_less, 1.0))


@functools.lru_cache(maxsize=64)
def _detectable_effect(n: int, alpha: float) -> float:
    """The standardized effect that a one-sided one-sample z-test at ``alpha`` detects with POWER on n images."""
    from statsmodels.stats.power import NormalIndPower

    return float(NormalIndPower().solve_power(effect_size=None, nobs1=n, alpha=alpha, power=POWER, ratio=0,
                                              alternative="larger"))


#: a mean difference (a fraction) smaller than this is a balance, not an effect (float noise of summed fractions)
TIE = 1e-9


def power_figures(d: np.ndarray, alpha: float = ALPHA) -> tuple[float | None, int | None]:
    """(the smallest difference in points that a one-sided test at ``alpha`` detects with POWER on these test
    images, the test images the observed mean difference needs for POWER, or None where it does not favour the
    claim), from per-example differences d (one per test image; the normal approximation of the paired test, from
    statsmodels' power solver, the per-example spread held at the observed). None, None where no example differs."""
    from statsmodels.stats.power import normal_sample_size_one_tail

    n, mean, sd = len(d), float(np.mean(d)), float(np.std(d, ddof=1)) if len(d) > 1 else 0.0
    if sd == 0.0:
        return None, None
    effect = _detectable_effect(n, alpha)
    # a mean of fractions (several columns) that balances to zero carries float noise: that is no effect to power
    needed = math.ceil(normal_sample_size_one_tail(mean, POWER, alpha, std_null=sd)) if mean > TIE else None
    return 100.0 * float(effect) * sd, needed


def _scores(d: np.ndarray, margin: float, what: str) -> Test:
    """Per-image differences d (seeds, examples), seeds averaged within each image: the p-values of a paired
    sign-flip test over images (with a margin: of a bootstrap over seeds and images, the null shifted to -margin),
    the interval a bootstrap over seeds and images (percentile)."""
    boot = _boot_means(d)
    if margin:
        p_for, p_against = _boot_p(boot, -margin)
        how = f"{what}, bootstrap over seeds and images, margin {100 * margin:g} points"
    else:
        p_for, p_against = _sign_flip_p(d.mean(axis=0))
        how = f"{what}, paired sign-flip test over images" + \
            (f" of {d.shape[0]} seeds' mean outcomes; interval: bootstrap over seeds and images" if len(d) > 1 else "")
    lo, hi = (float(x) for x in np.percentile(boot, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2]))
    detectable, needed = power_figures(d.mean(axis=0) + margin)
    return Test(p_for, p_against, 100 * float(np.mean(d)), 100 * lo, 100 * hi, d.shape[1], detectable, needed, how,
                _differing(d))


def paired(a: np.ndarray, b: np.ndarray, margin: float = 0.0) -> Test:
    """One column: a (seeds, examples) above b, or with a margin (fraction) not below b by more than it.
    One seed of 0/1 outcomes: the exact McNemar test (margin 0) or Newcombe's interval inverted (a margin), with
    Newcombe's interval; several seeds, or per-image scores (NROB): :func:`_scores`."""
    d = a - b
    binary = bool(np.all((a == 0) | (a == 1)) and np.all((b == 0) | (b == 1)))
    if d.shape[0] > 1 or not binary:
        return _scores(d, margin, "one column" if binary else "per-image scores")
    p_for, p_against = _newcombe_p(a[0], b[0], margin) if margin else _mcnemar_p(a[0], b[0])
    diff, lo, hi = newcombe(a[0], b[0])
    how = "exact McNemar" if not margin else f"Newcombe interval, margin {100 * margin:g} points"
    detectable, needed = power_figures(d.mean(axis=0) + margin)
    return Test(p_for, p_against, 100 * diff, 100 * lo, 100 * hi, d.shape[1], detectable, needed, how, _differing(d))


def _differing(d: np.ndarray) -> int:
    """Test images whose outcomes differ anywhere (d: differences with the images on the last axis)."""
    return int(np.sum(np.any(d.reshape(-1, d.shape[-1]) != 0, axis=0)))


def every(tests: Sequence[Test], what: str) -> Test:
    """Several tests that must all hold (several configurations of one claim): intersection-union, p = the largest
    p for the claim, Holm over them against it; the least favourable one's estimate is shown."""
    if len(tests) == 1:
        return tests[0]
    # shown: the least favourable estimate (p for minus p against: a column significantly against the claim before a
    # tie, whose p for the claim is 1 too)
    worst = max(tests, key=lambda t: t.p_for - t.p_against)
    return Test(max(t.p_for for t in tests), min(holm([t.p_against for t in tests])), worst.diff, worst.lo, worst.hi, worst.images,
                worst.detectable, worst.needed, f"every one of {len(tests)} {what} ({worst.how}; the largest p, "
                                                f"shown; against: Holm)", worst.differing)


def combined(a: np.ndarray, b: np.ndarray, combine: str, margin: float = 0.0) -> Test:
    """Several columns: a and b (seeds, columns, examples), each test image's outcomes under every column kept
    together. ``all``: every column must hold (intersection-union: p = the largest per-column p; against: Holm over
    the columns); ``any``: some column holds (Holm over the columns; against: the largest p); ``mean``: the mean over
    columns, tested on each image's summed difference (a paired sign-flip test over images, or with seeds or a
    margin a bootstrap over seeds and images)."""
    if combine not in COMBINE:
        raise ValueError(f"unknown combination {combine!r}; allowed: {list(COMBINE)}")
    if a.shape[1] == 1:
        return paired(a[:, 0, :], b[:, 0, :], margin)
    if combine in ("all", "any"):
        columns = [paired(a[:, c, :], b[:, c, :], margin) for c in range(a.shape[1])]
        if combine == "all":
            return every(columns, "columns")
        adjusted = holm([t.p_for for t in columns])
        best = columns[int(np.argmin(adjusted))]
        return Test(min(adjusted), max(t.p_against for t in columns), best.diff, best.lo, best.hi, best.images,
                    best.detectable, best.needed,
                    f"some one of {len(columns)} columns ({best.how}; Holm over them, the smallest shown)",
                    _differing(a - b))
    d = (a - b).mean(axis=1)                 # (seeds, examples): each image's difference, averaged over columns
    found = _scores(d, margin, f"the mean of {a.shape[1]} columns")
    found.differing = _differing(a - b)
    return found


def trend(cells: Sequence[np.ndarray]) -> Test:
    """A fall over columns in order (one row's (seeds, examples) outcomes per column): for, the first column above
    the last (paired, as :func:`paired`); against, some step rising (Holm over the steps)."""
    first_last = paired(cells[0], cells[-1])
    rises = [paired(later, earlier).p_for for earlier, later in zip(cells, cells[1:])]
    return Test(first_last.p_for, min(holm(rises)), first_last.diff, first_last.lo, first_last.hi,
                first_last.images, first_last.detectable, first_last.needed,
                f"first minus last column ({first_last.how}); against: a rise at some step (Holm over "
                f"{len(rises)} steps)", _differing(np.stack(cells) - cells[0][None]))


def hypervolume(points: np.ndarray) -> np.ndarray:
    """The area of the plane's [0, 1]^2 that points (..., m, 2) dominate (from the origin), per leading index."""
    order = np.argsort(-points[..., 0], axis=-1)
    x = np.take_along_axis(points[..., 0], order, axis=-1)
    y = np.maximum.accumulate(np.take_along_axis(points[..., 1], order, axis=-1), axis=-1)
    width = x - np.concatenate([x[..., 1:], np.zeros_like(x[..., :1])], axis=-1)
    return np.sum(width * y, axis=-1)


def front(a: Sequence[tuple[np.ndarray, np.ndarray]], b: Sequence[tuple[np.ndarray, np.ndarray]]) -> Test:
    """Series a's front above series b's in the clean-robust plane: each point one model's (clean, robust)
    outcomes, (seeds, examples) each, averaged over seeds. The criterion: a's points dominate a larger area of the
    plane than b's (the hypervolume from (0, 0)), tested by a bootstrap over the test images (the same images for
    every point); the difference in points of area (percent of the unit square)."""
    def stack(series):
        return np.stack([np.stack([c.mean(axis=0), r.mean(axis=0)], axis=-1) for c, r in series])   # (m, n, 2)
    pa, pb = stack(a), stack(b)
    n = pa.shape[1]
    w = _weights(n)
    boot = hypervolume(np.einsum("bn,mnk->bmk", w, pa) / n) - hypervolume(np.einsum("bn,mnk->bmk", w, pb) / n)
    diff = float(hypervolume(pa.mean(axis=1)) - hypervolume(pb.mean(axis=1)))
    p_for, p_against = _boot_p(boot)
    lo, hi = (float(x) for x in np.percentile(boot, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2]))
    return Test(p_for, p_against, 100 * diff, 100 * lo, 100 * hi, n, None, None,
                "the area each front dominates, bootstrap over the test images")
