"""The statistics of the reports: an interval for every accuracy, paired tests between two models' accuracies, and
the tests that decide the papers' claims (:mod:`tradeoff.report.claims`).

A table's come from SciPy: a binomial proportion's Wilson score interval (``binomtest(...).proportion_ci``), and the
exact McNemar test, which is the exact binomial test of the discordant pairs: of the test examples that exactly one
of two models gets right, how many does each get (under the null, each is right on half of them); Holm's step-down
correction (the same numbers as statsmodels' ``multipletests(method="holm")``, a test checks it).

A claim's tests (below the line) keep the test image the unit (its outcomes under every column and seed together)
and, where a scale trains several seeds, the training run too: each comparison is a leaf :class:`Test`
(:func:`paired`), and leaves combine into the claim's test by the claim's rule (:func:`every`, :func:`some`,
:func:`trend`). The power figures (:func:`detectable`, :func:`needed`) are those of that whole procedure at the level
the claim faces (its Holm level in its paper's family: :func:`holm_level`), by a normal model of every leaf's
statistic and a Monte-Carlo over their joint distribution; ``tests/test_claims_power.py`` plants the stated
difference and finds the procedure's power.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

LEVEL = 0.95   # confidence level of every interval
ALPHA = 0.05   # significance level of every test


def wilson(correct: int, examples: int, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval of ``correct`` successes in ``examples`` trials, as fractions."""
    if examples <= 0:
        raise ValueError("an interval needs at least one example")
    return _wilson_ci(int(correct), int(examples), float(level))


@functools.lru_cache(maxsize=None)
def _wilson_ci(correct: int, examples: int, level: float) -> tuple[float, float]:
    """:func:`wilson`, once per (correct, examples, level): a build asks for the same few thousand intervals again
    and again (every cell of every table, the tidy file, the figures), and SciPy's ``binomtest`` also computes a
    p-value it does not need each time."""
    from scipy.stats import binomtest

    ci = binomtest(correct, examples).proportion_ci(confidence_level=level, method="wilson")
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
    """Holm's step-down adjustment of a family of p-values, in their order: the i-th smallest becomes the largest of
    (m - j + 1) p_(j) over j <= i, at most 1. Reject where an adjusted p-value is below ALPHA: the family's error
    rate stays at most ALPHA. (statsmodels' ``multipletests(method="holm")`` gives the same numbers; it is not called
    here because it runs the garbage collector on every call, a tenth of a second, and the claims' simulations call
    this thousands of times.)"""
    p = np.asarray(list(pvalues), dtype=float)
    if not len(p):
        return []
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    out = np.empty(len(p))
    out[order] = adjusted
    return [float(x) for x in out]


def holm_level(others: Sequence[float], family: int, alpha: float = ALPHA) -> float:
    """The level a claim's own p-value must fall below for Holm's step-down over ``family`` claims to reject it,
    given the other claims' p-values: alpha / (family - k), where k of the others are rejected before it (the k
    smallest, each below alpha over its step's count). alpha / family where none of the others holds."""
    k = 0
    for p in sorted(others):
        if p * (family - k) >= alpha:
            break
        k += 1
    return alpha / max(family - k, 1)


# ------------------------------------------------------------------------------------------ the claims' tests
#
# Outcomes are arrays shaped (seeds, examples): one row's per-example correctness (0/1, or an NROB score in [0, 1])
# under one column, one line per seed (the same test examples under every seed and column). A test image is the unit
# (its outcomes under every column and seed stay together); with several seeds, so is the training run: a seed's
# outcomes are one draw of training, and its images are the same images as every other seed's.

POWER = 0.8         # the power at which the smallest detectable difference and the images needed are stated
RESAMPLES = 2000    # bootstrap resamples (fronts) and Monte-Carlo sign flips (scores on no lattice)
DRAWS = 4000        # Monte-Carlo draws of the power of a claim of several leaves (common random numbers)
SEED = 0            # their generator's seed: a verdict is reproducible
COMBINE = ("all", "any", "mean")
#: a mean difference (a fraction) smaller than this is a balance, not an effect (float noise of summed fractions)
TIE = 1e-9
#: the smallest p-value reported by an exact sign-flip test (its distribution is computed by an FFT, exact to about
#: 1e-13 of the total probability: below this the tail is noise)
P_FLOOR = 1e-12


@dataclass
class Test:
    """One test of a claim, or one leaf of it. p-values are one-sided, for the claim and against it, before the Holm
    correction across claims; the estimate (``diff``) and its two-sided 95% interval (``lo``, ``hi``) are in points
    (row minus than: a trend, first minus last; a front, the mean gap between the fronts in robust accuracy at
    matched clean accuracy). A combined test (``rule`` "all", "any" or "trend") keeps its leaves in ``parts`` and
    shows the estimate of the leaf its p-value for the claim comes from (:func:`decisive`)."""

    p_for: float
    p_against: float
    diff: float                 # points
    lo: float
    hi: float
    images: int                 # test images
    detectable: float | None = None    # points: the smallest true difference the whole procedure detects with POWER
    needed: int | None = None   # test images the observed difference needs for POWER (the whole procedure)
    how: str = ""               # what was tested, one clause
    differing: int | None = None  # test images whose outcomes differ between the two sides (None: not counted)
    seeds: int = 1              # training runs (seeds) per row behind the estimate
    label: str = ""             # which pair of rows and column the estimate is of
    margin: float = 0.0         # points: a not_worse leaf holds where the difference is above -margin
    rule: str = "leaf"          # "leaf", or how ``parts`` combine: "all", "any", "trend"
    what: str = ""              # what the parts are ("columns", "pairs of rows", ...)
    parts: list["Test"] = field(default_factory=list)
    # the leaf's normal model, for the power figures (fractions): the null standard error's part that more test
    # images shrink (se_images) and the part between seeds that they do not (se_seeds); m2, the mean squared
    # per-image difference where the test's null spread comes from it (sign-flip tests: the alternative's spread is
    # then m2 - delta^2; for 0/1 outcomes m2 is the share of discordant images); df, the t distribution's degrees of
    # freedom; key and psi (or reps), which images and each image's (or each bootstrap resample's) contribution, for
    # the correlation between leaves
    # the power model of a leaf: "mcnemar" (the exact test's exact power), "margin" (the t-test of a not_worse leaf on
    # 0/1 outcomes, its spread a function of the difference), "crossed" (the crossed model's Satterthwaite t-test,
    # simulated from its mean squares), "normal"
    model: str = "normal"
    se_images: float = 0.0
    se_seeds: float = 0.0
    m2: float | None = None
    df: float | None = None
    squares: tuple | None = None   # "crossed": the mean squares (between seeds, between images, residual)
    cells: tuple | None = None     # "margin": (share of discordant images, share both get right)
    share: float = 0.0             # "margin": the margin's share of than's accuracy
    key: str = ""
    psi: np.ndarray | None = field(default=None, repr=False)
    reps: np.ndarray | None = field(default=None, repr=False)


def outcomes(bits: Sequence[str]) -> np.ndarray:
    """Per-seed correctness strings ('0'/'1') as a (seeds, examples) array."""
    lengths = {len(b) for b in bits}
    if len(lengths) != 1:
        raise ValueError(f"paired outcomes of different lengths ({sorted(lengths)})")
    return (np.frombuffer("".join(bits).encode(), dtype=np.uint8).reshape(len(bits), -1) == ord("1")).astype(float)


def _generator() -> np.random.Generator:
    return np.random.default_rng(SEED)


# ------------------------------------------------------------------------------------------ one leaf


def _z(level: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(level))


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval (the formula SciPy's ``proportion_ci(method="wilson")`` computes), for a z."""
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def newcombe(a: np.ndarray, b: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """The difference of two paired proportions (a's accuracy minus b's, fractions) with Newcombe's (1998) hybrid
    score interval (his method 10: the Wilson intervals of both accuracies joined with the correlation of the paired
    outcomes). No library offers a paired interval (statsmodels has the paired McNemar test only)."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    n = len(a)
    both, only_a, only_b = int(np.sum(a & b)), int(np.sum(a & ~b)), int(np.sum(~a & b))
    neither = n - both - only_a - only_b
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    z = _z(1 - (1 - level) / 2)
    l1, u1 = _wilson(both + only_a, n, z)
    l2, u2 = _wilson(both + only_b, n, z)
    denominator = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(denominator) if denominator else 0.0
    diff = p1 - p2
    lo = diff - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    hi = diff + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return diff, max(lo, -1.0), min(hi, 1.0)


def _lattice(d: np.ndarray, largest: int = 1000) -> int | None:
    """The smallest L <= largest with every d * L an integer (a difference of 0/1 outcomes: 1; a mean over C
    columns: C; NROB scores over K corrupted copies: K), or None."""
    for L in range(1, largest + 1):
        x = d * L
        if np.all(np.abs(x - np.rint(x)) < 1e-6):
            return L
    return None


def _sign_flip_exact(k: np.ndarray, observed: int) -> tuple[float, float]:
    """One-sided p-values (above, below) of the sign-flip test of a sum of integer magnitudes k (the images'
    differences times the lattice's L, zeros dropped) whose observed signed sum is ``observed``: the exact null
    distribution of sum(s_i k_i), s_i = +-1 fair coins, from its generating function prod (1 + x^k_i) / 2 evaluated
    at the roots of unity (one FFT)."""
    total = int(k.sum())
    values, counts = np.unique(k, return_counts=True)
    size = total + 1
    j = np.arange(size)
    # prod over magnitudes of cos(pi j v / size)^count, with its sign, times the phase of x^(total / 2)
    log_abs, negative = np.zeros(size), np.zeros(size, dtype=np.int64)
    for v, c in zip(values, counts):
        cos = np.cos(np.pi * j * v / size)
        with np.errstate(divide="ignore"):
            log_abs += c * np.log(np.abs(cos))
        negative += c * (cos < 0)
    value = np.exp(log_abs) * np.where(negative % 2, -1.0, 1.0) * np.exp(1j * np.pi * j * total / size)
    pmf = np.maximum(np.fft.fft(value).real / size, 0.0)        # P(T = t), T = number of + signs weighted
    t_obs = (observed + total) // 2
    above, below = float(pmf[t_obs:].sum()), float(pmf[:t_obs + 1].sum())
    return min(max(above, P_FLOOR), 1.0), min(max(below, P_FLOOR), 1.0)


def _sign_flip_p(d: np.ndarray) -> tuple[float, float]:
    """One-sided p-values (mean above 0, below 0) of the paired sign-flip permutation test over images of
    per-image differences d: exact where the differences lie on a lattice (0/1 outcomes, their means over columns,
    NROB scores: :func:`_sign_flip_exact`, for 0/1 outcomes the exact McNemar test), else SciPy's
    ``permutation_test`` with RESAMPLES Monte-Carlo flips."""
    d = np.asarray(d, dtype=float)
    d = d[np.abs(d) > TIE]
    if not len(d):
        return 1.0, 1.0
    L = _lattice(d)
    if L is not None and L * np.abs(d).sum() <= 5e7:
        k = np.rint(np.abs(d) * L).astype(np.int64)
        if L == 1:                                # the exact McNemar test: the binomial tails (SciPy's)
            from scipy.special import bdtr, bdtrc

            up, n = int(np.sum(d > 0)), len(d)
            return float(bdtrc(up - 1, n, 0.5)) if up > 0 else 1.0, float(bdtr(up, n, 0.5))
        return _sign_flip_exact(k, int(np.rint(d.sum() * L)))
    from scipy.stats import permutation_test

    res = permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                           vectorized=True, n_resamples=RESAMPLES, alternative="greater", rng=_generator())
    below = int(np.sum(res.null_distribution <= res.statistic + 1e-12))
    return float(res.pvalue), float(min((below + 1) / (len(res.null_distribution) + 1), 1.0))


def _t_p(t: float, df: float | None) -> tuple[float, float]:
    from scipy.special import ndtr, stdtr

    if df is None or df > 1e6:
        return float(ndtr(-t)), float(ndtr(t))
    return float(stdtr(df, -t)), float(stdtr(df, t))


def _t_quantile(level: float, df: float | None) -> float:
    from scipy.special import stdtrit

    return _z(level) if df is None or df > 1e6 else float(stdtrit(df, level))


def mean_squares(d: np.ndarray) -> tuple[float, float, float, float]:
    """The mean of per-(seed, image) differences d (seeds, images) and the mean squares of the two-way ANOVA without
    replication (seeds x images): (mean, between seeds, between images, residual)."""
    s, n = d.shape
    mean = float(d.mean())
    by_seed, by_image = d.mean(axis=1), d.mean(axis=0)
    ms_seed = n * float(np.sum((by_seed - mean) ** 2)) / (s - 1)
    ms_image = s * float(np.sum((by_image - mean) ** 2)) / (n - 1)
    resid = d - by_seed[:, None] - by_image[None, :] + mean
    ms_resid = float(np.sum(resid ** 2)) / ((s - 1) * (n - 1))
    return mean, ms_seed, ms_image, ms_resid


def crossed_variance(ms_seed, ms_image, ms_resid, s: int, n):
    """The variance of the mean under the crossed random-effects model d = mu + seed + image + residual (the seeds
    draws of training, the images draws of the test set, every seed measured on the same images), from the mean
    squares (numbers or arrays): (its part between seeds, its part that more images shrink, Satterthwaite's degrees of
    freedom). Var = sigma_seed^2 / s + sigma_image^2 / n + sigma_e^2 / (s n), each component from its mean square,
    components below zero taken as zero (then the variance is the larger mean square's alone)."""
    ms_seed, ms_image, ms_resid, n = (np.asarray(x, dtype=float) for x in (ms_seed, ms_image, ms_resid, n))
    sn = s * n
    seed_part = np.maximum(ms_seed - ms_resid, 0.0) / sn
    image_part = (np.maximum(ms_image - ms_resid, 0.0) + ms_resid) / sn
    use_s, use_i = ms_seed > ms_resid, ms_image > ms_resid
    # Satterthwaite: the mean squares actually combined, each with its degrees of freedom
    c_s = np.where(use_s, ms_seed / sn, 0.0)
    c_i = np.where(use_i, ms_image / sn, 0.0)
    c_e = np.where(use_s & use_i, -ms_resid / sn, np.where(~use_s & ~use_i, ms_resid / sn, 0.0))
    denominator = c_s ** 2 / (s - 1) + c_i ** 2 / (n - 1) + c_e ** 2 / ((s - 1) * (n - 1))
    var = seed_part + image_part
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, var * var / np.where(denominator > 0, denominator, 1.0), np.inf)
    return seed_part, image_part, np.maximum(df, 1.0)


def crossed(d: np.ndarray) -> tuple[float, float, float, float]:
    """(mean, the variance's part between seeds, its part that more images shrink, Satterthwaite's degrees of
    freedom) of per-(seed, image) differences d (seeds, images) under the crossed random-effects model
    (:func:`crossed_variance`)."""
    mean, ms_seed, ms_image, ms_resid = mean_squares(d)
    seed_part, image_part, df = crossed_variance(ms_seed, ms_image, ms_resid, d.shape[0], d.shape[1])
    return mean, float(seed_part), float(image_part), float(df)


def paired(a: np.ndarray, b: np.ndarray, share: float = 0.0, label: str = "", key: str = "") -> Test:
    """One comparison: a's outcomes (seeds, images) above b's, or with a margin (``share`` > 0, a not_worse claim)
    not below b by more than ``share`` of b's accuracy (the margin, in points, is that share of b's measured
    accuracy).

    One seed: the exact McNemar test (0/1 outcomes) or the exact sign-flip test over images (scores; means over
    columns) with Newcombe's paired interval or the normal one; with a margin, the t-test over images of each image's
    a - (1 - share) b (the difference's interval is that of this contrast, less the margin: the claim holds where
    its lower bound is above -margin). Several seeds: the crossed random-effects model of the differences (seeds and
    images both random; a t-test with Satterthwaite's degrees of freedom), so that the variation between training
    runs counts: five seeds whose per-seed differences scatter around zero are no evidence, however many images."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    seeds, n = a.shape
    d = a - b
    contrast = a - (1.0 - share) * b if share else d
    margin = share * float(b.mean())
    binary = bool(np.all((a == 0) | (a == 1)) and np.all((b == 0) | (b == 1)))
    differing = _differing(d)
    common = dict(images=n, differing=differing, seeds=seeds, label=label, margin=100 * margin, key=key)
    psi = contrast.mean(axis=0) - float(contrast.mean())
    if seeds > 1:
        squares = mean_squares(contrast)
        mean = squares[0]
        seed_part, image_part, df = (float(x) for x in crossed_variance(*squares[1:], seeds, n))
        se = math.sqrt(seed_part + image_part)
        p_for, p_against = _t_p(mean / se, df) if se > 0 else (1.0, 1.0)
        half = _t_quantile(1 - (1 - LEVEL) / 2, df) * se
        diff = float(d.mean())
        how = (f"crossed random-effects model over {seeds} seeds and {n:,} images (t-test, Satterthwaite's "
               f"{df:.1f} degrees of freedom)" + (f", margin {100 * share:g}% of than's accuracy" if share else ""))
        return Test(p_for, p_against, 100 * diff, 100 * (mean - half - margin), 100 * (mean + half - margin),
                    how=how, model="crossed", se_images=math.sqrt(image_part), se_seeds=math.sqrt(seed_part),
                    df=df, psi=psi, squares=squares[1:], **common)
    c = contrast[0]
    if share:
        mean, sd = float(c.mean()), float(c.std(ddof=1))
        se = sd / math.sqrt(n)
        p_for, p_against = _t_p(mean / se, n - 1) if se > 0 else ((0.0, 1.0) if mean > 0 else (1.0, 0.0))
        half = _t_quantile(1 - (1 - LEVEL) / 2, n - 1) * se
        cells = ((float(np.mean(a[0] != b[0])), float(np.mean((a[0] == 1) & (b[0] == 1)))) if binary else None)
        return Test(p_for, p_against, 100 * float(d.mean()), 100 * (mean - half - margin),
                    100 * (mean + half - margin),
                    how=f"t-test over images of a - (1 - {share:g}) b, margin {100 * share:g}% of than's accuracy",
                    model="margin" if binary else "normal", se_images=se, df=n - 1, psi=psi, cells=cells,
                    share=share, **common)
    p_for, p_against = _sign_flip_p(c)
    m2 = float(np.mean(c * c))
    if binary:
        diff, lo, hi = newcombe(a[0], b[0])
        how = "exact McNemar test, Newcombe's paired interval"
    else:
        diff = float(c.mean())
        half = _z(1 - (1 - LEVEL) / 2) * float(c.std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0
        lo, hi = diff - half, diff + half
        how = ("exact sign-flip test over images" if _lattice(c[np.abs(c) > TIE]) else
               f"sign-flip test over images ({RESAMPLES:,} Monte-Carlo flips)") + ", normal interval"
    # a sign-flip test's null spread is the images' mean squared difference, uncentred: so is its correlation with
    # another leaf's (the alternative holds each image's discordance, as the power figures do)
    return Test(p_for, p_against, 100 * diff, 100 * lo, 100 * hi, how=how, model="mcnemar" if binary else "normal",
                se_images=math.sqrt(m2 / n), m2=m2, psi=c, **common)


def _differing(d: np.ndarray) -> int:
    """Test images whose outcomes differ anywhere (d: differences with the images on the last axis)."""
    return int(np.sum(np.any(d.reshape(-1, d.shape[-1]) != 0, axis=0)))


# ------------------------------------------------------------------------------------------ combining leaves


def every(parts: Sequence[Test], what: str) -> Test:
    """Every part must hold (columns under ``all``, pairs of rows, tables, planes): intersection-union, the claim's p
    = the largest p of its parts; against it, Holm over the parts (some part significantly against)."""
    if len(parts) == 1:
        return parts[0]
    return _node("all", parts, max(t.p_for for t in parts), min(holm([t.p_against for t in parts])),
                 f"every one of {len(parts)} {what} (intersection-union: the largest p; against: Holm)", what)


def some(parts: Sequence[Test], what: str) -> Test:
    """Some part holds (columns under ``any``): Holm over the parts (the claim's p = the smallest adjusted p);
    against it, every part against (the largest p)."""
    if len(parts) == 1:
        return parts[0]
    return _node("any", parts, min(holm([t.p_for for t in parts])), max(t.p_against for t in parts),
                 f"some one of {len(parts)} {what} (Holm over them; against: the largest p)", what)


def _node(rule: str, parts: Sequence[Test], p_for: float, p_against: float, how: str, what: str) -> Test:
    shown = decisive(Test(p_for, p_against, 0, 0, 0, 0, rule=rule, parts=list(parts)), "for")
    counted = [t.differing for t in parts]
    return replace(shown, p_for=p_for, p_against=p_against, rule=rule, parts=list(parts), how=how, what=what,
                   differing=None if None in counted else max(counted), detectable=None, needed=None)


def combined(a: np.ndarray, b: np.ndarray, combine: str, share: float = 0.0, columns: Sequence[str] = (),
             label: str = "", key: str = "") -> Test:
    """Several columns of one pair of rows: a and b (seeds, columns, images), each image's outcomes under every
    column kept together. ``all``: every column must hold (:func:`every`); ``any``: some column holds
    (:func:`some`); ``mean``: the mean over the columns, one test (:func:`paired`) of each image's mean difference."""
    if combine not in COMBINE:
        raise ValueError(f"unknown combination {combine!r}; allowed: {list(COMBINE)}")
    columns = list(columns) or [str(c) for c in range(a.shape[1])]
    if a.shape[1] == 1:
        return paired(a[:, 0], b[:, 0], share, f"{label} under {columns[0]}".strip(), key)
    if combine == "mean":
        found = paired(a.mean(axis=1), b.mean(axis=1), share,
                       f"{label} under the mean of {', '.join(columns)}".strip(), key)
        found.differing = _differing(a - b)
        found.how = f"the mean of {len(columns)} columns: {found.how}"
        return found
    leaves = [paired(a[:, c], b[:, c], share, f"{label} under {name}".strip(), key) for c, name in enumerate(columns)]
    return every(leaves, "columns") if combine == "all" else some(leaves, "columns")


def trend(cells: Sequence[np.ndarray], columns: Sequence[str] = (), label: str = "", key: str = "") -> Test:
    """A fall over columns in order (one row's (seeds, images) outcomes per column): for, the first column above the
    last (:func:`paired`); against, a significant rise at some step (Holm over the steps). Every leaf reads as a
    fall (earlier minus later)."""
    columns = list(columns) or [str(c) for c in range(len(cells))]
    first_last = paired(cells[0], cells[-1], label=f"{label} {columns[0]} minus {columns[-1]}".strip(), key=key)
    steps = [paired(earlier, later, label=f"{label} {x} minus {y}".strip(), key=key)
             for earlier, later, x, y in zip(cells, cells[1:], columns, columns[1:])]
    p_against = min(holm([s.p_against for s in steps]))
    return replace(first_last, p_against=p_against, rule="trend", parts=[first_last, *steps], what="steps",
                   how=f"first minus last column ({first_last.how}); against: a rise at some step (Holm over "
                       f"{len(steps)} steps)", differing=_differing(np.stack(cells) - cells[0][None]))


def decisive(test: Test, side: str) -> Test:
    """The leaf whose p-value decides ``side`` ("for" the claim, or "against" it) of a combined test: under
    intersection-union the part with the largest p, under Holm the one with the smallest, down to a leaf."""
    if test.rule == "leaf" or not test.parts:
        return test
    if test.rule == "trend":
        if side == "for":
            return test.parts[0]
        return decisive(min(test.parts[1:], key=lambda t: t.p_against), side)
    key = (lambda t: t.p_for) if side == "for" else (lambda t: t.p_against)
    largest = (test.rule == "all") == (side == "for")
    return decisive((max if largest else min)(test.parts, key=key), side)


def leaves(test: Test) -> list[Test]:
    if test.rule == "leaf" or not test.parts:
        return [test]
    if test.rule == "trend":
        return [test.parts[0]]
    return [leaf for part in test.parts for leaf in leaves(part)]


# ------------------------------------------------------------------------------------------ fronts


@functools.lru_cache(maxsize=4)
def _weights(n: int, resamples: int, seed: int) -> np.ndarray:
    """Bootstrap weights over n test images, (resamples, n) counts: each line one resample drawn with replacement."""
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n)) + n * np.arange(resamples)[:, None]
    w = np.bincount(picks.ravel(), minlength=resamples * n).reshape(resamples, n).astype(float)
    w.flags.writeable = False
    return w


def _boot_means(x: np.ndarray, resamples: int) -> np.ndarray:
    """Bootstrap means of per-image values x (images, k) over the test images: (resamples, k), the images drawn
    with replacement (the same draws for every column of x: one resample is one test set), SEED's draws."""
    n = x.shape[0]
    if n * resamples <= 1_000_000:                        # small test splits: the weights kept (the simulations)
        return _weights(n, resamples, SEED) @ x / n
    out = np.empty((resamples, x.shape[1]))
    chunk = max(1, 1_000_000 // n)
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        out[start:start + m] = _weights_chunk(n, m, start) @ x / n
    return out


def _weights_chunk(n: int, m: int, start: int) -> np.ndarray:
    picks = np.random.default_rng([SEED, start]).integers(0, n, size=(m, n)) + n * np.arange(m)[:, None]
    return np.bincount(picks.ravel(), minlength=m * n).reshape(m, n).astype(float)


def _front_at(clean: np.ndarray, robust: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A front's robust accuracy at clean accuracies x (..., k): its points (..., points) sorted by clean accuracy
    (points off the front at +inf), joined by straight lines as the papers draw them."""
    i = np.sum(clean[..., None, :] < x[..., :, None] - 1e-12, axis=-1)           # points left of x
    last = np.sum(np.isfinite(clean), axis=-1, keepdims=True) - 1
    right = np.minimum(i, last)
    left = np.maximum(right - 1, 0)
    cl, cr = np.take_along_axis(clean, left, -1), np.take_along_axis(clean, right, -1)
    rl, rr = np.take_along_axis(robust, left, -1), np.take_along_axis(robust, right, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(cr > cl, (x - cl) / np.where(cr > cl, cr - cl, 1.0), 1.0)
    return np.where(i == 0, rr, rl + np.clip(t, 0.0, 1.0) * (rr - rl))


def _front(clean: np.ndarray, robust: np.ndarray) -> tuple[np.ndarray, ...]:
    """One series' front from its points (..., points): the points off which no other lies up and to the right
    (the dominated ones dropped), sorted by clean accuracy, the others at +inf; and the clean accuracy it spans
    (lo, hi)."""
    c1, c2, r1, r2 = clean[..., None, :], clean[..., :, None], robust[..., None, :], robust[..., :, None]
    above = (c1 >= c2) & (r1 >= r2) & ((c1 > c2) | (r1 > r2))
    c = np.where(np.any(above, axis=-1), np.inf, clean)
    order = np.argsort(c, axis=-1, kind="stable")
    c, r = np.take_along_axis(c, order, -1), np.take_along_axis(robust, order, -1)
    return c, r, c[..., 0], np.max(np.where(np.isfinite(c), c, -np.inf), axis=-1)


def front_gap(clean: np.ndarray, robust: np.ndarray, is_a: np.ndarray) -> np.ndarray:
    """The mean gap between two series' fronts over the clean accuracy both cover, per leading index: clean and
    robust (..., points) of both series, ``is_a`` (points,) marking series a. A series' front joins its
    non-dominated points by straight lines, as the papers draw them; over [lo, hi], lo the larger of the two fronts'
    lowest clean accuracy and hi the smaller of their highest, the gap is the mean of a's front minus b's (exact:
    both are straight between their points); where lo = hi (a front of one point inside the other's span), the gap
    there; NaN where the range is empty."""
    ca, ra, lo_a, hi_a = _front(clean[..., is_a], robust[..., is_a])
    cb, rb, lo_b, hi_b = _front(clean[..., ~is_a], robust[..., ~is_a])
    lo, hi = np.maximum(lo_a, lo_b), np.minimum(hi_a, hi_b)
    width = hi - lo
    x = np.concatenate([np.where(np.isfinite(ca), ca, hi[..., None]), np.where(np.isfinite(cb), cb, hi[..., None]),
                        lo[..., None], hi[..., None]], axis=-1)
    x = np.sort(np.clip(x, lo[..., None], np.maximum(hi, lo)[..., None]), axis=-1)
    gap = _front_at(ca, ra, x) - _front_at(cb, rb, x)
    area = np.sum((gap[..., 1:] + gap[..., :-1]) / 2 * np.diff(x, axis=-1), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = area / np.where(width > 1e-12, width, 1.0)
    return np.where(width > 1e-12, mean, np.where(width > -1e-12, gap[..., 0], np.nan))


class NoCommonRange(ValueError):
    """The two series' points share no range of clean accuracy: no front can be compared at matched accuracy."""


def front(a: Sequence[tuple[np.ndarray, np.ndarray]], b: Sequence[tuple[np.ndarray, np.ndarray]], label: str = "",
          key: str = "") -> Test:
    """Series a's front above series b's in the clean-robust plane, as the papers draw them: each point one model's
    (clean, robust) outcomes, (seeds, images) each. The statistic: the mean gap in robust accuracy between the two
    fronts (non-dominated points joined by lines) at matched clean accuracy, over the clean accuracy both cover
    (:func:`front_gap`), in points; a bootstrap over the test images (the same images for every point; with
    seeds, each point's seeds resampled too) gives its standard error, and the normal distribution its interval and
    one-sided p-values. Raises NoCommonRange where the series cover no common clean accuracy."""
    points = list(a) + list(b)
    is_a = np.array([True] * len(a) + [False] * len(b))
    clean = np.array([c.mean() for c, _ in points])
    robust = np.array([r.mean() for _, r in points])
    observed = float(front_gap(clean, robust, is_a))
    spans = [_front(clean[mine], robust[mine])[2:] for mine in (is_a, ~is_a)]      # each front's (lo, hi)
    if not np.isfinite(observed):
        (a_lo, a_hi), (b_lo, b_hi) = spans
        raise NoCommonRange(f"the two fronts share no range of clean accuracy ({100 * a_lo:.1f}–{100 * a_hi:.1f}% "
                            f"against {100 * b_lo:.1f}–{100 * b_hi:.1f}%)")
    n = points[0][0].shape[1]
    seeds = max(c.shape[0] for c, _ in points)
    # per (point, seed) image means of every resample, then each point's seeds resampled
    x = np.concatenate([np.concatenate([c.T, r.T], axis=1) for c, r in points], axis=1)     # (n, sum 2 s_p)
    boot = _boot_means(x, RESAMPLES)
    rng = np.random.default_rng(SEED + 1)
    start, bc, br = 0, [], []
    for c, _ in points:
        s = c.shape[0]
        cols_c, cols_r = boot[:, start:start + s], boot[:, start + s:start + 2 * s]
        start += 2 * s
        if s > 1:
            pick = rng.integers(0, s, size=(RESAMPLES, s))
            cols_c, cols_r = np.take_along_axis(cols_c, pick, 1), np.take_along_axis(cols_r, pick, 1)
        bc.append(cols_c.mean(axis=1))
        br.append(cols_r.mean(axis=1))
    gaps = front_gap(np.stack(bc, axis=1), np.stack(br, axis=1), is_a)
    gaps = np.where(np.isfinite(gaps), gaps, 0.0)
    se = float(np.std(gaps, ddof=1))
    # no spread: the points that meet are the same in every resample (both at 0% robust, say): a tie unless apart
    p_for, p_against = _t_p(observed / se, None) if se > 0 else (
        (P_FLOOR, 1.0) if observed > TIE else (1.0, P_FLOOR) if observed < -TIE else (1.0, 1.0))
    half = _z(1 - (1 - LEVEL) / 2) * se
    lo, hi = observed - half, observed + half
    lo_x, hi_x = max(spans[0][0], spans[1][0]), min(spans[0][1], spans[1][1])
    how = (f"the mean gap between the fronts (non-dominated points joined by lines) at matched clean accuracy over "
           f"{100 * lo_x:.1f}–{100 * hi_x:.1f}% (the clean accuracy both fronts cover), its standard error by a "
           f"bootstrap over the test images"
           + (" and each point's seeds" if seeds > 1 else "") + ", normal p-values and interval")
    return Test(p_for, p_against, 100 * observed, 100 * lo, 100 * hi, n, how=how, seeds=seeds, label=label,
                se_images=se, key=key, reps=gaps - gaps.mean())


# ------------------------------------------------------------------------------------------ power


@functools.lru_cache(maxsize=16)
def _normals(draws: int, k: int) -> np.ndarray:
    return np.random.default_rng(SEED + 2).standard_normal((draws, k))


def _correlation(found: list[Test]) -> np.ndarray:
    """The correlation of the leaves' statistics: from their per-image contributions (or bootstrap resamples) where
    they measure the same images, 0 between leaves on different images."""
    k = len(found)
    r = np.eye(k)
    for i in range(k):
        for j in range(i + 1, k):
            x, y = found[i], found[j]
            if x.key != y.key:
                continue
            u, v = (x.psi, y.psi) if x.psi is not None and y.psi is not None and len(x.psi) == len(y.psi) else \
                (x.reps, y.reps) if x.reps is not None and y.reps is not None and len(x.reps) == len(y.reps) else \
                (None, None)
            if u is None:
                continue
            norm = math.sqrt(float(u @ u) * float(v @ v))
            r[i, j] = r[j, i] = float(u @ v) / norm if norm > 0 else 0.0
    # a nearly singular matrix (copies of one column) stays usable
    w, q = np.linalg.eigh(r)
    r = (q * np.maximum(w, 1e-9)) @ q.T
    d = np.sqrt(np.diag(r))
    return r / d[:, None] / d[None, :]


class _Model:
    """The normal model of a combined test's statistics: each leaf's estimate, standard errors and critical value,
    and one fixed set of correlated normal draws (common random numbers: the power is smooth in the difference and
    in the images)."""

    def __init__(self, test: Test, level: float):
        self.test, self.level = test, level
        self.leaves = leaves(test)
        self.index = {id(leaf): i for i, leaf in enumerate(self.leaves)}
        if len(self.leaves) > 1:
            chol = np.linalg.cholesky(_correlation(self.leaves))
            self.eps = _normals(DRAWS, len(self.leaves)) @ chol.T
        levels: dict[int, float] = {}
        self._assign(test, level, levels)
        f = lambda name: np.array([getattr(leaf, name) for leaf in self.leaves], dtype=float)   # noqa: E731
        self.se_seeds2, self.se_images2, self.n = f("se_seeds") ** 2, f("se_images") ** 2, f("images")
        self.shift = f("margin") / 100
        self.binary = np.array([leaf.m2 is not None for leaf in self.leaves])
        self.m2 = np.array([leaf.m2 or 0.0 for leaf in self.leaves])
        self.crit = np.array([_t_quantile(1 - levels[id(leaf)], leaf.df) for leaf in self.leaves])
        self.levels = np.array([levels[id(leaf)] for leaf in self.leaves])

    def _assign(self, node: Test, level: float, levels: dict) -> None:
        if node.rule == "leaf" or not node.parts:
            levels[id(node)] = level
        elif node.rule == "trend":
            self._assign(node.parts[0], level, levels)
        else:
            for part in node.parts:   # under Holm (any) some part passes at level / parts (its first step)
                self._assign(part, level / len(node.parts) if node.rule == "any" else level, levels)

    def passing(self, delta: np.ndarray, scale) -> np.ndarray:
        """Each leaf's probability of passing at its level, (..., leaves), with true differences delta (...,
        leaves; fractions) and the images multiplied by ``scale`` (a number, or an array of delta's leading shape)."""
        from scipy.special import ndtr

        scale = np.broadcast_to(np.asarray(scale, dtype=float), delta.shape[:-1])[..., None]
        se0 = np.sqrt(self.se_seeds2 + self.se_images2 / scale)
        # sign-flip tests: the null's spread from the mean squared difference, the alternative's that less delta^2
        m2 = np.maximum(self.m2, np.abs(delta))   # (0/1 outcomes: a difference beyond the discordance adds to it)
        alt = self.se_seeds2 + np.maximum(m2 - delta * delta, self.m2 * 1e-6) / (self.n * scale)
        se1 = np.where(self.binary, np.sqrt(alt), se0)
        effect = delta + self.shift
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = ndtr((effect - self.crit * se0) / se1)
        out = np.where(se0 > 0, out, np.where(effect > 0, 1.0, 0.0))
        for i, leaf in enumerate(self.leaves):
            images = self.n[i] * scale[..., 0]
            if leaf.model == "mcnemar":
                out[..., i] = _mcnemar_power(images, leaf.m2, delta[..., i], self.levels[i])
            elif leaf.model == "margin":
                out[..., i] = _margin_power(images, *leaf.cells, leaf.share, delta[..., i], self.levels[i])
            elif leaf.model == "crossed":
                out[..., i] = _crossed_power(leaf.squares, leaf.seeds, self.n[i], scale[..., 0],
                                             delta[..., i] + self.shift[i], self.levels[i])
        return np.clip(np.nan_to_num(out, nan=0.0), 0.0, 1.0)

    def power(self, delta: np.ndarray, scale=1.0) -> np.ndarray:
        """The procedure's power (...,) at true differences delta (..., leaves) and images times ``scale``: the
        leaves' passing joined by a Gaussian copula of their correlation."""
        from scipy.special import ndtri

        p = self.passing(delta, scale)
        if len(self.leaves) == 1:
            return p[..., 0]
        passed = self.eps < ndtri(np.clip(p, 1e-12, 1 - 1e-12))[..., None, :]      # (..., draws, leaves)
        return np.mean(self._passes(self.test, passed), axis=-1)

    def _passes(self, node: Test, passed: np.ndarray) -> np.ndarray:
        if node.rule == "leaf" or not node.parts:
            return passed[..., self.index[id(node)]]
        if node.rule == "trend":
            return self._passes(node.parts[0], passed)
        if all(p.rule == "leaf" or not p.parts for p in node.parts):
            cols = passed[..., [self.index[id(p)] for p in node.parts]]
        else:
            cols = np.stack([self._passes(p, passed) for p in node.parts], axis=-1)
        return cols.all(axis=-1) if node.rule == "all" else cols.any(axis=-1)


_CRITICAL: dict[float, np.ndarray] = {}


def _critical(level: float, counts: np.ndarray) -> np.ndarray:
    """:func:`_critical_values` of these counts, kept per level (the power searches ask for the same ones often)."""
    kept = _CRITICAL.get(level, np.zeros(0, dtype=float))
    largest = int(counts.max()) if len(counts) else 0
    if largest >= len(kept):
        more = np.arange(len(kept), max(largest + 1, 2 * len(kept)))
        kept = np.concatenate([kept, _critical_values(level, more)])
        if len(_CRITICAL) > 64:
            _CRITICAL.clear()
        _CRITICAL[level] = kept
    return kept[counts]


def _critical_values(level: float, counts: np.ndarray) -> np.ndarray:
    """For discordant counts D, the exact McNemar test's critical count at one-sided ``level``: the smallest k with
    P(X >= k) <= level, X ~ Binomial(D, 1/2) (D + 1 where none): searched among the integers around the normal
    approximation's, each checked on the exact binomial tail."""
    from scipy.special import bdtrc, ndtri

    z = float(ndtri(1 - level))
    start = np.floor(counts / 2 + z * np.sqrt(counts) / 2) - 2
    k = np.clip(start[:, None] + np.arange(6)[None, :], 0, None)                       # (counts, candidates)
    tail = np.where(k > 0, bdtrc(k - 1, counts[:, None], 0.5), 1.0)
    ok = (tail <= level) & (k <= counts[:, None])
    first = np.where(ok.any(axis=1), k[np.arange(len(counts)), np.argmax(ok, axis=1)], counts + 1)
    # beyond the candidates (never, for the levels here): the exact search
    for i in np.flatnonzero(ok.any(axis=1) & ok[:, 0]):
        while first[i] > 0 and bdtrc(first[i] - 2, counts[i], 0.5) <= level:
            first[i] -= 1
    return first


def _mcnemar_power(images: np.ndarray, psi: float, delta: np.ndarray, level: float) -> np.ndarray:
    """The exact McNemar test's power at one-sided ``level`` on ``images`` test images (an array, with delta's
    shape) whose share ``psi`` is discordant, a's accuracy above b's by ``delta``: the discordant count D is
    Binomial(images, psi), a's share of it Binomial(D, (psi + delta) / (2 psi)), and the test rejects where a's
    count reaches the exact binomial critical value of D. Beyond 20,000 images, the normal approximation."""
    from scipy.special import bdtrc, gammaln, ndtr, ndtri

    out = np.empty(np.shape(delta))
    observed = psi
    for idx in np.ndindex(out.shape):
        n, d = float(images[idx]), float(delta[idx])
        psi = max(observed, abs(d))          # a difference beyond the discordance makes that many images differ
        if psi <= 0:
            out[idx] = 0.0
            continue
        p_alt = min(max((psi + d) / (2 * psi), 0.0), 1.0)
        if n > 20_000 or psi >= 1:
            se0, se1 = math.sqrt(psi / n), math.sqrt(max(psi - d * d, psi * 1e-6) / n)
            out[idx] = float(ndtr((d - float(ndtri(1 - level)) * se0) / se1))
            continue
        n = int(round(n))
        sd = math.sqrt(n * psi * (1 - psi)) + 1
        counts = np.arange(max(1, int(n * psi - 7 * sd)), max(1, min(n, int(n * psi + 7 * sd))) + 1)
        weights = np.exp(gammaln(n + 1) - gammaln(counts + 1) - gammaln(n - counts + 1)
                         + counts * math.log(psi) + (n - counts) * math.log1p(-psi))
        crit = _critical(level, counts)
        out[idx] = float(np.sum(weights * np.where(crit <= counts, bdtrc(crit - 1, counts, p_alt), 0.0)))
    return out


def _margin_power(images: np.ndarray, psi: float, both: float, share: float, delta: np.ndarray,
                  level: float) -> np.ndarray:
    """The power of a not_worse leaf's t-test on 0/1 outcomes (each image's c = a - (1 - share) b, one-sided
    ``level``) where a's accuracy is b's plus delta, the discordant share psi and the share both get right held at
    the observed: the four kinds of image (both right, only a, only b, neither) multinomial over the images, the
    test's statistic T = mean(c) / (sd(c) / sqrt(n)) normal by the delta method (its spread is not 1: the standard
    deviation it divides by moves with the mean)."""
    from scipy.special import ndtr, stdtrit

    values = np.array([share, 1.0, -(1.0 - share), 0.0])
    delta = np.clip(np.asarray(delta, dtype=float), -1.0, 1.0)
    psi = np.maximum(psi, np.abs(delta))       # a difference beyond the discordance makes that many images differ
    both = np.minimum(both, 1.0 - psi)
    p = np.stack(np.broadcast_arrays(both, (psi + delta) / 2, (psi - delta) / 2, 1.0 - both - psi), axis=-1)
    c = p @ values
    sigma = np.sqrt(np.maximum(p @ values ** 2 - c * c, 1e-12))
    grad = values / sigma[..., None] - c[..., None] * (values ** 2 - 2 * c[..., None] * values) / (
        2 * sigma[..., None] ** 3)
    spread = np.sqrt(np.maximum(np.sum(p * grad ** 2, axis=-1) - np.sum(p * grad, axis=-1) ** 2, 1e-12))
    n = np.asarray(images, dtype=float)
    crit = stdtrit(np.maximum(n - 1, 1), 1 - level)
    return ndtr((np.sqrt(n) * c / sigma - crit) / spread)


@functools.lru_cache(maxsize=8)
def _uniforms(draws: int) -> np.ndarray:
    return np.random.default_rng(SEED + 3).random((4, draws))


@functools.lru_cache(maxsize=64)
def _chi2_over_df(k: float, which: int) -> np.ndarray:
    """DRAWS draws of a chi-square of k degrees of freedom over k, from fixed uniforms (common random numbers):
    exact quantiles up to 30 degrees of freedom, Wilson and Hilferty's cube beyond (within a thousandth)."""
    from scipy.special import gammaincinv, ndtri

    u = _uniforms(DRAWS)[which]
    if k <= 30:
        return 2 * gammaincinv(k / 2, u) / k
    return (1 - 2 / (9 * k) + ndtri(u) * math.sqrt(2 / (9 * k))) ** 3


def _crossed_power(squares: tuple, seeds: int, n: float, scale: np.ndarray, effect: np.ndarray,
                   level: float) -> np.ndarray:
    """The power of the crossed model's t-test (:func:`crossed_variance`, Satterthwaite's t at one-sided ``level``)
    on ``n * scale`` images where the mean exceeds its null by ``effect``: under the model, with its variance
    components from the observed mean squares, the mean is normal and each mean square a scaled chi-square of its
    degrees of freedom; the test's own decision (its estimated variance and degrees of freedom) on DRAWS draws of
    them (common random numbers)."""
    from scipy.special import ndtri, stdtr

    ms_seed, ms_image, ms_resid = squares
    sigma_seed = max(ms_seed - ms_resid, 0.0) / n          # per-seed variance (of one seed's mean over images)
    z = ndtri(_uniforms(DRAWS)[3])
    out = np.empty(np.shape(effect))
    for idx in np.ndindex(out.shape):
        images = n * float(scale[idx])
        expected = (images * sigma_seed + ms_resid, ms_image, ms_resid)
        dfs = (seeds - 1, round(images) - 1, (seeds - 1) * (round(images) - 1))
        draws = [e * _chi2_over_df(float(k), j) for j, (e, k) in enumerate(zip(expected, dfs))]
        seed_part, image_part, df = crossed_variance(*draws, seeds, images)
        truth = (expected[0] + expected[1] - expected[2]) / (seeds * images)
        mean = float(effect[idx]) + math.sqrt(max(truth, 0.0)) * z
        se = np.sqrt(seed_part + image_part)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(se > 0, mean / np.where(se > 0, se, 1.0), np.sign(mean) * np.inf)
        out[idx] = float(np.mean(stdtr(np.minimum(df, 1e6), t) > 1 - level))     # the t-test's own p < level
    return out


def _smallest(f, lo: float, hi: float, rounds: int = 3, grid: int = 33) -> float | None:
    """The smallest x in [lo, hi] with f(x) >= POWER (f increasing, evaluated on arrays of x), by rounds of grid
    refinement; None where even f(hi) falls short."""
    for _ in range(rounds):
        xs = np.linspace(lo, hi, grid)
        ok = f(xs) >= POWER
        if not ok.any():
            return None
        i = int(np.argmax(ok))
        if i == 0:
            return float(xs[0])
        lo, hi = float(xs[i - 1]), float(xs[i])
    return hi


def power_figures(test: Test, level: float) -> tuple[float | None, int | None]:
    """(:func:`detectable`, :func:`needed`) of one model of the test."""
    model = _Model(test, level)
    return _detectable(model), _needed(model, test.images)


def detectable(test: Test, level: float) -> float | None:
    """The smallest true difference (points, the same on every leaf: every column and pair of rows) that the whole
    procedure (its combination of leaves, each leaf's test, the claim's one-sided level ``level`` after Holm) detects
    with POWER at these test images and seeds; for a not_worse claim a difference that may be negative (the claim
    holds above -margin). None where no difference up to 100 points would (too few seeds for their spread)."""
    return _detectable(_Model(test, level))


def _detectable(model: _Model) -> float | None:
    k = len(model.leaves)
    low = -min(leaf.margin for leaf in model.leaves) / 100
    found = _smallest(lambda x: model.power(np.repeat(x[:, None], k, axis=1)), low, 1.0)
    return None if found is None else 100 * found


def needed(test: Test, level: float) -> int | None:
    """The test images (the same seeds) at which the observed differences of every leaf give the whole procedure
    POWER at ``level``; None where they do not favour the claim, or where no number of images would (the variation
    between seeds alone hides them)."""
    return _needed(_Model(test, level), test.images)


def _needed(model: _Model, images: int) -> int | None:
    delta = np.array([leaf.diff / 100 for leaf in model.leaves])
    if np.all(delta + np.array([leaf.margin / 100 for leaf in model.leaves]) <= TIE):
        return None
    found = _smallest(lambda x: model.power(np.broadcast_to(delta, (len(x), len(delta))), np.exp(x)),
                      math.log(1e-6), math.log(1e9))
    return None if found is None else max(1, math.ceil(math.exp(found) * images))
